#!/usr/bin/env python3
"""bench/models.py - real models through hidetd's torch.compile backend against PyTorch eager and
Inductor, side by side in one process on one GPU (issue 37's table).

    models.py --socket SOCK --out DIR [--cases resnet50-b1,...] [--inductor-mode MODE]
              [--tune model] [--startup] [--iters 50]

Every side is run from a CUDA graph: the harness captures each compiled forward (hidetd's plan
launches, Inductor's kernels - compiled with MODE, by default max-autotune-no-cudagraphs - and
eager's kernels) and times replays with CUDA events (median of 5 rounds of --iters replays).
--startup also times compiling ResNet-50 (b1) and BERT (b1, s128) in fresh processes: hidetd
cold (tune as given, the daemon has not seen the model, an empty backend compile cache), hidetd
warm (the daemon's kernel cache and the backend's compile cache both warm: hidetd.compile's warm
start finds the model there and runs it without Dynamo, AOTAutograd or the lowering; with
HIDETD_WARM_START=0 in the environment, the compile cache alone: Dynamo traces, the graph is a
hit), hidetd warm daemon only (the daemon warm, an empty backend compile cache: AOTAutograd
and the lowering run, the requests are answered from the daemon's cache), Inductor default mode
cold (an empty cache directory) and warm (the same directory again: its FX-graph and
AOTAutograd caches warm); and hidetd.load of the model hidetd.save wrote (no Dynamo trace).
Writes DIR/models.json and DIR/models.md.
"""
import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
import model_zoo  # noqa: E402


def graphed_time(fn, inputs, iters):
    """Median ms per call of fn(*inputs) replayed from a CUDA graph."""
    import torch
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(*inputs)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn(*inputs)
    for _ in range(10):
        g.replay()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / iters)
    return statistics.median(times)


def child_compile(case, backend, sock, tune, mode):
    """Runs in a fresh process: seconds from torch.compile to the first result."""
    import torch
    torch.manual_seed(0)
    m, inputs = model_zoo.build(model_zoo.parse_case(case), torch.float16)
    torch.cuda.synchronize()
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if backend == "hidetd":
            import hidetd
            c = hidetd.compile(m, address=sock, tune=tune)
        elif backend == "hidetd-save":  # hidetd.save to $HIDETD_SAVED (the compile, then the write)
            import hidetd
            hidetd.save(m, inputs, os.environ["HIDETD_SAVED"], address=sock, tune=tune)
            c = hidetd.load(os.environ["HIDETD_SAVED"], m)
        elif backend == "hidetd-load":  # what hidetd.save wrote: no Dynamo trace
            import hidetd
            c = hidetd.load(os.environ["HIDETD_SAVED"], m)
        else:
            c = torch.compile(m, mode=None if mode == "default" else mode)
        with torch.no_grad():
            c(*inputs)
    torch.cuda.synchronize()
    print("COMPILE_S %.3f" % (time.time() - t0))


def timed_child(case, backend, sock, tune, mode, env=None):
    r = subprocess.run([sys.executable, __file__, "--child", case, "--backend", backend,
                        "--socket", sock, "--tune", tune, "--inductor-mode", mode],
                       capture_output=True, text=True, env=env, timeout=900)
    for line in r.stdout.splitlines():
        if line.startswith("COMPILE_S "):
            return float(line.split()[1])
    raise RuntimeError("compile child failed: %s" % r.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--cases", default="")
    ap.add_argument("--inductor-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--tune", default="model")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--startup", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--child", default=None)
    ap.add_argument("--backend", default="hidetd")
    args = ap.parse_args()
    if args.child:
        child_compile(args.child, args.backend, args.socket, args.tune, args.inductor_mode)
        return 0

    import torch
    import hidetd
    os.makedirs(args.out, exist_ok=True)
    cases = [model_zoo.parse_case(c) for c in args.cases.split(",") if c] or model_zoo.REQUIRED
    rows = []
    startup = {}

    def write_results():
        def gmean(xs):
            xs = [x for x in xs if x]
            return float(statistics.geometric_mean(xs)) if xs else None
        summary = {"gmean_vs_inductor": gmean(r.get("vs_inductor") for r in rows),
                   "gmean_vs_eager": gmean(r.get("vs_eager") for r in rows),
                   "inductor_mode": args.inductor_mode, "tune": args.tune,
                   "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
        with open(os.path.join(args.out, "models.json"), "w") as f:
            json.dump({"rows": rows, "summary": summary, "startup": startup}, f, indent=1)
        lines = ["| model | eager ms | Inductor ms | hidetd ms | vs Inductor | vs eager | kernels | ops left |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "error" in r:
                lines.append("| %s | error: %s |||||||" % (r["case"], r["error"]))
                continue
            lines.append("| %s | %.3f | %s | %.3f | %s | %.2fx | %d | %d |" % (
                r["case"], r["eager_ms"], "%.3f" % r["inductor_ms"] if "inductor_ms" in r else "-",
                r["hidetd_ms"], "%.2fx" % r["vs_inductor"] if "vs_inductor" in r else "-",
                r["vs_eager"], r["kernels"], r["torch_ops"]))
        lines.append("")
        lines.append("geometric mean: %s vs Inductor (%s), %s vs eager; tune %s; %s, torch %s" % (
            "%.2fx" % summary["gmean_vs_inductor"] if summary["gmean_vs_inductor"] else "-",
            args.inductor_mode, "%.2fx" % summary["gmean_vs_eager"] if summary["gmean_vs_eager"] else "-",
            args.tune, summary["gpu"], summary["torch"]))
        for case, s in startup.items():
            lines.append("startup %s: hidetd cold %.1f s, warm %.2f s (%.2fx Inductor warm; without the "
                         "warm start %.1f s, %.2fx; daemon warm, compile cache cold: %.1f s); Inductor "
                         "default cold %.1f s, warm %.1f s" % (
                             case, s["hidetd_cold"], s["hidetd_warm"],
                             s["hidetd_warm"] / s["inductor_warm"], s["hidetd_warm_dynamo"],
                             s["hidetd_warm_dynamo"] / s["inductor_warm"], s["hidetd_warm_daemon_only"],
                             s["inductor_cold"], s["inductor_warm"]))
            if "hidetd_load" in s:
                lines.append("startup %s: hidetd.load of a saved model %.2f s (%.2fx Inductor warm); "
                             "hidetd.save %.1f s" % (case, s["hidetd_load"], s["hidetd_load"] / s["inductor_warm"],
                                                     s["hidetd_save"]))
            elif "hidetd_load_error" in s:
                lines.append("startup %s: hidetd.save/load failed: %s" % (case, s["hidetd_load_error"]))
        with open(os.path.join(args.out, "models.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return lines

    if args.startup:
        for case in ("resnet50-b1", "bert-b1-s128"):
            cache = tempfile.mkdtemp(prefix="inductor-")
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
            # The backend's compile cache (hidetd.compile_cache): empty for "cold", the same
            # directory again for "warm", another empty one for "warm daemon only".
            hcache = dict(os.environ, HIDETD_BACKEND_CACHE=tempfile.mkdtemp(prefix="hidetd-backend-"))
            hnone = dict(os.environ, HIDETD_BACKEND_CACHE=tempfile.mkdtemp(prefix="hidetd-backend-"))
            startup[case] = {
                "hidetd_cold": timed_child(case, "hidetd", args.socket, args.tune, "default", hcache),
                "hidetd_warm": timed_child(case, "hidetd", args.socket, args.tune, "default", hcache),
                # The same without the warm start: Dynamo traces, the graph is a compile-cache hit.
                "hidetd_warm_dynamo": timed_child(case, "hidetd", args.socket, args.tune, "default",
                                                  dict(hcache, HIDETD_WARM_START="0")),
                "hidetd_warm_daemon_only": timed_child(case, "hidetd", args.socket, args.tune,
                                                       "default", hnone),
                "inductor_cold": timed_child(case, "inductor", args.socket, args.tune, "default", env),
                "inductor_warm": timed_child(case, "inductor", args.socket, args.tune, "default", env),
            }
            # hidetd.save once (the daemon warm), then hidetd.load in a fresh process: no Dynamo.
            saved = dict(hnone, HIDETD_SAVED=os.path.join(tempfile.mkdtemp(prefix="hidetd-saved-"), "m.hd"))
            try:
                startup[case]["hidetd_save"] = timed_child(case, "hidetd-save", args.socket, args.tune,
                                                           "default", saved)
                startup[case]["hidetd_load"] = timed_child(case, "hidetd-load", args.socket, args.tune,
                                                           "default", saved)
            except RuntimeError as e:  # this PyTorch cannot save, or the model's graph cannot be
                startup[case]["hidetd_load_error"] = str(e)[-300:]
            print("startup", case, startup[case], flush=True)
    for case in cases:
        name = model_zoo.case_name(case)
        torch.manual_seed(0)
        m, inputs = model_zoo.build(case, torch.float16)
        row = {"case": name}
        try:
            row["eager_ms"] = graphed_time(m, inputs, args.iters)
            torch._dynamo.reset()
            graphs = []
            backend = functools.partial(hidetd.backend.hidetd_backend, _reports=graphs)
            t0 = time.time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = torch.compile(m, backend=backend, options={"address": args.socket, "tune": args.tune})
                with torch.no_grad():
                    c(*inputs)
                row["hidetd_compile_s"] = time.time() - t0
            rep = hidetd.backend.Explanation(graphs)
            row["torch_ops"] = rep.torch
            row["left"] = sorted(rep.left)
            row["kernels"] = sum(p["kernels"] for g in rep.graphs for p in g.pieces)
            row["hidetd_ms"] = graphed_time(c, inputs, args.iters)
            if not args.no_inductor:
                torch._dynamo.reset()
                t0 = time.time()
                ci = torch.compile(m, mode=args.inductor_mode)
                with torch.no_grad():
                    ci(*inputs)
                row["inductor_compile_s"] = time.time() - t0
                row["inductor_ms"] = graphed_time(ci, inputs, args.iters)
                row["vs_inductor"] = row["inductor_ms"] / row["hidetd_ms"]
            row["vs_eager"] = row["eager_ms"] / row["hidetd_ms"]
        except Exception as e:  # a row that fails stays in the table with the reason
            row["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_results()  # a stream cut short by its time limit keeps the rows it has
        del m
        torch._dynamo.reset()
        torch.cuda.empty_cache()

    lines = write_results()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
