/* op/op.h - the canonical, validated description of one operator request.
 *
 * proto/ builds a tuner_op from a client's JSON and checks every field before it lands here;
 * the tuner generates code from it, kernel_cache/ keys on its canonical JSON, the scheduler
 * tunes it. The module is small on purpose (it links nothing but libc, never NVRTC): whatever has
 * to speak of ops, such as the request parser and its fuzzers, depends on op/ and not on the
 * code generator. Nothing in a tuner_op is a client string: ops, dtypes and expression steps are
 * enums and numbers, so code generated from it can never carry client text.
 *
 * Conventions (shared by every module; proto/ enforces them):
 *  - Shapes are row-major and dense unless an attribute says otherwise; dimension sizes >= 1.
 *  - inputs[] lists every tensor the kernel reads: first the anchor's own inputs (n_anchor_inputs
 *    of them, order below), then extra operands used by prologue/epilogue steps (bias, residual).
 *  - output is inferred by validation (shape and dtype), never supplied by the client.
 *
 * Anchor inputs by op:
 *   MATMUL       A [M,K] or [Bt,M,K] ([K,M] / [Bt,K,M] with trans_a), B [K,N] or [Bt,K,N]
 *                ([N,K] / [Bt,N,K] with trans_b). A rank-2 operand is broadcast over the batch.
 *                Output [M,N] or [Bt,M,N]. fp16/bf16 accumulate in fp32; fp32 may use tf32.
 *                FP8 (f8e4m3/f8e5m2) A and B accumulate in fp32 and give attrs.out_dtype; then
 *                come the scales as anchor inputs, f32: scale_a's (when attrs.matmul.scale_a is
 *                not none), then scale_b's (tuner_scale_kind gives their shapes);
 *                n_anchor_inputs is 2 plus their count.
 *   CONV2D       x, w. NHWC: x [N,H,W,C], w [K,R,S,C/groups]; output [N,P,Q,K].
 *                NCHW: x [N,C,H,W], w [K,C/groups,R,S]; output [N,K,P,Q].
 *   SOFTMAX      x [..., D]: softmax over the last axis; with attrs.softmax.log, log_softmax
 *                computed as x - max - log(sum(exp(x - max))) (never log of the softmax).
 *   LAYERNORM    x [..., D], then optionally gamma [D] and beta [D] (n_anchor_inputs 1 or 3).
 *   RMSNORM      x [..., D], then optionally gamma [D] (n_anchor_inputs 1 or 2).
 *   REDUCE       x of any rank; reduces one axis (attrs.reduce.axis, non-negative), or with
 *                attrs.reduce.naxes > 1 the consecutive axes axis .. axis + naxes - 1 at once
 *                (they are one axis of a reshaped view: tuner_reduce_dims).
 *   ELEMENTWISE  x (inputs[0]); the value is x broadcast to the output shape and the chain in
 *                `epilogue` is applied to it; binary steps read other inputs, also broadcast.
 *                Output shape = numpy broadcast of every input's shape.
 *   COPY         x; output element o (a coordinate of the output's shape, given in attrs) is
 *                x's flat element offset + sum(o[d] * strides[d]): a transpose, a slice, a strided
 *                view or a plain copy of x, made dense. Epilogue steps apply as elementwise's.
 *                Padded (attrs.copy.padded): an output coordinate o with pad_lower[d] <= o[d] <
 *                shape[d] - pad_upper[d] on every axis reads x's element offset +
 *                sum((o[d] - pad_lower[d]) * strides[d]); every other is pad_value (F.pad's
 *                constant mode; the epilogue applies to both).
 *   CONCAT       every input (all of them are anchor inputs): joined along attrs.concat.axis;
 *                equal rank and dtype, equal sizes off the axis. Unary epilogue steps only.
 *   POOL2D       x: NHWC [N,H,W,C] (or NCHW [N,C,H,W]); output [N,P,Q,C] ([N,C,P,Q]).
 *                max and avg: a kernel window with stride, padding (at most half the kernel),
 *                dilation (max only), ceil_mode and count_include_pad (avg), exactly as PyTorch's
 *                max_pool2d/avg_pool2d (tuner_pool_out_size); adaptive_avg: output P x Q,
 *                window rows [floor(p H / P), ceil((p + 1) H / P)) as adaptive_avg_pool2d
 *                (global average pooling is its 1x1 case).
 *   GATHER       x (f16/bf16/f32, rank 1..6), index (i32/i64, any rank); attrs.gather.axis:
 *                output x.shape[:axis] + index.shape + x.shape[axis+1:], x's dtype, with
 *                out[a, i..., b] = x[a, index[i...], b] (torch.embedding: axis 0 of a [V, D] table;
 *                torch.index_select: a 1-D index). An index in [-n, 0) counts from the end
 *                (n = x.shape[axis]), as in PyTorch; one outside [-n, n) reads nothing and gives
 *                0 (then the epilogue), where PyTorch would stop on a device assert
 *                (tuner_gather_row). Epilogue steps apply as elementwise's; no prologue.
 *   ATTENTION    q, k, v, then optionally an additive mask (n_anchor_inputs 3 or 4).
 *                Layout bhsd (default): q [B,Hq,S,D], k and v [B,Hkv,Skv,D]; layout bshd (the
 *                order a QKV projection writes, attrs.attention.bshd): q [B,S,Hq,D], k and v
 *                [B,Skv,Hkv,D]. q, k, v f16 or bf16, one dtype; Hq a multiple of Hkv (query head
 *                h reads kv head h / (Hq / Hkv): grouped- and multi-query attention); D one of
 *                64, 80, 96, 128, 256. The mask (f16/bf16/f32, rank 1..4, -inf allowed) is
 *                broadcast by numpy rules to [B,Hq,S,Skv] (always in that order, whatever the
 *                layout). Output q's shape, layout and dtype:
 *                  out[b,h,i,:] = sum_j p_ij v[b,h/g,j,:],  p_i = softmax_j(scale q_i . k_j + m_ij)
 *                with fp32 scores, softmax and accumulation; causal keeps key j for query i only
 *                when j <= i + Skv - S (aligned to the bottom right, as PyTorch and
 *                FlashAttention do). A row with no key left (all -inf: fully masked, or causal
 *                with S > Skv) gives 0, as PyTorch's SDPA does. Epilogue steps apply to the
 *                output as elementwise's; no prologue.
 *                Layout bshd_packed (self-attention read straight out of a QKV projection,
 *                attrs.attention.packed, which sets bshd too): one input qkv [B,S,Hq+2*Hkv,D] -
 *                q heads first, then k's, then v's: GPT-2's [B,S,3*H*D] viewed as [B,S,3H,D] -
 *                then optionally the mask (n_anchor_inputs 1 or 2); Hkv is attrs.kv_heads
 *                (given, or a third of the heads), S = Skv, output [B,S,Hq,D] (bshd's). The
 *                same function as bshd with q, k and v the three head ranges of qkv.
 */
#ifndef HIDET_OP_OP_H
#define HIDET_OP_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TUNER_MAX_RANK 6
#define TUNER_MAX_INPUTS 8
#define TUNER_MAX_STEPS 16
/* Named (symbolic) dimensions of one op, and the bytes of a name with its NUL. */
#define TUNER_MAX_DIMS 4
#define TUNER_DIM_NAME_LEN 16

typedef enum {
    TUNER_F16 = 0,
    TUNER_BF16 = 1,
    TUNER_F32 = 2,
    /* Integer tensors (token ids, masks): only where an op reads them as integers - gather's
     * index - or converts them to a float first (an elementwise chain that starts with a cast);
     * proto refuses them everywhere else. Never an output dtype. */
    TUNER_I32 = 3,
    TUNER_I64 = 4,
    /* 8-bit floats (OCP FP8; PyTorch's float8_e4m3fn and float8_e5m2), one byte per element:
     * matmul's A and B only (e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3), fp32 accumulation, output
     * f16, bf16 or f32 (attrs.out_dtype), scales in attrs.matmul.scale_a/scale_b. e4m3: bias 7,
     * no infinity, S.1111.111 is NaN, max 448; e5m2: bias 15, IEEE-like inf/NaN, max 57344.
     * proto refuses them everywhere else. */
    TUNER_F8E4M3 = 5,
    TUNER_F8E5M2 = 6,
    TUNER_DTYPE_COUNT
} tuner_dtype;

/* How a scale multiplies an FP8 matmul's accumulator (attrs.matmul.scale_a / scale_b): out =
 * (sum_k a[m,k] b[k,n]) * sa * sb, before the epilogue. The scale tensors are f32 anchor inputs
 * after A and B, scale_a's first (see MATMUL in the header comment). */
typedef enum {
    TUNER_SCALE_NONE = 0,
    TUNER_SCALE_TENSOR, /* one value: shape [] or [1] */
    TUNER_SCALE_ROW,    /* A only: one per row of the output, [M] (or [M, 1], torch's row-wise) */
    TUNER_SCALE_COL,    /* B only: one per column of the output, [N] (or [1, N]) */
    TUNER_SCALE_BLOCK,  /* per 128-k block: A [M, ceil(K/128)] (1x128), B [ceil(N/128),
                         * ceil(K/128)] (128x128, DeepSeek-V3's), applied in the main loop */
    TUNER_SCALE_COUNT
} tuner_scale_kind;

typedef enum {
    TUNER_OP_MATMUL = 0,
    TUNER_OP_CONV2D,
    TUNER_OP_SOFTMAX,
    TUNER_OP_LAYERNORM,
    TUNER_OP_RMSNORM,
    TUNER_OP_REDUCE,
    TUNER_OP_ELEMENTWISE,
    TUNER_OP_COPY,
    TUNER_OP_CONCAT,
    TUNER_OP_POOL2D,
    TUNER_OP_GATHER,
    TUNER_OP_ATTENTION,
    TUNER_OP_COUNT
} tuner_op_kind;

typedef struct tuner_tensor {
    int rank;
    /* Each axis's size. A named axis (sym[d] != 0) holds the size the op is generated and tuned
     * for: the product of its dims' `max` (see tuner_dim), so every module that reads shapes
     * sees a valid op at its largest size. */
    int64_t shape[TUNER_MAX_RANK];
    /* 0: axis d has the fixed size shape[d]. Else a bit set over tuner_op.dims (bit k: dims[k]):
     * at launch axis d is the product of those dims' sizes ("n", or "b*s" after a reshape). */
    uint8_t sym[TUNER_MAX_RANK];
    tuner_dtype dtype;
    /* Guaranteed byte alignment of the base pointer (16, 8, 4 or 2; default 16 since device
     * allocations are 256-byte aligned). Templates that use 16-byte vector access check this
     * together with the row length; a smaller value selects a slower, always-correct path. */
    int align;
} tuner_tensor;

/* One step of a fused expression chain: value = f(value[, operand]). */
typedef enum {
    /* binary: value OP inputs[operand], operand broadcast (numpy rules) to the value's shape */
    TUNER_EW_ADD = 0,
    TUNER_EW_SUB,
    TUNER_EW_MUL,
    TUNER_EW_DIV,
    TUNER_EW_MAX,
    TUNER_EW_MIN,
    /* unary */
    TUNER_EW_RELU,
    TUNER_EW_GELU_ERF,
    TUNER_EW_GELU_TANH,
    TUNER_EW_SILU,
    TUNER_EW_SIGMOID,
    TUNER_EW_TANH,
    TUNER_EW_EXP,
    TUNER_EW_NEG,
    TUNER_EW_ABS,
    TUNER_EW_SQUARE,
    TUNER_EW_SCALE, /* value * scalar */
    TUNER_EW_CAST,  /* round value to dtype (the chain's value type becomes dtype) */
    TUNER_EW_SQRT,
    TUNER_EW_RSQRT, /* 1 / sqrt(value) */
    TUNER_EW_SHIFT, /* value + scalar */
    /* PyTorch's activations; their parameters are named by tuner_ew_params(). */
    TUNER_EW_CLAMP,       /* min(max(value, scalar), scalar2), NaN kept; an absent bound is +-inf
                           * (hardtanh and ReLU6 are clamps) */
    TUNER_EW_HARDSWISH,   /* value * min(max(value + 3, 0), 6) / 6 */
    TUNER_EW_HARDSIGMOID, /* min(max(value + 3, 0), 6) / 6 */
    TUNER_EW_LEAKY_RELU,  /* value > 0 ? value : value * scalar (negative_slope) */
    TUNER_EW_ERF,
    TUNER_EW_POW,         /* value ** scalar (a constant exponent) */
    /* Natural log and PyTorch's masks. A mask step's operands and value are not tuner_ew_params
     * (tuner_ew_is_mask): a comparison reads an input or a constant, where reads two inputs and
     * masked_fill's value may be infinite. Conditions are "nonzero" (a NaN is true, as
     * bool(NaN) is), and where/masked_fill pick a value, never blend: an infinity or NaN in the
     * branch not taken never reaches the result. */
    TUNER_EW_LOG,
    TUNER_EW_EQ,          /* value OP x -> 1 or 0 (as the value's dtype), x = inputs[operand]
                           * when operand >= 0, else scalar; NaN compares unequal (ne gives 1) */
    TUNER_EW_NE,
    TUNER_EW_LT,
    TUNER_EW_LE,
    TUNER_EW_GT,
    TUNER_EW_GE,
    TUNER_EW_WHERE,       /* inputs[operand] != 0 ? value : inputs[operand2] */
    TUNER_EW_MASKED_FILL, /* inputs[operand] != 0 ? scalar : value (scalar may be +-inf) */
    TUNER_EW_COUNT
} tuner_ew_kind;

#define TUNER_EW_IS_BINARY(k) ((k) <= TUNER_EW_MIN)

typedef struct tuner_ew_step {
    tuner_ew_kind kind;
    int operand;       /* binary steps: index into tuner_op.inputs; otherwise -1 */
    double scalar;     /* the first parameter (tuner_ew_params): SCALE, SHIFT, CLAMP's min, ... */
    tuner_dtype dtype; /* TUNER_EW_CAST */
    double scalar2;    /* the second: CLAMP's max */
    int operand2;      /* WHERE: the input taken where the condition is 0; unused otherwise */
    /* A cast to FP8 ending an FP8 matmul's epilogue (the quantize step) may also record the
     * largest |value| it quantizes (cuBLASLt's amax_d, delayed scaling): 1 + the index of an f32
     * input of one element that the kernel raises to it (a max over what it holds; the caller
     * zeroes it), 0 when none. Not an operand: no step reads it (tuner_ew_operands leaves it
     * out). */
    int amax;
} tuner_ew_step;

typedef struct tuner_ew_chain {
    int n;
    tuner_ew_step steps[TUNER_MAX_STEPS];
} tuner_ew_chain;

typedef enum {
    TUNER_REDUCE_SUM = 0,
    TUNER_REDUCE_MEAN,
    TUNER_REDUCE_MAX,
    TUNER_REDUCE_COUNT
} tuner_reduce_kind;

typedef enum {
    TUNER_POOL_MAX = 0,
    TUNER_POOL_AVG,
    TUNER_POOL_ADAPTIVE_AVG,
    TUNER_POOL_COUNT
} tuner_pool_kind;

/* A named dimension: a size known only at launch, within [min, max] and a multiple of
 * multiple_of (1: any). Kernels of an op with dims take each size as a `long long` parameter
 * (TUNER_ARG_DIM0 in tuner/tuner.h) and are valid for every size in the range. */
typedef struct tuner_dim {
    char name[TUNER_DIM_NAME_LEN]; /* [a-z_][a-z0-9_]*, unique in the op */
    int64_t min, max;              /* 1 <= min <= max; both multiples of multiple_of */
    int64_t multiple_of;           /* >= 1 */
} tuner_dim;

typedef struct tuner_op {
    tuner_op_kind kind;
    int n_inputs;
    int n_anchor_inputs;
    tuner_tensor inputs[TUNER_MAX_INPUTS];
    tuner_tensor output; /* inferred */

    union {
        struct {
            bool trans_a, trans_b;
            bool allow_tf32; /* fp32 only: tensor cores in tf32 are allowed (default true) */
            /* FP8 inputs only (TUNER_SCALE_NONE otherwise): the scales of A and B and the
             * anchor's output dtype (f16, bf16 or f32; validation sets it, bf16 by default). */
            tuner_scale_kind scale_a, scale_b;
            tuner_dtype out_dtype;
            /* FP8 only: false promotes each 128-k tile's tensor-core sum into fp32 registers
             * (cuBLASLt's default), true keeps the sums in the tensor cores for all of K (its
             * "fast accumulation"; default true, validation sets it). Per-block scales always
             * promote. */
            bool fast_accum;
        } matmul;
        struct {
            int stride[2], pad[2], dilation[2]; /* [h, w] */
            int groups;
            bool nchw; /* false: NHWC (primary layout) */
        } conv2d;
        struct {
            double eps; /* LAYERNORM, RMSNORM */
        } norm;
        struct {
            /* norm.eps's bytes, unused: code that sets eps for every row op (softmax among
             * them) must not turn a softmax into a log_softmax. */
            double eps_unused;
            bool log; /* log_softmax */
        } softmax;
        struct {
            tuner_reduce_kind kind;
            int axis; /* normalised to 0..rank-1 */
            bool keepdim;
            int naxes; /* the consecutive axes axis .. axis + naxes - 1 (>= 1; validation sets it) */
        } reduce;
        struct {
            int64_t offset;                   /* in elements of x, >= 0 */
            int64_t strides[TUNER_MAX_RANK];  /* per output dim, in elements, >= 0 */
            /* Constant padding (all zero and pad_value 0 unless padded): per output dim, the
             * coordinates before and after the copied region that hold pad_value. */
            bool padded;
            int64_t pad_lower[TUNER_MAX_RANK], pad_upper[TUNER_MAX_RANK];
            double pad_value;
            /* A dynamic copy (names, not padded): the dims whose sizes multiply each stride and
             * the offset (all 0 in a static op). strides[d] and offset hold their values at the
             * dims' max (a coefficient times the max of the dims in the set); at launch the
             * coefficient times the sizes ("768*s" in the request). shape_sym: the names of
             * attrs.shape as parsed (proto__check_named gives them to the output). */
            uint8_t stride_sym[TUNER_MAX_RANK], offset_sym, shape_sym[TUNER_MAX_RANK];
        } copy;
        struct {
            int axis; /* normalised to 0..rank-1 */
        } concat;
        struct {
            tuner_pool_kind kind;
            /* [h, w]; max and avg only (adaptive_avg: zeros, its windows follow from the
             * output's size). avg: dilation 1. */
            int kernel[2], stride[2], pad[2], dilation[2];
            bool ceil_mode;
            bool count_include_pad; /* avg: padding counts in the divisor (PyTorch's default) */
            bool nchw;              /* false: NHWC, as conv2d */
        } pool2d;
        struct {
            int axis; /* of x, normalised to 0..rank-1 */
        } gather;
        struct {
            bool causal; /* bottom-right aligned (see ATTENTION above) */
            double scale; /* of q . k; validation sets 1/sqrt(D) when a request gives none */
            bool bshd;    /* layout "bshd" ([B,S,H,D]); false: "bhsd" ([B,H,S,D]) */
            bool packed;  /* layout "bshd_packed" (bshd set too): inputs[0] is qkv */
            int kv_heads; /* packed: Hkv, resolved by validation; 0 otherwise */
        } attention;
    } attrs;

    /* Injective steps applied to anchor input i as it is loaded (i < n_anchor_inputs). */
    tuner_ew_chain prologue[TUNER_MAX_INPUTS];
    /* Bijective steps applied to the anchor's result as it is stored (for ELEMENTWISE, the op). */
    tuner_ew_chain epilogue;

    /* The named dimensions its tensors' sym bits refer to, in the order their kernel parameters
     * take (names sorted: the canonical order). 0: a static op. */
    int n_dims;
    tuner_dim dims[TUNER_MAX_DIMS];
} tuner_op;

/* The exact compilation target. sm_90a differs from sm_90 (arch-specific instructions). */
typedef struct tuner_target {
    int sm;             /* 80, 86, 89, 90, 100, 120 */
    bool arch_specific; /* the "a" suffix */
} tuner_target;

/* The supported targets, one per name a request may give. This list is the only one: parsing,
 * the request's error message and the tuner's table of limits (tuner/arch.c, indexed by this
 * enum) all follow it, so a new arch is added here first. */
typedef enum {
    TUNER_TARGET_SM80 = 0,
    TUNER_TARGET_SM86,
    TUNER_TARGET_SM89,
    TUNER_TARGET_SM90,
    TUNER_TARGET_SM90A,
    TUNER_TARGET_SM100, /* Blackwell data centre (B200); the templates' mma.sync path */
    TUNER_TARGET_SM120, /* Blackwell GeForce/workstation (GB202) */
    TUNER_TARGET_COUNT
} tuner_target_id;

/* How hard a request may work for its kernel. */
typedef enum {
    TUNER_TUNE_NONE = 0, /* the template's fixed good default */
    TUNER_TUNE_MODEL,    /* best by the analytical cost model; no GPU needed */
    TUNER_TUNE_MEASURE,  /* verify and time candidates on a GPU worker */
    TUNER_TUNE_COUNT
} tuner_tune_mode;

/* Size in bytes of one element. */
static inline int tuner_dtype_size(tuner_dtype d)
{
    return d == TUNER_I64 ? 8 : d == TUNER_F32 || d == TUNER_I32 ? 4 : d == TUNER_F8E4M3 || d == TUNER_F8E5M2 ? 1 : 2;
}

/* true for the 8-bit float dtypes (f8e4m3, f8e5m2). */
static inline bool tuner_dtype_is_fp8(tuner_dtype d) { return d == TUNER_F8E4M3 || d == TUNER_F8E5M2; }

/* The value of FP8 byte b of dtype dt (f8e4m3 or f8e5m2), exactly (every FP8 value is a float):
 * e4m3 (bias 7): S.1111.111 is NaN, no infinity, max 448, subnormals m * 2^-9; e5m2 (bias 15):
 * exponent 31 is inf (m 0) or NaN, max 57344, subnormals m * 2^-16. The verification reference
 * decodes the same way on the GPU (tuner/gemm/reference.c). */
static inline float tuner_fp8_to_f32(tuner_dtype dt, uint8_t b)
{
    const bool e4 = dt == TUNER_F8E4M3;
    const uint32_t s = (uint32_t)(b & 0x80u) << 24, e = e4 ? (b >> 3) & 15u : (b >> 2) & 31u, m = e4 ? b & 7u : b & 3u;
    union {
        uint32_t u;
        float f;
    } v;
    if (e4 && e == 15u && m == 7u)
        v.u = 0x7fc00000u;
    else if (!e4 && e == 31u)
        v.u = s | (m ? 0x7fc00000u : 0x7f800000u);
    else if (e == 0u) {
        v.f = (float)m * (e4 ? 0.001953125f : 1.52587890625e-05f);
        v.u |= s;
    } else
        v.u = s | (e4 ? ((e + 120u) << 23) | (m << 20) : ((e + 112u) << 23) | (m << 21));
    return v.f;
}

/* The FP8 byte of dtype dt nearest to f (ties to even), saturating: a finite f beyond the
 * largest magnitude (448, 57344) and an infinity give the largest finite value of f's sign, NaN
 * gives NaN - PTX's cvt.rn.satfinite, which the kernels use; the verification reference encodes
 * the same way in software (tuner/gemm/reference.c). */
static inline uint8_t tuner_f32_to_fp8(tuner_dtype dt, float f)
{
    const bool e4 = dt == TUNER_F8E4M3;
    const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
    const uint8_t top = e4 ? 0x7eu : 0x7bu; /* the largest finite magnitude's code */
    union {
        float f;
        uint32_t u;
    } in = {f}, scale;
    const uint8_t sign = (uint8_t)((in.u >> 31) << 7);
    in.u &= 0x7fffffffu;
    if (in.u > 0x7f800000u)
        return (uint8_t)(sign | 0x7fu); /* NaN */
    if (in.f >= (e4 ? 448.0f : 57344.0f))
        return (uint8_t)(sign | top);
    /* The value's binade 2^e (subnormals share the smallest normal's, 1 - bias), where the
     * step is 2^(e - mb): q = |f| / step, exact, below 2^(mb + 1); rounded to r, ties to even. */
    const int fe = (int)(in.u >> 23) - 127, e = fe < 1 - bias ? 1 - bias : fe;
    scale.u = (uint32_t)(127 + mb - e) << 23;
    const float q = in.f * scale.f;
    uint32_t r = (uint32_t)q;
    const float frac = q - (float)r;
    if (frac > 0.5f || (frac == 0.5f && (r & 1u)))
        r++;
    uint32_t code;
    if (e == 1 - bias && r < (1u << mb))
        code = r; /* a subnormal (or zero) */
    else if (r == (1u << (mb + 1)))
        code = (uint32_t)(e + bias + 1) << mb; /* rounded up into the next binade */
    else
        code = ((uint32_t)(e + bias) << mb) | (r - (1u << mb));
    return (uint8_t)(sign | (code > top ? top : code));
}

/* The number of scale inputs of a matmul (0..2): they follow A and B (op/op.h's MATMUL). */
static inline int tuner_matmul_n_scales(const tuner_op *op)
{
    return (op->attrs.matmul.scale_a != TUNER_SCALE_NONE) + (op->attrs.matmul.scale_b != TUNER_SCALE_NONE);
}

/* true for the integer dtypes (i32, i64). */
static inline bool tuner_dtype_is_int(tuner_dtype d) { return d == TUNER_I32 || d == TUNER_I64; }

/* The row of x a gather index value selects along an axis of n rows: id itself in [0, n), id + n
 * for id in [-n, 0) (PyTorch's negative ids), and -1 for any other id: the kernels and the
 * reference read nothing for it and give 0. */
static inline int64_t tuner_gather_row(int64_t id, int64_t n)
{
    if (id < 0)
        id += n;
    return id >= 0 && id < n ? id : -1;
}

/* The integers [*ret_lo, *ret_hi) that a verifying run fills integer input i of op with (the GPU
 * workers, the GPU tests): gather's index uniform over [-N, N + N/16 + 1), N = x.shape[axis], so
 * negative ids, every row and a few ids past the end (read as 0) are all exercised and the rows
 * read are spread as a batch of real ids would be; an elementwise cast's input {0, 1}, an
 * attention mask, whose arithmetic ((1 - mask) * finfo.min) overflows f16 for other values. */
static inline void tuner_int_fill_range(const tuner_op *op, int i, int64_t *ret_lo, int64_t *ret_hi)
{
    if (op->kind == TUNER_OP_GATHER && i == 1) {
        const int64_t n = op->inputs[0].shape[op->attrs.gather.axis];
        *ret_lo = -n;
        *ret_hi = n + n / 16 + 1;
        return;
    }
    *ret_lo = 0;
    *ret_hi = 2;
}

/* A numeric parameter of a step kind, as requests and graph nodes name it. */
typedef struct tuner_ew_param {
    const char *key;  /* "value", "min", "max", "negative_slope", "exponent" */
    double dflt;      /* its value when absent and not required (+-HUGE_VAL: clamp's open bounds) */
    bool required;
} tuner_ew_param;

/* The parameters of kind k in slot order (slot 0 is tuner_ew_step.scalar, slot 1 scalar2): their
 * count (0..2), *ret pointing at a static table (NULL when none). Clamp's min and max are each
 * optional but a request must give one of them (checked by the parsers, since PyTorch refuses a
 * clamp with neither). */
int tuner_ew_params(tuner_ew_kind k, const tuner_ew_param **ret);

/* Slot i (0 or 1) of a step's parameters. */
static inline double *tuner_ew_slot(tuner_ew_step *s, int i) { return i ? &s->scalar2 : &s->scalar; }
static inline double tuner_ew_slot_value(const tuner_ew_step *s, int i) { return i ? s->scalar2 : s->scalar; }

/* The mask steps (comparisons, where, masked_fill): parsed, printed and fused by their own code
 * in each module, since their operands and value do not fit tuner_ew_params. */
static inline bool tuner_ew_is_compare(tuner_ew_kind k) { return k >= TUNER_EW_EQ && k <= TUNER_EW_GE; }
static inline bool tuner_ew_is_mask(tuner_ew_kind k) { return k >= TUNER_EW_EQ && k <= TUNER_EW_MASKED_FILL; }

/* The inputs step s reads, in order (binary steps' operand, a comparison's input, where's
 * condition and masked_fill's mask; then where's other): their count (0..2), indices in ret. */
static inline int tuner_ew_operands(const tuner_ew_step *s, int ret[2])
{
    int n = 0;
    if (TUNER_EW_IS_BINARY(s->kind) || s->kind == TUNER_EW_WHERE || s->kind == TUNER_EW_MASKED_FILL ||
        (tuner_ew_is_compare(s->kind) && s->operand >= 0))
        ret[n++] = s->operand;
    if (s->kind == TUNER_EW_WHERE)
        ret[n++] = s->operand2;
    return n;
}

/* Whether a step of chain c reads input `input`. */
static inline bool tuner_ew_chain_reads(const tuner_ew_chain *c, int input)
{
    for (int s = 0; s < c->n && s < TUNER_MAX_STEPS; s++) {
        int ops[2];
        const int n = tuner_ew_operands(&c->steps[s], ops);
        for (int k = 0; k < n; k++)
            if (ops[k] == input)
                return true;
    }
    return false;
}

/* The comparison that gives the same answer with its sides swapped (x < y is y > x). */
static inline tuner_ew_kind tuner_ew_compare_swapped(tuner_ew_kind k)
{
    switch (k) {
    case TUNER_EW_LT:
        return TUNER_EW_GT;
    case TUNER_EW_LE:
        return TUNER_EW_GE;
    case TUNER_EW_GT:
        return TUNER_EW_LT;
    case TUNER_EW_GE:
        return TUNER_EW_LE;
    default:
        return k; /* eq, ne: symmetric */
    }
}

/* true when op has named dimensions (its kernels take sizes at launch). */
static inline bool tuner_op_is_dynamic(const tuner_op *op) { return op->n_dims > 0; }

/* The product of the sizes of the dims in bit set `mask` (1 for an empty set). */
static inline int64_t tuner_dims_product(const int64_t *sizes, unsigned mask)
{
    int64_t n = 1;
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        if (mask & (1u << k))
            n *= sizes[k];
    return n;
}

/* A tensor's numel that does not depend on its named axes: the product of its fixed axes. */
static inline int64_t tuner_tensor_fixed_numel(const tuner_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (!t->sym[i])
            n *= t->shape[i];
    return n;
}

/* Number of elements in a tensor. */
static inline int64_t tuner_tensor_numel(const tuner_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

/* An attention op's sizes (see ATTENTION in the header comment), whatever its layout. */
typedef struct tuner_attention_dims {
    int64_t b, hq, hkv, s, skv, d;
    int64_t group;  /* hq / hkv: query heads per kv head */
    bool has_mask;  /* the additive mask: inputs[3] (inputs[1] when packed) */
} tuner_attention_dims;

static inline tuner_attention_dims tuner_attention_dims_of(const tuner_op *op)
{
    const tuner_tensor *q = &op->inputs[0], *k = &op->inputs[1];
    const bool bshd = op->attrs.attention.bshd;
    tuner_attention_dims r;
    if (op->attrs.attention.packed) {
        /* qkv [B, S, Hq + 2 Hkv, D]: self-attention, the mask (if any) inputs[1] */
        r.b = q->shape[0];
        r.s = r.skv = q->shape[1];
        r.hkv = op->attrs.attention.kv_heads;
        r.hq = q->shape[2] - 2 * r.hkv;
        r.d = q->shape[3];
        r.group = r.hkv > 0 ? r.hq / r.hkv : 0;
        r.has_mask = op->n_anchor_inputs == 2;
        return r;
    }
    r.b = q->shape[0];
    r.hq = bshd ? q->shape[2] : q->shape[1];
    r.s = bshd ? q->shape[1] : q->shape[2];
    r.hkv = bshd ? k->shape[2] : k->shape[1];
    r.skv = bshd ? k->shape[1] : k->shape[2];
    r.d = q->shape[3];
    r.group = r.hkv > 0 ? r.hq / r.hkv : 0;
    r.has_mask = op->n_anchor_inputs == 4;
    return r;
}

/* Which input is an attention op's mask (when it has one): after q, k and v, or after qkv. */
static inline int tuner_attention_mask_input(const tuner_op *op)
{
    return op->attrs.attention.packed ? 1 : 3;
}

/* The head dimensions the attention templates are written for. */
static inline bool tuner_attention_head_dim_ok(int64_t d)
{
    return d == 64 || d == 80 || d == 96 || d == 128 || d == 256;
}

/* A reduce's input as [outer, len, inner]: len the product of the reduced axes (axis .. axis +
 * naxes - 1), outer of those before, inner of those after. */
static inline void tuner_reduce_dims(const tuner_op *op, int64_t *outer, int64_t *len, int64_t *inner)
{
    const tuner_tensor *x = &op->inputs[0];
    const int a0 = op->attrs.reduce.axis, a1 = a0 + (op->attrs.reduce.naxes > 1 ? op->attrs.reduce.naxes : 1);
    int64_t o = 1, l = 1, i = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < a0)
            o *= x->shape[d];
        else if (d < a1)
            l *= x->shape[d];
        else
            i *= x->shape[d];
    }
    *outer = o;
    *len = l;
    *inner = i;
}

/* PyTorch's pooled output size along one dimension (pooling_output_shape): floor or, with
 * ceil_mode, ceil of (in + 2 pad - dilation (kernel - 1) - 1) / stride, plus one; in ceil mode
 * a last window that would start in the right padding (at or past in + pad) is dropped. May be
 * zero or negative (a window larger than the padded input): callers refuse that. */
static inline int64_t tuner_pool_out_size(int64_t in, int kernel, int stride, int pad, int dilation, bool ceil_mode)
{
    int64_t num = in + 2 * (int64_t)pad - (int64_t)dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
    int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1; /* floor division */
    if (ceil_mode && (out - 1) * stride >= in + pad)
        out--;
    return out;
}

/* The vocabularies of op/op.h: each enum's canonical names, printed and parsed from one table per
 * vocabulary (op/op.c), so the request parser, the canonical JSON, the daemon's answers and the
 * generated code's names always agree.
 *
 * *_name: the static canonical name ("f16", "matmul", "gelu_tanh", "sum", "measure"); never NULL,
 * "unknown" for a value out of range. *_parse: the value of a canonical name; 0, or -EINVAL when
 * s is NULL or not a name (then *ret is untouched). parse(name(v)) == v for every value.
 * tuner_dtype_parse also takes the other spellings a request may use ("float16", "half",
 * "fp16", "bfloat16", "float32", "fp32", "int32", "int64", "float8_e4m3fn", "float8_e5m2",
 * "e4m3", "e5m2"). */
const char *tuner_dtype_name(tuner_dtype d);
int tuner_dtype_parse(const char *s, tuner_dtype *ret);
const char *tuner_op_name(tuner_op_kind k);
int tuner_op_parse(const char *s, tuner_op_kind *ret);
const char *tuner_ew_name(tuner_ew_kind k);
int tuner_ew_parse(const char *s, tuner_ew_kind *ret);
/* Step names that spell another step with preset parameters (PyTorch's names): "relu6" is clamp
 * with min 0 and max 6 and takes no parameter (*ret_fixed true); "hardtanh" is clamp with min -1
 * and max 1 unless the request gives them. Fills ret's kind, operand -1 and parameters and
 * returns 0; -EINVAL when s is no alias. */
int tuner_ew_alias(const char *s, tuner_ew_step *ret, bool *ret_fixed);
const char *tuner_reduce_name(tuner_reduce_kind k);
int tuner_reduce_parse(const char *s, tuner_reduce_kind *ret);
const char *tuner_pool_name(tuner_pool_kind k);
int tuner_pool_parse(const char *s, tuner_pool_kind *ret);
/* "none", "tensor", "row", "col", "block". */
const char *tuner_scale_name(tuner_scale_kind k);
int tuner_scale_parse(const char *s, tuner_scale_kind *ret);
const char *tuner_tune_name(tuner_tune_mode m);
int tuner_tune_parse(const char *s, tuner_tune_mode *ret);

/* The lists that error messages offer ("matmul, conv2d, ..."; "sm_80, ..., sm_90a"), from the
 * tables themselves, into buf (cut to len); return buf. */
char *tuner_op_names(char *buf, size_t len);
char *tuner_target_names(char *buf, size_t len);
/* The step names a fused chain accepts ("bias, add, sub, ..."), the same way. */
char *tuner_step_names(char *buf, size_t len);

/* Writes "sm_90" / "sm_90a" into buf (at least 8 bytes), for any target, supported or not;
 * returns buf. */
char *tuner_target_name(const tuner_target *t, char *buf, int len);
/* Parses a supported target's name ("sm_80" .. "sm_90a"). Returns 0, or -EINVAL when s is NULL
 * or names no supported target (then *ret is untouched). */
int tuner_target_parse(const char *s, tuner_target *ret);
/* The target an id names (id < TUNER_TARGET_COUNT; any other id gives sm 0). */
tuner_target tuner_target_of(tuner_target_id id);
/* The id of a supported target, or -1 when t is NULL or not supported. */
int tuner_target_id_of(const tuner_target *t);

/* Whether target t has FP8 tensor cores (mma.sync m16n8k32 e4m3/e5m2: sm_89 and later; sm_90a
 * also wgmma). */
bool tuner_fp8_target(const tuner_target *t);
/* Why no kernel of this build computes FP8 matmul op on target t, as a sentence into buf (cut to
 * len; returned), or NULL when one does (or op is no FP8 matmul). FP8 needs FP8 tensor cores
 * (tuner_fp8_target: sm_89, sm_90, sm_100 and sm_120 by matmul_mma's mma.sync, sm_90a by
 * matmul_wgmma's wgmma and matmul_mma's), A K-major ([M,K], not trans_a) and B K-major ([N,K],
 * trans_b: torch._scaled_mm's column-major B), since both 8-bit instructions read both operands
 * K-major (ldmatrix transposes 16-bit elements only) and no loader transposes them yet, and K a
 * multiple of 16 with 16-byte aligned A and B (TMA's and cp.async's 16-byte rows). The request
 * parser (a known arch) and the space builder (any) both ask. */
const char *tuner_fp8_unsupported(const tuner_op *op, const tuner_target *t, char *buf, size_t len);

/* The input an FP8 matmul's quantize step raises to the largest |value| it quantizes
 * (tuner_ew_step.amax: the epilogue's last step), or -1 when it records none. */
static inline int tuner_fp8_amax_input(const tuner_op *op)
{
    const tuner_ew_chain *c = &op->epilogue;
    return c->n > 0 && c->steps[c->n - 1].kind == TUNER_EW_CAST ? c->steps[c->n - 1].amax - 1 : -1;
}

/* What an FP8 matmul's result may lose against fp32 sums of its exact products, as a fraction of
 * the sums' scale, with a factor 2 of margin (0 for any other op): Hopper's FP8 tensor cores keep
 * about 14 bits of each partial sum (DeepSeek-V3's measurement) and round once per k32 step, so
 * up to ceil(K / 32) * 2^-14; without fast accumulation each 128-k tile's sum is promoted into
 * fp32, and the tiles' independent losses add up as a random walk: one tile's bound times the
 * square root of the tiles (H200: 1.7e-3 at K = 8192). The verification tolerances add it (the
 * scheduler's, the GPU checks'). */
double tuner_fp8_accum_loss(const tuner_op *op);
/* The largest rounding step of an output of dtype dt relative to its value, with margin, where a
 * quantizing kernel may round to the reference code's neighbour: 0.13 (e4m3's 3 mantissa bits:
 * 1/8), 0.26 (e5m2's 2: 1/4); 0 for any other dtype. */
double tuner_fp8_step(tuner_dtype dt);

/* Canonical JSON of a validated op: sorted keys, no whitespace, every default explicit, doubles
 * as %.17g, canonical names. Two requests for the same op give the same string, whatever their
 * spelling: it is hashed into the cache keys. Never includes target, tune mode, wait, priority or
 * budget. Returns a malloc'd string (caller frees) or NULL when out of memory. */
char *tuner_op_canonical_json(const tuner_op *op);

/* The fusion anchor of in: the same op without prologue/epilogue steps, without the extra inputs
 * only those steps read, and with the anchor's own output dtype (for ELEMENTWISE, whose chain is
 * the op, the output becomes inputs[0]'s shape and dtype). out may equal in. Slots past n_inputs
 * are zeroed so stripped ops compare equal byte for byte. */
void tuner_op_strip_fusion(const tuner_op *in, tuner_op *out);

/* Dynamic ops (op/op_dims.c). */

/* Index of the dim named `name` in op->dims, or -1. */
int tuner_op_dim_index(const tuner_op *op, const char *name);

/* 0 when sizes[0..op->n_dims) is a launch op's kernels accept (each in [min, max] and a
 * multiple of multiple_of); else -ERANGE with "n is 9000; its range is 1..8192" (or "... a
 * multiple of 8") in why (may be NULL) and the dim's index in *ret_dim (may be NULL). */
int tuner_op_sizes_check(const tuner_op *op, const int64_t *sizes, char *why, size_t why_len, int *ret_dim);

/* The static op that `op` is at sizes (checked by tuner_op_sizes_check first: -ERANGE): every
 * named axis gets its product of sizes, and out has no dims. out may not alias op. What a GPU
 * worker verifies a dynamic candidate against, and what a reference is generated for. */
int tuner_op_bind(const tuner_op *op, const int64_t *sizes, tuner_op *out);

/* The same op over narrower ranges: dims[k] becomes [min[k], max[k]] (within the op's range,
 * multiples of its multiple_of: -ERANGE otherwise), and every named axis the product of the
 * new max, so the result is tuned at the largest sizes of its own range. out may alias op. What
 * a dispatch table's entry is (its op key carries its range). */
int tuner_op_restrict(const tuner_op *op, const int64_t *min, const int64_t *max, tuner_op *out);

/* A named axis as text, for messages and the canonical JSON: "n", "b*s" (names in dims order),
 * into buf (cut to len); returns buf. */
char *tuner_sym_text(const tuner_op *op, unsigned mask, char *buf, size_t len);

/* A value that is a coefficient times the sizes of the dims in `mask` (a dynamic copy's stride
 * or offset), held at the dims' max: "768*s", "b*s" (coefficient 1), or the number itself when
 * mask is 0. Into buf, returned. */
char *tuner_scaled_text(const tuner_op *op, int64_t value_at_max, unsigned mask, char *buf, size_t len);

#endif
