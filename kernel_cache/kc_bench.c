/* kernel_cache/kc_bench.c - measures the cache-hit path (kc_selection_get + kc_artifact_get_meta)
 * on a temporary database filled with realistic artifacts. Not a test: prints numbers only.
 * Usage: kc_bench [N_ARTIFACTS] [ITERATIONS]
 */
#include "kernel_cache/kc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int iters = argc > 2 ? atoi(argv[2]) : 200000;
    char dir[] = "/tmp/kc_bench.XXXXXX", path[256], *err = NULL;
    char (*keys)[KC_KEY_LEN + 1], (*op_keys)[KC_KEY_LEN + 1];
    kc_db *db = NULL;
    size_t ptx_len = 60 * 1024, cubin_len = 40 * 1024;
    char *ptx = malloc(ptx_len + 1);
    unsigned char *cubin = malloc(cubin_len);

    if (n < 1 || iters < 1 || !ptx || !cubin || !mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/kernels.db", dir);
    if (kc_open(path, &db, &err) < 0) {
        fprintf(stderr, "kc_open: %s\n", err);
        return 1;
    }
    keys = calloc((size_t)n, sizeof(*keys));
    op_keys = calloc((size_t)n, sizeof(*op_keys));
    for (size_t i = 0; i < ptx_len; i++)
        ptx[i] = (char)('a' + i % 26);
    ptx[ptx_len] = '\0';
    for (size_t i = 0; i < cubin_len; i++)
        cubin[i] = (unsigned char)(i * 7);

    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        char num[32];
        const char *parts[2] = {"bench", num};
        kc_artifact a = {0};
        snprintf(num, sizeof(num), "%d", i);
        kc_key(parts, 2, keys[i]);
        parts[0] = "bench-op";
        kc_key(parts, 2, op_keys[i]);
        memcpy(a.key, keys[i], sizeof(a.key));
        memcpy(a.op_key, op_keys[i], sizeof(a.op_key));
        strcpy(a.op, "matmul");
        strcpy(a.target, "sm_90");
        a.op_json = "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4096,4096],\"dtype\":\"f16\"},"
                    "{\"shape\":[4096,4096],\"dtype\":\"f16\"}]}";
        a.schedule_json = "{\"template\":\"matmul_mma\",\"params\":{\"block_m\":128,\"block_n\":128,"
                          "\"block_k\":32,\"warps\":[2,2],\"stages\":3}}";
        a.launch = (kc_launch){
            .n_kernels = 1,
            .kernels = {{.name = "hidet_matmul", .grid = {32, 32, 1}, .block = {128, 1, 1},
                         .shared_bytes = 49152, .n_args = 3,
                         .args = {KC_BUF_INPUT0, KC_BUF_INPUT0 + 1, KC_BUF_OUTPUT}}},
            .has_output = true, .output_rank = 2, .output_shape = {4096, 4096},
            .output_dtype = "f16"};
        a.provenance_json = "{\"daemon\":\"0.1.0\",\"nvrtc\":\"13.0\"}";
        a.ptx = ptx;
        a.ptx_len = ptx_len;
        a.cubin = cubin;
        a.cubin_len = cubin_len;
        a.choice = KC_CHOSEN_MEASURED;
        a.latency_us = 12.5;
        a.predicted_us = 10.0;
        if (kc_artifact_put(db, &a) < 0) {
            fprintf(stderr, "put: %s\n", kc_errmsg(db));
            return 1;
        }
    }
    double t1 = now_s();
    printf("put:              %8.1f us/artifact (%d artifacts of %zu KiB)\n",
           (t1 - t0) * 1e6 / n, n, (ptx_len + cubin_len) / 1024);

    unsigned seed = 1;
    /* Warm the statement cache and the page cache, as a running daemon would be. */
    for (int i = 0; i < 1000; i++) {
        kc_artifact *a = NULL;
        if (kc_artifact_get_meta(db, keys[i % n], &a) == 0)
            kc_artifact_free(a);
    }
    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        kc_artifact *a = NULL;
        int k = (int)(rand_r(&seed) % (unsigned)n);
        if (kc_artifact_get_meta(db, keys[k], &a) < 0)
            return 1;
        kc_artifact_free(a);
    }
    t1 = now_s();
    printf("get_meta:         %8.2f us/call\n", (t1 - t0) * 1e6 / iters);

    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        char key[KC_KEY_LEN + 1];
        kc_choice choice;
        kc_artifact *a = NULL;
        int k = (int)(rand_r(&seed) % (unsigned)n);
        if (kc_selection_get(db, op_keys[k], key, &choice) < 0 ||
            kc_artifact_get_meta(db, key, &a) < 0)
            return 1;
        kc_artifact_free(a);
    }
    t1 = now_s();
    printf("selection+meta:   %8.2f us/call\n", (t1 - t0) * 1e6 / iters);

    int full_iters = iters / 20 > 0 ? iters / 20 : 1;
    t0 = now_s();
    for (int i = 0; i < full_iters; i++) {
        kc_artifact *a = NULL;
        int k = (int)(rand_r(&seed) % (unsigned)n);
        if (kc_artifact_get(db, keys[k], &a) < 0)
            return 1;
        kc_artifact_free(a);
    }
    t1 = now_s();
    printf("get (verified):   %8.2f us/call (100 KiB of blobs hashed)\n",
           (t1 - t0) * 1e6 / full_iters);

    kc_close(db);
    free(keys);
    free(op_keys);
    free(ptx);
    free(cubin);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
