#!/usr/bin/env python3
"""Runs every shell block of README.md and docs/*.md against a scratch daemon, so docs cannot drift.

    doc_blocks.py SRC_ROOT BUILD_ROOT [--list]

Which blocks: every fenced block opened with ```sh (or ```bash, ```shell) in README.md and in
every docs/*.md, found afresh on each run: a new page or a new block is tested without touching
this file. A block that cannot run here is marked by an HTML comment on the line before its fence
(blank lines between are allowed), with the reason, which the test prints:

    <!-- doc-test: skip (needs a GPU) -->

Any other `doc-test:` comment, or a skip without a reason, fails the test (a typo must not turn a
block off silently).

How a page runs: in a scratch folder that stands for the repository root (each top-level entry of
SRC_ROOT linked in, `build` linked to BUILD_ROOT), with HOME, XDG_RUNTIME_DIR and XDG_CACHE_HOME
in the scratch folder, so the docs' `./hidetd.sock` and `${XDG_RUNTIME_DIR:-.}/hidetd.sock` are
the same file and nothing outside the scratch folder and the build tree is written. Before a
block the test starts its own daemon there (`build/daemon/hidetd --socket ./hidetd.sock --cache
... --workers none`: no GPU needed; `tune: "measure"` falls back to the cost model) unless one is
serving; a block that runs `scripts/run.sh` starts hidetd itself, so the test's daemon is stopped
before it. The blocks of one page run in order and share that daemon, like a reader pasting them
one after the other.

Each block runs in `bash -e -o pipefail` with `curl` standing for `curl -sS --fail-with-body`
(errors shown, no progress meter): a command that fails, or an HTTP answer >= 400, fails the block
and the test; so does a block still running after BLOCK_TIMEOUT. At the end of a page
everything its blocks left running (their process groups) and the test's daemon are stopped.
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FENCE_OPEN = re.compile(r"^(\s*)```(sh|bash|shell)\s*$")
FENCE_ANY = re.compile(r"^\s*```")
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:(.*?)-->\s*$")
SKIP = re.compile(r"^\s*skip\s*\((.+)\)\s*$")
BLOCK_TIMEOUT = 600.0  # seconds; the first request of a page compiles with NVRTC (slow under ASan)
START_TIMEOUT = 60.0

PRELUDE = """\
curl() { command curl -sS --fail-with-body "$@"; }
set -e -o pipefail
"""


class Block:
    def __init__(self, path, line, text, skip):
        self.path, self.line, self.text, self.skip = path, line, text, skip

    def where(self):
        return "%s:%d" % (self.path, self.line)


def parse(path, rel):
    """Returns ([Block], [error]) for one Markdown file."""
    blocks, errors = [], []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    directive = None  # (line number, text) of the last doc-test comment before a fence
    while i < len(lines):
        line = lines[i]
        d = DIRECTIVE.match(line)
        if d:
            directive = (i + 1, d.group(1).strip())
            i += 1
            continue
        m = FENCE_OPEN.match(line)
        if m:
            indent = len(m.group(1))
            start = i + 1
            body = []
            i += 1
            while i < len(lines) and not FENCE_ANY.match(lines[i]):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            skip = None
            if directive:
                s = SKIP.match(directive[1])
                if s:
                    skip = s.group(1).strip()
                else:
                    errors.append("%s:%d: unknown doc-test comment %r (only 'skip (reason)')"
                                  % (rel, directive[0], directive[1]))
            blocks.append(Block(rel, start, "\n".join(body) + "\n", skip))
            directive = None
            i += 1
            continue
        if FENCE_ANY.match(line):  # another language's block: skip over it whole
            i += 1
            while i < len(lines) and not FENCE_ANY.match(lines[i]):
                i += 1
        if line.strip() and directive and not FENCE_ANY.match(line):
            errors.append("%s:%d: doc-test comment not followed by a sh block" % (rel, directive[0]))
            directive = None
        i += 1
    if directive:
        errors.append("%s:%d: doc-test comment not followed by a sh block" % (rel, directive[0]))
    return blocks, errors


def healthz(sock_path, timeout=2.0):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


class Page:
    """The scratch repository root of one page, its environment and its daemon."""

    def __init__(self, src, build, rel):
        self.dir = tempfile.mkdtemp(prefix="doc-test-")
        for name in os.listdir(src):
            if name.startswith(".") or name.startswith("build"):
                continue
            os.symlink(os.path.join(src, name), os.path.join(self.dir, name))
        os.symlink(build, os.path.join(self.dir, "build"))
        for d in ("home", "cache"):
            os.mkdir(os.path.join(self.dir, d))
        self.sock = os.path.join(self.dir, "hidetd.sock")
        env = dict(os.environ)
        for k in ("HIDETD_TOKEN", "HIDETD_TOKEN_FILE", "HIDETD_ADDRESS", "LD_LIBRARY_PATH"):
            env.pop(k, None)
        env.update(HOME=os.path.join(self.dir, "home"), XDG_RUNTIME_DIR=self.dir,
                   XDG_CACHE_HOME=os.path.join(self.dir, "cache"), HIDETD_SOCKET=self.sock,
                   PWD=self.dir)
        self.env = env
        self.daemon = None
        self.daemon_log = os.path.join(self.dir, "hidetd.test.log")
        self.groups = []

    def start_daemon(self):
        if self.daemon and self.daemon.poll() is None and healthz(self.sock):
            return
        if healthz(self.sock):
            return  # a block started one (scripts/run.sh --background)
        cmd = ["build/daemon/hidetd", "--socket", "./hidetd.sock", "--cache",
               os.path.join(self.dir, "kernels.db"), "--workers", "none"]
        print("  (the test starts: %s)" % " ".join(cmd))
        self.daemon = subprocess.Popen(cmd, cwd=self.dir, env=self.env,
                                       stdout=open(self.daemon_log, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if healthz(self.sock):
                return
            if self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("the scratch daemon did not come up; its log:\n" + self.log_tail())

    def stop_daemon(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.daemon = None

    def log_tail(self):
        try:
            return "".join(open(self.daemon_log, errors="replace").readlines()[-20:])
        except OSError:
            return "(no log)"

    def run(self, block):
        """Runs one block; returns (ok, output)."""
        # Output goes to a file, not a pipe: a daemon the block leaves running keeps its stdout
        # open, and the block is over when bash exits, not when that daemon does.
        out_path = os.path.join(self.dir, "block.out")
        with open(out_path, "wb") as out_f:
            p = subprocess.Popen(["bash", "-c", PRELUDE + block.text], cwd=self.dir, env=self.env,
                                 stdout=out_f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        self.groups.append(p.pid)
        try:
            p.wait(timeout=BLOCK_TIMEOUT)
            ok, note = p.returncode == 0, "" if p.returncode == 0 else "\n(exit status %d)" % p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            ok, note = False, "\n(timed out after %ds)" % BLOCK_TIMEOUT
        with open(out_path, "rb") as f:
            return ok, f.read().decode(errors="replace") + note

    def close(self):
        self.stop_daemon()
        # What the blocks left running (hidetd from scripts/run.sh --background): TERM, then KILL.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = []
            for g in self.groups:
                try:
                    os.killpg(g, sig)
                    alive.append(g)
                except ProcessLookupError:
                    pass
            if not alive:
                break
            deadline = time.monotonic() + 30
            while alive and time.monotonic() < deadline:
                alive = [g for g in alive if group_alive(g)]
                time.sleep(0.1)
        shutil.rmtree(self.dir, ignore_errors=True)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def shorten(text, limit=4000):
    return text if len(text) <= limit else text[:limit // 2] + "\n[...]\n" + text[-limit // 2:]


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    src, build = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    list_only = "--list" in argv[3:]
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    failures, errors, ran, skipped = [], [], 0, 0
    for path in pages:
        rel = os.path.relpath(path, src)
        blocks, errs = parse(path, rel)
        errors += errs
        runnable = [b for b in blocks if not b.skip]
        print("== %s: %d sh block(s), %d to run" % (rel, len(blocks), len(runnable)))
        for b in blocks:
            if b.skip:
                print("SKIP %s: %s" % (b.where(), b.skip))
                skipped += 1
        if list_only or not runnable:
            for b in runnable:
                print("RUN  %s" % b.where())
            continue
        if not os.access(os.path.join(build, "daemon", "hidetd"), os.X_OK):
            print("SKIP: %s/daemon/hidetd is not built" % build)
            return 77
        page = Page(src, build, rel)
        try:
            for b in runnable:
                print("RUN  %s" % b.where())
                try:
                    if re.search(r"\bscripts/run\.sh\b", b.text):
                        page.stop_daemon()  # the block starts hidetd itself
                    else:
                        page.start_daemon()
                    ok, out = page.run(b)
                except RuntimeError as e:
                    ok, out = False, str(e)
                ran += 1
                print("\n".join("  $ " + l for l in b.text.rstrip("\n").split("\n")))
                print("\n".join("  | " + l for l in shorten(out).rstrip("\n").split("\n")) if out else "  |")
                if ok:
                    print("  ok")
                else:
                    print("  FAIL %s; the scratch daemon's log ends:\n%s" % (b.where(), page.log_tail()))
                    failures.append(b.where())
        finally:
            page.close()
    for e in errors:
        print("FAIL: " + e)
    print("doc blocks: %d run, %d failed, %d skipped%s" % (
        ran, len(failures), skipped, (": " + ", ".join(failures)) if failures else ""))
    return 1 if failures or errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
