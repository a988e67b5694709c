// test_args.c: the shared command line. Good input parses; bad input gives
// exit code 2 and one clear line, never a crash.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char out[1 << 16];

static const char *prog(void) {
    const char *p = getenv("ARGS_PROG");
    return p ? p : "build/tests/args_prog";
}

static int run(const char *flags) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", prog(), flags);
    return test_run_command(cmd, out, sizeof out);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

START_TEST(defaults_and_values) {
    ck_assert_int_eq(run(""), 0);
    ck_assert_ptr_nonnull(strstr(out, "steps=50 "));
    ck_assert_ptr_nonnull(strstr(out, "model=GPT 4L 128C 4H T64 B8 V256"));
    ck_assert_ptr_nonnull(strstr(out, "given_steps=0"));
    ck_assert_int_eq(run("--steps 7 --seed=42 --lr 3e-4 --stage 2 --strategy bucketed --verbose "
                         "--heads 8 --dim 64 --layers 2 --dump r.bin --device cpu"),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "steps=7 seed=42 lr=0.0003 "));
    ck_assert_ptr_nonnull(strstr(out, "device=cpu model=GPT 2L 64C 8H"));
    ck_assert_ptr_nonnull(strstr(out, "dump=r.bin"));
    ck_assert_ptr_nonnull(strstr(out, "stage=2 strategy=bucketed verbose=1"));
    ck_assert_ptr_nonnull(strstr(out, "given_steps=1"));
    ck_assert_ptr_nonnull(strstr(out, "comm=auto tf32=0"));
    ck_assert_int_eq(run("--comm mpi --tf32"), 0);
    ck_assert_ptr_nonnull(strstr(out, "comm=mpi tf32=1"));
}
END_TEST

START_TEST(data_sets_vocab_256) {
    ck_assert_int_eq(run("--data README.md --vocab 256"), 0);
    ck_assert_int_eq(run("--vocab 64 --data README.md"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--data reads bytes, so the vocabulary is 256"));
    ck_assert_int_eq(run("--vocab 64"), 0);
    ck_assert_ptr_nonnull(strstr(out, "V64"));
}
END_TEST

START_TEST(help_lists_every_flag) {
    ck_assert_int_eq(run("--help"), 0);
    const char *flags[] = {"--steps", "--seed", "--batch", "--seq", "--dim", "--heads",
                           "--layers", "--vocab", "--lr", "--wd", "--dropout", "--data", "--dump", "--trace",
                           "--timeout", "--device", "--comm", "auto|mpi|nccl", "--tf32", "--help", "--stage", "--strategy",
                           "naive|flat|bucketed", "(default 50)"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        ck_assert_msg(strstr(out, flags[i]), "--help does not mention %s", flags[i]);
}
END_TEST

// Each bad command line: exit code 2, exactly one line, and the words that
// tell the user what was wrong.
static const struct {
    const char *flags, *says;
} BAD[] = {
    {"--stepz 10", "unknown flag --stepz; did you mean --steps?"},
    {"--frobnicate", "unknown flag --frobnicate (see --help)"},
    {"--steps abc", "--steps wants a whole number, not 'abc'"},
    {"--steps 12x", "--steps wants a whole number, not '12x'"},
    {"--steps -1", "--steps -1 is out of range"},
    {"--steps 99999999999999999999", "--steps wants a whole number"},
    {"--lr nan", "--lr wants a number, not 'nan'"},
    {"--lr", "--lr needs a value"},
    {"--heads 3", "3 heads do not divide 128 channels"},
    {"--device gpu", "--device must be one of cpu|cuda|auto, not 'gpu'"},
    {"--strategy fast", "--strategy must be one of naive|flat|bucketed"},
    {"--stage 4", "--stage 4 is out of range: use 0 to 3"},
    {"--ratio 1.5", "--ratio 1.5 is out of range"},
    {"--verbose=1", "--verbose takes no value"},
    {"--steps 3 --steps 4", "--steps is given twice"},
    {"steps 3", "unexpected argument 'steps'"},
    {"--dump ''", "--dump wants a value"},
    {"--batch 0", "--batch 0 is out of range"},
    {"--dropout 1", "--dropout 1 is out of range: use 0 to 0.95"},
    {"--comm bogus", "--comm must be one of auto|mpi|nccl, not 'bogus'"},
    {"--comm nccl --device cpu", "--comm nccl needs the tensors on a GPU, but --device cpu keeps them on the CPU; "
                                 "use --comm mpi instead (--comm mpi stages the buffers through the host; NCCL "
                                 "needs one GPU per rank)"},
};

START_TEST(bad_input_one_line_exit_2) {
    int i = _i;
    int rc = run(BAD[i].flags);
    ck_assert_msg(rc == 2, "'%s' exited %d, not 2: %s", BAD[i].flags, rc, out);
    ck_assert_msg(lines(out) == 1, "'%s' printed %d lines, not 1: %s", BAD[i].flags, lines(out), out);
    ck_assert_msg(strstr(out, BAD[i].says), "'%s' printed '%s', which does not say '%s'",
                  BAD[i].flags, out, BAD[i].says);
}
END_TEST

START_TEST(error_printed_once_under_mpirun) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mpirun --oversubscribe -np 3 %s --stepz 3", prog());
    int rc = test_run_command(cmd, out, sizeof out);
    ck_assert_int_eq(rc, 2);
    const char *p = strstr(out, "unknown flag --stepz");
    ck_assert_ptr_nonnull(p);
    ck_assert_msg(strstr(p + 1, "unknown flag --stepz") == NULL, "printed more than once: %s", out);
}
END_TEST

// Inputs and outputs are checked before any work: a missing, empty,
// directory or device --data, and an output that cannot be made, are usage errors,
// and a good output is not left behind by the check.
START_TEST(files_checked_at_start) {
    ck_assert_int_eq(run("--data /nonexistent/input.txt"), 2);
    ck_assert_ptr_nonnull(strstr(out, "cannot open --data file /nonexistent/input.txt"));
    ck_assert_int_eq(run("--data /tmp"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--data /tmp is a directory"));
    // Not a regular file: a device or a FIFO (whose open would wait for a
    // writer) is refused before it is opened.
    ck_assert_int_eq(run("--data /dev/null"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--data /dev/null is not a regular file"));
    ck_assert_int_eq(run("--data common/tests/args_prog.c --seq 100000"), 2);
    ck_assert_ptr_nonnull(strstr(out, "fewer than the 100001 a row of T+1 tokens needs"));
    ck_assert_int_eq(run("--dump /nonexistent/r.bin"), 2);
    ck_assert_ptr_nonnull(strstr(out, "cannot create --dump file /nonexistent/r.bin"));
    ck_assert_int_eq(run("--trace /tmp"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--trace /tmp is a directory"));
    remove("build/tests/args-out.json");
    ck_assert_int_eq(run("--trace build/tests/args-out.json"), 0);
    FILE *f = fopen("build/tests/args-out.json", "r");
    ck_assert_msg(f == NULL, "checking --trace left the file behind");
    ck_assert_int_eq(lines(out), 1);
}
END_TEST

// A value the parser's range accepts but the program cannot use is a usage
// error too (the synthetic chain needs 5 tokens), not a failed check.
START_TEST(vocab_too_small_for_synthetic_data) {
    ck_assert_int_eq(run("--vocab 3"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--vocab 3 is too small for the synthetic data"));
    ck_assert_int_eq(run("--vocab 5"), 0);
}
END_TEST

// A program takes the shared flags it uses and no others.
START_TEST(flags_a_program_does_not_take) {
    setenv("ARGS_TAKES", "0x5002", 1);   // --seed --dump --timeout
    int rc = run("--data README.md");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "--data is not a flag of this program (it trains nothing); see --help"), "%s", out);
    ck_assert_int_eq(run("--seed 3 --timeout 5"), 0);
    ck_assert_int_eq(run("--comm mpi"), 2);
    ck_assert_ptr_nonnull(strstr(out, "--comm is not a flag of this program"));
    ck_assert_int_eq(run("--help"), 0);
    ck_assert_msg(!strstr(out, "--data") && !strstr(out, "--layers") && strstr(out, "--seed"),
                  "--help lists flags the program does not take:\n%s", out);
    // A program that places its tensors (--device) also chooses how they move.
    setenv("ARGS_TAKES", "0x8000", 1);   // --device
    ck_assert_int_eq(run("--device cpu --comm mpi"), 0);
    ck_assert_int_eq(run("--tf32"), 2);
    unsetenv("ARGS_TAKES");
}
END_TEST

// --comm nccl where the run turns out to have no GPU (the device is chosen
// after MPI starts) is refused then, by every rank alike: code 2, one line.
// The deadlock program's tensors are on the CPU whatever --device says. (A
// build without CUDA refuses it earlier, as it parses the flags.)
START_TEST(nccl_refused_once_the_device_is_known) {
    char cmd[1024];
    const char *p = getenv("DEADLOCK_PROG") ? getenv("DEADLOCK_PROG") : "build/tests/deadlock";
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np 3 %s --mode ok --comm nccl", p);
    int rc = test_run_command(cmd, out, sizeof out);
    ck_assert_msg(rc == 2, "exited %d, not 2:\n%s", rc, out);
#ifdef PL_CUDA
    const char *says = "--comm nccl: the tensors are on the CPU";
#else
    const char *says = "--comm nccl: this build has no CUDA backend";
#endif
    const char *at = strstr(out, says);
    ck_assert_msg(at && strstr(out, "use --comm mpi"), "the refusal does not say why:\n%s", out);
    ck_assert_msg(!strstr(at + 1, says), "the refusal is printed more than once:\n%s", out);
    ck_assert_msg(!strstr(out, "no deadlock"), "the run went on after the refusal:\n%s", out);
    // The control: --comm auto takes MPI for tensors on the CPU.
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np 3 %s --mode ok --comm auto", p);
    ck_assert_int_eq(test_run_command(cmd, out, sizeof out), 0);
}
END_TEST

static Suite *args_suite(void) {
    Suite *s = suite_create("args");
    TCase *tc = tcase_create("args");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, defaults_and_values);
    tcase_add_test(tc, data_sets_vocab_256);
    tcase_add_test(tc, help_lists_every_flag);
    tcase_add_loop_test(tc, bad_input_one_line_exit_2, 0, (int)(sizeof BAD / sizeof BAD[0]));
    tcase_add_test(tc, error_printed_once_under_mpirun);
    tcase_add_test(tc, files_checked_at_start);
    tcase_add_test(tc, vocab_too_small_for_synthetic_data);
    tcase_add_test(tc, flags_a_program_does_not_take);
    tcase_add_test(tc, nccl_refused_once_the_device_is_known);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    test_allow_mpirun_as_root();
    return test_run_suite(args_suite());
}
