#!/usr/bin/env python3
"""examples/models/bert.py - transformers' BertModel (the bert-base config, random weights)
through torch.compile(backend="hidetd"): prints where each op runs (hidetd.explain) and compares
the last hidden state with PyTorch eager.

    python3 examples/models/bert.py [--batch 8] [--seq 128] [--tune model]

Needs a running hidetd (the default address, or $HIDETD_SOCKET) and, to run the plans, a CUDA
GPU; on a machine without one it compiles the plans and PyTorch gives the answer.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import torch  # noqa: E402
import transformers  # noqa: E402
import hidetd  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--tune", default="model")
args = ap.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.float16 if device == "cuda" else torch.float32
cfg = transformers.BertConfig()
model = transformers.BertModel(cfg).eval().to(device=device, dtype=dtype)
ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=device)

print(hidetd.explain(model, ids, tune=args.tune))
fast = hidetd.compile(model, [ids], tune=args.tune)
with torch.no_grad():
    y, ref = fast(ids).last_hidden_state, model(ids).last_hidden_state
err = float((y.float() - ref.float()).abs().max() / ref.float().abs().max())
print("max |hidetd - eager| / max |eager| = %.2e" % err)
