"""bench/triton_fp8_block.py - a block-scaled FP8 GEMM written with Triton: the peer of issue 41's
per-block row (bench.py fp8_block) on a machine without DeepGEMM or a blockwise torch._scaled_mm.

C [M, N] (bf16) = sum over 128-k blocks kb of (A[:, kb] . B[:, kb]^T) * sa[m, kb] * sb[n // 128, kb]
with A [M, K] and B [N, K] e4m3 (K-major, as DeepSeek-V3's inference kernels take them), sa the
1x128 scales [M, ceil(K/128)] and sb the 128x128 ones [ceil(N/128), ceil(K/128)]: each 128-k
block's product from the tensor cores (tl.dot, fp32) is scaled into an fp32 accumulator, the
structure of every public block-scaled kernel. Tiles in a grouped order (L2 reuse of A's rows),
the configuration autotuned per shape by Triton on first use.

    blockwise_mm(a, b, sa, sb) -> bf16 [M, N]

TRITON_INTERPRET=1 runs it on a CPU (small shapes) for checking.
"""
import os

import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128  # the scales' k block
BLOCK_K = tl.constexpr(SCALE_BLOCK)  # the same, for the kernel (jit code reads only constexpr globals)


def _configs():
    out = []
    for bm, bn, warps, stages in ((128, 128, 8, 4), (128, 256, 8, 3), (64, 128, 4, 4), (128, 64, 4, 4)):
        out.append(triton.Config({"BM": bm, "BN": bn, "GROUP": 8}, num_warps=warps, num_stages=stages))
    return out


@triton.jit
def _blockwise_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, KB,
                      BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Grouped order: GROUP tile rows share their B panels while they run.
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = tl.minimum(tiles_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[:, None] * K + offs_k[None, :]
    in_m = offs_m < M
    in_n = offs_n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(0, KB):
        in_k = offs_k[None, :] < K - kb * BLOCK_K
        a = tl.load(a_ptrs, mask=in_m[:, None] & in_k, other=0.0)
        b = tl.load(b_ptrs, mask=in_n[:, None] & in_k, other=0.0)
        part = tl.dot(a, tl.trans(b))
        s_a = tl.load(sa_ptr + offs_m * KB + kb, mask=in_m, other=0.0)
        s_b = tl.load(sb_ptr + (offs_n // BLOCK_K) * KB + kb, mask=in_n, other=0.0)
        acc += part * s_a[:, None] * s_b[None, :]
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=in_m[:, None] & in_n[None, :])


# Autotuned on a GPU; the interpreter (no driver to time with) runs one small configuration.
_blockwise_tuned = triton.autotune(configs=_configs(), key=["M", "N", "K"])(_blockwise_kernel)


def blockwise_mm(a, b, sa, sb, out=None):
    """a [M, K], b [N, K] float8_e4m3fn (contiguous); sa [M, ceil(K/128)], sb [ceil(N/128),
    ceil(K/128)] float32 (contiguous). Returns (or fills) a bf16 [M, N]."""
    m, k = a.shape
    n = b.shape[0]
    kb = triton.cdiv(k, SCALE_BLOCK)
    if b.shape[1] != k or tuple(sa.shape) != (m, kb) or tuple(sb.shape) != (triton.cdiv(n, SCALE_BLOCK), kb):
        raise ValueError("blockwise_mm: shapes a %s b %s sa %s sb %s do not fit" %
                         (tuple(a.shape), tuple(b.shape), tuple(sa.shape), tuple(sb.shape)))
    if out is None:
        out = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)

    def grid(meta):
        return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
    if os.environ.get("TRITON_INTERPRET") == "1":
        _blockwise_kernel[grid](a, b, sa, sb, out, m, n, k, kb, BM=64, BN=64, GROUP=8)
    else:
        _blockwise_tuned[grid](a, b, sa, sb, out, m, n, k, kb)
    return out


if __name__ == "__main__":
    # A check against the dequantised product (on a CPU with TRITON_INTERPRET=1, or a GPU).
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    for m, n, k in ((70, 200, 300), (128, 256, 256)):
        a = (torch.rand(m, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
        b = (torch.rand(n, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
        kb, nb = triton.cdiv(k, 128), triton.cdiv(n, 128)
        sa = torch.rand(m, kb, device=dev) * 0.5 + 0.75
        sb = torch.rand(nb, kb, device=dev) * 0.5 + 0.75
        got = blockwise_mm(a, b, sa, sb).float()
        da = a.float() * sa.repeat_interleave(128, 1)[:, :k]
        db = b.float() * sb.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        want = da @ db.t()
        err = ((got - want).abs().max() / want.abs().max()).item()
        print("blockwise_mm %dx%dx%d: max error %.2e of the output's scale" % (m, n, k, err))
        assert err < 1e-2, err
