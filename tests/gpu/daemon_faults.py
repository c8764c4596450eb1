#!/usr/bin/env python3
"""tests/gpu/daemon_faults.py - a planted faulting and a planted hanging candidate, on a real GPU,
through the real daemon: the job still ends with a correct, measured kernel, both failures are
recorded, the worker was restarted, and hidetd keeps serving.

    daemon_faults.py HIDETD HIDETD_WORKER [--lib DIR] [--seccomp SECCOMP_EXEC LIST]

With --seccomp the daemon (and so its workers and NVRTC) runs under the system-call filter of
deploy/hidetd.service (tests/gpu/seccomp_exec.c), which shows the unit's filter lets the CUDA
driver and NVRTC work.

The real hidetd-worker plants the kernels itself when HIDETD_WORKER_PLANT is set (see
gpu_workers/worker_main.c): request 2 writes far out of bounds (illegal address), request 4
spins forever (launch timeout). Exits 77 without a GPU.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from hidetd_unix import call  # noqa: E402
from gpu_env import env_with_lib, probe_devices  # noqa: E402


failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, flush=True)


def main():
    hidetd, worker = sys.argv[1], sys.argv[2]
    env = env_with_lib(sys.argv[sys.argv.index("--lib") + 1] if "--lib" in sys.argv else None)
    devices, probe_out = probe_devices(worker, env)
    if not devices:
        print("no CUDA GPU/driver: skipped (%s)" % probe_out[:200])
        return 77

    tmp = tempfile.mkdtemp(prefix="hidetd-faults-")
    sock, conf = os.path.join(tmp, "hidetd.sock"), os.path.join(tmp, "hidetd.conf")
    with open(conf, "w") as f:
        f.write("[workers]\nlaunch_timeout = 1s\n")
    env["HIDETD_WORKER_PLANT"] = "fault@2,hang@4"
    env["HIDETD_WORKER_PLANT_STATE_DIR"] = tmp
    log = open(os.path.join(tmp, "hidetd.log"), "w")
    wrap = []
    if "--seccomp" in sys.argv:
        i = sys.argv.index("--seccomp")
        wrap = sys.argv[i + 1:i + 3]
    d = subprocess.Popen(wrap + [hidetd, "--socket", sock, "--cache", os.path.join(tmp, "kernels.db"),
                          "--config", conf, "--workers", worker], env=env, stderr=log)
    for _ in range(200):
        try:
            if call(sock, "GET", "/healthz")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)

    req = {"op": "matmul", "inputs": [{"shape": [512, 384], "dtype": "f16"},
                                      {"shape": [384, 640], "dtype": "f16"}],
           "tune": "measure", "wait": False, "budget": {"candidates": 8}}
    status, ans = call(sock, "POST", "/v1/kernels", req)
    check(status == 202, "wait:false answered %s %s" % (status, ans))
    job = ans.get("job", {}) if isinstance(ans, dict) else {}
    for _ in range(1200):
        st, j = call(sock, "GET", job.get("url", "/v1/jobs/0"))
        job = j.get("job", {}) if isinstance(j, dict) else {}
        if job.get("state") not in ("queued", "running"):
            break
        # The daemon answers while a worker faults, hangs and restarts.
        check(call(sock, "GET", "/healthz")[0] == 200, "healthz during the job")
        time.sleep(0.1)
    print("job:", json.dumps(job), flush=True)
    check(job.get("state") == "done", "job ended %s" % job.get("state"))
    check(job.get("candidates", {}).get("failed", 0) >= 2, "the fault and the hang are recorded")
    check(job.get("measured") is True, "result measured")
    if job.get("result"):
        st, kset = call(sock, "GET", job["result"])
        check(st == 200 and kset.get("measured"), "result kernel set %s" % st)

    # On a machine with several GPUs the fault and the hang may hit different workers.
    # The other worker may still be restarting when the job ends: give it ten seconds.
    for _ in range(100):
        st, status_doc = call(sock, "GET", "/v1/status")
        ws = status_doc.get("workers", [])
        if ws and all(w.get("state") in ("ready", "busy") for w in ws):
            break
        time.sleep(0.1)
    print("workers:", json.dumps(ws), flush=True)
    check(sum(w.get("restarts", 0) for w in ws) >= 2, "workers restarted after the fault and the hang")
    check(ws and all(w.get("state") in ("ready", "busy") for w in ws), "workers back in service")

    # The daemon and the restarted worker go on serving other work.
    st, k = call(sock, "POST", "/v1/kernels", {"op": "softmax", "inputs": [{"shape": [256, 1000], "dtype": "f16"}],
                                               "tune": "measure", "budget": {"candidates": 4}})
    check(st == 200 and k.get("measured"), "a later measured request: %s" % st)

    d.send_signal(signal.SIGTERM)
    check(d.wait(timeout=60) == 0, "hidetd exit status")
    log.close()
    with open(os.path.join(tmp, "hidetd.log")) as f:
        text = f.read()
    print("".join(l + "\n" for l in text.splitlines() if "worker" in l.lower())[-2000:], flush=True)
    print("daemon_faults:", "all checks passed" if not failures else "%d check(s) failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
