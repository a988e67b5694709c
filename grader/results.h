// results.h: the checks recorded so far, and their table. The leaf of the
// grader: every check records here, and the recorder calls nothing back.
#pragma once

#include <stdbool.h>

typedef struct Run Run;   // the run a check is of (lab.h): its name, and whether it is hidden

// One graded check's outcome.
typedef struct {
    char lab[16], run[96], check[96];
    bool pass, hidden;
    char figure[160], bound[320], diagnosis[1024];
    double ratio;   // the figure over its bound (a check passes at <= 1), NaN when it has none
} Result;

// The checks recorded so far.
typedef struct Grader {
    Result *results;
    int n, cap;
    const char *lab;   // the lab being graded
} Grader;

// Record one graded check. figure and bound say what was measured and what
// it had to be; diagnosis (when it fails) what probably went wrong.
void grade_check(Grader *g, const Run *run, const char *check, bool pass, const char *figure,
                 const char *bound, const char *diagnosis);
// The last recorded check's figure over its bound, for the yardstick's
// margins (build/grade --margins).
void grade_set_ratio(Grader *g, double ratio);

// The table of checks, and under it each failure's diagnosis (rank 0).
void grader_print_table(const Grader *g);
int grader_failed(const Grader *g);
void grader_free(Grader *g);
