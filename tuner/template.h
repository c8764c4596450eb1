/* tuner/template.h - what one schedule template provides to the space builder (internal).
 *
 * A template is a family of kernels for one anchor op, written with task mappings and
 * parameterised by hardware-centric choices. tuner/space.c walks the registry (registry.c), asks
 * each template that applies to an op to enumerate its valid schedules, and dispatches
 * generation and cost prediction back to the template named in a schedule.
 */
#ifndef HIDET_TUNER_TEMPLATE_H
#define HIDET_TUNER_TEMPLATE_H

#include <stddef.h>

#include "tuner/tuner.h"

/* How templates rank when tune:"none" picks a default among several that fill one space: lower
 * first, equal ranks in the order of the space (registry order). */
enum {
    /* 0: not stated (a registry test refuses it) */
    TUNER_RANK_SPECIALISED = 1, /* a template that applies only where it beats the general ones
                                 * (conv2d_direct: depthwise and small-group convolutions) */
    TUNER_RANK_TENSOR_CORE = 2, /* mma.sync on fp16/bf16 */
    TUNER_RANK_TF32 = 3,        /* mma.sync in tf32 on fp32 inputs */
    TUNER_RANK_CUDA_CORE = 4,   /* FMA and loads on CUDA cores: SIMT GEMMs, rows, columns, elementwise */
};

typedef struct tuner_template {
    const char *name; /* unique; equals tuner_schedule.template_name of its schedules */
    /* Static description of the parameter table and validity rules, hashed into tuner_space.hash:
     * bump it (any text change) whenever the space changes. */
    const char *space_signature;
    /* true when this template can compute op on target at all. */
    bool (*applies)(const tuner_op *op, const tuner_target *t);
    /* Appends every valid schedule to *items (realloc'd; *n updated). Returns 0 or -errno. */
    int (*enumerate)(const tuner_op *op, const tuner_target *t, tuner_schedule **items, size_t *n);
    /* Fills p (zeroed by the caller; p->source malloc'd). Returns 0 or -errno with *err set. */
    int (*generate)(const tuner_op *op, const tuner_target *t, const tuner_schedule *s,
                    tuner_program *p, char **err);
    double (*predict_us)(const tuner_op *op, const tuner_target *t, const tuner_schedule *s);
    /* tune:"none": the schedule this template would choose for op without ranking, which may
     * depend on the op's shape. Fills ret's params (n_params, params[]; the caller sets the
     * template name) and returns 0, after which the space's valid schedule of this template
     * nearest to it wins (log2 distance over params; ties: first); -ENOENT when it has no
     * preference for op (the next template by default_rank is asked). NULL: the template
     * enumerates its preferred schedule first, and that schedule is the default. */
    int (*preferred)(const tuner_op *op, const tuner_target *t, tuner_schedule *ret);
    /* TUNER_RANK_*: which template's default wins when several fill one space. Every template
     * states one (tuner/tests/test_template.c checks). */
    int default_rank;
    /* true when generate() handles a dynamic op (tuner_op.n_dims > 0): sym axes read from the
     * TUNER_ARG_DIM0 parameters, grid_rule set on every launch whose grid depends on them, and
     * enumerate() offers only schedules valid for every size in the dims' ranges (no path that
     * assumes a named axis divides a tile unless multiple_of guarantees it). The space of a
     * dynamic op holds only these templates' schedules. */
    bool dynamic_dims;
} tuner_template;

/* For a template's `preferred`: the schedule of its own space that its cost model ranks first
 * (ties: the space's order), so that tune "none" and "model" agree on its ops. 0; -ENOENT when
 * its space for op is empty; -errno from its enumerate. */
int tuner__model_first(const tuner_template *tp, const tuner_op *op, const tuner_target *t, tuner_schedule *ret);

/* NULL-terminated lists, one per file that owns templates (see registry.c). */
extern const tuner_template *const tuner__gemm_templates[];   /* tuner/gemm/registry.c */
extern const tuner_template *const tuner__core_templates[];   /* tuner/core_registry.c */
extern const tuner_template *const tuner__attn_templates[];   /* tuner/attn/registry.c */

/* Verification references (see tuner_reference()): matmul and conv2d live in tuner/gemm/, every
 * other op in tuner/. Each fills p like a template's generate(). */
int tuner__gemm_reference(const tuner_op *op, const tuner_target *t, tuner_program *p, char **err);
int tuner__core_reference(const tuner_op *op, const tuner_target *t, tuner_program *p, char **err);

/* Looks a template up by name; NULL when unknown. */
const tuner_template *tuner__template_find(const char *name);

/* Limits and rates of a target used by validity predicates and the cost model. */
typedef struct tuner_arch {
    int sm;
    int sm_count;              /* typical part: 108 (A100), 84 (A10/3090-class), 128 (L40), 132 (H100) */
    int max_threads_per_block; /* 1024 */
    int max_threads_per_sm;
    int max_smem_per_block;    /* bytes, opt-in maximum */
    int max_smem_per_sm;
    int regs_per_sm;           /* 65536 */
    int max_regs_per_thread;   /* 255 */
    double dram_gbps;          /* bytes/us = GB/s */
    double l2_bytes;
    double tc_f16_tflops;      /* dense fp16/bf16 mma.sync rate */
    /* Dense FP8 (e4m3/e5m2) mma.sync m16n8k32 rate with fp32 accumulation; 0 where the target has
     * no FP8 mma.sync (before sm_89): matmul_mma's FP8 candidates exist only where it is not. */
    double tc_fp8_tflops;
    double fma_f32_tflops;
    bool has_cp_async, has_bf16_mma, has_wgmma;
    /* Clusters of n = 1..8 blocks, one block per SM, resident at once (a cluster is placed
     * within one GPC, so fewer than sm_count / n fit); 0 where not measured. */
    short cluster_fit[9];
} tuner_arch;

/* Returns the table for t->sm (never NULL for supported targets; NULL otherwise). */
const tuner_arch *tuner__arch(const tuner_target *t);
/* Clusters of n one-block-per-SM blocks resident at once on a (cluster_fit, else sm_count / n). */
int tuner__arch_cluster_fit(const tuner_arch *a, int n);

#endif
