// An adversarial submission (grader test): writes a file of 4 GiB (sparse,
// so the test costs no disk). The grader's file size limit must stop it.
#include <fcntl.h>
#include <unistd.h>
#include "ddp.h"

// The hooks, unwritten: what the student was asked to do is not done, and
// the grader must say so whatever the rest of this file tries.
void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void fill_the_disk(void) {
    int fd = open("big.bin", O_WRONLY | O_CREAT, 0600);
    if (fd < 0) return;
    if (pwrite(fd, "x", 1, (off_t)4 << 30) != 1) { /* stopped, as it should be */ }
    close(fd);
}
