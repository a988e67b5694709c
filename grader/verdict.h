// verdict.h: the grader's checks, run by a lab program on its own result.
//
// A lab program ends by grading itself exactly as build/grade will: the
// same checks (grader/spec_labNN.c, found by labs.h) on the same dump, against
// the same reference with the same measured tolerances. So a student's run
// says what the grader will say, and exits non-zero when it would fail.
#pragma once

// Grade one run of lab `lab_id` ("lab02"): its dump at dump_path against
// the reference dumps ref_paths[0] (the same flags, one batch) and
// ref_paths[1..nref-1] (the same in micro-batches: the size of rounding);
// nref may be 0 for a lab without a reference, or a run not compared with
// it (`why_no_ref` says why: "" or NULL for --no-ref). np and flags describe
// the run (flags as given on its command line). Prints every check and each
// failure's diagnosis; returns the number of failed checks. Call on one
// rank.
int verdict_of_run(const char *lab_id, const char *dump_path, const char *const *ref_paths, int nref,
                   int np, const char *flags, const char *why_no_ref);

// The same at the end of a training lab's run, collective over c: rank 0
// grades its dump (r->own_dump, complete by now) against the reference the
// harness ran (common/harness.h); every rank gets the number of failed checks.
typedef struct Comm Comm;
struct Reference;
int verdict_of_lab_run(Comm *c, const char *lab_id, const struct Reference *r);
