"""Session 19, call f: the ATen graph the torch.compile backend gets for a 1-layer GPT-2 given a
padded batch's attention_mask on CUDA (f16, dynamic sizes and fixed), before and after the
backend's mask passes, and the report: on the H200 (call c) the mask's bitwise_and, le, expand
and where ran in PyTorch and each attention read a per-row mask."""
import functools
import sys
import warnings

import torch
import transformers

import hidetd
import hidetd.aten
import hidetd.backend

sock = sys.argv[1]
orig = hidetd.backend._compile_aten


def dumping(gm, example_inputs, opts, report):
    print("==== ATen graph before the passes")
    print(gm.graph)
    n = hidetd.aten.causal_padding_masks(gm)
    print("==== causal_padding_masks split", n)
    return orig(gm, example_inputs, opts, report)


hidetd.backend._compile_aten = dumping
warnings.simplefilter("ignore")
cfg = transformers.GPT2Config(n_layer=1)
torch.manual_seed(0)
m = transformers.GPT2Model(cfg).eval().half().cuda()
for dynamic in (True, False):
    reports = []
    be = functools.partial(hidetd.backend.hidetd_backend, _reports=reports,
                           options={"address": sock, "tune": "none"})
    torch._dynamo.reset()
    c = torch.compile(m, backend=be, dynamic=dynamic)
    ids = torch.randint(0, cfg.vocab_size, (4, 37), device="cuda")
    mask = torch.ones(4, 37, dtype=torch.int64, device="cuda")
    mask[1, 20:] = 0
    with torch.no_grad():
        c(ids, attention_mask=mask)
    print("==== dynamic=%s report" % dynamic)
    for r in reports:
        print(r)
        for req in r.requests:
            for nd in req["graph"]["nodes"]:
                if nd["op"] == "attention":
                    print("attention", nd)
