#!/usr/bin/env python3
"""bench/peer_epilogue.py - what a fused bias + GELU epilogue costs cuBLASLt, the peer's own
fused path, against the same library's bare GEMM.

Issue 13 asks that a fused GEMM cost at most 5% more than the same GEMM unfused. This tool
measures the vendor library at the bench's fused shapes the way bench.py times kernels
(CUDA-graph replays over rotating input sets, the two programs alternating replay by replay):

- bare:       torch.mm (cuBLAS)
- bias:       torch.addmm (cuBLASLt, bias epilogue)
- bias+gelu:  torch._addmm_activation(use_gelu=True) (cuBLASLt GELU_BIAS epilogue; tanh GELU)
- eager:      F.gelu(a @ b + bias), three kernels (the bench's peer for the fused rows)

    peer_epilogue.py [--shapes 4096x3072x768,2048x14336x4096] [--dtypes f16,bf16]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (timing helpers, rotating input sets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x3072x768,2048x14336x4096")
    ap.add_argument("--dtypes", default="f16,bf16")
    args = ap.parse_args()
    torch.cuda.init()
    print(f"{'shape':18} {'dtype':5} {'bare us':>8} {'bias':>8} {'bias+gelu':>9} {'eager':>8} "
          f"{'bias cost':>9} {'gelu cost':>9}")
    for shape in args.shapes.split(","):
        m, n, k = (int(v) for v in shape.split("x"))
        for dt in args.dtypes.split(","):
            tdt = bench.TORCH_DT[dt]
            nbytes = (m * k + k * n + m * n) * torch.finfo(tdt).bits // 8
            n_sets = bench.sets_for(nbytes)
            sets = [(bench.rand([m, k], dt), bench.rand([k, n], dt), bench.rand([n], dt)) for _ in range(n_sets)]
            a0, b0, c0 = sets[0]
            fused = torch._addmm_activation(c0, a0, b0, use_gelu=True).float()
            want = F.gelu(a0.float() @ b0.float() + c0.float(), approximate="tanh")
            err = bench.rel_err(fused, want)

            def make(kind):
                def make_fn(i):
                    a, b, c = sets[i]
                    if kind == "bare":
                        return lambda: torch.mm(a, b)
                    if kind == "bias":
                        return lambda: torch.addmm(c, a, b)
                    if kind == "gelu":
                        return lambda: torch._addmm_activation(c, a, b, use_gelu=True)
                    return lambda: F.gelu(a @ b + c)
                return make_fn

            bare, bias = bench.time_pair_us(make("bare"), make("bias"), n_sets)
            bare2, gelu = bench.time_pair_us(make("bare"), make("gelu"), n_sets)
            bare3, eager = bench.time_pair_us(make("bare"), make("eager"), n_sets)
            base = sorted([bare, bare2, bare3])[1]
            print(f"{shape:18} {dt:5} {base:8.2f} {bias:8.2f} {gelu:9.2f} {eager:8.2f} "
                  f"{100 * (bias / bare - 1):+8.1f}% {100 * (gelu / bare2 - 1):+8.1f}%   (fused max rel err {err:.1e})",
                  flush=True)


if __name__ == "__main__":
    main()
