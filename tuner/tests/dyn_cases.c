/* tuner/tests/dyn_cases.c - dynamic ops for the core templates' checks (dyn_cases.h). */
#include "dyn_cases.h"

#include <stdio.h>
#include <string.h>

#include "common.h"
#include "tuner/attn/tests/ops.h"

typedef struct dim_spec {
    const char *name; /* dims sorted by name: the canonical order */
    long long min, max, multiple_of;
} dim_spec;

static void set_dims(tuner_op *op, int n, const dim_spec *d, bool bump)
{
    op->n_dims = n;
    memset(op->dims, 0, sizeof(op->dims));
    for (int k = 0; k < n; k++) {
        snprintf(op->dims[k].name, sizeof(op->dims[k].name), "%s", d[k].name);
        op->dims[k].min = d[k].min;
        op->dims[k].max = d[k].max + (bump ? 7 * d[k].multiple_of : 0);
        op->dims[k].multiple_of = d[k].multiple_of;
    }
}

/* Names axis 0 of t by the dims in mask: its size becomes their max's product. */
static void name0(const tuner_op *op, tuner_tensor *t, unsigned mask)
{
    long long p = 1;
    for (int k = 0; k < op->n_dims; k++)
        if (mask & (1u << k))
            p *= op->dims[k].max;
    t->sym[0] = (uint8_t)mask;
    t->shape[0] = p;
}

/* Names the axes of t by masks[d] (0: the axis stays fixed): each named size becomes the
 * product of its dims' max. */
static void name_axes(const tuner_op *op, tuner_tensor *t, const unsigned *masks)
{
    for (int d = 0; d < t->rank; d++)
        if (masks[d]) {
            long long p = 1;
            for (int k = 0; k < op->n_dims; k++)
                if (masks[d] & (1u << k))
                    p *= op->dims[k].max;
            t->sym[d] = (uint8_t)masks[d];
            t->shape[d] = p;
        }
}

static tuner_op ew_op(tuner_dtype dt, int rank, const long long *shape)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ELEMENTWISE;
    op.inputs[0] = t_tensor(dt, rank, shape, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, rank, shape, 16);
    return op;
}

static t_dyn_case *add(t_dyn_case *out, int *n, const char *name, tuner_dtype dt, const char *tmpl)
{
    t_dyn_case *c = &out[(*n)++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s %s", name, tuner_dtype_name(dt));
    c->template_name = tmpl;
    return c;
}

/* A copy of x (shape xs, names xm per axis) to out (shape os, names om) reading x at
 * offset + sum(o[d] * strides[d]): each stride and the offset a coefficient times the max of
 * the dims in its mask (what the launch scales with the sizes). */
static tuner_op copy_op(tuner_dtype dt, int n_dims, const dim_spec *dims, bool bump, int xr, const long long *xs,
                        const unsigned *xm, int orank, const long long *os, const unsigned *om,
                        const long long *coef, const unsigned *smask, long long off_coef, unsigned off_mask)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_COPY;
    op.inputs[0] = t_tensor(dt, xr, xs, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, orank, os, 16);
    set_dims(&op, n_dims, dims, bump);
    name_axes(&op, &op.inputs[0], xm);
    name_axes(&op, &op.output, om);
    int64_t max[TUNER_MAX_DIMS] = {1, 1, 1, 1};
    for (int k = 0; k < op.n_dims; k++)
        max[k] = op.dims[k].max;
    for (int d = 0; d < orank; d++) {
        op.attrs.copy.strides[d] = coef[d] * tuner_dims_product(max, smask[d]);
        op.attrs.copy.stride_sym[d] = (uint8_t)smask[d];
        op.attrs.copy.shape_sym[d] = (uint8_t)om[d];
    }
    op.attrs.copy.offset = off_coef * tuner_dims_product(max, off_mask);
    op.attrs.copy.offset_sym = (uint8_t)off_mask;
    return op;
}

int t_dyn_cases(tuner_dtype dt, bool bump, t_dyn_case *out)
{
    int n = 0;
    t_dyn_case *c;
    const dim_spec dn[1] = {{"n", 1, 4096, 1}};
    const dim_spec dbs[2] = {{"b", 1, 8, 1}, {"s", 1, 300, 1}};

    /* elementwise [n,768]: + bias [768], gelu, * scale [1,768], + residual [n,768], tanh. */
    c = add(out, &n, "elementwise [n,768] +b gelu *s[1,768] +res[n,768]", dt, "elementwise");
    {
        const long long x[2] = {1, 768}, b[1] = {768}, s[2] = {1, 768};
        c->op = ew_op(dt, 2, x);
        set_dims(&c->op, 1, dn, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 1, b, TUNER_EW_GELU_ERF);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 2, s, TUNER_EW_RELU);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, x, TUNER_EW_TANH);
        name0(&c->op, &c->op.inputs[3], 1);
    }
    /* [b*s,77] (odd rows: scalar candidates only) + residual [b*s,77], silu, * [77]. */
    c = add(out, &n, "elementwise [b*s,77] +res[b*s,77] silu *w[77]", dt, "elementwise");
    {
        const long long x[2] = {1, 77}, w[1] = {77};
        c->op = ew_op(dt, 2, x);
        set_dims(&c->op, 2, dbs, bump);
        name0(&c->op, &c->op.inputs[0], 3);
        name0(&c->op, &c->op.output, 3);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, x, TUNER_EW_SILU);
        name0(&c->op, &c->op.inputs[1], 3);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 1, w, TUNER_EW_SIGMOID);
        c->expect_scalar_only = true;
    }
    /* Rank 1: n a multiple of 8 allows 16-byte vectors; any n does not. */
    c = add(out, &n, "elementwise [n%8] *[1] relu", dt, "elementwise");
    {
        const dim_spec d8[1] = {{"n", 8, 65536, 8}};
        const long long x[1] = {1};
        c->op = ew_op(dt, 1, x);
        set_dims(&c->op, 1, d8, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 1, x, TUNER_EW_RELU);
    }
    c = add(out, &n, "elementwise [n] +[n] abs", dt, "elementwise");
    {
        const dim_spec d1[1] = {{"n", 1, 65536, 1}};
        const long long x[1] = {1};
        c->op = ew_op(dt, 1, x);
        set_dims(&c->op, 1, d1, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 1, x, TUNER_EW_ABS);
        name0(&c->op, &c->op.inputs[1], 1);
        c->expect_scalar_only = true;
    }

    /* softmax rows: [n,1000]; [b*s,12,128] with a prologue mask [b*s,1,128]; log_softmax of
     * few long rows (split). */
    c = add(out, &n, "softmax [n,1000]", dt, "softmax_rows");
    c->op = t_softmax(dt, 1, 1000, 16);
    set_dims(&c->op, 1, dn, bump);
    name0(&c->op, &c->op.inputs[0], 1);
    name0(&c->op, &c->op.output, 1);
    c = add(out, &n, "softmax [b*s,12,128] prologue +mask[b*s,1,128]", dt, "softmax_rows");
    {
        const long long x[3] = {1, 12, 128}, m[3] = {1, 1, 128};
        c->op = t_softmax(dt, 1, 128, 16);
        c->op.inputs[0] = t_tensor(dt, 3, x, 16);
        c->op.output = t_tensor(dt, 3, x, 16);
        set_dims(&c->op, 2, dbs, bump);
        name0(&c->op, &c->op.inputs[0], 3);
        name0(&c->op, &c->op.output, 3);
        t_add_prologue(&c->op, TUNER_EW_ADD, 3, m, TUNER_EW_RELU);
        name0(&c->op, &c->op.inputs[1], 3);
    }
    c = add(out, &n, "log_softmax [n<=4,131072] (split)", dt, "softmax_rows");
    {
        const dim_spec d4[1] = {{"n", 1, 4, 1}};
        c->op = t_softmax(dt, 1, 131072, 16);
        c->op.attrs.softmax.log = true;
        set_dims(&c->op, 1, d4, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        c->expect_split = true;
    }

    /* layernorm: affine with a residual epilogue; long rows (split) with a prologue [n,1]. */
    c = add(out, &n, "layernorm [n,768] +res[n,768] gelu", dt, "layernorm_rows");
    {
        const long long r[2] = {1, 768};
        c->op = t_layernorm(dt, 1, 768, 16, true);
        set_dims(&c->op, 1, dn, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, r, TUNER_EW_GELU_ERF);
        name0(&c->op, &c->op.inputs[3], 1);
    }
    c = add(out, &n, "layernorm [n<=8,65536] prologue *[n,1] silu (split)", dt, "layernorm_rows");
    {
        const dim_spec d8[1] = {{"n", 1, 8, 1}};
        const long long r[2] = {1, 1};
        c->op = t_layernorm(dt, 1, 65536, 16, true);
        set_dims(&c->op, 1, d8, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_prologue(&c->op, TUNER_EW_MUL, 2, r, TUNER_EW_SILU);
        name0(&c->op, &c->op.inputs[3], 1);
        c->expect_split = true;
    }

    /* rmsnorm: [n,4096] with gamma; [n<=4,100000] (split). */
    c = add(out, &n, "rmsnorm [n,4096] *g", dt, "rmsnorm_rows");
    c->op = t_rmsnorm(dt, 1, 4096, 16, true);
    set_dims(&c->op, 1, dn, bump);
    name0(&c->op, &c->op.inputs[0], 1);
    name0(&c->op, &c->op.output, 1);
    c = add(out, &n, "rmsnorm [n<=4,100000] (split)", dt, "rmsnorm_rows");
    {
        const dim_spec d4[1] = {{"n", 1, 4, 1}};
        c->op = t_rmsnorm(dt, 1, 100000, 16, true);
        set_dims(&c->op, 1, d4, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        c->expect_split = true;
    }

    /* reduce over the last axis: to a named rank-1 output; keepdim with a [n,12,1] bias; few
     * long rows (split). */
    c = add(out, &n, "reduce sum [n,1000] ax1 -> [n]", dt, "reduce_rows");
    {
        const long long x[2] = {1, 1000};
        c->op = t_reduce(dt, 2, x, 1, TUNER_REDUCE_SUM, false, 16);
        set_dims(&c->op, 1, dn, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
    }
    c = add(out, &n, "reduce mean [n,12,1000] ax2 keep +b[n,12,1] relu", dt, "reduce_rows");
    {
        const long long x[3] = {1, 12, 1000}, b[3] = {1, 12, 1};
        c->op = t_reduce(dt, 3, x, 2, TUNER_REDUCE_MEAN, true, 16);
        set_dims(&c->op, 1, dn, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 3, b, TUNER_EW_RELU);
        name0(&c->op, &c->op.inputs[1], 1);
    }
    c = add(out, &n, "reduce max [n<=5,300001] ax1 (split)", dt, "reduce_rows");
    {
        const dim_spec d5[1] = {{"n", 1, 5, 1}};
        const long long x[2] = {1, 300001};
        c->op = t_reduce(dt, 2, x, 1, TUNER_REDUCE_MAX, false, 16);
        set_dims(&c->op, 1, d5, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        c->expect_split = true;
    }

    /* reduce over a middle axis (columns): the outer extent is named. */
    c = add(out, &n, "reduce sum [n,333,64] ax1 prologue *[333,1] sigmoid", dt, "reduce_cols");
    {
        const dim_spec d64[1] = {{"n", 1, 64, 1}};
        const long long x[3] = {1, 333, 64}, m[2] = {333, 1};
        c->op = t_reduce(dt, 3, x, 1, TUNER_REDUCE_SUM, false, 16);
        set_dims(&c->op, 1, d64, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_prologue(&c->op, TUNER_EW_MUL, 2, m, TUNER_EW_SIGMOID);
    }
    c = add(out, &n, "reduce max [n<=2,100000,64] ax1 keep +b[1,1,64] relu (split)", dt, "reduce_cols");
    {
        const dim_spec d2[1] = {{"n", 1, 2, 1}};
        const long long x[3] = {1, 100000, 64}, b[3] = {1, 1, 64};
        c->op = t_reduce(dt, 3, x, 1, TUNER_REDUCE_MAX, true, 16);
        set_dims(&c->op, 1, d2, bump);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 3, b, TUNER_EW_RELU);
        c->expect_split = true;
    }

    /* Names on inner axes (contiguous leading axes flatten: rows or elements are products of
     * runtime sizes, the strides of fixed inner axes stay constants, a broadcast operand's
     * strides and row products are read from the sizes). b in 1..8 and s in 1..300. */
    c = add(out, &n, "elementwise [b,s,768] +pos[s,768] gelu *g[b,1,768] tanh", dt, "elementwise");
    c->cpu_two_runs = true;
    {
        const long long x[3] = {1, 1, 768}, pe[2] = {1, 768}, g[3] = {1, 1, 768};
        const unsigned bs[3] = {1, 2, 0}, sn[2] = {2, 0}, bn[3] = {1, 0, 0};
        c->op = ew_op(dt, 3, x);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[0], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, pe, TUNER_EW_GELU_ERF);
        name_axes(&c->op, &c->op.inputs[1], sn);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 3, g, TUNER_EW_TANH);
        name_axes(&c->op, &c->op.inputs[2], bn);
    }
    /* attention scores [b,12,q,k] + a key mask [b,1,1,k]: a named last axis (k a multiple of 8:
     * vectors too) and a named row axis q. */
    c = add(out, &n, "elementwise [b,12,q,k%8] +mask[b,1,1,k] relu *[q,1] abs", dt, "elementwise");
    c->cpu_two_runs = true;
    {
        const dim_spec dbkq[3] = {{"b", 1, 4, 1}, {"k", 8, 264, 8}, {"q", 1, 77, 1}};
        const long long x[4] = {1, 12, 1, 1}, m[4] = {1, 1, 1, 1}, r[2] = {1, 1};
        const unsigned xs[4] = {1, 0, 4, 2}, ms[4] = {1, 0, 0, 2}, rs[2] = {4, 0};
        c->op = ew_op(dt, 4, x);
        set_dims(&c->op, 3, dbkq, bump);
        name_axes(&c->op, &c->op.inputs[0], xs);
        name_axes(&c->op, &c->op.output, xs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 4, m, TUNER_EW_RELU);
        name_axes(&c->op, &c->op.inputs[1], ms);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 2, r, TUNER_EW_ABS);
        name_axes(&c->op, &c->op.inputs[2], rs);
    }
    /* softmax over a fixed last axis of [b,12,s,64], a prologue mask [b,1,s,64]. */
    c = add(out, &n, "softmax [b,12,s,64] prologue +mask[b,1,s,64] tanh", dt, "softmax_rows");
    c->cpu_two_runs = true;
    {
        const long long x[4] = {1, 12, 1, 64}, m[4] = {1, 1, 1, 64};
        const unsigned xs[4] = {1, 0, 2, 0}, ms[4] = {1, 0, 2, 0};
        c->op = t_softmax(dt, 1, 64, 16);
        c->op.inputs[0] = t_tensor(dt, 4, x, 16);
        c->op.output = t_tensor(dt, 4, x, 16);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[0], xs);
        name_axes(&c->op, &c->op.output, xs);
        t_add_prologue(&c->op, TUNER_EW_ADD, 4, m, TUNER_EW_TANH);
        name_axes(&c->op, &c->op.inputs[1], ms);
    }
    /* layernorm [b,s,768] with gamma, beta, a residual [b,s,768] and a position term [s,768]. */
    c = add(out, &n, "layernorm [b,s,768] +res[b,s,768] relu +pos[s,768] sigmoid", dt, "layernorm_rows");
    c->cpu_two_runs = true;
    {
        const long long x[3] = {1, 1, 768}, pe[2] = {1, 768};
        const unsigned bs[3] = {1, 2, 0}, sn[2] = {2, 0};
        c->op = t_layernorm(dt, 1, 768, 16, true);
        c->op.inputs[0] = t_tensor(dt, 3, x, 16);
        c->op.output = t_tensor(dt, 3, x, 16);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[0], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 3, x, TUNER_EW_RELU);
        name_axes(&c->op, &c->op.inputs[3], bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, pe, TUNER_EW_SIGMOID);
        name_axes(&c->op, &c->op.inputs[4], sn);
    }
    /* rmsnorm of few long rows [b<=2,s<=3,100000] (split): the workspace at b * s's max. */
    c = add(out, &n, "rmsnorm [b<=2,s<=3,100000] (split)", dt, "rmsnorm_rows");
    c->cpu_two_runs = true;
    {
        const dim_spec d23[2] = {{"b", 1, 2, 1}, {"s", 1, 3, 1}};
        const long long x[3] = {1, 1, 100000};
        const unsigned bs[3] = {1, 2, 0};
        c->op = t_rmsnorm(dt, 1, 100000, 16, true);
        c->op.inputs[0] = t_tensor(dt, 3, x, 16);
        c->op.output = t_tensor(dt, 3, x, 16);
        set_dims(&c->op, 2, d23, bump);
        name_axes(&c->op, &c->op.inputs[0], bs);
        name_axes(&c->op, &c->op.output, bs);
        c->expect_split = true;
    }
    /* reduce over the last axis to [b,s] (a named last output axis) + [s]. */
    c = add(out, &n, "reduce mean [b,s,1000] ax2 -> [b,s] +[s] relu", dt, "reduce_rows");
    c->cpu_two_runs = true;
    {
        const long long x[3] = {1, 1, 1000}, o[2] = {1, 1};
        const unsigned bs[3] = {1, 2, 0}, sn[1] = {2};
        c->op = t_reduce(dt, 3, x, 2, TUNER_REDUCE_MEAN, false, 16);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[0], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 1, o, TUNER_EW_RELU);
        name_axes(&c->op, &c->op.inputs[1], sn);
    }
    /* reduce over a middle axis with names on both outer axes: O = b * s. */
    c = add(out, &n, "reduce sum [b,s,33,64] ax2 keep +[s,1,64] abs", dt, "reduce_cols");
    c->cpu_two_runs = true;
    {
        const dim_spec d[2] = {{"b", 1, 4, 1}, {"s", 1, 40, 1}};
        const long long x[4] = {1, 1, 33, 64}, e[3] = {1, 1, 64};
        const unsigned bs[4] = {1, 2, 0, 0}, sn[3] = {2, 0, 0};
        c->op = t_reduce(dt, 4, x, 2, TUNER_REDUCE_SUM, true, 16);
        set_dims(&c->op, 2, d, bump);
        name_axes(&c->op, &c->op.inputs[0], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 3, e, TUNER_EW_ABS);
        name_axes(&c->op, &c->op.inputs[1], sn);
    }

    /* gather: the index's axes named (token ids of a batch of sequences). */
    c = add(out, &n, "gather embedding [1000,768][ids b,s] +pos[s,768] relu", dt, "gather");
    c->cpu_two_runs = true;
    {
        const long long x[2] = {1000, 768}, ids[2] = {1, 1}, pe[2] = {1, 768};
        const unsigned bs[3] = {1, 2, 0}, sn[2] = {2, 0};
        c->op = t_gather(dt, 2, x, 0, TUNER_I64, 2, ids);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[1], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, pe, TUNER_EW_RELU);
        name_axes(&c->op, &c->op.inputs[2], sn);
    }
    c = add(out, &n, "gather index_select [4,500,3] ax1 [ids n] -> [4,n,3]", dt, "gather");
    c->cpu_two_runs = true;
    {
        const dim_spec d1[1] = {{"n", 1, 1000, 1}};
        const long long x[3] = {4, 500, 3}, ids[1] = {1};
        const unsigned ns[1] = {1}, os[3] = {0, 1, 0};
        c->op = t_gather(dt, 3, x, 1, TUNER_I32, 1, ids);
        set_dims(&c->op, 1, d1, bump);
        name_axes(&c->op, &c->op.inputs[1], ns);
        name_axes(&c->op, &c->op.output, os);
    }
    c = add(out, &n, "gather [1000][ids b,s] -> [b,s] *[s] tanh", dt, "gather");
    c->cpu_two_runs = true;
    {
        const long long x[1] = {1000}, ids[2] = {1, 1}, w[1] = {1};
        const unsigned bs[2] = {1, 2}, sn[1] = {2};
        c->op = t_gather(dt, 1, x, 0, TUNER_I32, 2, ids);
        set_dims(&c->op, 2, dbs, bump);
        name_axes(&c->op, &c->op.inputs[1], bs);
        name_axes(&c->op, &c->op.output, bs);
        t_add_epilogue(&c->op, TUNER_EW_MUL, 1, w, TUNER_EW_TANH);
        name_axes(&c->op, &c->op.inputs[2], sn);
    }

    /* attention (attention_mma; f16 and bf16): names on B, S and Skv, strides and the causal
     * offset at launch. */
    if (dt != TUNER_F32) {
        /* bhsd, GQA 4/2, S and Skv named apart, a key-padding mask [b,1,1,k]. */
        c = add(out, &n, "attention bhsd [b,4,s,64] kv [b,2,k,64] mask[b,1,1,k]", dt, "attention_mma");
        c->cpu_two_runs = true;
        {
            const dim_spec d3[3] = {{"b", 1, 3, 1}, {"k", 1, 300, 1}, {"s", 1, 200, 1}};
            const long long ms[4] = {1, 1, 1, 1};
            const unsigned qs[4] = {1, 0, 4, 0}, ks[4] = {1, 0, 2, 0}, mm[4] = {1, 0, 0, 2};
            c->op = ta_attention_of(dt, false, false, 1, 4, 2, 1, 1, 64, 4, ms, dt);
            set_dims(&c->op, 3, d3, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.inputs[1], ks);
            name_axes(&c->op, &c->op.inputs[2], ks);
            name_axes(&c->op, &c->op.inputs[3], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bshd self-attention, causal: one name s on S and Skv, B fixed. */
        c = add(out, &n, "attention bshd causal [2,s,4,64] kv [2,s,4,64]", dt, "attention_mma");
        c->cpu_two_runs = true;
        {
            const dim_spec d1[1] = {{"s", 1, 333, 1}};
            const unsigned qs[4] = {0, 1, 0, 0};
            c->op = ta_attention_of(dt, true, true, 2, 4, 4, 1, 1, 64, 0, NULL, dt);
            set_dims(&c->op, 1, d1, bump);
            for (int i = 0; i < 3; i++)
                name_axes(&c->op, &c->op.inputs[i], qs);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bhsd self-attention with a padding mask [b,1,s,s]: S and Skv one name, the mask's
         * batch stride s * s at launch. */
        c = add(out, &n, "attention bhsd [b,4,s,64] self mask[b,1,s,s]", dt, "attention_mma");
        c->cpu_two_runs = true;
        {
            const dim_spec d2[2] = {{"b", 1, 3, 1}, {"s", 1, 150, 1}};
            const long long ms[4] = {1, 1, 1, 1};
            const unsigned qs[4] = {1, 0, 2, 0}, mm[4] = {1, 0, 2, 2};
            c->op = ta_attention_of(dt, false, false, 1, 4, 4, 1, 1, 64, 4, ms, dt);
            set_dims(&c->op, 2, d2, bump);
            for (int i = 0; i < 3; i++)
                name_axes(&c->op, &c->op.inputs[i], qs);
            name_axes(&c->op, &c->op.inputs[3], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* BERT-like with a short range of short sequences (a fine table entry): 17..20 keys
         * are one key tile of 32, 64 or 128 whatever the size, so the count and Skv's max are
         * constants in the kernel (tuner/attn/mma.c fixed_nt) and the key tests compare with
         * both. */
        c = add(out, &n, "attention bhsd [b,12,s,64] self mask[b,1,1,s], s 17..20", dt, "attention_mma");
        c->cpu_two_runs = true;
        c->range_marker = "const int at_nt = 1;";
        {
            const dim_spec d2[2] = {{"b", 1, 2, 1}, {"s", 17, 20, 1}};
            const long long ms[4] = {1, 1, 1, 1};
            const unsigned qs[4] = {1, 0, 2, 0}, mm[4] = {1, 0, 0, 2};
            c->op = ta_attention_of(dt, false, false, 1, 12, 12, 1, 1, 64, 4, ms, dt);
            set_dims(&c->op, 2, d2, bump);
            for (int i = 0; i < 3; i++)
                name_axes(&c->op, &c->op.inputs[i], qs);
            name_axes(&c->op, &c->op.inputs[3], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bhsd causal with S < Skv apart (decoding a chunk against a cache): the causal offset
         * Skv - S at launch; k a multiple of 64, so block_n 32 and 64 skip the key bound test. */
        c = add(out, &n, "attention bhsd causal [b,4,q,64] kv [b,4,k%64,64]", dt, "attention_mma");
        c->cpu_two_runs = true;
        {
            const dim_spec d3[3] = {{"b", 1, 2, 1}, {"k", 64, 512, 64}, {"q", 1, 64, 1}};
            const unsigned qs[4] = {1, 0, 4, 0}, ks[4] = {1, 0, 2, 0};
            c->op = ta_attention_of(dt, false, true, 1, 4, 4, 1, 1, 64, 0, NULL, dt);
            set_dims(&c->op, 3, d3, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.inputs[1], ks);
            name_axes(&c->op, &c->op.inputs[2], ks);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* decoding: a few query rows against a named Skv (attention_decode, and mma). */
        c = add(out, &n, "attention decode bhsd [b,8,1,128] kv [b,2,k,128] mask[b,1,1,k]", dt, "attention_decode");
        c->cpu_two_runs = true;
        {
            const dim_spec d2[2] = {{"b", 1, 4, 1}, {"k", 1, 3000, 1}};
            const long long ms[4] = {1, 1, 1, 1};
            const unsigned qs[4] = {1, 0, 0, 0}, ks[4] = {1, 0, 2, 0}, mm[4] = {1, 0, 0, 2};
            c->op = ta_attention_of(dt, false, false, 1, 8, 2, 1, 1, 128, 4, ms, dt);
            set_dims(&c->op, 2, d2, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.inputs[1], ks);
            name_axes(&c->op, &c->op.inputs[2], ks);
            name_axes(&c->op, &c->op.inputs[3], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        c = add(out, &n, "attention decode bshd causal [2,4,8,64] kv [2,k,8,64]", dt, "attention_decode");
        c->cpu_two_runs = true;
        {
            const dim_spec d1[1] = {{"k", 4, 2000, 1}};
            const unsigned ks[4] = {0, 1, 0, 0};
            c->op = ta_attention_of(dt, true, true, 2, 8, 8, 4, 1, 64, 0, NULL, dt);
            set_dims(&c->op, 1, d1, bump);
            name_axes(&c->op, &c->op.inputs[1], ks);
            name_axes(&c->op, &c->op.inputs[2], ks);
        }
        /* bshd_packed qkv [b,s,4+2*2,128], causal. */
        c = add(out, &n, "attention bshd_packed causal qkv [b,s,8,128]", dt, "attention_mma");
        c->cpu_two_runs = true;
        {
            const dim_spec d2[2] = {{"b", 1, 3, 1}, {"s", 1, 260, 1}};
            const unsigned qs[4] = {1, 2, 0, 0};
            ta_shape sh = {.dt = dt, .b = 1, .hq = 4, .hkv = 2, .s = 1, .skv = 1, .d = 128, .bshd = true,
                           .causal = true, .packed = true};
            c->op = ta_attention(&sh);
            set_dims(&c->op, 2, d2, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.output, qs);
        }
    }

    /* attention_wgmma (sm_90a only; f16 and bf16): its flattened tensor maps (named rows), the
     * batch dimension of a 4-d map (a named B alone), the grid's rules (exact with B or S fixed,
     * a bound with both named) and the sizes read at launch. */
    if (dt != TUNER_F32) {
        /* bhsd, GQA 4/2, B, S and Skv named apart, a mask [b,1,s,k]: every map flattened. */
        c = add(out, &n, "attention_wgmma bhsd [b,4,s,128] kv [b,2,k,128] mask[b,1,s,k]", dt, "attention_wgmma");
        c->cpu_two_runs = c->sm90a_only = c->default_only = true;
        {
            const dim_spec d3[3] = {{"b", 1, 3, 1}, {"k", 1, 300, 1}, {"s", 1, 200, 1}};
            const long long ms[4] = {1, 1, 1, 1};
            const unsigned qs[4] = {1, 0, 4, 0}, ks[4] = {1, 0, 2, 0}, mm[4] = {1, 0, 4, 2};
            c->op = ta_attention_of(dt, false, false, 1, 4, 2, 1, 1, 128, 4, ms, dt);
            set_dims(&c->op, 3, d3, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.inputs[1], ks);
            name_axes(&c->op, &c->op.inputs[2], ks);
            name_axes(&c->op, &c->op.inputs[3], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bshd self-attention, causal, B and S named: the grid bounded by Hq * B * S. */
        c = add(out, &n, "attention_wgmma bshd causal [b,s,4,64] self", dt, "attention_wgmma");
        c->cpu_two_runs = c->sm90a_only = c->no_compile = true;
        {
            const dim_spec d2[2] = {{"b", 1, 2, 1}, {"s", 1, 333, 1}};
            const unsigned qs[4] = {1, 2, 0, 0};
            c->op = ta_attention_of(dt, true, true, 1, 4, 4, 1, 1, 64, 0, NULL, dt);
            set_dims(&c->op, 2, d2, bump);
            for (int i = 0; i < 3; i++)
                name_axes(&c->op, &c->op.inputs[i], qs);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bshd_packed qkv [2,s,4+2*2,128], causal, a key mask [s]: B fixed, the grid exact. */
        c = add(out, &n, "attention_wgmma bshd_packed causal qkv [2,s,8,128] mask[s]", dt, "attention_wgmma");
        c->cpu_two_runs = c->sm90a_only = c->default_only = true;
        {
            const dim_spec d1[1] = {{"s", 1, 260, 1}};
            const unsigned qs[4] = {0, 1, 0, 0}, mm[1] = {1};
            ta_shape sh = {.dt = dt, .b = 2, .hq = 4, .hkv = 2, .s = 1, .skv = 1, .d = 128, .bshd = true,
                           .causal = true, .packed = true, .mask_rank = 1, .mask_shape = {1}, .mask_dt = dt};
            c->op = ta_attention(&sh);
            set_dims(&c->op, 1, d1, bump);
            name_axes(&c->op, &c->op.inputs[0], qs);
            name_axes(&c->op, &c->op.inputs[1], mm);
            name_axes(&c->op, &c->op.output, qs);
        }
        /* bhsd causal S < Skv fixed (200 against 300), a mask [200,300], B alone named: 4-d
         * maps whose batch dimension is the launch's. */
        c = add(out, &n, "attention_wgmma bhsd causal [b,4,200,64] kv [b,4,300,64] mask[200,300]", dt,
                "attention_wgmma");
        c->cpu_two_runs = c->sm90a_only = c->no_compile = true;
        {
            const dim_spec d1[1] = {{"b", 1, 5, 1}};
            const long long ms[2] = {200, 300};
            const unsigned qs[4] = {1, 0, 0, 0};
            c->op = ta_attention_of(dt, false, true, 1, 4, 4, 200, 300, 64, 2, ms, dt);
            set_dims(&c->op, 1, d1, bump);
            for (int i = 0; i < 3; i++)
                name_axes(&c->op, &c->op.inputs[i], qs);
            name_axes(&c->op, &c->op.output, qs);
        }
    }

    /* copy with names (a transpose moving one, BERT's head permute, a select along one, a slice
     * of a fixed axis of a named tensor): strides and offsets scale with the sizes at launch. */
    {
        const dim_spec d2[2] = {{"b", 1, 4, 1}, {"s", 1, 77, 1}};
        c = add(out, &n, "copy transpose [b,s,64] -> [s,b,64]", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[3] = {1, 1, 64}, o[3] = {1, 1, 64}, co[3] = {64, 64, 1};
            const unsigned xm[3] = {1, 2, 0}, om[3] = {2, 1, 0}, sm[3] = {0, 2, 0};
            c->op = copy_op(dt, 2, d2, bump, 3, x, xm, 3, o, om, co, sm, 0, 0);
        }
        c = add(out, &n, "copy heads [b,s,12,64] -> [b,12,s,64] relu", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[4] = {1, 1, 12, 64}, o[4] = {1, 12, 1, 64}, co[4] = {768, 64, 768, 1};
            const unsigned xm[4] = {1, 2, 0, 0}, om[4] = {1, 0, 2, 0}, sm[4] = {2, 0, 0, 0};
            c->op = copy_op(dt, 2, d2, bump, 4, x, xm, 4, o, om, co, sm, 0, 0);
            c->op.epilogue.steps[c->op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_RELU, .operand = -1};
        }
        c = add(out, &n, "copy select [b,s,96][:,0] -> [b,96]", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[3] = {1, 1, 96}, o[2] = {1, 96}, co[2] = {96, 1};
            const unsigned xm[3] = {1, 2, 0}, om[2] = {1, 0}, sm[2] = {2, 0};
            c->op = copy_op(dt, 2, d2, bump, 3, x, xm, 2, o, om, co, sm, 0, 0);
        }
        c = add(out, &n, "copy select [b,2,s,64][:,1] -> [b,s,64] (offset 64*s)", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[4] = {1, 2, 1, 64}, o[3] = {1, 1, 64}, co[3] = {128, 64, 1};
            const unsigned xm[4] = {1, 0, 2, 0}, om[3] = {1, 2, 0}, sm[3] = {2, 0, 0};
            c->op = copy_op(dt, 2, d2, bump, 4, x, xm, 3, o, om, co, sm, 64, 2);
        }
        c = add(out, &n, "copy slice [b,s,288][:,:,96:192] -> [b,s,96] +[s,96]", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[3] = {1, 1, 288}, o[3] = {1, 1, 96}, co[3] = {288, 288, 1}, pe[2] = {1, 96};
            const unsigned xm[3] = {1, 2, 0}, om[3] = {1, 2, 0}, sm[3] = {2, 0, 0}, pm[2] = {2, 0};
            c->op = copy_op(dt, 2, d2, bump, 3, x, xm, 3, o, om, co, sm, 96, 0);
            t_add_epilogue(&c->op, TUNER_EW_ADD, 2, pe, TUNER_EW_ABS);
            name_axes(&c->op, &c->op.inputs[1], pm);
        }
        /* a prefix of a fixed axis cut to a name (BERT's prepared position table [1, 512, 768]
         * cut to [1, s, 768]): the output names what x does not, the strides are x's own */
        const dim_spec d1[1] = {{"s", 1, 77, 1}};
        c = add(out, &n, "copy prefix [1,128,64][:, :s] -> [1,s,64]", dt, "copy");
        c->cpu_two_runs = true;
        {
            const long long x[3] = {1, 128, 64}, o[3] = {1, 1, 64}, co[3] = {8192, 64, 1};
            const unsigned xm[3] = {0, 0, 0}, om[3] = {0, 1, 0}, sm[3] = {0, 0, 0};
            c->op = copy_op(dt, 1, d1, bump, 3, x, xm, 3, o, om, co, sm, 0, 0);
        }
    }
    return n;
}

int t_dyn_unsupported(tuner_dtype dt, t_dyn_case *out)
{
    int n = 0;
    t_dyn_case *c;
    const dim_spec dn[1] = {{"n", 1, 4096, 1}};
    c = add(out, &n, "softmax [n] (a named row)", dt, NULL);
    {
        const long long x[1] = {1};
        c->op = t_softmax(dt, 1, 1, 16);
        c->op.inputs[0] = t_tensor(dt, 1, x, 16);
        c->op.output = t_tensor(dt, 1, x, 16);
        set_dims(&c->op, 1, dn, false);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
    }
    c = add(out, &n, "reduce sum [n,64] ax0 (over the name)", dt, NULL);
    {
        const long long x[2] = {1, 64};
        c->op = t_reduce(dt, 2, x, 0, TUNER_REDUCE_SUM, false, 16);
        set_dims(&c->op, 1, dn, false);
        name0(&c->op, &c->op.inputs[0], 1);
    }
    c = add(out, &n, "elementwise [n,n] (a name on two axes)", dt, NULL);
    {
        const dim_spec d64[1] = {{"n", 1, 64, 1}};
        const long long x[2] = {1, 1};
        const unsigned nn[2] = {1, 1};
        c->op = ew_op(dt, 2, x);
        set_dims(&c->op, 1, d64, false);
        name_axes(&c->op, &c->op.inputs[0], nn);
        name_axes(&c->op, &c->op.output, nn);
    }
    c = add(out, &n, "elementwise [n,64] +[4,64] (a fixed size against a name)", dt, NULL);
    {
        const long long x[2] = {1, 64}, y[2] = {4, 64};
        c->op = ew_op(dt, 2, x);
        set_dims(&c->op, 1, dn, false);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        t_add_epilogue(&c->op, TUNER_EW_ADD, 2, y, TUNER_EW_ABS);
    }
    c = add(out, &n, "softmax [4,n,64] over a named axis 1 is fine; [4,64,n] is not", dt, NULL);
    {
        const long long x[3] = {4, 64, 1};
        const unsigned xs[3] = {0, 0, 1};
        c->op = t_softmax(dt, 1, 1, 16);
        c->op.inputs[0] = t_tensor(dt, 3, x, 16);
        c->op.output = t_tensor(dt, 3, x, 16);
        set_dims(&c->op, 1, dn, false);
        name_axes(&c->op, &c->op.inputs[0], xs);
        name_axes(&c->op, &c->op.output, xs);
    }
    c = add(out, &n, "reduce sum [4,64,n] ax1 (a name after the reduced axis)", dt, NULL);
    {
        const long long x[3] = {4, 64, 1};
        const unsigned xs[3] = {0, 0, 1};
        c->op = t_reduce(dt, 3, x, 1, TUNER_REDUCE_SUM, false, 16);
        set_dims(&c->op, 1, dn, false);
        name_axes(&c->op, &c->op.inputs[0], xs);
        const unsigned os[2] = {0, 1};
        name_axes(&c->op, &c->op.output, os);
    }
    c = add(out, &n, "layernorm [n,768] gamma[n] (a named parameter)", dt, NULL);
    {
        c->op = t_layernorm(dt, 1, 768, 16, true);
        set_dims(&c->op, 1, dn, false);
        name0(&c->op, &c->op.inputs[0], 1);
        name0(&c->op, &c->op.output, 1);
        c->op.inputs[1].sym[0] = 1; /* gamma is indexed by column: it cannot be named */
    }
    if (dt != TUNER_F32) {
        /* attention's heads and head dim stay fixed: no template (attention_wgmma on sm_90a
         * included) takes a named head count (proto/dims.c refuses it in a request first). */
        c = add(out, &n, "attention bhsd [2,h,s,64] (a named head count)", dt, NULL);
        const dim_spec d2[2] = {{"h", 1, 8, 1}, {"s", 1, 128, 1}};
        const unsigned qs[4] = {0, 1, 2, 0};
        c->op = ta_attention_of(dt, false, false, 2, 1, 1, 1, 1, 64, 0, NULL, dt);
        set_dims(&c->op, 2, d2, false);
        for (int i = 0; i < 3; i++)
            name_axes(&c->op, &c->op.inputs[i], qs);
        name_axes(&c->op, &c->op.output, qs);
    }
    c = add(out, &n, "softmax [4,768] (a dim no axis names)", dt, NULL);
    c->op = t_softmax(dt, 4, 768, 16);
    set_dims(&c->op, 1, dn, false);
    return n;
}

void t_dyn_sizes(const tuner_op *op, int which, int64_t *sizes)
{
    for (int k = 0; k < op->n_dims && k < TUNER_MAX_DIMS; k++) {
        const tuner_dim *d = &op->dims[k];
        int64_t v = which == 0 ? d->min : which == 2 ? d->max : (d->min + d->max) / 2;
        if (which == 1) {
            if (d->multiple_of > 1) { /* an odd multiple where there is one */
                v = v / d->multiple_of * d->multiple_of;
                if ((v / d->multiple_of) % 2 == 0 && v + d->multiple_of <= d->max)
                    v += d->multiple_of;
            }
            else if (v % 2 == 0 && v + 1 <= d->max)
                v++;
            else if (v % 2 == 0 && v - 1 >= d->min)
                v--;
            if (v < d->min)
                v = d->min;
        }
        sizes[k] = v;
    }
}
