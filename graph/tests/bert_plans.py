#!/usr/bin/env python3
"""graph/tests/bert_plans.py - issue 39's kernel counts: BERT-base through the torch.compile
backend at one size and with dynamic batch and sequence (marked as bench/models_dynamic.py marks
them), each plan's steps listed by kernel op and the graph nodes fused into it, and the counts
compared. Not a test the test command runs: a measurement for people (a partitioner change that
closes or opens a fusion gap shows here). On a machine with CUDA the model is traced there in
fp16 (PyTorch picks its CUDA attention op); otherwise on the CPU (fp16 weights, traced only).

    .deps/torch-venv/bin/python graph/tests/bert_plans.py [--layers 12] [--batch 8] [--seq 128]
        [--daemon build/daemon/hidetd] [--list] [--sdpa-math] [--arena]

--sdpa-math traces with PyTorch's math attention (torch.nn.attention.sdpa_kernel(MATH)): on the
CPU that is the graph a CUDA trace of BERT gets (its masked SDPA call takes the math backend
there), which the CPU's own attention op hides.

Starts its own daemon (`--workers none`, `tune: none`: plans only, nothing runs on the GPU).
"""
import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--daemon", default=os.path.join(REPO, "build", "daemon", "hidetd"))
    ap.add_argument("--list", action="store_true", help="print every step of both plans")
    ap.add_argument("--sdpa-math", action="store_true", help="trace with PyTorch's math attention")
    ap.add_argument("--arena", action="store_true",
                    help="issue 39's arena row: the static compile at the ranges' largest sizes (32 x 512), "
                    "its plans' arena against the dynamic plans' (laid out at those sizes)")
    args = ap.parse_args()
    if args.sdpa_math:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.MATH):
            return run(args)
    return run(args)


def run(args):

    import torch
    import transformers
    import hidetd
    from hidetd._http import Transport

    d = tempfile.mkdtemp()
    sock = os.path.join(d, "s")
    daemon = subprocess.Popen([args.daemon, "--socket", sock, "--cache", os.path.join(d, "k.db"),
                               "--workers", "none", "--log-level", "warn"])
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(0)
        cfg = transformers.BertConfig(num_hidden_layers=args.layers)
        m = transformers.BertModel(cfg).eval().to(device=dev, dtype=torch.float16)
        warnings.simplefilter("ignore")
        t = Transport(sock)
        plans = {}
        for dyn in (False, True):
            torch._dynamo.reset()
            shape = (32, 512) if args.arena and not dyn else (args.batch, args.seq)
            ids = torch.randint(0, cfg.vocab_size, shape, device=dev)
            opts = {"address": sock, "tune": "none"}
            if dyn:
                opts["dynamic_max"] = 512
                torch._dynamo.mark_dynamic(ids, 0, min=2, max=32)
                torch._dynamo.mark_dynamic(ids, 1, min=16, max=512)
            reports = []
            be = functools.partial(hidetd.backend.hidetd_backend, options=opts, _reports=reports)
            c = torch.compile(m, backend=be, dynamic=None if dyn else False)
            with torch.no_grad():
                c(ids)
            kind = "dynamic" if dyn else "static"
            print("%s: %s" % (kind, hidetd.backend.Explanation(reports)))
            plans[kind] = []
            for r in reports:
                for req in r.requests:
                    _, plan = t.json("POST", "/v1/graphs", dict(req, tune="none"))
                    plans[kind].append((req, plan))
        arena = {kind: sum(plan["arena_bytes"] for _, plan in pl) for kind, pl in plans.items()}
        const = {kind: sum(plan["constants_bytes"] for _, plan in pl) for kind, pl in plans.items()}
        for kind in plans:
            print("== %s: arena %.1f MiB, constants %.1f MiB" % (kind, arena[kind] / 2**20, const[kind] / 2**20))
        if args.arena and arena["static"]:
            print("== arena dynamic (at its max) / static at 32 x 512: %.3f (target <= 1.1)"
                  % (arena["dynamic"] / arena["static"]))
        for kind, pl in plans.items():
            counts = collections.Counter()
            n_steps = n_prep = 0
            for _, plan in pl:
                n_steps += len(plan["steps"])
                n_prep += len(plan["prepare"])
                for phase in ("prepare", "steps"):
                    for i, st in enumerate(plan[phase]):
                        rq = st["request"]
                        ops = [n.split(".")[0].rstrip("_0123456789") for n in st["nodes"]]
                        counts[(rq["op"], "+".join(ops[1:]))] += 1
                        if args.list:
                            print("%s %s %3d %-10s %s <- %s" % (kind, phase[:4], i, rq["op"],
                                  [x["shape"] for x in rq["inputs"]], st["nodes"]))
            print("== %s: %d steps + %d prepared" % (kind, n_steps, n_prep))
            for (op, fused), n in sorted(counts.items()):
                print("   %4d  %-10s %s" % (n, op, fused))
    finally:
        daemon.terminate()


if __name__ == "__main__":
    main()
