#!/usr/bin/env python3
"""TCP connection budgets by identity, and duplicate Host/Authorization, attacked from outside.

    attack_tcp.py HIDETD CASE
    attack_tcp.py HIDETD bench [--conns N] [--requests N] [--procs N] [--out FILE]

    CASE: slow-aliases | dup-headers | budget-config

slow-aliases: a tokenless attacker holds slow connections from 127.0.0.2, .3 and .4 (each sends
    a partial request line, then a byte now and then, and connects again whenever the daemon
    closes one) while a client with the token sends requests, each on a fresh connection from
    127.0.0.1. The TCP listener allows 128 connections, so the attacker's 300 connections would
    take them all if slots were shared out by address; the token client must still be served.
budget-config: the budget and its short header deadline are read from hidetd.conf, shown in
    /metrics and changed by SIGHUP; a silent tokenless connection is closed after that deadline,
    a token holder's idle keep-alive connection is not.
dup-headers: two Host headers, or two Authorization headers, are refused with 400 and a JSON error
    naming the header (on TCP and on the Unix socket); one of each is still served.
bench: the full-size attack (default 3,000 slow connections from three addresses, 1,000 token
    requests) with the default limits, from one attacker thread or --procs processes (one
    alias each); prints the figures as JSON (bench/attack_tcp.sh).

Uses hardening.py's daemon start-up (hidetd --workers none, TCP on a free loopback port, a token
file) and raw sockets. Exit 77 (skip) when HIDETD is not built or the descriptors are not there.
"""
import errno
import json
import multiprocessing
import os
import re
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hardening import (SKIP, TOKEN, Skip, body_of, error_code, raw, run_case,  # noqa: E402
                       start, status_of, tcp_get)
from ops_daemon import Fail, check, request  # noqa: E402

ALIASES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


class SlowAttacker(threading.Thread):
    """Holds `n` slow, tokenless connections spread over `sources`, reconnecting at once
    whenever the daemon closes one (a slowloris that does not give up)."""

    def __init__(self, port, n, sources=ALIASES, trickle_s=0.5):
        super().__init__(daemon=True)
        self.port, self.n, self.sources, self.trickle_s = port, n, sources, trickle_s
        self.ep = select.epoll()
        self.socks = {}  # fd -> [socket, connected, next trickle time]
        self.stop_ev = threading.Event()
        self.opened = self.closed_by_server = self.connect_errors = 0
        self.max_connected = 0
        self.connected_now = 0
        self.lock = threading.Lock()

    def _open(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((self.sources[i % len(self.sources)], 0))
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            self.connect_errors += 1
            s.close()
            return
        self.socks[s.fileno()] = [s, False, 0.0, i]
        self.ep.register(s.fileno(), select.EPOLLOUT | select.EPOLLIN | select.EPOLLRDHUP)
        self.opened += 1

    def _drop(self, fd, by_server):
        s, connected, _, i = self.socks.pop(fd)
        try:
            self.ep.unregister(fd)
        except OSError:
            pass
        s.close()
        if connected:
            self.connected_now -= 1
        if by_server:
            self.closed_by_server += 1
        return i

    def run(self):
        for i in range(self.n):
            self._open(i)
        while not self.stop_ev.is_set():
            now = time.monotonic()
            for fd, ev in self.ep.poll(0.05):
                ent = self.socks.get(fd)
                if not ent:
                    continue
                s = ent[0]
                if not ent[1] and ev & select.EPOLLOUT and not ev & (select.EPOLLERR |
                                                                      select.EPOLLHUP):
                    # Connected: a request line without its end, then a byte now and then.
                    try:
                        s.send(b"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    except OSError:
                        self._open(self._drop(fd, True))
                        continue
                    ent[1] = True
                    ent[2] = now + self.trickle_s
                    self.connected_now += 1
                    self.max_connected = max(self.max_connected, self.connected_now)
                    self.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    continue
                if ev & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if not data or ev & (select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                        self._open(self._drop(fd, True))
            # Trickle: one header byte per connection every trickle_s.
            for fd, ent in list(self.socks.items()):
                if ent[1] and ent[2] <= now:
                    ent[2] = now + self.trickle_s
                    try:
                        ent[0].send(b"X")
                    except OSError:
                        self._open(self._drop(fd, True))
        for fd in list(self.socks):
            self._drop(fd, False)
        self.ep.close()

    def stop(self):
        self.stop_ev.set()
        self.join(30)


def _attacker_proc(port, n, sources, stop, out):
    att = SlowAttacker(port, n, sources)
    att.start()
    stop.wait()
    att.stop()
    out.put((att.opened, att.closed_by_server, att.connect_errors))


class AttackerProcs:
    """The same attack from `procs` processes (one Python thread cannot open and reopen
    connections as fast as several), each with its share of the connections and one alias."""

    def __init__(self, port, n, procs):
        ctx = multiprocessing.get_context("fork")
        self.stop_ev, self.q = ctx.Event(), ctx.Queue()
        self.procs = [ctx.Process(target=_attacker_proc,
                                  args=(port, n // procs + (i < n % procs),
                                        (ALIASES[i % len(ALIASES)],), self.stop_ev, self.q))
                      for i in range(procs)]
        self.opened = self.closed_by_server = self.connect_errors = 0

    def start(self):
        for p in self.procs:
            p.start()

    def stop(self):
        self.stop_ev.set()
        for _ in self.procs:
            o, c, e = self.q.get(timeout=60)
            self.opened += o
            self.closed_by_server += c
            self.connect_errors += e
        for p in self.procs:
            p.join(30)


def token_requests(port, n, timeout=10.0):
    """n GET /v1/status with the token, each on a fresh connection from 127.0.0.1. Returns
    (served, statuses seen, latencies in seconds of the served ones)."""
    served, seen, lat = 0, {}, []
    req = (f"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
           f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n").encode()
    for _ in range(n):
        t0 = time.monotonic()
        try:
            resp = raw(port, req, timeout=timeout)
            st = int(resp[9:12]) if resp.startswith(b"HTTP/1.1 ") else 0
        except OSError as e:
            st = f"error:{errno.errorcode.get(e.errno, e.errno)}"
        seen[st] = seen.get(st, 0) + 1
        if st == 200:
            served += 1
            lat.append(time.monotonic() - t0)
    return served, seen, lat


def metrics_text(d):
    st, _, body = request(d.sock, "GET", "/metrics", timeout=30)
    check(st == 200, f"/metrics: {st}")
    return body.decode()


def metric(text, name, labels=""):
    m = re.search(r"^" + re.escape(name + labels) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def need_fds(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        if hard != resource.RLIM_INFINITY and hard < n:
            raise Skip(f"RLIMIT_NOFILE hard limit {hard} < {n}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def run_attack(d, conns, requests, settle_s, procs=1):
    att = SlowAttacker(d.port, conns) if procs <= 1 else AttackerProcs(d.port, conns, procs)
    att.start()
    try:
        time.sleep(settle_s)  # let the attacker take what it can
        t0 = time.monotonic()
        served, seen, lat = token_requests(d.port, requests)
        wall = time.monotonic() - t0
        # Still served from the Unix socket too, and the budgets are in /metrics.
        st, _, _ = request(d.sock, "GET", "/healthz", timeout=10)
        text = metrics_text(d)
    finally:
        att.stop()
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else None
    return {
        "attacker_connections": conns, "attacker_sources": list(ALIASES),
        "attacker_processes": procs,
        "attacker_opened": att.opened, "attacker_closed_by_server": att.closed_by_server,
        "attacker_connect_errors": att.connect_errors,
        "token_requests": requests, "token_served": served,
        "token_served_fraction": served / requests if requests else 0.0,
        "token_statuses": {str(k): v for k, v in seen.items()},
        "token_latency_ms": {"p50": pct(0.50), "p99": pct(0.99), "max": pct(1.0)},
        "token_wall_s": round(wall, 2), "unix_healthz": st,
        "metrics": {k + lab: metric(text, k, lab) for k, lab in (
            ("hidetd_http_tcp_connections", '{auth="unauthenticated"}'),
            ("hidetd_http_tcp_connections", '{auth="authenticated"}'),
            ("hidetd_http_connection_limit", '{budget="tcp_unauthenticated"}'),
            ("hidetd_http_connection_limit", '{budget="per_client"}'),
            ("hidetd_http_connection_limit", '{budget="tcp"}'),
            ("hidetd_http_connections_evicted_total", ""),
            ("hidetd_http_connections_refused_total", ""))},
    }


# ---- cases ---------------------------------------------------------------------------------

def case_slow_aliases(hidetd, tmp):
    """300 slow tokenless connections from three loopback aliases; a token client is served."""
    conns, requests = 300, 100
    need_fds(conns + 256)
    # 128 TCP slots; by address, each alias could hold 64 (half), together more than all.
    d = start(hidetd, tmp, extra_server="max_connections = 128\n")
    try:
        r = run_attack(d, conns, requests, settle_s=1.5)
        print(json.dumps(r, indent=1))
        # The target (99%) is checked at full size by bench/attack_tcp.sh; here 95%, so
        # that one request delayed past its eviction by a loaded CI host (a connection is
        # evicted only if it sent nothing while 64 newer ones arrived) does not fail the suite.
        # Before the fix none was served.
        check(r["token_served"] >= requests * 95 // 100,
              f"token client served {r['token_served']} of {requests} "
              f"({r['token_statuses']}) under {conns} slow connections from {ALIASES}")
        check(r["unix_healthz"] == 200, "Unix /healthz under the attack")
        m = r["metrics"]
        lim = m['hidetd_http_connection_limit{budget="tcp_unauthenticated"}']
        check(lim is not None and 0 < lim < 128, f"unauthenticated budget in /metrics: {lim}")
        unauth = m['hidetd_http_tcp_connections{auth="unauthenticated"}']
        check(unauth is not None and unauth <= lim,
              f"unauthenticated connections {unauth} above their budget {lim}")
        ev = m["hidetd_http_connections_evicted_total"]
        check(ev is not None and ev > 0, f"no eviction counted ({ev})")
        print(f"slow-aliases: {r['token_served']}/{requests} token requests served under "
              f"{conns} slow connections from {len(ALIASES)} aliases; {ev:g} evicted")
        d.stop()
    finally:
        d.kill()


def case_budget_config(hidetd, tmp):
    """The budget and its deadline come from hidetd.conf, show in /metrics, change on SIGHUP; a
    silent tokenless connection is closed after the short deadline, a token holder's idle
    keep-alive connection is not."""
    d = start(hidetd, tmp, extra_server="tcp_unauthenticated_connections = 16\n"
                                        "tcp_unauthenticated_header_timeout = 500ms\n")
    try:
        lim = '{budget="tcp_unauthenticated"}'
        check(metric(metrics_text(d), "hidetd_http_connection_limit", lim) == 16,
              "tcp_unauthenticated_connections = 16 not in /metrics")
        silent = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        keep = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        keep.sendall((f"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
                      f"Authorization: Bearer {TOKEN}\r\n\r\n").encode())
        got = b""
        while b"\r\n\r\n" not in got:
            got += keep.recv(65536)
        check(got.startswith(b"HTTP/1.1 200"), f"token request: {got[:100]!r}")
        text = metrics_text(d)
        check(metric(text, "hidetd_http_tcp_connections", '{auth="authenticated"}') == 1,
              "the token holder's connection is not counted as authenticated")
        t0 = time.monotonic()
        check(silent.recv(1) == b"", "the silent tokenless connection got bytes")
        waited = time.monotonic() - t0
        check(waited < 3.0, f"silent tokenless connection closed after {waited:.1f}s, not ~0.5s")
        time.sleep(0.5)
        keep.setblocking(False)
        try:
            check(keep.recv(1) != b"", "unexpected bytes")
        except BlockingIOError:
            pass  # still open, nothing to read: as it should be
        keep.close()
        silent.close()
        conf = open(d.config).read().replace("tcp_unauthenticated_connections = 16",
                                             "tcp_unauthenticated_connections = 24")
        with open(d.config, "w") as f:
            f.write(conf)
        d.signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if metric(metrics_text(d), "hidetd_http_connection_limit", lim) == 24:
                break
            time.sleep(0.1)
        else:
            raise Fail("tcp_unauthenticated_connections = 24 not applied on SIGHUP")
        print(f"budget-config: budget 16 -> 24 on SIGHUP; silent connection closed after "
              f"{waited:.2f}s; the token's keep-alive connection stayed")
        d.stop()
    finally:
        d.kill()


def case_dup_headers(hidetd, tmp):
    """Two Host or two Authorization headers: 400 naming the header; one of each: 200."""
    d = start(hidetd, tmp)
    try:
        host = f"127.0.0.1:{d.port}"
        auth = f"Bearer {TOKEN}"

        def tcp(headers):
            lines = ["GET /v1/status HTTP/1.1"] + [f"{k}: {v}" for k, v in headers]
            lines.append("Connection: close")
            resp = raw(d.port, ("\r\n".join(lines) + "\r\n\r\n").encode())
            return status_of(resp), body_of(resp)

        st, body = tcp([("Host", host), ("Authorization", auth)])
        check(st == 200, f"one Host, one Authorization: {st} {body[:200]!r}")
        cases = [
            ("two equal Host", [("Host", host), ("Host", host), ("Authorization", auth)], "Host"),
            ("Host, then another", [("Host", host), ("host", "evil.example"),
                                    ("Authorization", auth)], "Host"),
            ("two Authorization", [("Host", host), ("Authorization", auth),
                                   ("Authorization", "Bearer wrong")], "Authorization"),
            ("two equal Authorization", [("Host", host), ("Authorization", auth),
                                         ("AUTHORIZATION", auth)], "Authorization"),
            ("wrong, then right Authorization", [("Host", host), ("Authorization", "Bearer x"),
                                                 ("Authorization", auth)], "Authorization"),
        ]
        for what, hdrs, name in cases:
            st, body = tcp(hdrs)
            check(st == 400, f"TCP, {what}: {st} {body[:200]!r}")
            try:
                err = json.loads(body)["error"]
            except (ValueError, KeyError, TypeError):
                raise Fail(f"TCP, {what}: not a JSON error: {body[:200]!r}")
            check(err.get("code") == "invalid_field" and err.get("field") == name and
                  name in err.get("message", ""),
                  f"TCP, {what}: error does not name {name}: {err}")
        # The Unix socket reads headers the same way.
        resp = raw(d.sock, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n"
                           b"Connection: close\r\n\r\n")
        check(status_of(resp) == 400 and error_code(body_of(resp)) == "invalid_field",
              f"Unix socket, two Host: {resp[:200]!r}")
        st, _ = tcp_get(d.port, "/healthz")
        check(st == 200, f"TCP /healthz afterwards: {st}")
        print(f"dup-headers: {len(cases)} duplicate Host/Authorization requests refused with 400")
        d.stop()
    finally:
        d.kill()


def bench(hidetd, tmp, argv):
    conns, requests, out, procs = 3000, 1000, None, 1
    it = iter(argv)
    for a in it:
        if a == "--conns":
            conns = int(next(it))
        elif a == "--procs":
            procs = int(next(it))
        elif a == "--requests":
            requests = int(next(it))
        elif a == "--out":
            out = next(it)
        else:
            raise Skip(f"unknown argument {a}")
    need_fds(conns + 512)
    d = start(hidetd, tmp)
    try:
        r = run_attack(d, conns, requests, settle_s=3.0, procs=procs)
        d.stop()
    finally:
        d.kill()
    text = json.dumps(r, indent=1)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    return r["token_served_fraction"] >= 0.99


CASES = {"slow-aliases": case_slow_aliases, "dup-headers": case_dup_headers,
         "budget-config": case_budget_config}


def main(argv):
    if len(argv) < 3 or argv[2] != "bench":
        return run_case(argv, CASES, __doc__, "hidetd-tcp-")
    hidetd = argv[1]
    if not os.access(hidetd, os.X_OK):
        print(f"SKIP: {hidetd} is not built")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="hidetd-tcp-")
    try:
        return 0 if bench(hidetd, tmp, argv[3:]) else 1
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    except Fail as e:
        print(f"FAIL: bench: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
