"""The C library's plan loader (hidet_plan_* in libhidet-client, through ctypes) on the plans the
real daemon answers for examples/graphs/*.json: parsed, with the same tensors, sizes and buffer
layout as the plan says; binding checks. Needs $HIDET_CLIENT_LIB (meson sets it) and
$HIDETD_BIN; skipped with a message otherwise."""
import ctypes
import json
import os
import unittest

from support import Daemon, example, hidetd

LIB = os.environ.get("HIDET_CLIENT_LIB")
daemon = None


class Error(ctypes.Structure):
    _fields_ = [("http_status", ctypes.c_int), ("code", ctypes.c_char * 32),
                ("message", ctypes.c_char * 512), ("field", ctypes.c_char * 128)]


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 132), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8), ("dtype", ctypes.c_char * 8),
                ("bytes", ctypes.c_uint64)]


def setUpModule():
    global daemon
    if not LIB or not os.environ.get("HIDETD_BIN"):
        raise unittest.SkipTest("HIDET_CLIENT_LIB or HIDETD_BIN is not set (meson leaves the "
                                "library out in a sanitizer build: the C loader's own test "
                                "covers it there)")
    daemon = Daemon()


def tearDownModule():
    if daemon:
        daemon.stop()


class CPlan(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        L = cls.lib = ctypes.CDLL(LIB)
        vp, P = ctypes.c_void_p, ctypes.POINTER
        L.hidet_plan_parse.argtypes = [ctypes.c_char_p, ctypes.c_size_t, P(vp), P(Error)]
        L.hidet_plan_free.argtypes = [vp]
        L.hidet_plan_free.restype = vp
        L.hidet_plan_count.argtypes = [vp, ctypes.c_int]
        L.hidet_plan_count.restype = ctypes.c_size_t
        L.hidet_plan_tensor_at.argtypes = [vp, ctypes.c_int, ctypes.c_size_t]
        L.hidet_plan_tensor_at.restype = P(Tensor)
        L.hidet_plan_arena_bytes.argtypes = L.hidet_plan_constants_bytes.argtypes = [vp]
        L.hidet_plan_arena_bytes.restype = L.hidet_plan_constants_bytes.restype = ctypes.c_uint64
        L.hidet_plan_steps.argtypes = [vp, ctypes.c_bool]
        L.hidet_plan_steps.restype = ctypes.c_size_t
        L.hidet_plan_buffer.argtypes = [vp, ctypes.c_char_p, P(ctypes.c_bool), P(ctypes.c_uint64),
                                        P(ctypes.c_uint64)]
        L.hidet_plan_bind.argtypes = [vp, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, P(Error)]
        with hidetd.Client(daemon.sock) as c:
            cls.plans = {n: c.plan_json(example(n)) for n in ("mlp_block", "resnet_bottleneck")}

    def parse(self, pj):
        text = json.dumps(pj).encode()
        p, err = ctypes.c_void_p(), Error()
        r = self.lib.hidet_plan_parse(text, len(text), ctypes.byref(p), ctypes.byref(err))
        self.assertEqual(r, 0, err.message.decode())
        self.addCleanup(self.lib.hidet_plan_free, p)
        return p

    def test_layout_matches(self):
        L = self.lib
        for name, pj in self.plans.items():
            p = self.parse(pj)
            for role, field in enumerate(("inputs", "weights", "outputs")):
                self.assertEqual(L.hidet_plan_count(p, role), len(pj[field]), name)
                for i, t in enumerate(pj[field]):
                    ct = L.hidet_plan_tensor_at(p, role, i).contents
                    self.assertEqual((ct.name.decode(), list(ct.shape[:ct.rank]), ct.dtype.decode()),
                                     (t["name"], t["shape"], t["dtype"]))
            self.assertEqual(L.hidet_plan_arena_bytes(p), pj["arena_bytes"])
            self.assertEqual(L.hidet_plan_constants_bytes(p), pj["constants_bytes"])
            self.assertEqual(L.hidet_plan_steps(p, False), len(pj["steps"]))
            self.assertEqual(L.hidet_plan_steps(p, True), len(pj["prepare"]))
            for b in pj["buffers"]:
                c, off, n = ctypes.c_bool(), ctypes.c_uint64(), ctypes.c_uint64()
                self.assertEqual(L.hidet_plan_buffer(p, b["name"].encode(), ctypes.byref(c),
                                                     ctypes.byref(off), ctypes.byref(n)), 0)
                self.assertEqual((c.value, off.value, n.value),
                                 (b["region"] == "constants", b["offset"], b["bytes"]))

    def test_request_through_the_client(self):
        L = self.lib
        vp, P = ctypes.c_void_p, ctypes.POINTER
        L.hidet_client_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, P(vp), P(Error)]
        L.hidet_client_free.argtypes = [vp]
        L.hidet_client_free.restype = vp
        L.hidet_plan_request.argtypes = [vp, ctypes.c_char_p, P(vp), P(Error)]
        c, p, err = ctypes.c_void_p(), ctypes.c_void_p(), Error()
        self.assertEqual(L.hidet_client_open(daemon.sock.encode(), None, ctypes.byref(c), ctypes.byref(err)), 0)
        self.addCleanup(L.hidet_client_free, c)
        req = json.dumps(example("resnet_bottleneck")).encode()
        self.assertEqual(L.hidet_plan_request(c, req, ctypes.byref(p), ctypes.byref(err)), 0,
                         err.message.decode())
        self.addCleanup(L.hidet_plan_free, p)
        pj = self.plans["resnet_bottleneck"]
        self.assertEqual(L.hidet_plan_arena_bytes(p), pj["arena_bytes"])
        self.assertEqual(L.hidet_plan_steps(p, True), len(pj["prepare"]))
        bad = json.dumps({"graph": {"inputs": [], "nodes": [], "outputs": []}}).encode()
        p2 = ctypes.c_void_p()
        self.assertEqual(L.hidet_plan_request(c, bad, ctypes.byref(p2), ctypes.byref(err)), -22)
        self.assertIn(err.http_status, (400, 422))

    def test_bind_checks(self):
        p = self.parse(self.plans["mlp_block"])
        err = Error()
        self.assertEqual(self.lib.hidet_plan_bind(p, b"x", 0x10000, 2048 * 768 * 2, ctypes.byref(err)), 0)
        self.assertEqual(self.lib.hidet_plan_bind(p, b"x", 0x10000, 100, ctypes.byref(err)), -22)
        self.assertIn("needs 3145728", err.message.decode())
        self.assertEqual(self.lib.hidet_plan_bind(p, b"h3", 0x10000, 1 << 30, ctypes.byref(err)), -2)

    def test_damaged_plan_is_refused(self):
        pj = json.loads(json.dumps(self.plans["resnet_bottleneck"]))
        pj["prepare"][0]["bindings"]["output"] = "nothing"
        text = json.dumps(pj).encode()
        p, err = ctypes.c_void_p(), Error()
        self.assertEqual(self.lib.hidet_plan_parse(text, len(text), ctypes.byref(p), ctypes.byref(err)), -71)
        self.assertIn("prepare[0].bindings.output: 'nothing' names no input", err.message.decode())


if __name__ == "__main__":
    unittest.main()
