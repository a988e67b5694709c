// reading.h: what a lab's dump says, read the way every check reads it: one
// number, a sum of squares, a number of the run's configuration, the parameters counted, and
// whether an array is of the kind and shape the checks expect.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"

// The first element of array `name` (numbers, not empty), or `missing`.
double dump_scalar(const DumpFile *f, const char *name, double missing);

// The sum of the squares of an array's numbers.
double dump_sumsq(const DumpArray *a);

// A number of the run's configuration (the dump's meta/config: "batch",
// "seq", "dim", ...), or `missing`.
double config_value(const DumpFile *d, const char *key, double missing);
// Whether meta/config has the line "key value" ("precision bf16").
bool config_is(const DumpFile *d, const char *key, const char *value);

// Parameters in a dump (the sum of the param/final/ tensors' sizes).
double count_params(const DumpFile *f);

// Whether array `name` of a dump is of `kind`, with `ndim` dimensions (-1:
// any) and, where shape[k] is not 0, that size in dimension k; numbers must
// not be empty. NULL when it is (or it is absent and not `required`), else
// the reason, in `why`: "the dump's loss is text, not numbers".
typedef enum { DUMP_KIND_NUMBERS, DUMP_KIND_TEXT } DumpKind;
const char *dump_expect(const DumpFile *d, const char *name, DumpKind kind, int ndim, const uint64_t *shape,
                        bool required, char *why, size_t len);
