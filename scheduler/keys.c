/* scheduler/keys.c - op, tuning and artifact keys, and which fusion anchor a fused op may reuse.
 * The op's canonical JSON is tuner_op_canonical_json(), the same form the daemon keys on.
 *
 * Every key is kc_key() over length-prefixed parts. Op and tuning keys start with a part naming the
 * record kind, so an op key can never equal a tuning key; an artifact key hashes an op key with a
 * schedule. Versions that change what a key's kernel would be (schema,
 * codegen, NVRTC, numerics) are parts of every key: a new tuner never answers from an old entry.
 */
#include "scheduler/sched.h"
#include "tuner/tuner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

void sched_op_key(const char *op_json, const tuner_target *t, char out[KC_KEY_LEN + 1])
{
    char target[16];
    tuner_target_name(t, target, sizeof(target));
    const char *parts[] = {
        "hidetd-op",
        STR(KC_KEY_SCHEMA),
        op_json ? op_json : "",
        target,
        tuner_codegen_version(),
        tuner_nvrtc_version(),
        SCHED_NUMERICS_FLAGS,
        tuner_numerics_flags(),
    };
    kc_key(parts, sizeof(parts) / sizeof(parts[0]), out);
}

void sched_artifact_key(const char *op_key, const char *schedule_json, char out[KC_KEY_LEN + 1])
{
    /* The op key already names the record kind and every version, so two parts suffice. */
    const char *parts[] = {op_key ? op_key : "", schedule_json ? schedule_json : ""};
    kc_key(parts, 2, out);
}

int sched_tuning_key(const tuner_op *op, const tuner_target *t, const gw_device_info *dev,
                     const char *space_hash, char out[KC_KEY_LEN + 1])
{
    if (!op || !t || !dev || !space_hash || !out)
        return -EINVAL;
    char *json = tuner_op_canonical_json(op);
    if (!json)
        return -ENOMEM;
    char target[16], sm_count[16], driver_major[16];
    tuner_target_name(t, target, sizeof(target));
    snprintf(sm_count, sizeof(sm_count), "%d", dev->sm_count);
    /* cuDriverGetVersion: 1000 * major + 10 * minor; minor driver updates keep their timings. */
    snprintf(driver_major, sizeof(driver_major), "%d", dev->driver_version / 1000);
    const char *parts[] = {
        "hidetd-tuning", STR(KC_KEY_SCHEMA), json, target, tuner_codegen_version(),
        tuner_nvrtc_version(), SCHED_NUMERICS_FLAGS, tuner_numerics_flags(), dev->name, sm_count,
        driver_major, space_hash,
    };
    kc_key(parts, sizeof(parts) / sizeof(parts[0]), out);
    free(json);
    return 0;
}

void sched_mid_tuning_key(const char *tuning_key, const int64_t *sizes, int n_sizes,
                          char out[KC_KEY_LEN + 1])
{
    char list[TUNER_MAX_DIMS * 24 + 1] = "";
    size_t len = 0;
    for (int k = 0; k < n_sizes && k < TUNER_MAX_DIMS; k++)
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%lld", k ? "," : "",
                                (long long)sizes[k]);
    const char *parts[] = {"hidetd-tuning-mid", tuning_key ? tuning_key : "", list};
    kc_key(parts, sizeof(parts) / sizeof(parts[0]), out);
}

bool sched_op_strip_fusion(const tuner_op *op, tuner_op *anchor)
{
    *anchor = *op;
    if (op->kind == TUNER_OP_ELEMENTWISE)
        return false; /* the chain is the op itself: there is nothing under it to reuse */
    bool fused = op->epilogue.n > 0 || op->n_inputs > op->n_anchor_inputs;
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        fused = fused || op->prologue[i].n > 0;
    if (fused)
        tuner_op_strip_fusion(op, anchor);
    return fused;
}
