#!/usr/bin/env python3
"""What may take a CPU from hidetd's loop thread, checked from the outside on the real daemon.

    loop_threads.py HIDETD

Starts hidetd (--workers none, UV_THREADPOOL_SIZE=3, [graphs] max_running = 2, the test's own
CPU affinity) and, once it answers /healthz (that is, after READY), before any request has queued
work:
  - the start-up warm-up ran (its log line) and every libuv pool thread already runs at nice 19
    (a pool thread used to lower itself only when its first work ran, so the first compiles of a
    fresh daemon could run at the loop's own priority), and so do the graph service's threads;
  - with two CPUs or more, every pool and graph thread is kept off the lowest CPU of hidetd's
    affinity, which stays the loop thread's (the loop thread and the log writer keep the whole
    set);
then a tune:"model" request compiles with NVRTC, and afterwards:
  - no thread appeared and no child process was started (NVRTC compiles in the pool thread that
    called it: nothing it starts escapes the pool's priority);
  - the pool threads are still lowered and confined.
Exit 77 (skip) when HIDETD is not built.
"""
import json
import os
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
from ops_daemon import Daemon, Fail, check  # noqa: E402

SKIP = 77
POOL = 3
GRAPH = 2  # [graphs] max_running: the graph service's threads, lowered like the pool's
REQUEST = {"op": "matmul", "inputs": [{"shape": [64, 128], "dtype": "f16"},
                                      {"shape": [128, 72], "dtype": "f16"}],
           "arch": "sm_90", "tune": "model"}


def cpu_list(text):
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def threads(pid):
    """{tid: (nice, allowed cpus)} of every thread of pid."""
    out = {}
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except FileNotFoundError:
            continue
        nice = int(stat.rsplit(")", 1)[1].split()[16])
        allowed = next(l.split(":", 1)[1] for l in status.splitlines()
                       if l.startswith("Cpus_allowed_list:"))
        out[int(tid)] = (nice, cpu_list(allowed))
    return out


def children(pid):
    kids = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(f.read().split())
        except FileNotFoundError:
            pass
    return kids


def check_pool(pid, mask, when):
    ts = threads(pid)
    main = ts.pop(pid)
    check(main[0] == 0, f"{when}: the loop thread runs at nice {main[0]}")
    check(main[1] == mask, f"{when}: the loop thread's CPUs {sorted(main[1])}, not {sorted(mask)}")
    pool = {t: v for t, v in ts.items() if v[0] == 19}
    others = {t: v for t, v in ts.items() if v[0] != 19}
    # Besides the pool and the graph threads: the log writer (nice 0, all CPUs).
    check(len(pool) == POOL + GRAPH, f"{when}: {len(pool)} threads at nice 19, expected the "
                                     f"{POOL} pool and {GRAPH} graph threads; threads (nice, "
                                     f"cpus): {ts}")
    check(len(others) == 1, f"{when}: threads besides the loop and the pool: {others}")
    if len(mask) >= 2:
        want = mask - {min(mask)}
        for tid, (_, cpus) in pool.items():
            check(cpus == want, f"{when}: pool thread {tid} may run on {sorted(cpus)}, expected "
                                f"{sorted(want)} (the lowest CPU left to the loop)")
    return set(ts) | {pid}


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    hidetd = argv[1]
    if not os.access(hidetd, os.X_OK):
        print(f"skip: {hidetd} is not built")
        return SKIP
    mask = os.sched_getaffinity(0)
    with tempfile.TemporaryDirectory(prefix="hidetd-loop-threads-") as tmp:
        d = Daemon(hidetd, tmp, env={"UV_THREADPOOL_SIZE": str(POOL)},
                   config_text=f"[log]\nlevel = info\n[graphs]\nmax_running = {GRAPH}\n")
        try:
            d.wait_healthy()
            pid = d.proc.pid
            before = check_pool(pid, mask, "after READY")
            # The log writer writes in batches of up to 10 ms.
            deadline = time.monotonic() + 5
            while "start-up warm-up:" not in d.log() and time.monotonic() < deadline:
                time.sleep(0.05)
            check("start-up warm-up:" in d.log(), f"no warm-up line in the log:\n{d.log()}")
            status, body = post(d.sock, json.dumps(REQUEST))
            check(status == 200, f"the tuning request answered {status}: {body[:300]}")
            check(b'"origin":"tuned"' in body, f"the request did not compile: {body[:300]}")
            after = check_pool(pid, mask, "after a compile")
            check(after == before, f"threads changed across a compile: {sorted(before)} -> "
                                   f"{sorted(after)}")
            kids = children(pid)
            check(not kids, f"hidetd has child processes after a compile: {kids}")
            d.stop()
            pool_cpus = sorted(mask - {min(mask)}) if len(mask) >= 2 else sorted(mask)
            print(f"loop-threads: {POOL} pool and {GRAPH} graph threads at nice 19 on CPUs "
                  f"{pool_cpus} from READY "
                  f"on; a compile started no thread and no process")
        except Fail as e:
            print(f"FAIL: {e}")
            return 1
        finally:
            d.kill()
    return 0


def post(sock_path, body):
    """POST /v1/kernels over the Unix socket; (status, body bytes)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(120)
    s.connect(sock_path)
    data = body.encode()
    s.sendall(b"POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
              b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode() +
              b"\r\n\r\n" + data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


if __name__ == "__main__":
    sys.exit(main(sys.argv))
