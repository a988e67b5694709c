#!/usr/bin/python3
"""torch_oracle_bf16.py: check build/ref --precision bf16 against PyTorch.

    /usr/bin/python3 tests/torch_oracle_bf16.py [--ref build/ref] [--keep DIR]

It runs `build/ref --precision bf16` (mixed precision: bf16 weights,
gradients and kept activations; fp32 master weights and moments) on the
configuration of tests/torch_oracle.py with `--dump`, builds the same GPT
again in PyTorch with the rounding docs/model.md ("Mixed precision") puts in
it, and checks

  1. step 0: the loss and the bf16 gradient of every tensor (`loss[0]`,
     `grad/first/<tensor>`) against PyTorch's bf16 model: weights
     bf16(param/init), every kept activation and the residual stream and its
     gradient rounded to bf16 where the page says, the gradient entering a
     product rounded to bf16, products of bf16 values summed in float64,
     LayerNorm, GELU, the attention core and the cross-entropy in float64,
     each unit's parameter gradient rounded to bf16 once;
  2. five steps of torch.optim.AdamW on a float64 master copy (the gradient:
     the bf16 one, widened; the bf16 weights rewritten from the master after
     each step): the loss of every step and the final master
     (`param/final/<tensor>`); the dump's own form (grad/first exactly bf16,
     param/final finer than bf16: a master copy);
  3. positive controls, legitimately different bf16 runs that must pass the
     same tolerances: the PyTorch model summing in float32 instead of
     float64, build/ref --rounding alt (another machine's rounding), and
     build/ref --master off against this model without its master copy;
  4. negative controls the same comparisons must reject: the fp32 model (no
     bf16 rounding at all, from the fp32 weights and from the bf16 ones), a
     bf16 model that rounds at other points (PyTorch's plain
     .to(torch.bfloat16): every op's output bf16), the C gradient with one
     tensor scaled by 1.01 or one row dropped, and the optimizer without the
     master copy (this model's, and build/ref --master off).

Why the tolerances are wide, and how wide. The float64 oracle rounds to
bf16 at the same points as the C code; the C code computes in fp32, so some
values that lie within fp32's error of a bf16 rounding boundary round the
other way (one bf16 step, 2^-8 relative), and each such flip moves what is
computed from it by far more than fp32's error, which flips more values
downstream: two correct bf16 runs that differ only in fp32 summation order
part by a sizeable fraction of bf16's own effect. Measured at this
configuration over 11 seeds (1-12 but 7) and seed 7, each run against the
float64 oracle: build/ref, build/ref --rounding alt, PyTorch in float32 and,
at seed 7, OpenBLAS's Prescott and Haswell kernels (38 legitimate runs; and
build/ref --master off against this model without master, 12 more).
Either a run has no early flip and matches almost bit for bit (seeds 3, 4:
0.6% and 1.1% of gradient elements differ), or it cascades (up to 31% of
elements differ, by one bf16 step or a few). The fp32 model differs from
the bf16 one in 70% of the elements. So the bounds below sit between the
largest legitimate figure and the fp32 model's, with the margins they can
have (1.4x to 2.9x over the legitimate runs, not the 20x of the fp32
oracle; the fp32 model rejected at seed 7 by 1.25x to 2.6x); each bound's
comment gives both figures. Where the fp32 model cannot be told
apart at a bound (the attention key bias, the losses of later steps, single
tensors' parameters), the output says so instead of pretending. Nor can one
rounding point left out alone be told apart (measured: the gradient entering
the products kept in fp32 gives a pooled 3.1e-3 against 3e-3, the residual
stream's gradient kept in fp32 2.5e-3): this checks the bf16 run as a whole.

Exit status: 0 all checks passed, 1 a check failed (or the C program could
not be run), 77 torch or numpy is missing (a visible skip, never a pass).
"""
import argparse
import math
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import pldump
except ImportError as e:   # pragma: no cover - depends on the machine
    print(f"SKIP torch oracle bf16: {e} (install python3-torch and python3-numpy, "
          "and run with /usr/bin/python3)")
    sys.exit(77)
import torch_oracle as fp32   # the fp32 oracle: its model, helpers and configuration

# torch_oracle.py's configuration, in bf16.
REF_FLAGS = fp32.REF_FLAGS + ["--precision", "bf16"]

# ---------------------------------------------------------------------------
# Tolerances. "legit" is the largest figure of the 38 legitimate runs above,
# "fp32" the fp32 model's (from the fp32 weights, gradient rounded to bf16)
# smallest over the 12 seeds, and at seed 7 (this configuration) in brackets.
#
# LOSS0_RTOL: the loss at step 0, relative. A flip moves a few tokens' losses
#   by ~2^-8 of a logit's change; the mean over 128 tokens hides most of it.
#   legit 2.8e-6, fp32 8.2e-6 (2.1e-5): 8e-6 leaves 2.9x over the legit runs
#   and rejects the fp32 model at seed 7 by 2.6x (at its closest seed, 3, by
#   1.03x only).
LOSS0_RTOL = 8e-6
# GRAD_RTOL: per tensor, ||g_C - g_t|| / ||g_t|| (attn.bk against
#   ||g(attn.bq)||: its exact gradient is rounding residue, see below). A
#   flipped element is one bf16 step, 2^-8 = 3.9e-3 relative, so a tensor of
#   64 elements with a few flips reaches ~3e-3. legit 3.2e-3 (block0.ln1.w
#   at seed 7 itself), fp32 worst tensor 8.1e-3 (9.4e-3): 6e-3 leaves 1.9x
#   and rejects a tensor scaled by 1.01.
GRAD_RTOL = 6e-3
# GRAD_POOLED_RTOL: the same over all tensors at once (attn.bk left out), the
#   figure that tells bf16 from fp32 best: legit 1.6e-3, fp32 4.2e-3
#   (4.4e-3): 3e-3 leaves 1.9x and rejects fp32 by 1.4x (1.5x).
GRAD_POOLED_RTOL = 3e-3
# The key bias: softmax ignores a shift of a row's scores, so dL/d(attn.bk)
#   is 0 in exact arithmetic; the bf16 model's is residue of the rounded
#   probabilities and dk, 1.1e-3..2.3e-3 of ||g(attn.bq)||, and the
#   legitimate runs part by up to 1.4e-3, the fp32 model by 1.1e-3..2.3e-3:
#   no bound can tell them apart, nor a zero gradient from the residue. It is
#   held to GRAD_RTOL relative to attn.bq (fp32.ZERO_GRAD_SCALE), which
#   bounds it without testing it.
# LOSS_RTOL: the losses of steps 0..4, relative. The cascades of step 0 move
#   the Adam updates of elements with small gradients (see below), and the
#   later losses with them: legit 4.5e-5; 1e-4 leaves 2.2x. The fp32 model
#   gives 7.9e-5..1.7e-4 (1.0e-4): not told apart here (step 0's loss is).
LOSS_RTOL = 1e-4
# UPDATE_RTOL: per tensor, ||p_C - p_t|| / ||p_t - p_0|| after 5 steps
#   (torch_oracle.py's measure: relative to how far the master moved). Adam
#   normalises each element's step, so an element whose gradient is about as
#   small as a bf16 flip can step the other way; in a bias of 64 elements one
#   such element is a large share of the tensor's motion. legit 0.11
#   (block1.attn.bq at seed 11); 0.25 leaves 2.2x. The optimizer without a
#   master copy moves the LayerNorm weights (1.0, whose bf16 step 2^-7 is
#   7.8 times lr) not at all: 1.0, rejected 4x. The fp32 model (at most 0.13)
#   is not told apart by a single tensor.
UPDATE_RTOL = 0.25
# UPDATE_POOLED_RTOL: the same over all tensors at once (attn.bk left out):
#   legit 1.6e-2 (1.8e-2: --master off against the model without master,
#   seed 6), fp32 2.8e-2 (3.1e-2): 2.5e-2 leaves 1.4x and rejects the fp32
#   model by 1.25x.
UPDATE_POOLED_RTOL = 2.5e-2
# Every element, attn.bk too, within Adam's reach (torch_oracle.py): two
#   runs from the same start part by at most 2 lr sum_t U_t (10.1 lr after 5
#   steps); legit 7.1 lr.


# ---------------------------------------------------------------------------
# Where docs/model.md rounds: autograd functions around the float ops.

def bf16(x):
    """x rounded to bf16 (nearest, ties to even) in x's own dtype."""
    return x.to(torch.bfloat16).to(x.dtype)


class Keep(torch.autograd.Function):
    """A kept activation: rounded to bf16 in the forward pass; what comes
    after (and the backward pass) reads the rounded tensor."""
    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, g):
        return g


class ProductIn(torch.autograd.Function):
    """A product's output (its bias added): the gradient entering the
    product, and its bias, is rounded to bf16 first."""
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return bf16(g)


class Stream(torch.autograd.Function):
    """The residual stream between units: bf16 both ways (what a pipeline
    stage sends forward and back)."""
    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, g):
        return bf16(g)


class AttentionCore(torch.autograd.Function):
    """Causal attention from the bf16 q, k, v (B, NH, T, hs): scores, softmax
    and the product with v in the working precision; the probabilities are
    kept in bf16 and the backward pass reads those."""
    @staticmethod
    def forward(ctx, q, k, v, scale):
        T = q.shape[-2]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = torch.softmax(((q @ k.transpose(-2, -1)) * scale).masked_fill(future, float("-inf")), -1)
        ctx.save_for_backward(q, k, v, bf16(att))
        ctx.scale = scale
        return att @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v, att = ctx.saved_tensors
        datt = dy @ v.transpose(-2, -1)
        dscores = att * (datt - (att * datt).sum(-1, keepdim=True))   # softmax's backward
        return (ctx.scale * dscores @ k, ctx.scale * dscores.transpose(-2, -1) @ q,
                att.transpose(-2, -1) @ dy, None)


class CrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of the logits (rows) at the targets, in the
    working precision; the softmax probabilities are kept in bf16 and the
    backward pass reads those: dlogits = (p - onehot) / rows."""
    @staticmethod
    def forward(ctx, logits, y):
        losses = torch.logsumexp(logits, -1) - logits.gather(-1, y[:, None])[:, 0]
        ctx.save_for_backward(bf16(torch.softmax(logits, -1)), y)
        return losses.mean()

    @staticmethod
    def backward(ctx, g):
        p, y = ctx.saved_tensors
        d = p.clone()
        d[torch.arange(len(y)), y] -= 1
        return d * (g / len(y)), None


def forward_loss(P, x, y, cfg):
    """The mean loss of the bf16 GPT with weights P (bf16 values, in the
    working dtype) on x, y (B, T): docs/model.md's Forward, rounded where its
    "Mixed precision" section says."""
    B, T = x.shape
    C, NH, L, V = cfg["dim"], cfg["heads"], cfg["layers"], cfg["vocab"]
    hs = C // NH

    def layernorm(h, w, b):
        return F.layer_norm(h, (C,), w, b, eps=1e-5)

    def product(a, w, b=None):   # a kept (bf16) input times bf16 weights, summed in the working dtype
        return ProductIn.apply(a @ w if b is None else a @ w + b)

    def heads(z):
        return z.view(B, T, NH, hs).transpose(1, 2)

    h = Stream.apply(P["embed.wte"][x] + P["embed.wpe"][:T])
    for l in range(L):
        u = f"block{l}."
        a = Keep.apply(layernorm(h, P[u + "ln1.w"], P[u + "ln1.b"]))
        q, k, v = (Keep.apply(product(a, P[u + "attn.w" + z], P[u + "attn.b" + z])) for z in "qkv")
        yh = AttentionCore.apply(heads(q), heads(k), heads(v), 1.0 / math.sqrt(hs))
        yh = Keep.apply(yh.transpose(1, 2).reshape(B, T, C))
        mid = Keep.apply(h + product(yh, P[u + "attn.wo"], P[u + "attn.bo"]))
        m = Keep.apply(layernorm(mid, P[u + "ln2.w"], P[u + "ln2.b"]))
        hidden = Keep.apply(product(m, P[u + "mlp.w1"], P[u + "mlp.b1"]))
        hidden = Keep.apply(F.gelu(hidden, approximate="tanh"))
        h = Stream.apply(mid + product(hidden, P[u + "mlp.w2"], P[u + "mlp.b2"]))
    lnf = Keep.apply(layernorm(h, P["head.lnf.w"], P["head.lnf.b"]))
    logits = product(lnf, P["head.lm_head"])   # fp32 scratch, not kept
    return CrossEntropy.apply(logits.reshape(B * T, V), y.reshape(B * T))


def bf16_grads(W, specs):
    """Each unit's gradient, made in the working dtype and rounded once."""
    return {n: bf16(W[n].grad) for n, _ in specs}


def first_step(init, specs, bx, by, cfg, dtype):
    """Loss and bf16 gradients (float64 numpy) at weights bf16(init), step 0's batch."""
    W = {n: bf16(torch.tensor(init[n], dtype=dtype)).requires_grad_(True) for n, _ in specs}
    loss = forward_loss(W, bx[0], by[0], cfg)
    loss.backward()
    return float(loss), {n: g.double().numpy() for n, g in bf16_grads(W, specs).items()}


def train(init, specs, bx, by, cfg, dtype, master=True):
    """`steps` AdamW steps on a master copy in `dtype` (the bf16 gradient,
    widened; bf16 weights rewritten from the master each step). master=False:
    the master is the bf16 weights themselves, re-rounded after each step.
    Returns the losses and the final master (float64 numpy)."""
    M = {n: torch.tensor(init[n], dtype=dtype).requires_grad_(True) for n, _ in specs}
    params = [M[n] for n, _ in specs]
    opt = torch.optim.AdamW(params, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                            weight_decay=cfg["wd"])
    losses = []
    for s in range(bx.shape[0]):
        W = {n: bf16(M[n].detach()).requires_grad_(True) for n, _ in specs}
        loss = forward_loss(W, bx[s], by[s], cfg)
        loss.backward()
        for n, g in bf16_grads(W, specs).items():
            M[n].grad = g
        opt.step()
        if not master:
            with torch.no_grad():
                for p in params:
                    p.copy_(bf16(p))
        losses.append(float(loss))
    return np.array(losses), {n: M[n].detach().double().numpy() for n, _ in specs}


def plain_bf16_first_step(init, specs, bx, by, cfg):
    """torch_oracle.py's model run on torch.bfloat16 tensors as they are:
    every op's output rounded to bf16, LayerNorm's and softmax's too."""
    P = {n: torch.tensor(init[n]).to(torch.bfloat16).requires_grad_(True) for n, _ in specs}
    loss = fp32.forward_loss(P, bx[0], by[0], cfg)
    loss.backward()
    return float(loss), {n: P[n].grad.double().numpy() for n, _ in specs}


def fp32_first_step(init, specs, bx, by, cfg):
    """torch_oracle.py's model (float64, no rounding) from init, its gradient
    rounded to bf16 (so that the comparison is of values, not of format)."""
    loss, g = fp32.first_step(init, specs, bx, by, cfg, torch.float64)
    return loss, {n: bf16(torch.tensor(v)).numpy() for n, v in g.items()}


# ---------------------------------------------------------------------------
# Comparisons: each returns its figures; the caller holds them to the bounds.

frob = fp32.frob


def is_zero_grad(name):
    return name.partition(".")[2] in fp32.ZERO_GRAD_SCALE


def compare_step0(c_loss, c_grad, t_loss, t_grad, specs):
    """{loss: rel error, rows: [(tensor, rel error)], worst: (tensor, rel),
    pooled: rel error over all tensors but attn.bk, differ: the fraction of
    elements that differ}."""
    rows = []
    num = den = 0.0
    differ = total = 0
    for name, _ in specs:
        c, t = np.asarray(c_grad[name], np.float64), np.asarray(t_grad[name], np.float64)
        unit, _, tensor = name.partition(".")
        ref = t_grad[unit + "." + fp32.ZERO_GRAD_SCALE[tensor]] if is_zero_grad(name) else t
        rel = frob(c - t) / frob(ref) if frob(ref) > 0 else frob(c - t)
        rows.append((name, rel if np.isfinite(rel) else math.inf))
        if not is_zero_grad(name):
            num += frob(c - t) ** 2
            den += frob(t) ** 2
        differ += int(np.sum(c != t))
        total += c.size
    loss = abs(c_loss - t_loss) / abs(t_loss) if np.isfinite(c_loss) else math.inf
    pooled = math.sqrt(num / den) if np.isfinite(num) else math.inf
    return dict(loss=loss, rows=rows, worst=max(rows, key=lambda r: r[1]), pooled=pooled,
                differ=differ / total)


def step0_ok(f):
    return f["loss"] <= LOSS0_RTOL and f["worst"][1] <= GRAD_RTOL and f["pooled"] <= GRAD_POOLED_RTOL


def compare_steps(c_losses, c_final, t_losses, t_final, init, specs, cfg):
    """{losses: worst rel error of a step's loss, rows: [(tensor, update
    error or None for attn.bk, max |p_C - p_t| / lr)], worst_update,
    pooled, max_lr: (tensor, figure), bound: Adam's reach in lr}."""
    c_losses, t_losses = np.asarray(c_losses, np.float64), np.asarray(t_losses, np.float64)
    lrel = np.abs(c_losses - t_losses) / np.abs(t_losses)
    lrel[~np.isfinite(c_losses)] = math.inf
    lr = cfg["lr"]
    steps = len(t_losses)
    bound = 2 * sum(fp32.adam_step_bound(cfg["beta1"], cfg["beta2"], t) for t in range(1, steps + 1))
    bound *= 1.01   # weight decay's second-order share (torch_oracle.py)
    rows = []
    num = den = 0.0
    for name, _ in specs:
        c, t, p0 = (np.asarray(a[name], np.float64) for a in (c_final, t_final, init))
        diff = c - t
        max_lr = float(np.max(np.abs(diff))) / lr if np.all(np.isfinite(c)) else math.inf
        upd = None
        if not is_zero_grad(name):
            moved = frob(t - p0)
            upd = frob(diff) / moved if moved > 0 else (0.0 if frob(diff) == 0 else math.inf)
            if not np.isfinite(upd):
                upd = math.inf
            num += frob(diff) ** 2
            den += moved ** 2
        rows.append((name, upd, max_lr))
    tested = [r for r in rows if r[1] is not None]
    pooled = math.sqrt(num / den) if den > 0 and np.isfinite(num) else math.inf
    return dict(losses=float(np.max(lrel)), loss_step=int(np.argmax(lrel)), rows=rows,
                worst_update=max(tested, key=lambda r: r[1]), pooled=pooled,
                max_lr=max(((r[0], r[2]) for r in rows), key=lambda r: r[1]), bound=bound)


def steps_ok(f):
    return (f["losses"] <= LOSS_RTOL and f["worst_update"][1] <= UPDATE_RTOL
            and f["pooled"] <= UPDATE_POOLED_RTOL and f["max_lr"][1] <= f["bound"])


def step0_line(f):
    return (f"loss {f['loss']:.1e} (<= {LOSS0_RTOL:.0e}), worst tensor {f['worst'][1]:.2e} "
            f"{f['worst'][0]} (<= {GRAD_RTOL:.0e}), pooled {f['pooled']:.2e} (<= {GRAD_POOLED_RTOL:.0e}); "
            f"{100 * f['differ']:.0f}% of elements differ")


def steps_line(f):
    return (f"losses {f['losses']:.1e} (<= {LOSS_RTOL:.0e}), worst update {f['worst_update'][1]:.2e} "
            f"{f['worst_update'][0]} (<= {UPDATE_RTOL:g}), pooled {f['pooled']:.2e} "
            f"(<= {UPDATE_POOLED_RTOL:.1e}), max {f['max_lr'][1]:.2f} lr (<= {f['bound']:.1f})")


# ---------------------------------------------------------------------------

def run_ref(ref, outdir, name, extra):
    """build/ref with REF_FLAGS + extra, dumping to outdir/name."""
    return fp32.run_ref(ref, outdir, name, REF_FLAGS + extra, "torch oracle bf16")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=os.path.join(ROOT, "build", "ref"),
                    help="the C reference trainer (default: build/ref)")
    ap.add_argument("--keep", metavar="DIR",
                    help="run in DIR and keep the dumps there (default: a temporary folder)")
    args = ap.parse_args()

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        outdir, tmp = args.keep, None
    else:
        outdir = tmp = tempfile.mkdtemp(prefix="torch_oracle_bf16.")
    try:
        paths = {"run": run_ref(args.ref, outdir, "bf16.bin", []),
                 "alt": run_ref(args.ref, outdir, "bf16_alt.bin", ["--rounding", "alt"]),
                 "no master": run_ref(args.ref, outdir, "bf16_nomaster.bin", ["--master", "off"])}
        ok = check(paths)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


def load(path, specs):
    d = pldump.read(path)
    get = lambda prefix: {n: np.asarray(d[prefix + n], np.float64) for n, _ in specs}
    return dict(loss=np.asarray(d["loss"], np.float64), grad=get("grad/first/"), final=get("param/final/"),
                config=d["meta/config"])


def check(paths):
    d = pldump.read(paths["run"])
    cfg = fp32.parse_config(d["meta/config"])
    specs = fp32.tensor_specs(cfg)
    steps, B, T = cfg["steps"], cfg["batch"], cfg["seq"]
    results = []   # (what, ok)

    def record(what, ok, detail):
        results.append((what, bool(ok)))
        print(f"{'PASS' if ok else 'FAIL'} {what}: {detail}")

    print(f"dump {paths['run']}: steps {steps} B {B} T {T} C {cfg['dim']} NH {cfg['heads']} "
          f"L {cfg['layers']} V {cfg['vocab']} lr {cfg['lr']:g} betas ({cfg['beta1']:g}, {cfg['beta2']:g}) "
          f"eps {cfg['eps']:g} wd {cfg['wd']:g}")

    # -- the dump has what docs/model.md says, in its shapes and its precision
    meta = dict(line.split(" ", 1) for line in d["meta/config"].splitlines() if " " in line)
    problems = []
    if meta.get("precision") != "bf16" or meta.get("master") != "on":
        problems.append(f"meta/config says precision {meta.get('precision')} master {meta.get('master')}")
    if cfg["dropout"] != 0 or cfg["micro"] != "1":
        problems.append(f"dropout {cfg['dropout']:g} micro {cfg['micro']}: the oracle needs 0 and 1")
    for name, shape in (("batch/x", (steps, B, T)), ("batch/y", (steps, B, T)), ("loss", (steps,))):
        if name not in d or isinstance(d[name], str) or d[name].shape != shape:
            problems.append(f"{name} missing or not of shape {shape}")
    for prefix in ("param/init/", "grad/first/", "param/final/", "optim/m/", "optim/v/"):
        for n, shape in specs:
            a = d.get(prefix + n)
            if a is None or isinstance(a, str) or a.shape != shape or a.dtype != np.float32:
                problems.append(f"{prefix}{n} missing or not f32 of shape {shape}")
    record("dump holds every tensor in its documented shape, precision bf16, master on", not problems,
           "; ".join(problems[:6]) or f"{len(specs)} tensors x 5 kinds")
    if problems:
        return fp32.summary(results, "torch oracle bf16")

    def finer_than_bf16(prefix, dd=d):   # the fraction of elements bf16 does not hold exactly
        n_all = n_fine = 0
        for n, _ in specs:
            a = dd[prefix + n]
            n_all += a.size
            n_fine += int(np.sum(a.view(np.uint32) & 0xFFFF != 0))
        return n_fine / n_all

    fine = finer_than_bf16("grad/first/")
    record("grad/first is the bf16 gradient widened (every element exactly bf16)", fine == 0,
           f"{100 * fine:.2f}% of elements finer than bf16")
    fine = finer_than_bf16("param/final/")
    fine_off = finer_than_bf16("param/final/", pldump.read(paths["no master"]))
    record("param/final is an fp32 master copy (finer than bf16); --master off's is bf16",
           fine > 0.5 and fine_off == 0,
           f"{100 * fine:.1f}% of elements finer than bf16 (master on), {100 * fine_off:.1f}% (--master off)")

    run = load(paths["run"], specs)
    init = {n: np.asarray(d["param/init/" + n], np.float64) for n, _ in specs}
    bx = torch.from_numpy(d["batch/x"].astype(np.int64))
    by = torch.from_numpy(d["batch/y"].astype(np.int64))

    # -- 1. step 0: loss and gradients against the float64 bf16 model
    t_loss0, t_grad = first_step(init, specs, bx, by, cfg, torch.float64)
    f32_loss0, f32_grad = first_step(init, specs, bx, by, cfg, torch.float32)
    c0 = compare_step0(float(run["loss"][0]), run["grad"], t_loss0, t_grad, specs)
    p0 = dict(compare_step0(f32_loss0, f32_grad, t_loss0, t_grad, specs)["rows"])
    print(f"\nstep 0 loss: C {float(run['loss'][0]):.8f}  torch bf16 model (float64 sums) {t_loss0:.8f}")
    print(f"gradients at step 0: ||g_C - g_t|| / ||g_t|| per tensor (<= {GRAD_RTOL:.0e}; attn.bk relative to "
          f"||g(attn.bq)||); torch float32: the same for the model summing in float32")
    print(f"  {'tensor':<22} {'C':>9} {'torch f32':>10}")
    for name, rel in c0["rows"]:
        print(f"  {name:<22} {rel:9.2e} {p0[name]:10.2e}  {'ok' if rel <= GRAD_RTOL else 'FAIL'}")
    record("step 0: loss and every gradient", step0_ok(c0), step0_line(c0))

    # -- 2. five AdamW steps with a float64 master copy
    t_losses, t_final = train(init, specs, bx, by, cfg, torch.float64)
    cs = compare_steps(run["loss"], run["final"], t_losses, t_final, init, specs, cfg)
    print(f"\nlosses over {steps} steps: " + "  ".join(
        f"{float(c):.6f}/{t:.6f}" for c, t in zip(run["loss"], t_losses)) + "  (C/torch)")
    print(f"parameters after {steps} steps: ||p_C - p_t|| / ||p_t - p_0|| (<= {UPDATE_RTOL:g}), "
          f"max |p_C - p_t| / lr (<= {cs['bound']:.1f})")
    for name, upd, max_lr in cs["rows"]:
        ok = (upd is None or upd <= UPDATE_RTOL) and max_lr <= cs["bound"]
        print(f"  {name:<22} {'n/a' if upd is None else f'{upd:.2e}':>9} {max_lr:6.2f}  {'ok' if ok else 'FAIL'}")
    record(f"{steps} AdamW steps: every loss and final master tensor", steps_ok(cs), steps_line(cs))

    # -- 3. positive controls: legitimately different bf16 runs pass the same bounds
    print("\npositive controls (each must pass the same bounds):")
    f32_losses, f32_final = train(init, specs, bx, by, cfg, torch.float32)
    f0 = compare_step0(f32_loss0, f32_grad, t_loss0, t_grad, specs)
    fs = compare_steps(f32_losses, f32_final, t_losses, t_final, init, specs, cfg)
    record("positive control: the torch model summing in float32, step 0", step0_ok(f0), step0_line(f0))
    record("positive control: the torch model summing in float32, 5 steps", steps_ok(fs), steps_line(fs))
    alt = load(paths["alt"], specs)
    a0 = compare_step0(float(alt["loss"][0]), alt["grad"], t_loss0, t_grad, specs)
    as_ = compare_steps(alt["loss"], alt["final"], t_losses, t_final, init, specs, cfg)
    record("positive control: build/ref --rounding alt, step 0", step0_ok(a0), step0_line(a0))
    record("positive control: build/ref --rounding alt, 5 steps", steps_ok(as_), steps_line(as_))
    nm_losses, nm_final = train(init, specs, bx, by, cfg, torch.float64, master=False)
    off = load(paths["no master"], specs)
    ns = compare_steps(off["loss"], off["final"], nm_losses, nm_final, init, specs, cfg)
    record("positive control: build/ref --master off against the torch model without master", steps_ok(ns),
           steps_line(ns))

    # -- 4. negative controls: the same comparisons must reject these
    print("\nnegative controls (each must be rejected):")
    bk_c = max(r[1] for r in c0["rows"] if is_zero_grad(r[0]))
    for what, (l0, g) in (("the fp32 model (fp32 weights, no bf16 rounding)",
                           fp32_first_step(init, specs, bx, by, cfg)),
                          ("the fp32 model from the bf16 weights (no rounding of activations)",
                           fp32_first_step({n: bf16(torch.tensor(v)).numpy() for n, v in init.items()},
                                           specs, bx, by, cfg)),
                          ("a bf16 model rounding at other points (plain torch.bfloat16: every op)",
                           plain_bf16_first_step(init, specs, bx, by, cfg))):
        n0 = compare_step0(l0, g, t_loss0, t_grad, specs)
        record(f"negative control: {what}, step 0", not step0_ok(n0), step0_line(n0))
        if "fp32 weights" in what:
            bk = max(r[1] for r in n0["rows"] if is_zero_grad(r[0]))
            print(f"  INFO attn.bk alone: {bk:.2e} (the C's {bk_c:.2e}, legitimate runs up to 1.4e-3): "
                  "not told apart")
    f_losses, f_final = fp32.train(init, specs, bx, by, cfg, torch.float64)
    ns_ = compare_steps(f_losses, f_final, t_losses, t_final, init, specs, cfg)
    record("negative control: the fp32 model, 5 steps (by the pooled update)",
           ns_["pooled"] > UPDATE_POOLED_RTOL, steps_line(ns_))
    print(f"  INFO its later losses, {ns_['losses']:.2e} against {LOSS_RTOL:.0e} (7.9e-5..1.7e-4 over 12 seeds, "
          f"legitimate runs up to 4.5e-5), are no reliable test; single tensors, {ns_['worst_update'][1]:.2f} "
          f"against {UPDATE_RTOL:g}, do not tell it apart")
    # the C gradient, perturbed
    name = c0["worst"][0] if not is_zero_grad(c0["worst"][0]) else "block0.mlp.w1"
    bad = dict(run["grad"], **{name: run["grad"][name] * 1.01})
    b0 = compare_step0(float(run["loss"][0]), bad, t_loss0, t_grad, specs)
    record(f"negative control: the C gradient with {name} (its worst tensor) scaled by 1.01",
           not step0_ok(b0), step0_line(b0))
    token = int(np.bincount(d["batch/x"][0].ravel()).argmax())
    wte = run["grad"]["embed.wte"].copy()
    wte[token] = 0
    b0 = compare_step0(float(run["loss"][0]), dict(run["grad"], **{"embed.wte": wte}), t_loss0, t_grad, specs)
    record(f"negative control: the C gradient with embed.wte's row {token} (the commonest token) dropped",
           not step0_ok(b0), step0_line(b0))
    # the optimizer without the master copy
    ms = compare_steps(nm_losses, nm_final, t_losses, t_final, init, specs, cfg)
    record("negative control: the torch model without master copy (AdamW on the bf16 weights)",
           not steps_ok(ms), steps_line(ms))
    ms = compare_steps(off["loss"], off["final"], t_losses, t_final, init, specs, cfg)
    record("negative control: build/ref --master off against the torch model with master", not steps_ok(ms),
           steps_line(ms))
    return fp32.summary(results, "torch oracle bf16")


if __name__ == "__main__":
    sys.exit(main())
