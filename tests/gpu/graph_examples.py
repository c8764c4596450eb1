#!/usr/bin/env python3
"""tests/gpu/graph_examples.py - the two example graphs (examples/graphs/*.json) run through the
Python runtime (clients/python) on a real GPU, with random inputs and weights, against the same
computation in PyTorch eager; and the same blocks as PyTorch modules exported by hidetd.fx.

    graph_examples.py --socket SOCK [--tune model] [--dtype f16]     # a running hidetd
    graph_examples.py HIDETD [HIDETD_WORKER] [--lib DIR]             # starts one (meson)

PyTorch eager is the module of examples/graphs/export_fx.py in the graph's dtype (batchnorm in
eval mode; the bottleneck channels_last, its NHWC view compared with the plan's NHWC output). The
error is max|plan - eager| / max|eager|, which must stay under the dtype's tolerance (TOL); the
error of eager itself against an fp32 computation is printed beside it. Exits 77 without a GPU
or PyTorch. bench/graphs.py imports the cases from here.
"""
import argparse
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
sys.path.insert(0, os.path.join(REPO, "examples", "graphs"))
sys.path.insert(0, HERE)  # gpu_env, also when bench/graphs.py imports this file
from gpu_env import daemon_arguments, daemon_from_args  # noqa: E402

# max|got - want| / max|want| allowed per dtype: fp16 keeps 11 bits, bf16 8; fused chains round
# once where eager rounds every intermediate, so the two differ by a few units in the last place
# of the largest values.
TOL = {"f16": 1e-2, "bf16": 4e-2, "f32": 1e-4}


def torch_dtype(torch, dt):
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dt]


def graph_request(name, dtype, tune, arch, budget=None):
    with open(os.path.join(REPO, "examples", "graphs", name + ".json")) as f:
        req = json.load(f)
    req = copy.deepcopy(req)
    for t in req["graph"]["inputs"] + req["graph"]["weights"]:
        if t["dtype"] != "f32" or not name.startswith("resnet"):
            t["dtype"] = dtype  # batchnorm statistics stay f32
    req.update(tune=tune, arch=arch, wait=True)
    if budget:
        req["budget"] = budget
    return req


class Case:
    """One example: the plan's request, the eager module, and how to make inputs/weights for
    both sides from one random draw."""

    def __init__(self, name, dtype):
        import torch
        from export_fx import Bottleneck, MLPBlock
        self.name, self.dtype = name, dtype
        dt = torch_dtype(torch, dtype)
        torch.manual_seed(0)
        if name == "mlp_block":
            m = MLPBlock()
            with torch.no_grad():
                m.norm.weight.uniform_(0.5, 1.5)
                m.norm.bias.uniform_(-0.5, 0.5)
            self.module = m.to("cuda", dt).eval()
            self.x = torch.randn(2048, 768, device="cuda", dtype=dt)
            self.plan_inputs = {"x": self.x}
            p = dict(self.module.named_parameters())
            self.weights = {"w1": p["fc1.weight"].t().contiguous(), "b1": p["fc1.bias"],
                            "w2": p["fc2.weight"].t().contiguous(), "b2": p["fc2.bias"],
                            "ln_gamma": p["norm.weight"], "ln_beta": p["norm.bias"]}
            self.to_plan_output = lambda y: y
        else:
            m = Bottleneck()
            with torch.no_grad():
                for bn in (m.bn1, m.bn2, m.bn3):
                    bn.weight.uniform_(0.5, 1.5)
                    bn.bias.uniform_(-0.2, 0.2)
                    bn.running_mean.uniform_(-0.2, 0.2)
                    bn.running_var.uniform_(0.5, 2.0)
            self.module = m.to("cuda", dt).to(memory_format=torch.channels_last).eval()
            self.x = torch.randn(32, 256, 56, 56, device="cuda", dtype=dt).to(
                memory_format=torch.channels_last)
            self.plan_inputs = {"x": self.x.permute(0, 2, 3, 1)}  # NHWC, contiguous
            w = {}
            for i in (1, 2, 3):
                conv, bn = getattr(m, "conv%d" % i), getattr(m, "bn%d" % i)
                w["w%d" % i] = conv.weight.detach().permute(0, 2, 3, 1).contiguous()
                w["bn%d_scale" % i] = bn.weight.detach().float()
                w["bn%d_bias" % i] = bn.bias.detach().float()
                w["bn%d_mean" % i] = bn.running_mean.detach().float()
                w["bn%d_var" % i] = bn.running_var.detach().float()
            self.weights = w
            self.to_plan_output = lambda y: y.permute(0, 2, 3, 1)
        self.weights = {k: v.detach() for k, v in self.weights.items()}

    def eager(self):
        return self.module(self.x)

    def fp32(self):
        import torch
        m = copy.deepcopy(self.module).float()
        with torch.no_grad():
            return m(self.x.float())

    def input_bytes(self):
        return sum(t.numel() * t.element_size() for t in list(self.weights.values()) + [self.x])


def rel_err(got, want):
    return float((got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-30))


def run_case(client, case, tune, arch, budget=None):
    """(plan, output, error against eager, eager's error against fp32)."""
    import torch
    plan = client.graph(graph_request(case.name, case.dtype, tune, arch, budget))
    plan.load_weights(case.weights)
    with torch.no_grad():
        y = plan(**case.plan_inputs)["y"]
        want = case.to_plan_output(case.eager())
        ref = case.to_plan_output(case.fp32())
    torch.cuda.synchronize()
    return plan, y, rel_err(y, want), rel_err(want, ref), rel_err(y, ref)


def export_check(client, name, dtype, arch):
    """The block as a PyTorch module through hidetd.fx: exported, planned, run, compared."""
    import torch
    import hidetd
    case = Case(name, dtype)
    x = case.x
    ex = hidetd.export_fx(case.module, [x], dtype=dtype, arch=arch, tune="model")
    plan = client.graph(ex.request)
    plan.load_weights(ex.weights(case.module))
    (inp,) = ex.input_layout
    xin = x.permute(0, 2, 3, 1) if ex.input_layout[inp] == "nhwc" else x
    out = plan(**{inp: xin})
    (oname,) = out
    y = out[oname]
    with torch.no_grad():
        want = case.eager()
    if ex.output_layout[oname] == "nhwc":
        want = want.permute(0, 2, 3, 1)
    torch.cuda.synchronize()
    return rel_err(y, want)


class CPlanLoader:
    """libhidet-client's hidet_plan_* through ctypes, to run the same plan from C on the same
    tensors ($HIDET_CLIENT_LIB, else .gpu/lib or build/clients/c). Its dependencies (cJSON,
    libcurl, ...) are preloaded from the library's folder when the loader cannot find them."""

    class Error(__import__("ctypes").Structure):
        import ctypes as _c
        _fields_ = [("http_status", _c.c_int), ("code", _c.c_char * 32),
                    ("message", _c.c_char * 512), ("field", _c.c_char * 128)]

    def __init__(self):
        import ctypes
        import glob
        cands = [os.environ.get("HIDET_CLIENT_LIB", "")]
        cands += sorted(glob.glob(os.path.join(REPO, ".gpu", "lib", "libhidet-client.so*")))
        cands += [os.path.join(REPO, "build", "clients", "c", "libhidet-client.so")]
        path = next((c for c in cands if c and os.path.exists(c)), None)
        if not path:
            raise OSError("libhidet-client.so not found")
        libdir = os.path.dirname(os.path.realpath(path))
        for _ in range(8):
            try:
                self.lib = ctypes.CDLL(path)
                break
            except OSError as e:
                missing = str(e).split(":")[0].strip()
                dep = os.path.join(libdir, os.path.basename(missing))
                if not os.path.exists(dep) or dep == path:
                    raise
                ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
        L, P, vp = self.lib, ctypes.POINTER, ctypes.c_void_p
        sigs = {"hidet_client_open": [ctypes.c_char_p, ctypes.c_char_p, P(vp), vp],
                "hidet_client_free": [vp],
                "hidet_plan_parse": [ctypes.c_char_p, ctypes.c_size_t, P(vp), vp],
                "hidet_plan_bind": [vp, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, vp],
                "hidet_plan_load": [vp, vp, vp],
                "hidet_plan_prepare": [vp, vp, vp],
                "hidet_plan_launch": [vp, vp, vp],
                "hidet_plan_free": [vp]}
        for n, a in sigs.items():
            getattr(L, n).argtypes = a
            getattr(L, n).restype = ctypes.c_int if n not in ("hidet_plan_free", "hidet_client_free") else vp
        self.path = path

    def run(self, sock, plan_json, tensors, stream):
        """Runs the plan from C with tensors (name -> torch tensor: weights, inputs, outputs)."""
        import ctypes
        err = self.Error()
        e = ctypes.byref(err)
        cl, p = ctypes.c_void_p(), ctypes.c_void_p()

        def ok(r, what):
            if r != 0:
                raise RuntimeError("%s: %d %s" % (what, r, err.message.decode()))
        ok(self.lib.hidet_client_open(sock.encode(), None, ctypes.byref(cl), e), "hidet_client_open")
        text = json.dumps(plan_json).encode()
        try:
            ok(self.lib.hidet_plan_parse(text, len(text), ctypes.byref(p), e), "hidet_plan_parse")
            for n, t in tensors.items():
                ok(self.lib.hidet_plan_bind(p, n.encode(), t.data_ptr(), t.numel() * t.element_size(), e),
                   "hidet_plan_bind(%s)" % n)
            ok(self.lib.hidet_plan_load(p, cl, e), "hidet_plan_load")
            ok(self.lib.hidet_plan_prepare(p, stream, e), "hidet_plan_prepare")
            ok(self.lib.hidet_plan_launch(p, stream, e), "hidet_plan_launch")
            import torch
            torch.cuda.synchronize()
        finally:
            self.lib.hidet_plan_free(p)
            self.lib.hidet_client_free(cl)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    daemon_arguments(ap)
    ap.add_argument("--tune", default="model")
    ap.add_argument("--dtype", default="f16", choices=sorted(TOL))
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipped")
        return 77
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: skipped")
        return 77
    import hidetd
    proc, sock = daemon_from_args(ap, a, "hidetd-graphs-")
    # The daemon resolves "native" to the GPU's exact target (sm_90a on an H100: the wgmma
    # templates); the plan's "arch" says which it chose.
    arch = "native"
    failures = 0
    try:
        cload = CPlanLoader()
        print("C plan loader: %s" % cload.path)
    except OSError as e:
        cload = None
        print("C plan loader: not tested (%s)" % e)
    try:
        client = hidetd.Client(sock)
        for name in ("mlp_block", "resnet_bottleneck"):
            case = Case(name, a.dtype)
            plan, y, err, eager_err, our_err = run_case(client, case, a.tune, arch)
            ok = err <= TOL[a.dtype]
            failures += not ok
            print("%-18s %s: %d steps, arena %d B, constants %d B; max err vs eager %.2e "
                  "(tolerance %.0e), vs fp32: ours %.2e, eager %.2e  %s" %
                  (name, a.dtype, len(plan.steps), plan.arena_bytes, plan.constants_bytes, err,
                   TOL[a.dtype], our_err, eager_err, "ok" if ok else "FAIL"), flush=True)
            # A second run reuses the arena and must give the same answer.
            y2 = plan(**case.plan_inputs)["y"]
            torch.cuda.synchronize()
            if not torch.equal(y, y2):
                failures += 1
                print("%s: FAIL: a second run gave a different answer" % name)
            if cload is not None:
                out_c = torch.full_like(y, float("nan"))
                cload.run(sock, plan.json, dict(case.weights, y=out_c, **case.plan_inputs),
                          torch.cuda.current_stream().cuda_stream)
                same = torch.equal(out_c, y)
                failures += not same
                print("%-18s run by the C library's hidet_plan_*: %s" %
                      (name, "identical to the Python runtime's output" if same else
                       "FAIL: differs from the Python runtime's output (max diff %.2e)" %
                       float((out_c.float() - y.float()).abs().max())), flush=True)
            err = export_check(client, name, a.dtype, arch)
            ok = err <= TOL[a.dtype]
            failures += not ok
            print("%-18s exported by hidetd.fx: max err vs eager %.2e  %s" %
                  (name, err, "ok" if ok else "FAIL"), flush=True)
        # A wrong input is refused with the name and both shapes.
        plan = client.graph(graph_request("mlp_block", a.dtype, a.tune, arch))
        plan.load_weights(Case("mlp_block", a.dtype).weights)
        try:
            plan(x=torch.zeros(2048, 512, device="cuda", dtype=torch_dtype(torch, a.dtype)))
            failures += 1
            print("FAIL: a wrong input shape was accepted")
        except ValueError as e:
            print("wrong input refused: %s" % e)
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
    print("graph_examples: %s" % ("FAILED (%d)" % failures if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
