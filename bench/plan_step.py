"""plan_step.py (make plan-bench): the planner's step time against the labs'
measured, on this machine. A benchmark, not a test: it prints figures.

This machine's rates, measured first: α and β from lab01's own fit of its
ring all-reduce (lab01_solution --bench: "fitted: alpha = ... us per step,
B = ... GB/s"), and the one-thread sgemm rate over the model's products
(build/sgemm_rate). build/plan then evaluates each run's configuration (read
from its dump, as tests/scripts/plan_labs.py reads it) with --peak the sgemm
rate at --efficiency 1 and --alpha, --beta lab01's, and the run itself is
timed (its "mean over steps" line, the best of REPS runs: on a shared
machine the least disturbed). Printed: predicted and measured ms a step, and
measured / predicted. docs/plan.md reports the factor and why.

    /usr/bin/python3 bench/plan_step.py        (NP ranks, default 2; REPS, default 3; STEPS, default 30)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests", "scripts"))
import pldump  # noqa: E402
from plan_labs import config_of, layout  # noqa: E402

# One thread a rank, as the labs run (one rank a core).
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1",
           OMP_NUM_THREADS="1")
NP = int(os.environ.get("NP", "2"))
REPS = int(os.environ.get("REPS", "3"))
STEPS = int(os.environ.get("STEPS", "30"))

# The labs' default runs (their defaults but the ranks: NP, one a core), and
# build/ref on one rank, the same model without parallelism: the gap the
# planner leaves before any communication (what the products are not).
RUNS = [
    ("ref", "one device, the same model", 1, ["--device", "cpu"]),
    ("lab05", "1F1B, 4 micro-batches (lab05's defaults)", NP, []),
    ("lab06", "TP + SP, dropout 0.1 (lab06's defaults)", NP, []),
]
# The capstone on NP ranks, one a core: a TP group alone, a pipeline alone
# (lab07's grid, its given code and the student's sums and syncs), and its
# 2 x 2 x 2 grid (8 ranks oversubscribed: the measured time is then the
# cores' sharing, printed to show how far the model is from it).
LAB07_RUNS = [
    ("lab07", f"t {NP}, SP (lab07's grid, one TP group)", NP, ["--tp", str(NP)]),
    ("lab07", f"p {NP}, 1F1B, 4 micro-batches (lab07)", NP, ["--pp", str(NP), "--micro", "4"]),
    ("lab07", "2 x 2 x 2 on 8 ranks (oversubscribed)", 8, ["--tp", "2", "--pp", "2"]),
]
RUNS += LAB07_RUNS


def mpirun(np, prog, *args):
    out = subprocess.run(["mpirun", "--oversubscribe", "-np", str(np), os.path.join(ROOT, "build", prog), *args],
                         env=ENV, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{prog} {' '.join(args)} failed (exit {out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def alpha_beta():
    """lab01's fitted α (seconds a ring step) and B (bytes/s) on NP ranks."""
    out = mpirun(NP, "lab01_solution", "--quiet", "--bench", "--max-mib", "4")
    m = re.search(r"fitted: alpha = ([\d.]+) us per step, B = ([\d.]+) GB/s", out)
    if not m:
        sys.exit("lab01_solution --bench printed no fitted alpha and B")
    return float(m.group(1)) * 1e-6, float(m.group(2)) * 1e9


def sgemm_rate():
    """The one-thread sgemm rate over the default model's products, FLOP/s (the best of REPS)."""
    best = 0
    for _ in range(REPS):
        out = subprocess.run([os.path.join(ROOT, "build", "sgemm_rate")], env=ENV, capture_output=True, text=True,
                             check=True).stdout
        best = max(best, float(re.search(r"over one training step's products: ([\d.]+) GFLOP/s", out).group(1)))
    return best * 1e9


def main():
    alpha, beta = alpha_beta()
    peak = sgemm_rate()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.*)", cpu)
    print(f"machine: {model.group(1) if model else 'unknown CPU'}, {os.cpu_count()} cores; {NP} ranks, one thread each")
    print(f"lab01's fit: alpha {alpha * 1e6:.2f} us a ring step, B {beta / 1e9:.2f} GB/s; "
          f"sgemm {peak / 1e9:.1f} GFLOP/s a thread (build/plan --peak, --efficiency 1)")
    print(f"{'run':<48}{'predicted':>10}{'measured':>10}{'ratio':>7}   "
          "the planner's step: compute, bubble, TP, PP, DP (ms)")
    with tempfile.TemporaryDirectory() as tmp:
        for lab, what, np, flags in RUNS:
            dump = os.path.join(tmp, f"{lab}.dump")
            best = None
            for _ in range(REPS):
                if lab == "ref":
                    out = subprocess.run([os.path.join(ROOT, "build", "ref"), *flags, "--steps", str(STEPS), "--dump",
                                          dump], env=ENV, capture_output=True, text=True, check=True).stdout
                else:
                    out = mpirun(np, f"{lab}_solution", *flags, "--no-ref", "--steps", str(STEPS), "--dump", dump)
                m = re.search(r"mean over steps \S+: ([\d.]+) ms/step", out)
                if not m:
                    sys.exit(f"{lab}_solution printed no mean step time")
                best = min(best or 1e30, float(m.group(1)) / 1e3)
            d = pldump.read(dump)
            cfg = config_of(d)
            rc = {"none": 0, "selective": 1, "full": 2}[cfg.get("recompute", "none")]
            config = f"1,1,1,1,0,0,{rc},{cfg['batch']}" if lab == "ref" else layout(lab, d, cfg, np)[0]
            shape = [f"--{k}={cfg[k]}" for k in ("layers", "dim", "heads", "seq", "vocab", "batch")]
            out = subprocess.run([os.path.join(ROOT, "build", "plan"), *shape, "--gpus", str(np), "--precision",
                                  cfg["precision"], "--peak", str(peak), "--efficiency", "1", "--alpha", str(alpha),
                                  "--beta", str(beta), "--config", config], capture_output=True, text=True,
                                 check=True).stdout
            p = {k: float(v) for k, v in (line.split() for line in out.splitlines())}
            parts = ", ".join(f"{1e3 * p[k]:.2f}" for k in ("t_compute", "t_bubble", "t_tp", "t_pp", "t_dp"))
            print(f"{lab + ' ' + what:<48}{1e3 * p['step']:>8.2f}ms{1e3 * best:>8.2f}ms{best / p['step']:>6.2f}x   "
                  f"{parts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
