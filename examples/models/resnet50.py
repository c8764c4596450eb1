#!/usr/bin/env python3
"""examples/models/resnet50.py - torchvision's ResNet-50 through torch.compile(backend="hidetd"):
prints where each op runs (hidetd.explain) and compares the answer with PyTorch eager.

    python3 examples/models/resnet50.py [--batch 8] [--tune model] [--dtype f16]

Needs a running hidetd (the default address, or $HIDETD_SOCKET) and, to run the plans, a CUDA
GPU; on a machine without one it compiles the plans and PyTorch gives the answer. Random weights:
nothing is downloaded.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import torch  # noqa: E402
import torchvision  # noqa: E402
import hidetd  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--tune", default="model")
ap.add_argument("--dtype", default="f16", choices=["f16", "f32"])
args = ap.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.float16 if args.dtype == "f16" and device == "cuda" else torch.float32
model = torchvision.models.resnet50().eval().to(device=device, dtype=dtype,
                                                 memory_format=torch.channels_last)
x = torch.randn(args.batch, 3, 224, 224, device=device, dtype=dtype).to(memory_format=torch.channels_last)

print(hidetd.explain(model, x, tune=args.tune))
fast = hidetd.compile(model, [x], tune=args.tune)
with torch.no_grad():
    y, ref = fast(x), model(x)
err = float((y.float() - ref.float()).abs().max() / ref.float().abs().max())
print("max |hidetd - eager| / max |eager| = %.2e" % err)
