/* tests/gpu/template_sweep.c - every template the tuner has, verified on a real GPU.
 *
 * For each case (op, shape, fusion, alignment) and dtype: build the schedule space, take every
 * candidate or a deterministic, evenly spread sample (default up to 24, `--max N`; the default
 * schedule always included), generate and compile each with NVRTC, and run it against
 * tuner_reference() through the measurement core (gpu_workers/measure.c) on random inputs.
 * Prints one compact row per case and dtype: space size, candidates ok / wrong / failed, the
 * largest relative error among the correct ones. Exits 1 if any candidate computes a wrong
 * result (and lists them), 77 without a GPU and driver.
 *
 * Cases run in parallel child processes (--jobs N, default: half the CPUs, at most 8), forked
 * before this process touches CUDA. A candidate that faults poisons its child's CUDA context:
 * the child reports it and exits, and the parent continues the case in a fresh child from the
 * next candidate.
 *
 *   gpu_template_sweep [--max N] [--jobs N] [--filter SUBSTRING] [--template NAME] [--verbose]
 *
 * --template NAME samples only that template's candidates (its default first where it is the
 * space's default): e.g. every matmul_wgmma candidate with --max 1000. --param NAME=VALUE keeps
 * only candidates with that parameter value (e.g. overlap=1).
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_workers/measure.h"
#include "tuner/tuner.h"

/* ---- cases ---- */

typedef struct scase {
    char name[64];
    tuner_op op; /* dtype set per run */
    bool f32_ok; /* the case makes sense in fp32 too */
} scase;

static tuner_tensor tensor(int rank, const int64_t *shape, int align)
{
    tuner_tensor t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.align = align;
    return t;
}

static tuner_op blank(tuner_op_kind k)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = k;
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        op.prologue[i].n = 0;
    op.epilogue.n = 0;
    return op;
}

static tuner_op matmul(int64_t bt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, int align)
{
    tuner_op op = blank(TUNER_OP_MATMUL);
    int64_t a[3], b[3], o[3];
    int r = bt > 1 ? 3 : 2, off = r - 2;
    if (bt > 1)
        a[0] = b[0] = o[0] = bt;
    a[off] = ta ? k : m;
    a[off + 1] = ta ? m : k;
    b[off] = tb ? n : k;
    b[off + 1] = tb ? k : n;
    o[off] = m;
    o[off + 1] = n;
    op.inputs[0] = tensor(r, a, align);
    op.inputs[1] = tensor(r, b, align);
    op.output = tensor(r, o, 16);
    op.n_inputs = op.n_anchor_inputs = 2;
    op.attrs.matmul.trans_a = ta;
    op.attrs.matmul.trans_b = tb;
    op.attrs.matmul.allow_tf32 = true;
    return op;
}

/* Appends a binary epilogue step reading a new operand of the given shape. */
static void add_operand_step(tuner_op *op, tuner_ew_kind k, int rank, const int64_t *shape)
{
    int idx = op->n_inputs++;
    op->inputs[idx] = tensor(rank, shape, 16);
    tuner_ew_step *s = &op->epilogue.steps[op->epilogue.n++];
    s->kind = k;
    s->operand = idx;
}

static void add_unary_step(tuner_ew_chain *c, tuner_ew_kind k, double scalar)
{
    tuner_ew_step *s = &c->steps[c->n++];
    s->kind = k;
    s->operand = -1;
    s->scalar = scalar;
}

/* Input 0's prologue: scale by `scalar`, then `k` with a new input of `shape` broadcast to x. */
static void add_x_prologue(tuner_op *op, double scalar, tuner_ew_kind k, int rank, const int64_t *shape)
{
    add_unary_step(&op->prologue[0], TUNER_EW_SCALE, scalar);
    int idx = op->n_inputs++;
    op->inputs[idx] = tensor(rank, shape, 16);
    tuner_ew_step *s = &op->prologue[0].steps[op->prologue[0].n++];
    s->kind = k;
    s->operand = idx;
}

static tuner_op conv(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int r, int s,
                     int stride, int pad)
{
    tuner_op op = blank(TUNER_OP_CONV2D);
    int64_t x[4] = {n, h, w, c}, wt[4] = {k, r, s, c};
    int64_t p = (h + 2 * pad - (r - 1) - 1) / stride + 1, q = (w + 2 * pad - (s - 1) - 1) / stride + 1;
    int64_t o[4] = {n, p, q, k};
    op.inputs[0] = tensor(4, x, 16);
    op.inputs[1] = tensor(4, wt, 16);
    op.output = tensor(4, o, 16);
    op.n_inputs = op.n_anchor_inputs = 2;
    op.attrs.conv2d.stride[0] = op.attrs.conv2d.stride[1] = stride;
    op.attrs.conv2d.pad[0] = op.attrs.conv2d.pad[1] = pad;
    op.attrs.conv2d.dilation[0] = op.attrs.conv2d.dilation[1] = 1;
    op.attrs.conv2d.groups = 1;
    return op;
}

/* A grouped NHWC conv (depthwise when groups == c). */
static tuner_op gconv(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int r, int stride,
                      int pad, int groups)
{
    tuner_op op = conv(n, h, w, c, k, r, r, stride, pad);
    op.inputs[1].shape[3] = c / groups;
    op.attrs.conv2d.groups = groups;
    return op;
}

/* op (from conv or gconv) with dilation d in both dimensions, its output size recomputed. */
static tuner_op dilated(tuner_op op, int d)
{
    const int64_t *x = op.inputs[0].shape, *wt = op.inputs[1].shape;
    const int stride = op.attrs.conv2d.stride[0], pad = op.attrs.conv2d.pad[0];
    op.attrs.conv2d.dilation[0] = op.attrs.conv2d.dilation[1] = d;
    op.output.shape[1] = (x[1] + 2 * pad - d * (wt[1] - 1) - 1) / stride + 1;
    op.output.shape[2] = (x[2] + 2 * pad - d * (wt[2] - 1) - 1) / stride + 1;
    return op;
}

/* op (from conv or gconv) with its stride, padding and dilation set per dimension (H, W), its
 * output size recomputed. */
static tuner_op geometry(tuner_op op, int sh, int sw, int ph, int pw, int dh, int dw)
{
    const int64_t *x = op.inputs[0].shape, *wt = op.inputs[1].shape;
    op.attrs.conv2d.stride[0] = sh, op.attrs.conv2d.stride[1] = sw;
    op.attrs.conv2d.pad[0] = ph, op.attrs.conv2d.pad[1] = pw;
    op.attrs.conv2d.dilation[0] = dh, op.attrs.conv2d.dilation[1] = dw;
    op.output.shape[1] = (x[1] + 2 * ph - dh * (wt[1] - 1) - 1) / sh + 1;
    op.output.shape[2] = (x[2] + 2 * pw - dw * (wt[2] - 1) - 1) / sw + 1;
    return op;
}

static tuner_op rows_op(tuner_op_kind k, int64_t rows, int64_t d, int align, int n_affine)
{
    tuner_op op = blank(k);
    int64_t s[2] = {rows, d}, v[1] = {d};
    op.inputs[0] = tensor(2, s, align);
    op.output = tensor(2, s, 16);
    op.n_inputs = op.n_anchor_inputs = 1 + n_affine;
    for (int i = 1; i <= n_affine; i++)
        op.inputs[i] = tensor(1, v, align);
    op.attrs.norm.eps = 1e-5;
    return op;
}

static tuner_op reduce(int rank, const int64_t *shape, int axis, tuner_reduce_kind kind, int align)
{
    tuner_op op = blank(TUNER_OP_REDUCE);
    int64_t o[TUNER_MAX_RANK];
    int orank = 0;
    op.inputs[0] = tensor(rank, shape, align);
    for (int i = 0; i < rank; i++)
        if (i != axis)
            o[orank++] = shape[i];
    if (orank == 0)
        o[orank++] = 1;
    op.output = tensor(orank, o, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.attrs.reduce.kind = kind;
    op.attrs.reduce.axis = axis;
    op.attrs.reduce.keepdim = false;
    return op;
}

static tuner_op elementwise(int64_t rows, int64_t d, int align)
{
    tuner_op op = blank(TUNER_OP_ELEMENTWISE);
    int64_t s[2] = {rows, d}, v[1] = {d};
    op.inputs[0] = tensor(2, s, align);
    op.output = tensor(2, s, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    add_operand_step(&op, TUNER_EW_ADD, 1, v);
    op.inputs[1].align = align;
    add_unary_step(&op.epilogue, TUNER_EW_GELU_TANH, 0);
    add_unary_step(&op.epilogue, TUNER_EW_SCALE, 0.5);
    return op;
}

/* gather: x (rank xr) along `axis` by an index of dtype it (rank ir); the output
 * x.shape[:axis] + index.shape + x.shape[axis+1:]. */
static tuner_op gather(int xr, const int64_t *xs, int axis, tuner_dtype it, int ir, const int64_t *is)
{
    tuner_op op = blank(TUNER_OP_GATHER);
    op.attrs.gather.axis = axis;
    op.inputs[0] = tensor(xr, xs, 16);
    op.inputs[1] = tensor(ir, is, 16);
    op.inputs[1].dtype = it;
    op.n_inputs = op.n_anchor_inputs = 2;
    int64_t os[TUNER_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        os[r++] = xs[d];
    for (int d = 0; d < ir; d++)
        os[r++] = is[d];
    for (int d = axis + 1; d < xr; d++)
        os[r++] = xs[d];
    op.output = tensor(r, os, 16);
    return op;
}

/* pool2d: x [N,H,W,C] (or [N,C,H,W]); the output by PyTorch's rule, or adaptive_avg's P x Q. */
static tuner_op pool(tuner_pool_kind kind, bool nchw, int64_t n, int64_t c, int64_t h, int64_t w, int kh, int kw,
                     int s, int pad, int d, bool ceil, bool include_pad, int64_t P, int64_t Q)
{
    tuner_op op = blank(TUNER_OP_POOL2D);
    op.attrs.pool2d.kind = kind;
    op.attrs.pool2d.nchw = nchw;
    if (kind != TUNER_POOL_ADAPTIVE_AVG) {
        op.attrs.pool2d.kernel[0] = kh, op.attrs.pool2d.kernel[1] = kw;
        op.attrs.pool2d.stride[0] = op.attrs.pool2d.stride[1] = s;
        op.attrs.pool2d.pad[0] = op.attrs.pool2d.pad[1] = pad;
        op.attrs.pool2d.dilation[0] = op.attrs.pool2d.dilation[1] = d;
        op.attrs.pool2d.ceil_mode = ceil;
        op.attrs.pool2d.count_include_pad = include_pad;
        P = tuner_pool_out_size(h, kh, s, pad, d, ceil);
        Q = tuner_pool_out_size(w, kw, s, pad, d, ceil);
    }
    int64_t x[4] = {n, h, w, c}, o[4] = {n, P, Q, c};
    if (nchw) {
        x[1] = c, x[2] = h, x[3] = w;
        o[1] = c, o[2] = P, o[3] = Q;
    }
    op.inputs[0] = tensor(4, x, 16);
    op.output = tensor(4, o, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    return op;
}

/* attention: q [b,hq,s,d], k and v [b,hkv,skv,d] (bshd: [b,s,h,d]); mask_rank 0 (none), 2
 * ([s,skv]) or 4 ([b,1,1,skv]). The mask is the run's float dtype (set_dtype). */
static tuner_op attention(int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t skv, int64_t d, bool causal,
                          bool bshd, int mask_rank)
{
    tuner_op op = blank(TUNER_OP_ATTENTION);
    const int64_t q[4] = {b, bshd ? s : hq, bshd ? hq : s, d}, kv[4] = {b, bshd ? skv : hkv, bshd ? hkv : skv, d};
    op.inputs[0] = tensor(4, q, 16);
    op.inputs[1] = op.inputs[2] = tensor(4, kv, 16);
    op.n_inputs = op.n_anchor_inputs = 3;
    if (mask_rank == 2) {
        const int64_t m[2] = {s, skv};
        op.inputs[3] = tensor(2, m, 16);
        op.n_inputs = op.n_anchor_inputs = 4;
    } else if (mask_rank == 4) {
        const int64_t m[4] = {b, 1, 1, skv};
        op.inputs[3] = tensor(4, m, 16);
        op.n_inputs = op.n_anchor_inputs = 4;
    }
    op.attrs.attention.causal = causal;
    op.attrs.attention.bshd = bshd;
    op.attrs.attention.scale = 1.0 / sqrt((double)d);
    op.output = tensor(4, q, 16);
    return op;
}

/* attention in the bshd_packed layout: one qkv [b,s,hq+2*hkv,d] (self-attention), the mask
 * ([b,1,1,s] for mask_rank 4) inputs[1]. */
static tuner_op attention_packed(int64_t b, int64_t hq, int64_t hkv, int64_t s, int64_t d, bool causal, int mask_rank)
{
    tuner_op op = blank(TUNER_OP_ATTENTION);
    const int64_t qkv[4] = {b, s, hq + 2 * hkv, d}, o[4] = {b, s, hq, d};
    op.inputs[0] = tensor(4, qkv, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    if (mask_rank == 4) {
        const int64_t m[4] = {b, 1, 1, s};
        op.inputs[1] = tensor(4, m, 16);
        op.n_inputs = op.n_anchor_inputs = 2;
    }
    op.attrs.attention.causal = causal;
    op.attrs.attention.bshd = op.attrs.attention.packed = true;
    op.attrs.attention.kv_heads = (int)hkv;
    op.attrs.attention.scale = 1.0 / sqrt((double)d);
    op.output = tensor(4, o, 16);
    return op;
}

static int build_cases(scase *c)
{
    int n = 0;
#define ADD(NAME, OP, F32)                                                                          \
    do {                                                                                           \
        snprintf(c[n].name, sizeof(c[n].name), "%s", NAME);                                        \
        c[n].op = OP;                                                                              \
        c[n].f32_ok = F32;                                                                         \
        n++;                                                                                       \
    } while (0)
    ADD("mm 128x256x64", matmul(1, 128, 256, 64, false, false, 16), true);
    ADD("mm 77x1000x333", matmul(1, 77, 1000, 333, false, false, 2), true);
    ADD("mm 1000x1000x1000", matmul(1, 1000, 1000, 1000, false, false, 16), true);
    ADD("mm b4 64x48x40 ta", matmul(4, 64, 48, 40, true, false, 16), true);
    ADD("mm b3 96x80x72 tb", matmul(3, 96, 80, 72, false, true, 16), true);
    ADD("mm 16x64x8192 skinny", matmul(1, 16, 64, 8192, false, false, 16), true);
    /* Edge tiles in M, N and K with TMA-addressable rows (matmul_wgmma on sm_90a). */
    ADD("mm 333x517x200 tb", matmul(1, 333, 517, 200, false, true, 16), true);
    ADD("mm b2 200x136x264 ta tb", matmul(2, 200, 136, 264, true, true, 16), true);
    ADD("mm 8x4096x4096 skinny", matmul(1, 8, 4096, 4096, false, false, 16), true);
    /* Operands TMA cannot address, gathered by matmul_wgmma's producer (aligned 16-byte loads
     * shifted into place, issue 40): an odd K (A gathered, B by TMA, the output staged), an odd
     * N (B gathered N-major, the output stored from registers), both odd with 2-byte aligned
     * bases, batched, + bias, and both transposed with odd strides. */
    ADD("mm unal 1000x1000x1001 oddk", matmul(1, 1000, 1000, 1001, false, false, 16), true);
    ADD("mm unal 999x1001x1024 oddn", matmul(1, 999, 1001, 1024, false, false, 16), true);
    {
        /* 517 columns with a bias: matmul_wgmma does not gather it (wg_supported: its last
         * column came out wrong on the H200); 518: both operands gathered from 2-byte bases. */
        tuner_op op = matmul(2, 333, 517, 201, false, false, 2);
        int64_t bias[1] = {517};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        ADD("mm unal b2 333x517x201 both a2 +bias", op, true);
        tuner_op op2 = matmul(2, 333, 518, 201, false, false, 2);
        int64_t bias2[1] = {518};
        add_operand_step(&op2, TUNER_EW_ADD, 1, bias2);
        ADD("mm unal b2 333x518x201 both a2 +bias", op2, true);
    }
    ADD("mm unal b3 201x136x333 ta tb", matmul(3, 201, 136, 333, true, true, 16), true);
    /* Stream-K (matmul_wgmma): a batch whose tiles are fewer than the SMs, edges in M, N and K,
     * M-major A, the residual and row operands of the fused chain after the fixup. */
    {
        tuner_op op = matmul(2, 304, 1000, 1000, true, false, 16);
        int64_t res[3] = {2, 304, 1000}, rowscale[3] = {2, 304, 1};
        add_operand_step(&op, TUNER_EW_ADD, 3, res);
        add_operand_step(&op, TUNER_EW_MUL, 3, rowscale);
        ADD("mm b2 304x1000x1000 ta +res,*row", op, true);
    }
    {
        /* Decode: one row against nn.Linear-layout weights ([N, K]), N off every tile size, a
         * fused chain on the split-K (cluster) reduction's stores. */
        tuner_op op = matmul(1, 1, 4001, 2048, false, true, 16);
        int64_t bias[1] = {4001};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_GELU_ERF, 0);
        ADD("mm 1x4001x2048 tb decode +bias,gelu", op, true);
    }
    {
        tuner_op op = matmul(1, 256, 512, 128, false, false, 16);
        int64_t bias[1] = {512};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_GELU_ERF, 0);
        ADD("mm 256x512x128 +bias,gelu", op, true);
    }
    {
        /* Edge tiles in M and N under a fused chain with column, full and row operands: the
         * templates evaluate it for every fragment, clamping rows and columns past the output
         * (tuner__gemm_emit_epilogue_pair), and must store none of those. */
        tuner_op op = matmul(1, 333, 520, 200, false, false, 16);
        int64_t bias[1] = {520}, res[2] = {333, 520}, rowscale[2] = {333, 1};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_operand_step(&op, TUNER_EW_ADD, 2, res);
        add_operand_step(&op, TUNER_EW_MUL, 2, rowscale);
        add_unary_step(&op.epilogue, TUNER_EW_GELU_ERF, 0);
        ADD("mm 333x520x200 +b,+res,*row,gelu", op, true);
    }
    /* Full-size epilogue operands that matmul_wgmma loads by TMA into shared memory tiles (where
     * they fit beside the ring; the rest of its candidates read them from global memory): the
     * SwiGLU gate silu(x.W) * up with edge tiles in M and N and a short K; a batch with bias,
     * relu and a residual per batch entry; a batch sharing one [M, N] operand. */
    {
        tuner_op op = matmul(1, 333, 200, 136, false, false, 16);
        int64_t up[2] = {333, 200};
        add_unary_step(&op.epilogue, TUNER_EW_SILU, 0);
        add_operand_step(&op, TUNER_EW_MUL, 2, up);
        ADD("mm 333x200x136 silu,*up", op, false);
    }
    {
        tuner_op op = matmul(2, 200, 264, 768, false, false, 16);
        int64_t bias[1] = {264}, res[3] = {2, 200, 264};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        add_operand_step(&op, TUNER_EW_ADD, 3, res);
        ADD("mm b2 200x264x768 +b,relu,+res", op, false);
    }
    {
        tuner_op op = matmul(3, 136, 128, 64, false, false, 16);
        int64_t up[2] = {136, 128};
        add_unary_step(&op.epilogue, TUNER_EW_SILU, 0);
        add_operand_step(&op, TUNER_EW_MUL, 2, up);
        ADD("mm b3 136x128x64 silu,*up[M,N]", op, false);
    }
    /* Pingpong blocks walking more than one tile per consumer (on 132 SMs): 2176 x 1000 is 34 x
     * 16 = 544 64x64 tiles and 17 x 16 = 272 128x64 ones, a last round of 8; with the SwiGLU
     * operand, whose slot the producer picks by the tile's place among its block's. */
    {
        tuner_op op = matmul(1, 2176, 1000, 128, false, false, 16);
        int64_t up[2] = {2176, 1000};
        add_unary_step(&op.epilogue, TUNER_EW_SILU, 0);
        add_operand_step(&op, TUNER_EW_MUL, 2, up);
        ADD("mm 2176x1000x128 silu,*up", op, false);
    }
    {
        tuner_op op = matmul(1, 128, 128, 256, false, false, 16);
        add_unary_step(&op.prologue[0], TUNER_EW_SCALE, 0.5);
        ADD("mm 128x128x256 A*0.5", op, true);
    }
    ADD("conv 2x28x28x64 k64 3x3 s1p1", conv(2, 28, 28, 64, 64, 3, 3, 1, 1), true);
    ADD("conv 1x17x17x3 k13 3x3 s2p1", conv(1, 17, 17, 3, 13, 3, 3, 2, 1), true);
    ADD("conv 2x14x14x96 k32 1x1", conv(2, 14, 14, 96, 32, 1, 1, 1, 0), true);
    ADD("conv 1x15x15x33 k17 1x1 s2", conv(1, 15, 15, 33, 17, 1, 1, 2, 0), true);
    /* conv2d_wgmma on sm_90a: groups with 16 channels each and a 3-D output map, a K of 648
     * (not a multiple of 64; k tiles crossing window positions) with odd M and N = 40, a
     * dilated window. */
    {
        tuner_op op = gconv(3, 13, 11, 32, 48, 3, 2, 1, 2);
        int64_t bias[1] = {48};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        ADD("gconv 3x13x11x32 k48 g2 3x3 s2 +b,relu", op, true);
    }
    ADD("conv 2x9x7x72 k40 3x3 s1p1", conv(2, 9, 7, 72, 40, 3, 3, 1, 1), true);
    /* A ResNet block's residual after bias and relu (conv2d_wgmma loads it by TMA into shared
     * memory: A by im2col maps, 64 channels; a dense 1x1 with M off the tiles). */
    {
        tuner_op op = conv(2, 14, 14, 64, 64, 3, 3, 1, 1);
        int64_t bias[1] = {64}, res[4] = {2, 14, 14, 64};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        add_operand_step(&op, TUNER_EW_ADD, 4, res);
        ADD("conv 2x14x14x64 k64 3x3 +b,relu,+res", op, false);
    }
    {
        tuner_op op = conv(2, 7, 7, 128, 256, 1, 1, 1, 0);
        int64_t bias[1] = {256}, res[4] = {2, 7, 7, 256};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        add_operand_step(&op, TUNER_EW_ADD, 4, res);
        ADD("conv 2x7x7x128 k256 1x1 +b,relu,+res", op, false);
    }
    /* Few tiles, a long K: split-K clusters of the gathering conv2d_wgmma (and conv2d_mma). */
    ADD("conv 2x7x7x512 k512 3x3 s1p1", conv(2, 7, 7, 512, 512, 3, 3, 1, 1), true);
    ADD("conv 1x19x17x64 k64 3x3 d2p2", dilated(conv(1, 19, 17, 64, 64, 3, 3, 1, 2), 2), true);
    /* conv2d_wgmma reading A through an im2col map (64 channels per group): two groups, a 3x5
     * window and every geometry attribute different across H and W, so that a corner, offset
     * or stride applied to the wrong dimension shows; 126 rows of M, a bias and relu. */
    {
        tuner_op op = conv(3, 13, 10, 128, 80, 3, 5, 1, 0);
        op.inputs[1].shape[3] = 64;
        op.attrs.conv2d.groups = 2;
        op = geometry(op, 2, 1, 1, 2, 1, 2);
        int64_t bias[1] = {80};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        ADD("gconv 3x13x10x128 k80 g2 3x5 s2,1 p1,2 d1,2 +b,relu", op, true);
    }
    /* Depthwise and small-group convolutions (conv2d_direct and the GEMM templates). */
    ADD("dwconv 2x28x28x96 3x3 s1p1", gconv(2, 28, 28, 96, 96, 3, 1, 1, 96), true);
    {
        tuner_op op = gconv(2, 29, 29, 144, 144, 3, 2, 1, 144);
        int64_t bias[1] = {144};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        ADD("dwconv 2x29x29x144 3x3 s2 +b,relu", op, true);
    }
    ADD("dwconv 1x17x13x24 k48 5x5 p2", gconv(1, 17, 13, 24, 48, 5, 1, 2, 24), true);
    /* Dilated, 15 output rows: conv2d_direct's shared input rows (tp 2, 4) at the last, partial
     * row block, with every other input row unused by a single output row. */
    ADD("dwconv 1x15x13x32 3x3 d2p2", dilated(gconv(1, 15, 13, 32, 32, 3, 1, 2, 32), 2), true);
    ADD("gconv 1x15x15x32 k64 g8 3x3", gconv(1, 15, 15, 32, 64, 3, 1, 1, 8), true);
    /* conv2d_grouped (4-32 channels per group on tensor cores): ResNeXt-50's layers at a small
     * batch (8, 4, 16, 32 per group; the stride-2 block), a RegNet-style 16-per-group layer with
     * 28 groups (a partial group tile), 12 per group (per-lane tap offsets) dilated with a bias
     * and relu, kpg 6 (a partial n8 tile) under a 5x5 stride-2 window, and 16 per group
     * with stride, padding and dilation different across H and W. */
    ADD("gconv 2x28x28x256 g32 3x3 (8/g)", gconv(2, 28, 28, 256, 256, 3, 1, 1, 32), false);
    ADD("gconv 2x56x56x128 g32 3x3 (4/g)", gconv(2, 56, 56, 128, 128, 3, 1, 1, 32), false);
    ADD("gconv 2x56x56x256 g32 3x3 s2 (8/g)", gconv(2, 56, 56, 256, 256, 3, 2, 1, 32), false);
    ADD("gconv 3x14x14x512 g32 3x3 (16/g)", gconv(3, 14, 14, 512, 512, 3, 1, 1, 32), false);
    ADD("gconv 3x7x7x1024 g32 3x3 (32/g)", gconv(3, 7, 7, 1024, 1024, 3, 1, 1, 32), false);
    ADD("gconv 2x28x28x448 g28 3x3 (16/g)", gconv(2, 28, 28, 448, 448, 3, 1, 1, 28), false);
    {
        tuner_op op = dilated(gconv(3, 13, 11, 48, 48, 3, 1, 2, 4), 2);
        int64_t bias[1] = {48};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        ADD("gconv 3x13x11x48 g4 (12/g) d2 +b,relu", op, false);
    }
    ADD("gconv 2x9x7x64 k96 g16 5x5 s2p2 (4/g kpg6)", gconv(2, 9, 7, 64, 96, 5, 2, 2, 16), false);
    ADD("gconv 2x17x19x64 g4 3x3 s2,1 p1,2 d1,2", geometry(gconv(2, 17, 19, 64, 64, 3, 1, 1, 4), 2, 1, 1, 2, 1, 2),
        false);
    /* Images of 25 and 16 pixels: one tile of the whole image. */
    ADD("gconv 3x5x5x64 g8 3x3 (whole-image tile)", gconv(3, 5, 5, 64, 64, 3, 1, 1, 8), false);
    ADD("gconv 2x4x4x128 g8 3x3 (16/g, 16 px)", gconv(2, 4, 4, 128, 128, 3, 1, 1, 8), false);
    {
        /* rsqrt(x + 0.25) * g: NaN wherever the random x is below -0.25, in the reference and
         * in every candidate alike (a batchnorm's prepared scale has this shape). */
        tuner_op op = blank(TUNER_OP_ELEMENTWISE);
        int64_t s[2] = {77, 1000}, g[1] = {1000};
        op.inputs[0] = tensor(2, s, 16);
        op.output = tensor(2, s, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        add_unary_step(&op.epilogue, TUNER_EW_SHIFT, 0.25);
        add_unary_step(&op.epilogue, TUNER_EW_RSQRT, 0);
        add_operand_step(&op, TUNER_EW_MUL, 1, g);
        ADD("elementwise rsqrt(x+.25)*g (part NaN)", op, true);
    }
    {
        /* Layout kernels: a transpose with a bias, a stepped slice, a concat. */
        tuner_op op = blank(TUNER_OP_COPY);
        int64_t in[3] = {33, 65, 129}, out[3] = {129, 33, 65}, bias[1] = {65};
        op.inputs[0] = tensor(3, in, 16);
        op.output = tensor(3, out, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        op.attrs.copy.strides[0] = 1;
        op.attrs.copy.strides[1] = 65 * 129;
        op.attrs.copy.strides[2] = 129;
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        ADD("copy transpose [33,65,129] +b", op, true);
        op = blank(TUNER_OP_COPY);
        int64_t sin[2] = {1000, 77}, sout[2] = {499, 38};
        op.inputs[0] = tensor(2, sin, 16);
        op.output = tensor(2, sout, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        op.attrs.copy.offset = 2 * 77 + 1;
        op.attrs.copy.strides[0] = 2 * 77;
        op.attrs.copy.strides[1] = 2;
        ADD("copy slice [1000,77] step 2", op, true);
        op = blank(TUNER_OP_CONCAT);
        int64_t a[3] = {7, 5, 33}, b[3] = {7, 1, 33}, c3[3] = {7, 17, 33}, o3[3] = {7, 23, 33};
        op.inputs[0] = tensor(3, a, 16);
        op.inputs[1] = tensor(3, b, 16);
        op.inputs[2] = tensor(3, c3, 16);
        op.n_inputs = op.n_anchor_inputs = 3;
        op.output = tensor(3, o3, 16);
        op.attrs.concat.axis = 1;
        add_unary_step(&op.epilogue, TUNER_EW_SILU, 0);
        ADD("concat [7,{5,1,17},33] ax1", op, true);
    }
    ADD("softmax 333x1000", rows_op(TUNER_OP_SOFTMAX, 333, 1000, 16, 0), true);
    ADD("softmax 7x4097 align2", rows_op(TUNER_OP_SOFTMAX, 7, 4097, 2, 0), true);
    ADD("layernorm 129x768 affine", rows_op(TUNER_OP_LAYERNORM, 129, 768, 16, 2), true);
    ADD("layernorm 5x1001 align2", rows_op(TUNER_OP_LAYERNORM, 5, 1001, 2, 0), true);
    ADD("rmsnorm 257x4096 gamma", rows_op(TUNER_OP_RMSNORM, 257, 4096, 16, 1), true);
    ADD("rmsnorm 3x999 align2 gamma", rows_op(TUNER_OP_RMSNORM, 3, 999, 2, 1), true);
    {
        int64_t s1[2] = {33, 777}, s2[3] = {17, 5, 31}, s3[2] = {1000, 3};
        ADD("reduce sum [33,777] ax1", reduce(2, s1, 1, TUNER_REDUCE_SUM, 16), true);
        ADD("reduce max [17,5,31] ax1", reduce(3, s2, 1, TUNER_REDUCE_MAX, 2), true);
        ADD("reduce mean [1000,3] ax0", reduce(2, s3, 0, TUNER_REDUCE_MEAN, 2), true);
        /* Long column reductions: 16-byte loads, split chunks combined by a second kernel. */
        int64_t s4[2] = {100000, 64}, s5[3] = {3, 20001, 40}, s6[2] = {4099, 1000};
        ADD("reduce sum [100000,64] ax0", reduce(2, s4, 0, TUNER_REDUCE_SUM, 16), true);
        ADD("reduce max [3,20001,40] ax1", reduce(3, s5, 1, TUNER_REDUCE_MAX, 16), true);
        ADD("reduce mean [4099,1000] ax0", reduce(2, s6, 0, TUNER_REDUCE_MEAN, 16), true);
        /* Prologues on x: a scaled, masked softmax; a row-scaled layernorm split over blocks;
         * column sums of a row-weighted input (split and not). */
        int64_t mask[2] = {333, 1000}, rowv[2] = {5, 1}, colv[2] = {100000, 1}, mid[2] = {333, 1};
        tuner_op op = rows_op(TUNER_OP_SOFTMAX, 333, 1000, 16, 0);
        add_x_prologue(&op, 0.125, TUNER_EW_ADD, 2, mask);
        ADD("softmax 333x1000 *s +mask", op, true);
        op = rows_op(TUNER_OP_LAYERNORM, 5, 70001, 2, 2);
        add_x_prologue(&op, 2.0, TUNER_EW_MUL, 2, rowv);
        ADD("layernorm 5x70001 align2 *row", op, true);
        op = reduce(2, s4, 0, TUNER_REDUCE_SUM, 16);
        add_x_prologue(&op, 0.5, TUNER_EW_MUL, 2, colv);
        ADD("reduce sum [100000,64] ax0 *w", op, true);
        int64_t s7[3] = {7, 333, 1000};
        op = reduce(3, s7, 1, TUNER_REDUCE_MAX, 16);
        add_x_prologue(&op, -1.0, TUNER_EW_SUB, 2, mid);
        ADD("reduce max [7,333,1000] ax1 -w", op, true);
        op = reduce(3, s7, 2, TUNER_REDUCE_MEAN, 16);
        add_x_prologue(&op, 3.0, TUNER_EW_ADD, 2, mid);
        ADD("reduce mean [7,333,1000] ax2 +w", op, true);
    }
    {
        /* FP8 in elementwise kernels (issue 41), against the reference's c10 conversion (the
         * candidates' cvt.rn.satfinite and its fix-ups on sm_89+): a quantize whose scale takes
         * |x| past 448 (e4m3 saturates, as torch's float8_e4m3fn) and past 61440 (e5m2 gives inf,
         * as torch's float8_e5m2), a dequantize of random FP8 bytes (16-byte loads), and odd
         * sizes with an FP8 operand and a cast through FP8 (scalar path). */
        int64_t s[2] = {77, 1024}, odd[2] = {7, 1001}, v[1] = {1001};
        tuner_op q = blank(TUNER_OP_ELEMENTWISE);
        q.inputs[0] = tensor(2, s, 16);
        q.inputs[0].dtype = TUNER_F32;
        q.output = tensor(2, s, 16);
        q.n_inputs = q.n_anchor_inputs = 1;
        tuner_op e = q;
        e.output.dtype = TUNER_F8E4M3;
        add_unary_step(&e.epilogue, TUNER_EW_SCALE, 600.0);
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F8E4M3};
        ADD("ew fp8 f32 *600 ->e4m3 (saturates)", e, true);
        e = q;
        e.output.dtype = TUNER_F8E5M2;
        add_unary_step(&e.epilogue, TUNER_EW_SCALE, 70000.0);
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F8E5M2};
        ADD("ew fp8 f32 *70000 ->e5m2 (inf)", e, true);
        e = q;
        e.inputs[0].dtype = TUNER_F8E4M3;
        e.output.dtype = TUNER_BF16;
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
        add_unary_step(&e.epilogue, TUNER_EW_SCALE, 0.5);
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_BF16};
        ADD("ew fp8 e4m3 ->f32 *.5 ->bf16", e, true);
        e = blank(TUNER_OP_ELEMENTWISE);
        e.inputs[0] = tensor(2, odd, 1);
        e.inputs[0].dtype = TUNER_F8E5M2;
        e.inputs[1] = tensor(1, v, 1);
        e.inputs[1].dtype = TUNER_F8E4M3;
        e.n_inputs = 2;
        e.n_anchor_inputs = 1;
        e.output = tensor(2, odd, 4);
        e.output.dtype = TUNER_F32;
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = 1};
        add_unary_step(&e.epilogue, TUNER_EW_SCALE, 300.0);
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F8E4M3};
        e.epilogue.steps[e.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F32};
        ADD("ew fp8 e5m2+e4m3 odd *300 via e4m3", e, true);
    }
    ADD("ew 1000x333 +b,gelu,*.5", elementwise(1000, 333, 16), true);
    ADD("ew 7x1001 align2", elementwise(7, 1001, 2), true);
    {
        /* PyTorch's activations, elementwise and fused into matmul and conv epilogues: clamp
         * with one and two bounds (ReLU6), hardswish, hardsigmoid, leaky_relu, erf, and pow by
         * its short forms (2, 0.5: NaN on negatives in both) and the general path (an odd
         * and an even integer exponent on negative bases, a negative fraction, a fraction giving
         * NaN on negative bases). */
        int64_t s[2] = {77, 1000};
        tuner_op op = blank(TUNER_OP_ELEMENTWISE);
        op.inputs[0] = tensor(2, s, 16);
        op.output = tensor(2, s, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        tuner_op ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SCALE, 8.0);
        add_unary_step(&ew.epilogue, TUNER_EW_HARDSWISH, 0);
        add_unary_step(&ew.epilogue, TUNER_EW_CLAMP, -0.25);
        ew.epilogue.steps[ew.epilogue.n - 1].scalar2 = 4.5;
        ADD("ew *8,hardswish,clamp(-.25,4.5)", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SCALE, 8.0);
        add_unary_step(&ew.epilogue, TUNER_EW_HARDSIGMOID, 0);
        add_unary_step(&ew.epilogue, TUNER_EW_SHIFT, -0.5);
        add_unary_step(&ew.epilogue, TUNER_EW_LEAKY_RELU, 0.2);
        ADD("ew *8,hardsigmoid,-.5,leaky_relu(.2)", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_ERF, 0);
        add_unary_step(&ew.epilogue, TUNER_EW_POW, 2.0);
        add_unary_step(&ew.epilogue, TUNER_EW_POW, 0.5);
        ADD("ew erf,pow 2,pow .5", ew, true);
        /* Bases kept away from 0 under a negative exponent: a result past f16's range would
         * be inf in the candidate and finite in the f32 reference. */
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SCALE, 3.0);
        add_unary_step(&ew.epilogue, TUNER_EW_POW, 5.0);
        ADD("ew *3,pow 5 (neg bases)", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SHIFT, 2.0);
        add_unary_step(&ew.epilogue, TUNER_EW_POW, -2.5);
        ADD("ew +2,pow -2.5", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SCALE, 3.0);
        add_unary_step(&ew.epilogue, TUNER_EW_POW, 4.0);
        ADD("ew *3,pow 4 (neg bases)", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_POW, 2.5);
        ADD("ew pow 2.5 (NaN on neg)", ew, true);
        tuner_op mm = matmul(1, 256, 512, 128, false, false, 16);
        int64_t bias[1] = {512};
        add_operand_step(&mm, TUNER_EW_ADD, 1, bias);
        add_unary_step(&mm.epilogue, TUNER_EW_HARDSWISH, 0);
        add_unary_step(&mm.epilogue, TUNER_EW_CLAMP, 0);
        mm.epilogue.steps[mm.epilogue.n - 1].scalar2 = 6;
        ADD("mm 256x512x128 +b,hardswish,relu6", mm, true);
        tuner_op dw = gconv(2, 29, 29, 144, 144, 3, 2, 1, 144);
        add_unary_step(&dw.epilogue, TUNER_EW_CLAMP, 0);
        dw.epilogue.steps[dw.epilogue.n - 1].scalar2 = 6;
        ADD("dwconv 2x29x29x144 3x3 s2 relu6", dw, true);
        tuner_op cv = conv(2, 14, 14, 96, 32, 1, 1, 1, 0);
        add_unary_step(&cv.epilogue, TUNER_EW_LEAKY_RELU, 0.1);
        add_unary_step(&cv.epilogue, TUNER_EW_CLAMP, -HUGE_VAL);
        cv.epilogue.steps[cv.epilogue.n - 1].scalar2 = 1.0;
        ADD("conv 2x14x14x96 k32 1x1 leaky,clamp(max 1)", cv, true);
    }
    {
        /* log and the masks, against the reference. The sweep's inputs are uniform in [-1, 1]
         * and never 0, so a where or masked_fill condition read from an input is always true:
         * their false branch and NaN/inf rules are checked on the host (tuner/tests/
         * test_codegen.c, test_masks); here the comparisons give mixed 0/1 masks, and every
         * operand (where's other too) goes through each template's loads and broadcasts.
         * Comparisons only ever see values loaded as they are (no arithmetic before them), so
         * the candidate and the reference compare the same numbers. */
        int64_t s[2] = {77, 1000}, col[1] = {1000}, row[2] = {77, 1};
        tuner_op op = blank(TUNER_OP_ELEMENTWISE);
        op.inputs[0] = tensor(2, s, 16);
        op.output = tensor(2, s, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        tuner_op ew = op;
        add_operand_step(&ew, TUNER_EW_GT, 1, col);
        add_operand_step(&ew, TUNER_EW_MUL, 2, s);
        add_unary_step(&ew.epilogue, TUNER_EW_LE, 0.0);
        ADD("ew gt(b),*c,le 0", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_LT, 0.25);
        add_operand_step(&ew, TUNER_EW_MUL, 2, s);
        ew.epilogue.steps[ew.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_NE, .operand = 1};
        ew.epilogue.steps[ew.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_GE, .operand = 0};
        add_unary_step(&ew.epilogue, TUNER_EW_EQ, 1.0);
        ADD("ew lt .25,*b,ne(b),ge(x),eq 1", ew, true);
        ew = op;
        add_operand_step(&ew, TUNER_EW_WHERE, 2, row);
        ew.epilogue.steps[ew.epilogue.n - 1].operand2 = ew.n_inputs;
        ew.inputs[ew.n_inputs++] = tensor(1, col, 16);
        add_unary_step(&ew.epilogue, TUNER_EW_LOG, 0);
        ADD("ew where(c[77,1],o[1000]),log", ew, true);
        ew = op;
        add_unary_step(&ew.epilogue, TUNER_EW_SCALE, 0.125);
        add_operand_step(&ew, TUNER_EW_MASKED_FILL, 1, col);
        ew.epilogue.steps[ew.epilogue.n - 1].scalar = -HUGE_VAL;
        add_unary_step(&ew.epilogue, TUNER_EW_EXP, 0);
        add_operand_step(&ew, TUNER_EW_ADD, 2, row);
        ADD("ew *.125,masked_fill(-inf),exp,+r", ew, true);
        /* An attention score: batched matmul, * 0.125, where with a [4,1,128] condition and a
         * [64,128] other, + bias; and a masked softmax: where as x's prologue. */
        tuner_op mm = matmul(4, 64, 128, 32, false, true, 16);
        add_unary_step(&mm.epilogue, TUNER_EW_SCALE, 0.125);
        int64_t c3[3] = {4, 1, 128}, o2[2] = {64, 128}, bias[1] = {128};
        add_operand_step(&mm, TUNER_EW_WHERE, 3, c3);
        mm.epilogue.steps[mm.epilogue.n - 1].operand2 = mm.n_inputs;
        mm.inputs[mm.n_inputs++] = tensor(2, o2, 16);
        add_operand_step(&mm, TUNER_EW_ADD, 1, bias);
        ADD("mm b4 64x128x32 tb *s,where,+b", mm, true);
        tuner_op sm = rows_op(TUNER_OP_SOFTMAX, 333, 1000, 16, 0);
        int64_t r333[2] = {333, 1};
        add_x_prologue(&sm, 0.125, TUNER_EW_WHERE, 2, r333);
        sm.prologue[0].steps[sm.prologue[0].n - 1].operand2 = sm.n_inputs;
        sm.inputs[sm.n_inputs++] = tensor(1, col, 16);
        ADD("softmax 333x1000 *s,where prologue", sm, true);
    }
    /* pool2d against its reference: ResNet's maxpool (NHWC vectors, a relu prologue), avg with
     * ceil mode with and without count_include_pad (NCHW), a dilated max with odd channels,
     * global and overlapping adaptive average pooling, epilogues with operands. */
    {
        tuner_op op = pool(TUNER_POOL_MAX, false, 2, 64, 112, 112, 3, 3, 2, 1, 1, false, false, 0, 0);
        add_unary_step(&op.prologue[0], TUNER_EW_RELU, 0); /* the stem's relu, as x's prologue */
        ADD("maxpool 2x112x112x64 3x3 s2 p1 relu", op, true);
    }
    ADD("avgpool nchw 2x24x35x35 3x3 s2 p1 ceil", pool(TUNER_POOL_AVG, true, 2, 24, 35, 35, 3, 3, 2, 1, 1, true, true, 0, 0), true);
    ADD("avgpool nchw 2x24x35x35 3x3 s2 p1 ceil excl", pool(TUNER_POOL_AVG, true, 2, 24, 35, 35, 3, 3, 2, 1, 1, true, false, 0, 0), true);
    ADD("avgpool 1x5x5x16 2x2 s2 p1 ceil excl", pool(TUNER_POOL_AVG, false, 1, 16, 5, 5, 2, 2, 2, 1, 1, true, false, 0, 0), true);
    ADD("maxpool 1x17x19x13 3x1 s2 p1 d2 ceil", pool(TUNER_POOL_MAX, false, 1, 13, 17, 19, 3, 1, 2, 1, 2, true, false, 0, 0), true);
    {
        tuner_op op = pool(TUNER_POOL_ADAPTIVE_AVG, false, 4, 2048, 7, 7, 0, 0, 0, 0, 0, false, false, 1, 1);
        int64_t sc[1] = {2048};
        add_operand_step(&op, TUNER_EW_MUL, 1, sc);
        add_unary_step(&op.epilogue, TUNER_EW_HARDSWISH, 0);
        ADD("global avgpool 4x7x7x2048 *s,hardswish", op, true);
        op = pool(TUNER_POOL_ADAPTIVE_AVG, true, 2, 8, 17, 10, 0, 0, 0, 0, 0, false, false, 5, 3);
        int64_t bias[1] = {3};
        add_operand_step(&op, TUNER_EW_ADD, 1, bias);
        ADD("adaptive avgpool nchw 2x8x17x10->5x3 +b", op, true);
    }
    /* issue 37's shape ops against their references: reduces over consecutive axes (NHWC's
     * global mean through the column kernel, NCHW's through the row kernel, with keepdim),
     * log_softmax in the cached, streaming and split row forms, padded copies (F.pad, a
     * negative pad cropping) with an epilogue, and an expand's zero-stride copy. */
    {
        int64_t nhwc[4] = {4, 7, 7, 256}, nchw[4] = {4, 64, 7, 7}, lead[4] = {3, 5, 7, 11};
        tuner_op op = reduce(4, nhwc, 1, TUNER_REDUCE_MEAN, 16);
        op.attrs.reduce.naxes = 2;
        op.output.rank = 2, op.output.shape[1] = 256;
        ADD("reduce mean [4,7,7,256] ax1-2", op, true);
        op = reduce(4, nchw, 2, TUNER_REDUCE_MAX, 2);
        op.attrs.reduce.naxes = 2;
        op.attrs.reduce.keepdim = true;
        int64_t keep[4] = {4, 64, 1, 1};
        op.output = tensor(4, keep, 16);
        ADD("reduce max [4,64,7,7] ax2-3 keep", op, true);
        op = reduce(4, lead, 0, TUNER_REDUCE_SUM, 16);
        op.attrs.reduce.naxes = 2;
        int64_t lo2[2] = {7, 11};
        op.output = tensor(2, lo2, 16);
        ADD("reduce sum [3,5,7,11] ax0-1", op, true);
        op = rows_op(TUNER_OP_SOFTMAX, 333, 1000, 16, 0);
        op.attrs.softmax.log = true;
        ADD("log_softmax 333x1000", op, true);
        op = rows_op(TUNER_OP_SOFTMAX, 7, 4097, 2, 0);
        op.attrs.softmax.log = true;
        ADD("log_softmax 7x4097 align2", op, true);
        op = rows_op(TUNER_OP_SOFTMAX, 2, 131072, 16, 0);
        op.attrs.softmax.log = true;
        ADD("log_softmax 2x131072 (split)", op, true);
        op = rows_op(TUNER_OP_SOFTMAX, 2, 8, 16, 0); /* tiny: blocks of idle rows */
        op.attrs.softmax.log = true;
        ADD("log_softmax 2x8 (tiny)", op, true);
        int64_t tiny[2] = {3, 10};
        ADD("reduce mean [3,10] ax1 (tiny)", reduce(2, tiny, 1, TUNER_REDUCE_MEAN, 2), true);
        /* F.pad(x [2,3,17,17], (1, 2, 3, 0), value=-0.5), then relu. */
        op = blank(TUNER_OP_COPY);
        int64_t pin[4] = {2, 3, 17, 17}, pout[4] = {2, 3, 20, 20};
        op.inputs[0] = tensor(4, pin, 16);
        op.output = tensor(4, pout, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        op.attrs.copy.strides[0] = 3 * 17 * 17, op.attrs.copy.strides[1] = 17 * 17;
        op.attrs.copy.strides[2] = 17, op.attrs.copy.strides[3] = 1;
        op.attrs.copy.padded = true;
        op.attrs.copy.pad_lower[2] = 3, op.attrs.copy.pad_lower[3] = 1, op.attrs.copy.pad_upper[3] = 2;
        op.attrs.copy.pad_value = -0.5;
        add_unary_step(&op.epilogue, TUNER_EW_RELU, 0);
        ADD("copy pad [2,3,17,17] (1,2,3,0) relu", op, true);
        /* F.pad(x [50,61], (-2, 3)): columns 2.. of x, three pad columns after. */
        op = blank(TUNER_OP_COPY);
        int64_t cin[2] = {50, 61}, cout[2] = {50, 62};
        op.inputs[0] = tensor(2, cin, 16);
        op.output = tensor(2, cout, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        op.attrs.copy.offset = 2;
        op.attrs.copy.strides[0] = 61, op.attrs.copy.strides[1] = 1;
        op.attrs.copy.padded = true;
        op.attrs.copy.pad_upper[1] = 3;
        op.attrs.copy.pad_value = 1.25;
        ADD("copy pad [50,61] (-2,3) 1.25", op, true);
        /* x [1,130].expand(9, 4, 130) plus a bias. */
        op = blank(TUNER_OP_COPY);
        int64_t ein[2] = {1, 130}, eout[3] = {9, 4, 130}, eb[1] = {130};
        op.inputs[0] = tensor(2, ein, 16);
        op.output = tensor(3, eout, 16);
        op.n_inputs = op.n_anchor_inputs = 1;
        op.attrs.copy.strides[2] = 1;
        add_operand_step(&op, TUNER_EW_ADD, 1, eb);
        ADD("copy expand [1,130]->[9,4,130] +b", op, true);
    }
    /* gather against its reference, with the measurement core's integer ids (tuner_int_fill_range:
     * negative ones, every row, a few past the end): BERT's word embeddings plus positions (the
     * rows path, 16-byte vectors), i32 ids and no epilogue (raw copies), a small table (most ids
     * out of range: zeros), index_select along the last axis (the elements path), a rank-2 index
     * in the middle of a rank-4 x; and an i64 mask converted by an elementwise cast. */
    {
        int64_t emb[2] = {30522, 768}, ids[2] = {8, 128}, pos[2] = {128, 768};
        tuner_op op = gather(2, emb, 0, TUNER_I64, 2, ids);
        add_operand_step(&op, TUNER_EW_ADD, 2, pos);
        ADD("gather emb 30522x768 ids 8x128 +pos", op, true);
        ADD("gather emb 30522x768 i32 ids", gather(2, emb, 0, TUNER_I32, 2, ids), true);
        int64_t small[2] = {50, 24}, many[1] = {1000};
        op = gather(2, small, 0, TUNER_I64, 1, many);
        add_unary_step(&op.epilogue, TUNER_EW_SCALE, 2.0);
        ADD("gather 50x24 ids 1000 (out of range) *2", op, true);
        int64_t x3[3] = {4, 10, 37}, i1[1] = {5};
        ADD("index_select 4x10x37 last axis", gather(3, x3, 2, TUNER_I64, 1, i1), true);
        int64_t x4[4] = {3, 11, 5, 7}, i2[2] = {2, 3};
        ADD("gather 3x11x5x7 axis 1 index 2x3 i32", gather(4, x4, 1, TUNER_I32, 2, i2), true);
        int64_t mask[4] = {8, 1, 1, 128};
        op = blank(TUNER_OP_ELEMENTWISE);
        op.inputs[0] = tensor(4, mask, 16);
        op.inputs[0].dtype = TUNER_I64;
        op.n_inputs = op.n_anchor_inputs = 1;
        op.output = tensor(4, mask, 16);
        add_unary_step(&op.epilogue, TUNER_EW_CAST, 0); /* to the run's dtype (set_dtype) */
        add_unary_step(&op.epilogue, TUNER_EW_NEG, 0);
        add_unary_step(&op.epilogue, TUNER_EW_SHIFT, 1.0);
        add_unary_step(&op.epilogue, TUNER_EW_SCALE, -0.25);
        ADD("ew i64 mask cast,1-m,*-.25", op, true);
    }
    /* attention (every template that applies: the portable one, Hopper's, decode): odd lengths,
     * causal with S < Skv and S > Skv (rows with no key: 0), grouped-query heads, masks
     * broadcast from [B,1,1,Skv] and [S,Skv], the bshd layout, every head dim, an epilogue. */
    {
        ADD("attn b2 h4 s77 kv333 d64", attention(2, 4, 4, 77, 333, 64, false, false, 0), false);
        ADD("attn causal s200 kv333 d128 gqa8/2", attention(1, 8, 2, 200, 333, 128, true, false, 0), false);
        ADD("attn causal s333 kv200 d96", attention(2, 2, 2, 333, 200, 96, true, false, 0), false);
        ADD("attn bshd s129 d80 mask[b,1,1,kv]", attention(2, 3, 3, 129, 129, 80, false, true, 4), false);
        tuner_op op = attention(1, 2, 1, 64, 300, 256, false, false, 2);
        add_unary_step(&op.epilogue, TUNER_EW_SCALE, 2.0);
        ADD("attn mqa d256 mask[s,kv] *2", op, false);
        ADD("attn decode s1 kv4097 gqa32/8 d128", attention(2, 32, 8, 1, 4097, 128, false, false, 0), false);
        ADD("attn decode causal s5 kv1000 d64", attention(3, 8, 2, 5, 1000, 64, true, true, 0), false);
        ADD("attn s4096 d128 causal", attention(1, 4, 4, 4096, 4096, 128, true, false, 0), false);
        /* bshd_packed: q, k, v read out of one QKV projection (GPT-2's block; GQA with a mask;
         * a short sequence, which attention_decode takes too) */
        ADD("attn packed gpt2 s512 d64 causal", attention_packed(2, 12, 12, 512, 64, true, 0), false);
        ADD("attn packed gqa8/2 s300 d128 mask[b,1,1,s]", attention_packed(2, 8, 2, 300, 128, false, 4), false);
        ADD("attn packed s7 d80 causal", attention_packed(3, 4, 4, 7, 80, true, 0), false);
    }
#undef ADD
    return n;
}

/* Integer inputs (gather's ids, a cast's input) keep their dtype; the float ones, casts and the
 * output take the run's. */
/* The sweep's dtype for every float tensor and cast of the case, but its FP8 ones (an FP8 case
 * runs with f16, bf16 and f32 on its other side). */
static void set_dtype(tuner_op *op, tuner_dtype dt)
{
    for (int i = 0; i < op->n_inputs; i++)
        if (!tuner_dtype_is_int(op->inputs[i].dtype) && !tuner_dtype_is_fp8(op->inputs[i].dtype))
            op->inputs[i].dtype = dt;
    for (int k = 0; k < op->epilogue.n; k++)
        if (op->epilogue.steps[k].kind == TUNER_EW_CAST && !tuner_dtype_is_fp8(op->epilogue.steps[k].dtype))
            op->epilogue.steps[k].dtype = dt;
    if (!tuner_dtype_is_fp8(op->output.dtype))
        op->output.dtype = dt;
}

static void tolerances(const tuner_op *op, tuner_dtype dt, double *rtol, double *atol)
{
    double t;
    if (dt == TUNER_BF16)
        t = 4e-2;
    else if (dt == TUNER_F16)
        t = 1e-2;
    else if (op->kind == TUNER_OP_MATMUL || op->kind == TUNER_OP_CONV2D)
        t = 1e-2; /* tf32 tensor cores are allowed */
    else
        t = 1e-4;
    *rtol = t;
    *atol = t;
}

/* ---- one case in a child process ---- */

/* Line protocol child -> parent, one per candidate:  "R <idx> <status> <max_rel> <text>". */

static void program_to_module(const tuner_program *p, const tuner_binary *b, gw_module *m,
                              const int *map)
{
    memset(m, 0, sizeof(*m));
    m->image = b->cubin;
    m->image_len = b->cubin_len;
    m->n_launches = p->n_kernels;
    for (int i = 0; i < p->n_kernels && i < GW_MAX_LAUNCHES; i++) {
        const tuner_launch *l = &p->kernels[i];
        gw_launch *g = &m->launches[i];
        snprintf(g->name, sizeof(g->name), "%s", l->name);
        for (int d = 0; d < 3; d++) {
            g->grid[d] = l->grid[d];
            g->block[d] = l->block[d];
        }
        g->shared_bytes = l->shared_bytes;
        g->n_args = l->n_args;
        for (int a = 0; a < l->n_args; a++)
            g->args[a] = map[l->args[a]];
        g->n_maps = l->n_maps;
        for (int k = 0; k < l->n_maps; k++) {
            g->maps[k] = l->maps[k];
            g->maps[k].buf = map[l->maps[k].buf];
        }
    }
}

static void emit(FILE *out, size_t idx, const char *status, double rel, const char *text)
{
    char clean[300];
    snprintf(clean, sizeof(clean), "%s", text ? text : "");
    for (char *c = clean; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    fprintf(out, "R %zu %s %.6g %s\n", idx, status, rel, clean);
    fflush(out);
}

static int run_case(const tuner_op *op, const tuner_target *tgt, tuner_dtype dt, const size_t *pick,
                    size_t n_pick, size_t start, FILE *out)
{
    tuner_space *space = NULL;
    tuner_program *ref = NULL;
    tuner_binary *refbin = NULL;
    gw_measurer *m = NULL;
    char *err = NULL;
    char cerr[256];

    if (tuner_space_build(op, tgt, &space, &err) < 0 || tuner_reference(op, tgt, &ref, &err) < 0 ||
        tuner_compile(ref->source, tgt, &refbin, &err) < 0) {
        emit(out, start, "refail", 0, err ? err : "reference");
        return 0;
    }
    if (gw_measurer_new(0, 2.0, &m, cerr, sizeof(cerr)) < 0) {
        emit(out, start, "refail", 0, cerr);
        return 0;
    }
    double rtol, atol;
    tolerances(op, dt, &rtol, &atol);
    for (size_t k = start; k < n_pick; k++) {
        size_t idx = pick[k];
        tuner_program *p = NULL;
        tuner_binary *b = NULL;
        free(err);
        err = NULL;
        if (tuner_generate(op, tgt, &space->items[idx], &p, &err) < 0) {
            emit(out, k, "genfail", 0, err);
            continue;
        }
        if (tuner_compile(p->source, tgt, &b, &err) < 0) {
            emit(out, k, "compilefail", 0, err);
            tuner_program_free(p);
            continue;
        }
        gw_measure_req q;
        memset(&q, 0, sizeof(q));
        q.id = idx + 1;
        int cmap[TUNER_BUF_WORKSPACE + 1], rmap[TUNER_BUF_WORKSPACE + 1], n = 0;
        for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
            cmap[i] = rmap[i] = 0;
        for (int i = 0; i < op->n_inputs; i++) {
            q.buffers[n] = (gw_buffer){GW_BUF_INPUT, (gw_dtype)op->inputs[i].dtype,
                                       (uint64_t)tuner_tensor_numel(&op->inputs[i])};
            if (tuner_dtype_is_int(op->inputs[i].dtype))
                tuner_int_fill_range(op, i, &q.int_range[n][0], &q.int_range[n][1]);
            cmap[TUNER_BUF_INPUT0 + i] = rmap[TUNER_BUF_INPUT0 + i] = n++;
        }
        uint64_t oe = (uint64_t)tuner_tensor_numel(&op->output);
        q.buffers[n] = (gw_buffer){GW_BUF_OUTPUT, (gw_dtype)p->output_dtype, oe};
        q.output_buffer = cmap[TUNER_BUF_OUTPUT] = n++;
        q.buffers[n] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, oe};
        q.ref_output_buffer = rmap[TUNER_BUF_OUTPUT] = n++;
        if (ref->workspace_bytes) {
            q.buffers[n] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, (ref->workspace_bytes + 3) / 4};
            rmap[TUNER_BUF_WORKSPACE] = n++;
        }
        if (p->workspace_bytes) {
            q.buffers[n] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, (p->workspace_bytes + 3) / 4};
            cmap[TUNER_BUF_WORKSPACE] = n++;
        }
        q.n_buffers = n;
        program_to_module(p, b, &q.candidate, cmap);
        program_to_module(ref, refbin, &q.reference, rmap);
        q.check = true;
        q.rtol = rtol;
        q.atol = atol;
        /* An attention output's rows held to their own scale, as the scheduler asks
         * (scheduler/tune.c build_request, gpu_workers/compare.h) */
        q.row_len = op->kind == TUNER_OP_ATTENTION ? op->output.shape[op->output.rank - 1] : 0;
        q.warmup = 1;
        q.min_reps = 3;
        q.max_reps = 5;
        q.min_time_ms = 0;
        gw_measure_result res;
        bool fatal = false;
        gw_measurer_run(m, &q, NULL, &res, &fatal);
        char text[300];
        snprintf(text, sizeof(text), "%.2fus %s", res.median_us, res.reason);
        emit(out, k, gw_status_name(res.status), res.max_rel_err, text);
        tuner_binary_free(b);
        tuner_program_free(p);
        if (fatal)
            return 3; /* the parent continues in a fresh process */
    }
    free(err);
    gw_measurer_free(m);
    tuner_binary_free(refbin);
    tuner_program_free(ref);
    tuner_space_free(space);
    return 0;
}

/* ---- parent: scheduling children, collecting rows ---- */

typedef struct run {
    int ci;
    tuner_dtype dt;
    tuner_op op;
    size_t space_n;
    size_t *pick;
    size_t n_pick;
    size_t next;   /* first candidate not yet reported */
    int ok, wrong, failed;
    double max_rel;
    char first_fail[200];
    char wrong_list[400];
    pid_t pid;
    FILE *pipe;
    char buf[4096];
    size_t blen;
    bool done, space_err;
    char space_msg[200];
    double t0, secs;
} run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool verbose;

static void handle_line(run *r, const scase *c, char *line)
{
    size_t k = 0;
    char st[32] = "";
    double rel = 0;
    int used = 0;
    if (sscanf(line, "R %zu %31s %lf %n", &k, st, &rel, &used) < 3)
        return;
    const char *text = line + used;
    if (verbose)
        fprintf(stderr, "  %s %s #%zu: %s %.3g %s\n", c->name, tuner_dtype_name(r->dt), k, st,
                rel, text);
    if (!strcmp(st, "refail")) {
        r->space_err = true;
        snprintf(r->space_msg, sizeof(r->space_msg), "%s", text);
        r->next = r->n_pick;
        return;
    }
    r->next = k + 1;
    if (!strcmp(st, "ok")) {
        r->ok++;
        if (rel > r->max_rel)
            r->max_rel = rel;
    } else if (!strcmp(st, "wrong")) {
        r->wrong++;
        size_t l = strlen(r->wrong_list);
        snprintf(r->wrong_list + l, sizeof(r->wrong_list) - l, "%s#%zu", l ? "," : "",
                 r->pick[k]);
        if (!r->first_fail[0])
            snprintf(r->first_fail, sizeof(r->first_fail), "wrong #%zu: %s", r->pick[k], text);
    } else {
        r->failed++;
        if (!r->first_fail[0])
            snprintf(r->first_fail, sizeof(r->first_fail), "%s #%zu: %s", st, r->pick[k], text);
    }
}

static int spawn(run *r, const tuner_target *tgt)
{
    int fds[2];
    if (pipe(fds) < 0)
        return -errno;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        close(fds[0]);
        FILE *out = fdopen(fds[1], "w");
        int rc = run_case(&r->op, tgt, r->dt, r->pick, r->n_pick, r->next, out);
        fclose(out);
        _exit(rc);
    }
    close(fds[1]);
    r->pid = pid;
    r->pipe = fdopen(fds[0], "r");
    r->blen = 0;
    return 0;
}

int main(int argc, char **argv)
{
    int max_per_case = 24, jobs = 0;
    const char *filter = NULL, *only_tmpl = NULL;
    const char *only_params = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max_per_case = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc)
            only_tmpl = argv[++i];
        else if (!strcmp(argv[i], "--param") && i + 1 < argc && strchr(argv[i + 1], '='))
            only_params = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = true;
        else {
            fprintf(stderr, "usage: %s [--max N] [--jobs N] [--filter TEXT] [--template NAME] [--param NAME=VALUE[,NAME=VALUE...]] [--verbose]\n", argv[0]);
            return 2;
        }
    }
    if (max_per_case < 1)
        max_per_case = 1;
    if (jobs < 1) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = cpus > 1 ? (int)(cpus / 2) : 1;
        if (jobs > 8)
            jobs = 8;
    }

    /* Ask for the GPU in a child: this process must not initialise CUDA before forking. */
    gw_device_info dev;
    char why[256] = "";
    int ndev = 0;
    {
        int fds[2];
        if (pipe(fds) < 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            gw_device_info d[GW_MAX_DEVICES];
            char e[256] = "";
            int n = 0;
            gw_probe_devices(d, GW_MAX_DEVICES, &n, e, sizeof(e));
            struct {
                int n;
                gw_device_info d;
                char e[256];
            } msg;
            memset(&msg, 0, sizeof(msg));
            msg.n = n;
            if (n)
                msg.d = d[0];
            memcpy(msg.e, e, sizeof(msg.e));
            ssize_t w = write(fds[1], &msg, sizeof(msg));
            _exit(w == (ssize_t)sizeof(msg) ? 0 : 1);
        }
        close(fds[1]);
        struct {
            int n;
            gw_device_info d;
            char e[256];
        } msg;
        memset(&msg, 0, sizeof(msg));
        ssize_t rd = read(fds[0], &msg, sizeof(msg));
        close(fds[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        if (rd == (ssize_t)sizeof(msg)) {
            ndev = msg.n;
            dev = msg.d;
            memcpy(why, msg.e, sizeof(why));
            why[sizeof(why) - 1] = 0;
        } else {
            snprintf(why, sizeof(why), "the CUDA driver could not be loaded (probe exited with %d)",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        }
    }
    if (ndev == 0) {
        printf("no CUDA GPU/driver: skipped (%s)\n", why);
        return 77;
    }
    tuner_target tgt = {.sm = dev.sm, .arch_specific = dev.sm == 90};
    char tname[16];
    printf("template sweep on %s (%s), up to %d candidates per case, %d jobs\n", dev.name,
           tuner_target_name(&tgt, tname, sizeof(tname)), max_per_case, jobs);

    static scase cases[160];
    int nc = build_cases(cases);
    /* One run per case and dtype: as many as the cases array holds, times three. */
    static run runs[160 * 3];
    int nr = 0;
    const tuner_dtype dts[3] = {TUNER_F16, TUNER_BF16, TUNER_F32};
    for (int i = 0; i < nc; i++) {
        if (filter && !strstr(cases[i].name, filter))
            continue;
        for (int d = 0; d < 3; d++) {
            if (dts[d] == TUNER_F32 && !cases[i].f32_ok)
                continue;
            run *r = &runs[nr++];
            memset(r, 0, sizeof(*r));
            r->ci = i;
            r->dt = dts[d];
            r->op = cases[i].op;
            set_dtype(&r->op, dts[d]);
            tuner_space *sp = NULL;
            char *err = NULL;
            if (tuner_space_build(&r->op, &tgt, &sp, &err) < 0) {
                r->space_err = true;
                snprintf(r->space_msg, sizeof(r->space_msg), "%s", err ? err : "no space");
                r->done = true;
                free(err);
                continue;
            }
            r->space_n = sp->n;
            /* The candidates sampled from: the whole space, or one template's items. */
            size_t *pool = calloc(sp->n ? sp->n : 1, sizeof(size_t)), n_pool = 0;
            for (size_t k = 0; pool && k < sp->n; k++)
                if ((!only_tmpl || !strcmp(sp->items[k].template_name, only_tmpl)) &&
                    tuner_schedule_matches(&sp->items[k], only_params))
                    pool[n_pool++] = k;
            size_t want = n_pool < (size_t)max_per_case ? n_pool : (size_t)max_per_case;
            r->pick = calloc(want ? want : 1, sizeof(size_t));
            /* Evenly spread over the pool, the default schedule first (when in the pool). */
            size_t dflt = sp->n ? tuner_default_index(&r->op, &tgt, sp) : 0;
            if (want) {
                if ((!only_tmpl || !strcmp(sp->items[dflt].template_name, only_tmpl)) &&
                    tuner_schedule_matches(&sp->items[dflt], only_params))
                    r->pick[r->n_pick++] = dflt;
                for (size_t k = 0; r->n_pick < want && k < want; k++) {
                    size_t idx = pool[(k * n_pool) / want];
                    bool dup = false;
                    for (size_t j = 0; j < r->n_pick; j++)
                        dup |= r->pick[j] == idx;
                    if (!dup)
                        r->pick[r->n_pick++] = idx;
                }
            }
            if (!r->n_pick)
                r->done = true;
            free(pool);
            tuner_space_free(sp);
        }
    }

    double t_start = now_s();
    int running = 0, next_run = 0;
    for (;;) {
        while (running < jobs && next_run < nr) {
            run *r = &runs[next_run++];
            if (r->done)
                continue;
            r->t0 = now_s();
            if (spawn(r, &tgt) == 0)
                running++;
            else
                r->done = true;
        }
        if (running == 0 && next_run >= nr)
            break;
        struct pollfd pf[64];
        run *who[64];
        int np = 0;
        for (int i = 0; i < nr && np < 64; i++)
            if (runs[i].pipe) {
                pf[np].fd = fileno(runs[i].pipe);
                pf[np].events = POLLIN;
                who[np++] = &runs[i];
            }
        if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < np; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            run *r = who[i];
            ssize_t n = read(pf[i].fd, r->buf + r->blen, sizeof(r->buf) - 1 - r->blen);
            if (n > 0) {
                r->blen += (size_t)n;
                r->buf[r->blen] = 0;
                char *nl;
                while ((nl = strchr(r->buf, '\n'))) {
                    *nl = 0;
                    handle_line(r, &cases[r->ci], r->buf);
                    size_t rest = r->blen - (size_t)(nl + 1 - r->buf);
                    memmove(r->buf, nl + 1, rest);
                    r->blen = rest;
                    r->buf[r->blen] = 0;
                }
                if (r->blen >= sizeof(r->buf) - 1)
                    r->blen = 0; /* an overlong line: drop it */
                continue;
            }
            /* End of the child's output. */
            fclose(r->pipe);
            r->pipe = NULL;
            int st = 0;
            waitpid(r->pid, &st, 0);
            running--;
            bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
            if (!clean && r->next < r->n_pick) {
                if (!(WIFEXITED(st) && WEXITSTATUS(st) == 3)) {
                    /* Died without reporting: the candidate it was on counts as failed. */
                    r->failed++;
                    if (!r->first_fail[0])
                        snprintf(r->first_fail, sizeof(r->first_fail),
                                 "child died (status %d) on #%zu", st, r->pick[r->next]);
                    r->next++;
                }
                if (r->next < r->n_pick && spawn(r, &tgt) == 0) {
                    running++;
                    continue;
                }
            }
            r->done = true;
            r->secs = now_s() - r->t0;
        }
    }

    /* The table. */
    int total_wrong = 0, total_failed = 0, total_ok = 0;
    printf("\n%-30s %-4s %6s %5s %5s %5s %6s %10s %6s\n", "case", "dt", "space", "tried", "ok",
           "wrong", "failed", "max_rel", "secs");
    for (int i = 0; i < nr; i++) {
        run *r = &runs[i];
        const char *dn = tuner_dtype_name(r->dt);
        if (r->space_err && !r->n_pick) {
            printf("%-30s %-4s %6s  unsupported: %.70s\n", cases[r->ci].name, dn, "-", r->space_msg);
            continue;
        }
        if (r->space_err) {
            printf("%-30s %-4s %6zu  reference failed: %.70s\n", cases[r->ci].name, dn,
                   r->space_n, r->space_msg);
            total_failed++;
            continue;
        }
        printf("%-30s %-4s %6zu %5zu %5d %5d %6d %10.3g %6.1f\n", cases[r->ci].name, dn,
               r->space_n, r->n_pick, r->ok, r->wrong, r->failed, r->max_rel, r->secs);
        total_ok += r->ok;
        total_wrong += r->wrong;
        total_failed += r->failed;
    }
    printf("\ntotal: %d ok, %d wrong, %d failed in %.1f s\n", total_ok, total_wrong, total_failed,
           now_s() - t_start);
    for (int i = 0; i < nr; i++) {
        run *r = &runs[i];
        if (r->first_fail[0])
            printf("  %s %s: %s%s%s\n", cases[r->ci].name, tuner_dtype_name(r->dt), r->first_fail,
                   r->wrong_list[0] ? "  | wrong: " : "", r->wrong_list);
        free(r->pick);
    }
    return total_wrong ? 1 : 0;
}
