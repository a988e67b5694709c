// An adversarial submission (grader test): it reads its run's HOME and
// TMPDIR (getenv is allowed) for what they may say of the run: a directory
// named after the lab's run ("np2-bucketed") whose last digit told a hidden
// run ("-1") from a listed one ("-0"). Code that can tell could do the work
// only where it is checked, or answer the listed runs from a table. Here it
// aborts in any run it can place, and otherwise leaves the hooks unwritten:
// graded with a hidden seed, every run, hidden or not, must fail the same
// way, as unwritten, and none by the abort.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddp.h"

void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

// Whether the directory's name says something of the run.
static bool names_the_run(const char *dir) {
    if (!dir) return false;
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    size_t n = strlen(base);
    return strstr(base, "np") || strstr(base, "lab0") || strstr(base, "hidden") || strstr(base, "visible") ||
           (n >= 2 && base[n - 2] == '-' && (base[n - 1] == '0' || base[n - 1] == '1'));
}

__attribute__((constructor)) static void place_the_run(void) {
    const char *home = getenv("HOME"), *tmp = getenv("TMPDIR");
    if (names_the_run(home) || names_the_run(tmp)) {
        fprintf(stderr, "this run's directory names it (HOME %s, TMPDIR %s)\n", home ? home : "-", tmp ? tmp : "-");
        abort();
    }
}
