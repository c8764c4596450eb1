"""Named dimensions (docs/api.md, "Named dimensions") in the Python runtime: kernel sets of
dynamic ops ("int" parameters, grid rules, named shapes, "dims") parsed and damaged ones refused
naming the field; the sizes of a launch read from the tensors' named axes ("n", and "b*s" once
one of its sizes is known) or given as sizes=, checked against the ranges with the daemon's
wording; grids from their rules; and what the launcher hands the driver (each kernel's grid and
its size parameters, 8 bytes by value). Dispatch tables: the entry chosen at the edges of its
range (a merged entry's too, its set served a narrower range before), the generic set otherwise, and an untuned range asked for again in the background (with
"sizes"), the next table installed. Needs no daemon and no GPU: the answers are written here
after docs/api.md, and a recording stand-in replaces the driver."""
import copy
import ctypes
import threading
import unittest

from support import FakeDriver, FakeTensor, hidetd
from hidetd import _cuda
from hidetd.dispatch import DynamicKernel, parse_table
from hidetd.kernel import GridRule, parse_kernel_set

K1, K2, K3 = "11" * 32, "22" * 32, "33" * 32
DIMS = {"n": {"min": 1, "max": 8192, "multiple_of": 1}}
REQUEST = {"op": "matmul", "inputs": [{"shape": ["n", 4096], "dtype": "f16"},
                                      {"shape": [4096, 14336], "dtype": "f16"}],
           "dims": {"n": {"min": 1, "max": 8192, "hints": [1, 64]}}, "tune": "measure"}


def kset(key=K1, dims=DIMS, name="hd_mm"):
    """A matmul's kernel set over n: three pointers and n's size; grid x 112 * ceil(n / 128),
    grid y min(40, ceil(3 * n / 64)), z 1."""
    ks = {"key": key, "op": "matmul", "arch": "sm_90a",
          "output": {"shape": ["n", 14336], "dtype": "f16"}, "workspace_bytes": 0,
          "kernels": [{"name": name, "block": [128, 1, 1], "shared_bytes": 0,
                       "grid": [{"dims": ["n"], "coef": 1, "div": 128, "mul": 112, "cap": 0},
                                {"dims": ["n"], "coef": 3, "div": 64, "mul": 1, "cap": 40}, 1],
                       "params": [{"index": 0, "buffer": "input0", "type": "pointer"},
                                  {"index": 1, "buffer": "input1", "type": "pointer"},
                                  {"index": 2, "buffer": "output", "type": "pointer"},
                                  {"index": 3, "type": "int", "dim": "n"}]}]}
    if dims is not None:
        ks["dims"] = copy.deepcopy(dims)
    return ks


def table(states=("ready", "tuning", "untuned")):
    """docs/api.md's answer: entries n 1..16, 17..32, 33..64 in the given states."""
    entries = []
    for (lo, hi), state, key in zip(((1, 16), (17, 32), (33, 64)), states, (K2, K3, "44" * 32)):
        e = {"ranges": {"n": [lo, hi]}, "state": state}
        if state == "ready":
            e["kernel_set"] = kset(key, dims=None, name="hd_mm_%d" % hi)
        if state == "tuning":
            e["job"] = "/v1/jobs/12"
        entries.append(e)
    return {"op": "matmul", "arch": "sm_90a", "op_key": "ab" * 32, "dims": copy.deepcopy(DIMS),
            "output": {"shape": ["n", 14336], "dtype": "f16"},
            "dispatch": {"generic": kset(K1, dims=None), "entries": entries}}


class RecordingLib:
    """Stands in for libcuda: records each launch's function, grid and its parameters' 8 bytes
    (as the signed `long long` a size parameter is)."""

    def __init__(self):
        self.launches = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        self.launches.append((func, (gx, gy, gz),
                              [ctypes.c_longlong.from_address(argv[i]).value for i in range(len(argv))]))
        return 0


class EncodingLib(RecordingLib):
    """RecordingLib with cuTensorMapEncodeTiled: records what each encoding was for and writes
    it into the map's first bytes (the address, then rows), so a launch shows which one it
    carries."""

    def __init__(self):
        super().__init__()
        self.encodes = []

    def cuTensorMapEncodeTiled(self, out, dtype, rank, address, dims, strides, box, es, interleave,
                               swizzle, l2, oob):
        self.encodes.append((address, [dims[i] for i in range(rank)]))
        ctypes.c_uint64.from_address(out).value = address
        ctypes.c_uint64.from_address(out + 8).value = dims[rank - 1]
        return 0

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        self.launches.append((func, (gx, gy, gz),
                              [ctypes.c_longlong.from_address(argv[i]).value for i in range(4)] +
                              [(ctypes.c_uint64.from_address(argv[4]).value,
                                ctypes.c_uint64.from_address(argv[4] + 8).value)]))
        return 0


# input0, [n][4096] f16, read through a tensor map whose rows follow n (docs/api.md).
SYM_MAP = {"index": 4, "buffer": "input0", "type": "tensor_map",
           "tensor_map": {"dtype": "f16", "dims": [4096, {"dims": ["n"], "coef": 1}], "strides": [8192],
                          "box": [64, 128], "element_strides": [1, 1], "swizzle": 128,
                          "l2_promotion": 256, "oob_fill": "zero"}}


def kset_map(**kw):
    ks = kset(**kw)
    ks["kernels"][0]["params"].append(copy.deepcopy(SYM_MAP))
    return ks


class FakeClient:
    """Modules by key; _clone() gives the poster a background re-ask uses."""

    def __init__(self, answers=()):
        self.answers = list(answers)
        self.posts = []
        self.posted = threading.Event()

    def _module(self, key, device):
        return "module-" + key

    def _clone(self):
        return self

    def post(self, path, body):
        self.posts.append((path, copy.deepcopy(body)))
        self.posted.set()
        return 200, self.answers.pop(0)

    def close(self):
        pass


def fake(shape, ptr):
    return FakeTensor(shape, "<f2", ptr)


class Parse(unittest.TestCase):
    def refused(self, ks, pattern, request=REQUEST):
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            hidetd.Kernel(None, ks, request)

    def test_accepted(self):
        k = hidetd.Kernel(None, kset(), REQUEST)
        self.assertEqual(list(k.dims), ["n"])
        self.assertEqual(k.inputs[0], ((("n",), 4096), "f16"))
        self.assertEqual(k.output, ((("n",), 14336), "f16"))
        name, grid, block, shared, params = k._kernels[0]
        self.assertEqual(grid, [GridRule(["n"], 1, 128, 112, 0), GridRule(["n"], 3, 64, 1, 40), 1])
        self.assertEqual(params[3], (3, "dim:n", None))
        self.assertEqual(repr(k), "<hidetd.Kernel matmul [n, 4096] f16, [4096, 14336] f16 -> "
                                  "[n, 14336] f16>")

    def test_dims_from_the_request(self):
        # A set that leaves "dims" out takes the request's.
        k = hidetd.Kernel(None, kset(dims=None), REQUEST)
        self.assertEqual((k.dims["n"].min, k.dims["n"].max), (1, 8192))
        req = dict(REQUEST)
        del req["dims"]
        self.refused(kset(dims=None), r"request\.inputs\[0\]\.shape\[0\]: 'n' is not a dim of the "
                                      r"kernel set \(it declares no \"dims\"\)", req)

    def test_refused(self):
        def bad(change):
            ks = kset()
            change(ks, ks["kernels"][0])
            return ks
        G = r"kernel_set\.kernels\[0\]\.grid"
        self.refused(bad(lambda s, k: k["params"][3].update(dim="m")),
                     r"params\[3\]\.dim: an \"int\" parameter takes the size of one of the set's "
                     r"dims \(n\), got 'm'")
        self.refused(bad(lambda s, k: k["params"][3].update(type="float")),
                     r"params\[3\]\.type: 'float' is not a parameter kind this client can pass "
                     r"\(pointer, tensor_map, int\)")
        self.refused(bad(lambda s, k: k["grid"][0].update(offset=1)),
                     G + r"\[0\]\.offset: not a member of a grid rule this client knows")
        self.refused(bad(lambda s, k: k["grid"][0].pop("div")), G + r"\[0\]\.div: expected a whole number")
        self.refused(bad(lambda s, k: k["grid"][0].update(div=0)), G + r"\[0\]\.div")
        self.refused(bad(lambda s, k: k["grid"][0].update(dims=[])), G + r"\[0\]\.dims: expected a non-empty")
        self.refused(bad(lambda s, k: k["grid"][0].update(dims=["n", "n"])), G + r"\[0\]\.dims: 'n'")
        self.refused(bad(lambda s, k: k["grid"][1].update(coef=9, div=1, cap=0)),
                     G + r"\[1\]: the rule gives 73728 blocks at the dims' max, beyond CUDA's limit")
        self.refused(bad(lambda s, k: k["grid"].__setitem__(2, "z")), G + r": expected three positive")
        self.refused(bad(lambda s, k: s["output"].update(shape=["m", 14336])),
                     r"kernel_set\.output\.shape\[0\]: 'm' is not a dim of the kernel set \(its dims: n\)")
        self.refused(bad(lambda s, k: s["output"].update(shape=["n*n", 14336])), r"names a dim twice")
        self.refused(bad(lambda s, k: s["dims"]["n"].update(max=0)), r"kernel_set\.dims\.n: expected whole min")
        self.refused(bad(lambda s, k: s["dims"]["n"].update(multiple_of=3)),
                     r"kernel_set\.dims\.n\.multiple_of")
        self.refused(bad(lambda s, k: s["dims"].update(N={"min": 1, "max": 2})), r"a name is")
        self.refused(bad(lambda s, k: s["dims"].update({c: {"min": 1, "max": 2} for c in "abcd"})),
                     r"more than 4 dims")

    def test_tensor_map_of_a_named_buffer(self):
        ks = kset()
        ks["kernels"][0]["params"].append(
            {"index": 4, "buffer": "input0", "type": "tensor_map",
             "tensor_map": {"dtype": "f16", "dims": [4096, 8192], "strides": [8192], "box": [64, 64],
                            "element_strides": [1, 1], "swizzle": 128, "l2_promotion": 0,
                            "oob_fill": "zero"}})
        self.refused(ks, r"a tensor map of input0, whose shape \[n, 4096\] follows the sizes")

    def test_tensor_map_that_follows_the_sizes(self):
        k = hidetd.Kernel(None, kset_map(), REQUEST)
        tmap = k._kernels[0][4][4][2]
        self.assertEqual(tmap["dims"], [4096, 8192])
        self.assertEqual(tmap["sym"], [None, (("n",), 1)])
        self.assertEqual(hidetd.kernel.tensor_map_at(tmap, {"n": 300})["dims"], [4096, 300])
        self.assertNotIn("sym", hidetd.kernel.tensor_map_at(tmap, {"n": 300}))

        def bad(entry):
            ks = kset_map()
            ks["kernels"][0]["params"][4]["tensor_map"]["dims"][1] = entry
            return ks
        W = r"kernel_set\.kernels\[0\]\.params\[4\]\.tensor_map\.dims\[1\]: "
        self.refused(bad({"dims": ["m"], "coef": 1}), W + r"'m' is not a dim of the kernel set \(n\)")
        self.refused(bad({"dims": ["n", "n"], "coef": 1}), W + r"'n' .*named twice")
        self.refused(bad({"dims": ["n"], "coef": 0}), W + r"a dimension that follows named dims is")
        self.refused(bad({"dims": ["n"]}), W + r"a dimension that follows named dims is")
        self.refused(bad({"dims": ["n"], "coef": 1, "div": 2}), W + r"a dimension that follows")
        self.refused(bad({"dims": ["n"], "coef": 1 << 20}),
                     W + r"8589934592 elements at the dims. max, beyond 2\^32")
        # Twice the rows of input0 at max: past the buffer.
        self.refused(bad({"dims": ["n"], "coef": 2}), r"input0 has 67108864 bytes, too few for the "
                                                       r"tensor map of input0 \(134217728 bytes\)")
        # Plans (no dims) refuse it.
        ks = kset_map()
        ks["kernels"][0]["grid"] = [1, 1, 1]
        del ks["kernels"][0]["params"][3]
        ks["kernels"][0]["params"][3]["index"] = 3
        with self.assertRaisesRegex(hidetd.PlanError, r"tensor_map\.dims\[1\]: a dimension that "
                                                      r"follows named dims, but the kernel set has no"):
            parse_kernel_set(ks, 2, "kernel_set")

    def test_plans_refuse_sizes(self):
        # Without dims (a plan's steps) an int parameter or a grid rule is refused as before.
        with self.assertRaisesRegex(hidetd.PlanError, r"grid: expected three positive integers"):
            parse_kernel_set(kset(), 2, "kernel_set")
        ks = kset()
        ks["kernels"][0]["grid"] = [1, 1, 1]
        with self.assertRaisesRegex(hidetd.PlanError, r"'int' is not a parameter kind this client "
                                                      r"can pass \(pointer, tensor_map\)"):
            parse_kernel_set(ks, 2, "kernel_set")


class Sizes(unittest.TestCase):
    def setUp(self):
        self.k = hidetd.Kernel(None, kset(), REQUEST)

    def test_from_axis_zero(self):
        self.assertEqual(self.k.infer_sizes([(300, 4096), (4096, 14336)]), {"n": 300})
        self.assertEqual(self.k.infer_sizes([(1, 4096), (4096, 14336)]), {"n": 1})
        self.assertEqual(self.k.infer_sizes([(8192, 4096), (4096, 14336)]), {"n": 8192})

    def test_out_of_range(self):
        for n, msg in ((9000, "n is 9000; its range is 1..8192"), (0, "n is 0; its range is 1..8192")):
            with self.assertRaises(ValueError) as cm:
                self.k.infer_sizes([(n, 4096), (4096, 14336)])
            self.assertEqual(str(cm.exception), msg)
        with self.assertRaisesRegex(ValueError, r"^n is 9000; its range is 1\.\.8192$"):
            self.k.check([fake([9000, 4096], 0x1000), fake([4096, 14336], 0x2000)])

    def test_multiple_of(self):
        ks = kset(dims={"n": {"min": 8, "max": 8192, "multiple_of": 8}})
        k = hidetd.Kernel(None, ks, REQUEST)
        with self.assertRaises(ValueError) as cm:
            k.infer_sizes([(12, 4096), (4096, 14336)])
        self.assertEqual(str(cm.exception), "n is 12; its range is 8..8192, a multiple of 8")
        self.assertEqual(k.infer_sizes([(16, 4096), (4096, 14336)]), {"n": 16})

    def test_sizes_given(self):
        self.assertEqual(self.k.infer_sizes([(300, 4096), (4096, 14336)], {"n": 300}), {"n": 300})
        with self.assertRaisesRegex(ValueError, r"'m' is not a dim of the kernel \(n\)"):
            self.k.infer_sizes([(300, 4096), (4096, 14336)], {"m": 3})
        # Given sizes that the tensor contradicts: its shape is named.
        with self.assertRaisesRegex(ValueError, r"inputs\[0\]: expected shape \[301, 4096\] f16, "
                                                r"got \[300, 4096\] f16"):
            self.k.check([fake([300, 4096], 0x1000), fake([4096, 14336], 0x2000)], sizes={"n": 301})
        static = hidetd.Kernel(None, {"key": K1, "output": {"shape": [4], "dtype": "f16"},
                                      "kernels": [{"name": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
                                                   "params": []}]},
                               {"op": "softmax", "inputs": [{"shape": [4], "dtype": "f16"}]})
        with self.assertRaisesRegex(ValueError, r"sizes given, but the kernel takes none"):
            static.check([fake([4], 0x1000)], sizes={"n": 3})

    def test_product_axis(self):
        req = {"op": "layernorm", "inputs": [{"shape": ["b*s", 768], "dtype": "f16"},
                                             {"shape": [768], "dtype": "f16"},
                                             {"shape": [768], "dtype": "f16"}],
               "dims": {"b": {"min": 1, "max": 8}, "s": {"min": 1, "max": 512}}}
        ks = {"key": K1, "dims": req["dims"], "output": {"shape": ["b*s", 768], "dtype": "f16"},
              "kernels": [{"name": "ln", "block": [128, 1, 1],
                           "grid": [{"dims": ["b", "s"], "coef": 1, "div": 4, "mul": 1, "cap": 0}, 1, 1],
                           "params": [{"index": 0, "buffer": "input0", "type": "pointer"},
                                      {"index": 1, "buffer": "input1", "type": "pointer"},
                                      {"index": 2, "buffer": "input2", "type": "pointer"},
                                      {"index": 3, "buffer": "output", "type": "pointer"},
                                      {"index": 4, "type": "int", "dim": "b"},
                                      {"index": 5, "type": "int", "dim": "s"}]}]}
        k = hidetd.Kernel(None, ks, req)
        shapes = [(900, 768), (768,), (768,)]
        # Only the product is known: the caller says one size, the other follows.
        with self.assertRaisesRegex(ValueError, r"the size of b and s is not known from the tensors "
                                                r"\(inputs\[0\]\.shape\[0\] \(b\*s = 900\)\): pass "
                                                r"sizes=\{'b': \.\.\., 's': \.\.\.\}"):
            k.infer_sizes(shapes)
        self.assertEqual(k.infer_sizes(shapes, {"b": 3}), {"b": 3, "s": 300})
        self.assertEqual(k.infer_sizes(shapes, {"s": 300}), {"b": 3, "s": 300})
        self.assertEqual(k.grids({"b": 3, "s": 300}), [[225, 1, 1]])
        with self.assertRaisesRegex(ValueError, r"^s is 900; its range is 1\.\.512$"):
            k.infer_sizes(shapes, {"b": 1})

    def test_grids(self):
        self.assertEqual(self.k.grids({"n": 1}), [[112, 1, 1]])
        self.assertEqual(self.k.grids({"n": 128}), [[112, 6, 1]])
        self.assertEqual(self.k.grids({"n": 129}), [[224, 7, 1]])
        self.assertEqual(self.k.grids({"n": 8192}), [[7168, 40, 1]])
        with self.assertRaisesRegex(ValueError, r"no size given for n"):
            self.k.grids({})


class Launches(unittest.TestCase):
    def setUp(self):
        self.saved = _cuda._driver
        self.lib = RecordingLib()
        _cuda._driver = FakeDriver(self.lib)

    def tearDown(self):
        _cuda._driver = self.saved

    def test_grid_and_size_parameters(self):
        k = hidetd.Kernel(FakeClient(), kset(), REQUEST)
        w = fake([4096, 14336], 0x20000)
        for n, grid in ((300, (336, 15, 1)), (1, (112, 1, 1)), (8192, (7168, 40, 1))):
            y = fake([n, 14336], 0x50000)
            self.assertIs(k(fake([n, 4096], 0x10000), w, output=y, stream=3), y)
            self.assertEqual(self.lib.launches[-1], ("hd_mm", grid, [0x10000, 0x20000, 0x50000, n]))
        with self.assertRaisesRegex(ValueError, r"^n is 9000; its range is 1\.\.8192$"):
            k(fake([9000, 4096], 0x10000), w, output=fake([9000, 14336], 0x50000))
        # The output's named axis follows the input's.
        with self.assertRaisesRegex(ValueError, r"output: expected shape \[300, 14336\] f16, got "
                                                r"\[301, 14336\] f16"):
            k(fake([300, 4096], 0x10000), w, output=fake([301, 14336], 0x50000))
        self.assertEqual(len(self.lib.launches), 3)

    def test_tensor_map_at_the_launch_sizes(self):
        lib = EncodingLib()
        _cuda._driver = FakeDriver(lib)
        k = hidetd.Kernel(FakeClient(), kset_map(), REQUEST)
        w = fake([4096, 14336], 0x20000)
        for n, ptr in ((300, 0x10000), (300, 0x10000), (64, 0x10000), (300, 0x30000), (64, 0x10000)):
            k(fake([n, 4096], ptr), w, output=fake([n, 14336], 0x50000))
            self.assertEqual(lib.launches[-1][2], [ptr, 0x20000, 0x50000, n, (ptr, n)])
        # One encoding per (address, sizes), kept for the next launch at them.
        self.assertEqual(lib.encodes, [(0x10000, [4096, 300]), (0x10000, [4096, 64]),
                                       (0x30000, [4096, 300])])
        # A dispatch table's entry inherits its ranges' dims: its map is bound the same way.
        tbl = table(("ready", "untuned", "untuned"))
        tbl["dispatch"]["entries"][0]["kernel_set"]["kernels"][0]["params"].append(copy.deepcopy(SYM_MAP))
        d = DynamicKernel(FakeClient(), tbl, REQUEST, retune=False)
        d(fake([16, 4096], 0x70000), w, output=fake([16, 14336], 0x50000))
        self.assertEqual(lib.launches[-1][0], "hd_mm_16")
        self.assertEqual(lib.encodes[-1], (0x70000, [4096, 16]))

    def test_dispatch_selects_and_retunes(self):
        client = FakeClient([table(("ready", "tuning", "ready"))])
        d = DynamicKernel(client, table(), REQUEST, refresh_s=3600)
        w = fake([4096, 14336], 0x20000)

        def run(n):
            d(fake([n, 4096], 0x10000), w, output=fake([n, 14336], 0x50000))
            return self.lib.launches[-1]

        self.assertEqual(run(16), ("hd_mm_16", (112, 1, 1), [0x10000, 0x20000, 0x50000, 16]))
        self.assertEqual(run(1)[0], "hd_mm_16")
        self.assertEqual(run(17)[0], "hd_mm")     # tuning: the generic set
        self.assertEqual(d.wait(5), True)
        self.assertEqual(client.posts[0][1]["sizes"], {"n": 17})
        self.assertNotIn("wait", client.posts[0][1])
        # The range 33..64 is ready in the table installed from the re-ask.
        self.assertEqual(run(33)[0], "hd_mm_64")
        self.assertEqual(run(64)[0], "hd_mm_64")
        self.assertEqual(run(65)[0], "hd_mm")     # no entry holds it
        self.assertEqual(run(8192)[2][3], 8192)
        # 17..32 was asked for within refresh_s; nothing is posted again.
        run(20)
        self.assertEqual(d.wait(5), True)
        self.assertEqual(len(client.posts), 1)
        with self.assertRaisesRegex(ValueError, r"^n is 9000; its range is 1\.\.8192$"):
            run(9000)

    def test_merged_entry(self):
        """A later table answers measured neighbours running one kernel as one entry (docs/api.md:
        "merged", its set's dims the union's): both edges of it launch that set, though the same
        set served only the upper range before."""
        first = table(("ready", "ready", "untuned"))
        upper = first["dispatch"]["entries"][1]["kernel_set"]
        upper["dims"] = {"n": {"min": 17, "max": 32, "multiple_of": 1}}
        merged = table(("ready", "ready", "untuned"))
        entries = merged["dispatch"]["entries"]
        ks = copy.deepcopy(upper)
        ks["dims"] = {"n": {"min": 1, "max": 32, "multiple_of": 1}}
        entries[:2] = [{"ranges": {"n": [1, 32]}, "state": "ready", "merged": [{"n": [1, 16]}, {"n": [17, 32]}],
                        "kernel_set": ks}]
        client = FakeClient([merged])
        d = DynamicKernel(client, first, REQUEST, refresh_s=3600)
        w = fake([4096, 14336], 0x20000)

        def run(n):
            d(fake([n, 4096], 0x10000), w, output=fake([n, 14336], 0x50000))
            return self.lib.launches[-1]

        self.assertEqual(run(1)[0], "hd_mm_16")
        self.assertEqual(run(17)[0], "hd_mm_32")
        run(40)  # untuned: the re-ask installs the merged table
        self.assertTrue(d.wait(5))
        self.assertEqual([e.ranges for e in d.entries], [{"n": (1, 32)}, {"n": (33, 64)}])
        for n in (1, 16, 17, 32):
            launch = run(n)
            self.assertEqual((launch[0], launch[2]), ("hd_mm_32", [0x10000, 0x20000, 0x50000, n]))
        self.assertEqual(run(33)[0], "hd_mm")
        k, e = d.select({"n": 1})
        self.assertEqual((k.key, k.dims["n"].min, k.dims["n"].max), (K3, 1, 32))

    def test_coarse_entry(self):
        """A range the daemon cut in two because one kernel fit it badly (docs/api.md, "coarse"):
        each half launches the coarse range's kernel while it has none of its own, and a launch
        there asks again (with "sizes"), until a table lists the half with its own set."""
        def cut(own_lower):
            t = table(("ready", "ready", "untuned"))
            coarse = t["dispatch"]["entries"][1]["kernel_set"]  # hd_mm_32, tuned for 17..32
            coarse["dims"] = {"n": {"min": 17, "max": 32, "multiple_of": 1}}
            lower = {"ranges": {"n": [17, 24]}, "state": "ready", "coarse": {"n": [17, 32]},
                     "job": "/v1/jobs/7", "kernel_set": copy.deepcopy(coarse)}
            if own_lower:
                lower = {"ranges": {"n": [17, 24]}, "state": "ready",
                         "kernel_set": kset("55" * 32, dims=None, name="hd_mm_24")}
            upper = {"ranges": {"n": [25, 32]}, "state": "ready", "coarse": {"n": [17, 32]},
                     "kernel_set": copy.deepcopy(coarse)}
            t["dispatch"]["entries"][1:2] = [lower, upper]
            return t

        client = FakeClient([cut(True), cut(True)])
        d = DynamicKernel(client, cut(False), REQUEST, refresh_s=3600)
        self.assertEqual([(e.settled, e.coarse) for e in d.entries],
                         [(True, None), (False, {"n": [17, 32]}), (False, {"n": [17, 32]}), (False, None)])
        w = fake([4096, 14336], 0x20000)

        def run(n):
            d(fake([n, 4096], 0x10000), w, output=fake([n, 14336], 0x50000))
            return self.lib.launches[-1]

        self.assertEqual(run(20)[0], "hd_mm_32")  # the coarse kernel, not the generic one
        self.assertTrue(d.wait(5))
        self.assertEqual(client.posts[0][1]["sizes"], {"n": 20})
        self.assertEqual(run(20)[0], "hd_mm_24")  # its own, from the re-ask's table
        self.assertEqual(run(32)[0], "hd_mm_32")  # the upper half still runs the coarse one...
        self.assertTrue(d.wait(5))
        self.assertEqual(client.posts[1][1]["sizes"], {"n": 32})  # ...and asks for its own
        run(16)
        self.assertTrue(d.wait(5))
        self.assertEqual(len(client.posts), 2)  # a settled entry asks for nothing

    def test_no_retune(self):
        client = FakeClient()
        d = DynamicKernel(client, table(), REQUEST, retune=False)
        d(fake([40, 4096], 0x10000), fake([4096, 14336], 0x20000), output=fake([40, 14336], 0x5000))
        self.assertEqual(self.lib.launches[-1][0], "hd_mm")
        self.assertEqual(client.posts, [])

    def test_failed_reask_keeps_the_table(self):
        client = FakeClient([{"error": "not a table"}])
        d = DynamicKernel(client, table(), REQUEST)
        d(fake([40, 4096], 0x10000), fake([4096, 14336], 0x20000), output=fake([40, 14336], 0x5000))
        self.assertTrue(d.wait(5))
        self.assertIsInstance(d.last_error, hidetd.PlanError)
        self.assertEqual([e.state for e in d.entries], ["ready", "tuning", "untuned"])


class Table(unittest.TestCase):
    def refused(self, change, pattern):
        t = table()
        change(t)
        with self.assertRaisesRegex(hidetd.PlanError, pattern):
            DynamicKernel(FakeClient(), t, REQUEST)

    def test_parsed(self):
        dims, output, generic, entries = parse_table(table())
        self.assertEqual(list(dims), ["n"])
        self.assertEqual(output, ((("n",), 14336), "f16"))
        self.assertEqual([(e.ranges, e.state, e.job) for e in entries],
                         [({"n": (1, 16)}, "ready", None), ({"n": (17, 32)}, "tuning", "/v1/jobs/12"),
                          ({"n": (33, 64)}, "untuned", None)])
        d = DynamicKernel(FakeClient(), table(), REQUEST, retune=False)
        k, e = d.select({"n": 16})
        self.assertEqual((k.key, e.state), (K2, "ready"))
        # The ready set's dims are its range.
        self.assertEqual((k.dims["n"].min, k.dims["n"].max), (1, 16))
        with self.assertRaisesRegex(ValueError, r"^n is 17; its range is 1\.\.16$"):
            k.grids({"n": 17})
        self.assertEqual(d.select({"n": 17})[0].key, K1)
        self.assertIsNone(d.select({"n": 100})[1])

    def test_unknown_state_is_not_launched(self):
        t = table()
        t["dispatch"]["entries"][0]["state"] = "evicted"
        d = DynamicKernel(FakeClient(), t, REQUEST, retune=False)
        self.assertEqual(d.select({"n": 3})[0].key, K1)

    def test_refused(self):
        E = r"dispatch\.entries\[1\]"
        self.refused(lambda t: t.pop("dispatch"), r"not a dispatch table")
        self.refused(lambda t: t.pop("dims"), r"^dims: missing")
        self.refused(lambda t: t.update(dims={}), r"dims: a dispatch table names at least one dim")
        self.refused(lambda t: t["dispatch"]["entries"][1]["ranges"].update(n=[17, 9000]),
                     E + r"\.ranges\.n: expected \[lo, hi\] with 1 <= lo <= hi <= 8192")
        self.refused(lambda t: t["dispatch"]["entries"][1]["ranges"].update(n=[32, 17]), E + r"\.ranges\.n")
        self.refused(lambda t: t["dispatch"]["entries"][1].update(ranges={"m": [1, 2]}),
                     E + r"\.ranges\.m: not a dim")
        self.refused(lambda t: t["dispatch"]["entries"][1].update(ranges={}), E + r"\.ranges: no range of n")
        self.refused(lambda t: t["dispatch"]["entries"][1].pop("state"), E + r"\.state: missing")
        self.refused(lambda t: t["dispatch"]["entries"][0].pop("kernel_set"),
                     r"entries\[0\]\.kernel_set: a ready entry has its kernel set")
        self.refused(lambda t: t["dispatch"]["generic"]["kernels"][0]["grid"][0].update(cap=-1),
                     r"dispatch\.generic: kernel_set\.kernels\[0\]\.grid\[0\]\.cap")
        self.refused(lambda t: t["dispatch"].pop("entries"), r"dispatch\.entries: expected a list")

    def test_client_kernel_answers_a_dynamic_kernel(self):
        c = hidetd.Client("/nonexistent/hidetd.sock")
        c.kernel_set = lambda request: table()
        k = c.kernel(REQUEST, retune=False)
        self.assertIsInstance(k, hidetd.DynamicKernel)
        self.assertEqual(k.select({"n": 5})[0].key, K2)
        clone = c._clone()
        self.assertEqual((clone.address, clone._t.token), (c.address, None))


if __name__ == "__main__":
    unittest.main()
