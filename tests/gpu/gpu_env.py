"""tests/gpu/gpu_env.py - what the GPU test scripts share about the machine they run on: the
environment for processes that load the project's shared libraries from a folder (--lib, as
bench/gpu_run.sh carries them to the GPU machine), and the devices hidetd-worker --probe lists.
"""
import json
import os
import subprocess


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
