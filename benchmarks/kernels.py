"""The reference attention against PyTorch's own, at a few sizes.

    python -m benchmarks.kernels [--quick] [--json OUT]

* ``MultiHeadAttention`` of solutions/a05_encoder.py against ``nn.MultiheadAttention``
  (batch_first, the same weights, eval mode, ``torch.no_grad()``, float32).
  PyTorch is timed twice: ``need_weights=False`` (its fused fast path, the
  fastest it can do) and ``need_weights=True, average_attn_weights=False``
  (it also returns the per-head weights, as the reference keeps them in
  ``attn_weights``). The target is against the fast path.
* numpy ``scaled_dot_product_attention`` of solutions/a03_attention.py against
  ``torch.nn.functional.scaled_dot_product_attention``. The reference works in
  float64 (it converts its inputs), so PyTorch gets float64 tensors too (the
  same arithmetic); float32 PyTorch is printed for information.

Both sides run on one thread (torch.set_num_threads(1), numpy's BLAS limited
to 1 thread with threadpoolctl), like the grading workers, and on a shared
machine a second thread would only measure the neighbours. Each figure is the
best of several timed loops, the two sides interleaved. Outputs are checked
equal before timing (so both compute the same thing).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

MHA_SIZES = [(8, 32, 64, 4), (4, 128, 256, 8), (2, 512, 512, 8)]          # (B, L, d_model, heads)
SDPA_SIZES = [(8, 4, 32, 16), (4, 8, 128, 32), (2, 8, 512, 64)]           # (B, heads, L, d_k)
QUICK_MHA = MHA_SIZES[:2]
QUICK_SDPA = SDPA_SIZES[:2]
SOLUTIONS = "solutions"


def best_time(fn, min_time=0.2, rounds=5):
    """Best per-call seconds over ``rounds`` loops of about ``min_time`` each."""
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time / 4:
        fn()
        n += 1
    per = max((time.perf_counter() - start) / max(n, 1), 1e-7)
    loops = max(1, int(min_time / per))
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - t) / loops)
    return best


def interleave(fns: dict, rounds: int, min_time: float) -> dict:
    out = {k: float("inf") for k in fns}
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            out[k] = min(out[k], best_time(fns[k], min_time=min_time, rounds=1))
    return out


def bench_mha(sizes, rounds, min_time):
    import torch
    from torch import nn

    sys.path.insert(0, SOLUTIONS)
    from a05_encoder import MultiHeadAttention  # the reference, trusted code

    rows = []
    for B, L, d, h in sizes:
        torch.manual_seed(0)
        ours = MultiHeadAttention(d, h).eval()
        theirs = nn.MultiheadAttention(d, h, batch_first=True).eval()
        with torch.no_grad():  # the same weights on both sides
            theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
            theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
            theirs.out_proj.weight.copy_(ours.w_o.weight)
            theirs.out_proj.bias.copy_(ours.w_o.bias)
        x = torch.randn(B, L, d)
        with torch.no_grad():
            a = ours(x, x, x)
            b = theirs(x, x, x, need_weights=False)[0]
            err = float((a - b).abs().max())
            assert err < 1e-4, f"MHA outputs differ by {err}"

            def f_ours():
                ours(x, x, x)

            def f_fast():
                theirs(x, x, x, need_weights=False)

            def f_weights():
                theirs(x, x, x, need_weights=True, average_attn_weights=False)

            t = interleave({"ours": f_ours, "torch_fast": f_fast, "torch_weights": f_weights}, rounds, min_time)
        rows.append({"size": f"B={B} L={L} d={d} h={h}", **t, "ratio": t["ours"] / t["torch_fast"],
                     "ratio_vs_weights": t["ours"] / t["torch_weights"], "max_abs_diff": err})
    return rows


def bench_sdpa(sizes, rounds, min_time):
    import numpy as np
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, SOLUTIONS)
    from a03_attention import scaled_dot_product_attention  # the reference, numpy

    rows = []
    for B, h, L, dk in sizes:
        g = np.random.default_rng(0)
        Q, K, V = (g.normal(size=(B, h, L, dk)) for _ in range(3))
        tq, tk, tv = (torch.from_numpy(a) for a in (Q, K, V))            # float64, shared memory
        fq, fk, fv = (a.float() for a in (tq, tk, tv))                    # float32
        out, _ = scaled_dot_product_attention(Q, K, V)
        with torch.no_grad():
            err = float(np.abs(out - F.scaled_dot_product_attention(tq, tk, tv).numpy()).max())
        assert err < 1e-9, f"SDPA outputs differ by {err}"

        def f_ours():
            scaled_dot_product_attention(Q, K, V)

        def f_t64():
            with torch.no_grad():
                F.scaled_dot_product_attention(tq, tk, tv)

        def f_t32():
            with torch.no_grad():
                F.scaled_dot_product_attention(fq, fk, fv)

        t = interleave({"ours": f_ours, "torch_f64": f_t64, "torch_f32": f_t32}, rounds, min_time)
        rows.append({"size": f"B={B} h={h} L={L} d_k={dk}", **t, "ratio": t["ours"] / t["torch_f64"],
                     "ratio_vs_f32": t["ours"] / t["torch_f32"], "max_abs_diff": err})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.kernels")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--only", choices=["mha", "sdpa"])
    p.add_argument("--solutions", default="solutions", help="the folder of the reference modules")
    args = p.parse_args(argv)
    global SOLUTIONS
    SOLUTIONS = args.solutions

    import torch
    from threadpoolctl import threadpool_limits
    torch.set_num_threads(1)
    rounds, min_time = (3, 0.1) if args.quick else (5, 0.25)
    result = {"threads": 1, "torch": torch.__version__}
    with threadpool_limits(limits=1):
        if args.only in (None, "mha"):
            result["mha"] = bench_mha(QUICK_MHA if args.quick else MHA_SIZES, rounds, min_time)
        if args.only in (None, "sdpa"):
            result["sdpa"] = bench_sdpa(QUICK_SDPA if args.quick else SDPA_SIZES, rounds, min_time)
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
