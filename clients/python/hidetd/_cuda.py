"""hidetd._cuda - the few CUDA driver calls the runtime makes, through ctypes on libcuda.so.1:
the primary context of a device, modules from cubin or PTX, TMA tensor maps (tiled and im2col),
kernel launches (pointers, tensor maps and a dynamic op's `long long` sizes as parameters, its
grid set per launch), and device memory for callers without PyTorch.

The driver is loaded at first use, never at import, so the package imports (and its CPU tests
run) on machines without a GPU. $HIDETD_LIBCUDA names another library (tests use it to check
the message given when the driver is missing).
"""
import ctypes
import os
import sys
import threading

CUDA_SUCCESS = 0
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
# Shared memory above this needs the function attribute set before the launch (docs/api.md).
STATIC_SHARED_LIMIT = 48 * 1024
# sizeof(CUtensorMap) and the alignment the driver wants of the map it encodes.
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
# A tensor map's description (docs/api.md) -> the encoders' enum values (CUtensorMapDataType,
# CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill), the same for
# cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col.
TENSOR_MAP_DTYPES = {"f16": 6, "f32": 7, "bf16": 9, "f8e4m3": 0, "f8e5m2": 0}  # FP8 moves as UINT8
TENSOR_MAP_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
TENSOR_MAP_L2_PROMOTIONS = {0: 0, 64: 1, 128: 2, 256: 3}
TENSOR_MAP_OOB_FILLS = {"zero": 0, "nan": 1}
# The driver function that encodes a map of each mode (a description without "mode" is tiled).
TENSOR_MAP_ENCODERS = {"tiled": "cuTensorMapEncodeTiled", "im2col": "cuTensorMapEncodeIm2col"}


class CudaError(RuntimeError):
    """A CUDA driver call failed, or the driver cannot be loaded."""


_lock = threading.Lock()
_driver = None


def driver():
    """The process's Driver, loaded and initialised on first use."""
    global _driver
    with _lock:
        if _driver is None:
            _driver = Driver(os.environ.get("HIDETD_LIBCUDA") or "libcuda.so.1")
        return _driver


class Driver:
    def __init__(self, path):
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise CudaError("the CUDA driver (%s) cannot be loaded: %s; launching kernels needs "
                            "an NVIDIA GPU and its driver" % (path, e)) from None
        self.lib = lib
        vp, u32, i32, u64 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_uint64
        P = ctypes.POINTER
        sigs = {
            "cuInit": [u32],
            "cuGetErrorName": [i32, P(ctypes.c_char_p)],
            "cuGetErrorString": [i32, P(ctypes.c_char_p)],
            "cuDeviceGet": [P(i32), i32],
            "cuDeviceGetCount": [P(i32)],
            "cuDevicePrimaryCtxRetain": [P(vp), i32],
            "cuCtxGetCurrent": [P(vp)],
            "cuCtxSetCurrent": [vp],
            "cuModuleLoadData": [P(vp), vp],
            "cuModuleUnload": [vp],
            "cuModuleGetFunction": [P(vp), vp, ctypes.c_char_p],
            "cuFuncSetAttribute": [vp, i32, i32],
            "cuLaunchKernel": [vp, u32, u32, u32, u32, u32, u32, u32, vp, P(vp), P(vp)],
            "cuMemAlloc_v2": [P(u64), ctypes.c_size_t],
            "cuMemFree_v2": [u64],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, ctypes.c_size_t],
            "cuPointerGetAttribute": [vp, i32, u64],
            "cuStreamSynchronize": [vp],
            "cuCtxSynchronize": [],
        }
        for name, args in sigs.items():
            try:
                f = getattr(lib, name)
            except AttributeError:
                raise CudaError("the CUDA driver %s lacks %s (too old a driver?)" %
                                (path, name)) from None
            f.argtypes = args
            f.restype = ctypes.c_int
        # Drivers before CUDA 12 lack the encoders: kernels with tensor maps then fail to load,
        # the others run. Each is looked up on its own, so that a driver (or a stand-in) with
        # only one still runs the kernels whose maps it can encode.
        encoders = {
            "cuTensorMapEncodeTiled": [vp, i32, u32, vp, P(u64), P(u64), P(u32), P(u32),
                                       i32, i32, i32, i32],
            "cuTensorMapEncodeIm2col": [vp, i32, u32, vp, P(u64), P(u64), P(i32), P(i32), u32, u32,
                                        P(u32), i32, i32, i32, i32],
        }
        for name, args in encoders.items():
            f = getattr(lib, name, None)
            if f is not None:
                f.argtypes = args
                f.restype = ctypes.c_int
            encoders[name] = f
        self.tensor_map_encode = encoders["cuTensorMapEncodeTiled"]
        self.tensor_map_encode_im2col = encoders["cuTensorMapEncodeIm2col"]
        self._contexts = {}
        self.check(lib.cuInit(0), "cuInit")

    def error_text(self, r):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(r, ctypes.byref(name))
        self.lib.cuGetErrorString(r, ctypes.byref(text))
        return "%s (%s)" % ((name.value or b"CUDA error %d" % r).decode(),
                            (text.value or b"").decode())

    def check(self, r, what):
        if r != CUDA_SUCCESS:
            raise CudaError("%s failed: %s" % (what, self.error_text(r)))

    def use_device(self, ordinal):
        """Makes the primary context of device `ordinal` current on this thread (the context
        PyTorch and the CUDA runtime use) and returns it."""
        ctx = self._contexts.get(ordinal)
        if ctx is None:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet(%d)" % ordinal)
            c = ctypes.c_void_p()
            self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(c), dev),
                       "cuDevicePrimaryCtxRetain")
            ctx = self._contexts[ordinal] = c.value
        cur = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(cur)), "cuCtxGetCurrent")
        if cur.value != ctx:
            self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx

    def pointer_device(self, ptr):
        """The device ordinal of a device pointer; None when it is not device memory."""
        v = ctypes.c_int()
        r = self.lib.cuPointerGetAttribute(ctypes.byref(v), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           ptr)
        return v.value if r == CUDA_SUCCESS else None

    def load_module(self, image):
        """A module from cubin bytes or PTX text (NUL-terminated here) in the current context."""
        if isinstance(image, str):
            image = image.encode() + b"\0"
        buf = ctypes.create_string_buffer(image, len(image))
        m = ctypes.c_void_p()
        r = self.lib.cuModuleLoadData(ctypes.byref(m), buf)
        if r != CUDA_SUCCESS:
            return None, self.error_text(r)
        return m.value, None

    def function(self, module, name, shared_bytes):
        f = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(f), module, name.encode()),
                   "cuModuleGetFunction(%s)" % name)
        if shared_bytes > STATIC_SHARED_LIMIT:
            self.check(self.lib.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   shared_bytes),
                       "cuFuncSetAttribute(%s, max dynamic shared = %d)" % (name, shared_bytes))
        return f.value

    def synchronize(self, stream=0):
        self.check(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def tensor_map_encoder(self, tmap):
        """(name, function) of the driver's encoder for a tensor map's mode; the function is None
        when this driver lacks it."""
        if tmap.get("mode") == "im2col":
            return TENSOR_MAP_ENCODERS["im2col"], self.tensor_map_encode_im2col
        return TENSOR_MAP_ENCODERS["tiled"], self.tensor_map_encode

    def require_tensor_maps(self, what, tmaps):
        """Raises CudaError when this driver cannot encode one of `tmaps`, the tensor maps
        `what` takes."""
        for tmap in tmaps:
            name, encode = self.tensor_map_encoder(tmap)
            if encode is None:
                kind = "im2col tensor maps" if tmap.get("mode") == "im2col" else "tensor maps"
                raise CudaError("%s takes %s, and the CUDA driver lacks %s (it needs a CUDA 12 "
                                "driver or newer)" % (what, kind, name))

    def encode_tensor_map(self, tmap, address, into=None):
        """A tensor map's description (the "tensor_map" object of docs/api.md, checked) encoded
        for the buffer at device address `address`, into `into` or a new TensorMap, with the
        encoder of its mode."""
        self.require_tensor_maps("the kernel", (tmap,))
        name, encode = self.tensor_map_encoder(tmap)
        tm = into if into is not None else TensorMap()
        rank = len(tmap["dims"])
        u64s, u32s = ctypes.c_uint64 * rank, ctypes.c_uint32 * rank
        # The encoders read rank - 1 strides (and rank - 2 corners); the arrays hold the map's.
        head = (tm.address, TENSOR_MAP_DTYPES[tmap["dtype"]], rank, address, u64s(*tmap["dims"]),
                u64s(*tmap["strides"]))
        tail = (u32s(*tmap["element_strides"]),
                0,  # CU_TENSOR_MAP_INTERLEAVE_NONE: the only interleave docs/api.md allows
                TENSOR_MAP_SWIZZLES[tmap["swizzle"]], TENSOR_MAP_L2_PROMOTIONS[tmap["l2_promotion"]],
                TENSOR_MAP_OOB_FILLS[tmap["oob_fill"]])
        if tmap.get("mode") == "im2col":
            corners = ctypes.c_int * (rank - 2)
            r = encode(*head, corners(*tmap["lower_corner"]), corners(*tmap["upper_corner"]),
                       tmap["channels_per_pixel"], tmap["pixels_per_column"], *tail)
            what = "corners %s..%s, %d channels x %d pixels" % (
                tmap["lower_corner"], tmap["upper_corner"], tmap["channels_per_pixel"],
                tmap["pixels_per_column"])
        else:
            r = encode(*head, u32s(*tmap["box"]), *tail)
            what = "box %s" % (tmap["box"],)
        if r != CUDA_SUCCESS:
            raise CudaError("%s(%s %s, strides %s, %s, for 0x%x) failed: %s" %
                            (name, tmap["dtype"], tmap["dims"], tmap["strides"], what, address,
                             self.error_text(r)))
        tm.encoded_for = address
        return tm


class TensorMap:
    """An encoded CUtensorMap: TENSOR_MAP_BYTES at a TENSOR_MAP_ALIGN-aligned address (ctypes
    aligns a buffer for C's types only, so it is over-allocated), usable as a kernelParams
    entry: the driver copies the 128 bytes into the parameter, which the kernel takes by value.
    encoded_for is the device address it was encoded for (None before the first encoding)."""

    def __init__(self):
        self._buf = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN - 1)
        base = ctypes.addressof(self._buf)
        self.address = (base + TENSOR_MAP_ALIGN - 1) // TENSOR_MAP_ALIGN * TENSOR_MAP_ALIGN
        self.encoded_for = None

    def raw(self):
        """The 128 bytes, for launchers that pass parameters by value themselves (CuPy)."""
        return ctypes.string_at(self.address, TENSOR_MAP_BYTES)


def tensor_map_at(tmap, sizes):
    """A tensor map's description at a dynamic op's sizes ({name: int}): each dimension that
    follows named dims (its "sym" entry (names, coef), docs/api.md "Named dimensions") becomes
    coef times the product of their sizes, "sym" left out; a map without "sym" as it is.
    ValueError when a dimension leaves 1..2^32."""
    sym = tmap.get("sym")
    if not sym:
        return tmap
    out = {m: v for m, v in tmap.items() if m != "sym"}
    dims = list(tmap["dims"])
    for d, follows in enumerate(sym):
        if follows is None:
            continue
        names, coef = follows
        v = coef
        for n in names:
            v *= sizes[n]
        if not 1 <= v <= 1 << 32:
            raise ValueError("a tensor map's dimension %d is %d elements at %s, outside 1..2^32" %
                             (d, v, ", ".join("%s = %d" % (n, sizes[n]) for n in names)))
        dims[d] = v
    out["dims"] = dims
    return out


# Encodings a Launch keeps per symbolic map (one per buffer address and sizes) before it starts
# over: a serving loop sees few of each.
TENSOR_MAP_CACHE = 64


class Launch:
    """One kernel of a kernel set, ready to launch: its function, grid, block, shared memory
    and a parameter block whose pointer slots are filled per run. A tensor-map parameter's slot
    holds its buffer's address too; the map is encoded for that address at the launch and again
    only when the address changes, and kernelParams points to the map's 128 bytes."""

    def __init__(self, drv, func, grid, block, shared, n_params, name, maps=()):
        self.drv = drv
        self.func = func
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.shared = int(shared)
        self.name = name
        self._launch = drv.lib.cuLaunchKernel
        self.dims = self.grid + self.block + (self.shared,)
        self.values = (ctypes.c_uint64 * max(n_params, 1))()
        base = ctypes.addressof(self.values)
        self.argv = (ctypes.c_void_p * max(n_params, 1))(*[base + 8 * i for i in range(max(n_params, 1))])
        self.maps = []  # (parameter index, description, TensorMap)
        self.sym_maps = []  # (parameter index, description following the sizes, {key: TensorMap})
        self.sizes = {}  # the sizes the symbolic maps are encoded at (set_sizes)
        drv.require_tensor_maps("kernel " + name, [tmap for _, tmap in maps])
        for index, tmap in maps:
            if tmap.get("sym"):
                self.sym_maps.append((index, tmap, {}))
                continue
            tm = TensorMap()
            self.argv[index] = tm.address
            self.maps.append((index, tmap, tm))

    def __setitem__(self, index, value):
        """A parameter's 8 bytes: a device pointer, or a dynamic op's size (an "int" parameter,
        a `long long` passed by value; sizes are positive, so the unsigned slot holds its bits)."""
        self.values[index] = value

    def set_grid(self, grid):
        """The grid of the next launches (a dynamic op's, from its rules at the launch's sizes)."""
        self.grid = tuple(int(g) for g in grid)
        self.dims = self.grid + self.block + (self.shared,)

    def set_sizes(self, sizes):
        """The sizes of the next launches: the maps that follow them are encoded at them."""
        self.sizes = dict(sizes)

    def __call__(self, stream):
        for index, tmap, tm in self.maps:
            if tm.encoded_for != self.values[index]:
                self.drv.encode_tensor_map(tmap, self.values[index], tm)
        # A map that follows the sizes: one encoding per (address, sizes), kept for the next
        # launch at them (kernelParams then points at that one's 128 bytes).
        for index, tmap, encoded in self.sym_maps:
            address = self.values[index]
            key = (address, tuple(sorted(self.sizes.items())))
            tm = encoded.get(key)
            if tm is None:
                if len(encoded) >= TENSOR_MAP_CACHE:
                    encoded.clear()
                tm = encoded[key] = self.drv.encode_tensor_map(tensor_map_at(tmap, self.sizes), address)
            self.argv[index] = tm.address
        r = self._launch(self.func, *self.dims, stream, self.argv, None)
        if r != CUDA_SUCCESS:
            raise CudaError("cuLaunchKernel(%s, grid %s, block %s, %d bytes shared) failed: %s" %
                            (self.name, list(self.grid), list(self.block), self.shared,
                             self.drv.error_text(r)))


class DeviceBuffer:
    """Device memory from cuMemAlloc, for callers without PyTorch; exposes
    __cuda_array_interface__ (so CuPy, Numba, ... can read it) when given a shape and dtype."""

    def __init__(self, nbytes, device, shape=None, typestr="|u1"):
        self.drv = driver()
        self.device = device
        self.nbytes = int(nbytes)
        self.drv.use_device(device)
        p = ctypes.c_uint64()
        self.drv.check(self.drv.lib.cuMemAlloc_v2(ctypes.byref(p), max(self.nbytes, 1)),
                       "cuMemAlloc(%d bytes)" % self.nbytes)
        self.ptr = p.value
        self.shape = tuple(shape) if shape is not None else (self.nbytes,)
        self.typestr = typestr

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr and not sys.is_finalizing():
            try:
                self.drv.use_device(self.device)
                self.drv.lib.cuMemFree_v2(ptr)
            except Exception:  # a destructor must not raise
                pass


def stream_handle(stream, device):
    """The CUstream to launch on: `stream` as given (an int handle, or an object with
    .cuda_stream like torch.cuda.Stream, or .ptr like cupy's), else PyTorch's current stream of
    the device when PyTorch is loaded, else the legacy default stream (0)."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and device is not None and torch.cuda.is_initialized():
            return torch.cuda.current_stream(device).cuda_stream
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError("stream must be an int CUstream handle or a stream object with .cuda_stream "
                    "or .ptr, got %s" % type(stream).__name__)
