"""Launches on a real GPU: a kernel and a small graph's plan through the CUDA driver on PyTorch
tensors (and CuPy arrays, through __cuda_array_interface__, when CuPy is installed), compared
with PyTorch; a CPU tensor is refused; dynamic ops (named dims) at sizes across their ranges,
through their dispatch tables. Needs a CUDA GPU, PyTorch and $HIDETD_BIN (skipped with a
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

    def dynamic(self, request):
        """client.kernel() of a request with named dims: a DynamicKernel, or a skip when this
        daemon does not take names yet (the answer refuses the named axis)."""
        try:
            k = self.c.kernel(request)
        except hidetd.HidetdError as e:
            if e.status in (400, 422) and (e.field.startswith("dims") or "shape" in e.field):
                self.skipTest("this hidetd does not take named dims: %s" % e)
            raise
        self.assertIsInstance(k, hidetd.DynamicKernel)
        return k

    def test_dynamic_softmax(self):
        # One answer for every n in 1..4096: the sizes at the edges and between ranges.
        k = self.dynamic({"op": "softmax", "arch": arch(), "tune": "model",
                          "inputs": [{"shape": ["n", 1000], "dtype": "f16"}],
                          "dims": {"n": {"min": 1, "max": 4096}}})
        for n in (1, 16, 17, 300, 4096):
            x = torch.randn(n, 1000, device="cuda", dtype=torch.half)
            y = k(x)
            self.assertEqual(tuple(y.shape), (n, 1000))
            torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1), atol=2e-3, rtol=2e-2)
        with self.assertRaisesRegex(ValueError, r"^n is 4097; its range is 1\.\.4096$"):
            k(torch.randn(4097, 1000, device="cuda", dtype=torch.half))
        k.wait(30)

    def test_dynamic_matmul_rows(self):
        k = self.dynamic({"op": "matmul", "arch": arch(), "tune": "model",
                          "inputs": [{"shape": ["m", 256], "dtype": "f16"},
                                     {"shape": [256, 512], "dtype": "f16"}],
                          "dims": {"m": {"min": 1, "max": 2048}}})
        b = torch.randn(256, 512, device="cuda", dtype=torch.half)
        for m in (1, 7, 128, 129, 2048):
            a = torch.randn(m, 256, device="cuda", dtype=torch.half)
            torch.testing.assert_close(k(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=2e-2)
        # The ranges asked for in the background become ready; their sets give the same results.
        k.wait(60)
        a = torch.randn(100, 256, device="cuda", dtype=torch.half)
        torch.testing.assert_close(k(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=2e-2)


if __name__ == "__main__":
    unittest.main()
