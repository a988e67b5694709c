#!/usr/bin/env python3
"""first_line.py [--only TEXT] [--steps N]: how soon every command the
READMEs show answers. A benchmark: it prints figures, one row as each is
measured, and never fails on one.

For each command of the READMEs' ```sh blocks that runs a program (the
README's `make labNN && ...` builds first, untimed), the seconds from its
start to its first line, to its first training step ("step ...") and, for
an unfinished student file, to its first "not written yet": cold (a
reference cache of its own, empty: the reference is not kept yet) and warm
(the same command again, the reference kept). A lab command is run twice:
as written (the student's file, as the tree has it) and with the lab's
solution (the finished lab, as a student who has done it meets it).

Each run takes --steps N (3 unless told; the first step does not depend on
how many follow, and a reference of 3 steps trains in seconds, which keeps
the benchmark to minutes); mpirun gets --oversubscribe.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_commands():
    """The ```sh lines of README.md and the labs' READMEs that run a program."""
    files = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, d, "README.md") for d in os.listdir(ROOT)
        if re.match(r"lab\d\d_", d) and os.path.isfile(os.path.join(ROOT, d, "README.md")))
    out = []
    for f in files:
        on = False
        for line in open(f):
            if line.startswith("```sh"):
                on = True
                continue
            if line.startswith("```"):
                on = False
                continue
            if not on:
                continue
            cmd = re.sub(r"\s+#.*$", "", line).strip()
            if re.search(r"(^|&& )(mpirun |build/(ref|lab\d\d|hello))", cmd) and "--help" not in cmd:
                out.append((os.path.relpath(f, ROOT), cmd))
    return out


def with_steps(cmd, steps):
    """The command with --steps N (replacing its own), where the program trains."""
    if not re.search(r"build/(ref|lab0[2-9]|lab[1-9]\d)\b", cmd) or "--gpus" in cmd:
        return cmd
    if re.search(r"--steps \d+", cmd):
        return re.sub(r"--steps \d+", f"--steps {steps}", cmd)
    return cmd + f" --steps {steps}"


def timed(cmd, cache, limit=300):
    """Run cmd (bash); seconds to its first line, first step line, first
    'not written yet', and its end (None where it never came)."""
    env = dict(os.environ, PL_REFCACHE=cache, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    first = step = todo = None
    for raw in p.stdout:
        now = time.monotonic() - t0
        line = raw.decode(errors="replace")
        if first is None and line.strip():
            first = now
        if step is None and line.startswith("step "):
            step = now
        if todo is None and "not written yet" in line:
            todo = now
        if now > limit:
            p.kill()
            break
    p.wait()
    return first, step, todo, time.monotonic() - t0


def fmt(x):
    return "-" if x is None else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="the commands holding this text")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    rows = []
    print(f"seconds from the start to the first line, the first step and (unfinished files) the first 'not written "
          f"yet'; cold: no reference kept, warm: kept; each run --steps {a.steps}")
    print(f"{'command':72} {'program':8}  {'cold: line  step  todo':22}  {'warm: line  step  todo':22}  end")
    for readme, cmd in readme_commands():
        if a.only and a.only not in cmd:
            continue
        build, _, run = cmd.rpartition(" && ")
        if build:
            subprocess.run(["bash", "-c", build], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run = run.replace("mpirun ", "mpirun --oversubscribe ").replace("--oversubscribe --oversubscribe",
                                                                        "--oversubscribe")
        run = with_steps(run, a.steps)
        variants = [("as given", run)]
        m = re.search(r"build/(lab\d\d)\b", run)
        if m and os.path.exists(os.path.join(ROOT, "build", m.group(1) + "_solution")):
            variants.append(("solution", run.replace(f"build/{m.group(1)}", f"build/{m.group(1)}_solution")))
        for what, c in variants:
            cache = tempfile.mkdtemp(prefix="pl-first-line.")
            try:
                cold = timed(c, cache)
                warm = timed(c, cache)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            rows.append((cmd, what, cold, warm))
            print(f"{cmd[:72]:72} {what:8}  {fmt(cold[0]):>5} {fmt(cold[1]):>5} {fmt(cold[2]):>5}       "
                  f"{fmt(warm[0]):>5} {fmt(warm[1]):>5} {fmt(warm[2]):>5}       {cold[3]:.0f}+{warm[3]:.0f} s",
                  flush=True)
    steps_cold = [r[2][1] for r in rows if r[2][1] is not None]
    steps_warm = [r[3][1] for r in rows if r[3][1] is not None]
    todos = [x for r in rows for x in (r[2][2], r[3][2]) if x is not None]
    print()
    if steps_cold:
        print(f"first step: at most {max(steps_cold):.2f} s cold, {max(steps_warm or [0]):.2f} s warm "
              f"(over {len(steps_cold)} runs that train)")
    if todos:
        print(f"'not written yet': at most {max(todos):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
