// schedule_given.c: the schedule drawn, in the terminal and as SVG (given;
// the student does not edit it).
#include "schedule_given.h"

#include <stdbool.h>
#include <stdio.h>

#include "core.h"

void pp_draw_ascii(int p, PpEvent **ev, const int *n, double makespan) {
    // One time unit (F takes 1, B 2, R 1 in the replay with equal stages) is
    // two characters: "F3" is micro-batch 3's forward pass, "B3B3" its
    // backward, "R3" its activations made again; on the split backward
    // "B3" its input gradient and "W3" its weight gradients, 1 each.
    // Interleaved (v chunks a stage), a unit is a chunk's forward, 1/v of a
    // stage's, and three characters: "F3a" on the stage's chunk a (its
    // first), "F3b" on chunk b.
    int v = pp_events_chunks(ev, n, p), cw = v > 1 ? 3 : 2;
    int width = (int)(makespan * v + 0.5);
    char row[3 * 1024 + 1];
    if (width > 1024) {
        print0("(the schedule is %d units long: too long to draw here)\n", width);
        return;
    }
    for (int s = 0; s < p; s++) {
        for (int x = 0; x < cw * width; x++) row[x] = '.';
        row[cw * width] = 0;
        for (int k = 0; k < n[s]; k++) {
            const PpEvent *e = &ev[s][k];
            for (int t = (int)(e->start * v + 0.5); t < (int)(e->end * v + 0.5) && t < width; t++) {
                row[cw * t] = pp_pass_letter(e->kind);
                row[cw * t + 1] = (char)('0' + e->mb % 10);
                if (v > 1) row[cw * t + 2] = (char)('a' + e->chunk % 26);
            }
        }
        print0("  stage %d |%s|\n", s, row);
    }
}

// A pass's colour: forward blue, backward orange (its input half, where
// split), recompute purple, weight gradients red.
static const char *colour(int kind) {
    return kind == PP_PASS_F ? "#4e79a7" : kind == PP_PASS_B ? "#f28e2b" : kind == PP_PASS_R ? "#b07aa1"
         : kind == PP_PASS_W ? "#e15759" : "#999999";
}

// Whether event k of a stage ends its micro-batch's backward pass: a W, or
// a B that is the whole backward (not split).
static bool ends_backward(const PpEvent *row, int n, int k) {
    return row[k].kind == PP_PASS_W || (row[k].kind == PP_PASS_B && !pp_split_b(row, n, k));
}

void pp_svg_panel(FILE *f, int p, PpEvent **ev, const int *n, double makespan, double span, double y0,
                  const char *title) {
    const double x0 = 70, w = 860, h = 28;
    int v = pp_events_chunks(ev, n, p);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"13\">%s</text>\n", x0, y0 - 8, title);
    for (int s = 0; s < p; s++) {
        double y = y0 + s * (h + 6);
        fprintf(f, "<text x=\"8\" y=\"%g\">stage %d</text>\n", y + h * 0.65, s);
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"#eeeeee\"/>\n", x0, y,
                w * (makespan / span), h);
        for (int k = 0; k < n[s]; k++) {
            const PpEvent *e = &ev[s][k];
            double a = x0 + w * e->start / span, b = x0 + w * e->end / span;
            // Interleaved: a chunk's index after the micro-batch's (F3a, F3b),
            // and every other chunk's passes a lighter shade.
            char chunk[8] = "", title[32] = "";
            if (v > 1) {
                snprintf(chunk, sizeof chunk, "%c", 'a' + e->chunk % 26);
                snprintf(title, sizeof title, ", chunk %c (%d)", 'a' + e->chunk % 26, e->chunk);
            }
            fprintf(f, "<rect x=\"%.1f\" y=\"%g\" width=\"%.1f\" height=\"%g\" fill=\"%s\" stroke=\"white\"%s>"
                       "<title>%s %d%s</title></rect>\n",
                    a, y, b - a, h, colour(e->kind), e->chunk % 2 ? " fill-opacity=\"0.55\"" : "",
                    pp_pass_name(e->kind), e->mb, title);
            if (b - a > 14 + 6 * (v > 1))
                fprintf(f, "<text x=\"%.1f\" y=\"%g\" fill=\"white\">%c%d%s</text>\n", a + 3, y + h * 0.65,
                        pp_pass_letter(e->kind), e->mb, chunk);
        }
    }
}

int pp_alive_most(int p, PpEvent *const *ev, const int *n) {
    int most = 1;
    for (int s = 0; s < p; s++) {
        int alive = 0;
        for (int k = 0; k < n[s]; k++) {
            alive += ev[s][k].kind == PP_PASS_F;
            most = alive > most ? alive : most;
            alive -= ends_backward(ev[s], n[s], k);
        }
    }
    return most;
}

// The micro-batches alive on each stage over the replayed time (equal
// stages): from a micro-batch's forward pass to the end of its backward
// pass (its W, where split), its activations wait. A strip per stage, its height the count: the
// memory point of 1F1B against GPipe, whose bubbles are alike.
void pp_svg_alive(FILE *f, int p, PpEvent **ev, const int *n, double makespan, double span, double most, double y0,
                  const char *title) {
    const double x0 = 70, w = 860, h = 28;
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"13\">%s</text>\n", x0, y0 - 8, title);
    for (int s = 0; s < p; s++) {
        double y = y0 + s * (h + 6);
        fprintf(f, "<text x=\"8\" y=\"%g\">stage %d</text>\n", y + h * 0.65, s);
        fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"#eeeeee\"/>\n", x0, y,
                w * (makespan / span), h);
        // Between consecutive events of the stage the count is constant: it
        // rises at a forward's start and falls at a backward's end.
        int alive = 0, peak = 0;
        for (int k = 0; k < n[s]; k++) {
            const PpEvent *e = &ev[s][k];
            if (e->kind == PP_PASS_F) alive++;
            double a = x0 + w * e->start / span;
            double b = x0 + w * (k + 1 < n[s] ? ev[s][k + 1].start : e->end) / span;
            double hh = h * alive / most;
            if (b > a && alive > 0)
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#59a14f\">"
                           "<title>%d alive</title></rect>\n", a, y + h - hh, b - a, hh, alive);
            peak = alive > peak ? alive : peak;
            if (ends_backward(ev[s], n[s], k)) alive--;
        }
        fprintf(f, "<text x=\"%g\" y=\"%g\">%d</text>\n", x0 + w + 6, y + h * 0.65, peak);
    }
}

void pp_draw_svg(const char *path, int p, PpEvent **ideal, PpEvent **measured, const int *n, double ideal_span,
                 double measured_span, const char *caption, const char *measured_label) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write the figure to %s", path);
    double H = 3 * (p * 34 + 60) + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"950\" height=\"%g\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<text x=\"8\" y=\"20\" font-size=\"14\">%s</text>\n", H, caption);
    pp_svg_panel(f, p, ideal, n, ideal_span, ideal_span, 60, "replayed with equal stages (F 1, B 2, R 1 a recompute; "
                 "split, B 1 and W 1; a chunk's 1/v of them): the schedule's own bubble");
    int most = pp_alive_most(p, ideal, n);
    char alive[256];
    snprintf(alive, sizeof alive, "micro-batches alive on each stage (what each keeps for its backward, from the "
             "forward to the end of the backward), the same replay; the most: %d", most);
    pp_svg_alive(f, p, ideal, n, ideal_span, ideal_span, most, 60 + p * 34 + 70, alive);
    pp_svg_panel(f, p, measured, n, measured_span, measured_span, 60 + 2 * (p * 34 + 70), measured_label);
    fprintf(f, "</svg>\n");
    CHECK(fclose(f) == 0, "writing %s failed", path);
}
