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
        memset(&r, 0, sizeof(r));
        r.n_buffers = 3;
        r.buffers[0] = (gw_buffer){GW_BUF_INPUT, GW_F16, 8192 * 4096};
        r.buffers[1] = (gw_buffer){GW_BUF_OUTPUT, GW_F16, 8192 * 4096};
        r.buffers[2] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, 8192 * 4096};
        r.output_buffer = 1;
        r.ref_output_buffer = 2;
        r.check = true;
        r.rtol = r.atol = 1e-2;
        r.min_reps = r.max_reps = 1;
        static const uint8_t img[] = "fake";
        r.candidate.image = r.reference.image = img;
        r.candidate.image_len = r.reference.image_len = sizeof(img);
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

int main(void)
{
    test_fill_launch();
    test_map_launches();
    return check_finish("test_sched_launch");
}
