// An adversarial submission (grader test): an atexit handler rewrites the
// finished dump, marking every hook as written. The harness ends the
// process right after its dump and verdict, so the handler never runs.
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "ddp.h"

// The hooks, unwritten: what the student was asked to do is not done, and
// the grader must say so whatever the rest of this file tries.
void ddp_sync_params(Ddp *d) { lab_todo(__func__); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }

static void rewrite_dump(void) {
    DumpFile *f = dump_read("run.bin", NULL);
    if (!f) return;
    DumpWriter *w = dump_create("run.bin");
    for (int i = 0; i < f->count; i++) {
        DumpArray *a = &f->arrays[i];
        if (strncmp(a->name, "check/unfinished/", 17) == 0) ((int64_t *)a->data)[0] = 0;
        if (a->type == DUMP_TEXT) dump_text(w, a->name, a->data);
        else if (a->type == DUMP_F32) dump_f32(w, a->name, a->data, a->ndim, a->shape);
        else if (a->type == DUMP_F64) dump_f64(w, a->name, a->data, a->ndim, a->shape);
        else dump_i64(w, a->name, a->data, a->ndim, a->shape);
    }
    dump_close(w);
    dump_free(f);
}

__attribute__((constructor)) static void plan_the_rewrite(void) { atexit(rewrite_dump); }
