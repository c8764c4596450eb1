"""Session 10 call B: the ATen graph the backend gets on CUDA for a 1-layer BERT called with token
ids only (as bench/models_dynamic.py and tests/gpu/models.py call it) at S = 100 and 404, whole:
where the static compile's full [b,1,s,s] mask comes from when no attention_mask is given. Also
what padding_masks makes of it."""
import functools
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.getcwd(), "clients", "python"))  # run from the repository root
warnings.simplefilter("ignore")
import torch  # noqa: E402
import transformers  # noqa: E402
from hidetd import aten, backend  # noqa: E402


def dump(gm):
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        shape = tuple(v.shape) if hasattr(v, "shape") else ""
        dt = str(v.dtype).replace("torch.", "") if hasattr(v, "dtype") else ""
        args = [getattr(a, "name", a) if not isinstance(a, (list, tuple)) else [getattr(x, "name", x) for x in a]
                for a in n.args]
        print("  %-28s %-52s %s %s %s" % (n.name, str(n.target)[:52], str(args)[:90], shape, dt))


def show(gm, example_inputs, opts, report):
    print("--- graph (%d nodes)" % len(gm.graph.nodes))
    dump(gm)
    print("--- padding_masks rewrote", aten.padding_masks(gm))
    raise SystemExit(0)


backend._compile_aten = show
print("transformers", transformers.__version__, "torch", torch.__version__)
cfg = transformers.BertConfig(num_hidden_layers=1)
m = transformers.BertModel(cfg).eval().half().cuda()
for s in (100, 404):
    print("=== ids only, b3 s%d" % s)
    torch._dynamo.reset()
    c = torch.compile(m, backend=functools.partial(backend.hidetd_backend, options={"cache_dir": "off"}))
    with torch.no_grad():
        try:
            c(torch.randint(0, 1000, (3, s), device="cuda"))
        except SystemExit:
            pass
