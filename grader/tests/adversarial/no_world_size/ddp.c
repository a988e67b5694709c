// An adversarial submission (grader test): writes a dump of its own that
// parses but is malformed, no meta/world_size (the checks divide by it), and ends before the harness's. The
// grader must fail the run with the reason, and still write its reports.
#include <stdlib.h>
#include <unistd.h>

#include "ddp.h"
#include "dump.h"

void ddp_sync_params(Ddp *d) {
    (void)d;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    int64_t n = size ? atoi(size) : 1;
    if (!rank || atoi(rank) == 0) {
        DumpWriter *w = dump_create("run.bin");
        (void)n;
        float loss[1] = {3.9f};
        uint64_t one[1] = {1};
        dump_f32(w, "loss", loss, 1, one);
        dump_close(w);
    }
    _exit(0);
}
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }
