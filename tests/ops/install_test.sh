#!/usr/bin/env bash
# tests/ops/install_test.sh - what `meson install` puts on a host, checked in a scratch DESTDIR,
# and the build tree's pkg-config file as a client project would use it.
#
#   install_test.sh BUILD_ROOT SBINDIR LIBEXECDIR CUDA_LIB64 [SANITIZE]
#
# SANITIZE is the build's b_sanitize option: a sanitizer build's library needs its runtime, so the
# tiny client is compiled with the same -fsanitize= there.
#
#  1. `meson install --destdir` of BUILD_ROOT; the test stand-in worker must not be installed.
#  2. The installed hidetd carries RUNPATH CUDA_LIB64, and ldd of it finds libnvrtc there
#     without the toolkit's ld.so.conf entry (ldd_no_cuda_conf.sh; skipped with a message when
#     not root). hidetd-worker (when built) links only the driver's libcuda.so.1: no RUNPATH may
#     point it at the toolkit's stubs or the build tree.
#  3. PKG_CONFIG_PATH=BUILD_ROOT/meson-uninstalled: `pkg-config --cflags --libs hidet-client`
#     names no folder with a private header (only hidet/client.h is public), a tiny client
#     compiles, links and runs against the build tree, and the same client cannot include a
#     private header through those flags. The installed .pc is tried the same way
#     (pkg-config --define-prefix over the scratch DESTDIR).
set -euo pipefail
[ $# -eq 4 ] || [ $# -eq 5 ] || { echo "usage: $0 BUILD_ROOT SBINDIR LIBEXECDIR CUDA_LIB64 [SANITIZE]" >&2; exit 2; }
build=$1 sbindir=$2 libexecdir=$3 cuda_lib64=$4 sanitize=${5:-none}
san=()
[ "$sanitize" = none ] || san=("-fsanitize=$sanitize")
here=$(cd "$(dirname "$0")" && pwd)
for t in meson readelf pkg-config cc; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. Install into a scratch root.
dest=$tmp/dest
meson install -C "$build" --no-rebuild --quiet --destdir "$dest" > "$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }
hidetd=$dest$sbindir/hidetd
[ -x "$hidetd" ] || { echo "FAIL: no $sbindir/hidetd installed"; exit 1; }
standin=$(find "$dest" -name 'hidetd-worker-standin*')
[ -z "$standin" ] || bad "the test stand-in worker is installed: $standin"

# 2. RUNPATH to the toolkit, and what the loader makes of it.
runpath_of() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p'; }
rp=$(runpath_of "$hidetd")
echo "$sbindir/hidetd: RUNPATH [${rp}]"
case ":$rp:" in *":$cuda_lib64:"*) ;; *) bad "$sbindir/hidetd has no RUNPATH $cuda_lib64" ;; esac
for b in "$hidetd" "$dest$libexecdir/hidetd-worker"; do
    [ -e "$b" ] || { echo "note: ${b#"$dest"} not built"; continue; }
    rp=$(runpath_of "$b")
    [ "$b" = "$hidetd" ] || echo "${b#"$dest"}: RUNPATH [${rp}]"
    case "$rp" in *"$build"*) bad "${b#"$dest"} RUNPATH points into the build tree" ;; esac
    case "$rp" in *stubs*) bad "${b#"$dest"} RUNPATH names the driver stubs" ;; esac
done
set +e
bash "$here/ldd_no_cuda_conf.sh" "$hidetd" "$cuda_lib64" 2>&1
rc=$?
set -e
if [ $rc -eq 77 ]; then
    echo "note: ldd without the toolkit's loader entry not run"
elif [ $rc -ne 0 ]; then
    bad "the installed hidetd does not load libnvrtc through its RUNPATH alone (above)"
fi

# 3. pkg-config from the build tree (uninstalled) and from the installed .pc.
cat > "$tmp/client.c" <<'C'
#include <hidet/client.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    hidet_address a;
    if (hidet_address_parse("unix:/run/hidetd/hidetd.sock", &a) != 0 || a.kind != HIDET_ADDRESS_UNIX ||
        strcmp(a.socket_path, "/run/hidetd/hidetd.sock") != 0)
        return 1;
    puts("client: ok");
    return 0;
}
C
printf '#include "clients/c/client_internal.h"\nint main(void) { return 0; }\n' > "$tmp/private.c"
printf '#include <client_internal.h>\nint main(void) { return 0; }\n' > "$tmp/private2.c"

src=$(cd "$here/../.." && pwd)
try_pc() { # LABEL, then the pkg-config command line (env and flags)
    local label=$1; shift
    local cflags libs
    cflags=$("$@" --cflags hidet-client) || { bad "$label: pkg-config --cflags failed"; return; }
    libs=$("$@" --libs hidet-client) || { bad "$label: pkg-config --libs failed"; return; }
    echo "$label: Cflags: $cflags"
    echo "$label: Libs: $libs"
    local f d
    for f in $cflags; do
        case $f in -I*) d=${f#-I} ;; *) continue ;; esac
        [ -d "$d" ] || continue
        # Folders of other packages (libcurl's, cJSON's) are theirs; ours are in the trees.
        case $(realpath "$d") in "$(realpath "$build")"*|"$src"*|"$dest"*) ;; *) continue ;; esac
        # Every header under an include folder must be the public one.
        while IFS= read -r h; do
            case $h in */hidet/client.h) ;; *) bad "$label: $d exposes a private header: $h" ;; esac
        done < <(find "$d" -name '*.h')
    done
    local libdir
    libdir=$(echo "$libs" | tr ' ' '\n' | sed -n 's/^-L//p' | head -1)
    # shellcheck disable=SC2086
    if cc "${san[@]}" -Wall -Werror -o "$tmp/client" "$tmp/client.c" $cflags $libs -Wl,-rpath,"$libdir" 2> "$tmp/cc.log"; then
        "$tmp/client" || bad "$label: the client built against it does not run"
    else
        cat "$tmp/cc.log"; bad "$label: a client does not compile and link with these flags"
    fi
    # shellcheck disable=SC2086
    cc -c -o "$tmp/p.o" "$tmp/private.c" $cflags 2>/dev/null && bad "$label: a private header is reachable"
    # shellcheck disable=SC2086
    cc -c -o "$tmp/p.o" "$tmp/private2.c" $cflags 2>/dev/null && bad "$label: client_internal.h is reachable"
    return 0
}
[ -f "$build/meson-uninstalled/hidet-client-uninstalled.pc" ] \
    || bad "no meson-uninstalled/hidet-client-uninstalled.pc in the build tree"
try_pc uninstalled env PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config
pcdir=$(dirname "$(find "$dest" -name hidet-client.pc | head -1)")
if [ -f "$pcdir/hidet-client.pc" ]; then
    prefix=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=prefix hidet-client)
    try_pc installed env PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$dest$prefix"
else
    bad "no hidet-client.pc installed"
fi

[ "$fail" -eq 0 ] && echo "install: RUNPATH, no stand-in, pkg-config from the build tree and installed"
exit "$fail"
