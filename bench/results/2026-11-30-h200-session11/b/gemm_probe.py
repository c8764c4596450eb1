#!/usr/bin/env python3
"""Issue 39's GEMM rows that miss cuBLAS ([n,4096]x[4096,4096] at n = 100, 700, 2100): does any
schedule in the space reach cuBLAS? Measures up to --candidates of each space in the model's
order (bench/calibrate.py's calibrate_case: worker times from the trials table) and prints the
best ten with their params, and cuBLAS's kernel names and time (torch.profiler)."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
import bench  # noqa: E402
import calibrate  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--socket", required=True)
ap.add_argument("--db", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--ms", default="100,700,2100")
ap.add_argument("--n", type=int, default=4096)
ap.add_argument("--candidates", type=int, default=300)
ap.add_argument("--budget-s", type=float, default=50)
args = ap.parse_args()
args.arch, args.top = "native", 8
daemon = bench.Daemon(args.socket)
seen = set(calibrate.trials_since(args.db, set()))
out = []
for m in (int(v) for v in args.ms.split(",")):
    k, n = 4096, args.n
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50):
            torch.matmul(a, b)
        torch.cuda.synchronize()
    dev_us = lambda e: getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)  # noqa: E731
    kern = [(e.key, e.count, dev_us(e) / 50) for e in prof.key_averages() if dev_us(e)]
    case = dict(name=f"gemm{m}x{n}", shape=f"{m}x{n}x{k}", dtype="f16",
                req={"op": "matmul", "inputs": [{"shape": [m, k], "dtype": "f16"}, {"shape": [k, n], "dtype": "f16"}]})
    res = calibrate.calibrate_case(daemon, case, args, seen)
    s = res.get("summary", res)
    print(f"=== m={m} n={n}: cuBLAS {[(nm[:90], round(us, 2)) for nm, c, us in kern]}", flush=True)
    print(json.dumps(s), flush=True)
    ok = sorted((r for r in res.get("rows", []) if r["ok"]), key=lambda r: r["latency_us"])
    for r in ok[:10]:
        print("  %7.2f us rank %4s %s %s" % (r["latency_us"], r["model_rank"], r["template"],
                                             json.dumps(r["params"], separators=(",", ":"))), flush=True)
    out.append(dict(m=m, n=n, cublas=kern, result=res))
    with open(os.path.join(args.out, "gemm_probe.json"), "w") as f:
        json.dump(out, f)
