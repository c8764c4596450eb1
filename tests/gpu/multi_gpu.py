#!/usr/bin/env python3
"""tests/gpu/multi_gpu.py - the worker pool on a machine with several GPUs, through the real
daemon and the real hidetd-worker:

  pool     /v1/status lists every GPU the probe found, each with its own worker process;
  batch    distinct `tune: measure` GEMM jobs submitted at once (`wait: false`) are measured on
           every GPU at the same time; the batch's wall time is compared with the same batch on
           one GPU (the daemon restarted with CUDA_VISIBLE_DEVICES set to the first one);
  fault    a planted illegal-address kernel (HIDETD_WORKER_PLANT) takes one GPU's worker down:
           that worker restarts, the others go on measuring, every job ends done;
  fairness every job was measured on GPUs of one model only, and a job timed on several GPUs
           timed the best of each again on one GPU before choosing (final_round);
  correct  every chosen kernel, launched through the Python runtime on every GPU, matches
           torch.matmul (skipped with a message without PyTorch).

    multi_gpu.py HIDETD HIDETD_WORKER [--lib DIR] [--out FILE.json] [--logs DIR] [--jobs N]
                 [--budget N]

--logs DIR keeps each daemon's log there (all.log, one.log, fault.log).

Exits 77 (skipped) with fewer than two GPUs. The speed-up is a benchmark figure: it is printed and
written to --out with its target (>= 1.7 on two GPUs), never a failed check.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from hidetd_unix import call  # noqa: E402
from gpu_env import env_with_lib, probe_devices  # noqa: E402

SPEEDUP_TARGET_2GPU = 1.7
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)


class Daemon:
    """hidetd with real workers in a fresh folder (socket, cache, log)."""

    def __init__(self, hidetd, worker, env, name, extra_env=None):
        self.dir = tempfile.mkdtemp(prefix="hidetd-multi-%s-" % name)
        self.sock = os.path.join(self.dir, "hidetd.sock")
        self.log_path = os.path.join(self.dir, "hidetd.log")
        env = dict(env)
        env.update(extra_env or {})
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen([hidetd, "--socket", self.sock, "--cache",
                                   os.path.join(self.dir, "kernels.db"), "--workers", worker,
                                   "--log-level", "info"], env=env, stderr=self.log)
        for _ in range(300):
            try:
                if call(self.sock, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        # Workers report in after the probe: wait until none is starting any more.
        for _ in range(300):
            ws = self.workers()
            if ws and all(w.get("state") in ("ready", "busy") for w in ws):
                break
            time.sleep(0.1)

    def workers(self):
        try:
            st, doc = call(self.sock, "GET", "/v1/status")
        except OSError:
            return []
        return doc.get("workers", []) if st == 200 and isinstance(doc, dict) else []

    def metrics(self, names):
        """The values of the /metrics series whose names start with one of `names`."""
        st, text = call(self.sock, "GET", "/metrics")
        out = {}
        for line in (text.decode() if isinstance(text, bytes) else "").splitlines():
            if line.startswith(tuple(names)):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def stop(self, keep_log_as=None):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=90)
        self.log.close()
        if keep_log_as:
            shutil.copy(self.log_path, keep_log_as)
        return rc


class Sampler(threading.Thread):
    """Reads /v1/status every `period` seconds: worker states, restarts and measured counts."""

    def __init__(self, sock, period=0.05):
        super().__init__(daemon=True)
        self.sock, self.period = sock, period
        self.samples = []  # (t, [(index, state, measured, restarts)])
        self.halt = threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self.halt.is_set():
            try:
                st, doc = call(self.sock, "GET", "/v1/status")
                if st == 200:
                    ws = [(w["index"], w["state"], w["measured"], w["restarts"])
                          for w in doc.get("workers", [])]
                    self.samples.append((time.monotonic() - t0, ws))
            except (OSError, ValueError, KeyError):
                pass
            self.halt.wait(self.period)

    def busy_overlap(self):
        """Of the samples where some worker was busy, the share where every worker was."""
        any_busy = [ws for _, ws in self.samples if any(w[1] == "busy" for w in ws)]
        all_busy = [ws for ws in any_busy if all(w[1] == "busy" for w in ws)]
        return (len(all_busy) / len(any_busy)) if any_busy else 0.0


def gemm_requests(n, budget):
    """n distinct fp16 GEMMs large enough that timing a candidate keeps a GPU busy for tens of ms."""
    shapes = [(4096, 4096, 4096), (4096, 4096, 2048), (2048, 8192, 4096), (8192, 2048, 4096),
              (4096, 3072, 4096), (3072, 4096, 4096), (4096, 4096, 3072), (6144, 4096, 2048),
              (2048, 4096, 8192), (4096, 6144, 2048), (5120, 4096, 2048), (4096, 5120, 2048)]
    out = []
    for i in range(n):
        m, nn, k = shapes[i % len(shapes)]
        if i >= len(shapes):
            k += 64 * (i // len(shapes))
        out.append({"op": "matmul", "inputs": [{"shape": [m, k], "dtype": "f16"},
                                               {"shape": [k, nn], "dtype": "f16"}],
                    "tune": "measure", "wait": False, "budget": {"candidates": budget}})
    return out


def run_batch(d, reqs, what):
    """Submits every request at once, waits for every job; returns (wall_s, jobs, sampler)."""
    before = {w["index"]: w["measured"] for w in d.workers()}
    sampler = Sampler(d.sock)
    sampler.start()
    t0 = time.monotonic()
    jobs = []
    for r in reqs:
        st, ans = call(d.sock, "POST", "/v1/kernels", r)
        check(st == 202, "%s: wait:false answered %s" % (what, st))
        jobs.append(ans.get("job", {}) if isinstance(ans, dict) else {})
    pending = {j.get("url") for j in jobs if j.get("url")}
    ended = {}
    deadline = t0 + 900
    while pending and time.monotonic() < deadline:
        for url in list(pending):
            st, doc = call(d.sock, "GET", url)
            job = doc.get("job", {}) if isinstance(doc, dict) else {}
            if job.get("state") not in ("queued", "running"):
                ended[url] = job
                pending.discard(url)
        time.sleep(0.05)
    wall = time.monotonic() - t0
    sampler.halt.set()
    sampler.join()
    after = {w["index"]: w["measured"] for w in d.workers()}
    per_worker = {i: after.get(i, 0) - before.get(i, 0) for i in after}
    done = [ended.get(j.get("url"), {}) for j in jobs]
    check(not pending, "%s: every job ended within 900 s" % what)
    check(all(j.get("state") == "done" and j.get("measured") for j in done),
          "%s: every job done and measured (%s)" % (what, [j.get("state") for j in done]))
    return wall, done, per_worker, sampler


def verify_kernels(sock, reqs, devices, what):
    """Each request's kernel (a cache hit now) against torch.matmul on every GPU."""
    try:
        import torch
        import hidetd
    except ImportError as e:
        print("%s: kernels not re-checked with PyTorch (%s)" % (what, e))
        return
    client = hidetd.Client(sock)
    worst = 0.0
    for r in reqs:
        req = dict(r)
        req["wait"] = True
        k = client.kernel(req)
        (m, kk), (_, n) = r["inputs"][0]["shape"], r["inputs"][1]["shape"]
        for dev in range(devices):
            with torch.cuda.device(dev):
                g = torch.Generator(device="cuda:%d" % dev).manual_seed(m * 7 + n)
                a = torch.rand(m, kk, device="cuda:%d" % dev, generator=g, dtype=torch.float16) - 0.5
                b = torch.rand(kk, n, device="cuda:%d" % dev, generator=g, dtype=torch.float16) - 0.5
                out = k(a, b)
                torch.cuda.synchronize(dev)
                ref = a.float() @ b.float()
                err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                worst = max(worst, err)
                check(err < 2e-2, "%s: %dx%dx%d on GPU %d matches torch (max rel err %.2e)"
                      % (what, m, n, kk, dev, err))
    client.close()
    print("%s: worst relative error %.2e" % (what, worst))


def main():
    args = sys.argv[1:]
    hidetd, worker = args[0], args[1]

    def opt(name, default):
        return args[args.index(name) + 1] if name in args else default

    n_jobs, budget = int(opt("--jobs", "8")), int(opt("--budget", "32"))
    out_path = opt("--out", None)
    logs = opt("--logs", None)

    def log_as(name):
        return os.path.join(logs, name + ".log") if logs else None
    env = env_with_lib(opt("--lib", None))
    devices, probe_out = probe_devices(worker, env)
    if len(devices) < 2:
        print("needs at least two CUDA GPUs, found %d: skipped (%s)" % (len(devices), probe_out[:200]))
        return 77
    n_dev = len(devices)
    report = {"devices": devices, "jobs": n_jobs, "budget_candidates": budget}
    print("GPUs:", ", ".join("%d %s" % (d.get("index", i), d.get("name")) for i, d in enumerate(devices)))

    # --- pool: one worker per GPU ---
    d = Daemon(hidetd, worker, env, "all")
    ws = d.workers()
    print("workers:", json.dumps(ws), flush=True)
    check(len(ws) == n_dev, "/v1/status lists %d workers for %d GPUs" % (len(ws), n_dev))
    check(sorted(w["index"] for w in ws) == sorted(x.get("index", i) for i, x in enumerate(devices)),
          "every probed GPU has its worker")
    pids = [w.get("pid") for w in ws]
    check(all(pids) and len(set(pids)) == n_dev, "each worker is its own process (pids %s)" % pids)
    for w in ws:
        try:
            with open("/proc/%d/cmdline" % w["pid"], "rb") as f:
                argv = f.read().split(b"\0")
            check(b"--device" in argv and argv[argv.index(b"--device") + 1] == str(w["index"]).encode(),
                  "worker pid %d runs --device %d" % (w["pid"], w["index"]))
        except (OSError, KeyError, TypeError, ValueError, IndexError) as e:
            check(False, "worker %s's command line: %s" % (w.get("index"), e))
    models = {(w["name"], w["sm_count"], w["driver_version"] // 1000) for w in ws}

    # --- batch on every GPU ---
    reqs = gemm_requests(n_jobs, budget)
    wall_n, jobs_n, per_worker, sampler = run_batch(d, reqs, "batch on %d GPUs" % n_dev)
    overlap = sampler.busy_overlap()
    print("batch on %d GPUs: %.2f s; candidates measured per worker %s; all workers busy in %.0f%% "
          "of the busy samples" % (n_dev, wall_n, per_worker, 100 * overlap), flush=True)
    check(all(v > 0 for v in per_worker.values()), "every worker measured candidates of the batch")
    check(overlap > 0.5, "the workers measured at the same time (%.0f%% of busy samples)" % (100 * overlap))
    busy_s = {w["index"]: w.get("busy_s") for w in d.workers()}
    costs = d.metrics(["hidetd_compile_seconds_total", "hidetd_candidates_compiled_total",
                       "hidetd_gpu_busy_seconds_total"])
    print("batch on %d GPUs: GPU busy %s s, %s" % (n_dev, busy_s, costs), flush=True)

    # --- fairness: one model per job, close candidates re-timed on one GPU ---
    rounds = 0
    model_of = {w["index"]: (w["name"], w["sm_count"], w["driver_version"] // 1000) for w in ws}
    for j in jobs_n:
        on = j.get("measured_on", [])
        fr = j.get("final_round")
        check(len(on) >= 1 and len({model_of.get(i) for i in on}) == 1,
              "job %s was measured on GPUs of one model (%s)" % (j.get("id"), on))
        check(len(on) < 2 or fr, "job %s, measured on GPUs %s, had a final round" % (j.get("id"), on))
        if fr:
            rounds += 1
            check(fr.get("device") in on and fr.get("candidates", 0) >= 2,
                  "job %s: final round of %s candidates on GPU %s" % (j.get("id"), fr.get("candidates"),
                                                                      fr.get("device")))
    print("jobs measured on several GPUs: %d of %d; final rounds: %d"
          % (sum(len(j.get("measured_on", [])) > 1 for j in jobs_n), len(jobs_n), rounds))
    verify_kernels(d.sock, reqs, n_dev, "batch kernels")
    check(d.stop(log_as("all")) == 0, "hidetd exit status (all GPUs)")

    # --- the same batch on one GPU ---
    first = str(devices[0].get("index", 0))
    d1 = Daemon(hidetd, worker, env, "one", {"CUDA_VISIBLE_DEVICES": first})
    check(len(d1.workers()) == 1, "with CUDA_VISIBLE_DEVICES=%s one worker" % first)
    wall_1, jobs_1, per_worker_1, _ = run_batch(d1, reqs, "batch on 1 GPU")
    busy_s_1 = {w["index"]: w.get("busy_s") for w in d1.workers()}
    costs_1 = d1.metrics(["hidetd_compile_seconds_total", "hidetd_candidates_compiled_total"])
    print("batch on 1 GPU: GPU busy %s s, %s" % (busy_s_1, costs_1), flush=True)
    check(d1.stop(log_as("one")) == 0, "hidetd exit status (one GPU)")
    speedup = wall_1 / wall_n if wall_n > 0 else 0
    target = SPEEDUP_TARGET_2GPU if n_dev == 2 else None
    print("batch: %.2f s on 1 GPU, %.2f s on %d GPUs: %.2fx%s" % (
        wall_1, wall_n, n_dev, speedup,
        " (target >= %.1fx: %s)" % (target, "met" if speedup >= target else "MISSED") if target else ""),
        flush=True)

    # --- fault on one GPU's worker ---
    state = tempfile.mkdtemp(prefix="hidetd-multi-plant-")
    df = Daemon(hidetd, worker, env, "fault",
                {"HIDETD_WORKER_PLANT": "fault@6", "HIDETD_WORKER_PLANT_STATE_DIR": state})
    freqs = gemm_requests(n_jobs + 4, 12)[n_jobs:]  # shapes the batches did not tune
    wall_f, jobs_f, per_worker_f, sf = run_batch(df, freqs, "fault")
    wsf = df.workers()
    print("fault: workers after the batch:", json.dumps(wsf), flush=True)
    restarted = [w["index"] for w in wsf if w["restarts"] > 0]
    check(len(restarted) == 1, "exactly one worker restarted (%s)" % restarted)
    check(all(w["state"] in ("ready", "busy") for w in wsf), "every worker back in service")
    check(sum(j.get("candidates", {}).get("failed", 0) for j in jobs_f) >= 1,
          "the planted fault is recorded as a failed candidate")
    if len(restarted) == 1:
        bad = restarted[0]
        # From the first sample that shows the restart: did the other workers go on measuring?
        t_fault = next((t for t, ws in sf.samples for w in ws
                        if w[0] == bad and (w[3] > 0 or w[1] not in ("ready", "busy"))), None)
        down = [t for t, ws in sf.samples for w in ws if w[0] == bad and w[1] not in ("ready", "busy")]

        def measured_at(t, idx):
            return next((w[2] for tt, ws in sf.samples if tt >= t for w in ws if w[0] == idx), None)

        for w in wsf:
            if w["index"] == bad or t_fault is None:
                continue
            at_fault = measured_at(t_fault, w["index"])
            check(at_fault is not None and w["measured"] > at_fault,
                  "GPU %d measured on after GPU %d's fault (%s -> %d)" % (w["index"], bad, at_fault, w["measured"]))
            if down:
                during = measured_at(down[-1], w["index"]) - measured_at(down[0], w["index"])
                print("fault: GPU %d was down for %.2f s, GPU %d measured %d candidates meanwhile"
                      % (bad, down[-1] - down[0], w["index"], during))
    verify_kernels(df.sock, freqs, n_dev, "fault kernels")
    check(df.stop(log_as("fault")) == 0, "hidetd exit status (fault)")

    report.update({
        "models": sorted(list(m) for m in models),
        "batch": {"gpus": n_dev, "wall_s": round(wall_n, 3), "measured_per_worker": per_worker,
                  "busy_s": busy_s, "all_busy_share": round(overlap, 3), "costs": costs,
                  "jobs": [{k: j.get(k) for k in ("id", "elapsed_s", "candidates", "best_us",
                                                  "measured_on", "final_round", "best_schedule")}
                           for j in jobs_n]},
        "batch_one_gpu": {"wall_s": round(wall_1, 3), "measured_per_worker": per_worker_1,
                          "busy_s": busy_s_1, "costs": costs_1},
        "speedup": round(speedup, 3), "speedup_target": target,
        "speedup_met": (speedup >= target) if target else None,
        "fault": {"wall_s": round(wall_f, 3), "workers": wsf,
                  "jobs": [{k: j.get(k) for k in ("id", "state", "candidates", "measured_on")}
                           for j in jobs_f]},
        "checks_failed": failures,
    })
    if out_path:
        with open(out_path, "w") as f:
            json.dump(report, f, indent=1)
    print("multi_gpu:", "all checks passed" if not failures else "%d check(s) failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
