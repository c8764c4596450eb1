#!/usr/bin/env python3
"""Trust boundaries and fair sharing, checked from the outside against the real hidetd.

    hardening.py HIDETD CASE

    CASE: conn-flood | loopback-uid | queue-quota | host-origin | continue-auth | http-version |
          chunk-early-413 | utf8-echo

Each case starts hidetd (--workers none) on a temporary socket, database and configuration, with
TCP on a free loopback port and a token in a token file, attacks it the way the issue
"Hardening: trust boundaries, fair sharing under overload" describes, and checks that other
clients are still served and that the attack gets the documented refusal. Raw sockets are used
where the exact bytes matter (100 Continue, HTTP/1.9, chunk sizes, invalid UTF-8). Exit 77 (skip)
when HIDETD is not built or a case cannot run here (said why on stdout).
"""
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
from ops_daemon import Daemon, Fail, check, request  # noqa: E402

TOKEN = "hardening-test-token-0123456789"
SKIP = 77


class Skip(Exception):
    pass


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(hidetd, tmp, extra_server="", extra_sections=""):
    port = free_port()
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    conf = (f"[server]\nhttp = 127.0.0.1:{port}\ntoken_file = {token_file}\n{extra_server}"
            f"[log]\nlevel = warn\n{extra_sections}")
    d = Daemon(hidetd, tmp, config_text=conf)
    d.wait_healthy()
    d.port = port
    return d


def raw(port_or_path, data, timeout=10.0, read_until_close=True, src=None):
    """Sends bytes, returns everything read until the peer closes (or timeout)."""
    if isinstance(port_or_path, int):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if src:
            s.bind((src, 0))
        s.connect(("127.0.0.1", port_or_path))
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(port_or_path)
    s.settimeout(timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if not read_until_close and b"\r\n\r\n" in out:
                break
    except socket.timeout:
        pass
    finally:
        s.close()
    return out


def status_of(resp):
    check(resp.startswith(b"HTTP/1.1 "), f"no HTTP answer: {resp[:200]!r}")
    return int(resp[9:12])


def body_of(resp):
    return resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""


def tcp_get(port, path, headers=None, method="GET", body=None, src=None):
    h = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {TOKEN}", "Connection": "close"}
    h.update(headers or {})
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in h.items() if v is not None]
    data = body or b""
    if body is not None:
        lines.append(f"Content-Length: {len(data)}")
    resp = raw(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + data, src=src)
    return status_of(resp), body_of(resp)


def error_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


# ---- cases ---------------------------------------------------------------------------------

def case_conn_flood(hidetd, tmp):
    """2000 idle TCP connections must not take the Unix socket's /healthz (nor TCP for others)."""
    n = 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 512
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise Skip(f"RLIMIT_NOFILE hard limit {hard} < {want}: cannot open {n} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    d = start(hidetd, tmp)
    conns = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", d.port))
            except BlockingIOError:
                pass
            conns.append(s)
        time.sleep(1.0)  # let the daemon accept (and refuse) what it will
        status, _, body = request(d.sock, "GET", "/healthz", timeout=10)
        check(status == 200, f"Unix /healthz under a TCP flood: {status} {body[:200]!r}")
        status, _, body = request(d.sock, "GET", "/v1/status", timeout=10)
        check(status == 200, f"Unix /v1/status under a TCP flood: {status} {body[:200]!r}")
        # Another TCP client (another source address) is not starved by the first one.
        st, body = tcp_get(d.port, "/healthz", src="127.0.0.2")
        check(st == 200, f"TCP /healthz from another address under the flood: {st} {body[:200]!r}")
        print(f"conn-flood: {n} idle TCP connections; Unix /healthz 200, other TCP peer 200")
    finally:
        for s in conns:
            s.close()
        d.stop()


def case_loopback_uid(hidetd, tmp):
    """A uid that the 0660 socket refuses must not get the API over 127.0.0.1 without a token."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        raise Skip("needs root and runuser to act as a second uid")
    try:
        import pwd
        pwd.getpwnam("nobody")
    except KeyError:
        raise Skip("no user 'nobody'")
    # The probe runs as nobody, who may not reach this interpreter (e.g. under /root).
    py = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable)
               if os.access(p, os.X_OK) and
               subprocess.run(["runuser", "-u", "nobody", "--", p, "-c", "pass"],
                              capture_output=True, cwd="/").returncode == 0), None)
    if not py:
        raise Skip("no python3 that the user nobody can run")
    os.chmod(tmp, 0o755)
    d = start(hidetd, tmp)
    try:
        probe = (
            "import socket,sys\n"
            "def ask(path, method='GET', auth=None):\n"
            "    s=socket.create_connection(('127.0.0.1',%d)); s.settimeout(10)\n"
            "    h='%%s %%s HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\nConnection: close\\r\\n' %% (method, path)\n"
            "    if auth: h+='Authorization: Bearer '+auth+'\\r\\n'\n"
            "    s.sendall((h+'\\r\\n').encode()); out=b''\n"
            "    while True:\n"
            "        b=s.recv(65536)\n"
            "        if not b: break\n"
            "        out+=b\n"
            "    return out.split(b' ')[1].decode()\n"
            "print(ask('/v1/status'), ask('/v1/jobs/1', 'DELETE'), ask('/v1/status', auth=sys.argv[1]))\n"
        ) % (d.port, d.port)
        out = subprocess.run(["runuser", "-u", "nobody", "--", py, "-c", probe, TOKEN],
                             capture_output=True, text=True, timeout=30, cwd="/")
        check(out.returncode == 0, f"probe as nobody failed: {out.stderr}")
        st_status, st_delete, st_auth = out.stdout.split()
        check(st_status == "401", f"nobody, loopback TCP, no token, GET /v1/status: {st_status}")
        check(st_delete == "401", f"nobody, loopback TCP, no token, DELETE /v1/jobs/1: {st_delete}")
        check(st_auth == "200", f"nobody with the token: {st_auth}")
        # The Unix socket (0660, root's) refuses nobody outright.
        out = subprocess.run(["runuser", "-u", "nobody", "--", py, "-c",
                              "import socket,sys; s=socket.socket(socket.AF_UNIX); "
                              "s.connect(sys.argv[1])", d.sock],
                             capture_output=True, text=True, timeout=30, cwd="/")
        check(out.returncode != 0, "nobody could connect to the 0660 Unix socket")
        print("loopback-uid: nobody gets 401 over 127.0.0.1 without the token, 200 with it")
    finally:
        d.stop()


def kernel_body(m, prio="blocking"):
    return json.dumps({
        "op": "matmul",
        "inputs": [{"shape": [m, 64], "dtype": "f16"}, {"shape": [64, 128], "dtype": "f16"}],
        "arch": "sm_90", "tune": "model", "wait": False, "priority": prio,
    }).encode()


def case_queue_quota(hidetd, tmp):
    """One client flooding wait:false jobs must leave room for another client's new op."""
    d = start(hidetd, tmp, extra_sections="[tuning]\nmax_queued_jobs = 40\nmax_running_jobs = 1\n")
    try:
        from hidetd_unix import UnixHTTPConnection
        c = UnixHTTPConnection(d.sock, 30)
        counts = {}
        t0 = time.monotonic()
        for i in range(80):
            c.request("POST", "/v1/kernels", body=kernel_body(16 + 16 * i),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            b = r.read()
            key = r.status if r.status != 429 else f"429/{error_code(b)}"
            counts[key] = counts.get(key, 0) + 1
        c.close()
        flood_s = time.monotonic() - t0
        check(any(str(k).startswith("429") for k in counts),
              f"the flood was never refused (the queue never filled?): {counts}")
        # Another client (TCP, another peer) asks for a new op: it must be accepted.
        st, body = tcp_get(d.port, "/v1/kernels", method="POST", body=kernel_body(8, "normal"),
                           headers={"Content-Type": "application/json"})
        check(st in (200, 202), f"another client's new op after the flood: {st} {body[:300]!r} "
                                f"(flood answers: {counts})")
        print(f"queue-quota: flood of 80 in {flood_s:.2f}s -> {counts}; other client {st}")
    finally:
        d.stop()


def case_host_origin(hidetd, tmp):
    """Browser requests (Origin) and foreign Host names (DNS rebinding) are refused."""
    d = start(hidetd, tmp)
    try:
        st, body = tcp_get(d.port, "/v1/status")
        check(st == 200, f"own Host with the token: {st} {body[:200]!r}")
        st, body = tcp_get(d.port, "/v1/status", headers={"Host": f"localhost:{d.port}"})
        check(st == 200, f"Host localhost: {st} {body[:200]!r}")
        st, body = tcp_get(d.port, "/v1/status", headers={"Host": f"evil.example:{d.port}"})
        check(st == 403 and error_code(body) == "forbidden_host",
              f"foreign Host (DNS rebinding): {st} {body[:200]!r}")
        st, body = tcp_get(d.port, "/v1/status", headers={"Origin": "http://evil.example"})
        check(st == 403 and error_code(body) == "forbidden_origin",
              f"browser Origin: {st} {body[:200]!r}")
        st, body = tcp_get(d.port, "/v1/jobs/1", method="DELETE",
                           headers={"Origin": f"http://127.0.0.1:{d.port}"})
        check(st == 403 and error_code(body) == "forbidden_origin",
              f"browser Origin, DELETE: {st} {body[:200]!r}")
        print("host-origin: foreign Host -> 403 forbidden_host, Origin -> 403 forbidden_origin")
    finally:
        d.stop()


def case_continue_auth(hidetd, tmp):
    """The token is checked before 100 Continue: no body is invited from an unauthorised client."""
    d = start(hidetd, tmp)
    try:
        req = (f"POST /v1/kernels HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
               f"Authorization: Bearer wrong-token\r\nContent-Type: application/json\r\n"
               f"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n").encode()
        resp = raw(d.port, req, timeout=5)
        check(not resp.startswith(b"HTTP/1.1 100"),
              f"100 Continue sent before the token was checked: {resp[:200]!r}")
        check(status_of(resp) == 401, f"wrong token with Expect: {resp[:300]!r}")
        req = req.replace(b"Bearer wrong-token", f"Bearer {TOKEN}".encode())
        resp = raw(d.port, req, timeout=2, read_until_close=False)
        check(resp.startswith(b"HTTP/1.1 100"), f"right token: no 100 Continue: {resp[:200]!r}")
        print("continue-auth: wrong token -> 401 without 100 Continue; right token -> 100")
    finally:
        d.stop()


def case_http_version(hidetd, tmp):
    d = start(hidetd, tmp)
    try:
        for path in (d.sock, d.port):
            resp = raw(path, f"GET /healthz HTTP/1.9\r\nHost: 127.0.0.1:{d.port}\r\n"
                             f"Authorization: Bearer {TOKEN}\r\n\r\n".encode(), timeout=5)
            check(status_of(resp) == 505, f"HTTP/1.9 over {path}: {resp[:300]!r}")
            check(error_code(body_of(resp)) is not None, f"505 without a JSON error: {resp!r}")
        print("http-version: HTTP/1.9 -> 505 on both transports")
    finally:
        d.stop()


def case_chunk_early_413(hidetd, tmp):
    d = start(hidetd, tmp, extra_server="max_body = 64KiB\nrequest_timeout = 20s\n")
    try:
        req = (b"POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\n"
               b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
               b"100000\r\n")  # 1 MiB announced, nothing of it sent
        t0 = time.monotonic()
        resp = raw(d.sock, req, timeout=5)
        took = time.monotonic() - t0
        check(resp != b"", f"no answer within 5s to a chunk larger than max_body")
        check(status_of(resp) == 413 and error_code(body_of(resp)) == "body_too_large",
              f"oversized chunk: {resp[:300]!r}")
        print(f"chunk-early-413: 413 after {took * 1000:.0f} ms, before the chunk was sent")
    finally:
        d.stop()


def case_utf8_echo(hidetd, tmp):
    """Error messages quote client text; invalid UTF-8 in it is escaped, never echoed."""
    d = start(hidetd, tmp)
    bad = b"\xff\xfe\xc3"
    bodies = [
        b'{"op": "mat' + bad + b'mul", "inputs": [], "arch": "sm_90"}',
        b'{"op": "softmax", "inputs": [{"shape": [4, 4], "dtype": "f16"}], "arch": "sm_' + bad + b'"}',
        b'{"op": "softmax", "inputs": [{"shape": [4, 4], "dtype": "f16"}], "arch": "sm_90", "x' + bad + b'": 1}',
        b'{"op": "softmax", "inputs": [{"shape": [4, 4], "dtype": "f' + bad + b'"}], "arch": "sm_90"}',
    ]
    try:
        for b in bodies:
            for where in (d.sock, d.port):
                head = (f"POST /v1/kernels HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n"
                        f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(b)}\r\n\r\n")
                resp = raw(where, head.encode() + b, timeout=10)
                st = status_of(resp)
                body = body_of(resp)
                check(400 <= st < 500, f"{b!r}: status {st}")
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError:
                    raise Fail(f"{b!r}: the error answer is not valid UTF-8: {body!r}")
                json.loads(text)
        print(f"utf8-echo: {len(bodies)} bodies with invalid UTF-8; every answer valid UTF-8 JSON")
    finally:
        d.stop()


CASES = {
    "conn-flood": case_conn_flood,
    "loopback-uid": case_loopback_uid,
    "queue-quota": case_queue_quota,
    "host-origin": case_host_origin,
    "continue-auth": case_continue_auth,
    "http-version": case_http_version,
    "chunk-early-413": case_chunk_early_413,
    "utf8-echo": case_utf8_echo,
}


def run_case(argv, cases, doc, tmp_prefix):
    """The command line of a case script, `SCRIPT HIDETD CASE`: runs cases[CASE](hidetd, tmp) in a
    fresh temporary directory (removed after) and returns the exit status for meson: 0 (PASS), 1
    (FAIL), SKIP when HIDETD is not built or the case raises Skip, 2 (the script's doc printed)
    for a bad command line. The attack_*.py scripts beside this one use it too."""
    if len(argv) != 3 or argv[2] not in cases:
        print(doc, file=sys.stderr)
        return 2
    hidetd = os.path.abspath(argv[1])
    if not os.access(hidetd, os.X_OK):
        print(f"SKIP: {hidetd} is not built")
        return SKIP
    tmp = tempfile.mkdtemp(prefix=tmp_prefix)
    try:
        cases[argv[2]](hidetd, tmp)
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    except Fail as e:
        print(f"FAIL: {argv[2]}: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: {argv[2]}")
    return 0


def main(argv):
    return run_case(argv, CASES, __doc__, "hidetd-hard-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
