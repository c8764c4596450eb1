"""hidetd.kernel - a kernel set (docs/api.md) made launchable: the launch contract read and
checked once, the module loaded once per device, the caller's tensors checked against the
request on every launch, and every kernel of the set launched in order on one stream.
"""
import re
import sys

from . import _cuda
from ._tensor import DTYPES, _what, check, describe, fmt_shape, nbytes

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


def parse_tensor_map(t, where):
    """A "tensor_map" parameter's description, checked as strictly as the daemon checks it
    (op/tmap.c: no unknown member, every member of its mode present, only what its encoder,
    cuTensorMapEncodeTiled or cuTensorMapEncodeIm2col, accepts for a 16-byte aligned address),
    as a new dict in the form the daemon writes ("mode" only in an im2col map); PlanError
    naming the member otherwise."""
    if not isinstance(t, dict):
        raise PlanError("%s: a tensor map must be an object, got %r" % (where, t))
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


def tensor_map_reach(kernels):
    """{buffer name: the largest tensor_map_extent of its maps} over parse_kernel_set's
    kernels."""
    reach = {}
    for _, _, _, _, params in kernels:
        for _, buf, tmap in params:
            if tmap is not None:
                reach[buf] = max(reach.get(buf, 0), tensor_map_extent(tmap))
    return reach


def parse_kernel_set(ks, n_inputs, where):
    """The kernels of a kernel set as (name, grid, block, shared, [(param index, buffer,
    tensor map description or None for a pointer)]), checked against the launch contract;
    PlanError naming `where`'s field otherwise."""
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
            if dim3[f] is None or not all(x is not None and x >= 1 for x in dim3[f]):
                raise PlanError("%s.%s: expected three positive integers, got %r" % (kw, f, v))
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
            if ptype not in ("pointer", "tensor_map"):
                raise PlanError("%s.type: %r is not a parameter kind this client can pass "
                                "(pointer, tensor_map)" % (pw, ptype))
            m = _INPUT_RE.match(buf) if isinstance(buf, str) else None
            if m and int(m.group(1)) >= n_inputs:
                raise PlanError("%s.buffer: %r, but the request has %d inputs" % (pw, buf, n_inputs))
            if not m and buf not in ("output", "workspace"):
                raise PlanError("%s.buffer: expected input<i>, output or workspace, got %r" % (pw, buf))
            if buf == "workspace" and ws == 0:
                raise PlanError("%s.buffer: a workspace parameter, but workspace_bytes is 0" % pw)
            tmap = (parse_tensor_map(p.get("tensor_map"), pw + ".tensor_map")
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
        self.slots = {}  # buffer name -> [(Launch, param index)]
        for name, grid, block, shared, params in kernels:
            maps = [(idx, tmap) for idx, _, tmap in params if tmap is not None]
            ln = _cuda.Launch(drv, drv.function(module, name, shared), grid, block, shared,
                              len(params), name, maps)
            self.launches.append(ln)
            for idx, buf, _ in params:
                self.slots.setdefault(buf, []).append((ln, idx))

    def bind(self, buf, ptr):
        for ln, idx in self.slots.get(buf, ()):
            ln[idx] = ptr

    def __call__(self, stream):
        for ln in self.launches:
            ln(stream)


def new_tensor(shape, dtype, device, like_torch):
    """An output tensor: torch.empty when PyTorch is in use, else a DeviceBuffer."""
    torch = sys.modules.get("torch")
    if like_torch and torch is not None:
        td = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
              "i32": torch.int32, "i64": torch.int64}[dtype]
        return torch.empty(shape, dtype=td, device="cuda:%d" % device)
    if DTYPES[dtype][1] is None:
        raise TypeError("cannot allocate a %s output without PyTorch (__cuda_array_interface__ "
                        "has no bfloat16); pass output=" % dtype)
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
    dtype, device, contiguity); the workspace is allocated once per device."""

    def __init__(self, client, kernel_set, request):
        self.client = client
        self.kernel_set = kernel_set
        self.request = request
        ins = request.get("inputs") if isinstance(request, dict) else None
        if not isinstance(ins, list) or not ins:
            raise PlanError("request.inputs: expected a non-empty list")
        self.inputs = [tensor_spec(t, "request.inputs[%d]" % i) for i, t in enumerate(ins)]
        self.output = tensor_spec(kernel_set.get("output"), "kernel_set.output")
        self.key, self.workspace_bytes, self._kernels = parse_kernel_set(
            kernel_set, len(self.inputs), "kernel_set")
        # The tensors bound are exactly the request's (launch() checks their shapes), so a map
        # reaching past one is the kernel set's fault.
        sizes = {"input%d" % i: nbytes(*spec) for i, spec in enumerate(self.inputs)}
        sizes.update(output=nbytes(*self.output), workspace=self.workspace_bytes)
        for buf, reach in sorted(tensor_map_reach(self._kernels).items()):
            if reach > sizes[buf]:
                raise PlanError("kernel_set: %s has %d bytes, too few for the tensor map of %s "
                                "(%d bytes)" % (buf, sizes[buf], buf, reach))
        self._loaded = {}     # device -> LoadedSet
        self._workspace = {}  # device -> tensor

    def __repr__(self):
        return "<hidetd.Kernel %s %s -> %s %s>" % (
            self.kernel_set.get("op"), ", ".join("%s %s" % (fmt_shape(s), d) for s, d in self.inputs),
            fmt_shape(self.output[0]), self.output[1])

    def __call__(self, *inputs, output=None, stream=None):
        return self.launch(inputs, output=output, stream=stream)

    def check(self, inputs, output=None):
        """The described inputs (and output) after every check; raises with a clear message."""
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ValueError("expected %d inputs (%s), got %d" % (
                len(self.inputs), ", ".join("%s %s" % (fmt_shape(s), d) for s, d in self.inputs),
                len(inputs)))
        infos = []
        for i, (t, (shape, dtype)) in enumerate(zip(inputs, self.inputs)):
            info = describe(t, "inputs[%d]" % i)
            check(info, shape, dtype, "inputs[%d]" % i)
            infos.append(("inputs[%d]" % i, info))
        if output is not None:
            info = describe(output, "output")
            check(info, self.output[0], self.output[1], "output")
            infos.append(("output", info))
        return infos

    def launch(self, inputs, output=None, stream=None):
        infos = self.check(inputs, output)
        device = same_device(infos)
        like_torch = any(i.obj is not None and type(i.obj).__module__.startswith("torch")
                         for _, i in infos)
        drv = _cuda.driver()
        drv.use_device(device)
        if output is None:
            output = new_tensor(self.output[0], self.output[1], device, like_torch)
            infos.append(("output", describe(output, "output")))
        ls = self._loaded.get(device)
        if ls is None:
            ls = self._loaded[device] = LoadedSet(self.client, self.key, self._kernels, device)
        for what, info in infos:
            ls.bind("output" if what == "output" else "input" + what[7:-1], info.ptr)
        if self.workspace_bytes:
            ws = self._workspace.get(device)
            if ws is None:
                ws = self._workspace[device] = _alloc_bytes(self.workspace_bytes, device,
                                                            like_torch)
            ls.bind("workspace", _ptr(ws))
        ls(_cuda.stream_handle(stream, device))
        return output


def _alloc_bytes(n, device, like_torch):
    """n bytes of device memory (256-byte aligned): a torch uint8 tensor or a DeviceBuffer."""
    torch = sys.modules.get("torch")
    if like_torch and torch is not None:
        return torch.empty(n, dtype=torch.uint8, device="cuda:%d" % device)
    return _cuda.DeviceBuffer(n, device)


def _ptr(buf):
    return buf.data_ptr() if hasattr(buf, "data_ptr") else buf.ptr
