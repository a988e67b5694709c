// sandbox.c: the seccomp filter of a graded run (sandbox.h says what it refuses).
//
// The filter is plain BPF over the system call's number and, for clone and
// open, its flags: it cannot read a path, so "no file opened for writing" is
// every open that asks to write, create or truncate, and the harness opens
// its own files (the dump, /proc/self/clear_refs, the trace) before it.
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SANDBOX_ARCH AUDIT_ARCH_AARCH64
#endif

// The calls refused outright, with the words the refusal prints.
typedef struct {
    long nr;
    const char *name;
} Refused;

static const Refused REFUSED[] = {
#ifdef SYS_fork
    {SYS_fork, "fork (a new process)"},
#endif
#ifdef SYS_vfork
    {SYS_vfork, "vfork (a new process)"},
#endif
    {SYS_execve, "execve (another program)"},
    {SYS_execveat, "execveat (another program)"},
    {SYS_shmget, "shmget (System V shared memory)"},
    {SYS_shmat, "shmat (System V shared memory)"},
    {SYS_shmctl, "shmctl (System V shared memory)"},
    {SYS_shmdt, "shmdt (System V shared memory)"},
    {SYS_semget, "semget (System V semaphores)"},
    {SYS_semop, "semop (System V semaphores)"},
    {SYS_semtimedop, "semtimedop (System V semaphores)"},
    {SYS_semctl, "semctl (System V semaphores)"},
    {SYS_msgget, "msgget (System V message queues)"},
    {SYS_msgsnd, "msgsnd (System V message queues)"},
    {SYS_msgrcv, "msgrcv (System V message queues)"},
    {SYS_msgctl, "msgctl (System V message queues)"},
    {SYS_ptrace, "ptrace"},
    {SYS_keyctl, "keyctl (the kernel's keyrings)"},
    {SYS_add_key, "add_key (the kernel's keyrings)"},
    {SYS_request_key, "request_key (the kernel's keyrings)"},
    {SYS_io_uring_setup, "io_uring_setup"},
    {SYS_io_uring_enter, "io_uring_enter"},
    {SYS_io_uring_register, "io_uring_register"},
    {SYS_bpf, "bpf"},
    {SYS_unshare, "unshare (new namespaces)"},
    {SYS_setns, "setns (another namespace)"},
    {SYS_mount, "mount"},
    {SYS_umount2, "umount2"},
    {SYS_pivot_root, "pivot_root"},
    {SYS_chroot, "chroot"},
#ifdef SYS_creat
    {SYS_creat, "creat (a new file)"},
#endif
#ifdef SYS_mkdir
    {SYS_mkdir, "mkdir (a new directory)"},
#endif
    {SYS_mkdirat, "mkdirat (a new directory)"},
#ifdef SYS_mknod
    {SYS_mknod, "mknod (a new file)"},
#endif
    {SYS_mknodat, "mknodat (a new file)"},
#ifdef SYS_link
    {SYS_link, "link (a new name for a file)"},
#endif
    {SYS_linkat, "linkat (a new name for a file)"},
#ifdef SYS_symlink
    {SYS_symlink, "symlink (a new link)"},
#endif
    {SYS_symlinkat, "symlinkat (a new link)"},
    {SYS_truncate, "truncate (a file by its name)"},
};

// An open that writes, creates or truncates (O_RDWR alone is allowed: the
// device files a GPU opens and the shared-memory files Open MPI attaches
// are opened so; the runs' files are their own, and the dump is sealed).
#define WRITE_FLAGS (O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE)

static const char *refused_name(long nr) {
    if (nr == SYS_clone) return "clone without CLONE_THREAD (a new process: fork, system, popen)";
#ifdef SYS_open
    if (nr == SYS_open) return "open for writing (a file of the run's own)";
#endif
    if (nr == SYS_openat) return "openat for writing (a file of the run's own)";
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (REFUSED[i].nr == nr) return REFUSED[i].name;
    return "a system call of another architecture";
}

// ---- the refusal's words ---------------------------------------------------

// Async-signal-safe pieces of the line a refusal prints.
static size_t put_str(char *buf, size_t at, size_t len, const char *s) {
    while (*s && at + 1 < len) buf[at++] = *s++;
    return at;
}

static size_t put_int(char *buf, size_t at, size_t len, long v) {
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
    do digits[n++] = (char)('0' + u % 10), u /= 10; while (u && n < 23);
    if (v < 0 && at + 1 < len) buf[at++] = '-';
    while (n && at + 1 < len) buf[at++] = digits[--n];
    return at;
}

// SIGSYS from the filter: say which call was refused, then end the process
// with the signal itself (the handler was reset on entry: SA_RESETHAND), so
// the grader sees and names SIGSYS.
static void on_refused(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    char line[640];
    size_t at = put_str(line, 0, sizeof line, "[rank ");
    at = put_int(line, at, sizeof line, core_rank());
    at = put_str(line, at, sizeof line, "] the sandbox of a graded run refused ");
    at = put_str(line, at, sizeof line, refused_name(info->si_syscall));
    at = put_str(line, at, sizeof line, ", system call ");
    at = put_int(line, at, sizeof line, info->si_syscall);
    at = put_str(line, at, sizeof line,
                 ": a lab's code starts no process or program, keeps nothing in the kernel past its run and "
                 "writes no file (the harness writes the run's files); the run ends with SIGSYS\n");
    ssize_t ignored = write(2, line, at);
    (void)ignored;
    raise(sig);
}

// ---- the filter ------------------------------------------------------------

enum { MAX_INSNS = 128 };
enum { L_ALLOW = 1000, L_TRAP, L_ENOSYS, L_KILL, L_CLONE, L_OPEN1, L_OPEN2 };

typedef struct {
    struct sock_filter insn[MAX_INSNS];
    int label_t[MAX_INSNS], label_f[MAX_INSNS];   // jump targets by label, resolved at the end
    int at[L_OPEN2 - L_ALLOW + 1];                 // where each label lies
    int n;
} Prog;

static void op(Prog *p, unsigned short code, unsigned k) {
    CHECK(p->n < MAX_INSNS, "the sandbox's filter is too long");
    p->insn[p->n] = (struct sock_filter)BPF_STMT(code, k);
    p->label_t[p->n] = p->label_f[p->n] = -1;
    p->n++;
}

// A conditional jump to labels (0 as a label: the next instruction).
static void jump(Prog *p, unsigned short code, unsigned k, int lt, int lf) {
    op(p, (unsigned short)(BPF_JMP | code | BPF_K), k);
    p->label_t[p->n - 1] = lt;
    p->label_f[p->n - 1] = lf;
}

static void label(Prog *p, int l) { p->at[l - L_ALLOW] = p->n; }

static void resolve(Prog *p) {
    for (int i = 0; i < p->n; i++) {
        int lt = p->label_t[i], lf = p->label_f[i];
        if (lt > 0) p->insn[i].jt = (unsigned char)(p->at[lt - L_ALLOW] - i - 1);
        if (lf > 0) p->insn[i].jf = (unsigned char)(p->at[lf - L_ALLOW] - i - 1);
    }
}

#define ARG_LO(i) (unsigned)offsetof(struct seccomp_data, args[i])   // little-endian: the low 32 bits

static bool g_closed;

bool sandbox_wanted(void) {
    const char *v = getenv("PL_SANDBOX");
    return v && strcmp(v, "1") == 0;
}

bool sandbox_closed(void) { return g_closed; }

void sandbox_close(void) {
#ifndef SANDBOX_ARCH
    CHECK(0, "a graded run asks for the sandbox, which is written for x86-64 and AArch64 only");
#else
    CHECK(!g_closed, "sandbox_close is called once");
    Prog p = {.n = 0};
    op(&p, BPF_LD | BPF_W | BPF_ABS, (unsigned)offsetof(struct seccomp_data, arch));
    jump(&p, BPF_JEQ, SANDBOX_ARCH, 0, L_KILL);   // int $0x80 on x86-64 is another table of calls
    op(&p, BPF_LD | BPF_W | BPF_ABS, (unsigned)offsetof(struct seccomp_data, nr));
#ifdef __x86_64__
    jump(&p, BPF_JGE, 0x40000000u, L_TRAP, 0);   // the x32 calls
#endif
    jump(&p, BPF_JEQ, SYS_clone, L_CLONE, 0);
    // clone3's flags lie in memory the filter cannot read: ENOSYS, and the
    // C library falls back to clone for its threads. openat2's likewise.
    jump(&p, BPF_JEQ, SYS_clone3, L_ENOSYS, 0);
    jump(&p, BPF_JEQ, SYS_openat2, L_ENOSYS, 0);
#ifdef SYS_open
    jump(&p, BPF_JEQ, SYS_open, L_OPEN1, 0);
#endif
    jump(&p, BPF_JEQ, SYS_openat, L_OPEN2, 0);
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        jump(&p, BPF_JEQ, (unsigned)REFUSED[i].nr, L_TRAP, 0);
    op(&p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    label(&p, L_CLONE);   // a thread shares the process; anything else is a new one
    op(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
    jump(&p, BPF_JSET, CLONE_THREAD, L_ALLOW, L_TRAP);
    label(&p, L_OPEN1);   // open(path, flags, mode)
    op(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
    jump(&p, BPF_JSET, WRITE_FLAGS, L_TRAP, L_ALLOW);
    label(&p, L_OPEN2);   // openat(dir, path, flags, mode)
    op(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(2));
    jump(&p, BPF_JSET, WRITE_FLAGS, L_TRAP, L_ALLOW);
    label(&p, L_ALLOW);   // (BPF jumps only forward: the answers come last)
    op(&p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    label(&p, L_TRAP);
    op(&p, BPF_RET | BPF_K, SECCOMP_RET_TRAP);
    label(&p, L_ENOSYS);
    op(&p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    label(&p, L_KILL);
    op(&p, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    resolve(&p);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_refused;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSYS, &sa, NULL) == 0, "cannot set the sandbox's SIGSYS handler: %s", strerror(errno));
    struct sock_fprog prog = {.len = (unsigned short)p.n, .filter = p.insn};
    CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "cannot close the sandbox (no_new_privs): %s",
          strerror(errno));
    // Every thread of the process at once (MPI's and the BLAS's are running).
    CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0,
          "cannot close the sandbox (seccomp): %s; a graded run needs a kernel with seccomp filters",
          strerror(errno));
    g_closed = true;
#endif
}
