"""hidetd._http - the transport: HTTP/1.1 to hidetd over its Unix socket or TCP, one kept-alive
connection per client, and the daemon's error answers turned into HidetdError.

Standard library only (http.client + socket), so importing the package never needs anything
installed beside Python.
"""
import http.client
import json
import os
import socket
import urllib.parse

SYSTEM_SOCKET = "/run/hidetd/hidetd.sock"


class HidetdError(Exception):
    """An error answer of the daemon (status, code, message, field as in docs/api.md), or a
    failure to reach it (status 0, code "connection_failed")."""

    def __init__(self, status, code, message, field=""):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __str__(self):
        where = " (field %s)" % self.field if self.field else ""
        if self.status:
            return "hidetd answered %d %s: %s%s" % (self.status, self.code, self.message, where)
        return self.message


def default_address(environ=None, exists=os.path.exists):
    """The address a client uses when given none; the same rule as the C library's
    hidet_default_address(): $HIDETD_SOCKET (a path or an http:// URL), else
    $XDG_RUNTIME_DIR/hidetd.sock if it exists, else /run/hidetd/hidetd.sock if it exists, else
    $XDG_RUNTIME_DIR/hidetd.sock, else $XDG_CACHE_HOME/hidetd/hidetd.sock, else
    ~/.cache/hidetd/hidetd.sock, else ./hidetd.sock (relative variables are ignored)."""
    env = os.environ if environ is None else environ

    def absolute(name):
        v = env.get(name, "")
        return v if v.startswith("/") else None

    if env.get("HIDETD_SOCKET"):
        return env["HIDETD_SOCKET"]
    rt = absolute("XDG_RUNTIME_DIR")
    user = os.path.join(rt, "hidetd.sock") if rt else None
    if user and exists(user):
        return user
    if exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    if user:
        return user
    if absolute("XDG_CACHE_HOME"):
        return os.path.join(absolute("XDG_CACHE_HOME"), "hidetd", "hidetd.sock")
    if absolute("HOME"):
        return os.path.join(absolute("HOME"), ".cache", "hidetd", "hidetd.sock")
    return "./hidetd.sock"


def parse_address(address):
    """("unix", path, "") or ("http", host:port, path prefix); ValueError when it is neither
    a socket path ("/x", "./x", "unix:/x") nor an http:// URL."""
    if not isinstance(address, str) or not address:
        raise ValueError("hidetd address must be a non-empty string, got %r" % (address,))
    if address.startswith("unix:"):
        path = address[5:]
        if not path:
            raise ValueError("hidetd address %r names no socket path" % address)
        return ("unix", path, "")
    if address.startswith("http://"):
        u = urllib.parse.urlsplit(address)
        if not u.hostname:
            raise ValueError("hidetd address %r has no host" % address)
        return ("http", u.netloc, u.path.rstrip("/"))
    if address.startswith("https://"):
        raise ValueError("hidetd address %r: https is not supported by the Python client; "
                         "use http:// on a trusted network or the Unix socket" % address)
    if address.startswith("/") or address.startswith("."):
        return ("unix", address, "")
    raise ValueError("hidetd address %r is neither a socket path (/path, ./path, unix:path) "
                     "nor an http:// URL" % address)


class UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: http.client's request handling, connected to a socket path."""
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def token_from_file(path):
    """The token in a token file: its first line, as hidetd reads its own --token-file."""
    try:
        with open(path) as f:
            line = f.readline().rstrip("\r\n")
    except OSError as e:
        raise HidetdError(0, "token_file", "cannot read the token file %s: %s"
                          % (path, e.strerror or e)) from None
    if not line:
        raise HidetdError(0, "token_file", "the token file %s is empty" % path)
    return line


def default_token():
    """The bearer token for TCP when the caller gives none, by the rule every hidetd client
    shares (docs/api.md, "Authentication"): the file $HIDETD_TOKEN_FILE names, else
    $HIDETD_TOKEN, else None."""
    path = os.environ.get("HIDETD_TOKEN_FILE")
    if path:
        return token_from_file(path)
    return os.environ.get("HIDETD_TOKEN") or None


class Transport:
    """One kept-alive HTTP connection to the daemon. A request on a connection the daemon
    closed meanwhile (its idle timeout) is sent again once on a fresh connection; hidetd's
    requests are safe to repeat (the same kernel request joins the same job)."""

    def __init__(self, address=None, token=None, timeout=None):
        self.address = address if address is not None else default_address()
        self.kind, self.where, self.prefix = parse_address(self.address)
        if token is None and self.kind == "http":
            token = default_token()
        self.token = token
        self.timeout = timeout
        self._conn = None
        self.connects = 0  # how many connections were opened (the tests check keep-alive)

    def __del__(self):
        self.close()

    def close(self):
        if getattr(self, "_conn", None) is not None:
            self._conn.close()
            self._conn = None

    def _new_conn(self):
        if self.kind == "unix":
            return UnixConnection(self.where, self.timeout)
        return http.client.HTTPConnection(self.where, timeout=self.timeout)

    def _connect_error(self, e):
        if self.kind == "unix":
            how = ("start it with `hidetd --socket %s`, or point $HIDETD_SOCKET (or "
                   "Client(address=...)) at the socket of a running hidetd" % self.where)
            shown = "unix:" + self.where
        else:
            how = "check that hidetd runs there with --http, or use its Unix socket"
            shown = self.address
        return HidetdError(0, "connection_failed",
                           "cannot connect to hidetd at %s (%s); %s" % (shown, e.strerror or e, how))

    def request(self, method, path, body=None):
        """(status, headers, body bytes) of a 2xx answer; HidetdError otherwise."""
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = self._new_conn()
                try:
                    self._conn.connect()
                except OSError as e:
                    self.close()
                    raise self._connect_error(e) from None
                self.connects += 1
            try:
                self._conn.request(method, self.prefix + path, body=body, headers=headers)
                r = self._conn.getresponse()
                data = r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                    http.client.BadStatusLine) as e:
                self.close()
                if reused and attempt == 0:
                    continue
                raise HidetdError(0, "connection_failed", "the connection to hidetd at %s "
                                  "broke: %s" % (self.address, e)) from None
            except socket.timeout:
                self.close()
                raise HidetdError(0, "timeout", "no answer from hidetd at %s within %s s" %
                                  (self.address, self.timeout)) from None
            if r.will_close:
                self.close()
            if 200 <= r.status < 300:
                return r.status, r.headers, data
            raise _error_from_answer(r.status, data)
        raise AssertionError("unreachable")

    def json(self, method, path, body=None):
        status, _, data = self.request(method, path, body)
        try:
            return status, json.loads(data)
        except ValueError:
            raise HidetdError(status, "bad_answer", "hidetd answered %s %s with a body that is "
                              "not JSON: %r" % (method, path, data[:200])) from None


def _error_from_answer(status, data):
    try:
        e = json.loads(data)["error"]
        return HidetdError(status, str(e.get("code", "")), str(e.get("message", "")),
                           str(e.get("field", "") or ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        text = data[:200].decode("utf-8", "replace")
        return HidetdError(status, "http_%d" % status, "hidetd answered %d: %s" % (status, text))
