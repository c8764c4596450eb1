/* tuner/attn/tests/test_attn_decode.c - the attention_decode template (tuner/attn/decode.c):
 * where it applies, its spaces, its default, its programs' launches and workspace, and NVRTC +
 * ptxas compiles of sampled candidates for sm_80 and sm_90a over the shapes of decoding: S = 1,
 * 5 and 16 against Skv 4096, 32768, 1000 (no multiple of a tile) and 1; GQA 32/8, MHA 16/16,
 * MQA 8/1; every head dim; f16 and bf16; both layouts; causal; an [Skv] f32 and a [B,1,S,Skv]
 * f16 mask; an epilogue; two dynamic ops (B and Skv named, Skv alone). Ops are built by hand as
 * the validator would leave them (output: q's shape). Per case and target the default
 * (tune:"none") and, by HIDET_TEST_SAMPLE, two more candidates are compiled; every candidate of
 * every space is generated and its launches checked (one kernel, or two for `fused` 0; a
 * workspace except for split 1 in one kernel).
 * The decode rows (B 1/16/64 x Skv 4K/32K, 32/8 heads, hd 128) print the model's pick and
 * the next four; their defaults must be the model's first over the whole space, one launch, not
 * the starved two-slot ring; the combine kernel must rank first only where a group's partials
 * are large (an MQA step's 64-row groups split 64 ways).
 */
#include "tuner/tests/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/attn/attn.h"
#include "tuner/attn/tests/ops.h"
#include "tuner/core.h"
#include "tuner/space.h"
#include "tuner/template.h"

enum { MASK_NONE, MASK_KEYS_F32, MASK_B1SK_F16 };

typedef struct shape {
    long long b, hq, hkv, s, skv, d;
    tuner_dtype dt;
    bool bshd, causal;
    int mask;
    bool epilogue;
    bool packed; /* layout bshd_packed: one qkv [B,S,Hq+2Hkv,D] (Skv = S), the mask inputs[1] */
} shape;

static tuner_op attn_op(const shape *sh)
{
    ta_shape ts = {.dt = sh->dt, .b = sh->b, .hq = sh->hq, .hkv = sh->hkv, .s = sh->s, .skv = sh->skv, .d = sh->d,
                   .bshd = sh->bshd, .causal = sh->causal, .packed = sh->packed};
    if (sh->mask == MASK_KEYS_F32) {
        ts.mask_rank = 1;
        ts.mask_shape[0] = sh->skv;
        ts.mask_dt = TUNER_F32;
    } else if (sh->mask == MASK_B1SK_F16) {
        ts.mask_rank = 4;
        memcpy(ts.mask_shape, (long long[4]){sh->b, 1, sh->s, sh->skv}, sizeof(ts.mask_shape));
        ts.mask_dt = TUNER_F16;
    }
    tuner_op op = ta_attention(&ts);
    if (sh->epilogue) {
        /* + a bias over the head dim, then silu. */
        long long bias[1] = {sh->d};
        t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_SILU);
    }
    return op;
}

/* One kernel (fused 1: hd_attn_decode, a workspace only from split 2, for the partials and a
 * counter per (batch, kv head) group) or two (fused 0: the partials, then the combine, a block
 * per query row), with the grid (chunk, kv head, batch). */
static bool launch_sane(const tuner_program *p, const tuner_op *op, const tuner_schedule *s)
{
    const tuner_attention_dims d = tuner_attention_dims_of(op);
    const int split = tuner_schedule_param(s, "split", -1), block = tuner_schedule_param(s, "block", -1);
    const int fused = tuner_schedule_param(s, "fused", -1);
    if (fused != 0 && fused != 1)
        return false;
    if (fused ? p->n_kernels != 1 || strcmp(p->kernels[0].name, "hd_attn_decode")
              : p->n_kernels != 2 || split < 2 || strcmp(p->kernels[0].name, "hd_attn_decode_part") ||
                    strcmp(p->kernels[1].name, "hd_attn_decode_combine"))
        return false;
    const tuner_launch *k1 = &p->kernels[0];
    if ((long long)k1->grid[0] != split || (long long)k1->grid[1] != d.hkv || (long long)k1->grid[2] != d.b ||
        (int)k1->block[0] != block || k1->shared_bytes == 0)
        return false;
    if (!fused && ((long long)p->kernels[1].grid[0] != d.b * d.hq * d.s || p->kernels[1].block[0] != 128))
        return false;
    const bool ws = !(fused && split == 1);
    for (int k = 0; k < p->n_kernels; k++) {
        const tuner_launch *l = &p->kernels[k];
        /* inputs, output, the workspace when there is one, then a dynamic op's sizes */
        const int nd = op->n_dims;
        if (l->n_args != op->n_inputs + 1 + ws + nd || l->args[op->n_inputs] != TUNER_BUF_OUTPUT ||
            (ws && l->args[op->n_inputs + 1] != TUNER_BUF_WORKSPACE))
            return false;
        for (int x = 0; x < nd; x++)
            if (l->args[op->n_inputs + 1 + ws + x] != TUNER_ARG_DIM0 + x)
                return false;
    }
    if (!ws)
        return p->workspace_bytes == 0;
    /* At least (m, l) and O[D] per query row and chunk, and a counter per group when fused. */
    return p->workspace_bytes >=
           (size_t)(d.b * d.hq * d.s * split * (d.d + 2)) * sizeof(float) + (fused ? (size_t)(d.b * d.hkv) * 8 : 0);
}

/* attn_op of sh as a dynamic op: B named "b" (when nb) and Skv "k" on q, k, v, a [Skv] mask
 * and the output, sized at the dims' max (gpu_attn_decode runs the same ops). */
static tuner_op dyn_op(const shape *sh, bool nb)
{
    tuner_op op = attn_op(sh);
    int n = 0;
    const unsigned bb = nb ? 1u : 0u, kb = nb ? 2u : 1u;
    if (nb) {
        snprintf(op.dims[n].name, sizeof(op.dims[n].name), "b");
        op.dims[n].min = 1, op.dims[n].max = sh->b, op.dims[n].multiple_of = 1;
        n++;
    }
    snprintf(op.dims[n].name, sizeof(op.dims[n].name), "k");
    op.dims[n].min = 1, op.dims[n].max = sh->skv, op.dims[n].multiple_of = 1;
    op.n_dims = ++n;
    const int seq = sh->bshd ? 1 : 2;
    op.inputs[0].sym[0] = op.output.sym[0] = (uint8_t)bb;
    for (int i = 1; i <= 2; i++) {
        op.inputs[i].sym[0] = (uint8_t)bb;
        op.inputs[i].sym[seq] = (uint8_t)kb;
    }
    if (sh->mask == MASK_KEYS_F32)
        op.inputs[3].sym[0] = (uint8_t)kb;
    return op;
}

static size_t n_cases;

/* Builds the space of op on t, checks it holds only valid attention_decode schedules (when the
 * template is the only attention template registered, all of it), the default is one of them,
 * every candidate generates, and compiles the default and a sample. Returns the number of
 * attention_decode schedules. */
static size_t run_case(const char *name, const tuner_op *op, const tuner_target *t)
{
    char tn[16], what[320];
    tuner_target_name(t, tn, sizeof(tn));
    n_cases++;
    CHECK(tuner__attn_decode.applies(op, t), "%s %s: attention_decode does not apply", name, tn);
    tuner_space *sp = NULL;
    char *err = NULL;
    const int r = tuner_space_build(op, t, &sp, &err);
    CHECK(r == 0, "%s %s: space: %s", name, tn, err ? err : "?");
    free(err);
    if (r < 0)
        return 0;
    size_t nd = 0, first = sp->n;
    for (size_t i = 0; i < sp->n; i++)
        if (!strcmp(sp->items[i].template_name, "attention_decode")) {
            nd++;
            if (first == sp->n)
                first = i;
        }
    CHECK(nd > 0, "%s %s: no attention_decode candidate", name, tn);
    const size_t def = tuner_default_index(op, t, sp);
    CHECK(def < sp->n && !strcmp(sp->items[def].template_name, "attention_decode"),
          "%s %s: the default is not attention_decode", name, tn);
    char *dj = def < sp->n ? tuner_schedule_json(&sp->items[def]) : NULL;
    printf("%-52s %-6s space %3zu (decode %3zu)  default %s  %.1f us\n", name, tn, sp->n, nd, dj ? dj : "?",
           def < sp->n ? tuner_predict_us(op, t, &sp->items[def]) : 0.0);
    free(dj);
    /* Every candidate generates a sane program; the default and two evenly spaced others (by
     * the sample) compile. */
    size_t picks[3] = {def, first + nd / 3, first + (2 * nd) / 3};
    size_t others = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const tuner_schedule *s = &sp->items[i];
        if (strcmp(s->template_name, "attention_decode"))
            continue;
        const double us = tuner_predict_us(op, t, s);
        CHECK(us > 0 && us < 1e11, "%s %s candidate %zu: prediction %g", name, tn, i, us);
        tuner_program *p = NULL;
        err = NULL;
        char *sj = tuner_schedule_json(s);
        snprintf(what, sizeof(what), "%s %s %s", name, tn, sj ? sj : "?");
        free(sj);
        const int g = tuner_generate(op, t, s, &p, &err);
        CHECK(g == 0 && p, "%s: generate: %s", what, err ? err : "?");
        free(err);
        if (g < 0 || !p)
            continue;
        CHECK(launch_sane(p, op, s), "%s: launches", what);
        CHECK(p->output_dtype == op->output.dtype, "%s: output dtype", what);
        /* A sampling run (the normal build samples 1 in 2, the sanitizer build 1 in 16) compiles
         * the default of one case in 2S and no others: 40 cases of two-kernel programs are the
         * tuner's longest compiles (about 2 s each with ptxas). */
        bool compile = false;
        if (i == picks[0])
            compile = !t_sampling() || ((size_t)n_cases - 1) % (2 * (size_t)t_sub.every) == (size_t)t_sub.rest;
        else if ((i == picks[1] || i == picks[2]) && !t_sampling())
            compile = true;
        (void)others;
        if (compile)
            CHECK(t_compile_check(what, p->source, t, p, NULL), "%s: compile", what);
        tuner_program_free(p);
    }
    tuner_space_free(sp);
    return nd;
}

static void check_not_applies(const char *name, const shape *sh, const tuner_target *t)
{
    tuner_op op = attn_op(sh);
    CHECK(!tuner__attn_decode.applies(&op, t), "%s: attention_decode applies", name);
}

int main(int argc, char **argv)
{
    if (t_subset_init(&argc, argv) < 0)
        return 2;
    const tuner_target targets[2] = {{80, false}, {90, true}};
    const tuner_dtype dts[2] = {TUNER_F16, TUNER_BF16};

    /* The decode rows (B 1, 16, 64 x Skv 4K, 32K; 32/8 heads, hd 128, f16) on sm_90a:
     * the space has tens of candidates, and the default (tune "none") is the model's first over
     * the whole space (tune "model": every template), one launch, all its blocks resident in one
     * wave, and not the ring the H200's ncu found starved (split 1, 2 slots of 128 keys: one
     * block per SM with half a tile in flight on average). Printed as the table of picks. */
    {
        const tuner_target t = targets[1];
        const tuner_arch *a = tuner__arch(&t);
        static const long long bs[3] = {1, 16, 64}, skvs[2] = {4096, 32768};
        printf("issue 38's decode rows, sm_90a, tune none = model:\n");
        for (int bi = 0; bi < 3; bi++)
            for (int si = 0; si < 2; si++) {
                shape sh = {bs[bi], 32, 8, 1, skvs[si], 128, TUNER_F16, false, false, MASK_NONE, false, false};
                tuner_op op = attn_op(&sh);
                tuner_space *sp = NULL;
                char *err = NULL;
                CHECK(tuner_space_build(&op, &t, &sp, &err) == 0, "B%lld Skv%lld: space: %s", sh.b, sh.skv,
                      err ? err : "?");
                free(err);
                if (!sp)
                    continue;
                size_t nd = 0, best = 0;
                double best_us = 1e300;
                for (size_t i = 0; i < sp->n; i++) {
                    nd += !strcmp(sp->items[i].template_name, "attention_decode");
                    const double us = tuner_predict_us(&op, &t, &sp->items[i]);
                    if (us < best_us)
                        best_us = us, best = i;
                }
                const size_t di = tuner_default_index(&op, &t, sp);
                const tuner_schedule *def = &sp->items[di];
                char *dj = tuner_schedule_json(def);
                printf("  B%-3lld Skv%-6lld %3zu decode candidates  %7.1f us  %s\n", sh.b, sh.skv, nd,
                       tuner_predict_us(&op, &t, def), dj ? dj : "?");
                free(dj);
                /* The next four by the model, for reading the ranking. */
                size_t *order = malloc(sp->n * sizeof(*order));
                double *us = malloc(sp->n * sizeof(*us));
                if (order && us) {
                    tuner_rank(&op, &t, sp, order, us);
                    for (size_t k = 1; k < 5 && k < sp->n; k++) {
                        char *kj = tuner_schedule_json(&sp->items[order[k]]);
                        printf("      then %7.1f us  %s\n", us[order[k]], kj ? kj : "?");
                        free(kj);
                    }
                }
                free(order);
                free(us);
                CHECK(nd >= 20 && nd <= 300, "B%lld Skv%lld: %zu attention_decode candidates", sh.b, sh.skv, nd);
                CHECK(di == best || tuner_predict_us(&op, &t, def) <= best_us,
                      "B%lld Skv%lld: the default is not the model's first", sh.b, sh.skv);
                CHECK(!strcmp(def->template_name, "attention_decode") && tuner_schedule_param(def, "fused", 0) == 1,
                      "B%lld Skv%lld: the default is not one attention_decode launch", sh.b, sh.skv);
                const int split = tuner_schedule_param(def, "split", 0), tile = tuner_schedule_param(def, "kv_tile", 0),
                          stages = tuner_schedule_param(def, "stages", 0);
                CHECK(!(split == 1 && tile == 128 && stages == 2), "B%lld Skv%lld: the starved ring", sh.b, sh.skv);
                /* One wave: at most 3 blocks of 128 threads per SM hold >= 64 keys' ring each. */
                CHECK(sh.b * 8 * split <= 4LL * a->sm_count, "B%lld Skv%lld: default split %d over a wave", sh.b,
                      sh.skv, split);
                /* Enough chunks that one sequence fills the SMs. */
                if (sh.b == 1)
                    CHECK(8 * split >= 0.9 * a->sm_count, "B1 Skv%lld: default split %d leaves SMs idle", sh.skv, split);
                tuner_space_free(sp);
            }
        /* B = 64: the heads fill the GPU without a split. */
        shape sh = {64, 32, 8, 1, 32768, 128, TUNER_F16, false, false, MASK_NONE, false, false};
        tuner_op op = attn_op(&sh);
        tuner_space *sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "B=64: space");
        if (sp) {
            const tuner_schedule *def = &sp->items[tuner_default_index(&op, &t, sp)];
            CHECK(tuner_schedule_param(def, "split", 0) == 1, "B=64: default split %d",
                  tuner_schedule_param(def, "split", 0));
            tuner_space_free(sp);
        }
        /* Skv = 1: nothing to split. */
        sh.b = 1;
        sh.skv = 1;
        op = attn_op(&sh);
        sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "Skv=1: space");
        if (sp) {
            for (size_t i = 0; i < sp->n; i++)
                if (!strcmp(sp->items[i].template_name, "attention_decode"))
                    CHECK(tuner_schedule_param(&sp->items[i], "split", 0) == 1, "Skv=1: a split candidate");
            tuner_space_free(sp);
        }
        /* The combine's ranking: a 32/8 step's 4-row groups are combined by their last block at
         * every split (the combine kernel's launch costs more than reading 4 rows' partials); an
         * MQA step's 64-row groups (8/1 heads, S 8, hd 64) split 64 ways have 1 MB of partials
         * a group, which the combine kernel spreads over the GPU: it ranks first there. */
        sh = (shape){1, 8, 1, 8, 32768, 64, TUNER_F16, false, false, MASK_NONE, false, false};
        op = attn_op(&sh);
        sp = NULL;
        CHECK(tuner_space_build(&op, &t, &sp, NULL) == 0, "MQA: space");
        if (sp) {
            size_t pairs = 0;
            for (size_t i = 0; i < sp->n; i++) {
                const tuner_schedule *x = &sp->items[i];
                if (strcmp(x->template_name, "attention_decode") || tuner_schedule_param(x, "fused", 1) != 0)
                    continue;
                const int v[5] = {tuner_schedule_param(x, "split", 0), tuner_schedule_param(x, "block", 0),
                                  tuner_schedule_param(x, "kv_tile", 0), tuner_schedule_param(x, "stages", 0), 1};
                static const char *const nm[5] = {"split", "block", "kv_tile", "stages", "fused"};
                tuner_schedule f = {0};
                f.template_name = "attention_decode";
                tuner__schedule_params(&f, 5, nm, v);
                if (v[0] == 64) {
                    pairs++;
                    CHECK(tuner_predict_us(&op, &t, x) < tuner_predict_us(&op, &t, &f),
                          "MQA split 64: the combine kernel does not rank before the last block's combine");
                }
            }
            CHECK(pairs > 0, "MQA: no two-kernel candidate at split 64");
            tuner_space_free(sp);
        }
    }

    /* Where it does not apply: long query blocks, too many rows per kv head, f32, misaligned. */
    for (int ti = 0; ti < 2; ti++) {
        shape sh = {1, 32, 8, 128, 4096, 128, TUNER_F16, false, false, MASK_NONE, false, false};
        check_not_applies("S=128", &sh, &targets[ti]);
        sh.s = 17;
        check_not_applies("S=17", &sh, &targets[ti]);
        sh.s = 16;
        sh.hq = 64; /* group 8 x 16 rows = 128 */
        check_not_applies("group 8 x S 16", &sh, &targets[ti]);
        sh = (shape){1, 32, 8, 1, 4096, 128, TUNER_F32, false, false, MASK_NONE, false, false};
        check_not_applies("f32", &sh, &targets[ti]);
        sh.dt = TUNER_F16;
        tuner_op op = attn_op(&sh);
        op.inputs[1].align = 8;
        CHECK(!tuner__attn_decode.applies(&op, &targets[ti]), "k aligned to 8 bytes: applies");
    }

    static const shape cases[] = {
        /* b, hq, hkv, s, skv, d, dt, bshd, causal, mask, epilogue */
        {1, 32, 8, 1, 32768, 128, TUNER_F16, false, false, MASK_NONE, false, false},
        {4, 32, 8, 1, 4096, 128, TUNER_F16, true, false, MASK_NONE, false, false},
        {2, 32, 8, 1, 1000, 128, TUNER_F16, false, false, MASK_KEYS_F32, false, false},
        {1, 32, 8, 16, 4096, 128, TUNER_F16, true, true, MASK_NONE, false, false},
        {2, 16, 16, 5, 1000, 64, TUNER_F16, false, true, MASK_B1SK_F16, false, false},
        {1, 8, 1, 1, 4096, 80, TUNER_F16, true, false, MASK_NONE, true, false},
        {1, 8, 1, 5, 1000, 96, TUNER_F16, false, true, MASK_KEYS_F32, false, false},
        {2, 32, 8, 1, 1, 256, TUNER_F16, false, false, MASK_NONE, false, false},
        {1, 32, 8, 4, 4096, 256, TUNER_F16, true, false, MASK_B1SK_F16, true, false},
        {3, 16, 16, 1, 32768, 64, TUNER_F16, true, false, MASK_NONE, false, false},
        /* bshd_packed: self-attention over a few tokens (S = Skv <= 16) */
        {2, 12, 12, 1, 1, 64, TUNER_F16, true, true, MASK_NONE, false, true},
        {2, 32, 8, 8, 8, 128, TUNER_F16, true, true, MASK_B1SK_F16, false, true},
        {1, 8, 2, 16, 16, 256, TUNER_F16, true, false, MASK_KEYS_F32, true, true},
    };
    char name[160];
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
        for (int di = 0; di < 2; di++)
            for (int ti = 0; ti < 2; ti++) {
                shape sh = cases[ci];
                sh.dt = dts[di];
                tuner_op op = attn_op(&sh);
                snprintf(name, sizeof(name), "B%lld %lld/%lld S%lld Skv%lld D%lld %s%s%s%s%s%s", sh.b, sh.hq, sh.hkv,
                         sh.s, sh.skv, sh.d, tuner_dtype_name(sh.dt), sh.bshd ? " bshd" : "",
                         sh.causal ? " causal" : "",
                         sh.mask == MASK_KEYS_F32 ? " mask[Skv]f32" : sh.mask == MASK_B1SK_F16 ? " mask[B1SSkv]f16" : "",
                         sh.epilogue ? " +b silu" : "", sh.packed ? " packed" : "");
                run_case(name, &op, &targets[ti]);
            }
    /* gpu_attn_decode's dynamic ops: B and Skv named, a [Skv] mask; Skv alone, causal bshd. */
    for (int ti = 0; ti < 2; ti++) {
        const shape s1 = {4, 32, 8, 1, 4096, 128, TUNER_F16, false, false, MASK_KEYS_F32, false, false};
        tuner_op op = dyn_op(&s1, true);
        CHECK(tuner_op_is_dynamic(&op), "dynamic: not dynamic");
        run_case("dynamic [b,32,1,128] kv [b,8,k,128] mask[k]", &op, &targets[ti]);
        const shape s2 = {2, 32, 8, 4, 4096, 128, TUNER_BF16, true, true, MASK_NONE, false, false};
        op = dyn_op(&s2, false);
        run_case("dynamic bshd causal [2,4,32,128] kv [2,k,8,128]", &op, &targets[ti]);
    }
    printf("attention_decode: %zu cases, %d failures\n", n_cases, (int)t_failures);
    return t_failures ? 1 : 0;
}
