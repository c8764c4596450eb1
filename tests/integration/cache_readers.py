#!/usr/bin/env python3
"""Another process reading the kernel cache while hidetd runs, checked from the outside.

    cache_readers.py HIDETD CASE

    CASE: wal-kept

hidetctl opens the daemon's database file directly (cache ls, show, verify, retune). SQLite keeps
its locks on that file as POSIX locks, which a process loses all at once when it closes any
descriptor of the file; hidetd's start-up read-ahead once opened and closed the file after SQLite
had opened it, on a pool thread. From then on hidetctl was the only user its locks could see: on
closing it checkpointed and deleted the WAL under the running daemon, and kernels the daemon
stored afterwards were invisible to every other process (it_cluster's fused retune found "no
artifact"). This case waits until the warm-up is over, lets hidetctl open and close the file,
has the daemon store a kernel, and checks that hidetctl sees it and that the WAL is still there.
Exit 77 (skip) when HIDETD or hidetctl is not built.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
sys.path.insert(0, HERE)
from ops_daemon import Daemon, check  # noqa: E402
from hardening import run_case  # noqa: E402
from attack_reload import hidetctl, kernel_body, post  # noqa: E402
import subprocess  # noqa: E402


def ls(ctl, db):
    p = subprocess.run([ctl, "--cache", db, "cache", "ls"], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0, f"hidetctl cache ls: {p.returncode} {p.stderr}")
    return p.stdout


def case_wal_kept(hidetd, tmp):
    ctl = hidetctl(hidetd)
    d = Daemon(hidetd, tmp)
    try:
        d.wait_healthy()
        db = os.path.join(tmp, "kernels.db")
        deadline = time.monotonic() + 60
        while "start-up warm-up:" not in d.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        check("start-up warm-up:" in d.log(), f"no warm-up line in the log:\n{d.log()}")
        check("0 artifacts" in ls(ctl, db), "a new cache lists no artifact")
        status, body = post(d, kernel_body(0))
        check(status == 200, f"the kernel request answered {status}: {body[:300]}")
        out = ls(ctl, db)
        check("1 artifact" in out, f"hidetctl does not see the kernel the daemon stored:\n{out}")
        check(os.path.exists(db + "-wal"), "the daemon's WAL was deleted under it by hidetctl")
        d.stop()
    finally:
        d.kill()


CASES = {"wal-kept": case_wal_kept}


def main(argv):
    return run_case(argv, CASES, __doc__, "hidetd-readers-")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
