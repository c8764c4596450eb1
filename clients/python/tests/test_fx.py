"""hidetd.fx: a small MLP module exported into a graph (nodes, weights, names the state_dict
can bind), unsupported modules refused naming the node, and, with $HIDETD_BIN, the export
accepted by the real daemon. Needs PyTorch (skipped with a message without it)."""
import os
import unittest

from support import Daemon, hidetd

try:
    import torch
    from torch import nn
except ImportError:
    torch = None


class ExportScript(unittest.TestCase):
    """examples/graphs/export_fx.py answers --help, and says what to install, without PyTorch
    (hidden from it here whether or not it is installed)."""

    def run_script(self, *args):
        import subprocess
        import sys
        from support import EXAMPLES  # $HIDETD_EXAMPLES when the tests run from an installed copy
        path = os.path.join(EXAMPLES, "export_fx.py")
        code = ("import sys; sys.modules['torch'] = None; sys.argv = [%r] + %r; "
                "exec(compile(open(%r).read(), %r, 'exec'), {'__name__': '__main__', "
                "'__file__': %r})" % (path, list(args), path, path, path))
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    def test_help_without_torch(self):
        p = self.run_script("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("usage:", p.stdout)
        self.assertNotIn("Traceback", p.stderr)

    def test_export_without_torch_says_so(self):
        p = self.run_script("mlp_block")
        self.assertEqual(p.returncode, 2)
        self.assertIn("PyTorch is needed", p.stderr)
        self.assertNotIn("Traceback", p.stderr)


@unittest.skipIf(torch is None, "PyTorch is not installed: the fx exporter cannot be tested here")
class Export(unittest.TestCase):
    def mlp(self):
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(64, 128)
                self.fc2 = nn.Linear(128, 64)
                self.norm = nn.LayerNorm(64)

            def forward(self, x):
                h = torch.nn.functional.gelu(self.fc1(x), approximate="tanh")
                return self.norm(self.fc2(h) + x)
        return MLP()

    def test_mlp(self):
        m = self.mlp()
        ex = hidetd.export_fx(m, [torch.zeros(16, 64)])
        g = ex.request["graph"]
        self.assertEqual(g["inputs"], [{"name": "x", "shape": [16, 64], "dtype": "f16"}])
        ops = [n["op"] for n in g["nodes"]]
        self.assertEqual(ops, ["transpose", "matmul", "add", "gelu", "transpose", "matmul", "add",
                               "add", "layernorm"])
        self.assertEqual(g["nodes"][3]["attrs"], {"approximate": "tanh"})
        self.assertEqual({w["name"]: w["shape"] for w in g["weights"]},
                         {"fc1.weight": [128, 64], "fc1.bias": [128], "fc2.weight": [64, 128],
                          "fc2.bias": [64], "norm.weight": [64], "norm.bias": [64]})
        self.assertEqual(len(g["outputs"]), 1)
        w = ex.weights(m)
        self.assertEqual(set(w), set(ex.weight_map))
        self.assertEqual(w["fc1.weight"].dtype, torch.float16)
        self.assertTrue(torch.equal(w["fc1.weight"], m.fc1.weight.detach().half()))

    def test_conv_is_nhwc(self):
        m = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        ex = hidetd.export_fx(m, [torch.zeros(2, 8, 10, 10)])
        g = ex.request["graph"]
        self.assertEqual(g["inputs"][0]["shape"], [2, 10, 10, 8])
        self.assertEqual(list(ex.input_layout.values()), ["nhwc"])
        self.assertEqual(list(ex.output_layout.values()), ["nhwc"])
        conv = [n for n in g["nodes"] if n["op"] == "conv2d"][0]
        self.assertEqual(conv["attrs"]["padding"], [1, 1])
        self.assertEqual(ex.weight_map["0.weight"]["permute"], [0, 2, 3, 1])
        self.assertEqual([x["shape"] for x in g["weights"] if x["name"] == "0.weight"], [[16, 3, 3, 8]])
        bn = [n for n in g["nodes"] if n["op"] == "batchnorm"][0]
        self.assertEqual(bn["attrs"]["axis"], 3)
        w = ex.weights(m)
        self.assertEqual(tuple(w["0.weight"].shape), (16, 3, 3, 8))
        self.assertEqual(w["1.running_var"].dtype, torch.float32)

    def test_refused(self):
        m = nn.Sequential(nn.Linear(8, 8), nn.Softmax(dim=-1))
        with self.assertRaisesRegex(hidetd.fx.ExportError, r"node _?1: module 1 \(Softmax\) is not supported"):
            hidetd.export_fx(m, [torch.zeros(2, 8)])

    @unittest.skipUnless(os.environ.get("HIDETD_BIN"), "HIDETD_BIN is not set: the export is not sent to a daemon")
    def test_daemon_accepts_export(self):
        d = Daemon()
        try:
            ex = hidetd.export_fx(self.mlp(), [torch.zeros(16, 64)], tune="none")
            with hidetd.Client(d.sock) as c:
                p = c.graph(ex.request)
            self.assertEqual(set(p.weights), set(ex.weight_map))
            # The transposes were folded into the matmuls: no layout kernel was needed.
            self.assertTrue(any(s.kernels and "matmul" in s.kernels[0][0] for s in p.steps))
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
