// schedule_given.h: a replayed schedule drawn (given: harness code).
#pragma once

#include "pp_schedule.h"

// The replayed events (start and end set) as the lectures draw them: a row
// per stage, on rank 0.
void pp_draw_ascii(int p, PpEvent **ev, const int *n, double makespan);
// Both replays, equal stages and measured durations, as an SVG file; the
// second panel titled measured_label (where and how they were measured).
void pp_draw_svg(const char *path, int p, PpEvent **ideal, PpEvent **measured, const int *n, double ideal_span,
                 double measured_span, const char *caption, const char *measured_label);
