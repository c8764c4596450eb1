#!/usr/bin/env python3
"""scripts/testlog_report.py - reads meson's testlog.json for scripts/test.sh.

    testlog_report.py skips LOG          every skipped test with the reason it printed
    testlog_report.py summary LOG...     "N passed, N failed, N skipped" over all LOGs
    testlog_report.py slowest N LOG...   the N longest tests over all LOGs, with meson's durations
    testlog_report.py --self-test        checks them on a made-up log

Exit status 77 only says that a test skipped; the reason is what the test printed (the GPU tests
print "no CUDA GPU/driver: skipped (...)"). The reason shown is the last line of its output that
speaks of skipping, else its last line.
"""
import json
import os
import re
import sys
import tempfile

PASSED = ("OK", "EXPECTEDFAIL")


def read(path):
    """The test records of one log, or None when it cannot be read."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return None


def reason(record):
    lines = [l.strip() for l in (record.get("stdout") or "").splitlines() +
             (record.get("stderr") or "").splitlines() if l.strip()]
    said = [l for l in lines if "skip" in l.lower()]
    text = (said or lines or ["(no reason printed; exit status 77)"])[-1]
    # A test that had no reason to give prints "skipped ()": the empty parentheses say nothing.
    text = re.sub(r"\s*\(\s*\)\s*$", "", text)
    return text if len(text) <= 240 else text[:237] + "..."


def skips(path, out):
    records = read(path)
    if records is None:
        out.write(f"cannot read {path}\n")
        return 1
    skipped = [r for r in records if r.get("result") == "SKIP"]
    if not skipped:
        out.write("no test skipped\n")
    for r in skipped:
        out.write(f"  SKIP {r.get('name', '?')}: {reason(r)}\n")
    return 0


def summary(paths, out):
    passed = failed = skipped = 0
    for path in paths:
        records = read(path)
        if records is None:
            failed += 1  # a run that left no log did not pass
            continue
        for r in records:
            if r.get("result") in PASSED:
                passed += 1
            elif r.get("result") == "SKIP":
                skipped += 1
            else:
                failed += 1
    out.write(f"{passed} passed, {failed} failed, {skipped} skipped\n")
    return 0


def slowest(n, paths, out):
    """The n longest tests (wall seconds as meson recorded them), longest first; which log each
    came from is named by its build directory (build, build-asan)."""
    rows = []
    for path in paths:
        for r in read(path) or []:
            build = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
            rows.append((float(r.get("duration") or 0), build, r.get("name", "?")))
    rows.sort(key=lambda row: -row[0])
    for duration, build, name in rows[:n]:
        out.write(f"  {duration:7.1f} s  {build:<10}  {name}\n")
    return 0


def self_test():
    import io
    recs = [
        {"name": "hidetd:gpu / gpu_sched", "result": "SKIP", "duration": 0.5,
         "stdout": "probing\nno CUDA GPU/driver: skipped (no libcuda.so.1)\n"},
        {"name": "hidetd:integration / it_cluster", "result": "SKIP", "duration": 2.5,
         "stdout": "", "stderr": "redis-server not found\n"},
        {"name": "hidetd:gpu / silent", "result": "SKIP", "stdout": ""},
        {"name": "hidetd:gpu / empty", "result": "SKIP", "duration": 0.5,
         "stdout": "no CUDA GPU/driver: skipped ()\n"},
        {"name": "hidetd:unit / ok", "result": "OK", "duration": 30.0, "stdout": "skipped nothing\n"},
        {"name": "hidetd:unit / bad", "result": "FAIL", "duration": 1.0, "stdout": ""},
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
        path = f.name
    out = io.StringIO()
    skips(path, out)
    want = ("  SKIP hidetd:gpu / gpu_sched: no CUDA GPU/driver: skipped (no libcuda.so.1)\n"
            "  SKIP hidetd:integration / it_cluster: redis-server not found\n"
            "  SKIP hidetd:gpu / silent: (no reason printed; exit status 77)\n"
            "  SKIP hidetd:gpu / empty: no CUDA GPU/driver: skipped\n")
    bad = out.getvalue() != want
    out = io.StringIO()
    summary([path, path + ".missing"], out)
    bad |= out.getvalue() != "1 passed, 2 failed, 4 skipped\n"
    out = io.StringIO()
    slowest(2, [path, path + ".missing"], out)
    build = os.path.basename(os.path.dirname(os.path.dirname(path)))
    bad |= out.getvalue() != (f"     30.0 s  {build:<10}  hidetd:unit / ok\n"
                              f"      2.5 s  {build:<10}  hidetd:integration / it_cluster\n")
    print("testlog_report self-test: " + ("FAILED" if bad else "ok"))
    return 1 if bad else 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) == 3 and argv[1] == "skips":
        return skips(argv[2], sys.stdout)
    if len(argv) >= 3 and argv[1] == "summary":
        return summary(argv[2:], sys.stdout)
    if len(argv) >= 4 and argv[1] == "slowest" and argv[2].isdigit():
        return slowest(int(argv[2]), argv[3:], sys.stdout)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
