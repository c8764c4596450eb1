#!/usr/bin/env python3
"""bench/decode_fit.py - how well attention_decode's cost model ranks the candidates that the GPU
test timed (tuner/attn/tests/gpu_attn_decode.c with HIDET_DECODE_TIMES=1).

Reads such a log (e.g. bench/results/2026-11-30-h200-session10/c/decode.log): each timed row is
a run of candidate lines `   <measured> us (model <predicted>) {schedule json}` closed by its
header `B1 32/8 S1 Skv4096 D128 f16 (K+V 16.8 MB, 120 cand):` and the default / model / best
lines. Prints per row: the model's pick and its measured time, the measured best, the pick's
time over the best, and Spearman's rank correlation of the model's predictions against the
measured times over all of the row's candidates (ties get their mean rank).

  python3 bench/decode_fit.py LOG            the table
  python3 bench/decode_fit.py LOG --c-table  the measurements as C initialisers (the rows that
                                             tuner/attn/tests/test_attn_decode.c checks the
                                             model against)
"""
import argparse
import json
import re
import sys

CAND = re.compile(r"^\s+([0-9.]+) us \(model\s+([0-9.]+)\) (\{.*\})\s*$")
HEAD = re.compile(r"^(B\d+ \S+ S\d+ Skv\d+ D\d+ \S+.*?) \(K\+V [0-9.]+ MB, (\d+) cand\):\s*$")
PARAMS = ("split", "block", "kv_tile", "stages", "fused")


def parse(path):
    """[(row name, [(measured us, model us, params dict)])] in the log's order."""
    rows, pending = [], []
    with open(path) as f:
        for line in f:
            m = CAND.match(line)
            if m:
                pending.append((float(m.group(1)), float(m.group(2)), json.loads(m.group(3))["params"]))
                continue
            h = HEAD.match(line)
            if h:
                if len(pending) != int(h.group(2)):
                    sys.exit(f"{path}: row {h.group(1)!r} says {h.group(2)} candidates, {len(pending)} timed")
                rows.append((h.group(1), pending))
            # default / model / best lines and anything else end a run of candidate lines
            pending = []
    return rows


def ranks(xs):
    """Ranks 1..n, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else float("nan")


def sched(p):
    return "s%d b%d t%d st%d f%d" % tuple(p[k] for k in PARAMS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--c-table", action="store_true", help="print the measurements as C initialisers")
    args = ap.parse_args()
    rows = parse(args.log)
    if not rows:
        sys.exit(f"{args.log}: no timed rows (lines '<us> us (model <us>) {{json}}' under a '(K+V .. cand):' header)")
    if args.c_table:
        # {row, split, block, kv_tile, stages, fused, measured us}, three to a line
        for ri, (name, cands) in enumerate(rows):
            print(f"    /* {ri}: {name}, {len(cands)} candidates */")
            items = ["{%d, %d, %d, %d, %d, %d, %.2f}" % ((ri,) + tuple(p[k] for k in PARAMS) + (meas,))
                     for meas, _, p in cands]
            for i in range(0, len(items), 3):
                print("    " + ", ".join(items[i:i + 3]) + ",")
        return
    print(f"{'row':<34} {'n':>4}  {'model pick':<24} {'pick us':>8} {'best us':>8}  {'best':<24} {'pick/best':>9} {'rho':>6}")
    worst = 0.0
    for name, cands in rows:
        meas = [c[0] for c in cands]
        model = [c[1] for c in cands]
        pick = min(range(len(cands)), key=lambda i: model[i])
        best = min(range(len(cands)), key=lambda i: meas[i])
        ratio = meas[pick] / meas[best]
        worst = max(worst, ratio)
        print(f"{name:<34} {len(cands):>4}  {sched(cands[pick][2]):<24} {meas[pick]:8.2f} {meas[best]:8.2f}  "
              f"{sched(cands[best][2]):<24} {ratio:9.3f} {spearman(model, meas):6.3f}")
    print(f"worst pick/best {worst:.3f}")


if __name__ == "__main__":
    main()
