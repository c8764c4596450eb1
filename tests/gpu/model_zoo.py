"""tests/gpu/model_zoo.py - the real models the torch.compile backend is checked and timed on
(issue 37), built from their libraries' own configs with random weights (nothing is downloaded):
torchvision's resnet50, inception_v3 and mobilenet_v2 (channels last), transformers' BertModel
(bert-base) and GPT2Model (gpt2), and a few the issue does not name. Shared by
tests/gpu/models.py (correctness against eager) and bench/models.py (latency against Inductor).
"""

REQUIRED = [("resnet50", 1), ("resnet50", 32), ("inception_v3", 1), ("inception_v3", 32),
            ("mobilenet_v2", 1), ("mobilenet_v2", 32),
            ("bert", 1, 128), ("bert", 8, 128), ("bert", 1, 512), ("bert", 8, 512),
            ("gpt2", 1, 128), ("gpt2", 8, 128), ("gpt2", 1, 512), ("gpt2", 8, 512)]
# Models of the same libraries that the issue does not name.
OTHERS = [("resnet18", 8), ("efficientnet_b0", 8), ("vit_b_16", 8), ("distilbert", 8, 128),
          ("densenet121", 8), ("convnext_tiny", 8)]
VISION = {"resnet50", "inception_v3", "mobilenet_v2", "resnet18", "efficientnet_b0", "vit_b_16",
          "densenet121", "convnext_tiny", "regnet_y_400mf", "shufflenet_v2_x1_0"}


def case_name(case):
    return "%s-b%d" % case[:2] + ("-s%d" % case[2] if len(case) > 2 else "")


def parse_case(text):
    """'bert-b8-s128' -> ("bert", 8, 128)."""
    parts = text.split("-")
    out = [parts[0]]
    for p in parts[1:]:
        out.append(int(p[1:]))
    return tuple(out)


def build(case, dtype, device="cuda"):
    """(model, inputs): the model in eval mode on device in dtype, and its example inputs."""
    import torch
    name, batch = case[0], case[1]
    if name in VISION:
        import torchvision
        kw = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
        m = getattr(torchvision.models, name)(weights=None, **kw)
        hw = 299 if name == "inception_v3" else 224
        calibrate_batchnorm(m.to(device), torch.randn(8, 3, hw, hw, device=device))
        m = m.eval().to(device=device, dtype=dtype, memory_format=torch.channels_last)
        x = torch.randn(batch, 3, hw, hw, device=device, dtype=dtype)
        return m, (x.to(memory_format=torch.channels_last),)
    import transformers
    seq = case[2]
    if name == "bert":
        cfg = transformers.BertConfig()
        m = transformers.BertModel(cfg)
    elif name == "gpt2":
        cfg = transformers.GPT2Config(use_cache=False)
        m = transformers.GPT2Model(cfg)
    elif name == "distilbert":
        cfg = transformers.DistilBertConfig()
        m = transformers.DistilBertModel(cfg)
    else:
        raise ValueError("unknown model %r" % name)
    m = m.eval().to(device=device, dtype=dtype)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    return m, (ids,)


def calibrate_batchnorm(m, x, rounds=4):
    """Running statistics from a few random batches (in fp32), as training would leave them:
    with the defaults (mean 0, variance 1) a randomly initialised deep network's activations grow
    layer by layer until fp16 overflows, and no comparison in fp16 means anything."""
    import torch
    bns = [b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm)]
    for b in bns:
        b.reset_running_stats()
        b.momentum = None  # a cumulative average over the rounds
    m.train()
    with torch.no_grad():
        for _ in range(rounds):
            m(x)
    m.eval()


def first_tensor(out):
    """The tensor to compare: a model's output, or a transformers output's last_hidden_state."""
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    if isinstance(out, (tuple, list)):
        return first_tensor(out[0])
    raise TypeError("no tensor in %r" % type(out))
