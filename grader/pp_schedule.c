// pp_schedule.c: the replay of a pipeline schedule (pp_schedule.h).
#include "pp_schedule.h"

#include <stdlib.h>

double pp_bubble_formula(int p, int m) { return (double)(p - 1) / (double)(m + p - 1); }

// The end of the event of stage s that is (kind, mb), if it has been
// replayed; -1 if it has not (yet), -2 if stage s has no such event.
static double end_of(PpEvent **ev, const int *n, const int *done, int s, int kind, int mb) {
    for (int k = 0; k < n[s]; k++)
        if (ev[s][k].kind == kind && ev[s][k].mb == mb) return k < done[s] ? ev[s][k].end : -1;
    return -2;
}

double pp_replay(int p, PpEvent **ev, const int *n, bool equal, double *makespan) {
    int *done = calloc((size_t)p, sizeof *done);
    double busy = 0, last = 0;
    int left = 0;
    for (int s = 0; s < p; s++) left += n[s];
    // Each pass runs every stage's next event whose inputs are ready; a pass
    // that runs none means an event waits for one that never comes.
    while (left > 0) {
        int ran = 0;
        for (int s = 0; s < p; s++) {
            if (done[s] == n[s]) continue;
            PpEvent *e = &ev[s][done[s]];
            double ready = done[s] ? ev[s][done[s] - 1].end : 0;
            int from = e->kind == 0 ? s - 1 : s + 1;
            if (from >= 0 && from < p) {
                double dep = end_of(ev, n, done, from, e->kind, e->mb);
                if (dep < 0) continue;   // not yet (or never: the pass stalls)
                ready = dep > ready ? dep : ready;
            }
            double d = equal ? (e->kind == 0 ? 1.0 : 2.0) : e->seconds;
            e->start = ready;
            e->end = ready + d;
            busy += d;
            last = e->end > last ? e->end : last;
            done[s]++, left--, ran++;
        }
        if (!ran) {
            free(done);
            *makespan = last;
            return -1;
        }
    }
    free(done);
    *makespan = last;
    return last > 0 ? (p * last - busy) / (p * last) : 0;
}
