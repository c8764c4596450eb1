#!/usr/bin/env python3
"""Fair queueing between clients, attacked from the outside against the real hidetd.

    attack_queue.py HIDETD CASE
    attack_queue.py HIDETD bench N     (not a test: figures for bench/results, a flood of N)

    CASE: flood-victim | join-deep | raise-cap

One client (the Unix socket's uid) floods the tuning queue with ops that each need a job; a
victim from another identity (a TCP client with the token) then asks for one op. With
max_running_jobs = 1 the jobs run one at a time, so the order in which they leave the queue is
seen in GET /v1/jobs (a job that is running or ended has started). The victim's job must start
after at most one more of the flooder's (two identities are active), where it used to start after
all of them:

  flood-victim  the victim's own new op.
  join-deep     the victim asks for the op the flooder queued last: joining moves the job into
                the victim's turn.
  raise-cap     the flooder re-sends its queued normal ops at priority blocking: the joins raise
                only as many as its own blocking quota allows (2 here), where every one used to
                be raised; the victim's blocking join of another is still granted (its own room).

Jobs are `tune: "none"` kernels (one NVRTC compile each, no GPU: --workers none), distinct shapes
so that none shares another's job. Pass/fail never depends on how fast a job is: the flooder's
jobs are counted, not timed, and a failing run stops as soon as more of them started than fair
queueing allows. Exit 77 (skip) when HIDETD is not built.
"""
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hardening import check, error_code, run_case, start, tcp_get  # noqa: E402
from hidetd_unix import UnixHTTPConnection  # noqa: E402  (path set up by ops_daemon)

FLOOD = 40
STEP_TIMEOUT = 60.0


def op_body(i, prio="normal", wait=False):
    # Distinct shapes: distinct op keys, each its own job.
    return json.dumps({
        "op": "softmax", "inputs": [{"shape": [8, 64 * (i + 1)], "dtype": "f16"}],
        "arch": "sm_90", "tune": "none", "wait": wait, "priority": prio,
    }).encode()


def unix_post(c, body):
    c.request("POST", "/v1/kernels", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()


def job_of(status, body, who):
    check(status == 202, f"{who}: expected 202 with a job, got {status} {body[:300]!r}")
    return int(json.loads(body)["job"]["id"])


def jobs(d):
    c = UnixHTTPConnection(d.sock, 30)
    try:
        c.request("GET", "/v1/jobs")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, f"GET /v1/jobs: {r.status} {body[:300]!r}")
    finally:
        c.close()
    return {int(j["id"]): j for j in json.loads(body)["jobs"]}


def started(j):
    return j is not None and j["state"] != "queued"


def flood(d, n=FLOOD):
    """The flooder (Unix socket, uid) queues n ops; returns their job ids in order."""
    c = UnixHTTPConnection(d.sock, 30)
    try:
        ids = [job_of(*unix_post(c, op_body(i)), f"flood op {i}") for i in range(n)]
    finally:
        c.close()
    return ids


def victim_waits(d, flood_ids, victim_id, t_victim, before):
    """Polls /v1/jobs until the victim's job started; returns how many of the flooder's jobs
    started after the victim came (those not started in `before`). Fails as soon as more than
    fair queueing allows started while the victim still waited."""
    allowed = 2  # one for the other identity's turn, one for a start racing the victim's POST
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        js = jobs(d)
        after = sum(1 for i in flood_ids if started(js.get(i)) and i not in before)
        if started(js.get(victim_id)):
            return after, time.monotonic() - t_victim
        check(after <= allowed,
              f"the victim's job still waits after {after} more of the flooder's jobs started "
              f"(at most {allowed} allowed): the queue is not fair between clients")
        check(time.monotonic() < deadline, "the victim's job never started")
        time.sleep(0.01)


def started_ids(d, ids):
    js = jobs(d)
    return {i for i in ids if started(js.get(i))}


def daemon(tmp, hidetd, extra="", max_queued=200):
    return start(hidetd, tmp, extra_sections=(
        f"[tuning]\nmax_running_jobs = 1\nmax_queued_jobs = {max_queued}\n" + extra))


def case_flood_victim(hidetd, tmp):
    d = daemon(tmp, hidetd)
    try:
        ids = flood(d)
        before = started_ids(d, ids)
        t = time.monotonic()
        st, body = tcp_get(d.port, "/v1/kernels", method="POST", body=op_body(1000),
                           headers={"Content-Type": "application/json"})
        victim = job_of(st, body, "the victim (TCP, token)")
        after, waited = victim_waits(d, ids, victim, t, before)
        left = sum(1 for i in ids if not started(jobs(d).get(i)))
        check(left > 0, "the flood ran out before the victim started: nothing was shown")
        print(f"flood-victim: {FLOOD} queued by uid, the victim's op started after {after} more "
              f"of them ({waited:.2f}s), {left} still queued")
    finally:
        d.stop()


def case_join_deep(hidetd, tmp):
    d = daemon(tmp, hidetd)
    try:
        ids = flood(d)
        before = started_ids(d, ids)
        t = time.monotonic()
        # The op the flooder queued last: the victim joins that job.
        st, body = tcp_get(d.port, "/v1/kernels", method="POST", body=op_body(FLOOD - 1),
                           headers={"Content-Type": "application/json"})
        victim = job_of(st, body, "the victim's join")
        check(victim == ids[-1], f"the victim got job {victim}, not the queued {ids[-1]}")
        after, waited = victim_waits(d, ids[:-1], victim, t, before)
        print(f"join-deep: the op at the end of a {FLOOD}-job backlog, joined by another client, "
              f"started after {after} more of the backlog ({waited:.2f}s)")
    finally:
        d.stop()


def case_raise_cap(hidetd, tmp):
    d = daemon(tmp, hidetd, "max_blocking_jobs_per_client = 2\n")
    try:
        ids = flood(d, 12)
        c = UnixHTTPConnection(d.sock, 30)
        raised = []
        try:
            for i in range(4, 12):
                st, body = unix_post(c, op_body(i, "blocking"))
                check(st in (200, 202), f"the flooder's blocking join of op {i}: {st} {body[:300]!r}")
                if st == 202:
                    j = json.loads(body)["job"]
                    check(int(j["id"]) == ids[i], f"op {i} got job {j['id']}, not {ids[i]}")
                    if j["state"] == "queued" and j["priority"] == "blocking":
                        raised.append(ids[i])
            # A new blocking op of its own beyond the quota: refused, as before.
            st, body = unix_post(c, op_body(100, "blocking"))
            check(st == 429 and error_code(body) == "quota_exceeded",
                  f"a third blocking op of the flooder: {st} {body[:300]!r}")
        finally:
            c.close()
        js = jobs(d)
        queued = [i for i in ids[4:] if js[i]["state"] == "queued"]
        check(len(queued) >= 3, f"the jobs ran before the joins could be checked: {queued}")
        blocking = [i for i in ids if js[i]["priority"] == "blocking"]
        check(len(blocking) <= 2,
              f"the flooder's joins lifted {len(blocking)} jobs to blocking past its quota of 2: "
              f"{blocking}")
        check(len(raised) == len(blocking), f"answers {raised} vs /v1/jobs {blocking}")
        # Another client has blocking room of its own: its join raises one more.
        target = next(i for i in reversed(queued) if i not in blocking)
        st, body = tcp_get(d.port, "/v1/kernels", method="POST",
                           body=op_body(ids.index(target), "blocking"),
                           headers={"Content-Type": "application/json"})
        check(st in (200, 202), f"the victim's blocking join: {st} {body[:300]!r}")
        j = jobs(d)[target]
        check(j["state"] != "queued" or j["priority"] == "blocking",
              f"the victim's blocking join (with room of its own) did not raise job {target}: {j}")
        print(f"raise-cap: 8 blocking joins by one client raised {len(blocking)} (quota 2); "
              f"another client's join raised job {target}")
    finally:
        d.stop()


def bench(hidetd, tmp, n):
    """Not a default case: the figures for bench/results. The flooder queues n ops, the victim
    asks for one; prints how many of the flooder's jobs started after the victim came and before
    it, its wait in seconds and in units of job time (the median time between the flooder's
    starts, seen by polling /v1/jobs every 10 ms). No fail-fast: before the fix the victim waits
    for the whole flood."""
    d = daemon(tmp, hidetd, max_queued=2 * n + 16)
    try:
        t0 = time.monotonic()
        ids = flood(d, n)
        flood_s = time.monotonic() - t0
        before = started_ids(d, ids)
        t = time.monotonic()
        st, body = tcp_get(d.port, "/v1/kernels", method="POST", body=op_body(100000),
                           headers={"Content-Type": "application/json"})
        victim = job_of(st, body, "the victim (TCP, token)")
        seen = {}  # flood job id -> when it was first seen started
        victim_at = None
        while True:
            js = jobs(d)
            now = time.monotonic()
            for i in ids:
                if i not in seen and started(js.get(i)):
                    seen[i] = now
            if victim_at is None and started(js.get(victim)):
                victim_at = now
                ahead = sum(1 for i in seen if i not in before)
            after_victim = sum(1 for v in seen.values() if victim_at and v > victim_at)
            if victim_at and (after_victim >= 6 or len(seen) == len(ids)):
                break
            check(now - t < 3600, "gave up after an hour")
            time.sleep(0.01)
        starts = sorted(seen.values())
        gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
        job_s = gaps[len(gaps) // 2] if gaps else float("nan")
        wait_s = victim_at - t
        print(f"bench: flood {n} jobs (queued in {flood_s:.2f}s) by uid; the victim (TCP token) "
              f"started after {ahead} more of them, {wait_s:.2f}s = {wait_s / job_s:.1f} job times "
              f"(job time {job_s:.3f}s, median of {len(gaps)} gaps)")
    finally:
        d.stop()


CASES = {
    "flood-victim": case_flood_victim,
    "join-deep": case_join_deep,
    "raise-cap": case_raise_cap,
}


def main(argv):
    if len(argv) == 4 and argv[2] == "bench":
        tmp = tempfile.mkdtemp(prefix="hidetd-queue-")
        try:
            bench(argv[1], tmp, int(argv[3]))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    return run_case(argv, CASES, __doc__, "hidetd-queue-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
