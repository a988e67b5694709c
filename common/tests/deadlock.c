// deadlock.c: a planted deadlock for the watchdog. Ranks 0 and 1 each wait to
// receive from the other (neither sends); every other rank waits in a barrier.
//   mpirun -np 3 --oversubscribe build/tests/deadlock --timeout 2
// must end within a few seconds, non-zero, with one line per rank naming what
// it waits on. --mode ok runs the same calls correctly (the control);
// --mode fail makes rank 1 fail a CHECK (every rank must stop); --mode freeze
// stops rank 1 (SIGSTOP: alive but frozen) while rank 0 waits for it, so
// the lines must name rank 1 as the one that stopped answering; --mode usage
// makes rank 1 alone find a usage error (every rank must stop, exit code 2).
#include <signal.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "mem.h"

int main(int argc, char **argv) {
    Args a = args_defaults();
    a.timeout = 2;
    const char *mode = "deadlock";
    ArgExtra extras[] = {
        {"mode", ARG_CHOICE, &mode, "what to do", 0, 0, "deadlock|ok|fail|freeze|usage", NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_parse(&a, argc, argv, "A planted deadlock for the watchdog.", extras);
    Comm *w = comm_init(&argc, &argv, a.timeout);
    mem_init("cpu", comm_local_rank());
    int r = comm_rank(w), n = comm_size(w);
    CHECK(n >= 2, "run with at least 2 ranks");
    float x = 1, y = 0;
    if (strcmp(mode, "fail") == 0) CHECK(r != 1, "rank 1 fails on purpose");
    if (strcmp(mode, "usage") == 0 && r == 1) core_usage_error("rank 1 alone finds a usage error");
    if (strcmp(mode, "freeze") == 0) {
        if (r == 1) raise(SIGSTOP);   // frozen until the launcher ends the job
        if (r == 0) comm_recv(w, &x, 1, 1);
    } else if (r < 2) {
        if (strcmp(mode, "ok") == 0) {
            comm_sendrecv(w, &x, 1, 1 - r, &y, 1, 1 - r);
        } else {
            comm_recv(w, &x, 1, 1 - r);   // both wait; nobody sends
        }
    }
    comm_barrier(w);
    print0("no deadlock\n");
    comm_finalize();
    return 0;
}
