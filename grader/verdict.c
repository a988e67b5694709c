// verdict.c: the verdict a lab program gives on itself (verdict.h): the
// grader's own checks of its run (labs.h, rounding.h, results.h), so that
// build/grade and the lab programs judge a run the same way.
#include "verdict.h"

#include <stdio.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "harness.h"
#include "lab.h"
#include "labs.h"
#include "results.h"
#include "rounding.h"

int verdict_of_run(const char *lab_id, const char *dump_path, const char *const *ref_paths, int nref,
                   int np, const char *flags, const char *why_no_ref) {
    const LabSpec *lab = lab_spec(lab_id);
    CHECK(lab, "verdict_of_run: no lab %s", lab_id);
    RunSpec spec = {"this run", np, flags ? flags : "", false, false};
    Run run;
    memset(&run, 0, sizeof run);
    run.spec = &spec;
    run.lab = lab;
    snprintf(run.name, sizeof run.name, "this run");
    run.output = "";
    run.dump = dump_read(dump_path, &run.dump_error);
    CHECK(run.dump, "cannot read this run's own dump %s back: %s", dump_path, run.dump_error);
    DumpFile *refs[8] = {0};
    Measured measured;
    memset(&measured, 0, sizeof measured);
    CHECK(nref <= 8, "verdict_of_run: at most 8 reference runs");
    for (int k = 0; k < nref; k++) {
        const char *err = NULL;
        refs[k] = dump_read(ref_paths[k], &err);
        CHECK(refs[k], "cannot read the reference's dump %s back: %s", ref_paths[k], err);
    }
    if (nref > 0) {
        measure_rounding(refs, nref, &measured);
        run.ref = refs[0];
        run.measured = &measured;
    }
    Grader g = {0};
    g.lab = lab->id;
    lab->check(&g, lab, &run);
    int failed = grader_failed(&g);
    printf("\nverdict: the grader's checks of this run (build/grade runs the same on its runs)\n");
    for (int i = 0; i < g.n; i++) {
        const Result *r = &g.results[i];
        printf("  %-4s  %-46s %s   (bound: %s)\n", r->pass ? "ok" : "FAIL", r->check, r->figure, r->bound);
    }
    for (int i = 0; i < g.n; i++) {
        const Result *r = &g.results[i];
        if (!r->pass && r->diagnosis[0]) printf("  %s:\n    %s\n", r->check, r->diagnosis);
    }
    if (nref == 0 && lab->ref_flags && why_no_ref && why_no_ref[0])
        printf("  (without the reference: %s)\n", why_no_ref);
    else if (nref == 0 && lab->ref_flags)
        printf("  (without the reference run, --no-ref: the training is not compared with single-device training)\n");
    printf("%d of %d checks passed: %s\n", g.n - failed, g.n, failed ? "the grader would FAIL this run" : "the grader would pass this run");
    fflush(stdout);
    grader_free(&g);
    if (nref > 0) measured_free(&measured);
    for (int k = 0; k < nref; k++) dump_free(refs[k]);
    dump_free(run.dump);
    return failed;
}

int verdict_of_lab_run(Comm *c, const char *lab_id, const Reference *r) {
    int failed = 0;
    if (comm_rank(c) == 0) {
        const char *refs[HARNESS_MAX_REFS];
        for (int k = 0; k < r->set.n; k++) refs[k] = r->set.paths[k];
        failed = verdict_of_run(lab_id, r->own_dump, refs, r->on ? r->set.n : 0, comm_size(c),
                                args_command_line(), r->why_off);
    }
    return (int)comm_max_double(c, (double)failed);
}
