#!/usr/bin/env python3
"""End-to-end ops tests: the real hidetd binary under the conditions systemd creates.

    ops_daemon.py HIDETD CASE      CASE: notify | socket-activation | reload | metrics | watchdog |
                                         accesslog

Each case starts hidetd on a temporary socket, database and config (--workers none: no GPU
needed), drives it, stops it with SIGTERM (it must exit 0) and scans its stderr for sanitizer
reports. A Python datagram socket plays systemd's $NOTIFY_SOCKET. Waits are bounded polls with
generous limits: a slow (sanitizer) build only makes a passing test slower, never a failing one.
Exit 77 (skip) when HIDETD is not built.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from hidetd_unix import UnixHTTPConnection  # noqa: E402
import metrics_parse  # noqa: E402

START_TIMEOUT = 60.0  # seconds; sanitizer builds start slowly on a busy 2-core machine
STEP_TIMEOUT = 30.0


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def request(path_sock, method, url, timeout=STEP_TIMEOUT):
    c = UnixHTTPConnection(path_sock, timeout)
    try:
        c.request(method, url)
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


class Notify:
    """systemd's side of sd_notify: a bound datagram socket collecting messages."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages = []  # each a dict of the assignments in one datagram

    def wait_for(self, key, value=None, timeout=STEP_TIMEOUT, after=0):
        """Waits for a datagram (index >= after) that assigns key (= value); returns its index."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(after, len(self.messages)):
                m = self.messages[i]
                if key in m and (value is None or m[key] == value):
                    return i
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail(f"no {key}{'=' + value if value else ''} notification within "
                           f"{timeout:.0f}s; got {self.messages[after:]}")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            m = {}
            for line in data.decode().split("\n"):
                if line:
                    check("=" in line, f"malformed notification line {line!r}")
                    k, v = line.split("=", 1)
                    m[k] = v
            self.messages.append(m)

    def drain(self, seconds):
        """Collects whatever arrives within `seconds`."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            self.messages.append(dict(l.split("=", 1) for l in data.decode().split("\n") if "=" in l))

    def close(self):
        self.sock.close()


class Daemon:
    def __init__(self, hidetd, tmp, config_text="[log]\nlevel = info\n", env=None, wrap=None,
                 socket_name="hidetd.sock"):
        self.tmp = tmp
        self.sock = os.path.join(tmp, socket_name)
        self.config = os.path.join(tmp, "hidetd.conf")
        self.stderr_path = os.path.join(tmp, "stderr.log")
        with open(self.config, "w") as f:
            f.write(config_text)
        argv = [hidetd, "--socket", os.path.join(tmp, "hidetd.sock"),
                "--cache", os.path.join(tmp, "kernels.db"), "--config", self.config,
                "--workers", "none"]
        if wrap:
            argv = wrap + argv
        e = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                  "LISTEN_FDNAMES", "JOURNAL_STREAM"):
            e.pop(k, None)
        e["XDG_RUNTIME_DIR"] = tmp
        e["XDG_CACHE_HOME"] = tmp
        e.update(env or {})
        self.terminated = False
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.stderr,
                                     stderr=self.stderr, env=e, cwd=tmp)

    def log(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_healthy(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Fail(f"hidetd exited with {self.proc.returncode} while starting:\n{self.log()}")
            try:
                status, _, body = request(self.sock, "GET", "/healthz", timeout=10)
                if status == 200:
                    return body
                last = f"status {status}"
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        raise Fail(f"/healthz not answered within {timeout:.0f}s ({last}):\n{self.log()}")

    def get(self, url):
        return request(self.sock, "GET", url)

    def signal(self, sig):
        if sig == signal.SIGTERM:
            self.terminated = True
        self.proc.send_signal(sig)

    def stop(self, timeout=START_TIMEOUT):
        """SIGTERM; hidetd must exit 0 and leave no sanitizer report behind."""
        # Exactly one SIGTERM: a second one during the drain is a request to hurry.
        if self.proc.poll() is None and not self.terminated:
            self.signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail(f"hidetd did not exit within {timeout:.0f}s of SIGTERM:\n{self.log()}")
        self.stderr.close()
        log = self.log()
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            check(marker not in log, f"sanitizer report in hidetd's stderr:\n{log}")
        check(rc == 0, f"hidetd exited with {rc} after SIGTERM:\n{log}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()


# ---- cases ---------------------------------------------------------------------------------


def case_accesslog(hidetd, tmp):
    """The access log line names the key it prints: op_key= for POST /v1/kernels (the answer's
    "op_key"), key= for GET /v1/kernels/KEY (the artifact key, the answer's "key")."""
    import json
    d = Daemon(hidetd, tmp)
    try:
        d.wait_healthy()
        req = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                           "requests", "elementwise.json")
        c = UnixHTTPConnection(d.sock, 300)
        try:
            c.request("POST", "/v1/kernels", body=open(req, "rb").read())
            r = c.getresponse()
            status, body = r.status, r.read()
        finally:
            c.close()
        check(status == 200, f"POST /v1/kernels answered {status}: {body[:300]!r}")
        answer = json.loads(body)
        key, op_key = answer["key"], answer["op_key"]
        check(key != op_key, "the artifact key equals the op key; this test cannot tell them apart")
        check(d.get("/v1/kernels/" + key)[0] == 200, "GET /v1/kernels/KEY failed")
        d.stop()
        lines = d.log().splitlines()
        post = [l for l in lines if " POST /v1/kernels 200 " in l]
        get = [l for l in lines if f" GET /v1/kernels/{key} 200 " in l]
        check(len(post) == 1 and len(get) == 1, f"access log lines not found:\n{d.log()}")
        check(f" op_key={op_key}" in post[0] and " key=" not in post[0],
              f"the POST line does not name the op key as op_key=: {post[0]}")
        check(f" key={key}" in get[0] and "op_key=" not in get[0],
              f"the GET line does not name the artifact key as key=: {get[0]}")
        print("accesslog: POST names op_key=, GET /v1/kernels/KEY names key=")
    finally:
        d.kill()


def case_notify(hidetd, tmp):
    n = Notify(os.path.join(tmp, "notify"))
    d = Daemon(hidetd, tmp, env={"NOTIFY_SOCKET": n.path})
    try:
        ready = n.wait_for("READY", "1", timeout=START_TIMEOUT)
        d.wait_healthy()
        check(any("STATUS" in m for m in n.messages[: ready + 1]),
              f"no STATUS= line up to READY=1: {n.messages}")
        check(not any("STOPPING" in m for m in n.messages), "STOPPING=1 before SIGTERM")
        d.signal(signal.SIGTERM)
        stopping = n.wait_for("STOPPING", "1", after=ready + 1)
        check(stopping > ready, "STOPPING=1 must come after READY=1")
        d.stop()
        n.drain(0.2)
        check(not any(m.get("READY") == "1" for m in n.messages[stopping + 1:]),
              f"READY=1 after STOPPING=1: {n.messages}")
        print(f"notify: {len(n.messages)} notifications: "
              + " | ".join(",".join(f"{k}={v}" for k, v in m.items()) for m in n.messages))
    finally:
        d.kill()
        n.close()


def case_socket_activation(hidetd, tmp):
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        print("SKIP: systemd-socket-activate is not installed")
        return 77
    act = os.path.join(tmp, "activated.sock")
    n = Notify(os.path.join(tmp, "notify"))
    # systemd-socket-activate binds act, waits for the first connection, then execs hidetd (same
    # pid) with LISTEN_FDS=1 and the socket as fd 3. hidetd's own --socket path must stay unused.
    # It passes the launched program only the variables named with -E.
    wrap = [activate, "-l", act, "--fdname=api", "-E", "NOTIFY_SOCKET"]
    for var in ("PATH", "HOME", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "ASAN_OPTIONS",
                "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if var in os.environ or var.startswith("XDG_"):
            wrap += ["-E", var]
    d = Daemon(hidetd, tmp, env={"NOTIFY_SOCKET": n.path}, wrap=wrap,
               socket_name="activated.sock")
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(act) and time.monotonic() < deadline:
            time.sleep(0.02)
        check(os.path.exists(act), "systemd-socket-activate did not create its socket")
        # The first request starts hidetd; it sits in the listen queue until hidetd accepts it.
        # The path exists from bind(), before listen(): a connect in between is refused, so the
        # first one is tried again until the socket listens (seen once under load).
        while True:
            try:
                status, headers, body = request(act, "GET", "/healthz", timeout=START_TIMEOUT)
                break
            except ConnectionRefusedError:
                check(time.monotonic() < deadline, "systemd-socket-activate's socket never listened")
                time.sleep(0.02)
        check(status == 200, f"/healthz through the passed socket: {status} {body!r}")
        check(b'"ok"' in body, f"/healthz body {body!r}")
        n.wait_for("READY", "1", timeout=START_TIMEOUT)
        check(not os.path.exists(os.path.join(tmp, "hidetd.sock")),
              "hidetd bound its own --socket although it was given one by socket activation")
        # Keep serving through the same passed socket.
        for _ in range(3):
            check(request(act, "GET", "/healthz")[0] == 200, "second request failed")
        d.stop()
        check(os.path.exists(act),
              "hidetd removed the socket file it was passed (it belongs to the socket unit)")
        print("socket-activation: served /healthz through the passed socket")
    finally:
        d.kill()
        n.close()
    return 0


def probe_logged(d, tag):
    """Requests a unique path and says whether its request line reached the log."""
    status, _, _ = d.get("/ops-probe-" + tag)
    check(status == 404, f"/ops-probe-{tag} answered {status}, expected 404")
    # The access line is written when the response completes; give it a moment to land.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if "/ops-probe-" + tag in d.log():
            return True
        time.sleep(0.05)
    return False


def case_reload(hidetd, tmp):
    n = Notify(os.path.join(tmp, "notify"))
    d = Daemon(hidetd, tmp, config_text="[log]\nlevel = info\n", env={"NOTIFY_SOCKET": n.path})
    try:
        i = n.wait_for("READY", "1", timeout=START_TIMEOUT)
        d.wait_healthy()
        check(probe_logged(d, "info-1"), "at level info a request is not logged:\n" + d.log())

        # A broken file: rejected, logged with file:line, the daemon keeps serving as before.
        with open(d.config, "w") as f:
            f.write("[log]\nlevel = info\n[server]\nno_such_key = 1\n")
        before = len(d.log())
        d.signal(signal.SIGHUP)
        r = n.wait_for("RELOADING", "1", after=i + 1)
        i = n.wait_for("READY", "1", after=r + 1)
        deadline = time.monotonic() + STEP_TIMEOUT
        while "no_such_key" not in d.log()[before:] and time.monotonic() < deadline:
            time.sleep(0.05)
        tail = d.log()[before:]
        check("no_such_key" in tail, f"the rejected key is not named in the log:\n{tail}")
        check("hidetd.conf:4" in tail, f"the rejection does not say file:line:\n{tail}")
        check(d.proc.poll() is None, "hidetd died on a broken config")
        check(d.get("/healthz")[0] == 200, "not serving after a rejected reload")
        check(probe_logged(d, "info-2"), "log level changed by a rejected reload")

        # A good file at level error: request lines (info) disappear.
        with open(d.config, "w") as f:
            f.write("[log]\nlevel = error\n")
        d.signal(signal.SIGHUP)
        r = n.wait_for("RELOADING", "1", after=i + 1)
        i = n.wait_for("READY", "1", after=r + 1)
        check(d.get("/healthz")[0] == 200, "not serving after a reload")
        check(not probe_logged(d, "error-1"), "level error still logs requests:\n" + d.log())

        # And back to info: they reappear.
        with open(d.config, "w") as f:
            f.write("[log]\nlevel = info\n")
        d.signal(signal.SIGHUP)
        r = n.wait_for("RELOADING", "1", after=i + 1)
        n.wait_for("READY", "1", after=r + 1)
        check(probe_logged(d, "info-3"), "level info after reload does not log requests")
        d.stop()
        print("reload: bad config kept the old one; good config changed the log level")
    finally:
        d.kill()
        n.close()


def request_total(fams):
    """Sum of the daemon's HTTP request counter(s): counter families named *request*_total."""
    total, names = 0.0, []
    for name, f in fams.items():
        if f["type"] == "counter" and "request" in name and name.endswith("_total"):
            names.append(name)
            total += sum(v for _, _, v in f["samples"])
    return total, names


DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                    "operations.md")


def documented_metrics():
    """Metric family names in the table of the Monitor section of docs/operations.md."""
    names, in_table = set(), False
    for line in open(DOCS):
        if line.startswith("| metric |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table:
            names.update(re.findall(r"`(hidetd_[a-z0-9_]+)", line.split("|")[1]))
    return names


def lag_over(fams, le):
    """Observations of hidetd_loop_lag_seconds above the bucket bound le."""
    f = fams.get("hidetd_loop_lag_seconds")
    check(f and f["type"] == "histogram", "no hidetd_loop_lag_seconds histogram")
    count = below = None
    for name, labels, value in f["samples"]:
        if name.endswith("_count"):
            count = value
        elif name.endswith("_bucket") and labels.get("le") == le:
            below = value
    check(count is not None and below is not None, f"hidetd_loop_lag_seconds lacks le={le}")
    return count - below


def case_metrics(hidetd, tmp):
    d = Daemon(hidetd, tmp)
    try:
        d.wait_healthy()
        status, headers, body = d.get("/metrics")
        check(status == 200, f"/metrics answered {status}")
        ctype = headers.get("content-type", "")
        check(ctype.startswith("text/plain") and "version=0.0.4" in ctype,
              f"/metrics content type {ctype!r}")
        try:
            fams = metrics_parse.parse(body.decode())
        except metrics_parse.ParseError as e:
            raise Fail(f"/metrics does not parse: {e}\n{body.decode()}")
        check(all(n.startswith("hidetd_") for n in fams), f"unprefixed metric names: {list(fams)}")
        t0, names = request_total(fams)
        check(names, f"no request counter among {sorted(fams)}")
        for _ in range(5):
            check(d.get("/healthz")[0] == 200, "/healthz failed")
        check(d.get("/no/such/path")[0] == 404, "unknown path did not answer 404")
        fams2 = metrics_parse.parse(d.get("/metrics")[2].decode())
        t1, _ = request_total(fams2)
        # 5 x /healthz, 1 x 404 and the first /metrics have all completed by now.
        check(t1 >= t0 + 6, f"request counters {names} moved from {t0} to {t1}, expected >= +6")
        hist = [n for n, f in fams2.items() if f["type"] == "histogram"]
        check(hist, "no histogram (request latency) in /metrics")
        # The loop-lag probe sees a loop that could not run: stopped 0.4 s, its next sample is
        # at least ~0.39 s late (above the 0.25 s bucket).
        over = lag_over(fams2, "0.25")
        d.signal(signal.SIGSTOP)
        time.sleep(0.4)
        d.signal(signal.SIGCONT)
        time.sleep(0.1)
        fams3 = metrics_parse.parse(d.get("/metrics")[2].decode())
        check(lag_over(fams3, "0.25") > over,
              f"hidetd_loop_lag_seconds did not see a 0.4 s stop: {fams3.get('hidetd_loop_lag_seconds')}")
        # docs/operations.md lists the metrics operators alert on: each must exist, and each
        # family hidetd exports must be listed there.
        documented = documented_metrics()
        check(len(documented) >= 10, f"only {len(documented)} metrics found in {DOCS}")
        missing = sorted(documented - set(fams2))
        check(not missing, f"documented in {DOCS} but not exported: {missing}")
        undocumented = sorted(set(fams2) - documented)
        check(not undocumented, f"exported but not documented in {DOCS}: {undocumented}")
        d.stop()
        print(f"metrics: {len(fams2)} families parse; {names} went {t0:g} -> {t1:g}")
    finally:
        d.kill()


def case_watchdog(hidetd, tmp):
    # 1. WATCHDOG_USEC for this very process (WATCHDOG_PID set by a shell that then execs hidetd):
    #    pings must come, at half the interval.
    n = Notify(os.path.join(tmp, "notify"))
    d = Daemon(hidetd, tmp, env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "400000"},
               wrap=["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh"])
    try:
        i = n.wait_for("READY", "1", timeout=START_TIMEOUT)
        for _ in range(3):
            i = n.wait_for("WATCHDOG", "1", after=i + 1)
        d.stop()
    finally:
        d.kill()
        n.close()
    pings = sum(1 for m in n.messages if m.get("WATCHDOG") == "1")

    # 2. WATCHDOG_PID naming another process: the pings are not for hidetd, it must not send any.
    tmp2 = os.path.join(tmp, "other")
    os.mkdir(tmp2)
    n = Notify(os.path.join(tmp2, "notify"))
    d = Daemon(hidetd, tmp2, env={"NOTIFY_SOCKET": n.path, "WATCHDOG_USEC": "200000",
                                  "WATCHDOG_PID": "1"})
    try:
        n.wait_for("READY", "1", timeout=START_TIMEOUT)
        n.drain(1.0)
        d.stop()
        check(not any("WATCHDOG" in m for m in n.messages),
              f"pinged although WATCHDOG_PID is another process: {n.messages}")
    finally:
        d.kill()
        n.close()
    print(f"watchdog: {pings} pings with WATCHDOG_USEC=400000; none for another WATCHDOG_PID")


CASES = {
    "notify": case_notify,
    "socket-activation": case_socket_activation,
    "reload": case_reload,
    "metrics": case_metrics,
    "watchdog": case_watchdog,
    "accesslog": case_accesslog,
}


def main(argv):
    if len(argv) != 3 or argv[2] not in CASES:
        print(__doc__, file=sys.stderr)
        return 2
    hidetd = os.path.abspath(argv[1])
    if not os.access(hidetd, os.X_OK):
        print(f"SKIP: {hidetd} is not built yet")
        return 77
    tmp = tempfile.mkdtemp(prefix="hidetd-ops-")
    try:
        rc = CASES[argv[2]](hidetd, tmp)
        return rc or 0
    except Fail as e:
        print(f"FAIL ({argv[2]}): {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
