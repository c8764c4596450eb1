#!/usr/bin/env python3
"""tests/gpu/fp8_torch.py - FP8 through the torch.compile backend on a real GPU, against PyTorch
eager on CUDA (issue 41): casts, dynamic quantization and torch._scaled_mm.

    fp8_torch.py --socket SOCK [--tune none|model] [--no-bench] [--cuda-graphs]   # a running hidetd
    fp8_torch.py HIDETD [HIDETD_WORKER] [--lib DIR] [...]                         # starts one (meson)

Checks (exit 1 when one fails):
  - x.to(float8_e4m3fn / float8_e5m2) from f32, bf16 and f16, compiled by hidetd: the same bytes
    as eager on values of every kind (boundaries 448/464/480 and 57344/61440, infinities, NaN of
    both signs, subnormals, ties, random bit patterns), at a vectorised size and an odd one (the
    scalar path); and the way back (all 256 codes to f32, bf16, f16), equal (NaN where NaN);
  - a torchao-style FP8 linear layer (x quantized per row or per tensor, an e4m3 weight with its
    scale, _scaled_mm with bias to bf16): the quantized x byte-equal to eager, the output within
    2e-2 of eager's (both accumulate exact products in fp32, in other orders); every op run by
    hidetd (explain's count of ops left to PyTorch is 0).
Timings (unless --no-bench; CUDA events, median of 20): the cast f32 -> e4m3 and a per-row bf16
quantization of [8192, 8192] (GB/s moved), the FP8 linear layer at 4096^3 and at M = 16 (decode,
N = K = 8192), and _scaled_mm alone on FP8 inputs, hidetd against eager PyTorch (cuBLASLt).
Exits 77 without PyTorch or a GPU; the _scaled_mm parts need sm_89+ (PyTorch's _scaled_mm) and
hidetd's FP8 matmul sm_90a: on other GPUs only the casts run.
"""
import argparse
import functools
import os
import statistics
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, HERE)
from gpu_env import daemon_arguments, daemon_from_args  # noqa: E402


class Runner:
    """torch.compile with the hidetd backend; the backend's reports say what ran where."""

    def __init__(self, sock, tune, cuda_graphs, arch):
        self.opts = {"address": sock, "tune": tune, "cuda_graphs": cuda_graphs, "arch": arch}

    def compile(self, fn):
        import torch
        import hidetd
        torch._dynamo.reset()
        reports = []
        backend = functools.partial(hidetd.backend.hidetd_backend, _reports=reports)
        return torch.compile(fn, backend=backend, options=self.opts), reports

    @staticmethod
    def all_hidetd(reports):
        import hidetd
        e = hidetd.backend.Explanation(reports)
        ran = all(g.ran_plans for g in e.graphs if g.pieces)
        return e.torch == 0 and e.hidetd > 0 and ran, e


def special_values(n, torch):
    """n f32 values: boundaries of both formats, infinities, NaNs, subnormals, ties, random bits."""
    fixed = [0.0, -0.0, 1e-45, -1e-40, 2.0 ** -10, 2.0 ** -9, 1.5 * 2.0 ** -9, 2.5 * 2.0 ** -9, 2.0 ** -6,
             2.0 ** -16, 1.5 * 2.0 ** -16, 2.0 ** -17, 2.0 ** -14, 0.7265625, 1.0625, 1.1875,
             448.0, 449.0, 464.0, 464.00003, 470.0, 479.9, 480.0, 500.0, 1e30, 57344.0, 60000.0,
             61439.0, 61440.0, 65536.0, 1e6, float("inf"), float("-inf"), float("nan"), -448.0, -464.00003,
             -61440.0, -1e30]
    g = torch.Generator().manual_seed(41)
    parts = [torch.tensor(fixed), torch.tensor([-v for v in fixed])]
    for scale in (1e-4, 1e-2, 1.0, 100.0, 1e4, 1e5):
        parts.append(torch.randn(n // 8, generator=g) * scale)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (n // 8,), generator=g, dtype=torch.int64).to(torch.int32)
    parts.append(bits.view(torch.float32))
    x = torch.cat(parts)
    x = x[:n] if x.numel() >= n else torch.cat([x, torch.randn(n - x.numel(), generator=g)])
    x[-1] = -float("nan")  # a negative NaN (torch keeps its sign)
    return x


def check_casts(r, torch):
    """Every cast against eager's bytes. PyTorch's conversion to e4m3 gives NaN beyond the range on
    some builds and devices (CUDA's) where hidetd's saturates: there the backend leaves an
    unclamped cast to PyTorch (checked: it says so) and lowers a clamped one (checked on the
    clamped values, as quantization recipes cast)."""
    from hidetd import aten
    failures = 0
    fp8s = [torch.float8_e4m3fn, torch.float8_e5m2]
    saturates = aten._e4m3_saturates(torch.empty(0, device="cuda"))
    print("PyTorch %s's e4m3 conversion on CUDA %s" % (torch.__version__,
                                                       "saturates" if saturates else "gives NaN beyond 464"))
    for n in (1 << 20, 1001):
        base = special_values(n, torch).cuda()
        for src in (torch.float32, torch.bfloat16, torch.float16):
            x = base.to(src)
            for f8 in fp8s:
                kinds = [("", lambda t, f8=f8: t.to(f8))]
                if f8 == torch.float8_e4m3fn:
                    kinds.append(("clamped ", lambda t, f8=f8: t.clamp(-448.0, 448.0).to(f8)))
                for label, to8 in kinds:
                    lowered = label or f8 != torch.float8_e4m3fn or saturates
                    fn, reports = r.compile(to8)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        got = fn(x)
                    want = to8(x)
                    ok_all, e = r.all_hidetd(reports)
                    diff = (got.view(torch.uint8) != want.view(torch.uint8)).nonzero().flatten()
                    said = "gives NaN" in str(e)
                    bad = diff.numel() > 0 or (not ok_all if lowered else (ok_all or not said))
                    failures += bad
                    print("%s %scast %-8s -> %-13s n=%-7d %s%s" % (
                        "FAIL" if bad else "ok  ", label, str(src)[6:], str(f8)[6:], n,
                        "%d bytes differ" % diff.numel() if diff.numel() else "bytes equal",
                        ("" if ok_all else " (not all in hidetd: %s)" % e) if lowered
                        else " (left to PyTorch, as it should: %s)" % ("said why" if said else e)))
                    for i in diff[:5].tolist():
                        print("      x=%r hidetd 0x%02x torch 0x%02x" % (
                            x[i].item(), got.view(torch.uint8)[i].item(), want.view(torch.uint8)[i].item()))
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).repeat(4096).cuda()
    for f8 in fp8s:
        q = codes.view(f8)
        for dst in (torch.float32, torch.bfloat16, torch.float16):
            def back(t, dst=dst):
                return t.to(dst)
            fn, reports = r.compile(back)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = fn(q)
            want = back(q)
            ok_all, e = r.all_hidetd(reports)
            same = torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(
                torch.nan_to_num(got.float(), nan=0.0), torch.nan_to_num(want.float(), nan=0.0))
            bad = not same or not ok_all
            failures += bad
            print("%s cast %-13s -> %-8s %s%s" % ("FAIL" if bad else "ok  ", str(f8)[6:], str(dst)[6:],
                                               "equal" if same else "DIFFERS", "" if ok_all else " (%s)" % e))
    return failures


def fp8_linear(torch, k, n, rowwise, fast):
    import torch.nn as nn

    class Fp8Linear(nn.Module):
        def __init__(self):
            super().__init__()
            w = torch.randn(n, k) * 0.05
            ws = (w.abs().amax(dim=1, keepdim=True) if rowwise else w.abs().amax()) / 448.0
            self.register_buffer("w8", (w / ws).clamp(-448, 448).to(torch.float8_e4m3fn))
            self.register_buffer("ws", ws.reshape(1, n) if rowwise else ws.reshape(()))
            self.bias = nn.Parameter(torch.randn(n).to(torch.bfloat16))

        def forward(self, x):
            xf = x.float()
            amax = xf.abs().amax(dim=(1,) if rowwise else (0, 1), keepdim=True).clamp(min=1e-12)
            q = (xf * (448.0 / amax)).clamp(-448, 448).to(torch.float8_e4m3fn)
            y = torch._scaled_mm(q, self.w8.t(), scale_a=amax / 448.0, scale_b=self.ws, bias=self.bias,
                                 out_dtype=torch.bfloat16, use_fast_accum=fast)
            return q, y

    return Fp8Linear().cuda().eval()


def check_linear(r, torch):
    failures = 0
    for rowwise in (True, False):
        for fast in (False, True):
            torch.manual_seed(0)
            m = fp8_linear(torch, 512, 384, rowwise, fast)
            x = (torch.randn(256, 512, device="cuda") * 3).to(torch.bfloat16)
            fn, reports = r.compile(m)
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q, y = fn(x)
                q0, y0 = m(x)
            ok_all, e = r.all_hidetd(reports)
            q_same = torch.equal(q.view(torch.uint8), q0.view(torch.uint8))
            err = float((y.float() - y0.float()).abs().max() / y0.float().abs().max())
            bad = not (q_same and err < 2e-2 and ok_all)
            failures += bad
            print("%s linear %s scales, fast_accum %-5s: q %s, y max err %.2e of max|y|; %s" % (
                "FAIL" if bad else "ok  ", "row-wise" if rowwise else "tensor", fast,
                "byte-equal" if q_same else "DIFFERS", err,
                "all in hidetd" if ok_all else "NOT all in hidetd: %s" % e))
    return failures


def timed(fn, *args, iters=20):
    import torch
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*args)
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def bench(r, torch, fp8_mm):
    rows = []

    def row(name, eager_fn, args, moved=None, flops=None):
        fn, reports = r.compile(eager_fn)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_h = timed(fn, *args)
        ok_all, _ = r.all_hidetd(reports)
        t_e = timed(eager_fn, *args)
        extra = ""
        if moved:
            extra = "  %.0f / %.0f GB/s" % (moved / t_h / 1e6, moved / t_e / 1e6)
        if flops:
            extra = "  %.0f / %.0f TFLOP/s" % (flops / t_h / 1e9, flops / t_e / 1e9)
        print("bench %-44s hidetd %8.3f ms  eager %8.3f ms  x%.2f%s%s" % (
            name, t_h, t_e, t_e / t_h, extra, "" if ok_all else "  (NOT all in hidetd)"), flush=True)
        rows.append((name, t_h, t_e))

    x = torch.randn(8192, 8192, device="cuda")
    row("cast f32 -> e4m3 [8192,8192]", lambda t: t.to(torch.float8_e4m3fn), (x,), moved=x.numel() * 5)
    xb = x.to(torch.bfloat16)

    def quant_rows(t):
        tf = t.float()
        amax = tf.abs().amax(dim=1, keepdim=True).clamp(min=1e-12)
        return (tf * (448.0 / amax)).clamp(-448, 448).to(torch.float8_e4m3fn), amax / 448.0
    row("row-wise quantize bf16 -> e4m3 [8192,8192]", quant_rows, (xb,), moved=xb.numel() * 5)
    if not fp8_mm:
        return rows
    for (mm, k, n) in ((4096, 4096, 4096), (16, 8192, 8192)):
        torch.manual_seed(0)
        m = fp8_linear(torch, k, n, True, False)
        xi = (torch.randn(mm, k, device="cuda")).to(torch.bfloat16)
        row("fp8 linear (quantize + _scaled_mm) %dx%dx%d" % (mm, n, k), m, (xi,), flops=2.0 * mm * n * k)
        a8 = (torch.randn(mm, k, device="cuda") * 8).clamp(-448, 448).to(torch.float8_e4m3fn)
        sa, sb = torch.rand(mm, 1, device="cuda"), torch.rand(1, n, device="cuda")

        def mm_only(a, m=m, sa=sa, sb=sb):
            return torch._scaled_mm(a, m.w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                    use_fast_accum=True)
        row("_scaled_mm e4m3 row/col fast %dx%dx%d" % (mm, n, k), mm_only, (a8,), flops=2.0 * mm * n * k)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    daemon_arguments(ap)
    ap.add_argument("--tune", default="model")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--cuda-graphs", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipped")
        return 77
    if not torch.cuda.is_available():
        print("no CUDA GPU visible to PyTorch: skipped")
        return 77
    proc, sock = daemon_from_args(ap, a, "hidetd-fp8-")
    cap = torch.cuda.get_device_capability()
    # The FP8 matmul parts on Hopper only (sm_89's matmul_mma FP8 is checked by tuner_gpu_verify).
    fp8_mm = cap == (9, 0)
    # The GPU's own target (sm_90a on Hopper: the FP8 matmul needs the arch-specific one).
    arch = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a"}.get(cap, "native")
    failures = 0
    try:
        r = Runner(sock, a.tune, a.cuda_graphs, arch)
        failures += check_casts(r, torch)
        if fp8_mm:
            failures += check_linear(r, torch)
        else:
            print("the FP8 linear layer needs sm_90a (hidetd's FP8 matmul): skipped on this GPU")
        if not a.no_bench:
            bench(r, torch, fp8_mm)
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
    print("fp8 through torch.compile: %s" % ("OK" if not failures else "%d FAILURE(S)" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
