// specs.c: the labs the grader knows, the checks the training labs share,
// and the reference against itself.
//
// A lab registers here (LABS below) and says in its own spec_labNN.c: its
// directory and student file, its runs (world sizes, an odd one where the
// lab allows it, flags), the reference run that matches one of its runs,
// and its checks on the dump.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "grade.h"
#include "spec_train.h"
#include "mem.h"

// ---- ref: the reference against itself ---------------------------------------
// The grader's own yardstick: build/ref with micro-batches must pass as "the
// same training" as build/ref without, and a run with one parameter off (the
// --perturb self-test) must not.

// (The GPU's training against the CPU's is build/gpu_check --training, which
// measures the GPU's own rounding too: the CPU's yardstick alone does not
// cover cuBLAS's order of summation or the GPU's exp.)
static const RunSpec REF_RUNS[] = {
    {"micro4", 1, "--steps 8 --micro 4 --device cpu", true, false},
    {"micro8-small", 1, "--steps 6 --micro 8 --layers 2 --dim 64 --heads 4 --seq 32 --device cpu", false, false},
};

static const char *ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    // The same flags without the micro-batches, on the CPU.
    const char *f = run->spec->flags;
    const char *micro = strstr(f, "--micro ");
    size_t head = micro ? (size_t)(micro - f) : strlen(f);
    const char *tail = micro ? strchr(micro + 8, ' ') : "";
    snprintf(buf, len, "%.*s%s --seed %llu", (int)head, f, tail ? tail : "", (unsigned long long)run->seed);
    char *cuda = strstr(buf, "--device cuda");
    if (cuda) memcpy(cuda, "--device cpu ", 13);
    return buf;
}

static void ref_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, true)) return;
    check_equivalence(g, run, 1);
    // Memory: fp32 AdamW holds 4 bytes of parameters, 4 of gradients and 8
    // of moments per parameter, measured.
    double psi = count_params(run->dump);
    static const char *const kept = "something is kept twice, or a buffer is not freed after use (or is "
                                    "allocated again every step)";
    check_peak(g, run, MEM_PARAMS, "PARAMS", 4 * psi, "4 bytes per parameter (4 psi)", kept);
    check_peak(g, run, MEM_GRADS, "GRADS", 4 * psi, "4 psi", kept);
    check_peak(g, run, MEM_OPTIM, "OPTIM", 8 * psi, "8 psi (AdamW's two moments)", kept);
    const DumpArray *measured = dump_find(run->dump, "mem/measured_peak");
    double seen = measured ? dump_get(measured, 0) : 0;
    char fig[64], bound[64], b[32];
    snprintf(fig, sizeof fig, "%s", core_fmt_bytes(seen, b, sizeof b));
    snprintf(bound, sizeof bound, ">= 16 psi = %s", core_fmt_bytes(16 * psi, b, sizeof b));
    grade_check(g, run, "measured heap covers the tensors", seen >= 16 * psi, fig, bound,
                "the independent measure saw less than the tensors: the allocator is not wrapped");
}

static const LabSpec LAB_REF = {
    .id = "ref", .dir = ".", .student_file = "", .program = "ref", .solution = "ref",
    .runs = REF_RUNS, .nruns = sizeof REF_RUNS / sizeof REF_RUNS[0],
    .ref_flags = ref_flags, .check = ref_check,
};

// ---- shared by the training labs ---------------------------------------------

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", run->spec->flags);
    size_t n = 0;
    buf[0] = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        bool skip = false;
        for (const char *const *d = drop; *d; d++) skip |= strncmp(tok, "--", 2) == 0 && strcmp(tok + 2, *d) == 0;
        if (skip) {
            char *value = strtok_r(NULL, " ", &save);   // a dropped flag's value goes too
            (void)value;
            continue;
        }
        if (strcmp(tok, "--no-ref") == 0) continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "", tok);
    }
    snprintf(buf + n, len - n, " --seed %llu", (unsigned long long)run->seed);
    return buf;
}

double config_value(const DumpFile *d, const char *key, double missing) {
    const DumpArray *config = dump_find(d, "meta/config");
    if (!config || config->type != DUMP_TEXT) return missing;
    char k[40];
    snprintf(k, sizeof k, "\n%s ", key);
    const char *at = strstr((const char *)config->data, k);
    return at ? atof(at + strlen(k)) : missing;
}

double count_params(const DumpFile *f) {
    double psi = 0;
    for (int i = 0; f && i < f->count; i++)
        if (strncmp(f->arrays[i].name, "param/final/", 12) == 0) psi += (double)f->arrays[i].count;
    return psi;
}

// The student's hooks that still call lab_todo ("check/unfinished/<name>").
void check_hooks_written(Grader *g, const Run *run) {
    char fig[256] = "", names[256] = "";
    int todo = 0, hooks = 0;
    size_t n = 0;
    for (int i = 0; i < run->dump->count; i++) {
        const DumpArray *a = &run->dump->arrays[i];
        if (strncmp(a->name, "check/unfinished/", 17) != 0) continue;
        hooks++;
        if (dump_get(a, 0) == 0) continue;
        todo++;
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", a->name + 17);
    }
    if (hooks == 0) {   // the harness lists every hook: none listed is a list emptied
        grade_check(g, run, "every TODO written", false, "no hooks listed", "every hook listed",
                    "the dump lists none of the lab's hooks (check/unfinished/...): the harness's list "
                    "was emptied or the dump rewritten");
        return;
    }
    snprintf(fig, sizeof fig, "%d unfinished%s%s", todo, todo ? ": " : "", names);
    grade_check(g, run, "every TODO written", todo == 0, fig, "0 unfinished",
                "not written yet: these functions still call lab_todo (delete that line when one is done)");
}

extern const LabSpec LAB01, LAB02, LAB03, LAB04, LAB05, LAB06;
const LabSpec *const LABS[] = {&LAB_REF, &LAB01, &LAB02, &LAB03, &LAB04, &LAB05, &LAB06};
const int NLABS = sizeof LABS / sizeof LABS[0];
