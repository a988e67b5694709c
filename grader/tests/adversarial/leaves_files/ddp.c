// An adversarial submission (grader test): it leaves files in /tmp,
// /var/tmp, /dev/shm and /run/lock, and a System V shared-memory segment,
// where the next grading (or one beside it) would find them. Each run has
// its own fresh /tmp, /var/tmp, /dev/shm and /run/lock and an IPC namespace
// of its own, gone with it; the unwritten hooks show. (A constructor runs
// before the harness closes the sandbox: the namespaces must hold.)
#include <stdio.h>
#include <sys/shm.h>
#include "ddp.h"

void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void leave_files(void) {
    const char *const where[] = {"/tmp/pl-adversary-left", "/var/tmp/pl-adversary-left", "/dev/shm/pl-adversary-left",
                                 "/run/lock/pl-adversary-left"};
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(where[i], "w");
        if (f) fputs("left by a submission\n", f), fclose(f);
    }
    shmget(0x504c4146, 4096, IPC_CREAT | 0666);   // "PLAF"
}
