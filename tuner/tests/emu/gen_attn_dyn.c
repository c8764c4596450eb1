/* tuner/tests/emu/gen_attn_dyn.c - one attention_mma candidate of a dynamic op (named B and S =
 * Skv, issue 39) for emu_mma.cpp with emu_attn.h, with inputs at a few sizes of its dims, and the
 * check of what the emulation computed against attention in double, the poisoned margin past the
 * output untouched (a developer check without a GPU; emulate_attn_dyn.sh drives both; the
 * command line and the files: emu_dyn.h).
 * CASE (sm_80): BERT-like self-attention bhsd [b,2,s,64] with an additive key mask [b,1,1,s], b in
 * 1..2: 0 f16, s in 17..20 (one key tile whatever block_n: the count and Skv's max compiled in,
 * tuner/attn/mma.c fixed_nt); 1 bf16, s in 65..80 (one 128-key tile, three of 32); 2 f16, s in
 * 1..150 (counts at launch); 3 f16 causal self-attention without a mask, s in 1..150 (the key
 * count per query block at launch); 4 the same with b in 1..40 and s in 1..130 (with sm_90a's
 * 132 blocks, 80-240 causal items at the max: rounds dealt in a snake, a partial last one
 * backwards, tuner/attn/wgmma.c aw_loop); 5 and 6 as 2 and 3 with head dim 256 (attention_wgmma's
 * tiles in one K and one V slot, stages 1, which two stages of the same tile beside Q would not
 * fit: offered from 96 keys there). Head dim 64 otherwise. Size sets: every dim at its min, odd
 * sizes, the max, and b's max with s one past a multiple of 64 (clamped to the range). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/tests/ops.h"
#include "tuner/tests/common.h"
#include "tuner/tests/emu/emu_dyn.h"
#include "tuner/tests/host_values.h"

#define HEADS 2

static tuner_op case_op(int c)
{
    static const long long lo[7] = {17, 65, 1, 1, 1, 1, 1}, hi[7] = {20, 80, 150, 150, 130, 150, 150},
                           bmax[7] = {2, 2, 2, 2, 40, 2, 2};
    const tuner_dtype dt = c == 1 ? TUNER_BF16 : TUNER_F16;
    const bool causal = c == 3 || c == 4 || c == 6;
    const long long ms[4] = {bmax[c], 1, 1, hi[c]}, d = c >= 5 ? 256 : 64;
    tuner_op op = ta_attention_of(dt, false, causal, bmax[c], HEADS, HEADS, hi[c], hi[c], d, causal ? 0 : 4, ms, dt);
    /* dims sorted by name: b (bit 0), s (bit 1) */
    op.n_dims = 2;
    snprintf(op.dims[0].name, sizeof(op.dims[0].name), "b");
    op.dims[0].min = 1, op.dims[0].max = bmax[c], op.dims[0].multiple_of = 1;
    snprintf(op.dims[1].name, sizeof(op.dims[1].name), "s");
    op.dims[1].min = lo[c], op.dims[1].max = hi[c], op.dims[1].multiple_of = 1;
    for (int i = 0; i < 3; i++) {
        op.inputs[i].sym[0] = 1;
        op.inputs[i].sym[2] = 2;
    }
    op.output.sym[0] = 1;
    op.output.sym[2] = 2;
    if (!causal) {
        op.inputs[3].sym[0] = 1;
        op.inputs[3].sym[3] = 2;
    }
    return op;
}

static void set_sizes(const tuner_op *op, int j, int64_t *sz)
{
    for (int k = 0; k < TUNER_MAX_DIMS; k++)
        sz[k] = 1;
    for (int k = 0; k < op->n_dims; k++) {
        const tuner_dim *d = &op->dims[k];
        long long v = j == 0 ? d->min : j == 2 ? d->max : j == 3 ? (k == 0 ? d->max : (d->max - 1) / 64 * 64 + 1)
                                                               : (d->min + (d->max - d->min) * 3 / 5) | 1;
        sz[k] = v < d->min ? d->min : v > d->max ? d->max : v;
    }
}

static int check_set(const char *dir, const tuner_op *op, const int64_t *sz)
{
    const bool mask = op->n_inputs > 3, causal = op->attrs.attention.causal;
    const long long B = sz[0], S = sz[1], D = op->inputs[0].shape[3];
    const tuner_dtype dt = op->output.dtype;
    emu_set set;
    if (!emu_set_load(dir, op, (size_t)(B * HEADS * S * D * tuner_dtype_size(dt)), &set))
        return 1;
    void *const *in = set.in;
    const unsigned char *out = set.out;
    const double scale = op->attrs.attention.scale;
    long bad = 0;
    double maxerr = 0;
    double *p = malloc((size_t)S * sizeof(*p));
    for (long long b = 0; b < B; b++)
        for (long long h = 0; h < HEADS; h++)
            for (long long i = 0; i < S; i++) {
                const size_t qrow = (size_t)(((b * HEADS + h) * S + i) * D);
                double mx = -INFINITY, sum = 0;
                /* causal, S = Skv: key j <= i */
                const long long nk = causal ? i + 1 : S;
                for (long long j = 0; j < nk; j++) {
                    const size_t krow = (size_t)(((b * HEADS + h) * S + j) * D);
                    double dot = 0;
                    for (long long e = 0; e < D; e++)
                        dot += (double)t_host_get(dt, in[0], qrow + (size_t)e) * t_host_get(dt, in[1], krow + (size_t)e);
                    p[j] = dot * scale + (mask ? t_host_get(dt, in[3], (size_t)(b * S + j)) : 0.0);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (long long j = 0; j < nk; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (long long e = 0; e < D; e++) {
                    double acc = 0;
                    for (long long j = 0; j < nk; j++)
                        acc += p[j] / sum * t_host_get(dt, in[2], (size_t)(((b * HEADS + h) * S + j) * D + e));
                    const double got = t_host_get(dt, out, qrow + (size_t)e);
                    const double err = fabs(got - acc) / (1.0 + fabs(acc));
                    if (!(err <= (dt == TUNER_BF16 ? 2e-2 : 4e-3))) {
                        if (bad < 5)
                            fprintf(stderr, "b %lld h %lld i %lld e %lld: got %g want %g\n", b, h, i, e, got, acc);
                        bad++;
                    }
                    if (err > maxerr || err != err)
                        maxerr = err;
                }
            }
    free(p);
    char what[64];
    snprintf(what, sizeof(what), "[b %lld s %lld]", B, S);
    return emu_set_verdict(&set, op, what, bad, B * HEADS * S * D, maxerr);
}

/* q, k, v: small integers / 16 (exact in f16 and bf16); the mask (input 3): 0 or -2..-0.5. */
static float input_value(int input)
{
    if (input < 3)
        return (float)t_rnd_int(-16, 16) / 16.0f;
    return (float)(t_rnd_int(0, 1) ? 0 : -t_rnd_int(2, 8)) / 4.0f;
}

int main(int argc, char **argv)
{
    /* sm_80 unless EMU_SM says (90a with EMU_TEMPLATE=attention_wgmma: emulate_attn_wgmma.sh) */
    const char *sm = getenv("EMU_SM");
    const emu_dyn_gen g = {case_op, set_sizes, check_set, input_value, "// ---- end of tuner/attn/mma helpers ----",
                           {.sm = sm ? atoi(sm) : 80, .arch_specific = sm && strchr(sm, 'a')}, getenv("EMU_TEMPLATE")};
    return emu_dyn_main(argc, argv, &g);
}
