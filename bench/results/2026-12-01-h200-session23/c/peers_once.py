"""One call of each peer of call c's programs, for ncu: torch._scaled_mm with row/col scales at
8192x14336x4096 (fast accumulation) and torch.matmul f16 at 2048x14336x4096."""
import torch
e4 = torch.float8_e4m3fn
a = (torch.rand(8192, 4096, device="cuda") * 2 - 1).to(e4)
b = (torch.rand(14336, 4096, device="cuda") * 2 - 1).to(e4)
sa, sb = torch.rand(8192, 1, device="cuda") + 0.5, torch.rand(1, 14336, device="cuda") + 0.5
torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)
x = torch.randn(2048, 4096, device="cuda", dtype=torch.float16)
w = torch.randn(4096, 14336, device="cuda", dtype=torch.float16)
torch.matmul(x, w)
torch.cuda.synchronize()
