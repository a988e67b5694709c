#!/usr/bin/env python3
"""runner.py [GROUP ...] [--only TEXT] [--list] [--jobs N]: run the course's
tests, the cases listed in tests/cases.py, and end with one line that counts
them: "N passed, M failed" (", K skipped" when some were skipped).

GROUP is unit, labs, grader or release (make test-unit, test-labs,
test-grader, test-release); none: all four, in that order. --only runs the
cases whose name holds TEXT. --list prints the cases and runs nothing.

A case runs under a time limit and expects one of four things (cases.py's
Pass, Fail, Refused, and a skip when it cannot run here). Cases run --jobs
at a time, but for those marked alone=True (a timing inside one sees a
quiet machine); of those that may run together, the longest limits start
first. Each is reported as it ends, with its wall time and the CPU time its
processes took.
"""
import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as C  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILL_AFTER = 10   # seconds between the limit's SIGTERM and SIGKILL


def run_one(case):
    """Run a case; returns (outcome, (seconds, cpu, start, end), output):
    outcome is "ok", "skipped" or the reason it failed."""
    t0 = time.monotonic()
    why = case.skip_reason()
    if why:
        return "skipped", (0.0, 0.0, t0, t0), why
    argv = ["timeout", f"--kill-after={KILL_AFTER}", str(case.limit)] + case.argv()
    p = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    out = p.stdout.read().decode(errors="replace")
    p.stdout.close()
    # wait4: the case's own CPU time, its processes' all together (each waited
    # for by its parent), whatever ran beside it.
    _, status, use = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    rc = 128 - rc if rc < 0 else rc
    t1 = time.monotonic()
    secs, cpu = t1 - t0, use.ru_utime + use.ru_stime
    return case.expect.judge(rc, out, case.limit), (secs, cpu, t0, t1), out


def skip_words(out):
    """Why a case was skipped: the line of its output that says so (its own
    reason, or a program's "skipped" line among mpirun's)."""
    lines = [l.strip() for l in out.split("\n") if l.strip() and not l.startswith("---")]
    said = [l for l in lines if "skip" in l.lower()]
    return (said or lines or ["exit code 77"])[0]


def report(case, outcome, times, out):
    print(f"=== {case.name}{case.expect.describe()}")
    if outcome == "skipped":
        print(f"--- SKIPPED: {case.name} ({skip_words(out)})")
        return
    lines = out.rstrip("\n").split("\n") if out.strip() else []
    if case.expect.tail and outcome == "ok":
        lines = lines[-case.expect.tail:]
    elif outcome != "ok":
        lines = lines[-40:]
    if lines:
        print("\n".join(lines))
    secs, cpu = times[:2]
    if outcome == "ok":
        print(f"--- ok: {case.name} ({secs:.0f} s, {cpu:.0f} s of CPU)")
    else:
        print(f"--- FAILED: {case.name}: {outcome}")
    sys.stdout.flush()


def batches(selected):
    """Consecutive cases that may run beside each other form one batch; a
    case that must run alone is a batch of its own."""
    batch = []
    for c in selected:
        if not c.alone:
            batch.append(c)
            continue
        if batch:
            yield batch
            batch = []
        yield [c]
    if batch:
        yield batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="*", metavar="GROUP",
                    help=f"{', '.join(C.GROUPS)} (default: all, in that order)")
    ap.add_argument("--only", help="run only the cases whose name holds this text")
    ap.add_argument("--list", action="store_true", help="list the cases, run nothing")
    ap.add_argument("--jobs", type=int, default=3, help="cases run at once where they may (3: most cases wait on mpirun, sleeps and watchdogs more than they compute)")
    a = ap.parse_args()
    for g in a.groups:
        if g not in C.GROUPS:
            ap.error(f"{g} is not a group of tests: the groups are {', '.join(C.GROUPS)}")
    groups = a.groups or list(C.GROUPS)
    selected = [c for g in groups for c in C.cases(g)]
    if a.only:
        selected = [c for c in selected if a.only in c.name]
    if a.list:
        for c in selected:
            print(f"{c.group:8} {c.limit:4} s {'alone' if c.alone else '     '}  {c.name}{c.expect.describe()}")
        return 0
    os.environ.update(C.ENV)
    C.prepare()
    try:
        return run_all(selected, groups, a.jobs)
    finally:
        C.clean_up()


def cache_lookups():
    """The reference cache's look-ups so far: its file's lines, "FOUND
    TRAINED FLAGS" each (common/refcache.h)."""
    try:
        with open(os.path.join(C.ENV["PL_REFCACHE"], "lookups")) as f:
            return [(int(w[0]), int(w[1])) for w in (l.split() for l in f) if len(w) >= 2]
    except OSError:
        return []


def summary(records, groups, wall, lookups):
    """The figures of the run: by group, the slowest cases beside their
    limits, the cache's hit rate; printed, and kept in build/test-times.json
    for make bench."""
    by_group = {}
    for r in records:
        g = by_group.setdefault(r["group"], {"wall_from": r["start"], "wall_to": r["end"], "cpu": 0.0, "cases": 0})
        g["wall_from"], g["wall_to"] = min(g["wall_from"], r["start"]), max(g["wall_to"], r["end"])
        g["cpu"] += r["cpu"]
        g["cases"] += 1
    print("by group (wall from its first case's start to its last one's end; groups overlap where cases run side by side):")
    for name in groups:
        g = by_group.get(name)
        if g:
            print(f"  {name:8} {g['cases']:4} cases  {g['wall_to'] - g['wall_from']:6.0f} s  {g['cpu']:6.0f} s of CPU")
    ran = [r for r in records if r["outcome"] != "skipped"]
    print("the slowest cases, beside their limits:")
    for r in sorted(ran, key=lambda r: -r["wall"])[:8]:
        print(f"  {r['wall']:5.0f} s of {r['limit']:4} s ({100 * r['wall'] / r['limit']:3.0f}%)  {r['cpu']:5.0f} s of CPU  {r['name']}")
    found = sum(f for f, _ in lookups)
    trained = sum(t for _, t in lookups)
    if found + trained:
        print(f"the reference cache: {found} of {found + trained} reference runs looked up were kept "
              f"({100 * found / (found + trained):.0f}%), {trained} trained")
    try:
        import json
        with open(os.path.join(ROOT, "build", "test-times.json"), "w") as f:
            json.dump({"wall": wall, "cpu": sum(r["cpu"] for r in records), "groups": {
                k: {"wall": v["wall_to"] - v["wall_from"], "cpu": v["cpu"], "cases": v["cases"]}
                for k, v in by_group.items()}, "cases": [{k: r[k] for k in ("name", "group", "wall", "cpu", "limit", "outcome")}
                                                        for r in records],
                "refcache": {"found": found, "trained": trained}}, f, indent=1)
    except OSError:
        pass


def recap(failures):
    """The failed cases again at the end, where a log cut to its tail still
    shows them: each one's reason and its last lines (a planted-bug case
    ends with its wrong answers), its whole output in build/test-logs/."""
    if not failures:
        return
    logs = os.path.join(ROOT, "build", "test-logs")
    os.makedirs(logs, exist_ok=True)
    for name, outcome, out in failures:
        path = os.path.join(logs, "".join(ch if ch.isalnum() else "-" for ch in name)[:80] + ".log")
        with open(path, "w") as f:
            f.write(out)
        lines = [l for l in out.rstrip("\n").split("\n") if l.strip()][-12:]
        print(f"failed: {name}: {outcome} (its output: {os.path.relpath(path, ROOT)}); its last lines:")
        for l in lines:
            print("    " + l[:300])


def run_all(selected, groups, jobs):
    passed = failed = skipped = 0
    cpu_total = 0.0
    failures = []
    records = []
    looked_up = len(cache_lookups())
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for batch in batches(selected):
            # The longest limits first, so that the long cases do not run
            # last and alone; each reported as it ends.
            futures = {pool.submit(run_one, c): c for c in sorted(batch, key=lambda c: -c.limit)}
            for f in as_completed(futures):
                c = futures[f]
                outcome, times, out = f.result()
                report(c, outcome, times, out)
                cpu_total += times[1]
                records.append({"name": c.name, "group": c.group, "wall": times[0], "cpu": times[1], "limit": c.limit,
                                "start": times[2], "end": times[3],
                                "outcome": outcome if outcome in ("ok", "skipped") else "failed"})
                if outcome == "ok":
                    passed += 1
                elif outcome == "skipped":
                    skipped += 1
                else:
                    failed += 1
                    failures.append((c.name, outcome, out))
    print()
    summary(records, groups, time.monotonic() - t0, cache_lookups()[looked_up:])
    recap(failures)
    print(f"({', '.join(groups)}: {time.monotonic() - t0:.0f} s, {cpu_total:.0f} s of CPU)")
    tail = f", {skipped} skipped" if skipped else ""
    print(f"{passed} passed, {failed} failed{tail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
