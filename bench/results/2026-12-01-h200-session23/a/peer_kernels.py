"""Which cuBLASLt kernels torch._scaled_mm runs for issue 41's rows (tensor and row-wise scales,
the 8192x14336x4096 GEMM and the decode shapes), by torch.profiler's kernel names, with each
one's time; the names carry cuBLAS's tile, cluster and schedule."""
import torch
from torch.profiler import profile, ProfilerActivity

e4 = torch.float8_e4m3fn


def run(m, n, k, rowcol, fast):
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(e4)
    b = (torch.rand(n, k, device="cuda") * 2 - 1).to(e4)
    sa = torch.rand(m, 1, device="cuda") + 0.5 if rowcol else torch.tensor(1.0, device="cuda")
    sb = torch.rand(1, n, device="cuda") + 0.5 if rowcol else torch.tensor(1.0, device="cuda")
    f = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            f()
        torch.cuda.synchronize()
    for ev in p.key_averages():
        if ev.device_type.name == "CUDA" and ev.count >= 5:
            print(f"{m}x{n}x{k} {'rowcol' if rowcol else 'tensor'} fast={int(fast)}: "
                  f"{ev.device_time_total / ev.count:8.1f} us x{ev.count} {ev.key[:200]}")


for (m, n, k) in ((8192, 14336, 4096), (8192, 8192, 8192), (1, 8192, 8192), (16, 8192, 8192), (64, 8192, 8192)):
    for rowcol in (False, True):
        for fast in (False, True):
            try:
                run(m, n, k, rowcol, fast)
            except Exception as e:
                print(f"{m}x{n}x{k} rowcol={rowcol} fast={fast}: {e!r}"[:200])
