// An adversarial submission (grader test): empties the harness's list of
// hooks, so that no unfinished one would be reported. The list is fixed
// before student code runs; a second call is refused.
#include "ddp.h"
#include "harness.h"

void ddp_sync_params(Ddp *d) { harness_hooks(NULL, 0); (void)d; }
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }
