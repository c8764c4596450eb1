#!/usr/bin/env python3
"""bench/bench.py - hidetd's kernels against their peers, on one GPU, in one run.

For each case it asks a running hidetd for a tuned kernel (POST /v1/kernels over the Unix socket,
tune "measure"), downloads the cubin, launches it with CuPy on PyTorch tensors (tensor-map
parameters encoded once per bound buffer, through hidetd._cuda), checks the output
against a float32 PyTorch reference, and times it against the peer (cuBLAS through torch.matmul,
cuDNN through conv2d, torch.softmax, F.layer_norm, eager chains) in the same process.

Timing: every timed function is captured R times into a CUDA graph (so launch gaps from Python do
not count), cycling over enough input sets to exceed L2 twice, and the graph is replayed with CUDA
events around each replay; the median replay time / R is the time of one call, each of hidetd's
kernel and its peer in its own steady state (as do_bench does). With --alternate their replays
alternate instead, so that clock and power changes during a case reach both alike; on the lent
H100 the GEMM ratios of the two orders differ from run to run by up to about 0.08.
Inputs are random uniform in [-1, 1]. Clocks are read before and after.

Suites (--suite): all (gemm, conv, dwconv, rows, attention), gemm (with the unaligned rows and
the gaps), gaps (issue 40: the SwiGLU gate beside its bare GEMM, bias + relu + residual at short
K, the transposed layouts), conv, gconv (grouped 3x3 convolutions), dwconv, rows, attention, fp8
(issue 41, against torch._scaled_mm; not in all: it needs --arch sm_90a).

Output: a table on stdout and results.json / results.md in --out.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import cupy
import numpy
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from hidetd import _cuda  # noqa: E402
from hidetd_unix import UnixHTTPConnection  # noqa: E402


class Daemon:
    def __init__(self, sock):
        self.sock = sock

    def call(self, method, path, body=None):
        c = UnixHTTPConnection(self.sock, 600)
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        payload = r.read()
        c.close()
        ctype = r.getheader("Content-Type", "")
        return r.status, (json.loads(payload) if "json" in ctype else payload)


TORCH_DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# The GPU's L2 (50 MiB on an H100, 60 on an H200): input sets rotate through twice this, so that
# no timed call finds its operands still cached from the call before.
L2_BYTES = torch.cuda.get_device_properties(0).L2_cache_size if torch.cuda.is_available() else 50 << 20


def rand(shape, dt):
    return (torch.rand(shape, device="cuda", dtype=torch.float32) * 2 - 1).to(TORCH_DT[dt])


def grid_of(g, sizes):
    """A grid entry of a kernel set: a number, or a rule over named sizes (docs/api.md, "Named
    dimensions": mul * ceil(coef * product / div), capped at cap when cap > 0)."""
    if isinstance(g, int):
        return g
    prod = 1
    for name in g["dims"]:
        prod *= sizes[name]
    v = g["mul"] * -(-(g["coef"] * prod) // g["div"])
    return min(v, g["cap"]) if g.get("cap", 0) > 0 else v


def map_at(tmap, sizes):
    """A "tensor_map" description at sizes: each dims entry that follows named dims
    ({"dims": ["n"], "coef": 1}, docs/api.md "Named dimensions") evaluated, as the encoder
    takes it."""
    dims = []
    for d in tmap["dims"]:
        if isinstance(d, dict):
            v = d["coef"]
            for name in d["dims"]:
                v *= sizes[name]
            d = v
        dims.append(d)
    return dict(tmap, dims=dims)


class Kernel:
    """A kernel set from hidetd, launchable on torch tensors; a dynamic op's set (named dims) at
    the sizes bind() is given: grid rules evaluated, int parameters passed as 64-bit integers,
    tensor maps encoded at the sizes."""

    def __init__(self, daemon, kset, workdir):
        self.kset = kset
        status, cubin = daemon.call("GET", kset["kernels"][0]["cubin_url"])
        assert status == 200, f"cubin: {status}"
        path = os.path.join(workdir, kset["key"] + ".cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        self.module = cupy.RawModule(path=path)
        self.launches = []
        for k in kset["kernels"]:
            fn = self.module.get_function(k["name"])
            if k["shared_bytes"] > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = k["shared_bytes"]
            params = sorted(k["params"], key=lambda p: p["index"])
            for p in params:
                kind = p.get("type", "pointer")
                if kind not in ("pointer", "tensor_map", "int"):
                    raise ValueError(f"{k['name']}: parameter {p['index']} is of type {kind!r}, "
                                     "which bench.py cannot pass (pointer, tensor_map, int)")
            self.launches.append((fn, k["grid"], tuple(k["block"]), k["shared_bytes"], params))
        self.workspace_bytes = kset.get("workspace_bytes", 0)

    def bind(self, inputs, output, sizes=None):
        ws = torch.empty(max(self.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        table = {f"input{i}": t for i, t in enumerate(inputs)}
        table["output"] = output
        table["workspace"] = ws
        calls = []
        for fn, grid, block, smem, params in self.launches:
            args = []
            for p in params:
                kind = p.get("type", "pointer")
                if kind == "int":
                    args.append(cupy.int64(sizes[p["dim"]]))
                elif kind == "tensor_map":
                    tmap = map_at(p["tensor_map"], sizes) if sizes else p["tensor_map"]
                    args.append(tensor_map_arg(tmap, table[p["buffer"]].data_ptr()))
                else:
                    args.append(cupy.uint64(table[p["buffer"]].data_ptr()))
            calls.append((fn, tuple(grid_of(g, sizes) for g in grid), block, smem, tuple(args)))
        return launcher(calls, keep=(ws, inputs, output))


def tensor_map_arg(tmap, ptr):
    """A tensor-map kernel argument for a CuPy launch: the map (a "tensor_map" description of
    docs/api.md) encoded for the buffer at ptr, as a numpy array of one 128-byte element, which
    CuPy passes by value. Encoded here, when the buffers are bound, so that the timed replays
    encode nothing."""
    raw = _cuda.driver().encode_tensor_map(tmap, ptr).raw()
    return numpy.frombuffer(raw, dtype=numpy.dtype((numpy.void, _cuda.TENSOR_MAP_BYTES)))


def launcher(calls, keep):
    """A function launching calls [(fn, grid, block, shared bytes, args)] in order on torch's
    current stream; `keep` holds the buffers the arguments point to."""
    def run():
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        for fn, grid, block, smem, args in calls:
            fn(grid, block, args, shared_mem=smem, stream=stream)

    run.keep = keep
    return run


def cuda_graph(make_fn, n_sets, reps):
    """A CUDA graph of `reps` calls cycling over n_sets rotating input sets, warmed up."""
    fns = [make_fn(i) for i in range(n_sets)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for r in range(reps):
            fns[r % n_sets]()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    g.keep = fns
    return g


def replay_us(g, reps):
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000.0 / reps


def time_us(make_fn, n_sets, reps=20, replays=15):
    """Median time of one call, from CUDA-graph replays over n_sets rotating input sets."""
    g = cuda_graph(make_fn, n_sets, reps)
    times = [replay_us(g, reps) for _ in range(replays)]
    del g
    return statistics.median(times)


def energy_counter():
    """A function returning the GPU's energy counter in mJ (NVML), or None where pynvml is
    missing."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    except Exception:
        return None


def time_sustained(make_fn, n_sets, heat_ms, reps=20, min_ms=300):
    """Time and energy of one call once the GPU's power controller has answered its draw:
    heat_ms of the same replays back to back, untimed, then replays timed one by one for at
    least min_ms (and 15). Large FP8 and f16 GEMMs pull the H200 to its 700 W cap within about
    100 ms and the SM clock falls from 1980 MHz to 1150-1500 (session 23, nvidia-smi at 100 ms):
    a short timing sees the full clock, a model's stream of kernels the capped one, and the two
    rank tiles differently where they differ in energy. {"us": median, "mj": millijoules per
    call over the timed replays (None without NVML), "w": mean watts}. NVML's counter moves in
    coarse steps: over 300 ms some of session 23's windows read above the 700 W cap, so one
    window's energy is a hint, several agreeing a measurement."""
    g = cuda_graph(make_fn, n_sets, reps)
    t_end = time.monotonic() + heat_ms / 1000.0
    while time.monotonic() < t_end:
        g.replay()
        torch.cuda.synchronize()
    energy = energy_counter()
    e0 = energy() if energy else None
    t0 = time.monotonic()
    times = []
    while len(times) < 15 or (time.monotonic() - t0) * 1000.0 < min_ms:
        times.append(replay_us(g, reps))
    secs = time.monotonic() - t0
    out = {"us": statistics.median(times), "mj": None, "w": None}
    if energy:
        mj = energy() - e0
        out.update(mj=mj / (len(times) * reps), w=mj / 1000.0 / secs)
    del g
    return out


def time_rounds_us(makers, n_sets, reps=20, rounds=15):
    """Median times of several functions whose replays take turns (a, b, c, a, b, c, ...), so
    that a change of clocks or of a neighbour's load during the measurement reaches all alike."""
    graphs = [cuda_graph(make, n_sets, reps) for make in makers]
    times = [[] for _ in graphs]
    for _ in range(rounds):
        for g, t in zip(graphs, times):
            t.append(replay_us(g, reps))
    del graphs
    return [statistics.median(t) for t in times]


def kernel_times(fn, calls=50):
    """{kernel name: (launches per call, GPU us per call)} of fn() (the profiler's CUDA kernel
    events, summed by name), after one call outside the profile."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if us:
            per[e.key] = (e.count / calls, us / calls)
    return per


def time_pair_us(make_a, make_b, n_sets, reps=20, rounds=15):
    """time_rounds_us of two functions."""
    ta, tb = time_rounds_us([make_a, make_b], n_sets, reps, rounds)
    return ta, tb


def sets_for(nbytes):
    return max(1, min(16, math.ceil(2 * L2_BYTES / max(nbytes, 1))))


def rel_err(out, ref):
    out = out.float()
    ref = ref.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


# ---------------------------------------------------------------------------------------------
# Cases. Each gives the request, how to make inputs, the fp32 reference and the peer.


def gemm_case(name, m, n, k, dt="f16", fused=False, target=0.9, trans_a=False, trans_b=False, swiglu=False,
              residual=False):
    """A matmul row. fused: + bias + GELU (peer: eager PyTorch after cuBLAS). swiglu: silu of the
    product times a full-size operand [m, n] (an LLM MLP's gate; peer: cuBLAS, then PyTorch's
    silu and mul). residual: + bias, relu, + a full-size residual [m, n] (peer: cuBLASLt's
    fused bias + relu epilogue, torch.addmm + relu_, then PyTorch's add). trans_a / trans_b:
    A stored [k, m] / B stored [n, k] (cuBLAS takes both layouts natively: the peer multiplies
    the transposed views)."""
    a_shape = [k, m] if trans_a else [m, k]
    b_shape = [n, k] if trans_b else [k, n]
    inputs = [{"shape": a_shape, "dtype": dt}, {"shape": b_shape, "dtype": dt}]
    req = {"op": "matmul", "inputs": inputs}
    if trans_a or trans_b:
        req["attrs"] = {"trans_a": trans_a, "trans_b": trans_b}
    if fused:
        inputs.append({"shape": [n], "dtype": dt})
        req["epilogue"] = [{"op": "bias", "input": 2}, {"op": "gelu"}]
    if swiglu:
        inputs.append({"shape": [m, n], "dtype": dt})
        req["epilogue"] = [{"op": "silu"}, {"op": "mul", "input": 2}]
    if residual:
        inputs += [{"shape": [n], "dtype": dt}, {"shape": [m, n], "dtype": dt}]
        req["epilogue"] = [{"op": "bias", "input": 2}, {"op": "relu"}, {"op": "add", "input": 3}]

    def make_inputs():
        xs = [rand(a_shape, dt), rand(b_shape, dt)]
        if fused:
            xs.append(rand([n], dt))
        if swiglu:
            xs.append(rand([m, n], dt))
        if residual:
            xs += [rand([n], dt), rand([m, n], dt)]
        return xs

    def operands(xs):
        return (xs[0].t() if trans_a else xs[0]), (xs[1].t() if trans_b else xs[1])

    def reference(xs):
        a, b = operands(xs)
        y = a.float() @ b.float()
        if fused:
            y = F.gelu(y + xs[2].float())
        if swiglu:
            y = F.silu(y) * xs[2].float()
        if residual:
            y = F.relu(y + xs[2].float()) + xs[3].float()
        return y

    def peer(xs):
        a, b = operands(xs)
        if fused:
            return lambda: F.gelu(a @ b + xs[2])
        if swiglu:
            return lambda: F.silu(a @ b) * xs[2]
        if residual:  # addmm + relu is cuBLASLt's RELU_BIAS epilogue where PyTorch fuses it
            return lambda: torch.addmm(xs[2], a, b).relu_() + xs[3]
        return lambda: torch.matmul(a, b)

    flops = 2.0 * m * n * k
    bits = torch.finfo(TORCH_DT[dt]).bits
    extra = m * n if swiglu or residual else 0
    return dict(name=name, shape=f"{m}x{n}x{k}", dtype=dt, req=req, make_inputs=make_inputs,
                out_shape=[m, n], reference=reference, peer=peer, flops=flops, target=target,
                weight_bytes=k * n * bits // 8,
                nbytes=(m * k + k * n + m * n + extra) * bits // 8)


def conv_case(name, n, c, h, w, kout, r, stride=1, pad=None, dt="f16", target=0.8):
    pad = r // 2 if pad is None else pad
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - r) // stride + 1
    req = {"op": "conv2d", "inputs": [{"shape": [n, h, w, c], "dtype": dt},
                                       {"shape": [kout, r, r, c], "dtype": dt}],
           "attrs": {"stride": [stride, stride], "padding": [pad, pad], "layout": "nhwc"}}

    def make_inputs():
        return [rand([n, h, w, c], dt), rand([kout, r, r, c], dt)]

    def as_nchw_cl(x):  # NHWC storage viewed as NCHW channels_last
        return x.permute(0, 3, 1, 2)

    def reference(xs):
        y = F.conv2d(as_nchw_cl(xs[0]).float(), as_nchw_cl(xs[1]).float(), stride=stride, padding=pad)
        return y.permute(0, 2, 3, 1)

    def peer(xs):
        xa, wa = as_nchw_cl(xs[0]), as_nchw_cl(xs[1])
        return lambda: F.conv2d(xa, wa, stride=stride, padding=pad)

    def peer_as_ref(y):  # the peer answers NCHW (channels_last storage); compare as NHWC
        return y.permute(0, 2, 3, 1)

    flops = 2.0 * n * p * q * kout * r * r * c
    return dict(name=name, shape=f"N{n} {r}x{r} {c}->{kout} @{h}", dtype=dt, req=req,
                make_inputs=make_inputs, out_shape=[n, p, q, kout], reference=reference, peer=peer,
                peer_as_ref=peer_as_ref,
                flops=flops, target=target, nbytes=(n * h * w * c + n * p * q * kout) * 2)


def dwconv_case(n, c, h, stride, dt="f16", target=0.9):
    """A depthwise 3x3 conv (groups = C) as in MobileNetV2, NHWC against cuDNN on channels_last."""
    return gconv_case(n, c, h, c, stride=stride, dt=dt, target=target, name="dwconv2d",
                      shape=f"N{n} 3x3 dw {c} @{h} s{stride}")


def gconv_case(n, c, h, groups, stride=1, dt="f16", target=1.0, name="gconv", shape=None):
    """A grouped 3x3 conv (C in = C out, C/groups channels per group) as in ResNeXt and RegNet
    (and depthwise, groups = C, dwconv_case), NHWC against cuDNN on channels_last (torch conv2d
    with groups)."""
    r, pad = 3, 1
    p = (h + 2 * pad - r) // stride + 1
    cpg = c // groups
    req = {"op": "conv2d", "inputs": [{"shape": [n, h, h, c], "dtype": dt},
                                       {"shape": [c, r, r, cpg], "dtype": dt}],
           "attrs": {"stride": [stride, stride], "padding": [pad, pad], "groups": groups,
                     "layout": "nhwc"}}

    def make_inputs():
        return [rand([n, h, h, c], dt), rand([c, r, r, cpg], dt)]

    def as_nchw_cl(x):
        return x.permute(0, 3, 1, 2)

    def reference(xs):
        y = F.conv2d(as_nchw_cl(xs[0]).float(), as_nchw_cl(xs[1]).float(), stride=stride,
                     padding=pad, groups=groups)
        return y.permute(0, 2, 3, 1)

    def peer(xs):
        xa, wa = as_nchw_cl(xs[0]), as_nchw_cl(xs[1])
        return lambda: F.conv2d(xa, wa, stride=stride, padding=pad, groups=groups)

    def peer_as_ref(y):
        return y.permute(0, 2, 3, 1)

    return dict(name=name, shape=shape or f"N{n} 3x3 {c} g{groups} ({cpg}/g) @{h} s{stride}", dtype=dt,
                req=req, make_inputs=make_inputs, out_shape=[n, p, p, c], reference=reference,
                peer=peer, peer_as_ref=peer_as_ref, flops=2.0 * n * p * p * c * 9 * cpg,
                target=target, nbytes=(n * h * h * c + n * p * p * c) * 2)


def row_case(op, rows, cols, dt="f16", target=1.1):
    req = {"op": op, "inputs": [{"shape": [rows, cols], "dtype": dt}]}
    if op == "layernorm":
        req["inputs"] += [{"shape": [cols], "dtype": dt}, {"shape": [cols], "dtype": dt}]
        req["attrs"] = {"eps": 1e-5}

    def make_inputs():
        xs = [rand([rows, cols], dt)]
        if op == "layernorm":
            xs += [rand([cols], dt), rand([cols], dt)]
        return xs

    def reference(xs):
        if op == "softmax":
            return torch.softmax(xs[0].float(), dim=-1)
        return F.layer_norm(xs[0].float(), (cols,), xs[1].float(), xs[2].float(), 1e-5)

    def peer(xs):
        if op == "softmax":
            return lambda: torch.softmax(xs[0], dim=-1)
        return lambda: F.layer_norm(xs[0], (cols,), xs[1], xs[2], 1e-5)

    nbytes = 2 * rows * cols * torch.finfo(TORCH_DT[dt]).bits // 8
    return dict(name=op, shape=f"{rows}x{cols}", dtype=dt, req=req, make_inputs=make_inputs,
                out_shape=[rows, cols], reference=reference, peer=peer, flops=0, target=target,
                nbytes=nbytes)


def attn_reference(q, k, v, mask, causal, scale):
    """The attention op in fp32 (docs/api.md): GQA, causal bottom-right, dead rows 0."""
    q, k, v = q.float(), k.float(), v.float()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    sc = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        sc = sc + mask.float()
    s, skv = q.shape[2], k.shape[2]
    if causal:
        keep = torch.ones(s, skv, dtype=torch.bool, device=q.device).tril(skv - s)
        sc = sc.masked_fill(~keep, float("-inf"))
    dead = sc.amax(-1, keepdim=True) == float("-inf")
    p = torch.softmax(sc.masked_fill(dead, 0), -1).masked_fill(dead, 0)
    return torch.matmul(p, v)


SDPA_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def attn_case(name, b, hq, hkv, s, skv, d, causal=False, mask=None, dt="f16", peers=SDPA_BACKENDS,
              target=1.0):
    """q [B,Hq,S,D], k/v [B,Hkv,Skv,D]; mask None or "padding" (BERT's additive [B,1,1,Skv]
    mask, the last eighth of each sequence's keys -inf). The peer is the fastest of `peers`,
    PyTorch's SDPA forced to each backend (a backend that refuses the case is skipped)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    scale = 1.0 / math.sqrt(d)
    inputs = [{"shape": [b, hq, s, d], "dtype": dt}, {"shape": [b, hkv, skv, d], "dtype": dt},
              {"shape": [b, hkv, skv, d], "dtype": dt}]
    if mask == "padding":
        inputs.append({"shape": [b, 1, 1, skv], "dtype": dt})
    req = {"op": "attention", "inputs": inputs, "attrs": {"causal": causal}}

    def make_inputs():
        xs = [rand([b, hq, s, d], dt), rand([b, hkv, skv, d], dt), rand([b, hkv, skv, d], dt)]
        if mask == "padding":
            m = torch.zeros(b, 1, 1, skv, dtype=TORCH_DT[dt], device="cuda")
            m[..., skv - skv // 8:] = float("-inf")
            xs.append(m)
        return xs

    def reference(xs):
        return attn_reference(xs[0], xs[1], xs[2], xs[3] if len(xs) > 3 else None, causal, scale)

    def sdpa(xs, backend):
        kw = dict(is_causal=causal, scale=scale, enable_gqa=hq != hkv)
        if len(xs) > 3:
            kw["attn_mask"] = xs[3]
        if causal and s != skv:
            # PyTorch's is_causal is aligned to the top left; the op's to the bottom right.
            kw["is_causal"] = False
            keep = torch.ones(s, skv, dtype=torch.bool, device="cuda").tril(skv - s)
            kw["attn_mask"] = keep
        if backend is None:
            return lambda: F.scaled_dot_product_attention(xs[0], xs[1], xs[2], **kw)

        def run():
            with sdpa_kernel(getattr(SDPBackend, backend)):
                return F.scaled_dot_product_attention(xs[0], xs[1], xs[2], **kw)
        return run

    def peer_options(xs):
        """[(label, fn)] of the backends that take the case."""
        out = []
        for bk in peers:
            fn = sdpa(xs, bk)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception:
                continue
            out.append((bk.lower() if bk else "default", fn))
        return out

    flops = 4.0 * b * hq * d * (sum(min(skv, max(0, i + skv - s + 1)) for i in range(s)) if causal else s * skv)
    kv_bytes = 2 * b * hkv * skv * d * 2
    nbytes = (2 * b * hq * s * d + 2 * b * hkv * skv * d) * 2
    shape = f"b{b} h{hq}/{hkv} s{s} kv{skv} d{d}" + (" causal" if causal else "") + (" mask" if mask else "")
    return dict(name=name, shape=shape, dtype=dt, req=req, make_inputs=make_inputs,
                out_shape=[b, hq, s, d], reference=reference, peer_options=peer_options,
                peer=lambda xs: peer_options(xs)[0][1], flops=flops, target=target, nbytes=nbytes,
                kv_bytes=kv_bytes)


def attn_three_kernel_case(b, h, s, d, dt="f16", target=4.0):
    """The attention against hidetd's own three kernels for it (what a graph spelled it out as
    before the attention op): a batched matmul with the scale in its epilogue, the softmax rows,
    the second matmul. The peer's kernels are asked of the daemon too (run_case: peer_requests)."""
    case = attn_case("attn_vs_3kernels", b, h, h, s, s, d, dt=dt, peers=(), target=target)
    bt = b * h
    scale = 1.0 / math.sqrt(d)
    case["peer_requests"] = [
        {"op": "matmul", "inputs": [{"shape": [bt, s, d], "dtype": dt}, {"shape": [bt, s, d], "dtype": dt}],
         "attrs": {"trans_b": True}, "epilogue": [{"op": "scale", "value": scale}]},
        {"op": "softmax", "inputs": [{"shape": [bt, s, s], "dtype": dt}]},
        {"op": "matmul", "inputs": [{"shape": [bt, s, s], "dtype": dt}, {"shape": [bt, s, d], "dtype": dt}]},
    ]
    return case


FP8_DT = {"f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2} if hasattr(torch, "float8_e4m3fn") else {}
TORCH_DT.update(FP8_DT)  # an FP8 answer's output (a quantizing epilogue)


def fp8_gemm_case(name, m, n, k, scales="tensor", epilogue=False, quantize=False, fast_accum=True, target=1.0,
                  b_kn=False):
    """Issue 41's FP8 rows: A [M,K] e4m3 times B [N,K] e4m3 (trans_b: torch._scaled_mm's
    column-major B, B.t()), bf16 out, fp32 accumulation; scales "tensor" (one f32 each) or
    "rowcol" (A's per row [M,1], B's per column [1,N]); with epilogue a bf16 bias and GELU after
    the scales; with quantize, the result divided by one more f32 scale and cast to e4m3 (the next
    layer's input); fast_accum False: promoted every 128 k, against use_fast_accum=False only.
    Inputs uniform in [-1, 1] rounded to e4m3, scales in [0.75, 1.25]. The peer is the
    faster of torch._scaled_mm with and without use_fast_accum (our kernels accumulate in the
    wgmma accumulators throughout: fast accumulation, docs/api.md), then PyTorch's bias + GELU.
    b_kn: B stored [K,N] row-major (MN-major: weights as a [K,N] linear layer keeps them), which
    the template transposes in shared memory; the peer is given the column-major copy
    torch._scaled_mm needs, made once outside the timing (its best case)."""
    rowcol = scales == "rowcol"
    inputs = [{"shape": [m, k], "dtype": "f8e4m3"}, {"shape": [k, n] if b_kn else [n, k], "dtype": "f8e4m3"},
              {"shape": [m, 1] if rowcol else [1], "dtype": "f32"}, {"shape": [1, n] if rowcol else [1], "dtype": "f32"}]
    req = {"op": "matmul", "inputs": inputs,
           "attrs": {"trans_b": not b_kn, "out_dtype": "bf16", "scale_a": "row" if rowcol else "tensor",
                     "scale_b": "col" if rowcol else "tensor", "fast_accum": fast_accum}}
    if epilogue:
        inputs.append({"shape": [n], "dtype": "bf16"})
        req["epilogue"] = [{"op": "bias", "input": 4}, {"op": "gelu"}]
    if quantize:
        inputs.append({"shape": [1], "dtype": "f32"})
        req["epilogue"] += [{"op": "div", "input": 5}, {"op": "cast", "dtype": "f8e4m3"}]

    def make_inputs():
        a = rand([m, k], "f8e4m3")
        b = rand([k, n] if b_kn else [n, k], "f8e4m3")
        sa = torch.rand(m, 1, device="cuda") * 0.5 + 0.75 if rowcol else torch.rand(1, device="cuda") * 0.5 + 0.75
        sb = torch.rand(1, n, device="cuda") * 0.5 + 0.75 if rowcol else torch.rand(1, device="cuda") * 0.5 + 0.75
        xs = [a, b, sa.contiguous(), sb.contiguous()]
        if epilogue:
            xs.append(rand([n], "bf16"))
        if quantize:
            xs.append(torch.rand(1, device="cuda") * 0.5 + 0.25)
        return xs

    def quant(y, s):  # saturating, as the kernel's cvt.rn.satfinite
        return (y / s).clamp(-448, 448).to(FP8_DT["f8e4m3"])

    def reference(xs):
        bt = xs[1].float() if b_kn else xs[1].float().t()
        y = (xs[0].float() @ bt) * xs[2].reshape(-1, 1) * xs[3].reshape(1, -1)
        if epilogue:
            y = F.gelu(y + xs[4].float())
        if quantize:
            y = quant(y, xs[5]).float()
        return y

    def scaled_mm(xs, fast):
        sa = xs[2] if rowcol else xs[2].reshape(())
        sb = xs[3] if rowcol else xs[3].reshape(())
        # torch._scaled_mm takes B column-major: [N,K] row-major's view, or a copy of [K,N]'s.
        b_col = xs[1].t().contiguous().t() if b_kn else xs[1].t()
        mm = lambda: torch._scaled_mm(xs[0], b_col, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                      use_fast_accum=fast)
        if quantize:
            return lambda: quant(F.gelu(mm() + xs[4]), xs[5])
        if epilogue:
            return lambda: F.gelu(mm() + xs[4])
        return mm

    def peer_options(xs):
        out = []
        for fast in ((False, True) if fast_accum else (False,)):
            fn = scaled_mm(xs, fast)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception:
                continue
            out.append(("scaled_mm" + (" fast_accum" if fast else ""), fn))
        return out

    return dict(name=name, shape=f"{m}x{n}x{k}" + (" rowcol" if rowcol else "") + ("" if fast_accum else " promoted")
                + (" B[K,N]" if b_kn else ""),
                dtype="f8e4m3", req=req,
                make_inputs=make_inputs, out_shape=[m, n], reference=reference, peer_options=peer_options,
                peer=lambda xs: peer_options(xs)[0][1], flops=2.0 * m * n * k, target=target,
                weight_bytes=k * n, nbytes=m * k + k * n + m * n * 2,
                # FP8 inputs' products are exact; the sum keeps ~14 bits per k32 step (fast accumulation);
                # a quantized output may round to the neighbouring e4m3 code (1/8 of the value)
                tol=0.13 if quantize else 5e-2)


def fp8_block_case(m, n, k, target=1.1):
    """Issue 41's per-block row: A [M,K] e4m3 with 1x128 scales [M, K/128], B [N,K] e4m3 with
    128x128 scales [N/128, K/128] (DeepSeek-V3's), bf16 out. Peers, the fastest that takes the
    case: DeepGEMM where installed, torch._scaled_mm's blockwise mode where this PyTorch and
    cuBLASLt have it, and bench/triton_fp8_block.py (a Triton kernel of the public kernels'
    structure); only when none runs, dequantising in PyTorch then a bf16 matmul (labelled: a
    weak peer)."""
    kb, nb = -(-k // 128), -(-n // 128)
    inputs = [{"shape": [m, k], "dtype": "f8e4m3"}, {"shape": [n, k], "dtype": "f8e4m3"},
              {"shape": [m, kb], "dtype": "f32"}, {"shape": [nb, kb], "dtype": "f32"}]
    req = {"op": "matmul", "inputs": inputs,
           "attrs": {"trans_b": True, "out_dtype": "bf16", "scale_a": "block", "scale_b": "block"}}

    def make_inputs():
        a, b = rand([m, k], "f8e4m3"), rand([n, k], "f8e4m3")
        return [a, b, torch.rand(m, kb, device="cuda") * 0.5 + 0.75, torch.rand(nb, kb, device="cuda") * 0.5 + 0.75]

    def dequant(xs):
        sa = xs[2].repeat_interleave(128, 1)[:, :k]
        sb = xs[3].repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        return xs[0].float() * sa, xs[1].float() * sb

    def reference(xs):
        a, b = dequant(xs)
        return a @ b.t()

    def peer_options(xs):
        out = []
        try:
            import deep_gemm  # noqa: F401
            o = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            sa_t = xs[2].t().contiguous().t()  # DeepGEMM's A scales are column-major
            fn = lambda: deep_gemm.gemm_fp8_fp8_bf16_nt((xs[0], sa_t), (xs[1], xs[3]), o)
            fn()
            torch.cuda.synchronize()
            out.append(("deep_gemm", fn))
        except Exception:
            pass
        try:
            fn = lambda: torch._scaled_mm(xs[0], xs[1].t(), scale_a=xs[2], scale_b=xs[3].t(),
                                          out_dtype=torch.bfloat16)
            fn()
            torch.cuda.synchronize()
            out.append(("scaled_mm blockwise", fn))
        except Exception:
            pass
        try:
            from triton_fp8_block import blockwise_mm  # this folder's Triton kernel
            o = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            fn = lambda: blockwise_mm(xs[0], xs[1], xs[2], xs[3], out=o)
            fn()  # autotunes once per shape
            torch.cuda.synchronize()
            out.append(("triton blockwise", fn))
        except Exception as e:
            print("fp8_block: the Triton peer failed: %s" % e, file=sys.stderr)
        if not out:
            def deq_mm():
                a, b = dequant(xs)
                return a.to(torch.bfloat16) @ b.to(torch.bfloat16).t()
            out.append(("dequant+bf16 mm (weak peer)", deq_mm))
        return out

    return dict(name="fp8_block", shape=f"{m}x{n}x{k} 1x128/128x128", dtype="f8e4m3", req=req,
                make_inputs=make_inputs, out_shape=[m, n], reference=reference, peer_options=peer_options,
                peer=lambda xs: peer_options(xs)[0][1], flops=2.0 * m * n * k, target=target,
                nbytes=m * k + k * n + m * n * 2, tol=5e-2)


def suite(which):
    cases = []
    if which in ("all", "gemm"):
        # Targets are BENCH.md's (issue 13's) where the bench had lower ones; the skinny rows
        # (1.2) and the second fused row (1.5) keep this bench's stricter figures.
        cases += [gemm_case("gemm_square", 4096, 4096, 4096, target=0.95),
                  gemm_case("gemm_square", 4096, 4096, 4096, dt="bf16", target=0.95),
                  gemm_case("gemm_square", 8192, 8192, 8192, target=0.95),
                  gemm_case("gemm_llm", 2048, 4096, 4096, target=0.95),
                  gemm_case("gemm_llm", 4096, 3072, 768, target=0.95),
                  gemm_case("gemm_llm", 4096, 768, 3072, target=0.95),
                  gemm_case("gemm_llm", 8192, 14336, 4096, target=0.95)]
        # BENCH.md's decode rows (M = 1, 16, 64) and M = 128 (earlier results have it).
        cases += [gemm_case("gemm_skinny", m, n, 4096, target=1.2)
                  for n in (4096, 14336) for m in (1, 16, 64, 128)]
        # M between decode and square, not a multiple of 64 (issue 39's dynamic rows at their
        # exact sizes): where swapped operands (M on wgmma's N side) are cuBLAS's choice.
        cases += [gemm_case("gemm_mid", m, n, 4096, target=0.95) for n in (4096, 14336) for m in (100, 700, 2100)]
        cases += [gemm_case("gemm_odd", 77, 1000, 333, target=0.9),
                  gemm_case("gemm_odd", 1000, 1000, 1000, target=0.9),
                  gemm_case("gemm_odd", 4000, 4000, 4000, target=0.9),
                  gemm_case("gemm_bias_gelu", 4096, 3072, 768, fused=True, target=2.0),
                  gemm_case("gemm_bias_gelu", 2048, 14336, 4096, fused=True, target=1.5)]
        # Rows that are not 16-byte multiples (issue 40's class: an odd K makes A's, an odd N
        # B's and the output's; matmul_wgmma gathers such an operand): odd K, odd K and M, odd
        # N, and both odd.
        cases += [gemm_case("gemm_unaligned", 4096, 4096, 4095, target=1.0),
                  gemm_case("gemm_unaligned", 3001, 4096, 2047, target=1.0),
                  gemm_case("gemm_unaligned", 4096, 4095, 4096, target=1.0),
                  gemm_case("gemm_unaligned", 2047, 5003, 3001, target=1.0)]
    if which in ("all", "gemm", "gaps"):
        # Issue 40's classes on shapes of their own (not the issue's): the SwiGLU gate (silu of
        # x.W_gate times the up projection, a full-size epilogue operand) at LLM MLP sizes, and
        # the transposed layouts at LLM sizes (trans_b is every nn.Linear's weight).
        mlp = ((4096, 11008, 4096), (2048, 14336, 4096), (1024, 13824, 5120))
        cases += [gemm_case("gemm_swiglu", m, n, k, swiglu=True, target=1.3) for m, n, k in mlp]
        # The same GEMMs bare: what the fused operand read costs over them.
        cases += [gemm_case("gemm_mlp", m, n, k, target=0.95) for m, n, k in mlp]
        # A full-size residual after bias + relu at short K, where the operand's read is the
        # largest share of the epilogue's cost (issue 40: "every fused epilogue step, short K"),
        # and the bare GEMMs beside them.
        short = ((4096, 3072, 768), (8192, 1024, 1024))
        cases += [gemm_case("gemm_bias_relu_res", m, n, k, residual=True, target=1.3) for m, n, k in short]
        cases += [gemm_case("gemm_short_k", m, n, k, target=0.95) for m, n, k in short]
        cases += [gemm_case("gemm_trans_a", 2048, 4096, 11008, trans_a=True, target=1.0),
                  gemm_case("gemm_trans_b", 4096, 14336, 4096, trans_b=True, target=1.0),
                  gemm_case("gemm_trans_b", 2048, 4096, 4096, dt="bf16", trans_b=True, target=1.0),
                  gemm_case("gemm_trans_ab", 4096, 4096, 11008, trans_a=True, trans_b=True, target=1.0)]
    if which in ("all", "conv"):
        cases += [conv_case("conv2d", 32, 64, 56, 56, 64, 3),
                  conv_case("conv2d", 32, 128, 28, 28, 128, 3),
                  conv_case("conv2d", 32, 256, 14, 14, 256, 3),
                  conv_case("conv2d", 32, 512, 7, 7, 512, 3),
                  conv_case("conv2d", 32, 256, 56, 56, 64, 1)]
    if which in ("all", "conv", "gconv"):
        # ResNeXt-50 32x4d's grouped 3x3 layers at N=32 (4, 8, 16, 32 channels per group; the
        # stride-2 first block of stage 2), and RegNetX-800MF-style 16-per-group layers (18 and
        # 42 groups: group tiles that do not divide them).
        cases += [gconv_case(32, 128, 56, 32), gconv_case(32, 256, 28, 32),
                  gconv_case(32, 256, 56, 32, stride=2), gconv_case(32, 512, 14, 32),
                  gconv_case(32, 1024, 7, 32),
                  gconv_case(32, 288, 14, 18, name="gconv_regnet"),
                  gconv_case(32, 672, 7, 42, name="gconv_regnet")]
    if which in ("all", "conv", "dwconv"):
        # MobileNetV2's depthwise layers at N=32 (224x224 input): stride 1 and 2.
        cases += [dwconv_case(32, 32, 112, 1), dwconv_case(32, 96, 112, 2),
                  dwconv_case(32, 144, 56, 1), dwconv_case(32, 192, 28, 2),
                  dwconv_case(32, 384, 14, 1), dwconv_case(32, 960, 7, 1)]
    if which in ("all", "rows"):
        cases += [row_case("softmax", 4096, 4096, target=1.3), row_case("softmax", 32768, 1024, target=1.3),
                  row_case("softmax", 8192, 8192, target=1.3),
                  row_case("layernorm", 4096, 4096), row_case("layernorm", 32768, 1024),
                  row_case("layernorm", 8192, 8192)]
    if which in ("all", "attention"):
        # Issue 38's table: hd 128, B*S = 16k, 16 heads, against cuDNN's SDPA; hd 64 / 256 and
        # the BERT-like masked case against the best backend; decode with GQA 32/8.
        for causal in (False, True):
            for s in (2048, 4096, 8192, 16384):
                for dt in ("f16", "bf16"):
                    cases.append(attn_case("attn_hd128", 16384 // s, 16, 16, s, s, 128, causal=causal, dt=dt,
                                           peers=("CUDNN_ATTENTION",)))
        for d in (64, 256):
            for s in (2048, 8192):
                cases.append(attn_case("attn_hd%d" % d, 16384 // s, 16, 16, s, s, d))
        cases.append(attn_case("attn_bert", 8, 12, 12, 512, 512, 64, mask="padding", peers=(None,) + SDPA_BACKENDS,
                               target=1.3))
        for bsz in (1, 16, 64):
            for skv in (4096, 32768):
                cases.append(attn_case("attn_decode", bsz, 32, 8, 1, skv, 128, peers=(None,) + SDPA_BACKENDS,
                                       target=1.2))
        cases.append(attn_three_kernel_case(4, 16, 4096, 128))
    if which == "fp8" and FP8_DT:
        # Issue 41's table (H200, against torch._scaled_mm / cuBLASLt): per-tensor and per-row/column
        # scales at the four square and LLM shapes, decode M in {1, 16, 64} with N = K = 8192 (weights
        # streamed: also their fraction of the copy bandwidth), and GEMM + bias + GELU. Not in "all":
        # it needs PyTorch with float8 and an sm_90a daemon (--arch sm_90a).
        shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (4096, 4096, 14336)]
        for sc in ("tensor", "rowcol"):
            cases += [fp8_gemm_case("fp8_gemm", m, n, k, scales=sc, target=1.0) for m, n, k in shapes]
        cases += [fp8_gemm_case("fp8_decode", m, 8192, 8192, target=1.1) for m in (1, 16, 64)]
        # MN-major weights (B [K,N]): transposed in the kernel, against the peer's column-major copy.
        cases += [fp8_gemm_case("fp8_gemm_kn", 4096, 4096, 4096, target=1.0, b_kn=True),
                  fp8_gemm_case("fp8_decode_kn", 16, 8192, 8192, target=1.1, b_kn=True)]
        cases += [fp8_gemm_case("fp8_gemm", 8192, 8192, 8192, fast_accum=False, target=1.0)]
        cases += [fp8_gemm_case("fp8_bias_gelu", 4096, 14336, 4096, epilogue=True, target=1.5),
                  fp8_gemm_case("fp8_bias_gelu", 8192, 4096, 4096, epilogue=True, target=1.5)]
        cases += [fp8_gemm_case("fp8_bias_gelu_q", 4096, 14336, 4096, epilogue=True, quantize=True, target=1.5),
                  fp8_gemm_case("fp8_bias_gelu_q", 8192, 4096, 4096, epilogue=True, quantize=True, target=1.5)]
        cases += [fp8_block_case(4096, 7168, 7168)]
    return cases


def run_case(daemon, case, args):
    body = dict(case["req"], arch=args.arch, tune=args.tune, wait=True,
                budget={"seconds": args.budget_s})
    t0 = time.time()
    status, kset = daemon.call("POST", "/v1/kernels", body)
    tune_s = time.time() - t0
    row = dict(case=case["name"], shape=case["shape"], dtype=case["dtype"], tune_s=round(tune_s, 2))
    if status != 200:
        row["error"] = f"HTTP {status}: {json.dumps(kset)[:300]}"
        return row
    row.update(measured=kset.get("measured"), cached=kset.get("cached"),
               template=kset.get("schedule", {}).get("template"),
               params=kset.get("schedule", {}).get("params"), n_kernels=len(kset["kernels"]))
    kern = Kernel(daemon, kset, args.workdir)
    out_dt = TORCH_DT[kset["output"]["dtype"]]

    # Correctness on fresh random inputs: poisoned output, full comparison with the fp32 reference.
    xs = case["make_inputs"]()
    out = torch.full(case["out_shape"], float("nan"), device="cuda").to(out_dt)  # (fill_ has no FP8 kernel)
    kern.bind(xs, out)()
    torch.cuda.synchronize()
    ref = case["reference"](xs)
    err = rel_err(out, ref)
    if "peer_requests" in case:  # the peer is hidetd's own kernels: timed below, not checked
        peer_err = 0.0
    else:
        peer_out = case.get("peer_as_ref", lambda y: y)(case["peer"](xs)())
        peer_err = rel_err(peer_out, ref)
    tol = case.get("tol") or {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-2}[case["dtype"]]
    row.update(max_err=err, peer_err=peer_err, correct=bool(err <= max(tol, 2 * peer_err)))

    n_sets = sets_for(case["nbytes"])
    sets = [case["make_inputs"]() for _ in range(n_sets)]
    outs = [torch.empty(case["out_shape"], dtype=out_dt, device="cuda") for _ in range(n_sets)]
    peers = [("peer", lambda i: case["peer"](sets[i]))]
    if "peer_options" in case and "peer_requests" not in case:
        # The fastest of several peers (SDPA's backends): each one timed against ours.
        opts = [case["peer_options"](x) for x in sets]
        peers = [(label, (lambda j: lambda i: opts[i][j][1])(j)) for j, (label, _) in enumerate(opts[0])]
    if "peer_requests" in case:
        peers = [("hidetd 3 kernels", three_kernel_peer(daemon, case, sets, args))]
    if not peers:
        row["error"] = "no peer takes the case"
        return row
    timed = []
    for label, make_peer in peers:
        if args.alternate:
            ours, theirs = time_pair_us(lambda i: kern.bind(sets[i], outs[i]), make_peer, n_sets)
        else:
            ours = time_us(lambda i: kern.bind(sets[i], outs[i]), n_sets)
            theirs = time_us(make_peer, n_sets)
        timed.append((theirs, ours, label))
    theirs, ours, label = min(timed)
    if len(peers) > 1 or "peer_options" in case:
        row["peer"] = label
    row.update(peer_us=round(theirs, 2), hidetd_us=round(ours, 2))
    if row["correct"]:
        row["ratio"] = round(theirs / ours, 3)
        row["meets_target"] = row["ratio"] >= case["target"]
    row["target"] = case["target"]
    if case["flops"]:
        row["hidetd_tflops"] = round(case["flops"] / ours / 1e6, 1)
    else:
        row["hidetd_tbps"] = round(case["nbytes"] / ours / 1e6, 3)
    if case["name"] == "attn_decode" and args.copy_tbps:
        # Issue 38: K and V read at >= 80% of the copy bandwidth (read + write).
        row["kv_tbps"] = round(case["kv_bytes"] / ours / 1e6, 3)
        row["copy_frac"] = round(row["kv_tbps"] / args.copy_tbps, 3)
    if case["name"] in ("gemm_skinny", "fp8_decode") and args.copy_tbps:
        # BENCH.md: the weight read streams at >= 85% of the copy bandwidth (read + write).
        row["weight_tbps"] = round(case["weight_bytes"] / ours / 1e6, 3)
        row["copy_frac"] = round(row["weight_tbps"] / args.copy_tbps, 3)
    return row


def three_kernel_peer(daemon, case, sets, args):
    """The peer of attn_three_kernel_case: its three kernels asked of the daemon, chained over
    per-set buffers for the scores and probabilities (q, k, v viewed as [B*H, S, D])."""
    kerns = []
    for req in case["peer_requests"]:
        status, kset = daemon.call("POST", "/v1/kernels", dict(req, arch=args.arch, tune=args.tune, wait=True,
                                                               budget={"seconds": args.budget_s}))
        if status != 200:
            raise RuntimeError(f"three-kernel peer: HTTP {status}: {json.dumps(kset)[:200]}")
        kerns.append(Kernel(daemon, kset, args.workdir))
    b, h, s, d = case["out_shape"]
    runs = []
    for xs in sets:
        q, k, v = (x.reshape(b * h, -1, d) for x in xs[:3])
        sc = torch.empty(b * h, s, s, dtype=q.dtype, device="cuda")
        pr = torch.empty_like(sc)
        o = torch.empty(b * h, s, d, dtype=q.dtype, device="cuda")
        fns = [kerns[0].bind([q, k], sc), kerns[1].bind([sc], pr), kerns[2].bind([pr, v], o)]
        runs.append((lambda fns: lambda: [f() for f in fns])(fns))
    return lambda i: runs[i]


def copy_tbps():
    """Device-to-device copy bandwidth (bytes read + written per second, TB/s) of 117 MiB
    tensors, timed like the kernels (CUDA-graph replays over rotating sets)."""
    n = 117 * 1024 * 1024 // 2
    xs = [torch.empty(n, dtype=torch.float16, device="cuda").normal_() for _ in range(2)]
    ys = [torch.empty_like(x) for x in xs]
    us = time_us(lambda i: (lambda: ys[i].copy_(xs[i])), 2)
    del xs, ys
    return 2 * n * 2 / us / 1e6


def gpu_facts():
    q = "name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw"
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # nvidia-smi missing is worth a note, not a crash
        return f"nvidia-smi unavailable: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--workdir", default="/tmp/hidetd-bench-cubins", help="where cubins are written")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--tune", default="measure")
    ap.add_argument("--budget-s", type=float, default=20)
    ap.add_argument("--suite", default="all")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--match", default="", help="comma-separated substrings of 'name shape dtype': a case runs "
                    "when one of them is in it")
    ap.add_argument("--alternate", action="store_true",
                    help="time hidetd and the peer in alternating replays instead of one after the other")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.workdir, exist_ok=True)
    daemon = Daemon(args.socket)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    facts = dict(gpu_before=gpu_facts(), torch=torch.__version__, cuda=torch.version.cuda,
                 device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d %H:%M:%S"))
    rows = []
    only = set(filter(None, args.only.split(",")))
    cases = [c for c in suite(args.suite) if not only or c["name"] in only]
    match = list(filter(None, args.match.split(",")))
    if match:
        cases = [c for c in cases if any(m in "%s %s %s" % (c["name"], c["shape"], c["dtype"]) for m in match)]
    args.copy_tbps = None
    if any(c["name"] in ("gemm_skinny", "attn_decode", "fp8_decode") for c in cases):
        args.copy_tbps = facts["copy_tbps"] = round(copy_tbps(), 3)
    for case in cases:
        try:
            row = run_case(daemon, case, args)
        except Exception as e:  # one broken case must not hide the others' numbers
            row = dict(case=case["name"], shape=case["shape"], dtype=case["dtype"], error=repr(e)[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
        # Written after every case, so a run cut short still leaves what it measured.
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(dict(facts=facts, rows=rows), f, indent=1)
    facts["gpu_after"] = gpu_facts()

    hdr = f"{'case':16} {'shape':22} {'dt':4} {'peer us':>9} {'hidetd us':>9} {'ratio':>6} {'target':>6} {'max err':>9} {'tune s':>6}  template"
    lines = [hdr]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:16} {r['shape']:22} {r['dtype']:4} ERROR {r['error'][:90]}")
            continue
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "WRONG"
        bw = f"  {r['copy_frac']:.2f} of copy bw" if "copy_frac" in r else ""
        lines.append(f"{r['case']:16} {r['shape']:22} {r['dtype']:4} {r['peer_us']:9.1f} {r['hidetd_us']:9.1f} "
                     f"{ratio:>6} {r['target']:6.2f} {r['max_err']:9.2e} {r['tune_s']:6.1f}  {r['template']}{bw}")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(facts=facts, rows=rows), f, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("```\n" + json.dumps(facts, indent=1) + "\n" + table + "\n```\n")


if __name__ == "__main__":
    main()
