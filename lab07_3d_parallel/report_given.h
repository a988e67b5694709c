// report_given.h: lab07's figures beside their formulas (given): each rank's
// bytes a step on its TP, PP and DP groups, read from its ledger of calls
// (comm.h), and its memory by category, against grid_budget.h's formulas
// (the grader's and the planner's code); the figure of the grid.
#pragma once

#include <stdint.h>

#include "comm.h"
#include "dump.h"
#include "grid.h"
#include "mem.h"
#include "pipeline.h"
#include "sp.h"
#include "stage_given.h"

// The world ranks of this rank's three groups, a bit each (a world of up to
// 64 ranks; beyond, the per-group figures are not printed). Collective.
typedef struct {
    uint64_t tp, pp, dp;
    bool fits;
} GridLinks;
void links_make(GridLinks *k, const Grid *g);

// The student's wiring (grid_wire) against the grid's groups: the stage's
// layers on the TP group, the pipeline on the PP group, or the run stops
// naming the group given and the one it belongs on. Collective.
void grid_check_wiring(const Grid *g, const Pp *pp, const Sp *sp);

// --budget-mb: the student's choice against the planner's list (main.c).
typedef struct {
    bool on, ok;              // a choice was made; it is the planner's fastest that fits
    double budget, planned;   // bytes a rank: the budget, the lab's formula for the choice (grid_budget.h)
    double planner;           // and the planner's own count
    int best_t, best_p, best_m;
    int gpus;                 // chosen for (--gpus, or the ranks)
    int t, p, m;              // the choice (0: none)
} GridChoiceReport;

// The choice into the dump (lab07/choice/...), for the grader; on every run
// with --budget-mb, the ones that only plan (--gpus other than the ranks)
// included.
void grid_choice_dump(DumpWriter *dw, const GridChoiceReport *choice);

// What the printout and the dump need of the run.
typedef struct {
    const Grid *g;
    const Pp *pp;
    const PpRun *run;
    const GridStep *st;
    const GridLinks *links;
    const MemReport *mem;
    bool gpipe;
    int steps;
    const char *figure;   // --figure's SVG, or NULL
    const GridChoiceReport *choice;
} GridReport;

// Rank 0 prints every rank's bytes a step on each group and memory beside
// the formulas; the dump gets each rank's facts (lab07/rank) for the grader.
// Collective over the world.
void grid_report(Comm *c, const GridReport *r);
void grid_report_dump(DumpWriter *dw, Comm *c, const GridReport *r);
