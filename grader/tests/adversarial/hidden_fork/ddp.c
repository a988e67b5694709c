// An adversarial submission (grader test): fork(2) made by a `syscall`
// instruction hidden inside the immediate of a movabs and reached by a
// call into its middle, which a linear reading of `objdump -d` does not
// see. The child would outlive the rank and rewrite its dump. The sandbox
// of a graded run (common/sandbox.h) must refuse the call itself.
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
    long pid = hidden_syscall(57, 0, 0, 0);   // fork
    if (pid == 0)
        for (;;) hidden_syscall(34, 0, 0, 0);   // the child: pause, forever
    lab_todo(__func__);
    (void)d;
}
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }
