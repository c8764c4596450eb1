"""Plans and kernel sets as the real daemon answers them (hidetd from $HIDETD_BIN, examples/
graphs/*.json): parsing, binding resolution, the arena layout, and the checks of what a caller
gives (count, names, shape, dtype, contiguity) with their messages; damaged plans are refused
naming the field. Nothing is launched: the tensors are fake __cuda_array_interface__ objects,
and a launch without a driver must say the driver is missing."""
import copy
import os
import unittest

from support import Daemon, FakeDriver, FakeTensor, example, fake, hidetd
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

    def test_whole_floats_are_sizes_too(self):
        # 4096.0 bytes is 4096 bytes to libhidet-client's plan loader; the same plan loads here.
        pj = copy.deepcopy(self.mlp_json)
        pj["arena_bytes"] = float(pj["arena_bytes"])
        for b in pj["buffers"]:
            b["offset"], b["bytes"] = float(b["offset"]), float(b["bytes"])
        p, q = self.client.plan(pj), self.client.plan(self.mlp_json)
        self.assertEqual((p.arena_bytes, p.buffers), (q.arena_bytes, q.buffers))
        self.assertTrue(all(type(off) is int and type(size) is int for _, off, size in p.buffers.values()))

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

        def fractional(pj):
            pj["buffers"][0]["bytes"] = 4096.5
        self.damaged(fractional, r"buffers\[0\]\.bytes: expected a non-negative integer")

        def boolean(pj):
            pj["inputs"][0]["shape"][0] = True
        self.damaged(boolean, r"inputs\[0\]\.shape: expected a list of positive integers")

    def test_tensor_map_bindings(self):
        # A tensor map of steps[1]'s input0 (the arena buffer h3, [2048, 3072] f16) as far as h3
        # reaches is accepted; one row more reaches past it and is refused, as a pointer to too
        # few bytes is.
        def with_map(rows):
            def change(pj):
                params = pj["steps"][1]["kernel_set"]["kernels"][0]["params"]
                params.append({"index": len(params), "buffer": "input0", "type": "tensor_map",
                               "tensor_map": {"dtype": "f16", "dims": [3072, rows], "strides": [6144],
                                              "box": [64, 128], "element_strides": [1, 1],
                                              "swizzle": 128, "l2_promotion": 256, "oob_fill": "zero"}})
            return change
        h3 = next(b["bytes"] for b in self.mlp_json["buffers"] if b["name"] == "h3")
        rows = h3 // 6144
        pj = copy.deepcopy(self.mlp_json)
        with_map(rows)(pj)
        p = self.client.plan(pj)
        self.assertEqual(p.steps[1].sources["input0"][0], "arena")
        self.assertEqual(p.steps[1].kernels[0][4][-1][2]["dims"], [3072, rows])
        self.damaged(with_map(rows + 1), r"steps\[1\]\.bindings\.input0: 'h3' has %d bytes, too few "
                                         r"for the tensor map of input0 \(%d bytes\)" % (h3, 6144 * (rows + 1)))

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

    def test_integer_ids(self):
        # An embedding graph: its ids are an i64 input (torch.int64, or typestr "<i8"), checked
        # like any tensor; an i32 tensor for them is refused with both dtypes named.
        graph = {"graph": {
            "inputs": [{"name": "ids", "shape": [2, 8], "dtype": "i64"}],
            "weights": [{"name": "emb", "shape": [100, 64], "dtype": "f16"},
                        {"name": "pos", "shape": [8, 64], "dtype": "f16"}],
            "nodes": [{"op": "embedding", "inputs": ["emb", "ids"], "outputs": ["e"]},
                      {"op": "add", "inputs": ["e", "pos"], "outputs": ["y"]}],
            "outputs": ["y"]}, "tune": "none"}
        p = self.client.plan(self.client.plan_json(graph))
        self.assertEqual(p.inputs["ids"], ((2, 8), "i64"))
        self.assertEqual(p.outputs["y"], ((2, 8, 64), "f16"))
        p._weights = {}  # past load_weights (which needs a driver): the inputs are checked next
        with self.assertRaisesRegex(ValueError, r"inputs\['ids'\]: expected shape \[2, 8\] i64, got \[2, 8\] i32"):
            p(ids=FakeTensor([2, 8], "<i4"))
        from hidetd import _tensor
        self.assertEqual(_tensor.describe(FakeTensor([2, 8], "<i8"), "ids").dtype, "i64")
        self.assertEqual(_tensor.nbytes((2, 8), "i64"), 128)
        self.assertEqual(_tensor.nbytes((3,), "i32"), 12)

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


class FakeLib:
    """Stands in for libcuda: records every cuLaunchKernel with the pointer values it was given."""

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        import ctypes
        n = len(argv)
        self.launches.append((func, (gx, gy, gz), (bx, by, bz), shared, stream,
                              [ctypes.c_uint64.from_address(argv[i]).value for i in range(n)]))
        return 0


class FakeBuf:
    next_ptr = 0x100000000

    def __init__(self, n):
        self.ptr = FakeBuf.next_ptr
        FakeBuf.next_ptr += (n + 0xffff) & ~0xffff


class Launches(unittest.TestCase):
    """What the runtime hands cuLaunchKernel, with a recording stand-in for the driver: every
    parameter gets the caller's pointer or the arena/constants base plus the plan's offset."""

    def setUp(self):
        from hidetd import kernel as kmod
        from hidetd import plan as pmod
        self.saved = (_cuda._driver, pmod._alloc_bytes, kmod._alloc_bytes, kmod.new_tensor)
        self.drv = _cuda._driver = FakeDriver(FakeLib())
        self.allocs = []

        def alloc(n, device, like_torch):
            b = FakeBuf(n)
            self.allocs.append((n, b.ptr))
            return b
        pmod._alloc_bytes = kmod._alloc_bytes = alloc
        self.client = hidetd.Client(daemon.sock)
        self.client._module = lambda key, device: "module-" + key

    def tearDown(self):
        from hidetd import kernel as kmod
        from hidetd import plan as pmod
        _cuda._driver, pmod._alloc_bytes, kmod._alloc_bytes, kmod.new_tensor = self.saved
        self.client.close()

    def test_plan_arguments(self):
        pj = self.client.plan_json(example("resnet_bottleneck"))
        p = self.client.plan(pj)
        weights = {n: FakeTensor(s, {"f16": "<f2", "f32": "<f4"}[d], ptr=0x7000000 + 0x100000 * i)
                   for i, (n, (s, d)) in enumerate(p.weights.items())}
        p.load_weights(weights, stream=77)
        arena_n, arena = self.allocs[0]
        const_n, const = self.allocs[1]
        self.assertEqual((arena_n, const_n), (pj["arena_bytes"], pj["constants_bytes"]))
        x, y = FakeTensor([32, 56, 56, 256], ptr=0x5000000), FakeTensor([32, 56, 56, 256], ptr=0x6000000)
        p.run({"x": x}, outputs={"y": y}, stream=99)
        ptrs = {n: t.__cuda_array_interface__["data"][0] for n, t in dict(weights, x=x, y=y).items()}
        for b in pj["buffers"]:
            ptrs[b["name"]] = (arena if b["region"] == "arena" else const) + b["offset"]
        launched = self.drv.lib.launches
        expect = []
        for phase, stream in (("prepare", 77), ("steps", 99)):
            for st in pj[phase]:
                for k in st["kernel_set"]["kernels"]:
                    args = [0] * len(k["params"])
                    for prm in k["params"]:
                        args[prm["index"]] = ptrs[st["bindings"][prm["buffer"]]]
                    expect.append((k["name"], tuple(k["grid"]), tuple(k["block"]), k["shared_bytes"],
                                   stream, args))
        self.assertEqual(launched, expect)
        # A second run with another input changes only that pointer.
        self.drv.lib.launches = []
        x2 = FakeTensor([32, 56, 56, 256], ptr=0x9000000)
        p.run({"x": x2}, outputs={"y": y}, stream=99)
        again = [(f, g, b, s, st, [0x9000000 if a == 0x5000000 else a for a in args])
                 for f, g, b, s, st, args in expect if st == 99]
        self.assertEqual(self.drv.lib.launches, again)

    def test_kernel_arguments(self):
        from hidetd import kernel as kmod
        kmod.new_tensor = lambda shape, dtype, device, like_torch: FakeTensor(shape, ptr=0xabc000)
        req = {"op": "matmul", "tune": "none",
               "inputs": [{"shape": [64, 128], "dtype": "f16"}, {"shape": [128, 256], "dtype": "f16"},
                          {"shape": [256], "dtype": "f16"}],
               "epilogue": [{"op": "bias", "input": 2}]}
        k = self.client.kernel(req)
        out = k(FakeTensor([64, 128], ptr=0x1000), FakeTensor([128, 256], ptr=0x2000),
                FakeTensor([256], ptr=0x3000), stream=5)
        self.assertEqual(out.__cuda_array_interface__["data"][0], 0xabc000)
        by = {"input0": 0x1000, "input1": 0x2000, "input2": 0x3000, "output": 0xabc000}
        for (f, _, _, _, stream, args), kd in zip(self.drv.lib.launches, k.kernel_set["kernels"]):
            self.assertEqual(f, kd["name"])
            self.assertEqual(stream, 5)
            want = [0] * len(kd["params"])
            for prm in kd["params"]:
                want[prm["index"]] = by.get(prm["buffer"], self.allocs[-1][1] if self.allocs else None)
            self.assertEqual(args, want)
        self.assertEqual(len(self.drv.lib.launches), len(k.kernel_set["kernels"]))


if __name__ == "__main__":
    unittest.main()
