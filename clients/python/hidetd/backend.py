"""hidetd.backend - the torch.compile backend: torch.compile(model, backend="hidetd").

Dynamo hands the backend a graph of the model; AOTAutograd turns it into core ATen (PyTorch's
own decompositions, less the ops hidetd lowers whole: batch norm, attention, pooling, ...).
Then, for inference:

1. Each ATen node is tried by the lowering (hidetd.aten); the same code decides support and
   builds the graph. Nodes that read only weights and constants and that hidetd cannot run
   (arange, full, a mask built from them) are **folded**: PyTorch computes them once, when the
   weights are bound, and they become weights of the plan.
2. The rest is split, as Torch-TensorRT does (torch.fx's CapabilityBasedPartitioner), into
   pieces hidetd runs - one /v1/graphs request and one launch plan each - and nodes PyTorch
   runs. A node the daemon refuses is moved to PyTorch and the split made again, so a model
   never fails to compile; a daemon that cannot be reached leaves the whole graph to PyTorch
   with one warning.
3. A piece binds its weights (parameters, buffers, folded values) at its first call and runs
   its plan's prepare steps then; every later call fills the kernels' pointers and launches
   (no JSON, no arena allocation, no checks beyond Dynamo's guards; a weight replaced or
   changed in place is bound again). With options={"cuda_graphs": True} (or
   mode="reduce-overhead") the whole compiled graph is replayed from a CUDA graph.

hidetd.explain() reports where every op ran and why; the same report is logged at INFO on the
"hidetd" logger when a graph is compiled. docs/python.md is the guide.

Dynamic shapes (dynamic=True, torch._dynamo.mark_dynamic): the graph's sizes are expressions
over free symbols. Each symbol becomes a named dim of the graph requests (its name, s0 or
s77; its range the ShapeEnv's, an unbounded max given by the "dynamic_max" option). A piece is
lowered twice, at two sets of probe values of the symbols (distinct primes), and the sizes that
differ between the two requests are named: a size that is the product of the probes of some
symbols becomes "s0*s1"; any other difference (s0 + 1, 2 * s0, an attribute that follows a
size) leaves its node to PyTorch with the reason. Each call reads the sizes from the SymInt
arguments and the tensors' shapes and hands them to the plans, so a new size in range is
neither a Dynamo recompilation nor a new request on the hot path (hidetd.plan asks in the
background for ranges not tuned yet). Folded values never have a dynamic size.
"""
import collections
import logging
import operator
import os
import time
import warnings

from . import aten
from .aten import Unsupported, meta_of, is_channels_last

log = logging.getLogger("hidetd")

# Options: name -> (environment variable, parser, default).
OPTIONS = {
    "address": ("HIDETD_SOCKET", str, None),
    "token": ("HIDETD_TOKEN", str, None),
    "arch": ("HIDETD_ARCH", str, None),
    "tune": ("HIDETD_TUNE", str, "model"),
    "budget": ("HIDETD_BUDGET", float, None),
    "dtype": ("HIDETD_DTYPE", str, None),
    "cuda_graphs": ("HIDETD_CUDA_GRAPHS", lambda s: s.lower() in ("1", "true", "yes", "on"), False),
    "timeout": ("HIDETD_TIMEOUT", float, None),
    "reference": ("HIDETD_REFERENCE", lambda s: s.lower() in ("1", "true", "yes", "on"), False),
    # The max of a dynamic size whose range PyTorch leaves unbounded (mark_dynamic without max=,
    # dynamic=True): the plans' arenas are laid out at it.
    "dynamic_max": ("HIDETD_DYNAMIC_MAX", int, 8192),
    # The compile cache's directory (hidetd.compile_cache); "off" disables it. Default:
    # $XDG_CACHE_HOME/hidetd/backend or ~/.cache/hidetd/backend.
    "cache_dir": ("HIDETD_BACKEND_CACHE", str, None),
    # hidetd.compile's warm start (hidetd.saved.WarmStart): a model compiled before, for inputs
    # like these, runs from the compile cache's directory without Dynamo's trace.
    "warm_start": ("HIDETD_WARM_START", lambda s: s.lower() in ("1", "true", "yes", "on"), True),
}
# Probe values of the free symbols (at most 4 per graph, the wire's limit): distinct primes, so
# that a product of probes names its symbols; two sets, so that a fixed size equal to a probe is
# told apart.
_PROBES = ((1009, 1013, 1019, 1021), (1031, 1033, 1039, 1049))
_MAX_DIMS = 4
_DTYPE_ALIASES = {None: None, "": None, "f32": None, "float32": None, "keep": None,
                  "f16": "f16", "float16": "f16", "half": "f16", "fp16": "f16",
                  "bf16": "bf16", "bfloat16": "bf16"}
# A daemon whose graph queue is full (429) is asked again this many times, waiting 1, 2, ... s.
_BUSY_TRIES = 5
_BUSY_WAIT_S = 1.0
# Ops that are worth no piece of their own: views and bookkeeping.
_NON_COMPUTE = ["torch.ops.aten.view.default", "torch.ops.aten._unsafe_view.default",
                "torch.ops.aten.reshape.default", "torch.ops.aten.unsqueeze.default",
                "torch.ops.aten.squeeze.dim", "torch.ops.aten.squeeze.dims",
                "torch.ops.aten.clone.default", "torch.ops.aten.alias.default",
                "torch.ops.aten.detach.default", "torch.ops.aten.lift_fresh_copy.default",
                "_operator.getitem"]


class Options:
    """The backend's options: options={...} first, then the environment, then the defaults."""

    def __init__(self, mode=None, options=None):
        options = dict(options or {})
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError("hidetd backend: unknown option %r; the options are: %s" %
                             (unknown[0], ", ".join(sorted(OPTIONS))))
        for name, (env, parse, default) in OPTIONS.items():
            if name in options:
                value = options[name]
            elif os.environ.get(env):
                try:
                    value = parse(os.environ[env])
                except ValueError:
                    raise ValueError("hidetd backend: $%s=%r is not a valid %s" %
                                     (env, os.environ[env], name))
            else:
                value = default
            setattr(self, name, value)
        if mode == "reduce-overhead":
            self.cuda_graphs = True
        elif mode not in (None, "default", "max-autotune", "max-autotune-no-cudagraphs"):
            raise ValueError("hidetd backend: unknown mode %r" % (mode,))
        key = self.dtype.lower() if isinstance(self.dtype, str) else self.dtype
        if key not in _DTYPE_ALIASES:
            raise ValueError("hidetd backend: dtype %r: expected f16, bf16 or f32" % (self.dtype,))
        self.compute = _DTYPE_ALIASES[key]
        if self.tune not in ("none", "model", "measure"):
            raise ValueError("hidetd backend: tune %r: expected none, model or measure" % (self.tune,))
        if isinstance(self.dynamic_max, bool) or not isinstance(self.dynamic_max, int) or \
                not 1 <= self.dynamic_max <= (1 << 31) - 1:
            raise ValueError("hidetd backend: dynamic_max %r: expected a whole number in "
                             "1..2^31-1" % (self.dynamic_max,))

    def request_options(self):
        out = {"tune": self.tune}
        if self.arch:
            out["arch"] = self.arch
        if self.budget:
            out["budget"] = {"seconds": float(self.budget)}
        return out


# ---- the report -----------------------------------------------------------------------------

class GraphReport:
    """Where the ops of one compiled ATen graph run. ops: call_function nodes (getitem not
    counted); hidetd/folded/torch: how many of them run in a plan, once at bind time, or in
    PyTorch; left: {op name: [reason, ...]} of those PyTorch runs; pieces: per piece, its node
    count and the plan's kernel count; fallback: why the whole graph runs in PyTorch, if so."""

    def __init__(self):
        self.ops = self.hidetd = self.folded = self.torch = 0
        self.left = {}
        self.pieces = []
        self.fallback = None
        self.refused = []
        self.requests = []   # the /v1/graphs request of each piece
        self.compiled = None  # the CompiledGraph, when one was made
        self.dims = {}        # dynamic sizes: name -> (min, max)
        self.cached = False   # whether it came from the compile cache (no AOTAutograd, no lowering)

    @property
    def ran_plans(self):
        """Whether every piece has run its plan on a GPU at least once (not PyTorch's fallback)."""
        c = self.compiled
        return bool(c is not None and c.pieces and all(p._run is not None for p in c.pieces))

    def summary(self):
        s = "%d ops: %d run by hidetd (%d piece%s, %d kernels), %d folded into constants, %d left to PyTorch" % (
            self.ops, self.hidetd, len(self.pieces), "" if len(self.pieces) == 1 else "s",
            sum(p["kernels"] for p in self.pieces), self.folded, self.torch)
        if self.fallback:
            s += " (the whole graph: %s)" % self.fallback
        return s

    def __str__(self):
        lines = [self.summary()]
        for op, reasons in sorted(self.left.items()):
            lines.append("  %-48s x%-3d %s" % (op, len(reasons), reasons[0]))
        for r in self.refused:
            lines.append("  %s" % r)
        return "\n".join(lines)


class Explanation:
    """hidetd.explain()'s answer: one GraphReport per graph Dynamo compiled (graph breaks make
    several), totals over them, and str() for people."""

    def __init__(self, graphs, output=None):
        self.graphs = graphs
        self.output = output

    def _sum(self, f):
        return sum(getattr(g, f) for g in self.graphs)

    ops = property(lambda self: self._sum("ops"))
    hidetd = property(lambda self: self._sum("hidetd"))
    folded = property(lambda self: self._sum("folded"))
    torch = property(lambda self: self._sum("torch"))

    @property
    def left(self):
        out = {}
        for g in self.graphs:
            for op, reasons in g.left.items():
                out.setdefault(op, []).extend(reasons)
        return out

    def __str__(self):
        head = "%d graph%s, %d ops: %d run by hidetd, %d folded into constants, %d left to PyTorch" % (
            len(self.graphs), "" if len(self.graphs) == 1 else "s", self.ops, self.hidetd,
            self.folded, self.torch)
        return "\n".join([head] + ["graph %d: %s" % (i, str(g)) for i, g in enumerate(self.graphs)])


# ---- the backend ----------------------------------------------------------------------------

def hidetd_backend(gm, example_inputs, mode=None, options=None, _reports=None, _saving=None):
    """The torch.compile backend (entry point `hidetd` of the group torch_dynamo_backends).
    _saving (hidetd.saved's recorder, a list): each graph appends what running it without
    Dynamo needs - its compile-cache entry, the arguments and outputs of the forward's call."""
    import torch
    from . import compile_cache

    opts = Options(mode, options)
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in example_inputs):
        _warn_once("hidetd runs inference only; with gradients enabled this graph runs in PyTorch "
                   "(wrap the call in torch.no_grad() or torch.inference_mode())")
        return gm.forward

    cache_dir = compile_cache.directory(opts.cache_dir)
    key = compile_cache.key_of(gm, example_inputs, opts) if cache_dir else None
    if key is not None:
        entry = compile_cache.load(cache_dir, key)
        if entry is not None:
            hit = _from_cache(entry, opts, _reports)
            if hit is not None:
                return _saved(hit, entry, _saving)
    made = {}

    from torch._dynamo.backends.common import aot_autograd

    def fw_compiler(agm, inputs):
        compile_cache.stats["lowered"] += 1
        report = GraphReport()
        if _reports is not None:
            _reports.append(report)
        try:
            compiled = _compile_aten(agm, inputs, opts, report)
            report.compiled = compiled
        except _DaemonUnavailable as e:
            report.fallback = str(e)
            _warn_once("hidetd: %s; running the model in PyTorch" % e)
            compiled = agm
        log.info("hidetd: %s", report)
        static = _static_indices(len(inputs))
        if (key is not None or _saving is not None) and compiled is not agm and not compiled.symbols:
            made["entry"] = _to_cache(cache_dir, key, agm, compiled, report, static, len(example_inputs))
        if opts.cuda_graphs and compiled is not agm:
            compiled = CudaGraphed(compiled, static,
                                   compiled.tables_version if compiled.symbols else None)
        return _boxed(compiled)

    compile_fw = aot_autograd(fw_compiler=fw_compiler, decompositions=decompositions(),
                              keep_inference_input_mutations=True)
    forward = compile_fw(gm, example_inputs)
    return _saved(forward, made.get("entry"), _saving)


def _saved(forward, entry, saving):
    """forward as it is, or for a recorder (saving: hidetd.saved's list of graphs) forward
    recording its calls' arguments and outputs, in a dict appended to saving with the graph's
    compile-cache entry (None for a graph the compile cache cannot hold: it cannot be saved)."""
    if saving is None:
        return forward
    graph = {"entry": entry}
    saving.append(graph)
    if entry is None:
        graph["why"] = ("hidetd did not compile all of it, or AOTAutograd must wrap it (an input "
                        "mutated, an output aliasing an input), or its sizes are dynamic")
        return forward

    def recording(*args):
        out = forward(*args)
        graph["args"] = list(args)
        graph["outs"] = list(out) if isinstance(out, (list, tuple)) else [out]
        return out
    return recording


# ---- the compile cache (hidetd.compile_cache) ---------------------------------------------

def _aot_passes_through(n_inputs, n_placeholders, n_outputs):
    """Whether AOTAutograd calls the ATen graph with Dynamo's arguments as they are and returns
    its outputs as they are (what a cache hit, which skips AOTAutograd, does): no input
    mutated, no output aliasing an input or an intermediate, no effect tokens."""
    try:
        from torch._guards import TracingContext
        from torch._functorch._aot_autograd.schemas import OutputType
        tc = TracingContext.try_get()
        md = tc.fw_metadata if tc is not None else None
        if md is None or n_placeholders != n_inputs or len(md.input_info) != n_inputs:
            return False
        if md.num_intermediate_bases or md.tokens or len(md.output_info) != n_outputs:
            return False
        if any(i.mutates_data or i.mutates_metadata or i.mutates_storage_metadata
               for i in md.input_info):
            return False
        return all(o.output_type == OutputType.non_alias for o in md.output_info)
    except Exception:  # another PyTorch: no caching
        return False


def _to_cache(cache_dir, key, agm, compiled, report, static, n_inputs):
    """What a hit needs to run the compiled graph without AOTAutograd or the lowering: stored
    under key in cache_dir (when there is one) and returned; None when the graph cannot be."""
    from . import compile_cache
    out = compiled.output.args[0]
    n_out = len(out) if isinstance(out, (list, tuple)) else -1
    if not _aot_passes_through(n_inputs, len(compiled.placeholders), n_out):
        compile_cache.stats["uncacheable"] += 1
        log.debug("hidetd: compile cache: AOTAutograd wraps this graph; not cached")
        return None
    try:
        nodes, consts, index = compile_cache.encode_graph(agm)
        pieces = [{
            "nodes": [index[n] for n in p.nodes], "args_in": [index[n] for n in p.args_in],
            "args_w": [index[n] for n in p.args_w], "constants": p.constants,
            "in_layout": p.in_layout, "w_layout": p.w_layout, "in_names": p.in_names,
            "w_names": p.w_names, "in_cast": p.in_cast, "w_cast": p.w_cast,
            "outs": [(index[n], name, layout, shape, dtype)
                     for n, name, layout, shape, dtype in p.outs],
            "request": p.request} for p in compiled.pieces]
        entry = {"graph": nodes, "consts": consts, "folded": [index[n] for n in compiled.folded],
                 "pieces": pieces, "static": sorted(static),
                 "report": {"ops": report.ops, "hidetd": report.hidetd, "folded": report.folded,
                            "torch": report.torch, "left": report.left,
                            "refused": report.refused}}
    except Exception as e:  # NotCacheable, or anything else: the compiled graph stands
        compile_cache.stats["uncacheable"] += 1
        log.debug("hidetd: compile cache: not cached: %s: %s", type(e).__name__, e)
        return None
    if cache_dir is not None and key is not None:
        compile_cache.store(cache_dir, key, entry)
    return entry


def _from_cache(entry, opts, _reports):
    """The compiled forward rebuilt from a cache entry (each piece's plan asked of the daemon
    with its stored request), or None when that fails: then the normal path compiles it."""
    from . import compile_cache
    try:
        holder, nodes = compile_cache.decode_graph(entry["graph"], entry["consts"])
        client = _client(opts)
        pieces = []
        for e in entry["pieces"]:
            plan_json = _plan_json(client, e["request"])
            pieces.append(Piece.restored(e, nodes, plan_json, client))
        placeholders = [n for n in nodes if n.op == "placeholder"]
        compiled = CompiledGraph(holder, placeholders, [nodes[i] for i in entry["folded"]],
                                 pieces, opts)
    except Exception as e:  # a daemon down, a plan refused, an entry that does not fit
        compile_cache.stats["unusable"] += 1
        log.info("hidetd: compile cache: the stored graph cannot be used (%s: %s); compiling "
                 "afresh", type(e).__name__, e)
        return None
    compile_cache.stats["hits"] += 1
    report = GraphReport()
    for field, value in entry["report"].items():
        setattr(report, field, value)
    report.pieces = [{"nodes": len(p.nodes), "kernels": p.kernels} for p in pieces]
    report.requests = [p.request for p in pieces]
    report.compiled = compiled
    report.cached = True
    if _reports is not None:
        _reports.append(report)
    log.info("hidetd: %s (from the compile cache)", report)
    run = compiled
    if opts.cuda_graphs:
        run = CudaGraphed(compiled, set(entry["static"]))

    import torch
    # As AOTAutograd's inference wrapper does: gradients off during the call, and autocast,
    # applied when the graph was traced (the key holds its state), not applied again.
    disable_amp = torch._C._is_any_autocast_enabled()

    def forward(*args):
        with torch.no_grad():
            if disable_amp:
                with torch._C._DisableAutocast():
                    out = run(*args)
            else:
                out = run(*args)
        return list(out) if isinstance(out, (list, tuple)) else out
    return forward


def _boxed(fn):
    # AOTAutograd calls a compiled forward with one list of arguments when it is marked boxed.
    def run(args):
        return fn(*args)
    run._boxed_call = True
    return run


_DECOMP = None


def decompositions():
    """PyTorch's core ATen decompositions, less the ops hidetd lowers as they are."""
    global _DECOMP
    if _DECOMP is None:
        from torch._decomp import core_aten_decompositions
        table = dict(core_aten_decompositions())
        kept = set(aten.kept_ops())
        for op in list(table):
            if op in kept:
                del table[op]
        _DECOMP = table
    return _DECOMP


_WARNED = set()


def _warn_once(msg):
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


class _DaemonUnavailable(Exception):
    pass


def _static_indices(n_inputs):
    """Which of the forward's arguments are parameters and buffers (bound once)."""
    try:
        from torch._guards import TracingContext
        tc = TracingContext.try_get()
        md = tc.fw_metadata if tc is not None else None
        idx = getattr(md, "static_input_indices", None)
        if idx is not None:
            return set(int(i) for i in idx if i < n_inputs)
    except Exception:  # an older PyTorch: every argument is an input
        pass
    return set()


def _op_name(node):
    t = node.target
    return str(t) if hasattr(t, "_schema") else getattr(t, "__name__", str(t))


# The most elements a tensor of a request may hold (the daemon refuses more: limit_exceeded).
_MAX_ELEMENTS = 1 << 31


def _bound(x, default):
    """A ShapeEnv range bound as an int, or default where it is infinite."""
    try:
        return int(x)
    except Exception:  # int_oo, sympy's oo
        return default


def _probes(n):
    """Two sets of n distinct primes, the first >= 1009 (see _PROBES)."""
    if n <= len(_PROBES[0]):
        return [list(_PROBES[0][:n]), list(_PROBES[1][:n])]
    primes, k = [], 1009
    while len(primes) < 2 * n:
        if all(k % d for d in range(2, int(k ** 0.5) + 1)):
            primes.append(k)
        k += 1
    return [primes[0::2], primes[1::2]]


class Symbols:
    """The free symbols of a graph's sizes: per symbol its graph name, range and where a call
    reads its size (a SymInt argument, or an axis of a tensor argument), and the probe values
    the lowering evaluates sizes at (aten.set_probe)."""

    def __init__(self, placeholders, opts):
        import torch
        self.syms, self.name, self.range, self.source = [], {}, {}, {}
        self.defaulted = set()  # names whose max PyTorch left unbounded (dynamic_max applies)
        for i, n in enumerate(placeholders):
            m = meta_of(n)
            if isinstance(m, torch.SymInt):
                cands = [(m, None)]
            elif hasattr(m, "shape"):
                cands = [(d, axis) for axis, d in enumerate(m.shape)]
            else:
                continue
            for d, axis in cands:
                if not aten.is_symbolic(d) or not d.node.expr.is_Symbol:
                    continue
                e = d.node.expr
                try:
                    name = aten.sym_name(e)
                except Unsupported:
                    continue
                if name in self.source:
                    continue
                vr = d.node.shape_env.var_to_range.get(e)
                lo = max(1, _bound(vr.lower, 1)) if vr is not None else 1
                hi = _bound(vr.upper, None) if vr is not None else None
                if hi is None:
                    self.defaulted.add(name)
                    hi = opts.dynamic_max
                self.syms.append(e)
                self.name[e] = name
                self.range[name] = (lo, max(lo, hi))
                self.source[name] = (i, axis)
        self.probe = [dict(zip(self.syms, p)) for p in _probes(len(self.syms))]
        # name -> (probe of set 0, probe of set 1)
        self.values = {self.name[e]: (self.probe[0][e], self.probe[1][e]) for e in self.syms}

    def __bool__(self):
        return bool(self.syms)

    def fit(self, nodes):
        """Lowers the defaulted maxima until every tensor of the graph, at the maxima, holds at
        most _MAX_ELEMENTS elements (the daemon's limit per tensor): two sizes left unbounded
        at dynamic_max each would otherwise make [s0, s1, 768] a tensor no request may hold,
        and the whole graph would run in PyTorch. The maximum halved is the largest defaulted
        one; ranges PyTorch bounds (mark_dynamic's max) are kept as given."""
        import sympy
        shapes = []
        for n in nodes:
            m = meta_of(n)
            if hasattr(m, "shape") and any(aten.is_symbolic(d) for d in m.shape):
                shapes.append([d.node.expr if aten.is_symbolic(d) else int(d) for d in m.shape])
        if not shapes or not self.defaulted:
            return
        by_name = {self.name[e]: e for e in self.syms}

        def largest():
            at = {by_name[k]: v[1] for k, v in self.range.items()}
            return max(int(sympy.prod([sympy.sympify(d).subs(at) for d in sh])) for sh in shapes)
        while largest() > _MAX_ELEMENTS:
            name = max((k for k in self.defaulted if self.range[k][1] > self.range[k][0]),
                       key=lambda k: self.range[k][1], default=None)
            if name is None:
                return  # nothing left to lower: the daemon says which tensor is too large
            lo, hi = self.range[name]
            self.range[name] = (lo, max(lo, hi // 2))

    def sizes(self, args):
        """{name: size} of a call."""
        out = {}
        for name, (i, axis) in self.source.items():
            a = args[i]
            out[name] = int(a) if axis is None else int(a.shape[axis])
        return out

    def product(self, v0, v1):
        """The names whose probes multiply to v0 (set 0) and v1 (set 1), or None."""
        if v0 == v1 or not isinstance(v0, int) or not isinstance(v1, int):
            return None
        names, r0, r1 = [], v0, v1
        for name, (p0, p1) in sorted(self.values.items()):
            if r0 % p0 == 0:
                r0 //= p0
                r1 = r1 // p1 if r1 % p1 == 0 else -1
                names.append(name)
        return tuple(names) if names and r0 == 1 and r1 == 1 else None


def _is_scalar(n):
    """A node whose value is a number (a SymInt size, s0 * s1), not a tensor."""
    import torch
    m = meta_of(n)
    return isinstance(m, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def _symbolic_shape(n):
    m = meta_of(n)
    return hasattr(m, "shape") and any(aten.is_symbolic(d) for d in m.shape)


def _fold_what_folds_read(calls, kind, dynamic):
    """A folded node is computed once, with PyTorch, from folded values, constants and weights:
    what it reads that hidetd would run (a supported op on constants: the aranges and unsqueezes
    of a mask's causal part, read by an integer comparison hidetd cannot run) is folded too.
    Otherwise that value exists only inside a plan, and the fold failed at the first call
    (KeyError)."""
    for n in reversed(calls):
        if kind.get(n) != "fold":
            continue
        for a in n.all_input_nodes:
            if kind.get(a) == "hidetd" and a not in dynamic:
                kind[a] = "fold"


def _compile_aten(gm, example_inputs, opts, report):
    aten.build_tables()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    static = _static_indices(len(placeholders))
    symbols = Symbols(placeholders, opts)
    # Before padding_masks and causal_masks, which then see the SDPA calls put back: static graphs
    # too, where the daemon's rewrite of the math form would keep a constant all-through mask
    # (BERT called with token ids alone on CUDA: [b,1,s,s] read per score, 6x slower attention).
    aten.math_attention(gm)
    aten.causal_padding_masks(gm)
    aten.padding_masks(gm)
    aten.causal_masks(gm)
    if symbols:
        aten.dynamic_rewrites(gm, {e: symbols.range[symbols.name[e]][1] for e in symbols.syms})
    symbols.fit(gm.graph.nodes)
    kind = {}          # node -> "weight" | "input" | "const" | "fold" | "torch" | "hidetd"
    reasons = {}       # node -> why PyTorch runs it
    for i, n in enumerate(placeholders):
        kind[n] = "weight" if i in static else "input"
    dynamic = {n for n in placeholders if kind[n] == "input"}
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            kind[n] = "const"
        elif n.op == "call_function" and any(a in dynamic for a in n.all_input_nodes):
            dynamic.add(n)
    # The sizes' arithmetic (s0 * s1) runs in PyTorch; a value of a dynamic size is never
    # folded (made once, it would keep the first call's size).
    scalars = {n for n in calls if _is_scalar(n)}
    dynamic.update(n for n in calls if _symbolic_shape(n))

    supported = _check_support([n for n in calls if n not in scalars], reasons, opts, symbols)
    for n in calls:
        if n in supported:
            kind[n] = "hidetd"
        else:
            kind[n] = "torch" if n in dynamic else "fold"
    _fold_what_folds_read(calls, kind, dynamic)

    client = _client(opts)
    folded = [n for n in calls if kind[n] == "fold"]
    pieces = None
    for attempt in range(64):
        hidetd_nodes = {n for n in calls if kind[n] == "hidetd"}
        try:
            pieces = _split_and_plan(gm, hidetd_nodes, kind, opts, client, report, symbols)
            break
        except _Refused as e:
            report.refused.append("%s: %s" % (", ".join(n.name for n in e.nodes[:4]) +
                                              (", ..." if len(e.nodes) > 4 else ""), e.message))
            for n in e.nodes:
                reasons[n] = e.message
                kind[n] = "torch" if n in dynamic else "fold"
            _fold_what_folds_read(calls, kind, dynamic)
            folded = [n for n in calls if kind[n] == "fold"]
    if pieces is None:
        raise _DaemonUnavailable("the daemon refused too many nodes")
    # What PyTorch runs takes its inputs as the mask passes left them: its memory-efficient SDPA
    # form gets back the bias shape it requires (new nodes, run by PyTorch).
    aten.efficient_masks_for_torch(gm, {n for n in calls if kind[n] == "torch"})

    counted = [n for n in calls if n.target is not operator.getitem and n not in scalars]
    report.ops = len(counted)
    report.hidetd = sum(1 for n in counted if kind[n] == "hidetd")
    report.folded = sum(1 for n in counted if kind[n] == "fold")
    report.torch = sum(1 for n in counted if kind[n] == "torch")
    for n in counted:
        if kind[n] == "torch":
            report.left.setdefault(_op_name(n), []).append(reasons.get(n, "not supported"))
    report.dims = {name: symbols.range[name] for name in symbols.range}
    return CompiledGraph(gm, placeholders, folded, pieces, opts, symbols)


def _fake_value(L, n):
    m = meta_of(n)
    if m is None or not hasattr(m, "shape"):
        raise Unsupported("%s has no tensor metadata" % n.name)
    dt = aten.torch_dtype_name(m.dtype)
    if dt is None and m.dim() == 0 and str(m.dtype) == "torch.float64":
        # Under dynamic=True Dynamo passes a Python float of the model (GPT-2's gelu constant)
        # as a 0-d float64 tensor: PyTorch computes with it, the piece reads the f32 result.
        raise Unsupported("a float64 scalar (a Python float Dynamo passes as a tensor): PyTorch "
                          "computes it, the piece reads the result")
    if dt is None:
        raise Unsupported("dtype %s" % m.dtype)
    nhwc = is_channels_last(m)
    # A 0-d tensor (a scalar PyTorch lifted into a constant) is declared [1]: it broadcasts
    # alike, and _as_declared binds it so.
    shape = aten._shape(m) or [1]
    if nhwc:
        shape = [shape[i] for i in aten.NHWC]
    if dt == "bool":
        return aten.Value(n.name, shape, L.compute or "f32", nhwc, True)
    return aten.Value(n.name, shape, L._float_dtype(dt) if dt in aten.FLOAT else dt, nhwc)


def _empty(n):
    m = meta_of(n)
    return hasattr(m, "numel") and aten.is_empty(m)


def _check_support(calls, reasons, opts, symbols):
    """The nodes the lowering accepts, each tried alone on its inputs' metadata (and on what
    the lowering made of supported producers, so layouts and tuples carry over), sizes at the
    first probe values. A node whose result has a size the wire cannot express (s0 + 1) is not
    accepted."""
    supported, made = set(), {}
    old = aten.set_probe(symbols.probe[0])
    try:
        for n in calls:
            L = aten.Lowering(opts.compute)
            try:
                _check_sizes(n, symbols)
                for a in n.all_input_nodes:
                    if _empty(a) or _is_scalar(a):
                        continue  # cat leaves empty tensors out; sizes come from the metadata
                    L.vals[a] = made[a] if a in made else _fake_value(L, a)
                out = L.lower(n)
                m = meta_of(n)
                if isinstance(out, aten.Value) and m is not None and hasattr(m, "shape") and m.dim() == 0:
                    raise Unsupported("a 0-dimensional result")
                made[n] = out
                supported.add(n)
            except Unsupported as e:
                reasons[n] = str(e)
            except (TypeError, ValueError, KeyError, IndexError) as e:
                reasons[n] = "the lowering cannot read its arguments (%s: %s)" % (type(e).__name__, e)
    finally:
        aten.set_probe(old)
    return supported


def _check_sizes(n, symbols):
    """Unsupported when a result of n has a dynamic size a graph cannot hold, or one of a
    symbol no argument gives."""
    m = meta_of(n)
    for t in (m if isinstance(m, (list, tuple)) else [m]):
        for d in getattr(t, "shape", ()):
            names = aten.sym_axis(d)
            for name in names or ():
                if name not in symbols.source:
                    raise Unsupported("the dynamic size %s is no argument's size" % name)


class _Refused(Exception):
    """The nodes that must leave hidetd for the piece to be accepted, and why."""

    def __init__(self, nodes, message):
        super().__init__(message)
        self.nodes = nodes if isinstance(nodes, list) else [nodes]
        self.message = message


def _client(opts):
    from . import Client
    return Client(opts.address, token=opts.token, timeout=opts.timeout)


def _split_and_plan(gm, hidetd_nodes, kind, opts, client, report, symbols):
    """Proposes the pieces and asks the daemon for each one's plan; returns [Piece]. Raises
    _Refused naming the node a refused graph points at."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node in hidetd_nodes

    part = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True,
                                      non_compute_ops=_NON_COMPUTE)
    proposals = part.propose_partitions()
    pieces = []
    report.pieces = []
    in_piece = set()
    for p in proposals:
        nodes = [n for n in gm.graph.nodes if n in p.nodes]
        in_piece.update(nodes)
        piece = _plan_piece(nodes, kind, opts, client, symbols)
        pieces.append(piece)
        report.pieces.append({"nodes": len(nodes), "kernels": piece.kernels})
    report.requests = [p.request for p in pieces]
    # A supported node the partitioner left alone (a lone view) runs in PyTorch.
    for n in hidetd_nodes - in_piece:
        kind[n] = "torch"
    return pieces


def _lower_piece(nodes, kind, opts):
    """One lowering of a piece at the current probe values: (Lowering, runtime inputs, weights,
    outputs [(node, graph name, layout, torch dtype)])."""
    node_set = set(nodes)
    L = aten.Lowering(opts.compute)
    args_in, args_w = [], []   # fx nodes read from outside: runtime inputs, weights
    for n in nodes:
        for a in n.all_input_nodes:
            if a in node_set or a in L.vals or _empty(a) or _is_scalar(a):
                continue  # a size (s0 * s1) reaches the graph through the shapes
            name = "a%d" % (len(args_in) + len(args_w))
            try:
                if kind.get(a) in ("weight", "const", "fold"):
                    L.weight(a, name, meta_of(a))
                    args_w.append(a)
                else:
                    L.input(a, name, meta_of(a))
                    args_in.append(a)
            except Unsupported as e:
                raise _Refused(n, "its argument %s: %s" % (a.name, e))
    for n in nodes:
        try:
            L.lower(n)
        except Unsupported as e:
            raise _Refused(n, str(e))
    outs = []
    for n in nodes:
        if any(u not in node_set for u in n.users):
            out = L.vals[n]
            if isinstance(out, tuple):
                # Only elements read through a getitem leave a piece; getitems are nodes too.
                raise _Refused(n, "a tuple result leaves the piece")
            m = meta_of(n)
            try:
                name, layout = L.output(out, is_channels_last(m), m.dtype)
            except Unsupported as e:
                raise _Refused(n, str(e))
            outs.append((n, name, layout, m.dtype))
    return L, args_in, args_w, outs


def _by_origin(L, nodes, i):
    """The fx node graph node i of a lowering came from (else every node of the piece)."""
    name = L.origin[i] if i < len(L.origin) else None
    hit = [n for n in nodes if n.name == name]
    return hit or list(nodes)


def _name_sizes(req0, req1, L, nodes, symbols):
    """The graph request at probe set 0 with its dynamic sizes named: a size that differs
    between the two lowerings and is a product of probes becomes "s0" / "s0*s1" (in inputs'
    shapes, reshape's "shape" and slice's "ends"); any other difference is refused at its node.
    Returns the request and the names it uses."""
    g0, g1 = req0["graph"], req1["graph"]
    used = set()

    def named(v0, v1):
        if v0 == v1:
            return v0
        names = symbols.product(v0, v1)
        if names is None:
            return None
        used.update(names)
        return "*".join(names)

    for field in ("inputs", "weights"):
        if len(g0[field]) != len(g1[field]):
            raise _Refused(list(nodes), "the lowering differs between sizes")
        for t0, t1 in zip(g0[field], g1[field]):
            shape = [named(a, b) for a, b in zip(t0["shape"], t1["shape"])]
            if field == "inputs" and None not in shape:
                t0["shape"] = shape
                continue
            if shape == t0["shape"]:
                continue
            # A weight (a constant the lowering made) of a dynamic size, or an input's size that
            # is no product of names: refused at the first node reading it.
            readers = [i for i, nd in enumerate(g0["nodes"]) if t0["name"] in nd["inputs"]]
            culprits = _by_origin(L, nodes, readers[0]) if readers else list(nodes)
            raise _Refused(culprits, "%s %s has a dynamic shape a graph cannot hold" % (
                "a constant" if field == "weights" else "the input", t0["name"]))
    if len(g0["nodes"]) != len(g1["nodes"]):
        raise _Refused(list(nodes), "the lowering differs between sizes")
    for i, (n0, n1) in enumerate(zip(g0["nodes"], g1["nodes"])):
        if n0.get("op") != n1.get("op"):
            raise _Refused(_by_origin(L, nodes, i), "the lowering differs between sizes")
        a0, a1 = n0.get("attrs") or {}, n1.get("attrs") or {}
        for key in a0:
            if a0[key] == a1.get(key):
                continue
            if ((n0["op"] == "reshape" and key == "shape") or (n0["op"] == "slice" and key == "ends")) \
                    and len(a0[key]) == len(a1[key]):
                shape = [named(a, b) for a, b in zip(a0[key], a1[key])]
                if None not in shape:
                    a0[key] = shape
                    continue
            raise _Refused(_by_origin(L, nodes, i), "its %s attribute %s follows a dynamic size "
                           "(%r at one size, %r at another), which a graph cannot express" % (
                               n0["op"], key, a0[key], a1.get(key)))
    if len(used) > _MAX_DIMS:
        raise _Refused(list(nodes), "a piece of more than %d dynamic sizes (%s)" % (
            _MAX_DIMS, ", ".join(sorted(used))))
    return req0, sorted(used)


def _plan_piece(nodes, kind, opts, client, symbols):
    """Lowers one piece and asks for its plan (a graph with dynamic sizes: lowered at both sets
    of probes, its sizes named, "dims" declared)."""
    from . import HidetdError
    if symbols:
        runs = []
        for probe in symbols.probe:
            old = aten.set_probe(probe)
            try:
                runs.append(_lower_piece(nodes, kind, opts))
            finally:
                aten.set_probe(old)
        L, args_in, args_w, outs = runs[0]
        request, used = _name_sizes(L.request(), runs[1][0].request(), L, nodes, symbols)
        if used:
            request["dims"] = {n: {"min": symbols.range[n][0], "max": symbols.range[n][1]}
                               for n in used}
    else:
        L, args_in, args_w, outs = _lower_piece(nodes, kind, opts)
        request, used = L.request(), []
    # Each output's shape: per axis a size, or the names whose sizes it is the product of.
    shaped = []
    for n, name, layout, dtype in outs:
        shape = []
        for d in meta_of(n).shape:
            try:
                names = aten.sym_axis(d)
            except Unsupported as e:
                raise _Refused(n, str(e))
            shape.append(names if names else aten.sym_int(d))
        shaped.append((n, name, layout, shape, dtype))
    request.update(opts.request_options())
    try:
        plan_json = _plan_json(client, request)
    except HidetdError as e:
        raise _Refused(_culprits(L, e, nodes, args_in + args_w), "refused by the daemon: %s" % e)
    piece = Piece(nodes, args_in, args_w, L, shaped, request, plan_json, client)
    piece.dims = used
    return piece


def _plan_json(client, request):
    """The daemon's plan for a request: a full graph queue (429) is asked again a few times;
    a daemon that cannot answer raises _DaemonUnavailable, a refusal HidetdError."""
    from . import HidetdError
    for attempt in range(_BUSY_TRIES):
        try:
            return client.plan_json(request)
        except HidetdError as e:
            if e.status == 429 and attempt + 1 < _BUSY_TRIES:
                time.sleep(_BUSY_WAIT_S * (attempt + 1))  # the graph queue is full: a turn later
                continue
            if e.status == 0 or e.status >= 500 or e.status == 429:
                raise _DaemonUnavailable("cannot get a plan from hidetd at %s: %s" % (client.address, e))
            raise


def _culprits(L, err, nodes, args):
    """The fx nodes a refused graph's error field points at: the node nodes[i] came from, or
    the nodes that read graph.inputs[i] / graph.weights[i]; else the whole piece."""
    import re
    field = getattr(err, "field", None) or ""
    m = re.match(r"(?:graph\.)?nodes\[(\d+)\]", field)
    if m and int(m.group(1)) < len(L.origin):
        name = L.origin[int(m.group(1))]
        hit = [n for n in nodes if n.name == name]
        if hit:
            return hit
    m = re.match(r"graph\.(inputs|weights)\[(\d+)\]", field)
    if m:
        decl = L.inputs if m.group(1) == "inputs" else L.weights
        i = int(m.group(2))
        if i < len(decl):
            name = decl[i]["name"]
            arg = next((a for a in args if L.declared.get(a) == name), None)
            readers = [n for n in nodes if arg is not None and arg in n.all_input_nodes]
            if readers:
                return readers
    return list(nodes)


class Piece:
    """One piece: the fx nodes it replaces, where its arguments come from, and its plan."""

    def __init__(self, nodes, args_in, args_w, lowering, outs, request, plan_json, client):
        self.nodes = nodes
        self.request = request
        self.args_in = args_in
        self.args_w = args_w
        self.constants = lowering.constants
        # Whether each argument is bound NHWC (a channels-last tensor's own memory).
        self.in_layout = [lowering.declared_nhwc[a] for a in args_in]
        self.w_layout = [lowering.declared_nhwc[a] for a in args_w]
        self.in_names = [t["name"] for t in lowering.inputs]
        # A boolean input is declared as 0/1 in f16 (the graph has no bool): converted per call.
        self.in_cast = ["f16" if str(meta_of(a).dtype) == "torch.bool" else None for a in args_in]
        self.w_cast = ["f16" if str(meta_of(a).dtype) == "torch.bool" else None for a in args_w]
        self.w_names = [t["name"] for t in lowering.weights[:len(args_w)]]
        self.outs = outs
        self.plan_json = plan_json
        self.kernels = len(plan_json.get("steps", [])) + len(plan_json.get("prepare", []))
        self.client = client
        self.dims = []  # the dynamic sizes its graph names
        self.plan = None
        self._run = None
        self._bound = None

    @classmethod
    def restored(cls, e, nodes, plan_json, client):
        """A piece from a compile cache entry (see _to_cache): nodes by index, no lowering."""
        p = cls.__new__(cls)
        p.nodes = [nodes[i] for i in e["nodes"]]
        p.request = e["request"]
        p.args_in = [nodes[i] for i in e["args_in"]]
        p.args_w = [nodes[i] for i in e["args_w"]]
        p.constants = e["constants"]
        for f in ("in_layout", "w_layout", "in_names", "w_names", "in_cast", "w_cast"):
            setattr(p, f, e[f])
        p.outs = [(nodes[i], name, layout, shape, dtype)
                  for i, name, layout, shape, dtype in e["outs"]]
        p.plan_json = plan_json
        p.kernels = len(plan_json.get("steps", [])) + len(plan_json.get("prepare", []))
        p.client = client
        p.dims = []
        p.plan = None
        p._run = None
        p._bound = None
        return p


def _as_declared(t, cast):
    """t as its graph input or weight is declared: a 0-d tensor (a lifted scalar) as [1], a
    boolean one as f16 0/1."""
    if t.dim() == 0:
        t = t.reshape(1)
    if cast is None:
        return t
    import torch
    return t.to(torch.float16)


def _phys(t, nhwc):
    """The tensor as the graph holds it (NHWC for a channels-last 4-D tensor), contiguous."""
    if nhwc:
        t = t.permute(0, 2, 3, 1)
    return t if t.is_contiguous() else t.contiguous()


class CompiledGraph:
    """The compiled forward: folded constants computed at the first call, the pieces run as
    plans, everything else as the ATen graph says, in its order."""

    def __init__(self, gm, placeholders, folded, pieces, opts, symbols=None):
        self.gm = gm
        self.symbols = symbols if symbols else None
        self.placeholders = placeholders
        self.folded = folded
        self.pieces = pieces
        self.opts = opts
        self.order = _schedule(gm, pieces, set(folded))
        # Values are dropped after their last reader, as the ATen graph would free them.
        last_use = {}
        for i, (what, x) in enumerate(self.order):
            for a in (x.all_input_nodes if what == "node" else _piece_reads(x)):
                last_use[a] = i
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        self.drop = [[] for _ in self.order]
        keep = set(self.output.all_input_nodes) | set(folded)
        for a, i in last_use.items():
            if a.op == "call_function" and a not in keep:
                self.drop[i].append(a)
        # The weights folded values are made from: a change to one makes them again.
        reads = set()
        for n in folded:
            reads.update(a for a in n.all_input_nodes if a.op == "placeholder")
        self.fold_args = [i for i, n in enumerate(placeholders) if n in reads]
        self.fold_bound = []
        self.env_consts = None
        self._warned_cpu = False

    def tables_version(self):
        """The pieces' plans' tables_version together: changes when a dispatch table of any
        of them does (a graph over names; see Plan.tables_version)."""
        return sum(p.plan.tables_version for p in self.pieces if p.plan is not None)

    def _fold_inputs_same(self, args):
        for i, ref, version in self.fold_bound:
            if args[i] is not ref or args[i]._version != version:
                return False
        return True

    def _constants(self, args):
        """The folded values and get_attr constants, computed once with PyTorch."""
        import torch.fx
        env = {n: a for n, a in zip(self.placeholders, args)}
        for n in self.gm.graph.nodes:
            if n.op == "get_attr":
                t = self.gm
                for part in n.target.split("."):
                    t = getattr(t, part)
                env[n] = t
        for n in self.folded:
            a = torch.fx.node.map_arg(n.args, lambda x: env[x])
            k = torch.fx.node.map_arg(n.kwargs, lambda x: env[x])
            env[n] = n.target(*a, **k)
        return {n: v for n, v in env.items() if n not in self.placeholders}

    def __call__(self, *args):
        import torch
        if self.env_consts is None or not self._fold_inputs_same(args):
            with torch.no_grad():
                self.env_consts = self._constants(args)
            self.fold_bound = [(i, args[i], args[i]._version) for i in self.fold_args]
        env = dict(self.env_consts)
        for n, a in zip(self.placeholders, args):
            env[n] = a
        sizes = self.symbols.sizes(args) if self.symbols else None
        for (what, x), drop in zip(self.order, self.drop):
            if what == "node":
                a = torch.fx.node.map_arg(x.args, lambda y: env[y])
                k = torch.fx.node.map_arg(x.kwargs, lambda y: env[y])
                env[x] = x.target(*a, **k)
            else:
                self._run_piece(x, env, sizes)
            for y in drop:
                env.pop(y, None)
        out = torch.fx.node.map_arg(self.output.args[0], lambda y: env[y])
        return out

    def _run_piece(self, p, env, sizes=None):
        import torch
        ins = [env[a] for a in p.args_in]
        ws = [env[a] for a in p.args_w]
        dev = next((t.device for t in ins + ws if isinstance(t, torch.Tensor)), None)
        if p.dims:
            at = {n: sizes[n] for n in p.dims}
            out_of_range = [n for n in p.dims if not self.symbols.range[n][0] <= at[n] <= self.symbols.range[n][1]]
            if out_of_range:
                n = out_of_range[0]
                lo, hi = self.symbols.range[n]
                _warn_once("hidetd: %s is %d; its range is %d..%d (options={\"dynamic_max\": ...} "
                           "or mark_dynamic(max=) widens it): PyTorch runs the pieces at that size" %
                           (n, at[n], lo, hi))
                self._eager_piece(p, env)
                return
        if (dev is None or dev.type != "cuda") and self.opts.reference and not p.dims:
            self._reference_piece(p, env, ins, ws)
            return
        if dev is None or dev.type != "cuda":
            if not self._warned_cpu:
                self._warned_cpu = True  # once per compiled graph
                warnings.warn("hidetd runs plans on CUDA tensors; these are on %s, so PyTorch "
                              "runs the graph" % dev, RuntimeWarning, stacklevel=3)
            self._eager_piece(p, env)
            return
        if p._run is None or not _same_weights(p, ws):
            _bind(p, ws, dev)
        outs = []
        ptrs = []
        for (n, name, layout, shape, dtype) in p.outs:
            if p.dims:
                shape = [d if isinstance(d, int) else _product(at, d) for d in shape]
            if layout == "nhwc":
                t = torch.empty((shape[0], shape[2], shape[3], shape[1]), dtype=dtype, device=dev)
                ptrs.append(t.data_ptr())
                t = t.permute(0, 3, 1, 2)
            else:
                t = torch.empty(shape, dtype=dtype, device=dev)
                ptrs.append(t.data_ptr())
            outs.append((n, t))
        in_ptrs = [_phys(_as_declared(t, c), nhwc).data_ptr()
                   for t, nhwc, c in zip(ins, p.in_layout, p.in_cast)]
        stream = torch.cuda.current_stream(dev).cuda_stream
        if p.dims:
            p._run(in_ptrs, ptrs, stream, at)
        else:
            p._run(in_ptrs, ptrs, stream)
        for n, t in outs:
            env[n] = t

    def _reference_piece(self, p, env, ins, ws):
        """The piece's graph run by hidetd.reference (options={"reference": True}, tensors off
        the GPU): what the plan computes, by the graph's definition, in PyTorch."""
        from .reference import run_graph
        gin = {name: _phys(_as_declared(t, c), nhwc)
               for name, t, nhwc, c in zip(p.in_names, ins, p.in_layout, p.in_cast)}
        gw = {name: _phys(_as_declared(t, c), nhwc)
              for name, t, nhwc, c in zip(p.w_names, ws, p.w_layout, p.w_cast)}
        gw.update(p.constants)
        outs = run_graph(p.request["graph"], gin, gw)
        for (n, name, layout, shape, dtype) in p.outs:
            t = outs[name]
            env[n] = t.permute(0, 3, 1, 2) if layout == "nhwc" else t

    def _eager_piece(self, p, env):
        import torch.fx
        for n in p.nodes:
            a = torch.fx.node.map_arg(n.args, lambda y: env[y])
            k = torch.fx.node.map_arg(n.kwargs, lambda y: env[y])
            env[n] = n.target(*a, **k)


def _product(sizes, names):
    v = 1
    for n in names:
        v *= sizes[n]
    return v


def _same_weights(p, ws):
    b = p._bound
    for t, (ref, version) in zip(ws, b):
        if t is not ref or t._version != version:
            return False
    return True


def _bind(p, ws, dev):
    """Binds a piece's weights (and the constants its lowering made) and builds its runner."""
    import torch
    from .plan import Plan
    if p.plan is None:
        p.plan = Plan(p.client, p.plan_json, request=p.request)
    weights = {}
    for name, t, nhwc, cast in zip(p.w_names, ws, p.w_layout, p.w_cast):
        weights[name] = _phys(_as_declared(t.to(dev), cast), nhwc)
    for name, t in p.constants.items():
        weights[name] = t.to(dev)
    if weights:
        p.plan.load_weights(weights)
    else:
        p.plan._setup(dev.index, True)
    p._keep = weights
    p._bound = [(t, t._version) for t in ws]
    p._run = p.plan.runner(p.in_names, [o[1] for o in p.outs])


def _piece_inputs(p):
    """The fx nodes a piece reads: its runtime inputs, then its weights."""
    return p.args_in + p.args_w


def _piece_reads(p):
    """Every fx node a piece's nodes read from outside it: its inputs and weights, and the sizes
    (s0 * s1, computed by PyTorch) that its graph does not need but PyTorch does when it runs
    the piece instead of the plan (_eager_piece)."""
    inside = set(p.nodes)
    out = dict.fromkeys(_piece_inputs(p))
    for n in p.nodes:
        out.update(dict.fromkeys(a for a in n.all_input_nodes if a not in inside))
    return list(out)


def _schedule(gm, pieces, folded):
    """The order to run things in: PyTorch's nodes and whole pieces, each after everything it
    reads (Kahn's algorithm, ties broken by the ATen graph's order)."""
    import heapq
    piece_of = {n: p for p in pieces for n in p.nodes}
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    items, key = [], {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or n in folded:
            continue
        it = piece_of.get(n, n)
        if it not in key:
            key[it] = index[n]
            items.append(it)
        elif it is not n:
            key[it] = min(key[it], index[n])

    def deps(it):
        ins = _piece_reads(it) if isinstance(it, Piece) else it.all_input_nodes
        out = set()
        for a in ins:
            d = piece_of.get(a, a)
            if d in key and d is not it:
                out.add(d)
        return out
    needs = {it: deps(it) for it in items}
    users = {it: [] for it in items}
    for it, ds in needs.items():
        for d in ds:
            users[d].append(it)
    count = {it: len(ds) for it, ds in needs.items()}
    ready = [(key[it], i, it) for i, it in enumerate(items) if count[it] == 0]
    heapq.heapify(ready)
    order, seq = [], len(items)
    while ready:
        _, _, it = heapq.heappop(ready)
        order.append(("piece", it) if isinstance(it, Piece) else ("node", it))
        for u in users[it]:
            count[u] -= 1
            if count[u] == 0:
                seq += 1
                heapq.heappush(ready, (key[u], seq, u))
    if len(order) != len(items):
        raise RuntimeError("hidetd: the split graph has a cycle")  # the partitioner prevents it
    return order


class CudaGraphed:
    """The compiled forward replayed from a CUDA graph (mode="reduce-overhead"): at each input
    shape the first call runs it plainly (binding weights, running prepare steps, warming
    PyTorch's kernels), the second captures it with the inputs copied into buffers of its own,
    and every later call at that shape copies the inputs in and replays. Outputs are copied out,
    so a result stays valid after the next call. Weights are read where they are; a weight
    replaced or changed in place, or inputs that are not CUDA tensors, make it run plainly and
    capture again.

    A graph over names (dynamic sizes) keeps one capture per input shape, the MAX_GRAPHS most
    recently used (a shape dropped and met again is captured at once); a shape's capture is made again when the plans' dispatch tables changed
    since (tables_version: a background re-ask brought kernels tuned for its ranges), since a
    CUDA graph keeps the kernels chosen when it was captured."""

    MAX_GRAPHS = 8

    def __init__(self, fn, static, tables_version=None):
        self.fn = fn
        self.static = static
        self.tables_version = tables_version
        self.captures = collections.OrderedDict()  # input shapes -> _Capture
        self.calls = {}                            # input shapes -> plain calls since a capture

    def __call__(self, *args):
        import torch
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or not self._on_cuda(tensors):
            return self.fn(*args)
        shapes = tuple((tuple(a.shape), a.stride(), a.dtype) for i, a in enumerate(args)
                       if i not in self.static and isinstance(a, torch.Tensor))
        version = self.tables_version() if self.tables_version else 0
        cap = self.captures.get(shapes)
        if cap is not None and (cap.version != version or not cap.same_static(args)):
            del self.captures[shapes]
            self.calls[shapes] = 0
            cap = None
        if cap is None:
            calls = self.calls.get(shapes, 0) + 1
            if len(self.calls) >= 64 * self.MAX_GRAPHS:
                self.calls.clear()
            self.calls[shapes] = calls
            if calls < 2:
                return self.fn(*args)
            cap = _Capture(self.fn, self.static, args)
            cap.version = self.tables_version() if self.tables_version else 0
            self.captures[shapes] = cap
            if len(self.captures) > self.MAX_GRAPHS:
                self.captures.popitem(last=False)
        else:
            self.captures.move_to_end(shapes)
        return cap.replay(args)

    @staticmethod
    def _on_cuda(tensors):
        return all(t.device.type == "cuda" for t in tensors)


class _Capture:
    """One CUDA graph of the compiled forward at one input shape: its input buffers, its
    outputs, and the static arguments (weights) it read, by identity and version."""

    def __init__(self, fn, static, args):
        import torch
        dev = next(a.device for a in args if isinstance(a, torch.Tensor))
        self.inputs = [(i, torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=dev))
                       for i, a in enumerate(args)
                       if i not in static and isinstance(a, torch.Tensor)]
        static_args = list(args)
        for i, buf in self.inputs:
            buf.copy_(args[i])
            static_args[i] = buf
        stream = torch.cuda.Stream(dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(stream):
            fn(*static_args)      # warm-up on the capture stream
        torch.cuda.current_stream(dev).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=stream):
            self.outputs = fn(*static_args)
        self.bound = [(i, (args[i], args[i]._version)) for i in static
                      if isinstance(args[i], torch.Tensor)]
        self.version = 0

    def same_static(self, args):
        for i, (ref, version) in self.bound:
            if args[i] is not ref or args[i]._version != version:
                return False
        return True

    def replay(self, args):
        for i, buf in self.inputs:
            buf.copy_(args[i])
        self.graph.replay()
        return _clone_outputs(self.outputs)


def _clone_outputs(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_clone_outputs(o) for o in out)
    return out


# ---- the entry points -----------------------------------------------------------------------

def compile(model, example_inputs=None, mode=None, **options):
    """torch.compile(model, backend="hidetd", options=options); with example_inputs, the
    model is compiled now (one forward under torch.no_grad()) instead of at its first call.
    With the warm start on (the default, with a compile cache) an nn.Module is wrapped in a
    hidetd.saved.WarmStart: seen before with inputs like these, it runs without Dynamo."""
    import torch
    from . import compile_cache
    opts = Options(mode, options)
    directory = compile_cache.directory(opts.cache_dir)
    if opts.warm_start and directory and isinstance(model, torch.nn.Module):
        from .saved import WarmStart
        compiled = WarmStart(model, mode, options, opts, directory)
    else:
        compiled = torch.compile(model, backend=hidetd_backend, mode=mode, options=options or None)
    if example_inputs is not None:
        if not isinstance(example_inputs, (list, tuple)):
            example_inputs = (example_inputs,)
        with torch.no_grad():
            compiled(*example_inputs)
    return compiled


def save(model, example_inputs, path, **options):
    """Compiles model for example_inputs (one whole graph: fullgraph) and writes to path what
    hidetd.load needs to run it in another process without Dynamo's trace: the graph's
    compile-cache entry (the daemon answers its plans from its kernel cache), where each graph
    argument comes from, and the output's structure (hidetd.saved)."""
    from . import saved
    return saved.save(model, example_inputs, path, options)


def load(path, model):
    """The model hidetd.save wrote to path, bound to model (its parameters and buffers): call
    the result with the inputs. No Dynamo trace; each call checks the inputs' shapes, strides,
    dtypes and devices against the saved ones (another shape is refused with both), and runs under
    torch.no_grad(); the plans come from the daemon named by the options saved with them."""
    from . import saved
    return saved.load(path, model)


def explain(model, *inputs, **options):
    """Compiles model for these inputs (under torch.no_grad(), a compilation of its own) and
    returns an Explanation: per graph, how many ops hidetd runs, how many were folded into
    constants, and each op left to PyTorch with the reason."""
    import functools
    import torch
    reports = []
    backend = functools.partial(hidetd_backend, _reports=reports)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=backend, options=options or None)
        with torch.no_grad():
            out = compiled(*inputs)
    finally:
        torch._dynamo.reset()
    return Explanation(reports, out)
