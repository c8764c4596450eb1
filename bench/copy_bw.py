#!/usr/bin/env python3
"""bench/copy_bw.py - the GPU's copy bandwidth: device-to-device copies of 32, 117 and 512 MiB in
CUDA-graph replays, as bench.py times kernels. Issue 13 judges the skinny GEMMs' weight streaming
against it (">= 85% of copy bandwidth"); read + write bytes per second and the read side alone.

    copy_bw.py
"""
import torch
torch.cuda.init()
for mib in (32, 117, 512):
    n = mib * 1024 * 1024 // 2
    xs = [torch.empty(n, dtype=torch.float16, device="cuda").normal_() for _ in range(4)]
    ys = [torch.empty_like(xs[0]) for _ in range(4)]
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(4):
            ys[i].copy_(xs[i])
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for r in range(20):
                ys[r % 4].copy_(xs[r % 4])
    torch.cuda.synchronize()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3 / 20)
    ts.sort()
    us = ts[len(ts) // 2]
    print(f"copy {mib} MiB: {us:.1f} us per copy, {2 * n * 2 / us / 1e6:.3f} TB/s (read + write), "
          f"{n * 2 / us / 1e6:.3f} TB/s read side")
