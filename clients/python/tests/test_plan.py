"""Plans and kernel sets as the real daemon answers them (hidetd from $HIDETD_BIN, examples/
graphs/*.json): parsing, binding resolution, the arena layout, and the checks of what a caller
gives (count, names, shape, dtype, contiguity) with their messages; damaged plans are refused
naming the field. Nothing is launched: the tensors are fake __cuda_array_interface__ objects,
and a launch without a driver must say the driver is missing."""
import copy
import os
import unittest

from support import Daemon, FakeTensor, example, fake, hidetd
from hidetd import _cuda

daemon = None


def setUpModule():
    global daemon
    if not os.environ.get("HIDETD_BIN"):
        raise unittest.SkipTest("HIDETD_BIN is not set: the plan tests need a built hidetd "
                                "(meson test -C build python_runtime sets it)")
    daemon = Daemon()


def tearDownModule():
    if daemon:
        daemon.stop()


class Plans(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = hidetd.Client(daemon.sock)
        cls.mlp_json = cls.client.plan_json(example("mlp_block"))
        cls.rn_json = cls.client.plan_json(example("resnet_bottleneck"))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_mlp_bindings(self):
        p = self.client.plan(self.mlp_json)
        self.assertEqual(list(p.inputs), ["x"])
        self.assertEqual(p.inputs["x"], ((2048, 768), "f16"))
        self.assertEqual(p.outputs["y"], ((2048, 768), "f16"))
        self.assertEqual(set(p.weights), {"w1", "b1", "w2", "b2", "ln_gamma", "ln_beta"})
        self.assertEqual(p.prepare, [])
        # Every buffer a kernel names resolves to a caller tensor or an arena offset, and every
        # arena offset is one of the plan's buffers.
        arena = {b["offset"] for b in self.mlp_json["buffers"] if b["region"] == "arena"}
        kinds = set()
        for st in p.steps:
            for buf, src in st.sources.items():
                kinds.add(src[0])
                if src[0] == "arena":
                    self.assertIn(src[1], arena)
        self.assertEqual(kinds, {"input", "weight", "output", "arena"})
        self.assertEqual(p.steps[0].sources["input0"], ("input", "x"))
        self.assertEqual(p.steps[-1].sources["output"], ("output", "y"))

    def test_arena_layout(self):
        # Every buffer lies inside its region, and two arena buffers whose lifetimes (the steps
        # from the first to the last that binds them) meet never share a byte.
        for pj in (self.mlp_json, self.rn_json):
            p = self.client.plan(pj)
            life = {}
            for i, st in enumerate(pj["steps"]):
                for name in st["bindings"].values():
                    if name in p.buffers and p.buffers[name][0] == "arena":
                        first, _ = life.get(name, (i, i))
                        life[name] = (first, i)
            self.assertTrue(life)
            for name, (region, off, size) in p.buffers.items():
                limit = p.arena_bytes if region == "arena" else p.constants_bytes
                self.assertLessEqual(off + size, limit, name)
            for a, (fa, la) in life.items():
                for b, (fb, lb) in life.items():
                    if a < b and fa <= lb and fb <= la:
                        oa, sa = p.buffers[a][1:]
                        ob, sb = p.buffers[b][1:]
                        self.assertTrue(oa + sa <= ob or ob + sb <= oa, "%s and %s overlap" % (a, b))

    def test_resnet_prepare_writes_constants(self):
        p = self.client.plan(self.rn_json)
        self.assertGreater(p.constants_bytes, 0)
        self.assertTrue(p.prepare)
        for st in p.prepare:
            self.assertEqual(st.sources["output"][0], "constants")
            for buf, src in st.sources.items():
                self.assertIn(src[0], ("weight", "constants"), "%s %s" % (st.where, buf))
        conv1 = p.steps[0]
        self.assertEqual(conv1.sources["input2"][0], "constants")

    def test_graph_with_options(self):
        g = example("mlp_block")["graph"]
        p = self.client.graph(g, arch="sm_90", tune="none")
        self.assertEqual(p.json["tune"], "none")

    def test_bad_graph_is_a_hidetd_error(self):
        g = copy.deepcopy(example("mlp_block"))
        g["graph"]["nodes"][0]["inputs"][1] = "nope"
        with self.assertRaises(hidetd.HidetdError) as cm:
            self.client.graph(g)
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field),
                         (422, "invalid_graph", "nodes[0].inputs[1]"))

    def damaged(self, change, pattern):
        pj = copy.deepcopy(self.mlp_json)
        change(pj)
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            self.client.plan(pj)

    def test_damaged_plans(self):
        def binding(pj):
            pj["steps"][1]["bindings"]["input1"] = "w9"
        self.damaged(binding, r"steps\[1\]\.bindings\.input1: 'w9' names no input")

        def unbound(pj):
            del pj["steps"][2]["bindings"]["input2"]
        self.damaged(unbound, r"steps\[2\]\.bindings\.input2: the kernel reads input2")

        def outside(pj):
            pj["buffers"][1]["offset"] = pj["arena_bytes"]
        self.damaged(outside, r"buffers\[1\]: .* lies outside the arena")

        def misaligned(pj):
            pj["buffers"][0]["offset"] = 8
        self.damaged(misaligned, r"buffers\[0\]\.offset")

        def param(pj):
            pj["steps"][0]["kernel_set"]["kernels"][0]["params"][0]["buffer"] = "input7"
        self.damaged(param, r"steps\[0\]\.kernel_set\.kernels\[0\]\.params\[0\]\.buffer: 'input7'")

        def small(pj):
            pj["steps"][1]["bindings"]["input0"] = "x"
        self.damaged(small, r"steps\[1\]\.bindings\.input0: 'x' has 3145728 bytes, too few")

        def writes_weight(pj):
            pj["steps"][0]["bindings"]["output"] = "w1"
        self.damaged(writes_weight, r"writes w1, a caller's weight")

        def dtype(pj):
            pj["inputs"][0]["dtype"] = "f64"
        self.damaged(dtype, r"inputs\[0\]\.dtype")

    def test_caller_checks(self):
        p = self.client.plan(self.mlp_json)
        with self.assertRaisesRegex(RuntimeError, "load_weights\\(\\) first"):
            p(x=fake([2048, 768], "f16"))
        w = {n: fake(s, d) for n, (s, d) in p.weights.items()}
        bad = dict(w, w1=fake([768, 1024], "f16"))
        with self.assertRaisesRegex(ValueError, r"weights\['w1'\]: expected shape \[768, 3072\] f16, "
                                                r"got \[768, 1024\] f16"):
            p.load_weights(bad)
        with self.assertRaisesRegex(ValueError, r"missing weight 'b2' \(\[768\] f16\)"):
            p.load_weights({n: t for n, t in w.items() if n != "b2"})
        with self.assertRaisesRegex(ValueError, "unknown weight 'extra'; the plan's weights are"):
            p.load_weights(dict(w, extra=fake([1], "f16")))
        with self.assertRaisesRegex(ValueError, r"weights\['b1'\]: expected shape \[3072\] f16, got \[3072\] f32"):
            p.load_weights(dict(w, b1=fake([3072], "f32")))
        with self.assertRaisesRegex(TypeError, r"weights\['b1'\]: expected a CUDA tensor"):
            p.load_weights(dict(w, b1=[0.0] * 3072))
        strided = FakeTensor([768, 3072], strides=(2, 1536))
        with self.assertRaisesRegex(ValueError, r"weights\['w1'\]: expected a contiguous"):
            p.load_weights(dict(w, w1=strided))
        p._weights = {}  # past load_weights: the inputs are checked next
        with self.assertRaisesRegex(ValueError, r"missing input 'x' \(\[2048, 768\] f16\)"):
            p.run({})
        with self.assertRaisesRegex(ValueError, r"unknown input 'z'"):
            p.run({"x": fake([2048, 768], "f16"), "z": fake([1], "f16")})
        with self.assertRaisesRegex(ValueError, r"inputs\['x'\]: expected shape \[2048, 768\] f16, got \[2048, 769\] f16"):
            p(x=fake([2048, 769], "f16"))
        with self.assertRaisesRegex(ValueError, r"outputs\['y'\]: expected shape"):
            p.run({"x": fake([2048, 768], "f16")}, outputs={"y": fake([2048, 768], "f32")})

    def test_kernel_checks(self):
        req = {"op": "matmul", "inputs": [{"shape": [64, 128], "dtype": "f16"},
                                          {"shape": [128, 256], "dtype": "f16"}], "tune": "none"}
        k = self.client.kernel(req)
        self.assertEqual(k.output, ((64, 256), "f16"))
        self.assertIn("[64, 256] f16", repr(k))
        with self.assertRaisesRegex(ValueError, r"expected 2 inputs \(\[64, 128\] f16, \[128, 256\] f16\), got 1"):
            k(fake([64, 128], "f16"))
        with self.assertRaisesRegex(ValueError, r"inputs\[1\]: expected shape \[128, 256\] f16, got \[128, 128\] f16"):
            k(fake([64, 128], "f16"), fake([128, 128], "f16"))
        with self.assertRaisesRegex(ValueError, r"output: expected shape \[64, 256\] f16, got \[64, 256\] f32"):
            k(fake([64, 128], "f16"), fake([128, 256], "f16"), output=fake([64, 256], "f32"))

    def test_launch_without_driver_says_so(self):
        k = self.client.kernel({"op": "softmax", "inputs": [{"shape": [4, 32], "dtype": "f32"}],
                                "tune": "none"})
        old_env, old = os.environ.get("HIDETD_LIBCUDA"), _cuda._driver
        os.environ["HIDETD_LIBCUDA"] = "/nonexistent/libcuda.so.1"
        _cuda._driver = None
        try:
            with self.assertRaisesRegex(hidetd.CudaError, r"the CUDA driver \(/nonexistent/libcuda.so.1\) "
                                                          r"cannot be loaded.*needs an NVIDIA GPU"):
                k(fake([4, 32], "f32"))
        finally:
            _cuda._driver = old
            if old_env is None:
                del os.environ["HIDETD_LIBCUDA"]
            else:
                os.environ["HIDETD_LIBCUDA"] = old_env


if __name__ == "__main__":
    unittest.main()
