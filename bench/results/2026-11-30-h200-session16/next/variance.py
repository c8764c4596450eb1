#!/usr/bin/env python3
"""Which of its module load, its buffers or its CUDA graph sets one kernel's speed? Session 16
(calls a and c): the swapped 64x56 tile of [104,4096]x[4096,4096] ran about 11.9 us in one
program of six and 13.2-14.9 in the others, each program timed by kbench with its own module,
its own input sets and its own graph, so the three were never told apart.

    variance.py PROGRAM.json [N]

For one kgen program, N times each (default 6), one row per trial: (1) one module and one
allocation of input sets, a new CUDA graph each time; (2) one module, a fresh allocation of input
sets each time (the earlier ones kept, so that it lands elsewhere); (3) a fresh module load each
time, the first allocation. Times from bench.py's
time_us (graph replays over rotating sets), in microseconds.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
import torch  # noqa: E402

from bench import rand, sets_for, time_us  # noqa: E402
from kbench import binder, load  # noqa: E402


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    meta = json.load(open(path))
    cubin = path[:-len(".json")] + ".cubin"
    shapes = [(t["shape"], t["dtype"]) for t in meta["inputs"]]
    out_shape, out_dt = meta["output"]["shape"], meta["output"]["dtype"]
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[out_dt]
    size = {"f16": 2, "bf16": 2, "f32": 4, "f8e4m3": 1, "f8e5m2": 1}
    nbytes = 0
    for s, d in shapes:
        count = 1
        for x in s:
            count *= x
        nbytes += count * size[d]
    n_sets = sets_for(nbytes)

    def alloc():
        return ([[rand(s, d) for s, d in shapes] for _ in range(n_sets)],
                [torch.empty(out_shape, dtype=dt, device="cuda") for _ in range(n_sets)])

    def timed(bind, bufs):
        sets, outs = bufs
        return time_us(lambda i: bind(sets[i], outs[i]), n_sets)

    first = binder(meta, load(cubin, meta["kernels"]), meta["workspace_bytes"])
    bufs = alloc()
    held = []  # every allocation kept, so that the next one lands elsewhere

    def fresh():
        held.append(alloc())
        return held[-1]

    rows = {"graph": [timed(first, bufs) for _ in range(n)],
            "buffers": [timed(first, fresh()) for _ in range(n)],
            "module": [timed(binder(meta, load(cubin, meta["kernels"]), meta["workspace_bytes"]), bufs)
                       for _ in range(n)]}
    for k, v in rows.items():
        print("%-8s %s" % (k, " ".join("%6.2f" % x for x in v)))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
