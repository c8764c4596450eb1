/* tests/integration/it_examples.c - every request in examples/requests/, tuned with the cost model
 * for sm_80 and for sm_90, returns kernels whose PTX ptxas accepts for that arch; the fused
 * matmul+bias+gelu, the scaled, masked softmax and the attention scores with masked_fill(-inf)
 * come back as one kernel each; POST /v1/spaces lists enough valid candidates. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *examples[] = {
    "matmul", "matmul_bias_gelu", "batched_matmul", "conv2d", "softmax",
    "layernorm", "rmsnorm", "reduce_sum", "elementwise", "softmax_scaled_masked", "reduce_sum_axis0",
    "maxpool2d", "attention_scores_masked", "embedding",
    "log_softmax", "reduce_mean_hw", "pad",
};

/* Returns the example with arch and tune replaced (malloc'd JSON). */
static char *with_target(const char *name, const char *arch, const char *tune)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "examples/requests/%s.json", name);
    char *text = ht_read_src(rel);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(j != NULL, "%s does not parse", rel);
    if (!j)
        return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(j, "arch");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "tune");
    cJSON_AddStringToObject(j, "arch", arch);
    cJSON_AddStringToObject(j, "tune", tune);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

static int space_count(const ht_daemon *d, const char *name, const char *arch)
{
    char *body = with_target(name, arch, "model");
    if (!body)
        return -1;
    ht_resp r = ht_post(d, "/v1/spaces", body);
    free(body);
    CHECK(r.status == 200, "spaces %s: %ld %.300s", name, r.status, r.body);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r.json, "count");
    const cJSON *cands = cJSON_GetObjectItemCaseSensitive(r.json, "candidates");
    int n = cJSON_IsNumber(c) ? c->valueint : -1;
    CHECK(cJSON_GetArraySize(cands) == n, "spaces %s: count %d but %d candidates", name, n,
             cJSON_GetArraySize(cands));
    /* Ranked best first by the model. */
    double prev = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, cands) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "predicted_us");
        CHECK(cJSON_IsNumber(p) && p->valuedouble >= prev, "spaces %s not ranked", name);
        if (cJSON_IsNumber(p))
            prev = p->valuedouble;
    }
    ht_resp_free(&r);
    printf("space %-18s %-6s %4d candidates\n", name, arch, n);
    return n;
}

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    const char *archs[] = {"sm_80", "sm_90"};
    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        for (int a = 0; a < 2; a++) {
            char *body = with_target(examples[i], archs[a], "model");
            if (!body)
                continue;
            ht_resp r = ht_post(&d, "/v1/kernels", body);
            free(body);
            CHECK(r.status == 200, "%s %s: %ld %.400s", examples[i], archs[a], r.status, r.body);
            const cJSON *key = cJSON_GetObjectItemCaseSensitive(r.json, "key");
            const cJSON *ks = cJSON_GetObjectItemCaseSensitive(r.json, "kernels");
            if (!strcmp(examples[i], "matmul_bias_gelu") || !strcmp(examples[i], "softmax_scaled_masked") ||
                !strcmp(examples[i], "attention_scores_masked"))
                CHECK(cJSON_GetArraySize(ks) == 1, "fused %s is %d kernels", examples[i],
                         cJSON_GetArraySize(ks));
            if (cJSON_IsString(key)) {
                char path[160];
                snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key->valuestring);
                ht_resp p = ht_get(&d, path);
                CHECK(p.status == 200, "%s ptx: %ld", examples[i], p.status);
                CHECK(ht_ptxas(p.body, p.len, archs[a]) == 0, "%s: ptxas -arch=%s rejects it",
                         examples[i], archs[a]);
                ht_resp_free(&p);
            }
            printf("example %-18s %-6s %s\n", examples[i], archs[a], r.status == 200 ? "ok" : "FAILED");
            ht_resp_free(&r);
        }
    }

    int mm = space_count(&d, "matmul", "sm_90");
    int conv = space_count(&d, "conv2d", "sm_90");
    int sm = space_count(&d, "softmax", "sm_90");
    int ln = space_count(&d, "layernorm", "sm_90");
    CHECK(mm >= 50, "matmul space %d < 50", mm);
    CHECK(conv >= 20, "conv2d space %d < 20", conv);
    CHECK(sm >= 8, "softmax space %d < 8", sm);
    CHECK(ln >= 8, "layernorm space %d < 8", ln);
    int emb = space_count(&d, "embedding", "sm_90");
    CHECK(emb >= 12, "gather (embedding) space %d < 12", emb);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_examples");
}
