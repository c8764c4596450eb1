#!/usr/bin/env python3
"""bench/graph_stream.py - other clients' latency while big graphs stream in (issue 35, item 3).

    python3 bench/graph_stream.py HIDETD [--duration 30] [--clients 4] [--nodes 4096]
                                         [--cache-bytes 64MiB] [--no-graphs-section]
                                         [--json OUT.json]

Starts HIDETD (--workers none) on a temporary socket, database and configuration, warms the
kernel cache with every kernel the generated graphs use, then for --duration seconds runs
--clients processes that each POST distinct graphs of --nodes nodes back to back (every graph
has its own names and its own choice of activations, so each is parsed, partitioned and
rendered; its kernels are all cache hits), while two more processes measure what another client
sees: a POST /v1/kernels cache hit every 20 ms and a GET /healthz every 20 ms, each on a fresh
Unix connection. The probes run alone for --idle seconds first (*_idle: what the machine gives
them without graphs). It reports p50/p99/max of both probes, how many graphs were answered and how
long they took, the daemon's RSS (VmRSS before, peak and after) and, when the daemon exports
them, hidetd_graph_cache_bytes and _entries.

--pregen N has each streaming client make N bodies before the start (its own JSON work then does
not compete with the daemon while the probes measure). --probe-nice N runs the probes at nice N (as root, e.g. -10), so that on a loaded machine their
own wait for a core is not counted against the daemon. --no-graphs-section leaves the [graphs]
section out of the configuration, for daemons built
before it existed. Python standard library only; the probes and the streams are separate
processes so that building a 230 KB body never delays a probe.
"""
import argparse
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ops"))
from ops_daemon import Daemon, request  # noqa: E402
from hidetd_unix import UnixHTTPConnection  # noqa: E402

ACTS = ["relu", "gelu", "silu", "sigmoid", "tanh"]
DIM = 256
ROWS = 64


def make_graph(seed, nodes):
    """A chain of residual blocks (matmul, bias, activation, residual add: 4 nodes, one fused
    kernel each) with names and activations drawn from seed: distinct graphs whose kernels are
    the len(ACTS) kernels warm_body() asks for."""
    rnd = random.Random(seed)
    tag = "g%x" % rnd.getrandbits(40)
    blocks = max(1, nodes // 4)
    weights, ns = [], []
    x = f"{tag}_x"
    for b in range(blocks):
        w, bias = f"{tag}_w{b}", f"{tag}_b{b}"
        weights.append({"name": w, "shape": [DIM, DIM], "dtype": "f16"})
        weights.append({"name": bias, "shape": [DIM], "dtype": "f16"})
        h, hb, a, y = (f"{tag}_{s}{b}" for s in ("h", "hb", "a", "y"))
        ns.append({"name": f"{tag}_mm{b}", "op": "matmul", "inputs": [x, w], "outputs": [h]})
        ns.append({"name": f"{tag}_bias{b}", "op": "add", "inputs": [h, bias], "outputs": [hb]})
        ns.append({"name": f"{tag}_act{b}", "op": rnd.choice(ACTS), "inputs": [hb], "outputs": [a]})
        ns.append({"name": f"{tag}_res{b}", "op": "add", "inputs": [a, x], "outputs": [y]})
        x = y
    g = {"graph": {"inputs": [{"name": f"{tag}_x", "shape": [ROWS, DIM], "dtype": "f16"}],
                   "weights": weights, "nodes": ns, "outputs": [x]},
         "arch": "sm_90", "tune": "model"}
    return json.dumps(g).encode()


def warm_body():
    """One small graph with every activation: its kernels are those of every make_graph()."""
    ns, x, weights = [], "x", []
    for b, act in enumerate(ACTS):
        weights += [{"name": f"w{b}", "shape": [DIM, DIM], "dtype": "f16"},
                    {"name": f"b{b}", "shape": [DIM], "dtype": "f16"}]
        ns += [{"op": "matmul", "inputs": [x, f"w{b}"], "outputs": [f"h{b}"]},
               {"op": "add", "inputs": [f"h{b}", f"b{b}"], "outputs": [f"hb{b}"]},
               {"op": act, "inputs": [f"hb{b}"], "outputs": [f"a{b}"]},
               {"op": "add", "inputs": [f"a{b}", x], "outputs": [f"y{b}"]}]
        x = f"y{b}"
    return json.dumps({"graph": {"inputs": [{"name": "x", "shape": [ROWS, DIM], "dtype": "f16"}],
                                 "weights": weights, "nodes": ns, "outputs": [x]},
                       "arch": "sm_90", "tune": "model"}).encode()


HIT_BODY = json.dumps({"op": "softmax", "inputs": [{"shape": [128, 512], "dtype": "f16"}],
                       "arch": "sm_90", "tune": "model"}).encode()


def post(sock, path, body, timeout=600):
    c = UnixHTTPConnection(sock, timeout)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def streamer(sock, idx, nodes, start_at, until, out, pregen=0):
    seed = idx * 1_000_003
    n, times, codes = 0, [], {}
    # --pregen N: the bodies are made before the start, so the client's own JSON work does not
    # compete with the daemon during the measurement.
    bodies = [make_graph(seed + i, nodes) for i in range(pregen)]
    time.sleep(max(0.0, start_at - time.time()))
    body = bodies[0] if bodies else make_graph(seed, nodes)
    while time.time() < until:
        t0 = time.monotonic()
        try:
            st, _ = post(sock, "/v1/graphs", body)
        except OSError as e:
            st = f"error {e.__class__.__name__}"
        times.append(time.monotonic() - t0)
        codes[str(st)] = codes.get(str(st), 0) + 1
        n += 1
        if n < len(bodies):
            body = bodies[n]
        else:
            body = make_graph(seed + n, nodes)  # built while nothing is in flight
    out.put(("stream", idx, times, codes))


def prober(sock, kind, until, out, nice=0, interval=0.02, start_at=0):
    time.sleep(max(0.0, start_at - time.time()))
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass  # not permitted: measured at the default priority
    lat, bad = [], 0
    while time.time() < until:
        t0 = time.monotonic()
        try:
            if kind == "hit":
                st, _ = post(sock, "/v1/kernels", HIT_BODY, timeout=60)
            else:
                st, _, _ = request(sock, "GET", "/healthz", timeout=60)
        except OSError:
            st = 0
        dt = time.monotonic() - t0
        if st != 200:
            bad += 1
        lat.append(dt)
        left = interval - dt
        if left > 0:
            time.sleep(left)
    out.put(("probe", kind, lat, bad))


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def metric(sock, name):
    st, _, body = request(sock, "GET", "/metrics")
    m = re.search(rb"^" + name.encode() + rb" ([0-9.e+]+)$", body, re.M)
    return float(m.group(1)) if m else None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hidetd")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--idle", type=float, default=10, help="seconds of probes alone first")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--cache-bytes", default="64MiB")
    ap.add_argument("--no-graphs-section", action="store_true")
    ap.add_argument("--pregen", type=int, default=0,
                    help="bodies each streaming client makes before the start (0: as it goes)")
    ap.add_argument("--daemon-nice", type=int, default=0,
                    help="start the daemon at this nice value (its pool threads still go to 19)")
    ap.add_argument("--probe-nice", type=int, default=0,
                    help="the probes' nice value (e.g. -10 as root: on a loaded machine the probe "
                         "processes' own wait for a core is then not counted against the daemon)")
    ap.add_argument("--json")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="hidetd-gstream-")
    conf = "[log]\nlevel = warn\n[server]\nmax_body = 16MiB\nrequest_timeout = 600s\n"
    if not a.no_graphs_section:
        conf += f"[graphs]\ncache_bytes = {a.cache_bytes}\n"
    wrap = ["nice", "-n", str(a.daemon_nice)] if a.daemon_nice else None
    d = Daemon(os.path.abspath(a.hidetd), tmp, config_text=conf, wrap=wrap)
    try:
        d.wait_healthy()
        pid = d.proc.pid
        t0 = time.monotonic()
        st, body = post(d.sock, "/v1/graphs", warm_body())
        assert st == 200, (st, body[:300])
        st, body = post(d.sock, "/v1/kernels", HIT_BODY)
        assert st == 200, (st, body[:300])
        print(f"warm-up: {time.monotonic() - t0:.1f}s (kernels compiled)")
        # One graph alone: its time unloaded.
        t0 = time.monotonic()
        st, body = post(d.sock, "/v1/graphs", make_graph(999_999_937, a.nodes))
        alone = time.monotonic() - t0
        assert st == 200, (st, body[:300])
        plan = json.loads(body)
        print(f"one {a.nodes}-node graph alone: {alone * 1000:.0f} ms, {len(plan['steps'])} steps, "
              f"body {len(make_graph(1, a.nodes)) / 1024:.0f} KiB, plan {len(body) / 1024:.0f} KiB")
        # The probes alone first: what this machine gives them without graphs.
        out = mp.Queue()
        idle_until = time.time() + a.idle
        idle = [mp.Process(target=prober, args=(d.sock, k, idle_until, out, a.probe_nice))
                for k in ("hit", "healthz")]
        for p in idle:
            p.start()
        idle_res = [out.get(timeout=600) for _ in idle]
        for p in idle:
            p.join()
        rss0 = rss_kb(pid)
        start_at = time.time() + (a.pregen * 0.4 + 2 if a.pregen else 0)
        until = start_at + a.duration
        procs = [mp.Process(target=streamer, args=(d.sock, i, a.nodes, start_at, until, out, a.pregen))
                 for i in range(a.clients)]
        procs += [mp.Process(target=prober, args=(d.sock, k, until, out, a.probe_nice, 0.02, start_at))
                  for k in ("hit", "healthz")]
        for p in procs:
            p.start()
        peak = rss0
        while any(p.is_alive() for p in procs) and time.time() < until + 600:
            peak = max(peak, rss_kb(pid))
            time.sleep(0.1)
        results = [out.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        rss1 = rss_kb(pid)
        gbytes = metric(d.sock, "hidetd_graph_cache_bytes")
        gentries = metric(d.sock, "hidetd_graph_cache_entries")
        rep = {"nodes": a.nodes, "clients": a.clients, "duration_s": a.duration,
               "graph_alone_ms": alone * 1000, "rss_before_kib": rss0, "rss_peak_kib": peak,
               "rss_after_kib": rss1, "graph_cache_bytes": gbytes, "graph_cache_entries": gentries,
               "cache_bytes_config": None if a.no_graphs_section else a.cache_bytes,
               "probe_nice": a.probe_nice, "daemon_nice": a.daemon_nice, "pregen": a.pregen, "loadavg": open("/proc/loadavg").read().split()[:3]}
        stream_times, codes = [], {}
        for r in results:
            if r[0] == "stream":
                stream_times += r[2]
                for k, v in r[3].items():
                    codes[k] = codes.get(k, 0) + v
            else:
                lat = r[2]
                rep[r[1]] = {"n": len(lat), "bad": r[3], "p50_ms": pct(lat, 50) * 1000,
                             "p99_ms": pct(lat, 99) * 1000, "max_ms": max(lat) * 1000 if lat else None}
        rep["graphs"] = {"n": len(stream_times), "status": codes,
                         "p50_s": pct(stream_times, 50), "max_s": max(stream_times) if stream_times else None}
        print(f"{a.clients} clients x {a.duration:.0f}s of distinct {a.nodes}-node graphs: "
              f"{len(stream_times)} answered {codes}, p50 {rep['graphs']['p50_s']:.2f}s "
              f"max {rep['graphs']['max_s']:.2f}s")
        for r in idle_res:
            lat = r[2]
            rep[r[1] + "_idle"] = {"n": len(lat), "bad": r[3], "p50_ms": pct(lat, 50) * 1000,
                                   "p99_ms": pct(lat, 99) * 1000, "max_ms": max(lat) * 1000 if lat else None}
        for k in ("hit_idle", "healthz_idle", "hit", "healthz"):
            p = rep[k]
            print(f"  {k:12s} n={p['n']:5d} bad={p['bad']}  p50 {p['p50_ms']:8.2f} ms  "
                  f"p99 {p['p99_ms']:8.2f} ms  max {p['max_ms']:8.2f} ms")
        print(f"  RSS: before {rss0 / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, after {rss1 / 1024:.0f} MiB"
              + (f"; graph cache {gbytes / 2**20:.1f} MiB in {gentries:.0f} entries"
                 if gbytes is not None else ""))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rep, f, indent=1)
        d.stop()
    finally:
        d.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
