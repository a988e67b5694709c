// rounding.h: the size of "the same training up to rounding", measured on
// the reference's runs, and the tolerances made of it: a tensor's error
// against the reference's, Adam's reach, and the bound of AdamW's moments.
#pragma once

#include <stdbool.h>

#include "dump.h"
#include "lab.h"

// What the reference measured for one configuration: the size of "the same
// up to rounding" (build/ref's yardstick runs, train_yardstick: micro-batches
// and the other rounding, against the plain run). Tolerances are TOL_FACTOR
// times these measured figures:
// - the loss per step: the measured difference, but never below one float
//   rounding of the loss itself (loss_ulp), since no two summation orders
//   can be asked to agree better than that;
// - a tensor's relative error (the first gradient: all of it; parameters and
//   moments: its bulk, see TensorError): its measured one, but never below
//   the median over tensors, because one sample of a rounding difference can
//   come out small by chance;
// - a single element of the final parameters: Adam's reach (adam_reach), the
//   most two runs of AdamW with the same settings can differ by, whatever
//   their gradients: after AdamW steps an element whose gradient is near zero
//   turns rounding into a step of up to lr either way (Adam divides by the
//   root mean square of each element's own gradients), so no measured sample
//   bounds the few such elements; Adam's own bound does.
typedef struct Measured {
    double loss;              // largest per-step loss difference
    double loss_ulp;          // largest float rounding of a loss (|loss| * FLT_EPSILON)
    int ntensors;
    char (*names)[96];        // tensor names (without the "param/final/" prefix)
    double *grad_rel;         // per tensor: relative error of the first gradient
    double *grad_abs;         // per tensor: the largest element difference of the first gradient
    double *param_bulk;       // per tensor: bulk relative error of the final parameters
    double *m_bulk, *v_bulk;  // per tensor: the same for AdamW's final moments
    double grad_rel_median, param_bulk_median, m_bulk_median, v_bulk_median;
    double adam_reach;        // the largest difference AdamW allows an element (INFINITY: not AdamW)
    int nsamples;             // the yardstick's runs besides the reference
} Measured;

enum { TOL_FACTOR = 10 };
// A tensor's relative error is never asked to be below one float rounding
// (FLT_EPSILON): at some shapes the reference's summation orders happen to
// round alike (the micro-batches align with the matrix product's own
// blocks), and a measured difference of 0 says nothing of another order.
#define REL_FLOOR 1.1920929e-7

// A tensor of a run against the reference's (tensor_error).
typedef struct {
    double rel;    // ||lab - ref|| over the tensor's scale
    double bulk;   // the same without its largest ceil(n / 1000) element differences
    double abs_;   // the largest element difference
} TensorError;

// The error of tensor `name` (e.g. "param/final/block0.attn.wq") of `lab`
// against `ref`: ||lab - ref|| over a scale, the same over the tensor's bulk,
// and the largest element difference. The scale is the tensor's own norm, or,
// when that is smaller, what its share of its unit's norm would be
// (sqrt(n_tensor / n_unit) times the unit's norm): a tensor whose exact
// gradient is zero (the key bias, since softmax ignores a shift) holds only
// rounding, and its error is measured against the size of its unit's values
// instead. The bulk leaves out the largest ceil(n / 1000) element
// differences, the few elements whose near-zero gradient Adam turned into a
// step (Adam's reach bounds those). False (and infinite errors) when the
// tensor is missing or its shape differs.
bool tensor_error(const DumpFile *lab, const DumpFile *ref, const char *name, TensorError *e);

// The most two AdamW runs with the same settings (the dump's meta/config: lr,
// beta1, beta2, steps) can differ by in one element, whatever their
// gradients: 2 lr sum_t max|m_t / sqrt(v_t)|; INFINITY when the optimizer is
// not AdamW.
double adam_reach(const DumpFile *ref);

// The rounding of "the same training up to rounding", measured on the
// yardstick's reference runs of one configuration: runs[0] the reference, the
// others its micro-batched and otherwise rounded twins.
void measure_rounding(DumpFile *const *runs, int nruns, Measured *m);
void measured_free(Measured *m);
// Room for ntensors tensors' figures (zeroed; ntensors itself is the caller's
// to set as it fills them), and the four medians over them.
void measured_alloc(Measured *m, int ntensors);
void measured_medians(Measured *m);

// AdamW's moment `which` (0: m, 1: v) of tensor t against the reference's:
// its bulk relative error over its bound (TOL_FACTOR times the measured
// rounding) into *ratio; true when at most 1.
bool moment_within_tol(const Run *run, int t, int which, double *ratio);
