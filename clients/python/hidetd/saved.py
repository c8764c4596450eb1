"""hidetd.saved - the backend's compiled graph in the form PyTorch's ahead-of-time compile
saves (hidetd.save / hidetd.load, docs/python.md). Imported only by them: it needs PyTorch.

A SavedForward runs the compiled forward it was made with; what a file holds of it is the
graph's compile-cache entry (hidetd.compile_cache: the ATen graph as data, each piece's
/v1/graphs request and bindings) and the backend's options. Read back in another process, it
is rebuilt as a compile-cache hit is: each piece's plan asked of the daemon with its stored
request - answered from its kernel cache - without AOTAutograd, the lowering or Dynamo."""
import pickle

from torch._dynamo.aot_compile_types import SerializableCallable

FORMAT = 1


class SavedForward(SerializableCallable):
    def __init__(self, forward, entry, options):
        self.forward = forward
        self.entry = entry
        self.options = dict(options or {})

    @classmethod
    def serialize_compile_artifacts(cls, fn):
        return pickle.dumps({"format": FORMAT, "entry": fn.entry, "options": fn.options})

    @classmethod
    def deserialize_compile_artifacts(cls, data):
        from .backend import Options, _from_cache
        state = pickle.loads(data)
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise RuntimeError("hidetd.load: a saved graph of another format (%r); save the model "
                               "again with this hidetd" % (state.get("format") if isinstance(state, dict) else None,))
        forward = _from_cache(state["entry"], Options(None, state["options"] or None), None)
        if forward is None:
            raise RuntimeError("hidetd.load: the saved graph's plans could not be had from the daemon "
                               "(%r): is it running, with the same version?" % state["options"].get("address"))
        return cls(forward, state["entry"], state["options"])

    def __call__(self, *args):
        return self.forward(*args)
