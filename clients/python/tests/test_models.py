"""The models of issue 37 through the torch.compile backend on the CPU, against the real hidetd
($HIDETD_BIN, tune "none"): torchvision's resnet50, inception_v3 and mobilenet_v2 (channels
last) and transformers' BertModel and GPT2Model, built from their libraries' own configs with
random weights (nothing is downloaded). Each must become plans the daemon accepts with no op
left to PyTorch, and the plans' graphs, run as docs/graphs.md defines them (hidetd.reference,
in f32 on the CPU), must give eager PyTorch's answer: the lowering is checked here, the kernels
on a GPU by tests/gpu/models.py."""
import unittest
import warnings

from support import Daemon, hidetd

try:
    import torch
    import torchvision
    import transformers
except ImportError:
    torch = None


def vision(name, batch=1):
    kw = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
    m = getattr(torchvision.models, name)(weights=None, **kw).eval()
    m = m.to(memory_format=torch.channels_last)
    hw = 299 if name == "inception_v3" else 224
    x = torch.randn(batch, 3, hw, hw).to(memory_format=torch.channels_last)
    return m, (x,)


def text(name, batch=1, seq=128):
    if name == "bert":
        cfg = transformers.BertConfig()
        m = transformers.BertModel(cfg)
    else:
        cfg = transformers.GPT2Config()
        m = transformers.GPT2Model(cfg)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    return m.eval(), (ids,)


def first_tensor(out):
    return out if isinstance(out, torch.Tensor) else out.last_hidden_state


@unittest.skipUnless(torch is not None, "PyTorch, torchvision or transformers is not installed "
                     "for this Python (clients/python/tests/torch_tests.sh runs these with them)")
class ModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def check(self, model, inputs):
        torch.manual_seed(0)
        with torch.no_grad():
            want = model(*inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = hidetd.explain(model, *inputs, address=self.daemon.sock, tune="none",
                               reference=True)
        self.assertTrue(e.graphs, "nothing was compiled")
        for g in e.graphs:
            self.assertIsNone(g.fallback, str(e))
        self.assertEqual(e.torch, 0, "ops left to PyTorch:\n%s" % e)
        self.assertGreater(e.hidetd, 50, str(e))
        got, want = first_tensor(e.output), first_tensor(want)
        err = float((got - want).abs().max() / want.abs().max())
        self.assertLess(err, 1e-3, "the graphs' answer differs from eager's")
        return e

    def test_resnet50(self):
        e = self.check(*vision("resnet50"))
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertTrue({"conv2d", "batchnorm", "pool2d", "reduce", "matmul"} <= ops, ops)

    def test_inception_v3(self):
        e = self.check(*vision("inception_v3"))
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertIn("concat", ops)

    def test_mobilenet_v2(self):
        e = self.check(*vision("mobilenet_v2"))
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertIn("clamp", ops)  # ReLU6

    def test_bert(self):
        e = self.check(*text("bert"))
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertTrue({"embedding", "layernorm", "softmax", "matmul"} <= ops, ops)

    def dynamic_padded(self, model, vocab, causal):
        """model (two layers: the mask's path is the same in each) with a padded batch's
        attention_mask, compiled with dynamic sizes, f16 kernels (the attention op's dtypes: an
        f32 attention with a dynamic batch stays in PyTorch), at two sizes against eager: on the
        CPU a dynamic piece runs its rewritten graph in PyTorch (there is no reference run of
        named sizes), which checks the rewrite; tests/gpu/models.py the kernels. The daemon must
        take the graph, and each attention read the [b, 1, 1, s] padding part (and be causal,
        for a decoder): transformers' [b, 1, s, s] mask named s twice, and the whole graph ran in
        PyTorch."""
        import functools
        reports = []
        be = functools.partial(hidetd.backend.hidetd_backend, _reports=reports,
                               options={"address": self.daemon.sock, "tune": "none", "reference": True,
                                        "dtype": "f16"})
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=be, dynamic=True)
        try:
            for b, s in ((3, 40), (2, 57)):
                ids = torch.randint(0, vocab, (b, s))
                mask = torch.ones(b, s, dtype=torch.long)
                mask[1, s // 2:] = 0
                with torch.no_grad():
                    want = model(ids, attention_mask=mask).last_hidden_state
                with warnings.catch_warnings(), torch.no_grad():
                    warnings.simplefilter("ignore")
                    got = compiled(ids, attention_mask=mask).last_hidden_state
                err = float((got.float() - want).abs().max() / want.abs().max())
                self.assertLess(err, 1e-3, "the graphs' answer differs from eager's at %dx%d" % (b, s))
        finally:
            torch._dynamo.reset()
        self.assertTrue(reports, "nothing was compiled")
        r = reports[0]
        self.assertGreater(r.hidetd, 40, str(r))
        att = [n for req in r.requests for n in req["graph"]["nodes"] if n["op"] == "attention"]
        self.assertEqual(len(att), 2, str(r))
        for req in r.requests:
            made = {o: n for n in req["graph"]["nodes"] for o in n["outputs"]}
            shapes = {i["name"]: i["shape"] for i in req["graph"]["inputs"]}
            for n in req["graph"]["nodes"]:
                if n["op"] == "attention":
                    self.assertEqual(len(n["inputs"]), 4, n)
                    self.assertEqual(bool(n["attrs"].get("causal")), causal, n)
                    where = made[n["inputs"][3]]
                    self.assertEqual(where["op"], "where", where)
                    self.assertEqual(shapes[where["inputs"][0]][1:3], [1, 1], shapes)

    def test_bert_dynamic_with_attention_mask(self):
        cfg = transformers.BertConfig(num_hidden_layers=2)
        torch.manual_seed(0)
        self.dynamic_padded(transformers.BertModel(cfg).eval(), cfg.vocab_size, causal=False)

    def test_gpt2_dynamic_with_attention_mask(self):
        # A decoder's mask ANDs the causal pattern in: split into the op's causal flag and the
        # padding part (aten.causal_padding_masks).
        cfg = transformers.GPT2Config(n_layer=2)
        torch.manual_seed(0)
        self.dynamic_padded(transformers.GPT2Model(cfg).eval(), cfg.vocab_size, causal=True)

    def test_gpt2(self):
        e = self.check(*text("gpt2"))
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertTrue({"embedding", "layernorm", "softmax", "matmul", "tanh"} <= ops, ops)


if __name__ == "__main__":
    unittest.main()
