// An adversarial submission (grader test): before main, it replaces itself
// with the solution's binary beside it, if the grading copy has one. The
// copy must hold nothing of the solutions, so the unwritten hooks show.
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include "ddp.h"

// The hooks, unwritten: what the student was asked to do is not done, and
// the grader must say so whatever the rest of this file tries.
void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void become_the_solution(int argc, char **argv) {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 16);
    (void)argc;
    if (n <= 0) return;
    strcpy(path + n, "_solution");
    if (access(path, X_OK) == 0) execv(path, argv);
}
