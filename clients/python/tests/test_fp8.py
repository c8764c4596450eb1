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

    class Fn(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def forward(self, x):
            return self.f(x)

    class Fp8Linear(nn.Module):
        """A linear layer in FP8 as torchao's Float8Linear runs it: the weight quantized once (an
        e4m3 buffer [N, K] with a tensor or per-column scale), the input quantized dynamically
        (amax per row, or over the whole tensor with kept axes), torch._scaled_mm on the weight's
        transpose with the bias, bf16 out."""

        def __init__(self, k, n, rowwise, fast=False):
            super().__init__()
            self.rowwise, self.fast = rowwise, fast
            w = torch.randn(n, k) * 0.1
            ws = (w.abs().amax(dim=1, keepdim=True) if rowwise else w.abs().amax()) / 448.0
            self.register_buffer("w8", (w / ws).clamp(-448, 448).to(torch.float8_e4m3fn))
            self.register_buffer("ws", ws.reshape(1, n) if rowwise else ws.reshape(()))
            self.bias = nn.Parameter(torch.randn(n).to(torch.bfloat16))

        def forward(self, x):
            xf = x.float()
            dims = (1,) if self.rowwise else (0, 1)
            amax = xf.abs().amax(dim=dims, keepdim=True).clamp(min=1e-12)
            q = (xf * (448.0 / amax)).clamp(-448, 448).to(torch.float8_e4m3fn)
            return torch._scaled_mm(q, self.w8.t(), scale_a=amax / 448.0, scale_b=self.ws, bias=self.bias,
                                    out_dtype=torch.bfloat16, use_fast_accum=self.fast)

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

    def explain(self, model, *inputs, **extra):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return hidetd.explain(model.eval(), *inputs, **dict(self.opts, **extra))

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

    def test_e4m3_cast_follows_this_pytorchs_conversion(self):
        # PyTorch's conversion to float8_e4m3fn saturates on some builds and devices and gives
        # NaN beyond the range on others (CUDA's); hidetd's cast saturates. Where PyTorch does
        # not, an unclamped cast is left to PyTorch with the reason, a clamped one is lowered.
        from hidetd import aten

        def cast(x):
            return x.to(torch.float8_e4m3fn).to(torch.float32)

        def clamped(x):
            return x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)
        x = torch.randn(32, 64) * 300
        saved = dict(aten._E4M3_SATURATES)
        self.addCleanup(lambda: (aten._E4M3_SATURATES.clear(), aten._E4M3_SATURATES.update(saved)))
        for saturates in (False, True):
            aten._E4M3_SATURATES["cpu"] = saturates
            e = self.explain(Fn(cast), x, cache_dir="off")  # the probe is not in the key
            self.assertEqual(e.torch, 0 if saturates else 1, str(e))
            if not saturates:
                self.assertIn("gives NaN", e.left["aten._to_copy.default"][0])
            torch._dynamo.reset()
            e = self.explain(Fn(clamped), x, cache_dir="off")
            self.assertEqual(e.torch, 0, str(e))
            torch._dynamo.reset()

    def test_scaled_mm_is_the_fp8_matmul(self):
        for rowwise, fast in ((True, False), (False, True)):
            m = Fp8Linear(64, 32, rowwise, fast)
            x = torch.randn(16, 64, dtype=torch.bfloat16)
            e = self.explain(m, x, arch="sm_90a")
            self.assertEqual(e.torch, 0, str(e))
            mm = [n for n in self.nodes(e) if n["op"] == "matmul"]
            self.assertEqual(len(mm), 1, str(e))
            self.assertEqual(mm[0]["attrs"], {"scale_a": "row" if rowwise else "tensor",
                                              "scale_b": "col" if rowwise else "tensor",
                                              "out_dtype": "bf16", "fast_accum": fast})
            ops = [n["op"] for n in self.nodes(e)]
            self.assertIn("transpose", ops)  # the weight's .t(): trans_b in the kernel
            self.assertIn("add", ops)        # the bias: the matmul's epilogue
            with torch.no_grad():
                torch.testing.assert_close(e.output, m(x))

    def test_scaled_mm_left_to_pytorch_says_why(self):
        m = Fp8Linear(64, 32, True)
        x = torch.randn(16, 64, dtype=torch.bfloat16)
        e = self.explain(m, x, arch="sm_80")  # no FP8 matmul there: the daemon refuses the node
        self.assertEqual(e.torch, 1, str(e))
        why = e.left["aten._scaled_mm.default"][0]
        self.assertIn("fp8 needs", why)
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
