#!/usr/bin/env python3
"""bench/dynamic.py - issue 39's rows: kernels for a range of sizes against kernels for one size.

For each case a request with a named dimension ("n") asks a running hidetd for its dispatch table
(docs/api.md, "Named dimensions"), with every sampled size as a hint so the ranges holding them
are tuned; once those entries are ready, each sampled size (none a power of two) is run three
ways, each checked against an fp32 PyTorch reference and timed as bench.py times everything
(CUDA graphs over rotating input sets):

  entry    the ready entry holding n, launched with n bound (int parameters, grid rules)
  generic  the table's generic set at n
  static   the kernel of a static request for exactly n, same tune mode
  peer     PyTorch (cuBLAS, F.layer_norm, ...)

Ratios: static / entry (target >= 1/1.10), peer / entry (GEMM target >= 0.95).

    dynamic.py --socket S [--tune measure|model] [--out DIR]
               [--cases gemm4096,gemm14336,layernorm,rmsnorm,attention]

attention: causal self-attention [4, n, 16, 128] (bshd), S = Skv = n at 8 sampled lengths; the
entry is whichever dynamic attention template the tuner picks (attention_wgmma or attention_mma
on sm_90a, attention_mma elsewhere), the static kernel any template's, the peer PyTorch's
scaled_dot_product_attention.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import TORCH_DT, Daemon, Kernel, rand, rel_err, sets_for, time_us  # noqa: E402

GEMM_SIZES = [3, 7, 24, 57, 100, 200, 300, 480, 700, 1000, 1500, 2100, 3000, 4500, 6000, 8000]
ROW_SIZES = [5, 60, 250, 700, 1500, 3100, 5000, 7900]


def gemm_case(k, n_out, dt="f16"):
    def req(m):
        return {"op": "matmul", "inputs": [{"shape": [m, k], "dtype": dt}, {"shape": [k, n_out], "dtype": dt}]}

    return dict(name=f"gemm [n,{k}]x[{k},{n_out}]", dt=dt, sizes=GEMM_SIZES, req=req,
                make=lambda m: [rand([m, k], dt), rand([k, n_out], dt)],
                out=lambda m: [m, n_out],
                ref=lambda xs: xs[0].float() @ xs[1].float(),
                peer=lambda xs: (lambda: torch.matmul(xs[0], xs[1])),
                nbytes=lambda m: 2 * (m * k + k * n_out + m * n_out), target_peer=0.95)


def row_case(op, cols, dt="f16"):
    def req(m):
        r = {"op": op, "inputs": [{"shape": [m, cols], "dtype": dt}, {"shape": [cols], "dtype": dt}],
             "attrs": {"eps": 1e-5}}
        if op == "layernorm":
            r["inputs"].append({"shape": [cols], "dtype": dt})
        return r

    n_w = 2 if op == "layernorm" else 1

    def ref(xs):
        x = xs[0].float()
        if op == "layernorm":
            return F.layer_norm(x, (cols,), xs[1].float(), xs[2].float(), 1e-5)
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * xs[1].float()

    def peer(xs):
        if op == "layernorm":
            return lambda: F.layer_norm(xs[0], (cols,), xs[1], xs[2], 1e-5)
        return lambda: F.rms_norm(xs[0], (cols,), xs[1], 1e-5)

    return dict(name=f"{op} [n,{cols}]", dt=dt, sizes=ROW_SIZES, req=req,
                make=lambda m: [rand([m, cols], dt)] + [rand([cols], dt) for _ in range(n_w)],
                out=lambda m: [m, cols], ref=ref, peer=peer, nbytes=lambda m: 4 * m * cols, target_peer=None)


ATTN_SIZES = [77, 200, 333, 513, 1000, 1500, 2047, 3001]


def attention_case(b=4, h=16, d=128, causal=True, dt="f16"):
    """Self-attention with a dynamic sequence length: q, k, v [b, n, h, d] (layout bshd), S and
    Skv both "n"; the dims' max is dynamic_request's 8192."""
    def req(m):
        t = {"shape": [b, m, h, d], "dtype": dt}
        return {"op": "attention", "inputs": [dict(t), dict(t), dict(t)],
                "attrs": {"layout": "bshd", "causal": causal}}

    def ref(xs):
        q, k, v = (x.float().transpose(1, 2) for x in xs)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)

    def peer(xs):
        q, k, v = (x.transpose(1, 2) for x in xs)
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return dict(name=f"attention{' causal' if causal else ''} [{b},n,{h},{d}]", dt=dt, sizes=ATTN_SIZES, req=req,
                make=lambda m: [rand([b, m, h, d], dt) for _ in range(3)],
                out=lambda m: [b, m, h, d], ref=ref, peer=peer, nbytes=lambda m: 2 * 4 * b * m * h * d,
                target_peer=None)


CASES = {"gemm4096": lambda: gemm_case(4096, 4096), "gemm14336": lambda: gemm_case(4096, 14336),
         "layernorm": lambda: row_case("layernorm", 4096), "rmsnorm": lambda: row_case("rmsnorm", 4096),
         "attention": lambda: attention_case()}


def dynamic_request(case, tune, arch):
    r = case["req"]("n")
    r.update(dims={"n": {"min": 1, "max": 8192, "hints": case["sizes"]}}, tune=tune, arch=arch, wait=True)
    return r


def entry_for(table, n):
    for e in table["dispatch"]["entries"]:
        lo, hi = e["ranges"]["n"]
        if lo <= n <= hi:
            return e
    return None


def run(daemon, case, args, out_rows):
    body = dynamic_request(case, args.tune, args.arch)
    t0 = time.time()
    status, table = daemon.call("POST", "/v1/kernels", body)
    first_s = time.time() - t0
    if status != 200:
        out_rows.append(dict(case=case["name"], error=f"HTTP {status}: {json.dumps(table)[:300]}"))
        return
    # Wait for the hinted entries (their jobs run in the background).
    deadline = time.time() + args.wait_s
    while time.time() < deadline:
        pending = [n for n in case["sizes"] if (entry_for(table, n) or {}).get("state") != "ready"]
        if not pending:
            break
        time.sleep(1)
        status, table = daemon.call("POST", "/v1/kernels", body)
    # The first size of an untuned range, from a warm generic set: the request's own latency.
    t0 = time.time()
    daemon.call("POST", "/v1/kernels", dict(dynamic_request(case, args.tune, args.arch), sizes={"n": 8191}))
    untuned_ms = (time.time() - t0) * 1000
    generic = Kernel(daemon, table["dispatch"]["generic"], args.workdir)
    tol = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-2}[case["dt"]]
    for n in case["sizes"]:
        row = dict(case=case["name"], n=n, first_request_s=round(first_s, 2), untuned_request_ms=round(untuned_ms, 2))
        e = entry_for(table, n)
        if not e or e.get("state") != "ready":
            row["error"] = f"entry for {n}: {e and e.get('state')}"
            out_rows.append(row)
            continue
        row["range"] = e["ranges"]["n"]
        entry = Kernel(daemon, e["kernel_set"], args.workdir)
        sreq = dict(case["req"](n), tune=args.tune, arch=args.arch, wait=True)
        st, sset = daemon.call("POST", "/v1/kernels", sreq)
        if st != 200:
            row["error"] = f"static HTTP {st}"
            out_rows.append(row)
            continue
        static = Kernel(daemon, sset, args.workdir)
        out_dt = TORCH_DT[e["kernel_set"]["output"]["dtype"]]
        xs = case["make"](n)
        ref = case["ref"](xs)
        for label, kern in (("entry", entry), ("generic", generic), ("static", static)):
            out = torch.full(case["out"](n), float("nan"), dtype=out_dt, device="cuda")
            kern.bind(xs, out, {"n": n})()
            torch.cuda.synchronize()
            row[f"{label}_err"] = rel_err(out, ref)
        row["correct"] = all(row[f"{k}_err"] <= tol for k in ("entry", "generic", "static"))
        n_sets = sets_for(case["nbytes"](n))
        sets = [case["make"](n) for _ in range(n_sets)]
        outs = [torch.empty(case["out"](n), dtype=out_dt, device="cuda") for _ in range(n_sets)]
        for label, kern in (("entry", entry), ("generic", generic), ("static", static)):
            row[f"{label}_us"] = round(time_us(lambda i, k=kern: k.bind(sets[i], outs[i], {"n": n}), n_sets), 2)
        row["peer_us"] = round(time_us(lambda i: case["peer"](sets[i]), n_sets), 2)
        row["static_over_entry"] = round(row["static_us"] / row["entry_us"], 3)
        row["peer_over_entry"] = round(row["peer_us"] / row["entry_us"], 3)
        row["entry_template"] = e["kernel_set"].get("schedule", {}).get("template")
        row["static_template"] = sset.get("schedule", {}).get("template")
        out_rows.append(row)
        print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tune", default="measure")
    ap.add_argument("--arch", default="native")
    ap.add_argument("--cases", default="gemm4096,gemm14336,layernorm,rmsnorm,attention")
    ap.add_argument("--wait-s", type=float, default=300)
    ap.add_argument("--out", default="/tmp/hidetd-dynamic")
    ap.add_argument("--workdir", default="/tmp/hidetd-dynamic-cubins")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    daemon = Daemon(args.socket)
    rows = []
    for name in args.cases.split(","):
        run(daemon, CASES[name](), args, rows)
    with open(os.path.join(args.out, "dynamic.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{'case':28} {'n':>5} {'entry us':>9} {'static us':>9} {'peer us':>8} {'st/en':>6} {'peer/en':>7} ok")
    for r in rows:
        if "error" in r:
            print(f"{r['case']:28} {r.get('n', ''):>5} ERROR {r['error']}")
            continue
        print(f"{r['case']:28} {r['n']:>5} {r['entry_us']:>9} {r['static_us']:>9} {r['peer_us']:>8} "
              f"{r['static_over_entry']:>6} {r['peer_over_entry']:>7} {r['correct']}")


if __name__ == "__main__":
    main()
