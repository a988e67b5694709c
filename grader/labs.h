// labs.h: the labs the grader knows, by id. A lab registers in labs.c and
// says in its own spec_labNN.c (spec_ref.c for build/ref) what it runs and
// checks.
#pragma once

#include "lab.h"

extern const LabSpec *const LABS[];
extern const int NLABS;

// The lab's spec by id ("lab02"), or NULL.
const LabSpec *lab_spec(const char *id);
