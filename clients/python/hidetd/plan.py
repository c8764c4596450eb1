"""hidetd.plan - a launch plan (docs/graphs.md) made runnable: the plan parsed and checked once
(every binding resolved to a caller tensor or an arena/constants offset), the arena allocated
once per device, weights bound and the prepare steps run by load_weights(), and the steps
launched in order on one stream by run(). A tensor-map parameter is encoded for its buffer's
address at the first launch and again only when that address changes (hidetd._cuda.Launch).

A plan with named dims (docs/graphs.md, "Named dimensions") runs at any sizes in their ranges:
they are read from the input tensors' axes that are one name (a product axis "b*s" and the fixed
axes are checked against them) or given (sizes=), refused in the daemon's words when out of
range, and per step the ready entry of its dispatch table holding them is launched, else the
generic set, bound at the sizes ("int" parameters, grid rules, tensor maps encoded per address
and sizes). What a run at some sizes launches is worked out once and kept by sizes, so a run at
sizes met before does no parsing and no allocation beyond its outputs. The arena is laid out at
every name's max: allocated once. When a step's entry is not ready, the graph is asked for again
with "sizes" on a background thread (as hidetd.DynamicKernel does; a run never waits), and the
tables answered are swapped in at the next run.
"""
import sys
import threading

from . import _cuda
from ._tensor import check, describe, fmt_shape, nbytes
from .dispatch import REFRESH_S, parse_table, start_reask
from .kernel import (LoadedSet, PlanError, _alloc_bytes, _ptr, bind_shape, check_sizes,
                     fmt_named, named_spec, new_tensor, parse_dims, parse_kernel_set, same_device,
                     tensor_map_reach, tensor_spec, whole_number)

ARENA_ALIGN = 256


class Step:
    """One step of a plan: its kernel sets and, per buffer name, where the pointer comes from:
    ("input"|"weight"|"output", name) or ("arena"|"constants", offset). sets[i] is (key,
    workspace bytes, kernels as parse_kernel_set gives them); sets[0] is the step's only set, or
    its dispatch table's generic one. A step whose kernel takes names has `dims` ({name: Dim},
    those it uses) and, with a table, `entries`: [(hidetd.dispatch.Entry, index in sets of its
    set when ready, else None)]."""

    def __init__(self, where, nodes, sets, sources, dims=None, entries=()):
        self.where = where
        self.nodes = nodes
        self.sets = sets
        self.key, self.workspace_bytes, self.kernels = sets[0]
        self.sources = sources
        self.dims = dims or {}
        self.entries = list(entries)

    def choose(self, sizes):
        """(index in sets, Entry or None): what a run at sizes launches, and the table entry
        holding them."""
        for e, i in self.entries:
            if e.holds(sizes):
                return (i if i is not None else 0), e
        return 0, None


class Plan:
    """plan.load_weights({name: tensor}) once, then plan(x=...) or plan.run({"x": ...},
    outputs=None, stream=None) -> {output name: tensor} on every forward pass."""

    def __init__(self, client, plan, request=None, retune=True, refresh_s=REFRESH_S):
        self.client = client
        self.json = plan
        # The graph request the plan answers: what a re-ask for a range not ready sends again.
        self.request = request
        self.retune = retune and request is not None
        self.refresh_s = refresh_s
        self.last_error = None
        if not isinstance(plan, dict):
            raise PlanError("plan: expected a JSON object")
        self.graph_key = plan.get("graph_key")
        self.dims = parse_dims(plan["dims"], "dims") if "dims" in plan else {}
        self._max = {n: d.max for n, d in self.dims.items()}
        self.inputs = self._specs(plan, "inputs")
        self.weights = self._specs(plan, "weights", optional=True, static=True)
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
        self._loaded = {}      # step where (and set index, for a step's other sets) -> LoadedSet
        self._like_torch = False
        # Plans with named dims: what a run at some sizes launches, by the sizes (dims order).
        self._memo = {}
        self._lock = threading.Lock()
        self._thread = None
        self._asked = {}       # the ranges asked for -> time.monotonic() of the ask
        self._pending = None   # steps of a plan answered by a re-ask, swapped in at the next run
        self._swaps = 0        # tables swapped in so far (tables_version)

    # ---- parsing -------------------------------------------------------------------------

    @staticmethod
    def _size(plan, field):
        v = whole_number(plan.get(field, 0))
        if v is None or v < 0:
            raise PlanError("%s: expected a non-negative integer, got %r" % (field, plan.get(field)))
        return v

    def _spec(self, t, where, static=False):
        """(shape, dtype) of a tensor: shape entries ints, or in a plan with dims, names and
        products as tuples of names (hidetd.kernel.named_spec)."""
        if self.dims and not static:
            return named_spec(t, self.dims, where)
        return tensor_spec(t, where)

    def _nbytes(self, spec):
        """Bytes of a (shape, dtype) at every name's max (the plan's layout)."""
        return nbytes(bind_shape(spec[0], self._max), spec[1])

    def _specs(self, plan, field, optional=False, static=False):
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
            out[name] = self._spec(t, "%s[%d]" % (field, i), static)
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
            spec = self._spec(b, where)
            if self._nbytes(spec) > size:
                raise PlanError("%s: %s %s needs %d bytes, the buffer has %d" %
                                (where, fmt_named(spec[0]), spec[1], self._nbytes(spec), size))
        self.buffers[name] = (region, off, size)

    def _bytes_of(self, name):
        """Bytes of the memory a name binds (caller tensors by their spec)."""
        for d in (self.inputs, self.weights, self.outputs):
            if name in d:
                return self._nbytes(d[name])
        return self.buffers[name][2]

    def _same_dims(self, dims, where, exact=True):
        """A step's dims must be the plan's (with the plan's ranges, unless cut to an entry's)."""
        for n, d in dims.items():
            p = self.dims.get(n)
            if p is None:
                raise PlanError("%s.dims.%s: not a dim of the plan (%s)" % (
                    where, n, ", ".join(self.dims) or "it has none"))
            if exact and (d.min, d.max, d.multiple_of) != (p.min, p.max, p.multiple_of):
                raise PlanError("%s.dims.%s: %d..%d (multiple of %d), but the plan's is %d..%d "
                                "(multiple of %d)" % (where, n, d.min, d.max, d.multiple_of,
                                                      p.min, p.max, p.multiple_of))

    def _step(self, s, where, prepare):
        if not isinstance(s, dict):
            raise PlanError("%s: expected an object" % where)
        req = s.get("request")
        if not isinstance(req, dict) or not isinstance(req.get("inputs"), list):
            raise PlanError("%s.request.inputs: missing" % where)
        ins = [self._spec(t, "%s.request.inputs[%d]" % (where, i), prepare)
               for i, t in enumerate(req["inputs"])]
        ks = s.get("kernel_set")
        kw = where + ".kernel_set"
        dims, entries = {}, []
        if isinstance(ks, dict) and "dispatch" in ks:
            # A kernel that takes names: its dispatch table, every ready entry's set beside the
            # generic one.
            if prepare or not self.dims:
                raise PlanError("%s: a dispatch table (a kernel that takes names) in a %s" % (
                    kw, "prepare step" if prepare else "plan without \"dims\""))
            try:
                dims, tout, generic, table = parse_table(ks)
            except PlanError as e:
                raise PlanError("%s: %s" % (kw, e)) from None
            self._same_dims(dims, kw)
            sets = [parse_kernel_set(generic, len(ins), kw + ".dispatch.generic", dims)]
            for i, e in enumerate(table):
                if e.state != "ready":
                    entries.append((e, None))
                    continue
                cut = {n: d.cut(*e.ranges[n]) for n, d in dims.items()}
                sets.append(parse_kernel_set(e.kernel_set, len(ins),
                                             "%s.dispatch.entries[%d].kernel_set" % (kw, i), cut))
                entries.append((e, len(sets) - 1))
            out = self._spec(ks.get("output") if "output" in ks else generic.get("output"),
                             kw + ".output")
        else:
            if isinstance(ks, dict) and "dims" in ks and self.dims and not prepare:
                dims = parse_dims(ks["dims"], kw + ".dims")
                self._same_dims(dims, kw)
            sets = [parse_kernel_set(ks, len(ins), kw, dims or None)]
            out = self._spec(ks.get("output"), kw + ".output", prepare)
        bindings = s.get("bindings")
        if not isinstance(bindings, dict):
            raise PlanError("%s.bindings: expected an object" % where)
        sources = {}
        for _, ws, kernels in sets:
            needed = {buf for _, _, _, _, ps in kernels for _, buf, _ in ps
                      if not buf.startswith("dim:")}
            reach = tensor_map_reach(kernels)
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
                    need = self._nbytes(out)
                    what = "its output %s %s" % (fmt_named(out[0]), out[1])
                    if src[0] in ("input", "weight"):
                        raise PlanError("%s: the step writes %s, a caller's %s" % (bw, name, src[0]))
                elif buf == "workspace":
                    need, what = ws, "a workspace of %d bytes" % ws
                else:
                    i = int(buf[5:])
                    need = self._nbytes(ins[i])
                    what = "%s %s %s" % (buf, fmt_named(ins[i][0]), ins[i][1])
                if reach.get(buf, 0) > need:
                    # The copy engine must not reach past the bound buffer either.
                    need, what = reach[buf], "the tensor map of %s (%d bytes)" % (buf, reach[buf])
                if self._bytes_of(name) < need:
                    raise PlanError("%s: %r has %d bytes, too few for %s" %
                                    (bw, name, self._bytes_of(name), what))
                sources[buf] = src
        nodes = s.get("nodes") if isinstance(s.get("nodes"), list) else []
        return Step(where, nodes, sets, sources, dims, entries)

    # ---- running -------------------------------------------------------------------------

    def __repr__(self):
        return "<hidetd.Plan %d steps (%d prepare), inputs %s, outputs %s, arena %d bytes>" % (
            len(self.steps), len(self.prepare), ", ".join(self.inputs), ", ".join(self.outputs),
            self.arena_bytes)

    def _describe_all(self, given, specs, kind, strict=True, sizes=None):
        """The described tensors by name, each checked against its spec (at `sizes` where it
        names dims)."""
        if not isinstance(given, dict):
            raise TypeError("%s must be a dict of name -> tensor, got %s" % (kind, type(given).__name__))
        unknown = [n for n in given if n not in specs]
        if unknown and strict:
            raise ValueError("unknown %s %r; the plan's %s are: %s" % (
                kind[:-1], unknown[0], kind, ", ".join(specs) or "(none)"))
        missing = [n for n in specs if n not in given]
        if missing:
            n = missing[0]
            raise ValueError("missing %s %r (%s %s)" % (kind[:-1], n, fmt_named(specs[n][0]),
                                                         specs[n][1]))
        infos = {}
        for n, (shape, dtype) in specs.items():
            what = (kind, n)
            info = describe(given[n], what)
            if self.dims and kind != "weights":
                infos[n] = (what, info)  # checked by run() once the sizes are known
                continue
            check(info, shape, dtype, what)
            infos[n] = (what, info)
        return infos

    # ---- named dims ----------------------------------------------------------------------

    def sizes_of(self, shapes, sizes=None):
        """The sizes of a run on inputs of these shapes ({input name: shape}): `sizes` as given,
        then each input axis that is one name; checked for consistency and against the ranges
        (ValueError "b is 9000; its range is 1..8192"). A product axis ("b*s") defines no size;
        it and the fixed axes are checked against the sizes by run()."""
        known, where = {}, {}
        for n, v in (sizes or {}).items():
            if n not in self.dims:
                raise ValueError("%r is not a dim of the plan (%s)" % (n, ", ".join(self.dims) or "it has none"))
            known[n], where[n] = v, "sizes="
        for name, (spec, _) in self.inputs.items():
            shape = shapes[name]
            if len(shape) != len(spec):
                raise ValueError("input %r: a shape of rank %d, the plan's %s has rank %d" % (
                    name, len(shape), fmt_named(spec), len(spec)))
            for d, (x, e) in enumerate(zip(spec, shape)):
                if not isinstance(x, tuple) or len(x) != 1:
                    continue
                n = x[0]
                if n not in known:
                    known[n], where[n] = int(e), "input %r shape[%d]" % (name, d)
                elif known[n] != e:
                    raise ValueError("input %r shape[%d]: %s is %d here, but %d from %s" % (
                        name, d, n, e, known[n], where[n]))
        missing = [n for n in self.dims if n not in known]
        if missing:
            raise ValueError("the size of %s is not known from the inputs (no input axis is %s "
                             "alone): pass sizes={%s}" % (
                                 " and ".join(missing), " or ".join(missing),
                                 ", ".join("%r: ..." % n for n in missing)))
        check_sizes(self.dims, known)
        return known

    def shapes_at(self, sizes):
        """{output name: shape} at sizes."""
        return {n: bind_shape(shape, sizes) for n, (shape, _) in self.outputs.items()}

    def _loaded_set(self, st, i):
        """The LoadedSet of a step's set i, made (and its arena, weights and constants bound)
        at first use."""
        k = st.where if i == 0 else (st.where, i, st.sets[i][0])
        ls = self._loaded.get(k)
        if ls is None:
            key, _, kernels = st.sets[i]
            ls = self._loaded[k] = LoadedSet(self.client, key, kernels, self.device)
            ls.sizes_key = None
            for buf, src in st.sources.items():
                if src[0] == "arena":
                    ls.bind(buf, _ptr(self._arena) + src[1])
                elif src[0] == "weight" and self._weights is not None:
                    ls.bind(buf, self._weights[src[1]][1])
                elif src[0] == "constants" and self._constants is not None:
                    ls.bind(buf, _ptr(self._constants) + src[1])
        return ls

    def _at(self, sizes):
        """What a run at sizes launches, worked out once per sizes: (the dynamic sets to bind at
        their sizes [(LoadedSet, sizes)], input slots, output slots, launches, the output shapes,
        the entries not ready [(Entry)])."""
        key = tuple(sizes[n] for n in self.dims)
        m = self._memo.get(key)
        if m is not None:
            return key, m
        binds, islots, oslots, launches, asks = [], [], [], [], []
        for st in self.steps:
            i, entry = st.choose(sizes)
            ls = self._loaded_set(st, i)
            if entry is not None and not entry.settled:
                asks.append(entry)
            if st.dims:
                binds.append((ls, {n: sizes[n] for n in st.dims}))
            launches.extend(ls.launches)
            for buf, src in st.sources.items():
                if src[0] in ("input", "output"):
                    slots = islots if src[0] == "input" else oslots
                    slots.extend((ln.values, idx, src[1]) for ln, idx in ls.slots.get(buf, ()))
        m = (binds, islots, oslots, launches, self.shapes_at(sizes), asks)
        if len(self._memo) >= 64:
            self._memo.clear()
        self._memo[key] = m
        return key, m

    def _prepare_run(self, sizes):
        """Binds the sets at sizes (those bound at other sizes only) and starts a re-ask for
        entries not ready; the memo's entry."""
        if self._pending is not None:
            self._swap()
        key, m = self._at(sizes)
        for ls, ssz in m[0]:
            if ls.sizes_key != key:
                ls.set_sizes(ssz)
                ls.sizes_key = key
        if m[5]:
            self._ask(m[5], sizes)
        return m

    def _ask(self, entries, sizes):
        """Asks for the graph again with "sizes" on a background thread (see the module's
        comment), at most once every refresh_s per set of ranges, one ask at a time."""
        key = tuple(tuple(sorted(e.ranges.items())) for e in entries)
        start_reask(self, key, sizes, "hidetd-plan-retune")

    def _reask(self, req):
        try:
            c = self.client._clone()
            try:
                _, ans = c.post("/v1/graphs", req)
            finally:
                c.close()
            new = Plan(self.client, ans)  # parsed here, off the runs' thread
            if [st.where for st in new.steps] != [st.where for st in self.steps] or \
                    new.arena_bytes != self.arena_bytes or list(new.dims) != list(self.dims):
                raise PlanError("the plan answered for the sizes has another layout (%d steps, "
                                "arena %d bytes)" % (len(new.steps), new.arena_bytes))
            with self._lock:
                self._pending = new.steps
            self.last_error = None
        except Exception as e:  # the sets of the plan keep serving; the next ask may succeed
            self.last_error = e

    @property
    def tables_version(self):
        """Changes whenever the steps' dispatch tables do, including when a re-ask has brought
        tables the next run installs: what replays a run captured earlier (a CUDA graph holds
        the kernels chosen then) compare to know they are stale."""
        with self._lock:
            return self._swaps + (self._pending is not None)

    def _swap(self):
        """Installs the tables a re-ask brought (at a run, on its thread): each step's sets and
        entries; the LoadedSets of sets kept are reused."""
        with self._lock:
            steps, self._pending = self._pending, None
            self._swaps += 1
        for st, new in zip(self.steps, steps):
            if new.dims and new.sources == st.sources:
                st.sets, st.entries = new.sets, new.entries
                st.key, st.workspace_bytes, st.kernels = new.sets[0]
        self._memo.clear()

    def wait(self, timeout=None):
        """Waits for the re-ask in flight (if any); True when none is left running."""
        t = self._thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    # ---- placing and running -------------------------------------------------------------

    def _setup(self, device, like_torch):
        """Binds the plan to a device: the arena (once) and every step's module."""
        if self.device is None:
            self.device = device
            self._like_torch = like_torch
            drv = _cuda.driver()
            drv.use_device(device)
            self._arena = _alloc_bytes(self.arena_bytes, device, like_torch) if self.arena_bytes else None
            for st in self.prepare + self.steps:
                self._loaded_set(st, 0)
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
        for k, ls in self._loaded.items():
            st = self._step_of(k)
            for buf, src in st.sources.items():
                if src[0] == "weight":
                    ls.bind(buf, self._weights[src[1]][1])
                elif src[0] == "constants":
                    ls.bind(buf, _ptr(self._constants) + src[1])
        h = _cuda.stream_handle(stream, device)
        for st in self.prepare:
            self._loaded[st.where](h)

    def _step_of(self, loaded_key):
        where = loaded_key if isinstance(loaded_key, str) else loaded_key[0]
        for st in self.prepare + self.steps:
            if st.where == where:
                return st
        raise KeyError(where)

    def __call__(self, stream=None, **inputs):
        return self.run(inputs, stream=stream)

    def runner(self, input_names, output_names):
        """A launcher for a caller that checked its tensors itself (the torch.compile backend:
        Dynamo's guards fix every dtype, and every size but the named ones): run(input_ptrs,
        output_ptrs, stream_handle) with device pointers in the order of the names fills the
        kernels' parameters and launches the steps - no checks, no allocation. A plan with dims
        takes the sizes too, run(input_ptrs, output_ptrs, stream_handle, sizes) with sizes a
        {name: int} checked by the caller (sizes_of(); output shapes from shapes_at()). After
        load_weights() (or _setup())."""
        if self.device is None:
            raise RuntimeError("load_weights() first: the plan is not placed on a device")
        ipos = {n: i for i, n in enumerate(input_names)}
        opos = {n: i for i, n in enumerate(output_names)}
        if set(ipos) != set(self.inputs) or set(opos) != set(self.outputs):
            raise ValueError("runner(): expected the inputs %s and outputs %s" %
                             (sorted(self.inputs), sorted(self.outputs)))
        if self.dims:
            def run_at(input_ptrs, output_ptrs, stream, sizes):
                _, islots, oslots, launches, _, _ = self._prepare_run(sizes)
                for arr, idx, name in islots:
                    arr[idx] = input_ptrs[ipos[name]]
                for arr, idx, name in oslots:
                    arr[idx] = output_ptrs[opos[name]]
                for ln in launches:
                    ln(stream)
            return run_at
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

    def run(self, inputs, outputs=None, stream=None, sizes=None):
        """Runs the steps on the stream (PyTorch's current stream by default); returns the
        outputs by name, allocated here unless given. A plan with dims reads the sizes from the
        inputs (sizes= gives those no input axis holds alone)."""
        if self._weights is None and self.weights:
            raise RuntimeError("load_weights() first: the plan reads weights %s" %
                               ", ".join(self.weights))
        infos = self._describe_all(inputs, self.inputs, "inputs")
        outs = self._describe_all(outputs, self.outputs, "outputs") if outputs is not None else {}
        if self.dims:
            sizes = self.sizes_of({n: i.shape for n, (_, i) in infos.items()}, sizes)
            for d, specs in ((infos, self.inputs), (outs, self.outputs)):
                for n, (what, info) in d.items():
                    check(info, bind_shape(specs[n][0], sizes), specs[n][1], what)
        elif sizes:
            raise ValueError("sizes given, but the plan takes none (its shapes are fixed)")
        device = same_device(list(infos.values()) + list(outs.values()))
        like_torch = any(type(i.obj).__module__.startswith("torch") for _, i in infos.values())
        self._setup(device, like_torch)
        _cuda.driver().use_device(device)
        if self.dims:
            _, islots, oslots, launches, shapes, _ = self._prepare_run(sizes)
        else:
            islots, oslots, launches = self._input_slots, self._output_slots, self._launches
            shapes = {n: shape for n, (shape, _) in self.outputs.items()}
        result = {}
        if outputs is None:
            for n, (_, dtype) in self.outputs.items():
                t = new_tensor(shapes[n], dtype, device, like_torch and "torch" in sys.modules)
                result[n] = t
                outs[n] = ("outputs[%r]" % n, describe(t, n))
        else:
            result = dict(outputs)
        h = _cuda.stream_handle(stream, device)
        for arr, idx, name in islots:
            arr[idx] = infos[name][1].ptr
        for arr, idx, name in oslots:
            arr[idx] = outs[name][1].ptr
        for ln in launches:
            ln(h)
        return result
