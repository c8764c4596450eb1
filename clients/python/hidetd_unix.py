"""clients/python/hidetd_unix.py - HTTP to hidetd over its Unix socket, with the standard library.

http.client speaks TCP only; this connection class keeps its request/response handling and
connects to a socket path instead. Used by bench/ and the Python tests; a Python caller of the
daemon can use it the same way:

    c = UnixHTTPConnection(default_address(), timeout=30)
    c.request("GET", "/healthz"); print(c.getresponse().status)
"""
import http.client
import os
import socket


def default_address(environ=None):
    """The address a client uses when none is given: the rule of libhidet-client's
    hidet_default_address() (clients/c/include/hidet/client.h), first match wins:
    $HIDETD_SOCKET as given; $XDG_RUNTIME_DIR/hidetd.sock if it exists; /run/hidetd/hidetd.sock
    if it exists; $XDG_RUNTIME_DIR/hidetd.sock if XDG_RUNTIME_DIR is set, else
    $XDG_CACHE_HOME/hidetd/hidetd.sock, else ~/.cache/hidetd/hidetd.sock (./hidetd.sock without
    HOME). The last rule is where hidetd listens without --socket. May return "unix:PATH" or an
    http:// URL when $HIDETD_SOCKET says so."""
    env = os.environ if environ is None else environ

    def absolute(name):
        v = env.get(name, "")
        return v if v.startswith("/") else None

    if env.get("HIDETD_SOCKET"):
        return env["HIDETD_SOCKET"]
    rt = absolute("XDG_RUNTIME_DIR")
    user = os.path.join(rt, "hidetd.sock") if rt else None
    if user and os.path.exists(user):
        return user
    if os.path.exists("/run/hidetd/hidetd.sock"):
        return "/run/hidetd/hidetd.sock"
    if user:
        return user
    if absolute("XDG_CACHE_HOME"):
        return os.path.join(absolute("XDG_CACHE_HOME"), "hidetd", "hidetd.sock")
    if absolute("HOME"):
        return os.path.join(absolute("HOME"), ".cache", "hidetd", "hidetd.sock")
    return "./hidetd.sock"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s
