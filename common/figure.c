// figure.c: grouped bar charts and point charts as SVG (figure.h).
#include "figure.h"

#include <math.h>

#include "core.h"

static const char *const COLOURS[FIG_MAX_SERIES] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};

FILE *fig_open(const char *path, int W, int H, const char *title) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write the figure to %s", path);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<text x=\"8\" y=\"20\" font-size=\"14\">%s</text>\n", W, H, title);
    return f;
}

void fig_bars(FILE *f, double x0, double y0, double w, double h, const char *title, const char *const *series,
              int nseries, const FigGroup *groups, int ngroups, const FigMark *mark) {
    double top = mark && mark->group >= 0 ? mark->value : 0;
    for (int g = 0; g < ngroups; g++)
        for (int s = 0; s < nseries; s++) top = fmax(top, groups[g].values[s]);
    if (!(top > 0)) top = 1;
    const double plot_top = y0 + 40, base = y0 + h - 30, tall = base - plot_top;
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"13\">%s</text>\n", x0, y0 + 14, title);
    for (int s = 0; s < nseries; s++)
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                x0 + 150.0 * s, y0 + 22, COLOURS[s], x0 + 150.0 * s + 14, y0 + 31, series[s]);
    double slot = w / (ngroups > 0 ? ngroups : 1), bar = fmin(60, 0.8 * slot / (nseries > 0 ? nseries : 1));
    for (int g = 0; g < ngroups; g++) {
        double gx = x0 + g * slot + (slot - bar * nseries) / 2;
        for (int s = 0; s < nseries; s++) {
            double v = groups[g].values[s];
            if (!(v >= 0)) continue;
            double bh = tall * v / top, x = gx + s * bar;
            char b[32];
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s: %s</title>"
                       "</rect>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s</text>\n",
                    x, base - bh, bar - 2, bh, COLOURS[s], series[s], core_fmt_bytes(v, b, sizeof b), x,
                    base - bh - 3, b);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%g\">%s</text>\n", x0 + g * slot + slot / 2 - 18, base + 16, groups[g].label);
        if (mark && mark->group == g && mark->series >= 0 && mark->series < nseries) {
            double x = gx + mark->series * bar + bar / 2 - 1, y = base - tall * mark->value / top;
            char b[32];
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"black\"><title>%s: %s</title></circle>\n"
                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s %s</text>\n",
                    x, y, mark->label, core_fmt_bytes(mark->value, b, sizeof b), x + 8, y - 6, mark->label, b);
        }
    }
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", x0, base, x0 + w, base);
}

void fig_points(FILE *f, double x0, double y0, double w, double h, const char *title, const char *x_label,
                const char *const *series, int nseries, const FigPoint *points, int npoints) {
    double xmax = 0, ymax = 0;
    for (int i = 0; i < npoints; i++) xmax = fmax(xmax, points[i].x), ymax = fmax(ymax, points[i].y);
    xmax = xmax > 0 ? 1.15 * xmax : 1, ymax = ymax > 0 ? 1.15 * ymax : 1;
    // The series' names one under another (they are sentences), then the plot.
    const double left = x0 + 70, right = x0 + w - 120, top = y0 + 40 + 16.0 * nseries, base = y0 + h - 40;
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"13\">%s</text>\n", x0, y0 + 14, title);
    for (int s = 0; s < nseries; s++)
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%g\" y=\"%g\">%s</text>\n",
                x0, y0 + 22 + 16.0 * s, COLOURS[s % FIG_MAX_SERIES], x0 + 14, y0 + 31 + 16.0 * s, series[s]);
    // The axes, with five ticks each.
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", left, base, right, base);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", left, base, left, top);
    for (int k = 0; k <= 4; k++) {
        double fx = left + (right - left) * k / 4, fy = base - (base - top) * k / 4;
        char b[32];
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" font-size=\"10\">%.3g</text>\n", fx - 8, base + 14, xmax * k / 4);
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" font-size=\"10\">%s</text>\n", x0, fy + 3,
                core_fmt_bytes(ymax * k / 4, b, sizeof b));
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\">%s</text>\n", (left + right) / 2 - 60, base + 32, x_label);
    for (int i = 0; i < npoints; i++) {
        const FigPoint *p = &points[i];
        double px = left + (right - left) * p->x / xmax, py = base - (base - top) * p->y / ymax;
        const char *colour = COLOURS[p->series % FIG_MAX_SERIES];
        char b[32];
        core_fmt_bytes(p->y, b, sizeof b);
        if (p->series == 0)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>%s: %s, %.3g</title></circle>\n",
                    px, py, colour, p->label, b, p->x);
        else
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" fill=\"%s\"><title>%s: %s, %.3g</title>"
                       "</rect>\n", px - 4.5, py - 4.5, colour, p->label, b, p->x);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s %s</text>\n", px + 8, py + 4, p->label, b);
    }
}

void fig_close(FILE *f, const char *path) {
    fprintf(f, "</svg>\n");
    CHECK(fclose(f) == 0, "writing %s failed", path);
}
