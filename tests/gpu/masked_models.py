#!/usr/bin/env python3
"""tests/gpu/masked_models.py - transformers given a padded batch's attention_mask through the
torch.compile backend on a real GPU, dynamic sizes and fixed, f16 and f32, against PyTorch eager
on CUDA (issues 38 and 39).

    masked_models.py --socket SOCK [--tune none|model] [--only SUBSTR]  # a running hidetd
    masked_models.py HIDETD [HIDETD_WORKER] [--lib DIR] [...]           # starts one (meson)

--only runs the runs whose name ("bert f32 fixed", "gpt2 f16 dynamic", ...) contains SUBSTR.

On CUDA PyTorch traces the masked attention call in forms the CPU tests do not see: f16 as
_scaled_dot_product_cudnn_attention, f32 as _scaled_dot_product_efficient_attention (its bias
padded to 8 keys, by (8 - s % 8) % 8 at dynamic sizes). Checks, for a 1-layer BERT (a padding
mask) and GPT-2 (causal AND padding), each at two sizes (exit 1 when one fails):
  - it compiles and runs, and its output is within the dtype's tolerance of eager's (f16 1e-2,
    f32 2e-3, relative to the largest value);
  - f16: every attention node the daemon got reads the [b, 1, 1, s] padding part (its where's
    condition), GPT-2's with the causal flag: the form the attention op stages in shared memory
    rather than a [b, 1, s, s] mask read per score (GPT-2 at dynamic sizes: 1.5x slower before);
    and each piece's plan ran.
Exits 77 without PyTorch, transformers or a GPU.
"""
import argparse
import functools
import os
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, HERE)
from gpu_env import daemon_arguments, daemon_from_args  # noqa: E402

SIZES = ((4, 37), (3, 50))
TOLERANCE = {"f16": 1e-2, "f32": 2e-3}


def models(transformers):
    """(name, model class, config, causal) of the 1-layer models."""
    return (("bert", transformers.BertModel, transformers.BertConfig(num_hidden_layers=1), False),
            ("gpt2", transformers.GPT2Model, transformers.GPT2Config(n_layer=1), True))


def attention_problems(reports, causal):
    """What is wrong with the attention nodes the daemon got: each must read the [b, 1, 1, s]
    padding part through its where and, for a decoder, be causal."""
    problems, seen = [], 0
    for r in reports:
        for req in r.requests:
            made = {o: n for n in req["graph"]["nodes"] for o in n["outputs"]}
            shapes = {i["name"]: i["shape"] for i in req["graph"]["inputs"]}
            for n in req["graph"]["nodes"]:
                if n["op"] != "attention":
                    continue
                seen += 1
                if bool(n["attrs"].get("causal")) != causal:
                    problems.append("%s: causal %s" % (n["name"], n["attrs"].get("causal")))
                if len(n["inputs"]) != 4:
                    problems.append("%s: no mask input" % n["name"])
                    continue
                where = made.get(n["inputs"][3])
                shape = shapes.get(where["inputs"][0]) if where and where["op"] == "where" else None
                if shape is None or shape[1:3] != [1, 1]:
                    problems.append("%s: mask %s, not the [b, 1, 1, s] padding part" % (n["name"], shape))
    if not seen:
        problems.append("no attention node reached the daemon")
    return problems


def run(name, cls, cfg, causal, dtype, dynamic, opts, torch, hidetd):
    """Failures (strings) of one model, dtype and dynamic-ness."""
    torch.manual_seed(0)
    m = cls(cfg).eval().to(device="cuda", dtype=torch.float16 if dtype == "f16" else torch.float32)
    reports = []
    torch._dynamo.reset()
    c = torch.compile(m, backend=functools.partial(hidetd.backend.hidetd_backend, _reports=reports,
                                                   options=opts), dynamic=dynamic)
    what = "%s %s %s" % (name, dtype, "dynamic" if dynamic else "fixed")
    failures = []
    for b, s in SIZES:
        ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
        mask = torch.ones(b, s, dtype=torch.int64, device="cuda")
        mask[1, s // 2:] = 0
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = m(ids, attention_mask=mask).last_hidden_state.float()
                got = c(ids, attention_mask=mask).last_hidden_state.float()
        except Exception as e:  # noqa: BLE001 - a model that does not compile or run is the failure
            traceback.print_exc()
            failures.append("%s %dx%d: %s: %s" % (what, b, s, type(e).__name__, str(e).splitlines()[-1][:200]))
            continue
        err = float((got - want).abs().max() / want.abs().max())
        ok = err <= TOLERANCE[dtype] and bool(torch.isfinite(got).all())
        print("%-20s %2dx%-3d error %.1e%s" % (what, b, s, err, "" if ok else "  - WRONG"))
        if not ok:
            failures.append("%s %dx%d: error %.1e" % (what, b, s, err))
    if reports:
        explained = hidetd.backend.Explanation(reports)
        print("%-20s %d ops on hidetd, %d in PyTorch" % (what, explained.hidetd, explained.torch))
        if not all(g.ran_plans for g in explained.graphs if g.pieces):
            failures.append("%s: a piece's plan did not run" % what)
        if dtype == "f16":
            failures += ["%s: %s" % (what, p) for p in attention_problems(reports, causal)]
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    daemon_arguments(ap)
    ap.add_argument("--tune", default="model")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print("%s: skipped" % e)
        return 77
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: skipped")
        return 77
    import hidetd
    proc, sock = daemon_from_args(ap, a, "hidetd-masked-")
    failures = []
    try:
        opts = {"address": sock, "tune": a.tune}
        for name, cls, cfg, causal in models(transformers):
            for dtype in ("f16", "f32"):
                for dynamic in (True, False):
                    if a.only in "%s %s %s" % (name, dtype, "dynamic" if dynamic else "fixed"):
                        failures += run(name, cls, cfg, causal, dtype, dynamic, opts, torch, hidetd)
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
    for f in failures:
        print("FAILED:", f)
    print("masked models through torch.compile: %s" % ("OK" if not failures else "%d FAILURE(S)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
