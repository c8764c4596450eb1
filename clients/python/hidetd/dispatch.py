"""hidetd.dispatch - a dynamic op's dispatch table (docs/api.md, "Named dimensions") made
launchable: the sizes of a launch read from the tensors (or given), checked against the dims'
ranges, the entry tuned for them chosen when it is ready and the generic kernel set otherwise,
and a range that is not ready yet asked for again in the background.

The background re-ask is the design choice here: a launch never waits for the daemon. When the
sizes fall in a range whose entry is not ready (or runs the kernel of a coarser range it was cut
from, "coarse", until it is tuned itself), a daemon thread sends the request again with
"sizes" (the daemon then tunes that range as a job; its answer waits only for the generic set,
a cache hit) and installs the table it answers; the generic set serves the launch meanwhile and
every launch until an answer lists the range ready. A range is asked for at most once every
`refresh_s` seconds, one ask at a time, on a connection of its own (a Client is not shared
between threads). An ask that fails leaves the table as it was (last_error says why).
"""
import threading
import time

from ._tensor import describe
from .kernel import Kernel, PlanError, check_sizes, named_spec, parse_dims, whole_number

# How often one range is asked for again while it is not ready.
REFRESH_S = 2.0
STATES = ("ready", "tuning", "untuned")


class Entry:
    """One range of the table: ranges {name: (lo, hi)}, state ("ready", "tuning", "untuned" or
    a newer one, never launched), its kernel set (ready), job URL (tuning, or a coarse entry's
    own tuning) and coarse (the ranges whose kernel it runs until it is tuned itself, or None)."""
    __slots__ = ("ranges", "state", "kernel_set", "job", "coarse")

    def __init__(self, ranges, state, kernel_set, job, coarse=None):
        self.ranges, self.state, self.kernel_set, self.job = ranges, state, kernel_set, job
        self.coarse = coarse

    @property
    def settled(self):
        """Ready with a kernel tuned for its own ranges: nothing better to ask the daemon for."""
        return self.state == "ready" and self.coarse is None

    def holds(self, sizes):
        return all(lo <= sizes[n] <= hi for n, (lo, hi) in self.ranges.items())

    def __repr__(self):
        return "<Entry %s %s>" % (", ".join("%s %d..%d" % (n, lo, hi)
                                            for n, (lo, hi) in self.ranges.items()), self.state)


def parse_table(answer):
    """(dims, output spec, generic kernel set, [Entry]) of a dispatch-table answer; PlanError
    naming the field when it does not follow docs/api.md."""
    if not isinstance(answer, dict) or not isinstance(answer.get("dispatch"), dict):
        raise PlanError("the answer is not a dispatch table (no \"dispatch\")")
    if "dims" not in answer:
        raise PlanError("dims: missing")
    dims = parse_dims(answer["dims"], "dims")
    if not dims:
        raise PlanError("dims: a dispatch table names at least one dim")
    output = named_spec(answer["output"], dims, "output") if "output" in answer else None
    disp = answer["dispatch"]
    generic = disp.get("generic")
    if not isinstance(generic, dict):
        raise PlanError("dispatch.generic: expected a kernel set object")
    entries = disp.get("entries")
    if not isinstance(entries, list):
        raise PlanError("dispatch.entries: expected a list")
    out = []
    for i, e in enumerate(entries):
        w = "dispatch.entries[%d]" % i
        ranges = e.get("ranges") if isinstance(e, dict) else None
        if not isinstance(ranges, dict):
            raise PlanError("%s.ranges: expected an object of name: [lo, hi]" % w)
        rs = {}
        for name, r in ranges.items():
            d = dims.get(name)
            if d is None:
                raise PlanError("%s.ranges.%s: not a dim of the table" % (w, name))
            lo, hi = ([whole_number(x) for x in r] if isinstance(r, list) and len(r) == 2
                      else (None, None))
            if lo is None or hi is None or not d.min <= lo <= hi <= d.max:
                raise PlanError("%s.ranges.%s: expected [lo, hi] with %d <= lo <= hi <= %d, got %r"
                                % (w, name, d.min, d.max, r))
            rs[name] = (lo, hi)
        for name in dims:
            if name not in rs:
                raise PlanError("%s.ranges: no range of %s" % (w, name))
        state = e.get("state")
        if not isinstance(state, str):
            raise PlanError("%s.state: missing" % w)
        ks = e.get("kernel_set")
        if state == "ready" and not isinstance(ks, dict):
            raise PlanError("%s.kernel_set: a ready entry has its kernel set" % w)
        job = e.get("job") if isinstance(e.get("job"), str) else None
        coarse = e.get("coarse") if isinstance(e.get("coarse"), dict) else None
        out.append(Entry(rs, state, ks if state == "ready" else None, job, coarse))
    return dims, output, generic, out


def start_reask(owner, key, sizes, thread_name):
    """The background re-ask of a DynamicKernel or a Plan (see the module's comment): unless
    owner.retune is off, the range set `key` was asked for less than owner.refresh_s ago, or an
    ask is under way, owner._reask(request with "sizes") runs on a daemon thread. owner holds
    retune, refresh_s, request, _lock, _asked (key -> time.monotonic() of its last ask) and
    _thread."""
    if not owner.retune:
        return
    now = time.monotonic()
    with owner._lock:
        last = owner._asked.get(key)
        if last is not None and now - last < owner.refresh_s:
            return
        if owner._thread is not None and owner._thread.is_alive():
            return
        owner._asked[key] = now
        req = {k: v for k, v in owner.request.items() if k != "wait"}
        req["sizes"] = dict(sizes)
        owner._thread = threading.Thread(target=owner._reask, args=(req,), name=thread_name, daemon=True)
        owner._thread.start()


class DynamicKernel:
    """A launchable dispatch table: kernel(*inputs, sizes=None) or kernel.launch(inputs,
    output=None, stream=None, sizes=None) returns the output, like Kernel's, launched with the
    ready entry whose ranges hold the sizes, else the generic set. retune=False never asks the
    daemon again (the table stays as answered)."""

    def __init__(self, client, answer, request, retune=True, refresh_s=REFRESH_S):
        self.client = client
        self.request = request
        self.retune = retune
        self.refresh_s = refresh_s
        self.last_error = None
        self._lock = threading.Lock()
        self._thread = None
        self._asked = {}    # an entry's ranges -> time.monotonic() of the last ask
        self._kernels = {}  # (kernel set key, ranges) -> Kernel, kept over new tables (modules stay loaded)
        self._install(answer)

    def _kernel(self, ks, dims, where):
        # By key and ranges: one kernel set may serve a wider range in a later table (measured
        # neighbours running the same code are answered as one merged entry, its set's dims the
        # union's), and a Kernel checks launches against the ranges it was made with.
        ranges = ks.get("dims") if isinstance(ks.get("dims"), dict) else {
            n: (d.min, d.max, d.multiple_of) for n, d in dims.items()}
        key = (ks.get("key"), repr(sorted((n, repr(r)) for n, r in ranges.items())))
        k = self._kernels.get(key)
        if k is None:
            try:
                k = Kernel(self.client, ks, self.request, dims)
            except PlanError as e:
                raise PlanError("%s: %s" % (where, e)) from None
            self._kernels[key] = k
        return k

    def _install(self, answer):
        """Takes a table (the first answer, or a re-ask's) as the one launches use."""
        dims, output, generic, entries = parse_table(answer)
        g = self._kernel(generic, dims, "dispatch.generic")
        with self._lock:
            self.answer, self.dims, self.output, self.generic = answer, dims, output, g
            self.entries = entries

    def __repr__(self):
        return "<hidetd.DynamicKernel %s, %d entries (%d ready)>" % (
            self.answer.get("op"), len(self.entries),
            sum(e.state == "ready" for e in self.entries))

    def __call__(self, *inputs, output=None, stream=None, sizes=None):
        return self.launch(inputs, output=output, stream=stream, sizes=sizes)

    def sizes_of(self, inputs, output=None, sizes=None):
        """The sizes of a launch on these tensors (Kernel.infer_sizes), checked."""
        inputs = list(inputs)
        g = self.generic
        if len(inputs) != len(g.inputs):
            g.check(inputs)  # raises, naming what the request expects
        shapes = [describe(t, "inputs[%d]" % i).shape for i, t in enumerate(inputs)]
        out = describe(output, "output").shape if output is not None else None
        return g.infer_sizes(shapes, sizes, out)

    def select(self, sizes):
        """(Kernel, Entry or None): what a launch at sizes ({name: int}) runs, and the entry
        whose ranges hold them. ValueError for sizes outside the dims."""
        with self._lock:
            dims, entries, generic = self.dims, self.entries, self.generic
        check_sizes(dims, sizes)
        for i, e in enumerate(entries):
            if e.holds(sizes):
                if e.state != "ready":
                    return generic, e
                cut = {n: d.cut(*e.ranges[n]) for n, d in dims.items()}
                return self._kernel(e.kernel_set, cut, "dispatch.entries[%d].kernel_set" % i), e
        return generic, None

    def launch(self, inputs, output=None, stream=None, sizes=None):
        sizes = self.sizes_of(inputs, output, sizes)
        kernel, entry = self.select(sizes)
        if entry is not None and not entry.settled:
            self._ask(entry, sizes)
        return kernel.launch(inputs, output=output, stream=stream, sizes=sizes)

    def _ask(self, entry, sizes):
        """Starts the background re-ask for entry's range (see the module's comment)."""
        start_reask(self, tuple(sorted(entry.ranges.items())), sizes, "hidetd-retune")

    def _reask(self, req):
        try:
            c = self.client._clone()
            try:
                _, ans = c.post("/v1/kernels", req)
            finally:
                c.close()
            self._install(ans)
            self.last_error = None
        except Exception as e:  # the generic set keeps serving; the next ask may succeed
            self.last_error = e

    def wait(self, timeout=None):
        """Waits for the re-ask in flight (if any); True when none is left running."""
        t = self._thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True
