#!/usr/bin/python3
"""torch_ddp.py: the course's GPT trained by PyTorch DistributedDataParallel, timed.

    /usr/bin/python3 bench/torch_ddp.py --np N [--layers 4 --dim 128 --heads 4
        --seq 64 --batch 8 --vocab 256 --steps 20 --warmup 3] [--bucket-mb 25]
        [--impl matmul|linear] [--timeout 300] [--json]

The model of torch_ref.py (docs/model.md, float32, dropout 0, the same AdamW)
trained data-parallel by N processes on one thread each, over the gloo
backend on 127.0.0.1. --batch is the GLOBAL batch: each rank takes batch/N of
its rows, so the work per step is that of a C data-parallel run with the same
global batch. It times whole steps (forward, backward with DDP's all-reduce
overlapped in buckets of --bucket-mb, optimizer step, zero_grad) after
--warmup untimed ones, and reports the slowest rank's mean:

    torch DDP (gloo) np N: ms/step M, tokens/s T (global batch B x T, bucket X MB, torch V)

--json prints one JSON object instead, for a bench script. Exits 77 with
"SKIP torch DDP: ..." where torch, torch.distributed or gloo is missing.
"""
import argparse
import datetime
import json
import os
import socket
import sys
import time

# One thread per rank means one BLAS thread too: torch.set_num_threads(1) only
# sets PyTorch's own pool, and OpenBLAS starts a thread per core unless told
# before it loads (torch_ref.py measured what that does). Set here, before
# torch is imported, so that the spawned children inherit it: each child
# re-imports this file, and so torch, before it runs a line of the worker.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
# gloo picks its network interface from the hostname; pin it to loopback so
# that the ranks never talk over a real network.
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:   # pragma: no cover
    print(f"SKIP torch DDP: {e} (run with /usr/bin/python3, which has python3-torch)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref   # noqa: E402  the model, written once


def free_port():
    # Port 0 makes the kernel choose one that is free now; it could be taken
    # again before rank 0 binds it, but on one machine that is rare.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def batch(a, step, rank, n):
    # The global batch of a step depends on the seed and the step only, so
    # every N draws the same tokens and each rank keeps its rows of them.
    g = torch.Generator().manual_seed(a.seed * 1_000_003 + step)
    xy = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
    rows = xy[rank * a.batch // n:(rank + 1) * a.batch // n]
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def worker(rank, a, port, results):
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.np, timeout=datetime.timedelta(seconds=a.timeout))
    try:
        torch.manual_seed(a.seed)   # DDP broadcasts rank 0's weights anyway
        model = torch_ref.GPT(a.vocab, a.seq, a.dim, a.heads, a.layers, a.impl == "linear")
        # The only buffer is the constant causal mask, the same on every rank:
        # gloo cannot broadcast a bool tensor, and broadcasting it before every
        # forward (the default) would time a copy no C run makes.
        DDP._set_params_and_buffers_to_ignore_for_model(model, ["mask"])
        ddp = DDP(model, bucket_cap_mb=a.bucket_mb, broadcast_buffers=False)
        opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                                weight_decay=0.1, foreach=True)
        batches = [batch(a, s, rank, a.np) for s in range(a.warmup + a.steps)]
        losses = []
        for s, (x, y) in enumerate(batches):
            if s == a.warmup:
                dist.barrier()   # all ranks start the clock together
                t0 = time.perf_counter()
            loss = ddp(x, y)
            loss.backward()      # the gradient all-reduce runs inside, by bucket
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        mean = (time.perf_counter() - t0) / a.steps

        # The step is as slow as its slowest rank; gather all for the record.
        times = [torch.zeros(1, dtype=torch.float64) for _ in range(a.np)]
        dist.all_gather(times, torch.tensor([mean], dtype=torch.float64))
        # Each rank's loss is the mean over its rows; their mean is the loss
        # of the global batch (equal shards).
        loss = torch.stack(losses)
        dist.all_reduce(loss)
        loss /= a.np
        if rank == 0:
            results.put({"rank_ms": [1e3 * t.item() for t in times],
                         "params": sum(p.numel() for p in model.parameters()),
                         "first_loss": loss[0].item(), "last_loss": loss[-1].item()})
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, required=True, help="number of processes (ranks)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="global batch, split over the ranks")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--impl", choices=("matmul", "linear"), default="matmul",
                    help="how torch_ref.py writes the matmuls (they time the same)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds for the whole run, and for any one collective")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    if a.dim % a.heads or min(a.np, a.layers, a.dim, a.heads, a.seq, a.batch, a.vocab,
                              a.steps) < 1 or a.warmup < 0 or a.bucket_mb <= 0:
        ap.error("sizes, --np and --steps must be positive, --dim a multiple of --heads")
    if a.batch % a.np:
        ap.error(f"--batch {a.batch} (the global batch) is not divisible by --np {a.np}")
    if not dist.is_available() or not dist.is_gloo_available():
        print("SKIP torch DDP: this torch has no torch.distributed with the gloo backend")
        return 77

    # A SimpleQueue writes straight into its pipe (no feeder thread), so a
    # child that has put its one small result can always exit.
    results = mp.get_context("spawn").SimpleQueue()
    ctx = mp.start_processes(worker, args=(a, free_port(), results), nprocs=a.np,
                             join=False, daemon=True, start_method="spawn")
    deadline = time.monotonic() + a.timeout
    try:
        # join() returns when any rank exits; a rank that fails makes it kill
        # the others and raise with that rank's traceback.
        while not ctx.join(timeout=max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"ranks still running after {a.timeout:g} s")
    except (Exception, KeyboardInterrupt) as e:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
            p.join()
        print(f"torch DDP np {a.np} failed: {e}", file=sys.stderr)
        return 1
    r = results.get()

    ms = max(r["rank_ms"])
    tokens = a.batch * a.seq
    tps = tokens / (ms / 1e3)
    if a.json:
        print(json.dumps({
            "torch_version": torch.__version__, "backend": "gloo", "np": a.np,
            "threads_per_rank": 1, "bucket_mb": a.bucket_mb, "impl": a.impl,
            "config": {k: getattr(a, k) for k in ("layers", "dim", "heads", "seq", "batch",
                                                  "vocab", "steps", "warmup", "lr")},
            "rows_per_rank": a.batch // a.np, "tokens_per_step": tokens,
            "ms_per_step": ms, "tokens_per_s": tps, **r}))
    else:
        print(f"torch DDP (gloo) np {a.np}: ms/step {ms:.2f}, tokens/s {tps:.0f} "
              f"(global batch {a.batch} x {a.seq}, bucket {a.bucket_mb:g} MB, "
              f"torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
