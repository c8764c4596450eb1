/* tuner/cols.c - reduce over an outer or middle axis (column-style reduction).
 *
 * The input is viewed as [O, A, I] (A the reduced axis, I > 1 the product of the dims after it).
 * A block of bx * by threads owns bx consecutive columns i of one outer index o: thread (ty, tx)
 * (task mapping spatial(by, bx) over threadIdx.x) accumulates rows a = ty, ty + by, ... of column
 * tx, so each warp reads 32 consecutive elements (coalesced), and the by partial sums of a column
 * are combined through shared memory in a fixed order. The innermost-axis case is reduce_rows.
 */
#include "tuner/core.h"
#include "tuner/mapping.h"
#include "tuner/space.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const P_BX = "block_x";
static const char *const P_BY = "block_y";

typedef struct cols_geo {
    long long O, A, I;
} cols_geo;

static cols_geo geo_of(const tuner_op *op)
{
    cols_geo g = {1, 1, 1};
    const tuner_tensor *x = &op->inputs[0];
    int ax = op->attrs.reduce.axis;
    for (int d = 0; d < x->rank; d++) {
        if (d < ax)
            g.O *= x->shape[d];
        else if (d == ax)
            g.A = x->shape[d];
        else
            g.I *= x->shape[d];
    }
    return g;
}

static bool cols_applies(const tuner_op *op, const tuner_target *t)
{
    if (op->kind != TUNER_OP_REDUCE || !tuner__arch(t) || !tuner__no_prologue(op) || op->n_inputs < 1)
        return false;
    const tuner_tensor *x = &op->inputs[0];
    if (x->rank < 1 || op->attrs.reduce.axis < 0 || op->attrs.reduce.axis >= x->rank)
        return false;
    return geo_of(op).I > 1;
}

static bool cfg_ok(const cols_geo *g, int bx, int by)
{
    if (bx < 32 || bx > 1024 || (bx & (bx - 1)) || by < 1 || (by & (by - 1)) || bx * by > 1024 || bx * by < 64)
        return false;
    long long nib = (g->I + bx - 1) / bx;
    return g->O * nib <= 0x7fffffffLL;
}

static int cols_enumerate(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n)
{
    (void)t;
    cols_geo g = geo_of(op);
    static const int bxs[] = {32, 64, 128, 256};
    static const int bys[] = {1, 2, 4, 8, 16, 32};
    const char *names[2] = {P_BX, P_BY};
    for (size_t i = 0; i < sizeof(bxs) / sizeof(bxs[0]); i++) {
        /* Wider than the (rounded-up) column count only idles threads. */
        if (bxs[i] > 32 && bxs[i] > tuner__pow2ceil(g.I))
            continue;
        for (size_t j = 0; j < sizeof(bys) / sizeof(bys[0]); j++) {
            if (bys[j] > 1 && bys[j] > tuner__pow2ceil(g.A))
                continue;
            if (!cfg_ok(&g, bxs[i], bys[j]))
                continue;
            int values[2] = {bxs[i], bys[j]};
            int r = tuner__space_push(items, n, "reduce_cols", 2, names, values);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

static int cols_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s, tuner_program *p,
                         char **err)
{
    cols_geo g = geo_of(op);
    int bx = tuner_schedule_param(s, P_BX, 0), by = tuner_schedule_param(s, P_BY, 0);
    if (!cfg_ok(&g, bx, by)) {
        *err = strdup("invalid parameters for reduce_cols");
        return -EINVAL;
    }
    const bool rmax = op->attrs.reduce.kind == TUNER_REDUCE_MAX;
    const long long nib = (g.I + bx - 1) / bx;
    const tuner_tensor *out = &op->output;
    const long long last = out->rank >= 1 ? out->shape[out->rank - 1] : 1;
    const char *T = tuner__ctype(op->inputs[0].dtype);

    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude(&sb, t->sm);
    tuner_sb_printf(&sb, "extern \"C\" __global__ void __launch_bounds__(%d) hd_reduce_cols(", bx * by);
    tuner__emit_params(&sb, op, out->dtype);
    tuner_sb_puts(&sb, ")\n{\n");
    tuner_mapping m = tuner_map_spatial(2, by, bx, 1);
    const char *names[3] = {"ty", "tx", NULL};
    tuner_map_emit_begin(&sb, &m, "threadIdx.x", "tm", names);
    tuner_sb_printf(&sb, "const long long o = (long long)blockIdx.x / %lldLL;\n", nib);
    tuner_sb_printf(&sb, "const long long i = ((long long)blockIdx.x %% %lldLL) * %d + tx;\n", nib, bx);
    tuner_sb_printf(&sb, "const bool ok = i < %lldLL;\n", g.I);
    tuner_sb_printf(&sb, "const %s *xp = in0 + o * %lldLL + (ok ? i : 0LL);\n", T, g.A * g.I);
    tuner_sb_printf(&sb, "float acc = %s;\n", rmax ? "-HD_INF" : "0.0f");
    tuner_sb_printf(&sb, "if (ok) {\n#pragma unroll 4\nfor (long long a = ty; a < %lldLL; a += %d) {\n", g.A, by);
    tuner_sb_printf(&sb, "const float x = hd_f32(xp[a * %lldLL]);\n%s\n}\n}\n", g.I,
                    rmax ? "acc = fmaxf(acc, x);" : "acc += x;");
    if (by > 1) {
        tuner_sb_printf(&sb, "__shared__ float red[%d][%d];\nred[ty][tx] = acc;\n__syncthreads();\n", by, bx);
        tuner_sb_printf(&sb, "if (ty == 0) {\n#pragma unroll\nfor (int k = 1; k < %d; k++) acc = %s;\n}\n", by,
                        rmax ? "fmaxf(acc, red[k][tx])" : "acc + red[k][tx]");
    }
    tuner_sb_puts(&sb, "if (ty == 0 && ok) {\nfloat v = acc;\n");
    if (op->attrs.reduce.kind == TUNER_REDUCE_MEAN)
        tuner_sb_printf(&sb, "v = v / %lld.0f;\n", g.A);
    tuner_sb_printf(&sb, "const long long ol = o * %lldLL + i;\n", g.I);
    tuner_sb_printf(&sb, "const long long orow = ol / %lldLL, ocol = ol %% %lldLL;\n", last, last);
    tuner__bcast_ctx ec = {op, "orow", "ocol"};
    tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
    tuner_sb_printf(&sb, "out[ol] = hd_from_f32<%s>(v);\n}\n", tuner__ctype(out->dtype));
    tuner_map_emit_end(&sb, &m);
    tuner_sb_puts(&sb, "}\n");

    tuner__one_launch(p, op, "hd_reduce_cols", (unsigned)(g.O * nib), (unsigned)(bx * by));
    p->source = tuner_sb_take(&sb);
    p->output_dtype = out->dtype;
    return p->source ? 0 : -ENOMEM;
}

static double cols_predict(const tuner_op *op, const tuner_target *t, const tuner_schedule *s)
{
    const tuner_arch *a = tuner__arch(t);
    cols_geo g = geo_of(op);
    int bx = tuner_schedule_param(s, P_BX, 0), by = tuner_schedule_param(s, P_BY, 0);
    if (!a || !cfg_ok(&g, bx, by))
        return 1e12;
    int isz = tuner_dtype_size(op->inputs[0].dtype);
    double bytes = (double)g.O * g.A * g.I * isz + (double)g.O * g.I * tuner_dtype_size(op->output.dtype);
    for (int i = 1; i < op->n_inputs; i++)
        bytes += (double)tuner_tensor_numel(&op->inputs[i]) * tuner_dtype_size(op->inputs[i].dtype);
    /* A warp reads 32 consecutive elements: a 64-byte (16-bit) or 128-byte (f32) segment; columns
     * narrower than a warp waste the rest. */
    double eff = isz == 2 ? 0.7 : 0.9;
    if (g.I < 32)
        eff *= (double)g.I / 32.0;
    double nib = (double)((g.I + bx - 1) / bx);
    double busy = fmin(1.0, (double)g.I / (nib * bx)) * fmin(1.0, (double)g.A / by);
    double instr = (double)g.O * g.A * g.I * 5.0 + (double)g.O * g.I * (10.0 + tuner__chain_instr(&op->epilogue));
    double us = tuner__mem_cost_us(a, bytes, (double)g.O * nib, bx * by, 4.0 * isz * busy, 32, by > 1 ? bx * by * 4 : 0,
                                   eff, instr / busy);
    /* Each thread walks A / by rows sequentially. */
    double trips = ceil((double)g.A / by);
    double waves = ceil((double)g.O * nib / ((double)a->sm_count * (a->max_threads_per_sm / (bx * by))));
    us += 0.002 * trips * waves;
    return us;
}

int tuner__cols_preferred(const tuner_op *op, const tuner_target *t, tuner_schedule *ret)
{
    (void)t;
    cols_geo g = geo_of(op);
    /* 32 columns x 8 rows: coalesced warps, enough threads per column for long reductions. */
    ret->n_params = 2;
    ret->params[0].name = P_BX;
    ret->params[0].value = g.I >= 256 ? 64 : 32;
    ret->params[1].name = P_BY;
    ret->params[1].value = g.A >= 64 ? 8 : 4;
    return 0;
}

const tuner_template tuner__reduce_cols = {
    .name = "reduce_cols",
    .space_signature = "reduce_cols v1: [O,A,I] I>1; block_x{32..256} <= pow2ceil(I), block_y{1..32} <= pow2ceil(A), "
                       "64 <= threads <= 1024",
    .applies = cols_applies,
    .enumerate = cols_enumerate,
    .generate = cols_generate,
    .predict_us = cols_predict,
};
