"""hidetd.fx - exports a PyTorch module into a hidetd graph (docs/graphs.md) with
torch.fx.symbolic_trace, and names which state_dict tensor (and which permutation of it) each
graph weight is, so a runtime can bind module.state_dict().

Layout: hidetd's fast convolutions are NHWC, so a module with Conv2d layers is exported
channels-last: every 4-D input and every 4-D value is NHWC in the graph (the PyTorch tensor
permuted by (0, 2, 3, 1), i.e. x.permute(0, 2, 3, 1).contiguous() or the channels_last memory
of x), conv weights are [K, R, S, C] (the state_dict's [K, C, R, S] permuted the same way),
batchnorm normalises axis 3, and 4-D outputs come back NHWC. Modules without convolutions are
exported as they are. Linear layers become a matmul with the transposed weight (a transpose
node, which the partitioner folds into trans_b) plus a bias add.

What is exported is inference: Dropout is the identity and BatchNorm uses its running
statistics. Anything else is refused with ExportError naming the node.
"""
import operator

SUPPORTED = ("nn.Linear, nn.Conv2d (zeros padding), nn.BatchNorm2d (affine, running stats), "
             "nn.LayerNorm (last axis), nn.ReLU/GELU/SiLU/Sigmoid/Tanh, nn.Dropout/Identity, "
             "F.relu/gelu/silu/sigmoid/tanh, torch.relu/sigmoid/tanh, + - * / (tensors or "
             "numbers), torch.add/mul, reshape/view/flatten, contiguous")
NHWC = (0, 2, 3, 1)


class ExportError(ValueError):
    """The module uses something the exporter cannot express; names the fx node."""


class Exported:
    """request: the /v1/graphs request (dict); weight_map: graph weight name -> {"source":
    state_dict key, "permute": axes or None, "dtype"}; input_layout/output_layout: per name,
    "nhwc" when the graph tensor is the PyTorch tensor permuted by (0, 2, 3, 1)."""

    def __init__(self, request, weight_map, input_layout, output_layout):
        self.request = request
        self.weight_map = weight_map
        self.input_layout = input_layout
        self.output_layout = output_layout

    def weights(self, module_or_state_dict, device=None):
        """The graph's weights from a module (or its state_dict): permuted, converted to the
        graph's dtypes, contiguous, on `device` (default: where they are)."""
        import torch
        sd = module_or_state_dict
        if isinstance(sd, torch.nn.Module):
            sd = dict(sd.state_dict())
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
        out = {}
        for name, m in self.weight_map.items():
            if m["source"] not in sd:
                raise KeyError("weight %r: the state_dict has no %r" % (name, m["source"]))
            t = sd[m["source"]].detach()
            if m["permute"]:
                t = t.permute(*m["permute"])
            out[name] = t.to(device=device or t.device, dtype=dt[m["dtype"]]).contiguous()
        return out

    def meta(self):
        """What a runtime needs beside the request, as JSON-able data."""
        return {"weights": self.weight_map, "input_layout": self.input_layout,
                "output_layout": self.output_layout}


def export(module, example_inputs, dtype="f16", channels_last=None, arch=None, tune=None):
    import torch
    import torch.fx
    import torch.nn.functional as F
    from torch.fx.passes.shape_prop import ShapeProp

    if dtype not in ("f16", "bf16", "f32"):
        raise ValueError("dtype must be f16, bf16 or f32, got %r" % (dtype,))
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    # Traced and shape-propagated in eval mode (batchnorm's running statistics, no dropout); the
    # caller's module is left in the mode it was in.
    training = module.training
    module.eval()
    try:
        gm = torch.fx.symbolic_trace(module)
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
    finally:
        module.train(training)
    mods = dict(gm.named_modules())
    if channels_last is None:
        channels_last = any(isinstance(m, torch.nn.Conv2d) for m in mods.values())
    nn = torch.nn

    inputs, weights, nodes, outputs = [], [], [], []
    weight_map, input_layout, output_layout = {}, {}, {}
    vals = {}  # fx node -> (graph name, graph shape, nhwc)

    def shape_of(n):
        tm = n.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            raise ExportError("node %s (%s): its result is not one tensor" % (n.name, n.target))
        return [int(d) for d in tm.shape]

    def graph_shape(shape, nhwc):
        return [shape[i] for i in NHWC] if nhwc else list(shape)

    def weight(key, shape, permute=None, wdtype=None):
        name = key
        if name not in weight_map:
            gshape = [shape[i] for i in permute] if permute else list(shape)
            weights.append({"name": name, "shape": gshape, "dtype": wdtype or dtype})
            weight_map[name] = {"source": key, "permute": list(permute) if permute else None,
                                "dtype": wdtype or dtype}
        return name

    def emit(n, op, ins, attrs=None, name=None):
        out = name or n.name
        node = {"name": out, "op": op, "inputs": ins, "outputs": [out]}
        if attrs:
            node["attrs"] = attrs
        nodes.append(node)
        return out

    def arg(n, a, i):
        if not isinstance(a, torch.fx.Node):
            raise ExportError("node %s (%s): argument %d is %r, not a tensor" % (n.name, n.target, i, a))
        return vals[a]

    def unary(n, op, attrs=None):
        name, _, nhwc = arg(n, n.args[0], 0)
        vals[n] = (emit(n, op, [name], attrs), graph_shape(shape_of(n), nhwc), nhwc)

    def binary(n, op):
        a, b = n.args[0], n.args[1]
        if len(n.args) > 2 or n.kwargs.get("alpha", 1) != 1:
            raise ExportError("node %s (%s): alpha is not supported" % (n.name, n.target))
        if not isinstance(a, torch.fx.Node) and op in ("add", "mul"):
            a, b = b, a
        if isinstance(a, torch.fx.Node) and isinstance(b, (int, float)):
            name, _, nhwc = vals[a]
            if op == "add":
                o = emit(n, "shift", [name], {"value": float(b)})
            elif op == "sub":
                o = emit(n, "shift", [name], {"value": -float(b)})
            elif op == "mul":
                o = emit(n, "scale", [name], {"value": float(b)})
            elif op == "div" and b != 0:
                o = emit(n, "scale", [name], {"value": 1.0 / float(b)})
            else:
                raise ExportError("node %s (%s): unsupported constant operand %r" % (n.name, n.target, b))
            vals[n] = (o, graph_shape(shape_of(n), nhwc), nhwc)
            return
        (na, sa, ha), (nb, sb, hb) = arg(n, a, 0), arg(n, b, 1)
        if ha != hb:
            raise ExportError("node %s (%s): mixes a channels-last (NHWC) tensor with a tensor "
                              "in PyTorch's layout; broadcasting would change meaning" %
                              (n.name, n.target))
        vals[n] = (emit(n, op, [na, nb]), graph_shape(shape_of(n), ha or hb), ha or hb)

    def reshape(n, shape):
        name, _, nhwc = arg(n, n.args[0], 0)
        if nhwc:
            raise ExportError("node %s (%s): reshaping a channels-last (NHWC) tensor would "
                              "reorder its elements; export with channels_last=False or reshape "
                              "after the convolutions only in NCHW models" % (n.name, n.target))
        vals[n] = (emit(n, "reshape", [name], {"shape": shape}), shape, False)

    for n in gm.graph.nodes:
        if n.op == "placeholder":
            shape = shape_of(n)
            nhwc = channels_last and len(shape) == 4
            inputs.append({"name": n.name, "shape": graph_shape(shape, nhwc), "dtype": dtype})
            input_layout[n.name] = "nhwc" if nhwc else "plain"
            vals[n] = (n.name, graph_shape(shape, nhwc), nhwc)
        elif n.op == "get_attr":
            t = gm
            for part in n.target.split("."):
                t = getattr(t, part)
            shape = [int(d) for d in t.shape]
            vals[n] = (weight(n.target, shape), shape, False)
        elif n.op == "call_module":
            m = mods[n.target]
            if isinstance(m, nn.Linear):
                x, xs, nhwc = arg(n, n.args[0], 0)
                if nhwc:
                    raise ExportError("node %s: Linear on a channels-last (NHWC) 4-D tensor" % n.name)
                w = weight(n.target + ".weight", [m.out_features, m.in_features])
                wt = emit(n, "transpose", [w], {"perm": [1, 0]}, name=n.name + ".wT")
                y = emit(n, "matmul", [x, wt], name=n.name + ".mm" if m.bias is not None else None)
                if m.bias is not None:
                    b = weight(n.target + ".bias", [m.out_features])
                    y = emit(n, "add", [y, b])
                vals[n] = (y, shape_of(n), False)
            elif isinstance(m, nn.Conv2d):
                x, xs, nhwc = arg(n, n.args[0], 0)
                if not nhwc:
                    raise ExportError("node %s: Conv2d needs a channels-last input; export with "
                                      "channels_last=True (the default for modules with "
                                      "convolutions)" % n.name)
                if m.padding_mode != "zeros" or isinstance(m.padding, str) and m.padding != "valid":
                    raise ExportError("node %s: Conv2d padding %r / padding_mode %r: only explicit "
                                      "zero padding is supported" % (n.name, m.padding, m.padding_mode))
                pad = [0, 0] if m.padding == "valid" else list(m.padding)
                w = weight(n.target + ".weight", list(m.weight.shape), permute=NHWC)
                attrs = {"stride": list(m.stride), "padding": pad, "dilation": list(m.dilation),
                         "groups": m.groups}
                y = emit(n, "conv2d", [x, w], attrs, name=n.name + ".conv" if m.bias is not None else None)
                if m.bias is not None:
                    y = emit(n, "add", [y, weight(n.target + ".bias", [m.out_channels])])
                vals[n] = (y, graph_shape(shape_of(n), True), True)
            elif isinstance(m, nn.BatchNorm2d):
                x, xs, nhwc = arg(n, n.args[0], 0)
                if not m.affine or not m.track_running_stats:
                    raise ExportError("node %s: BatchNorm2d without affine parameters or running "
                                      "statistics" % n.name)
                c = [m.num_features]
                ins = [x] + [weight(n.target + "." + f, c, wdtype="f32")
                             for f in ("weight", "bias", "running_mean", "running_var")]
                y = emit(n, "batchnorm", ins, {"eps": float(m.eps), "axis": 3 if nhwc else 1})
                vals[n] = (y, graph_shape(shape_of(n), nhwc), nhwc)
            elif isinstance(m, nn.LayerNorm):
                x, xs, nhwc = arg(n, n.args[0], 0)
                if len(m.normalized_shape) != 1 or nhwc:
                    raise ExportError("node %s: LayerNorm over %s: only the last axis of a plain "
                                      "tensor is supported" % (n.name, list(m.normalized_shape)))
                ins = [x]
                if m.elementwise_affine:
                    d = [m.normalized_shape[0]]
                    ins.append(weight(n.target + ".weight", d))
                    if m.bias is None:
                        raise ExportError("node %s: LayerNorm with a weight but no bias" % n.name)
                    ins.append(weight(n.target + ".bias", d))
                vals[n] = (emit(n, "layernorm", ins, {"eps": float(m.eps)}), xs, False)
            elif isinstance(m, nn.ReLU):
                unary(n, "relu")
            elif isinstance(m, nn.GELU):
                unary(n, "gelu", {"approximate": m.approximate})
            elif isinstance(m, nn.SiLU):
                unary(n, "silu")
            elif isinstance(m, nn.Sigmoid):
                unary(n, "sigmoid")
            elif isinstance(m, nn.Tanh):
                unary(n, "tanh")
            elif isinstance(m, (nn.Dropout, nn.Identity)):
                vals[n] = arg(n, n.args[0], 0)
            else:
                raise ExportError("node %s: module %s (%s) is not supported; supported: %s" %
                                  (n.name, n.target, type(m).__name__, SUPPORTED))
        elif n.op in ("call_function", "call_method"):
            f = n.target
            if f in (F.relu, torch.relu, "relu"):
                unary(n, "relu")
            elif f in (F.gelu, "gelu"):
                unary(n, "gelu", {"approximate": n.kwargs.get("approximate", "none")})
            elif f in (F.silu, "silu"):
                unary(n, "silu")
            elif f in (torch.sigmoid, F.sigmoid, "sigmoid"):
                unary(n, "sigmoid")
            elif f in (torch.tanh, F.tanh, "tanh"):
                unary(n, "tanh")
            elif f in (operator.add, torch.add, "add", operator.iadd):
                binary(n, "add")
            elif f in (operator.sub, torch.sub, "sub"):
                binary(n, "sub")
            elif f in (operator.mul, torch.mul, "mul", operator.imul):
                binary(n, "mul")
            elif f in (operator.truediv, torch.div, "div"):
                binary(n, "div")
            elif f in (torch.flatten, "flatten", torch.reshape, "reshape", "view"):
                reshape(n, shape_of(n))
            elif f == "contiguous":
                vals[n] = arg(n, n.args[0], 0)
            else:
                raise ExportError("node %s: %s %s is not supported; supported: %s" %
                                  (n.name, n.op, getattr(f, "__name__", f), SUPPORTED))
        elif n.op == "output":
            res = n.args[0]
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            for r in res:
                name, _, nhwc = arg(n, r, 0)
                if name in [i["name"] for i in inputs] or name in weight_map:
                    raise ExportError("output %s is a graph input or weight itself" % name)
                outputs.append(name)
                output_layout[name] = "nhwc" if nhwc else "plain"
        else:
            raise ExportError("node %s: fx op %s is not supported" % (n.name, n.op))

    request = {"graph": {"inputs": inputs, "weights": weights, "nodes": nodes, "outputs": outputs}}
    if arch:
        request["arch"] = arch
    if tune:
        request["tune"] = tune
    return Exported(request, weight_map, input_layout, output_layout)
