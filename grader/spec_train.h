// spec_train.h: what the training labs' specs (lab02, lab03) share on top
// of checks.c: memory held against a formula, the tracked total and the heap
// included, with exact bytes when the figure and the bound round alike.
#pragma once

#include <stdbool.h>

#include "grade.h"

// What check_peak reads: a category's column of mem/peak (MEM_PARAMS ...),
// the peak of the tracked total, or the independent measure of the heap.
enum { PEAK_TOTAL = -2, PEAK_HEAP = -1 };

// The largest unit of a dump's model, in floats (from the param/final/
// tensor names, "block0.attn.wq": the unit is before the first dot).
double largest_unit_floats(const DumpFile *f);

// Every rank's peak of `source` at most `bound` bytes; `diagnosis` says why
// it is over when it is.
void check_peak(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                const char *diagnosis);

// The tracked category of the largest excess over `expected` (bytes per
// category, MEM_NCAT of them, a rank's peaks), written into buf as "3.47 MB
// more than the formula as COMM": for a total over its bound, where to look.
const char *excess_category(const Run *run, const double *expected, char *buf, size_t len);
