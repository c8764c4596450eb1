"""hidetd.kernel - a kernel set (docs/api.md) made launchable: the launch contract read and
checked once, the module loaded once per device, the caller's tensors checked against the
request on every launch, and every kernel of the set launched in order on one stream. A dynamic
op's set (docs/api.md, "Named dimensions") takes its sizes at each launch: read from the tensors'
named axes or given, checked against the dims' ranges, passed as its "int" parameters, and its
grids computed from their rules (hidetd.dispatch chooses among a dispatch table's sets).
"""
import re
import sys

from . import _cuda
from ._tensor import DTYPES, _what, check, describe, nbytes

_INPUT_RE = re.compile(r"^input(0|[1-9][0-9]*)$")
# The members of a "tensor_map" parameter's description (docs/api.md, op/tmap.h): those of every
# map, then those of its mode's; all required but "mode" (absent: a tiled map).
_TENSOR_MAP_MEMBERS = ("mode", "dtype", "dims", "strides", "element_strides", "swizzle",
                       "l2_promotion", "oob_fill")
_TENSOR_MAP_MODE_MEMBERS = {"tiled": ("box",),
                            "im2col": ("lower_corner", "upper_corner", "channels_per_pixel",
                                       "pixels_per_column")}
TENSOR_MAP_MAX_RANK = 5
# An im2col map's corners share 16 bits among its spatial dimensions (rank - 2 of them): each
# lies in [-limit, limit - 1], by rank.
_IM2COL_CORNER_LIMIT = {3: 1 << 15, 4: 1 << 7, 5: 1 << 4}


# Named dimensions (docs/api.md, "Named dimensions"): at most 4 per op, names of at most 15
# characters, sizes up to 2^31-1; CUDA's largest grid.
MAX_DIMS = 4
DIM_SIZE_MAX = (1 << 31) - 1
_DIM_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,14}\Z")
GRID_LIMIT = ((1 << 31) - 1, 65535, 65535)
_GRID_RULE_MEMBERS = ("dims", "coef", "div", "mul", "cap")
# The parameter slot of an "int" parameter is keyed "dim:NAME" beside the buffer names.
_DIM_SLOT = "dim:"


class PlanError(ValueError):
    """A kernel set or plan that does not follow docs/api.md / docs/graphs.md (a daemon bug or a
    hand-edited file): names the field at fault."""


def whole_number(x):
    """x as an int when it is a whole JSON number, else None. As the daemon and libhidet-client
    read JSON (every number a double), 128 and 128.0 are the same number, and true and false are
    no numbers at all."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return None


def tensor_spec(t, where):
    """(shape tuple, dtype) of a {"shape", "dtype"} object, checked."""
    if not isinstance(t, dict):
        raise PlanError("%s: expected an object with shape and dtype, got %r" % (where, t))
    shape, dtype = t.get("shape"), t.get("dtype")
    dims = [whole_number(d) for d in shape] if isinstance(shape, list) else None
    if dims is None or not all(d is not None and d >= 1 for d in dims):
        raise PlanError("%s.shape: expected a list of positive integers, got %r" % (where, shape))
    if dtype not in DTYPES:
        raise PlanError("%s.dtype: expected one of %s, got %r" % (where, ", ".join(DTYPES), dtype))
    return tuple(dims), dtype


class Dim:
    """A named dimension: every size is in min..max and a multiple of multiple_of."""
    __slots__ = ("name", "min", "max", "multiple_of")

    def __init__(self, name, lo, hi, multiple_of=1):
        self.name, self.min, self.max, self.multiple_of = name, lo, hi, multiple_of

    def holds(self, v):
        return self.min <= v <= self.max and v % self.multiple_of == 0

    def refusal(self, v):
        """The range check's message, worded as op/op_dims.c's tuner_op_sizes_check (and the C
        client's) words it."""
        if self.multiple_of > 1:
            return "%s is %d; its range is %d..%d, a multiple of %d" % (
                self.name, v, self.min, self.max, self.multiple_of)
        return "%s is %d; its range is %d..%d" % (self.name, v, self.min, self.max)

    def cut(self, lo, hi):
        return Dim(self.name, lo, hi, self.multiple_of)

    def __repr__(self):
        return "Dim(%r, %d, %d, %d)" % (self.name, self.min, self.max, self.multiple_of)


def parse_dims(obj, where):
    """A "dims" object as {name: Dim}, names sorted (the order a dynamic op's kernels take their
    sizes); "hints" and members this client does not know are ignored."""
    if not isinstance(obj, dict):
        raise PlanError("%s: expected an object of name: {\"min\", \"max\", \"multiple_of\"}" % where)
    if len(obj) > MAX_DIMS:
        raise PlanError("%s: more than %d dims" % (where, MAX_DIMS))
    dims = {}
    for name in sorted(obj):
        d = obj[name]
        w = "%s.%s" % (where, name)
        if not _DIM_NAME_RE.match(name):
            raise PlanError("%s: a name is [a-z_][a-z0-9_]*, at most 15 characters" % w)
        lo, hi = (whole_number(d.get(m)) if isinstance(d, dict) else None for m in ("min", "max"))
        if lo is None or hi is None or not 1 <= lo <= hi <= DIM_SIZE_MAX:
            raise PlanError("%s: expected whole min and max, 1 <= min <= max <= 2^31-1" % w)
        mult = whole_number(d.get("multiple_of", 1))
        if mult is None or not 1 <= mult <= DIM_SIZE_MAX or lo % mult or hi % mult:
            raise PlanError("%s.multiple_of: expected a whole number >= 1 that divides min and max"
                            % w)
        dims[name] = Dim(name, lo, hi, mult)
    return dims


def parse_axis(x, dims, where):
    """A shape entry: an int (a fixed size >= 1), or for a name ("n") or product ("b*s") of dims
    the tuple of its names."""
    if isinstance(x, str):
        names = tuple(x.split("*"))
        for n in names:
            if not _DIM_NAME_RE.match(n):
                raise PlanError("%s: %r is not a name or a product of names (\"b*s\")" % (where, x))
            if n not in dims:
                raise PlanError("%s: %r is not a dim of the kernel set (%s)" % (
                    where, n, "its dims: " + ", ".join(dims) if dims else "it declares no \"dims\""))
        if len(set(names)) != len(names):
            raise PlanError("%s: %r names a dim twice" % (where, x))
        return names
    n = whole_number(x)
    if n is None or n < 1:
        raise PlanError("%s: expected a positive integer or a dim's name, got %r" % (where, x))
    return n


def named_spec(t, dims, where):
    """(shape, dtype) of a {"shape", "dtype"} object whose axes may name dims (parse_axis)."""
    if not isinstance(t, dict):
        raise PlanError("%s: expected an object with shape and dtype, got %r" % (where, t))
    shape, dtype = t.get("shape"), t.get("dtype")
    if not isinstance(shape, list):
        raise PlanError("%s.shape: expected a list, got %r" % (where, shape))
    if dtype not in DTYPES:
        raise PlanError("%s.dtype: expected one of %s, got %r" % (where, ", ".join(DTYPES), dtype))
    return tuple(parse_axis(x, dims, "%s.shape[%d]" % (where, i)) for i, x in enumerate(shape)), dtype


def bind_shape(shape, sizes):
    """A named_spec shape at the sizes: each named axis the product of its dims' sizes."""
    out = []
    for x in shape:
        if isinstance(x, tuple):
            v = 1
            for n in x:
                v *= sizes[n]
            x = v
        out.append(x)
    return tuple(out)


def check_sizes(dims, sizes):
    """sizes (name: int) checked against dims: every dim given, no other name, each in its range;
    ValueError "n is 9000; its range is 1..8192" otherwise."""
    for name in sizes:
        if name not in dims:
            raise ValueError("%r is not a dim of the kernel (%s)" % (
                name, ", ".join(dims) if dims else "it has none"))
    for name, d in dims.items():
        v = sizes.get(name)
        if v is None:
            raise ValueError("no size given for %s" % name)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("the size of %s must be an int, got %r" % (name, v))
        if not d.holds(v):
            raise ValueError(d.refusal(v))


class GridRule:
    """A grid dimension that depends on the sizes: mul * ceil(coef * P / div), capped at cap
    when cap > 0, P the product of the sizes of `dims`."""
    __slots__ = ("dims", "coef", "div", "mul", "cap")

    def __init__(self, dims, coef, div, mul, cap):
        self.dims, self.coef, self.div, self.mul, self.cap = tuple(dims), coef, div, mul, cap

    def __call__(self, sizes):
        n = self.coef
        for d in self.dims:
            n *= sizes[d]
        g = self.mul * -(-n // self.div)
        return self.cap if 0 < self.cap < g else g

    def __eq__(self, other):
        return isinstance(other, GridRule) and all(getattr(self, a) == getattr(other, a)
                                                   for a in self.__slots__)

    def __repr__(self):
        return "GridRule(%r, coef=%d, div=%d, mul=%d, cap=%d)" % (self.dims, self.coef, self.div,
                                                                   self.mul, self.cap)


def parse_grid_rule(r, dims, where):
    """A grid rule object; PlanError naming the member for a missing, bad or unknown one (a
    member this client does not know may change what the rule means: the set is not
    launched)."""
    for m in r:
        if m not in _GRID_RULE_MEMBERS:
            raise PlanError("%s.%s: not a member of a grid rule this client knows (%s)" % (
                where, m, ", ".join(_GRID_RULE_MEMBERS)))
    names = r.get("dims")
    if not isinstance(names, list) or not names:
        raise PlanError("%s.dims: expected a non-empty list of dim names" % where)
    for n in names:
        if not isinstance(n, str) or n not in dims or names.count(n) > 1:
            raise PlanError("%s.dims: %r is not a dim of the kernel set, or is named twice" % (where, n))
    vals = {}
    for m in _GRID_RULE_MEMBERS[1:]:
        lo = 0 if m == "cap" else 1
        v = whole_number(r.get(m))
        if v is None or not lo <= v <= DIM_SIZE_MAX:
            raise PlanError("%s.%s: expected a whole number in %d..2^31-1, got %r" % (where, m, lo, r.get(m)))
        vals[m] = v
    return GridRule(names, **vals)


def _whole(x, lo, hi):
    n = whole_number(x)
    return n is not None and lo <= n <= hi


def _whole_list(t, member, n_lo, n_hi, lo, hi, where):
    v = t.get(member)
    if not isinstance(v, list):
        raise PlanError("%s.%s: %s must be an array, got %r" % (where, member, member, v))
    if not n_lo <= len(v) <= n_hi:
        count = "%d" % n_lo if n_lo == n_hi else "%d..%d" % (n_lo, n_hi)
        raise PlanError("%s.%s: the number of %s entries must be %s, got %d" %
                        (where, member, member, count, len(v)))
    for i, x in enumerate(v):
        if not _whole(x, lo, hi):
            raise PlanError("%s.%s[%d]: %s entries must be whole numbers in %d..%d, got %r" %
                            (where, member, i, member, lo, hi, x))
    return [whole_number(x) for x in v]


def _symbolic_map_dims(t, where, dims):
    """A tiled map's "dims" whose entries may follow named dims ({"dims": [names], "coef": N},
    docs/api.md "Named dimensions"): (the entries with each such one at the dims' max, [None or
    (names, coef)] per entry, or None when none follows); PlanError naming the entry otherwise."""
    v = t.get("dims")
    if not isinstance(v, list) or not any(isinstance(x, dict) for x in v):
        return v, None
    plain, sym = [], []
    for d, x in enumerate(v):
        if not isinstance(x, dict):
            plain.append(x)
            sym.append(None)
            continue
        w = "%s.dims[%d]" % (where, d)
        if dims is None:
            raise PlanError("%s: a dimension that follows named dims, but the kernel set has no "
                            "\"dims\"" % w)
        if t.get("mode", "tiled") != "tiled":
            raise PlanError("%s: only a tiled map's dimensions may follow named dims" % w)
        names, coef = x.get("dims"), x.get("coef")
        if set(x) != {"dims", "coef"} or not isinstance(names, list) or not names or \
                not _whole(coef, 1, 1 << 32):
            raise PlanError('%s: a dimension that follows named dims is {"dims": [names], '
                            '"coef": N >= 1}, got %r' % (w, x))
        for n in names:
            if not isinstance(n, str) or n not in dims or names.count(n) > 1:
                raise PlanError("%s: %r is not a dim of the kernel set (%s), or is named twice" %
                                (w, n, ", ".join(dims)))
        coef = whole_number(coef)
        at_max = coef
        for n in names:
            at_max *= dims[n].max
        if at_max > 1 << 32:
            raise PlanError("%s: %d elements at the dims' max, beyond 2^32" % (w, at_max))
        plain.append(at_max)
        sym.append((tuple(names), coef))
    return plain, sym


def parse_tensor_map(t, where, dims=None):
    """A "tensor_map" parameter's description, checked as strictly as the daemon checks it
    (op/tmap.c: no unknown member, every member of its mode present, only what its encoder,
    cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col, accepts for a 16-byte aligned address),
    as a new dict in the form the daemon writes ("mode" only in an im2col map); PlanError
    naming the member otherwise. With dims ({name: Dim}, a dynamic op's), a dimension may follow
    them: "dims" then holds its value at the dims' max and "sym" (names, coef) per dimension,
    None where fixed (tensor_map_at gives the map at sizes)."""
    if not isinstance(t, dict):
        raise PlanError("%s: a tensor map must be an object, got %r" % (where, t))
    plain, sym = _symbolic_map_dims(t, where, dims)
    if sym is not None:
        t = dict(t, dims=plain)
    # The mode first: it decides which members the map may have.
    mode = t.get("mode", "tiled")
    if not isinstance(mode, str) or mode not in _TENSOR_MAP_MODE_MEMBERS:
        raise PlanError('%s.mode: mode must be "tiled" or "im2col", got %r' % (where, mode))
    im2col = mode == "im2col"
    known = _TENSOR_MAP_MEMBERS + _TENSOR_MAP_MODE_MEMBERS[mode]
    for m in t:
        if m not in known:
            raise PlanError("%s.%s: unknown member of %s tensor map" %
                            (where, m, "an im2col" if im2col else "a tiled"))
    dtype = t.get("dtype")
    if not isinstance(dtype, str) or dtype not in _cuda.TENSOR_MAP_DTYPES:
        raise PlanError('%s.dtype: dtype must be "f16", "bf16" or "f32", got %r' % (where, dtype))
    # An im2col map has channels, 1..3 spatial dimensions and images.
    dims = _whole_list(t, "dims", 3 if im2col else 1, TENSOR_MAP_MAX_RANK, 1, 1 << 32, where)
    rank = len(dims)
    strides = _whole_list(t, "strides", rank - 1, rank - 1, 16, (1 << 40) - 1, where)
    if not im2col:
        box = _whole_list(t, "box", rank, rank, 1, 256, where)
    element_strides = _whole_list(t, "element_strides", rank, rank, 1, 8, where)
    if im2col:
        lower = _whole_list(t, "lower_corner", rank - 2, rank - 2, -32768, 32767, where)
        upper = _whole_list(t, "upper_corner", rank - 2, rank - 2, -32768, 32767, where)
        channels, pixels = t.get("channels_per_pixel"), t.get("pixels_per_column")
        if not _whole(channels, 1, 256):
            raise PlanError("%s.channels_per_pixel: channels_per_pixel must be a whole number in "
                            "1..256, got %r" % (where, channels))
        if not _whole(pixels, 1, 1024):
            raise PlanError("%s.pixels_per_column: pixels_per_column must be a whole number in "
                            "1..1024, got %r" % (where, pixels))
        channels, pixels = whole_number(channels), whole_number(pixels)
    # The members' types and ranges, then (below) the limits of the map as a whole, in op/tmap.c's
    # order, so that a map with several faults is refused naming the member the daemon names.
    swizzle, l2, oob = t.get("swizzle"), t.get("l2_promotion"), t.get("oob_fill")
    if not _whole(swizzle, 0, 128):
        raise PlanError("%s.swizzle: swizzle must be 0, 32, 64 or 128 bytes, got %r" % (where, swizzle))
    if not _whole(l2, 0, 256):
        raise PlanError("%s.l2_promotion: l2_promotion must be 0, 64, 128 or 256 bytes, got %r" %
                        (where, l2))
    swizzle, l2 = whole_number(swizzle), whole_number(l2)
    if not isinstance(oob, str) or oob not in _cuda.TENSOR_MAP_OOB_FILLS:
        raise PlanError('%s.oob_fill: oob_fill must be "zero" or "nan", got %r' % (where, oob))
    for d, stride in enumerate(strides):
        if stride % 16:
            raise PlanError("%s.strides[%d]: a stride must be a positive multiple of 16 bytes "
                            "below 2^40, got %d" % (where, d, stride))
    if im2col:
        limit = _IM2COL_CORNER_LIMIT[rank]
        for i in range(rank - 2):
            for member, corner in (("lower_corner", lower), ("upper_corner", upper)):
                if not -limit <= corner[i] < limit:
                    raise PlanError("%s.%s[%d]: a corner of a rank-%d im2col map must be in "
                                    "%d..%d, got %d" % (where, member, i, rank, -limit, limit - 1,
                                                        corner[i]))
            # The base pixels of spatial dimension i run from lower_corner to
            # dims - 1 + upper_corner: a range without one is no map (tuner_tmap_check).
            if dims[i + 1] - 1 + upper[i] < lower[i]:
                raise PlanError("%s.upper_corner[%d]: the bounding box of spatial dimension %d "
                                "holds no pixel (dims[%d] - 1 + upper_corner[%d] = %d is below "
                                "lower_corner[%d] = %d)" % (where, i, i, i + 1, i,
                                                            dims[i + 1] - 1 + upper[i], i, lower[i]))
        # What one copy writes per row of shared memory: a pixel's channels.
        row, what, inner = "channels_per_pixel", "a pixel's channels", channels * DTYPES[dtype][0]
    else:
        row, what, inner = "box[0]", "the box's inner dimension", box[0] * DTYPES[dtype][0]
    if inner % 16:
        raise PlanError("%s.%s: %s must be a multiple of 16 bytes, got %d bytes" %
                        (where, row, what, inner))
    if swizzle not in _cuda.TENSOR_MAP_SWIZZLES:
        raise PlanError("%s.swizzle: swizzle must be 0, 32, 64 or 128 bytes, got %r" % (where, swizzle))
    if swizzle and inner > swizzle:
        raise PlanError("%s.%s: %s (%d bytes) exceeds the swizzle span (%d bytes)" %
                        (where, row, what, inner, swizzle))
    if l2 not in _cuda.TENSOR_MAP_L2_PROMOTIONS:
        raise PlanError("%s.l2_promotion: l2_promotion must be 0, 64, 128 or 256 bytes, got %r" %
                        (where, l2))
    if sym is not None:
        return {"dtype": dtype, "dims": dims, "strides": strides, "box": box,
                "element_strides": element_strides, "swizzle": swizzle, "l2_promotion": l2,
                "oob_fill": oob, "sym": sym}
    if im2col:
        return {"mode": mode, "dtype": dtype, "dims": dims, "strides": strides,
                "element_strides": element_strides, "lower_corner": lower, "upper_corner": upper,
                "channels_per_pixel": channels, "pixels_per_column": pixels, "swizzle": swizzle,
                "l2_promotion": l2, "oob_fill": oob}
    return {"dtype": dtype, "dims": dims, "strides": strides, "box": box,
            "element_strides": element_strides, "swizzle": swizzle, "l2_promotion": l2,
            "oob_fill": oob}


def tensor_map_extent(tmap):
    """Bytes from the buffer's start to the end of the last element a tensor map can address:
    what the bound buffer must hold, or the copy engine reads or writes past it. The same for
    both modes (op/tmap.c's tuner_tmap_extent): an im2col map's corners only widen the window
    positions, and what lies outside dims reads as its oob_fill."""
    dims, strides = tmap["dims"], tmap["strides"]
    return dims[0] * DTYPES[tmap["dtype"]][0] + sum((dims[d] - 1) * strides[d - 1]
                                                    for d in range(1, len(dims)))


def tensor_map_reach(kernels, static_only=False):
    """{buffer name: the largest tensor_map_extent of its maps} over parse_kernel_set's
    kernels (a map that follows named dims: at their max); with static_only, over the maps that
    follow none."""
    reach = {}
    for _, _, _, _, params in kernels:
        for _, buf, tmap in params:
            if tmap is not None and not (static_only and tmap.get("sym")):
                reach[buf] = max(reach.get(buf, 0), tensor_map_extent(tmap))
    return reach


tensor_map_at = _cuda.tensor_map_at


def parse_kernel_set(ks, n_inputs, where, dims=None):
    """The kernels of a kernel set as (name, grid, block, shared, [(param index, buffer,
    tensor map description or None for a pointer)]), checked against the launch contract;
    PlanError naming `where`'s field otherwise. With dims ({name: Dim}, a dynamic op's), a grid
    entry may be a GridRule and a parameter an "int" size, listed with the buffer "dim:NAME";
    without, both are refused (plans launch static sets)."""
    if not isinstance(ks, dict):
        raise PlanError("%s: expected a kernel set object" % where)
    key = ks.get("key")
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{64}", key):
        raise PlanError("%s.key: expected 64 lowercase hex characters, got %r" % (where, key))
    ws = whole_number(ks.get("workspace_bytes", 0))
    if ws is None or ws < 0:
        raise PlanError("%s.workspace_bytes: expected a non-negative integer, got %r" %
                        (where, ks.get("workspace_bytes")))
    kernels = ks.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        raise PlanError("%s.kernels: expected a non-empty list" % where)
    out = []
    for i, k in enumerate(kernels):
        kw = "%s.kernels[%d]" % (where, i)
        if not isinstance(k, dict) or not isinstance(k.get("name"), str) or not k["name"]:
            raise PlanError("%s.name: missing" % kw)
        dim3 = {}
        for f in ("grid", "block"):
            v = k.get(f)
            dim3[f] = [whole_number(x) for x in v] if isinstance(v, list) and len(v) == 3 else None
            if dims is not None and f == "grid" and dim3[f] is not None:
                for d, x in enumerate(v):
                    if isinstance(x, dict):
                        rule = dim3[f][d] = parse_grid_rule(x, dims, "%s.grid[%d]" % (kw, d))
                        at_max = rule({n: dm.max for n, dm in dims.items()})
                        if at_max > GRID_LIMIT[d]:
                            raise PlanError("%s.grid[%d]: the rule gives %d blocks at the dims' "
                                            "max, beyond CUDA's limit" % (kw, d, at_max))
            if dim3[f] is None or not all(isinstance(x, GridRule) or (x is not None and x >= 1)
                                          for x in dim3[f]):
                what = ("positive integers or grid rules" if dims is not None and f == "grid"
                        else "positive integers")
                raise PlanError("%s.%s: expected three %s, got %r" % (kw, f, what, v))
        shared = whole_number(k.get("shared_bytes", 0))
        if shared is None or shared < 0:
            raise PlanError("%s.shared_bytes: expected a non-negative integer, got %r" %
                            (kw, k.get("shared_bytes")))
        params = k.get("params")
        if not isinstance(params, list):
            raise PlanError("%s.params: expected a list" % kw)
        ps, seen = [], set()
        for j, p in enumerate(params):
            pw = "%s.params[%d]" % (kw, j)
            given, buf = (p.get("index"), p.get("buffer")) if isinstance(p, dict) else (None, None)
            idx = whole_number(given)
            if idx is None or not 0 <= idx < len(params) or idx in seen:
                raise PlanError("%s.index: expected a distinct index below %d, got %r" %
                                (pw, len(params), given))
            seen.add(idx)
            ptype = p.get("type", "pointer")
            if ptype == "int" and dims is not None:
                dim = p.get("dim")
                if not isinstance(dim, str) or dim not in dims:
                    raise PlanError("%s.dim: an \"int\" parameter takes the size of one of the "
                                    "set's dims (%s), got %r" % (pw, ", ".join(dims) or "none", dim))
                ps.append((idx, _DIM_SLOT + dim, None))
                continue
            if ptype not in ("pointer", "tensor_map"):
                kinds = "pointer, tensor_map, int" if dims is not None else "pointer, tensor_map"
                raise PlanError("%s.type: %r is not a parameter kind this client can pass "
                                "(%s)" % (pw, ptype, kinds))
            m = _INPUT_RE.match(buf) if isinstance(buf, str) else None
            if m and int(m.group(1)) >= n_inputs:
                raise PlanError("%s.buffer: %r, but the request has %d inputs" % (pw, buf, n_inputs))
            if not m and buf not in ("output", "workspace"):
                raise PlanError("%s.buffer: expected input<i>, output or workspace, got %r" % (pw, buf))
            if buf == "workspace" and ws == 0:
                raise PlanError("%s.buffer: a workspace parameter, but workspace_bytes is 0" % pw)
            tmap = (parse_tensor_map(p.get("tensor_map"), pw + ".tensor_map", dims)
                    if ptype == "tensor_map" else None)
            ps.append((idx, buf, tmap))
        out.append((k["name"], dim3["grid"], dim3["block"], shared, ps))
    return key, ws, out


class LoadedSet:
    """A kernel set's kernels as Launch objects on one device, with the parameter slots each
    buffer name fills (a tensor map's slot too: its Launch encodes the map for the address)."""

    def __init__(self, client, key, kernels, device):
        drv = _cuda.driver()
        drv.use_device(device)
        module = client._module(key, device)
        self.launches = []
        self.slots = {}  # buffer name (or "dim:NAME") -> [(Launch, param index)]
        self.rules = []  # (Launch, grid with GridRules): grids set by set_sizes()
        for name, grid, block, shared, params in kernels:
            maps = [(idx, tmap) for idx, _, tmap in params if tmap is not None]
            fixed = [1 if isinstance(g, GridRule) else g for g in grid]
            ln = _cuda.Launch(drv, drv.function(module, name, shared), fixed, block, shared,
                              len(params), name, maps)
            self.launches.append(ln)
            if any(isinstance(g, GridRule) for g in grid):
                self.rules.append((ln, grid))
            for idx, buf, _ in params:
                self.slots.setdefault(buf, []).append((ln, idx))

    def bind(self, buf, ptr):
        for ln, idx in self.slots.get(buf, ()):
            ln[idx] = ptr

    def set_sizes(self, sizes):
        """A dynamic op's launch at sizes ({name: int}, checked): the "int" parameters and the
        grids of rules."""
        for name, v in sizes.items():
            self.bind(_DIM_SLOT + name, v)
        for ln in self.launches:
            ln.set_sizes(sizes)
        for ln, grid in self.rules:
            ln.set_grid(launch_grid(grid, sizes))

    def __call__(self, stream):
        for ln in self.launches:
            ln(stream)


def launch_grid(grid, sizes):
    """A kernel's grid at sizes: its rules evaluated, its numbers as they are."""
    return [g(sizes) if isinstance(g, GridRule) else g for g in grid]


def new_tensor(shape, dtype, device, like_torch):
    """An output tensor: torch.empty when PyTorch is in use, else a DeviceBuffer."""
    torch = sys.modules.get("torch")
    if like_torch and torch is not None:
        td = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
              "i32": torch.int32, "i64": torch.int64,
              "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}[dtype]
        return torch.empty(shape, dtype=td, device="cuda:%d" % device)
    if DTYPES[dtype][1] is None:
        raise TypeError("cannot allocate a %s output without PyTorch (__cuda_array_interface__ "
                        "has no type for it); pass output=" % dtype)
    return _cuda.DeviceBuffer(nbytes(shape, dtype), device, shape, DTYPES[dtype][1])


def tensor_device(info, what):
    """The CUDA ordinal of a described tensor (asking the driver for __cuda_array_interface__
    objects)."""
    if info.device is not None:
        return info.device
    d = _cuda.driver().pointer_device(info.ptr)
    if d is None:
        raise ValueError("%s: its pointer 0x%x is not CUDA device memory" % (what, info.ptr))
    info.device = d
    return d


def same_device(infos):
    """The one device all described tensors (name, info) are on; ValueError naming the first
    that differs."""
    device, first = None, None
    for what, info in infos:
        d = info.device if info.device is not None else tensor_device(info, _what(what))
        if device is None:
            device, first = d, what
        elif d != device:
            raise ValueError("%s: on cuda:%d, but %s is on cuda:%d; all tensors must be on one "
                             "device" % (_what(what), d, _what(first), device))
    return device


class Kernel:
    """A launchable kernel set: kernel(*inputs) or kernel.launch(inputs, output=None,
    stream=None) returns the output. Inputs are checked against the request (count, shape,
    dtype, device, contiguity); the workspace is allocated once per device.

    A dynamic op's set (its shapes name dims, docs/api.md "Named dimensions") takes the sizes at
    launch: they are read from the tensors (a named axis "n" gives n; a product "b*s" gives the
    one of its sizes not known otherwise), or given as sizes={"n": 300} where the tensors cannot
    tell (only "b*s" known), checked against the dims' ranges (ValueError "n is 9000; its range is
    1..8192"), and passed to the kernels, whose grids follow their rules. `dims` ({name: Dim})
    are the dims of a set that leaves them out (a dispatch table's entry); else the set's own
    "dims", else the request's."""

    def __init__(self, client, kernel_set, request, dims=None):
        self.client = client
        self.kernel_set = kernel_set
        self.request = request
        if not isinstance(kernel_set, dict):
            raise PlanError("kernel_set: expected a kernel set object")
        ins = request.get("inputs") if isinstance(request, dict) else None
        if not isinstance(ins, list) or not ins:
            raise PlanError("request.inputs: expected a non-empty list")
        if "dims" in kernel_set:
            dims = parse_dims(kernel_set["dims"], "kernel_set.dims")
        elif dims is None and isinstance(request, dict) and "dims" in request:
            dims = parse_dims(request["dims"], "request.dims")
        self.dims = dims or {}
        self.inputs = [named_spec(t, self.dims, "request.inputs[%d]" % i) for i, t in enumerate(ins)]
        self.output = named_spec(kernel_set.get("output"), self.dims, "kernel_set.output")
        self.key, self.workspace_bytes, self._kernels = parse_kernel_set(
            kernel_set, len(self.inputs), "kernel_set", self.dims if self.dims else None)
        self._named = [i for i, (shape, _) in enumerate(self.inputs)
                       if any(isinstance(x, tuple) for x in shape)]
        # The tensors bound are exactly the request's (launch() checks their shapes), so a map
        # reaching past one is the kernel set's fault. A map that follows the sizes is checked
        # at the dims' max, where its buffer is largest too; a fixed map of a buffer whose shape
        # follows the sizes would reach past it below max.
        sizes = {"input%d" % i: spec for i, spec in enumerate(self.inputs)}
        sizes.update(output=self.output)
        at_max = {n: d.max for n, d in self.dims.items()}
        fixed = tensor_map_reach(self._kernels, static_only=True)
        for buf, reach in sorted(tensor_map_reach(self._kernels).items()):
            if buf == "workspace":
                have = self.workspace_bytes
            elif any(isinstance(x, tuple) for x in sizes[buf][0]):
                if buf in fixed:
                    raise PlanError("kernel_set: a tensor map of %s, whose shape %s follows the "
                                    "sizes, has fixed dims; this client does not launch that" %
                                    (buf, fmt_named(sizes[buf][0])))
                have = nbytes(bind_shape(sizes[buf][0], at_max), sizes[buf][1])
            else:
                have = nbytes(*sizes[buf])
            if reach > have:
                raise PlanError("kernel_set: %s has %d bytes, too few for the tensor map of %s "
                                "(%d bytes)" % (buf, have, buf, reach))
        self._loaded = {}     # device -> LoadedSet
        self._workspace = {}  # device -> tensor

    def __repr__(self):
        return "<hidetd.Kernel %s %s -> %s %s>" % (
            self.kernel_set.get("op"),
            ", ".join("%s %s" % (fmt_named(s), d) for s, d in self.inputs),
            fmt_named(self.output[0]), self.output[1])

    def __call__(self, *inputs, output=None, stream=None, sizes=None):
        return self.launch(inputs, output=output, stream=stream, sizes=sizes)

    def infer_sizes(self, shapes, sizes=None, output_shape=None):
        """The sizes of the dims at a launch: `sizes` as given, completed from the inputs'
        `shapes` (and the output's), then checked against the ranges; ValueError naming what
        is missing or out of range. {} for a static set (which takes no sizes)."""
        known = dict(sizes or {})
        for name in known:
            if name not in self.dims:
                raise ValueError("%r is not a dim of the kernel (%s)" % (
                    name, ", ".join(self.dims) if self.dims else "it has none"))
        axes = []  # (names, extent, where)
        specs = [(self.inputs[i][0], shapes[i], "inputs[%d]" % i) for i in self._named]
        if output_shape is not None:
            specs.append((self.output[0], output_shape, "output"))
        for spec, shape, where in specs:
            if len(shape) == len(spec):
                axes.extend((x, int(e), "%s.shape[%d]" % (where, d))
                            for d, (x, e) in enumerate(zip(spec, shape)) if isinstance(x, tuple))
        progress = True
        while progress:
            progress = False
            for names, extent, where in axes:
                unknown = [n for n in names if n not in known]
                if len(unknown) != 1:
                    continue
                rest = 1
                for n in names:
                    if n in known:
                        rest *= known[n]
                # A size the other sizes do not divide is left to check() (its shape is wrong).
                if rest and extent % rest == 0:
                    known[unknown[0]] = extent // rest
                    progress = True
        missing = [n for n in self.dims if n not in known]
        if missing:
            hint = ["%s (%s = %d)" % (w, "*".join(names), e) for names, e, w in axes
                    if any(n in missing for n in names)]
            raise ValueError("the size of %s is not known from the tensors%s: pass sizes={%s}" % (
                " and ".join(missing), " (" + "; ".join(hint) + ")" if hint else "",
                ", ".join("%r: ..." % n for n in missing)))
        check_sizes(self.dims, known)
        return known

    def check(self, inputs, output=None, sizes=None):
        """The described inputs (and output) after every check; raises with a clear message."""
        return self._check(inputs, output, sizes)[0]

    def _check(self, inputs, output=None, sizes=None):
        """check()'s list, and the sizes of the dims ({} for a static set)."""
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ValueError("expected %d inputs (%s), got %d" % (
                len(self.inputs), ", ".join("%s %s" % (fmt_named(s), d) for s, d in self.inputs),
                len(inputs)))
        infos = [describe(t, "inputs[%d]" % i) for i, t in enumerate(inputs)]
        out_info = describe(output, "output") if output is not None else None
        if self.dims:
            sizes = self.infer_sizes([i.shape for i in infos], sizes,
                                     out_info.shape if out_info is not None else None)
        elif sizes:
            raise ValueError("sizes given, but the kernel takes none (its shapes are fixed)")
        else:
            sizes = {}
        checked = []
        for i, (info, (shape, dtype)) in enumerate(zip(infos, self.inputs)):
            check(info, bind_shape(shape, sizes), dtype, "inputs[%d]" % i)
            checked.append(("inputs[%d]" % i, info))
        if out_info is not None:
            check(out_info, bind_shape(self.output[0], sizes), self.output[1], "output")
            checked.append(("output", out_info))
        return checked, sizes

    def launch(self, inputs, output=None, stream=None, sizes=None):
        infos, sizes = self._check(inputs, output, sizes)
        device = same_device(infos)
        like_torch = any(i.obj is not None and type(i.obj).__module__.startswith("torch")
                         for _, i in infos)
        drv = _cuda.driver()
        drv.use_device(device)
        if output is None:
            output = new_tensor(bind_shape(self.output[0], sizes), self.output[1], device,
                                like_torch)
            infos.append(("output", describe(output, "output")))
        ls = self._loaded.get(device)
        if ls is None:
            ls = self._loaded[device] = LoadedSet(self.client, self.key, self._kernels, device)
        for what, info in infos:
            ls.bind("output" if what == "output" else "input" + what[7:-1], info.ptr)
        if sizes:
            ls.set_sizes(sizes)
        if self.workspace_bytes:
            ws = self._workspace.get(device)
            if ws is None:
                ws = self._workspace[device] = _alloc_bytes(self.workspace_bytes, device,
                                                            like_torch)
            ls.bind("workspace", _ptr(ws))
        ls(_cuda.stream_handle(stream, device))
        return output

    def grids(self, sizes=None):
        """Each kernel's grid at sizes (checked; none for a static set), as the launch uses."""
        sizes = dict(sizes or {})
        check_sizes(self.dims, sizes)
        return [launch_grid(grid, sizes) for _, grid, _, _, _ in self._kernels]


def fmt_named(shape):
    """"[n, 4096]", "[b*s, 768]": a named_spec shape for messages."""
    return "[" + ", ".join("*".join(x) if isinstance(x, tuple) else str(int(x)) for x in shape) + "]"


def _alloc_bytes(n, device, like_torch):
    """n bytes of device memory (256-byte aligned): a torch uint8 tensor or a DeviceBuffer."""
    torch = sys.modules.get("torch")
    if like_torch and torch is not None:
        return torch.empty(n, dtype=torch.uint8, device="cuda:%d" % device)
    return _cuda.DeviceBuffer(n, device)


def _ptr(buf):
    return buf.data_ptr() if hasattr(buf, "data_ptr") else buf.ptr
