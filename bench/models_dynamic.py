#!/usr/bin/env python3
"""bench/models_dynamic.py - issue 39's model row: BERT-base through the torch.compile backend
with dynamic batch and sequence length, against the same model compiled for each exact size.

    models_dynamic.py --socket SOCK --out DIR [--model bert] [--sizes 20] [--seed 0]
                      [--batch 1,32] [--seq 16,512] [--tune model] [--iters 30] [--padded]

One compilation with dynamic=True (the batch and sequence axes of the inputs marked dynamic
with their ranges), then SIZES random (batch, seq) pairs in range: each is called once (the
plans ask the daemon, in the background, to tune the ranges holding it), the tables are given
--settle-s to become ready, and then every size is timed from a CUDA graph (as bench/models.py
does) and checked against eager fp16 - after calls at that size until the plans' tables hold
ready entries for it (settle(): a plan swaps in a re-asked table at its next run, so a CUDA graph
captured right after the first calls would hold the generic kernels). The peer of each row is the same model compiled by the
backend for exactly that size (dynamic=False, a fresh Dynamo cache). Reported: recompilations
after the first (target 0), dynamic / static latency per size (target <= 1.15), the error.
Writes DIR/models_dynamic.json and DIR/models_dynamic.md, after every row (a run cut short keeps
what it measured). --padded passes an attention_mask as well, a padded batch's: row i keeps the
first s - (i % 4) * s / 8 tokens (transformers then builds a padding mask the attention reads).
"""
import argparse
import functools
import json
import os
import random
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
sys.path.insert(0, HERE)
import model_zoo  # noqa: E402
from models import graphed_time  # noqa: E402


def rel_err(a, b):
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))


def settle(fn, inputs, reports, timeout_s=90.0):
    """Calls fn(*inputs) until the dynamic compile's plans launch what is tuned for these sizes:
    a plan asks the daemon again (in the background, at most every REFRESH_S per range) only
    while an entry it launches is not ready, so when a call made no ask and brought no new table,
    every entry is ready. Seconds waited, or None at the timeout (the row then measures what the
    plans had)."""
    import torch
    from hidetd.dispatch import REFRESH_S
    plans = [p.plan for r in reports if getattr(r, "compiled", None) is not None
             for p in getattr(r.compiled, "pieces", ()) if p.plan is not None]
    t0, last = time.time(), None
    while time.time() - t0 < timeout_s:
        with torch.no_grad():
            fn(*inputs)
        torch.cuda.synchronize()
        time.sleep(REFRESH_S + 0.5)
        busy = any(pl._thread is not None and pl._thread.is_alive() for pl in plans)
        version = sum(pl.tables_version for pl in plans)
        if not busy and version == last:
            return time.time() - t0
        last = version
    return None


def kernel_times(fn, inputs, calls=5, top=14):
    """[(kernel name, launches per call, us per call)] of fn(*inputs), the largest first (the
    profiler's CUDA kernel events, summed by name)."""
    import torch
    from bench import kernel_times as profiled  # bench.py's summary of the profiler's events
    with torch.no_grad():
        per = profiled(lambda: fn(*inputs), calls)
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    print("  kernels: %.1f us per call in all" % sum(v[1] for _, v in rows), flush=True)
    for name, (n, us) in rows[:top]:
        print("  %8.1f us %5.1fx  %s" % (us, n, name[:110]), flush=True)
    return [(name, n, us) for name, (n, us) in rows[:top]]


def write_out(args, rows, compilations, explanation, compile_s, gpu, torch_version):
    """DIR/models_dynamic.json and .md from the rows so far: written after every row, so that a run
    cut short (a device call's time limit) keeps what it measured. Returns the table's lines."""
    summary = {"model": args.model, "padded": args.padded, "compile_s": compile_s,
               "compilations": compilations, "recompilations": max(0, compilations - 1),
               "torch_ops": explanation.torch, "hidetd_ops": explanation.hidetd,
               "left": sorted(explanation.left),
               "max_ratio": max((r["ratio"] for r in rows if "ratio" in r), default=None),
               "gmean_ratio": statistics.geometric_mean([r["ratio"] for r in rows if "ratio" in r])
               if any("ratio" in r for r in rows) else None,
               "tune": args.tune, "gpu": gpu, "torch": torch_version}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "models_dynamic.json"), "w") as f:
        json.dump({"rows": rows, "summary": summary}, f, indent=1)
    lines = ["| batch | seq | tables ready after | dynamic ms | static ms | dynamic / static | error |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append("| %d | %d | error: %s |||||" % (r["batch"], r["seq"], r["error"]))
            continue
        if "dynamic_ms" not in r:
            continue
        lines.append("| %d | %d | %s | %.3f | %s | %s | %.1e |" % (
            r["batch"], r["seq"], "%.0f s" % r["settle_s"] if r.get("settle_s") is not None else "not ready",
            r["dynamic_ms"], "%.3f" % r["static_ms"] if "static_ms" in r else "-",
            "%.3f" % r["ratio"] if "ratio" in r else "-", r["err"]))
    lines.append("")
    lines.append("%s: %d compilation(s) (%d after the first), %d ops in hidetd, %d in PyTorch %s; "
                 "compile %.1f s; worst dynamic/static %s, geometric mean %s; tune %s; %s" % (
                     args.model, summary["compilations"], summary["recompilations"], summary["hidetd_ops"],
                     summary["torch_ops"], summary["left"], compile_s,
                     "%.3f" % summary["max_ratio"] if summary["max_ratio"] else "-",
                     "%.3f" % summary["gmean_ratio"] if summary["gmean_ratio"] else "-", args.tune, summary["gpu"]))
    with open(os.path.join(args.out, "models_dynamic.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def _with_mask(torch):
    class WithMask(torch.nn.Module):
        """The model called with the padded batch's attention_mask by keyword: passed by position
        it would land in a decoder's second parameter, its KV cache (GPT-2's past_key_values)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids, mask):
            return self.inner(ids, attention_mask=mask)

    return WithMask


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--model", default="bert")
    ap.add_argument("--sizes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--seq", default="16,512")
    ap.add_argument("--tune", default="model")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--settle-s", type=float, default=30.0)
    ap.add_argument("--at", default="",
                    help="the sizes to run, BxS,BxS,... (e.g. a row of an earlier run, with --profile), "
                         "instead of --sizes random ones")
    ap.add_argument("--no-static", action="store_true")
    ap.add_argument("--padded", action="store_true", help="pass a padded batch's attention_mask too")
    ap.add_argument("--profile", action="store_true",
                    help="also print each row's kernels (CUDA time per call, summed by name) for "
                         "the dynamic and the static compile: where a ratio comes from")
    args = ap.parse_args()

    import torch
    import hidetd
    b_lo, b_hi = (int(x) for x in args.batch.split(","))
    s_lo, s_hi = (int(x) for x in args.seq.split(","))
    rng = random.Random(args.seed)
    sizes = [tuple(int(v) for v in bs.split("x")) for bs in args.at.split(",") if bs]
    while not args.at and len(sizes) < args.sizes:
        bs = (rng.randint(b_lo, b_hi), rng.randint(s_lo, s_hi))
        if bs not in sizes:
            sizes.append(bs)
    torch.manual_seed(0)
    m, _ = model_zoo.build((args.model, b_hi, s_hi), torch.float16)
    vocab = m.config.vocab_size
    if args.padded:
        m = _with_mask(torch)(m)

    def inputs_at(b, s):
        # model_zoo's transformer inputs: token ids [b, s]; --padded, an attention_mask [b, s].
        ids = torch.randint(0, vocab, (b, s), device="cuda")
        if not args.padded:
            return (ids,)
        mask = torch.ones(b, s, dtype=torch.int64, device="cuda")
        for i in range(b):
            mask[i, s - (i % 4) * s // 8:] = 0
        return (ids, mask)

    opts = {"address": args.socket, "tune": args.tune, "dynamic_max": max(b_hi, s_hi)}
    reports = []
    be = functools.partial(hidetd.backend.hidetd_backend, options=opts, _reports=reports)
    warnings.simplefilter("ignore")
    torch._dynamo.reset()
    first = inputs_at(max(2, min(8, b_hi)), max(2, min(128, s_hi)))  # the compilation's example
    # PyTorch specializes sizes 0 and 1 (docs/python.md): a range marked from 1 starts at 2, and
    # a batch of 1 is a compilation of its own, counted below like any other.
    for x in first:
        torch._dynamo.mark_dynamic(x, 0, min=max(2, b_lo), max=b_hi)
        torch._dynamo.mark_dynamic(x, 1, min=max(2, s_lo), max=s_hi)
    t0 = time.time()
    c = torch.compile(m, backend=be)
    with torch.no_grad():
        c(*first)
    compile_s = time.time() - t0
    with torch.no_grad():
        for b, s in sizes:
            c(*inputs_at(b, s))  # each size once: the ranges holding them are asked for
    time.sleep(args.settle_s)
    explanation = hidetd.backend.Explanation(reports)
    gpu, torch_version = torch.cuda.get_device_name(), torch.__version__
    # Every dynamic row first: the exact-size compiles below reset Dynamo, which drops the
    # dynamic compilation too (a later dynamic call would compile again and count as a
    # recompilation that serving would never see).
    rows = []
    for b, s in sizes:
        xs = inputs_at(b, s)
        row = {"batch": b, "seq": s}
        try:
            with torch.no_grad():
                want = m(*xs)
                got = c(*xs)
            want = want[0] if isinstance(want, (tuple, list)) else getattr(want, "last_hidden_state", want)
            got = got[0] if isinstance(got, (tuple, list)) else getattr(got, "last_hidden_state", got)
            row["err"] = rel_err(got, want)
            row["settle_s"] = settle(c, xs, reports)
            row["dynamic_ms"] = graphed_time(c, xs, args.iters)
            if args.profile:
                print("%d x %d, dynamic:" % (b, s), flush=True)
                row["kernels_dynamic"] = kernel_times(c, xs)
        except Exception as e:  # a row that fails stays in the table with the reason
            row["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        rows.append(row)
        print("dynamic %s" % json.dumps({k: v for k, v in row.items() if k != "kernels_dynamic"}), flush=True)
        write_out(args, rows, len(reports), explanation, compile_s, gpu, torch_version)
    compilations = len(reports)
    # Said now as well as in the summary: a run cut short in the static compiles below keeps it.
    print("dynamic rows done: %d compilation(s), %d after the first" % (compilations, max(0, compilations - 1)),
          flush=True)
    for row in rows:
        if args.no_static or "error" in row:
            print(json.dumps(row), flush=True)
            continue
        xs = inputs_at(row["batch"], row["seq"])
        try:
            torch._dynamo.reset()
            cs = torch.compile(m, backend=functools.partial(hidetd.backend.hidetd_backend, options={
                "address": args.socket, "tune": args.tune}), dynamic=False)
            with torch.no_grad():
                cs(*xs)
            row["static_ms"] = graphed_time(cs, xs, args.iters)
            if args.profile:
                print("%d x %d, static:" % (row["batch"], row["seq"]), flush=True)
                row["kernels_static"] = kernel_times(cs, xs)
            row["ratio"] = row["dynamic_ms"] / row["static_ms"]
        except Exception as e:
            row["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        print(json.dumps(row), flush=True)
        write_out(args, rows, compilations, explanation, compile_s, gpu, torch_version)
    lines = write_out(args, rows, compilations, explanation, compile_s, gpu, torch_version)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
