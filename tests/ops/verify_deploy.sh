#!/usr/bin/env bash
# tests/ops/verify_deploy.sh - checks deploy/ and the man pages the way a packager and systemd see them.
#
#   verify_deploy.sh SERVICE SOCKET SYSUSERS TMPFILES HIDETD HIDETD.8 HIDETD.CONF.5
#
# SERVICE is the configured unit from the build tree (install paths filled in). Its ExecStart
# binary is replaced by HIDETD (the built one) because `systemd-analyze verify` insists the
# binary exists; everything else is verified as installed. The man pages are put on MANPATH so
# verify also proves Documentation=man:... resolves. Exit 77 (skip) without systemd-analyze.
set -euo pipefail
[ $# -eq 7 ] || { echo "usage: $0 SERVICE SOCKET SYSUSERS TMPFILES HIDETD HIDETD.8 HIDETD.CONF.5" >&2; exit 2; }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
service=$(abs "$1") socket=$(abs "$2") sysusers=$(abs "$3") tmpfiles=$(abs "$4")
hidetd=$(abs "$5") man8=$(abs "$6") man5=$(abs "$7")

if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze is not installed"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

if [ ! -x "$hidetd" ]; then
    echo "note: $hidetd is not built; verifying with /bin/true as ExecStart's binary"
    hidetd=/bin/true
fi
mkdir -p "$tmp/units" "$tmp/man/man8" "$tmp/man/man5"
grep -q '^ExecStart=/' "$service" || bad "ExecStart is not an absolute path"
grep -q '@[a-z]*@' "$service" && bad "unsubstituted @variables@ in $service"
sed -E "s|^ExecStart=[^ ]+|ExecStart=$hidetd|" "$service" > "$tmp/units/hidetd.service"
cp "$socket" "$tmp/units/hidetd.socket"
cp "$man8" "$tmp/man/man8/"
cp "$man5" "$tmp/man/man5/"

# 1. The units parse, every setting is known, the binary and the man pages exist.
out=$(MANPATH="$tmp/man" systemd-analyze verify "$tmp/units/hidetd.service" "$tmp/units/hidetd.socket" 2>&1) \
    || bad "systemd-analyze verify failed"
[ -z "$out" ] || { echo "$out"; bad "systemd-analyze verify printed warnings"; }

# 2. What the service must say (the contract with hidetd and the socket unit).
for want in 'Type=notify' 'NotifyAccess=main' 'ExecReload=kill -HUP $MAINPID' 'WatchdogSec=30s' \
            'Restart=on-failure' 'User=hidetd' 'StateDirectory=hidetd' 'RuntimeDirectory=hidetd' \
            'DevicePolicy=closed' 'ProtectSystem=strict' 'ProtectHome=yes' 'PrivateTmp=yes' \
            'NoNewPrivileges=yes' 'LockPersonality=yes' 'SystemCallFilter=@system-service' \
            'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK' \
            '--cache /var/lib/hidetd/kernels.db' '--socket /run/hidetd/hidetd.sock'; do
    grep -qF -- "$want" "$service" || bad "hidetd.service lacks '$want'"
done
grep -qE '^MemoryDenyWriteExecute=yes' "$service" && bad "MemoryDenyWriteExecute=yes is not proven safe with the CUDA driver"
grep -qE '^PrivateDevices=yes' "$service" && bad "PrivateDevices=yes hides /dev/nvidia*"
for want in 'ListenStream=/run/hidetd/hidetd.sock' 'SocketMode=0660' 'SocketGroup=hidetd'; do
    grep -qF -- "$want" "$socket" || bad "hidetd.socket lacks '$want'"
done

# 3. The sandbox stays tight: systemd's own exposure score (0 = locked down, 10 = none) <= 2.5.
if ! systemd-analyze security --offline=yes --threshold=25 "$tmp/units/hidetd.service" > "$tmp/sec" 2>&1; then
    grep -E 'Overall exposure' "$tmp/sec" || tail -3 "$tmp/sec"
    bad "exposure score above 2.5"
fi

# 4. sysusers and tmpfiles, applied to a scratch root (needs root for the chown).
if [ "$(id -u)" -eq 0 ] && command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null; then
    mkdir -p "$tmp/root/etc"
    systemd-sysusers --root="$tmp/root" "$sysusers" >/dev/null 2>&1 || bad "systemd-sysusers failed"
    grep -q '^hidetd:' "$tmp/root/etc/passwd" || bad "sysusers did not create the hidetd user"
    grep -q '^hidetd:' "$tmp/root/etc/group" || bad "sysusers did not create the hidetd group"
    systemd-tmpfiles --root="$tmp/root" --create "$tmpfiles" || bad "systemd-tmpfiles failed"
    for d in /var/lib/hidetd /run/hidetd /var/cache/hidetd; do
        [ "$(stat -c %a "$tmp/root$d" 2>/dev/null)" = 750 ] || bad "$d not created with mode 0750"
    done
else
    echo "note: not root (or no systemd-sysusers/tmpfiles): sysusers/tmpfiles not applied"
fi

# 5. The man pages are clean roff.
if command -v groff >/dev/null; then
    for m in "$man8" "$man5"; do
        w=$(groff -man -ww -z "$m" 2>&1) || bad "groff failed on $m"
        [ -z "$w" ] || { echo "$w"; bad "groff warnings in $m"; }
    done
fi

[ "$fail" -eq 0 ] && echo "deploy: units, sysusers, tmpfiles and man pages verified"
exit "$fail"
