// figure.h: grouped bar charts and point charts as SVG, for the labs'
// --figure files (lab04's bytes and parameters per t, lab06's activations
// per layer, and its memory against time per recomputation mode). A bar
// chart draws one bar per series in each group, labelled with its value,
// and can mark one measured figure beside the bar it belongs to; a point
// chart places labelled points on two axes from 0.
#pragma once

#include <stdio.h>

enum { FIG_MAX_SERIES = 4 };

typedef struct {
    const char *label;                // under the group: "t = 2"
    double values[FIG_MAX_SERIES];    // one per series; < 0: no bar
} FigGroup;

typedef struct {
    int group, series;   // the bar it belongs to (-1: none)
    double value;
    const char *label;   // "this run, measured"
} FigMark;

// Open path for an SVG of W x H pixels with a title line (the run that made
// it); every figure says what made it.
FILE *fig_open(const char *path, int W, int H, const char *title);
// One chart in the box (x0, y0) w x h: its title, the series' names and
// colours, the groups' bars on a common scale from 0 (bytes, printed with
// core_fmt_bytes), and the mark.
void fig_bars(FILE *f, double x0, double y0, double w, double h, const char *title, const char *const *series,
              int nseries, const FigGroup *groups, int ngroups, const FigMark *mark);
void fig_close(FILE *f, const char *path);

// A point of a point chart: x in the x axis's unit, y in bytes.
typedef struct {
    double x, y;
    int series;          // its colour and legend entry; series 0 is drawn as dots, the others as squares
    const char *label;   // written beside it ("full")
} FigPoint;
// One point chart in the box (x0, y0) w x h: its title, the series' names
// and colours, axes from 0 to a little past the largest x and y (x_label
// names the x axis and its unit; y is bytes, printed with core_fmt_bytes),
// and the points.
void fig_points(FILE *f, double x0, double y0, double w, double h, const char *title, const char *x_label,
                const char *const *series, int nseries, const FigPoint *points, int npoints);
