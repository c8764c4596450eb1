#!/usr/bin/env python3
"""bench/dynamic.py - issue 39's rows: kernels for a range of sizes against kernels for one size.

For each case a request with a named dimension ("n") asks a running hidetd for its dispatch table
(docs/api.md, "Named dimensions"), with every sampled size as a hint so the ranges holding them
are tuned; once those entries are ready, each sampled size (none a power of two) is run three
ways, each checked against an fp32 PyTorch reference and timed as bench.py times everything
(CUDA graphs over rotating input sets):

  entry    the ready entry holding n (a merged one where measured neighbours ran the same code),
           launched with n bound (int parameters, grid rules)
  generic  the table's generic set at n
  static   the kernel of a static request for exactly n, same tune mode
  peer     PyTorch (cuBLAS, F.layer_norm, scaled_dot_product_attention, ...)

Ratios: static / entry (target >= 1/1.10), peer / entry (GEMM target >= 0.95).

    dynamic.py --socket S [--tune measure|model] [--arch native|sm_90a] [--out DIR]
               [--cases gemm4096,gemm14336,layernorm,rmsnorm,attention] [--sizes 100,700 [--any-sizes]]
               [--profile]

--profile adds each row's kernels (GPU time per call by name, torch.profiler) for the entry and the
static set: whether a ratio is the kernels' or what surrounds them in a replay. --any-sizes runs
the --sizes themselves rather than those of a case's sampled sizes (a range's middle, to set an
entry's time there beside the middle time its job recorded).
    dynamic.py --dry-run [--socket S] [--arch sm_90a] [--cases ...]

attention (issue 39's row: within 1.10x of the static kernel at each of 8 sampled lengths) is
three cases, S = Skv = n in 16..4096 at 17, 77, 200, 333, 513, 1000, 2047, 3001, f16:
  attn128  causal self-attention [8, n, 16, 128] (bshd)
  attn64   causal self-attention [8, n, 16, 64] (bshd)
  bert     BERT's [8, 12, n, 64] (bhsd) with an additive padding mask [8, 1, 1, n] (0 or -inf,
           each sequence's keys past a random length masked)
the entry is whichever dynamic attention template the tuner picks (attention_wgmma or
attention_mma on sm_90a, attention_mma elsewhere), the static kernel any template's, the peer
PyTorch's scaled_dot_product_attention with the same mask.

--dry-run builds every request without a GPU (no torch.cuda, no cupy) and prints them; with
--socket it also sends them to that daemon (a CPU one will do): each table request without its
hints and with "tune": "none" (the generic set is compiled, no range is tuned) must answer a table
whose entries hold every sampled size, and each static request with "wait": false must be
accepted (202) or answered (200). Exit status 1 when one is refused.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))


def gpu_imports():
    """bench.py's GPU side (cupy, CUDA graphs): imported only for a run on a GPU, so --dry-run
    works on a machine without one."""
    global TORCH_DT, Daemon, Kernel, kernel_times, rand, rel_err, sets_for, time_rounds_us
    from bench import TORCH_DT, Daemon, Kernel, kernel_times, rand, rel_err, sets_for, time_rounds_us  # noqa: F401

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


ATTN_SIZES = [17, 77, 200, 333, 513, 1000, 2047, 3001]


def attention_case(b, h, d, causal, layout="bshd", mask=False, dt="f16"):
    """Attention with a dynamic sequence length S = Skv = "n" in 16..4096: q, k, v [b, n, h, d]
    (bshd) or [b, h, n, d] (bhsd); with mask, an additive padding mask [b, 1, 1, n]."""
    def qshape(m):
        return [b, m, h, d] if layout == "bshd" else [b, h, m, d]

    def req(m):
        t = {"shape": qshape(m), "dtype": dt}
        r = {"op": "attention", "inputs": [dict(t), dict(t), dict(t)],
             "attrs": {"layout": layout, "causal": causal}}
        if mask:
            r["inputs"].append({"shape": [b, 1, 1, m], "dtype": dt})
        return r

    def bhsd(x):
        return x.transpose(1, 2) if layout == "bshd" else x

    def make(m):
        xs = [rand(qshape(m), dt) for _ in range(3)]
        if mask:
            # each sequence keeps its first L keys (L in 1..m), the padding after them masked
            keep = torch.randint(1, m + 1, (b,), device="cuda")
            pos = torch.arange(m, device="cuda")
            mk = torch.zeros([b, 1, 1, m], dtype=TORCH_DT[dt], device="cuda")
            mk.masked_fill_((pos[None, :] >= keep[:, None])[:, None, None, :], float("-inf"))
            xs.append(mk)
        return xs

    def ref(xs):
        q, k, v = (bhsd(x).float() for x in xs[:3])
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=xs[3].float() if mask else None, is_causal=causal)
        return bhsd(o)

    def peer(xs):
        q, k, v = (bhsd(x) for x in xs[:3])
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=xs[3] if mask else None, is_causal=causal)

    name = "attention%s%s [%s] hd%d" % (" causal" if causal else "", " mask" if mask else "",
                                         ",".join(map(str, qshape("n"))), d)
    return dict(name=name, dt=dt, sizes=ATTN_SIZES, lo=16, hi=4096, req=req, make=make,
                out=lambda m: qshape(m), ref=ref, peer=peer,
                nbytes=lambda m: 2 * 4 * b * m * h * d + (2 * b * m if mask else 0), target_peer=None)


CASES = {"gemm4096": lambda: gemm_case(4096, 4096), "gemm14336": lambda: gemm_case(4096, 14336),
         "layernorm": lambda: row_case("layernorm", 4096), "rmsnorm": lambda: row_case("rmsnorm", 4096),
         "attn128": lambda: attention_case(8, 16, 128, causal=True),
         "attn64": lambda: attention_case(8, 16, 64, causal=True),
         "bert": lambda: attention_case(8, 12, 64, causal=False, layout="bhsd", mask=True)}
# Names that stand for several cases.
GROUPS = {"attention": ["attn128", "attn64", "bert"]}


def case_names(spec):
    out = []
    for name in spec.split(","):
        for n in GROUPS.get(name, [name]):
            if n not in CASES:
                raise SystemExit("dynamic.py: unknown case %r (cases: %s)" % (n, ", ".join(list(CASES) + list(GROUPS))))
            out.append(n)
    return out


HEADER = f"{'case':28} {'n':>5} {'entry us':>9} {'static us':>9} {'peer us':>8} {'st/en':>6} {'peer/en':>7} ok"


def row_line(r):
    """One row of the table printed at the end (and as each row is measured)."""
    if "error" in r:
        return f"{r['case']:28} {r.get('n', ''):>5} ERROR {r['error']}"
    return (f"{r['case']:28} {r['n']:>5} {r['entry_us']:>9} {r['static_us']:>9} {r['peer_us']:>8} "
            f"{r['static_over_entry']:>6} {r['peer_over_entry']:>7} {r['correct']}")


def selected_cases(args):
    """The cases of --cases, each with only the --sizes among its sampled sizes (all without
    --sizes; with --any-sizes, the --sizes themselves within the case's range); a case left with
    none is dropped."""
    only = [int(v) for v in args.sizes.split(",") if v]
    out = []
    for name in case_names(args.cases):
        case = CASES[name]()
        if only and args.any_sizes:
            case["sizes"] = [n for n in only if case.get("lo", 1) <= n <= case.get("hi", 8192)]
        elif only:
            case["sizes"] = [n for n in case["sizes"] if n in only]
        if case["sizes"]:
            out.append(case)
    return out


def dynamic_request(case, tune, arch):
    r = case["req"]("n")
    r.update(dims={"n": {"min": case.get("lo", 1), "max": case.get("hi", 8192), "hints": case["sizes"]}},
             tune=tune, arch=arch, wait=True)
    return r


def entry_for(table, n):
    for e in table["dispatch"]["entries"]:
        lo, hi = e["ranges"]["n"]
        if lo <= n <= hi:
            return e
    return None


def run(daemon, case, args, out_rows, save=None):
    """Runs one case's sizes into out_rows; save() after each row, so a run cut short by a
    timeout keeps the rows it measured."""
    body = dynamic_request(case, args.tune, args.arch)
    t0 = time.time()
    status, table = daemon.call("POST", "/v1/kernels", body)
    first_s = time.time() - t0
    if status != 200:
        out_rows.append(dict(case=case["name"], error=f"HTTP {status}: {json.dumps(table)[:300]}"))
        return
    # Wait for the hinted entries (their jobs run in the background), noting each one's job while
    # it tunes: its range_worst says how far the range's kernel is from the best at any size. An
    # entry cut from a range whose kernel fit it badly ("coarse") runs that kernel while its own
    # tuning (its "job") runs: wait for that too.
    deadline = time.time() + args.wait_s
    jobs = {}
    while time.time() < deadline:
        pending = []
        for n in case["sizes"]:
            e = entry_for(table, n) or {}
            if e.get("job"):
                jobs[n] = e["job"]
            if e.get("state") != "ready" or (e.get("coarse") and e.get("job")):
                pending.append(n)
        if not pending:
            break
        time.sleep(1)
        status, table = daemon.call("POST", "/v1/kernels", body)
    # The first size of an untuned range, from a warm generic set: the request's own latency.
    t0 = time.time()
    daemon.call("POST", "/v1/kernels",
                dict(dynamic_request(case, args.tune, args.arch), sizes={"n": case.get("hi", 8192) - 1}))
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
        row["merged"] = len(e.get("merged", [])) or None
        row["coarse"] = e.get("coarse", {}).get("n")
        row["range_worst"] = e["kernel_set"].get("range_worst")
        if row["range_worst"] is None and n in jobs:
            st, job = daemon.call("GET", jobs[n])
            row["range_worst"] = job.get("job", {}).get("range_worst") if st == 200 else None
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
        # The four take turns (time_rounds_us): the H200's clocks moved one kernel by 14% between
        # two runs a minute apart (bench/results/2026-11-30-h200-session12/g), which timing them
        # one after the other would put into their ratios.
        labels = ("entry", "generic", "static")
        makers = [lambda i, k=kern: k.bind(sets[i], outs[i], {"n": n}) for kern in (entry, generic, static)]
        makers.append(lambda i: case["peer"](sets[i]))
        for label, us in zip(labels + ("peer",), time_rounds_us(makers, n_sets)):
            row[f"{label}_us"] = round(us, 2)
        if args.profile:
            # The kernels' own GPU time per call (the profiler's), beside the graph replays': where
            # entry and static differ, whether the kernels differ or what surrounds them.
            for label, kern in (("entry", entry), ("static", static)):
                per = kernel_times(kern.bind(sets[0], outs[0], {"n": n}))
                row[f"{label}_kernels"] = {k[:80]: [round(c, 2), round(us, 3)] for k, (c, us) in per.items()}
        row["static_over_entry"] = round(row["static_us"] / row["entry_us"], 3)
        row["peer_over_entry"] = round(row["peer_us"] / row["entry_us"], 3)
        row["entry_template"] = e["kernel_set"].get("schedule", {}).get("template")
        row["static_template"] = sset.get("schedule", {}).get("template")
        # The schedules themselves: where st/en misses, whether the two run the same schedule
        # (then the difference is the code for a range) or the range's tuning chose another.
        row["entry_params"] = e["kernel_set"].get("schedule", {}).get("params")
        row["static_params"] = sset.get("schedule", {}).get("params")
        out_rows.append(row)
        print(json.dumps(row), flush=True)
        print(row_line(row), flush=True)
        if save:
            save()


def dry_run(args):
    """Builds every request; with --socket, sends them as the module's comment says."""
    conn = None
    if args.socket:
        from hidetd_unix import UnixHTTPConnection

        def conn(body):
            c = UnixHTTPConnection(args.socket, 600)
            c.request("POST", "/v1/kernels", body=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            payload = r.read()
            c.close()
            return r.status, json.loads(payload)
    bad = 0
    for case in selected_cases(args):
        body = dynamic_request(case, args.tune, args.arch)
        statics = [dict(case["req"](n), tune=args.tune, arch=args.arch, wait=True) for n in case["sizes"]]
        print("%-44s table %s; %d static requests, n = %s" % (case["name"], json.dumps(body), len(statics),
                                                              case["sizes"]))
        if not conn:
            continue
        check = dict(body, tune="none")
        check["dims"] = {"n": {k: v for k, v in body["dims"]["n"].items() if k != "hints"}}
        st, table = conn(check)
        missing = [n for n in case["sizes"] if st == 200 and not entry_for(table, n)]
        ok = st == 200 and "dispatch" in table and not missing
        if ok:
            print("  table: HTTP %d ok, %d entries" % (st, len(table["dispatch"]["entries"])))
        else:
            print("  table: HTTP %d %s%s" % (st, json.dumps(table)[:300],
                                             " (no entry for %s)" % missing if missing else ""))
        bad += not ok
        refused = 0
        for n, sreq in zip(case["sizes"], statics):
            st, ans = conn(dict(sreq, tune="none", wait=False))
            if st not in (200, 202):
                print("  static n = %d: HTTP %d %s" % (n, st, json.dumps(ans)[:300]))
                refused += 1
        print("  static: %s" % ("all accepted" if not refused else "%d refused" % refused))
        bad += refused
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--tune", default="measure")
    ap.add_argument("--arch", default="native")
    ap.add_argument("--cases", default="gemm4096,gemm14336,layernorm,rmsnorm,attention")
    ap.add_argument("--sizes", default="",
                    help="comma-separated sizes: run only these of each case's sampled sizes")
    ap.add_argument("--any-sizes", action="store_true",
                    help="run the --sizes themselves, sampled or not (a range's middle, to set an entry's time "
                         "there beside its job's trial)")
    ap.add_argument("--wait-s", type=float, default=300)
    ap.add_argument("--out", default="/tmp/hidetd-dynamic")
    ap.add_argument("--workdir", default="/tmp/hidetd-dynamic-cubins")
    ap.add_argument("--profile", action="store_true",
                    help="also record each row's kernels (GPU time per call, by name) for the entry and the "
                         "static kernel set")
    ap.add_argument("--dry-run", action="store_true",
                    help="build the requests without a GPU; with --socket, check them against that daemon")
    args = ap.parse_args()
    if args.dry_run:
        sys.exit(dry_run(args))
    if not args.socket:
        ap.error("--socket is required (but with --dry-run)")
    gpu_imports()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    daemon = Daemon(args.socket)
    rows = []

    def save():
        with open(os.path.join(args.out, "dynamic.json"), "w") as f:
            json.dump(rows, f, indent=1)

    for case in selected_cases(args):
        run(daemon, case, args, rows, save)
    save()
    print(HEADER)
    for r in rows:
        print(row_line(r))


if __name__ == "__main__":
    main()
