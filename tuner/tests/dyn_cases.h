/* tuner/tests/dyn_cases.h - the dynamic ops (named dims, issue 39) the core templates' checks
 * share: test_core_dyn (spaces, launches, NVRTC + ptxas) and tuner_gpu_verify_dyn (each
 * candidate at several sizes against the static reference). Part of tuner_test_common. */
#ifndef HIDET_TUNER_TESTS_DYN_CASES_H
#define HIDET_TUNER_TESTS_DYN_CASES_H

#include <stdbool.h>

#include "tuner/tuner.h"

typedef struct t_dyn_case {
    char name[112];
    tuner_op op;
    const char *template_name; /* the template that must fill (part of) its space */
    bool expect_split;         /* the space offers split (two-kernel) candidates */
    bool expect_scalar_only;   /* no vector candidates: a named size need not divide a vector */
    /* tuner_core_dynamic runs it twice, not once per dtype and target: f16 on sm_80 and f32 on
     * sm_90a (attention, slowest to compile: once, f16 on sm_80 or bf16 on sm_90a by turns) - the
     * dtypes' and targets' code differ in type names and prelude only, and the test has a time
     * budget; the GPU check runs every dtype. */
    bool cpu_two_runs;
    bool sm90a_only; /* its template applies on sm_90a only (attention_wgmma) */
    /* test_core_dyn compiles its default only (with no_compile none): another case compiles
     * the same code paths, and the test has a time budget (the GPU check runs them all). */
    bool default_only, no_compile;
    /* Text every candidate of template_name holds for this range: a range short enough that the
     * template specializes on it (attention_mma's constant key-tile count), so those candidates'
     * source may change with the dims' max. NULL: no candidate's may. */
    const char *range_marker;
} t_dyn_case;

#define T_DYN_MAX_CASES 48

/* The cases for dtype dt into out[0..T_DYN_MAX_CASES); returns how many: names on axis 0 (dims
 * such as n in 1..4096 and a product b*s), then names on inner axes ([b, s, 768] + [s, 768],
 * [b, 12, q, k] + a mask [b, 1, 1, k], rows of [b, 12, s, 64], reduces to [b, s]). With bump, each dim's max is raised by 7 x its multiple_of (the same schedules stay valid):
 * a program that does not bake a named size in is the same text for both. */
int t_dyn_cases(tuner_dtype dt, bool bump, t_dyn_case *out);

/* Ops the core templates must refuse (a named row length, a reduce over a named axis or with a
 * name after it, a name on two axes, a fixed size against a name): into out; returns how many. */
int t_dyn_unsupported(tuner_dtype dt, t_dyn_case *out);

/* Sizes of op's dims to launch at: which 0 = every dim at min, 1 = an odd size (or an odd
 * multiple of multiple_of) near the middle of the range, 2 = max. */
void t_dyn_sizes(const tuner_op *op, int which, int64_t *sizes);

#endif
