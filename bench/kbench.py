#!/usr/bin/env python3
"""bench/kbench.py - runs, checks and times programs written by bench/kgen, without a daemon.

For template work: generate variants here with `kgen -o DIR/NAME REQUEST.json params...`, carry
DIR to the GPU machine, and run `kbench.py DIR` there. For each NAME.json it launches the
reference (NAME.ref.cubin, fp32 output) and the candidate (NAME.cubin) on the same random inputs,
prints the relative error of the candidate, and times it the way bench.py times everything (CUDA
graphs over rotating input sets; --alternate as in bench.py). Matmul programs are also timed against the PyTorch peer of the
same op (torch.matmul, plus eager bias / gelu when the epilogue has them: pass --peer-epilogue;
FP8 programs of inputs [A [M,K], B [N,K], A's scale, B's scale]: torch._scaled_mm with those
scales, fast accumulation). --sustain MS also times each program, and its peer, after MS ms of
running it back to back (bench.time_sustained: the clock the power cap leaves it), with the
energy of one call where NVML (pynvml) is there.

    kbench.py DIR [--only SUBSTR] [--peer-epilogue bias_gelu] [--flush] [--alternate] [--json OUT.json]
              [--dims N,...] [--sustain MS]
"""
import argparse
import glob
import json
import os
import sys

import cupy
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import (FP8_DT, L2_BYTES, TORCH_DT, cuda_graph, launcher, rand, rel_err, sets_for, tensor_map_arg,  # noqa: E402
                   time_pair_us, time_sustained, time_us)

OP_MATMUL = 0


def load(cubin, launches):
    """[(function, grid, block, shared bytes, buffer ids, tensor maps)] of a kgen program's
    launches; each map is a "tensor_map" description (docs/api.md) with "buf", the buffer id
    whose address it holds, and is passed after the pointers."""
    module = cupy.RawModule(path=cubin)
    out = []
    for k in launches:
        fn = module.get_function(k["name"])
        if k["shared"] > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = k["shared"]
        out.append((fn, tuple(k["grid"]), tuple(k["block"]), k["shared"], k["args"], k.get("maps", [])))
    return out


# A launch argument this or above is a dynamic op's dim k = arg - ARG_DIM0 (tuner.h TUNER_ARG_DIM0),
# a long long by value: kgen writes the inputs at the dims' max, and --dims gives those sizes.
ARG_DIM0 = 16


def binder(meta, launches, ws_bytes, dims=()):
    def arg(table, a):
        if a >= ARG_DIM0:
            return cupy.int64(dims[a - ARG_DIM0])
        return cupy.uint64(table[a].data_ptr())

    def sized(m):
        # A map dimension named by a rule {"dims": [k...], "coef": c} (docs/api.md): c times the
        # product of those dims' sizes.
        def value(d):
            if not isinstance(d, dict):
                return d
            v = d.get("coef", 1)
            for k in d["dims"]:
                v *= dims[k]
            return v
        return dict(m, dims=[value(d) for d in m["dims"]])

    def bind(inputs, output):
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")
        table = {i: t for i, t in enumerate(inputs)}
        table[meta["buf_output"]] = output
        table[meta["buf_workspace"]] = ws
        calls = [(fn, g, b, s, tuple(arg(table, a) for a in args) +
                  tuple(tensor_map_arg(sized(m), table[m["buf"]].data_ptr()) for m in maps))
                 for fn, g, b, s, args, maps in launches]
        return launcher(calls, keep=(ws, inputs, output))

    return bind


def matmul_flops(meta):
    a, b = meta["inputs"][0]["shape"], meta["inputs"][1]["shape"]
    out = meta["output"]["shape"]
    k = a[-1] if a[-1] in (b[-2], b[-1]) else a[-2]
    n_out = 1
    for d in out:
        n_out *= d
    return 2.0 * n_out * k


def run_one(path, args):
    meta = json.load(open(path))
    base = path[:-len(".json")]
    name = os.path.basename(base)
    cand = load(base + ".cubin", meta["kernels"])
    ref = load(base + ".ref.cubin", meta["ref_kernels"])
    dims = [int(d) for d in args.dims.split(",") if d]
    bind_c = binder(meta, cand, meta["workspace_bytes"], dims)
    bind_r = binder(meta, ref, meta["ref_workspace_bytes"], dims)
    in_dts = [t["dtype"] for t in meta["inputs"]]
    in_shapes = [t["shape"] for t in meta["inputs"]]
    out_shape, out_dt = meta["output"]["shape"], meta["output"]["dtype"]

    inputs = [rand(s, d) for s, d in zip(in_shapes, in_dts)]
    want = torch.empty(out_shape, dtype=torch.float32, device="cuda")
    got = torch.full(out_shape, float("nan"), dtype=TORCH_DT[out_dt], device="cuda")
    bind_r(inputs, want)()
    bind_c(inputs, got)()
    torch.cuda.synchronize()
    err = rel_err(got.float(), want)

    nbytes = sum(t.numel() * t.element_size() for t in inputs) + got.numel() * got.element_size()
    n_sets = sets_for(nbytes)
    sets = [[rand(s, d) for s, d in zip(in_shapes, in_dts)] for _ in range(n_sets)]
    outs = [torch.empty(out_shape, dtype=TORCH_DT[out_dt], device="cuda") for _ in range(n_sets)]
    def peer(i):
        a, b = sets[i][0], sets[i][1]
        if args.peer_epilogue == "bias_gelu":
            return lambda: F.gelu(a @ b + sets[i][2])
        return lambda: torch.matmul(a, b)

    def fp8_peer(i):
        a, b, sa, sb = sets[i][:4]
        sa = sa if sa.numel() > 1 else sa.reshape(())
        sb = sb if sb.numel() > 1 else sb.reshape(())
        return lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=TORCH_DT[out_dt],
                                        use_fast_accum=True)

    fp8 = (meta["op"] == OP_MATMUL and in_dts[0] in FP8_DT and len(in_dts) == 4 and len(in_shapes[1]) == 2
           and in_shapes[0][1] == in_shapes[1][1])
    if fp8:
        peer = fp8_peer

    row = {"name": name, "schedule": meta["schedule"]["params"], "predicted_us": meta["predicted_us"], "err": err}
    # The peer is torch.matmul(a, b): only for plain 2-D 16- or 32-bit operands (not batched, not
    # transposed); FP8 has no torch.matmul: torch._scaled_mm (fp8_peer) for A [M,K] and B [N,K].
    if fp8 or (meta["op"] == OP_MATMUL and in_dts[0] not in FP8_DT and len(in_shapes[0]) == 2 and len(in_shapes[1]) == 2
               and in_shapes[0][1] == in_shapes[1][0] and out_shape == [in_shapes[0][0], in_shapes[1][1]]):
        if args.alternate:
            us, peer_us = time_pair_us(lambda i: bind_c(sets[i], outs[i]), peer, n_sets)
        else:
            us, peer_us = time_us(lambda i: bind_c(sets[i], outs[i]), n_sets), time_us(peer, n_sets)
        row.update(peer_us=round(peer_us, 2), ratio=round(peer_us / us, 3))
    else:
        us = time_us(lambda i: bind_c(sets[i], outs[i]), n_sets)
    row["us"] = round(us, 2)
    if args.sustain:
        for key, make in (("sus", lambda i: bind_c(sets[i], outs[i])), ("peer_sus", peer if "peer_us" in row else None)):
            if make:
                t = time_sustained(make, n_sets, args.sustain)
                row[key + "_us"] = round(t["us"], 2)
                if t["mj"] is not None:
                    row[key + "_mj"], row[key + "_w"] = round(t["mj"], 3), round(t["w"], 1)
    if args.flush:
        # One launch after an L2 flush, median of many. Two flushes: a memset (leaves the L2 full
        # of dirty lines the kernel must write back; the tuning worker's flush until 2026-11-28)
        # and a read of the same buffer (leaves it clean; the worker's flush now).
        junk = torch.empty(2 * L2_BYTES // 4, dtype=torch.float32, device="cuda")

        def after_flush_us(flush, run, launches=1):
            """Median over 40 of run's time (per launch) right after flush."""
            ts = []
            for _ in range(40):
                flush()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                run()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b) * 1000.0 / launches)
            return round(sorted(ts)[len(ts) // 2], 2)

        run = bind_c(sets[0], outs[0])
        for key, flush in (("flushed_us", junk.zero_), ("flushed_read_us", junk.sum)):
            row[key] = after_flush_us(flush, run)

        # After a read flush, the input sets one after another in one timed span (a CUDA graph
        # of one launch per set, so that no host launch cost falls in it): each launch reads its
        # own set cold and its setup overlaps the one before, as in a model's stream of kernels.
        def flushed_run_us(make_fn):
            return after_flush_us(junk.sum, cuda_graph(make_fn, n_sets, n_sets).replay, n_sets)

        row["flushed_run_us"] = flushed_run_us(lambda i: bind_c(sets[i], outs[i]))
        if "peer_us" in row:
            row["peer_flushed_run_us"] = flushed_run_us(peer)
    if meta["op"] == OP_MATMUL:
        row["tflops"] = round(matmul_flops(meta) / us / 1e6, 1)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--only", default="")
    ap.add_argument("--peer-epilogue", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--dims", default="", help="the named dims' sizes (their max, the inputs' shapes) for "
                    "programs of a request with named dims, in the request's order")
    ap.add_argument("--flush", action="store_true", help="also time single launches after an L2 flush")
    ap.add_argument("--alternate", action="store_true", help="time candidate and peer in alternating replays")
    ap.add_argument("--sustain", type=float, default=0, help="also time after this many ms of back-to-back runs")
    args = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
        if args.only not in os.path.basename(path):
            continue
        try:
            row = run_one(path, args)
        except Exception as e:  # one broken variant must not hide the others
            row = {"name": os.path.basename(path), "error": repr(e)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'name':40s} {'us':>9s} {'peer':>9s} {'ratio':>6s} {'TF/s':>6s} {'err':>9s} {'flushed':>9s} "
          f"{'fl_read':>9s} {'fl_run':>9s} {'peer_run':>9s} {'sus':>9s} {'peer_sus':>9s} {'mJ':>7s} {'peer_mJ':>7s}")
    for r in rows:
        if "error" in r:
            print(f"{r['name']:40s} ERROR {r['error'][:80]}")
            continue
        print(f"{r['name']:40s} {r['us']:9.2f} {r.get('peer_us', 0):9.2f} {r.get('ratio', 0):6.3f} "
              f"{r.get('tflops', 0):6.1f} {r['err']:9.2e} {r.get('flushed_us', 0):9.2f} "
              f"{r.get('flushed_read_us', 0):9.2f} {r.get('flushed_run_us', 0):9.2f} {r.get('peer_flushed_run_us', 0):9.2f} "
              f"{r.get('sus_us', 0):9.2f} {r.get('peer_sus_us', 0):9.2f} {r.get('sus_mj', 0):7.1f} {r.get('peer_sus_mj', 0):7.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
