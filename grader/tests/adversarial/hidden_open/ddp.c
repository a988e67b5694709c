// An adversarial submission (grader test): a file created outside the
// run's directory (in /run/lock, writable by everyone, where it would
// outlive the grading) by a hidden `syscall` instruction (as in
// hidden_fork). The sandbox must refuse to open a file for writing.
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
    static const char path[] = "/run/lock/pl-adversary-left";
    hidden_syscall(2, (long)path, 0101, 0644);   // open(path, O_WRONLY | O_CREAT, 0644)
    lab_todo(__func__);
    (void)d;
}
void ddp_unit_done(Ddp *d, int u, bool last) { lab_todo(__func__); (void)d; (void)u; (void)last; }
void ddp_backward_done(Ddp *d, bool last) { lab_todo(__func__); (void)d; (void)last; }
