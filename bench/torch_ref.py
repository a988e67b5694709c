#!/usr/bin/python3
"""torch_ref.py: the course's GPT trained by PyTorch on one CPU thread, timed.

    /usr/bin/python3 bench/torch_ref.py [--layers 4 --dim 128 --heads 4 --seq 64
        --batch 8 --vocab 256 --steps 30 --warmup 5] [--impl auto|matmul|linear] [--json]
        [--device cpu|cuda [--tf32]] [--precision fp32|bf16 [--bf16 auto|autocast|weights]]
    /usr/bin/python3 bench/torch_ref.py --mm-rate [--dim 128 --seq 64 --batch 8]

The model of docs/model.md in float32 (dropout 0), random tokens, AdamW (lr
1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter), with
torch.set_num_threads(1) so that it compares with one C rank. It times whole
training steps (forward, backward, optimizer step, zero_grad) after --warmup
untimed ones and prints

    torch tokens/s: N (ms/step M, threads 1, torch VERSION)

tokens/s is B*T divided by the mean time of a step. Two ways of writing the
same model are timed and the faster one is reported (--impl auto), so that
the comparison is with PyTorch at its best rather than with one way of
writing it:

  matmul  weights as (in, out) parameters and `x @ W + b`, the layout of
          docs/model.md;
  linear  nn.Linear layers (weights (out, in), F.linear, one fused addmm).

AdamW runs with foreach=True (the multi-tensor step; foreach=False measured
the same within noise here). --json prints one JSON object instead, with
every variant's numbers, for a bench script. --device cuda times the same
on a GPU (fp32; --tf32 lets the matrix products use TF32), waiting for the
GPU before each clock reading (bench/bench_gpu.sh).

--precision bf16 trains the same model in bf16 the two ways a PyTorch user
would, times both (with both --impl, under auto) and reports the faster,
naming it:

  autocast  fp32 parameters (the master copy) and the forward pass and loss
            under torch.autocast(device, dtype=torch.bfloat16): the matrix
            products (addmm, matmul, linear) run on bf16 copies of their
            inputs, the rest in fp32 or as autocast decides; the gradients
            reach the fp32 parameters;
  weights   the model's parameters in bf16 (every op in bf16), an fp32
            master copy that AdamW updates from the bf16 gradients, then
            copied back into the bf16 parameters (round to nearest even), as
            build/ref --precision bf16 does.

Both take the cross-entropy of the logits widened to fp32, as build/ref
does. --bf16 picks one of the two instead. The printed line then ends with
"bf16 by MODE, impl IMPL".

--mm-rate times one of the model's products instead, (B*T x C) @ (C x 4C),
the MLP's first, in fp32 and in bf16 on one thread, and prints both rates
and whether PyTorch has oneDNN (mkldnn), through which torch 1.13 sends CPU
bf16 products (ONEDNN_VERBOSE=1 in the environment shows which kernel ran).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

# One thread means one BLAS thread too. torch.set_num_threads(1) sets
# PyTorch's own thread pool, but its matrix products go to OpenBLAS, which
# starts a thread per core unless told before it loads: measured here, that
# took the second core and made PyTorch look 35% faster (17.6k against 13.0k
# tokens/s) than it is on one thread.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:   # pragma: no cover
    print(f"SKIP torch bench: {e} (run with /usr/bin/python3, which has python3-torch)")
    sys.exit(77)


class Block(nn.Module):
    def __init__(self, C, NH, L, linear):
        super().__init__()
        self.C, self.NH, self.linear = C, NH, linear
        self.ln1, self.ln2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        std, pstd = 0.02, 0.02 / math.sqrt(2 * L)
        dims = {"wq": (C, C, std), "wk": (C, C, std), "wv": (C, C, std), "wo": (C, C, pstd),
                "w1": (C, 4 * C, std), "w2": (4 * C, C, pstd)}
        if linear:
            self.lin = nn.ModuleDict()
            for n, (i, o, s) in dims.items():
                m = nn.Linear(i, o)
                nn.init.normal_(m.weight, std=s)
                nn.init.zeros_(m.bias)
                self.lin[n] = m
        else:
            self.w = nn.ParameterDict({n: nn.Parameter(torch.randn(i, o) * s)
                                       for n, (i, o, s) in dims.items()})
            self.b = nn.ParameterDict({n: nn.Parameter(torch.zeros(o))
                                       for n, (i, o, s) in dims.items()})

    def proj(self, x, n):
        if self.linear:
            return self.lin[n](x)
        return torch.addmm(self.b[n], x.reshape(-1, x.shape[-1]), self.w[n]).view(
            *x.shape[:-1], -1)

    def forward(self, x, mask):
        B, T, C = x.shape
        NH, hs = self.NH, C // self.NH
        a = self.ln1(x)
        q, k, v = (self.proj(a, n).view(B, T, NH, hs).transpose(1, 2) for n in ("wq", "wk", "wv"))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = torch.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y, "wo")
        x = x + self.proj(F.gelu(self.proj(self.ln2(x), "w1"), approximate="tanh"), "w2")
        return x


class GPT(nn.Module):
    def __init__(self, V, T, C, NH, L, linear):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(V, C) * 0.02)
        self.wpe = nn.Parameter(torch.randn(T, C) * 0.02)
        self.blocks = nn.ModuleList(Block(C, NH, L, linear) for _ in range(L))
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Parameter(torch.randn(C, V) * 0.02)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.lnf(x) @ self.lm_head
        # .float(): a no-op in fp32; in bf16 the loss is fp32's, as build/ref's.
        return F.cross_entropy(logits.float().view(B * T, -1), targets.view(B * T))


def sync(a):
    if a.device == "cuda":
        torch.cuda.synchronize()


def run(impl, a, batches, mode="fp32"):
    """mode: fp32, or bf16's autocast or weights (the module docstring)."""
    torch.manual_seed(a.seed)
    model = GPT(a.vocab, a.seq, a.dim, a.heads, a.layers, impl == "linear").to(a.device)
    nparams = sum(p.numel() for p in model.parameters())
    if mode == "weights":
        # The fp32 master copy is the initialisation itself; the model's
        # parameters become its bf16 rounding.
        master = [p.detach().clone() for p in model.parameters()]
        model.to(torch.bfloat16)
        params = list(model.parameters())
    else:
        master = params = list(model.parameters())
    opt = torch.optim.AdamW(master, lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, foreach=True)
    times, losses = [], []
    for s in range(a.warmup + a.steps):
        x, y = batches[s % len(batches)]
        sync(a)
        t0 = time.perf_counter()
        if mode == "autocast":
            with torch.autocast(a.device, dtype=torch.bfloat16):
                loss = model(x, y)
        else:
            loss = model(x, y)
        loss.backward()
        if mode == "weights":
            for m, p in zip(master, params):
                m.grad = p.grad.float()
                p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        if mode == "weights":
            with torch.no_grad():
                for m, p in zip(master, params):
                    p.copy_(m)
        sync(a)
        t1 = time.perf_counter()
        losses.append(loss.item())   # after the clock: not part of the step
        if s >= a.warmup:
            times.append(t1 - t0)
    mean = sum(times) / len(times)
    return {"impl": impl, "precision": "fp32" if mode == "fp32" else "bf16",
            "bf16": None if mode == "fp32" else mode, "params": nparams, "ms_per_step": 1e3 * mean,
            "ms_per_step_median": 1e3 * statistics.median(times),
            "ms_per_step_min": 1e3 * min(times),
            "tokens_per_s": a.batch * a.seq / mean, "first_loss": losses[0],
            "last_loss": losses[-1]}


def mm_rate(a):
    """GFLOP/s of (B*T x C) @ (C x 4C) in fp32 and bf16, best of 5 rounds."""
    M, K, N = a.batch * a.seq, a.dim, 4 * a.dim
    rates = {}
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(M, K, device=a.device).to(dt)
        w = torch.randn(K, N, device=a.device).to(dt)
        for _ in range(10):
            x @ w
        n, best = 100, float("inf")
        for _ in range(5):
            sync(a)
            t0 = time.perf_counter()
            for _ in range(n):
                x @ w
            sync(a)
            best = min(best, (time.perf_counter() - t0) / n)
        rates[dt] = 2 * M * K * N / best / 1e9
    f32, b16 = rates[torch.float32], rates[torch.bfloat16]
    print(f"torch matmul {M}x{K} @ {K}x{N}, {torch.get_num_threads()} thread(s): "
          f"fp32 {f32:.1f} GFLOP/s, bf16 {b16:.1f} GFLOP/s, bf16 / fp32 {b16 / f32:.2f}; "
          f"mkldnn available: {torch.backends.mkldnn.is_available()}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--impl", choices=("auto", "matmul", "linear"), default="auto",
                    help="how the matmuls are written; auto times both, keeps the faster")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tf32", action="store_true", help="TF32 matrix products on a GPU")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--bf16", choices=("auto", "autocast", "weights"), default="auto",
                    help="with --precision bf16: autocast over fp32 weights, or bf16 weights with "
                         "an fp32 master copy; auto times both, keeps the faster")
    ap.add_argument("--mm-rate", action="store_true",
                    help="time one of the model's products in fp32 and bf16 instead")
    a = ap.parse_args()
    if a.dim % a.heads or min(a.layers, a.dim, a.heads, a.seq, a.batch, a.vocab, a.steps) < 1 \
            or a.warmup < 0:
        ap.error("sizes and --steps must be positive, --dim a multiple of --heads")

    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    if a.mm_rate:
        return mm_rate(a)
    g = torch.Generator().manual_seed(a.seed)
    batches = []
    for _ in range(min(a.warmup + a.steps, 64)):
        xy = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
        batches.append((xy[:, :-1].contiguous().to(a.device), xy[:, 1:].contiguous().to(a.device)))

    impls = ("matmul", "linear") if a.impl == "auto" else (a.impl,)
    modes = ("fp32",) if a.precision == "fp32" else \
        ("autocast", "weights") if a.bf16 == "auto" else (a.bf16,)
    results = [run(i, a, batches, m) for m in modes for i in impls]
    best = min(results, key=lambda r: r["ms_per_step"])
    if a.json:
        print(json.dumps({
            "torch_version": torch.__version__, "threads": torch.get_num_threads(),
            "config": {k: getattr(a, k) for k in ("layers", "dim", "heads", "seq", "batch",
                                                  "vocab", "steps", "warmup", "lr")},
            "tokens_per_step": a.batch * a.seq, "precision": a.precision, "bf16": best["bf16"],
            "tokens_per_s": best["tokens_per_s"], "ms_per_step": best["ms_per_step"],
            "impl": best["impl"], "variants": results}))
    else:
        where = f"threads {torch.get_num_threads()}" if a.device == "cpu" else \
            f"{torch.cuda.get_device_name()}{', TF32' if a.tf32 else ''}"
        how = f", bf16 by {best['bf16']}, impl {best['impl']}" if a.precision == "bf16" else ""
        print(f"torch tokens/s: {best['tokens_per_s']:.0f} (ms/step {best['ms_per_step']:.2f}, "
              f"{where}, torch {torch.__version__}{how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
