// An adversarial submission (grader test): it leaves files in /tmp,
// /var/tmp and /dev/shm, where the next grading (or one beside it) would
// find them. Each run has its own fresh /tmp, /var/tmp and /dev/shm, gone
// with it; the unwritten hooks show.
#include <stdio.h>
#include "ddp.h"

void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void leave_files(void) {
    const char *const where[] = {"/tmp/pl-adversary-left", "/var/tmp/pl-adversary-left", "/dev/shm/pl-adversary-left"};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(where[i], "w");
        if (f) fputs("left by a submission\n", f), fclose(f);
    }
}
