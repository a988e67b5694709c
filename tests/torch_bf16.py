#!/usr/bin/env python3
"""torch_bf16.py: ops.h's bf16 rules against PyTorch's.

build/tests/bf16_probe runs ops_to_bf16 / ops_from_bf16 and
ops_matmul_forward_bf16 on inputs made here; PyTorch answers the same:
the conversion to torch.bfloat16 (round to nearest even) must give the same
bits for every input (random floats of every exponent, each bf16 value's
midpoints to its neighbours and one ulp either side, subnormals, the
largest floats, infinities; NaNs as NaNs), and the product of the rounded
inputs must be torch's float64 product of the same bf16 values within fp32
accumulation's error (K = 257 terms of size O(1): 1e-5, as test_ops holds
the fp32 products). Exit 77 (a skip) without PyTorch, outside CI.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    import numpy as np
    import torch
    import pldump
except ImportError as e:
    print(f"skipped: {e} (PyTorch and numpy: apt-get install python3-torch)")
    sys.exit(77)


def inputs(rng):
    bits = rng.integers(0, 2**32, size=400000, dtype=np.uint64).astype(np.uint32)
    # Each bf16 value's rounding edges: its own bits, one below and above,
    # just below, at and just above the midpoint to the next.
    tops = np.arange(0, 65536, dtype=np.uint32) << 16
    edges = np.concatenate([tops + o for o in (0, 1, 0x7FFF, 0x8000, 0x8001)] + [tops - 1])
    x = np.concatenate([bits, edges]).view(np.float32)
    return x


def main():
    rng = np.random.default_rng(7)
    x = inputs(rng)
    M, K, N = 37, 257, 29
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    with tempfile.TemporaryDirectory() as t:
        pin, pout = os.path.join(t, "in.bin"), os.path.join(t, "out.bin")
        pldump.write(pin, {"x": x, "a": a, "b": b})
        subprocess.run([os.path.join(ROOT, "build", "tests", "bf16_probe"), pin, pout], check=True)
        got = pldump.read(pout)

    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    mine = got["x_bf16"]
    nan = np.isnan(want)
    same = (mine.view(np.uint32) == want.view(np.uint32)) | (nan & np.isnan(mine))
    bad = np.flatnonzero(~same)
    print(f"to bf16 and back: {len(x)} floats, {len(bad)} differ from torch.bfloat16's "
          f"({int(nan.sum())} NaNs, NaN either way)")
    for i in bad[:5]:
        print(f"  {x.view(np.uint32)[i]:08x}: ours {mine.view(np.uint32)[i]:08x}, torch {want.view(np.uint32)[i]:08x}")

    ta = torch.from_numpy(a).to(torch.bfloat16).double()
    tb = torch.from_numpy(b).to(torch.bfloat16).double()
    exact = (ta @ tb).numpy()
    err = np.max(np.abs(got["ab"] - exact) / (1 + np.abs(exact)))
    print(f"bf16 product ({M} x {K} x {N}, fp32 accumulation) against torch's float64 product of the "
          f"same bf16 values: {err:.2e} (bound 1e-5)")
    # A product that rounded its inputs otherwise (or not at all) is far off:
    # the control shows the bound can tell.
    unrounded = np.max(np.abs(a.astype(np.float64) @ b.astype(np.float64) - exact) / (1 + np.abs(exact)))
    print(f"(the fp32 inputs' product, unrounded, is {unrounded:.2e} from it)")
    ok = len(bad) == 0 and err <= 1e-5 and unrounded > 1e-3
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
