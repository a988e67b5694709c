// sandbox.h: the kernel's fence around a graded run.
//
// The grader reads the student's object before it runs it (no system call
// of its own, no file, no process), but a scan of the object can be fooled
// (an instruction hidden inside another's bytes and reached by a jump). So
// in a graded run the harness also asks the kernel (seccomp) to refuse,
// from the moment the harness is set up until the process ends, what no
// lab's code ever needs:
//
//   a new process (fork, vfork, clone without CLONE_THREAD; threads are fine)
//   another program (execve, execveat)
//   System V IPC (shmget, semget, msgget ...: kept by the kernel past the run)
//   ptrace, kernel keyrings, io_uring, bpf, new namespaces, mounts
//   a file opened for writing, created or truncated, a new directory,
//   link or device node (the harness opens its own files before the fence)
//
// A refused call ends the process with SIGSYS, after one line that names the
// call ("the sandbox of a graded run refused fork(2) ..."); the grader names
// the signal too. The grader asks for the fence with PL_SANDBOX=1 in the
// runs' environment; a student's own runs have none.
#pragma once

#include <stdbool.h>

// Whether this run is graded (PL_SANDBOX=1), read once.
bool sandbox_wanted(void);
// Install the filter now, for every thread the process starts later. The
// harness calls it once it has opened every file it writes.
void sandbox_close(void);
// Whether sandbox_close has run.
bool sandbox_closed(void);
