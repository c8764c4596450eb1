"""clients/python/hidetd_unix.py - HTTP to hidetd over its Unix socket, with the standard library.

http.client speaks TCP only; this connection class keeps its request/response handling and
connects to a socket path instead. Used by bench/ and the Python tests; a Python caller of the
daemon can use it the same way:

    c = UnixHTTPConnection(default_address(), timeout=30)
    c.request("GET", "/healthz"); print(c.getresponse().status)
"""
import http.client
import socket

from hidetd._http import default_address as _package_default_address


def default_address(environ=None):
    """The address a client uses when none is given: the rule of libhidet-client's
    hidet_default_address() (clients/c/include/hidet/client.h), kept in one place, the hidetd
    package next to this file (clients/python/hidetd/_http.py). May return "unix:PATH" or an
    http:// URL when $HIDETD_SOCKET says so."""
    return _package_default_address(environ)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s
