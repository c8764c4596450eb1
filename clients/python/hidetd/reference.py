"""hidetd.reference - runs a /v1/graphs request's graph with PyTorch, node by node, as
docs/graphs.md defines each node: the meaning of a graph, without the daemon's fusion or
kernels. The tests use it to check the torch.compile backend's lowering on machines without a
GPU (a lowering that is wrong gives a wrong answer here, whatever the kernels do), and anyone can
use it to see what a graph computes.

    outs = run_graph(request["graph"], {"x": x}, {"w": w})     # name -> tensor

Every value is computed in its declared dtype on the inputs' device; the ops a dtype has no
CPU kernel for in old PyTorch versions are computed in f32 and rounded back.
"""
import math

_DT = None


def _dtypes():
    global _DT
    if _DT is None:
        import torch
        _DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
               "i32": torch.int32, "i64": torch.int64}
    return _DT


def _pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def _fill(v):
    if v == "-inf":
        return -math.inf
    if v == "inf":
        return math.inf
    return float(v)


def run_graph(graph, inputs, weights):
    """The graph's outputs {name: tensor} for these inputs and weights."""
    import torch
    import torch.nn.functional as F
    env = {}
    for t in graph.get("inputs", []):
        env[t["name"]] = inputs[t["name"]]
    for t in graph.get("weights", []):
        env[t["name"]] = weights[t["name"]]
    dt = _dtypes()
    pending = list(graph["nodes"])
    # Nodes may come in any order: run each once its inputs are there.
    while pending:
        progressed = False
        rest = []
        for n in pending:
            if all(i in env for i in n["inputs"]):
                env[n["outputs"][0]] = _node(n, [env[i] for i in n["inputs"]], torch, F, dt)
                progressed = True
            else:
                rest.append(n)
        if not progressed:
            raise ValueError("graph: nodes %s read names nothing makes" % [n["name"] for n in rest][:3])
        pending = rest
    return {o: env[o] for o in graph["outputs"]}


def _f32(fn, *xs):
    """fn computed in f32, rounded back to the first input's dtype."""
    out = fn(*[x.float() for x in xs])
    return out.to(xs[0].dtype)


def _node(n, ins, torch, F, dt):
    op = n["op"]
    a = n.get("attrs", {})
    x = ins[0]
    if op in ("add", "sub", "mul", "div", "max", "min"):
        f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
             "max": torch.maximum, "min": torch.minimum}[op]
        return _f32(f, ins[0], ins[1])
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        f = getattr(torch, op)
        other = ins[1].float() if len(ins) > 1 else float(a["value"])
        return f(x.float(), other).to(x.dtype)
    unary = {"relu": torch.relu, "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
             "exp": torch.exp, "neg": torch.neg, "abs": torch.abs, "square": torch.square,
             "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "erf": torch.erf, "log": torch.log,
             "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
             "relu6": lambda v: torch.clamp(v, 0, 6)}
    if op in unary:
        return _f32(unary[op], x)
    if op == "gelu":
        return _f32(lambda v: F.gelu(v, approximate=a.get("approximate", "none")), x)
    if op == "scale":
        return _f32(lambda v: v * a["value"], x)
    if op == "shift":
        return _f32(lambda v: v + a["value"], x)
    if op == "clamp":
        return _f32(lambda v: torch.clamp(v, a.get("min"), a.get("max")), x)
    if op == "hardtanh":
        return _f32(lambda v: torch.clamp(v, a.get("min", -1.0), a.get("max", 1.0)), x)
    if op == "leaky_relu":
        return _f32(lambda v: F.leaky_relu(v, a.get("negative_slope", 0.01)), x)
    if op == "pow":
        return _f32(lambda v: torch.pow(v, a["exponent"]), x)
    if op == "cast":
        return x.to(dt[a["dtype"]])
    if op == "copy":
        return x.clone()
    if op == "where":
        c, p, q = ins
        return torch.where(c != 0, p, q)
    if op == "masked_fill":
        return x.masked_fill(ins[1] != 0, _fill(a["value"]))
    if op == "reshape":
        return x.reshape(a["shape"])
    if op == "transpose":
        perm = a.get("perm") or list(reversed(range(x.dim())))
        return x.permute(*perm).contiguous()
    if op == "expand":
        return x.expand(*a["shape"]).contiguous()
    if op == "slice":
        axes = a.get("axes") or list(range(len(a["starts"])))
        steps = a.get("steps") or [1] * len(axes)
        idx = [slice(None)] * x.dim()
        for ax, s, e, st in zip(axes, a["starts"], a["ends"], steps):
            idx[ax] = slice(s, e, st)
        return x[tuple(idx)].contiguous()
    if op == "pad":
        return _f32(lambda v: F.pad(v, a["pads"], value=a.get("value", 0.0)), x)
    if op == "concat":
        return torch.cat(ins, a["axis"])
    if op == "batchnorm":
        s, b, m, v = [t.float() for t in ins[1:5]]
        axis = a.get("axis", 1) % x.dim()
        shape = [1] * x.dim()
        shape[axis] = -1
        k = s / torch.sqrt(v + a.get("eps", 1e-5))
        return (x.float() * k.reshape(shape) + (b - m * k).reshape(shape)).to(x.dtype)
    if op == "layernorm":
        w = ins[1].float() if len(ins) > 1 else None
        b = ins[2].float() if len(ins) > 2 else None
        return F.layer_norm(x.float(), [x.shape[-1]], w, b, a.get("eps", 1e-5)).to(x.dtype)
    if op in ("softmax", "log_softmax"):
        f = torch.log_softmax if op == "log_softmax" or a.get("log") else torch.softmax
        return f(x.float(), a.get("axis", -1)).to(x.dtype)
    if op == "reduce":
        axes = a.get("axes", [a.get("axis", -1)])
        kind = a.get("kind", "sum")
        v = x.float()
        if kind == "max":
            out = torch.amax(v, dim=axes, keepdim=a.get("keepdim", False))
        else:
            f = torch.mean if kind == "mean" else torch.sum
            out = f(v, dim=axes, keepdim=a.get("keepdim", False))
        if out.dim() == 0:
            out = out.reshape(1)
        return out.to(x.dtype)
    if op == "matmul":
        p, q = ins[0].float(), ins[1].float()
        if a.get("trans_a"):
            p = p.transpose(-1, -2)
        if a.get("trans_b"):
            q = q.transpose(-1, -2)
        return torch.matmul(p, q).to(ins[0].dtype)
    if op == "conv2d":
        w = ins[1].float()
        v = x.float()
        nhwc = a.get("layout", "nhwc") == "nhwc"
        if nhwc:
            v = v.permute(0, 3, 1, 2)
            w = w.permute(0, 3, 1, 2)
        y = F.conv2d(v, w, None, _pair(a.get("stride", 1)), _pair(a.get("padding", 0)),
                     _pair(a.get("dilation", 1)), a.get("groups", 1))
        if nhwc:
            y = y.permute(0, 2, 3, 1)
        return y.contiguous().to(x.dtype)
    if op == "pool2d":
        v = x.float()
        nhwc = a.get("layout", "nhwc") == "nhwc"
        if nhwc:
            v = v.permute(0, 3, 1, 2)
        kind = a["kind"]
        if kind == "max":
            y = F.max_pool2d(v, a["kernel_size"], a.get("stride") or a["kernel_size"],
                             a.get("padding", 0), a.get("dilation", 1), a.get("ceil_mode", False))
        elif kind == "avg":
            y = F.avg_pool2d(v, a["kernel_size"], a.get("stride") or a["kernel_size"],
                             a.get("padding", 0), a.get("ceil_mode", False),
                             a.get("count_include_pad", True))
        else:
            y = F.adaptive_avg_pool2d(v, a["output_size"])
        if nhwc:
            y = y.permute(0, 2, 3, 1)
        return y.contiguous().to(x.dtype)
    if op in ("embedding", "gather", "index_select"):
        axis = 0 if op == "embedding" else a.get("axis", 0) % x.dim()
        idx = ins[1].long()
        flat = torch.index_select(x, axis, idx.reshape(-1))
        shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
        return flat.reshape(shape)
    if op == "attention":
        return _attention(ins, a, torch)
    raise ValueError("reference: node %s: op %r is not known here" % (n.get("name"), op))


def _attention(ins, a, torch):
    """The attention op in f32 (docs/api.md): GQA by repeating k/v heads, causal aligned to the
    bottom right, and a row with no key left giving 0, as PyTorch's SDPA does."""
    layout = a.get("layout", "bhsd")
    mask = ins[3] if len(ins) > 3 else None
    if layout == "bshd_packed":
        # one qkv [B,S,Hq+2*Hkv,D]: q's heads, then k's, then v's; the mask after it
        qkv = ins[0].float()
        hkv = a.get("kv_heads", qkv.shape[2] // 3)
        hq = qkv.shape[2] - 2 * hkv
        q, k, v = qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv[:, :, hq + hkv:]
        mask = ins[1] if len(ins) > 1 else None
    else:
        q, k, v = (t.float() for t in ins[:3])
    bshd = layout in ("bshd", "bshd_packed")
    if bshd:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    s, skv, d = q.shape[2], k.shape[2], q.shape[3]
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = a.get("scale", 1.0 / d ** 0.5)
    sc = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        sc = sc + mask.float()
    if a.get("causal"):
        keep = torch.ones(s, skv, dtype=torch.bool).tril(diagonal=skv - s)
        sc = sc.masked_fill(~keep, float("-inf"))
    dead = sc.amax(dim=-1, keepdim=True) == float("-inf")
    p = torch.softmax(sc.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
    o = torch.matmul(p, v)
    if bshd:
        o = o.transpose(1, 2)
    return o.contiguous().to(ins[0].dtype)
