"""Tensor-map parameters (docs/api.md): a kernel set's "tensor_map" params parsed as strictly as
the daemon writes them (op/tmap.c), damaged ones refused naming the member, buffers smaller than
a map's extent refused, and what the launcher hands the driver: each map encoded for its
buffer's address at the first launch and again only when that address changes, kernelParams
pointing to its 128 bytes at a 64-byte aligned address. Needs no daemon and no GPU: kernel sets
and plans are written here, and a recording stand-in replaces the driver."""
import copy
import ctypes
import unittest

from support import FakeDriver, FakeTensor, hidetd
from hidetd import _cuda
from hidetd.kernel import parse_kernel_set

KEY = "5a" * 32
# A [128, 256] f16 row-major operand as its TMA map: dimension 0 the contiguous one.
A_MAP = {"dtype": "f16", "dims": [256, 128], "strides": [512], "box": [64, 64],
         "element_strides": [1, 1], "swizzle": 128, "l2_promotion": 256, "oob_fill": "zero"}
REQUEST = {"op": "matmul", "inputs": [{"shape": [128, 256], "dtype": "f16"},
                                      {"shape": [256, 64], "dtype": "f16"}]}
FIELD = r"kernel_set\.kernels\[0\]\.params\[3\]"
MAP_MARK = 0x7e4d << 48


def kernel_set(tmap=None, param=None):
    """A kernel set of one kernel: three pointers, then a tensor map of input0 (`tmap`, or
    `param` as the whole fourth parameter)."""
    params = [{"index": 0, "buffer": "input0", "type": "pointer"},
              {"index": 1, "buffer": "input1", "type": "pointer"},
              {"index": 2, "buffer": "output", "type": "pointer"},
              param or {"index": 3, "buffer": "input0", "type": "tensor_map",
                        "tensor_map": copy.deepcopy(A_MAP if tmap is None else tmap)}]
    return {"key": KEY, "workspace_bytes": 0, "output": {"shape": [128, 64], "dtype": "f16"},
            "kernels": [{"name": "k_tma", "grid": [2, 1, 1], "block": [128, 1, 1],
                         "shared_bytes": 0, "params": params}]}


def with_map(**changes):
    m = dict(A_MAP, **changes)
    return kernel_set({k: v for k, v in m.items() if v is not None})


class Parse(unittest.TestCase):
    def refused(self, ks, pattern):
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            parse_kernel_set(ks, 2, "kernel_set")

    def test_accepted(self):
        key, ws, kernels = parse_kernel_set(kernel_set(), 2, "kernel_set")
        self.assertEqual((key, ws), (KEY, 0))
        name, grid, block, shared, params = kernels[0]
        self.assertEqual(name, "k_tma")
        self.assertEqual([p[:2] for p in params],
                         [(0, "input0"), (1, "input1"), (2, "output"), (3, "input0")])
        self.assertEqual([p[2] for p in params[:3]], [None, None, None])
        tmap = params[3][2]
        self.assertEqual(tmap, A_MAP)
        self.assertEqual((tmap["dims"], tmap["strides"], tmap["box"], tmap["swizzle"],
                          tmap["l2_promotion"], tmap["oob_fill"]),
                         ([256, 128], [512], [64, 64], 128, 256, "zero"))

    def test_rank_one_and_five(self):
        one = {"dtype": "f32", "dims": [1024], "strides": [], "box": [32], "element_strides": [1],
               "swizzle": 0, "l2_promotion": 0, "oob_fill": "nan"}
        self.assertEqual(parse_kernel_set(kernel_set(one), 2, "kernel_set")[2][0][4][3][2], one)
        five = dict(A_MAP, dims=[64, 2, 2, 2, 2], strides=[128, 256, 512, 1024],
                    box=[64, 1, 1, 1, 1], element_strides=[1, 1, 1, 1, 2])
        self.assertEqual(parse_kernel_set(kernel_set(five), 2, "kernel_set")[2][0][4][3][2], five)

    def test_unknown_member(self):
        self.refused(with_map(interleave=0), FIELD + r"\.tensor_map\.interleave: unknown member")

    def test_missing_members(self):
        self.refused(with_map(box=None), FIELD + r"\.tensor_map\.box: box must be an array, got None")
        self.refused(with_map(oob_fill=None), FIELD + r"\.tensor_map\.oob_fill: oob_fill must be")
        self.refused(with_map(dtype=None), FIELD + r"\.tensor_map\.dtype: dtype must be")
        param = {"index": 3, "buffer": "input0", "type": "tensor_map"}
        self.refused(kernel_set(param=param), FIELD + r"\.tensor_map: a tensor map must be an object")

    def test_bad_swizzle(self):
        self.refused(with_map(swizzle=48), FIELD + r"\.tensor_map\.swizzle: swizzle must be 0, 32, "
                                                   r"64 or 128 bytes, got 48")
        # false == 0 in Python: a JSON boolean is still no number of bytes.
        self.refused(with_map(swizzle=False), FIELD + r"\.tensor_map\.swizzle: .*got False")
        self.refused(with_map(l2_promotion=32), FIELD + r"\.tensor_map\.l2_promotion: ")

    def test_box_wider_than_swizzle(self):
        self.refused(with_map(swizzle=64), FIELD + r"\.tensor_map\.box\[0\]: the box's inner "
                                                   r"dimension \(128 bytes\) exceeds the swizzle "
                                                   r"span \(64 bytes\)")
        # Without a swizzle the same box is fine, and one of 8 bytes is not.
        parse_kernel_set(with_map(swizzle=0), 2, "kernel_set")
        self.refused(with_map(swizzle=0, box=[4, 64]), FIELD + r"\.tensor_map\.box\[0\]: .*multiple "
                                                               r"of 16 bytes, got 8 bytes")

    def test_strides_count(self):
        self.refused(with_map(strides=[512, 512]), FIELD + r"\.tensor_map\.strides: the number of "
                                                           r"strides entries must be 1, got 2")
        self.refused(with_map(strides=[]), FIELD + r"\.tensor_map\.strides: .* must be 1, got 0")
        self.refused(with_map(box=[64]), FIELD + r"\.tensor_map\.box: .* must be 2, got 1")

    def test_ranges(self):
        self.refused(with_map(strides=[520]), FIELD + r"\.tensor_map\.strides\[0\]: a stride must "
                                                      r"be a positive multiple of 16 bytes")
        self.refused(with_map(strides=[1 << 40]), FIELD + r"\.tensor_map\.strides\[0\]: strides "
                                                          r"entries must be whole numbers")
        self.refused(with_map(dims=[256, 0]), FIELD + r"\.tensor_map\.dims\[1\]: ")
        self.refused(with_map(dims=[256, 128.0]), FIELD + r"\.tensor_map\.dims\[1\]: ")
        self.refused(with_map(box=[64, 257]), FIELD + r"\.tensor_map\.box\[1\]: ")
        self.refused(with_map(element_strides=[1, 9]), FIELD + r"\.tensor_map\.element_strides\[1\]: ")
        self.refused(with_map(dims=[8] * 6, strides=[16] * 5, box=[8] * 6, element_strides=[1] * 6),
                     FIELD + r"\.tensor_map\.dims: the number of dims entries must be 1\.\.5, got 6")
        self.refused(with_map(dtype="f64"), FIELD + r"\.tensor_map\.dtype: ")
        self.refused(with_map(oob_fill="one"), FIELD + r"\.tensor_map\.oob_fill: ")

    def test_unknown_param_type(self):
        param = {"index": 3, "buffer": "input0", "type": "texture"}
        self.refused(kernel_set(param=param), FIELD + r"\.type: 'texture' is not a parameter kind "
                                                      r"this client can pass \(pointer, tensor_map\)")

    def test_map_buffer_checked_like_a_pointer(self):
        param = {"index": 3, "buffer": "input2", "type": "tensor_map", "tensor_map": A_MAP}
        self.refused(kernel_set(param=param), FIELD + r"\.buffer: 'input2', but the request has 2 inputs")

    def test_kernel_buffer_smaller_than_map(self):
        hidetd.Kernel(None, kernel_set(), REQUEST)  # the map spans input0 exactly
        with self.assertRaisesRegex(hidetd.PlanError, r"kernel_set: input0 has 65536 bytes, too few "
                                                      r"for the tensor map of input0 \(66048 bytes\)"):
            hidetd.Kernel(None, with_map(dims=[256, 129]), REQUEST)


def plan_json(tmap):
    """A plan of one step whose kernel reads input0 (x, 64 KiB) through `tmap`."""
    return {"graph_key": "g", "arena_bytes": 0,
            "inputs": [{"name": "x", "shape": [128, 256], "dtype": "f16"},
                       {"name": "w", "shape": [256, 64], "dtype": "f16"}],
            "outputs": [{"name": "y", "shape": [128, 64], "dtype": "f16"}],
            "steps": [{"request": REQUEST, "kernel_set": kernel_set(tmap),
                       "bindings": {"input0": "x", "input1": "w", "output": "y"}}]}


class Plans(unittest.TestCase):
    def test_bound_buffer_smaller_than_map(self):
        p = hidetd.Plan(None, plan_json(A_MAP))
        self.assertEqual(p.steps[0].sources["input0"], ("input", "x"))
        # A map two rows taller than x, with a wider row pitch, reaches past it.
        tall = dict(A_MAP, dims=[256, 130], strides=[1024])
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.bindings\.input0: 'x' has 65536 "
                                                      r"bytes, too few for the tensor map of input0 "
                                                      r"\(132608 bytes\)"):
            hidetd.Plan(None, plan_json(tall))

    def test_damaged_map_in_a_plan(self):
        with self.assertRaisesRegex(hidetd.PlanError, r"steps\[0\]\.kernel_set\.kernels\[0\]\.params\[3\]"
                                                      r"\.tensor_map\.swizzle: "):
            hidetd.Plan(None, plan_json(dict(A_MAP, swizzle=16)))


class FakeLib:
    """Stands in for libcuda: records each launch's kernelParams (where each points, and the
    8 bytes there) and each cuTensorMapEncodeTiled."""

    def __init__(self):
        self.launches = []
        self.encodes = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        self.launches.append((func, stream, [argv[i] for i in range(len(argv))],
                              [ctypes.c_uint64.from_address(argv[i]).value for i in range(len(argv))]))
        return 0

    def cuTensorMapEncodeTiled(self, out, dtype, rank, address, dims, strides, box, es, interleave,
                               swizzle, l2, oob):
        self.encodes.append((dtype, rank, address, list(dims), list(strides)[:rank - 1], list(box),
                             list(es), interleave, swizzle, l2, oob))
        # What a launch must then carry: the address this map was encoded for, marked so that it
        # differs from the pointer parameter's value.
        ctypes.c_uint64.from_address(out).value = MAP_MARK | address
        return 0


class FakeClient:
    def _module(self, key, device):
        return "module-" + key


class Launches(unittest.TestCase):
    def setUp(self):
        self.saved = _cuda._driver
        self.drv = _cuda._driver = FakeDriver(FakeLib())

    def tearDown(self):
        _cuda._driver = self.saved

    def check_launch(self, launch, a, b, y):
        func, stream, argv, values = launch
        self.assertEqual(func, "k_tma")
        self.assertEqual(values, [a, b, y, MAP_MARK | a])
        self.assertEqual(argv[3] % 64, 0)

    def test_kernel_encodes_per_address(self):
        k = hidetd.Kernel(FakeClient(), kernel_set(), REQUEST)
        a, b, y = FakeTensor([128, 256], ptr=0x10000), FakeTensor([256, 64], ptr=0x30000), \
            FakeTensor([128, 64], ptr=0x50000)
        k(a, b, output=y, stream=3)
        k(a, b, output=y, stream=3)
        self.assertEqual(self.drv.lib.encodes, [(6, 2, 0x10000, [256, 128], [512], [64, 64], [1, 1],
                                                 0, 3, 3, 0)])
        a2 = FakeTensor([128, 256], ptr=0x70000)
        k(a2, b, output=y, stream=3)
        self.assertEqual([e[2] for e in self.drv.lib.encodes], [0x10000, 0x70000])
        launches = self.drv.lib.launches
        self.assertEqual(len(launches), 3)
        self.check_launch(launches[0], 0x10000, 0x30000, 0x50000)
        self.check_launch(launches[1], 0x10000, 0x30000, 0x50000)
        self.check_launch(launches[2], 0x70000, 0x30000, 0x50000)

    def test_plan_encodes_per_address(self):
        p = hidetd.Plan(FakeClient(), plan_json(A_MAP))
        w, y = FakeTensor([256, 64], ptr=0x30000), FakeTensor([128, 64], ptr=0x50000)
        for x in (0x10000, 0x10000, 0x90000):
            p.run({"x": FakeTensor([128, 256], ptr=x), "w": w}, outputs={"y": y}, stream=5)
        self.assertEqual([e[2] for e in self.drv.lib.encodes], [0x10000, 0x90000])
        for launch, x in zip(self.drv.lib.launches, (0x10000, 0x10000, 0x90000)):
            self.check_launch(launch, x, 0x30000, 0x50000)

    def test_driver_without_encoder(self):
        _cuda._driver = FakeDriver(FakeLib(), with_encoder=False)
        k = hidetd.Kernel(FakeClient(), kernel_set(), REQUEST)
        tensors = (FakeTensor([128, 256]), FakeTensor([256, 64]))
        with self.assertRaisesRegex(hidetd.CudaError, r"kernel k_tma takes tensor maps, and the CUDA "
                                                      r"driver lacks cuTensorMapEncodeTiled \(it needs "
                                                      r"a CUDA 12 driver or newer\)"):
            k(*tensors, output=FakeTensor([128, 64]))
        # A set without maps still launches.
        plain = kernel_set()
        plain["kernels"][0]["params"].pop()
        hidetd.Kernel(FakeClient(), plain, REQUEST)(*tensors, output=FakeTensor([128, 64]))
        self.assertEqual(len(_cuda._driver.lib.launches), 1)

    def test_tensor_map_alignment(self):
        maps = [_cuda.TensorMap() for _ in range(8)]
        for m in maps:
            self.assertEqual(m.address % 64, 0)
            ctypes.memset(m.address, 0xab, 128)
            self.assertEqual(m.raw(), b"\xab" * 128)
        self.assertIsNone(maps[0].encoded_for)


if __name__ == "__main__":
    unittest.main()
