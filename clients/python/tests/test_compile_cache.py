"""The torch.compile backend's compile cache (hidetd.compile_cache), against the real hidetd
($HIDETD_BIN, tune "none") on the CPU: a graph compiled before is rebuilt from its entry with
neither AOTAutograd nor the lowering, sends the same /v1/graphs requests and gives eager
PyTorch's answer; a corrupt entry is compiled afresh and written again; other shapes, options
or graphs are other entries; graphs AOTAutograd must wrap (an input mutated) are not stored.
torch._dynamo.reset() between compilations stands for a fresh process: the backend keeps no
compile state in memory, only on disk."""
import glob
import os
import shutil
import tempfile
import unittest
import warnings

from support import Daemon, hidetd

try:
    import torch
    from hidetd import compile_cache
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # the runtime's own tests run without PyTorch; these need it
    torch = None


if torch is not None:
    class Mixed(nn.Module):
        """A channels-last input (bound NHWC), position ids folded into a constant, and cumsum,
        which PyTorch runs between two pieces."""

        def __init__(self):
            super().__init__()
            self.pos = nn.Embedding(16, 8)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            y = F.relu(x * 2.0).mean((2, 3)) + self.pos(torch.arange(4)).sum(0)
            return self.fc(torch.cumsum(y, 1))

    class Tiny(nn.Module):
        """One linear layer and a ReLU: a graph of one kernel (what hidetd.save's test needs)."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class TinyDict(Tiny):
        """Tiny's graph, its output in a structure with an input and a constant (what
        hidetd.load rebuilds around the graph's outputs)."""

        def forward(self, x):
            return {"y": torch.relu(self.fc(x)), "x": x, "k": 2}

    class Mutates(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)

        def forward(self, x):
            x.mul_(2)
            return self.a(x)


@unittest.skipUnless(torch is not None, "PyTorch is not installed for this Python "
                     "(clients/python/tests/torch_tests.sh runs these with it)")
class CompileCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def setUp(self):
        torch.manual_seed(0)
        self.dir = tempfile.mkdtemp(prefix="hidetd-cc-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.stats = compile_cache.stats

    def compile(self, model, x, **extra):
        """One compilation as a fresh process would do it: (explanation, stats delta)."""
        before = dict(self.stats)
        opts = dict(address=self.daemon.sock, tune="none", cache_dir=self.dir)
        opts.update(extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = hidetd.explain(model.eval(), x, **opts)
        return e, {k: self.stats[k] - before[k] for k in before}

    def entries(self):
        return glob.glob(os.path.join(self.dir, "*", "*.pkl"))

    def test_second_compilation_is_a_hit_and_a_torn_entry_a_miss(self):
        m, x = Mixed(), torch.randn(2, 8, 4, 4).to(memory_format=torch.channels_last)
        with torch.no_grad():
            want = m.eval()(x)
        e1, d1 = self.compile(m, x)
        self.assertEqual((d1["lowered"], d1["stores"], d1["hits"]), (1, 1, 0), d1)
        self.assertEqual(len(self.entries()), 1)
        # The plans' graphs run as docs/graphs.md defines them (hidetd.reference), which reads
        # how each piece binds its inputs and weights: from the entry here.
        e2, d2 = self.compile(m, x, reference=True)
        # AOTAutograd's compiler (and with it the lowering) did not run.
        self.assertEqual((d2["lowered"], d2["hits"], d2["stores"]), (0, 1, 0), d2)
        g1, g2 = e1.graphs[0], e2.graphs[0]
        self.assertFalse(g1.cached)
        self.assertTrue(g2.cached)
        self.assertEqual(g2.requests, g1.requests)
        self.assertEqual(len(g2.requests), 2)  # cumsum splits the graph
        self.assertEqual((g2.ops, g2.hidetd, g2.folded, g2.torch, g2.left),
                         (g1.ops, g1.hidetd, g1.folded, g1.torch, g1.left))
        self.assertEqual(g2.folded, 1)
        torch.testing.assert_close(e1.output, want)
        torch.testing.assert_close(e2.output, want, rtol=1e-4, atol=1e-4)
        # New weights (the same graph) are bound at the call, and the folded value follows.
        with torch.no_grad():
            m.pos.weight.mul_(3)
            m.fc.weight.mul_(-1)
            want = m(x)
        e3, d3 = self.compile(m, x, reference=True)
        self.assertEqual(d3["hits"], 1)
        torch.testing.assert_close(e3.output, want, rtol=1e-4, atol=1e-4)
        # A torn entry is compiled afresh (with a warning) and written again.
        (path,) = self.entries()
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:len(data) // 2])
        with self.assertLogs("hidetd", "WARNING"):
            e, d = self.compile(m, x)
        self.assertEqual((d["unreadable"], d["lowered"], d["stores"]), (1, 1, 1), d)
        torch.testing.assert_close(e.output, want)
        key = os.path.basename(path)[:-len(".pkl")]
        self.assertIsNotNone(compile_cache.load(self.dir, key))  # written whole again
        # The daemon down: the hit's plans cannot be had, so the normal path runs (and warns).
        e4, d4 = self.compile(m, x, address=os.path.join(self.dir, "nothing.sock"))
        self.assertEqual((d4["unusable"], d4["lowered"], d4["stores"]), (1, 1, 0), d4)
        self.assertTrue(e4.graphs[0].fallback)
        torch.testing.assert_close(e4.output, want)

    def test_saved_model_runs_in_a_fresh_process_without_dynamo(self):
        # hidetd.save writes the graph's compile-cache entry, where its arguments come from and
        # the output's structure; hidetd.load in another process rebuilds it from the entry (a
        # hit: no AOTAutograd, no lowering), Dynamo traces nothing, and another shape is refused
        # with a clear error. hidetd.compile's warm start does the same from the compile cache's
        # directory, and sends another shape to Dynamo.
        import subprocess
        import sys
        import textwrap
        m, x = Tiny(), torch.randn(2, 8)
        path = os.path.join(self.dir, "tiny.hd")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hidetd.save(m.eval(), (x,), path, address=self.daemon.sock, tune="none", reference=True,
                        cache_dir="off")
            hidetd.save(TinyDict().eval(), (x,), path + "d", address=self.daemon.sock, tune="none",
                        reference=True, cache_dir="off")
            w = hidetd.compile(m, address=self.daemon.sock, tune="none", reference=True, cache_dir=self.dir)
            with torch.no_grad():
                w(x)
                w(torch.randn(3, 8))  # Dynamo's path: the kernel of [3, 8] in the daemon's cache
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "models"))), 1)
        # The warm start's key: the inputs' dtypes and the model's plain attributes are in it.
        from hidetd.backend import Options
        from hidetd.saved import warm_key
        opts = Options(None, {"address": self.daemon.sock})
        k = warm_key(m, (x,), {}, opts)
        self.assertEqual(k, warm_key(m, (x.clone(),), {}, opts))
        self.assertNotEqual(k, warm_key(m, (x.double(),), {}, opts))
        m.fc.flag = 1
        self.assertNotEqual(k, warm_key(m, (x,), {}, opts))
        del m.fc.flag
        torch.save({"state": m.state_dict(), "x": x}, os.path.join(self.dir, "state.pt"))
        script = textwrap.dedent("""
            import sys, warnings, torch
            sys.path[:0] = [%r, %r]
            warnings.simplefilter("ignore")
            import hidetd, torch._dynamo.utils
            from hidetd import compile_cache
            from test_compile_cache import Tiny, TinyDict
            saved = torch.load(%r)
            m = Tiny().eval()
            m.load_state_dict(saved["state"])
            run = hidetd.load(%r, m)
            got = run(saved["x"])
            assert isinstance(got, torch.Tensor), type(got)  # the model's own output, not a list
            with torch.no_grad():
                torch.testing.assert_close(got, m(saved["x"]), rtol=1e-4, atol=1e-4)
            assert compile_cache.stats["hits"] == 1 and compile_cache.stats["lowered"] == 0, compile_cache.stats
            assert not torch._dynamo.utils.counters["frames"], dict(torch._dynamo.utils.counters)
            try:
                run(torch.randn(3, 8))
                raise SystemExit("another shape ran")
            except RuntimeError as e:
                assert "not what" in str(e) and "input 0 has shape [3, 8], saved for [2, 8]" in str(e), e
            d = TinyDict().eval()
            d.load_state_dict(saved["state"])
            got = hidetd.load(%r, d)(saved["x"])
            assert sorted(got) == ["k", "x", "y"] and got["k"] == 2 and got["x"] is saved["x"], got
            with torch.no_grad():
                torch.testing.assert_close(got["y"], d(saved["x"])["y"], rtol=1e-4, atol=1e-4)
            w = hidetd.compile(m, address=%r, tune="none", reference=True, cache_dir=%r)
            with torch.no_grad():
                torch.testing.assert_close(w(saved["x"]), m(saved["x"]), rtol=1e-4, atol=1e-4)
            assert compile_cache.stats["warm_starts"] == 1 and compile_cache.stats["lowered"] == 0, compile_cache.stats
            assert not torch._dynamo.utils.counters["frames"], dict(torch._dynamo.utils.counters)
            y = torch.randn(3, 8)
            with torch.no_grad():
                torch.testing.assert_close(w(y), m(y), rtol=1e-4, atol=1e-4)
            assert torch._dynamo.utils.counters["frames"]["ok"] == 1, dict(torch._dynamo.utils.counters)
            print("ok")
        """) % (os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
                , os.path.join(self.dir, "state.pt"), path, path + "d", self.daemon.sock, self.dir)
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, HIDETD_BACKEND_CACHE="off", HIDETD_WARM_START="1"))
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        self.assertIn("ok", r.stdout)

    def test_other_shapes_and_options_are_other_keys(self):
        from hidetd.backend import Options
        graphs = []

        def capture(gm, example_inputs):
            graphs.append((gm, list(example_inputs)))
            return gm.forward

        m = Mixed().eval()
        x = torch.randn(2, 8, 4, 4).to(memory_format=torch.channels_last)
        keys = []
        for inp in (x, torch.randn(1, 8, 4, 4), x.contiguous()):
            torch._dynamo.reset()
            with torch.no_grad():
                torch.compile(m, backend=capture)(inp)
            gm, ins = graphs[-1]
            keys.append(compile_cache.key_of(gm, ins, Options(None, {"tune": "none"})))
        gm, ins = graphs[0]
        for extra in ({"dtype": "f16"}, {"tune": "model"}, {"reference": True, "cuda_graphs": True}):
            keys.append(compile_cache.key_of(gm, ins, Options(None, dict({"tune": "none"}, **extra))))
        self.assertNotIn(None, keys)
        # Options that do not change the lowering are the same key (the same graph traced
        # again is too: test_second_compilation_...); every other shape, layout or option is a
        # key of its own.
        self.assertEqual(keys[5], keys[0])
        self.assertEqual(len(set(keys[:5])), 5, keys)

    def test_mutated_input_is_not_stored(self):
        m, x = Mutates(), torch.randn(2, 8)
        with torch.no_grad():
            want = m.eval()(x.clone())
        e, d = self.compile(m, x.clone())
        self.assertEqual((d["hits"], d["stores"], d["lowered"], d["uncacheable"]), (0, 0, 1, 1), d)
        torch.testing.assert_close(e.output, want)
        self.assertEqual(self.entries(), [])
        self.assertIsNone(compile_cache.directory("off"))
        self.assertTrue(compile_cache.directory(None).endswith(os.path.join("hidetd", "backend")))

    def test_an_entry_others_may_write_is_not_unpickled(self):
        # An entry is code to the unpickler: one that another user could have written is skipped.
        d = tempfile.mkdtemp(prefix="hidetd-cc-")
        self.addCleanup(shutil.rmtree, d, True)
        key = "ab" + "0" * 62
        self.assertTrue(compile_cache.store(d, key, {"payload": 1}))
        self.assertEqual(os.stat(os.path.join(d, "ab")).st_mode & 0o777, 0o700)
        self.assertEqual(compile_cache.load(d, key)["payload"], 1)
        before = compile_cache.stats["unreadable"]
        for path, mode in ((os.path.join(d, "ab", key + ".pkl"), 0o666), (os.path.join(d, "ab"), 0o777)):
            os.chmod(path, mode)
            self.assertIsNone(compile_cache.load(d, key), path)
            os.chmod(path, 0o600 if path.endswith(".pkl") else 0o700)
        self.assertEqual(compile_cache.stats["unreadable"], before + 2)
        self.assertEqual(compile_cache.load(d, key)["payload"], 1)


if __name__ == "__main__":
    unittest.main()
