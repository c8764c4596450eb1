#!/usr/bin/env python3
"""bench/replay_range.py - replays a measured range job's choice on the CPU machine, from what a
device call kept: the trials table (bench/gpu_call.sh `trials`: every candidate's time at the
range's top under the job's tuning key, and at its middle under the middle's key) and the
model's carries of the same request (`kgen --carry REQUEST.json`, with the range's dims).

It compares the candidates as scheduler/tune.c does - each by its worst ratio to the best
carried time at any of the range's samples - and prints the best of them, with the sample where
each loses most and, beside it, the worst ratio at the top and the middle alone.

    kgen --carry REQUEST.json > carry.tsv
    replay_range.py carry.tsv trials.tsv.gz TOP_KEY MIDDLE_KEY [--show N]

TOP_KEY and MIDDLE_KEY are key prefixes (the trials of one job share a key; a job's top time is
its `best_us` in /v1/jobs). A finalist's record holds its final-round times, the others their
first. The middle is the samples' middle one (TUNER_RANGE_MIDDLE in tuner/tuner.h): samples up
to it take the middle's time, the others the top's.
"""
import argparse
import gzip
import json
import sys


def read_carry(path):
    """(samples, {schedule json: [carry per sample]})."""
    samples, carry = None, {}
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "samples":
                samples = fields[1:]
            else:
                carry[fields[1]] = [float(x) for x in fields[2:]]
    if samples is None:
        sys.exit(f"{path}: no samples line (is it kgen --carry's output?)")
    return samples, carry


def read_trials(path, prefix):
    """{schedule json: time} of the passing trials under the key that starts with prefix."""
    out, keys = {}, set()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            key, _cand, status, latency, _err, _at, schedule = line.rstrip("\n").split("\t", 6)
            if not key.startswith(prefix):
                continue
            keys.add(key)
            if status == "0" and latency not in ("None", "") and float(latency) > 0:
                out[schedule] = float(latency)
    if len(keys) != 1:
        sys.exit(f"{path}: {len(keys)} tuning keys start with {prefix}")
    return out


def label(schedule):
    """A schedule in a few words: template, tile, stages, consumers, staging, and the kinds that
    change what a tile costs (swapped operands, stream-K, split-K, pairs, pingpong)."""
    p = json.loads(schedule).get("params", {})
    kinds = [word for word, on in (("swap", p.get("swap")), ("stream-K", p.get("stream_k")),
                                   (f"split{p.get('split_k')}", (p.get("split_k") or 1) > 1),
                                   ("pair", (p.get("cluster") or 1) > 1 or (p.get("cluster_n") or 1) > 1),
                                   ("pingpong", p.get("pingpong"))) if on]
    return "%s %dx%d st%s c%s so%s%s" % (json.loads(schedule).get("template", "?").replace("matmul_", ""),
                                         p.get("block_m", 0), p.get("block_n", 0), p.get("stages"),
                                         p.get("consumers"), p.get("stage_out"), "".join(" " + k for k in kinds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("carry")
    ap.add_argument("trials")
    ap.add_argument("top_key")
    ap.add_argument("mid_key")
    ap.add_argument("--show", type=int, default=8)
    args = ap.parse_args()
    samples, carry = read_carry(args.carry)
    n = len(samples)
    middle = (n - 1) // 2
    top, mid = read_trials(args.trials, args.top_key), read_trials(args.trials, args.mid_key)
    cands = []
    for schedule, t in top.items():
        if schedule not in mid:
            continue
        if schedule not in carry:
            sys.exit("a trial's schedule is not in kgen's space: the request or the tree differs")
        c = carry[schedule]
        cands.append((schedule, t, mid[schedule], [(mid[schedule] if k <= middle else t) * c[k] for k in range(n)]))
    if not cands:
        sys.exit("no candidate has both times")
    best = [min(x[3][k] for x in cands) for k in range(n)]
    best_top, best_mid = min(x[1] for x in cands), min(x[2] for x in cands)

    def worst(x):
        return max(x[3][k] / best[k] for k in range(n))

    print(f"{len(cands)} candidates timed at both sizes; samples {samples[0]} .. {samples[middle]} .. {samples[-1]}")
    for x in sorted(cands, key=worst)[:args.show]:
        ratios = [x[3][k] / best[k] for k in range(n)]
        k = ratios.index(max(ratios))
        print("%-36s top %8.2f  middle %8.2f  worst %.3f at %s  (top and middle alone %.3f)"
              % (label(x[0]), x[1], x[2], max(ratios), samples[k], max(x[1] / best_top, x[2] / best_mid)))


if __name__ == "__main__":
    main()
