#!/usr/bin/python3
"""torch_oracle.py: check the C reference trainer (build/ref) against PyTorch.

    /usr/bin/python3 tests/torch_oracle.py [--ref build/ref] [--keep DIR] [--dump FILE]

It runs `build/ref` on a small configuration with `--dump`, builds the same
GPT again in PyTorch from docs/model.md alone (float64: an independent
re-implementation, not a translation of the C code), loads the dumped initial
parameters into it and checks

  1. the loss and the gradient of every tensor at step 0 (`loss[0]`,
     `grad/first/<tensor>`),
  2. five steps of torch.optim.AdamW on the dumped batches: the loss of every
     step (`loss`) and the final parameters (`param/final/<tensor>`),
  3. a positive control: the same model run by PyTorch in float32 (another
     fp32 implementation) passes the same tolerances, so they are not tighter
     than fp32 rounding allows,
  4. negative controls: a perturbed gradient and wrong variants of the model
     and of the optimizer must be rejected by the same comparisons.

The C run is fp32 and the oracle float64, so what is measured is the C code's
fp32 rounding error; the tolerances below are budgets for that error, each
with its reason. Exit status: 0 all checks passed, 1 a check failed (or the
C program could not be run), 77 torch or numpy is missing (a visible skip,
never a pass).

`--dump FILE` checks an existing dump instead of running build/ref (its
configuration is read from its meta/config; it must have been written with
dropout 0 and hold grad/first/*).
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import pldump
except ImportError as e:   # pragma: no cover - depends on the machine
    print(f"SKIP torch oracle: {e} (install python3-torch and python3-numpy, "
          "and run with /usr/bin/python3)")
    sys.exit(77)

# The configuration build/ref runs for the oracle: small enough to take a
# second, large enough that every kind of tensor is exercised (2 blocks, 4
# heads of 16 channels, 32 positions).
REF_FLAGS = ["--steps", "5", "--layers", "2", "--dim", "64", "--heads", "4", "--seq", "32",
             "--batch", "4", "--vocab", "96", "--lr", "1e-3", "--seed", "7", "--device", "cpu"]

# ---------------------------------------------------------------------------
# Tolerances. fp32 keeps a relative precision of u = 2^-24 ~ 6e-8 per
# operation; a dot product of K terms accumulates a relative error of about
# sqrt(K) u typically and K u at worst (K is at most 4C = 256 here, and the
# B*T = 128 rows summed into a weight gradient). A few dozen such layers
# compound, and LayerNorm's and softmax's backward subtract nearly equal terms
# (which turns a small absolute error into a larger relative one), so a
# correct fp32 implementation lands around 1e-7..1e-5 relative.
#
# LOSS_RTOL: the loss is a mean over B*T = 128 tokens of -log softmax of
#   logits that come out of ~2L+1 matmuls (K <= 256, relative error ~1e-6
#   each at worst); the mean of 128 terms adds ~128 u ~ 1e-5 at worst, about
#   1e-6 typically. 1e-5 relative is the budget. The later steps' losses are
#   compared with the same budget: the two runs' parameters drift apart only
#   on elements whose gradient is almost zero (see PARAM below), and those
#   barely move the loss (to first order not at all).
LOSS_RTOL = 1e-5
# GRAD_RTOL: per tensor, ||g_c - g_t|| / ||g_t||. Each gradient element is
#   a sum over the 128 tokens of products that went through the whole
#   backward chain; a correct fp32 backward gives below 1e-6 (measured on
#   this model: the C code at most 5.1e-7, PyTorch fp32 at most 4.6e-7, see
#   the positive control), so 1e-5 leaves a factor of ~20 for a different
#   order of summation. A real bug (a missing term, a wrong scale, a
#   transposed matrix) gives O(1e-2..1), and even GELU in its erf form
#   instead of tanh (a 4e-5 difference at the initial scale) is rejected.
GRAD_RTOL = 1e-5
# A gradient that is zero in exact arithmetic cannot be compared relative to
#   itself. The key bias `attn.bk` is one: adding a constant vector to every
#   key adds q . bk to every score of a row, and softmax ignores a shift, so
#   dL/dbk = 0 and what either implementation computes is rounding residue
#   (~1e-18 in float64, ~1e-11 in fp32). Its error is measured relative to the
#   gradient of `attn.bq` of the same block, whose terms are of the same size
#   (the same dS_tj against k_j instead of q_t) and which is not zero.
ZERO_GRAD_SCALE = {"attn.bk": "attn.bq"}
# PARAM: after S AdamW steps. Adam divides each element's update by the
#   root mean square of its own gradient history, so an element moves by
#   about lr per step whatever the size of its gradient. Where a gradient is
#   far above its rounding error both runs take the same step to a relative
#   ~(gradient relative error); where a gradient is about as small as its
#   rounding error (attn.bk everywhere; elsewhere rare elements) the sign or
#   size of the step is rounding noise and the runs may part by up to
#   2 lr per step. Two measures follow:
#   - UPDATE_RTOL on ||p_c - p_t|| / ||p_t - p_0||: the error relative to how
#     far the parameters moved (not to ||p_t||, which is mostly the initial
#     value: LayerNorm weights of 1 move by 5e-3, so ||p_c - p_t||/||p_t||
#     would hide even a wrong step). The element-wise error is ~lr * (gradient
#     relative error of that element), heavy-tailed because of the elements
#     with small gradients, so its norm is well above the gradient's 1e-6:
#     measured ~1e-5..1e-4 for PyTorch fp32 (positive control). 2e-3 leaves a
#     factor of ~20; a wrong optimizer (L2 instead of decoupled decay, missing
#     bias correction, another beta) gives O(1e-2..1).
#   - the largest element error, in units of lr, against the hard bound of
#     Adam: |m_hat| / sqrt(v_hat) <= U_t (Cauchy-Schwarz on the moving
#     averages; U_t is about 1 for beta1 0.9, beta2 0.95), so two runs from
#     the same start differ by at most 2 lr sum_t U_t (plus weight decay's
#     share, lr wd |p_c - p_t| per step, second order). No single element can
#     be held tighter than that, because of the near-zero gradients; the
#     norm above is the precision test.
#   For attn.bk, whose float64 gradient is ~0, the oracle's step is ~0 and the
#   C run's is noise of at most lr U_t per step: the bound check alone applies.
UPDATE_RTOL = 2e-3


def adam_step_bound(beta1, beta2, t):
    """max |m_hat_t| / sqrt(v_hat_t) over all gradient histories g_1..g_t
    (eps = 0): by Cauchy-Schwarz, |sum a_i g_i| <= sqrt(sum a_i^2 / b_i)
    sqrt(sum b_i g_i^2) with a_i = (1-beta1) beta1^(t-i), b_i = (1-beta2)
    beta2^(t-i)."""
    s = sum(((1 - beta1) * beta1 ** k) ** 2 / ((1 - beta2) * beta2 ** k) for k in range(t))
    return math.sqrt(s) * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)


# ---------------------------------------------------------------------------
# The model, from docs/model.md.

def tensor_specs(cfg):
    """[(full name, shape)] in the model's canonical order."""
    V, T, C, L = cfg["vocab"], cfg["seq"], cfg["dim"], cfg["layers"]
    specs = [("embed.wte", (V, C)), ("embed.wpe", (T, C))]
    for l in range(L):
        u = f"block{l}."
        specs += [(u + "ln1.w", (C,)), (u + "ln1.b", (C,)),
                  (u + "attn.wq", (C, C)), (u + "attn.bq", (C,)),
                  (u + "attn.wk", (C, C)), (u + "attn.bk", (C,)),
                  (u + "attn.wv", (C, C)), (u + "attn.bv", (C,)),
                  (u + "attn.wo", (C, C)), (u + "attn.bo", (C,)),
                  (u + "ln2.w", (C,)), (u + "ln2.b", (C,)),
                  (u + "mlp.w1", (C, 4 * C)), (u + "mlp.b1", (4 * C,)),
                  (u + "mlp.w2", (4 * C, C)), (u + "mlp.b2", (C,))]
    specs += [("head.lnf.w", (C,)), ("head.lnf.b", (C,)), ("head.lm_head", (C, V))]
    return specs


def forward_loss(P, x, y, cfg, variant=""):
    """Mean cross-entropy of the GPT with parameters P (name -> tensor) on
    inputs x and targets y (B, T). `variant` names a deliberately wrong model
    for the negative controls: "gelu-erf", "no-scale", "ln-unbiased",
    "no-mask"."""
    B, T = x.shape
    C, NH, L, V = cfg["dim"], cfg["heads"], cfg["layers"], cfg["vocab"]
    hs = C // NH

    def layernorm(h, w, b):
        if variant == "ln-unbiased":   # wrong: the n-1 variance
            mu = h.mean(-1, keepdim=True)
            var = h.var(-1, unbiased=True, keepdim=True)
            return (h - mu) / torch.sqrt(var + 1e-5) * w + b
        return F.layer_norm(h, (C,), w, b, eps=1e-5)   # biased variance, eps 1e-5

    def gelu(h):
        return F.gelu(h) if variant == "gelu-erf" else F.gelu(h, approximate="tanh")

    causal = torch.ones(T, T, dtype=torch.bool).triu(1)   # True above the diagonal: masked
    scale = 1.0 if variant == "no-scale" else 1.0 / math.sqrt(hs)

    h = P["embed.wte"][x] + P["embed.wpe"][:T]             # (B, T, C); dropout 0
    for l in range(L):
        u = f"block{l}."
        a = layernorm(h, P[u + "ln1.w"], P[u + "ln1.b"])
        q = a @ P[u + "attn.wq"] + P[u + "attn.bq"]
        k = a @ P[u + "attn.wk"] + P[u + "attn.bk"]
        v = a @ P[u + "attn.wv"] + P[u + "attn.bv"]
        # heads: channels [h*hs, (h+1)*hs) -> (B, NH, T, hs)
        q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * scale          # (B, NH, T, T)
        if variant != "no-mask":
            scores = scores.masked_fill(causal, float("-inf"))
        att = torch.softmax(scores, dim=-1)
        yh = (att @ v).transpose(1, 2).reshape(B, T, C)
        h = h + (yh @ P[u + "attn.wo"] + P[u + "attn.bo"])
        m = layernorm(h, P[u + "ln2.w"], P[u + "ln2.b"])
        h = h + (gelu(m @ P[u + "mlp.w1"] + P[u + "mlp.b1"]) @ P[u + "mlp.w2"]
                 + P[u + "mlp.b2"])
    logits = layernorm(h, P["head.lnf.w"], P["head.lnf.b"]) @ P["head.lm_head"]
    return F.cross_entropy(logits.reshape(B * T, V), y.reshape(B * T))


def make_params(init, specs, dtype):
    return {n: torch.tensor(init[n], dtype=dtype).requires_grad_(True) for n, _ in specs}


def first_step(init, specs, batch_x, batch_y, cfg, dtype, variant=""):
    """Loss and gradients at the initial parameters on step 0's batch."""
    P = make_params(init, specs, dtype)
    loss = forward_loss(P, batch_x[0], batch_y[0], cfg, variant)
    loss.backward()
    return float(loss), {n: P[n].grad.double().numpy() for n, _ in specs}


def train(init, specs, batch_x, batch_y, cfg, dtype, optimizer="adamw", variant=""):
    """Losses of every step and the final parameters of `steps` optimizer
    steps. optimizer "adamw" is the model's; "adam-l2" (weight decay added to
    the gradient) is a wrong one for the negative control."""
    P = make_params(init, specs, dtype)
    params = [P[n] for n, _ in specs]
    kw = dict(lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
              weight_decay=cfg["wd"])
    opt = torch.optim.AdamW(params, **kw) if optimizer == "adamw" else torch.optim.Adam(params, **kw)
    losses = []
    for s in range(batch_x.shape[0]):
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(P, batch_x[s], batch_y[s], cfg, variant)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return np.array(losses), {n: P[n].detach().double().numpy() for n, _ in specs}


# ---------------------------------------------------------------------------
# Comparisons. Each returns (ok, a list of rows, a one-line summary).

def frob(a):
    return float(np.sqrt(np.sum(np.square(a, dtype=np.float64))))


def compare_loss(c_losses, t_losses):
    c = np.asarray(c_losses, np.float64)
    t = np.asarray(t_losses, np.float64)
    rel = np.abs(c - t) / np.abs(t)
    worst = int(np.argmax(rel))
    return bool(np.all(rel <= LOSS_RTOL) and np.all(np.isfinite(c))), rel, worst


def compare_grads(c_grads, t_grads, specs):
    """Rows (name, rel error, max abs error, ok); the error of a tensor whose
    exact gradient is zero is taken relative to its sibling's gradient."""
    rows = []
    for name, _ in specs:
        c = np.asarray(c_grads[name], np.float64)
        t = np.asarray(t_grads[name], np.float64)
        unit, _, tensor = name.partition(".")
        ref = t
        if tensor in ZERO_GRAD_SCALE:
            ref = np.asarray(t_grads[unit + "." + ZERO_GRAD_SCALE[tensor]], np.float64)
        denom = frob(ref)
        rel = frob(c - t) / denom if denom > 0 else frob(c - t)
        if not np.isfinite(rel):
            rel = math.inf
        rows.append((name, rel, float(np.max(np.abs(c - t))), rel <= GRAD_RTOL))
    return rows


def compare_params(c_final, t_final, init, specs, cfg, steps):
    """Rows (name, update rel error (None where it is not tested), max abs
    error / lr, rel error to ||p_t||, ok)."""
    lr = cfg["lr"]
    bound = 2 * sum(adam_step_bound(cfg["beta1"], cfg["beta2"], t) for t in range(1, steps + 1))
    bound *= 1.01   # weight decay's second-order share, lr wd |p_c - p_t| per step
    rows = []
    for name, _ in specs:
        c = np.asarray(c_final[name], np.float64)
        t = np.asarray(t_final[name], np.float64)
        p0 = np.asarray(init[name], np.float64)
        diff = c - t
        max_lr = float(np.max(np.abs(diff))) / lr if diff.size else 0.0
        rel_p = frob(diff) / frob(t) if frob(t) > 0 else frob(diff)
        tensor = name.partition(".")[2]
        ok = np.all(np.isfinite(c)) and max_lr <= bound
        upd = None
        if tensor not in ZERO_GRAD_SCALE:
            moved = frob(t - p0)
            upd = frob(diff) / moved if moved > 0 else math.inf
            ok = ok and upd <= UPDATE_RTOL
        else:
            rel_p = None   # ||p_t|| is ~0: the bias starts at 0 and its step is ~0
        rows.append((name, upd, max_lr, rel_p, bool(ok)))
    return rows, bound


# ---------------------------------------------------------------------------

def parse_config(text):
    cfg = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            cfg[key] = value.strip()
    out = {}
    for k in ("steps", "batch", "seq", "dim", "heads", "layers", "vocab"):
        out[k] = int(cfg[k])
    for k in ("lr", "beta1", "beta2", "eps", "wd", "dropout"):
        out[k] = float(cfg[k])
    out["micro"] = cfg.get("micro", "1")
    out["seed"] = cfg.get("seed", "?")
    return out


def run_ref(ref, outdir, name="ref.bin", flags=None, label="torch oracle"):
    """build/ref with `flags` (REF_FLAGS by default), dumping to outdir/name;
    a failure ends the check, saying so under `label`."""
    if not (os.path.isfile(ref) and os.access(ref, os.X_OK)):
        print(f"FAIL {label}: {ref} does not exist or is not executable; "
              "build it with `make` first")
        sys.exit(1)
    path = os.path.join(outdir, name)
    cmd = [ref] + (REF_FLAGS if flags is None else flags) + ["--dump", path]
    print("running:", " ".join(cmd))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300, env=env)
    except subprocess.TimeoutExpired:
        print(f"FAIL {label}: {' '.join(cmd)} ran past 300 s")
        sys.exit(1)
    if p.returncode != 0 or not os.path.isfile(path):
        print(p.stdout[-4000:])
        print(f"FAIL {label}: {ref} exited with {p.returncode}"
              + ("" if os.path.isfile(path) else f" and wrote no {path}"))
        sys.exit(1)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=os.path.join(ROOT, "build", "ref"),
                    help="the C reference trainer (default: build/ref)")
    ap.add_argument("--keep", metavar="DIR",
                    help="run in DIR and keep the dump there (default: a temporary folder)")
    ap.add_argument("--dump", metavar="FILE",
                    help="check this existing dump instead of running the reference")
    args = ap.parse_args()

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    tmp = None
    if args.dump:
        path = args.dump
    else:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            outdir = args.keep
        else:
            outdir = tmp = tempfile.mkdtemp(prefix="torch_oracle.")
        path = run_ref(args.ref, outdir)
    try:
        ok = check(path)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


def check(path):
    d = pldump.read(path)
    cfg = parse_config(d["meta/config"])
    specs = tensor_specs(cfg)
    steps = cfg["steps"]
    B, T = cfg["batch"], cfg["seq"]
    results = []   # (what, ok)

    def record(what, ok, detail=""):
        results.append((what, bool(ok)))
        if not ok:
            print(f"FAILED: {what}{': ' + detail if detail else ''}")

    print(f"dump {path}: steps {steps} B {B} T {T} C {cfg['dim']} NH {cfg['heads']} "
          f"L {cfg['layers']} V {cfg['vocab']} lr {cfg['lr']:g} betas ({cfg['beta1']:g}, "
          f"{cfg['beta2']:g}) eps {cfg['eps']:g} wd {cfg['wd']:g} dropout {cfg['dropout']:g} "
          f"micro {cfg['micro']}")

    # -- the dump has what the contract says, in the shapes it says
    problems = []
    if cfg["dropout"] != 0:
        problems.append(f"dropout is {cfg['dropout']:g}; the oracle needs 0")
    if cfg["dim"] % cfg["heads"]:
        problems.append("dim is not a multiple of heads")
    for name, shape in (("batch/x", (steps, B, T)), ("batch/y", (steps, B, T)), ("loss", (steps,))):
        if name not in d or isinstance(d[name], str) or d[name].shape != shape:
            problems.append(f"{name} missing or not of shape {shape}")
    for prefix in ("param/init/", "grad/first/", "param/final/"):
        for n, shape in specs:
            a = d.get(prefix + n)
            if a is None or isinstance(a, str) or a.shape != shape:
                problems.append(f"{prefix}{n} missing or not of shape {shape}")
        extra = sorted(set(k for k in d if k.startswith(prefix)) - {prefix + n for n, _ in specs})
        if extra:
            problems.append(f"unexpected arrays {extra[:5]}")
    record("dump holds every tensor in its documented shape", not problems, "; ".join(problems))
    if problems:
        for p in problems[:20]:
            print("  " + p)
        return summary(results)
    vmax = int(max(d["batch/x"].max(), d["batch/y"].max()))
    vmin = int(min(d["batch/x"].min(), d["batch/y"].min()))
    if vmin < 0 or vmax >= cfg["vocab"]:
        record("tokens within the vocabulary", False, f"range [{vmin}, {vmax}]")
        return summary(results)

    init = {n: d["param/init/" + n] for n, _ in specs}
    c_grad = {n: d["grad/first/" + n] for n, _ in specs}
    c_final = {n: d["param/final/" + n] for n, _ in specs}
    c_loss = d["loss"]
    bx = torch.from_numpy(d["batch/x"].astype(np.int64))
    by = torch.from_numpy(d["batch/y"].astype(np.int64))

    # -- the initialisation's statistics (docs/model.md): not a precision
    #    check, a check that the oracle reads the tensors the way they were meant
    L = cfg["layers"]
    init_bad = []
    for n, shape in specs:
        t = n.partition(".")[2]
        a = init[n].astype(np.float64)
        if len(shape) == 2:
            std = 0.02 / math.sqrt(2 * L) if t in ("attn.wo", "mlp.w2") else 0.02
            if abs(a.std() / std - 1) > 6 / math.sqrt(a.size) + 0.02 or abs(a.mean()) > 6 * std / math.sqrt(a.size):
                init_bad.append(f"{n} std {a.std():.4g} (want {std:.4g}) mean {a.mean():.2g}")
        else:
            want = 1.0 if t.endswith(".w") and t.startswith("ln") else 0.0
            if np.any(a != want):
                init_bad.append(f"{n} is not all {want:g}")
    record("initial parameters follow docs/model.md (std, ones, zeros)", not init_bad,
           "; ".join(init_bad[:4]))

    # -- 1. step 0: loss and gradients
    t_loss0, t_grad = first_step(init, specs, bx, by, cfg, torch.float64)
    rel0 = abs(float(c_loss[0]) - t_loss0) / abs(t_loss0)
    print(f"\nstep 0 loss: C {float(c_loss[0]):.8f}  torch float64 {t_loss0:.8f}  "
          f"rel error {rel0:.2e} (tolerance {LOSS_RTOL:.0e})")
    record("loss at step 0", rel0 <= LOSS_RTOL, f"rel error {rel0:.3e}")

    # positive control: PyTorch fp32 from the same start
    f_loss0, f_grad = first_step(init, specs, bx, by, cfg, torch.float32)
    f_rows = {r[0]: r for r in compare_grads(f_grad, t_grad, specs)}
    rows = compare_grads(c_grad, t_grad, specs)
    print(f"\ngradients at step 0: ||g_C - g_t|| / ||g_t|| per tensor (tolerance {GRAD_RTOL:.0e}; "
          "attn.bk relative to ||g(attn.bq)||, its exact gradient being 0);\n"
          "torch fp32: the same measure for PyTorch in float32 (the positive control)")
    print(f"  {'tensor':<22} {'rel Frobenius':>13} {'max abs':>10} {'torch fp32':>11}  ")
    for name, rel, mx, ok in rows:
        print(f"  {name:<22} {rel:13.2e} {mx:10.2e} {f_rows[name][1]:11.2e}  {'ok' if ok else 'FAIL'}")
        record(f"gradient of {name}", ok, f"rel error {rel:.3e}, max abs {mx:.3e}")
    worst = max(rows, key=lambda r: r[1])
    print(f"  largest: {worst[0]} {worst[1]:.2e}")

    # -- 2. five AdamW steps
    t_losses, t_final = train(init, specs, bx, by, cfg, torch.float64)
    lok, lrel, lworst = compare_loss(c_loss, t_losses)
    print(f"\nlosses over {steps} AdamW steps (tolerance {LOSS_RTOL:.0e} relative):")
    for s in range(steps):
        print(f"  step {s}: C {float(c_loss[s]):.8f}  torch {t_losses[s]:.8f}  rel {lrel[s]:.2e}")
    record(f"loss of every step ({steps})", lok, f"step {lworst} rel error {lrel[lworst]:.3e}")

    f_losses, f_final = train(init, specs, bx, by, cfg, torch.float32)
    prow, bound = compare_params(c_final, t_final, init, specs, cfg, steps)
    frow = {r[0]: r for r in compare_params(f_final, t_final, init, specs, cfg, steps)[0]}
    print(f"\nparameters after {steps} steps: update error ||p_C - p_t|| / ||p_t - p_0|| "
          f"(tolerance {UPDATE_RTOL:.0e}),\nmax |p_C - p_t| in units of lr (Adam's bound "
          f"{bound:.2f} lr), ||p_C - p_t|| / ||p_t||; torch fp32: its update error")
    print(f"  {'tensor':<22} {'update err':>10} {'max/lr':>9} {'rel to p':>9} {'torch fp32':>11}")
    fmt = lambda v: f"{'n/a':>10}" if v is None else f"{v:10.2e}"
    for name, upd, max_lr, rel_p, ok in prow:
        print(f"  {name:<22} {fmt(upd)} {max_lr:9.2e} {fmt(rel_p)[1:]} {fmt(frow[name][1]):>11}  "
              f"{'ok' if ok else 'FAIL'}")
        record(f"final {name}", ok, f"update error {fmt(upd).strip()}, max {max_lr:.3g} lr")

    # -- 3. positive control: an honest fp32 implementation passes every tolerance
    f_ok = (abs(f_loss0 - t_loss0) / abs(t_loss0) <= LOSS_RTOL
            and all(r[3] for r in f_rows.values())
            and compare_loss(f_losses, t_losses)[0]
            and all(r[4] for r in frow.values()))
    f_gmax = max(r[1] for r in f_rows.values())
    f_umax = max(r[1] for r in frow.values() if r[1] is not None)
    print(f"\npositive control, PyTorch fp32: largest gradient error {f_gmax:.2e}, "
          f"largest update error {f_umax:.2e}, largest loss error "
          f"{np.max(compare_loss(f_losses, t_losses)[1]):.2e}")
    record("positive control: PyTorch fp32 passes the same tolerances", f_ok)

    # -- 4. negative controls: the same comparisons must reject these
    print("\nnegative controls (each must be rejected):")
    # a) one element of the C gradient moved by 1e-3 of its tensor's norm
    name = "block0.mlp.w1"
    bad = {n: g.copy() for n, g in c_grad.items()}
    i = np.unravel_index(np.argmax(np.abs(bad[name])), bad[name].shape)
    bad[name][i] += 1e-3 * frob(t_grad[name])
    rej = not all(r[3] for r in compare_grads(bad, t_grad, specs))
    print(f"  {name}{list(i)} of the C gradient + 1e-3 ||g||: {'rejected' if rej else 'ACCEPTED'}")
    record("negative control: one perturbed gradient element is rejected", rej)
    # b) wrong models against the C gradients
    for variant, what in (("no-scale", "attention without 1/sqrt(hs)"),
                          ("ln-unbiased", "LayerNorm with the n-1 variance"),
                          ("no-mask", "attention without the causal mask"),
                          ("gelu-erf", "GELU in its erf form instead of tanh")):
        v_loss, v_grad = first_step(init, specs, bx, by, cfg, torch.float64, variant)
        vrows = compare_grads(c_grad, v_grad, specs)
        vworst = max(vrows, key=lambda r: r[1])
        vloss = abs(float(c_loss[0]) - v_loss) / abs(v_loss)
        rej = not all(r[3] for r in vrows) or vloss > LOSS_RTOL
        print(f"  {what}: loss rel {vloss:.2e}, largest gradient error {vworst[1]:.2e} "
              f"({vworst[0]}): {'rejected' if rej else 'NOT rejected'}")
        record(f"negative control: {what} is rejected", rej)
    # c) the wrong optimizer: Adam with L2 weight decay (coupled) for AdamW
    a_losses, a_final = train(init, specs, bx, by, cfg, torch.float64, optimizer="adam-l2")
    arow, _ = compare_params(c_final, a_final, init, specs, cfg, steps)
    aworst = max((r for r in arow if r[1] is not None), key=lambda r: r[1])
    rej = not all(r[4] for r in arow)
    print(f"  Adam with L2 decay instead of AdamW: largest update error {aworst[1]:.2e} "
          f"({aworst[0]}): {'rejected' if rej else 'NOT rejected'}")
    record("negative control: Adam with L2 weight decay is rejected", rej)

    return summary(results)


def summary(results, label="torch oracle"):
    passed = sum(ok for _, ok in results)
    failed = len(results) - passed
    print(f"\n{label}: {passed} passed, {failed} failed")
    return failed == 0


if __name__ == "__main__":
    sys.exit(main())
