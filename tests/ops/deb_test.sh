#!/usr/bin/env bash
# tests/ops/deb_test.sh - builds the .debs from debian/ and checks them installed in a scratch root.
#
#   deb_test.sh SRC_ROOT CUDA_HOME [WORK_DIR]
#
# The package is built in WORK_DIR/deb-test (meson passes the build tree; default: a scratch
# folder), a path that stays the same from run to run: dpkg-buildflags write the source path into
# the compiler flags (-ffile-prefix-map), so from a new scratch path every time ccache missed and
# the project was compiled from nothing again on every run.
#
# What it does, in order:
#  1. copies the source tree (git's tracked and untracked-but-not-ignored files) to a scratch
#     folder and runs `dpkg-buildpackage -b -uc -us` there (CUDA_HOME passed on);
#  2. lintian on the .changes: every finding is printed; an error (E:) fails the test;
#  3. unpacks hidetd, hidetd-client and libhidet-client-dev into a scratch root (dpkg-deb -x) and
#     does there what their maintainer scripts do: systemd-sysusers and systemd-tmpfiles with
#     --root (the hidetd user and its 0750 directories), `systemctl --root enable hidetd.socket`
#     (what deb-systemd-helper enable does); it checks the postinst holds those calls;
#  4. `systemd-analyze verify` on the installed units, with the packaged hidetd as ExecStart's
#     binary and the packaged man pages;
#  5. ldd of the installed hidetd with LD_LIBRARY_PATH unset and the toolkit's ld.so.conf entry
#     hidden in a private mount namespace (ldd_no_cuda_conf.sh): libnvrtc must come through the
#     RUNPATH;
#  6. the installed hidetd: --version, then started with the installed configuration on a scratch
#     socket and database; the installed hidetctl asks it for status and a kernel;
#  7. a client compiled against libhidet-client-dev through pkg-config (sysroot = scratch root).
#
# Not covered, and why: dpkg itself does not install into the scratch root (`dpkg --root` runs the
# maintainer scripts, whose deb-systemd-helper and systemctl calls would act on this host), and
# the units are not started by a systemd running as PID 1. Exit 77 (skip, with the reason) when
# dpkg-buildpackage or debhelper is missing. The packages are built from source with Debian's
# flags whatever the build this test is registered in (scripts/test.sh runs it once, in the
# sanitizer build: tests/ops/meson.build).
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 SRC_ROOT CUDA_HOME [WORK_DIR]" >&2; exit 2; }
src=$(cd "$1" && pwd) cuda=$2 work=${3:-}
here=$(cd "$(dirname "$0")" && pwd)

for t in dpkg-buildpackage dpkg-deb dh dh_installsysusers; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (apt-get install dpkg-dev debhelper; scripts/setup.sh does)"; exit 77; }
done

tmp=$(mktemp -d)
pkg=$tmp/pkg
if [ -n "$work" ]; then
    pkg=$work/deb-test
    rm -rf "$pkg"
fi
daemon_pid=
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
    rm -rf "$tmp" "$pkg"
}
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
step() { echo; echo "== $*"; }

# 1. Build.
step "dpkg-buildpackage -b -uc -us (CUDA_HOME=$cuda)"
mkdir -p "$pkg/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 cp -P --parents -t "$pkg/src")
else
    (cd "$src" && tar --exclude='./build*' --exclude=./.deps -cf - .) | tar -xf - -C "$pkg/src"
fi
start=$(date +%s)
if ! (cd "$pkg/src" && CUDA_HOME=$cuda dpkg-buildpackage -b -uc -us) > "$tmp/build.log" 2>&1; then
    tail -n 40 "$tmp/build.log"
    echo "FAIL: dpkg-buildpackage"
    exit 1
fi
echo "built in $(($(date +%s) - start)) s:"
(cd "$pkg" && ls -1 ./*.deb)
deb() { ls "$pkg/$1"_*.deb; }
for p in hidetd hidetd-client libhidet-client-dev; do
    [ -f "$(deb "$p" 2>/dev/null)" ] || { echo "FAIL: no $p .deb"; exit 1; }
done

# 2. lintian.
step "lintian"
if command -v lintian >/dev/null; then
    lintian "$pkg"/*.changes > "$tmp/lintian.log" 2>&1 || true
    grep -v '^running with root privileges' "$tmp/lintian.log" || true
    [ -s "$tmp/lintian.log" ] || echo "(no findings)"
    grep -q '^E: ' "$tmp/lintian.log" && bad "lintian reports errors"
else
    echo "note: lintian is not installed; not run"
fi

# 3. Unpack into a scratch root and do what the maintainer scripts do.
step "unpack into a scratch root; sysusers, tmpfiles, enable"
root=$tmp/root
mkdir -p "$root/etc"
for p in hidetd hidetd-client libhidet-client-dev; do
    dpkg-deb -x "$(deb "$p")" "$root"
done
dpkg-deb -e "$(deb hidetd)" "$tmp/ctl"
for want in 'systemd-sysusers ${DPKG_ROOT:+--root="$DPKG_ROOT"} hidetd.conf' \
            "deb-systemd-helper enable 'hidetd.socket'" 'systemd-tmpfiles'; do
    grep -qF -- "$want" "$tmp/ctl/postinst" || bad "hidetd's postinst lacks: $want"
done
grep -q "deb-systemd-invoke \$_dh_action 'hidetd.service'" "$tmp/ctl/postinst" \
    && bad "postinst starts hidetd.service itself (socket activation should)"
grep -qx /etc/hidetd/hidetd.conf "$tmp/ctl/conffiles" || bad "/etc/hidetd/hidetd.conf is not a conffile"
for f in usr/sbin/hidetd usr/libexec/hidetd-worker lib/systemd/system/hidetd.service \
         lib/systemd/system/hidetd.socket usr/lib/sysusers.d/hidetd.conf \
         usr/lib/tmpfiles.d/hidetd.conf etc/hidetd/hidetd.conf usr/bin/hidetctl \
         usr/include/hidet/client.h; do
    [ -e "$root/$f" ] || bad "/$f is not installed"
done
[ -z "$(find "$root" -name 'hidetd-worker-standin*')" ] || bad "the test stand-in worker is packaged"
# The documents the man pages cite (docs/*.md), where their SEE ALSO says they are.
for f in usr/share/doc/hidetd/api.md usr/share/doc/hidetd/operations.md \
         usr/share/doc/hidetd/cluster.md usr/share/doc/hidetd/graphs.md \
         usr/share/doc/hidetd-client/api.md usr/share/doc/hidetd-client/graphs.md; do
    [ -e "$root/$f" ] || [ -e "$root/$f.gz" ] || bad "/$f (cited by a man page) is not installed"
done
if [ "$(id -u)" -eq 0 ] && command -v systemd-sysusers >/dev/null; then
    systemd-sysusers --root="$root" >/dev/null 2>&1 || bad "systemd-sysusers --root failed"
    grep -q '^hidetd:' "$root/etc/passwd" || bad "no hidetd user after sysusers"
    systemd-tmpfiles --root="$root" --create hidetd.conf 2>&1 || bad "systemd-tmpfiles --root failed"
    uid=$(awk -F: '$1 == "hidetd" { print $3 }' "$root/etc/passwd")
    for d in /var/lib/hidetd /var/cache/hidetd; do
        [ "$(stat -c '%a %u' "$root$d" 2>/dev/null)" = "750 $uid" ] \
            || bad "$d not created 0750, owned by the scratch root's hidetd (uid $uid)"
    done
else
    echo "note: not root: sysusers/tmpfiles not applied to the scratch root"
fi
systemctl --root="$root" enable hidetd.socket 2>&1 || bad "systemctl --root enable hidetd.socket"
[ -L "$root/etc/systemd/system/sockets.target.wants/hidetd.socket" ] || bad "hidetd.socket not enabled"

# 4. systemd-analyze verify on the units as installed. The scratch root is no whole system (no
# sysinit.target, no kill), so the units are verified against this host's, with the packaged
# /usr/sbin (hidetd, ExecStart's binary) bind-mounted over the host's in a private mount
# namespace: verify then checks the very binary and man pages the packages install.
step "systemd-analyze verify (the installed units, ExecStart's binary from the package)"
if ! command -v systemd-analyze >/dev/null; then
    echo "note: systemd-analyze is not installed; not run"
elif [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
    echo "note: not root (or no unshare): the packaged /usr/sbin cannot be put in place; not run"
else
    out=$(MANPATH="$root/usr/share/man" unshare -m bash -c 'mount --bind "$1/usr/sbin" /usr/sbin &&
          systemd-analyze verify "$1/lib/systemd/system/hidetd.service" "$1/lib/systemd/system/hidetd.socket"' \
          _ "$root" 2>&1) || bad "systemd-analyze verify failed"
    [ -z "$out" ] && echo "(clean)" || { echo "$out"; bad "systemd-analyze verify printed warnings"; }
fi

# 5. The loader without the toolkit's configuration.
step "ldd /usr/sbin/hidetd without the toolkit's ld.so.conf entry"
echo "RUNPATH: $(readelf -d "$root/usr/sbin/hidetd" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
set +e
bash "$here/ldd_no_cuda_conf.sh" "$root/usr/sbin/hidetd" "$cuda/lib64" 2>&1
rc=$?
set -e
if [ $rc -eq 77 ]; then
    echo "note: not run"
elif [ $rc -ne 0 ]; then
    bad "the packaged hidetd does not load libnvrtc through its RUNPATH alone (above)"
fi

# 6. The installed binaries at work.
step "the installed hidetd and hidetctl"
hidetd=$root/usr/sbin/hidetd
hidetctl=$root/usr/bin/hidetctl
libdir=$(dirname "$(find "$root/usr/lib" -name 'libhidet-client.so.2' | head -1)")
"$hidetd" --version || bad "hidetd --version"
sock=$tmp/hidetd.sock
env -u LD_LIBRARY_PATH "$hidetd" --config "$root/etc/hidetd/hidetd.conf" --socket "$sock" \
    --cache "$tmp/kernels.db" --workers none > "$tmp/hidetd.log" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 600; i++)); do
    grep -q ' ready: ' "$tmp/hidetd.log" && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
done
if grep -q ' ready: ' "$tmp/hidetd.log"; then
    grep ' ready: ' "$tmp/hidetd.log"
    LD_LIBRARY_PATH=$libdir "$hidetctl" --socket "$sock" status || bad "hidetctl status"
    LD_LIBRARY_PATH=$libdir "$hidetctl" --socket "$sock" kernel "$src/examples/requests/matmul.json" \
        > "$tmp/kernel.out" 2>&1 || { cat "$tmp/kernel.out"; bad "hidetctl kernel (NVRTC in the installed hidetd)"; }
    head -3 "$tmp/kernel.out"
    kill "$daemon_pid"
    wait "$daemon_pid" && echo "hidetd stopped (exit 0)" || bad "hidetd did not exit 0 on SIGTERM"
else
    cat "$tmp/hidetd.log"; bad "the installed hidetd did not start"
fi
daemon_pid=

# 7. The -dev package from a client's side.
step "a client built with pkg-config against libhidet-client-dev"
pcdir=$(dirname "$(find "$root/usr/lib" -name hidet-client.pc | head -1)")
cat > "$tmp/client.c" <<'C'
#include <hidet/client.h>
#include <stdio.h>
int main(void)
{
    hidet_address a;
    if (hidet_address_parse("unix:/run/hidetd/hidetd.sock", &a) != 0)
        return 1;
    printf("client: %s\n", a.socket_path);
    return 0;
}
C
flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$pcdir:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
        pkg-config --cflags --libs hidet-client) || bad "pkg-config hidet-client"
echo "pkg-config: $flags"
# shellcheck disable=SC2086
if cc -Wall -Werror -o "$tmp/client" "$tmp/client.c" $flags 2> "$tmp/cc.log"; then
    LD_LIBRARY_PATH=$libdir "$tmp/client" || bad "the client does not run"
else
    cat "$tmp/cc.log"; bad "a client does not build against libhidet-client-dev"
fi

echo
echo "not covered: dpkg -i into this root (maintainer scripts would act on this host), units under systemd as PID 1"
[ "$fail" -eq 0 ] && echo "packaging: .debs built, lintian without errors, installed tree verified"
exit "$fail"
