#!/usr/bin/env python3
"""tests/gpu/embeddings_torch.py - BERT's embeddings and attention mask as a hidetd graph with
int64 ids, planned by the daemon, run by the Python runtime (clients/python) on a real GPU and
compared with PyTorch.

    embeddings_torch.py --socket SOCK [--tune none|model|measure]   # a running hidetd
    embeddings_torch.py HIDETD [HIDETD_WORKER] [--lib DIR]          # starts one (meson)

The graph: word embeddings (embedding) by ids of every kind - in range, negative (from the end,
as x[ids] in PyTorch) and past either end (hidetd gives zeros where PyTorch would stop on a device
assert) -, token-type embeddings, position embeddings by constant i64 position ids (index_select
of weights: the prepare phase), the adds and a layernorm; and the mask (i64) as (1 - m) * -10000
in f32 (a cast node). PyTorch computes the same from x[ids] with the out-of-range rows zeroed. The
plan must have one prepare step and a gather with both adds in its epilogue; y within 2e-2 of
PyTorch's fp32 layernorm (f16 weights), the mask exactly equal. The same embeddings with the batch
and sequence named (token-type and position ids [1, 512] buffers cut to s: prepared whole and
viewed) run at several sizes. Exits 77 without a GPU or PyTorch.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, HERE)
from gpu_env import daemon_arguments, daemon_from_args  # noqa: E402

B, S, V, D, P = 4, 128, 30522, 768, 512


def graph(tune):
    return {"graph": {
        "inputs": [{"name": "ids", "shape": [B, S], "dtype": "i64"},
                   {"name": "types", "shape": [B, S], "dtype": "i64"},
                   {"name": "mask", "shape": [B, 1, 1, S], "dtype": "i64"}],
        "weights": [{"name": "wemb", "shape": [V, D], "dtype": "f16"},
                    {"name": "temb", "shape": [2, D], "dtype": "f16"},
                    {"name": "pemb", "shape": [P, D], "dtype": "f16"},
                    {"name": "pos", "shape": [S], "dtype": "i64"},
                    {"name": "g", "shape": [D], "dtype": "f16"}, {"name": "b", "shape": [D], "dtype": "f16"}],
        "nodes": [
            {"op": "embedding", "inputs": ["wemb", "ids"], "outputs": ["e1"]},
            {"op": "embedding", "inputs": ["temb", "types"], "outputs": ["e2"]},
            {"op": "add", "inputs": ["e1", "e2"], "outputs": ["e3"]},
            {"op": "index_select", "inputs": ["pemb", "pos"], "outputs": ["e4"], "attrs": {"axis": 0}},
            {"op": "add", "inputs": ["e3", "e4"], "outputs": ["e5"]},
            {"op": "layernorm", "inputs": ["e5", "g", "b"], "outputs": ["y"], "attrs": {"eps": 1e-12}},
            {"op": "cast", "inputs": ["mask"], "outputs": ["m1"], "attrs": {"dtype": "f32"}},
            {"op": "neg", "inputs": ["m1"], "outputs": ["m2"]},
            {"op": "shift", "inputs": ["m2"], "outputs": ["m3"], "attrs": {"value": 1}},
            {"op": "scale", "inputs": ["m3"], "outputs": ["ext"], "attrs": {"value": -10000}}],
        "outputs": ["y", "ext"]}, "tune": tune, "arch": "native"}


def graph_named(tune):
    """BERT's embeddings with the batch and sequence named: the token-type and position ids are
    [1, P] buffers cut to s, as the torch.compile backend sends them with dynamic sizes. The
    daemon gathers all P of each in the prepare phase and views the first s rows (graph/
    partition.c, view_prepared_prefixes)."""
    return {"dims": {"b": {"min": 1, "max": 8}, "s": {"min": 1, "max": P}}, "graph": {
        "inputs": [{"name": "ids", "shape": ["b", "s"], "dtype": "i64"}],
        "weights": [{"name": "wemb", "shape": [V, D], "dtype": "f16"},
                    {"name": "temb", "shape": [2, D], "dtype": "f16"},
                    {"name": "pemb", "shape": [P, D], "dtype": "f16"},
                    {"name": "types", "shape": [1, P], "dtype": "i64"},
                    {"name": "pos", "shape": [1, P], "dtype": "i64"},
                    {"name": "g", "shape": [D], "dtype": "f16"}, {"name": "b", "shape": [D], "dtype": "f16"}],
        "nodes": [
            {"op": "slice", "inputs": ["types"], "outputs": ["tc"], "attrs": {"starts": [0], "ends": ["s"], "axes": [1]}},
            {"op": "slice", "inputs": ["pos"], "outputs": ["pc"], "attrs": {"starts": [0], "ends": ["s"], "axes": [1]}},
            {"op": "embedding", "inputs": ["wemb", "ids"], "outputs": ["e1"]},
            {"op": "embedding", "inputs": ["temb", "tc"], "outputs": ["e2"]},
            {"op": "add", "inputs": ["e1", "e2"], "outputs": ["e3"]},
            {"op": "embedding", "inputs": ["pemb", "pc"], "outputs": ["e4"]},
            {"op": "add", "inputs": ["e3", "e4"], "outputs": ["e5"]},
            {"op": "layernorm", "inputs": ["e5", "g", "b"], "outputs": ["y"], "attrs": {"eps": 1e-12}}],
        "outputs": ["y"]}, "tune": tune, "arch": "native"}


def check_named(client, tune):
    """Plans the named graph (two prepared gathers, the word gather with both adds, a layernorm,
    no copy) and runs it at several sizes against PyTorch; returns the number of failures."""
    import torch
    plan = client.graph(graph_named(tune))
    failures = 0
    ops = [s["request"]["op"] for s in plan.json["steps"]]
    if len(plan.json["prepare"]) != 2 or ops != ["gather", "layernorm"] or len(plan.json["steps"][0]["nodes"]) != 3:
        print("FAIL (named): expected 2 prepared gathers, then the gather with both adds and the layernorm; "
              "got %d prepared, %s" % (len(plan.json["prepare"]), ops))
        failures += 1
    torch.manual_seed(1)
    dt, dev = torch.float16, "cuda"
    w = {"wemb": torch.randn(V, D, dtype=dt, device=dev), "temb": torch.randn(2, D, dtype=dt, device=dev),
         "pemb": torch.randn(P, D, dtype=dt, device=dev), "types": torch.randint(0, 2, (1, P), device=dev),
         "pos": torch.arange(P, device=dev).flip(0)[None], "g": torch.rand(D, dtype=dt, device=dev) + 0.5,
         "b": torch.randn(D, dtype=dt, device=dev)}
    plan.load_weights(w)
    for b, s in ((3, 77), (8, P), (1, 1), (2, 200)):
        ids = torch.randint(0, V, (b, s), device=dev)
        out = plan(ids=ids)
        torch.cuda.synchronize()
        e5 = (w["wemb"][ids].float() + w["temb"][w["types"][:, :s]].float() +
              w["pemb"][w["pos"][:, :s]].float())
        ref = torch.nn.functional.layer_norm(e5, (D,), w["g"].float(), w["b"].float(), eps=1e-12)
        err = (out["y"].float() - ref).abs().max().item()
        print("tune %-7s named b=%d s=%d: y %s, max abs err vs PyTorch %.3g" % (tune, b, s, tuple(out["y"].shape), err))
        failures += int(not (err < 2e-2 and tuple(out["y"].shape) == (b, s, D)))
    return failures


def check(client, tune):
    """Plans and runs the graph, compares with PyTorch; returns the number of failures."""
    import torch
    plan = client.graph(graph(tune))
    sets = plan.json["prepare"] + plan.json["steps"]
    for s in sets:
        print("  %-40s %s %s" % (s.get("nodes"), s["kernel_set"]["op"], s["kernel_set"].get("schedule")))
    failures = 0
    gathers = [s for s in plan.json["steps"] if s["kernel_set"]["op"] == "gather" and len(s.get("nodes", [])) == 3]
    if len(plan.prepare) != 1 or len(gathers) != 1:
        print("FAIL: expected one prepare step (the position rows) and a gather with both adds")
        failures += 1
    torch.manual_seed(0)
    dt, dev = torch.float16, "cuda"
    w = {"wemb": torch.randn(V, D, dtype=dt, device=dev), "temb": torch.randn(2, D, dtype=dt, device=dev),
         "pemb": torch.randn(P, D, dtype=dt, device=dev), "pos": torch.arange(S, device=dev),
         "g": torch.rand(D, dtype=dt, device=dev) + 0.5, "b": torch.randn(D, dtype=dt, device=dev)}
    plan.load_weights(w)
    ids = torch.randint(-V, V, (B, S), device=dev)
    ids[0, :5] = torch.tensor([V, V + 7, -V - 1, 2**40, -(2**40)])  # past either end: zeros
    types = torch.randint(0, 2, (B, S), device=dev)
    mask = torch.randint(0, 2, (B, 1, 1, S), device=dev)
    out = plan(ids=ids, types=types, mask=mask)
    torch.cuda.synchronize()
    ok = (ids >= -V) & (ids < V)
    e1 = torch.where(ok[..., None], w["wemb"][torch.where(ok, ids, 0)].float(), torch.zeros((), device=dev))
    e5 = e1 + w["temb"][types].float() + w["pemb"][w["pos"]].float()
    ref = torch.nn.functional.layer_norm(e5, (D,), w["g"].float(), w["b"].float(), eps=1e-12)
    err = (out["y"].float() - ref).abs().max().item()
    same_mask = torch.equal(out["ext"], (1.0 - mask.float()) * -10000.0)
    print("tune %-7s y %s %s: max abs err vs PyTorch %.3g; mask %s" %
          (tune, tuple(out["y"].shape), out["y"].dtype, err, "equal" if same_mask else "DIFFERS"))
    failures += int(not err < 2e-2) + int(not same_mask)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    daemon_arguments(ap)
    ap.add_argument("--tune", action="append", help="none, model or measure (repeatable; default none, model)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipped")
        return 77
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: skipped")
        return 77
    import hidetd
    proc, sock = daemon_from_args(ap, a, "hidetd-emb-")
    failures = 0
    try:
        client = hidetd.Client(sock)
        for tune in a.tune or ["none", "model"]:
            failures += check(client, tune)
            failures += check_named(client, tune)
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
    print("embeddings through hidetd: %s" % ("OK" if not failures else "%d FAILURE(S)" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
