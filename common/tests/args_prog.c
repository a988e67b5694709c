// args_prog.c: parses the shared flags plus a lab's extras and prints what it
// got; test_args runs it with good and bad command lines.
#include <stdio.h>
#include <stdlib.h>

#include "args.h"

int main(int argc, char **argv) {
    Args a = args_defaults();
    int stage = 0;
    const char *strategy = "flat";
    bool verbose = false;
    double ratio = 0.5;
    ArgExtra extras[] = {
        {"stage", ARG_INT, &stage, "ZeRO stage", 0, 3, NULL, NULL},
        {"strategy", ARG_CHOICE, &strategy, "how gradients are reduced", 0, 0, "naive|flat|bucketed", NULL},
        {"verbose", ARG_FLAG, &verbose, "print more", 0, 0, NULL, NULL},
        {"ratio", ARG_DOUBLE, &ratio, "a fraction", 0, 1, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    // ARGS_TAKES=MASK: the shared flags this program takes, as a lab says them.
    if (getenv("ARGS_TAKES")) args_takes((unsigned)strtoul(getenv("ARGS_TAKES"), NULL, 0), "it trains nothing");
    args_parse(&a, argc, argv, "A test program for the shared command line.", extras);
    char model[128];
    printf("steps=%d seed=%llu lr=%g timeout=%g device=%s model=%s data=%s dump=%s trace=%s "
           "stage=%d strategy=%s verbose=%d ratio=%g given_steps=%d comm=%s tf32=%d\n",
           a.steps, (unsigned long long)a.seed, a.lr, a.timeout, a.device,
           args_model_string(&a, model, sizeof model), a.data ? a.data : "-",
           a.dump ? a.dump : "-", a.trace ? a.trace : "-", stage, strategy, verbose, ratio,
           args_given("steps"), a.comm, a.tf32);
    return 0;
}
