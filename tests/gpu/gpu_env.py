"""tests/gpu/gpu_env.py - what the GPU test scripts share about the machine they run on: the
environment for processes that load the project's shared libraries from a folder (--lib, as
bench/gpu_run.sh carries them to the GPU machine), the devices hidetd-worker --probe lists, and a
daemon started for a test.
"""
import json
import os
import subprocess
import tempfile
import time


def env_with_lib(lib):
    """os.environ, with `lib` (when given) first on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    if lib:
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def probe_devices(worker, env):
    """(the devices `worker --probe` lists, [] when it fails, and its stdout for a skip message)."""
    probe = subprocess.run([worker, "--probe"], capture_output=True, text=True, env=env)
    try:
        devices = json.loads(probe.stdout).get("devices", [])
    except ValueError:
        devices = []
    return devices, probe.stdout.strip()


def start_daemon(hidetd_bin, worker, lib, prefix="hidetd-gpu-"):
    """hidetd on a socket in a new temporary folder (its log beside it), with the worker (or
    none), once it answers /healthz: (the process, the socket's path)."""
    import hidetd
    d = tempfile.mkdtemp(prefix=prefix)
    sock = os.path.join(d, "hidetd.sock")
    log = open(os.path.join(d, "hidetd.log"), "w")
    p = subprocess.Popen([hidetd_bin, "--socket", sock, "--cache", os.path.join(d, "k.db"),
                          "--workers", worker or "none"], env=env_with_lib(lib), stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(sock):
            try:
                hidetd.Client(sock).get("/healthz")
                return p, sock
            except hidetd.HidetdError:
                pass
        time.sleep(0.05)
    p.kill()
    raise SystemExit("hidetd did not start: see " + log.name)


def daemon_arguments(ap):
    """Adds the arguments daemon_from_args reads: the hidetd binary and worker to start (what meson
    passes), --lib (a folder of the project's shared libraries) and --socket (a running daemon)."""
    ap.add_argument("hidetd", nargs="?")
    ap.add_argument("worker", nargs="?")
    ap.add_argument("--lib")
    ap.add_argument("--socket")


def daemon_from_args(ap, a, prefix):
    """The daemon a GPU script's arguments name: --socket (a running one, proc None), else the
    hidetd binary (and worker) started by start_daemon; (proc, socket path)."""
    if a.socket:
        return None, a.socket
    if a.hidetd:
        return start_daemon(a.hidetd, a.worker, a.lib, prefix)
    ap.error("give --socket or the hidetd binary")
