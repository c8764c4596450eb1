"""hidetd._tensor - what the runtime needs to know of a tensor it is given (device pointer, shape,
dtype, device, contiguity), read from a PyTorch tensor or from __cuda_array_interface__
(CuPy, Numba, JAX, ...), and the checks against what a kernel set or plan expects.

torch is never imported here: a tensor is recognised by its type's module, so a caller without
PyTorch never pays for it.
"""
import sys

# dtype name of the API -> (element bytes, __cuda_array_interface__ typestr or None). i32 and
# i64 are inputs only (gather's ids, a mask converted by a cast): token ids as torch.int64.
# f8e4m3 and f8e5m2 (FP8 matmul operands) have no array-interface typestr of their own.
DTYPES = {"f16": (2, "<f2"), "bf16": (2, None), "f32": (4, "<f4"), "i32": (4, "<i4"), "i64": (8, "<i8"),
          "f8e4m3": (1, None), "f8e5m2": (1, None)}
_TORCH_DTYPES = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
                 "torch.int32": "i32", "torch.int64": "i64",
                 "torch.float8_e4m3fn": "f8e4m3", "torch.float8_e5m2": "f8e5m2"}
_TYPESTRS = {"<f2": "f16", "<f4": "f32", "|f2": "f16", "|f4": "f32", "<i4": "i32", "<i8": "i64"}
# ml_dtypes and some frameworks write bfloat16 as a 2-byte void with this descr name.
_BF16_DESCR = ("bfloat16", "<V2")


class TensorInfo:
    __slots__ = ("ptr", "shape", "dtype", "device", "contiguous", "obj")

    def __init__(self, ptr, shape, dtype, device, contiguous, obj):
        self.ptr = ptr
        self.shape = shape
        self.dtype = dtype        # "f16", "bf16", "f32", "i32", "i64", "f8e4m3", "f8e5m2" or the foreign name ("torch.uint8", "<u1")
        self.device = device      # CUDA ordinal, None when only the driver can tell
        self.contiguous = contiguous
        self.obj = obj

    def describe(self):
        return "%s %s" % (fmt_shape(self.shape), self.dtype)


def fmt_shape(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def is_torch_tensor(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _what(what):
    # `what` is a name, or (kind, name) formatted only when an error needs it: run() describes
    # every tensor on every call, and the message is rarely wanted.
    return "%s[%r]" % what if isinstance(what, tuple) else what


def describe(obj, what):
    """TensorInfo of obj; TypeError/ValueError naming `what` when it is no CUDA tensor."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cuda":
            raise ValueError("%s: expected a CUDA tensor, got a tensor on %s" % (_what(what), obj.device))
        dtype = _TORCH_DTYPES.get(str(obj.dtype), str(obj.dtype))
        return TensorInfo(obj.data_ptr(), tuple(obj.shape), dtype, obj.device.index,
                          obj.is_contiguous(), obj)
    return _describe_cai(obj, _what(what))


def _describe_cai(obj, what):
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError("%s: expected a CUDA tensor (torch.Tensor on a CUDA device, or an object "
                        "with __cuda_array_interface__), got %s" % (what, type(obj).__name__))
    try:
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        ptr = int(cai["data"][0])
    except (KeyError, TypeError, ValueError, IndexError):
        raise ValueError("%s: malformed __cuda_array_interface__ %r" % (what, cai)) from None
    dtype = _TYPESTRS.get(typestr, typestr)
    descr = cai.get("descr")
    if typestr.endswith("V2") and descr and any(_BF16_DESCR[0] in str(d) for d in descr):
        dtype = "bf16"
    contiguous = True
    strides = cai.get("strides")
    if strides is not None:
        size = int(typestr[2:]) if typestr[2:].isdigit() else 1
        expect, acc = [], size
        for d in reversed(shape):
            expect.append(acc)
            acc *= d
        expect.reverse()
        # Strides of size-1 dimensions do not matter.
        contiguous = all(s == e or d == 1 for s, e, d in zip(strides, expect, shape))
    return TensorInfo(ptr, shape, dtype, None, contiguous, obj)


def check(info, shape, dtype, what):
    """Raises ValueError "inputs[1]: expected shape [64, 256] f16, got [64, 128] f16" when info
    does not match, or names the contiguity problem."""
    if info.shape == shape and info.dtype == dtype and info.contiguous:
        return
    what = _what(what)
    if tuple(info.shape) != tuple(shape) or info.dtype != dtype:
        raise ValueError("%s: expected shape %s %s, got %s" %
                         (what, fmt_shape(shape), dtype, info.describe()))
    if not info.contiguous:
        raise ValueError("%s: expected a contiguous (row-major, dense) tensor of shape %s; call "
                         ".contiguous() on it first" % (what, fmt_shape(shape)))


def nbytes(shape, dtype):
    n = DTYPES[dtype][0]
    for d in shape:
        n *= int(d)
    return n
