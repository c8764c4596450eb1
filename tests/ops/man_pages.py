#!/usr/bin/env python3
"""Renders the man pages as man(1) shows them and checks the TEXT, not only that groff ran.

    man_pages.py HIDETCTL PAGE...

For every page: `groff -man -Tutf8 -ww` prints no warning (a warning is where roff and intent
part: a stray escape, a line that cannot be set), and the rendered text holds no control
character and no roff left unrendered (a font escape written as a form feed rendered as
"cache retuneRB--exacR]"). For hidetctl.1, against the binary's own --help: every command and
cache subcommand is in SYNOPSIS and has an entry of its own in COMMANDS (a tag line, not a
paragraph run into the one before, as `space` once was into `warm`), and every option is
documented.
"""
import os
import re
import subprocess
import sys


def render(page):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-rLL=78n", page], capture_output=True,
                       env=env)
    text = p.stdout.decode("utf-8", "replace")
    # Overstrike (bold, underline) as a terminal draws it: keep the last character.
    text = re.sub(r".\x08", "", text)
    # SGR sequences, where groff emits them instead of overstrike.
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return p.returncode, p.stderr.decode("utf-8", "replace"), text


def sections(text):
    out, name = {}, None
    for line in text.split("\n"):
        if re.match(r"^[A-Z][A-Z ]+$", line):
            name = line.strip()
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def check_page(page, errors):
    rc, err, text = render(page)
    if rc != 0:
        errors.append("%s: groff exited %d" % (page, rc))
    for w in err.strip().splitlines():
        errors.append("%s: %s" % (page, w))
    for i, line in enumerate(text.split("\n"), 1):
        bad = [c for c in line if ord(c) < 32 and c != "\t"]
        if bad:
            errors.append("%s: rendered line %d holds control characters %r: %s"
                          % (page, i, bad, line.strip()))
        if re.search(r"\\f|\\-|\\\(", line):
            errors.append("%s: rendered line %d holds a roff escape: %s" % (page, i, line.strip()))
    return text


def check_hidetctl(hidetctl, page, text, errors):
    helptext = subprocess.run([hidetctl, "--help"], capture_output=True, text=True).stdout
    cmds = []
    for line in helptext.split("\n"):
        m = re.match(r"^  ((?:cache )?[a-z]+)\b", line)
        if m and m.group(1) not in ("cache",):
            cmds.append(m.group(1))
    if len(cmds) < 10:
        errors.append("hidetctl --help: only %d commands found" % len(cmds))
    sec = sections(text)
    synopsis = " ".join(l.strip() for l in sec.get("SYNOPSIS", []))
    commands = sec.get("COMMANDS", [])
    for c in cmds:
        words = c.split()
        if words[0] == "cache":
            if not re.search(r"\bcache\b.*\b%s\b" % words[1], synopsis):
                errors.append("%s: SYNOPSIS lacks 'cache %s'" % (page, words[1]))
        elif not re.search(r"\bhidetctl\b[^|]*?\b%s\b" % words[0], synopsis):
            errors.append("%s: SYNOPSIS lacks '%s'" % (page, c))
        # A tag line of its own: the command at the tag indent (7 spaces), then its operands.
        tag = re.compile(r"^ {7}%s(\s|$)" % r"\s+".join(map(re.escape, words)))
        if not any(tag.match(l) for l in commands):
            errors.append("%s: COMMANDS has no entry of its own for '%s'" % (page, c))
    for opt in sorted(set(re.findall(r"(--[a-z][a-z-]+)", helptext))):
        if opt not in text:
            errors.append("%s: option %s (hidetctl --help) is not documented" % (page, opt))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    hidetctl, pages = sys.argv[1], sys.argv[2:]
    if subprocess.run(["sh", "-c", "command -v groff"], capture_output=True).returncode != 0:
        print("SKIP: groff is not installed")
        return 77
    errors = []
    for page in pages:
        text = check_page(page, errors)
        if os.path.basename(page) == "hidetctl.1":
            check_hidetctl(hidetctl, page, text, errors)
    for e in errors:
        print("FAIL: " + e)
    if not errors:
        print("ok: %d man pages render cleanly" % len(pages))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
