"""The transport against a fake daemon (http.server on a Unix socket, and on TCP for the token):
error answers become HidetdError with status, code, message and field; one connection serves
many requests; a connection the server closed is replaced; a missing socket is named."""
import http.server
import json
import os
import socket
import socketserver
import tempfile
import threading
import unittest
import warnings

from support import hidetd


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, close=False, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        if close:
            self.close_connection = True

    def do_GET(self):
        srv = self.server
        srv.seen.append((self.command, self.path, self.headers.get("Authorization"), srv.peer_id(self)))
        if self.path == "/healthz":
            self.answer(200, {"status": "ok"})
        elif self.path == "/v1/status":
            self.answer(200, {"version": "fake"})
        elif self.path == "/close-after":
            self.answer(200, {"ok": 1}, close=True)
        elif self.path == "/plain-error":
            self.answer(502, b"bad gateway", ctype="text/plain")
        elif self.path == "/not-json":
            self.answer(200, b"<html>", ctype="text/html")
        else:
            self.answer(404, {"error": {"code": "not_found", "message": "no such path", "field": ""}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((self.command, self.path, body, self.server.peer_id(self)))
        if b"fallback" in body:
            # A "measure" request answered by the cost model (no GPU): 200 with a warning.
            ks = {"key": "k" * 64, "measured": False, "warning": "no GPU: chosen by the cost model"}
            if self.path == "/v1/graphs":
                self.answer(200, {"steps": [{"kernel_set": ks}, {"kernel_set": ks}], "prepare": []})
            else:
                self.answer(200, ks)
            return
        self.answer(422, {"error": {"code": "shape_mismatch", "message": "matmul K mismatch",
                                    "field": "inputs[1].shape[0]"}})


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path):
        super().__init__(path, Handler)
        self.seen = []

    def peer_id(self, handler):
        return id(handler.connection)


class TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = []

    def peer_id(self, handler):
        return handler.client_address


class Transport(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hidetd-fake-")
        self.sock = os.path.join(self.dir, "s.sock")
        self.srv = UnixServer(self.sock)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
        os.unlink(self.sock)
        os.rmdir(self.dir)

    def test_keep_alive(self):
        c = hidetd.Client(self.sock)
        for _ in range(5):
            self.assertEqual(c.get("/healthz"), {"status": "ok"})
        self.assertEqual(c.status(), {"version": "fake"})
        self.assertEqual(c._t.connects, 1)
        self.assertEqual(len({s[3] for s in self.srv.seen}), 1, "all requests on one connection")

    def test_server_closed_connection_is_replaced(self):
        c = hidetd.Client("unix:" + self.sock)
        c.get("/close-after")
        self.assertEqual(c.get("/healthz"), {"status": "ok"})
        self.assertEqual(c._t.connects, 2)

    def test_error_mapping(self):
        c = hidetd.Client(self.sock)
        with self.assertRaises(hidetd.HidetdError) as cm:
            c.kernel({"op": "matmul", "inputs": [{"shape": [2, 3], "dtype": "f16"}]})
        e = cm.exception
        self.assertEqual((e.status, e.code, e.message, e.field),
                         (422, "shape_mismatch", "matmul K mismatch", "inputs[1].shape[0]"))
        self.assertIn("422 shape_mismatch", str(e))
        self.assertEqual(json.loads(self.srv.seen[-1][2])["op"], "matmul")
        with self.assertRaises(hidetd.HidetdError) as cm:
            c.get("/v1/kernels/" + "0" * 64)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(hidetd.HidetdError) as cm:
            c.get("/plain-error")
        self.assertEqual(cm.exception.status, 502)
        self.assertIn("bad gateway", str(cm.exception))
        with self.assertRaisesRegex(hidetd.HidetdError, "not JSON"):
            c.get("/not-json")
        # The connection survived every error answer.
        self.assertEqual(c._t.connects, 1)

    def test_cost_model_fallback_warns(self):
        """A kernel set's "warning" (measure answered by the cost model) reaches the caller, for
        a kernel and, once per distinct text, for a graph plan."""
        c = hidetd.Client(self.sock)
        for call in (lambda: c.kernel_set({"op": "fallback"}),
                     lambda: c.plan_json({"graph": {"op": "fallback"}})):
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                call()
            self.assertEqual([str(w.message) for w in got], ["no GPU: chosen by the cost model"])
            self.assertTrue(issubclass(got[0].category, hidetd.HidetdWarning))

    def test_connect_failure_names_address(self):
        missing = os.path.join(self.dir, "missing.sock")
        with self.assertRaises(hidetd.HidetdError) as cm:
            hidetd.Client(missing).status()
        e = cm.exception
        self.assertEqual((e.status, e.code), (0, "connection_failed"))
        self.assertIn("unix:" + missing, str(e))
        self.assertIn("hidetd --socket " + missing, str(e))

    def test_default_address_from_env(self):
        old = os.environ.get("HIDETD_SOCKET")
        os.environ["HIDETD_SOCKET"] = self.sock
        try:
            c = hidetd.Client()
            self.assertEqual(c.address, self.sock)
            self.assertEqual(c.get("/healthz"), {"status": "ok"})
        finally:
            if old is None:
                del os.environ["HIDETD_SOCKET"]
            else:
                os.environ["HIDETD_SOCKET"] = old


class TCP(unittest.TestCase):
    def test_bearer_token(self):
        srv = TCPServer()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            c = hidetd.Client("http://127.0.0.1:%d" % srv.server_address[1], token="s3cret")
            c.status()
            c.get("/healthz")
            self.assertEqual([s[2] for s in srv.seen], ["Bearer s3cret"] * 2)
            self.assertEqual(c._t.connects, 1)
        finally:
            srv.shutdown()
            srv.server_close()

    def test_token_rule(self):
        """One rule in every client: token=, else $HIDETD_TOKEN_FILE's first line, else
        $HIDETD_TOKEN; over TCP only."""
        srv = TCPServer()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d" % srv.server_address[1]
        d = tempfile.mkdtemp(prefix="hidetd-tok-")
        tf = os.path.join(d, "token")
        with open(tf, "w") as f:
            f.write("from-file\nsecond line ignored\n")
        saved = {k: os.environ.pop(k, None) for k in ("HIDETD_TOKEN_FILE", "HIDETD_TOKEN")}
        try:
            os.environ["HIDETD_TOKEN"] = "from-env"
            hidetd.Client(url).status()
            os.environ["HIDETD_TOKEN_FILE"] = tf
            hidetd.Client(url).status()
            hidetd.Client(url, token="given").status()
            self.assertEqual([s[2] for s in srv.seen],
                             ["Bearer from-env", "Bearer from-file", "Bearer given"])
            os.environ["HIDETD_TOKEN_FILE"] = os.path.join(d, "absent")
            with self.assertRaisesRegex(hidetd.HidetdError, "absent"):
                hidetd.Client(url)
            # The Unix socket needs no token: a bad $HIDETD_TOKEN_FILE does not matter there.
            hidetd.Client("unix:" + os.path.join(d, "s.sock"))
            open(tf, "w").close()
            os.environ["HIDETD_TOKEN_FILE"] = tf
            with self.assertRaisesRegex(hidetd.HidetdError, "is empty"):
                hidetd.Client(url)
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
            os.unlink(tf)
            os.rmdir(d)
            srv.shutdown()
            srv.server_close()

    def test_refused_port(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaisesRegex(hidetd.HidetdError, "127.0.0.1:%d" % port):
            hidetd.Client("http://127.0.0.1:%d" % port).status()


if __name__ == "__main__":
    unittest.main()
