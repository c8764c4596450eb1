/* resolve/tests/test_dispatch.c - a dispatch table's boundaries follow the measurements (issue
 * 39; resolve/dispatch.c): against a real (temporary) cache and scheduler, with the entries'
 * kernels stored as a tuning job would store them,
 *  - neighbouring entries whose kernels were chosen by measurement and run the same code are
 *    answered as one entry over the union of their ranges, which lists the fine ranges it covers,
 *    carries the kernel set tuned at the union's largest size with its "dims" widened to the
 *    union and the largest workspace of the sets it covers;
 *  - a measured neighbour with another schedule, or with the same schedule but other launches,
 *    stays an entry of its own, as do entries ranked by the model only and entries not ready;
 *  - a measured neighbour with the same schedule and launches but other code (another PTX: a
 *    schedule's source may depend on the range) stays apart;
 *  - with two names, entries merge along each name where the other's ranges are the same, and
 *    the entries still cover every combination exactly once;
 *  - a measured entry whose kernel fits its range worse than 1.03 is answered as two halves
 *    running that kernel ("coarse") until each is tuned itself, and cut again where a tuned
 *    half fits badly (a range of fewer than 64 sizes never), along the name spanning the most
 *    (with two names the table still covers every combination once).
 * Unit suite, no GPU: every kernel the table needs is stored beforehand; the requests with sizes
 * start a job for the half they land in (without a GPU worker: the model's pick, one NVRTC
 * compile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "proto/request.h"
#include "resolve/resolve.h"
#include "resolve/tests/fixture.h"
#include "tests/check.h"

static const char sched_a[] = "{\"template\":\"softmax_rows\",\"params\":{\"vec\":8}}";
static const char sched_b[] = "{\"template\":\"softmax_rows\",\"params\":{\"vec\":4}}";

static proto_kernel_request parse(const char *body)
{
    proto_kernel_request kr;
    proto_error err;
    memset(&kr, 0, sizeof(kr));
    CHECK(proto_kernel_request_parse(body, strlen(body), &kr, &err) == 0, "parse: %s at %s", err.message, err.field);
    return kr;
}

/* Stores, for the op restricted to [lo, hi] per name (NULL: the whole op, the generic set), a
 * kernel chosen as `choice` with schedule `sched` and PTX `code`: one kernel over input0 and the output taking
 * every size, its grid x a rule over every name (block `block`), `workspace` bytes, its fit to its
 * range `range_worst` (0: none recorded). Returns the artifact key in key. */
static void store_fit(kc_db *db, const proto_kernel_request *kr, const int64_t *lo, const int64_t *hi,
                      const char *sched, const char *code, kc_choice choice, unsigned block, uint64_t workspace,
                      double range_worst, char key[KC_KEY_LEN + 1])
{
    tuner_op op = kr->op;
    if (lo)
        CHECK(tuner_op_restrict(&kr->op, lo, hi, &op) == 0, "restrict");
    kc_artifact a;
    memset(&a, 0, sizeof(a));
    a.op_json = tuner_op_canonical_json(&op);
    sched_op_key(a.op_json, &kr->opt.target, a.op_key);
    sched_artifact_key(a.op_key, sched, a.key);
    snprintf(a.op, sizeof(a.op), "%s", tuner_op_name(op.kind));
    tuner_target_name(&kr->opt.target, a.target, sizeof(a.target));
    a.schedule_json = (char *)sched;
    kc_launch *l = &a.launch;
    l->n_dims = op.n_dims;
    int64_t max[KC_MAX_DIMS] = {1, 1, 1, 1};
    for (int k = 0; k < op.n_dims; k++) {
        snprintf(l->dims[k].name, sizeof(l->dims[k].name), "%s", op.dims[k].name);
        l->dims[k].min = op.dims[k].min;
        l->dims[k].max = op.dims[k].max;
        l->dims[k].multiple_of = op.dims[k].multiple_of;
        max[k] = op.dims[k].max;
    }
    kc_kernel *k = &l->kernels[l->n_kernels++];
    snprintf(k->name, sizeof(k->name), "hd_softmax_rows");
    k->grid_rule[0] = (kc_grid_rule){.dims = (uint8_t)((1u << op.n_dims) - 1), .coef = 1, .div = 1, .mul = 1};
    k->grid[0] = (uint32_t)kc_grid_rule_eval(&k->grid_rule[0], max);
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = block;
    k->block[1] = k->block[2] = 1;
    k->args[k->n_args++] = KC_BUF_INPUT0;
    k->args[k->n_args++] = KC_BUF_OUTPUT;
    for (int d = 0; d < op.n_dims; d++)
        k->args[k->n_args++] = (kc_buf)(KC_ARG_DIM0 + d);
    l->workspace_bytes = workspace;
    l->range_worst = range_worst;
    l->has_output = true;
    l->output_rank = op.output.rank;
    for (int i = 0; i < op.output.rank; i++) {
        l->output_shape[i] = op.output.shape[i];
        l->output_sym[i] = op.output.sym[i];
    }
    snprintf(l->output_dtype, sizeof(l->output_dtype), "%s", tuner_dtype_name(op.output.dtype));
    a.ptx = (char *)code;
    a.ptx_len = strlen(a.ptx);
    a.cubin = (uint8_t *)"\177ELFcode";
    a.cubin_len = 8;
    a.choice = choice;
    a.latency_us = choice == KC_CHOSEN_MEASURED ? 5.0 : -1;
    a.predicted_us = 4.0;
    a.provenance_json = "{}";
    CHECK(kc_artifact_put(db, &a) == 0, "store %s", a.op_key);
    if (key)
        memcpy(key, a.key, KC_KEY_LEN + 1);
    free(a.op_json);
}

static void store(kc_db *db, const proto_kernel_request *kr, const int64_t *lo, const int64_t *hi, const char *sched,
                  const char *code, kc_choice choice, unsigned block, uint64_t workspace, char key[KC_KEY_LEN + 1])
{
    store_fit(db, kr, lo, hi, sched, code, choice, block, workspace, 0, key);
}

typedef struct outcome {
    int calls;
    resolve_result res;
    char *body;
} outcome;

static void on_result(void *udata, const resolve_result *res)
{
    outcome *o = udata;
    o->calls++;
    o->res = *res;
    free(o->body);
    o->body = res->len ? strndup(res->body, res->len) : NULL;
}

/* The table answered to body, parsed (the caller frees it). */
static cJSON *table(uv_loop_t *loop, resolver *r, const char *body)
{
    proto_kernel_request kr = parse(body);
    resolve_request rq = {.op = &kr.op, .target = kr.opt.target, .mode = kr.opt.tune, .wait = true,
                          .priority = SCHED_PRIO_NORMAL};
    outcome o = {0};
    resolve_result res;
    resolve_wait *w = NULL;
    resolve_kernel_request(r, &kr, &rq, on_result, &o, &res, &w);
    for (int i = 0; i < 5000 && res.state == RESOLVE_WAITING && o.calls == 0; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    if (res.state != RESOLVE_WAITING)
        on_result(&o, &res);
    CHECK(o.calls == 1 && o.res.state == RESOLVE_ANSWERED && o.body, "table: state %d %s", o.res.state,
          o.res.error.message);
    cJSON *t = o.body ? cJSON_Parse(o.body) : NULL;
    free(o.body);
    return t;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* "[lo,hi]" of an entry's name (a static buffer: one at a time). */
static const char *range_text(const cJSON *e, const char *name)
{
    static char buf[64];
    char *t = cJSON_PrintUnformatted(get(get(e, "ranges"), name));
    snprintf(buf, sizeof(buf), "%s", t ? t : "?");
    free(t);
    return buf;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- one name ---------------------------------------------------------------------------------- */

#define SOFTMAX_N                                                                                        \
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",256],\"dtype\":\"f16\"}],"                        \
    "\"dims\":{\"n\":{\"min\":1,\"max\":64}},\"arch\":\"sm_90\",\"tune\":\"measure\"}"

static void one_name(uv_loop_t *loop, kc_db *db, resolver *r)
{
    proto_kernel_request kr = parse(SOFTMAX_N);
    store(db, &kr, NULL, NULL, sched_a, "// A", KC_CHOSEN_MODEL, 128, 0, NULL); /* the generic set */
    /* n in 1..64: [1,16] [17,20] [21,24] [25,28] [29,32] [33,40] [41,48] [49,56] [57,64] */
    static const int64_t lo[] = {1, 17, 21, 25, 29, 33, 41, 49, 57}, hi[] = {16, 20, 24, 28, 32, 40, 48, 56, 64};
    char keys[9][KC_KEY_LEN + 1];
    /* [1,28]: one measured schedule (workspaces differ: the merged entry takes the largest);
     * [29,32]: another; [33,48]: the first schedule, but ranked by the model only; [49,56] and
     * [57,64] measured again, and [57,64] with another block: the same schedule, other launches. */
    store(db, &kr, &lo[0], &hi[0], sched_a, "// A", KC_CHOSEN_MEASURED, 128, 1024, keys[0]);
    store(db, &kr, &lo[1], &hi[1], sched_a, "// A", KC_CHOSEN_MEASURED, 128, 4096, keys[1]);
    store(db, &kr, &lo[2], &hi[2], sched_a, "// A", KC_CHOSEN_MEASURED, 128, 2048, keys[2]);
    store(db, &kr, &lo[3], &hi[3], sched_a, "// A", KC_CHOSEN_MEASURED, 128, 2048, keys[3]);
    store(db, &kr, &lo[4], &hi[4], sched_b, "// B", KC_CHOSEN_MEASURED, 128, 2048, keys[4]);
    store(db, &kr, &lo[5], &hi[5], sched_a, "// A", KC_CHOSEN_MODEL, 128, 2048, keys[5]);
    store(db, &kr, &lo[6], &hi[6], sched_a, "// A", KC_CHOSEN_MODEL, 128, 2048, keys[6]);
    store(db, &kr, &lo[7], &hi[7], sched_a, "// A", KC_CHOSEN_MEASURED, 128, 2048, keys[7]);
    store(db, &kr, &lo[8], &hi[8], sched_a, "// A", KC_CHOSEN_MEASURED, 256, 2048, keys[8]);

    cJSON *t = table(loop, r, SOFTMAX_N);
    const cJSON *entries = get(get(t, "dispatch"), "entries");
    static const char *const want[] = {"[1,28]", "[29,32]", "[33,40]", "[41,48]", "[49,56]", "[57,64]"};
    CHECK(cJSON_GetArraySize(entries) == 6, "%d entries; want %s %s %s %s %s %s", cJSON_GetArraySize(entries), want[0],
          want[1], want[2], want[3], want[4], want[5]);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        if (i < 6)
            CHECK(!strcmp(range_text(e, "n"), want[i]), "entry %d: %s, want %s", i, range_text(e, "n"), want[i]);
        CHECK(!strcmp(str(e, "state"), "ready"), "entry %d: %s", i, str(e, "state"));
        CHECK((get(e, "merged") != NULL) == (i == 0), "entry %d: merged %s", i, get(e, "merged") ? "yes" : "no");
        i++;
    }
    const cJSON *m = cJSON_GetArrayItem(entries, 0), *set = get(m, "kernel_set");
    /* the fine ranges it covers, in order */
    char *merged = cJSON_PrintUnformatted(get(m, "merged"));
    CHECK(merged && !strcmp(merged, "[{\"n\":[1,16]},{\"n\":[17,20]},{\"n\":[21,24]},{\"n\":[25,28]}]"), "merged %s",
          merged ? merged : "?");
    free(merged);
    /* the set tuned at 28 (the union's largest), valid on [1,28], with the largest workspace */
    CHECK(!strcmp(str(set, "key"), keys[3]), "the merged set is %s, want [25,28]'s %s", str(set, "key"), keys[3]);
    const cJSON *dn = get(get(set, "dims"), "n");
    CHECK(dn && get(dn, "min")->valueint == 1 && get(dn, "max")->valueint == 28 &&
              get(dn, "multiple_of")->valueint == 1,
          "the merged set's dims are the union's");
    CHECK(cJSON_IsNumber(get(set, "workspace_bytes")) && get(set, "workspace_bytes")->valueint == 4096,
          "workspace %d, want the largest (4096)",
          get(set, "workspace_bytes") ? get(set, "workspace_bytes")->valueint : -1);
    CHECK(cJSON_IsTrue(get(set, "measured")), "the merged set is measured");
    /* an entry that stands alone keeps its own set, its dims its own range */
    const cJSON *b = get(cJSON_GetArrayItem(entries, 1), "kernel_set");
    CHECK(!strcmp(str(b, "key"), keys[4]) && get(get(get(b, "dims"), "n"), "min")->valueint == 29, "[29,32]'s set");
    cJSON_Delete(t);

    /* A model-ranked entry between two measured ones of the same schedule keeps them apart, and
     * one that is not ready (no kernel, no job: untuned) does too: [1,28] loses [17,20]. */
    char gone[KC_KEY_LEN + 1];
    memcpy(gone, keys[1], sizeof(gone));
    size_t removed = 0;
    CHECK(kc_remove_key(db, gone, &removed) == 0 && removed == 1, "remove [17,20]'s kernel");
    resolve_invalidate(r);
    t = table(loop, r, SOFTMAX_N);
    entries = get(get(t, "dispatch"), "entries");
    static const char *const want2[] = {"[1,16]", "[17,20]", "[21,28]", "[29,32]"};
    for (i = 0; i < 4; i++) {
        e = cJSON_GetArrayItem(entries, i);
        CHECK(e && !strcmp(range_text(e, "n"), want2[i]), "after the removal, entry %d: %s, want %s", i,
              e ? range_text(e, "n") : "none", want2[i]);
    }
    CHECK(cJSON_GetArraySize(entries) == 8, "%d entries after the removal", cJSON_GetArraySize(entries));
    CHECK(!strcmp(str(cJSON_GetArrayItem(entries, 1), "state"), "untuned"), "[17,20] untuned");
    CHECK(!get(cJSON_GetArrayItem(entries, 0), "merged") && get(cJSON_GetArrayItem(entries, 2), "merged"),
          "[1,16] alone, [21,28] merged");
    cJSON_Delete(t);
}

/* ---- two names --------------------------------------------------------------------------------- */

#define SOFTMAX_BS                                                                                       \
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*s\",128],\"dtype\":\"f16\"}],"                      \
    "\"dims\":{\"b\":{\"min\":16,\"max\":20},\"s\":{\"min\":16,\"max\":24}},\"arch\":\"sm_90\","           \
    "\"tune\":\"measure\"}"

static void two_names(uv_loop_t *loop, kc_db *db, resolver *r)
{
    proto_kernel_request kr = parse(SOFTMAX_BS);
    store(db, &kr, NULL, NULL, sched_a, "// A", KC_CHOSEN_MODEL, 128, 0, NULL);
    /* b: [16,16] [17,20]; s: [16,16] [17,20] [21,24] (with several names, names are cut finely
     * below 16: the ranges start at 16 to keep the table small). Other code (the same schedule) at (b
     * [17,20], s [21,24]) only:
     * along s, b [16,16] merges into one entry [16,24] and b [17,20] into [16,20] and [21,24];
     * along b nothing more (the s ranges differ). */
    static const int64_t blo[] = {16, 17}, bhi[] = {16, 20}, slo[] = {16, 17, 21}, shi[] = {16, 20, 24};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            const int64_t lo[2] = {blo[i], slo[j]}, hi[2] = {bhi[i], shi[j]};
            store(db, &kr, lo, hi, sched_a, i == 1 && j == 2 ? "// A, as generated for another range" : "// A",
                  KC_CHOSEN_MEASURED, 128, 0, NULL);
        }
    cJSON *t = table(loop, r, SOFTMAX_BS);
    const cJSON *entries = get(get(t, "dispatch"), "entries");
    static const char *const want[][2] = {{"[16,16]", "[16,24]"}, {"[17,20]", "[16,20]"}, {"[17,20]", "[21,24]"}};
    CHECK(cJSON_GetArraySize(entries) == 3, "%d entries for two names, want 3", cJSON_GetArraySize(entries));
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(entries, i);
        char b[64];
        snprintf(b, sizeof(b), "%s", e ? range_text(e, "b") : "none");
        CHECK(e && !strcmp(b, want[i][0]) && !strcmp(range_text(e, "s"), want[i][1]), "entry %d: b %s s %s", i, b,
              e ? range_text(e, "s") : "none");
        CHECK(e && (get(e, "merged") != NULL) == (i < 2), "entry %d merged", i);
    }
    /* Every (b, s) pair lies in exactly one entry. */
    for (int b = 16; b <= 20; b++)
        for (int s = 16; s <= 24; s++) {
            int holding = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, entries) {
                const cJSON *rb = get(get(e, "ranges"), "b"), *rs = get(get(e, "ranges"), "s");
                holding += b >= cJSON_GetArrayItem(rb, 0)->valueint && b <= cJSON_GetArrayItem(rb, 1)->valueint &&
                           s >= cJSON_GetArrayItem(rs, 0)->valueint && s <= cJSON_GetArrayItem(rs, 1)->valueint;
            }
            CHECK(holding == 1, "b %d s %d lies in %d entries", b, s, holding);
        }
    const cJSON *set = get(cJSON_GetArrayItem(entries, 0), "kernel_set");
    CHECK(get(get(get(set, "dims"), "s"), "max")->valueint == 24 &&
              get(get(get(set, "dims"), "b"), "max")->valueint == 16,
          "the first merged set's dims are b 16..16, s 16..24");
    cJSON_Delete(t);

    /* Below 16 a name of an op with several names is cut at 1, 2, ..., 8, [9,10], [11,12]: b in
     * 2..12 against one s range is 9 entries (as [2,16] one entry spanned 6x the work), whether
     * the names multiply in one axis or stand on two; one name alone keeps [min,16]. */
    static const char *const two[] = {
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*s\",128],\"dtype\":\"f16\"}],"
        "\"dims\":{\"b\":{\"min\":2,\"max\":12},\"s\":{\"min\":16,\"max\":16}},\"arch\":\"sm_90\","
        "\"tune\":\"measure\"}",
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b\",\"s\",128],\"dtype\":\"f16\"}],"
        "\"dims\":{\"b\":{\"min\":2,\"max\":12},\"s\":{\"min\":16,\"max\":16}},\"arch\":\"sm_90\","
        "\"tune\":\"measure\"}"};
    static const char *const fine[] = {"[2,2]", "[3,3]", "[4,4]", "[5,5]", "[6,6]", "[7,7]", "[8,8]", "[9,10]", "[11,12]"};
    for (int k = 0; k < 2; k++) {
        t = table(loop, r, two[k]);
        entries = get(get(t, "dispatch"), "entries");
        CHECK(cJSON_GetArraySize(entries) == 9, "%s: %d entries for b in 2..12, want 9", k ? "[b,s,128]" : "[b*s,128]",
              cJSON_GetArraySize(entries));
        for (int i = 0; i < 9 && i < cJSON_GetArraySize(entries); i++)
            CHECK(!strcmp(range_text(cJSON_GetArrayItem(entries, i), "b"), fine[i]), "entry %d: b %s, want %s", i,
                  range_text(cJSON_GetArrayItem(entries, i), "b"), fine[i]);
        cJSON_Delete(t);
    }
    t = table(loop, r,
              "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",128],\"dtype\":\"f16\"}],"
              "\"dims\":{\"n\":{\"min\":2,\"max\":20}},\"arch\":\"sm_90\",\"tune\":\"measure\"}");
    entries = get(get(t, "dispatch"), "entries");
    CHECK(cJSON_GetArraySize(entries) == 2 && !strcmp(range_text(cJSON_GetArrayItem(entries, 0), "n"), "[2,16]"),
          "one name: %d entries, the first n %s", cJSON_GetArraySize(entries),
          range_text(cJSON_GetArrayItem(entries, 0), "n"));
    cJSON_Delete(t);

    /* From 128 a name is cut eight times per power of two, where a quarter octave spans more
     * rows than a tile - with several names while their product fits in 512 entries (BERT's b
     * in 1..32 by s in 16..512: 16 x 29), else four times (b in 16..8192 with eighths, and
     * sixteenths from 2048, would take 77 ranges, by n's 12: 37 x 7 with quarters). */
    static const char *const one_fine[] = {"[100,112]", "[113,128]", "[129,144]", "[145,160]",
                                           "[161,176]", "[177,192]", "[193,208]", "[209,224]",
                                           "[225,240]", "[241,256]", "[257,288]", "[289,300]"};
    static const char *const quarters[] = {"[100,112]", "[113,128]", "[129,160]", "[161,192]",
                                           "[193,224]", "[225,256]", "[257,300]"};
    static const char *const grid[] = {
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",128],\"dtype\":\"f16\"}],"
        "\"dims\":{\"n\":{\"min\":100,\"max\":300}},\"arch\":\"sm_90\",\"tune\":\"measure\"}",
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*n\",128],\"dtype\":\"f16\"}],"
        "\"dims\":{\"b\":{\"min\":1,\"max\":1},\"n\":{\"min\":100,\"max\":300}},\"arch\":\"sm_90\","
        "\"tune\":\"measure\"}",
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*n\",128],\"dtype\":\"f16\"}],"
        "\"dims\":{\"b\":{\"min\":16,\"max\":8192},\"n\":{\"min\":100,\"max\":300}},\"arch\":\"sm_90\","
        "\"tune\":\"measure\"}"};
    static const char *const what[] = {"one name", "two names", "two names, wide"};
    static const int n_entries[] = {12, 12, 37 * 7};
    for (int k = 0; k < 3; k++) {
        const char *const *want_n = k == 2 ? quarters : one_fine;
        const int n_want = k == 2 ? 7 : 12;
        t = table(loop, r, grid[k]);
        entries = get(get(t, "dispatch"), "entries");
        CHECK(cJSON_GetArraySize(entries) == n_entries[k], "%s: %d entries, want %d", what[k],
              cJSON_GetArraySize(entries), n_entries[k]);
        /* The last name varies fastest: the first entries hold b's first range and each of n's. */
        for (int i = 0; i < n_want && i < cJSON_GetArraySize(entries); i++)
            CHECK(!strcmp(range_text(cJSON_GetArrayItem(entries, i), "n"), want_n[i]), "%s: entry %d: n %s, want %s",
                  what[k], i, range_text(cJSON_GetArrayItem(entries, i), "n"), want_n[i]);
        cJSON_Delete(t);
    }
    /* BERT's dims: 16 ranges of b by 29 of s, eighths from 128. */
    t = table(loop, r,
              "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*s\",768],\"dtype\":\"f16\"}],"
              "\"dims\":{\"b\":{\"min\":1,\"max\":32},\"s\":{\"min\":16,\"max\":512}},\"arch\":\"sm_90\","
              "\"tune\":\"measure\"}");
    entries = get(get(t, "dispatch"), "entries");
    CHECK(cJSON_GetArraySize(entries) == 16 * 29, "BERT's dims: %d entries, want 16 x 29", cJSON_GetArraySize(entries));
    int eighth = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) eighth += !strcmp(range_text(e, "s"), "[129,144]");
    CHECK(eighth == 16, "BERT's dims: s [129,144] in %d entries, want one per b range", eighth);
    cJSON_Delete(t);
    /* Sixteenths from 2048 where they fit, else eighths before quarters: b in 1..9 (9 ranges)
     * by s in 16..4096 is 9 x 61 with sixteenths (549, too many), 9 x 53 with eighths. */
    t = table(loop, r,
              "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*s\",128],\"dtype\":\"f16\"}],"
              "\"dims\":{\"b\":{\"min\":1,\"max\":9},\"s\":{\"min\":16,\"max\":4096}},\"arch\":\"sm_90\","
              "\"tune\":\"measure\"}");
    entries = get(get(t, "dispatch"), "entries");
    CHECK(cJSON_GetArraySize(entries) == 9 * 53, "b 1..9 by s 16..4096: %d entries, want 9 x 53",
          cJSON_GetArraySize(entries));
    int cut[2] = {0, 0};
    cJSON_ArrayForEach(e, entries) {
        cut[0] += !strcmp(range_text(e, "s"), "[129,144]");
        cut[1] += !strcmp(range_text(e, "s"), "[2049,2304]");
    }
    CHECK(cut[0] == 9 && cut[1] == 9, "b 1..9 by s 16..4096: s [129,144] in %d entries, [2049,2304] in %d", cut[0],
          cut[1]);
    cJSON_Delete(t);
    /* One name takes sixteenths from 2048: [2049,2176], [2177,2304], ... */
    t = table(loop, r,
              "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",128],\"dtype\":\"f16\"}],"
              "\"dims\":{\"n\":{\"min\":2000,\"max\":4096}},\"arch\":\"sm_90\",\"tune\":\"measure\"}");
    entries = get(get(t, "dispatch"), "entries");
    CHECK(cJSON_GetArraySize(entries) == 1 + 16 &&
              !strcmp(range_text(cJSON_GetArrayItem(entries, 1), "n"), "[2049,2176]"),
          "n 2000..4096: %d entries, the second n %s", cJSON_GetArraySize(entries),
          range_text(cJSON_GetArrayItem(entries, 1), "n"));
    cJSON_Delete(t);
}

/* ---- ranges cut where their kernel fits badly --------------------------------------------------- */

#define SOFTMAX_WIDE(extra)                                                                              \
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",256],\"dtype\":\"f16\"}],"                        \
    "\"dims\":{\"n\":{\"min\":2000,\"max\":2304}}," extra "\"arch\":\"sm_90\",\"tune\":\"measure\"}"

/* The entries' ranges as "[lo,hi] [lo,hi] ..." (a static buffer). */
static const char *ranges_of_table(const cJSON *entries)
{
    static char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? " " : "",
                                                            range_text(e, "n"));
    return buf;
}

/* The entry whose n range is `want`, or NULL. */
static const cJSON *entry_at(const cJSON *entries, const char *want)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) if (!strcmp(range_text(e, "n"), want)) return e;
    return NULL;
}

/* A measured entry whose kernel loses more than 3% to the best candidate at some size of its range
 * (range_worst) is answered as two halves that run its kernel ("coarse") until each has its own;
 * the half a request's size lands in gets a job; a half tuned itself stands on its own set, and
 * is cut again where it fits badly and spans 64 sizes; halves merge with neighbours as any fine
 * entry does; 3% or less, or a set not chosen by measurement, is never cut. */
static void refine(uv_loop_t *loop, kc_db *db, resolver *r)
{
    proto_kernel_request kr = parse(SOFTMAX_WIDE(""));
    store(db, &kr, NULL, NULL, sched_a, "// A", KC_CHOSEN_MODEL, 128, 0, NULL); /* the generic set */
    /* n in 2000..2304: [2000,2048] [2049,2176] [2177,2304] (sixteenths from 2048) */
    const int64_t lo1 = 2049, hi1 = 2176, lo2 = 2177, hi2 = 2304, lo0 = 2000, hi0 = 2048;
    char parent[KC_KEY_LEN + 1];
    store_fit(db, &kr, &lo0, &hi0, sched_a, "// A0", KC_CHOSEN_MODEL, 128, 0, 1.5, NULL); /* the model's: never cut */
    store_fit(db, &kr, &lo1, &hi1, sched_a, "// A1", KC_CHOSEN_MEASURED, 128, 0, 1.056, parent);
    store_fit(db, &kr, &lo2, &hi2, sched_a, "// A2", KC_CHOSEN_MEASURED, 128, 0, 1.03, NULL);

    cJSON *t = table(loop, r, SOFTMAX_WIDE(""));
    const cJSON *entries = get(get(t, "dispatch"), "entries");
    CHECK(!strcmp(ranges_of_table(entries), "[2000,2048] [2049,2112] [2113,2176] [2177,2304]"), "cut: %s",
          ranges_of_table(entries));
    for (int i = 1; i <= 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(entries, i);
        char *c = cJSON_PrintUnformatted(get(e, "coarse"));
        CHECK(!strcmp(str(e, "state"), "ready") && c && !strcmp(c, "{\"n\":[2049,2176]}") &&
                  !strcmp(str(get(e, "kernel_set"), "key"), parent) && !get(e, "job") && !get(e, "merged"),
              "half %d: state %s, coarse %s, runs %s", i, str(e, "state"), c ? c : "none",
              str(get(e, "kernel_set"), "key"));
        free(c);
    }
    const cJSON *set = get(cJSON_GetArrayItem(entries, 1), "kernel_set");
    CHECK(cJSON_IsNumber(get(set, "range_worst")) && get(set, "range_worst")->valuedouble == 1.056,
          "the coarse set carries its range_worst");
    CHECK(!get(cJSON_GetArrayItem(entries, 3), "coarse") && !get(cJSON_GetArrayItem(entries, 0), "coarse"),
          "1.03 and a model choice: not cut");
    cJSON_Delete(t);

    /* A size in the lower half: that half gets a job, and still runs the coarse kernel. */
    t = table(loop, r, SOFTMAX_WIDE("\"sizes\":{\"n\":2100},"));
    entries = get(get(t, "dispatch"), "entries");
    const cJSON *low = entry_at(entries, "[2049,2112]"), *up = entry_at(entries, "[2113,2176]");
    CHECK(low && !strcmp(str(low, "state"), "ready") && !strncmp(str(low, "job"), "/v1/jobs/", 9) &&
              get(low, "coarse") && !strcmp(str(get(low, "kernel_set"), "key"), parent),
          "the half holding 2100: state %s, job %s", low ? str(low, "state") : "none", low ? str(low, "job") : "");
    CHECK(up && !get(up, "job") && get(up, "coarse"), "the other half: no job");
    cJSON_Delete(t);
    /* The job (no GPU here: the model's pick, compiled) ends before the stores below replace what
     * it stores. */
    bool running = true;
    for (int i = 0; i < 600 && running; i++) {
        for (int j = 0; j < 50; j++) {
            uv_run(loop, UV_RUN_NOWAIT);
            usleep(1000);
        }
        t = table(loop, r, SOFTMAX_WIDE(""));
        low = entry_at(get(get(t, "dispatch"), "entries"), "[2049,2112]");
        running = low && get(low, "job");
        cJSON_Delete(t);
    }
    CHECK(!running, "the lower half's job ended");

    /* Its own kernel (fitting well) replaces the coarse one there; the upper half, tuned with a
     * bad fit over 64 sizes, is cut again into 32s, each running its kernel. */
    const int64_t lo3 = 2049, hi3 = 2112, lo4 = 2113, hi4 = 2176;
    char own[KC_KEY_LEN + 1], upper[KC_KEY_LEN + 1];
    store_fit(db, &kr, &lo3, &hi3, sched_b, "// B", KC_CHOSEN_MEASURED, 128, 0, 1.01, own);
    store_fit(db, &kr, &lo4, &hi4, sched_b, "// C", KC_CHOSEN_MEASURED, 128, 0, 1.2, upper);
    resolve_invalidate(r);
    t = table(loop, r, SOFTMAX_WIDE(""));
    entries = get(get(t, "dispatch"), "entries");
    CHECK(!strcmp(ranges_of_table(entries), "[2000,2048] [2049,2112] [2113,2144] [2145,2176] [2177,2304]"),
          "cut again: %s", ranges_of_table(entries));
    low = entry_at(entries, "[2049,2112]");
    CHECK(low && !get(low, "coarse") && !strcmp(str(get(low, "kernel_set"), "key"), own), "the lower half's own set");
    const cJSON *q = entry_at(entries, "[2145,2176]");
    char *c = q ? cJSON_PrintUnformatted(get(q, "coarse")) : NULL;
    CHECK(q && c && !strcmp(c, "{\"n\":[2113,2176]}") && !strcmp(str(get(q, "kernel_set"), "key"), upper),
          "a quarter runs the upper half's kernel: coarse %s", c ? c : "none");
    free(c);
    cJSON_Delete(t);

    /* 32 sizes are not cut, however badly they fit; a quarter tuned to the same code as its
     * neighbour above merges with it like any measured entry. */
    const int64_t lo5 = 2113, hi5 = 2144, lo6 = 2145, hi6 = 2176;
    store_fit(db, &kr, &lo5, &hi5, sched_b, "// D", KC_CHOSEN_MEASURED, 128, 0, 2.0, NULL);
    store_fit(db, &kr, &lo6, &hi6, sched_a, "// A2", KC_CHOSEN_MEASURED, 128, 0, 1.01, NULL);
    resolve_invalidate(r);
    t = table(loop, r, SOFTMAX_WIDE(""));
    entries = get(get(t, "dispatch"), "entries");
    CHECK(!strcmp(ranges_of_table(entries), "[2000,2048] [2049,2112] [2113,2144] [2145,2304]"), "merged: %s",
          ranges_of_table(entries));
    const cJSON *m = entry_at(entries, "[2145,2304]");
    char *merged = m ? cJSON_PrintUnformatted(get(m, "merged")) : NULL;
    CHECK(merged && !strcmp(merged, "[{\"n\":[2145,2176]},{\"n\":[2177,2304]}]"), "merged %s", merged ? merged : "?");
    free(merged);
    cJSON_Delete(t);
}

/* With two names an entry is cut along the name whose range spans 64 sizes or more (s here; b's
 * ranges are single sizes), the halves keep the entry's range of the other name, the table still
 * covers every combination exactly once, and the half holding a request's sizes (both names')
 * gets the job. */
#define SOFTMAX_BS_WIDE(extra)                                                                           \
    "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b*s\",128],\"dtype\":\"f16\"}],"                      \
    "\"dims\":{\"b\":{\"min\":1,\"max\":2},\"s\":{\"min\":2049,\"max\":2304}}," extra                    \
    "\"arch\":\"sm_90\",\"tune\":\"measure\"}"

static void refine_two_names(uv_loop_t *loop, kc_db *db, resolver *r)
{
    proto_kernel_request kr = parse(SOFTMAX_BS_WIDE(""));
    store(db, &kr, NULL, NULL, sched_a, "// A", KC_CHOSEN_MODEL, 128, 0, NULL);
    const int64_t lo[2] = {1, 2049}, hi[2] = {1, 2176};
    char parent[KC_KEY_LEN + 1];
    store_fit(db, &kr, lo, hi, sched_a, "// W", KC_CHOSEN_MEASURED, 128, 0, 1.2, parent);
    cJSON *t = table(loop, r, SOFTMAX_BS_WIDE("\"sizes\":{\"b\":1,\"s\":2150},"));
    const cJSON *entries = get(get(t, "dispatch"), "entries");
    /* b 1, 2 by s [2049,2176], [2177,2304]: 4 entries, one of them cut in two */
    CHECK(cJSON_GetArraySize(entries) == 5, "%d entries, want 5", cJSON_GetArraySize(entries));
    int cut = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        if (!get(e, "coarse"))
            continue;
        cut++;
        char b[64];
        snprintf(b, sizeof(b), "%s", range_text(e, "b"));
        char *c = cJSON_PrintUnformatted(get(e, "coarse"));
        const bool upper = !strcmp(range_text(e, "s"), "[2113,2176]");
        CHECK(!strcmp(b, "[1,1]") && (upper || !strcmp(range_text(e, "s"), "[2049,2112]")) && c &&
                  !strcmp(c, "{\"b\":[1,1],\"s\":[2049,2176]}") && !strcmp(str(get(e, "kernel_set"), "key"), parent) &&
                  (get(e, "job") != NULL) == upper,
              "a cut entry: b %s s %s, coarse %s, job %s", b, range_text(e, "s"), c ? c : "none", str(e, "job"));
        free(c);
    }
    CHECK(cut == 2, "%d coarse entries, want 2", cut);
    for (int b = 1; b <= 2; b++)
        for (int s = 2049; s <= 2304; s += 7) {
            int holding = 0;
            cJSON_ArrayForEach(e, entries) {
                const cJSON *rb = get(get(e, "ranges"), "b"), *rs = get(get(e, "ranges"), "s");
                holding += b >= cJSON_GetArrayItem(rb, 0)->valueint && b <= cJSON_GetArrayItem(rb, 1)->valueint &&
                           s >= cJSON_GetArrayItem(rs, 0)->valueint && s <= cJSON_GetArrayItem(rs, 1)->valueint;
            }
            CHECK(holding == 1, "b %d s %d lies in %d entries", b, s, holding);
        }
    cJSON_Delete(t);
}

int main(void)
{
    resolve_fixture fx;
    if (resolve_fixture_open(&fx, "dispatch") < 0)
        return 1;
    one_name(&fx.loop, fx.db, fx.r);
    two_names(&fx.loop, fx.db, fx.r);
    refine(&fx.loop, fx.db, fx.r);
    refine_two_names(&fx.loop, fx.db, fx.r);
    resolve_fixture_close(&fx);
    return check_finish("resolve_dispatch");
}
