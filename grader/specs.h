// specs.h: what the labs' specs (spec_labNN.c) share: the flags of the
// reference run that matches a lab run, and the check that every TODO is
// written.
#pragma once

#include <stddef.h>

#include "lab.h"
#include "results.h"

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len);

// The student's hooks that still call lab_todo ("check/unfinished/<name>").
void check_hooks_written(Grader *g, const Run *run);
