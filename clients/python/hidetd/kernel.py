"""hidetd.kernel - a kernel set (docs/api.md) made launchable: the launch contract read and
checked once, the module loaded once per device, the caller's tensors checked against the
request on every launch, and every kernel of the set launched in order on one stream.
"""
import re
import sys

from . import _cuda
from ._tensor import DTYPES, _what, check, describe, fmt_shape, nbytes

_INPUT_RE = re.compile(r"^input(0|[1-9][0-9]*)$")


class PlanError(ValueError):
    """A kernel set or plan that does not follow docs/api.md / docs/graphs.md (a daemon bug or a
    hand-edited file): names the field at fault."""


def tensor_spec(t, where):
    """(shape tuple, dtype) of a {"shape", "dtype"} object, checked."""
    if not isinstance(t, dict):
        raise PlanError("%s: expected an object with shape and dtype, got %r" % (where, t))
    shape, dtype = t.get("shape"), t.get("dtype")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 1 for d in shape):
        raise PlanError("%s.shape: expected a list of positive integers, got %r" % (where, shape))
    if dtype not in DTYPES:
        raise PlanError("%s.dtype: expected one of %s, got %r" % (where, ", ".join(DTYPES), dtype))
    return tuple(shape), dtype


def parse_kernel_set(ks, n_inputs, where):
    """The kernels of a kernel set as (name, grid, block, shared, [(param index, buffer)]),
    checked against the launch contract; PlanError naming `where`'s field otherwise."""
    if not isinstance(ks, dict):
        raise PlanError("%s: expected a kernel set object" % where)
    key = ks.get("key")
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{64}", key):
        raise PlanError("%s.key: expected 64 lowercase hex characters, got %r" % (where, key))
    ws = ks.get("workspace_bytes", 0)
    if not isinstance(ws, int) or ws < 0:
        raise PlanError("%s.workspace_bytes: expected a non-negative integer, got %r" % (where, ws))
    kernels = ks.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        raise PlanError("%s.kernels: expected a non-empty list" % where)
    out = []
    for i, k in enumerate(kernels):
        kw = "%s.kernels[%d]" % (where, i)
        if not isinstance(k, dict) or not isinstance(k.get("name"), str) or not k["name"]:
            raise PlanError("%s.name: missing" % kw)
        for f in ("grid", "block"):
            v = k.get(f)
            if not isinstance(v, list) or len(v) != 3 or not all(isinstance(x, int) and x >= 1 for x in v):
                raise PlanError("%s.%s: expected three positive integers, got %r" % (kw, f, v))
        shared = k.get("shared_bytes", 0)
        if not isinstance(shared, int) or shared < 0:
            raise PlanError("%s.shared_bytes: expected a non-negative integer, got %r" % (kw, shared))
        params = k.get("params")
        if not isinstance(params, list):
            raise PlanError("%s.params: expected a list" % kw)
        ps, seen = [], set()
        for j, p in enumerate(params):
            pw = "%s.params[%d]" % (kw, j)
            idx, buf = (p.get("index"), p.get("buffer")) if isinstance(p, dict) else (None, None)
            if not isinstance(idx, int) or not 0 <= idx < len(params) or idx in seen:
                raise PlanError("%s.index: expected a distinct index below %d, got %r" %
                                (pw, len(params), idx))
            seen.add(idx)
            if p.get("type", "pointer") != "pointer":
                raise PlanError("%s.type: only pointer parameters are known, got %r" % (pw, p.get("type")))
            m = _INPUT_RE.match(buf) if isinstance(buf, str) else None
            if m and int(m.group(1)) >= n_inputs:
                raise PlanError("%s.buffer: %r, but the request has %d inputs" % (pw, buf, n_inputs))
            if not m and buf not in ("output", "workspace"):
                raise PlanError("%s.buffer: expected input<i>, output or workspace, got %r" % (pw, buf))
            if buf == "workspace" and ws == 0:
                raise PlanError("%s.buffer: a workspace parameter, but workspace_bytes is 0" % pw)
            ps.append((idx, buf))
        out.append((k["name"], k["grid"], k["block"], shared, ps))
    return key, ws, out


class LoadedSet:
    """A kernel set's kernels as Launch objects on one device, with the parameter slots each
    buffer name fills."""

    def __init__(self, client, key, kernels, device):
        drv = _cuda.driver()
        drv.use_device(device)
        module = client._module(key, device)
        self.launches = []
        self.slots = {}  # buffer name -> [(Launch, param index)]
        for name, grid, block, shared, params in kernels:
            ln = _cuda.Launch(drv, drv.function(module, name, shared), grid, block, shared,
                              len(params), name)
            self.launches.append(ln)
            for idx, buf in params:
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
        td = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
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
