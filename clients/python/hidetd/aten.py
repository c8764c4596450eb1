"""hidetd.aten - lowers core ATen ops (the graphs Dynamo and AOTAutograd hand a backend) onto
hidetd graph nodes (docs/graphs.md).

A Lowering turns the fx nodes of one piece into a /v1/graphs request. Every converter either
emits nodes or raises Unsupported with the reason, which is how the backend (hidetd.backend)
decides what runs where and what hidetd.explain() says: the same code decides support and
builds the graph, so they cannot disagree.

Layout: hidetd's fast convolutions and pools are NHWC. A 4-D value that a convolution or pool
made, or a channels-last input, is kept NHWC in the graph (`Value.nhwc`: the graph tensor is
the logical NCHW tensor permuted by (0, 2, 3, 1)); ops that understand axes (elementwise,
batchnorm, reductions, concat, slices) work on it in place, anything else gets it in PyTorch's
order through a transpose node. Weights are declared exactly as PyTorch holds them (shape,
dtype); every change of layout or dtype they need is a node, which the plan runs once in its
prepare phase.

dtype policy: `compute` (None, "f16" or "bf16") is the dtype floating-point work runs in. With
None every value keeps its PyTorch dtype; otherwise f32 inputs and weights are cast on entry
(a cast node, fused into the first kernel that reads them) and outputs cast back to their
PyTorch dtype. Boolean values (masks) are 0/1 in the dtype of the work around them.

Dynamic shapes: a graph compiled with dynamic=True (or mark_dynamic) has SymInt sizes, sympy
expressions over the free symbols of PyTorch's ShapeEnv. The lowering reads every size with
sym_int(), which evaluates it at probe values of the symbols (set_probe(); the backend lowers a
piece at two sets of probes and names the sizes that differ, see hidetd.backend) - never with
int(), which would add a guard and make Dynamo recompile for the next size. sym_axis() says
whether a size is one a graph can hold: a number, a name or a product of names.
"""
import math
import operator
import re

NHWC = (0, 2, 3, 1)          # physical axis j of an NHWC value holds logical axis NHWC[j]
NHWC_INV = (0, 3, 1, 2)      # logical axis i lives in physical axis NHWC_INV[i]
FLOAT = ("f16", "bf16", "f32")
INT = ("i32", "i64")
FP8 = ("f8e4m3", "f8e5m2")  # torch.float8_e4m3fn, float8_e5m2: cast nodes and FP8 matmuls read them
# The only nodes that may read an integer tensor: as gather's index, a cast's input, or a view.
INT_READERS = ("reshape", "embedding", "index_select", "gather", "cast")


class Unsupported(Exception):
    """An op (or this use of it) hidetd cannot run; the message says why."""


class Value:
    """A tensor of the graph being built: its graph name, graph (physical) shape, graph dtype,
    and whether it is a logical NCHW tensor held NHWC."""
    __slots__ = ("name", "shape", "dtype", "nhwc", "is_bool")

    def __init__(self, name, shape, dtype, nhwc=False, is_bool=False):
        self.name = name
        self.shape = list(shape)
        self.dtype = dtype
        self.nhwc = nhwc
        self.is_bool = is_bool

    @property
    def logical_shape(self):
        return [self.shape[i] for i in NHWC_INV] if self.nhwc else list(self.shape)


def torch_dtype_name(dt):
    import torch
    return {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
            torch.int32: "i32", torch.int64: "i64", torch.bool: "bool",
            torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2"}.get(dt)


def meta_of(node):
    """The FakeTensor (or list of them) Dynamo/AOT recorded for a node, or None."""
    return node.meta.get("val") if hasattr(node, "meta") else None


# The probe value of each free symbol while a piece is lowered ({sympy Symbol: int}), or None.
_PROBE = None
_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,14}\Z")


def set_probe(subst):
    """Sets the probe values sym_int() evaluates sizes at; returns the previous ones."""
    global _PROBE
    old, _PROBE = _PROBE, subst
    return old


def is_symbolic(d):
    import torch
    return isinstance(d, torch.SymInt) and bool(d.node.expr.free_symbols)


def sym_int(d):
    """A size as an int: a SymInt evaluated at the probe values (no guard is added)."""
    import torch
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        if not expr.free_symbols:
            return int(expr)
        if _PROBE is None:
            raise Unsupported("the dynamic size %s" % expr)
        v = expr.xreplace(_PROBE)
        if isinstance(v, int):
            return v
        if not v.is_Integer:
            raise Unsupported("the dynamic size %s" % expr)
        return int(v)
    return int(d)


def sym_name(sym):
    """The graph name of a free symbol (s0, s77): its own name, which the wire's grammar takes."""
    name = str(sym)
    if not _NAME_RE.match(name):
        raise Unsupported("the dynamic size %s has no name a graph can hold" % name)
    return name


def sym_axis(d):
    """None for a fixed size; for a dynamic one the tuple of names of the product it is (a
    name, "b*s"). Unsupported for anything else (s0 + 1, s0 // 2, 2 * s0): the wire's shapes are
    names and products of distinct names."""
    if not is_symbolic(d):
        return None
    e = d.node.expr
    factors = e.args if e.is_Mul else (e,)
    if all(f.is_Symbol for f in factors) and len(set(factors)) == len(factors):
        return tuple(sorted(sym_name(f) for f in factors))
    raise Unsupported("a size of %s: a graph's sizes are numbers, names or products of names "
                      "(s0*s1)" % e)


def _shape(t):
    return [sym_int(d) for d in t.shape]


def is_empty(t):
    """Whether a (fake) tensor has no elements, without a guard: a dynamic size is never 0
    (PyTorch specializes 0 and 1)."""
    return any(not is_symbolic(d) and sym_int(d) == 0 for d in t.shape)


def is_channels_last(t):
    import torch
    return (t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last))


class Lowering:
    """Builds one /v1/graphs graph. Inputs and weights are declared by the caller (input(),
    weight(), constant()); lower(node) converts one fx node; output() names a result."""

    def __init__(self, compute=None):
        self.compute = compute
        self.inputs, self.weights, self.nodes, self.outputs = [], [], [], []
        self.constants = {}    # weight name -> torch tensor the lowering made itself
        self.vals = {}         # fx node -> Value, or tuple of Values (multi-result ops)
        self.declared = {}     # fx node -> the graph input or weight name declared for it
        self.declared_nhwc = {}  # fx node -> whether it is declared NHWC (channels-last 4-D)
        self.origin = []       # per graph node: the fx node name it came from
        self._n = 0
        self._cur = "graph"

    # ---- names and declarations --------------------------------------------------------

    def fresh(self, hint):
        self._n += 1
        return "%s.%d" % (hint, self._n)

    def _float_dtype(self, torch_name):
        if torch_name == "f32" and self.compute:
            return self.compute
        return torch_name

    def _declare(self, lst, name, t, cast_ok=True):
        """Declares a graph input or weight from a (fake) tensor; returns its Value, cast to the
        compute dtype where the policy says so."""
        dt = torch_dtype_name(t.dtype)
        if dt is None:
            raise Unsupported("dtype %s is not supported" % t.dtype)
        nhwc = is_channels_last(t)
        shape = _shape(t) or [1]  # a 0-d scalar is declared [1] (backend._as_declared)
        decl_dtype = "f16" if dt == "bool" else dt  # bool inputs arrive as a 0/1 cast by the caller
        lst.append({"name": name, "shape": [shape[i] for i in NHWC] if nhwc else shape,
                    "dtype": decl_dtype})
        v = Value(name, lst[-1]["shape"], decl_dtype, nhwc, is_bool=(dt == "bool"))
        want = self._float_dtype(decl_dtype) if decl_dtype in FLOAT else decl_dtype
        if cast_ok and want != decl_dtype:
            v = self.emit("cast", [v], {"dtype": want}, v.shape, want, nhwc)
        return v

    def input(self, node, name, t):
        v = self._declare(self.inputs, name, t)
        self.vals[node] = v
        self.declared[node] = name
        self.declared_nhwc[node] = is_channels_last(t)
        return v

    def weight(self, node, name, t):
        v = self._declare(self.weights, name, t)
        self.vals[node] = v
        self.declared[node] = name
        self.declared_nhwc[node] = is_channels_last(t)
        return v

    def constant(self, make, hint="const"):
        """A tensor the lowering itself makes (a causal mask, a scalar), make() called outside
        any fake-tensor mode the compiler runs in: a weight whose value the runtime binds
        (self.constants)."""
        import torch
        name = self.fresh("#c." + hint).replace("#", "k")  # graph names may not hold '#'
        with _real_tensors():
            t = make().detach().contiguous()
            if t.dim() == 0:
                t = t.reshape(1)
            dt = torch_dtype_name(t.dtype)
            if dt == "bool":
                t = t.to(torch.float32)
                dt = "f32"
        self.constants[name] = t
        self.weights.append({"name": name, "shape": _shape(t), "dtype": dt})
        v = Value(name, _shape(t), dt)
        want = self._float_dtype(dt) if dt in FLOAT else dt
        return self.emit("cast", [v], {"dtype": want}, v.shape, want) if want != dt else v

    def emit(self, op, ins, attrs, shape, dtype, nhwc=False, is_bool=False, view=False):
        # view: a node that is a view of its input (a prefix slice), which may read integers.
        if op not in INT_READERS and not view and any(v.dtype in INT for v in ins):
            # The graph language's rule (docs/graphs.md): no kernel computes on integers.
            raise Unsupported("%s of an integer tensor" % op)
        out = self.fresh(self._cur)
        node = {"name": out, "op": op, "inputs": [v.name for v in ins], "outputs": [out]}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        self.origin.append(self._cur)
        return Value(out, shape, dtype, nhwc, is_bool)

    def output(self, v, want_channels_last, torch_dtype):
        """Marks v a graph output; returns (graph name, "nhwc" or "plain"). A value that is a
        graph input or weight itself is copied (a graph output must be made by a node)."""
        nhwc = v.nhwc and want_channels_last
        if v.nhwc and not nhwc:
            v = self.to_plain(v)
        want = torch_dtype_name(torch_dtype)
        if want == "bool":
            raise Unsupported("a boolean result leaves hidetd")
        if want != v.dtype:
            v = self.emit("cast", [v], {"dtype": want}, v.shape, want, v.nhwc)
        declared = {t["name"] for t in self.inputs} | {t["name"] for t in self.weights}
        if v.name in declared or v.name in self.outputs:
            v = self.emit("copy", [v], None, v.shape, v.dtype, v.nhwc)
        self.outputs.append(v.name)
        return v.name, ("nhwc" if nhwc else "plain")

    def request(self):
        return {"graph": {"inputs": self.inputs, "weights": self.weights, "nodes": self.nodes,
                          "outputs": self.outputs}}

    # ---- layout helpers ------------------------------------------------------------------

    def to_plain(self, v):
        if not v.nhwc:
            return v
        n, h, w, c = v.shape
        logical = [n, c, h, w]
        if h * w == 1 or c == 1:  # the same element order: a view
            return self.emit("reshape", [v], {"shape": logical}, logical, v.dtype, False, v.is_bool)
        return self.emit("transpose", [v], {"perm": list(NHWC_INV)}, logical, v.dtype, False,
                         v.is_bool)

    def to_nhwc(self, v):
        """A logical NCHW 4-D value held NHWC."""
        if v.nhwc:
            return v
        if len(v.shape) != 4:
            raise Unsupported("expected a 4-D tensor, got %d-D" % len(v.shape))
        n, c, h, w = v.shape
        phys = [n, h, w, c]
        if h * w == 1 or c == 1:
            return self.emit("reshape", [v], {"shape": phys}, phys, v.dtype, True, v.is_bool)
        return self.emit("transpose", [v], {"perm": list(NHWC)}, phys, v.dtype, True, v.is_bool)

    def like_nhwc(self, v):
        """An operand broadcast against an NHWC value: right-aligned to rank 4, then held
        NHWC (size-1 axes move for free)."""
        if v.nhwc:
            return v
        if len(v.shape) > 4:
            raise Unsupported("a %d-D operand broadcast against a 4-D channels-last value" % len(v.shape))
        if len(v.shape) < 4:
            s4 = [1] * (4 - len(v.shape)) + v.shape
            v = self.emit("reshape", [v], {"shape": s4}, s4, v.dtype, False, v.is_bool)
        return self.to_nhwc(v)

    @staticmethod
    def phys_axis(v, axis):
        rank = len(v.shape)
        if axis < 0:
            axis += rank
        if not 0 <= axis < rank:
            raise Unsupported("axis %d out of range for rank %d" % (axis, rank))
        return NHWC_INV[axis] if v.nhwc else axis

    # ---- the converters ------------------------------------------------------------------

    def val(self, a):
        import torch.fx
        if isinstance(a, Value):
            return a
        if isinstance(a, torch.fx.Node):
            v = self.vals.get(a)
            if v is None:
                raise Unsupported("reads %s, which is not a tensor hidetd holds" % a.name)
            return v
        raise Unsupported("expected a tensor argument, got %r" % (a,))

    def lower(self, node):
        """Converts one call_function node, recording its Value(s)."""
        self._cur = node.name
        fn = CONVERTERS.get(node.target)
        if fn is None:
            raise Unsupported("%s has no hidetd lowering" % target_name(node.target))
        out = fn(self, node, *node.args, **node.kwargs)
        self.vals[node] = out
        return out

    def binary(self, node, op, a, b):
        """a OP b for tensors or Python numbers, numpy broadcasting (both ways)."""
        if not _is_tensor(a):
            if op in ("add", "mul", "max", "min", "eq", "ne"):
                a, b = b, a
            elif op == "sub":          # number - x
                x = self.val(b)
                nx = self.emit("neg", [x], None, x.shape, x.dtype, x.nhwc)
                return self.emit("shift", [nx], {"value": _num(a)}, x.shape, x.dtype, x.nhwc)
            elif op == "div":          # number / x
                x = self.val(b)
                r = self.emit("pow", [x], {"exponent": -1.0}, x.shape, x.dtype, x.nhwc)
                return self.emit("scale", [r], {"value": _num(a)}, x.shape, x.dtype, x.nhwc)
            else:
                a, b = b, a
                op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[op]
        x = self.val(a)
        if not _is_tensor(b) and x.dtype in INT and _num(b) == (1.0 if op in ("mul", "div") else 0.0) \
                and op in ("add", "sub", "mul", "div") and node is not None and \
                any(is_symbolic(d) for d in getattr(meta_of(node), "shape", ())):
            return x  # arange(s) + 0 (GPT-2's position ids): integer ids pass as they are
        if not _is_tensor(b):
            b = _num(b)
            if op == "add":
                return self.emit("shift", [x], {"value": b}, x.shape, x.dtype, x.nhwc)
            if op == "sub":
                return self.emit("shift", [x], {"value": -b}, x.shape, x.dtype, x.nhwc)
            if op == "mul":
                return self.emit("scale", [x], {"value": b}, x.shape, x.dtype, x.nhwc)
            if op == "div":
                if b == 0:
                    raise Unsupported("division by the constant 0")
                return self.emit("scale", [x], {"value": 1.0 / b}, x.shape, x.dtype, x.nhwc)
            if op in ("max", "min"):
                attrs = {"min": b} if op == "max" else {"max": b}
                return self.emit("clamp", [x], attrs, x.shape, x.dtype, x.nhwc)
            if op in CMP_OPS:
                return self.emit(op, [x], {"value": b}, x.shape, x.dtype, x.nhwc, True)
            raise Unsupported("%s with a constant operand" % op)
        y = self.val(b)
        x, y = self.same_dtype(x, y)
        x, y, nhwc = self.align(x, y)
        shape = _broadcast(x.shape, y.shape)
        return self.emit(op, [x, y], None, shape, x.dtype, nhwc, op in CMP_OPS)

    def align(self, *vs):
        """Operands of a broadcasting op in one layout: NHWC when any is."""
        if any(v.nhwc for v in vs):
            return tuple(self.like_nhwc(v) for v in vs) + (True,)
        return tuple(vs) + (False,)

    def same_dtype(self, *vs):
        """Casts operands to one floating dtype (masks take the other side's)."""
        dts = [v.dtype for v in vs]
        if any(d in INT for d in dts):
            raise Unsupported("integer arithmetic (%s) is not supported" % "/".join(dts))
        if len(set(dts)) == 1:
            return vs
        non_mask = [v.dtype for v in vs if not v.is_bool] or dts
        target = "f32" if "f32" in non_mask else non_mask[0]
        return tuple(v if v.dtype == target else
                     self.emit("cast", [v], {"dtype": target}, v.shape, target, v.nhwc, v.is_bool)
                     for v in vs)

    def unary(self, op, x, attrs=None, is_bool=False):
        v = self.val(x)
        if v.dtype in INT:
            raise Unsupported("%s of an integer tensor" % op)
        return self.emit(op, [v], attrs, v.shape, v.dtype, v.nhwc, is_bool)

    def reshape(self, x, shape):
        v = self.to_plain(self.val(x))
        shape = [int(s) for s in shape]
        if -1 in shape:
            known = 1
            for s in shape:
                if s != -1:
                    known *= s
            shape[shape.index(-1)] = _numel(v.shape) // max(known, 1)
        if _numel(shape) != _numel(v.shape):
            raise Unsupported("reshape of %s to %s" % (v.shape, shape))
        if shape == v.shape:
            return v
        if not shape:
            raise Unsupported("a reshape to a 0-dimensional tensor")
        return self.emit("reshape", [v], {"shape": shape}, shape, v.dtype, False, v.is_bool)

    def slice(self, v, axis, start, end, step=1):
        rank = len(v.logical_shape)
        axis = axis + rank if axis < 0 else axis
        size = v.logical_shape[axis]
        start, end, _ = slice(start, end, step).indices(size)
        if step < 1:
            raise Unsupported("slice step %d" % step)
        n = max(0, (end - start + step - 1) // step)
        if n == 0:
            raise Unsupported("an empty slice")
        if start == 0 and n == size and step == 1:
            return v
        pa = self.phys_axis(v, axis)
        shape = list(v.shape)
        shape[pa] = n
        return self.emit("slice", [v], {"starts": [start], "ends": [end], "axes": [pa],
                                        "steps": [step]}, shape, v.dtype, v.nhwc, v.is_bool)


    def prefix_slice(self, v, axis, start, end, step, meta):
        """x[..., :end] along axis with end a dynamic size (position ids [1, 512] cut to the
        sequence, [:, :s]): a slice whose end is a name or a product of names (the backend names
        the probe value it is lowered with). Any other slice by a dynamic size is Unsupported:
        its length would be no name (s - 1)."""
        rank = len(v.logical_shape)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise Unsupported("slice axis %d out of range for rank %d" % (axis, rank))
        names = sym_axis(end)  # Unsupported for s + 1, 2 * s
        if (start or 0) != 0 or step != 1:
            raise Unsupported("a slice from %s to the dynamic size %s: only a prefix "
                              "[:%s] is a size a graph can name" % (start, "*".join(names),
                                                                    "*".join(names)))
        n = sym_int(meta.shape[axis])
        if n != sym_int(end):
            # The axis is shorter than the end: PyTorch clamps, and the result's size is the
            # axis's own (not the name).
            return v if n == v.logical_shape[axis] else _unsupported(
                "a slice to the dynamic size %s of a shorter axis" % "*".join(names))
        if n == v.logical_shape[axis]:
            return v
        pa = self.phys_axis(v, axis)
        shape = list(v.shape)
        shape[pa] = n
        # A prefix is a view of its input (docs/graphs.md): integer ids (a position-ids
        # buffer) may be cut so, for the gather that reads them.
        return self.emit("slice", [v], {"starts": [0], "ends": [n], "axes": [pa], "steps": [1]},
                         shape, v.dtype, v.nhwc, v.is_bool, view=True)


def _size_arg(a):
    """An argument that may be a size computed in the graph (an fx node whose value is a
    SymInt, s0 or s0 + 1): its SymInt; anything else as it is."""
    import torch.fx
    if isinstance(a, torch.fx.Node):
        m = meta_of(a)
        import torch
        if isinstance(m, torch.SymInt):
            return m
        raise Unsupported("a size argument %s that is not an integer" % a.name)
    return a


# ---- ATen op table ----------------------------------------------------------------------

CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge")


def target_name(t):
    return str(getattr(t, "__name__", t)) if not hasattr(t, "_schema") else str(t)


def _num(x):
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    if not isinstance(x, (int, float)):
        raise Unsupported("expected a number, got %r" % (x,))
    x = float(x)
    if not math.isfinite(x):
        raise Unsupported("the constant %r (graph attributes are finite numbers)" % x)
    return x


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _broadcast(a, b):
    r = max(len(a), len(b))
    a = [1] * (r - len(a)) + list(a)
    b = [1] * (r - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise Unsupported("shapes %s and %s do not broadcast" % (a, b))
        out.append(max(x, y))
    return out


def _inf_or(x):
    """A fill value: a finite number, or "-inf"/"inf" as the graph language writes them."""
    x = float(x)
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    return _num(x)  # NaN is refused


CONVERTERS = {}


def _register(names, fn):
    import torch
    aten = torch.ops.aten
    for n in names:
        packet, _, overload = n.partition(".")
        op = getattr(aten, packet, None)
        if op is None:
            continue  # an op this PyTorch does not have
        op = getattr(op, overload or "default", None)
        if op is not None:
            CONVERTERS[op] = fn


def _identity(L, node, x, *a, **k):
    return L.val(x)


def _elementwise_table():
    def bin_(op):
        def f(L, node, a, b, alpha=1, **k):
            if alpha != 1:
                if not _is_tensor(b):
                    b = _num(b) * alpha
                else:
                    y = L.val(b)
                    b = L.emit("scale", [y], {"value": _num(alpha)}, y.shape, y.dtype, y.nhwc)
            return L.binary(node, op, a, b)
        return f

    def cmp_(op):
        return lambda L, node, a, b: L.binary(node, op, a, b)

    for op in ("add", "sub", "mul", "div"):
        _register([op + ".Tensor", op + ".Scalar"], bin_(op))
    _register(["rsub.Scalar", "rsub.Tensor"],
              lambda L, node, a, b, alpha=1: L.binary(node, "sub", b, a) if alpha == 1
              else _unsupported("rsub with alpha"))
    _register(["maximum.default"], lambda L, node, a, b: L.binary(node, "max", a, b))
    _register(["minimum.default"], lambda L, node, a, b: L.binary(node, "min", a, b))
    for op in CMP_OPS:
        _register([op + ".Tensor", op + ".Scalar"], cmp_(op))

    simple = {"relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp",
              "neg": "neg", "abs": "abs", "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf",
              "log": "log", "hardswish": "hardswish", "hardsigmoid": "hardsigmoid"}
    for a, h in simple.items():
        _register([a + ".default"], lambda L, node, x, _h=h: L.unary(_h, x))
    _register(["reciprocal.default"], lambda L, node, x: L.unary("pow", x, {"exponent": -1.0}))
    _register(["gelu.default"],
              lambda L, node, x, approximate="none": L.unary("gelu", x, {"approximate": approximate}))
    _register(["hardtanh.default"],
              lambda L, node, x, min_val=-1.0, max_val=1.0:
              L.unary("clamp", x, {"min": _num(min_val), "max": _num(max_val)}))

    def clamp(L, node, x, min=None, max=None):
        attrs = {}
        if min is not None:
            attrs["min"] = _num(min)
        if max is not None:
            attrs["max"] = _num(max)
        if not attrs:
            return L.val(x)
        return L.unary("clamp", x, attrs)
    _register(["clamp.default"], clamp)
    _register(["leaky_relu.default"],
              lambda L, node, x, negative_slope=0.01:
              L.unary("leaky_relu", x, {"negative_slope": _num(negative_slope)}))

    def pow_(L, node, x, e):
        e = _num(e)
        if e == 1.0:
            return L.val(x)
        return L.unary("pow", x, {"exponent": e})
    _register(["pow.Tensor_Scalar"], pow_)

    def where(L, node, c, a, b):
        cv = L.val(c)
        av = L.val(a) if _is_tensor(a) else None
        bv = L.val(b) if _is_tensor(b) else None
        if av is None and bv is None:
            raise Unsupported("where() between two constants")
        ref = av or bv
        if av is None:
            av = L.constant(lambda: _scalar_tensor(a, ref), "where")
        if bv is None:
            bv = L.constant(lambda: _scalar_tensor(b, ref), "where")
        av, bv = L.same_dtype(av, bv)
        cv, av, bv, nhwc = L.align(cv, av, bv)
        shape = _broadcast(_broadcast(cv.shape, av.shape), bv.shape)
        return L.emit("where", [cv, av, bv], None, shape, av.dtype, nhwc)
    _register(["where.self"], where)

    def masked_fill(L, node, x, mask, value):
        v, m = L.val(x), L.val(mask)
        v, m, nhwc = L.align(v, m)
        return L.emit("masked_fill", [v, m], {"value": _inf_or(value)}, v.shape, v.dtype, nhwc)
    _register(["masked_fill.Scalar"], masked_fill)

    def logical_not(L, node, x):
        v = L.val(x)
        return L.emit("eq", [v], {"value": 0.0}, v.shape, v.dtype, v.nhwc, True)
    _register(["logical_not.default", "bitwise_not.default"],
              lambda L, node, x: logical_not(L, node, x) if L.val(x).is_bool
              else _unsupported("bitwise_not of a non-boolean tensor"))

    def logical_and(L, node, a, b):
        x, y = L.val(a), L.val(b)
        if not (x.is_bool and y.is_bool):
            raise Unsupported("logical_and of non-boolean tensors")
        return L.binary(node, "mul", a, b)
    _register(["logical_and.default", "bitwise_and.Tensor"], logical_and)

    def cast(L, node, x, dtype=None, **k):
        v = L.val(x)
        if dtype is None:
            return v
        want = torch_dtype_name(dtype)
        if want == "bool":
            return L.emit("ne", [v], {"value": 0.0}, v.shape,
                          v.dtype if v.dtype in FLOAT else (L.compute or "f32"), v.nhwc, True)
        if want is None:
            raise Unsupported("a cast to %s" % dtype)
        if want in INT:
            if v.dtype == want:
                return v
            raise Unsupported("a cast to %s" % want)
        want = L._float_dtype(want)
        if want == "f8e4m3" and not _clamped_within(x, 448.0) and not _e4m3_saturates(meta_of(node)):
            raise Unsupported("a cast to float8_e4m3fn: this PyTorch gives NaN for values from 464 "
                              "up where hidetd's cast saturates to 448 (as PyTorch's CPU conversion "
                              "does); clamped to [-448, 448] first, as quantization recipes do, the "
                              "cast is lowered")
        if v.is_bool:
            out = v if v.dtype == want else L.emit("cast", [v], {"dtype": want}, v.shape, want, v.nhwc)
            out.is_bool = False
            return Value(out.name, out.shape, out.dtype, out.nhwc, False)
        if v.dtype == want:
            return v
        return L.emit("cast", [v], {"dtype": want}, v.shape, want, v.nhwc)
    _register(["_to_copy.default"], cast)
    _register(["convert_element_type.default"], lambda L, node, x, dtype: cast(L, node, x, dtype))


_E4M3_SATURATES = {}


def _e4m3_saturates(meta):
    """Whether PyTorch's conversion to float8_e4m3fn on meta's device saturates (448) rather than
    giving NaN beyond the format's range: it differs between PyTorch builds and devices (CUDA's,
    c10's scalar conversion, gives NaN from 464 up). Asked once per device type, with a real
    tensor."""
    import torch
    dev = getattr(meta, "device", None)
    key = dev.type if dev is not None else "cpu"
    if key not in _E4M3_SATURATES:
        try:
            with _real_tensors():
                y = torch.tensor([1000.0, -1000.0], device=key).to(torch.float8_e4m3fn).float().cpu()
            _E4M3_SATURATES[key] = bool((y.abs() == 448).all())
        except Exception:  # no such device here: assume the unsafe answer
            _E4M3_SATURATES[key] = False
    return _E4M3_SATURATES[key]


def _clamped_within(x, bound):
    """Whether fx node x is a clamp (or hardtanh) into [-bound, bound] or narrower."""
    import torch
    aten = torch.ops.aten
    t = getattr(x, "target", None)
    if t not in (aten.clamp.default, aten.hardtanh.default) or len(x.args) < 3:
        return False
    lo, hi = x.args[1], x.args[2]
    return isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and -bound <= lo and hi <= bound


def _real_tensors():
    """A context in which new tensors are real even inside the compiler's FakeTensorMode."""
    import contextlib
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:  # an older PyTorch
        return contextlib.nullcontext()
    return unset_fake_temporarily()


def _is_tensor(a):
    import torch.fx
    return isinstance(a, (torch.fx.Node, Value))


def _unsupported(why):
    raise Unsupported(why)


def _scalar_tensor(x, like):
    import torch
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}.get(like.dtype, torch.float32)
    return torch.tensor([float(x)], dtype=dt)


def _shape_table():
    def view(L, node, x, shape, *a):
        # A dynamic size arrives as an fx node (s0, s0 * s1): the result's metadata has it.
        if not all(isinstance(d, int) for d in shape):
            shape = _shape(meta_of(node))
        return L.reshape(x, shape)
    _register(["view.default", "_unsafe_view.default", "reshape.default"], view)

    _register(["squeeze.dim", "squeeze.dims", "squeeze.default", "unsqueeze.default"],
              lambda L, node, x, *a: L.reshape(x, _shape(meta_of(node))))

    def permute(L, node, x, perm):
        v = L.val(x)
        rank = len(v.shape)
        perm = [p + rank if p < 0 else p for p in perm]
        phys = [NHWC_INV[p] for p in perm] if v.nhwc else perm
        if phys == list(range(rank)):
            return Value(v.name, v.shape, v.dtype, False, v.is_bool)
        shape = [v.shape[p] for p in phys]
        return L.emit("transpose", [v], {"perm": phys}, shape, v.dtype, False, v.is_bool)
    _register(["permute.default"], permute)

    def transpose(L, node, x, d0=0, d1=1):
        rank = len(L.val(x).shape)
        perm = list(range(rank))
        d0, d1 = d0 % rank, d1 % rank
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return permute(L, node, x, perm)
    _register(["t.default"], lambda L, node, x: transpose(L, node, x, 0, 1) if len(L.val(x).shape) == 2
              else L.val(x))
    _register(["transpose.int"], transpose)

    for n in ("clone.default", "alias.default", "lift_fresh_copy.default", "detach.default",
              "contiguous.default", "dropout.default"):
        _register([n], _identity)

    def expand(L, node, x, shape, *a, **k):
        v = L.to_plain(L.val(x))
        out = _shape(meta_of(node))
        if out == v.shape:
            return v
        return L.emit("expand", [v], {"shape": out}, out, v.dtype, False, v.is_bool)
    _register(["expand.default"], expand)

    def slice_(L, node, x, dim=0, start=None, end=None, step=1):
        v = L.val(x)
        start, end, step = (_size_arg(a) for a in (start, end, step))
        if is_symbolic(end) and not is_symbolic(start) and not is_symbolic(step):
            return L.prefix_slice(v, dim, start, end, step, meta_of(node))
        if any(is_symbolic(a) for a in (start, end, step)):
            raise Unsupported("a slice whose start or step is a dynamic size")
        return L.slice(v, dim, start, end, step)
    _register(["slice.Tensor"], slice_)

    def select(L, node, x, dim, index):
        v = L.to_plain(L.val(x))
        rank = len(v.shape)
        dim = dim % rank
        index = index % v.shape[dim]
        s = L.slice(v, dim, index, index + 1, 1)
        return _reshape_value(L, s, _shape(meta_of(node)))
    _register(["select.int"], select)

    def split(L, node, x, sizes, dim=0):
        v = L.val(x)
        rank = len(v.shape)
        dim = dim % rank
        total = v.logical_shape[dim]
        if isinstance(sizes, int):
            sizes = [min(sizes, total - i) for i in range(0, total, sizes)]
        outs, at = [], 0
        for s in sizes:
            outs.append(L.slice(v, dim, at, at + s, 1))
            at += s
        return tuple(outs)
    _register(["split_with_sizes.default", "split.Tensor"], split)

    def cat(L, node, tensors, dim=0):
        metas = [meta_of(t) for t in tensors]
        keep = [t for t, m in zip(tensors, metas) if m is None or not is_empty(m)]
        vs = [L.val(t) for t in keep]
        if not vs:
            raise Unsupported("cat of empty tensors only")
        if len(vs) == 1:
            return vs[0]
        if len(vs) > 8:
            raise Unsupported("cat of %d tensors (at most 8)" % len(vs))
        vs = L.same_dtype(*vs)
        nhwc = all(v.nhwc for v in vs) and len(vs[0].shape) == 4
        if not nhwc:
            vs = [L.to_plain(v) for v in vs]
        rank = len(vs[0].shape)
        dim = dim % rank
        pa = NHWC_INV[dim] if nhwc else dim
        shape = list(vs[0].shape)
        shape[pa] = sum(v.shape[pa] for v in vs)
        return L.emit("concat", list(vs), {"axis": pa}, shape, vs[0].dtype, nhwc)
    _register(["cat.default"], cat)

    def as_strided(L, node, x, size, stride, offset=0):
        # Only the views that read the storage in order: the graph's value then is that storage
        # (its physical order must be the one the metadata's strides describe).
        v = L.val(x)
        order = list(NHWC) if v.nhwc else list(range(len(v.shape)))
        size, stride = [sym_int(d) for d in size], [sym_int(d) for d in stride]
        if offset or _numel(size) != _numel(v.shape) or not _dense_in(meta_of(node.args[0]), order):
            raise Unsupported("as_strided other than a dense view of its input")
        if _dense(size, stride, list(range(len(size)))):
            return _reshape_value(L, Value(v.name, v.shape, v.dtype, False, v.is_bool), size)
        if len(size) == 4 and _dense(size, stride, list(NHWC)):
            phys = [size[i] for i in NHWC]
            out = _reshape_value(L, Value(v.name, v.shape, v.dtype, False, v.is_bool), phys)
            return Value(out.name, out.shape, out.dtype, True, out.is_bool)
        raise Unsupported("as_strided with strides %s" % stride)
    _register(["as_strided.default"], as_strided)

    def pad(L, node, x, pads, value=0.0):
        v = L.to_plain(L.val(x))
        return L.emit("pad", [v], {"pads": [int(p) for p in pads], "value": _num(value)},
                      _shape(meta_of(node)), v.dtype)
    _register(["constant_pad_nd.default"], pad)


def _dense(size, stride, order):
    """Whether (size, stride) lay the tensor out densely with axes in `order` (outermost
    first); axes of size 1 may have any stride."""
    expect = 1
    for axis in reversed(order):
        if size[axis] != 1 and stride[axis] != expect:
            return False
        expect *= size[axis]
    return True


def _dense_in(meta, order):
    return meta is not None and _dense(_shape(meta), [sym_int(d) for d in meta.stride()], order)


def _reshape_value(L, v, shape):
    if shape == v.shape:
        return v
    if not shape:
        raise Unsupported("a 0-dimensional result")
    return L.emit("reshape", [v], {"shape": shape}, shape, v.dtype, False, v.is_bool)


def _nn_table():
    def mm(L, node, a, b):
        x, y = L.same_dtype(L.to_plain(L.val(a)), L.to_plain(L.val(b)))
        shape = _shape(meta_of(node))
        return L.emit("matmul", [x, y], None, shape, x.dtype)
    _register(["mm.default", "bmm.default"], mm)

    def scaled_mm(L, node, a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
                  use_fast_accum=False):
        """torch._scaled_mm: the graph's FP8 matmul (docs/api.md). out = (a @ b) * scale_a * scale_b
        (+ bias), fp32 accumulation. Scales per tensor (one f32 value) or row-wise (scale_a [M, 1],
        scale_b [1, N]); b is column-major ([K, N] with strides (1, K)), in a graph the transpose of
        a row-major [N, K], which the daemon folds into trans_b."""
        if scale_result is not None:
            raise Unsupported("_scaled_mm with scale_result (an FP8 result)")
        x, w = L.val(a), L.val(b)
        if x.dtype not in FP8 or w.dtype not in FP8 or len(x.shape) != 2 or len(w.shape) != 2:
            raise Unsupported("_scaled_mm of %s x %s operands (2-D FP8 ones are lowered)" % (x.dtype, w.dtype))
        if x.dtype == w.dtype == "f8e5m2":
            raise Unsupported("_scaled_mm of e5m2 x e5m2 (hidetd serves e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3)")
        if w.name in L.declared.values():
            # A graph input or weight is bound row-major: the column-major B _scaled_mm reads would
            # be an [K, N] row-major copy, which 8-bit wgmma cannot read (it needs B K-major).
            raise Unsupported("_scaled_mm's B is a graph input or weight itself (bound row-major); "
                              "B as the transpose of a row-major [N, K] tensor is lowered")
        out = torch_dtype_name(out_dtype) if out_dtype is not None else x.dtype
        if out not in FLOAT:
            raise Unsupported("_scaled_mm to %s (hidetd's FP8 matmul writes f16, bf16 or f32)" % out)
        m, n = x.shape[0], w.shape[1]

        def mode(sv, which):
            v = L.val(sv)
            if v.dtype != "f32":
                raise Unsupported("_scaled_mm's %s is %s (f32 scales are lowered)" % (which, v.dtype))
            shape = _shape(meta_of(sv)) if meta_of(sv) is not None else v.shape
            if _numel(shape) == 1:
                return (v if v.shape in ([], [1]) else L.reshape(v, [1])), "tensor"
            if which == "scale_a" and list(shape) == [m, 1]:
                return v, "row"
            if which == "scale_b" and list(shape) == [1, n]:
                return v, "col"
            raise Unsupported("_scaled_mm's %s of shape %s (per tensor, [M, 1] and [1, N] are lowered)"
                              % (which, list(shape)))
        sa, ma = mode(scale_a, "scale_a")
        sb, mb = mode(scale_b, "scale_b")
        attrs = {"scale_a": ma, "scale_b": mb, "out_dtype": out, "fast_accum": bool(use_fast_accum)}
        y = L.emit("matmul", [x, w, sa, sb], attrs, [m, n], out)
        if bias is not None:
            bv = L.val(bias)
            if bv.dtype != out:
                bv = L.emit("cast", [bv], {"dtype": out}, bv.shape, out)
            y = L.emit("add", [y, bv], None, y.shape, out)
        return y
    _register(["_scaled_mm.default"], scaled_mm)

    def addmm(L, node, bias, a, b, beta=1, alpha=1):
        if beta != 1 or alpha != 1:
            raise Unsupported("addmm with beta/alpha")
        y = mm(L, node, a, b)
        bv = L.val(bias)
        y, bv = L.same_dtype(y, bv)
        return L.emit("add", [y, bv], None, y.shape, y.dtype)
    _register(["addmm.default"], addmm)

    def convolution(L, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
        if transposed:
            raise Unsupported("transposed convolution")
        xv, wv = L.val(x), L.val(w)
        if len(xv.shape) != 4:
            raise Unsupported("%d-D convolution" % (len(xv.shape) - 2))
        xv = L.to_nhwc(xv)
        if wv.dtype != xv.dtype:
            wv = L.emit("cast", [wv], {"dtype": xv.dtype}, wv.shape, xv.dtype, wv.nhwc)
        # [K, C, R, S] to hidetd's [K, R, S, C]: free for a channels-last weight.
        wt = L.to_nhwc(wv)
        wt = Value(wt.name, wt.shape, wt.dtype, False)
        n, kk, p, q = _shape(meta_of(node))
        y = L.emit("conv2d", [xv, wt], {"stride": list(stride), "padding": list(padding),
                                       "dilation": list(dilation), "groups": int(groups)},
                   [n, p, q, kk], xv.dtype, True)
        if b is not None:
            bv = L.val(b)
            y, bv = L.same_dtype(y, bv)
            y = L.emit("add", [y, bv], None, y.shape, y.dtype, True)
        return y
    _register(["convolution.default"], convolution)

    def batchnorm(L, node, x, w, b, mean, var, momentum, eps):
        if w is None or b is None:
            raise Unsupported("batch norm without affine parameters")
        xv = L.val(x)
        stats = [L.val(t) for t in (w, b, mean, var)]
        stats = [s if s.dtype == "f32" else L.emit("cast", [s], {"dtype": "f32"}, s.shape, "f32")
                 for s in stats]
        axis = 3 if xv.nhwc else 1
        y = L.emit("batchnorm", [xv] + stats, {"eps": float(eps), "axis": axis},
                   xv.shape, xv.dtype, xv.nhwc)
        return (y, None, None)
    _register(["_native_batch_norm_legit_no_training.default"], batchnorm)

    def layernorm(L, node, x, shape, w=None, b=None, eps=1e-5):
        v = L.to_plain(L.val(x))
        if len(shape) != 1:
            raise Unsupported("layer norm over %d axes" % len(shape))
        ins = [v]
        if w is not None or b is not None:
            if w is None or b is None:
                raise Unsupported("layer norm with only one of weight and bias")
            ins += list(L.same_dtype(v, L.val(w), L.val(b))[1:])
        return (L.emit("layernorm", ins, {"eps": float(eps)}, v.shape, v.dtype), None, None)
    _register(["native_layer_norm.default"], layernorm)

    def softmax(L, node, x, dim, half_to_float=False, op="softmax"):
        if half_to_float:
            raise Unsupported("softmax with half_to_float")
        v = L.val(x)
        if v.dtype in INT:
            raise Unsupported("%s of an integer tensor" % op)
        pa = L.phys_axis(v, dim)
        rank = len(v.shape)
        attrs = {"axis": -1} if pa == rank - 1 else {"axis": pa}
        return L.emit(op, [v], attrs, v.shape, v.dtype, v.nhwc)
    _register(["_softmax.default"], softmax)

    def safe_softmax(L, node, x, dim, dtype=None):
        # softmax, except that a row of -inf only gives 0 (PyTorch's masked attention). Such a
        # row is one whose max is -inf: below f32's lowest finite value.
        if dtype is not None and torch_dtype_name(dtype) != L.val(x).dtype:
            raise Unsupported("_safe_softmax with a dtype change")
        v = L.val(x)
        y = softmax(L, node, x, dim)
        pa = L.phys_axis(v, dim)
        shape = [1 if i == pa else d for i, d in enumerate(v.shape)]
        mx = L.emit("reduce", [v], {"kind": "max", "axis": pa, "keepdim": True}, shape, v.dtype, v.nhwc)
        dead = L.emit("lt", [mx], {"value": -3.4028234663852886e38}, shape, v.dtype, v.nhwc, True)
        return L.emit("masked_fill", [y, dead], {"value": 0.0}, y.shape, y.dtype, y.nhwc)
    _register(["_safe_softmax.default"], safe_softmax)
    _register(["_log_softmax.default"],
              lambda L, node, x, dim, h=False: softmax(L, node, x, dim, h, "log_softmax"))

    def reduce_(kind):
        def f(L, node, x, dims=None, keepdim=False, dtype=None, **k):
            v = L.val(x)
            if dtype is not None or v.dtype in INT:
                raise Unsupported("a %s with a dtype change" % kind)
            rank = len(v.shape)
            if dims is None or len(dims) == 0:
                dims = list(range(rank))
            dims = sorted({d % rank for d in dims})
            phys = sorted(L.phys_axis(v, d) for d in dims)
            shape = [1 if i in phys else s for i, s in enumerate(v.shape)]
            nhwc = v.nhwc and keepdim
            attrs = {"kind": kind, "keepdim": bool(keepdim)}
            if len(phys) == 1:
                attrs["axis"] = phys[0]
            else:
                attrs["axes"] = phys
            if not keepdim:
                shape = [s for i, s in enumerate(v.shape) if i not in phys] or [1]
            y = L.emit("reduce", [v], attrs, shape, v.dtype, nhwc)
            if v.nhwc and not keepdim:
                # What is left keeps NHWC's order of the surviving axes; PyTorch's is sorted.
                left = [NHWC[j] for j in range(4) if j not in phys]
                if left != sorted(left):
                    order = sorted(range(len(left)), key=lambda i: left[i])
                    y = L.emit("transpose", [y], {"perm": order}, [y.shape[i] for i in order], y.dtype)
            return y
        return f
    _register(["mean.dim"], reduce_("mean"))
    _register(["sum.dim_IntList"], reduce_("sum"))
    _register(["amax.default"], reduce_("max"))

    def pool(L, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False,
             count_include_pad=True, divisor_override=None, kind="max"):
        if divisor_override is not None:
            raise Unsupported("avg_pool2d with divisor_override")
        v = L.val(x)
        if len(v.shape) != 4:
            raise Unsupported("pooling of a %d-D tensor" % len(v.shape))
        attrs = {"kind": kind, "kernel_size": list(kernel_size),
                 "stride": list(stride) if stride else list(kernel_size),
                 "padding": _pair(padding), "ceil_mode": bool(ceil_mode)}
        if kind == "max":
            attrs["dilation"] = _pair(dilation)
        else:
            attrs["count_include_pad"] = bool(count_include_pad)
        return _pool_emit(L, node, v, attrs)
    _register(["max_pool2d_with_indices.default"],
              lambda L, node, x, k, s=(), p=0, d=1, c=False: (pool(L, node, x, k, s, p, d, c), None))
    _register(["avg_pool2d.default"],
              lambda L, node, x, k, s=(), p=0, c=False, cip=True, do=None:
              pool(L, node, x, k, s, p, 1, c, cip, do, kind="avg"))
    _register(["_adaptive_avg_pool2d.default"],
              lambda L, node, x, size: _pool_emit(L, node, L.val(x),
                                                  {"kind": "adaptive_avg", "output_size": list(size)}))

    def embedding(L, node, weight, ids, padding_idx=-1, scale_grad=False, sparse=False):
        w, i = L.val(weight), L.val(ids)
        if i.dtype not in INT:
            raise Unsupported("embedding ids of dtype %s" % i.dtype)
        w = L.to_plain(w)
        shape = _shape(meta_of(node))
        return L.emit("embedding", [w, i], None, shape, w.dtype)
    _register(["embedding.default"], embedding)

    def index_select(L, node, x, dim, index):
        v, i = L.to_plain(L.val(x)), L.val(index)
        if i.dtype not in INT:
            raise Unsupported("index_select with indices of dtype %s" % i.dtype)
        return L.emit("index_select", [v, i], {"axis": dim % len(v.shape)},
                      _shape(meta_of(node)), v.dtype)
    _register(["index_select.default"], index_select)

    # Every form attention takes: the op itself (kept whole, as the decompositions would make
    # it the math form with its masked-row handling), its math form, and each device's kernel.
    for name in ("scaled_dot_product_attention.default",
                 "_scaled_dot_product_attention_math.default",
                 "_scaled_dot_product_flash_attention_for_cpu.default",
                 "_scaled_dot_product_flash_attention.default",
                 "_scaled_dot_product_efficient_attention.default",
                 "_scaled_dot_product_cudnn_attention.default"):
        _register([name], _sdpa_converter(name.split(".")[0]))


def _pair(x):
    if isinstance(x, (list, tuple)):
        return [int(v) for v in x] if len(x) == 2 else [int(x[0])] * 2
    return [int(x)] * 2


def _pool_emit(L, node, v, attrs):
    nhwc = v.nhwc
    if not nhwc:
        attrs["layout"] = "nchw"
    n, c, p, q = _shape(meta_of(node)[0] if isinstance(meta_of(node), (tuple, list)) else meta_of(node))
    shape = [n, p, q, c] if nhwc else [n, c, p, q]
    return L.emit("pool2d", [v], attrs, shape, v.dtype, nhwc)


# Head dims the attention op has templates for (op/op.h); others are spelled out.
ATTENTION_HEAD_DIMS = (64, 80, 96, 128, 256)


# The arguments after q, k, v of each form of attention, by position.
SDPA_ARGS = {
    "scaled_dot_product_attention": ["attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"],
    "_scaled_dot_product_attention_math": ["attn_mask", "dropout_p", "is_causal", "dropout_mask", "scale",
                                           "enable_gqa"],
    "_scaled_dot_product_flash_attention_for_cpu": ["dropout_p", "is_causal"],
    "_scaled_dot_product_flash_attention": ["dropout_p", "is_causal", "return_debug_mask"],
    "_scaled_dot_product_efficient_attention": ["attn_bias", "compute_log_sumexp", "dropout_p", "is_causal"],
    "_scaled_dot_product_cudnn_attention": ["attn_bias", "compute_log_sumexp", "dropout_p", "is_causal",
                                            "return_debug_mask"],
}


def _sdpa_form(node):
    """The SDPA_ARGS key of an attention node, or None."""
    name = target_name(node.target).split(".")
    return name[-2] if len(name) >= 2 and name[-2] in SDPA_ARGS else None


def causal_masks(gm):
    """Attention whose mask is causal in fact, rewritten to say so: a mask that reads no input of
    the graph (built from aranges, ones and comparisons, as transformers builds GPT-2's) is
    computed here, and when what it lets through is exactly PyTorch's is_causal (tril of [S, Sk],
    in every batch and head) or everything, the node loses the mask and gets is_causal. The op
    then skips the masked half instead of reading a [B, 1, S, Sk] mask for every score. Returns
    how many nodes it rewrote; the mask's computation goes with dead-code elimination."""
    import torch
    import torch.fx
    n_rewritten = 0
    for node in list(gm.graph.nodes):
        form = _sdpa_form(node) if node.op == "call_function" else None
        if form is None:
            continue
        names = SDPA_ARGS[form]
        n_pos = len(node.args) - 3
        opts = dict(zip(names, node.args[3:]))
        opts.update(node.kwargs)
        key = "attn_bias" if "attn_bias" in names else "attn_mask"
        mask = opts.get(key)
        if not isinstance(mask, torch.fx.Node) or opts.get("is_causal") or opts.get("dropout_p", 0.0):
            continue
        qm, km = meta_of(node.args[0]), meta_of(node.args[1])
        scores = (qm.shape[-2], km.shape[-2]) if qm is not None and km is not None else None
        if scores is not None and not all(type(d) is int for d in scores):
            scores = None  # named sizes: the values below are computed at sizes of their own
        with _real_tensors():
            causal = _causal_or_none(_constant_value(gm, mask), scores)
            if causal is None and _size_placeholders(gm):
                # Built from the sizes alone (GPT-2's mask from aranges of s): the same pattern
                # at two sets of sizes is taken as the pattern of every size.
                seen = {_causal_or_none(_constant_value(gm, mask, sizes=v)) for v in (3, 5)}
                causal = seen.pop() if len(seen) == 1 else None
        if causal is None:
            continue
        opts[key] = None
        opts["is_causal"] = causal
        positional = names[:n_pos]
        node.args = tuple(node.args[:3]) + tuple(opts[k] for k in positional)
        node.kwargs = {k: v for k, v in opts.items() if k not in positional and (v is not None or k in node.kwargs)}
        n_rewritten += 1
    if n_rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return n_rewritten


# SDPA forms that PyTorch runs with a mask and is_causal together (the mask ANDed with the causal
# one): a node rewritten by causal_padding_masks stays runnable by PyTorch. F.scaled_dot_product_
# attention refuses the pair.
_CAUSAL_AND_MASK_FORMS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                          "_scaled_dot_product_cudnn_attention")


def causal_padding_masks(gm):
    """Attention whose mask ANDs the causal pattern with a padding mask, split into the two: the
    causal part goes to is_causal and the mask keeps the padding part. transformers builds a
    decoder's mask (GPT-2 given an attention_mask) as kv_idx <= q_idx over aranges of s, ANDed
    with a 0-d True and with the [b, 1, 1, s] padding part, [b, 1, s, s] in all; with dynamic
    sizes the additive where over it named s twice and the daemon refused the graph, and with
    fixed ones the op read a mask value per score. After the split, padding_masks takes the
    padding part to [b, 1, 1, s]. Taken where everything that reads the AND is, through expands,
    casts, wheres (as the condition), pads and slices - a hidden score stays -inf either way -
    the mask of attention nodes (the layers of a model share the AND, each its own where) of a
    form PyTorch runs with both (_CAUSAL_AND_MASK_FORMS), each with q and k of the same length
    (PyTorch's is_causal is tril of [S, Sk]). Returns how many ANDs it split."""
    import torch
    import torch.fx
    aten = torch.ops.aten
    ands = (aten.bitwise_and.Tensor, aten.logical_and.default)
    passing = (aten.expand.default, aten._to_copy.default, aten.clone.default, aten.slice.Tensor,
               aten.constant_pad_nd.default, aten.where.self)

    def mask_of(node):
        """(options, mask key) of an attention node of a form that takes mask and is_causal
        together, q and k of the same length, no dropout, not causal yet; else None."""
        form = _sdpa_form(node) if node.op == "call_function" else None
        if form not in _CAUSAL_AND_MASK_FORMS:
            return None
        names = SDPA_ARGS[form]
        opts = dict(zip(names, node.args[3:]))
        opts.update(node.kwargs)
        key = "attn_bias" if "attn_bias" in names else "attn_mask"
        if opts.get("is_causal") or opts.get("dropout_p", 0.0):
            return None
        qm, km = meta_of(node.args[0]), meta_of(node.args[1])
        if qm is None or km is None or not _same_size(qm.shape[-2], km.shape[-2]):
            return None
        return opts, key

    def set_causal(node, opts):
        names = SDPA_ARGS[_sdpa_form(node)]
        n_pos = len(node.args) - 3
        opts = dict(opts, is_causal=True)
        positional = names[:n_pos]
        node.args = tuple(node.args[:3]) + tuple(opts[k] for k in positional)
        node.kwargs = {k: v for k, v in opts.items() if k not in positional and (v is not None or k in node.kwargs)}

    def keeps_hidden(u):
        """Whether passing step u maps a hidden (False) score to a hidden one: a where whose
        value for False is -inf or a dtype's lowest (transformers' masks), a cast to bool."""
        if u.target is aten.where.self:
            if len(u.args) != 3:
                return False
            with _real_tensors():
                low = _constant_value(gm, u.args[2]) if isinstance(u.args[2], torch.fx.Node) else None
                return low is not None and low.dim() == 0 and float(low) <= -6.0e4
        if u.target is aten._to_copy.default:
            return u.kwargs.get("dtype") in (None, torch.bool)
        return True

    def attention_readers(n, out, depth=0):
        """Whether everything that reads n is, through passing steps (n their data or
        condition) that keep a hidden score hidden, the mask of attention nodes mask_of takes;
        those nodes added to out."""
        if depth > 16 or not n.users:
            return False
        for u in n.users:
            got = mask_of(u)
            if got is not None and got[0].get(got[1]) is n:
                out[u] = got[0]
            elif u.target not in passing or not u.args or u.args[0] is not n or \
                    any(a is n for a in u.args[1:]) or not keeps_hidden(u) or \
                    not attention_readers(u, out, depth + 1):
                return False
        return True

    n_rewritten = 0
    done = set()
    for node in list(gm.graph.nodes):
        got = mask_of(node)
        if got is None or not isinstance(got[0].get(got[1]), torch.fx.Node):
            continue
        # Down from the mask through passing steps to an AND of the causal pattern and the rest.
        found, n = None, got[0].get(got[1])
        for _ in range(16):
            if not isinstance(n, torch.fx.Node) or n.op != "call_function":
                break
            if n.target in ands and len(n.args) == 2 and not n.kwargs:
                a, b = n.args
                found = (n, b) if _is_causal_part(a) else (n, a) if _is_causal_part(b) else None
                break
            if n.target not in passing or not n.args or not isinstance(n.args[0], torch.fx.Node):
                break
            n = n.args[0]
        if found is None or found[0] in done:
            continue
        and_node, rest = found
        done.add(and_node)
        readers = {}
        if not attention_readers(and_node, readers):
            continue
        rm, am = meta_of(rest), meta_of(and_node)
        if rm is None or am is None or rm.dtype != torch.bool or rm.dim() > am.dim():
            continue
        # rest, expanded to the AND's shape, for its readers.
        e = _expanded_like(gm, rest, and_node)
        if e is None:
            continue
        and_node.replace_all_uses_with(e)
        for u, opts in readers.items():
            set_causal(u, opts)
        n_rewritten += 1
    if n_rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return n_rewritten


def _expanded_like(gm, x, like):
    """expand(x) to like's shape, inserted before like, its dynamic sizes taken from the graph
    (_size_args); None where one has no node."""
    import torch
    shape = _size_args(gm, meta_of(like).shape, like)
    if shape is None:
        return None
    with gm.graph.inserting_before(like):
        e = gm.graph.call_function(torch.ops.aten.expand.default, (x, shape))
    e.meta["val"] = meta_of(like)
    return e


def _size_args(gm, shape, before):
    """shape as an expand's size arguments: ints, and for a dynamic size a graph node before
    `before` that holds it (a size placeholder or a sym_size; else a sym_size of an input that
    has it, made after the inputs); None where there is none."""
    import torch
    aten = torch.ops.aten
    holders = []
    for p in gm.graph.nodes:
        if p is before:
            break
        if (p.op == "placeholder" or p.target is aten.sym_size.int) and isinstance(meta_of(p), torch.SymInt):
            holders.append(p)
    out = []
    for d in shape:
        if type(d) is int:
            out.append(d)
            continue
        holder = next((p for p in holders if _same_size(meta_of(p), d)), None) or _new_size_holder(gm, d)
        if holder is None:
            return None
        out.append(holder)
    return out


def _new_size_holder(gm, size):
    """sym_size of an input tensor along an axis of that size, inserted after the inputs (a trace
    reads a size where it first needs it, which may be after the node that needs it now); None
    where no input has it."""
    import torch
    inputs = [p for p in gm.graph.nodes if p.op == "placeholder"]
    for p in inputs:
        m = meta_of(p)
        for axis, d in enumerate(getattr(m, "shape", ())):
            if _same_size(d, size):
                with gm.graph.inserting_after(inputs[-1]):
                    n = gm.graph.call_function(torch.ops.aten.sym_size.int, (p, axis))
                n.meta["val"] = d
                return n
    return None


def _is_causal_part(node, depth=0):
    """Whether bool node is PyTorch's causal pattern at any sizes, by its form: kv_idx <= q_idx
    (or q_idx >= kv_idx) with kv_idx an arange(0, n) along the last axis and q_idx one of the
    same n along the one before, ANDed with parts true everywhere (_all_true), through ops that
    leave its last two axes as they are."""
    import torch
    aten = torch.ops.aten
    if depth > 24 or not hasattr(node, "op") or node.op != "call_function":
        return False
    t, args = node.target, node.args
    if t in (aten.bitwise_and.Tensor, aten.logical_and.default) and len(args) == 2:
        return (_is_causal_part(args[0], depth + 1) and _all_true(args[1])) or \
               (_is_causal_part(args[1], depth + 1) and _all_true(args[0]))
    if t in (aten.le.Tensor, aten.ge.Tensor) and len(args) == 2:
        kv, q = (args[0], args[1]) if t is aten.le.Tensor else (args[1], args[0])
        ka, qa = _arange_along(kv), _arange_along(q)
        return ka is not None and qa is not None and ka[0] == -1 and qa[0] == -2 and _same_end(ka[1], qa[1])
    if t in (aten.unsqueeze.default, aten.expand.default, aten.clone.default, aten.alias.default,
             aten.view.default, aten.reshape.default):
        # Only where the last two axes, the pattern's, stay as they were.
        mi, mo = meta_of(args[0]), meta_of(node)
        if mi is None or mo is None or mi.dim() < 2 or mo.dim() < 2 or \
                not all(_same_size(a, b) for a, b in zip(mi.shape[-2:], mo.shape[-2:])):
            return False
        return _is_causal_part(args[0], depth + 1)
    return False


def _arange_along(node):
    """(axis, end) of an integer node that is arange(0, end) - step 1, nothing added, slices of
    the whole axis - laid along one axis, counted from the last (-1, -2, ...), every other axis
    1; None otherwise."""
    m = meta_of(node)
    if m is None or not hasattr(m, "shape"):
        return None
    long_axes = [i for i, d in enumerate(m.shape) if not (type(d) is int and d == 1)]
    if len(long_axes) != 1:
        return None
    src = _arange_source(node, whole_slices=True)
    if src is None:
        return None
    start, end, step, added = src
    return (long_axes[0] - m.dim(), end) if start == 0 and step == 1 and added == 0 else None


def _same_end(a, b):
    """Whether two arange ends are the same: equal ints, the same graph node, or nodes holding the
    same size."""
    if a is b:
        return True
    if type(a) is int and type(b) is int:
        return a == b
    ma, mb = (meta_of(a) if hasattr(a, "op") else a), (meta_of(b) if hasattr(b, "op") else b)
    try:
        return _same_size(ma, mb)
    except AttributeError:
        return False


def math_attention(gm):
    """Attention that PyTorch spelled out before the backend saw it, put back as one
    scaled_dot_product_attention call. A masked SDPA call on a GPU can take PyTorch's math
    backend, whose trace is the decomposition
        q' = [f32 cast] q * c1;  k' = transpose([f32 cast] k, -2, -1) * c2  (either order)
        scores = view(bmm(view(expand(q')), view(expand(k'))), [B, H, S, Sk]) [+ mask]
        p = _safe_softmax(scores, -1)
        out = view(bmm(view(expand(p)), view(expand([f32 cast] v))), [B, H, S, Dv]) [cast back]
    with clones between the expands and the views. With dynamic sizes none of it can be a graph:
    its bmm runs over [H*b, S, S] (a number times a name) and the expands copy named tensors. As
    one SDPA call (scale c1*c2, the mask as it was, the upcast dropped: the attention op computes
    in fp32 from f16/bf16 operands) it lowers to the attention node, and the causal-mask check
    that follows sees it. _safe_softmax gives 0 for a row with nothing left, as the op does;
    softmax is taken only unmasked, where no row can be empty. Returns how many it rewrote."""
    import torch
    aten = torch.ops.aten
    views = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
    n_rewritten = 0

    def dims(n):
        m = meta_of(n)
        return [str(d) for d in m.shape] if m is not None and hasattr(m, "shape") else None

    def single_use(n):
        return len(n.users) == 1

    def through_batch_views(n, shape4):
        """n = view(clone?(expand(x, shape4))) of a [B*H, ...] operand: x (4-D, shape4 as it
        is - the expand adds nothing), else None."""
        if getattr(n, "target", None) not in views or not single_use(n):
            return None
        x = n.args[0]
        if getattr(x, "target", None) is aten.clone.default and single_use(x):
            x = x.args[0]
        if getattr(x, "target", None) is aten.expand.default and single_use(x):
            x = x.args[0]
        return x if dims(x) == shape4 else None

    def scaled(n):
        """(x, c) for n = x * c with a number c (mul.Scalar or mul.Tensor by a literal), else (n, 1)."""
        if getattr(n, "target", None) in (aten.mul.Scalar, aten.mul.Tensor) and single_use(n) and \
                isinstance(n.args[1], (int, float)) and hasattr(n.args[0], "op"):
            return n.args[0], float(n.args[1])
        return n, 1.0

    def upcast(n):
        """(x, True) for n = x cast to f32 from f16/bf16, else (n, False)."""
        if getattr(n, "target", None) in (aten._to_copy.default, aten.to.dtype) and single_use(n):
            x = n.args[0]
            mo, mx = meta_of(n), meta_of(x)
            extra = {k: v for k, v in n.kwargs.items() if k not in ("dtype", "layout", "device")}
            if not extra and mo is not None and mx is not None and mo.dtype == torch.float32 and \
                    mx.dtype in (torch.float16, torch.bfloat16):
                return x, True
        return n, False

    def is_last_pair_transpose(n, rank=4):
        if getattr(n, "target", None) is not aten.transpose.int or not single_use(n):
            return False
        a, b = (d % rank for d in n.args[1:3])
        return {a, b} == {rank - 2, rank - 1}

    for sm in list(gm.graph.nodes):
        if sm.op != "call_function" or sm.target not in (aten._safe_softmax.default, aten._softmax.default):
            continue
        safe = sm.target is aten._safe_softmax.default
        if len(sm.args) < 2 or sm.args[1] not in (-1, 3) or (not safe and sm.args[2]) or \
                (safe and (len(sm.args) > 2 or sm.kwargs)) or not single_use(sm):
            continue
        shape4 = dims(sm)
        if shape4 is None or len(shape4) != 4:
            continue
        # The scores: view(bmm(q3, kt3)) [+ mask]
        x, mask = sm.args[0], None
        if getattr(x, "target", None) is aten.add.Tensor and single_use(x) and len(x.args) == 2:
            a, b = x.args
            if hasattr(a, "op") and dims(a) == shape4 and hasattr(b, "op") and \
                    getattr(a, "target", None) in views:
                x, mask = a, b
            elif hasattr(b, "op") and dims(b) == shape4 and hasattr(a, "op") and \
                    getattr(b, "target", None) in views:
                x, mask = b, a
            else:
                continue
        if not safe and mask is not None:
            continue
        if getattr(x, "target", None) not in views or not single_use(x):
            continue
        bmm1 = x.args[0]
        if getattr(bmm1, "target", None) is not aten.bmm.default or not single_use(bmm1):
            continue
        bsz, heads, s, sk = shape4
        q4, k4t = bmm1.args
        # q side: [B, H, S, D] before the batch views
        qd = dims(q4)
        if qd is None or len(qd) != 3:
            continue
        d = qd[2]
        q4 = through_batch_views(q4, [bsz, heads, s, d])
        k4t = through_batch_views(k4t, [bsz, heads, d, sk])
        if q4 is None or k4t is None:
            continue
        q4, cq = scaled(q4)
        q, up_q = upcast(q4)
        k4t, ck = scaled(k4t)
        if not is_last_pair_transpose(k4t):
            continue
        k4, ck2 = scaled(k4t.args[0])
        k, up_k = upcast(k4)
        # The output: view(bmm(view(expand(p)), v3), [B, H, S, Dv]) [cast back]
        pv = next(iter(sm.users))
        p3 = pv
        if getattr(pv, "target", None) is aten.expand.default and single_use(pv):
            p3 = next(iter(pv.users))
        if getattr(p3, "target", None) not in views or not single_use(p3):
            continue
        bmm2 = next(iter(p3.users))
        if getattr(bmm2, "target", None) is not aten.bmm.default or bmm2.args[0] is not p3 or \
                not single_use(bmm2):
            continue
        v3 = bmm2.args[1]
        vd = dims(v3)
        if vd is None or len(vd) != 3:
            continue
        dv = vd[2]
        v4 = through_batch_views(v3, [bsz, heads, sk, dv])
        if v4 is None:
            continue
        v, up_v = upcast(v4)
        out = next(iter(bmm2.users))
        if getattr(out, "target", None) not in views or dims(out) != [bsz, heads, s, dv]:
            continue
        if not (up_q == up_k == up_v):
            continue
        dt = meta_of(q).dtype
        if meta_of(k).dtype != dt or meta_of(v).dtype != dt:
            continue
        # A mask expanded to [b, 1, s, s] (transformers' padding masks) is taken as it was
        # before: the op broadcasts it, and an expand would copy a named tensor.
        while getattr(mask, "target", None) is aten.expand.default and hasattr(mask.args[0], "op"):
            mask = mask.args[0]
        if mask is not None and (dims(mask) is None or len(dims(mask)) > 4):
            continue
        scale = cq * ck * ck2
        kw = {"scale": scale}
        if mask is not None:
            kw["attn_mask"] = mask
        with gm.graph.inserting_before(out):
            sdpa = gm.graph.call_function(aten.scaled_dot_product_attention.default, (q, k, v), kw)
        mq = meta_of(q)
        with mq.fake_mode:
            sdpa.meta["val"] = aten.scaled_dot_product_attention.default(
                mq, meta_of(k), meta_of(v), attn_mask=meta_of(mask) if mask is not None else None,
                scale=scale)
        result = sdpa
        if up_q:
            back = next(iter(out.users)) if len(out.users) == 1 else None
            m_back = meta_of(back) if back is not None else None
            if getattr(back, "target", None) is aten._to_copy.default and m_back is not None and \
                    m_back.dtype == dt and set(back.kwargs) <= {"dtype"}:
                # The f32 result cast straight back: the attention's result is that cast's, and
                # the views after it (the heads transposed back) reach the attention itself,
                # which the daemon's layout rewrite needs to read and write [B, S, H, D].
                out = back
            else:
                with gm.graph.inserting_after(sdpa):
                    result = gm.graph.call_function(aten._to_copy.default, (sdpa,), {"dtype": torch.float32})
                result.meta["val"] = meta_of(out)
        out.replace_all_uses_with(result)
        n_rewritten += 1
    if n_rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return n_rewritten


def _fake_call(target, args):
    """target's result on the fake values of args (fx nodes, also inside lists: an expand's
    sizes) and literals: a new node's meta. Size arithmetic (no tensor among them) is computed on
    the SymInts as it is."""
    import torch.fx
    from torch._dispatch.python import enable_python_dispatcher
    metas = torch.fx.node.map_arg(tuple(args), meta_of)
    mode = next((m.fake_mode for m in metas if hasattr(m, "fake_mode")), None)
    if mode is None:
        return target(*metas)
    # The Python dispatcher, as in a trace: ops given symbolic sizes (a pad of (8 - s % 8) % 8)
    # take their decompositions.
    with mode, enable_python_dispatcher():
        return target(*metas)


def dynamic_rewrites(gm, maxima=None):
    """Rewrites of a graph with dynamic sizes that keep its named sizes expressible (a static
    graph is left as it is: its requests do not change). BERT's embeddings read buffers cut to
    the sequence (position_ids[:, :s]) through integer ops hidetd cannot run (a gather of the
    token-type buffer, an expand of the ids to [b, s]); moved, the cut comes last and what it
    cuts reads only weights:
      gather(x, d, idx[.., :e]) and embedding(w, idx[.., :e]) -> the same of idx, cut after
        (each output element reads its own index element: a prefix of the index is a prefix
        of the output);
      embedding(w, ids.expand(shape)) -> embedding(w, ids).expand(shape + [D]);
      a + y.expand(shape), where a already has the result's shape -> a + y (the binary op
        broadcasts; the graph's expand takes no names);
      arange(0, s) (GPT-2's position ids) -> arange(0, max)[:s], with max the range's maximum of
        the symbol s (maxima: {sympy symbol: int}): a constant, folded, cut to the name.
    Returns how many nodes it rewrote."""
    import torch
    aten = torch.ops.aten
    n_rewritten = 0

    def prefix_slice(n):
        """(input, axis, end) of a slice node x[.., :end] with end a dynamic size, else None."""
        if getattr(n, "target", None) is not aten.slice.Tensor:
            return None
        args = list(n.args) + [None] * (5 - len(n.args))
        x, dim, start, end, step = args[:5]
        dim = 0 if dim is None else dim
        try:
            end = _size_arg(end)
        except Unsupported:
            return None
        if (start or 0) != 0 or (step or 1) != 1 or not is_symbolic(end):
            return None
        return x, dim, n.args[3]

    def replace(old, target, args, insert_before):
        with gm.graph.inserting_before(insert_before):
            new = gm.graph.call_function(target, tuple(args))
        new.meta["val"] = _fake_call(target, args) if target is not aten.slice.Tensor else meta_of(old)
        return new

    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (aten.arange.start_step, aten.arange.default):
            continue
        args = list(n.args)
        if n.target is aten.arange.start_step and len(args) >= 2:
            start, end = args[0], args[1]
        else:
            start, end = 0, args[0]
        step = args[2] if n.target is aten.arange.start_step and len(args) > 2 else 1
        try:
            e = _size_arg(end)
        except Unsupported:
            continue
        if start != 0 or step != 1 or not is_symbolic(e) or not e.node.expr.is_Symbol or \
                maxima is None or e.node.expr not in maxima:
            continue
        kw = {k: v for k, v in n.kwargs.items() if k in ("dtype", "device", "layout", "pin_memory")}
        with gm.graph.inserting_before(n):
            whole = gm.graph.call_function(aten.arange.start_step, (0, maxima[e.node.expr], 1), kw)
            cut = gm.graph.call_function(aten.slice.Tensor, (whole, 0, 0, end))
        m = meta_of(n)
        with m.fake_mode:
            whole.meta["val"] = torch.ops.aten.arange.start_step(0, maxima[e.node.expr], 1, **kw)
        cut.meta["val"] = m
        n.replace_all_uses_with(cut)
        n_rewritten += 1
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target in (aten.gather.default, aten.embedding.default):
            idx_pos = 2 if n.target is aten.gather.default else 1
            idx = n.args[idx_pos]
            cut = prefix_slice(idx) if hasattr(idx, "op") else None
            if cut is None or len(n.args) > 3 or n.kwargs:
                continue
            x_full, axis, end = cut
            axis %= len(meta_of(idx).shape)  # an axis of the index; the output's the same
            if n.target is aten.gather.default and axis != n.args[1] % len(meta_of(idx).shape):
                continue  # the whole index may be longer than x on another axis
            args = list(n.args)
            args[idx_pos] = x_full
            whole = replace(n, n.target, args, n)
            whole.meta["val"] = _fake_call(n.target, args)
            with gm.graph.inserting_after(whole):
                cut_node = gm.graph.call_function(aten.slice.Tensor, (whole, axis, 0, end))
            cut_node.meta["val"] = meta_of(n)
            n.replace_all_uses_with(cut_node)
            n_rewritten += 1
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is aten.embedding.default and len(n.args) == 2:
            ids = n.args[1]
            if getattr(ids, "target", None) is not aten.expand.default or len(ids.args) != 2:
                continue
            emb = replace(n, aten.embedding.default, [n.args[0], ids.args[0]], n)
            out_shape = list(meta_of(n).shape)
            with gm.graph.inserting_after(emb):
                exp = gm.graph.call_function(aten.expand.default,
                                             (emb, list(ids.args[1]) + [out_shape[-1]]))
            exp.meta["val"] = meta_of(n)
            n.replace_all_uses_with(exp)
            n_rewritten += 1
    binary = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in binary or n.kwargs or len(n.args) != 2:
            continue
        for i in (0, 1):
            e, other = n.args[i], n.args[1 - i]
            if getattr(e, "target", None) is not aten.expand.default or not hasattr(other, "op"):
                continue
            mo, mn = meta_of(other), meta_of(n)
            if mo is None or mn is None or list(mo.shape) != list(mn.shape) or \
                    mo.dtype != mn.dtype:
                continue
            args = list(n.args)
            args[i] = e.args[0]
            n.args = tuple(args)
            n_rewritten += 1
            break
    if n_rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return n_rewritten


def _pad_sliced_back(n):
    """x when fx node n is slice(constant_pad_nd(x, [0, p]), -1, 0, S) with S x's last size -
    PyTorch's CUDA SDPA pads a mask whose rows are not 16-byte aligned and slices it back for its
    memory-efficient kernel, an identity on the values - else None."""
    import torch
    aten = torch.ops.aten
    if getattr(n, "target", None) is not aten.slice.Tensor:
        return None
    args = list(n.args) + [None] * (5 - len(n.args))
    padded, dim, start, end, step = args[:5]
    if getattr(padded, "target", None) is not aten.constant_pad_nd.default:
        return None
    x, pad = padded.args[0], [_size_value(p) for p in padded.args[1]]
    mx = meta_of(x)
    if mx is None or not hasattr(mx, "shape") or len(pad) != 2 or any(p is None for p in pad) or \
            not _known(pad[0] == 0) or not _known(pad[1] >= 0):
        return None
    last = mx.dim() - 1
    if (dim if dim is not None else 0) % mx.dim() != last or (start or 0) != 0 or (step or 1) != 1:
        return None
    end = _size_value(end)
    if end is None or type(end) is bool or not _same_size(end, mx.shape[last]):
        return None
    return x


def efficient_masks_for_torch(gm, nodes):
    """Of nodes (those PyTorch runs), the memory-efficient SDPA form given back the bias it takes.
    That form reads a bias only as [B, H, S, Sk] with rows 8 elements aligned - F.scaled_dot_
    product_attention pads, slices back and expands a mask before calling it - while padding_masks
    makes a mask as small as it is for the attention op (on the H200, f32 BERT given an
    attention_mask: PyTorch's efficient form, which the daemon does not run at f32 with a dynamic
    batch). Puts that pad, slice and expand back in front of each; a bias that is already so is
    left. Returns how many."""
    import torch
    aten = torch.ops.aten

    def emit(target, *args):
        n = gm.graph.call_function(target, args)
        n.meta["val"] = _fake_call(target, args)
        return n

    n_rewritten = 0
    for node in [n for n in gm.graph.nodes if n in nodes]:
        if _sdpa_form(node) != "_scaled_dot_product_efficient_attention" or len(node.args) < 4:
            continue
        bias, qm, km = node.args[3], meta_of(node.args[0]), meta_of(node.args[1])
        bm = meta_of(bias) if isinstance(bias, torch.fx.Node) else None
        if bm is None or qm is None or km is None:
            continue
        want = list(qm.shape[:3]) + [km.shape[2]]
        stripped = bias
        while getattr(stripped, "target", None) is aten.expand.default:
            stripped = stripped.args[0]
        if bm.dim() == 4 and all(_same_size(a, b) for a, b in zip(bm.shape, want)) and \
                _pad_sliced_back(stripped) is not None:
            continue
        shape = _size_args(gm, want, node)
        sk = shape[3] if shape is not None else None
        if sk is None:
            continue
        with gm.graph.inserting_before(node):
            # The pad to a multiple of 8 keys: (8 - Sk % 8) % 8, computed by the graph where Sk
            # is dynamic.
            if isinstance(sk, int):
                pad = (8 - sk % 8) % 8
            else:
                pad = emit(operator.mod, emit(operator.sub, 8, emit(operator.mod, sk, 8)), 8)
            x = bias
            if not isinstance(pad, int) or pad > 0:
                x = emit(aten.slice.Tensor, emit(aten.constant_pad_nd.default, bias, [0, pad]), -1, 0, sk)
            e = emit(aten.expand.default, x, shape)
        node.args = node.args[:3] + (e,) + node.args[4:]
        n_rewritten += 1
    if n_rewritten:
        gm.recompile()
    return n_rewritten


def _size_value(v):
    """A size argument's value: an int as it is, a node's SymInt (with dynamic sizes the pad of
    a mask is (8 - s % 8) % 8, computed by the graph), else None."""
    import torch
    if isinstance(v, int):
        return v
    m = meta_of(v) if hasattr(v, "op") else None
    return m if isinstance(m, (int, torch.SymInt)) else None


def _known(cond):
    """Whether a size comparison holds at every size (a SymBool: provably, from the symbols'
    ranges and forms)."""
    import torch
    if cond is None or isinstance(cond, bool):
        return bool(cond)
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    return isinstance(cond, torch.SymBool) and statically_known_true(cond)


def padding_masks(gm):
    """Attention masks made no larger than they are. transformers builds a bidirectional model's
    mask as a [B, 1, 1, Sk] padding mask ANDed with factors that let everything through (the
    causal and sliding-window parts of its mask builder, kv_idx >= 0 over aranges), which makes
    it [B, 1, S, Sk]: the attention op then reads a mask value per score from memory (on the
    H200, BERT at 17 x 510: 4.9 ms of attention against 0.6 ms with the [B, 1, 1, Sk] mask).
    Rewritten, in the cone of an attention node's mask:
      and(x, c) with c a constant that is all true (bitwise_and, logical_and) -> expand(x);
      where(expand(...expand(x)), a, b) with 0-d a and b -> expand(where(x, a, b));
    and the attention's mask loses its expands (the op broadcasts a mask) and the pad that PyTorch's
    CUDA SDPA puts around a mask whose rows are not 16-byte aligned, sliced back. With dynamic
    sizes c is no constant: it is taken as all true by its form (_all_true: the builder's
    kv_idx >= 0 over an arange from 0, ANDed with a 0-d True), and the new expands take their
    sizes from the graph's size nodes (_expanded_like) - without this, transformers' [b, 1, s, s]
    mask named s twice, and the whole BERT graph went to PyTorch. On CUDA
    (PyTorch 2.11, transformers 5.17) the all-true factor is itself and(full(True), kv_idx >= 0) and
    the builder expands the AND before its where, so the where sees expand(expand(padding part)).
    Returns how many rewrites."""
    import torch
    import torch.fx
    aten = torch.ops.aten
    ands = (aten.bitwise_and.Tensor, aten.logical_and.default)
    n_rewritten = 0

    def cone(mask, limit=64):
        seen, stack = [], [mask]
        while stack and len(seen) < limit:
            n = stack.pop()
            if isinstance(n, torch.fx.Node) and n.op == "call_function" and n not in seen:
                seen.append(n)
                stack.extend(n.all_input_nodes)
        return seen

    for node in list(gm.graph.nodes):
        form = _sdpa_form(node) if node.op == "call_function" else None
        if form is None:
            continue
        names = SDPA_ARGS[form]
        key = "attn_bias" if "attn_bias" in names else "attn_mask"
        pos = 3 + names.index(key) if key in names else len(node.args)  # else a keyword only
        mask = node.args[pos] if len(node.args) > pos else node.kwargs.get(key)
        if not isinstance(mask, torch.fx.Node):
            continue
        for n in cone(mask):
            if n.target not in ands or len(n.args) != 2 or n.kwargs or not all(isinstance(a, torch.fx.Node) for a in n.args):
                continue
            for c, x in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
                mx, mn = meta_of(x), meta_of(n)
                if mx is None or mn is None or mx.dtype != torch.bool or mx.dim() > mn.dim():
                    continue
                # True everywhere by its form (any sizes), or computed (fixed sizes).
                full = _all_true(c)
                if not full:
                    with _real_tensors():
                        value = _constant_value(gm, c)
                        full = value is not None and value.dtype == torch.bool and bool(value.all())
                e = _expanded_like(gm, x, n) if full else None
                if e is not None:
                    n.replace_all_uses_with(e)
                    n_rewritten += 1
                    break
        for n in cone(mask):
            if n.target is not aten.where.self or len(n.args) != 3 or n.kwargs:
                continue
            cond, a, b = n.args
            if getattr(cond, "target", None) is not aten.expand.default:
                continue
            inner = cond.args[0]  # under every expand: the and-rule's expand may sit under the model's
            while getattr(inner, "target", None) is aten.expand.default:
                inner = inner.args[0]
            if not all(isinstance(v, torch.fx.Node) and meta_of(v) is not None and meta_of(v).dim() == 0 for v in (a, b)):
                continue
            with gm.graph.inserting_before(n):
                small = gm.graph.call_function(aten.where.self, (inner, a, b))
            small.meta["val"] = _fake_call(aten.where.self, (inner, a, b))
            e = _expanded_like(gm, small, n)
            if e is None:
                gm.graph.erase_node(small)
                continue
            n.replace_all_uses_with(e)
            n_rewritten += 1
        mask = node.args[pos] if len(node.args) > pos else node.kwargs.get(key)  # as rewritten
        stripped = mask
        while True:
            if getattr(stripped, "target", None) is aten.expand.default and \
                    meta_of(stripped.args[0]) is not None and meta_of(stripped.args[0]).dim() == 4:
                stripped = stripped.args[0]
                continue
            unpadded = _pad_sliced_back(stripped)
            if unpadded is None:
                break
            stripped = unpadded
        if stripped is not mask:
            if len(node.args) > pos:
                node.args = node.args[:pos] + (stripped,) + node.args[pos + 1:]
            else:
                node.kwargs = dict(node.kwargs, **{key: stripped})
            n_rewritten += 1
    if n_rewritten:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return n_rewritten


def _same_size(a, b):
    """Whether two sizes (ints or SymInts) are the same size: equal ints, or the same symbol."""
    if type(a) is int and type(b) is int:
        return a == b
    if type(a) is int or type(b) is int:
        return False
    return str(a.node.expr) == str(b.node.expr)


def _all_true(node, depth=0):
    """Whether bool node is true everywhere at any sizes, by its form: full(True), an AND of
    such, `x >= v` (or `x > v`) with x an arange from a start that already passes (through an
    added non-negative number, unsqueeze, view, expand, transpose, permute, slice, a copy), as
    transformers' mask builder writes kv_idx >= 0."""
    import torch
    aten = torch.ops.aten
    if depth > 24 or not hasattr(node, "op") or node.op != "call_function":
        return False
    t = node.target
    if t is aten.full.default:
        return len(node.args) >= 2 and node.args[1] is True
    if t in (aten.bitwise_and.Tensor, aten.logical_and.default):
        return len(node.args) == 2 and all(_all_true(a, depth + 1) for a in node.args)
    if t in (aten.ge.Scalar, aten.gt.Scalar) and len(node.args) == 2 and isinstance(node.args[1], (int, float)):
        low = _lower_bound(node.args[0])
        return low is not None and (low >= node.args[1] if t is aten.ge.Scalar else low > node.args[1])
    if t in _shape_only_ops():
        return _all_true(node.args[0], depth + 1)
    return False


def _arange_source(node, whole_slices=False):
    """(start, end, step, added) of the arange an integer node's values come from: through adds
    of a non-negative int (their sum, added), slices and ops that move values without changing
    them (with whole_slices only slices of the whole axis, and no transposes); None otherwise."""
    import torch
    aten = torch.ops.aten
    added, n = 0, node
    for _ in range(24):
        if not hasattr(n, "op") or n.op != "call_function":
            return None
        t, args = n.target, n.args
        if t is aten.arange.default:
            return 0, args[0], 1, added
        if t is aten.arange.start_step or t is aten.arange.start:
            step = args[2] if len(args) > 2 else n.kwargs.get("step", 1)
            return args[0], args[1], step, added
        if t is aten.add.Tensor and len(args) == 2 and type(args[1]) is int and args[1] >= 0 and \
                n.kwargs.get("alpha", 1) == 1:
            added += args[1]
        elif t is aten.slice.Tensor:
            if whole_slices and not (len(args) >= 3 and args[2] in (0, None) and
                                     (len(args) < 4 or (type(args[3]) is int and args[3] >= 2 ** 62)) and
                                     (len(args) < 5 or args[4] == 1)):
                return None
        elif t not in _shape_only_ops() or (whole_slices and t in (aten.transpose.int, aten.permute.default)):
            return None
        n = args[0]
    return None


def _lower_bound(node):
    """The least value of an integer node built from an arange (see _all_true), or None."""
    src = _arange_source(node)
    if src is None:
        return None
    start, _, step, added = src
    return start + added if type(start) is int and type(step) is int and step > 0 else None


def _shape_only_ops():
    """The ops that move or repeat a tensor's values without changing them."""
    import torch
    aten = torch.ops.aten
    return (aten.unsqueeze.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default,
            aten.expand.default, aten.transpose.int, aten.permute.default, aten.clone.default,
            aten.alias.default)


def _causal_or_none(value, scores=None):
    """For a mask's value (bool: True lets a score through; or additive: 0 lets it through, -inf
    or the dtype's lowest - transformers' masks - keeps it out): True when it is exactly
    PyTorch's is_causal (tril of [S, Sk]) in every batch and head, False when it lets everything
    through, None otherwise (another pattern, or an additive bias with other values). scores:
    (S, Sk) when known, the shape the mask broadcasts to; a mask that broadcasts along S or Sk
    ([.., S, 1] after padding_masks took its expand) is never taken for tril without them. Call
    with real tensors."""
    import torch
    if value is None or value.dim() < 2:
        return None
    if scores is not None:
        try:
            value = torch.broadcast_to(value, tuple(value.shape[:-2]) + tuple(scores))
        except RuntimeError:
            return None
    elif 1 in tuple(value.shape[-2:]):
        # Broadcast along S or Sk: only "everything" can be told without the scores' shape.
        allowed = value if value.dtype == torch.bool else (value == 0) if value.is_floating_point() else None
        return False if allowed is not None and bool(allowed.all()) else None
    if value.dtype == torch.bool:
        allowed = value
    elif value.is_floating_point():
        allowed = value == 0
        if not bool((allowed | (value <= torch.finfo(value.dtype).min / 2)).all()):
            return None
    else:
        return None
    s, sk = value.shape[-2], value.shape[-1]
    if bool((allowed == torch.ones(s, sk, dtype=torch.bool).tril()).all()):
        return True
    return False if bool(allowed.all()) else None


def _size_placeholders(gm):
    """The placeholders of gm whose value is a size (a SymInt), not a tensor."""
    import torch
    return [n for n in gm.graph.nodes if n.op == "placeholder" and isinstance(meta_of(n), torch.SymInt)]


def _constant_value(gm, node, limit=256, sizes=None):
    """node's value computed with real tensors on the CPU when it depends on no placeholder (only
    on get_attr constants and literal arguments, through at most `limit` nodes); else None.
    With sizes (an int), the placeholders that are sizes (s0, s1) are given that value, and
    sizes computed from them (s0 * s1) follow."""
    import torch
    import torch.fx
    size_args = set(_size_placeholders(gm)) if sizes is not None else set()
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if sizes is not None and n.op == "placeholder" and n in size_args:
            seen.add(n)
            continue
        if n.op == "placeholder" or len(seen) >= limit or n.op not in ("call_function", "get_attr"):
            return None
        seen.add(n)
        stack.extend(n.all_input_nodes)
    order = [n for n in gm.graph.nodes if n in seen]  # the graph's order is a dataflow order
    env = {}
    try:
        with _real_tensors():
            for n in order:
                if n.op == "placeholder":
                    env[n] = sizes
                    continue
                if n.op == "get_attr":
                    v = gm
                    for part in n.target.split("."):
                        v = getattr(v, part)
                    env[n] = v.detach().cpu() if isinstance(v, torch.Tensor) else v
                    continue
                args = torch.fx.node.map_arg(n.args, lambda a: env[a])
                kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: env[a])
                kwargs = {k: (torch.device("cpu") if k == "device" else v) for k, v in kwargs.items()}
                env[n] = n.target(*args, **kwargs)
            v = env[node]
            return v.detach() if isinstance(v, torch.Tensor) else None
    except Exception:
        return None


def _sdpa_converter(which):
    """Scaled dot-product attention, each of PyTorch's device variants: q [B,H,S,D], k and v
    [B,Hkv,Sk,D]. One attention node (hidetd's fused op) where it can take the case: f16/bf16,
    a head dim it has templates for, k/v heads equal to or dividing q's. Otherwise
    matmul, scale, mask, softmax, matmul, the batch and head axes merged into the matmuls'
    batch (views, no copies)."""
    def f(L, node, q, k, v, *args, **kw):
        names = SDPA_ARGS[which]
        opts = dict(zip(names, args))
        opts.update(kw)
        if opts.get("dropout_p", 0.0) or opts.get("dropout_mask") is not None:
            raise Unsupported("attention with dropout")
        mask = opts.get("attn_mask", opts.get("attn_bias"))
        if mask is not None and not _is_tensor(mask):
            raise Unsupported("an attention mask that is not a tensor")
        qv, kv, vv = (L.to_plain(L.val(t)) for t in (q, k, v))
        if len(qv.shape) != 4 or len(kv.shape) != 4 or len(vv.shape) != 4:
            raise Unsupported("attention on %d-D tensors" % len(qv.shape))
        qv, kv, vv = L.same_dtype(qv, kv, vv)
        scale = opts.get("scale")
        scale = 1.0 / math.sqrt(qv.shape[3]) if scale is None else _num(scale)
        o = _attention_node(L, qv, kv, vv, mask, bool(opts.get("is_causal")), scale)
        if o is None:
            _spelled_out_expressible(node, q, qv)
            o = _attention_spelled_out(L, qv, kv, vv, mask, bool(opts.get("is_causal")), scale)
        return o if which == "scaled_dot_product_attention" else (o,) + (None,) * 8
    return f


def _spelled_out_expressible(node, q, qv):
    """Unsupported when attention spelled out would merge a dynamic batch with the heads: its
    matmuls run on [B*H, S, D] views, and H*b (a number times a name) is no size a graph can
    hold. The attention node itself (f16/bf16) takes [b, H, s, D] as it is."""
    m = meta_of(q)
    if m is None or not hasattr(m, "shape") or len(m.shape) != 4:
        return
    b, h = m.shape[0], m.shape[1]
    if is_symbolic(b) and (is_symbolic(h) or sym_int(h) != 1):
        why = ("q is %s: options={\"dtype\": \"f16\"} or \"bf16\" runs it in the op" % qv.dtype
               if qv.dtype not in ("f16", "bf16") else
               "its head dim is %d" % qv.shape[3] if qv.shape[3] not in ATTENTION_HEAD_DIMS else
               "its k/v or mask shapes")
        raise Unsupported("attention with a dynamic batch: hidetd's attention op (f16/bf16, head "
                          "dims %s) cannot take it (%s), and spelled out its matmuls would merge "
                          "the batch with the %s heads (%s*%s rows), which a graph's sizes cannot "
                          "name" % ("/".join(map(str, ATTENTION_HEAD_DIMS)), why,
                                    h, h, b.node.expr))


def _attention_node(L, qv, kv, vv, mask, causal, scale):
    """The attention node for SDPA, or None where the op cannot take the case."""
    b, h, s, d = qv.shape
    hk, sk = kv.shape[1], kv.shape[2]
    if qv.dtype not in ("f16", "bf16") or d not in ATTENTION_HEAD_DIMS or vv.shape != kv.shape:
        return None
    # Fewer k/v heads than q heads: grouped-query attention (SDPA's enable_gqa; the device
    # variants have no flag and are only ever called so when it was given).
    if kv.shape[0] != b or kv.shape[3] != d or h % hk != 0:
        return None
    ins = [qv, kv, vv]
    attrs = {"scale": scale}
    if causal and s == sk:
        attrs["causal"] = True
    elif causal:
        # PyTorch aligns is_causal to the top left (tril of [S, Sk]); the op's causal flag to the
        # bottom right, as FlashAttention does. They differ when S != Sk: a mask says it.
        if mask is not None:
            return None
        def causal_bias():
            import torch
            allowed = torch.ones(s, sk, dtype=torch.bool).tril()
            return torch.zeros(s, sk, dtype=torch.float32).masked_fill(~allowed, float("-inf"))
        ins.append(L.constant(causal_bias, "causal"))
    if mask is not None:
        mv = L.to_plain(L.val(mask))
        if len(mv.shape) > 4:
            return None
        try:
            if _broadcast([b, h, s, sk], mv.shape) != [b, h, s, sk]:
                return None
        except Unsupported:
            return None
        if mv.is_bool:
            # True = attend: 0 there, -inf elsewhere (an additive mask of q's dtype).
            zero = L.constant(lambda: _scalar_tensor(0.0, qv), "zero")
            ninf = L.constant(lambda: _scalar_tensor(float("-inf"), qv), "ninf")
            mv = L.emit("where", [mv, zero, ninf], None, mv.shape, qv.dtype)
        elif mv.dtype not in ("f16", "bf16", "f32"):
            return None
        ins.append(mv)
    return L.emit("attention", ins, attrs, [b, h, s, d], qv.dtype)


def _attention_spelled_out(L, qv, kv, vv, mask, causal, scale):
    b, h, s, d = qv.shape
    sk = kv.shape[2]
    if kv.shape[:2] != [b, h] or vv.shape[:3] != [b, h, sk]:
        raise Unsupported("attention with broadcast batch or head axes")
    dv = vv.shape[3]
    q3 = _reshape_value(L, qv, [b * h, s, d])
    k3 = _reshape_value(L, kv, [b * h, sk, d])
    v3 = _reshape_value(L, vv, [b * h, sk, dv])
    kt = L.emit("transpose", [k3], {"perm": [0, 2, 1]}, [b * h, d, sk], k3.dtype)
    sc = L.emit("matmul", [q3, kt], None, [b * h, s, sk], q3.dtype)
    sc = L.emit("scale", [sc], {"value": scale}, sc.shape, sc.dtype)
    sc = _reshape_value(L, sc, [b, h, s, sk])
    if mask is not None:
        mv = L.to_plain(L.val(mask))
        if mv.is_bool:
            # True = attend: the rest is -inf.
            sc = L.emit("where", [mv, sc, L.constant(lambda: _scalar_tensor(float("-inf"), sc), "ninf")],
                        None, sc.shape, sc.dtype)
        else:
            (sc2, mv) = L.same_dtype(sc, mv)
            sc = L.emit("add", [sc2, mv], None, _broadcast(sc.shape, mv.shape), sc2.dtype)
    if causal:
        def causal_bias():
            import torch
            allowed = torch.ones(s, sk, dtype=torch.bool).tril()
            return torch.zeros(s, sk, dtype=torch.float32).masked_fill(~allowed, float("-inf"))
        cv = L.constant(causal_bias, "causal")
        sc, cv = L.same_dtype(sc, cv)
        sc = L.emit("add", [sc, cv], None, sc.shape, sc.dtype)
    p = L.emit("softmax", [sc], {"axis": -1}, sc.shape, sc.dtype)
    p3 = _reshape_value(L, p, [b * h, s, sk])
    o = L.emit("matmul", [p3, v3], None, [b * h, s, dv], p3.dtype)
    return _reshape_value(L, o, [b, h, s, dv])


def _getitem(L, node, src, index):
    vals = L.vals.get(src)
    if not isinstance(vals, tuple):
        raise Unsupported("getitem of %s" % src.name)
    v = vals[index]
    if v is None:
        raise Unsupported("result %d of %s (only its first result is computed)" % (index, src.name))
    return v


_TABLES_BUILT = False


def build_tables():
    """Fills CONVERTERS (needs torch; done once, on first use)."""
    global _TABLES_BUILT
    if _TABLES_BUILT:
        return
    _elementwise_table()
    _shape_table()
    _nn_table()
    CONVERTERS[operator.getitem] = _getitem
    _TABLES_BUILT = True


def kept_ops():
    """The ATen ops the backend's decomposition table must leave whole, because they are
    lowered as they are (a batch norm, attention, pooling, ...), not as their decompositions."""
    build_tables()
    return [op for op in CONVERTERS if op is not operator.getitem]
