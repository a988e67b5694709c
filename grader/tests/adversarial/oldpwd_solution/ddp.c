// An adversarial submission (grader test): before main, it looks through
// its environment for a way back to the trusted tree (bash exports OLDPWD,
// the directory the grader ran `cd` from) and execs the solution's binary
// there. The runs' environment is made by the grader, not inherited, so
// there is none, and the unwritten hooks show.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ddp.h"

void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

extern char **environ;

__attribute__((constructor)) static void back_to_the_tree(int argc, char **argv) {
    (void)argc;
    // Every variable whose value is a directory: is the solution there?
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq[1] != '/') continue;
        char path[PATH_MAX];
        for (const char *up = "", *const *u = (const char *const[]){"", "/..", "/../..", NULL}; *u; u++) {
            (void)up;
            snprintf(path, sizeof path, "%s%s/build/lab02_solution", eq + 1, *u);
            if (access(path, X_OK) == 0) execv(path, argv);
        }
    }
}
