"""hidetd.plan - a launch plan (docs/graphs.md) made runnable: the plan parsed and checked once
(every binding resolved to a caller tensor or an arena/constants offset), the arena allocated
once per device, weights bound and the prepare steps run by load_weights(), and the steps
launched in order on one stream by run(). A tensor-map parameter is encoded for its buffer's
address at the first launch and again only when that address changes (hidetd._cuda.Launch).
"""
import sys

from . import _cuda
from ._tensor import check, describe, fmt_shape, nbytes
from .kernel import (LoadedSet, PlanError, _alloc_bytes, _ptr, new_tensor, parse_kernel_set,
                     same_device, tensor_map_reach, tensor_spec, whole_number)

ARENA_ALIGN = 256


class Step:
    """One step of a plan: its kernel set and, per buffer name, where the pointer comes from:
    ("input"|"weight"|"output", name) or ("arena"|"constants", offset)."""

    def __init__(self, where, nodes, key, workspace_bytes, kernels, sources):
        self.where = where
        self.nodes = nodes
        self.key = key
        self.workspace_bytes = workspace_bytes
        self.kernels = kernels
        self.sources = sources


class Plan:
    """plan.load_weights({name: tensor}) once, then plan(x=...) or plan.run({"x": ...},
    outputs=None, stream=None) -> {output name: tensor} on every forward pass."""

    def __init__(self, client, plan):
        self.client = client
        self.json = plan
        if not isinstance(plan, dict):
            raise PlanError("plan: expected a JSON object")
        self.graph_key = plan.get("graph_key")
        self.inputs = self._specs(plan, "inputs")
        self.weights = self._specs(plan, "weights", optional=True)
        self.outputs = self._specs(plan, "outputs")
        self.arena_bytes = self._size(plan, "arena_bytes")
        self.constants_bytes = self._size(plan, "constants_bytes")
        self.buffers = {}
        for i, b in enumerate(plan.get("buffers") or []):
            self._buffer(b, "buffers[%d]" % i)
        self.prepare = [self._step(s, "prepare[%d]" % i, prepare=True)
                        for i, s in enumerate(plan.get("prepare") or [])]
        if not isinstance(plan.get("steps"), list) or not plan["steps"]:
            raise PlanError("steps: expected a non-empty list")
        self.steps = [self._step(s, "steps[%d]" % i, prepare=False)
                      for i, s in enumerate(plan["steps"])]
        self.device = None
        self._arena = None
        self._constants = None
        self._weights = None   # name -> (tensor, ptr)
        self._loaded = {}      # step where -> LoadedSet
        self._like_torch = False

    # ---- parsing -------------------------------------------------------------------------

    @staticmethod
    def _size(plan, field):
        v = whole_number(plan.get(field, 0))
        if v is None or v < 0:
            raise PlanError("%s: expected a non-negative integer, got %r" % (field, plan.get(field)))
        return v

    @staticmethod
    def _specs(plan, field, optional=False):
        v = plan.get(field)
        if v is None and optional:
            return {}
        if not isinstance(v, list) or (not v and not optional):
            raise PlanError("%s: expected a non-empty list" % field)
        out = {}
        for i, t in enumerate(v):
            name = t.get("name") if isinstance(t, dict) else None
            if not isinstance(name, str) or not name:
                raise PlanError("%s[%d].name: missing" % (field, i))
            if name in out:
                raise PlanError("%s[%d].name: %r is listed twice" % (field, i, name))
            out[name] = tensor_spec(t, "%s[%d]" % (field, i))
        return out

    def _buffer(self, b, where):
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            raise PlanError("%s.name: missing" % where)
        name, region = b["name"], b.get("region")
        if name in self.buffers or name in self.inputs or name in self.weights or name in self.outputs:
            raise PlanError("%s.name: %r is already the name of another tensor of the plan" % (where, name))
        if region not in ("arena", "constants"):
            raise PlanError("%s.region: expected \"arena\" or \"constants\", got %r" % (where, region))
        off, size = whole_number(b.get("offset")), whole_number(b.get("bytes"))
        if off is None or off < 0 or off % ARENA_ALIGN:
            raise PlanError("%s.offset: expected a non-negative multiple of %d, got %r" %
                            (where, ARENA_ALIGN, b.get("offset")))
        if size is None or size < 0:
            raise PlanError("%s.bytes: expected a non-negative integer, got %r" % (where, b.get("bytes")))
        limit = self.arena_bytes if region == "arena" else self.constants_bytes
        if off + size > limit:
            raise PlanError("%s: [%d, %d) lies outside the %s (%s_bytes = %d)" %
                            (where, off, off + size, region, region, limit))
        if "shape" in b:
            shape, dtype = tensor_spec(b, where)
            if nbytes(shape, dtype) > size:
                raise PlanError("%s: %s %s needs %d bytes, the buffer has %d" %
                                (where, fmt_shape(shape), dtype, nbytes(shape, dtype), size))
        self.buffers[name] = (region, off, size)

    def _bytes_of(self, name):
        """Bytes of the memory a name binds (caller tensors by their spec)."""
        for d in (self.inputs, self.weights, self.outputs):
            if name in d:
                return nbytes(*d[name])
        return self.buffers[name][2]

    def _step(self, s, where, prepare):
        if not isinstance(s, dict):
            raise PlanError("%s: expected an object" % where)
        req = s.get("request")
        if not isinstance(req, dict) or not isinstance(req.get("inputs"), list):
            raise PlanError("%s.request.inputs: missing" % where)
        ins = [tensor_spec(t, "%s.request.inputs[%d]" % (where, i)) for i, t in enumerate(req["inputs"])]
        ks = s.get("kernel_set")
        key, ws, kernels = parse_kernel_set(ks, len(ins), where + ".kernel_set")
        out = tensor_spec(ks.get("output"), where + ".kernel_set.output")
        bindings = s.get("bindings")
        if not isinstance(bindings, dict):
            raise PlanError("%s.bindings: expected an object" % where)
        needed = {buf for _, _, _, _, ps in kernels for _, buf, _ in ps}
        reach = tensor_map_reach(kernels)
        sources = {}
        for buf in sorted(needed):
            name = bindings.get(buf)
            bw = "%s.bindings.%s" % (where, buf)
            if not isinstance(name, str):
                raise PlanError("%s: the kernel reads %s, but the step binds nothing to it" % (bw, buf))
            if name in self.inputs:
                src = ("input", name)
            elif name in self.weights:
                src = ("weight", name)
            elif name in self.outputs:
                src = ("output", name)
            elif name in self.buffers:
                src = self.buffers[name][:2]
            else:
                raise PlanError("%s: %r names no input, weight, output or buffer of the plan" % (bw, name))
            if prepare and src[0] in ("input", "output", "arena"):
                raise PlanError("%s: a prepare step may read weights and write constants only, "
                                "but it binds %s %r" % (bw, src[0], name))
            if buf == "output":
                need, what = nbytes(*out), "its output %s %s" % (fmt_shape(out[0]), out[1])
                if src[0] in ("input", "weight"):
                    raise PlanError("%s: the step writes %s, a caller's %s" % (bw, name, src[0]))
            elif buf == "workspace":
                need, what = ws, "a workspace of %d bytes" % ws
            else:
                i = int(buf[5:])
                need, what = nbytes(*ins[i]), "%s %s %s" % (buf, fmt_shape(ins[i][0]), ins[i][1])
            if reach.get(buf, 0) > need:
                # The copy engine must not reach past the bound buffer either.
                need, what = reach[buf], "the tensor map of %s (%d bytes)" % (buf, reach[buf])
            if self._bytes_of(name) < need:
                raise PlanError("%s: %r has %d bytes, too few for %s" %
                                (bw, name, self._bytes_of(name), what))
            sources[buf] = src
        nodes = s.get("nodes") if isinstance(s.get("nodes"), list) else []
        return Step(where, nodes, key, ws, kernels, sources)

    # ---- running -------------------------------------------------------------------------

    def __repr__(self):
        return "<hidetd.Plan %d steps (%d prepare), inputs %s, outputs %s, arena %d bytes>" % (
            len(self.steps), len(self.prepare), ", ".join(self.inputs), ", ".join(self.outputs),
            self.arena_bytes)

    def _describe_all(self, given, specs, kind, strict=True):
        if not isinstance(given, dict):
            raise TypeError("%s must be a dict of name -> tensor, got %s" % (kind, type(given).__name__))
        unknown = [n for n in given if n not in specs]
        if unknown and strict:
            raise ValueError("unknown %s %r; the plan's %s are: %s" % (
                kind[:-1], unknown[0], kind, ", ".join(specs) or "(none)"))
        missing = [n for n in specs if n not in given]
        if missing:
            n = missing[0]
            raise ValueError("missing %s %r (%s %s)" % (kind[:-1], n, fmt_shape(specs[n][0]), specs[n][1]))
        infos = {}
        for n, (shape, dtype) in specs.items():
            what = (kind, n)
            info = describe(given[n], what)
            check(info, shape, dtype, what)
            infos[n] = (what, info)
        return infos

    def _setup(self, device, like_torch):
        """Binds the plan to a device: the arena (once) and every step's module."""
        if self.device is None:
            self.device = device
            self._like_torch = like_torch
            drv = _cuda.driver()
            drv.use_device(device)
            self._arena = _alloc_bytes(self.arena_bytes, device, like_torch) if self.arena_bytes else None
            for st in self.prepare + self.steps:
                ls = self._loaded[st.where] = LoadedSet(self.client, st.key, st.kernels, device)
                for buf, src in st.sources.items():
                    if src[0] == "arena":
                        ls.bind(buf, _ptr(self._arena) + src[1])
            # What run() fills on every call, flattened: (parameter block, slot, name).
            self._input_slots, self._output_slots, self._launches = [], [], []
            for st in self.steps:
                ls = self._loaded[st.where]
                self._launches.extend(ls.launches)
                for buf, src in st.sources.items():
                    if src[0] in ("input", "output"):
                        slots = self._input_slots if src[0] == "input" else self._output_slots
                        slots.extend((ln.values, idx, src[1]) for ln, idx in ls.slots.get(buf, ()))
        elif device != self.device:
            raise ValueError("this plan runs on cuda:%d (its arena is there); got tensors on "
                             "cuda:%d" % (self.device, device))

    def load_weights(self, weights, stream=None, strict=True):
        """Binds the weights (kept referenced: the plan reads them on every run), allocates the
        constants once and runs the prepare steps on the stream. strict=False ignores names the
        plan does not know (a state_dict's extra entries)."""
        infos = self._describe_all(weights, self.weights, "weights", strict)
        device = same_device(infos.values()) if infos else None
        if device is None:
            raise ValueError("the plan has no weights to load")
        like_torch = any(type(i.obj).__module__.startswith("torch") for _, i in infos.values())
        self._setup(device, like_torch)
        if self.constants_bytes and self._constants is None:
            self._constants = _alloc_bytes(self.constants_bytes, device, like_torch)
        self._weights = {n: (i.obj, i.ptr) for n, (_, i) in infos.items()}
        for st in self.prepare + self.steps:
            ls = self._loaded[st.where]
            for buf, src in st.sources.items():
                if src[0] == "weight":
                    ls.bind(buf, self._weights[src[1]][1])
                elif src[0] == "constants":
                    ls.bind(buf, _ptr(self._constants) + src[1])
        h = _cuda.stream_handle(stream, device)
        for st in self.prepare:
            self._loaded[st.where](h)

    def __call__(self, stream=None, **inputs):
        return self.run(inputs, stream=stream)

    def runner(self, input_names, output_names):
        """A launcher for a caller that checked its tensors itself (the torch.compile backend:
        Dynamo's guards fix every size and dtype): run(input_ptrs, output_ptrs, stream_handle)
        with device pointers in the order of the names fills the kernels' parameters and
        launches the steps - no checks, no allocation. After load_weights() (or _setup())."""
        if self.device is None:
            raise RuntimeError("load_weights() first: the plan is not placed on a device")
        ipos = {n: i for i, n in enumerate(input_names)}
        opos = {n: i for i, n in enumerate(output_names)}
        if set(ipos) != set(self.inputs) or set(opos) != set(self.outputs):
            raise ValueError("runner(): expected the inputs %s and outputs %s" %
                             (sorted(self.inputs), sorted(self.outputs)))
        islots = [(arr, idx, ipos[name]) for arr, idx, name in self._input_slots]
        oslots = [(arr, idx, opos[name]) for arr, idx, name in self._output_slots]
        launches = list(self._launches)

        def run(input_ptrs, output_ptrs, stream):
            for arr, idx, i in islots:
                arr[idx] = input_ptrs[i]
            for arr, idx, i in oslots:
                arr[idx] = output_ptrs[i]
            for ln in launches:
                ln(stream)
        return run

    def run(self, inputs, outputs=None, stream=None):
        """Runs the steps on the stream (PyTorch's current stream by default); returns the
        outputs by name, allocated here unless given."""
        if self._weights is None and self.weights:
            raise RuntimeError("load_weights() first: the plan reads weights %s" %
                               ", ".join(self.weights))
        infos = self._describe_all(inputs, self.inputs, "inputs")
        outs = self._describe_all(outputs, self.outputs, "outputs") if outputs is not None else {}
        device = same_device(list(infos.values()) + list(outs.values()))
        like_torch = any(type(i.obj).__module__.startswith("torch") for _, i in infos.values())
        self._setup(device, like_torch)
        _cuda.driver().use_device(device)
        result = {}
        if outputs is None:
            for n, (shape, dtype) in self.outputs.items():
                t = new_tensor(shape, dtype, device, like_torch and "torch" in sys.modules)
                result[n] = t
                outs[n] = ("outputs[%r]" % n, describe(t, n))
        else:
            result = dict(outputs)
        h = _cuda.stream_handle(stream, device)
        for arr, idx, name in self._input_slots:
            arr[idx] = infos[name][1].ptr
        for arr, idx, name in self._output_slots:
            arr[idx] = outs[name][1].ptr
        for ln in self._launches:
            ln(h)
        return result
