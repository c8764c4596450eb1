"""hidetd.saved - a compiled model written to a file and run in another process without Dynamo
(hidetd.save / hidetd.load, docs/python.md "Startup without Dynamo").

save compiles the model for its example inputs the normal way (Dynamo's trace, one whole graph,
AOTAutograd, the lowering) and records, besides the graph's compile-cache entry
(hidetd.compile_cache: the ATen graph as data, each piece's /v1/graphs request and bindings),
what Dynamo's own bytecode and guards did around the graph:

  arguments: where each graph argument comes from - Dynamo's source of it, a path from the model
       (`._modules['layer1']._parameters['weight']`) or from the inputs (`[0]`) - and the
       tensor it was: shape, strides, dtype, device. save checks that each path leads to the
       very tensor Dynamo passed.
  outputs: the model's output structure (a pytree spec: a tensor, a tuple, transformers'
       ModelOutput, ...) and, per leaf, the graph output (or argument, or constant) it is.

load reads the file and rebuilds the graph as a compile-cache hit (each piece's plan asked of the
daemon, answered from its kernel cache); the model's parameters and buffers are found by their
paths once, the inputs at each call. The checks that stand for Dynamo's guards: the model's
class and training flag, every argument's shape, strides, dtype and device; anything else is
refused with the argument and both values. What those checks do not see - Python control flow
of the model's forward that reads other state - is fixed at save time, as in torch.export's
programs. The file is a pickle (as the compile cache's entries are): load only your own.
"""
import ast
import pickle
import re

FORMAT = 2

# One step of a Dynamo source's name after its root L['...']: .attr or [literal].
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[((?:'(?:[^'\\]|\\.)*')|(?:\"(?:[^\"\\]|\\.)*\")|-?\d+)\]")
_ROOT = re.compile(r"L\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


class NotSaveable(RuntimeError):
    pass


def _source_name(source):
    name = source.name
    return name() if callable(name) else name  # a method in older PyTorch, a property later


def parse_source(name):
    """(root, steps) of a Dynamo source name such as L['model']._modules['fc']._parameters['w']:
    root the local's name, steps ("attr", name) or ("item", key); NotSaveable for any other form
    (a global, a call, a guard-only source)."""
    m = _ROOT.match(name)
    if m is None:
        raise NotSaveable("a graph argument comes from %s, not from the model or its inputs" % name)
    root, pos, steps = ast.literal_eval(m.group(1)), m.end(), []
    while pos < len(name):
        s = _STEP.match(name, pos)
        if s is None:
            raise NotSaveable("a graph argument's source %s has a step hidetd.save cannot follow "
                              "(at %r)" % (name, name[pos:]))
        steps.append(("attr", s.group(1)) if s.group(1) else ("item", ast.literal_eval(s.group(2))))
        pos = s.end()
    return root, steps


def sources_of(gm):
    """Each placeholder's source name in Dynamo's graph gm, in order."""
    names = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        arg = n.meta.get("grapharg")
        if arg is None or getattr(arg, "source", None) is None:
            raise NotSaveable("graph argument %s has no source Dynamo recorded" % n.name)
        names.append(_source_name(arg.source))
    return names


def follow(obj, steps):
    for kind, key in steps:
        obj = getattr(obj, key) if kind == "attr" else obj[key]
    return obj


def _meta(t):
    return {"shape": tuple(t.shape), "stride": tuple(t.stride()), "dtype": str(t.dtype),
            "device": str(t.device)}


def _mismatch(t, meta):
    """What differs between tensor t and meta, or None."""
    import torch
    if not isinstance(t, torch.Tensor):
        return "is a %s, saved for a tensor" % type(t).__name__
    for field, have in (("shape", tuple(t.shape)), ("dtype", str(t.dtype)), ("device", str(t.device)),
                        ("stride", tuple(t.stride()))):
        if have != meta[field]:
            return "has %s %s, saved for %s" % (field, list(have) if field in ("shape", "stride") else have,
                                               list(meta[field]) if field in ("shape", "stride") else meta[field])
    return None


def _call_model(model, *inputs):
    """What save compiles: the model an argument (not a global), so that every graph argument's
    source starts at L['model'] or L['inputs']."""
    return model(*inputs)


def save(model, example_inputs, path, options):
    import functools
    import torch
    from torch.utils import _pytree as pytree
    from .backend import hidetd_backend
    if not isinstance(example_inputs, (list, tuple)):
        example_inputs = (example_inputs,)
    inputs = tuple(example_inputs)
    record = {}
    backend = functools.partial(hidetd_backend, options=options or None, _saving=record)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(_call_model, fullgraph=True, backend=backend)
        with torch.no_grad():
            out = compiled(model, *inputs)
    except Exception as e:  # the backend's refusal, wrapped by Dynamo: say it plainly
        inner = e
        while inner is not None and not isinstance(inner, NotSaveable) and \
                not str(inner).startswith("hidetd.save"):
            inner = inner.__cause__ or inner.__context__
        if inner is None:
            raise RuntimeError("hidetd.save: the model could not be compiled as one graph: %s" % e) from e
        raise RuntimeError(str(inner) if str(inner).startswith("hidetd.save")
                           else "hidetd.save: %s" % inner) from e
    finally:
        torch._dynamo.reset()
    if "args" not in record:
        raise RuntimeError("hidetd.save: the model's forward made no graph (nothing for hidetd to run)")
    roots = {"model": model, "inputs": inputs}
    args = []
    for name, t in zip(record["sources"], record["args"]):
        try:
            root, steps = parse_source(name)
            if root not in roots or follow(roots[root], steps) is not t:
                raise NotSaveable("graph argument %s is not found at that path" % name)
        except NotSaveable as e:
            raise RuntimeError("hidetd.save: %s" % e) from None
        except Exception as e:  # a path that does not resolve
            raise RuntimeError("hidetd.save: graph argument %s: %s" % (name, e)) from None
        if not isinstance(t, torch.Tensor):
            raise RuntimeError("hidetd.save: graph argument %s is a %s (only tensors are saved)"
                               % (name, type(t).__name__))
        args.append({"source": name, "root": root, "steps": steps, "meta": _meta(t)})
    leaves, spec = pytree.tree_flatten(out)
    leaf_of = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            at = [("out", j) for j, o in enumerate(record["outs"]) if o is leaf] or \
                 [("arg", i) for i, a in enumerate(record["args"]) if a is leaf]
            if not at:
                raise RuntimeError("hidetd.save: an output of the model (%s %s) is not one of the "
                                   "graph's outputs" % (tuple(leaf.shape), leaf.dtype))
            leaf_of.append(at[0])
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            leaf_of.append(("const", leaf))
        else:
            raise RuntimeError("hidetd.save: an output of the model is a %s (tensors, numbers and "
                               "strings are saved)" % type(leaf).__name__)
    state = {"format": FORMAT, "entry": record["entry"], "options": dict(options or {}),
             "args": args, "out_spec": spec, "leaves": leaf_of,
             "model": type(model).__module__ + "." + type(model).__qualname__,
             "training": bool(getattr(model, "training", False)), "torch": torch.__version__}
    with open(path, "wb") as f:
        pickle.dump(state, f, protocol=4)
    return path


def load(path, model):
    import torch
    from torch.utils import _pytree as pytree
    from .backend import Options, _from_cache
    with open(path, "rb") as f:
        state = pickle.load(f)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise RuntimeError("hidetd.load: %s was saved in another format (%r); save the model again "
                           "with this hidetd" % (path, state.get("format") if isinstance(state, dict) else None))
    cls = type(model).__module__ + "." + type(model).__qualname__
    if cls != state["model"]:
        raise RuntimeError("hidetd.load: %s was saved for a %s, not a %s" % (path, state["model"], cls))
    if bool(getattr(model, "training", False)) != state["training"]:
        raise RuntimeError("hidetd.load: %s was saved for the model in %s mode; call model.%s() first"
                           % (path, "training" if state["training"] else "eval",
                              "train" if state["training"] else "eval"))
    forward = _from_cache(state["entry"], Options(None, state["options"] or None), None)
    if forward is None:
        raise RuntimeError("hidetd.load: the saved graph's plans could not be had from the daemon "
                           "(%r): is it running, with the same version?" % state["options"].get("address"))
    bound, per_call = [], []
    for i, a in enumerate(state["args"]):
        if a["root"] == "model":
            try:
                t = follow(model, a["steps"])
            except Exception as e:
                raise RuntimeError("hidetd.load: this model is not what %s was saved for: %s: %s"
                                   % (path, a["source"], e)) from None
            why = _mismatch(t, a["meta"])
            if why:
                raise RuntimeError("hidetd.load: this model is not what %s was saved for: %s %s"
                                   % (path, a["source"], why))
            bound.append(t)
        else:
            bound.append(None)
            per_call.append((i, a))
    n_inputs = 1 + max([a["steps"][0][1] for _, a in per_call
                        if a["steps"] and a["steps"][0][0] == "item"] or [-1])
    spec, leaves = state["out_spec"], state["leaves"]

    def run(*inputs):
        if len(inputs) < n_inputs:
            raise RuntimeError("hidetd.load: these inputs are not what %s was saved for: %d given, "
                               "saved for %d" % (path, len(inputs), n_inputs))
        args = list(bound)
        for i, a in per_call:
            t = follow(inputs, a["steps"])
            why = _mismatch(t, a["meta"])
            if why:
                raise RuntimeError("hidetd.load: these inputs are not what %s was saved for: "
                                   "inputs%s %s" % (path, a["source"][len("L['inputs']"):], why))
            args[i] = t
        outs = forward(*args)
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        values = []
        for kind, x in leaves:  # x: an output's index, an argument's, or the constant itself
            values.append(outs[x] if kind == "out" else args[x] if kind == "arg" else x)
        return pytree.tree_unflatten(values, spec)
    return run
