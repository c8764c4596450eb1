#!/usr/bin/env python3
"""A reload must never weaken the daemon, and the cache must never serve what a request could not
have produced: attacked from the outside against the real hidetd.

    attack_reload.py HIDETD CASE

    CASE: auth-drop | passed-socket | restart-key | empty-file | fifo-start | fifo-reload |
          corrupt-rows | store-failure

auth-drop      hidetd serves TCP on 0.0.0.0 with a token; the file is rewritten to name a
               loopback `http` (a restart key, not applied) beside `tcp_auth = none`, and SIGHUP
               is sent: the reload is refused and a request without a token is still 401.
passed-socket  the same with a TCP socket on 0.0.0.0 passed by systemd-socket-activate (no
               `http` in the file): tcp_auth = none is refused at start and on reload.
restart-key    a reload that changes restart keys (http, socket_mode) and a live one (max_body):
               the live one applies, the restart keys are reported (log, the gauge
               hidetd_config_restart_pending) and ignored (the old port serves, the new is shut).
empty-file     the file emptied, then SIGHUP: a failed reload; the token and max_body stay.
fifo-start     --config names a FIFO: hidetd refuses to start, at once.
fifo-reload    the config path becomes a FIFO, then SIGHUP: refused without blocking the loop;
               /healthz answers and SIGTERM stops hidetd promptly.
corrupt-rows   rows of a database the real daemon filled are given impossible values with sqlite3
               (block_x 1e9, workspace_bytes 2^63-1, an unknown dtype): `hidetctl cache verify`
               names each, the daemon never serves them (GET by key is refused), puts each in
               quarantine, and tunes their ops again.
store-failure  the cache refuses every new kernel (an SQLite trigger standing in for a full
               disk): the job fails with cache_error and a warning names the op key.

Each case starts hidetd (--workers none) on a temporary socket, database and configuration. Exit
77 (skip) when HIDETD is not built.
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
sys.path.insert(0, HERE)
from ops_daemon import Daemon, Fail, check, request  # noqa: E402
from hardening import TOKEN, Skip, free_port, raw, run_case, status_of, error_code  # noqa: E402

STEP = 30.0  # seconds: bounded waits, generous for a loaded 2-core machine or a sanitizer build


def write_token(tmp):
    path = os.path.join(tmp, "token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, 0o600)
    return path


def tcp(port, path="/v1/status", token=TOKEN, method="GET", body=None, host="127.0.0.1"):
    """One request over TCP (Connection: close); returns (status, body)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    data = body or b""
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    finally:
        s.close()
    return status_of(out), out.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in out else b""


def metric(d, name):
    """The value of an unlabelled sample in /metrics (over the Unix socket), or None."""
    status, _, body = d.get("/metrics")
    check(status == 200, f"/metrics answered {status}")
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", body.decode(), re.M)
    return float(m.group(1)) if m else None


def reload_and_wait(d, timeout=STEP):
    """SIGHUP, then waits until the daemon counted the reload (applied or rejected); returns
    'applied' or 'rejected'."""
    ok0 = metric(d, "hidetd_config_reloads_total") or 0
    bad0 = metric(d, "hidetd_config_reload_failures_total") or 0
    d.signal(signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (metric(d, "hidetd_config_reload_failures_total") or 0) > bad0:
            return "rejected"
        if (metric(d, "hidetd_config_reloads_total") or 0) > ok0:
            return "applied"
        time.sleep(0.05)
    raise Fail(f"the reload was not counted within {timeout:.0f}s:\n{d.log()}")


def write_config(d, text):
    # A new file renamed into place, as an editor or a configuration manager does.
    tmp = d.config + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, d.config)


# ---- cases ---------------------------------------------------------------------------------

def case_auth_drop(hidetd, tmp):
    """SIGHUP must not take the token off a listener that is not on loopback."""
    port = free_port()
    token_file = write_token(tmp)
    conf = (f"[server]\nhttp = 0.0.0.0:{port}\ntoken_file = {token_file}\n"
            f"[log]\nlevel = info\n")
    d = Daemon(hidetd, tmp, config_text=conf)
    try:
        d.wait_healthy()
        st, body = tcp(port, token=None)
        check(st == 401, f"no token before the reload: {st} {body[:200]!r}")
        # The attack: a loopback address in the file (a restart key: not applied, the socket
        # stays on 0.0.0.0) makes tcp_auth = none look allowed.
        write_config(d, f"[server]\nhttp = 127.0.0.1:{port}\ntcp_auth = none\n"
                        f"[log]\nlevel = info\n")
        outcome = reload_and_wait(d)
        st, body = tcp(port, token=None)
        check(st == 401, f"after a reload with tcp_auth = none ({outcome}), a request without a "
                         f"token over the 0.0.0.0 listener answered {st}: {body[:200]!r}")
        check(outcome == "rejected", f"the reload was {outcome}, expected rejected:\n{d.log()}")
        check("0.0.0.0" in d.log() and "reload rejected" in d.log(),
              f"the rejection does not name the listener:\n{d.log()}")
        st, _ = tcp(port)
        check(st == 200, f"with the token after the refused reload: {st}")
        # The same with the non-loopback address in the file: refused as at start.
        write_config(d, f"[server]\nhttp = 0.0.0.0:{port}\ntcp_auth = none\n")
        check(reload_and_wait(d) == "rejected", "tcp_auth = none on 0.0.0.0 was reloaded")
        check(tcp(port, token=None)[0] == 401, "no token after the second attempt")
        d.stop()
        print("auth-drop: tcp_auth = none refused on reload for a 0.0.0.0 listener; "
              "tokenless requests stay 401")
    finally:
        d.kill()


def activated(hidetd, tmp, conf, port):
    """hidetd under systemd-socket-activate, given a Unix socket and a TCP socket on 0.0.0.0:port
    (it binds neither itself); started by the first connection."""
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        raise Skip("systemd-socket-activate is not installed")
    wrap = [activate, "-l", os.path.join(tmp, "activated.sock"), "-l", f"0.0.0.0:{port}"]
    for var in ("PATH", "HOME", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "ASAN_OPTIONS",
                "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        wrap += ["-E", var]
    d = Daemon(hidetd, tmp, config_text=conf, wrap=wrap, socket_name="activated.sock")
    deadline = time.monotonic() + 10
    while not os.path.exists(d.sock) and time.monotonic() < deadline:
        time.sleep(0.02)
    check(os.path.exists(d.sock), "systemd-socket-activate did not create its socket")
    return d


def case_passed_socket(hidetd, tmp):
    """A TCP socket systemd passes on 0.0.0.0 (no `http` in the file tells of it): tcp_auth =
    none is refused at start and on reload."""
    port = free_port()
    d = activated(hidetd, tmp, "[server]\ntcp_auth = none\n", port)
    try:
        # The first connection starts hidetd; it must refuse to serve it without a token.
        try:
            st, body = tcp(port, token=None)
        except (OSError, Fail):
            st, body = None, b""
        check(st != 200, f"a TCP socket passed on 0.0.0.0 was served without a token: {st} "
                         f"{body[:200]!r}")
        try:
            rc = d.proc.wait(STEP)
        except subprocess.TimeoutExpired:
            raise Fail(f"hidetd serves tcp_auth = none on a passed 0.0.0.0 socket:\n{d.log()}")
        check(rc != 0 and "not a loopback address" in d.log(),
              f"exit {rc}; the refusal does not say why:\n{d.log()}")
    finally:
        d.kill()
    tmp2 = os.path.join(tmp, "reload")
    os.mkdir(tmp2)
    port = free_port()
    token_file = write_token(tmp2)
    d = activated(hidetd, tmp2, f"[server]\ntoken_file = {token_file}\n", port)
    try:
        d.wait_healthy()
        check(tcp(port, token=None)[0] == 401, "no token on the passed socket before the reload")
        write_config(d, "[server]\ntcp_auth = none\n")
        outcome = reload_and_wait(d)
        st, body = tcp(port, token=None)
        check(st == 401, f"after a reload to tcp_auth = none ({outcome}) the passed 0.0.0.0 socket "
                         f"answered {st} without a token: {body[:200]!r}")
        check(outcome == "rejected", f"the reload was {outcome}")
        d.stop()
        print("passed-socket: tcp_auth = none on a passed 0.0.0.0 socket refused at start and "
              "on reload")
    finally:
        d.kill()


def case_restart_key(hidetd, tmp):
    """Restart keys are reported and ignored; live keys beside them apply."""
    port, port2 = free_port(), free_port()
    token_file = write_token(tmp)
    base = f"[server]\ntoken_file = {token_file}\n"
    d = Daemon(hidetd, tmp, config_text=base + f"http = 127.0.0.1:{port}\nmax_body = 1MiB\n")
    try:
        d.wait_healthy()
        mode0 = os.stat(d.sock).st_mode & 0o777
        write_config(d, base + f"http = 127.0.0.1:{port2}\nsocket_mode = 0600\nmax_body = 4KiB\n")
        before = len(d.log())
        check(reload_and_wait(d) == "applied", f"the reload was rejected:\n{d.log()}")
        # The live key: a 5 KiB body is now too large.
        st, body = tcp(port, "/v1/kernels", method="POST", body=b" " * 5000)
        check(st == 413 and error_code(body) == "body_too_large",
              f"max_body = 4KiB not applied: {st} {body[:200]!r}")
        # The restart keys: reported...
        tail = d.log()[before:]
        check("server.http" in tail and "server.socket_mode" in tail and "restart" in tail,
              f"the restart keys are not reported in the log:\n{tail}")
        pending = metric(d, "hidetd_config_restart_pending")
        check(pending == 2, f"hidetd_config_restart_pending is {pending}, expected 2")
        # ...and ignored: the old port serves, the new one is not opened, the mode stays.
        check(tcp(port)[0] == 200, "the running TCP listener stopped serving")
        try:
            tcp(port2)
            raise Fail(f"port {port2} from the file was opened without a restart")
        except ConnectionRefusedError:
            pass
        check(os.stat(d.sock).st_mode & 0o777 == mode0, "socket_mode changed without a restart")
        # A reload with the restart keys back as they run: nothing pending any more.
        write_config(d, base + f"http = 127.0.0.1:{port}\nmax_body = 4KiB\n")
        check(reload_and_wait(d) == "applied", "the second reload was rejected")
        check(metric(d, "hidetd_config_restart_pending") == 0, "restart keys still pending")
        d.stop()
        print("restart-key: max_body applied; server.http and server.socket_mode reported "
              "(log, gauge 2) and ignored")
    finally:
        d.kill()


def case_empty_file(hidetd, tmp):
    """An emptied file is a failed reload: the running configuration (token, limits) stays."""
    port = free_port()
    token_file = write_token(tmp)
    d = Daemon(hidetd, tmp, config_text=f"[server]\nhttp = 127.0.0.1:{port}\n"
                                        f"token_file = {token_file}\nmax_body = 4KiB\n")
    try:
        d.wait_healthy()
        for text in ("", "\n  \n"):
            write_config(d, text)
            before = len(d.log())
            outcome = reload_and_wait(d)
            check(outcome == "rejected", f"an empty file ({text!r}) was {outcome}")
            check("empty" in d.log()[before:], f"the log does not say why:\n{d.log()[before:]}")
            check(tcp(port)[0] == 200, "the token stopped working after an empty reload")
            check(tcp(port, token=None)[0] == 401, "no token needed after an empty reload")
            st, body = tcp(port, "/v1/kernels", method="POST", body=b" " * 5000)
            check(st == 413, f"max_body went back to its default after an empty reload: {st}")
        check(request(d.sock, "GET", "/healthz")[0] == 200, "not serving")
        d.stop()
        print("empty-file: refused twice (empty, white space); token and max_body kept")
    finally:
        d.kill()


def case_fifo_start(hidetd, tmp):
    """A FIFO as the configuration file: hidetd refuses to start, without waiting on it."""
    fifo = os.path.join(tmp, "hidetd.conf")
    os.mkfifo(fifo)
    log = open(os.path.join(tmp, "stderr.log"), "wb")
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp, XDG_CACHE_HOME=tmp)
    for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID"):
        env.pop(k, None)
    p = subprocess.Popen([hidetd, "--socket", os.path.join(tmp, "hidetd.sock"), "--cache",
                          os.path.join(tmp, "kernels.db"), "--config", fifo, "--workers", "none"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=tmp)
    try:
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            raise Fail("hidetd blocked on a FIFO given as --config (still running after 10s)")
        text = open(os.path.join(tmp, "stderr.log"), errors="replace").read()
        check(rc != 0, f"hidetd started with a FIFO as its configuration (exit {rc})")
        check("regular file" in text, f"the refusal does not say why:\n{text}")
        print(f"fifo-start: refused at once (exit {rc})")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()


def case_fifo_reload(hidetd, tmp):
    """The config path turned into a FIFO, then SIGHUP: refused, the loop never blocks."""
    d = Daemon(hidetd, tmp, config_text="[log]\nlevel = info\n")
    try:
        d.wait_healthy()
        os.unlink(d.config)
        os.mkfifo(d.config)
        d.signal(signal.SIGHUP)
        t0 = time.monotonic()
        try:
            st = request(d.sock, "GET", "/healthz", timeout=5)[0]
        except OSError as e:
            raise Fail(f"/healthz not answered after SIGHUP with a FIFO as the config ({e}): "
                       f"the loop is blocked")
        check(st == 200, f"/healthz after the SIGHUP: {st}")
        deadline = time.monotonic() + STEP
        while (metric(d, "hidetd_config_reload_failures_total") or 0) < 1:
            check(time.monotonic() < deadline, f"the reload was not refused:\n{d.log()}")
            time.sleep(0.05)
        check("regular file" in d.log(), f"the refusal does not say why:\n{d.log()}")
        t1 = time.monotonic()
        d.signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise Fail("SIGTERM ignored after a SIGHUP with a FIFO as the config")
        check(rc == 0, f"exit {rc} after SIGTERM:\n{d.log()}")
        d.stop()
        print(f"fifo-reload: /healthz answered {1000 * (t1 - t0):.0f} ms after the SIGHUP; "
              f"SIGTERM exited in {time.monotonic() - t1:.2f}s")
    finally:
        d.kill()


def kernel_body(i):
    # Distinct small elementwise ops (one kernel each, quick to compile under tune "none").
    return json.dumps({"op": "elementwise", "inputs": [{"shape": [64, 32 + 32 * i], "dtype": "f16"}],
                       "attrs": {"ops": [{"op": "relu"}]}, "arch": "sm_90", "tune": "none"}).encode()


def post(d, body):
    from hidetd_unix import UnixHTTPConnection
    c = UnixHTTPConnection(d.sock, 300)
    try:
        c.request("POST", "/v1/kernels", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def hidetctl(hidetd):
    ctl = os.environ.get("HIDETCTL_BIN") or os.path.join(os.path.dirname(hidetd), "..", "clients",
                                                         "c", "hidetctl")
    if not os.access(ctl, os.X_OK):
        raise Skip(f"hidetctl is not built ({ctl})")
    return ctl


def launch_sane(answer):
    for k in answer["kernels"]:
        b = k["block"]
        if max(b) > 1024 or b[0] * b[1] * b[2] > 1024 or max(k["grid"]) > 2**31 - 1:
            return False
    out = answer.get("output")
    return answer.get("workspace_bytes", 0) < 2**41 and (out is None or out["dtype"] in
                                                         ("f16", "bf16", "f32"))


def case_corrupt_rows(hidetd, tmp):
    """Impossible stored values are caught by verify, never served, quarantined, tuned again."""
    ctl = hidetctl(hidetd)
    n = 4
    d = Daemon(hidetd, tmp)
    keys, op_keys = [], []
    try:
        d.wait_healthy()
        for i in range(n):
            st, body = post(d, kernel_body(i))
            check(st == 200, f"kernel {i}: {st} {body[:300]!r}")
            a = json.loads(body)
            keys.append(a["key"])
            op_keys.append(a["op_key"])
        d.stop()
    finally:
        d.kill()
    db = os.path.join(tmp, "kernels.db")
    # A copy of the real database, damaged behind the daemon's back; the last record stays good.
    bad_db = os.path.join(tmp, "bad.db")
    src = sqlite3.connect(db)
    dst = sqlite3.connect(bad_db)
    src.backup(dst)
    src.close()
    damage = [
        ("UPDATE launch_kernels SET block_x = 1000000000 WHERE artifact_key = ?", "block"),
        ("UPDATE artifacts SET workspace_bytes = 9223372036854775807 WHERE key = ?", "workspace"),
        ("UPDATE artifacts SET output_dtype = 'f8' WHERE key = ?", "dtype"),
    ]
    for (sql, _), key in zip(damage, keys):
        dst.execute(sql, (key,))
    dst.commit()
    dst.close()
    out = subprocess.run([ctl, "--cache", bad_db, "cache", "verify"], capture_output=True,
                         text=True, timeout=60)
    check(out.returncode != 0, f"verify passed impossible values:\n{out.stdout}{out.stderr}")
    for (_, word), key in zip(damage, keys):
        line = next((l for l in out.stdout.splitlines() if key in l), "")
        check(line.startswith("BAD") and word in line,
              f"verify does not flag {key} ({word}):\n{out.stdout}")
    check(keys[-1] not in out.stdout, f"verify flags the good record:\n{out.stdout}")

    tmp2 = os.path.join(tmp, "run2")
    os.mkdir(tmp2)
    shutil.copy(bad_db, os.path.join(tmp2, "kernels.db"))
    d = Daemon(hidetd, tmp2)
    try:
        d.wait_healthy()
        # Asked by key: refused, never answered with the impossible launch.
        for (_, word), key in zip(damage, keys):
            st, _, body = d.get("/v1/kernels/" + key)
            check(st != 200, f"GET /v1/kernels/{key} ({word}) served the record: {body[:300]!r}")
            check(error_code(body) == "integrity_error", f"{word}: {st} {body[:200]!r}")
        check(d.get("/v1/kernels/" + keys[-1])[0] == 200, "the good record is not served")
        q = metric(d, "hidetd_cache_quarantined_total")
        check(q == len(damage), f"hidetd_cache_quarantined_total {q}, expected {len(damage)}")
        out = subprocess.run([ctl, "--cache", os.path.join(tmp2, "kernels.db"), "cache", "verify"],
                             capture_output=True, text=True, timeout=60)
        for key in keys[:len(damage)]:
            check(any(l.startswith("QUARANTINED") and key in l for l in out.stdout.splitlines()),
                  f"verify does not list {key} as quarantined:\n{out.stdout}")
        # Asked by op: tuned again (cached false), a sane launch, and then a hit.
        for i in range(len(damage)):
            st, body = post(d, kernel_body(i))
            check(st == 200, f"op {i} after the damage: {st} {body[:300]!r}")
            a = json.loads(body)
            check(a["cached"] is False and launch_sane(a), f"op {i}: served {body[:400]!r}")
        d.stop()
        log = d.log()
        check(log.count("put in quarantine") == len(damage), f"quarantine warnings:\n{log}")
        out = subprocess.run([ctl, "--cache", os.path.join(tmp2, "kernels.db"), "cache", "verify"],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0 and "all good" in out.stdout,
              f"the re-tuned records did not heal:\n{out.stdout}{out.stderr}")
        print(f"corrupt-rows: verify flagged {len(damage)} records; the daemon refused them by "
              f"key, quarantined {int(q)}, tuned their ops again")
    finally:
        d.kill()


def case_store_failure(hidetd, tmp):
    """A kernel the cache refuses to store: the job fails (cache_error) and a warning says so,
    with the op key."""
    d = Daemon(hidetd, tmp)
    try:
        d.wait_healthy()
        db = sqlite3.connect(os.path.join(tmp, "kernels.db"), timeout=10)
        db.execute("CREATE TRIGGER attack_full BEFORE INSERT ON artifacts BEGIN "
                   "SELECT RAISE(ABORT, 'database or disk is full'); END")
        db.commit()
        st, body = post(d, kernel_body(7))
        check(st == 500 and error_code(body) == "cache_error",
              f"a kernel the cache refused: {st} {body[:300]!r}")
        db.execute("DROP TRIGGER attack_full")
        db.commit()
        db.close()
        st, body = post(d, kernel_body(7))
        check(st == 200, f"after the disk came back: {st} {body[:300]!r}")
        op_key = json.loads(body)["op_key"]
        deadline = time.monotonic() + 5
        while op_key not in d.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [l for l in d.log().splitlines() if op_key in l and "cache_error" in l]
        check(lines and " warn" in lines[0].lower() and "full" in lines[0],
              f"no warning naming op {op_key}:\n{d.log()}")
        d.stop()
        print(f"store-failure: 500 cache_error; logged: {lines[0].strip()[:160]}")
    finally:
        d.kill()


CASES = {
    "auth-drop": case_auth_drop,
    "passed-socket": case_passed_socket,
    "restart-key": case_restart_key,
    "empty-file": case_empty_file,
    "fifo-start": case_fifo_start,
    "fifo-reload": case_fifo_reload,
    "corrupt-rows": case_corrupt_rows,
    "store-failure": case_store_failure,
}


def main(argv):
    return run_case(argv, CASES, __doc__, "hidetd-reload-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
