#!/usr/bin/env python3
"""A strict parser of the Prometheus text exposition format 0.0.4, for the ops tests.

Stricter than Prometheus itself on purpose: every sample must belong to a family announced by
# TYPE before it, families are contiguous and appear once, escapes are only those the format
defines, histograms must be complete and consistent (+Inf bucket last and equal to _count,
buckets cumulative, le increasing, _sum present), no blank lines, no duplicate series, and the
text ends with a newline.

Library: parse(text) -> {family: {"type", "help", "samples": [(name, labels, value)]}}, raising
ParseError. Command line:
    metrics_parse.py FILE|-                 parse, print a summary, exit 1 on error
    metrics_parse.py --self-test BINARY     parse `BINARY --dump` and check known values
"""
import math
import re
import subprocess
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ParseError(Exception):
    pass


def _unescape(s, allow_quote, lineno):
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            if i + 1 >= len(s):
                raise ParseError(f"line {lineno}: dangling backslash")
            n = s[i + 1]
            if n == "\\":
                out.append("\\")
            elif n == "n":
                out.append("\n")
            elif n == '"' and allow_quote:
                out.append('"')
            else:
                raise ParseError(f"line {lineno}: invalid escape \\{n}")
            i += 2
            continue
        if c == "\n":
            raise ParseError(f"line {lineno}: raw newline")
        out.append(c)
        i += 1
    return "".join(out)


def _value(s, lineno):
    if s in ("+Inf", "Inf"):
        return math.inf
    if s == "-Inf":
        return -math.inf
    if s == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
        raise ParseError(f"line {lineno}: bad value {s!r}")
    return float(s)


def _labels(s, lineno):
    """Parses 'a="x",b="y"' (the text between the braces)."""
    labels = {}
    i = 0
    while i < len(s):
        m = LABEL.match(s, i)
        if not m:
            raise ParseError(f"line {lineno}: bad label name at {s[i:]!r}")
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ParseError(f"line {lineno}: expected =\" after label {name}")
        i += 2
        j = i
        while j < len(s) and s[j] != '"':
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise ParseError(f"line {lineno}: unterminated label value")
        if name in labels:
            raise ParseError(f"line {lineno}: label {name} repeated")
        if name.startswith("__"):
            raise ParseError(f"line {lineno}: reserved label name {name}")
        labels[name] = _unescape(s[i:j], True, lineno)
        i = j + 1
        if i < len(s):
            if s[i] != ",":
                raise ParseError(f"line {lineno}: expected , between labels")
            i += 1
            if i == len(s):
                raise ParseError(f"line {lineno}: trailing comma in labels")
    return labels


def _sample(line, lineno):
    m = NAME.match(line)
    if not m:
        raise ParseError(f"line {lineno}: bad metric name in {line!r}")
    name = m.group(0)
    rest = line[m.end():]
    labels = {}
    if rest.startswith("{"):
        # Find the closing brace outside quotes.
        i, inq = 1, False
        while i < len(rest):
            c = rest[i]
            if inq and c == "\\":
                i += 2
                continue
            if c == '"':
                inq = not inq
            elif c == "}" and not inq:
                break
            i += 1
        if i >= len(rest):
            raise ParseError(f"line {lineno}: unterminated label set")
        labels = _labels(rest[1:i], lineno)
        rest = rest[i + 1:]
    if not rest.startswith(" ") or rest.startswith("  "):
        raise ParseError(f"line {lineno}: expected one space before the value")
    parts = rest[1:].split(" ")
    if len(parts) not in (1, 2) or parts[0] == "":
        raise ParseError(f"line {lineno}: expected value [timestamp]")
    value = _value(parts[0], lineno)
    if len(parts) == 2 and not re.fullmatch(r"-?\d+", parts[1]):
        raise ParseError(f"line {lineno}: bad timestamp")
    return name, labels, value


def _family_of(name, families):
    if name in families:
        return name
    for sfx in ("_bucket", "_sum", "_count"):
        if name.endswith(sfx) and families.get(name[: -len(sfx)], {}).get("type") in (
                "histogram", "summary"):
            return name[: -len(sfx)]
    return None


def _check_histogram(fam, f):
    series = {}
    for name, labels, value in f["samples"]:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if name == fam + "_bucket":
            if "le" not in labels:
                raise ParseError(f"{fam}: bucket without le")
            s["buckets"].append((_value(labels["le"], 0), value))
        elif name == fam + "_sum":
            s["sum"] = value
        elif name == fam + "_count":
            s["count"] = value
        else:
            raise ParseError(f"{fam}: unexpected sample {name} in a histogram")
    for key, s in series.items():
        b = s["buckets"]
        if not b or b[-1][0] != math.inf:
            raise ParseError(f"{fam}{dict(key)}: the last bucket must be le=\"+Inf\"")
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if not le1 > le0:
                raise ParseError(f"{fam}{dict(key)}: le not increasing")
            if c1 < c0:
                raise ParseError(f"{fam}{dict(key)}: buckets not cumulative")
        if s["count"] is None or s["sum"] is None:
            raise ParseError(f"{fam}{dict(key)}: _sum and _count are required")
        if s["count"] != b[-1][1]:
            raise ParseError(f"{fam}{dict(key)}: _count != +Inf bucket")


def parse(text):
    if text and not text.endswith("\n"):
        raise ParseError("text does not end with a newline")
    families = {}
    order = []
    current = None
    seen = set()
    for lineno, line in enumerate(text.split("\n")[:-1] if text else [], 1):
        if line == "":
            raise ParseError(f"line {lineno}: blank line")
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (\S+) ?(.*)", line)
            if not m:
                continue  # a plain comment
            kind, name, rest = m.groups()
            if not NAME.fullmatch(name):
                raise ParseError(f"line {lineno}: bad metric name {name!r}")
            f = families.get(name)
            if f is None:
                if name in order:
                    raise ParseError(f"line {lineno}: family {name} reappears")
                f = families[name] = {"type": None, "help": None, "samples": []}
                order.append(name)
            elif current != name:
                raise ParseError(f"line {lineno}: family {name} is not contiguous")
            elif f["samples"]:
                raise ParseError(f"line {lineno}: {kind} for {name} after its samples")
            current = name
            if kind == "HELP":
                if f["help"] is not None:
                    raise ParseError(f"line {lineno}: second HELP for {name}")
                f["help"] = _unescape(rest, False, lineno)
            else:
                if f["type"] is not None:
                    raise ParseError(f"line {lineno}: second TYPE for {name}")
                if rest not in TYPES:
                    raise ParseError(f"line {lineno}: unknown type {rest!r}")
                f["type"] = rest
            continue
        name, labels, value = _sample(line, lineno)
        fam = _family_of(name, families)
        if fam is None or families[fam]["type"] is None:
            raise ParseError(f"line {lineno}: sample {name} has no # TYPE before it")
        if fam != current:
            raise ParseError(f"line {lineno}: sample {name} outside its family's block")
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ParseError(f"line {lineno}: duplicate series {name}{labels}")
        seen.add(key)
        ftype = families[fam]["type"]
        if ftype == "histogram" and name == fam:
            raise ParseError(f"line {lineno}: histogram {fam} needs _bucket/_sum/_count samples")
        if ftype == "counter" and not (math.isnan(value) or value >= 0):
            raise ParseError(f"line {lineno}: negative counter {name}")
        if "le" in labels and ftype != "histogram":
            raise ParseError(f"line {lineno}: le label outside a histogram")
        families[fam]["samples"].append((name, labels, value))
    for fam, f in families.items():
        if f["type"] == "histogram":
            _check_histogram(fam, f)
    return families


def value(families, name, labels=None, family=None):
    """The value of one sample (labels must match exactly), or None."""
    fam = family or _family_of(name, families) or name
    for n, l, v in families.get(fam, {}).get("samples", []):
        if n == name and l == (labels or {}):
            return v
    return None


def _self_test(binary):
    out = subprocess.run([binary, "--dump"], check=True, capture_output=True, text=True).stdout
    fams = parse(out)
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    expect(fams["hidetd_requests_total"]["help"] == "All requests; with \\ and\nnewline.", "help")
    expect(value(fams, "hidetd_requests_total") == 12, "counter value")
    expect(value(fams, "hidetd_http_requests_total",
                 {"endpoint": 'weird "quoted" \\ value\n', "code": "500"}) == 1, "escaped label")
    expect(value(fams, "hidetd_inf") == -math.inf, "-Inf")
    expect(math.isnan(value(fams, "hidetd_nan")), "NaN")
    expect(value(fams, "hidetd_request_duration_seconds_count") == 50, "histogram count")
    expect(abs(value(fams, "hidetd_request_duration_seconds_sum")
               - sum(0.00003 * i * i for i in range(50))) < 1e-9, "histogram sum")
    expect(value(fams, "hidetd_compile_seconds_bucket", {"arch": "sm_90", "le": "0.5"}) == 0,
           "bucket below")
    expect(value(fams, "hidetd_compile_seconds_bucket", {"arch": "sm_90", "le": "1"}) == 1,
           "bucket above")
    expect(fams["hidetd_empty"]["samples"] == [], "empty family")
    # The parser must refuse broken texts, or the check above proves nothing.
    broken = [
        out.rstrip("\n"),
        out.replace("# TYPE hidetd_inf gauge\n", ""),
        out.replace('le="+Inf"', 'le="100"'),
        out.replace("hidetd_requests_total 12", "hidetd_requests_total -1"),
        out.replace("\\n", "\\t", 1),
        out + "hidetd_requests_total 13\n",
        out.replace("# TYPE hidetd_nan gauge\n", "# TYPE hidetd_nan gauge\n\n"),
    ]
    for i, text in enumerate(broken):
        try:
            parse(text)
            problems.append(f"broken text {i} was accepted")
        except ParseError:
            pass
    if problems:
        print("metrics_parse self-test failed: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"metrics_parse: {len(fams)} families parsed and checked")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return _self_test(argv[2])
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = sys.stdin.read() if argv[1] == "-" else open(argv[1]).read()
    try:
        fams = parse(text)
    except ParseError as e:
        print(f"metrics_parse: {e}", file=sys.stderr)
        return 1
    for name, f in fams.items():
        print(f"{name} {f['type']} {len(f['samples'])} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
