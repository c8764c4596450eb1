#!/usr/bin/env python3
"""Keeps the documentation in step with the code.

    check_docs.py daemon/config.h deploy/hidetd.conf docs/man/hidetd.conf.5
    check_docs.py --error-codes SOURCE_ROOT docs/api.md

daemon/config.h's header comment holds the table of keys (section, key, type, default, live or
restart) that the daemon engineer maintains beside the parser. Every key there must appear:
  - in deploy/hidetd.conf, inside its [section], as "#key = ..." (or set);
  - in hidetd.conf(5), under ".SS [section]", as ".BR key " with the same live/restart word;
and neither document may describe a key the table does not have.

--error-codes: every error code the daemon's sources can put in an answer must be listed in
docs/api.md's table of errors under its HTTP status. The codes are read where they are made:
proto_fail / proto__reject / respond_error / proto_respond_error (status, code), the admission
hook's proto_refusal, the resolver's fail(res, status, code), codes written into an error's
`code` field, and the scheduler's job failures fail(j, code, ...), whose status is the one
resolve_error_status (resolve/answer.c) gives them (500 when it names none). A code the table
lists that no source makes is reported too.
"""
import os
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


# Where the daemon makes error codes. Each pattern gives (status or None, code).
CODE = r'"([a-z]+(?:_[a-z]+)*)"'
STATUS_CODE = [
    re.compile(r"\b(?:proto_fail|proto__reject|respond_error|proto_respond_error)\(\s*[^,()]+,"
               r"\s*(\d{3}),\s*" + CODE),
    re.compile(r"\(proto_refusal\)\s*\{\s*(\d{3}),\s*" + CODE),
    re.compile(r"\bfail\(\s*res\s*,\s*(\d{3}),\s*" + CODE),
]
CODE_FIELD = re.compile(r"snprintf\(\s*[\w>.-]+code,\s*sizeof\([^)]*\),\s*" + CODE + r"\s*\)")
JOB_FAIL = re.compile(r'\bfail\(\s*j\s*,\s*((?:[^,"]|"[^"]*")*?)\s*,')
STATUS_MAP = re.compile(r'\{\s*"([a-z_]+)",\s*(\d{3})\s*\}')


def source_codes(root):
    """{(status or None, code): [where, ...]} for every code the daemon's C sources make."""
    found = {}
    files = []
    for top in ("proto", "daemon", "resolve", "scheduler", "graph", "cluster", "kernel_cache",
                "gpu_workers", "op", "tuner"):
        for d, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x != "tests"]
            files += [os.path.join(d, n) for n in names if n.endswith(".c")]
    status_of_job = {}
    answer = os.path.join(root, "resolve", "answer.c")
    text = open(answer).read()
    m = re.search(r"int resolve_error_status\(.*?\n\}", text, re.S)
    if m:
        status_of_job = {c: int(st) for c, st in STATUS_MAP.findall(m.group(0))}
    for path in sorted(files):
        text = open(path, errors="replace").read()
        rel = os.path.relpath(path, root)

        def add(status, code, pos):
            where = f"{rel}:{text.count(chr(10), 0, pos) + 1}"
            found.setdefault((status, code), []).append(where)

        for pat in STATUS_CODE:
            for m in pat.finditer(text):
                add(int(m.group(1)), m.group(2), m.start())
        for m in CODE_FIELD.finditer(text):
            add(None, m.group(1), m.start())
        if rel.startswith("scheduler" + os.sep):
            for m in JOB_FAIL.finditer(text):
                for code in re.findall(CODE, m.group(1)):
                    add(status_of_job.get(code, 500), code, m.start())
    return found


def documented_codes(api_md):
    """{(status, code)} from the rows of the table under '## Errors' in docs/api.md."""
    pairs, in_errors = set(), False
    for line in open(api_md):
        if line.startswith("## "):
            in_errors = line.strip() == "## Errors"
            continue
        m = re.match(r"\|\s*(\d{3})\s*\|([^|]*)\|", line) if in_errors else None
        if m:
            for code in re.findall(r"`([a-z_]+)`", m.group(2)):
                pairs.add((int(m.group(1)), code))
    return pairs


def check_error_codes(root, api_md):
    made = source_codes(root)
    documented = documented_codes(api_md)
    problems = []
    if len(made) < 20 or len(documented) < 20:
        problems.append(f"only {len(made)} codes found in the sources and {len(documented)} in "
                        f"{api_md}: the patterns no longer match")
    doc_codes = {c for _, c in documented}
    for (status, code), where in sorted(made.items(), key=lambda kv: (kv[0][1], kv[0][0] or 0)):
        if status is None:
            if code not in doc_codes:
                problems.append(f"{code} ({where[0]}) is not in the table of errors of {api_md}")
        elif (status, code) not in documented:
            problems.append(f"{status} {code} ({', '.join(where[:3])}) is not in the table of "
                            f"errors of {api_md}")
    made_codes = {c for _, c in made}
    for status, code in sorted(documented):
        if code not in made_codes:
            problems.append(f"{api_md} lists {status} {code}, which no source makes")
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print(f"error codes: {len({c for _, c in made})} codes ({len(made)} status/code pairs) "
              f"made by the sources, all in {api_md}")
    return 1 if problems else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--error-codes":
        return check_error_codes(argv[2], argv[3])
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
