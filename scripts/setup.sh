#!/usr/bin/env bash
# scripts/setup.sh - installs what is missing on a Debian/Ubuntu machine that has the CUDA toolkit,
# then configures and builds hidetd with Meson. Safe to run again: it only does what is missing.
#
#   scripts/setup.sh [BUILD_DIR [MESON_ARGS...]]      (default build dir: build)
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
shift || true

# libhiredis-dev: the cluster tier's Redis client; redis-server: its tests (tests/integration/
# it_cluster.c starts one on a free loopback port).
packages=(meson ninja-build pkg-config gcc libuv1-dev libcjson-dev libsqlite3-dev libsodium-dev
          libhttp-parser-dev libcurl4-openssl-dev libsystemd-dev libseccomp-dev python3 systemd
          sqlite3 libhiredis-dev redis-server)
# debhelper, dpkg-dev, lintian: tests/ops/deb_test.sh builds and checks the .debs (suite
# 'packaging'). Test tools only; scripts/run.sh does not ask for them.
# python3-venv: the virtual environment that holds PyTorch for the backend's tests (below).
# g++: the CPU emulator compiles kernels as host C++ (test tuner_emulated).
if [ -z "${HIDETD_SETUP_NO_TEST_TOOLS:-}" ]; then
    packages+=(debhelper dpkg-dev lintian python3-venv g++)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -e "$cuda/include/nvrtc.h" ]; then
    echo "setup: the CUDA toolkit was not found at $cuda (set CUDA_HOME); it provides NVRTC and ptxas" >&2
    exit 1
fi
export PATH="$cuda/bin:$PATH"

# cuobjdump is used by the tests to read cubins, and disassembles them (-sass: the tests look for
# HGMMA in Hopper kernels) through nvdisasm; some toolkit installs leave both out. NVIDIA ships
# them as Python wheels too: fetch_tool unpacks one into .deps/cuobjdump when the tool is not on
# hand. Only for the tests: scripts/run.sh sets HIDETD_SETUP_NO_TEST_TOOLS=1, running hidetd
# downloads nothing.
fetch_tool() { # TOOL WHAT-WITHOUT-IT
    if [ -n "${HIDETD_SETUP_NO_TEST_TOOLS:-}" ] || command -v "$1" >/dev/null \
            || [ -x ".deps/cuobjdump/nvidia/cu13/bin/$1" ]; then
        return 0
    fi
    echo "setup: $1 not found; fetching NVIDIA's $1 wheel into .deps/"
    python3 -m pip download -q --no-deps -d .deps/wheels "nvidia-cuda-$1>=13,<14" \
        && (cd .deps && mkdir -p cuobjdump && python3 -m zipfile -e wheels/nvidia_cuda_"$1"-*.whl cuobjdump) \
        && chmod +x ".deps/cuobjdump/nvidia/cu13/bin/$1" \
        || echo "setup: could not fetch $1; $2 will say so" >&2
}
fetch_tool cuobjdump "the cubin checks"
fetch_tool nvdisasm "the SASS checks"

# The torch.compile backend's tests (clients/python/tests/test_backend.py, test_models.py) need
# PyTorch, torchvision and transformers: PyPI's wheels, in a virtual environment of the project's
# own (.deps/torch-venv, kept between runs). The wheels are kept outside the clone
# (~/.cache/hidetd/wheels; pip's own cache does not keep them from this registry), so a new clone
# - CI's - installs without downloading them again. About 5.6 GiB and 4 minutes the first time,
# under 2 minutes from the kept wheels. HIDETD_TORCH_VENV points elsewhere;
# HIDETD_SETUP_NO_TORCH=1 skips it (those tests then skip, saying why); a failed install stops
# the setup.
torch_venv=${HIDETD_TORCH_VENV:-$PWD/.deps/torch-venv}
torch_pkgs=(torch torchvision transformers setuptools wheel)
# The modules the backend's tests import (torch.compile's tracer and AOTAutograd, the models'
# libraries), imported once after the install to write their bytecode.
torch_imports='import torch, torchvision, torchvision.models, transformers, torch._dynamo, torch._functorch.aot_autograd, torch._dynamo.backends.common, transformers.models.bert.modeling_bert, transformers.models.gpt2.modeling_gpt2'
torch_pid=""
if [ -z "${HIDETD_SETUP_NO_TEST_TOOLS:-}" ] && [ -z "${HIDETD_SETUP_NO_TORCH:-}" ] \
        && ! "$torch_venv/bin/python" -c 'import torch, torchvision, transformers' 2>/dev/null; then
    # In the background, beside the build below (mostly unpacking, where the build is compiling);
    # waited for, and its failure reported, before this script ends - or, with
    # HIDETD_SETUP_TORCH_NOWAIT=1 (scripts/test.sh, which builds a second tree meanwhile), by the
    # caller: the install writes its exit status to $torch_log.status when it ends.
    echo "setup: installing PyTorch, torchvision and transformers into $torch_venv (once; beside the build)"
    wheels=${XDG_CACHE_HOME:-$HOME/.cache}/hidetd/wheels
    mkdir -p "$wheels" .deps
    torch_log=$PWD/.deps/torch-venv-install.log
    rm -f "$torch_log.status" "$torch_log.pid"
    # --no-compile, then one import of what the backend's tests use, allowed to write bytecode:
    # pip byte-compiles every module it installs (10,635 files, about 63 CPU-seconds, half the
    # install's CPU time), the tests import 3,222 of them (about 26 CPU-seconds to compile here;
    # Python compiles any other on first use). Measured in bench/results/2026-11-29-test-time/
    # ninth-session.md.
    { python3 -m venv "$torch_venv" \
        && "$torch_venv/bin/pip" download -q --disable-pip-version-check -d "$wheels" "${torch_pkgs[@]}" \
        && "$torch_venv/bin/pip" install -q --disable-pip-version-check --no-compile --no-index \
               --find-links "$wheels" "${torch_pkgs[@]}" \
        && env -u PYTHONDONTWRITEBYTECODE "$torch_venv/bin/python" -c "$torch_imports"
      echo $? > "$torch_log.status"; } > "$torch_log" 2>&1 &
    torch_pid=$!
    if [ -n "${HIDETD_SETUP_TORCH_NOWAIT:-}" ]; then
        echo "$torch_pid" > "$torch_log.pid"
        torch_pid=""
    else
        trap '[ -z "$torch_pid" ] || kill "$torch_pid" 2>/dev/null' EXIT
    fi
fi

if [ ! -f "$build_dir/build.ninja" ]; then
    echo "setup: configuring $build_dir${*:+ ($*)}"
    meson setup "$build_dir" -Dcudatoolkit="$cuda" "$@" >/dev/null
fi
# ninja's own progress ([N/M] per step, one updating line on a terminal): a first build takes
# minutes and should not look like a hang.
echo "setup: building in $build_dir"
ninja -C "$build_dir" | { grep -v '^ninja: Entering directory' || true; }
echo "setup: built in $build_dir"
if [ -n "$torch_pid" ]; then
    echo "setup: waiting for the PyTorch install"
    if ! wait "$torch_pid"; then
        torch_pid=""
        tail -n 20 "$torch_log" >&2
        echo "setup: could not install PyTorch into $torch_venv (log: $torch_log; HIDETD_SETUP_NO_TORCH=1 goes on without it; the backend's tests then skip)" >&2
        exit 1
    fi
    torch_pid=""
    echo "setup: PyTorch installed in $torch_venv"
fi
