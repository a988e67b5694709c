// test_ref.c: the reference trainer as a user runs it: the loss falls, the
// dump holds what docs/model.md lists, and bad input is refused clearly.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump.h"
#include "testutil.h"

static char out[1 << 16];
static char path[256];

static const char *ref(void) { return getenv("REF_PROG") ? getenv("REF_PROG") : "build/ref"; }

static int run(const char *flags) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", ref(), flags);
    return test_run_command(cmd, out, sizeof out);
}

START_TEST(loss_falls_and_dump_is_complete) {
    char flags[512];
    snprintf(flags, sizeof flags, "--steps 40 --device cpu --dump %s", path);
    ck_assert_msg(run(flags) == 0, "build/ref failed:\n%s", out);
    ck_assert_ptr_nonnull(strstr(out, "step   40/40  loss "));
    const char *err = NULL;
    DumpFile *f = dump_read(path, &err);
    ck_assert_msg(f, "cannot read the dump: %s", err);
    const DumpArray *loss = dump_find(f, "loss");
    ck_assert_ptr_nonnull(loss);
    ck_assert_uint_eq(loss->count, 40);
    double first = dump_get(loss, 0), last = dump_get(loss, 39);
    // A fresh model predicts nearly uniformly: ln 256 = 5.545.
    ck_assert_msg(fabs(first - log(256.0)) < 0.1, "first loss %g is not near ln 256", first);
    // The synthetic chain's floor is 1.03 nats; 40 steps get well on the way.
    ck_assert_msg(last < first - 2.0, "the loss fell only from %g to %g in 40 steps", first, last);
    const char *names[] = {"meta/config", "batch/x", "batch/y", "param/init/embed.wte",
                           "grad/first/block3.mlp.w2", "param/final/head.lm_head", "mem/peak",
                           "comm/bus_bytes"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(dump_find(f, names[i]), "the dump has no %s", names[i]);
    const DumpArray *bx = dump_find(f, "batch/x");
    ck_assert_int_eq(bx->ndim, 3);
    ck_assert_uint_eq(bx->shape[0], 40);
    ck_assert_uint_eq(bx->shape[1], 8);
    ck_assert_uint_eq(bx->shape[2], 64);
    // The memory the ZeRO formulas start from: 4 bytes of parameters, 4 of
    // gradients and 8 of AdamW moments per parameter (Ψ = 867,072).
    const DumpArray *peak = dump_find(f, "mem/peak");
    double psi = 867072;
    ck_assert_double_eq(dump_get(peak, 0), 4 * psi);   // PARAMS
    ck_assert_double_eq(dump_get(peak, 1), 4 * psi);   // GRADS
    ck_assert_double_eq(dump_get(peak, 2), 8 * psi);   // OPTIM
    ck_assert_msg(dump_get(dump_find(f, "mem/measured_peak"), 0) >= 16 * psi,
                  "the heap measure saw less than the tensors");
    dump_free(f);
    unlink(path);
}
END_TEST

START_TEST(trains_on_a_file) {
    ck_assert_msg(run("--steps 3 --data README.md --device cpu") == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "file README.md"));
}
END_TEST

START_TEST(help_documents_every_flag) {
    ck_assert_int_eq(run("--help"), 0);
    const char *flags[] = {"--micro", "--steps", "--seed", "--batch", "--seq", "--dim", "--heads",
                           "--layers", "--vocab", "--lr", "--wd", "--dropout", "--data", "--dump",
                           "--timeout", "--device"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        ck_assert_msg(strstr(out, flags[i]), "--help does not mention %s", flags[i]);
    // One device and no communication: nothing to trace, so no --trace.
    ck_assert_msg(!strstr(out, "--trace"), "--help lists --trace, which build/ref does not take");
}
END_TEST

START_TEST(bad_input_is_refused) {
    ck_assert_int_eq(run("--micro 3"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--micro 3 does not divide the batch of 8 rows"));
    ck_assert_int_eq(run("--heads 5"), 2);
    ck_assert_int_eq(run("--data /nonexistent/file"), 2);
    ck_assert_ptr_nonnull(strstr(out, "cannot open --data file"));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mpirun --oversubscribe -np 2 %s --steps 1", ref());
    ck_assert_int_eq(test_run_command(cmd, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "single-device reference"));
}
END_TEST

static Suite *ref_suite(void) {
    Suite *s = suite_create("ref");
    TCase *tc = tcase_create("ref");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, loss_falls_and_dump_is_complete);
    tcase_add_test(tc, trains_on_a_file);
    tcase_add_test(tc, help_documents_every_flag);
    tcase_add_test(tc, bad_input_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    test_allow_mpirun_as_root();
    snprintf(path, sizeof path, "/tmp/pl_test_ref_%d.bin", (int)getpid());
    return test_run_suite(ref_suite());
}
