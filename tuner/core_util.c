/* tuner/core_util.c - helpers shared by the core templates (see tuner/core.h). */
#include "tuner/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long tuner__pow2ceil(long v)
{
    long p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

void tuner__emit_tiles_begin(tuner_sb *sb, const tuner_op *op, int sm, const char *name, int block, int ipt,
                             bool grid_stride, long long tiles, long long n, tuner_mapping *ret_m)
{
    tuner__prelude(sb, sm);
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, name);
    tuner__emit_params(sb, op, op->output.dtype);
    tuner_sb_puts(sb, ")\n{\n");
    if (grid_stride)
        tuner_sb_printf(sb, "for (long long tile = blockIdx.x; tile < %lldLL; tile += gridDim.x) {\n", tiles);
    else
        tuner_sb_puts(sb, "{ const long long tile = blockIdx.x;\n");
    *ret_m = tuner_map_compose(tuner_map_repeat(1, ipt, 1, 1), tuner_map_spatial(1, block, 1, 1));
    const char *names[3] = {"k", NULL, NULL};
    tuner_map_emit_begin(sb, ret_m, "threadIdx.x", "tm", names);
    tuner_sb_printf(sb, "const long long vi = tile * %lldLL + k;\n", (long long)block * ipt);
    tuner_sb_printf(sb, "if (vi < %lldLL) {\n", n);
}

void tuner__emit_tiles_begin_dyn(tuner_sb *sb, const tuner_op *op, int sm, const char *name, int block, int ipt,
                                 bool grid_stride, const char *n_expr, tuner_mapping *ret_m)
{
    const long long per = (long long)block * ipt;
    tuner__prelude(sb, sm);
    tuner_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, name);
    tuner__emit_params(sb, op, op->output.dtype);
    tuner__emit_dim_params(sb, op);
    tuner_sb_puts(sb, ")\n{\n");
    tuner_sb_printf(sb, "const long long hd_n = %s;\n", n_expr);
    if (grid_stride)
        tuner_sb_printf(sb, "const long long hd_tiles = (hd_n + %lldLL) / %lldLL;\n"
                            "for (long long tile = blockIdx.x; tile < hd_tiles; tile += gridDim.x) {\n",
                        per - 1, per);
    else
        tuner_sb_puts(sb, "{ const long long tile = blockIdx.x;\n");
    *ret_m = tuner_map_compose(tuner_map_repeat(1, ipt, 1, 1), tuner_map_spatial(1, block, 1, 1));
    const char *names[3] = {"k", NULL, NULL};
    tuner_map_emit_begin(sb, ret_m, "threadIdx.x", "tm", names);
    tuner_sb_printf(sb, "const long long vi = tile * %lldLL + k;\n", per);
    tuner_sb_puts(sb, "if (vi < hd_n) {\n");
}

unsigned tuner__sym_mask(const tuner_tensor *t)
{
    unsigned m = 0;
    for (int d = 0; d < t->rank && d < TUNER_MAX_RANK; d++)
        m |= t->sym[d];
    return m;
}

bool tuner__names_line_up(const tuner_tensor *in, const tuner_tensor *like)
{
    if (in->rank > like->rank)
        return false;
    for (int d = 0; d < in->rank; d++) {
        const int ld = like->rank - in->rank + d;
        if (in->sym[d] != like->sym[ld] && (in->sym[d] || in->shape[d] != 1))
            return false;
    }
    return true;
}

/* Whether no dim is named on two axes of t (its axes' products are then sets of dims). */
static bool names_once(const tuner_tensor *t)
{
    unsigned seen = 0;
    for (int d = 0; d < t->rank && d < TUNER_MAX_RANK; d++) {
        if (seen & t->sym[d])
            return false;
        seen |= t->sym[d];
    }
    return true;
}

bool tuner__dyn_supported(const tuner_op *op)
{
    if (!tuner_op_is_dynamic(op))
        return true;
    /* The buffers, a workspace and the dims' sizes must fit a launch's arguments. */
    if (op->n_inputs + 2 + op->n_dims > TUNER_MAX_ARGS)
        return false;
    const tuner_tensor *out = &op->output, *x = &op->inputs[0];
    for (int i = -1; i < op->n_inputs; i++) {
        const tuner_tensor *t = i < 0 ? out : &op->inputs[i];
        if (t->rank < 1 || !names_once(t))
            return false;
        if (i <= 0)
            continue;
        if (!tuner__names_line_up(t, out) && !tuner__names_line_up(t, x))
            return false;
    }
    return true;
}

char *tuner__scaled_dims_expr(long long coef, unsigned mask, char *buf, size_t len)
{
    if (!len)
        return buf;
    int w = snprintf(buf, len, mask ? "(%lldLL * (" : "%lldLL", coef);
    if (!mask || w < 0 || (size_t)w >= len)
        return buf;
    size_t at = (size_t)w;
    for (int k = 0; k < TUNER_MAX_DIMS; k++) {
        if (!(mask & (1u << k)))
            continue;
        w = snprintf(buf + at, len - at, "%shd_dim%d", buf[at - 1] == '(' ? "" : " * ", k);
        if (w < 0 || (size_t)w >= len - at)
            return buf;
        at += (size_t)w;
    }
    snprintf(buf + at, len - at, "))");
    return buf;
}

void tuner__emit_tiles_end(tuner_sb *sb, const tuner_mapping *m)
{
    tuner_sb_puts(sb, "}\n");
    tuner_map_emit_end(sb, m);
    tuner_sb_puts(sb, "}\n}\n");
}

bool tuner__no_prologue(const tuner_op *op)
{
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        if (op->prologue[i].n != 0)
            return false;
    return true;
}

tuner__conv_geo tuner__conv_geo_of(const tuner_op *op)
{
    const tuner_tensor *x = &op->inputs[0], *w = &op->inputs[1], *o = &op->output;
    tuner__conv_geo g = {
        .N = x->shape[0], .H = x->shape[1], .W = x->shape[2], .C = x->shape[3],
        .K = w->shape[0], .R = w->shape[1], .S = w->shape[2],
        .P = o->shape[1], .Q = o->shape[2],
        .sh = op->attrs.conv2d.stride[0], .sw = op->attrs.conv2d.stride[1],
        .ph = op->attrs.conv2d.pad[0], .pw = op->attrs.conv2d.pad[1],
        .dh = op->attrs.conv2d.dilation[0], .dw = op->attrs.conv2d.dilation[1],
    };
    g.groups = op->attrs.conv2d.groups > 0 ? op->attrs.conv2d.groups : 1;
    g.cpg = (int)(g.C / g.groups);
    g.kpg = (int)(g.K / g.groups);
    g.osz = tuner_dtype_size(o->dtype);
    g.oalign = o->align;
    return g;
}

bool tuner__prologue_input0_only(const tuner_op *op)
{
    for (int i = 1; i < TUNER_MAX_INPUTS; i++)
        if (op->prologue[i].n != 0)
            return false;
    return true;
}

/* `in<input>[offset]`: operand `input` broadcast to `against`, at its element (row, col). */
static char *operand_load(const tuner_op *op, int input, const tuner_tensor *against, const char *row,
                          const char *col)
{
    char *off = tuner__bcast_offset(&op->inputs[input], against, row, col);
    if (!off)
        return NULL;
    size_t len = strlen(off) + 32;
    char *e = malloc(len);
    if (e)
        snprintf(e, len, "in%d[%s]", input, off);
    free(off);
    return e;
}

/* Operand loads of input 0's prologue: element (hd_prow, hd_pcol) of input 0. */
static char *input0_operand_load(void *ctx, int input)
{
    const tuner_op *op = ctx;
    return operand_load(op, input, &op->inputs[0], "hd_prow", "hd_pcol");
}

void tuner__emit_input0_prologue(tuner_sb *sb, const tuner_op *op)
{
    if (op->prologue[0].n == 0)
        return;
    const tuner_tensor *x = &op->inputs[0];
    /* x's last axis is fixed in every template that fuses a prologue (a named x has rank >= 2). */
    const long long last = x->rank >= 1 ? x->shape[x->rank - 1] : 1;
    tuner_sb_printf(sb, "auto hd_pro0 = [&](float v, long long idx) -> float {\n"
                        "const long long hd_prow = idx / %lldLL, hd_pcol = idx %% %lldLL;\n"
                        "(void)hd_prow;\n(void)hd_pcol;\n",
                    last, last);
    tuner__emit_chain(sb, op, &op->prologue[0], "v", input0_operand_load, (void *)op);
    tuner_sb_puts(sb, "return v;\n};\n");
}

bool tuner__bcast_last_contiguous(const tuner_tensor *in, const tuner_tensor *out)
{
    if (in->rank < 1 || out->rank < 1)
        return false;
    return in->shape[in->rank - 1] == out->shape[out->rank - 1] && out->shape[out->rank - 1] > 1;
}

char *tuner__bcast_offset(const tuner_tensor *in, const tuner_tensor *out, const char *row, const char *col)
{
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner_sb_puts(&sb, "(0LL");
    const int ro = out->rank, ri = in->rank;
    /* Strides of `in` (dense row-major): istride[d] * (the sizes of the dims in imask[d]). A
     * tensor names a dim on one axis at most (tuner__dyn_supported), so a product of its axes is
     * a set of dims. A static tensor's masks are 0: its strides print as the constants they are. */
    long long istride[TUNER_MAX_RANK];
    unsigned imask[TUNER_MAX_RANK];
    long long s = 1;
    unsigned sm = 0;
    for (int d = ri - 1; d >= 0; d--) {
        istride[d] = s;
        imask[d] = sm;
        if (in->sym[d])
            sm |= in->sym[d];
        else
            s *= in->shape[d];
    }
    /* Leading dims of out: coordinate d of out = (row / P_d) % S_d, P_d = product of out's dims
     * between d and the last (exclusive); a named size is read from its hd_dim parameters. */
    long long p = 1;
    unsigned pm = 0;
    char pe[96], se[96], te[96];
    for (int d = ro - 2; d >= 0; d--) {
        int di = d - (ro - ri); /* matching dim of in, right-aligned */
        if (di >= 0 && in->shape[di] != 1) {
            tuner__scaled_dims_expr(p, pm, pe, sizeof(pe));
            tuner__scaled_dims_expr(istride[di], imask[di], te, sizeof(te));
            if (d == 0)
                tuner_sb_printf(&sb, " + (long long)((%s) / %s) * %s", row, pe, te);
            else
                tuner_sb_printf(&sb, " + (long long)(((%s) / %s) %% %s) * %s", row, pe,
                                tuner__axis_expr(out, d, se, sizeof(se)), te);
        }
        if (out->sym[d])
            pm |= out->sym[d];
        else
            p *= out->shape[d];
    }
    if (ro >= 1 && ri >= 1 && in->shape[ri - 1] != 1)
        tuner_sb_printf(&sb, " + (long long)(%s)", col);
    tuner_sb_puts(&sb, ")");
    return tuner_sb_take(&sb);
}

char *tuner__bcast_load(void *bcast_ctx, int input)
{
    const tuner__bcast_ctx *c = bcast_ctx;
    return operand_load(c->op, input, &c->op->output, c->row, c->col);
}

double tuner__mem_cost_us(const tuner_arch *a, double bytes, double blocks, int threads, double inflight_bytes,
                          int regs, int smem, double eff, double instr)
{
    const double launch_us = 3.0;
    if (blocks < 1)
        blocks = 1;
    int bps = a->max_threads_per_sm / threads;
    if (bps > 32)
        bps = 32;
    int by_regs = a->regs_per_sm / (threads * (regs < 16 ? 16 : regs));
    if (by_regs < bps)
        bps = by_regs;
    if (smem > 0 && a->max_smem_per_sm / smem < bps)
        bps = a->max_smem_per_sm / smem;
    if (bps < 1)
        bps = 1;
    double slots = (double)bps * a->sm_count;
    double waves = ceil(blocks / slots);
    /* Little's law: the DRAM system needs about bandwidth x ~0.7 us of loads in flight; fewer
     * resident loads (too few threads, too little in flight per thread) cap the bandwidth. */
    double resident = fmin(blocks, slots) * threads;
    double need = a->dram_gbps * 1e3 * 0.7;
    double lat = fmin(1.0, resident * inflight_bytes / need);
    if (lat < 0.02)
        lat = 0.02;
    double t = bytes / (a->dram_gbps * 1e3) / (eff * lat);
    /* Issue: 4 schedulers x 32 lanes at ~1.7 GHz per SM, on the SMs that have blocks, slowed
     * when an SM has fewer than ~8 warps to hide dependent-instruction latency. */
    double used_sms = fmin((double)a->sm_count, blocks);
    double warps_per_sm = fmin((double)bps, ceil(blocks / used_sms)) * threads / 32.0;
    double rate = used_sms * 4.0 * 32.0 * 1.7e3 * fmin(1.0, warps_per_sm / 8.0); /* thread-instr per us */
    double tc = instr > 0 ? instr / rate : 0.0;
    if (tc > t)
        t = tc;
    /* The last wave runs partially empty: add the fraction of a wave it wastes, scaled. */
    double per_wave = t / waves;
    double tail = (waves - blocks / slots) * per_wave * 0.5;
    return launch_us + t + tail;
}

double tuner__chain_instr(const tuner_ew_chain *chain)
{
    double n = 0;
    for (int i = 0; chain && i < chain->n && i < TUNER_MAX_STEPS; i++) {
        switch (chain->steps[i].kind) {
        case TUNER_EW_EXP:
        case TUNER_EW_SIGMOID:
        case TUNER_EW_SILU:
            n += 20;
            break;
        case TUNER_EW_TANH:
        case TUNER_EW_GELU_TANH:
            n += 25;
            break;
        case TUNER_EW_GELU_ERF:
        case TUNER_EW_ERF:
            n += 30;
            break;
        case TUNER_EW_POW:
            n += 25; /* log2, exp2 and the sign tests when no short form applies */
            break;
        case TUNER_EW_DIV:
            n += 10;
            break;
        case TUNER_EW_LOG:
            n += 20;
            break;
        case TUNER_EW_WHERE:
            n += 12; /* two loads and a select */
            break;
        default:
            n += tuner_ew_operands(&chain->steps[i], (int[2]){0}) > 0 ? 6 : 2; /* an operand: address math + load */
            break;
        }
    }
    return n;
}

void tuner__emit_params(tuner_sb *sb, const tuner_op *op, tuner_dtype out_dtype)
{
    for (int i = 0; i < op->n_inputs; i++)
        tuner_sb_printf(sb, "const %s *__restrict__ in%d, ", tuner__value_ctype(op->inputs[i].dtype), i);
    tuner_sb_printf(sb, "%s *__restrict__ out", tuner__value_ctype(out_dtype));
}

void tuner__launch_args(tuner_launch *l, const tuner_op *op)
{
    l->n_args = 0;
    for (int i = 0; i < op->n_inputs; i++)
        l->args[l->n_args++] = TUNER_BUF_INPUT0 + i;
    l->args[l->n_args++] = TUNER_BUF_OUTPUT;
}

unsigned tuner__dynamic_shared(unsigned dynamic_bytes, unsigned static_bytes)
{
    const unsigned limit = 48 * 1024;
    if (dynamic_bytes > limit || dynamic_bytes + static_bytes <= limit)
        return dynamic_bytes;
    return limit + 16;
}

void tuner__one_launch(tuner_program *p, const tuner_op *op, const char *name, unsigned blocks,
                       unsigned threads)
{
    tuner_launch *l = &p->kernels[0];
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->grid[0] = blocks;
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = threads;
    l->block[1] = l->block[2] = 1;
    l->shared_bytes = 0;
    tuner__launch_args(l, op);
    p->n_kernels = 1;
}
