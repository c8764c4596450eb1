"""Plans with named dims (docs/graphs.md, "Named dimensions") in the Python runtime, against a
plan written here after the wire format (the daemon side may refuse names yet) and a recording
stand-in for the driver: the sizes read from the inputs and refused in the daemon's words when
inconsistent or out of range; per step the ready dispatch entry holding them, else the generic
set, launched with its grid rule, "int" parameters and a tensor map encoded per (address,
sizes); runs at sizes met before reuse what was worked out (no new binding); an entry not ready
(or running a coarser range's kernel) asks for the graph again with "sizes" in the background and
the plan answered is swapped in at the next run. Needs no daemon and no GPU."""
import copy
import ctypes
import unittest

from support import FakeDriver, FakeTensor, hidetd
from test_dynamic import EncodingLib
from hidetd import _cuda
from hidetd import plan as pmod

K1, K2, K3, K4 = "11" * 32, "22" * 32, "33" * 32, "44" * 32
DIMS = {"b": {"min": 1, "max": 8}, "s": {"min": 1, "max": 4}}
REQUEST = {"graph": {"inputs": [{"name": "x", "shape": ["b", "s", 16], "dtype": "f16"}]},
           "dims": DIMS, "tune": "model"}


def bs_set(key, dims=None):
    """A set over b and s: grid x ceil(b*s / 2); input0, output, then b's and s's sizes."""
    ks = {"key": key, "op": "x", "arch": "sm_90", "workspace_bytes": 0,
          "output": {"shape": ["b*s", 16], "dtype": "f16"},
          "kernels": [{"name": "k_" + key[:2], "block": [128, 1, 1], "shared_bytes": 0,
                       "grid": [{"dims": ["b", "s"], "coef": 1, "div": 2, "mul": 1, "cap": 0}, 1, 1],
                       "params": [{"index": 0, "buffer": "input0", "type": "pointer"},
                                  {"index": 1, "buffer": "output", "type": "pointer"},
                                  {"index": 2, "type": "int", "dim": "b"},
                                  {"index": 3, "type": "int", "dim": "s"}]}]}
    if dims is not None:
        ks["dims"] = copy.deepcopy(dims)
    return ks


def plan(states=("ready", "tuning")):
    """x [b, s, 16] and ids [b] in, y [b*s, 16] out; step 0 a dispatch table (b 1..4 and 5..8
    in the given states), step 1 a set whose input map follows b*s, with s as an int."""
    entries = []
    for (lo, hi), state, key in zip(((1, 4), (5, 8)), states, (K2, K3)):
        e = {"ranges": {"b": [lo, hi], "s": [1, 4]}, "state": state}
        if state == "ready":
            e["kernel_set"] = bs_set(key)
        else:
            e["job"] = "/v1/jobs/3"
        entries.append(e)
    table = {"op": "x", "arch": "sm_90", "op_key": "ab" * 32, "dims": copy.deepcopy(DIMS),
             "output": {"shape": ["b*s", 16], "dtype": "f16"},
             "dispatch": {"generic": bs_set(K1), "entries": entries}}
    ln = {"key": K4, "op": "x", "arch": "sm_90", "dims": copy.deepcopy(DIMS), "workspace_bytes": 0,
          "output": {"shape": ["b*s", 16], "dtype": "f16"},
          "kernels": [{"name": "k_ln", "grid": [4, 1, 1], "block": [128, 1, 1], "shared_bytes": 0,
                       "params": [{"index": 0, "buffer": "input1", "type": "pointer"},
                                  {"index": 1, "buffer": "output", "type": "pointer"},
                                  {"index": 2, "type": "int", "dim": "s"},
                                  {"index": 3, "buffer": "input0", "type": "pointer"},
                                  {"index": 4, "buffer": "input0", "type": "tensor_map",
                                   "tensor_map": {"dtype": "f16", "dims": [16, {"dims": ["b", "s"], "coef": 1}],
                                                  "strides": [32], "box": [16, 8],
                                                  "element_strides": [1, 1], "swizzle": 32,
                                                  "l2_promotion": 0, "oob_fill": "zero"}}]}]}
    return {"graph_key": K1, "arch": "sm_90", "tune": "model", "dims": copy.deepcopy(DIMS),
            "inputs": [{"name": "x", "shape": ["b", "s", 16], "dtype": "f16"},
                       {"name": "ids", "shape": ["b"], "dtype": "i32"}],
            "outputs": [{"name": "y", "shape": ["b*s", 16], "dtype": "f16"}],
            "arena_bytes": 1024, "constants_bytes": 0,
            "buffers": [{"name": "h", "region": "arena", "offset": 0, "bytes": 1024,
                         "shape": ["b*s", 16], "dtype": "f16"}],
            "prepare": [],
            "steps": [{"nodes": ["mm"], "bindings": {"input0": "x", "output": "h"},
                       "request": {"op": "x", "dims": copy.deepcopy(DIMS),
                                   "inputs": [{"shape": ["b", "s", 16], "dtype": "f16"}]},
                       "kernel_set": table},
                      {"nodes": ["ln"], "bindings": {"input0": "h", "input1": "ids", "output": "y"},
                       "request": {"op": "x", "dims": copy.deepcopy(DIMS),
                                   "inputs": [{"shape": ["b*s", 16], "dtype": "f16"},
                                              {"shape": ["b"], "dtype": "i32"}]},
                       "kernel_set": ln}]}


class Lib(EncodingLib):
    """EncodingLib for kernels of 4 parameters, and of 5 whose last is a tensor map (recorded
    as the (address, rows) of its encoding)."""

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):
        n = len(argv)
        args = [ctypes.c_longlong.from_address(argv[i]).value for i in range(min(n, 4))]
        if n == 5:
            args.append((ctypes.c_uint64.from_address(argv[4]).value,
                         ctypes.c_uint64.from_address(argv[4] + 8).value))
        self.launches.append((func, (gx, gy, gz), args))
        return 0


class Client:
    """Modules by key; _clone() gives the poster a background re-ask uses (answers queued)."""

    def __init__(self, answers=()):
        self.answers = list(answers)
        self.posts = []
        self.modules = []

    def _module(self, key, device):
        self.modules.append(key)
        return "module-" + key

    def _clone(self):
        return self

    def post(self, path, body):
        self.posts.append((path, copy.deepcopy(body)))
        return 200, self.answers.pop(0)

    def close(self):
        pass


class Buf:
    def __init__(self, n):
        self.ptr = 0x900000


def x_ids(b, s, ptr=0x10000):
    return {"x": FakeTensor([b, s, 16], "<f2", ptr), "ids": FakeTensor([b], "<i4", 0x20000)}


class Parse(unittest.TestCase):
    def test_layout_at_the_max(self):
        p = hidetd.Plan(Client(), plan())
        self.assertEqual(list(p.dims), ["b", "s"])
        self.assertEqual(p.inputs["x"], ((("b",), ("s",), 16), "f16"))
        self.assertEqual(p.shapes_at({"b": 3, "s": 2}), {"y": (6, 16)})
        self.assertEqual([len(st.sets) for st in p.steps], [2, 1])
        self.assertEqual([st.key for st in p.steps], [K1, K4])

    def test_damaged(self):
        def bad(change, pattern):
            pj = plan()
            change(pj)
            with self.assertRaisesRegex(hidetd.PlanError, pattern):
                hidetd.Plan(Client(), pj)
        bad(lambda pj: pj["inputs"][0].update(shape=["q", 16]), r"inputs\[0\].shape\[0\]: 'q' is not a dim")
        bad(lambda pj: pj.pop("dims"), r"inputs\[0\].shape: expected a list of positive integers")
        bad(lambda pj: pj["steps"][0]["kernel_set"]["dims"]["b"].update(max=16),
            r"steps\[0\].kernel_set.dims.b: 1..16 \(multiple of 1\), but the plan's is 1..8")
        bad(lambda pj: pj["buffers"][0].update(bytes=512),
            r"buffers\[0\]: \[b\*s, 16\] f16 needs 1024 bytes, the buffer has 512")
        bad(lambda pj: pj["steps"][1]["kernel_set"].pop("dims"),
            r"steps\[1\].kernel_set.kernels\[0\].params\[2\].type: 'int' is not a parameter kind")


class Runs(unittest.TestCase):
    def setUp(self):
        self.saved = (_cuda._driver, pmod._alloc_bytes)
        self.lib = Lib()
        _cuda._driver = FakeDriver(self.lib)
        pmod._alloc_bytes = lambda n, device, like_torch: Buf(n)

    def tearDown(self):
        _cuda._driver, pmod._alloc_bytes = self.saved

    def run_at(self, p, b, s, ptr=0x10000):
        self.lib.launches = []
        p.run(x_ids(b, s, ptr), outputs={"y": FakeTensor([b * s, 16], "<f2", 0x30000)}, stream=5)
        return self.lib.launches

    def test_entry_binding_and_maps(self):
        c = Client()
        p = hidetd.Plan(c, plan(), request=REQUEST, retune=False)
        mm, ln = self.run_at(p, 3, 2)
        # b 3, s 2: the ready entry (K2), grid ceil(6 / 2); the arena's h at offset 0.
        self.assertEqual(mm, ("k_22", (3, 1, 1), [0x10000, 0x900000, 3, 2]))
        self.assertEqual(ln[:2], ("k_ln", (4, 1, 1)))
        self.assertEqual(ln[2][:4], [0x20000, 0x30000, 2, 0x900000])
        self.assertEqual(ln[2][4], (0x900000, 6))  # the map's rows: b*s
        # b 6, s 4: the entry is tuning: the generic set, grid 12.
        mm, ln = self.run_at(p, 6, 4)
        self.assertEqual(mm, ("k_11", (12, 1, 1), [0x10000, 0x900000, 6, 4]))
        self.assertEqual(ln[2][2], 4)
        self.assertEqual(ln[2][4], (0x900000, 24))
        # Back at 3, 2: what was worked out is reused, and the map's encoding too.
        n_encodes = len(self.lib.encodes)
        mm, ln = self.run_at(p, 3, 2)
        self.assertEqual(mm, ("k_22", (3, 1, 1), [0x10000, 0x900000, 3, 2]))
        self.assertEqual(ln[2][4], (0x900000, 6))
        self.assertEqual(len(self.lib.encodes), n_encodes)
        self.assertEqual(len(p._memo), 2)
        self.assertEqual(sorted(set(c.modules)), [K1, K2, K4])
        self.assertEqual(c.posts, [])  # retune=False

    def test_refusals(self):
        p = hidetd.Plan(Client(), plan(), request=REQUEST, retune=False)
        y = {"y": FakeTensor([6, 16], "<f2", 0x30000)}
        with self.assertRaisesRegex(ValueError, r"^b is 9; its range is 1..8$"):
            p.run(x_ids(9, 2), outputs=y)
        bad = x_ids(3, 2)
        bad["ids"] = FakeTensor([5], "<i4", 0x20000)
        with self.assertRaisesRegex(ValueError, r"input 'ids' shape\[0\]: b is 5 here, but 3 "
                                                r"from input 'x' shape\[0\]"):
            p.run(bad, outputs=y)
        bad["ids"] = FakeTensor([3], "<i4", 0x20000)
        bad["x"] = FakeTensor([3, 2, 15], "<f2", 0x10000)
        with self.assertRaisesRegex(ValueError, r"shape"):
            p.run(bad, outputs=y)
        with self.assertRaisesRegex(ValueError, r"output"):
            p.run(x_ids(3, 2), outputs={"y": FakeTensor([5, 16], "<f2", 0x30000)})
        with self.assertRaisesRegex(ValueError, r"'q' is not a dim of the plan"):
            p.run(x_ids(3, 2), outputs=y, sizes={"q": 1})
        self.assertEqual(self.lib.launches, [])

    def test_runner_takes_sizes(self):
        p = hidetd.Plan(Client(), plan(), request=REQUEST, retune=False)
        p._setup(0, False)
        run = p.runner(["x", "ids"], ["y"])
        run([0x10000, 0x20000], [0x30000], 5, {"b": 2, "s": 4})
        self.assertEqual(self.lib.launches[0], ("k_22", (4, 1, 1), [0x10000, 0x900000, 2, 4]))

    def test_reask_swaps_the_tables_in(self):
        c = Client([plan(states=("ready", "ready"))])
        p = hidetd.Plan(c, plan(), request=REQUEST)
        mm, _ = self.run_at(p, 6, 4)
        self.assertEqual(mm[0], "k_11")  # generic meanwhile: a run never waits
        self.assertTrue(p.wait(10))
        self.assertIsNone(p.last_error)
        self.assertEqual(len(c.posts), 1)
        path, body = c.posts[0]
        self.assertEqual(path, "/v1/graphs")
        self.assertEqual(body["sizes"], {"b": 6, "s": 4})
        self.assertEqual(body["graph"], REQUEST["graph"])
        mm, _ = self.run_at(p, 6, 4)
        self.assertEqual(mm, ("k_33", (12, 1, 1), [0x10000, 0x900000, 6, 4]))
        self.assertEqual(len(c.posts), 1)  # ready now: no more asks

    def test_coarse_entry_runs_and_asks(self):
        """An entry cut from a range whose kernel fit it badly (docs/api.md, "coarse") runs that
        kernel, not the generic set, and the graph is asked for again until the entry has its
        own; then no more asks."""
        coarse = plan(states=("ready", "ready"))
        e = coarse["steps"][0]["kernel_set"]["dispatch"]["entries"][1]
        e["coarse"] = {"b": [5, 8], "s": [1, 4]}
        e["job"] = "/v1/jobs/9"
        c = Client([plan(states=("ready", "ready"))])
        p = hidetd.Plan(c, coarse, request=REQUEST)
        mm, _ = self.run_at(p, 6, 4)
        self.assertEqual(mm[0], "k_33")  # the coarse range's kernel
        self.assertTrue(p.wait(10))
        self.assertEqual(len(c.posts), 1)
        self.assertEqual(c.posts[0][1]["sizes"], {"b": 6, "s": 4})
        mm, _ = self.run_at(p, 6, 4)
        self.assertEqual(mm[0], "k_33")
        self.assertTrue(p.wait(10))
        self.assertEqual(len(c.posts), 1)  # settled now: no more asks

    def test_static_plans_take_no_sizes(self):
        pj = plan()
        with self.assertRaisesRegex(ValueError, r"sizes given, but the plan takes none"):
            pj.pop("dims")
            for t in pj["inputs"] + pj["outputs"]:
                t["shape"] = [2, 2, 16][:len(t["shape"])]
            pj["steps"] = pj["steps"][1:]
            ks = pj["steps"][0]["kernel_set"]
            ks.pop("dims")
            ks["output"]["shape"] = [4, 16]
            ks["kernels"][0]["params"] = [ks["kernels"][0]["params"][i] for i in (0, 1)]
            pj["inputs"] = [{"name": "ids", "shape": [2], "dtype": "i32"}]
            pj["outputs"][0]["shape"] = [4, 16]
            pj["buffers"] = []
            pj["steps"][0]["bindings"] = {"input1": "ids", "output": "y"}
            pj["steps"][0]["request"]["inputs"] = [{"shape": [4, 16], "dtype": "f16"},
                                                   {"shape": [2], "dtype": "i32"}]
            pj["steps"][0]["request"].pop("dims")
            p = hidetd.Plan(Client(), pj)
            p.run({"ids": FakeTensor([2], "<i4", 0x20000)},
                  outputs={"y": FakeTensor([4, 16], "<f2", 0x30000)}, sizes={"b": 2})


if __name__ == "__main__":
    unittest.main()
