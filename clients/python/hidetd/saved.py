"""hidetd.saved - a compiled model run in another process without Dynamo: hidetd.save /
hidetd.load, and hidetd.compile's warm start (docs/python.md, "Startup without Dynamo").

A model is compiled the normal way once (Dynamo's trace, one whole graph, AOTAutograd, the
lowering). What Dynamo's bytecode and guards did around the graph is recorded from that first
call, beside the graph's compile-cache entry (hidetd.compile_cache: the ATen graph as data, each
piece's /v1/graphs request and bindings):

  arguments: where each graph argument comes from - a parameter or buffer of the model (its
       name in named_parameters / named_buffers) or a tensor of the inputs (its index among the
       leaves of (args, kwargs)), found by identity with the tensors Dynamo passed - and what it
       was: shape, strides, dtype, device.
  outputs: the structure of the model's output (a pytree spec: a tensor, a tuple, a dict,
       transformers' ModelOutput) and, per leaf, the graph output, input or constant it is.

Run again (a Saved), the graph is rebuilt as a compile-cache hit (each piece's plan asked of the
daemon, answered from its kernel cache); the model's parameters and buffers are bound by name,
the inputs taken from each call. What stands for Dynamo's guards: the model's class and training
flag, the structure of the inputs and every argument's shape, strides, dtype and device.

hidetd.save writes that to a file the user names and hidetd.load reads it. hidetd.compile's warm
start keeps it in the compile cache's directory under a key of everything the trace could depend
on (warm_key): the versions (hidetd, PyTorch, the packages of the model's classes), the source
files of the model's classes, its non-tensor attributes (configs included), its parameters' and
the inputs' shapes, dtypes, strides and devices, the options, grad and autocast modes. A process that finds its key skips Dynamo; one that does not
compiles and writes it. Files are pickles (as the compile cache's entries are): the user's own.
"""
import hashlib
import inspect
import logging
import os
import pickle
import sys

log = logging.getLogger("hidetd")

FORMAT = 3


class NotSaveable(RuntimeError):
    pass


class Mismatch(RuntimeError):
    """A call that is not what the saved graph was made for (the reason)."""


def _meta(t):
    return (tuple(t.shape), tuple(t.stride()), str(t.dtype), str(t.device))


def _mismatch(t, meta):
    """What differs between tensor t and meta, or None."""
    import torch
    if not isinstance(t, torch.Tensor):
        return "is a %s, saved for a tensor" % type(t).__name__
    have = _meta(t)
    for i, field in enumerate(("shape", "stride", "dtype", "device")):
        if have[i] != meta[i]:
            fmt = (lambda v: list(v)) if i < 2 else (lambda v: v)
            return "has %s %s, saved for %s" % (field, fmt(have[i]), fmt(meta[i]))
    return None


def _named_tensors(model):
    """id -> name of every parameter and buffer of model (tied ones under their first name)."""
    named = {}
    for name, t in list(model.named_parameters(remove_duplicate=False)) + \
            list(model.named_buffers(remove_duplicate=False)):
        named.setdefault(id(t), name)
    return named


def _lookup(model, name):
    mod, _, leaf = name.rpartition(".")
    owner = model.get_submodule(mod) if mod else model
    if leaf in owner._parameters:
        return owner._parameters[leaf]
    return owner._buffers[leaf]


def capture(model, args, kwargs, out, graphs, options, mode=None):
    """The saved state of model's first call (args, kwargs -> out) whose graphs were recorded
    in graphs; NotSaveable with the reason when it cannot be run without Dynamo."""
    import torch
    from torch.utils import _pytree as pytree
    if len(graphs) != 1:
        raise NotSaveable("the forward made %d graphs (one whole graph is saved; a graph break "
                          "makes two)" % len(graphs))
    g = graphs[0]
    if g.get("entry") is None:
        raise NotSaveable(g.get("why") or "the compile cache cannot hold this graph")
    if "args" not in g:
        raise NotSaveable("the graph was not called")
    leaves, in_spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    named = _named_tensors(model)
    at_input = {id(t): i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)}
    sources = []
    for i, t in enumerate(g["args"]):
        if not isinstance(t, torch.Tensor):
            raise NotSaveable("graph argument %d is a %s (only tensors are saved)" % (i, type(t).__name__))
        if id(t) in named:
            sources.append(("model", named[id(t)], _meta(t)))
        elif id(t) in at_input:
            sources.append(("input", at_input[id(t)], _meta(t)))
        else:
            raise NotSaveable("graph argument %d (%s %s) is neither a parameter or buffer of the "
                              "model nor an input" % (i, list(t.shape), t.dtype))
    out_leaves, out_spec = pytree.tree_flatten(out)
    outs = []
    for leaf in out_leaves:
        if isinstance(leaf, torch.Tensor):
            j = [j for j, o in enumerate(g["outs"]) if o is leaf]
            i = [i for i, a in enumerate(g["args"]) if a is leaf]
            if not j and not i:
                raise NotSaveable("an output of the model (%s %s) is not one of the graph's "
                                  "outputs" % (list(leaf.shape), leaf.dtype))
            outs.append(("out", j[0]) if j else ("arg", i[0]))
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            outs.append(("const", leaf))
        else:
            raise NotSaveable("an output of the model is a %s (tensors, numbers and strings are "
                              "saved)" % type(leaf).__name__)
    input_meta = [_meta(t) if isinstance(t, torch.Tensor) else ("value", t) for t in leaves]
    if any(m[0] == "value" and not (m[1] is None or isinstance(m[1], (bool, int, float, str)))
           for m in input_meta):
        raise NotSaveable("an input is neither a tensor nor a number or string")
    return {"saved_format": FORMAT, "entry": g["entry"], "options": dict(options or {}), "mode": mode,
            "sources": sources, "in_spec": in_spec, "input_meta": input_meta,
            "out_spec": out_spec, "outs": outs, "model": _class_name(model),
            "training": bool(getattr(model, "training", False)), "torch": torch.__version__}


def _class_name(model):
    return type(model).__module__ + "." + type(model).__qualname__


class Saved:
    """A saved state bound to a model: call(args, kwargs) runs the graph, or raises Mismatch."""

    def __init__(self, state, model, where):
        from .backend import Options, _from_cache
        if not isinstance(state, dict) or state.get("saved_format") != FORMAT:
            raise Mismatch("%s was saved in another format (%r); save the model again with this "
                           "hidetd" % (where, state.get("saved_format") if isinstance(state, dict) else None))
        if _class_name(model) != state["model"]:
            raise Mismatch("%s was saved for a %s, not a %s" % (where, state["model"], _class_name(model)))
        self.model, self.state = model, state
        self.training = state["training"]
        self.bound = []
        for kind, x, meta in state["sources"]:
            if kind == "model":
                try:
                    t = _lookup(model, x)
                except (AttributeError, KeyError) as e:
                    raise Mismatch("this model has no %s (%s)" % (x, e)) from None
                why = _mismatch(t, meta)
                if why:
                    raise Mismatch("this model's %s %s" % (x, why))
                self.bound.append(t)
            else:
                self.bound.append(None)
        self.from_inputs = [(i, x, meta) for i, (kind, x, meta) in enumerate(state["sources"])
                            if kind == "input"]
        self.forward = _from_cache(state["entry"], Options(state["mode"], state["options"] or None), None)
        if self.forward is None:
            raise RuntimeError("the saved graph's plans could not be had from the daemon (%r): is "
                               "it running, with the same version?" % state["options"].get("address"))

    def call(self, args, kwargs):
        from torch.utils import _pytree as pytree
        st = self.state
        if bool(getattr(self.model, "training", False)) != self.training:
            raise Mismatch("the model is in %s mode, saved in %s mode" % (
                "training" if not self.training else "eval", "training" if self.training else "eval"))
        leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if spec != st["in_spec"]:
            raise Mismatch("the inputs' structure is %s, saved for %s" % (spec, st["in_spec"]))
        for i, (leaf, meta) in enumerate(zip(leaves, st["input_meta"])):
            if meta[0] == "value":
                if leaf != meta[1] or type(leaf) is not type(meta[1]):
                    raise Mismatch("input %d is %r, saved for %r" % (i, leaf, meta[1]))
        a = list(self.bound)
        for i, x, meta in self.from_inputs:
            t = leaves[x]
            why = _mismatch(t, meta)
            if why:
                raise Mismatch("input %d %s" % (x, why))
            a[i] = t
        outs = self.forward(*a)
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        values = []
        for kind, x in st["outs"]:  # x: an output's index, an argument's, or the constant itself
            values.append(outs[x] if kind == "out" else a[x] if kind == "arg" else x)
        return pytree.tree_unflatten(values, st["out_spec"])


def _first_call(model, mode, options, args, kwargs):
    """model compiled by Dynamo with the recording backend and called once under no_grad:
    (the compiled model, the output, the graphs recorded)."""
    import functools
    import torch
    from .backend import hidetd_backend
    graphs = []
    backend = functools.partial(hidetd_backend, mode=mode, options=options or None, _saving=graphs)
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        out = compiled(*args, **kwargs)
    return compiled, out, graphs


def save(model, example_inputs, path, options):
    import torch
    if not isinstance(example_inputs, (list, tuple)):
        example_inputs = (example_inputs,)
    torch._dynamo.reset()
    try:
        _, out, graphs = _first_call(model, None, options, tuple(example_inputs), {})
        state = capture(model, example_inputs, {}, out, graphs, options)
    except NotSaveable as e:
        raise RuntimeError("hidetd.save: this model cannot be saved: %s - hidetd.compile runs it"
                           % e) from None
    finally:
        torch._dynamo.reset()
    with open(path, "wb") as f:
        pickle.dump(state, f, protocol=4)
    return path


def load(path, model):
    with open(path, "rb") as f:
        state = pickle.load(f)
    try:
        saved = Saved(state, model, path)
    except RuntimeError as e:  # a Mismatch, or the daemon could not give the plans
        raise RuntimeError("hidetd.load: %s" % e) from None

    def run(*inputs, **kwargs):
        import torch
        with torch.no_grad():
            try:
                return saved.call(inputs, kwargs)
            except Mismatch as e:
                raise RuntimeError("hidetd.load: these inputs (or this model) are not what %s was "
                                   "saved for: %s" % (path, e)) from None
    return run


# ---- hidetd.compile's warm start ------------------------------------------------------------

_FILE_HASHES = {}


def _file_hash(path):
    h = _FILE_HASHES.get(path)
    if h is None:
        try:
            with open(path, "rb") as f:
                h = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            h = "?"
        _FILE_HASHES[path] = h
    return h


def _plain(v, depth=0):
    """A repr of a non-tensor attribute value that stands for it in the key, or None for a
    value that does not (callables, modules, tensors: found otherwise)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if depth < 3 and isinstance(v, (list, tuple)):
        items = [_plain(x, depth + 1) for x in v]
        return None if any(x is None for x in items) else "(%s)" % ",".join(items)
    if depth < 3 and isinstance(v, dict):
        items = sorted((str(k), _plain(x, depth + 1)) for k, x in v.items())
        return None if any(x is None for _, x in items) else repr(items)
    to_dict = getattr(v, "to_dict", None)  # configuration objects (transformers' PretrainedConfig)
    if depth == 0 and callable(to_dict) and not inspect.isclass(v):
        try:
            return _plain(to_dict(), 1)
        except Exception:
            return None
    return None


# nn.Module attributes that are not the model's state: its tensors and children (keyed apart),
# and PyTorch's bookkeeping (torch.compile marks a module it wrapped).
_NOT_STATE = frozenset(("_parameters", "_buffers", "_modules", "_is_torch_compile",
                        "_compiled_call_impl", "_non_persistent_buffers_set"))


def warm_key(model, args, kwargs, opts):
    """The warm start's key of a call of model (hex): everything Dynamo's trace of it could
    have depended on and the compiled graph does."""
    import torch
    from torch.utils import _pytree as pytree
    from .compile_cache import _source_hash
    h = hashlib.sha256()

    def put(*xs):
        h.update(repr(xs).encode())
        h.update(b"\0")
    put("hidetd warm start", FORMAT, _source_hash(), torch.__version__,
        torch.is_grad_enabled(), torch._C._is_any_autocast_enabled(), str(torch.get_default_dtype()))
    put(sorted((k, str(getattr(opts, k))) for k in ("address", "arch", "tune", "budget", "dtype",
                                                   "cuda_graphs", "reference", "dynamic_max")))
    packages = set()
    for name, mod in model.named_modules(remove_duplicate=False):
        cls = type(mod)
        packages.add(cls.__module__.split(".")[0])
        try:
            src = inspect.getsourcefile(cls)
        except TypeError:
            src = None
        put(name, cls.__module__, cls.__qualname__, _file_hash(src) if src else None, mod.training)
        for k, v in sorted(mod.__dict__.items()):
            if k in _NOT_STATE or k.endswith("_hooks") or k.endswith("_hooks_always_called") or \
                    isinstance(v, torch.Tensor):
                continue
            p = _plain(v)
            if p is not None:
                put(k, p)
    # The versions of the packages the classes come from (transformers, torchvision, ...): their
    # forwards call code in other files of them.
    put(sorted((p, str(getattr(sys.modules.get(p), "__version__", None))) for p in packages))
    for name, t in list(model.named_parameters(remove_duplicate=False)) + \
            list(model.named_buffers(remove_duplicate=False)):
        put(name, _meta(t), t.requires_grad)
    leaves, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    put(str(spec))
    for t in leaves:
        put(_meta(t) if isinstance(t, torch.Tensor) else ("value", repr(t), type(t).__name__))
    return h.hexdigest()


class WarmStart:
    """What hidetd.compile returns with the warm start on: the first call looks for the model's
    saved state in the compile cache's directory and runs it without Dynamo; without one it
    compiles (torch.compile with the backend) and writes it. Later calls that the saved state
    does not fit (another shape) go to torch.compile's path. Attributes are the model's."""

    def __init__(self, model, mode, options, opts, directory):
        self._model, self._mode, self._options, self._opts = model, mode, options, opts
        self._dir = os.path.join(directory, "models")
        self._saved = None
        self._compiled = None
        self._first = True

    def __getattr__(self, name):
        return getattr(self._model, name)

    def _torch_compiled(self):
        if self._compiled is None:
            import torch
            from .backend import hidetd_backend
            self._compiled = torch.compile(self._model, backend=hidetd_backend, mode=self._mode,
                                           options=self._options or None)
        return self._compiled

    def __call__(self, *args, **kwargs):
        if self._saved is not None:
            import torch
            if not torch.is_grad_enabled():
                try:
                    return self._saved.call(args, kwargs)
                except Mismatch as e:
                    log.debug("hidetd: warm start: %s; compiling with Dynamo", e)
        if not self._first:
            return self._torch_compiled()(*args, **kwargs)
        self._first = False
        return self._first_call(args, kwargs)

    def _first_call(self, args, kwargs):
        import torch
        from . import compile_cache
        if torch.is_grad_enabled():  # the backend runs inference only: nothing to record
            return self._torch_compiled()(*args, **kwargs)
        try:
            key = warm_key(self._model, args, kwargs, self._opts)
        except Exception as e:  # a model whose state cannot be keyed: the normal path
            log.debug("hidetd: warm start: no key (%s: %s)", type(e).__name__, e)
            return self._torch_compiled()(*args, **kwargs)
        state = compile_cache.load(self._dir, key, count=False)
        if state is not None:
            try:
                self._saved = Saved(state, self._model, "the warm start's entry %s" % key[:16])
                out = self._saved.call(args, kwargs)
                compile_cache.stats["warm_starts"] += 1
                return out
            except Exception as e:  # stale, a daemon that refuses, ...: compile, write it again
                self._saved = None
                log.info("hidetd: warm start: the saved model cannot be used (%s); compiling", e)
        self._compiled, out, graphs = _first_call(self._model, self._mode, self._options, args, kwargs)
        try:
            compile_cache.store(self._dir, key, capture(self._model, args, kwargs, out, graphs,
                                                        self._options, self._mode))
        except NotSaveable as e:
            log.debug("hidetd: warm start: not saved: %s", e)
        return out
