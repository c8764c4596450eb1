#!/usr/bin/env python3
"""Keeps the configuration documentation in step with the parser.

    check_docs.py daemon/config.h deploy/hidetd.conf docs/man/hidetd.conf.5

daemon/config.h's header comment holds the table of keys (section, key, type, default, live or
restart) that the daemon engineer maintains beside the parser. Every key there must appear:
  - in deploy/hidetd.conf, inside its [section], as "#key = ..." (or set);
  - in hidetd.conf(5), under ".SS [section]", as ".BR key " with the same live/restart word;
and neither document may describe a key the table does not have.
"""
import re
import sys


def table_keys(config_h):
    keys = {}
    for line in open(config_h):
        m = re.match(r"\s*\*\s*\|\s*\[(\w+)\]\s*\|\s*(\w+)\s*\|.*\|\s*(live|restart)\s*\|\s*$", line)
        if m:
            keys[(m.group(1), m.group(2))] = m.group(3)
    return keys


def conf_keys(path):
    keys, section = set(), None
    for line in open(path):
        m = re.match(r"\s*\[(\w+)\]\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"#?([a-z_]+)\s*=", line)
        if m and section:
            keys.add((section, m.group(1)))
    return keys


def man_keys(path):
    keys, section = {}, None
    for line in open(path):
        m = re.match(r"\.SS \[(\w+)\]", line)
        if m:
            section = m.group(1)
            continue
        if line.startswith(".SH"):
            section = None
        m = re.match(r'\.BR (\w+) "\s*\(.*;\s*(live|restart)\)"', line)
        if m and section:
            keys[(section, m.group(1))] = m.group(2)
    return keys


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    table = table_keys(argv[1])
    conf = conf_keys(argv[2])
    man = man_keys(argv[3])
    problems = []
    if len(table) < 10:
        problems.append(f"only {len(table)} keys found in the table of {argv[1]}")
    for key, when in sorted(table.items()):
        name = f"[{key[0]}] {key[1]}"
        if key not in conf:
            problems.append(f"{name} is missing from {argv[2]}")
        if key not in man:
            problems.append(f"{name} is missing from {argv[3]}")
        elif man[key] != when:
            problems.append(f"{name}: {argv[3]} says {man[key]}, config.h says {when}")
    for key in sorted(conf - set(table)):
        problems.append(f"[{key[0]}] {key[1]} in {argv[2]} is not a known key")
    for key in sorted(set(man) - set(table)):
        problems.append(f"[{key[0]}] {key[1]} in {argv[3]} is not a known key")
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print(f"docs: {len(table)} keys documented in both files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
