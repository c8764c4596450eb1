#!/usr/bin/env python3
"""bench/graphs.py - the example graphs (examples/graphs/*.json) as hidetd launch plans run
through the Python runtime (clients/python), against the same blocks in PyTorch eager, on one
GPU, in one run.

    graphs.py --socket SOCK [--out DIR] [--tune measure|model] [--dtype f16]

Tune: "measure" when the daemon has a GPU worker (GET /v1/status says gpu_available), else
"model", unless --tune says; measured tuning gets a budget per kernel (--budget-s,
--budget-candidates). A graph whose measured tuning fails is planned with "model" instead, and
its row says why (so one failing kernel does not cost the whole table).

Timing, two ways, hidetd and eager alternating round by round (so clock and power changes reach
both alike), median of the rounds:
  - "call": CUDA events around N back-to-back calls from Python - plan(x=...) against
    module(x) - launch overheads of both runtimes included (the number a user sees);
  - "graph": the same calls captured R times into a CUDA graph and replayed (bench.py's method):
    GPU time only.
Memory: hidetd needs arena_bytes + constants_bytes beside the caller's inputs, weights and
output. PyTorch's is torch.cuda.max_memory_allocated() during one eager forward, after
reset_peak_memory_stats(), minus what was allocated before it (inputs and weights): the
intermediates plus the output; the table shows both, and hidetd's with the output added.
Writes graphs.md and graphs.json into --out.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
from graph_examples import TOL, Case, run_case  # noqa: E402
sys.path.insert(0, HERE)
from bench import time_pair_us  # noqa: E402

import torch  # noqa: E402

import hidetd  # noqa: E402  (graph_examples put clients/python on the path)


def call_us(fn, n):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / n


def alternate(fa, fb, rounds):
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(fa())
        tb.append(fb())
    return statistics.median(ta), statistics.median(tb)


def eager_peak(case):
    """Bytes PyTorch allocates during one eager forward beyond what was allocated before."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        y = case.eager()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    return peak, y.numel() * y.element_size()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--tune", choices=["none", "model", "measure"])
    ap.add_argument("--dtype", default="f16", choices=sorted(TOL))
    ap.add_argument("--budget-s", type=float, default=20)
    ap.add_argument("--budget-candidates", type=int, default=48)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    client = hidetd.Client(a.socket)
    status = client.status()
    tune = a.tune or ("measure" if status.get("gpu_available") else "model")
    budget = {"seconds": a.budget_s, "candidates": a.budget_candidates} if tune == "measure" else None
    # The daemon resolves "native" to the GPU's exact target (sm_90a on an H100: the wgmma
    # templates); the plan's "arch" says which it chose.
    arch = "native"
    gpu = torch.cuda.get_device_name()
    rows = []
    for name in ("mlp_block", "resnet_bottleneck"):
        case = Case(name, a.dtype)
        case_tune, tune_error = tune, ""
        try:
            plan, y, err, eager_err, our_err = run_case(client, case, tune, arch, budget)
        except hidetd.HidetdError as e:
            if tune != "measure":
                raise
            case_tune, tune_error = "model", str(e)
            print("%s: measured tuning failed (%s); planned with the cost model" % (name, e), flush=True)
            plan, y, err, eager_err, our_err = run_case(client, case, "model", arch)
        measured = all(s["kernel_set"].get("measured") for s in plan.json["steps"])
        out = {"y": torch.empty_like(y)}

        def ours():
            plan.run(case.plan_inputs, outputs=out)

        def eager():
            with torch.no_grad():
                case.eager()

        peak, out_bytes = eager_peak(case)
        ours(), eager()
        call = alternate(lambda: call_us(ours, a.calls), lambda: call_us(eager, a.calls), a.rounds)
        graph = time_pair_us(lambda _: ours, lambda _: eager, 1, a.reps, a.rounds)
        row = {"graph": name, "dtype": a.dtype, "tune": case_tune, "tune_error": tune_error,
               "all_measured": measured,
               "steps": len(plan.steps), "prepare": len(plan.prepare),
               "kernels": [s["kernel_set"]["kernels"][0]["name"] for s in plan.json["steps"]],
               "call_us": round(call[0], 1), "eager_call_us": round(call[1], 1),
               "call_speedup": round(call[1] / call[0], 3),
               "graph_us": round(graph[0], 1), "eager_graph_us": round(graph[1], 1),
               "graph_speedup": round(graph[1] / graph[0], 3),
               "arena_bytes": plan.arena_bytes, "constants_bytes": plan.constants_bytes,
               "output_bytes": out_bytes, "eager_peak_bytes": peak,
               "err_vs_eager": err, "tolerance": TOL[a.dtype], "err_vs_fp32": our_err,
               "eager_err_vs_fp32": eager_err}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "graphs.json"), "w") as f:
        json.dump({"gpu": gpu, "arch": arch, "torch": torch.__version__, "rows": rows}, f, indent=1)
    mib = 1024.0 * 1024.0
    lines = ["# hidetd launch plans vs PyTorch eager (%s, %s, torch %s)" % (gpu, a.dtype, torch.__version__), "",
             "One run; medians of %d alternating rounds. call: %d back-to-back calls from Python "
             "(launch overhead included); graph: %d calls in a CUDA graph (GPU time). Memory: hidetd "
             "arena + constants (+ output) vs PyTorch's peak allocation during the eager forward "
             "minus inputs and weights (intermediates + output)." % (a.rounds, a.calls, a.reps), "",
             "| graph | tune | steps | hidetd call us | eager call us | speedup | hidetd graph us | "
             "eager graph us | speedup | arena + const MiB | + output MiB | eager peak MiB | err vs eager (tol) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        ac = r["arena_bytes"] + r["constants_bytes"]
        lines.append("| %s | %s%s | %d (+%d prepare) | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | %.2f | %.2f | %.2f | %.1e (%.0e) |" % (
            r["graph"], r["tune"], "" if r["all_measured"] or r["tune"] != "measure" else " (not all measured)",
            r["steps"], r["prepare"], r["call_us"], r["eager_call_us"], r["call_speedup"],
            r["graph_us"], r["eager_graph_us"], r["graph_speedup"], ac / mib,
            (ac + r["output_bytes"]) / mib, r["eager_peak_bytes"] / mib, r["err_vs_eager"], r["tolerance"]))
    for r in rows:
        if r["tune_error"]:
            lines.append("")
            lines.append("%s: measured tuning failed, so it ran with the cost model's kernels: %s" %
                         (r["graph"], r["tune_error"]))
    with open(os.path.join(a.out, "graphs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
