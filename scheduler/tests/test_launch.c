/* scheduler/tests/test_launch.c - what the scheduler makes of a generated program: the launch
 * description stored with its artifact (sched__fill_launch) and the launches a worker measures
 * (sched__map_launches), for a static op and for a dynamic one (issue 39: size arguments, grid
 * rules, named output axes), built by hand so that no template or request parser is needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_workers/wire.h"
#include "scheduler/sched_int.h"
#include "tuner/tuner.h"

#include "tests/check.h"

/* A rows op [n, 4096] -> [n, 4096] in f16 with n in 1..8192 (dynamic) or fixed at 8192. */
static void make_op(tuner_op *op, bool dynamic)
{
    memset(op, 0, sizeof(*op));
    op->kind = TUNER_OP_SOFTMAX;
    op->n_inputs = 1;
    op->n_anchor_inputs = 1;
    tuner_tensor t = {.rank = 2, .shape = {8192, 4096}, .dtype = TUNER_F16, .align = 16};
    if (dynamic) {
        t.sym[0] = 1;
        op->n_dims = 1;
        op->dims[0] = (tuner_dim){.name = "n", .min = 1, .max = 8192, .multiple_of = 1};
    }
    op->inputs[0] = t;
    op->output = t;
}

/* One launch of 8192 / 64 blocks (x) over the rows; the dynamic one takes n and sizes x by it. */
static void make_program(tuner_program *p, bool dynamic)
{
    memset(p, 0, sizeof(*p));
    p->source = (char *)"";
    p->n_kernels = 1;
    tuner_launch *l = &p->kernels[0];
    snprintf(l->name, sizeof(l->name), "hd_softmax_rows");
    l->grid[0] = 128;
    l->grid[1] = l->grid[2] = 1;
    l->block[0] = 256;
    l->block[1] = l->block[2] = 1;
    l->n_args = 2;
    l->args[0] = TUNER_BUF_INPUT0;
    l->args[1] = TUNER_BUF_OUTPUT;
    if (dynamic) {
        l->args[l->n_args++] = TUNER_ARG_DIM0;
        l->grid_rule[0] = (tuner_grid_rule){.dims = 1, .coef = 1, .div = 64, .mul = 1, .cap = 0};
    }
    p->output_dtype = TUNER_F16;
}

static void test_fill_launch(void)
{
    tuner_op op;
    tuner_program p;
    kc_launch l;

    make_op(&op, false);
    make_program(&p, false);
    sched__fill_launch(&op, &p, &l);
    CHECK(kc_launch_check(&l) == 0);
    CHECK(l.n_dims == 0 && l.output_sym[0] == 0 && l.kernels[0].grid_rule[0].dims == 0 &&
          l.kernels[0].n_args == 2 && l.output_shape[0] == 8192);
    char *text = NULL;
    CHECK(kc_launch_json(&l, &text) == 0 && text && !strstr(text, "dims") && !strstr(text, "grid_rules") &&
          !strstr(text, "sym"), "%s", text ? text : "");
    free(text);
    text = NULL;

    make_op(&op, true);
    make_program(&p, true);
    sched__fill_launch(&op, &p, &l);
    CHECK(kc_launch_check(&l) == 0);
    CHECK(l.n_dims == 1 && strcmp(l.dims[0].name, "n") == 0 && l.dims[0].min == 1 && l.dims[0].max == 8192 &&
          l.dims[0].multiple_of == 1);
    CHECK(l.output_rank == 2 && l.output_sym[0] == 1 && l.output_sym[1] == 0 && l.output_shape[0] == 8192);
    const kc_kernel *k = &l.kernels[0];
    CHECK(k->n_args == 3 && k->args[2] == KC_ARG_DIM0 && k->grid[0] == 128);
    CHECK(k->grid_rule[0].dims == 1 && k->grid_rule[0].coef == 1 && k->grid_rule[0].div == 64 &&
          k->grid_rule[0].mul == 1 && k->grid_rule[0].cap == 0 && k->grid_rule[1].dims == 0);
    CHECK(kc_launch_json(&l, &text) == 0 && text && strstr(text, "\"args\":[\"input0\",\"output\",\"dim0\"]"),
          "%s", text ? text : "");
    free(text);
    /* A program whose grid is not its rule's value at the op's tuning sizes is not storable:
     * the cache refuses it rather than answering a grid no size gives. */
    p.kernels[0].grid[0] = 64;
    sched__fill_launch(&op, &p, &l);
    CHECK(kc_launch_check(&l) == -EINVAL);
}

/* A request over the test op's three buffers - its input, its output and the reference's F32
 * output - timed once, with a stand-in image for the candidate (and the reference, when the
 * request has its output: ref_output_buffer >= 0; -1 is a middle's request, sent unchecked). */
static void three_buffer_request(gw_measure_req *r, int ref_output_buffer)
{
    static const uint8_t img[] = "fake";
    memset(r, 0, sizeof(*r));
    r->n_buffers = 3;
    r->buffers[0] = (gw_buffer){GW_BUF_INPUT, GW_F16, 8192 * 4096};
    r->buffers[1] = (gw_buffer){GW_BUF_OUTPUT, GW_F16, 8192 * 4096};
    r->buffers[2] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, 8192 * 4096};
    r->output_buffer = 1;
    r->ref_output_buffer = ref_output_buffer;
    r->min_reps = r->max_reps = 1;
    r->candidate.image = img;
    r->candidate.image_len = sizeof(img);
    if (ref_output_buffer >= 0) {
        r->reference.image = img;
        r->reference.image_len = sizeof(img);
    }
}

static void test_map_launches(void)
{
    tuner_op op;
    tuner_program p;
    gw_measure_req r;
    /* input0 -> 0, output -> 1; the reference's output is 2 (no workspace). */
    int cand_map[TUNER_BUF_WORKSPACE + 1], ref_map[TUNER_BUF_WORKSPACE + 1];
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        cand_map[i] = ref_map[i] = -1;
    cand_map[TUNER_BUF_INPUT0] = ref_map[TUNER_BUF_INPUT0] = 0;
    cand_map[TUNER_BUF_OUTPUT] = 1;
    ref_map[TUNER_BUF_OUTPUT] = 2;

    for (int dynamic = 0; dynamic < 2; dynamic++) {
        make_op(&op, dynamic);
        make_program(&p, dynamic);
        three_buffer_request(&r, 2);
        r.check = true;
        r.rtol = r.atol = 1e-2;
        sched__map_launches(&op, &p, &r.candidate, cand_map);
        sched__map_launches(&op, &p, &r.reference, ref_map);
        const gw_launch *g = &r.candidate.launches[0];
        CHECK(r.candidate.n_launches == 1 && g->grid[0] == 128 && g->args[0] == 0 && g->args[1] == 1);
        CHECK(r.reference.launches[0].args[1] == 2);
        if (dynamic)
            /* Measured at the tuning sizes: n's max, which the buffers and the grid hold. */
            CHECK(g->n_args == 3 && g->args[2] == GW_ARG_I64 && g->values[2] == 8192 && g->values[0] == 0);
        else
            CHECK(g->n_args == 2);
        CHECK(gw_wire_check_req(&r) == 0, "dynamic %d", dynamic);
        /* A program that uses a buffer the request does not have (a workspace) is refused, never
         * sent with the argument read as a scalar. */
        p.kernels[0].args[1] = TUNER_BUF_WORKSPACE;
        sched__map_launches(&op, &p, &r.candidate, cand_map);
        CHECK(r.candidate.launches[0].args[1] != GW_ARG_I64 && gw_wire_check_req(&r) == -EINVAL);
    }
}

/* A measured range job's second size (sched__mid_sizes): the geometric middle of each dim's
 * range, rounded down to its multiple_of and kept in the range; none for a static op or a range
 * of one size. */
static void test_mid_sizes(void)
{
    tuner_op op;
    int64_t sz[TUNER_MAX_DIMS];
    make_op(&op, false);
    CHECK(!sched__mid_sizes(&op, sz));
    make_op(&op, true);
    op.dims[0].min = 641, op.dims[0].max = 768;
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 701, "%lld", (long long)sz[0]); /* sqrt: 701.6 */
    op.dims[0].min = 64, op.dims[0].max = 8192, op.dims[0].multiple_of = 64;
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 704, "%lld", (long long)sz[0]); /* 724.1 */
    /* Rounded down below min: min (never the top: a range of two sizes or more has its
     * geometric middle below its max). */
    op.dims[0].min = 64, op.dims[0].max = 128;
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 64, "%lld", (long long)sz[0]);
    op.dims[0].min = 1, op.dims[0].max = 2, op.dims[0].multiple_of = 1;
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 1, "%lld", (long long)sz[0]);
    /* A perfect square lands on its root, not one below (sqrt's rounding). */
    op.dims[0].min = 49, op.dims[0].max = 81;
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 63, "%lld", (long long)sz[0]);
    op.dims[0].min = op.dims[0].max = 768;
    CHECK(!sched__mid_sizes(&op, sz));
    /* Two dims, one of them of one size: that one stays, the other moves. */
    op.n_dims = 2;
    op.dims[1] = (tuner_dim){.name = "b", .min = 1, .max = 16, .multiple_of = 1};
    CHECK(sched__mid_sizes(&op, sz) && sz[0] == 768 && sz[1] == 4, "%lld %lld", (long long)sz[0],
          (long long)sz[1]);
}

/* The sizes a measured range job compares its candidates at (tuner_range_sample): the bottom,
 * the middle the job times (sched__mid_sizes) and the top among them, never falling, each a
 * multiple of the dim's multiple_of and inside its range. */
static void test_range_samples(void)
{
    tuner_op op;
    make_op(&op, true);
    op.n_dims = 2;
    op.dims[0].min = 16, op.dims[0].max = 512, op.dims[0].multiple_of = 16;
    op.dims[1] = (tuner_dim){.name = "b", .min = 7, .max = 9, .multiple_of = 1};
    int64_t mid[TUNER_MAX_DIMS], prev[TUNER_MAX_DIMS] = {0, 0};
    int distinct = 0; /* sizes of n among the samples */
    CHECK(sched__mid_sizes(&op, mid));
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++) {
        int64_t sz[TUNER_MAX_DIMS];
        tuner_range_sample(&op, k, sz);
        distinct += sz[0] != prev[0];
        for (int d = 0; d < 2; d++) {
            CHECK(sz[d] >= op.dims[d].min && sz[d] <= op.dims[d].max && sz[d] % op.dims[d].multiple_of == 0 &&
                      sz[d] >= prev[d],
                  "sample %d dim %d: %lld after %lld", k, d, (long long)sz[d], (long long)prev[d]);
            prev[d] = sz[d];
        }
        if (k == 0)
            CHECK(sz[0] == 16 && sz[1] == 7, "the bottom: %lld %lld", (long long)sz[0], (long long)sz[1]);
        if (k == TUNER_RANGE_MIDDLE)
            CHECK(sz[0] == mid[0] && sz[1] == mid[1], "the middle: %lld %lld", (long long)sz[0], (long long)sz[1]);
        if (k == TUNER_RANGE_TOP)
            CHECK(sz[0] == 512 && sz[1] == 9, "the top: %lld %lld", (long long)sz[0], (long long)sz[1]);
    }
    /* Between the ends they step: 16..512 in multiples of 16 takes more than the three. */
    CHECK(distinct > 8, "%d distinct sizes of n among the samples", distinct);
}

/* The same program as the worker runs it at the middle of the range: size arguments at those
 * sizes, a grid dimension with a rule at its value there (the others kept), tensor maps bound
 * to them; sent unchecked without the reference, which the wire takes. */
static void test_map_launches_at(void)
{
    tuner_op op;
    tuner_program p;
    make_op(&op, true);
    make_program(&p, true);
    tuner_launch *l = &p.kernels[0];
    l->grid[1] = 3; /* a dimension without a rule */
    /* A map of the input, [4096, n] with boxes of 64 x 64, its rows following n. */
    tuner_tmap *m = &l->maps[0];
    memset(m, 0, sizeof(*m));
    m->buf = TUNER_BUF_INPUT0;
    m->mode = TUNER_TMAP_TILED;
    m->dtype = TUNER_F16;
    m->rank = 2;
    m->dims[0] = 4096, m->dims[1] = 8192;
    m->sym[1] = 1, m->sym_coef[1] = 1;
    m->strides[0] = 4096 * 2;
    m->box[0] = 64, m->box[1] = 64;
    m->element_strides[0] = m->element_strides[1] = 1;
    m->swizzle = 128;
    l->n_maps = 1;
    CHECK(tuner_tmap_check(m, NULL, 0, NULL, 0) == 0);

    int cand_map[TUNER_BUF_WORKSPACE + 1];
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        cand_map[i] = -1;
    cand_map[TUNER_BUF_INPUT0] = 0;
    cand_map[TUNER_BUF_OUTPUT] = 1;
    gw_measure_req r;
    three_buffer_request(&r, -1);

    const int64_t mid[TUNER_MAX_DIMS] = {701};
    CHECK(sched__map_launches_at(&op, &p, &r.candidate, cand_map, mid) == 0);
    const gw_launch *g = &r.candidate.launches[0];
    CHECK(g->grid[0] == 11 && g->grid[1] == 3 && g->grid[2] == 1, "grid %u %u %u", g->grid[0], g->grid[1],
          g->grid[2]); /* ceil(701 / 64) */
    CHECK(g->n_args == 3 && g->args[2] == GW_ARG_I64 && g->values[2] == 701 && g->args[0] == 0 && g->args[1] == 1);
    CHECK(g->n_maps == 1 && g->maps[0].buf == 0 && g->maps[0].dims[1] == 701 && g->maps[0].dims[0] == 4096 &&
          g->maps[0].sym[1] == 0 && g->maps[0].sym_coef[1] == 0);
    /* Unchecked, without a reference: a request the wire takes. */
    CHECK(r.reference.n_launches == 0 && !r.check && gw_wire_check_req(&r) == 0);
    uint8_t *frame = NULL;
    size_t len = 0;
    CHECK(gw_wire_encode_measure(&r, &frame, &len) == 0 && frame && len > 0);
    free(frame);

    /* At the max (NULL sizes): what sched__map_launches gives, the map left for the worker. */
    CHECK(sched__map_launches_at(&op, &p, &r.candidate, cand_map, NULL) == 0);
    CHECK(g->grid[0] == 128 && g->values[2] == 8192 && g->maps[0].dims[1] == 8192 && g->maps[0].sym[1] == 1);

    /* A size the map cannot take (a dimension of 0) is refused, not sent. */
    const int64_t zero[TUNER_MAX_DIMS] = {0};
    CHECK(sched__map_launches_at(&op, &p, &r.candidate, cand_map, zero) == -EINVAL);
}

int main(void)
{
    test_fill_launch();
    test_map_launches();
    test_mid_sizes();
    test_range_samples();
    test_map_launches_at();
    return check_finish("test_sched_launch");
}
