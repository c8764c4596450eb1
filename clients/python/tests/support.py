"""tests/support.py - shared by the Python runtime's tests: which hidetd package is tested (the
source tree's, or the installed one when HIDETD_TEST_INSTALLED=1), a real hidetd started from
$HIDETD_BIN, fake CUDA tensors (__cuda_array_interface__ objects that are never launched) and a
driver over a test's stand-in for libcuda."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# The examples travel with the repository, not with a copy of the package.
EXAMPLES = os.environ.get("HIDETD_EXAMPLES") or os.path.join(REPO, "examples", "graphs")

if os.environ.get("HIDETD_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(HERE, ".."))
import hidetd  # noqa: E402

if os.environ.get("HIDETD_TEST_INSTALLED") == "1":
    assert not hidetd.__file__.startswith(os.path.join(REPO, "clients")), \
        "HIDETD_TEST_INSTALLED=1 but the source tree's package was imported: %s" % hidetd.__file__


def example(name):
    with open(os.path.join(EXAMPLES, name + ".json")) as f:
        return json.load(f)


class Daemon:
    """hidetd from $HIDETD_BIN on a socket in a temporary directory (no GPU workers)."""

    def __init__(self, extra_args=()):
        self.bin = os.environ.get("HIDETD_BIN")
        self.dir = tempfile.mkdtemp(prefix="hidetd-py-")
        self.sock = os.path.join(self.dir, "hidetd.sock")
        with open(os.path.join(self.dir, "log"), "w") as log:
            self.proc = subprocess.Popen(
                [self.bin, "--socket", self.sock, "--cache", os.path.join(self.dir, "k.db"),
                 "--workers", "none"] + list(extra_args),
                stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("hidetd exited with %d: %s" % (self.proc.returncode, self.log()))
            if os.path.exists(self.sock):
                try:
                    hidetd.Client(self.sock).get("/healthz")
                    return
                except hidetd.HidetdError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("hidetd did not become ready: " + self.log())

    def log(self):
        with open(os.path.join(self.dir, "log")) as f:
            return f.read()[-2000:]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class FakeTensor:
    """A CUDA array as __cuda_array_interface__ describes it; its pointer is never touched."""

    def __init__(self, shape, typestr="<f2", ptr=0x7f0000000000, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": strides}


def fake(shape, dtype):
    return FakeTensor(shape, {"f16": "<f2", "f32": "<f4"}[dtype])


class FakeDriver(hidetd._cuda.Driver):
    """The runtime's driver over `lib`, a test's stand-in for libcuda (recording launches): one
    device, functions named as asked, every pointer on device 0. It encodes tiled tensor maps
    when lib has cuTensorMapEncodeTiled and with_encoder holds, im2col ones when lib has
    cuTensorMapEncodeIm2col and with_encoder and with_im2col hold (a driver with the one
    encoder and not the other)."""

    def __init__(self, lib, with_encoder=True, with_im2col=True):
        self.lib = lib
        self.tensor_map_encode = getattr(lib, "cuTensorMapEncodeTiled", None) if with_encoder else None
        self.tensor_map_encode_im2col = (getattr(lib, "cuTensorMapEncodeIm2col", None)
                                         if with_encoder and with_im2col else None)
        self._contexts = {}

    def use_device(self, ordinal):
        return 1

    def function(self, module, name, shared_bytes):
        return name

    def pointer_device(self, ptr):
        return 0
