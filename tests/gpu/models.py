#!/usr/bin/env python3
"""tests/gpu/models.py - real models through the torch.compile backend on a GPU, each against
PyTorch eager (issue 37): tests/gpu/model_zoo.py's required models and some it does not name.

    models.py --socket SOCK [--tune model] [--cases resnet50-b1,bert-b8-s128] [--others]

Each case runs in fp16: eager fp16, the hidetd-compiled model, and eager fp32 as the reference.
The error is max|y - y32| / max|y32|; hidetd's must stay within 4x eager fp16's own error plus
1e-3 (the dtype's tolerance: fused chains round once where eager rounds every step, so either
may be the closer). Also printed: the ops left to PyTorch (hidetd.explain). Exits 77 without a
GPU or PyTorch, 1 when a case fails.
"""
import argparse
import functools
import os
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, HERE)
import model_zoo  # noqa: E402


def rel_err(y, ref):
    return float((y.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-20))


def run_case(case, sock, tune, cuda_graphs):
    import torch
    import hidetd
    torch.manual_seed(0)
    m16, inputs = model_zoo.build(case, torch.float16)
    m32 = _copy_fp32(m16)
    with torch.no_grad():
        ref = model_zoo.first_tensor(m32(*[_fp32(x) for x in inputs]))
        eager = model_zoo.first_tensor(m16(*inputs))
    torch._dynamo.reset()
    opts = {"address": sock, "tune": tune, "cuda_graphs": cuda_graphs}
    graphs = []  # the backend's report of each graph it compiles (what explain() collects)
    backend = functools.partial(hidetd.backend.hidetd_backend, _reports=graphs)
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(m16, backend=backend, options=opts)
        with torch.no_grad():
            outs = [model_zoo.first_tensor(compiled(*inputs))]  # compiles, binds, runs
            compile_s = time.time() - t0
            outs += [model_zoo.first_tensor(compiled(*inputs)) for _ in range(2)]  # steady state
    report = hidetd.backend.Explanation(graphs)
    ran = all(g.ran_plans for g in report.graphs if g.pieces)
    torch.cuda.synchronize()
    e_eager = rel_err(eager, ref)
    errs = [rel_err(y, ref) for y in outs]
    tol = 4 * e_eager + 1e-3
    ok = all(e <= tol for e in errs) and all(torch.isfinite(y).all() for y in outs) and ran
    vs_eager = max(rel_err(y, eager) for y in outs)
    return ok, {"case": model_zoo.case_name(case), "err": max(errs), "eager_err": e_eager,
                "vs_eager": vs_eager, "ran": ran,
                "tol": tol, "torch_ops": report.torch, "hidetd_ops": report.hidetd,
                "folded": report.folded, "pieces": sum(len(g.pieces) for g in report.graphs),
                "left": sorted(report.left), "compile_s": compile_s}


def _fp32(x):
    return x.float() if x.is_floating_point() else x


def _copy_fp32(m):
    import copy
    return copy.deepcopy(m).float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tune", default="model")
    ap.add_argument("--cases", default="")
    ap.add_argument("--others", action="store_true", help="also the models the issue does not name")
    ap.add_argument("--cuda-graphs", action="store_true")
    args = ap.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            print("SKIP: no CUDA device for PyTorch")
            return 77
    except ImportError:
        print("SKIP: no PyTorch")
        return 77
    cases = ([model_zoo.parse_case(c) for c in args.cases.split(",") if c]
             or list(model_zoo.REQUIRED) + (list(model_zoo.OTHERS) if args.others else []))
    failed = 0
    for case in cases:
        try:
            ok, r = run_case(case, args.socket, args.tune, args.cuda_graphs)
        except Exception:
            failed += 1
            print("FAIL %s: exception\n%s" % (model_zoo.case_name(case), traceback.format_exc()[-3000:]),
                  flush=True)
            continue
        failed += not ok
        print("%s %-22s err %.2e (eager fp16 %.2e, tol %.2e; vs eager fp16 %.2e)  ops: %d hidetd, "
              "%d folded, %d PyTorch %s  pieces %d%s  compile %.1f s" % (
                  "ok  " if ok else "FAIL", r["case"], r["err"], r["eager_err"], r["tol"],
                  r["vs_eager"], r["hidetd_ops"], r["folded"], r["torch_ops"], r["left"] or "",
                  r["pieces"], "" if r["ran"] else " (PLANS DID NOT RUN)", r["compile_s"]), flush=True)
    print("%d passed, %d failed" % (len(cases) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
