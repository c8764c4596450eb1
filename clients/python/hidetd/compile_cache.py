"""hidetd.compile_cache - the torch.compile backend's compile cache on disk, so that a model
seen before compiles in a fresh process without AOTAutograd and without the lowering.

Dynamo traces the model in every process (its guards need it); what the backend does with
Dynamo's graph afterwards - AOTAutograd's functionalisation and decompositions, the lowering,
the split - depends only on that graph, so it is stored under a key of the graph:

  key: sha256 of Dynamo's graph code and the functions it calls (each checked to be the one
       its name imports), each placeholder's shape, strides, dtype, device,
       requires_grad, whether it is a parameter or a static input, which placeholders are the
       same tensor, the values of the graph's tensor constants, the options that change the
       lowering (dtype, tune, arch, budget, dynamic_max), grad and autocast modes, the default
       dtype, and the versions of torch, Python and hidetd (the source of the modules that
       lower: a change to them is a new key).
  value: the ATen graph as plain data (ops by name, arguments with node references as
       indices, get_attr constants as tensors), which nodes are folded, and per piece its
       /v1/graphs request, how its inputs and weights bind (layouts, casts, names), the
       constants its lowering made and its outputs; the report explain() gives.

A hit rebuilds the ATen graph (torch.fx, no tracing), asks the daemon for each piece's plan
with the stored request (answered from its kernel cache when it has seen it) and runs as the
normal path would: folded values are computed from the weights at the first call.

What is stored: only graphs AOTAutograd hands over as they are - no input mutation, no output
aliasing an input or an intermediate, no effect tokens, one ATen placeholder per Dynamo
placeholder, no dynamic sizes, no submodules or higher-order ops, ops that are OpOverloads or
named Python functions - and whose whole graph was compiled (a daemon that was down is not a
result to keep). Anything else is compiled as before, every time.

Entries are pickles (as Inductor's caches are): the directory must be the user's own. Any entry
that cannot be read, is of another format or key, or whose plans the daemon refuses means the
normal path; the normal path then writes the entry again. Writers write a temporary file and
rename it, so a reader never sees half an entry.

Where: options={"cache_dir": DIR} or $HIDETD_BACKEND_CACHE, else $XDG_CACHE_HOME/hidetd/backend
or ~/.cache/hidetd/backend; "off" disables it. Deleting the directory clears it.
"""
import hashlib
import importlib
import logging
import os
import pickle
import sys
import tempfile

log = logging.getLogger("hidetd")

FORMAT = 1
_OFF = ("off", "none", "0", "false", "no", "")
# Tensor constants of Dynamo's graph are hashed into the key up to this many bytes in all;
# a graph holding more is not cached.
_MAX_CONST_BYTES = 64 << 20

# What happened, per process: tests and benchmarks read these.
# hits: graphs rebuilt from an entry; misses: no entry; unreadable: an entry that could not be
# read; unusable: one read but not usable (its plans refused, the daemon down); uncacheable:
# graphs not stored; lowered: graphs that went through AOTAutograd and the lowering.
stats = {"hits": 0, "misses": 0, "stores": 0, "unreadable": 0, "unusable": 0,
         "uncacheable": 0, "lowered": 0, "warm_starts": 0}


class NotCacheable(Exception):
    """The graph holds something the cache does not represent (the reason)."""


def directory(setting):
    """The cache directory for the option/environment value `setting`, or None when off."""
    if setting is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "hidetd", "backend")
    if str(setting).strip().lower() in _OFF:
        return None
    return os.path.expanduser(str(setting))


_SOURCE_HASH = None


def _source_hash():
    """The version of the code whose output is cached: hidetd's version and the source of the
    modules that lower (a changed lowering must not meet an old entry)."""
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        from . import __version__
        h = hashlib.sha256(__version__.encode())
        here = os.path.dirname(os.path.abspath(__file__))
        for name in ("backend.py", "aten.py", "compile_cache.py"):
            try:
                with open(os.path.join(here, name), "rb") as f:
                    h.update(f.read())
            except OSError:
                h.update(b"?")
        _SOURCE_HASH = h.hexdigest()
    return _SOURCE_HASH


def _put(h, *xs):
    h.update(repr(xs).encode())
    h.update(b"\0")


def _attr(root, target):
    v = root
    for part in target.split("."):
        v = getattr(v, part)
    return v


def _tensor_bytes(t):
    import torch
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def key_of(gm, example_inputs, opts):
    """The cache key of Dynamo's graph gm with these example inputs (hex), or None when the
    graph is not cached (the reason is logged at DEBUG)."""
    try:
        return _key(gm, example_inputs, opts)
    except NotCacheable as e:
        stats["uncacheable"] += 1
        log.debug("hidetd: compile cache: not cached: %s", e)
        return None
    except Exception as e:  # whatever it is, the normal path compiles the graph
        stats["uncacheable"] += 1
        log.debug("hidetd: compile cache: no key (%s: %s)", type(e).__name__, e)
        return None


def _key(gm, example_inputs, opts):
    import torch
    h = hashlib.sha256()
    _put(h, "hidetd compile cache", FORMAT, _source_hash(), torch.__version__,
         tuple(sys.version_info[:2]))
    _put(h, opts.compute, opts.tune, opts.arch, opts.budget, opts.dynamic_max)
    autocast = []
    for dev in ("cpu", "cuda"):
        try:
            autocast.append((dev, torch.is_autocast_enabled(dev), str(torch.get_autocast_dtype(dev))))
        except Exception:
            autocast.append((dev, None))
    _put(h, torch.is_grad_enabled(), str(torch.get_default_dtype()), autocast)
    if next(iter(gm.parameters()), None) is not None or next(iter(gm.buffers()), None) is not None:
        raise NotCacheable("the graph module holds parameters or buffers")
    const_bytes = 0
    placeholders = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            placeholders.append(n)
        elif n.op == "call_module":
            raise NotCacheable("a call_module node (%s)" % n.target)
        elif n.op == "call_function":
            # The code names a function; the key must say it is the one that name imports (not a
            # closure or a local function, whose behaviour the code does not show).
            _put(h, _function_name(n.target))
        elif n.op == "get_attr":
            v = _attr(gm, n.target)
            if not isinstance(v, torch.Tensor):
                raise NotCacheable("get_attr %s is a %s" % (n.target, type(v).__name__))
            const_bytes += v.numel() * v.element_size()
            if const_bytes > _MAX_CONST_BYTES:
                raise NotCacheable("its constants are too large to hash")
            _put(h, n.target, tuple(v.shape), tuple(v.stride()), str(v.dtype), str(v.device))
            h.update(_tensor_bytes(v))
    _put(h, gm.code)
    if len(placeholders) != len(example_inputs):
        raise NotCacheable("placeholders and example inputs differ in number")
    first = {}
    for i, (n, x) in enumerate(zip(placeholders, example_inputs)):
        if not isinstance(x, torch.Tensor) or isinstance(x, torch.SymInt):
            raise NotCacheable("input %d is a %s" % (i, type(x).__name__))
        if any(not isinstance(d, int) for d in tuple(x.shape) + tuple(x.stride())):
            raise NotCacheable("input %d has a dynamic size" % i)
        ev = n.meta.get("example_value")
        if ev is not None and any(not isinstance(d, int) for d in getattr(ev, "shape", ())):
            raise NotCacheable("input %d has a dynamic size" % i)
        static = (n.meta.get("tensor_dict") or {}).get("_dynamo_static_input_type")
        same = first.setdefault(id(x), i)
        _put(h, n.name, tuple(x.shape), tuple(x.stride()), x.storage_offset(), str(x.dtype),
             str(x.device), x.requires_grad, isinstance(x, torch.nn.Parameter), str(static), same)
    return h.hexdigest()


def _function_name(f):
    """module:name of a function a graph calls, checked to import as this very object; an
    operator's own name. NotCacheable for anything else."""
    import torch
    if isinstance(f, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return "op:" + str(f)
    mod = getattr(f, "__module__", None)
    for attr in (getattr(f, "__qualname__", None), getattr(f, "__name__", None)):
        if not mod or not attr or "<" in attr:
            continue
        try:
            if _resolve(("py", mod, attr)) is f:
                return "%s:%s" % (mod, attr)
        except Exception:
            pass
    raise NotCacheable("a call of %r, which no name imports" % (f,))


# ---- the ATen graph as plain data --------------------------------------------------------

class _Ref:
    """A reference to the i-th node of an encoded graph."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __reduce__(self):
        return (_Ref, (self.i,))


def _target(n):
    import torch
    t = n.target
    if n.op in ("placeholder", "get_attr", "output"):
        return t
    if n.op != "call_function":
        raise NotCacheable("a %s node" % n.op)
    if isinstance(t, torch._ops.OpOverload):
        return ("op", t.namespace, t._opname, t._overloadname)
    mod, qual = getattr(t, "__module__", None), getattr(t, "__qualname__", None)
    if mod and qual and "<" not in qual:
        try:
            if _resolve(("py", mod, qual)) is t:
                return ("py", mod, qual)
        except Exception:
            pass
    raise NotCacheable("the call of %r" % (t,))


def _resolve(target):
    import torch
    if not isinstance(target, tuple):
        return target
    if target[0] == "op":
        _, ns, name, overload = target
        return getattr(getattr(getattr(torch.ops, ns), name), overload)
    _, mod, qual = target
    v = importlib.import_module(mod)
    for part in qual.split("."):
        v = getattr(v, part)
    return v


def _encode(a, index):
    import torch
    import torch.fx
    if isinstance(a, torch.fx.Node):
        return _Ref(index[a])
    if isinstance(a, list):
        return [_encode(x, index) for x in a]
    if type(a) is tuple or type(a) is torch.Size:
        return tuple(_encode(x, index) for x in a)
    if isinstance(a, dict):
        return {k: _encode(v, index) for k, v in a.items()}
    if a is None or type(a) in (bool, int, float, str, complex) or \
            isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return a
    if type(a) is slice:
        return slice(_encode(a.start, index), _encode(a.stop, index), _encode(a.step, index))
    raise NotCacheable("an argument of type %s" % type(a).__name__)


def _decode(a, nodes):
    if isinstance(a, _Ref):
        return nodes[a.i]
    if isinstance(a, list):
        return [_decode(x, nodes) for x in a]
    if type(a) is tuple:
        return tuple(_decode(x, nodes) for x in a)
    if isinstance(a, dict):
        return {k: _decode(v, nodes) for k, v in a.items()}
    if type(a) is slice:
        return slice(_decode(a.start, nodes), _decode(a.stop, nodes), _decode(a.step, nodes))
    return a


def encode_graph(gm):
    """(nodes as tuples, {get_attr target: tensor}, {fx node: index})."""
    index, out, consts = {}, [], {}
    for i, n in enumerate(gm.graph.nodes):
        out.append((n.op, n.name, _target(n), _encode(n.args, index), _encode(n.kwargs, index)))
        index[n] = i
        if n.op == "get_attr":
            consts[n.target] = _attr(gm, n.target).detach()
    return out, consts, index


class GraphHolder:
    """What the compiled forward reads of a GraphModule: .graph, and the get_attr constants
    by their dotted targets."""

    def __init__(self, graph, consts):
        self.graph = graph
        for target, v in consts.items():
            obj, parts = self, target.split(".")
            for part in parts[:-1]:
                if not hasattr(obj, part):
                    setattr(obj, part, _Namespace())
                obj = getattr(obj, part)
            setattr(obj, parts[-1], v)


class _Namespace:
    pass


def decode_graph(encoded, consts):
    """(GraphHolder, [fx node by index]) from encode_graph's data."""
    import torch.fx
    g = torch.fx.Graph()
    nodes = []
    for op, name, target, args, kwargs in encoded:
        n = g.create_node(op, _resolve(target), _decode(args, nodes), _decode(kwargs, nodes),
                          name=name)
        nodes.append(n)
    return GraphHolder(g, consts), nodes


# ---- entries on disk ---------------------------------------------------------------------

def _path(d, key):
    return os.path.join(d, key[:2], key + ".pkl")


def _unsafe(d, path):
    """Why path (and the folders above it, up to d) may not be unpickled, or None: an entry is
    code to Python's unpickler, so it is read only from files and folders that this user owns
    and that nobody else may write."""
    uid = os.getuid()
    for p in (path, os.path.dirname(path), d):
        st = os.stat(p)
        if st.st_uid != uid:
            return "%s belongs to uid %d, not this user" % (p, st.st_uid)
        if st.st_mode & 0o022:
            return "%s is writable by others (mode %o)" % (p, st.st_mode & 0o777)
    return None


def load(d, key, count=True):
    """The entry stored under key, or None (absent, unreadable, unsafe, another format or key).
    count: whether a miss counts in stats (the warm start's lookups do not: they are not
    graphs)."""
    path = _path(d, key)
    try:
        with open(path, "rb") as f:
            why = _unsafe(d, path)
            if why:
                stats["unreadable"] += 1
                log.warning("hidetd: compile cache: %s is not read: %s; compiling afresh", path, why)
                return None
            entry = pickle.load(f)
    except FileNotFoundError:
        stats["misses"] += count
        return None
    except Exception as e:
        stats["unreadable"] += 1
        log.warning("hidetd: compile cache: %s cannot be read (%s: %s); compiling afresh",
                    path, type(e).__name__, e)
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("key") != key:
        stats["unreadable"] += 1
        log.warning("hidetd: compile cache: %s is not an entry for this graph; compiling afresh",
                    path)
        return None
    return entry


def store(d, key, entry):
    """Writes the entry (a temporary file renamed over the old one). Failures are logged."""
    entry = dict(entry, format=FORMAT, key=key)
    path = _path(d, key)
    tmp = None
    try:
        data = pickle.dumps(entry, protocol=4)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".pkl")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
        stats["stores"] += 1
        return True
    except Exception as e:
        log.warning("hidetd: compile cache: cannot write %s (%s: %s)", path, type(e).__name__, e)
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
