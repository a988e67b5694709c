// checks.h: the checks every lab shares: did the run end normally (and if
// not, how: a crash, a hang, a malformed dump), does it train like the
// reference, does it move the bytes its formula says.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lab.h"
#include "results.h"

// The run ended normally with a readable dump; otherwise one failing check
// that says how it ended (crash, hang with the watchdog's lines, no dump).
bool check_ran(Grader *g, const Run *run, bool nonzero_exit_is_failure);
// Losses, final parameters (and the first gradient when both dumps have it)
// against the reference, per tensor, with tolerances of TOL_FACTOR times
// the measured rounding (rounding.h). Its diagnoses speak the words of the
// run's lab and name the causes of its gradient factors (run->lab).
void check_equivalence(Grader *g, const Run *run, int world_size);
// Each rank's bus bytes (all operations, dump "comm/bus_bytes") against the
// lab's formula: between `least` (the fewest a legitimate variant moves;
// `expected` where there is none) and `expected`, 0.5% either way (each call
// rounds its bus bytes to a byte). Fewer bytes are another algorithm, not a
// saving; the diagnosis lists the rank's collectives. Returns the ratio.
double check_comm_volume(Grader *g, const Run *run, double expected, double least, const char *formula,
                         const char *diagnosis_if_more);
// (Memory per rank against a bound: check_peak, spec_train.h.)

// A sentence explaining the watchdog's lines in an output, or NULL.
const char *diagnose_hang(const char *output, char *buf, size_t len);
