#!/usr/bin/env python3
"""tests/gpu/syscall_filter.py - prints, one per line, the system calls deploy/hidetd.service allows:
SystemCallFilter=@system-service minus ~@privileged, expanded through `systemd-analyze
syscall-filter` (groups nest). Run where systemd is installed; seccomp_exec reads the list on a
machine without systemd."""
import subprocess
import sys

text = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True,
                      check=True).stdout
groups, cur = {}, None
for line in text.splitlines():
    if line.startswith("@"):
        cur = line.split()[0]
        groups[cur] = []
    elif cur and line.strip() and not line.strip().startswith("#"):
        groups[cur].append(line.strip().split()[0])


def expand(name, seen=None):
    seen = seen if seen is not None else set()
    if not name.startswith("@"):
        return {name}
    if name in seen:
        return set()
    seen.add(name)
    out = set()
    for item in groups.get(name, []):
        out |= expand(item, seen)
    return out


allowed = expand("@system-service") - expand("@privileged")
if not allowed:
    sys.exit("no system calls found in systemd-analyze's output")
print("\n".join(sorted(allowed)))
