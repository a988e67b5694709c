"""plan_labs.py: the planner's memory per category and bytes per rank against
what lab03's graded runs measure (ZeRO stages 1 to 3 in fp32, 2 ranks, 2 steps).

build/plan --config evaluates one configuration with the planner's code
(grader/plan.h), which calls lab03's own formula (zero_budget); lab03 runs
with --dump and its measured peaks (mem/peak: PARAMS, GRADS, OPTIM) and bus
bytes (comm/bus_bytes) are read back. The planner's figure must be the
measured one where lab03's grader holds the run to equality (PARAMS and
OPTIM; the bytes), and at or above it where the grader holds it to a bound
(GRADS: the whole gradient of one unit at its peak). The activations are
printed beside the measured, not held: lab03 holds the total, not ACTS.
Left for later: labs 04 to 06 (docs/plan.md says so).
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
SHAPE = {"layers": 8, "dim": 192, "heads": 4, "seq": 32, "vocab": 256, "batch": 8}   # lab03's defaults


def dump_arrays(path):
    out = subprocess.run([os.path.join(ROOT, "build/dumptool"), "show", path], capture_output=True, text=True,
                         check=True).stdout
    arrays = {}
    for line in out.splitlines():
        m = re.match(r"(\S+)\s+\S+\s+\(([\d, ]*)\)\s+.*\[(.*)\]\s*$", line)
        if m:
            try:
                arrays[m.group(1)] = [float(v) for v in m.group(3).split(",") if v.strip()]
            except ValueError:   # an array shown in part ("..."): none this script reads
                pass
        m = re.match(r"(\S+)\s+\S+\s+\(\)\s+(\S+)\s*$", line)
        if m:
            arrays[m.group(1)] = [float(m.group(2))]
    return arrays


def main():
    failures = 0
    print(f"{'run':<22}{'category':<10}{'planner':>14}{'measured':>14}  held")
    # bf16 is left out for now: a 2-step bf16 run fails lab03's own check of
    # fp32 moments (too few steps for it), so the run exits non-zero.
    for precision, stages in (("fp32", (1, 2, 3)),):
        for stage in stages:
            with tempfile.TemporaryDirectory() as tmp:
                dump = os.path.join(tmp, "lab03.dump")
                subprocess.run(["mpirun", "--oversubscribe", "-np", "2", os.path.join(ROOT, "build/lab03_solution"),
                                "--stage", str(stage), "--steps", "2", "--precision", precision, "--dump", dump],
                               env=ENV, capture_output=True, check=True)
                d = dump_arrays(dump)
            shape = [f"--{k}={v}" for k, v in SHAPE.items()]
            plan = subprocess.run([os.path.join(ROOT, "build/plan"), *shape, "--gpus", "2", "--precision", precision,
                                   "--config", f"1,1,1,2,0,{stage},0,{SHAPE['batch'] // 2}"],
                                  capture_output=True, text=True, check=True).stdout
            p = {k: float(v) for k, v in (line.split() for line in plan.splitlines())}
            peak = d["mem/peak"][:6]   # rank 0: PARAMS, GRADS, OPTIM, ACTS, COMM, OTHER
            bus = sum(d["comm/bus_bytes"][:7]) / 2   # a step's
            run = f"ZeRO-{stage} {precision}"
            for name, planner, measured, held in (("params", p["params"], peak[0], "="), ("grads", p["grads"], peak[1], ">="),
                                                  ("optim", p["optim"], peak[2], "="), ("acts", p["acts"], peak[3], ""),
                                                  ("bytes", p["dp_bytes"], bus, "=")):
                # dumptool prints 6 significant digits: equal to within them.
                ok = (held == "=" and abs(planner - measured) <= 1e-5 * measured) or \
                     (held == ">=" and planner >= measured * (1 - 1e-5)) or held == ""
                failures += not ok
                print(f"{run:<22}{name:<10}{planner:>14.0f}{measured:>14.0f}  {held or '(shown)'}{'' if ok else '  FAIL'}")
    print("the planner's figures are lab03's" if not failures else f"{failures} figures differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
