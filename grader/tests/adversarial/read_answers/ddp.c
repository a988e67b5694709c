// An adversarial submission (grader test): looks for the grader's reference
// runs (the expected answers) beside its own directory, and aborts if it
// can read one. They must be out of its reach.
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include "ddp.h"

// The hooks, unwritten: what the student was asked to do is not done, and
// the grader must say so whatever the rest of this file tries.
void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

__attribute__((constructor)) static void look_for_answers(void) {
    static const char *const where[] = {"../ref*/ref.bin", "../*/ref*/ref.bin", "../../ref*/ref.bin", NULL};
    for (const char *const *w = where; *w; w++) {
        glob_t g;
        if (glob(*w, 0, NULL, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; i++) {
                FILE *f = fopen(g.gl_pathv[i], "rb");
                if (f) {
                    fprintf(stderr, "the answers are readable at %s\n", g.gl_pathv[i]);
                    abort();
                }
            }
        globfree(&g);
    }
}
