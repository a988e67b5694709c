// An adversarial submission (grader test): a System V shared-memory
// segment made by a hidden `syscall` instruction (as in hidden_fork).
// Without an IPC namespace of the run's own and the sandbox, it
// outlives the grading, and a later grading under another user can
// write into it. The sandbox must refuse the call itself.
#include "ddp.h"

// syscall(nr, a, b, c): the bytes 0f 05 c3 (syscall; ret) are the first
// three of the movabs's immediate, two bytes into the instruction.
static long hidden_syscall(long nr, long a, long b, long c) {
    long rc;
    __asm__ volatile("sub $128, %%rsp\n\t"   // past the red zone
                     "lea 1f+2(%%rip), %%r11\n\t"
                     "call *%%r11\n\t"
                     "add $128, %%rsp\n\t"
                     "jmp 2f\n\t"
                     "1: movabsq $0x9090909090c3050f, %%r11\n\t"
                     "2:"
                     : "=a"(rc)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return rc;
}

void ddp_sync_params(Ddp *d) {
    long id = hidden_syscall(29, 0x504c4144, 1 << 20, 01000 | 0666);   // shmget(key, 1 MiB, IPC_CREAT | 0666)
    (void)id;
    lab_todo(__func__);
    (void)d;
}
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }
