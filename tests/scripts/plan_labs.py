"""plan_labs.py: the planner's memory and bytes per rank against what the
labs' graded runs measure, labs 03 to 07.

Each run is one of the lab's graded runs (grader/spec_labNN.c), at its shape,
with --no-ref and 2 or 3 steps; it writes --dump, read back with
scripts/pldump.py. Its layout (t, p, v, dp, SP, ZeRO stage, recomputation,
micro-batch, precision) and shape come from the dump, and `build/plan
--config` evaluates the same configuration with the planner's code
(grader/plan.h), which prints each pipeline stage as a lab measures a rank of
it (plan_stage: lab05's partition, bus bytes sent and received per group).
Every rank is compared with its stage's figures:

- held equal: PARAMS, OPTIM and GRADS (mem/peak), where the lab's grader
  holds the run to the formula itself (zero_budget for lab03, psi_replicated
  + psi_split / t for lab04 and lab06, a stage's units for lab05; the bf16
  runs 2 + 2 + 12 bytes a parameter); the bus bytes a step on each group,
  from the ledger (comm/ledger: op, group, bytes, calls), tensor parallel
  (lab04's tp_bytes_per_step, with SP lab06's replicated gradients),
  pipeline (lab05's messages) and data parallel (lab03's and the grids'
  all-reduces), as each grader holds the total to its formula; and lab06's
  activations of a layer (sp/acts_layer_on or _off, what its harness
  allocates for a layer) to sp_layer_bytes, the one activations figure the
  lab and the planner define alike (runs without recomputation).
- held at or above: GRADS at ZeRO 2 and 3 (zero_budget's is a bound: one
  unit's whole gradient at its peak, whichever unit the stage frees last),
  and the micro-batches alive on a stage (pp/rank_stage/max_live), which
  lab05's grader bounds by pp_budget's k.
- printed, not held: ACTS. The planner counts a layer's kept tensors
  (sp_layer_bytes) times the layers and the micro-batches alive, plus the
  logits and recomputation's set; a lab's harness allocates its own scratch
  (lab03 keeps the whole model's, lab05 a boundary's buffers), and its
  grader holds ACTS to what its harness allocated, which the planner does
  not know.

Left out, the planner having no such case: lab04's naive MLP, lab05's GPipe,
zero-bubble and stage-boundary recomputation schedules (the planner's are
1F1B and interleaved, recomputation per block), and interleaved runs with
more virtual stages than blocks.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import pldump  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
MEM = ("params", "grads", "optim", "acts")   # mem/peak's first four columns: PARAMS, GRADS, OPTIM, ACTS
ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, SEND, RECV, BARRIER = range(7)   # common/comm.h's CommOp

# (lab, the grader's run name, ranks, flags): a representative few of each
# lab's graded runs (grader/spec_labNN.c), fewer steps.
L03 = "--dim 128 --seq 64 --layers 4 --steps 2"
L03_BF16 = "--dim 128 --seq 64 --layers 4 --steps 3 --precision bf16"
L04 = L06 = "--layers 2 --steps 2"
RUNS = [
    ("lab03", "np2-stage1", 2, f"{L03} --stage 1"),
    ("lab03", "np2-stage2", 2, f"{L03} --stage 2"),
    ("lab03", "np2-stage3", 2, f"{L03} --stage 3"),
    ("lab03", "np3-stage2", 3, f"{L03} --batch 6 --stage 2"),
    ("lab03", "np2-stage1-bf16", 2, f"{L03_BF16} --stage 1"),
    ("lab03", "np3-stage3-bf16", 3, f"{L03_BF16} --batch 6 --stage 3"),
    ("lab04", "np2", 2, L04),
    ("lab04", "np3-heads6", 3, f"{L04} --heads 6 --dim 96 --vocab 192"),
    ("lab04", "np4-dp2-tp2", 4, f"{L04} --tp 2"),
    ("lab04", "np2-bf16", 2, f"{L04} --precision bf16"),
    ("lab04", "np2-recompute-full", 2, f"{L04} --recompute full --dropout 0.1"),
    ("lab05", "np2-1f1b-m4", 2, "--steps 2 --schedule 1f1b --micro 4"),
    ("lab05", "np4-1f1b-m8", 4, "--steps 2 --schedule 1f1b --micro 8"),
    ("lab05", "np3-1f1b-m4-recompute-selective", 3, "--steps 2 --schedule 1f1b --micro 4 --recompute selective"),
    ("lab05", "np4-dp2-pp2", 4, "--steps 2 --schedule 1f1b --micro 2 --pp 2"),
    ("lab05", "np2-1f1b-m4-bf16", 2, "--steps 2 --schedule 1f1b --micro 4 --precision bf16"),
    ("lab05", "np4-interleaved-v2-m4-layers10", 4,
     "--steps 2 --schedule interleaved --virtual 2 --micro 4 --layers 10"),
    ("lab06", "np2", 2, L06),
    ("lab06", "np2-sp-off", 2, f"{L06} --sp off"),
    ("lab06", "np3-heads6", 3, f"{L06} --heads 6 --dim 96 --vocab 192 --seq 51"),
    ("lab06", "np4-dp2-tp2", 4, f"{L06} --tp 2"),
    ("lab06", "np2-bf16", 2, f"{L06} --precision bf16"),
    ("lab06", "np2-recompute-selective", 2, f"{L06} --recompute selective"),
    ("lab06", "np2-recompute-full", 2, f"{L06} --recompute full"),
]

# ---- lab07 ------------------------------------------------------------------
# The capstone's grids (grader/spec_lab07.c): data, tensor (with sequence)
# and pipeline parallelism together, and ZeRO-1 over the DP group. The odd
# pipeline at 4 layers: the planner's stages hold whole layers (p <= L),
# lab07's graded run puts 3 stages on 2 layers' 4 units.
L07 = "--layers 2 --steps 2"
LAB07_RUNS = [
    ("lab07", "np8-t2-p2-dp2", 8, f"{L07} --tp 2 --pp 2"),
    ("lab07", "np6-t2-p3-layers4", 6, "--steps 2 --tp 2 --pp 3 --micro 4"),
    ("lab07", "np4-t2-dp2-zero1", 4, f"{L07} --tp 2 --zero 1"),
]
RUNS += LAB07_RUNS


def config_of(d):
    """The run's flags as its dump records them (meta/config: "name value" lines)."""
    return dict(line.split(" ", 1) for line in d["meta/config"].splitlines() if " " in line)


def scalar(d, name, default):
    return int(d[name]) if name in d else default


def layout(lab, d, cfg, N):
    """The planner's T,P,V,DP,SP,ZERO,RECOMPUTE,B from a lab's dump, and its stage of each rank."""
    batch = int(cfg["batch"])
    t = p = v = dp = m = 1
    sp = zero = 0
    stage = [0] * N
    if lab == "lab03":
        dp, zero = N, scalar(d, "zero/stage", 0)
    elif lab == "lab04":
        t, dp = scalar(d, "tp/t", 1), scalar(d, "tp/dp", 1)
    elif lab == "lab05":
        p, v, dp, m = scalar(d, "pp/p", 1), scalar(d, "pp/v", 1), scalar(d, "pp/dp", 1), scalar(d, "pp/m", 1)
        stage = [int(s) for s in d["pp/rank_stage/stage"]]
    elif lab == "lab06":
        t, dp, sp = scalar(d, "sp/t", 1), scalar(d, "sp/dp", 1), scalar(d, "sp/on", 1)
    elif lab == "lab07":
        t, p, dp = scalar(d, "lab07/t", 1), scalar(d, "lab07/p", 1), scalar(d, "lab07/dp", 1)
        zero, m, sp = scalar(d, "lab07/zero", 0), int(cfg["micro"]), int(scalar(d, "lab07/t", 1) > 1)
        stage = [int(row[0]) for row in d["lab07/rank"]]   # report_given.c's facts: the stage first
    else:
        raise SystemExit(f"plan_labs.py: no layout for {lab}")
    rc = {"none": 0, "selective": 1, "full": 2}[cfg.get("recompute", "none")]
    return f"{t},{p},{v},{dp},{sp},{zero},{rc},{batch // dp // m}", t, stage


def bus_by_group(ledger, q, t, steps):
    """Rank q's bus bytes a step on its tensor-parallel group (the t ranks
    from t (q // t)), its pipeline (sends and receives) and the rest (data
    parallel), from its ledger lines (op, group size, group, bytes, calls)."""
    tp_group = sum(1 << r for r in range(t * (q // t), t * (q // t) + t))
    out = {"tp": 0.0, "pp": 0.0, "dp": 0.0}
    for op, n, group, nbytes, calls in ledger[q]:
        if op < 0:
            continue
        factor = {ALL_REDUCE: 2 * (n - 1) / n, REDUCE_SCATTER: (n - 1) / n, ALL_GATHER: (n - 1) / n}.get(op, 1)
        if op == BARRIER:
            factor = 0
        key = "pp" if op in (SEND, RECV) else "tp" if t > 1 and group == tp_group else "dp"
        out[key] += factor * nbytes * calls / steps
    return out


def held(how, planner, measured):
    if how == "=":
        return abs(planner - measured) <= 0.5 + 1e-9 * abs(measured)
    if how == ">=":
        return planner >= measured - 0.5
    return True


def planner(cfg, N, config):
    """build/plan --config's "name value" lines at the run's shape."""
    shape = [f"--{k}={cfg[k]}" for k in ("layers", "dim", "heads", "seq", "vocab", "batch")]
    out = subprocess.run([os.path.join(ROOT, "build", "plan"), *shape, "--gpus", str(N), "--precision",
                          cfg["precision"], "--config", config], capture_output=True, text=True, check=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def rows(lab, d, cfg, plan, stage, t, zero):
    """(stage, ranks, figure, the planner's, the measured of each rank, how held), stage by stage."""
    N, steps = len(stage), len(d["loss"])
    peak, ledger = d["mem/peak"], d["comm/ledger"]
    out = []
    for s in sorted(set(stage)):
        ranks = [q for q in range(N) if stage[q] == s]
        for i, fig in enumerate(MEM):
            how = "" if fig == "acts" else ">=" if fig == "grads" and zero >= 2 else "="
            out.append((s, ranks, fig, plan[f"stage{s}.{fig}"], [peak[q][i] for q in ranks], how))
        bus = [bus_by_group(ledger, q, t, steps) for q in ranks]
        for g in ("tp", "pp", "dp"):
            out.append((s, ranks, f"{g} bytes", plan[f"stage{s}.{g}_bytes"], [b[g] for b in bus], "="))
        if lab == "lab05":
            out.append((s, ranks, "alive", plan[f"stage{s}.k"], [d["pp/rank_stage/max_live"][q] for q in ranks], ">="))
        if lab == "lab06" and cfg["recompute"] == "none":
            layer = d["sp/acts_layer_on" if int(d["sp/on"]) else "sp/acts_layer_off"]
            out.append((s, ranks, "layer acts", plan[f"stage{s}.layer_acts"], [float(layer)], "="))
    return out


def wrong(lab, config, stage):
    """A negative control: the run's configuration with one thing wrong, which
    must move a held figure (what is changed, the configuration, the stages)."""
    t, p, v, dp, sp, zero, rc, b = (int(x) for x in config.split(","))
    if lab == "lab03":
        return f"ZeRO-{(zero + 1) % 4} for ZeRO-{zero}", f"{t},{p},{v},{dp},{sp},{(zero + 1) % 4},{rc},{b}", stage
    if lab == "lab04":
        return f"t 1 dp {t * dp} for t {t}", f"1,{p},{v},{t * dp},{sp},{zero},{rc},{b * dp // (t * dp)}", stage
    if lab == "lab05":
        return "the stages in reverse", config, [p - 1 - s for s in stage]
    return f"SP {'off' if sp else 'on'}", f"{t},{p},{v},{dp},{1 - sp},{zero},{rc},{b}", stage


def compare(lab, name, N, flags, tmp, control):
    dump = os.path.join(tmp, f"{lab}-{name}.dump")
    prog = os.path.join(ROOT, "build", f"{lab}_solution")
    run = subprocess.run(["mpirun", "--oversubscribe", "-np", str(N), prog, *flags.split(), "--no-ref", "--dump", dump],
                         env=ENV, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{lab} {name}: the run failed (exit {run.returncode})\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
        return 1
    d = pldump.read(dump)
    cfg = config_of(d)
    config, t, stage = layout(lab, d, cfg, N)
    assert not d["comm/ledger_full"].any(), f"{lab} {name}: the ledger overflowed"
    zero = int(config.split(",")[5])
    failures = 0
    for s, ranks, fig, planned, measured, how in rows(lab, d, cfg, planner(cfg, N, config), stage, t, zero):
        ok = all(held(how, planned, x) for x in measured)
        failures += not ok
        shown = max(measured, key=lambda x: abs(x - planned))   # the rank farthest from the planner
        if planned == 0 and shown == 0 and ok:
            continue   # held, not shown: a group this run does not have
        where = f"stage {s}" if lab == "lab05" else f"{len(ranks)} rank{'s' * (len(ranks) > 1)}"
        print(f"{lab} {name:<32}{where:<9}{fig:<12}{planned:>13.0f}{shown:>13.0f}  "
              f"{how or '(shown)'}{'' if ok else '  FAIL'}")
    if control:
        what, config, stage = wrong(lab, config, stage)
        moved = sum(not all(held(how, planned, x) for x in measured)
                    for _, _, _, planned, measured, how in rows(lab, d, cfg, planner(cfg, N, config), stage, t, zero)
                    if how)
        print(f"{lab} {name:<32}negative control, {what}: {moved} held figures differ{'' if moved else '  FAIL'}")
        failures += not moved
    return failures


def main():
    start = time.time()
    failures = 0
    print(f"{'run':<38}{'ranks':<9}{'figure':<12}{'planner':>13}{'measured':>13}  held")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (lab, name, N, flags) in enumerate(RUNS):
            # A negative control on each lab's first run.
            failures += compare(lab, name, N, flags, tmp, control=all(r[0] != lab for r in RUNS[:i]))
    print(f"{len(RUNS)} runs in {time.time() - start:.0f} s: " +
          ("the planner's figures are the labs'" if not failures else f"{failures} figures differ"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
