"""clients/python/hidetd_unix.py - HTTP to hidetd over its Unix socket, with the standard library.

The connection class and the default address are the hidetd package's (clients/python/hidetd,
standard library only), re-exported under the names bench/ and the tests use:

    c = UnixHTTPConnection(default_address(), timeout=30)
    c.request("GET", "/healthz"); print(c.getresponse().status)

and `call`, one request on a fresh connection, for the tests that drive a daemon step by step:

    status, doc = call(sock, "POST", "/v1/kernels", {"op": "matmul", ...})
"""
import json

from hidetd._http import UnixConnection as UnixHTTPConnection  # noqa: F401 (re-exported)
from hidetd._http import default_address  # noqa: F401 (re-exported)


def call(sock, method, path, body=None, timeout=120):
    """(status, the answer parsed when it is a JSON object or array, else its bytes); body, when
    given, is sent as JSON."""
    c = UnixHTTPConnection(sock, timeout)
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data[:1] in (b"{", b"[") else data)
