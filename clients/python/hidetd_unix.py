"""clients/python/hidetd_unix.py - HTTP to hidetd over its Unix socket, with the standard library.

The connection class and the default address are the hidetd package's (clients/python/hidetd,
standard library only), re-exported under the names bench/ and the tests use:

    c = UnixHTTPConnection(default_address(), timeout=30)
    c.request("GET", "/healthz"); print(c.getresponse().status)
"""
from hidetd._http import UnixConnection as UnixHTTPConnection  # noqa: F401 (re-exported)
from hidetd._http import default_address  # noqa: F401 (re-exported)
