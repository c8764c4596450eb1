#!/usr/bin/env python3
"""examples/graphs/export_fx.py - exports a PyTorch module into a hidetd graph request
(docs/graphs.md) with torch.fx, through hidetd.fx (clients/python).

    export_fx.py mlp_block [-o mlp.json]            # the transformer MLP block of mlp_block.json
    export_fx.py resnet_bottleneck [-o rn.json]     # the ResNet bottleneck (NHWC)
    export_fx.py my.models:Block --input 8,512 --dtype f16 [-o block.json]

Writes the request (POST it to /v1/graphs, or client.graph() it) and, beside it as
NAME.weights.json, which state_dict entry (and permutation) each graph weight is and the layout
of inputs and outputs: exported.weights(module) builds the dict plan.load_weights() takes.
Modules with convolutions are exported channels-last (NHWC): see docs/python.md.
"""
import argparse
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

import hidetd  # noqa: E402

# PyTorch is needed to export, not to read --help: without it the built-in examples are not
# defined and main() says what to install.
try:
    import torch
    from torch import nn
except ImportError:
    torch = None
    nn = None


def _builtin():
    """The built-in example modules, defined once PyTorch is there."""
    return {"mlp_block": (MLPBlock, [(2048, 768)]),
            "resnet_bottleneck": (Bottleneck, [(32, 256, 56, 56)])}




class MLPBlock(nn.Module if nn else object):
    """x -> Linear -> GELU -> Linear -> + x -> LayerNorm (examples/graphs/mlp_block.json)."""

    def __init__(self, d=768, hidden=3072):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d)
        self.norm = nn.LayerNorm(d, eps=1e-5)

    def forward(self, x):
        return self.norm(self.fc2(self.act(self.fc1(x))) + x)


class Bottleneck(nn.Module if nn else object):
    """1x1 -> 3x3 -> 1x1 convolutions with batchnorm and ReLU, plus the identity
    (examples/graphs/resnet_bottleneck.json)."""

    def __init__(self, c=256, mid=64):
        super().__init__()
        self.conv1 = nn.Conv2d(c, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="mlp_block, resnet_bottleneck, or MODULE:CLASS (built without arguments)")
    ap.add_argument("--input", action="append", help="an input shape as PyTorch sees it, e.g. 8,512 (repeat per input)")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16", "f32"])
    ap.add_argument("--arch")
    ap.add_argument("--tune", choices=["none", "model", "measure"])
    ap.add_argument("-o", "--output", help="request file (default: stdout; the weights map then goes to stderr)")
    a = ap.parse_args()
    if torch is None:
        ap.exit(2, "%s: PyTorch is needed to export a module (pip install torch, or "
                   "pip install 'clients/python[torch]')\n" % ap.prog)
    builtin = _builtin()
    if a.module in builtin:
        cls, shapes = builtin[a.module]
    else:
        modname, _, clsname = a.module.partition(":")
        if not clsname:
            ap.error("%r is neither a built-in example nor MODULE:CLASS" % a.module)
        cls, shapes = getattr(importlib.import_module(modname), clsname), None
    if a.input:
        shapes = [tuple(int(d) for d in s.split(",")) for s in a.input]
    if not shapes:
        ap.error("--input is required for %s" % a.module)
    module = cls()
    # Shapes are traced on the CPU in fp32: only sizes matter here.
    ex = hidetd.export_fx(module, [torch.zeros(s) for s in shapes], dtype=a.dtype, arch=a.arch, tune=a.tune)
    req = json.dumps(ex.request, indent=1)
    meta = json.dumps(ex.meta(), indent=1)
    if a.output:
        with open(a.output, "w") as f:
            f.write(req + "\n")
        base = a.output[:-5] if a.output.endswith(".json") else a.output
        with open(base + ".weights.json", "w") as f:
            f.write(meta + "\n")
    else:
        print(req)
        print(meta, file=sys.stderr)


if __name__ == "__main__":
    main()
