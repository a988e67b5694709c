// schedule_given.h: a replayed schedule drawn (given: harness code).
#pragma once

#include <stdio.h>

#include "pp_schedule.h"

// The replayed events (start and end set) as the lectures draw them: a row
// per stage, on rank 0.
void pp_draw_ascii(int p, PpEvent **ev, const int *n, double makespan);
// Both replays, equal stages and measured durations, as an SVG file; the
// second panel titled measured_label (where and how they were measured).
void pp_draw_svg(const char *path, int p, PpEvent **ideal, PpEvent **measured, const int *n, double ideal_span,
                 double measured_span, const char *caption, const char *measured_label);

// The parts of pp_draw_svg's figure, for a figure of several replays
// (tools/ppfigure.c). Their time axis is 860 pixels from x = 70 (of a figure
// 950 wide) and lasts span (a replay's own makespan; several replays on one
// axis: the longest of them); a replay of makespan < span ends before it.
// A part is p rows 34 pixels apart from y0, its title 8 above.
// A panel: a row per stage, a box per event, its label inside.
void pp_svg_panel(FILE *f, int p, PpEvent **ev, const int *n, double makespan, double span, double y0,
                  const char *title);
// The most micro-batches alive at once on any stage (each from its forward
// pass to the end of its backward), at least 1.
int pp_alive_most(int p, PpEvent *const *ev, const int *n);
// A strip per stage, its height the micro-batches alive over the replay
// (a chunk's each, interleaved), `most` of them the row's height (several
// replays: the most of all, so that the strips compare; an interleaved
// replay's times v, its chunks' activations 1/v of a stage's); each stage's
// peak written at the axis's end.
void pp_svg_alive(FILE *f, int p, PpEvent **ev, const int *n, double makespan, double span, double most,
                  double y0, const char *title);
