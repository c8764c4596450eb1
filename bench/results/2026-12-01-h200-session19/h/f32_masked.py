"""Session 19, call h: f32 BERT and GPT-2 (1 layer) given a padded batch's attention_mask on CUDA,
dynamic sizes and fixed: PyTorch traces f32 SDPA as the efficient form (no cuDNN at f32), which
refuses a [b, 1, 1, s] bias (call g); the backend's mask passes strip the mask's expands. Does
each run, and match eager?"""
import functools
import sys
import traceback
import warnings

import torch
import transformers

import hidetd
import hidetd.backend

sock = sys.argv[1]
warnings.simplefilter("ignore")
for name, cls, cfg in (("bert", transformers.BertModel, transformers.BertConfig(num_hidden_layers=1)),
                       ("gpt2", transformers.GPT2Model, transformers.GPT2Config(n_layer=1))):
    torch.manual_seed(0)
    m = cls(cfg).eval().cuda()
    for dynamic in (True, False):
        reports = []
        be = functools.partial(hidetd.backend.hidetd_backend, _reports=reports, options={"address": sock, "tune": "none"})
        torch._dynamo.reset()
        c = torch.compile(m, backend=be, dynamic=dynamic)
        for b, s in ((4, 37), (3, 50)):
            ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
            mask = torch.ones(b, s, dtype=torch.int64, device="cuda")
            mask[1, s // 2:] = 0
            try:
                with torch.no_grad():
                    want = m(ids, attention_mask=mask).last_hidden_state
                    got = c(ids, attention_mask=mask).last_hidden_state
                err = float((got - want).abs().max() / want.abs().max())
                print("%s f32 dynamic=%s %dx%d: err %.1e" % (name, dynamic, b, s, err))
            except Exception as e:  # noqa: BLE001 - the failure is the finding
                inner = e.__cause__ or e
                print("%s f32 dynamic=%s %dx%d: FAILED %s" % (name, dynamic, b, s, type(e).__name__))
                print("".join(traceback.format_exception(inner)[-8:]))
        for r in reports:
            print("  ", r.summary())
            for op, reasons in sorted(r.left.items()):
                if "attention" in op:
                    print("   ", op, reasons[0][:150])
