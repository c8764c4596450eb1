#!/usr/bin/env python3
"""The GPU worker pool, attacked from the outside: the real hidetd with the stand-in worker.

    attack_pool.py HIDETD CASE

    CASE: loop-stall | out-of-service

loop-stall      The daemon's loop is stalled for longer than three heartbeat periods, three
                times (SIGSTOP, 2.5 s, SIGCONT: exactly what a loop thread busy with a big graph
                or a connection flood looks like to its timers), while the stand-in worker keeps
                sending heartbeats, then once more while a `measure` job's candidates are timed.
                No worker may be killed, no candidate fail, and the GPU stays in service (before
                the fix the first stall killed the worker and, with max_restarts 2, the second
                put the GPU out of service until a restart, with nothing in the log).
out-of-service  The stand-in's first three starts crash: two failures take the GPU out of
                service, which /v1/status, /metrics and the log say (why, since when, next
                probe); the first probe (5 s later) fails, the second (10 s after that) brings
                the GPU back, and `tune: "measure"` measures on it again.

hidetd runs with `--workers standin` on a temporary socket, database and configuration. Exit 77
(skip) when HIDETD is not built.
"""
import json
import os
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
from hardening import run_case  # noqa: E402
from ops_daemon import Daemon, Fail, check  # noqa: E402
from hidetd_unix import UnixHTTPConnection  # noqa: E402 (ops_daemon put clients/python on the path)
import metrics_parse  # noqa: E402

# The Daemon helper starts hidetd with --workers none; a later --workers wins.
STANDIN = ["/bin/sh", "-c", 'exec "$@" --workers standin', "sh"]

MEASURE = json.dumps({"op": "softmax", "inputs": [{"shape": [64, 512], "dtype": "f16"}],
                      "arch": "sm_90", "tune": "measure", "budget": {"candidates": 2}}).encode()


def start(hidetd, tmp, workers_conf, env):
    conf = "[log]\nlevel = info\n[workers]\n" + workers_conf
    d = Daemon(hidetd, tmp, config_text=conf, env=env, wrap=STANDIN)
    d.wait_healthy()
    return d


def gpu0(d):
    status, _, body = d.get("/v1/status")
    check(status == 200, f"/v1/status answered {status}")
    workers = json.loads(body)["workers"]
    check(len(workers) == 1, f"expected one stand-in GPU, got {workers}")
    return workers[0]


def metrics(d):
    status, _, body = d.get("/metrics")
    check(status == 200, f"/metrics answered {status}")
    return metrics_parse.parse(body.decode())


def sample(fams, name, **labels):
    check(name in fams, f"{name} is not in /metrics")
    for _, lab, v in fams[name]["samples"]:
        if all(lab.get(k) == v2 for k, v2 in labels.items()):
            return v
    raise Fail(f"no {name}{labels} in /metrics")


def call(d, method, url, body=None, timeout=300):
    c = UnixHTTPConnection(d.sock, timeout)
    try:
        c.request(method, url, body=body)
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def post(d, body, timeout=300):
    return call(d, "POST", "/v1/kernels", body, timeout)


def wait_state(d, state, timeout):
    deadline = time.monotonic() + timeout
    while True:
        w = gpu0(d)
        if w["state"] == state:
            return w
        check(time.monotonic() < deadline,
              f"GPU 0 not {state} within {timeout:.0f}s: {w}\n{d.log()}")
        time.sleep(0.1)


def stall(d, seconds):
    """Stops the daemon (its loop and every timer with it) while its workers run on."""
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)


def case_loop_stall(hidetd, tmp):
    # Heartbeats every 0.5 s, 3 missed = 1.5 s: a 2.5 s stall is well past it.
    # Every measurement takes 1.5 s on the stand-in, so the last stall catches one in flight.
    d = start(hidetd, tmp, "heartbeat = 500ms\nmax_restarts = 2\n",
              {"HIDETD_STANDIN_STATE_DIR": tmp, "HIDETD_STANDIN_FAULTS": "slow@1-100:1500"})
    try:
        w = wait_state(d, "ready", 30)
        pid = w["pid"]
        for i in range(3):
            stall(d, 2.5)
            time.sleep(2.0)  # longer than three heartbeat periods after the stall
            w = gpu0(d)
            check(w["pid"] == pid and w["restarts"] == 0 and w["state"] in ("ready", "busy"),
                  f"stall {i + 1}: the worker was killed or the GPU taken out of service: "
                  f"{w}\n{d.log()}")
        check(w["hung_kills"] == 0 and w["loop_stalls"] >= 3 and w["out_of_service"] is None,
              f"status after the stalls: {w}")
        fams = metrics(d)
        check(sample(fams, "hidetd_gpu_state", device="0", state="out_of_service") == 0,
              "hidetd_gpu_state says out of service")
        check(sample(fams, "hidetd_worker_hung_kills_total", device="0") == 0, "hung kills counted")
        check(sample(fams, "hidetd_worker_loop_stalls_total", device="0") >= 3,
              "loop stalls not counted")
        check(sample(fams, "hidetd_gpus_usable") == 1, "the GPU is not usable")
        check(re.search(r"event loop stalled for [0-9.]+ s", d.log()),
              f"the stall is not in the log:\n{d.log()}")

        # A stall while a measurement runs: its result waits in the socket; nothing fails.
        status, answer = post(d, json.dumps(dict(json.loads(MEASURE), wait=False)).encode())
        check(status == 202, f"wait:false answered {status} {answer}")
        url = answer["job"]["url"]
        deadline = time.monotonic() + 120
        while gpu0(d)["state"] != "busy":
            check(time.monotonic() < deadline, "the job's measurements never started")
            time.sleep(0.05)
        stall(d, 2.5)
        while True:
            status, answer = call(d, "GET", url)
            job = answer.get("job", {})
            if job.get("state") not in ("queued", "running"):
                break
            check(time.monotonic() < deadline, f"the job did not end: {answer}")
            time.sleep(0.1)
        check(job.get("state") == "done" and job.get("measured") is True
              and job["candidates"]["failed"] == 0, f"the job across a stall: {answer}")
        w = gpu0(d)
        check(w["pid"] == pid and w["restarts"] == 0 and w["hung_kills"] == 0,
              f"the stall during a measurement killed the worker: {w}\n{d.log()}")
        d.stop()
        print(f"loop-stall: 4 stalls of 2.5 s (heartbeat 0.5 s), one during a measurement: worker "
              f"{pid} kept, {w['loop_stalls']} stalls counted, the job measured "
              f"{job['candidates']['done']} candidates, none failed")
    finally:
        d.kill()


def case_out_of_service(hidetd, tmp):
    d = start(hidetd, tmp, "max_restarts = 2\n",
              {"HIDETD_STANDIN_STATE_DIR": tmp, "HIDETD_STANDIN_START_FAULTS": "crash@1-3"})
    try:
        w = wait_state(d, "out_of_service", 30)
        t_out = time.time()
        oos = w["out_of_service"]
        check(oos and "crashed" in oos["reason"] and "signal" in oos["reason"],
              f"out_of_service does not say why: {w}")
        check(abs(oos["since"] - t_out) < 30, f"out_of_service.since {oos['since']} vs now {t_out}")
        check(oos["next_probe"] and 4.0 <= oos["next_probe"] - oos["since"] <= 6.5,
              f"the first probe is not planned 5 s after: {oos}")
        check(w["out_of_service_count"] == 1 and w["probes"] == 0, f"counts: {w}")
        fams = metrics(d)
        check(sample(fams, "hidetd_gpu_state", device="0", state="out_of_service") == 1,
              "hidetd_gpu_state does not say out of service")
        check(sample(fams, "hidetd_gpu_out_of_service_total", device="0") == 1,
              "hidetd_gpu_out_of_service_total")
        check(abs(sample(fams, "hidetd_gpu_next_probe_timestamp_seconds", device="0")
                  - oos["next_probe"]) < 1, "hidetd_gpu_next_probe_timestamp_seconds")
        check(sample(fams, "hidetd_gpus_usable") == 0, "hidetd_gpus_usable")
        log = d.log()
        check(re.search(r"gpu 0: out of service after 2 consecutive failures \(worker crashed, "
                        r"signal 6.*next probe in 5\.0 s", log), f"no out-of-service line:\n{log}")
        check("gpu 0: worker: hidetd-worker-standin: planned crash at start" in log,
              f"the worker's stderr is not relayed:\n{log}")
        # Meanwhile measure falls back to the cost model, and says so.
        status, answer = post(d, MEASURE)
        check(status == 200 and answer.get("measured") is False and answer.get("warning"),
              f"tune measure out of service: {status} {answer}")

        w = wait_state(d, "ready", 40)
        back = time.time() - t_out
        check(13.0 <= back, f"back in service after {back:.1f} s: the backoff was not 5 s + 10 s")
        check(w["probes"] == 2 and w["out_of_service"] is None and w["out_of_service_count"] == 1,
              f"status after the return: {w}")
        log = d.log()
        check(re.search(r"gpu 0: probe 1 failed .*next probe in 10\.0 s", log),
              f"no failed-probe line:\n{log}")
        check(re.search(r"gpu 0: back in service: worker [0-9]+ answered probe 2", log),
              f"no back-in-service line:\n{log}")
        fams = metrics(d)
        check(sample(fams, "hidetd_gpu_probes_total", device="0") == 2, "hidetd_gpu_probes_total")
        check(sample(fams, "hidetd_gpu_state", device="0", state="out_of_service") == 0,
              "still out of service in /metrics")
        status, answer = post(d, MEASURE)
        check(status == 200 and answer.get("measured") is True,
              f"tune measure after the return: {status} {answer}")
        d.stop()
        print(f"out-of-service: out after 2 crashes, probe 1 failed, probe 2 brought it back "
              f"{back:.1f} s later, measured again")
    finally:
        d.kill()


CASES = {
    "loop-stall": case_loop_stall,
    "out-of-service": case_out_of_service,
}


def main(argv):
    return run_case(argv, CASES, __doc__, "hidetd-pool-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
