/* Unit tests of what every template and target must declare: tuner/arch.c has limits for exactly
 * the targets op/op.h lists, each entry filled and describing its own target; every registered
 * template states its tune:"none" rank and has a unique name. And the schedule filter the GPU
 * checks use (tuner_schedule_matches). */
#include "tuner/space.h"

#include "tests/check.h"

static void test_arch_covers_targets(void)
{
    for (int i = 0; i < TUNER_TARGET_COUNT; i++) {
        tuner_target t = tuner_target_of((tuner_target_id)i);
        const tuner_arch *a = tuner__arch(&t);
        char name[16];
        tuner_target_name(&t, name, sizeof(name));
        if (!a) {
            fprintf(stderr, "no limits for %s\n", name);
            failures++;
            continue;
        }
        /* A hole in the designated initialisers would leave zeros here. */
        CHECK_EQ_INT(a->sm, t.sm);
        CHECK(a->has_wgmma == t.arch_specific);
        CHECK(a->sm_count > 0 && a->max_threads_per_block > 0 && a->max_smem_per_block > 0 &&
              a->regs_per_sm > 0 && a->dram_gbps > 0 && a->tc_f16_tflops > 0);
        /* FP8 mma.sync exactly where op/ accepts FP8 matmuls (the request parser asks it). */
        CHECK((a->tc_fp8_tflops > 0) == tuner_fp8_target(&t));
    }
    tuner_target old = {.sm = 75};
    CHECK(tuner__arch(&old) == NULL);
    CHECK(tuner__arch(NULL) == NULL);
}

static void test_templates_declare_defaults(void)
{
    int count = 0;
    for (int r = 0; tuner__registries[r]; r++) {
        for (int i = 0; tuner__registries[r][i]; i++, count++) {
            const tuner_template *tp = tuner__registries[r][i];
            if (tp->default_rank < TUNER_RANK_SPECIALISED || tp->default_rank > TUNER_RANK_CUDA_CORE) {
                fprintf(stderr, "%s states no default_rank (TUNER_RANK_*)\n", tp->name);
                failures++;
            }
            CHECK(tuner__template_find(tp->name) == tp);
        }
    }
    CHECK(count >= 11);
}

/* "name=value[,name=value...]": every pair must hold; an absent parameter never matches; an
 * empty or NULL spec matches everything; a malformed one nothing. */
static void test_schedule_matches(void)
{
    tuner_schedule s = {.template_name = "matmul_wgmma", .n_params = 3,
                        .params = {{"swap", 1}, {"split_k", 2}, {"block_n", 104}}};
    CHECK(tuner_schedule_matches(&s, NULL) && tuner_schedule_matches(&s, ""));
    CHECK(tuner_schedule_matches(&s, "swap=1") && tuner_schedule_matches(&s, "swap=1,split_k=2,block_n=104"));
    CHECK(!tuner_schedule_matches(&s, "swap=1,split_k=3") && !tuner_schedule_matches(&s, "split_k=2,swap=0"));
    CHECK(!tuner_schedule_matches(&s, "stages=4") && !tuner_schedule_matches(&s, "swap"));
    CHECK(!tuner_schedule_matches(&s, "swap=1,split_k") && tuner_schedule_matches(&s, "swap=1,"));
}

int main(void)
{
    test_arch_covers_targets();
    test_templates_declare_defaults();
    test_schedule_matches();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
