// testutil_mpi.c: see testutil.h (kept apart so tests without MPI need no comm).
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"
#include "core.h"
#include "testutil.h"

int test_run_suite_mpi(Suite *s, Comm *c) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    if (failed > 0) {
        TestResult **tr = srunner_failures(sr);
        for (int i = 0; i < failed; i++)
            printr("FAIL %s:%d: %s: %s\n", tr_lfile(tr[i]), tr_lno(tr[i]), tr_tcname(tr[i]),
                   tr_msg(tr[i]));
        free(tr);
    }
    if (comm_rank(c) == 0) srunner_print(sr, CK_NORMAL);
    double ranks_failed = comm_sum_double(c, failed > 0 ? 1.0 : 0.0);
    srunner_free(sr);
    if (comm_rank(c) == 0 && ranks_failed > 0)
        printf("%d of %d ranks had failures\n", (int)ranks_failed, comm_size(c));
    return ranks_failed == 0 ? 0 : 1;
}
