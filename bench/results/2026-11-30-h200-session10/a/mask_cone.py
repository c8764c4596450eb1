"""Session 9 call F: what BERT's static attention mask looks like in the ATen graph the backend
gets on CUDA (PyTorch 2.11 and the GPU machine's transformers), and what padding_masks makes of
it: the cone of each attention node's mask, before and after the pass."""
import functools
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.getcwd(), "clients", "python"))  # run from the repository root
warnings.simplefilter("ignore")
import torch  # noqa: E402
import transformers  # noqa: E402
from hidetd import aten, backend  # noqa: E402


def cone(gm):
    for n in gm.graph.nodes:
        if n.op == "call_function" and aten._sdpa_form(n):
            print("attention", n.target, "args", [getattr(a, "name", a) for a in n.args[3:]], n.kwargs)
            stack, seen = [a for a in list(n.args[3:]) + list(n.kwargs.values()) if hasattr(a, "op")], 0
            while stack and seen < 16:
                x = stack.pop()
                seen += 1
                if x.op == "call_function":
                    v = x.meta.get("val")
                    print("   ", x.name, x.target, [getattr(a, "name", a) for a in x.args],
                          tuple(v.shape) if hasattr(v, "shape") else v, v.dtype if hasattr(v, "dtype") else "")
                    stack.extend(a for a in x.args if hasattr(a, "op"))
                else:
                    print("   ", x.name, x.op)
            return


def show(gm, example_inputs, opts, report):
    print("=== before padding_masks")
    cone(gm)
    print("padding_masks rewrote", aten.padding_masks(gm))
    print("=== after")
    cone(gm)
    raise SystemExit(0)


backend._compile_aten = show
print("transformers", transformers.__version__, "torch", torch.__version__)
cfg = transformers.BertConfig(num_hidden_layers=1)
m = transformers.BertModel(cfg).eval().half().cuda()
ids = torch.randint(0, 1000, (3, 100), device="cuda")
am = torch.ones(3, 100, dtype=torch.long, device="cuda")
am[0, 70:] = 0
c = torch.compile(m, backend=functools.partial(backend.hidetd_backend, options={"cache_dir": "off"}))
with torch.no_grad():
    try:
        c(ids)  # the models' benches pass no attention_mask
    except SystemExit:
        pass
    torch._dynamo.reset()
    c = torch.compile(m, backend=functools.partial(backend.hidetd_backend, options={"cache_dir": "off"}))
    try:
        c(ids, attention_mask=am)
    except SystemExit:
        pass
