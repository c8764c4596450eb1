"""The torch.compile backend (hidetd.backend) on small modules, against the real hidetd
($HIDETD_BIN, no GPU workers, tune "none"): what is lowered and split, what is folded, how a
refused node and a daemon that is down are handled, the options, and the entry point. On a
machine without a GPU the plans are made and checked by the daemon but PyTorch runs the model
(the tensors are on the CPU), so every answer is compared with eager PyTorch. Dynamic shapes
(dynamic=True, mark_dynamic): the graph request names the sizes and declares their dims, new
sizes neither recompile nor send requests, and sizes a graph cannot express are explained."""
import copy
import functools
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

from support import HERE, Daemon, hidetd

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # the runtime's own tests run without PyTorch; these need it
    torch = None


def needs_torch(cls):
    return unittest.skipUnless(torch is not None, "PyTorch is not installed for this Python "
                               "(clients/python/tests/torch_tests.sh runs these with it)")(cls)


if torch is not None:
    class Block(nn.Module):
        """A conv block and a head: conv, batch norm, ReLU6, max pool, global mean, linear."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, padding=1)
            self.bn = nn.BatchNorm2d(16)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = F.relu6(self.bn(self.conv(x)))
            y = F.max_pool2d(y, 2)
            return self.fc(y.mean((2, 3)))

    class WithCumsum(nn.Module):
        """Linear, cumsum (no hidetd lowering), linear: split into two pieces."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(32, 32)
            self.b = nn.Linear(32, 8)

        def forward(self, x):
            return self.b(torch.cumsum(torch.relu(self.a(x)), dim=1))

    class WithArange(nn.Module):
        """Position ids made in forward (folded into a constant), an embedding, a layer norm."""

        def __init__(self):
            super().__init__()
            self.pos = nn.Embedding(64, 32)
            self.ln = nn.LayerNorm(32)

        def forward(self, x):
            ids = torch.arange(x.shape[1]).unsqueeze(0)
            return self.ln(x + self.pos(ids))

    class WithOddEps(nn.Module):
        """A layer norm whose eps (2.0) the daemon refuses: that node is left to PyTorch."""

        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(8, eps=2.0)

        def forward(self, x):
            return torch.tanh(self.ln(torch.sigmoid(x)))


    class FoldedFromWeight(nn.Module):
        """cumsum of a weight: no lowering, reads only a weight - folded, made once."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16))

        def forward(self, x):
            return torch.relu(x * torch.cumsum(self.w, 0))

    class Attention(nn.Module):
        """SDPA as models call it: a projection, GQA heads (enable_gqa), a boolean padding mask
        or causal, and an output projection."""

        def __init__(self, causal, gqa):
            super().__init__()
            self.causal, self.gqa = causal, gqa
            self.q = nn.Linear(64, 4 * 64)
            self.kv = nn.Linear(64, 2 * (2 if gqa else 4) * 64)
            self.o = nn.Linear(4 * 64, 64)

        def forward(self, x, keep):
            b, s, _ = x.shape
            hk = 2 if self.gqa else 4
            q = self.q(x).view(b, s, 4, 64).transpose(1, 2)
            k, v = self.kv(x).view(b, s, 2, hk, 64).permute(2, 0, 3, 1, 4)
            mask = None if self.causal else keep[:, None, None, :]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal,
                                               enable_gqa=self.gqa)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class CustomAttention(nn.Module):
        """Attention spelled out over one sequence x [s, 64]: scores = q @ k^T with k [s, 64]
        (N is s) and p @ v with v [s, 64] (K is s), no SDPA call."""

        def __init__(self):
            super().__init__()
            self.q = nn.Linear(64, 64)
            self.k = nn.Linear(64, 64)
            self.v = nn.Linear(64, 64)

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            p = torch.softmax((q @ k.t()) * 0.125, dim=-1)
            return p @ v

    class MaskedAttention(nn.Module):
        """SDPA with a mask built in the forward from aranges, as transformers builds GPT-2's:
        causal as a boolean mask, causal as an additive one (the dtype's lowest, not -inf), or a
        sliding window (not causal)."""

        def __init__(self, kind):
            super().__init__()
            self.kind = kind
            self.q = nn.Linear(64, 4 * 64)
            self.kv = nn.Linear(64, 2 * 4 * 64)
            self.o = nn.Linear(4 * 64, 64)

        def forward(self, x):
            b, s, _ = x.shape
            q = self.q(x).view(b, s, 4, 64).transpose(1, 2)
            k, v = self.kv(x).view(b, s, 2, 4, 64).permute(2, 0, 3, 1, 4)
            i = torch.arange(s, device=x.device)
            keep = i[None, :] <= i[:, None]
            if self.kind == "bool":
                mask = keep[None, None].expand(b, 1, s, s)
            elif self.kind == "additive":
                mask = torch.zeros(s, s, dtype=x.dtype).masked_fill(~keep, torch.finfo(x.dtype).min)[None, None]
            else:
                mask = (keep & (i[None, :] > i[:, None] - 8))[None, None]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class SafeSoftmax(nn.Module):
        """Masked attention's softmax: a row that is all -inf gives zeros, not NaN."""

        def forward(self, x, bias):
            return torch.ops.aten._safe_softmax(x + bias, -1) * 2.0

    class PaddedAttention(nn.Module):
        """BERT's self-attention: an additive padding mask from an input [b, s] (1 keeps a key),
        expanded to [b, 1, s, s], through SDPA - which on a GPU (or under sdpa_kernel(MATH)) PyTorch traces
        as its math decomposition (bmm over [4*b, s, s], _safe_softmax)."""

        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(64, 3 * 4 * 64)
            self.o = nn.Linear(4 * 64, 64)

        def forward(self, x, keep):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
            bias = (1.0 - keep[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            bias = bias.expand(b, 1, s, s)  # as transformers' _prepare_4d_attention_mask does
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.2)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class BuiltMask(PaddedAttention):
        """The padding mask as transformers' mask builder makes it for a bidirectional model: the
        [b, 1, 1, s] padding part ANDed with a part that holds everywhere (kv_idx >= 0 over an
        arange), [b, 1, s, s], turned additive by where. pad: then expanded over the heads,
        padded and sliced back, as PyTorch's CUDA SDPA does to a mask of unaligned rows. cuda: the
        form the H200 showed (PyTorch 2.11, transformers 5.17): the all-true part is itself an AND
        of a 0-d True with the arange test, and the AND is expanded before the where."""

        def __init__(self, pad=False, cuda=False):
            super().__init__()
            self.pad = pad
            self.cuda_form = cuda

        def forward(self, x, keep):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
            everywhere = torch.arange(s)[None, None, None, :] >= 0
            if self.cuda_form:
                everywhere = torch.full((), True) & everywhere
            allowed = keep[:, None, None, :].bool() & everywhere.transpose(-1, -2)
            if self.cuda_form:
                allowed = allowed.expand(b, -1, s, s)
            bias = torch.where(allowed, 0.0, float("-inf"))
            if self.pad:
                bias = F.pad(bias.expand(b, 4, s, s), (0, 7))[..., :s]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.2)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class CausalBuiltMask(PaddedAttention):
        """A decoder's mask as transformers' builder makes it given an attention_mask (GPT-2):
        kv_idx <= q_idx over aranges of s, ANDed with a 0-d True and with the [b, 1, 1, s] padding
        part, expanded to [b, 1, s, s], made additive by where. inverted: the where hides what
        the AND lets through (no causal mask then: it must not be split)."""

        def __init__(self, inverted=False):
            super().__init__()
            self.inverted = inverted

        def forward(self, x, keep):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
            kv_idx, q_idx = torch.arange(s)[None, None, None, :], torch.arange(s)[None, None, :, None]
            causal = torch.full((), True) & (kv_idx <= q_idx)
            allowed = (causal & keep[:, None, None, :].bool()).expand(b, -1, s, s)
            bias = torch.where(allowed, float("-inf"), 0.0) if self.inverted else torch.where(allowed, 0.0, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.2)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class AllThrough(PaddedAttention):
        """The mask transformers builds on CUDA for token ids without an attention_mask: kv_idx >= 0
        over an arange (true everywhere), expanded to [b, 1, s, s], made additive by where."""

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
            allowed = (torch.arange(s)[None, None, :, None] >= 0).expand(b, -1, s, s)
            bias = torch.where(allowed, 0.0, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.2)
            return self.o(y.transpose(1, 2).reshape(b, s, 4 * 64))

    class MlpLn(nn.Module):
        """Linear, layer norm, ReLU, linear over [batch, seq, 32]: dynamic in batch and seq."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(32, 64)
            self.ln = nn.LayerNorm(64)
            self.b = nn.Linear(64, 32)

        def forward(self, x):
            return self.b(torch.relu(self.ln(self.a(x))))

    class DropsFirst(nn.Module):
        """A linear, then its rows but the first (seq - 1 of them) and the rows twice (2 * seq):
        sizes a graph cannot name."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(16, 16)

        def forward(self, x):
            y = torch.tanh(self.a(x))
            return torch.sigmoid(y[:, 1:]), torch.cat([y, y], 1).relu()


@needs_torch
class BackendTest(unittest.TestCase):
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
        opts = dict(self.opts)
        opts.update(extra)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            e = hidetd.explain(model.eval(), *inputs, **opts)
        return e, [str(w.message) for w in caught]

    def recording(self):
        """The graph requests the backend sends from now on (backend._client wrapped)."""
        from hidetd import backend
        sent, real = [], backend._client

        def client(opts):
            c = real(opts)
            plan_json = c.plan_json

            def record(req, **kw):
                sent.append(copy.deepcopy(req))
                return plan_json(req, **kw)
            c.plan_json = record
            return c
        backend._client = client
        self.addCleanup(setattr, backend, "_client", real)
        return sent

    def compile_dynamic(self, m, **extra):
        reports = []
        be = functools.partial(hidetd.backend.hidetd_backend, options=dict(self.opts, **extra),
                               _reports=reports)
        return torch.compile(m, backend=be, dynamic=True), reports

    def test_dynamic_request_names_the_sizes(self):
        # Checked at the request level: the daemon may refuse names (then PyTorch runs it).
        sent = self.recording()
        m = MlpLn().eval()
        c, reports = self.compile_dynamic(m, dynamic_max=4096)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad():
                for b, s in ((4, 7), (3, 9), (5, 5)):
                    x = torch.randn(b, s, 32)
                    torch.testing.assert_close(c(x), m(x))
                    if b == 4:
                        asked = len(sent)
        self.assertEqual(len(reports), 1, "a new size recompiled")
        self.assertEqual(len(sent), asked, "a new size sent a graph request")
        req = sent[0]
        dims = req["dims"]
        self.assertEqual(len(dims), 2, req)
        for d in dims.values():
            self.assertEqual(d, {"min": 2, "max": 4096})
        batch, seq = req["graph"]["inputs"][0]["shape"][:2]
        self.assertEqual(req["graph"]["inputs"][0]["shape"], [batch, seq, 32])
        self.assertEqual({batch, seq}, set(dims))
        rows = "*".join(sorted((batch, seq)))
        shapes = [n["attrs"]["shape"] for n in req["graph"]["nodes"] if n["op"] == "reshape"]
        self.assertIn([rows, 32], shapes)
        self.assertIn([rows, 64], shapes)
        self.assertIn([batch, seq, 32], shapes)
        # Weights stay static; the report lists the ranges.
        self.assertTrue(all(isinstance(d, int) for w in req["graph"]["weights"] for d in w["shape"]))
        self.assertEqual(reports[0].dims, {batch: (2, 4096), seq: (2, 4096)})

    def requests_only(self):
        """The graph requests the backend makes from now on, answered by an empty plan instead of
        the daemon: what the backend asks, whatever a daemon would answer (PyTorch runs the
        pieces on the CPU)."""
        from hidetd import backend
        sent, real = [], backend._client

        class Fake:
            address = "recording"

            def plan_json(self, req, **kw):
                sent.append(copy.deepcopy(req))
                return {"steps": [], "prepare": []}
        backend._client = lambda opts: Fake()
        self.addCleanup(setattr, backend, "_client", real)
        return sent

    def dynamic_requests(self, m, *inputs, **extra):
        """(reports, requests) of m compiled with dynamic=True, answered by empty plans."""
        sent = self.requests_only()
        c, reports = self.compile_dynamic(m.eval(), **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad():
                torch.testing.assert_close(c(*inputs), m(*inputs))
        return reports, sent

    def assert_named_only(self, req):
        """Every size of the request that follows the dynamic sizes is a name or a product of
        names: no reshape or slice attribute holds a number times a name (which the naming
        would have refused, leaving its node to PyTorch)."""
        names = set(req["dims"])
        for n in req["graph"]["nodes"]:
            for key in ("shape", "ends"):
                for d in (n.get("attrs") or {}).get(key, []):
                    if isinstance(d, str):
                        self.assertTrue(set(d.split("*")) <= names, (n, names))

    def test_dynamic_attention_is_one_node_over_names(self):
        # [b, 4, s, 64] q/k/v: one 4-D attention node with b and s named, no [4*b, s, 64] view.
        m = MaskedAttention("bool")
        reports, sent = self.dynamic_requests(m, torch.randn(2, 9, 64), dtype="f16")
        r = reports[0]
        self.assertEqual(r.torch, 0, str(r))
        self.assertEqual(len(sent), 1)
        req = sent[0]
        self.assert_named_only(req)
        ops = [n["op"] for n in req["graph"]["nodes"]]
        self.assertEqual(ops.count("attention"), 1, ops)
        self.assertNotIn("softmax", ops)
        att = next(n for n in req["graph"]["nodes"] if n["op"] == "attention")
        # The mask built from aranges of s is causal at every size: the flag, no mask input.
        self.assertEqual(len(att["inputs"]), 3, att)
        self.assertTrue(att["attrs"].get("causal"), att)
        b, s, d = req["graph"]["inputs"][0]["shape"]
        self.assertEqual((sorted((b, s)), d), (sorted(req["dims"]), 64))

    def test_dynamic_f32_attention_says_why(self):
        # The op takes f16/bf16; spelled out, f32 attention would view [b, 4, s, 64] as 4*b rows.
        m = MaskedAttention("bool")
        reports, sent = self.dynamic_requests(m, torch.randn(2, 9, 64))
        left = reports[0].left
        self.assertEqual(len(left), 1, left)
        op, reasons = next(iter(left.items()))
        self.assertIn("attention", op)
        reason = reasons[0]
        self.assertRegex(reason, r"attention with a dynamic batch: .*q is f32: options=.*"
                                 r"merge the batch with the 4 heads \(4\*s\d+ rows\)")
        for req in sent:
            self.assert_named_only(req)

    def test_dynamic_math_attention_is_put_back(self):
        # PyTorch's math form of a masked SDPA call (what a GPU trace of BERT holds) cannot be a
        # graph with dynamic sizes; the backend puts the SDPA call back: one attention node with
        # the padding mask and the call's scale, no bmm or softmax left to PyTorch. Run by
        # PyTorch here (empty plans), the rewritten graph gives the model's result. In f16 the
        # math form upcasts q, k, v to f32; the upcasts go with it.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for dt in (torch.float32, torch.float16):
            with self.subTest(str(dt)):
                torch._dynamo.reset()
                torch.manual_seed(0)
                m = PaddedAttention().to(dt)
                x = torch.randn(3, 9, 64, dtype=dt)
                keep = torch.ones(3, 9, dtype=torch.int64)
                keep[1, 6:] = 0
                keep[2, 2:] = 0
                sent = self.requests_only()
                # f32 runs in f16 kernels by the option; an f16 model as it is (its upcasts to
                # f32 are then real casts, which the rewrite must take away).
                extra = {"dtype": "f16"} if dt == torch.float32 else {}
                c, reports = self.compile_dynamic(m.eval(), **extra)
                with warnings.catch_warnings(), sdpa_kernel(SDPBackend.MATH), torch.no_grad():
                    warnings.simplefilter("ignore")
                    got, want = c(x, keep), m(x, keep)
                tol = 1e-5 if dt == torch.float32 else 2e-3
                torch.testing.assert_close(got, want, rtol=tol, atol=tol)
                r = reports[0]
                self.assertEqual(r.torch, 0, str(r))
                req = sent[-1]
                self.assert_named_only(req)
                ops = [n["op"] for n in req["graph"]["nodes"]]
                self.assertEqual(ops.count("attention"), 1, ops)
                self.assertNotIn("softmax", ops)
                self.assertEqual(ops.count("matmul"), 2, ops)  # qkv and o only
                att = next(n for n in req["graph"]["nodes"] if n["op"] == "attention")
                self.assertEqual(len(att["inputs"]), 4, att)  # q, k, v and the mask
                self.assertAlmostEqual(att["attrs"]["scale"], 0.2, places=6)
                # The math form's upcasts (f16) and the cast back are gone: the attention's one
                # reader is the heads' transpose back, which the daemon folds into a bshd layout.
                readers = [n["op"] for n in req["graph"]["nodes"] if att["outputs"][0] in n["inputs"]]
                self.assertEqual(readers, ["transpose"], req["graph"]["nodes"])

    def test_built_padding_mask_reaches_attention_as_b11s(self):
        # A [b, 1, s, s] mask that is a [b, 1, 1, s] padding mask ANDed with a constant that lets
        # everything through reaches the attention node as [b, 1, 1, s] (the op would otherwise
        # read a mask value per score); run by PyTorch (empty plans), the rewritten graph gives
        # the model's result. The same after the pad and slice back that PyTorch's CUDA SDPA puts
        # around a mask of unaligned rows, and in the nested form the H200's trace had. (No compile
        # cache: a hit would skip the lowering.)
        for pad, cuda in ((False, False), (True, False), (False, True)):
            with self.subTest(pad=pad, cuda=cuda):
                torch.manual_seed(0)
                m = BuiltMask(pad, cuda).eval()
                x = torch.randn(3, 9, 64)
                keep = torch.ones(3, 9, dtype=torch.int64)
                keep[1, 6:] = 0
                keep[2, 2:] = 0
                sent = self.requests_only()
                torch._dynamo.reset()
                # f16 kernels (the attention op's dtypes) for the f32 model.
                opts = dict(self.opts, dtype="f16", cache_dir="off")
                c = torch.compile(m, backend=functools.partial(hidetd.backend.hidetd_backend, options=opts))
                with warnings.catch_warnings(), torch.no_grad():
                    warnings.simplefilter("ignore")
                    got, want = c(x, keep), m(x, keep)
                torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
                nodes = [n for req in sent for n in req["graph"]["nodes"]]
                att = [n for n in nodes if n["op"] == "attention"]
                self.assertEqual(len(att), 1, sent)
                self.assertEqual(len(att[0]["inputs"]), 4, att)
                # The AND with the constant (a mul of 0/1 masks) and the expands are gone: the mask is
                # where() of the [b, 1, 1, s] padding part (the op broadcasts it).
                ops = [n["op"] for n in nodes]
                self.assertNotIn("mul", ops, nodes)
                self.assertNotIn("expand", ops, nodes)
                made = {o: n for n in nodes for o in n["outputs"]}
                self.assertEqual(made[att[0]["inputs"][3]]["op"], "where", nodes)

    def padded_at_two_sizes(self, c, m, sent):
        """c (m compiled) against m at [3, 9] and [2, 13] with a padded batch entry; returns the
        requests sent that hold an attention node (at least one)."""
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            for b, s in ((3, 9), (2, 13)):
                x = torch.randn(b, s, 64)
                keep = torch.ones(b, s, dtype=torch.int64)
                keep[1, s - 3:] = 0
                torch.testing.assert_close(c(x, keep), m(x, keep), rtol=2e-3, atol=2e-3)
        reqs = [r for r in sent if any(n["op"] == "attention" for n in r["graph"]["nodes"])]
        self.assertTrue(reqs, sent)
        return reqs

    def test_dynamic_built_padding_mask_reaches_attention_as_b11s(self):
        # The same built mask with dynamic sizes: the all-true part depends on s (no constant to
        # evaluate) and is told by its form; the AND becomes the padding part read by the model's
        # expand, the where's expand takes that expand's sizes. The attention node's mask is
        # [b, 1, 1, s] - as [b, 1, s, s] it named s twice, and the daemon refused the graph
        # (transformers' BERT with an attention_mask at dynamic=True ran wholly in PyTorch). Run by
        # PyTorch (empty plans) at two sizes, the rewritten graph gives the model's result.
        for cuda in (False, True):
            with self.subTest(cuda=cuda):
                torch.manual_seed(0)
                m = BuiltMask(cuda=cuda).eval()
                sent = self.requests_only()
                torch._dynamo.reset()
                c, _ = self.compile_dynamic(m, dtype="f16", cache_dir="off")
                reqs = self.padded_at_two_sizes(c, m, sent)
                for req in reqs:
                    self.assert_named_only(req)
                    nodes = req["graph"]["nodes"]
                    att = next(n for n in nodes if n["op"] == "attention")
                    self.assertEqual(len(att["inputs"]), 4, att)
                    made = {o: n for n in nodes for o in n["outputs"]}
                    self.assertEqual(made[att["inputs"][3]]["op"], "where", nodes)
                    cond = made[att["inputs"][3]]["inputs"][0]
                    shape = next(i["shape"] for i in req["graph"]["inputs"] if i["name"] == cond)
                    self.assertEqual(len(shape), 4, shape)
                    self.assertEqual(shape[1:3], [1, 1], shape)
                    self.assertTrue(all(isinstance(d, str) for d in (shape[0], shape[3])), shape)

    def test_causal_padding_mask_splits_into_flag_and_b11s(self):
        # A decoder's built mask (causal AND padding, [b, 1, s, s]) becomes the causal flag and
        # the [b, 1, 1, s] padding part, fixed sizes and dynamic ones (where, as [b, 1, s, s], the
        # additive mask named s twice and the daemon refused the graph: GPT-2 with an
        # attention_mask at dynamic=True ran wholly in PyTorch). Run by PyTorch (empty plans: the
        # CPU flash op takes the mask and is_causal together), the rewritten graph gives the
        # model's result at two sizes. A where that hides what the AND lets through is no causal
        # mask: not split.
        for dynamic, inverted in ((False, False), (True, False), (False, True)):
            with self.subTest(dynamic=dynamic, inverted=inverted):
                torch.manual_seed(0)
                m = CausalBuiltMask(inverted).eval()
                sent = self.requests_only()
                torch._dynamo.reset()
                if dynamic:
                    c, _ = self.compile_dynamic(m, dtype="f16", cache_dir="off")
                else:
                    opts = dict(self.opts, dtype="f16", cache_dir="off")
                    c = torch.compile(m, backend=functools.partial(hidetd.backend.hidetd_backend, options=opts))
                reqs = self.padded_at_two_sizes(c, m, sent)
                for req in reqs:
                    nodes = req["graph"]["nodes"]
                    att = next(n for n in nodes if n["op"] == "attention")
                    self.assertEqual(bool(att["attrs"].get("causal")), not inverted, att)
                    self.assertEqual(len(att["inputs"]), 4, att)
                    if inverted:
                        continue
                    made = {o: n for n in nodes for o in n["outputs"]}
                    cond = made[att["inputs"][3]]["inputs"][0]
                    shape = next(i["shape"] for i in req["graph"]["inputs"] if i["name"] == cond)
                    self.assertEqual(shape[1:3], [1, 1], shape)

    def test_cudnn_form_causal_padding_mask_splits(self):
        # On an H200, PyTorch 2.11 traces a masked SDPA call as _scaled_dot_product_cudnn_attention
        # (the bias a positional argument): GPT-2 given an attention_mask kept its [b, 1, s, s]
        # mask there, the AND and its where ran in PyTorch at dynamic sizes and each attention
        # read a mask value per score (4 to 6 times the kernel's time). The op cannot run on a
        # CPU, so the passes are checked on its trace (meta kernels), fixed sizes and symbolic.
        from torch.fx.experimental.proxy_tensor import make_fx

        def decoder(q, k, v, keep):
            b, _, s, _ = q.shape
            kv_idx, q_idx = torch.arange(s)[None, None, None, :], torch.arange(s)[None, None, :, None]
            causal = torch.full((), True) & (kv_idx <= q_idx)
            allowed = (causal & keep[:, None, None, :].bool()).expand(b, -1, s, s)
            bias = torch.where(allowed, torch.tensor(0.0, dtype=torch.float16),
                               torch.tensor(-65504.0, dtype=torch.float16))
            return torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, bias, False, scale=0.2)[0]

        q = torch.randn(2, 4, 9, 64, dtype=torch.float16)
        keep = torch.ones(2, 9, dtype=torch.int64)
        for mode in ("fake", "symbolic"):
            with self.subTest(mode=mode):
                gm = make_fx(decoder, tracing_mode=mode)(q, q, q, keep)
                self.assertEqual(hidetd.aten.causal_padding_masks(gm), 1, gm.graph)
                hidetd.aten.padding_masks(gm)
                att = next(n for n in gm.graph.nodes if "cudnn_attention" in str(n.target))
                self.assertTrue(att.kwargs.get("is_causal"), att)
                shape = hidetd.aten.meta_of(att.args[3]).shape
                self.assertEqual([str(d) for d in shape[1:3]], ["1", "1"], shape)

    def test_efficient_form_mask_stripped_for_hidetd_given_back_for_torch(self):
        # f32 SDPA on CUDA is PyTorch's memory-efficient form, its bias padded to 8 keys, sliced
        # back and expanded to [b, h, s, s]. With dynamic sizes the pad is (8 - s % 8) % 8 in the
        # graph, and padding_masks failed on it (TypeError: a node compared with 0): f32 BERT and
        # GPT-2 given an attention_mask did not compile at dynamic=True on the H200. Now the pad
        # is stripped with the expands, [b, 1, 1, s] for the attention op; where PyTorch runs the
        # node (the daemon takes no f32 attention with a dynamic batch) the form gets back a bias
        # it takes (it refuses [b, 1, 1, s], and an expand whose batch stride is not a multiple
        # of 8), once. The form cannot run on a CPU: checked on its trace.
        from torch.fx.experimental.proxy_tensor import make_fx
        aten = torch.ops.aten

        def encoder(q, k, v, keep):
            b, h, s, _ = q.shape
            bias = torch.where(keep[:, None, None, :].bool(), 0.0, -65504.0).to(q.dtype)
            bias = F.pad(bias, (0, (8 - s % 8) % 8))[..., :s].expand(b, h, s, s)
            return aten._scaled_dot_product_efficient_attention(q, k, v, bias, False, 0.0, True, scale=0.2)[0]

        q = torch.randn(2, 4, 9, 64)
        keep = torch.ones(2, 9, dtype=torch.int64)
        for mode in ("fake", "symbolic"):
            with self.subTest(mode=mode):
                gm = make_fx(encoder, tracing_mode=mode)(q, q, q, keep)
                att = next(n for n in gm.graph.nodes if "efficient_attention" in str(n.target))
                self.assertGreater(hidetd.aten.padding_masks(gm), 0, gm.graph)
                shape = hidetd.aten.meta_of(att.args[3]).shape
                self.assertEqual([str(d) for d in shape[1:3]], ["1", "1"], shape)
                self.assertEqual(hidetd.aten.efficient_masks_for_torch(gm, {att}), 1, gm.graph)
                bias = hidetd.aten.meta_of(att.args[3])
                q_shape = hidetd.aten.meta_of(att.args[0]).shape
                self.assertEqual([str(d) for d in bias.shape], [str(d) for d in q_shape[:3]] + [str(q_shape[2])])
                # expand(slice(pad(mask))): rows of 16 keys (a multiple of 8), as PyTorch's own.
                e = att.args[3]
                self.assertIs(e.target, aten.expand.default, e)
                self.assertIsNotNone(hidetd.aten._pad_sliced_back(e.args[0]), e.args[0])
                self.assertEqual(hidetd.aten.efficient_masks_for_torch(gm, {att}), 0, gm.graph)
                gm.graph.lint()

    def test_static_math_attention_drops_an_all_through_mask(self):
        # PyTorch's math form of SDPA (how a CUDA trace holds a masked call) in a static graph, its
        # mask constant and true everywhere: put back as the SDPA call, the mask is dropped, so
        # the attention node has no mask input (the daemon's own fold of the math form kept it,
        # [b, 1, s, s] read per score). Run by PyTorch (empty plans): the model's result.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        torch.manual_seed(0)
        m = AllThrough().eval()
        x = torch.randn(3, 9, 64)
        sent = self.requests_only()
        torch._dynamo.reset()
        opts = dict(self.opts, dtype="f16", cache_dir="off")
        c = torch.compile(m, backend=functools.partial(hidetd.backend.hidetd_backend, options=opts))
        with warnings.catch_warnings(), sdpa_kernel(SDPBackend.MATH), torch.no_grad():
            warnings.simplefilter("ignore")
            got, want = c(x), m(x)
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
        nodes = [n for req in sent for n in req["graph"]["nodes"]]
        att = [n for n in nodes if n["op"] == "attention"]
        self.assertEqual(len(att), 1, nodes)
        self.assertEqual(len(att[0]["inputs"]), 3, att)
        self.assertFalse(att[0]["attrs"].get("causal"), att)
        ops = [n["op"] for n in nodes]
        for gone in ("where", "softmax", "matmul_batched"):
            self.assertNotIn(gone, ops, nodes)

    def test_dynamic_slice_of_a_buffer_is_a_named_end(self):
        class Positions(nn.Module):
            """x + pos(position_ids[:, :s]), position_ids a [1, 64] buffer, as BERT's."""

            def __init__(self):
                super().__init__()
                self.pos = nn.Embedding(64, 32)
                self.register_buffer("position_ids", torch.arange(64).expand(1, -1), persistent=False)

            def forward(self, x):
                return torch.tanh(x + self.pos(self.position_ids[:, :x.shape[1]]))
        reports, sent = self.dynamic_requests(Positions(), torch.randn(3, 9, 32))
        r = reports[0]
        self.assertEqual(r.torch, 0, str(r))
        req = sent[0]
        seq = req["graph"]["inputs"][0]["shape"][1]
        self.assertIsInstance(seq, str)
        cuts = [n for n in req["graph"]["nodes"] if n["op"] == "slice"]
        self.assertEqual(len(cuts), 1, req)
        self.assertEqual(cuts[0]["attrs"]["ends"], [seq])
        self.assertEqual(cuts[0]["attrs"]["starts"], [0])
        # The embedding of the whole buffer reads only weights (the daemon's prepare phase);
        # the cut is its [1, s, 32] prefix.
        emb = next(n for n in req["graph"]["nodes"] if n["op"] == "embedding")
        self.assertEqual(cuts[0]["inputs"], emb["outputs"])
        weights = {w["name"] for w in req["graph"]["weights"]}
        self.assertTrue(set(emb["inputs"]) <= weights, (emb, weights))

    def test_static_attention_request_unchanged(self):
        # Without dynamic sizes f32 attention is spelled out as before: [B*H, S, D] matmuls.
        sent = self.requests_only()
        e, _ = self.explain(MaskedAttention("bool"), torch.randn(2, 9, 64))
        self.assertEqual(e.torch, 0, str(e))
        nodes = sent[0]["graph"]["nodes"]
        shapes = [n["attrs"]["shape"] for n in nodes if n["op"] == "reshape"]
        self.assertIn([8, 9, 64], shapes)
        self.assertEqual([n["op"] for n in nodes].count("matmul"), 5)  # q, kv, o, two in attention
        self.assertNotIn("attention", [n["op"] for n in nodes])

    def test_dynamic_tiny_transformers_are_named_whole(self):
        # BERT and GPT-2 (2 layers, hidden 128, head dim 64) with dynamic=True in f16: the
        # whole model is one request over names; only GPT-2's gelu constant, a Python float
        # Dynamo passes as a float64 tensor, stays in PyTorch.
        try:
            import transformers
        except ImportError:
            self.skipTest("transformers is not installed")
        bert = transformers.BertModel(transformers.BertConfig(
            hidden_size=128, num_attention_heads=2, num_hidden_layers=2, intermediate_size=256,
            vocab_size=500, max_position_embeddings=128))
        gpt2 = transformers.GPT2Model(transformers.GPT2Config(
            n_embd=128, n_head=2, n_layer=2, vocab_size=500, n_positions=128, use_cache=False,
            bos_token_id=0, eos_token_id=0))
        for name, m in (("bert", bert), ("gpt2", gpt2)):
            with self.subTest(name):
                torch._dynamo.reset()
                ids = torch.randint(0, 500, (2, 9))
                sent = self.requests_only()
                c, reports = self.compile_dynamic(m.eval(), dtype="f16")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with torch.no_grad():
                        c(ids)
                r = reports[0]
                left = {op for op, why in r.left.items() if "float64 scalar" not in why[0]}
                self.assertEqual(left, set(), str(r))
                self.assertEqual(len(r.pieces), 1, str(r))
                req = sent[-1]
                self.assert_named_only(req)
                ops = [n["op"] for n in req["graph"]["nodes"]]
                self.assertEqual(ops.count("attention"), 2, ops)
                ids_shape = req["graph"]["inputs"][0]["shape"]
                self.assertEqual(sorted(ids_shape), sorted(req["dims"]))  # [b, s], both named
                if name == "bert":
                    # position ids, token types: cut to s
                    seq = req["graph"]["inputs"][0]["shape"][1]
                    self.assertTrue(any(n["op"] == "slice" and n["attrs"]["ends"] == [seq]
                                        for n in req["graph"]["nodes"]), ops)

    def test_dynamic_end_to_end(self):
        # On a GPU the plans run (at each size, from one compilation); on the CPU PyTorch does.
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        m = MlpLn().eval().to(dev)
        c, reports = self.compile_dynamic(m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad():
                for b, s in ((4, 7), (2, 3), (6, 100)):
                    x = torch.randn(b, s, 32, device=dev)
                    torch.testing.assert_close(c(x), m(x), atol=2e-3, rtol=2e-3)
        r = reports[0]
        self.assertEqual(r.torch, 0, str(r))
        self.assertEqual(len(reports), 1)
        plan = r.compiled.pieces[0].plan_json
        self.assertEqual(sorted(plan["dims"]), sorted(r.dims))
        if dev == "cuda":
            # One compilation served the three sizes (len(reports) above) through its plans.
            # (The plan's memo of sizes is not counted: a background re-ask that brings new
            # tables clears it, as it may between these calls.)
            self.assertTrue(r.ran_plans)
            # Replayed from CUDA graphs, one per shape: each call's fresh input gives eager's
            # answer (plain, captured, replayed; back to an earlier shape's graph).
            torch._dynamo.reset()
            c, reports = self.compile_dynamic(m, cuda_graphs=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with torch.no_grad():
                    for b, s in ((4, 7),) * 3 + ((6, 100),) * 3 + ((4, 7),) * 2:
                        x = torch.randn(b, s, 32, device=dev)
                        torch.testing.assert_close(c(x), m(x), atol=2e-3, rtol=2e-3)
            self.assertEqual(reports[0].torch, 0, str(reports[0]))

    def test_dynamic_custom_attention_matmuls_are_hidetd(self):
        # Issue 39: q @ k^T names N (k's rows: s) and p @ v names K (v's rows: s); the daemon
        # takes both matmuls (before, they were refused and left to PyTorch with the reason).
        x = torch.randn(9, 64)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=512)
        m = CustomAttention().eval()
        e, _ = self.explain(m, x)
        mm_left = {op: r for op, r in e.left.items() if "mm" in op or "matmul" in op}
        self.assertEqual(mm_left, {}, str(e))
        nodes = [n for g in e.graphs for req in g.requests for n in req["graph"]["nodes"]]
        mms = [n for n in nodes if n["op"] == "matmul"]
        self.assertGreaterEqual(len(mms), 5, [n["op"] for n in nodes])  # q, k, v, q @ k^T, p @ v
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x), rtol=1e-4, atol=1e-5)

    def test_sizes_a_graph_cannot_name_are_explained(self):
        x = torch.randn(2, 6, 16)
        torch._dynamo.mark_dynamic(x, 1, min=3, max=64)  # s - 1 >= 2: no size-1 guard
        e, _ = self.explain(DropsFirst(), x)
        left = e.left
        self.assertIn("aten.slice.Tensor", left, str(e))
        self.assertRegex(left["aten.slice.Tensor"][0], r"a size of s\d+ - 1: a graph's sizes are "
                                                       r"numbers, names or products of names")
        self.assertRegex(left["aten.cat.default"][0], r"a size of 2\*s\d+")
        # The linear and tanh before them are hidetd's (or refused by a daemon without names).
        self.assertEqual(list(e.graphs[0].dims.values()), [(3, 64)])

    def test_conv_block_is_one_piece(self):
        m = Block().eval()
        x = torch.randn(2, 3, 16, 16)
        e, msgs = self.explain(m, x)
        self.assertEqual(e.torch, 0, str(e))
        self.assertEqual(len(e.graphs), 1)
        self.assertEqual(len(e.graphs[0].pieces), 1, str(e))
        self.assertGreater(e.graphs[0].pieces[0]["kernels"], 1)
        ops = {n["op"] for n in e.graphs[0].requests[0]["graph"]["nodes"]}
        self.assertTrue({"conv2d", "batchnorm", "clamp", "pool2d", "reduce", "matmul"} <= ops, ops)
        # No GPU here: the plan was made, and PyTorch gave the answer, saying so once.
        self.assertTrue(any("CUDA tensors" in s for s in msgs), msgs)
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x))

    def test_reference_matches_eager(self):
        # options reference=True runs each piece's graph as docs/graphs.md defines it: the
        # lowering's meaning, checked without a GPU. Channels-last, with a [16, 3, 3, 3] conv
        # weight whose NCHW and NHWC shapes are the same (bound by its layout, not its shape).
        m = Block().eval().to(memory_format=torch.channels_last)
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
        x = torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last)
        e, _ = self.explain(m, x, reference=True)
        self.assertEqual(e.torch, 0, str(e))
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x), rtol=1e-4, atol=1e-5)

    def test_folded_values_follow_their_weights(self):
        m = FoldedFromWeight().eval()
        x = torch.randn(4, 16)
        opts = dict(self.opts, reference=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = torch.compile(m, backend=hidetd.backend.hidetd_backend, options=opts)
            with torch.no_grad():
                torch.testing.assert_close(c(x), m(x))
                m.w.mul_(-2.0)         # in place: the folded cumsum must be made again
                torch.testing.assert_close(c(x), m(x))

    def test_safe_softmax_rows_of_minus_inf(self):
        x = torch.randn(2, 4, 8)
        bias = torch.zeros(2, 4, 8)
        bias[0, 1, :] = float("-inf")      # a fully masked row: zeros, as PyTorch gives
        bias[1, 2, :5] = float("-inf")
        e, _ = self.explain(SafeSoftmax().eval(), x, bias, reference=True)
        self.assertEqual(e.torch, 0, str(e))
        with torch.no_grad():
            want = SafeSoftmax()(x, bias)
        self.assertEqual(float(want[0, 1].abs().sum()), 0.0)
        torch.testing.assert_close(e.output, want)
        ops = [n["op"] for n in e.graphs[0].requests[0]["graph"]["nodes"]]
        self.assertIn("masked_fill", ops)

    def test_unsupported_op_splits_and_is_named(self):
        m = WithCumsum().eval()
        x = torch.randn(4, 32)
        e, _ = self.explain(m, x)
        self.assertEqual(e.torch, 1, str(e))
        self.assertIn("aten.cumsum.default", e.left)
        self.assertIn("no hidetd lowering", e.left["aten.cumsum.default"][0])
        self.assertEqual(len(e.graphs[0].pieces), 2, str(e))
        self.assertIn("aten.cumsum.default", str(e))
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x))

    def test_constants_are_folded(self):
        m = WithArange().eval()
        x = torch.randn(2, 16, 32)
        e, _ = self.explain(m, x)
        self.assertEqual(e.torch, 0, str(e))
        self.assertGreaterEqual(e.folded, 1, str(e))  # arange: made once, a weight of the plan
        ops = [n["op"] for n in e.graphs[0].requests[0]["graph"]["nodes"]]
        self.assertIn("layernorm", ops)
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x))

    def test_refused_node_moves_to_pytorch(self):
        m = WithOddEps().eval()
        x = torch.randn(3, 8)
        e, _ = self.explain(m, x)
        self.assertEqual(e.torch, 1, str(e))
        self.assertIn("aten.native_layer_norm.default", e.left)
        why = e.left["aten.native_layer_norm.default"][0]
        self.assertIn("refused by the daemon", why)
        self.assertIn("eps", why)
        self.assertTrue(e.graphs[0].refused)
        self.assertEqual(len(e.graphs[0].pieces), 2, str(e))  # sigmoid | layer norm | tanh
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x))

    def test_dtype_policy_casts_on_entry_and_exit(self):
        m = WithCumsum().eval()
        e, _ = self.explain(m, torch.randn(4, 32), dtype="f16")
        req = e.graphs[0].requests[0]["graph"]
        self.assertEqual({t["dtype"] for t in req["inputs"] + req["weights"]}, {"f32"})
        casts = [n["attrs"]["dtype"] for n in req["nodes"] if n["op"] == "cast"]
        self.assertIn("f16", casts)
        self.assertIn("f32", casts)  # the output goes back to the model's dtype
        mm = [n for n in req["nodes"] if n["op"] == "matmul"]
        self.assertTrue(mm)

    def test_attention_is_one_node(self):
        # f16 SDPA becomes hidetd's attention op (a padding mask made additive, causal as the
        # op's flag, grouped-query heads as they are); f32 stays spelled out (the op is f16/bf16).
        x = torch.randn(2, 40, 64)
        keep = torch.ones(2, 40, dtype=torch.bool)
        keep[1, 31:] = False
        for causal, gqa in ((False, False), (True, True)):
            m = Attention(causal, gqa).eval()
            e, _ = self.explain(m, x, keep, dtype="f16", reference=True, arch="sm_90a")
            self.assertEqual(e.torch, 0, str(e))
            nodes = [n for r in e.graphs[0].requests for n in r["graph"]["nodes"]]
            att = [n for n in nodes if n["op"] == "attention"]
            self.assertEqual(len(att), 1, [n["op"] for n in nodes])
            self.assertEqual(att[0]["attrs"].get("causal", False), causal)
            self.assertEqual(len(att[0]["inputs"]), 3 if causal else 4)
            self.assertNotIn("softmax", {n["op"] for n in nodes})
            with torch.no_grad():
                want = m(x, keep)
            err = float((e.output - want).abs().max() / want.abs().max())
            self.assertLess(err, 2e-2, "the graphs' answer differs from eager's")
        e, _ = self.explain(Attention(False, False).eval(), x, keep, reference=True)
        ops = {n["op"] for r in e.graphs[0].requests for n in r["graph"]["nodes"]}
        self.assertNotIn("attention", ops)
        self.assertIn("softmax", ops)

    def test_causal_mask_becomes_the_flag(self):
        # A mask that reads no input and lets exactly tril(S, Sk) through is the op's causal flag:
        # no mask input, no mask computation left; a sliding window stays a mask.
        x = torch.randn(2, 40, 64)
        for kind, causal in (("bool", True), ("additive", True), ("window", False)):
            m = MaskedAttention(kind).eval()
            e, _ = self.explain(m, x, dtype="f16", reference=True, arch="sm_90a")
            self.assertEqual(e.torch, 0, str(e))
            att = [n for r in e.graphs[0].requests for n in r["graph"]["nodes"] if n["op"] == "attention"]
            self.assertEqual(len(att), 1, str(e))
            self.assertEqual(att[0].get("attrs", {}).get("causal", False), causal, kind)
            self.assertEqual(len(att[0]["inputs"]), 3 if causal else 4, kind)
            if causal:
                self.assertEqual(e.folded, 0, "%s: the mask's computation is gone" % kind)
            with torch.no_grad():
                want = m(x)
            err = float((e.output - want).abs().max() / want.abs().max())
            self.assertLess(err, 2e-2, "%s: the graphs' answer differs from eager's" % kind)

    def test_daemon_down_warns_and_runs_eager(self):
        m = Block().eval()
        x = torch.randn(1, 3, 8, 8)
        gone = os.path.join(tempfile.mkdtemp(), "nothing.sock")
        e, msgs = self.explain(m, x, address=gone)
        self.assertTrue(e.graphs[0].fallback, str(e))
        self.assertTrue(any("cannot get a plan" in s and "running the model in PyTorch" in s
                            for s in msgs), msgs)
        with torch.no_grad():
            torch.testing.assert_close(e.output, m(x))

    def test_gradients_enabled_runs_pytorch(self):
        m = WithCumsum()
        x = torch.randn(2, 32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            c = torch.compile(m, backend=hidetd.backend.hidetd_backend, options=self.opts)
            y = c(x)
        self.assertTrue(any("inference only" in str(w.message) for w in caught))
        torch.testing.assert_close(y, m(x))

    def test_options(self):
        from hidetd.backend import Options
        with self.assertRaisesRegex(ValueError, "unknown option 'tunes'"):
            Options(None, {"tunes": "none"})
        with self.assertRaisesRegex(ValueError, "dtype 'f8'"):
            Options(None, {"dtype": "f8"})
        with self.assertRaisesRegex(ValueError, "tune 'fast'"):
            Options(None, {"tune": "fast"})
        old = os.environ.get("HIDETD_TUNE")
        os.environ["HIDETD_TUNE"] = "measure"
        try:
            self.assertEqual(Options(None, {}).tune, "measure")
            self.assertEqual(Options(None, {"tune": "none"}).tune, "none")
        finally:
            if old is None:
                del os.environ["HIDETD_TUNE"]
            else:
                os.environ["HIDETD_TUNE"] = old
        self.assertTrue(Options("reduce-overhead", {}).cuda_graphs)
        self.assertEqual(Options(None, {"dtype": "half"}).compute, "f16")
        self.assertEqual(Options(None, {"budget": 5}).request_options()["budget"], {"seconds": 5.0})

    def test_cuda_graphs_one_capture_per_shape(self):
        # CudaGraphed's bookkeeping, with the capture itself recorded (no GPU here): a shape is
        # captured at its second call and replayed after; each dynamic shape has its own graph,
        # the least recently used dropped past MAX_GRAPHS; a change of the plans' tables or of a
        # weight makes the shape run plainly once and be captured again.
        from hidetd import backend
        calls, captured = [], []

        class FakeCapture:
            def __init__(self, fn, static, args):
                captured.append(tuple(args[0].shape))
                self.version, self.weight, self.wv = 0, args[1], args[1]._version

            def same_static(self, args):
                return args[1] is self.weight and args[1]._version == self.wv

            def replay(self, args):
                return ("replay", tuple(args[0].shape))

        version = [0]
        g = backend.CudaGraphed(lambda x, w: calls.append(tuple(x.shape)) or ("plain", tuple(x.shape)),
                                static=[1], tables_version=lambda: version[0])
        g._on_cuda = lambda tensors: True
        real = backend._Capture
        backend._Capture = FakeCapture
        try:
            w = torch.zeros(3)
            x = lambda n: torch.zeros(n)
            self.assertEqual(g(x(2), w), ("plain", (2,)))
            self.assertEqual(g(x(2), w), ("replay", (2,)))
            self.assertEqual(g(x(2), w), ("replay", (2,)))
            self.assertEqual(g(x(5), w), ("plain", (5,)))
            self.assertEqual(g(x(5), w), ("replay", (5,)))
            self.assertEqual(g(x(2), w), ("replay", (2,)))  # the first shape's graph is kept
            self.assertEqual(captured, [(2,), (5,)])
            version[0] = 1  # a re-ask brought tuned tables: plain once, then captured again
            self.assertEqual(g(x(2), w), ("plain", (2,)))
            self.assertEqual(g(x(2), w), ("replay", (2,)))
            w.add_(1)       # a weight changed in place: the same
            self.assertEqual(g(x(2), w), ("plain", (2,)))
            self.assertEqual(g(x(2), w), ("replay", (2,)))
            for n in range(10, 10 + backend.CudaGraphed.MAX_GRAPHS):
                g(x(n), w)
                g(x(n), w)
            self.assertEqual(len(g.captures), backend.CudaGraphed.MAX_GRAPHS)
            self.assertNotIn((((2,), (1,), torch.float32),), list(g.captures))
            n = len(captured)  # dropped, and seen before: captured again at once
            self.assertEqual(g(x(2), w), ("replay", (2,)))
            self.assertEqual(len(captured), n + 1)
        finally:
            backend._Capture = real

    def test_entry_point_names_the_backend(self):
        # Installed, the package registers backend="hidetd" with Dynamo: no import needed.
        tmp = tempfile.mkdtemp()
        src = os.path.join(HERE, "..")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                            "--no-build-isolation", "--disable-pip-version-check",
                            "--target", tmp, src], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        code = ("import torch, warnings\n"
                "warnings.simplefilter('ignore')\n"
                "import torch._dynamo\n"
                "assert 'hidetd' in torch._dynamo.list_backends(), torch._dynamo.list_backends()\n"
                "m = torch.nn.Linear(8, 4).eval()\n"
                "c = torch.compile(m, backend='hidetd', options={'address': %r, 'tune': 'none'})\n"
                "x = torch.randn(2, 8)\n"
                "with torch.no_grad():\n"
                "    torch.testing.assert_close(c(x), m(x))\n"
                "import hidetd; assert hidetd.__file__.startswith(%r), hidetd.__file__\n"
                "print('ok')\n") % (self.daemon.sock, tmp)
        env = dict(os.environ, PYTHONPATH=tmp)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=tmp)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("ok", r.stdout)


if __name__ == "__main__":
    unittest.main()
