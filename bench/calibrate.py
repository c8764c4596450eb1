#!/usr/bin/env python3
"""bench/calibrate.py - the cost model's ranking against measured times, case by case.

`tune: "model"` (the daemon's default) takes the cost model's first schedule unmeasured, so the
model's order is what most clients get. This tool asks a running hidetd with GPU workers for the
ranked space of each bench case (POST /v1/spaces), has it measure the model's top candidates
(POST /v1/kernels, tune "measure", a large candidate budget), reads every candidate's time from
the trials table of the daemon's cache, and joins the two by candidate index.

Per case it reports: the model's first pick and its measured time, the measured best and its
rank in the model's order, how many of the model's first N are within 5% of the best, and the
Spearman correlation of predicted and measured times. calibration.json holds each case's
request and every row (index, model rank, template, params, predicted_us, status, latency_us);
bench/model_check reads it to rank the same schedules with the model as built now.

Times are the worker's (median of timed launches, early elimination marks clearly slower
candidates with a rough time), not bench.py's alternating replays: good for ranking.

    bench/calibrate.py --socket S --db CACHE.db --out DIR [--suite conv] [--only case,...]
                       [--shapes substr,...] [--dtypes f16,bf16] [--candidates 300] [--budget-s 60]
                       [--arch native]
"""
import argparse
import json
import os
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (case definitions and the Unix-socket client)


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r
    n = len(xs)
    if n < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    d2 = sum((a - b) ** 2 for a, b in zip(rx, ry))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def trials_since(db_path, seen_keys):
    """Trials of tuning keys not in seen_keys: {key: [row, ...]}."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        rows = con.execute("SELECT tuning_key, candidate, schedule_json, status, latency_us, reason "
                           "FROM trials").fetchall()
    finally:
        con.close()
    out = {}
    for key, cand, sched, status, lat, reason in rows:
        if key in seen_keys:
            continue
        out.setdefault(key, []).append(dict(candidate=cand, schedule=json.loads(sched), status=status,
                                            latency_us=lat, reason=reason))
    return out


def calibrate_case(daemon, case, args, seen_keys):
    body = dict(case["req"], arch=args.arch)
    status, space = daemon.call("POST", "/v1/spaces", body)
    if status != 200:
        return dict(case=case["name"], shape=case["shape"], error=f"spaces: HTTP {status}: {space}")
    ranked = space["candidates"]
    by_index = {c["index"]: (rank, c) for rank, c in enumerate(ranked)}
    t0 = time.time()
    status, kset = daemon.call("POST", "/v1/kernels", dict(
        body, tune="measure", wait=True,
        budget={"seconds": args.budget_s, "candidates": args.candidates}))
    tune_s = time.time() - t0
    if status != 200:
        return dict(case=case["name"], shape=case["shape"], error=f"kernels: HTTP {status}: {kset}")
    new = trials_since(args.db, seen_keys)
    seen_keys.update(new)
    rows = []
    for trials in new.values():
        for tr in trials:
            rank, c = by_index.get(tr["candidate"], (None, None))
            rows.append(dict(index=tr["candidate"], model_rank=rank,
                             template=tr["schedule"].get("template"), params=tr["schedule"].get("params"),
                             predicted_us=c["predicted_us"] if c else None,
                             ok=tr["latency_us"] is not None and tr["latency_us"] >= 0,
                             status=tr["status"], latency_us=tr["latency_us"], reason=tr["reason"]))
    rows.sort(key=lambda r: (r["model_rank"] is None, r["model_rank"]))
    timed = [r for r in rows if r["ok"] and r["predicted_us"] is not None]
    summary = dict(case=case["name"], shape=case["shape"], dtype=case["dtype"], space=len(ranked), measured=len(timed),
                   tune_s=round(tune_s, 1), picked=kset.get("schedule"))
    if timed:
        best = min(timed, key=lambda r: r["latency_us"])
        first = next((r for r in timed if r["model_rank"] == 0), None)
        top = [r for r in timed if r["model_rank"] < args.top]
        summary.update(
            best_us=best["latency_us"], best_rank=best["model_rank"], best=dict(template=best["template"],
                                                                              params=best["params"]),
            first_us=first["latency_us"] if first else None,
            first_of_best=round(best["latency_us"] / first["latency_us"], 3) if first else None,
            top_within_5pct=sum(r["latency_us"] <= 1.05 * best["latency_us"] for r in top),
            spearman=spearman([r["predicted_us"] for r in timed], [r["latency_us"] for r in timed]))
    return dict(summary=summary, request=body, rows=rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--db", required=True, help="the daemon's cache file (read only)")
    ap.add_argument("--out", default=".")
    ap.add_argument("--arch", default="native")
    ap.add_argument("--suite", default="all")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--shapes", default="", help="comma-separated substrings of case shapes")
    ap.add_argument("--dtypes", default="f16,bf16", help="comma-separated case dtypes")
    ap.add_argument("--candidates", type=int, default=300)
    ap.add_argument("--budget-s", type=float, default=60)
    ap.add_argument("--top", type=int, default=8, help="the model's first N for the within-5%% count")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    daemon = bench.Daemon(args.socket)
    only = set(filter(None, args.only.split(",")))
    shapes = list(filter(None, args.shapes.split(",")))
    dtypes = set(filter(None, args.dtypes.split(",")))
    cases = [c for c in bench.suite(args.suite) if (not only or c["name"] in only)
             and (not shapes or any(s in c["shape"] for s in shapes)) and c["dtype"] in dtypes]
    seen = set(trials_since(args.db, set()))
    results = []
    for case in cases:
        try:
            res = calibrate_case(daemon, case, args, seen)
        except Exception as e:  # one broken case must not hide the others' data
            res = dict(case=case["name"], shape=case["shape"], error=repr(e)[:300])
        results.append(res)
        print(json.dumps(res.get("summary", res)), flush=True)
        with open(os.path.join(args.out, "calibration.json"), "w") as f:
            json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), device=bench.gpu_facts(), cases=results), f)
    print(f"{'case':16} {'shape':24} {'space':>5} {'timed':>5} {'first us':>9} {'best us':>8} "
          f"{'best/first':>10} {'best rank':>9} {'top<=5%':>7} {'spearman':>8}")
    for r in results:
        s = r.get("summary", r)
        if "best_us" not in s:
            print(f"{s['case']:16} {s['shape']:24} {s.get('error', 'no timed candidate')[:80]}")
            continue
        first = f"{s['first_us']:9.2f}" if s["first_us"] is not None else f"{'-':>9}"
        ratio = f"{s['first_of_best']:10.2f}" if s["first_of_best"] is not None else f"{'-':>10}"
        rho = f"{s['spearman']:8.2f}" if s["spearman"] is not None else f"{'-':>8}"
        shape = s["shape"] + (" " + s["dtype"] if s.get("dtype", "f16") != "f16" else "")
        print(f"{s['case']:16} {shape:24} {s['space']:5} {s['measured']:5} {first} {s['best_us']:8.2f} "
              f"{ratio} {s['best_rank']:9} {s['top_within_5pct']:7} {rho}")


if __name__ == "__main__":
    main()
