"""Launches on a real GPU: a kernel and a small graph's plan through the CUDA driver on PyTorch
tensors (and CuPy arrays, through __cuda_array_interface__, when CuPy is installed), compared
with PyTorch; a CPU tensor is refused. Needs a CUDA GPU, PyTorch and $HIDETD_BIN (skipped with a
message otherwise); the examples' full-size runs are tests/gpu/graph_examples.py."""
import os
import unittest

from support import Daemon, hidetd

try:
    import torch
    GPU = torch.cuda.is_available()
    WHY = "no CUDA GPU visible to PyTorch"
except ImportError:
    torch, GPU, WHY = None, False, "PyTorch is not installed"
if not os.environ.get("HIDETD_BIN"):
    GPU, WHY = False, "HIDETD_BIN is not set"

daemon = None


def setUpModule():
    global daemon
    if not GPU:
        raise unittest.SkipTest("launch tests skipped: " + WHY)
    daemon = Daemon()


def tearDownModule():
    if daemon:
        daemon.stop()


def arch():
    major, minor = torch.cuda.get_device_capability()
    return "sm_%d%d" % (major, minor)


class Launch(unittest.TestCase):
    def setUp(self):
        self.c = hidetd.Client(daemon.sock)

    def tearDown(self):
        self.c.close()

    def test_matmul_bias_gelu(self):
        k = self.c.kernel({"op": "matmul", "arch": arch(), "tune": "model",
                           "inputs": [{"shape": [256, 128], "dtype": "f16"},
                                      {"shape": [128, 512], "dtype": "f16"},
                                      {"shape": [512], "dtype": "f16"}],
                           "epilogue": [{"op": "bias", "input": 2}, {"op": "gelu"}]})
        a = torch.randn(256, 128, device="cuda", dtype=torch.half)
        b = torch.randn(128, 512, device="cuda", dtype=torch.half)
        bias = torch.randn(512, device="cuda", dtype=torch.half)
        y = k(a, b, bias)
        ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
        torch.testing.assert_close(y.float(), ref, atol=5e-2, rtol=2e-2)
        out = torch.empty_like(y)
        self.assertIs(k.launch([a, b, bias], output=out), out)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, y)
        with self.assertRaisesRegex(ValueError, r"inputs\[0\]: expected a CUDA tensor, got a tensor on cpu"):
            k(a.cpu(), b, bias)
        with self.assertRaisesRegex(ValueError, r"inputs\[1\]: expected a contiguous"):
            k(a, b.t().contiguous().t(), bias)

    def test_small_graph_plan(self):
        g = {"inputs": [{"name": "x", "shape": [128, 64], "dtype": "f16"}],
             "weights": [{"name": "w", "shape": [64, 64], "dtype": "f16"},
                         {"name": "g", "shape": [64], "dtype": "f16"},
                         {"name": "b", "shape": [64], "dtype": "f16"}],
             "nodes": [{"op": "matmul", "inputs": ["x", "w"], "outputs": ["h"]},
                       {"op": "relu", "inputs": ["h"], "outputs": ["r"]},
                       {"op": "add", "inputs": ["r", "x"], "outputs": ["s"]},
                       {"op": "layernorm", "inputs": ["s", "g", "b"], "outputs": ["y"]}],
             "outputs": ["y"]}
        p = self.c.graph(g, arch=arch(), tune="model")
        w = {"w": torch.randn(64, 64, device="cuda", dtype=torch.half) * 0.1,
             "g": torch.randn(64, device="cuda", dtype=torch.half),
             "b": torch.randn(64, device="cuda", dtype=torch.half)}
        p.load_weights(w)
        x = torch.randn(128, 64, device="cuda", dtype=torch.half)
        y = p(x=x)["y"]
        s = torch.relu(x.float() @ w["w"].float()) + x.float()
        ref = torch.nn.functional.layer_norm(s, (64,), w["g"].float(), w["b"].float())
        torch.testing.assert_close(y.float(), ref, atol=5e-2, rtol=2e-2)
        try:
            import cupy
        except ImportError:
            return
        y2 = p.run({"x": cupy.asarray(x)})["y"]
        torch.cuda.synchronize()
        torch.testing.assert_close(torch.as_tensor(y2, device="cuda"), y)


if __name__ == "__main__":
    unittest.main()
