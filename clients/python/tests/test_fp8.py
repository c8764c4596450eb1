"""FP8 in the torch.compile backend (issue 41), against the real hidetd ($HIDETD_BIN, no GPU
workers, tune "none"): torch.float8_e4m3fn / float8_e5m2 tensors as graph inputs and casts
(aten._to_copy / convert_element_type onto the graph's cast node), and a model that quantizes
dynamically as torchao's float8 recipes do (amax over the tensor, scale = 448 / amax, x * scale
clamped and cast to FP8, then dequantized) lowered with nothing left to PyTorch and its plan
accepted by the daemon. Without a GPU PyTorch runs the model and the answer is compared with
eager PyTorch; tests/gpu/ compares the kernels' bytes on CUDA."""
import unittest
import warnings

from support import Daemon, hidetd

try:
    import torch
    import torch.nn as nn
except ImportError:  # the runtime's own tests run without PyTorch; these need it
    torch = None

if torch is not None:
    class DynQuant(nn.Module):
        """Dynamic per-tensor quantization to `fp8` and back (torchao's Float8 'dynamic' recipe).
        amax keeps its axes ([1, 1]): the backend leaves 0-dimensional results to PyTorch."""

        def __init__(self, fp8, fmax):
            super().__init__()
            self.fp8, self.fmax = fp8, fmax

        def forward(self, x):
            xf = x.float()
            amax = xf.abs().amax(dim=(0, 1), keepdim=True).clamp(min=1e-12)
            scale = self.fmax / amax
            q = (xf * scale).clamp(-self.fmax, self.fmax).to(self.fp8)
            return q.to(torch.float32) / scale

    class Dequant(nn.Module):
        """An FP8 input with per-row scales, dequantized to bf16."""

        def forward(self, q, s):
            return (q.to(torch.float32) * s).to(torch.bfloat16)


@unittest.skipUnless(torch is not None, "PyTorch is not installed for this Python")
class Fp8Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()
        cls.opts = {"address": cls.daemon.sock, "tune": "none"}

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def setUp(self):
        torch.manual_seed(0)
        torch._dynamo.reset()

    def explain(self, model, *inputs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hidetd.explain(model.eval(), *inputs, **self.opts)

    def nodes(self, e):
        return [n for g in e.graphs for r in g.requests for n in r["graph"]["nodes"]]

    def test_dynamic_quantization_is_lowered_whole(self):
        for fp8, fmax, name in ((torch.float8_e4m3fn, 448.0, "f8e4m3"), (torch.float8_e5m2, 57344.0, "f8e5m2")):
            m = DynQuant(fp8, fmax)
            x = torch.randn(32, 64, dtype=torch.bfloat16) * 3
            e = self.explain(m, x)
            self.assertEqual(e.torch, 0, str(e))
            casts = [n["attrs"]["dtype"] for n in self.nodes(e) if n["op"] == "cast"]
            self.assertIn(name, casts, str(e))
            ops = {n["op"] for n in self.nodes(e)}
            self.assertTrue({"abs", "reduce"} <= ops, ops)
            with torch.no_grad():
                torch.testing.assert_close(e.output, m(x))

    def test_fp8_inputs_are_graph_inputs(self):
        q = (torch.randn(16, 32) * 4).to(torch.float8_e5m2)
        s = torch.rand(16, 1) + 0.5
        e = self.explain(Dequant(), q, s)
        self.assertEqual(e.torch, 0, str(e))
        ins = {t["dtype"] for g in e.graphs for r in g.requests for t in r["graph"]["inputs"]}
        self.assertIn("f8e5m2", ins, str(e))
        with torch.no_grad():
            torch.testing.assert_close(e.output, Dequant()(q, s))


if __name__ == "__main__":
    unittest.main()
