#!/usr/bin/env python3
"""scripts/test_order.py - the plan scripts/test_order.sh follows in scripts/test.sh's whole-suite
run, and the CPU report of such a run.

    test_order.py plan NORMAL_DIR SANITIZER_DIR [--no-suite S]...   the plan, on stdout
    test_order.py cpu PLAN CPU_LOG                                  CPU seconds per test and build
    test_order.py --self-test                                       checks both, and the wrapper

The plan has one line "KEY SECONDS NAME" per test of either build (meson introspect --tests).
KEY is the test's command line with its build directory written as @BUILD@, hashed as
test_order.sh hashes it, so a test has one key in both builds. SECONDS is 0 but for the
sanitizer build's tests that wait for the normal build's run of the same test: those the
sanitizer build runs late on purpose (a negative priority in meson.build: the daemon-driven
tests, the tuner's compile checks, the serial tests) and the normal build runs too (not in a
suite it is told to leave out, as test.sh leaves out one-build there). For those it is the test's
own timeout, the wait's bound.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile


def key(cmd, root):
    """The test's key: as test_order.sh computes it from the wrapper's arguments."""
    h = hashlib.sha256()
    for a in cmd:
        if a == root or a.startswith(root + "/"):
            a = "@BUILD@" + a[len(root):]
        h.update(a.encode() + b"\0")
    return h.hexdigest()


def tests(build_dir):
    out = subprocess.run(["meson", "introspect", build_dir, "--tests"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def suites(t):
    """A test's suites without the project's prefix ('hidetd:unit' -> 'unit')."""
    return {s.split(":", 1)[-1] for s in t.get("suite") or []}


def plan_lines(normal, sanitized, normal_root, sanitized_root, no_suite):
    """The plan's lines from the two builds' introspected tests, and the number that wait."""
    runs_normal = {key(t["cmd"], normal_root) for t in normal if not suites(t) & no_suite}
    lines, waiting, seen = [], 0, set()
    for t in sanitized:
        k = key(t["cmd"], sanitized_root)
        wait = 0
        if (t.get("priority") or 0) < 0 and k in runs_normal:
            wait = max(1, int(t.get("timeout") or 30))
            waiting += 1
        lines.append(f"{k} {wait} {'_'.join(t['name'].split())}")
        seen.add(k)
    for t in normal:
        k = key(t["cmd"], normal_root)
        if k not in seen:
            lines.append(f"{k} 0 {'_'.join(t['name'].split())}")
            seen.add(k)
    return lines, waiting


def plan(args, out):
    if len(args) < 2:
        sys.stderr.write(__doc__)
        return 2
    normal_dir, sanitized_dir, rest = args[0], args[1], args[2:]
    no_suite = set()
    while rest:
        if rest[0] != "--no-suite" or len(rest) < 2:
            sys.stderr.write(__doc__)
            return 2
        no_suite.add(rest[1])
        rest = rest[2:]
    normal_root = os.path.realpath(normal_dir)
    sanitized_root = os.path.realpath(sanitized_dir)
    lines, waiting = plan_lines(tests(normal_dir), tests(sanitized_dir), normal_root, sanitized_root,
                                no_suite)
    out.write("".join(line + "\n" for line in lines))
    if not waiting:
        # Keys that differ between the builds (a build directory under a symbolic link that meson
        # recorded otherwise, say) would make every test run at once, as before: say so.
        sys.stderr.write("test_order: no sanitizer-build test waits for the normal build's run\n")
    return 0


def cpu(args, out):
    """Per test: CPU seconds (user + sys) in each build, from test_order.sh's log; the totals."""
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    names = {}
    with open(args[0]) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                names[parts[0]] = parts[2]
    rows, builds = {}, []
    with open(args[1]) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 6:
                continue
            k, build, user, sys_, wall, waited = parts
            if build not in builds:
                builds.append(build)
            rows.setdefault(names.get(k, k[:12]), {})[build] = (float(user) + float(sys_), float(wall),
                                                                 int(waited))
    builds.sort()
    out.write(f"{'test':<34}" + "".join(f"{b + ' CPU-s':>18}{'wall':>8}{'waited':>8}" for b in builds) + "\n")
    total = {b: 0.0 for b in builds}
    for name in sorted(rows, key=lambda n: -sum(v[0] for v in rows[n].values())):
        cells = ""
        for b in builds:
            c = rows[name].get(b)
            cells += f"{c[0]:18.2f}{c[1]:8.1f}{c[2]:8d}" if c else f"{'-':>18}{'':8}{'':8}"
            total[b] += c[0] if c else 0
        out.write(f"{name:<34}{cells}\n")
    out.write(f"{'total':<34}" + "".join(f"{total[b]:18.2f}{'':16}" for b in builds) + "\n")
    return 0


def self_test():
    """The plan from made-up introspection data, and the wrapper run on it: a planned test waits
    for its mark, an unplanned one does not, ALL ends every wait, the bound holds, and exit
    statuses pass through."""
    bad = []
    # Not the CPU log of a test command this self-test runs under.
    env0 = {k: v for k, v in os.environ.items() if k != "HIDET_TEST_CPU_LOG"}
    here = os.path.dirname(os.path.abspath(__file__))
    wrapper = os.path.join(here, "test_order.sh")
    with tempfile.TemporaryDirectory() as d:
        nroot, sroot = os.path.join(d, "build"), os.path.join(d, "build-asan")
        sh = ["sh", "-c", 'exit "$2"', "sh"]
        normal = [
            {"name": "it_a", "cmd": sh + [nroot + "/x", "0"], "priority": 8, "timeout": 60, "suite": ["p:integration"]},
            {"name": "unit_b", "cmd": sh + [nroot + "/x", "1"], "priority": 0, "timeout": 30, "suite": ["p:unit"]},
            {"name": "skip_c", "cmd": sh + ["/src/c", "77"], "priority": 30, "timeout": 9, "suite": ["p:gpu"]},
        ]
        sanitized = [
            {"name": "it_a", "cmd": sh + [sroot + "/x", "0"], "priority": -5, "timeout": 60, "suite": ["p:integration"]},
            {"name": "unit_b", "cmd": sh + [sroot + "/x", "1"], "priority": 0, "timeout": 30, "suite": ["p:unit"]},
            {"name": "skip_c", "cmd": sh + ["/src/c", "77"], "priority": -20, "timeout": 9, "suite": ["p:gpu"]},
            {"name": "once_d", "cmd": sh + ["/src/d", "0"], "priority": -10, "timeout": 9, "suite": ["p:one-build"]},
        ]
        lines, waiting = plan_lines(normal, sanitized, nroot, sroot, {"one-build"})
        got = {line.split()[2]: int(line.split()[1]) for line in lines}
        if got != {"it_a": 60, "unit_b": 0, "skip_c": 9, "once_d": 0} or waiting != 2:
            bad.append(f"plan: {got}, {waiting} waiting")
        # A test the normal build leaves out does not wait for it.
        lines2, _ = plan_lines(normal, sanitized, nroot, sroot, {"gpu"})
        if {line.split()[2]: int(line.split()[1]) for line in lines2}["skip_c"] != 0:
            bad.append("a suite left out of the normal build still waits")
        order = os.path.join(d, "order")
        os.makedirs(order)
        with open(os.path.join(order, "plan"), "w") as f:
            f.write("".join(line + "\n" for line in lines))

        def run(mode, root, cmd, timeout=20):
            return subprocess.run([wrapper, mode, root, order] + cmd, capture_output=True, text=True,
                                  timeout=timeout, env=env0)

        # No mark yet: it_a waits; unit_b (not planned to wait) runs at once with its status.
        p = subprocess.Popen([wrapper, "wait", sroot, order] + sanitized[0]["cmd"], stderr=subprocess.PIPE, text=True,
                             env=env0)
        r = run("wait", sroot, sanitized[1]["cmd"])
        if r.returncode != 1:
            bad.append(f"unit_b: exit {r.returncode}, want 1")
        try:
            p.wait(timeout=1.5)
            bad.append("it_a did not wait for its mark")
        except subprocess.TimeoutExpired:
            pass
        # The normal build's run marks it (the key the same though the paths differ): it starts.
        r = run("mark", nroot, normal[0]["cmd"])
        if r.returncode != 0 or len(os.listdir(os.path.join(order, "ended"))) != 1:
            bad.append(f"mark: exit {r.returncode}, marks {os.listdir(os.path.join(order, 'ended'))}")
        try:
            rc = p.wait(timeout=5)
            err = p.stderr.read()
            if rc != 0 or "started after the normal build's run ended" not in err:
                bad.append(f"it_a after its mark: exit {rc}, {err!r}")
        except subprocess.TimeoutExpired:
            p.kill()
            bad.append("it_a still waits after its mark")
        # skip_c: the mark of a test ended with 77 is a mark; the status passes through.
        r = run("mark", nroot, normal[2]["cmd"])
        if r.returncode != 77:
            bad.append(f"mark of a skipped test: exit {r.returncode}")
        r = run("wait", sroot, sanitized[2]["cmd"])
        if r.returncode != 77:
            bad.append(f"skip_c: exit {r.returncode}, {r.stderr!r}")
        # The bound: a planned test whose mark never comes starts after SECONDS, saying so.
        with open(os.path.join(order, "plan"), "a") as f:
            f.write(key(sh + ["/src/e", "5"], sroot) + " 1 slow_e\n")
        r = run("wait", sroot, sh + ["/src/e", "5"])
        if r.returncode != 5 or "did not end in 1 s" not in r.stderr:
            bad.append(f"bounded wait: exit {r.returncode}, {r.stderr!r}")
        # ALL (the normal build's meson test ended) ends every wait.
        with open(os.path.join(order, "plan"), "a") as f:
            f.write(key(sh + ["/src/f", "0"], sroot) + " 600 never_f\n")
        open(os.path.join(order, "ended", "ALL"), "w").close()
        r = run("wait", sroot, sh + ["/src/f", "0"], timeout=5)
        if r.returncode != 0:
            bad.append(f"ALL: exit {r.returncode}")
        # The CPU log and its report.
        log = os.path.join(d, "cpu.log")
        env = dict(env0, HIDET_TEST_CPU_LOG=log)
        burn = ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"]
        for mode, root in (("mark", nroot), ("wait", sroot)):
            subprocess.run([wrapper, mode, root, order] + burn, env=env, timeout=20)
        import io
        out = io.StringIO()
        with open(os.path.join(order, "plan"), "a") as f:
            f.write(key(burn, nroot) + " 0 burn\n")
        cpu([os.path.join(order, "plan"), log], out)
        rows = [line.split() for line in out.getvalue().splitlines()]
        burn_row = [r for r in rows if r and r[0] == "burn"]
        if not burn_row or len(burn_row[0]) != 7 or float(burn_row[0][1]) <= 0 or float(burn_row[0][4]) <= 0:
            bad.append(f"cpu report: {out.getvalue()!r}")
    print("test_order self-test: " + ("FAILED\n  " + "\n  ".join(bad) if bad else "ok"))
    return 1 if bad else 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if argv[1:2] == ["plan"]:
        return plan(argv[2:], sys.stdout)
    if argv[1:2] == ["cpu"]:
        return cpu(argv[2:], sys.stdout)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
