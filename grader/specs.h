// specs.h: what the labs' specs (spec_labNN.c) share: the flags of the
// reference run that matches a lab run, and the check that every TODO is
// written.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lab.h"
#include "results.h"

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len);

// The student's hooks that still call lab_todo ("check/unfinished/<name>").
void check_hooks_written(Grader *g, const Run *run);
// Whether the run called a hook that still calls lab_todo (its dump says
// so): such a run is not compared with single-device training, whose
// reference would then be trained for nothing (its TODO check fails it).
bool run_called_unfinished(const Run *run);
