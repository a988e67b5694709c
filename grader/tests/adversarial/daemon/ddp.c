// An adversarial submission (grader test): rank 0 leaves a daemon behind
// (setsid, its own session) that holds the output open forever. The grader
// must end it with the run and say why the run did not end.
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "ddp.h"

// The hooks, unwritten: what the student was asked to do is not done, and
// the grader must say so whatever the rest of this file tries.
void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void leave_a_daemon(void) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank || atoi(rank) != 0 || fork() != 0) return;
    setsid();
    if (fork() != 0) _exit(0);
    prctl(PR_SET_NAME, "pl-adversary");
    for (;;) sleep(1);
}
