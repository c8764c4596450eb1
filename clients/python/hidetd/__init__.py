"""hidetd - the Python runtime of hidetd: ask the daemon for fused, tuned kernels and launch
plans, and launch them on PyTorch tensors (or anything with __cuda_array_interface__) through
the CUDA driver.

    client = hidetd.Client()                  # default address: see default_address()
    k = client.kernel({"op": "matmul", "inputs": [...]})
    c = k(a, b)
    d = client.kernel({"op": "matmul", "inputs": [{"shape": ["n", 4096], ...}, ...],
                       "dims": {"n": {"min": 1, "max": 8192}}})   # a DynamicKernel
    y = d(x, w)                               # n read from x
    plan = client.graph(graph)                # docs/graphs.md
    plan.load_weights(weights)
    y = plan(x=x)["y"]

Importing this package needs the standard library only; PyTorch is used when the caller has
imported it, and the CUDA driver is loaded at the first launch. docs/python.md is the guide.
"""
import threading
import time
import warnings

from . import _cuda
from ._cuda import CudaError
from ._http import HidetdError, Transport, default_address, parse_address
from .dispatch import DynamicKernel
from .kernel import Kernel, PlanError
from .plan import Plan

__all__ = ["Client", "Kernel", "DynamicKernel", "Plan", "HidetdError", "HidetdWarning",
           "PlanError", "CudaError", "default_address", "export_fx", "compile", "explain", "save", "load"]
__version__ = "0.1.0"

_POLL_S = 0.2


class HidetdWarning(UserWarning):
    """An answer's "warning" (docs/api.md): e.g. a "measure" request answered by the cost model
    because no GPU worker could time it."""


def _warn(answers):
    """Issues each distinct "warning" of the kernel sets in answers once."""
    seen = set()
    for a in answers:
        w = a.get("warning") if isinstance(a, dict) else None
        if w and w not in seen:
            seen.add(w)
            warnings.warn(w, HidetdWarning, stacklevel=3)


class Client:
    """A connection to hidetd (Unix socket path, "unix:PATH" or "http://HOST:PORT"; token: the
    bearer token for TCP, default the first line of the file $HIDETD_TOKEN_FILE names, else
    $HIDETD_TOKEN). One kept-alive connection; not for concurrent use from several threads."""

    def __init__(self, address=None, token=None, timeout=None):
        self._t = Transport(address, token, timeout)
        self._modules = {}  # (key, device) -> CUmodule
        self._lock = threading.Lock()

    @property
    def address(self):
        return self._t.address

    def close(self):
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<hidetd.Client %s>" % self._t.address

    # ---- plain API calls ---------------------------------------------------------------------

    def get(self, path):
        """GET path, parsed JSON."""
        return self._t.json("GET", path)[1]

    def post(self, path, body):
        """POST a JSON body (dict or text): (status, parsed JSON)."""
        return self._t.json("POST", path, body)

    def status(self):
        return self.get("/v1/status")

    def cubin(self, key):
        return self._t.request("GET", "/v1/kernels/%s/cubin" % key)[2]

    def ptx(self, key):
        return self._t.request("GET", "/v1/kernels/%s/ptx" % key)[2].decode()

    def kernel_set(self, request):
        """POST /v1/kernels; a 202 job (the request said "wait": false) is waited for."""
        status, ans = self.post("/v1/kernels", request)
        if status == 202:
            job = ans["job"]
            while job["state"] in ("queued", "running"):
                time.sleep(_POLL_S)
                job = self.get("/v1/jobs/%s" % job["id"])["job"]
            if job["state"] != "done":
                err = job.get("error") or {}
                raise HidetdError(200, err.get("code", job["state"]),
                                  "kernel job %s ended %s: %s" % (job["id"], job["state"],
                                                                   err.get("message", "")))
            ans = self.get(job["result"])
        # A dispatch table's warnings are its generic set's (the one answered now).
        _warn([ans.get("dispatch", {}).get("generic") if "dispatch" in ans else ans])
        return ans

    def plan_json(self, graph, **options):
        """POST /v1/graphs: the launch plan as JSON. `graph` is a whole request ({"graph": ...,
        "arch": ...}) or only the graph; options (arch, tune, priority, budget) are added to the
        request. A 202 graph job is waited for."""
        req = dict(graph) if "graph" in graph else {"graph": graph}
        req.update(options)
        status, ans = self.post("/v1/graphs", req)
        while status == 202:
            job = ans["job"]
            while job.get("state") in ("queued", "running"):
                time.sleep(_POLL_S)
                job = self.get(job["url"])["job"]
            if job.get("state") != "done":
                raise HidetdError(200, "graph_job_" + str(job.get("state")),
                                  "graph job %s ended %s" % (job.get("id"), job.get("state")))
            status, ans = self.post("/v1/graphs", req)
        _warn(s.get("kernel_set") for s in ans.get("prepare", []) + ans.get("steps", []))
        return ans

    # ---- the runtime -------------------------------------------------------------------------

    def kernel(self, request, retune=True):
        """A launchable Kernel for an operator request (docs/api.md); for a request whose shapes
        name dims ("dims"), a DynamicKernel over the dispatch table answered (retune: ask again,
        in the background, for ranges a launch finds untuned; see hidetd.dispatch)."""
        ans = self.kernel_set(request)
        if isinstance(ans, dict) and "dispatch" in ans:
            return DynamicKernel(self, ans, request, retune=retune)
        return Kernel(self, ans, request)

    def _clone(self):
        """A new client to the same daemon (same token, timeout): a background thread's own
        connection."""
        t = self._t
        return Client(t.address, t.token, t.timeout)

    def graph(self, graph, retune=True, **options):
        """A runnable Plan for a graph (docs/graphs.md); see plan_json() for the arguments. A
        graph with named dims: retune asks again, in the background, for the ranges a run finds
        not tuned yet (hidetd.plan)."""
        req = dict(graph) if "graph" in graph else {"graph": graph}
        req.update(options)
        return Plan(self, self.plan_json(req), request=req, retune=retune)

    def plan(self, plan_json):
        """A runnable Plan from a plan the daemon answered earlier (e.g. saved to a file); its
        kernels are fetched from this client's daemon by key."""
        return Plan(self, plan_json)

    def _module(self, key, device):
        """The CUmodule of a kernel set on a device (the context is current): the cubin, or
        the PTX (JIT-compiled by the driver) when the cubin is not for this GPU."""
        with self._lock:
            m = self._modules.get((key, device))
            if m is not None:
                return m
            drv = _cuda.driver()
            m, why_cubin = drv.load_module(self.cubin(key))
            if m is None:
                m, why_ptx = drv.load_module(self.ptx(key))
                if m is None:
                    raise CudaError("kernel set %s loads neither from its cubin (%s) nor from its "
                                    "PTX (%s); was it built for this GPU's arch?" %
                                    (key, why_cubin, why_ptx))
            self._modules[(key, device)] = m
            return m


def __getattr__(name):
    # hidetd.fx imports nothing at import time either, but is loaded only when asked for.
    if name in ("fx", "aten", "backend", "compile_cache"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'hidetd' has no attribute %r" % name)


def compile(model, example_inputs=None, mode=None, **options):
    """torch.compile with hidetd's backend (hidetd.backend.compile; docs/python.md)."""
    from .backend import compile as _compile
    return _compile(model, example_inputs, mode=mode, **options)


def save(model, example_inputs, path, **options):
    """Compile model now and write what hidetd.load runs without Dynamo's trace
    (hidetd.backend.save; docs/python.md)."""
    from .backend import save as _save
    return _save(model, example_inputs, path, **options)


def load(path, model):
    """What hidetd.save wrote, bound to model (hidetd.backend.load; docs/python.md)."""
    from .backend import load as _load
    return _load(path, model)


def explain(model, *inputs, **options):
    """Where each op of the model runs, and why (hidetd.backend.explain)."""
    from .backend import explain as _explain
    return _explain(model, *inputs, **options)


def export_fx(module, example_inputs, **kwargs):
    """Exports a PyTorch module into a hidetd graph (see hidetd.fx.export); needs torch."""
    from .fx import export
    return export(module, example_inputs, **kwargs)
