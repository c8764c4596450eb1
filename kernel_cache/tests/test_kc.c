/* kernel_cache/tests/test_kc.c - unit tests of the kernel cache (suite unit, kernel_cache).
 * Each test works in its own fresh temporary directory; nothing depends on timing for pass/fail.
 */
#include "kernel_cache/kc.h"
#include "proto/request.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <sodium.h>
#include <sqlite3.h>

#include "kernel_cache/kc_internal.h"
#include "kernel_cache/kc_sign.h"
#include "tests/check.h"

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int r_ = (expr);                                                                           \
        if (r_ != 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #expr, r_,          \
                    strerror(-r_));                                                                \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static char tmpdir[256];

/* What hidetctl cache import --trust-unsigned asks for: a file the caller made. */
static const kc_import_opts local_restore = {.allow_unsigned = true};

/* kc_import with the count of what it stored in *ret_n (untouched on failure). */
static int import_file(kc_db *db, const char *path, const kc_import_opts *o, size_t *ret_n,
                       char **ret_err)
{
    kc_import_info info;
    int r = kc_import(db, path, o, &info, ret_err);
    if (r == 0)
        *ret_n = info.n;
    return r;
}

static void mkpath(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static kc_db *open_db(const char *name)
{
    char path[512], *err = NULL;
    kc_db *db = NULL;
    mkpath(path, sizeof(path), name);
    int r = kc_open(path, &db, &err);
    if (r < 0) {
        fprintf(stderr, "kc_open(%s): %s\n", path, err ? err : "?");
        free(err);
        exit(1);
    }
    return db;
}

/* A deterministic artifact number i, with blobs of a size that depends on i. */
typedef struct {
    kc_artifact a;
    char op_json[64];
    char ptx[4096];
    unsigned char cubin[3000];
} fixture;

/* A wgmma kernel's tensor maps: a batched 3-d one of input0, a 2-d one of the output and a
 * convolution's im2col map of input1. */
static void add_maps(kc_kernel *k)
{
    k->maps[0] = (tuner_tmap){.buf = KC_BUF_INPUT0, .dtype = TUNER_BF16, .rank = 3,
                              .dims = {1000, 77, 3}, .strides = {2016, 2016 * 77}, .box = {64, 128, 1},
                              .element_strides = {1, 1, 1}, .swizzle = 128, .l2_promotion = 256};
    k->maps[1] = (tuner_tmap){.buf = KC_BUF_OUTPUT, .dtype = TUNER_F32, .rank = 2, .dims = {1ull << 32, 5},
                              .strides = {1ull << 34}, .box = {32, 64}, .element_strides = {1, 2},
                              .swizzle = 128, .oob_fill = TUNER_TMAP_OOB_NAN};
    k->maps[2] = (tuner_tmap){.buf = KC_BUF_INPUT0 + 1, .mode = TUNER_TMAP_IM2COL, .dtype = TUNER_F16, .rank = 4,
                              .dims = {128, 10, 13, 3}, .strides = {256, 2560, 33280},
                              .element_strides = {1, 1, 2, 1}, .lower_corner = {-2, -1}, .upper_corner = {-6, -1},
                              .channels_per_pixel = 64, .pixels_per_column = 256, .swizzle = 128};
    k->n_maps = 3;
}

static void make_artifact(fixture *f, int i, const char *op, const char *target)
{
    char num[32];
    const char *parts[2] = {"artifact", num};
    memset(f, 0, sizeof(*f));
    snprintf(num, sizeof(num), "%d", i);
    parts[0] = "op";
    kc_key(parts, 2, f->a.op_key);
    snprintf(f->a.op, sizeof(f->a.op), "%s", op);
    snprintf(f->a.target, sizeof(f->a.target), "%s", target);
    /* A record as the daemon writes it: the key derived from op key and schedule, the op named
     * in its op JSON (import and verify check both). */
    snprintf(f->op_json, sizeof(f->op_json), "{\"op\":\"%s\"}", op);
    f->a.op_json = f->op_json;
    f->a.schedule_json = "{\"template\":\"matmul_mma\"}";
    kc_artifact_key(f->a.op_key, f->a.schedule_json, f->a.key);
    f->a.provenance_json = "{\"daemon\":\"test\"}";
    /* One kernel, or (every third artifact) two sharing a workspace. */
    kc_launch *l = &f->a.launch;
    l->n_kernels = i % 3 == 2 ? 2 : 1;
    for (int k = 0; k < l->n_kernels; k++) {
        snprintf(l->kernels[k].name, sizeof(l->kernels[k].name), "hd_kernel_%d_%d", i, k);
        l->kernels[k].grid[0] = 1 + (uint32_t)i;
        l->kernels[k].grid[1] = 2;
        l->kernels[k].grid[2] = 1;
        l->kernels[k].block[0] = 128;
        l->kernels[k].block[1] = 1;
        l->kernels[k].block[2] = 1;
        l->kernels[k].shared_bytes = 1024u * (uint32_t)k;
        l->kernels[k].n_args = 3;
        l->kernels[k].args[0] = KC_BUF_INPUT0 + k;
        l->kernels[k].args[1] = KC_BUF_OUTPUT;
        l->kernels[k].args[2] = KC_BUF_WORKSPACE;
    }
    /* Every fourth: the first kernel also takes tensor maps of its input and the output. */
    if (i % 4 == 3)
        add_maps(&l->kernels[0]);
    l->workspace_bytes = l->n_kernels == 2 ? 4096u + (uint64_t)i : 0;
    l->has_output = true;
    l->output_rank = 2;
    l->output_shape[0] = 1;
    l->output_shape[1] = 2147483647 - i; /* the widest dimension a request may have */
    strcpy(l->output_dtype, "bf16");
    size_t pl = 100 + (size_t)(i * 37) % 3000;
    for (size_t k = 0; k < pl; k++)
        f->ptx[k] = (char)('A' + (k + (size_t)i) % 26);
    f->ptx[pl] = '\0';
    f->a.ptx = f->ptx;
    f->a.ptx_len = pl;
    size_t cl = 50 + (size_t)(i * 53) % 2900;
    for (size_t k = 0; k < cl; k++)
        f->cubin[k] = (unsigned char)(k * 31 + (size_t)i);
    f->a.cubin = f->cubin;
    f->a.cubin_len = cl;
    f->a.choice = i % 2 == 0 ? KC_CHOSEN_MEASURED : i % 4 == 1 ? KC_CHOSEN_MODEL : KC_CHOSEN_DEFAULT;
    f->a.latency_us = f->a.choice == KC_CHOSEN_MEASURED ? 10.0 + i : -1.0;
    f->a.predicted_us = 9.5 + i;
    f->a.created_at = 1700000000 + i;
    f->a.last_used_at = 1700000000 + i;
}

static bool launch_eq(const kc_launch *a, const kc_launch *b)
{
    for (int k = 0; k < a->n_kernels && k < b->n_kernels; k++) {
        if (a->kernels[k].n_maps != b->kernels[k].n_maps)
            return false;
        for (int m = 0; m < a->kernels[k].n_maps; m++)
            if (!tuner_tmap_equal(&a->kernels[k].maps[m], &b->kernels[k].maps[m]))
                return false;
    }
    if (a->n_kernels != b->n_kernels || a->workspace_bytes != b->workspace_bytes ||
        a->has_output != b->has_output)
        return false;
    if (a->has_output && (a->output_rank != b->output_rank ||
                          strcmp(a->output_dtype, b->output_dtype) != 0 ||
                          memcmp(a->output_shape, b->output_shape,
                                 sizeof(a->output_shape[0]) * (size_t)a->output_rank) != 0))
        return false;
    /* A dynamic launch's parts (zero in a static one). */
    if (a->n_dims != b->n_dims || memcmp(a->dims, b->dims, sizeof(a->dims)) != 0 ||
        memcmp(a->output_sym, b->output_sym, sizeof(a->output_sym)) != 0 || a->range_worst != b->range_worst)
        return false;
    for (int k = 0; k < a->n_kernels; k++)
        for (int d = 0; d < 3; d++)
            if (memcmp(&a->kernels[k].grid_rule[d], &b->kernels[k].grid_rule[d],
                       sizeof(kc_grid_rule)) != 0)
                return false;
    for (int k = 0; k < a->n_kernels; k++) {
        const kc_kernel *x = &a->kernels[k], *y = &b->kernels[k];
        if (strcmp(x->name, y->name) != 0 || memcmp(x->grid, y->grid, sizeof(x->grid)) != 0 ||
            memcmp(x->block, y->block, sizeof(x->block)) != 0 ||
            x->shared_bytes != y->shared_bytes || x->n_args != y->n_args ||
            memcmp(x->args, y->args, sizeof(x->args[0]) * (size_t)x->n_args) != 0)
            return false;
    }
    return true;
}

/* A dynamic op's artifact (issue 39): make_artifact's, with two named dims n (1..8192) and s
 * (16..4096, multiples of 16), an output [n, 4096] and a first kernel that takes both sizes and
 * sizes its grid from them: x = 2 * ceil(n / 128) (128 at max), y = min(1000, ceil(n * s /
 * 65536)) (512 at max). */
static void make_dynamic(fixture *f, int i, const char *op, const char *target)
{
    make_artifact(f, i, op, target);
    kc_launch *l = &f->a.launch;
    l->n_dims = 2;
    l->dims[0] = (kc_dim){.name = "n", .min = 1, .max = 8192, .multiple_of = 1};
    l->dims[1] = (kc_dim){.name = "s", .min = 16, .max = 4096, .multiple_of = 16};
    l->output_shape[0] = 8192;
    l->output_shape[1] = 4096;
    l->output_sym[0] = 1;
    kc_kernel *k = &l->kernels[0];
    k->args[k->n_args++] = KC_ARG_DIM0;
    k->args[k->n_args++] = KC_ARG_DIM0 + 1;
    k->grid_rule[0] = (kc_grid_rule){.dims = 1, .coef = 1, .div = 128, .mul = 2, .cap = 0};
    k->grid[0] = 128;
    k->grid_rule[1] = (kc_grid_rule){.dims = 3, .coef = 1, .div = 65536, .mul = 1, .cap = 1000};
    k->grid[1] = 512;
}

static void put_n(kc_db *db, int from, int to, const char *op, const char *target)
{
    fixture f;
    for (int i = from; i < to; i++) {
        make_artifact(&f, i, op, target);
        CHECK_OK(kc_artifact_put(db, &f.a));
    }
}

/* Runs SQL directly on the file, the way damage or another binary would. */
static void raw_sql(const char *name, const char *sql)
{
    char path[512];
    sqlite3 *s = NULL;
    mkpath(path, sizeof(path), name);
    CHECK(sqlite3_open(path, &s) == SQLITE_OK);
    sqlite3_busy_timeout(s, 5000);
    char *e = NULL;
    if (sqlite3_exec(s, sql, NULL, NULL, &e) != SQLITE_OK) {
        fprintf(stderr, "raw sql failed: %s\n", e);
        failures++;
    }
    sqlite3_free(e);
    sqlite3_close(s);
}

/* raw_sql with the statement formatted (a row key substituted, ...). */
static void raw_sqlf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void raw_sqlf(const char *name, const char *fmt, ...)
{
    char sql[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    CHECK(n > 0 && (size_t)n < sizeof(sql), "statement too long: %s", fmt);
    raw_sql(name, sql);
}

static void test_key(void)
{
    char a[KC_KEY_LEN + 1], b[KC_KEY_LEN + 1];
    const char *p1[] = {"ab", "c"}, *p2[] = {"a", "bc"}, *p3[] = {"ab", "c"};
    kc_key(p1, 2, a);
    kc_key(p2, 2, b);
    CHECK(strlen(a) == KC_KEY_LEN);
    CHECK(strcmp(a, b) != 0);
    kc_key(p3, 2, b);
    CHECK(strcmp(a, b) == 0);
    const char *p4[] = {NULL}, *p5[] = {""};
    kc_key(p4, 1, a);
    kc_key(p5, 1, b);
    CHECK(strcmp(a, b) != 0);
    /* Known answer: SHA-256("abc"). */
    kc_sha256_hex("abc", 3, a);
    CHECK(strcmp(a, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
}

static void test_round_trip(void)
{
    kc_db *db = open_db("rt/sub/kernels.db");
    fixture f;
    kc_artifact *g = NULL;
    char sel[KC_KEY_LEN + 1];
    kc_choice choice = KC_CHOSEN_DEFAULT;
    struct stat sb;
    char dir[512];

    mkpath(dir, sizeof(dir), "rt/sub");
    CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);

    make_artifact(&f, 4, "matmul", "sm_90a");
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK_OK(kc_artifact_get(db, f.a.key, &g));
    if (g) {
        CHECK(strcmp(g->key, f.a.key) == 0);
        CHECK(strcmp(g->op_key, f.a.op_key) == 0);
        CHECK(strcmp(g->op, "matmul") == 0 && strcmp(g->target, "sm_90a") == 0);
        CHECK(strcmp(g->op_json, f.a.op_json) == 0);
        CHECK(strcmp(g->schedule_json, f.a.schedule_json) == 0);
        CHECK(launch_eq(&g->launch, &f.a.launch));
        CHECK(strcmp(g->provenance_json, f.a.provenance_json) == 0);
        CHECK(g->ptx_len == f.a.ptx_len && memcmp(g->ptx, f.a.ptx, g->ptx_len) == 0);
        CHECK(g->ptx[g->ptx_len] == '\0');
        CHECK(g->cubin_len == f.a.cubin_len && memcmp(g->cubin, f.a.cubin, g->cubin_len) == 0);
        CHECK(g->choice == KC_CHOSEN_MEASURED && g->latency_us == 14.0 && g->predicted_us == 13.5);
        CHECK(g->created_at == f.a.created_at);
        /* last_used_at was old: the read refreshed it. */
        CHECK(g->last_used_at >= (int64_t)time(NULL) - 5);
    }
    kc_artifact_free(g);
    g = NULL;
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    CHECK(g && g->ptx == NULL && g->cubin == NULL && g->ptx_len == 0);
    CHECK(g && launch_eq(&g->launch, &f.a.launch));
    kc_artifact_free(g);
    g = NULL;

    /* Not measured: latency comes back negative. */
    make_artifact(&f, 5, "softmax", "sm_80");
    f.a.created_at = 0;
    f.a.last_used_at = 0;
    f.a.cubin_len = 0;
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK_OK(kc_artifact_get(db, f.a.key, &g));
    CHECK(g && g->latency_us < 0 && g->choice == KC_CHOSEN_MODEL && g->cubin_len == 0);
    CHECK(g && launch_eq(&g->launch, &f.a.launch) && g->launch.n_kernels == 2);
    CHECK(g && g->created_at >= (int64_t)time(NULL) - 5);
    kc_artifact_free(g);
    g = NULL;

    /* peek reads and verifies without counting a use. */
    make_artifact(&f, 6, "matmul", "sm_90");
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK_OK(kc_artifact_peek(db, f.a.key, &g));
    CHECK(g && g->last_used_at == f.a.last_used_at && g->ptx_len == f.a.ptx_len);
    kc_artifact_free(g);
    g = NULL;
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    CHECK(g && g->last_used_at > f.a.last_used_at);
    kc_artifact_free(g);
    g = NULL;

    CHECK(kc_artifact_get(db, "0000", &g) == -ENOENT && g == NULL);
    CHECK(kc_artifact_get_meta(db, "0000", &g) == -ENOENT);
    CHECK(kc_selection_get(db, "0000", sel, &choice) == -ENOENT);
    CHECK(kc_artifact_put(db, NULL) == -EINVAL);
    kc_artifact bad = {0};
    CHECK(kc_artifact_put(db, &bad) == -EINVAL);
    /* A launch or choice out of range is refused before anything is written. */
    make_artifact(&f, 7, "matmul", "sm_90");
    f.a.launch.kernels[0].block[1] = 0;
    CHECK(kc_artifact_put(db, &f.a) == -EINVAL);
    make_artifact(&f, 7, "matmul", "sm_90");
    f.a.launch.kernels[0].args[1] = (kc_buf)(KC_BUF_WORKSPACE + 1);
    CHECK(kc_artifact_put(db, &f.a) == -EINVAL);
    make_artifact(&f, 7, "matmul", "sm_90");
    f.a.launch.n_kernels = KC_MAX_KERNELS + 1;
    CHECK(kc_artifact_put(db, &f.a) == -EINVAL);
    make_artifact(&f, 7, "matmul", "sm_90");
    f.a.choice = (kc_choice)3;
    CHECK(kc_artifact_put(db, &f.a) == -EINVAL);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -ENOENT);
    /* Damaged launch rows are refused on read, not handed out. */
    make_artifact(&f, 8, "matmul", "sm_90");
    CHECK_OK(kc_artifact_put(db, &f.a));
    kc_close(db);
    raw_sqlf("rt/sub/kernels.db", "UPDATE launch_kernels SET args = x'0863' WHERE artifact_key = '%s'",
             f.a.key);
    db = open_db("rt/sub/kernels.db");
    CHECK(kc_artifact_get_meta(db, f.a.key, &g) == -EBADMSG && g == NULL);
    CHECK(strstr(kc_errmsg(db), "launch") != NULL);
    kc_artifact_free(NULL);
    kc_close(NULL);
    kc_close(db);
}

static void test_selection(void)
{
    kc_db *db = open_db("sel.db");
    fixture f1, f2;
    char sel[KC_KEY_LEN + 1];
    kc_choice choice = KC_CHOSEN_MEASURED;
    kc_stats st;

    make_artifact(&f1, 1, "matmul", "sm_90");
    make_artifact(&f2, 2, "matmul", "sm_90");
    memcpy(f2.a.op_key, f1.a.op_key, sizeof(f1.a.op_key));
    CHECK_OK(kc_artifact_put(db, &f1.a));
    CHECK_OK(kc_selection_get(db, f1.a.op_key, sel, &choice));
    CHECK(strcmp(sel, f1.a.key) == 0 && choice == KC_CHOSEN_MODEL);
    /* A second artifact for the same op key (e.g. the measured winner) takes over. */
    CHECK_OK(kc_artifact_put(db, &f2.a));
    CHECK_OK(kc_selection_get(db, f1.a.op_key, sel, &choice));
    CHECK(strcmp(sel, f2.a.key) == 0 && choice == KC_CHOSEN_MEASURED);
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.artifacts == 2 && st.selections == 1);
    /* Removing the chosen artifact removes the selection: never point at nothing. */
    kc_filter f = {.key_prefix = f2.a.key};
    size_t removed = 0;
    CHECK_OK(kc_remove(db, &f, &removed));
    CHECK(removed == 1);
    CHECK(kc_selection_get(db, f1.a.op_key, sel, &choice) == -ENOENT);
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.artifacts == 1 && st.selections == 0);
    kc_close(db);
}

static void test_corruption(void)
{
    kc_db *db = open_db("corrupt.db");
    fixture f1, f2;
    kc_artifact *g = NULL;
    size_t checked = 0, nbad = 0;
    kc_problem *bad = NULL;

    make_artifact(&f1, 1, "matmul", "sm_90");
    make_artifact(&f2, 2, "matmul", "sm_90");
    CHECK_OK(kc_artifact_put(db, &f1.a));
    CHECK_OK(kc_artifact_put(db, &f2.a));
    CHECK_OK(kc_verify(db, &checked, &bad, &nbad));
    CHECK(checked == 2 && nbad == 0);
    kc_problems_free(bad, nbad);
    bad = NULL;

    /* Flip the PTX of #1 behind the cache's back. */
    raw_sqlf("corrupt.db", "UPDATE artifacts SET ptx = CAST('tampered' AS BLOB) WHERE key = '%s'", f1.a.key);
    CHECK(kc_artifact_get(db, f1.a.key, &g) == -EBADMSG && g == NULL);
    CHECK(strstr(kc_errmsg(db), "PTX") != NULL);
    /* Metadata reads do not touch the blobs. */
    CHECK_OK(kc_artifact_get_meta(db, f1.a.key, &g));
    kc_artifact_free(g);
    g = NULL;
    /* The cubin too. */
    raw_sqlf("corrupt.db", "UPDATE artifacts SET cubin = zeroblob(10) WHERE key = '%s'", f2.a.key);
    CHECK(kc_artifact_get(db, f2.a.key, &g) == -EBADMSG && g == NULL);

    /* Tensor maps that are not whole records, or a record the encoder would refuse: the launch
     * is unreadable, not silently without maps. */
    fixture f3;
    make_artifact(&f3, 3, "matmul", "sm_90a");
    CHECK_OK(kc_artifact_put(db, &f3.a));
    CHECK_OK(kc_artifact_get_meta(db, f3.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &f3.a.launch));
    kc_artifact_free(g);
    g = NULL;
    raw_sqlf("corrupt.db", "UPDATE launch_kernels SET maps = substr(maps, 1, 100) WHERE artifact_key = '%s'",
             f3.a.key);
    CHECK(kc_artifact_get_meta(db, f3.a.key, &g) == -EBADMSG && g == NULL);
    /* Whole records of zeros: rank 0, no map. */
    raw_sqlf("corrupt.db", "UPDATE launch_kernels SET maps = zeroblob(120) WHERE artifact_key = '%s'", f3.a.key);
    CHECK(kc_artifact_get_meta(db, f3.a.key, &g) == -EBADMSG && g == NULL);
    size_t removed = 0;
    CHECK_OK(kc_remove_key(db, f3.a.key, &removed));
    CHECK(removed == 1);

    CHECK_OK(kc_verify(db, &checked, &bad, &nbad));
    CHECK(checked == 2 && nbad == 2);
    if (bad && nbad == 2) {
        CHECK((strcmp(bad[0].key, f1.a.key) == 0 && strcmp(bad[1].key, f2.a.key) == 0) ||
              (strcmp(bad[1].key, f1.a.key) == 0 && strcmp(bad[0].key, f2.a.key) == 0));
        for (int i = 0; i < 2; i++)
            CHECK(strstr(bad[i].reason, "digest") != NULL);
    }
    kc_problems_free(bad, nbad);

    /* A corrupt artifact is never exported. */
    char out[512], *err = NULL;
    mkpath(out, sizeof(out), "corrupt.export");
    CHECK(kc_export(db, NULL, out, NULL, NULL, &err) == -EBADMSG);
    CHECK(err != NULL);
    free(err);
    CHECK(access(out, F_OK) != 0);
    kc_close(db);
}

static void test_trials(void)
{
    kc_db *db = open_db("trials.db");
    char tk[KC_KEY_LEN + 1];
    const char *parts[] = {"tuning"};
    kc_trial *t = NULL;
    size_t n = 99;
    static const struct { int cand; kc_trial_status st; double lat; } in[] = {
        {0, KC_TRIAL_OK, 30.0}, {1, KC_TRIAL_FAULT, -1}, {2, KC_TRIAL_OK, 10.0},
        {3, KC_TRIAL_WRONG, 5.0}, {4, KC_TRIAL_OK, 20.0}, {5, KC_TRIAL_TIMEOUT, -1},
    };

    kc_key(parts, 1, tk);
    CHECK_OK(kc_trials_get(db, tk, &t, &n));
    CHECK(n == 0);
    kc_trials_free(t, n);
    t = NULL;
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        kc_trial tr = {.candidate = in[i].cand, .schedule_json = "{\"bm\":64}", .status = in[i].st,
                       .latency_us = in[i].lat, .max_rel_err = 1e-3,
                       .reason = in[i].st == KC_TRIAL_OK ? NULL : "it broke"};
        snprintf(tr.device, sizeof(tr.device), "NVIDIA H100");
        CHECK_OK(kc_trial_put(db, tk, "space1", &tr));
    }
    /* Replacing candidate 0 with a faster time reorders it. */
    kc_trial tr0 = {.candidate = 0, .schedule_json = "{}", .status = KC_TRIAL_OK,
                    .latency_us = 15.0, .max_rel_err = 0};
    CHECK_OK(kc_trial_put(db, tk, "space1", &tr0));
    CHECK_OK(kc_trials_get(db, tk, &t, &n));
    CHECK(n == 6);
    if (n == 6) {
        CHECK(t[0].candidate == 2 && t[0].latency_us == 10.0);
        CHECK(t[1].candidate == 0 && t[1].latency_us == 15.0);
        CHECK(t[2].candidate == 4);
        /* Failures last, whatever their time. */
        for (int i = 3; i < 6; i++)
            CHECK(t[i].status != KC_TRIAL_OK);
        CHECK(t[0].reason == NULL && strcmp(t[0].device, "NVIDIA H100") == 0);
        CHECK(t[3].reason && strcmp(t[3].reason, "it broke") == 0);
        CHECK(t[0].measured_at > 0);
    }
    kc_trials_free(t, n);
    kc_stats st;
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.trials == 6);
    CHECK(strcmp(kc_trial_status_name(KC_TRIAL_SLOWER), "slower") == 0);
    kc_close(db);
}

static void test_filters_remove(void)
{
    kc_db *db = open_db("filters.db");
    kc_summary *s = NULL;
    size_t n = 0, removed = 0;

    put_n(db, 0, 5, "matmul", "sm_90");
    put_n(db, 5, 8, "softmax", "sm_80");
    put_n(db, 8, 10, "matmul", "sm_80");

    CHECK_OK(kc_list(db, NULL, &s, &n));
    CHECK(n == 10);
    /* Most recently used first. */
    for (size_t i = 1; i < n; i++)
        CHECK(s[i - 1].last_used_at >= s[i].last_used_at);
    free(s);
    kc_filter f = {.target = "sm_80"};
    CHECK_OK(kc_list(db, &f, &s, &n));
    CHECK(n == 5);
    free(s);
    f = (kc_filter){.target = "sm_80", .op = "matmul"};
    CHECK_OK(kc_list(db, &f, &s, &n));
    CHECK(n == 2);
    for (size_t i = 0; i < n; i++)
        CHECK(strcmp(s[i].op, "matmul") == 0 && strcmp(s[i].target, "sm_80") == 0 &&
              s[i].bytes > 0);
    free(s);
    f = (kc_filter){.older_than = 1700000003};
    CHECK_OK(kc_list(db, &f, &s, &n));
    CHECK(n == 3);
    free(s);
    f = (kc_filter){.limit = 4};
    CHECK_OK(kc_list(db, &f, &s, &n));
    CHECK(n == 4);
    /* Prefix match. */
    kc_filter pf = {.key_prefix = n ? s[0].key : "x"};
    char first[KC_KEY_LEN + 1];
    snprintf(first, sizeof(first), "%s", n ? s[0].key : "");
    free(s);
    first[10] = '\0';
    pf.key_prefix = first;
    CHECK_OK(kc_list(db, &pf, &s, &n));
    CHECK(n == 1);
    free(s);

    f = (kc_filter){.op = "softmax"};
    CHECK_OK(kc_remove(db, &f, &removed));
    CHECK(removed == 3);
    f = (kc_filter){.op = "softmax"};
    CHECK_OK(kc_list(db, &f, &s, &n));
    CHECK(n == 0);
    free(s);
    f = (kc_filter){.older_than = 1700000002};
    CHECK_OK(kc_remove(db, &f, &removed));
    CHECK(removed == 2);
    kc_stats st;
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.artifacts == 5 && st.selections == 5);
    kc_close(db);
}

static void test_prune(void)
{
    kc_db *db = open_db("prune.db");
    kc_stats st;
    size_t removed = 0;
    fixture f;
    kc_artifact *g = NULL;

    put_n(db, 0, 10, "matmul", "sm_90");
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.artifacts == 10);
    /* Using #0 makes it the most recently used: pruning must keep it. */
    make_artifact(&f, 0, "matmul", "sm_90");
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    kc_artifact_free(g);
    uint64_t total = st.bytes;
    CHECK_OK(kc_prune_to_size(db, total, &removed));
    CHECK(removed == 0);
    CHECK_OK(kc_prune_to_size(db, total / 2, &removed));
    CHECK(removed > 0 && removed < 10);
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.bytes <= total / 2 && st.artifacts == 10 - removed);
    g = NULL;
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    kc_artifact_free(g);
    /* The oldest (#1, then #2...) went first. */
    make_artifact(&f, 1, "matmul", "sm_90");
    g = NULL;
    CHECK(kc_artifact_get_meta(db, f.a.key, &g) == -ENOENT);
    make_artifact(&f, 9, "matmul", "sm_90");
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    kc_artifact_free(g);
    CHECK_OK(kc_prune_to_size(db, 0, &removed));
    CHECK_OK(kc_stats_get(db, &st));
    CHECK(st.artifacts == 0 && st.bytes == 0 && st.selections == 0);
    CHECK_OK(kc_vacuum(db));
    kc_close(db);
}

static void test_export_import(void)
{
    kc_db *db = open_db("exp-src.db");
    kc_db *dst = open_db("exp-dst.db");
    char path[512], *err = NULL;
    size_t n = 0;
    kc_stats st;

    put_n(db, 0, 7, "matmul", "sm_90");
    put_n(db, 7, 9, "conv2d", "sm_80");
    mkpath(path, sizeof(path), "all.export");
    CHECK_OK(kc_export(db, NULL, path, NULL, &n, &err));
    CHECK(n == 9);
    free(err);
    err = NULL;
    CHECK_OK(import_file(dst, path, &local_restore, &n, &err));
    CHECK(n == 9);
    free(err);
    err = NULL;
    for (int i = 0; i < 9; i++) {
        fixture f;
        kc_artifact *g = NULL;
        char sel[KC_KEY_LEN + 1];
        kc_choice choice;
        make_artifact(&f, i, i < 7 ? "matmul" : "conv2d", i < 7 ? "sm_90" : "sm_80");
        CHECK_OK(kc_artifact_get(dst, f.a.key, &g));
        if (g) {
            CHECK(g->ptx_len == f.a.ptx_len && memcmp(g->ptx, f.a.ptx, g->ptx_len) == 0);
            CHECK(g->cubin_len == f.a.cubin_len &&
                  memcmp(g->cubin, f.a.cubin, g->cubin_len) == 0);
            CHECK(g->choice == f.a.choice && g->latency_us == f.a.latency_us);
            CHECK(launch_eq(&g->launch, &f.a.launch));
            CHECK(g->predicted_us == f.a.predicted_us && g->created_at == f.a.created_at);
            CHECK(strcmp(g->op, f.a.op) == 0 && strcmp(g->op_json, f.a.op_json) == 0);
        }
        kc_artifact_free(g);
        CHECK_OK(kc_selection_get(dst, f.a.op_key, sel, &choice));
        CHECK(strcmp(sel, f.a.key) == 0 && choice == f.a.choice);
    }
    /* Filtered export. */
    kc_filter fl = {.op = "conv2d"};
    mkpath(path, sizeof(path), "conv.export");
    CHECK_OK(kc_export(db, &fl, path, NULL, &n, &err));
    CHECK(n == 2);
    free(err);
    err = NULL;

    /* Empty export imports as nothing. */
    kc_db *empty = open_db("exp-empty.db");
    mkpath(path, sizeof(path), "empty.export");
    CHECK_OK(kc_export(empty, NULL, path, NULL, &n, &err));
    CHECK(n == 0);
    CHECK_OK(import_file(empty, path, &local_restore, &n, &err));
    CHECK(n == 0);
    kc_close(empty);

    /* Flipped bytes anywhere: refused, and nothing stored. */
    char src[512];
    mkpath(src, sizeof(src), "all.export");
    FILE *fp = fopen(src, "rb");
    CHECK(fp != NULL);
    if (fp) {
        fseek(fp, 0, SEEK_END);
        long len = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        unsigned char *buf = malloc((size_t)len);
        CHECK(fread(buf, 1, (size_t)len, fp) == (size_t)len);
        fclose(fp);
        kc_db *victim = open_db("exp-victim.db");
        long positions[] = {0, 5, 29, 30, 100, len / 3, len / 2, len - 80, len - 66, len - 10,
                            len - 2, len - 1};
        for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
            long pos = positions[p];
            for (int bit = 0; bit < 8; bit += 3) {
                char bad[512];
                mkpath(bad, sizeof(bad), "flipped.export");
                FILE *o = fopen(bad, "wb");
                buf[pos] ^= (unsigned char)(1u << bit);
                fwrite(buf, 1, (size_t)len, o);
                fclose(o);
                buf[pos] ^= (unsigned char)(1u << bit);
                size_t got = 12345;
                int r = import_file(victim, bad, &local_restore, &got, &err);
                if (r == 0)
                    fprintf(stderr, "flipped bit %d at %ld of %ld accepted\n", bit, pos, len);
                CHECK(r < 0 && got == 12345 && err != NULL);
                free(err);
                err = NULL;
                CHECK_OK(kc_stats_get(victim, &st));
                CHECK(st.artifacts == 0 && st.selections == 0);
            }
        }
        /* Truncated and extended files too. */
        char bad[512];
        mkpath(bad, sizeof(bad), "cut.export");
        FILE *o = fopen(bad, "wb");
        fwrite(buf, 1, (size_t)len - 1, o);
        fclose(o);
        CHECK(import_file(victim, bad, &local_restore, &n, &err) < 0);
        free(err);
        err = NULL;
        o = fopen(bad, "wb");
        fwrite(buf, 1, (size_t)len, o);
        fputs("x\n", o);
        fclose(o);
        CHECK(import_file(victim, bad, &local_restore, &n, &err) < 0);
        free(err);
        err = NULL;
        CHECK_OK(kc_stats_get(victim, &st));
        CHECK(st.artifacts == 0);
        kc_close(victim);
        free(buf);
    }
    CHECK(import_file(dst, "/nonexistent/file", &local_restore, &n, &err) < 0);
    free(err);
    kc_close(db);
    kc_close(dst);
}

static void test_schema(void)
{
    char path[512], *err = NULL;
    kc_db *db = open_db("schema.db");
    kc_close(db);
    /* Reopening an up-to-date file is a no-op. */
    db = open_db("schema.db");
    kc_close(db);
    raw_sql("schema.db", "UPDATE schema_version SET version = 99");
    mkpath(path, sizeof(path), "schema.db");
    db = NULL;
    CHECK(kc_open(path, &db, &err) < 0 && db == NULL);
    CHECK(err && strstr(err, "newer") != NULL && strstr(err, "99") != NULL);
    free(err);
    err = NULL;

    /* A file that is not a database. */
    mkpath(path, sizeof(path), "notadb.db");
    FILE *fp = fopen(path, "wb");
    for (int i = 0; i < 200; i++)
        fputs("this is not a sqlite database ", fp);
    fclose(fp);
    CHECK(kc_open(path, &db, &err) < 0 && db == NULL);
    CHECK(err && strstr(err, "not a SQLite database") != NULL);
    free(err);
    err = NULL;
    CHECK(kc_open(NULL, &db, &err) == -EINVAL);
    free(err);
}

static void test_launch_types(void)
{
    kc_buf b;
    CHECK(strcmp(kc_buf_name(KC_BUF_INPUT0 + 7), "input7") == 0);
    CHECK(strcmp(kc_buf_name(KC_BUF_OUTPUT), "output") == 0);
    CHECK(strcmp(kc_buf_name(KC_BUF_WORKSPACE), "workspace") == 0);
    CHECK(kc_buf_name((kc_buf)(KC_BUF_WORKSPACE + 1)) == NULL && kc_buf_name((kc_buf)-1) == NULL);
    for (int i = 0; i <= KC_BUF_WORKSPACE; i++)
        CHECK(kc_buf_parse(kc_buf_name((kc_buf)i), &b) == 0 && (int)b == i);
    b = KC_BUF_OUTPUT;
    CHECK(kc_buf_parse("input8", &b) == -EINVAL && kc_buf_parse("stack", &b) == -EINVAL &&
          kc_buf_parse("", &b) == -EINVAL && kc_buf_parse(NULL, &b) == -EINVAL &&
          b == KC_BUF_OUTPUT);
    CHECK(KC_CHOSEN_DEFAULT < KC_CHOSEN_MODEL && KC_CHOSEN_MODEL < KC_CHOSEN_MEASURED);
    CHECK(strcmp(kc_choice_name(KC_CHOSEN_DEFAULT), "default") == 0);
    CHECK(strcmp(kc_choice_name((kc_choice)7), "unknown") == 0);

    /* Typed -> text -> typed is the identity; the text is what schema 1 and export files hold. */
    fixture f;
    make_artifact(&f, 2, "reduce", "sm_90");
    char *text = NULL;
    kc_launch back;
    const char *why = NULL;
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strcmp(text, "{\"kernels\":[{\"name\":\"hd_kernel_2_0\",\"grid\":[3,2,1],"
                                "\"block\":[128,1,1],\"shared_bytes\":0,\"args\":[\"input0\","
                                "\"output\",\"workspace\"]},{\"name\":\"hd_kernel_2_1\","
                                "\"grid\":[3,2,1],\"block\":[128,1,1],\"shared_bytes\":1024,"
                                "\"args\":[\"input1\",\"output\",\"workspace\"]}],"
                                "\"workspace_bytes\":4098,\"output\":{\"shape\":[1,2147483645],"
                                "\"dtype\":\"bf16\"}}") == 0);
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch));
    free(text);
    f.a.launch.kernels[1].grid[0] = 0;
    CHECK(kc_launch_json(&f.a.launch, &text) == -EINVAL);

    /* Tensor maps: their members and buffer after the arguments, and back. */
    make_artifact(&f, 3, "matmul", "sm_90a");
    CHECK(f.a.launch.kernels[0].n_maps == 3);
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strstr(text, "\"args\":[\"input0\",\"output\",\"workspace\"],\"maps\":[{\"dtype\":\"bf16\","
                               "\"dims\":[1000,77,3],\"strides\":[2016,155232],\"box\":[64,128,1],"
                               "\"element_strides\":[1,1,1],\"swizzle\":128,\"l2_promotion\":256,"
                               "\"oob_fill\":\"zero\",\"buffer\":\"input0\"},"),
          "%s", text);
    CHECK(text && strstr(text, ",{\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[128,10,13,3],"
                               "\"strides\":[256,2560,33280],\"element_strides\":[1,1,2,1],\"lower_corner\":[-2,-1],"
                               "\"upper_corner\":[-6,-1],\"channels_per_pixel\":64,\"pixels_per_column\":256,"
                               "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\",\"buffer\":\"input1\"}]"),
          "%s", text);
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch) && back.kernels[0].maps[1].buf == KC_BUF_OUTPUT &&
          back.kernels[0].maps[1].dims[0] == 1ull << 32 && back.kernels[0].maps[1].oob_fill == TUNER_TMAP_OOB_NAN &&
          back.kernels[0].maps[2].mode == TUNER_TMAP_IM2COL && back.kernels[0].maps[2].upper_corner[0] == -6);
    free(text);
    /* A map the encoder would refuse is not a launch (box wider than the swizzle span). */
    f.a.launch.kernels[0].maps[0].box[0] = 128;
    CHECK(kc_launch_check(&f.a.launch) == -EINVAL && kc_launch_json(&f.a.launch, &text) == -EINVAL);
    f.a.launch.kernels[0].maps[0].box[0] = 64;
    f.a.launch.kernels[0].maps[0].buf = KC_BUF_WORKSPACE + 1;
    CHECK(kc_launch_check(&f.a.launch) == -EINVAL);

    /* What schema 1 and old export files may hold, and what the daemon refused to answer. */
    static const char *const bad[] = {
        "not json",
        "{\"kernels\":{}}",
        "{\"kernels\":[{\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1],\"block\":[1,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[0,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1.5,1,1],\"block\":[1,1,1],\"args\":[0]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[42]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"input9\"]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"stack\"]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1]}]}",
        "{\"kernels\":[],\"workspace_bytes\":-1}",
        "{\"kernels\":[],\"output\":{\"shape\":[2],\"dtype\":7}}",
        /* maps: not a list, a member too many, no buffer, a buffer of no name, a bad stride */
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0],\"maps\":{}}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0],\"maps\":[{\"buffer\":"
        "\"input0\",\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],"
        "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\",\"interleave\":0}]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0],\"maps\":[{"
        "\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],"
        "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0],\"maps\":[{\"buffer\":"
        "\"stack\",\"dtype\":\"f16\",\"dims\":[64],\"strides\":[],\"box\":[64],\"element_strides\":[1],"
        "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[0],\"maps\":[{\"buffer\":"
        "\"input0\",\"dtype\":\"f16\",\"dims\":[64,2],\"strides\":[100],\"box\":[64,1],"
        "\"element_strides\":[1,1],\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}]}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        back.n_kernels = 99;
        CHECK(kc__launch_from_json(bad[i], NULL, &back, &why) == -EBADMSG && why &&
              back.n_kernels == 99);
    }
    /* Arguments by number (TUNER_BUF_* values), no output: the op's output answers. */
    CHECK_OK(kc__launch_from_json("{\"kernels\":[{\"name\":\"k\",\"grid\":[2,1,1],"
                                  "\"block\":[64,1,1],\"args\":[0,2,8,9]}]}",
                                  "{\"output\":{\"align\":16,\"dtype\":\"f32\",\"shape\":[3,5]}}",
                                  &back, &why));
    CHECK(back.n_kernels == 1 && back.kernels[0].n_args == 4 &&
          back.kernels[0].args[1] == KC_BUF_INPUT0 + 2 && back.kernels[0].args[2] == KC_BUF_OUTPUT &&
          back.kernels[0].args[3] == KC_BUF_WORKSPACE && back.kernels[0].shared_bytes == 0);
    CHECK(back.has_output && back.output_rank == 2 && back.output_shape[1] == 5 &&
          strcmp(back.output_dtype, "f32") == 0 && back.workspace_bytes == 0);
    CHECK_OK(kc__launch_from_json("{\"kernels\":[]}", "{\"op\":\"x\"}", &back, &why));
    CHECK(!back.has_output);

    CHECK(kc__choice_from_v1(true, "{\"mode\":\"none\"}") == KC_CHOSEN_MEASURED);
    CHECK(kc__choice_from_v1(false, "{\"daemon\":\"0.1.0\",\"mode\":\"none\"}") == KC_CHOSEN_DEFAULT);
    CHECK(kc__choice_from_v1(false, "{\"mode\":\"measure\"}") == KC_CHOSEN_MODEL);
    CHECK(kc__choice_from_v1(false, "not json") == KC_CHOSEN_MODEL);
    CHECK(kc__choice_from_v1(false, NULL) == KC_CHOSEN_MODEL);
}

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, fp) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(fp);
    return buf;
}

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* A schema-1 row the way another build could have written it (empty blobs), with a selection. */
static void v1_row(const char *db, const char *key, const char *op_json, const char *launch,
                   const char *prov)
{
    char sql[2048];
    snprintf(sql, sizeof(sql),
             "INSERT INTO artifacts VALUES ('%s', 'op-%s', 'matmul', 'sm_90', '%s', '{}', '%s', 0,"
             " NULL, 1.5, '%s', 1, 1, 10, '" EMPTY_SHA "', '" EMPTY_SHA "', x'', x'');"
             "INSERT INTO selections VALUES ('op-%s', '%s', 0, 1);",
             key, key, op_json, launch, prov, key, key);
    raw_sql(db, sql);
}

static int64_t raw_int(const char *name, const char *sql)
{
    char path[512];
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    int64_t v = -1;
    mkpath(path, sizeof(path), name);
    if (sqlite3_open(path, &s) == SQLITE_OK && sqlite3_prepare_v2(s, sql, -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

/* The schema-1 fixture (a cache written by hidetd before typed launches) and a few hand-made
 * rows are converted exactly, once; rows that cannot be converted leave their op to be re-tuned. */
static void test_migrate_v1(void)
{
    const char *src = getenv("HIDETD_SRC");
    char path[600];
    if (!src) {
        printf("HIDETD_SRC not set; skipping the schema-1 migration test\n");
        return;
    }
    snprintf(path, sizeof(path), "%s/kernel_cache/tests/data/v1.sql", src);
    char *dump = read_text(path);
    CHECK(dump != NULL);
    if (!dump)
        return;
    raw_sql("v1.db", dump);
    free(dump);
    v1_row("v1.db", "legacy", "{\"output\":{\"align\":16,\"dtype\":\"f32\",\"shape\":[3,5]}}",
           "{\"kernels\":[{\"name\":\"k\",\"grid\":[2,1,1],\"block\":[64,1,1],\"args\":[0,2,8]}],"
           "\"workspace_bytes\":0}", "{\"mode\":\"none\"}");
    v1_row("v1.db", "noout", "{}", "{\"kernels\":[],\"workspace_bytes\":0}", "{}");
    v1_row("v1.db", "bad1", "{}", "not json", "{\"mode\":\"model\"}");
    v1_row("v1.db", "bad2", "{}",
           "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"stack\"]}]}",
           "{}");

    /* What schema 1 said, read before the migration. */
    static const struct {
        const char *key;
        kc_choice choice;
    } want[] = {
        {"d97b81c1a312db273c0f167a489f3fc5881ae8d263c30af194937d7d2341d1fe", KC_CHOSEN_MODEL},
        {"045fbc0e22b616fc874c56e391d801b932284773007c84c186c5edf5194f2704", KC_CHOSEN_DEFAULT},
        {"1fc8e91c976fdda42e1a3e473fc65ae658e48dcc36d602c520627f7879d4b83d", KC_CHOSEN_MODEL},
        {"cfb355f46355265ba69a6cc0b813a5c5144337f57377074db46ae77c1f40c7ed", KC_CHOSEN_MEASURED},
    };
    char *old_launch[4] = {0};
    char old_op_key[4][KC_KEY_LEN + 1];
    {
        sqlite3 *s = NULL;
        sqlite3_stmt *q = NULL;
        mkpath(path, sizeof(path), "v1.db");
        CHECK(sqlite3_open(path, &s) == SQLITE_OK);
        CHECK(sqlite3_prepare_v2(s, "SELECT launch_json, op_key FROM artifacts WHERE key = ?1", -1,
                                 &q, NULL) == SQLITE_OK);
        for (int i = 0; i < 4; i++) {
            sqlite3_bind_text(q, 1, want[i].key, -1, SQLITE_STATIC);
            CHECK(sqlite3_step(q) == SQLITE_ROW);
            old_launch[i] = strdup((const char *)sqlite3_column_text(q, 0));
            snprintf(old_op_key[i], sizeof(old_op_key[i]), "%s", sqlite3_column_text(q, 1));
            sqlite3_reset(q);
        }
        sqlite3_finalize(q);
        sqlite3_close(s);
    }

    for (int round = 0; round < 2; round++) {
        /* Round 1 re-opens the migrated file: nothing changes. */
        kc_db *db = open_db("v1.db");
        CHECK(raw_int("v1.db", "SELECT max(version) FROM schema_version") == KC_SCHEMA_VERSION);
        for (int i = 0; i < 4; i++) {
            kc_artifact *g = NULL;
            char sel[KC_KEY_LEN + 1], *text = NULL;
            kc_choice choice = (kc_choice)-1;
            CHECK_OK(kc_artifact_get(db, want[i].key, &g)); /* digests verified */
            if (!g)
                continue;
            CHECK(g->choice == want[i].choice);
            CHECK((g->latency_us >= 0) == (want[i].choice == KC_CHOSEN_MEASURED));
            /* The typed launch renders back to exactly the text schema 1 stored. */
            CHECK_OK(kc_launch_json(&g->launch, &text));
            CHECK(text && old_launch[i] && strcmp(text, old_launch[i]) == 0);
            free(text);
            CHECK_OK(kc_selection_get(db, old_op_key[i], sel, &choice));
            CHECK(strcmp(sel, want[i].key) == 0 && choice == want[i].choice);
            kc_artifact_free(g);
        }
        /* The split-column reduction, field by field: two kernels sharing a workspace. */
        kc_artifact *g = NULL;
        CHECK_OK(kc_artifact_get_meta(db, want[1].key, &g));
        if (g) {
            const kc_launch *l = &g->launch;
            CHECK(l->n_kernels == 2 && l->workspace_bytes == 196608);
            CHECK(strcmp(l->kernels[0].name, "hd_reduce_cols_part") == 0 &&
                  strcmp(l->kernels[1].name, "hd_reduce_cols_fin") == 0);
            CHECK(l->kernels[0].grid[0] == 2 && l->kernels[0].grid[1] == 64 &&
                  l->kernels[0].grid[2] == 1 && l->kernels[0].block[0] == 512);
            CHECK(l->kernels[1].grid[0] == 3 && l->kernels[1].block[0] == 256);
            for (int k = 0; k < 2; k++)
                CHECK(l->kernels[k].n_args == 3 && l->kernels[k].args[0] == KC_BUF_INPUT0 &&
                      l->kernels[k].args[1] == KC_BUF_OUTPUT &&
                      l->kernels[k].args[2] == KC_BUF_WORKSPACE);
            CHECK(l->has_output && l->output_rank == 1 && l->output_shape[0] == 768 &&
                  strcmp(l->output_dtype, "f16") == 0);
        }
        kc_artifact_free(g);
        /* The matmul with bias and GELU: four arguments. */
        g = NULL;
        CHECK_OK(kc_artifact_get_meta(db, want[0].key, &g));
        if (g) {
            const kc_kernel *k = &g->launch.kernels[0];
            CHECK(g->launch.n_kernels == 1 && k->shared_bytes == 24576 && k->n_args == 4 &&
                  k->args[0] == KC_BUF_INPUT0 && k->args[1] == KC_BUF_INPUT0 + 1 &&
                  k->args[2] == KC_BUF_INPUT0 + 2 && k->args[3] == KC_BUF_OUTPUT);
            CHECK(g->launch.output_rank == 2 && g->launch.output_shape[0] == 128 &&
                  g->launch.output_shape[1] == 512);
        }
        kc_artifact_free(g);
        /* Hand-made rows: numbers as arguments and the op's output; no output at all. */
        char key[KC_KEY_LEN + 1];
        kc_choice choice;
        g = NULL;
        CHECK_OK(kc_artifact_get(db, "legacy", &g));
        if (g) {
            CHECK(g->choice == KC_CHOSEN_DEFAULT && g->launch.n_kernels == 1 &&
                  g->launch.kernels[0].n_args == 3 &&
                  g->launch.kernels[0].args[1] == KC_BUF_INPUT0 + 2 &&
                  g->launch.kernels[0].args[2] == KC_BUF_OUTPUT);
            CHECK(g->launch.has_output && g->launch.output_rank == 2 &&
                  g->launch.output_shape[0] == 3 && strcmp(g->launch.output_dtype, "f32") == 0);
        }
        kc_artifact_free(g);
        CHECK_OK(kc_selection_get(db, "op-legacy", key, &choice));
        CHECK(choice == KC_CHOSEN_DEFAULT);
        g = NULL;
        CHECK_OK(kc_artifact_get(db, "noout", &g));
        CHECK(g && g->choice == KC_CHOSEN_MODEL && !g->launch.has_output && g->launch.n_kernels == 0);
        kc_artifact_free(g);
        /* Unconvertible rows are gone with their selections: those ops are tuned again. */
        g = NULL;
        CHECK(kc_artifact_get(db, "bad1", &g) == -ENOENT && kc_artifact_get(db, "bad2", &g) == -ENOENT);
        CHECK(kc_selection_get(db, "op-bad1", key, NULL) == -ENOENT);
        CHECK(kc_selection_get(db, "op-bad2", key, NULL) == -ENOENT);
        /* Trials are untouched. */
        kc_trial *t = NULL;
        size_t n = 0;
        CHECK_OK(kc_trials_get(db, "723198667b00222607c4dd1abbac59cc622d07a19245fb5af9419a833a4c34c0",
                               &t, &n));
        CHECK(n == 4 && t && t[0].status == KC_TRIAL_OK && t[0].latency_us == 215.7 &&
              t[3].status == KC_TRIAL_SLOWER);
        kc_trials_free(t, n);
        kc_stats st;
        CHECK_OK(kc_stats_get(db, &st));
        CHECK(st.artifacts == 6 && st.selections == 6 && st.trials == 4);
        /* Verify reads them as the daemon does: the hand-made rows have keys the daemon never
         * writes (not hex), and say so; the daemon's own records hold. */
        size_t checked = 0, nbad = 0;
        kc_problem *bad = NULL;
        CHECK_OK(kc_verify(db, &checked, &bad, &nbad));
        CHECK(checked == 6 && nbad == 2);
        for (size_t i = 0; i < nbad; i++) {
            CHECK(strcmp(bad[i].key, "legacy") == 0 || strcmp(bad[i].key, "noout") == 0);
            CHECK(strstr(bad[i].reason, "not 64 lowercase hex") != NULL);
        }
        kc_problems_free(bad, nbad);
        kc_close(db);
        CHECK(raw_int("v1.db", "SELECT count(*) FROM launch_kernels") == 6);
        CHECK(raw_int("v1.db", "SELECT count(*) FROM pragma_foreign_key_check") == 0);
    }
    /* Foreign keys are enforced again after the migration: removing an artifact removes its
     * launch rows and its selection. */
    kc_db *db = open_db("v1.db");
    kc_filter f = {.key_prefix = want[1].key};
    size_t removed = 0;
    CHECK_OK(kc_remove(db, &f, &removed));
    CHECK(removed == 1);
    kc_close(db);
    CHECK(raw_int("v1.db", "SELECT count(*) FROM launch_kernels") == 4);
    CHECK(raw_int("v1.db", "SELECT count(*) FROM selections") == 5);
    for (int i = 0; i < 4; i++)
        free(old_launch[i]);
}

/* An export file written before schema 2 (no "choice"; the launch with numeric arguments and
 * without its output) still imports, converted; one whose launch does not convert is refused. */
static void test_import_v1_file(void)
{
    kc_db *db = open_db("import-v1.db");
    char path[512], *err = NULL, o1[KC_KEY_LEN + 1], k1[KC_KEY_LEN + 1];
    const char *parts[] = {"v1-file-op"};
    size_t n = 0;
    kc_key(parts, 1, o1);
    kc_artifact_key(o1, "{}", k1);
    for (int bad = 0; bad < 2; bad++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", k1);
        cJSON_AddStringToObject(o, "op_key", o1);
        cJSON_AddStringToObject(o, "op", "matmul");
        cJSON_AddStringToObject(o, "target", "sm_90");
        cJSON_AddStringToObject(o, "op_json",
                                "{\"op\":\"matmul\",\"output\":{\"dtype\":\"f16\",\"shape\":[4]}}");
        cJSON_AddStringToObject(o, "schedule_json", "{}");
        cJSON_AddStringToObject(o, "launch_json",
                                bad ? "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],"
                                      "\"block\":[1,1,1],\"args\":[\"stack\"]}]}"
                                    : "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],"
                                      "\"block\":[32,1,1],\"args\":[0,8]}],\"workspace_bytes\":0}");
        cJSON_AddFalseToObject(o, "measured");
        cJSON_AddNullToObject(o, "latency_us");
        cJSON_AddNumberToObject(o, "predicted_us", 2.5);
        cJSON_AddStringToObject(o, "provenance_json", "{\"mode\":\"none\"}");
        cJSON_AddNumberToObject(o, "created_at", 5);
        cJSON_AddNumberToObject(o, "last_used_at", 6);
        cJSON_AddStringToObject(o, "ptx_sha256", EMPTY_SHA);
        cJSON_AddStringToObject(o, "cubin_sha256", EMPTY_SHA);
        cJSON_AddStringToObject(o, "ptx", "");
        cJSON_AddStringToObject(o, "cubin", "");
        char *line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        char body[4096], hex[KC_KEY_LEN + 1];
        snprintf(body, sizeof(body), "hidetd-kernel-cache-export 1\n%s\n", line);
        free(line);
        kc_sha256_hex(body, strlen(body), hex);
        mkpath(path, sizeof(path), bad ? "v1-bad.export" : "v1.export");
        FILE *fp = fopen(path, "wb");
        fprintf(fp, "%send 1 %s\n", body, hex);
        fclose(fp);
        if (bad) {
            CHECK(import_file(db, path, &local_restore, &n, &err) == -EBADMSG);
            CHECK(err && strstr(err, "launch description") != NULL);
        } else {
            CHECK_OK(import_file(db, path, &local_restore, &n, &err));
            CHECK(n == 1);
        }
        free(err);
        err = NULL;
    }
    kc_artifact *g = NULL;
    kc_choice choice;
    char sel[KC_KEY_LEN + 1];
    CHECK_OK(kc_artifact_get(db, k1, &g));
    if (g) {
        CHECK(g->choice == KC_CHOSEN_DEFAULT && g->launch.n_kernels == 1 &&
              g->launch.kernels[0].block[0] == 32 && g->launch.kernels[0].args[1] == KC_BUF_OUTPUT);
        CHECK(g->launch.has_output && g->launch.output_rank == 1 && g->launch.output_shape[0] == 4);
    }
    kc_artifact_free(g);
    CHECK_OK(kc_selection_get(db, o1, sel, &choice));
    CHECK(choice == KC_CHOSEN_DEFAULT);
    kc_close(db);
}

static void test_two_handles(void)
{
    kc_db *a = open_db("shared.db");
    kc_db *b = open_db("shared.db");
    int64_t v1 = 0, v2 = 0, v3 = 0;
    fixture f;
    kc_artifact *g = NULL;

    CHECK_OK(kc_data_version(b, &v1));
    make_artifact(&f, 3, "matmul", "sm_90");
    CHECK_OK(kc_artifact_put(a, &f.a));
    CHECK_OK(kc_artifact_get(b, f.a.key, &g));
    kc_artifact_free(g);
    CHECK_OK(kc_data_version(b, &v2));
    CHECK(v2 != v1);
    /* b's own writes do not change b's data_version; a sees them. */
    CHECK_OK(kc_data_version(a, &v1));
    kc_filter fl = {.key_prefix = f.a.key};
    size_t removed = 0;
    CHECK_OK(kc_remove(b, &fl, &removed));
    CHECK(removed == 1);
    CHECK_OK(kc_data_version(a, &v3));
    CHECK(v3 != v1);
    g = NULL;
    CHECK(kc_artifact_get(a, f.a.key, &g) == -ENOENT);
    kc_close(a);
    kc_close(b);
}

/* The child writes artifacts in a loop until killed. */
static void durability_child(const char *name)
{
    kc_db *db = open_db(name);
    fixture f;
    for (int i = 0;; i++) {
        make_artifact(&f, i % 500, "matmul", "sm_90");
        f.a.latency_us = i;
        if (kc_artifact_put(db, &f.a) < 0)
            _exit(3);
        if (i % 7 == 0) {
            kc_trial t = {.candidate = i, .schedule_json = "{}", .latency_us = i};
            if (kc_trial_put(db, f.a.key, "s", &t) < 0)
                _exit(4);
        }
    }
}

static void test_kill9(void)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    for (int round = 0; round < 3; round++) {
        char name[64];
        snprintf(name, sizeof(name), "kill9-%d.db", round);
        kc_db *pre = open_db(name); /* created and migrated before the child starts */
        kc_close(pre);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            durability_child(name);
        /* A random moment: 20..220 ms of writing. The outcome must be the same at any moment. */
        struct timespec ts = {0, (long)(20 + rand_r(&seed) % 200) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        kc_db *db = open_db(name);
        size_t checked = 0, nbad = 1;
        CHECK_OK(kc_verify(db, &checked, NULL, &nbad));
        CHECK(nbad == 0);
        kc_summary *s = NULL;
        size_t n = 0;
        CHECK_OK(kc_list(db, NULL, &s, &n));
        CHECK(n == checked);
        for (size_t i = 0; i < n; i++) {
            kc_artifact *g = NULL;
            char sel[KC_KEY_LEN + 1];
            CHECK_OK(kc_artifact_get(db, s[i].key, &g));
            if (g)
                CHECK_OK(kc_selection_get(db, g->op_key, sel, NULL));
            kc_artifact_free(g);
        }
        free(s);
        kc_close(db);
    }
}


/* ---- trust: keys, signed exports, checked imports, the quarantine, deep verify ------------- */

static void test_sign(void)
{
    char prefix[512], path[600], *err = NULL;
    kc_sign_public pub, pub2, pub_of;
    kc_sign_secret sec;
    struct stat sb;

    mkpath(prefix, sizeof(prefix), "signer");
    CHECK_OK(kc_sign_keygen(prefix, &pub, &err));
    snprintf(path, sizeof(path), "%s.key", prefix);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK_OK(kc_sign_load_secret(path, &sec, &err));
    snprintf(path, sizeof(path), "%s.pub", prefix);
    CHECK_OK(kc_sign_load_public(path, &pub2, &err));
    kc_sign_public_of(&sec, &pub_of);
    CHECK(strlen(pub.id) == KC_SIGN_ID_LEN && strcmp(pub.id, pub2.id) == 0 &&
          strcmp(pub.id, sec.id) == 0 && memcmp(pub.key, pub2.key, sizeof(pub.key)) == 0 &&
          memcmp(pub.key, pub_of.key, sizeof(pub.key)) == 0);
    /* A key is never overwritten. */
    CHECK(kc_sign_keygen(prefix, NULL, &err) == -EEXIST && err);
    free(err);
    err = NULL;

    unsigned char sig[KC_SIGN_BYTES];
    CHECK_OK(kc_sign_detached(&sec, "ctx", "message", 7, sig));
    CHECK_OK(kc_sign_verify(&pub, 1, pub.id, "ctx", "message", 7, sig, NULL));
    CHECK(kc_sign_verify(&pub, 1, pub.id, "other", "message", 7, sig, NULL) == -EBADMSG);
    CHECK(kc_sign_verify(&pub, 1, pub.id, "ctx", "messagf", 7, sig, NULL) == -EBADMSG);
    CHECK(kc_sign_verify(&pub, 1, "0000000000000000", "ctx", "message", 7, sig, NULL) == -ENOKEY);
    CHECK(kc_sign_verify(NULL, 0, pub.id, "ctx", "message", 7, sig, NULL) == -ENOKEY);
    kc_sign_secret_wipe(&sec);

    /* A secret key others can read is refused; so is a public key under another key's id. */
    snprintf(path, sizeof(path), "%s.key", prefix);
    chmod(path, 0644);
    CHECK(kc_sign_load_secret(path, &sec, &err) == -EPERM);
    free(err);
    err = NULL;
    chmod(path, 0600);
    char text[256], forged[512];
    snprintf(path, sizeof(path), "%s.pub", prefix);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(text, sizeof(text), f));
    if (f)
        fclose(f);
    text[sizeof("hidetd-ed25519-public ") - 1] ^= 1;
    mkpath(forged, sizeof(forged), "forged.pub");
    f = fopen(forged, "w");
    fputs(text, f);
    fclose(f);
    CHECK(kc_sign_load_public(forged, &pub2, &err) == -EBADMSG);
    free(err);
    err = NULL;

    /* A trusted-keys directory: every *.pub, nothing else; a missing one adds nothing. */
    char dir[512], p2[600];
    mkpath(dir, sizeof(dir), "trusted.d");
    mkdir(dir, 0700);
    snprintf(p2, sizeof(p2), "%s/a", dir);
    CHECK_OK(kc_sign_keygen(p2, NULL, &err));
    snprintf(p2, sizeof(p2), "%s/b", dir);
    CHECK_OK(kc_sign_keygen(p2, NULL, &err));
    kc_sign_public *keys = NULL;
    size_t n = 0;
    CHECK_OK(kc_sign_load_dir(dir, &keys, &n, &err));
    CHECK(n == 2 && keys && strcmp(keys[0].id, keys[1].id) != 0);
    mkpath(dir, sizeof(dir), "absent.d");
    CHECK_OK(kc_sign_load_dir(dir, &keys, &n, &err));
    CHECK(n == 2);
    free(keys);
}

/* The records of an export file as JSON objects (an array), for forging variants of it. */
static cJSON *read_records(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char line[1 << 16];
    cJSON *a = cJSON_CreateArray();
    if (!f)
        return a;
    while (fgets(line, sizeof(line), f))
        if (line[0] == '{')
            cJSON_AddItemToArray(a, cJSON_Parse(line));
    fclose(f);
    return a;
}

/* Writes records as an export file with correct digests (what anyone can compute), signed by
 * sk when it is non-NULL. */
static void write_export(const char *path, const cJSON *records, const kc_sign_secret *sk)
{
    char *body = strdup("hidetd-kernel-cache-export 2\n"), hex[KC_KEY_LEN + 1], trailer[128];
    const cJSON *r;
    int n = 0;
    cJSON_ArrayForEach(r, records) {
        char *line = cJSON_PrintUnformatted(r), *nb = NULL;
        if (asprintf(&nb, "%s%s\n", body, line) < 0)
            nb = NULL;
        free(body);
        free(line);
        body = nb;
        n++;
    }
    kc_sha256_hex(body, strlen(body), hex);
    snprintf(trailer, sizeof(trailer), "end %d %s\n", n, hex);
    FILE *f = fopen(path, "wb");
    fprintf(f, "%s%s", body, trailer);
    if (sk) {
        unsigned char sig[KC_SIGN_BYTES];
        char b64[128];
        kc_sign_detached(sk, "hidetd-kernel-cache-export 2", trailer, strlen(trailer), sig);
        sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), sodium_base64_VARIANT_ORIGINAL);
        fprintf(f, "sig ed25519 %s %s\n", sk->id, b64);
    }
    fclose(f);
    free(body);
}

/* Replaces a record's PTX with text, its digest recomputed. */
static void set_ptx(cJSON *rec, const char *text)
{
    char sha[KC_KEY_LEN + 1], b64[256];
    kc_sha256_hex(text, strlen(text), sha);
    sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)text, strlen(text),
                      sodium_base64_VARIANT_ORIGINAL);
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "ptx", cJSON_CreateString(b64));
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "ptx_sha256", cJSON_CreateString(sha));
}

static void set_str(cJSON *rec, const char *name, const char *v)
{
    cJSON_ReplaceItemInObjectCaseSensitive(rec, name, cJSON_CreateString(v));
}

/* What a database holds, to show that a refused import changed nothing. */
static char *db_digest(kc_db *db)
{
    kc_summary *v = NULL;
    size_t n = 0;
    char *out = strdup("");
    kc_list(db, NULL, &v, &n);
    for (size_t i = 0; i < n; i++) {
        kc_artifact *g = NULL;
        char sel[KC_KEY_LEN + 1] = "", ph[KC_KEY_LEN + 1] = "", *nb = NULL;
        kc_choice c = KC_CHOSEN_DEFAULT;
        if (kc_artifact_peek(db, v[i].key, &g) == 0) {
            kc_sha256_hex(g->ptx, g->ptx_len, ph);
            kc_selection_get(db, g->op_key, sel, &c);
        }
        if (asprintf(&nb, "%s%s:%s:%d:%s:%d\n", out, v[i].key, ph, g ? (int)g->choice : -1, sel,
                     (int)c) < 0)
            nb = NULL;
        kc_artifact_free(g);
        free(out);
        out = nb;
    }
    free(v);
    return out;
}

static void test_import_trust(void)
{
    kc_db *src = open_db("trust-src.db");
    char pa[512], pb[512], path[600], *err = NULL;
    kc_sign_public pub_a, pub_b;
    kc_sign_secret sec_a, sec_b;
    kc_import_info info;
    size_t n = 0;

    put_n(src, 0, 4, "matmul", "sm_90");
    mkpath(pa, sizeof(pa), "trusted-a");
    mkpath(pb, sizeof(pb), "untrusted-b");
    CHECK_OK(kc_sign_keygen(pa, &pub_a, &err));
    CHECK_OK(kc_sign_keygen(pb, &pub_b, &err));
    snprintf(path, sizeof(path), "%s.key", pa);
    CHECK_OK(kc_sign_load_secret(path, &sec_a, &err));
    snprintf(path, sizeof(path), "%s.key", pb);
    CHECK_OK(kc_sign_load_secret(path, &sec_b, &err));
    const kc_import_opts trust_a = {.trusted = &pub_a, .n_trusted = 1};
    const kc_import_opts trust_b = {.trusted = &pub_b, .n_trusted = 1};

    /* Signed by a trusted key: imported, and the signer is named. */
    char signed_path[512], unsigned_path[512];
    mkpath(signed_path, sizeof(signed_path), "signed.export");
    CHECK_OK(kc_export(src, NULL, signed_path, &sec_a, &n, &err));
    CHECK(n == 4);
    kc_db *dst = open_db("trust-dst.db");
    CHECK_OK(kc_import(dst, signed_path, &trust_a, &info, &err));
    CHECK(info.n == 4 && info.is_signed && strcmp(info.signer, pub_a.id) == 0);
    char *before = db_digest(dst);

    /* Signed by a key the reader does not trust, or unsigned without --trust-unsigned: refused,
     * nothing stored. */
    kc_db *other = open_db("trust-other.db");
    CHECK(kc_import(other, signed_path, &trust_b, &info, &err) == -ENOKEY);
    CHECK(err && strstr(err, pub_a.id) != NULL);
    free(err);
    err = NULL;
    CHECK(kc_import(other, signed_path, NULL, &info, &err) == -ENOKEY);
    free(err);
    err = NULL;
    mkpath(unsigned_path, sizeof(unsigned_path), "unsigned.export");
    CHECK_OK(kc_export(src, NULL, unsigned_path, NULL, &n, &err));
    CHECK(kc_import(other, unsigned_path, &trust_a, &info, &err) == -ENOKEY);
    free(err);
    err = NULL;
    kc_stats st;
    CHECK_OK(kc_stats_get(other, &st));
    CHECK(st.artifacts == 0 && st.selections == 0);
    CHECK_OK(kc_import(other, unsigned_path, &local_restore, &info, &err));
    CHECK(info.n == 4 && !info.is_signed);

    /* The same file signed by the untrusted key, or its signature damaged: refused. */
    cJSON *recs = read_records(signed_path);
    CHECK(cJSON_GetArraySize(recs) == 4);
    char forged[512];
    mkpath(forged, sizeof(forged), "forged.export");
    write_export(forged, recs, &sec_b);
    CHECK(kc_import(dst, forged, &trust_a, &info, &err) == -ENOKEY);
    free(err);
    err = NULL;
    write_export(forged, recs, &sec_a);
    CHECK_OK(kc_import(dst, forged, &trust_a, &info, &err)); /* the helper signs correctly */
    {
        FILE *f = fopen(forged, "r+b");
        fseek(f, -10, SEEK_END);
        int c = fgetc(f);
        fseek(f, -10, SEEK_END);
        fputc(c == 'A' ? 'B' : 'A', f);
        fclose(f);
    }
    CHECK(kc_import(dst, forged, &trust_a, &info, &err) == -EBADMSG);
    free(err);
    err = NULL;

    /* The hole: new code under an existing artifact key with recomputed digests. Refused even
     * when trusted and even with replace_stronger: an artifact key names one op and schedule. */
    cJSON *evil = cJSON_Duplicate(recs, true);
    set_ptx(cJSON_GetArrayItem(evil, 0), "// not the kernel that was tuned\n");
    write_export(forged, evil, NULL);
    CHECK(kc_import(dst, forged, &local_restore, &info, &err) == -EEXIST);
    CHECK(err && strstr(err, "different PTX or cubin") != NULL);
    free(err);
    err = NULL;
    write_export(forged, evil, &sec_a);
    const kc_import_opts a_stronger = {.trusted = &pub_a, .n_trusted = 1,
                                       .replace_stronger = true};
    CHECK(kc_import(dst, forged, &a_stronger, &info, &err) == -EEXIST);
    free(err);
    err = NULL;
    cJSON_Delete(evil);

    /* A new schedule for an op whose selection was measured, as a model choice: refused without
     * replace_stronger, taken with it. Record 0 was measured (put_n: even i). */
    cJSON *r0 = NULL, *it;
    cJSON_ArrayForEach(it, recs)
        if (!r0 && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(it, "choice")), "measured") == 0)
            r0 = cJSON_Duplicate(it, true);
    CHECK(r0 != NULL);
    if (!r0)
        r0 = cJSON_Duplicate(cJSON_GetArrayItem(recs, 0), true);
    evil = cJSON_CreateArray();
    cJSON_AddItemToArray(evil, r0);
    const char *op_key = cJSON_GetStringValue(cJSON_GetObjectItem(r0, "op_key"));
    char new_key[KC_KEY_LEN + 1];
    kc_artifact_key(op_key, "{\"template\":\"other\"}", new_key);
    set_str(r0, "schedule_json", "{\"template\":\"other\"}");
    set_str(r0, "key", new_key);
    set_str(r0, "choice", "model");
    cJSON_ReplaceItemInObjectCaseSensitive(r0, "measured", cJSON_CreateFalse());
    set_ptx(r0, "// a model-ranked kernel\n");
    write_export(forged, evil, &sec_a);
    CHECK(kc_import(dst, forged, &trust_a, &info, &err) == -EEXIST);
    CHECK(err && strstr(err, "measured") != NULL);
    free(err);
    err = NULL;
    char *after = db_digest(dst);
    CHECK(before && after && strcmp(before, after) == 0);
    free(after);

    /* Records that do not hold as the daemon would read them, each refused: a key that is not
     * the artifact key of its op key and schedule, an op that is not the op JSON's, an unknown
     * target, a launch with a zero grid, a key that is not hex. */
    static const struct {
        const char *field, *value;
    } bad[] = {
        {"key", "1111111111111111111111111111111111111111111111111111111111111111"},
        {"op", "softmax"},
        {"target", "sm_99"},
        {"launch_json", "{\"kernels\":[{\"name\":\"k\",\"grid\":[0,1,1],\"block\":[1,1,1],"
                        "\"args\":[\"output\"]}],\"workspace_bytes\":0}"},
        {"key", "ABCDEF1111111111111111111111111111111111111111111111111111111111"},
        {"op_json", "{\"op\":\"matmul\""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cJSON *e = cJSON_Duplicate(recs, true);
        set_str(cJSON_GetArrayItem(e, 1), bad[i].field, bad[i].value);
        write_export(forged, e, &sec_a);
        cJSON_Delete(e);
        int r = kc_import(dst, forged, &a_stronger, &info, &err);
        if (r != -EBADMSG)
            fprintf(stderr, "record with bad %s: %d (%s)\n", bad[i].field, r, err ? err : "");
        CHECK(r == -EBADMSG);
        free(err);
        err = NULL;
    }
    after = db_digest(dst);
    CHECK(before && after && strcmp(before, after) == 0);
    free(after);

    /* With replace_stronger the weaker choice is taken, explicitly. */
    write_export(forged, evil, &sec_a);
    CHECK_OK(kc_import(dst, forged, &a_stronger, &info, &err));
    char sel[KC_KEY_LEN + 1];
    kc_choice c;
    CHECK_OK(kc_selection_get(dst, op_key, sel, &c));
    CHECK(strcmp(sel, new_key) == 0 && c == KC_CHOSEN_MODEL);
    cJSON_Delete(evil);
    cJSON_Delete(recs);
    free(before);
    kc_sign_secret_wipe(&sec_a);
    kc_sign_secret_wipe(&sec_b);
    kc_close(src);
    kc_close(dst);
    kc_close(other);
}

static void test_quarantine(void)
{
    kc_db *db = open_db("quarantine.db");
    fixture f1, f2;
    kc_quarantined *q = NULL;
    size_t n = 0, removed = 9;
    char sel[KC_KEY_LEN + 1];
    kc_artifact *g = NULL;

    make_artifact(&f1, 1, "matmul", "sm_90");
    make_artifact(&f2, 2, "softmax", "sm_90");
    CHECK_OK(kc_artifact_put(db, &f1.a));
    CHECK_OK(kc_artifact_put(db, &f2.a));

    /* Out of service: the selection goes (the op is tuned again), the row stays. */
    CHECK_OK(kc_quarantine(db, f1.a.key, "launch description malformed"));
    CHECK(kc_selection_get(db, f1.a.op_key, sel, NULL) == -ENOENT);
    CHECK_OK(kc_selection_get(db, f2.a.op_key, sel, NULL));
    CHECK_OK(kc_artifact_get_meta(db, f1.a.key, &g));
    kc_artifact_free(g);
    /* Idempotent: the first reason stays. Any key string is accepted. */
    CHECK_OK(kc_quarantine(db, f1.a.key, "another reason"));
    CHECK_OK(kc_quarantine(db, "not\x1bhex\nkey", NULL));
    char longkey[101];
    memset(longkey, 'z', 100);
    longkey[100] = '\0';
    CHECK_OK(kc_quarantine(db, longkey, "long"));
    CHECK_OK(kc_quarantine_list(db, &q, &n));
    CHECK(n == 3);
    if (n == 3) {
        CHECK(strcmp(q[0].key, f1.a.key) == 0 || strcmp(q[1].key, f1.a.key) == 0 ||
              strcmp(q[2].key, f1.a.key) == 0);
        for (size_t i = 0; i < n; i++) {
            CHECK(q[i].at > 0);
            if (strcmp(q[i].key, f1.a.key) == 0)
                CHECK(strcmp(q[i].op_key, f1.a.op_key) == 0 && q[i].key_len == KC_KEY_LEN &&
                      strcmp(q[i].reason, "launch description malformed") == 0);
            else if (q[i].key[0] == 'z')
                CHECK(q[i].key_len == 100 && strlen(q[i].key) == KC_KEY_LEN);
            else
                CHECK(strcmp(q[i].key, "not\x1bhex\nkey") == 0 && q[i].op_key[0] == '\0');
        }
    }
    free(q);

    /* Stored again: out of quarantine, selected again. */
    CHECK_OK(kc_artifact_put(db, &f1.a));
    CHECK_OK(kc_selection_get(db, f1.a.op_key, sel, NULL));
    CHECK_OK(kc_quarantine_list(db, &q, &n));
    CHECK(n == 2);
    free(q);
    /* Removing an artifact (a filter, an exact key, pruning) removes its quarantine row. */
    CHECK_OK(kc_quarantine(db, f2.a.key, "x"));
    kc_filter fl = {.key_prefix = f2.a.key};
    CHECK_OK(kc_remove(db, &fl, &removed));
    CHECK(removed == 1);
    CHECK_OK(kc_remove_key(db, "not\x1bhex\nkey", &removed));
    CHECK(removed == 0);
    CHECK(kc_remove_key(db, "not\x1bhex\nkey", &removed) == -ENOENT);
    CHECK_OK(kc_quarantine(db, f1.a.key, "x"));
    CHECK_OK(kc_prune_to_size(db, 0, &removed));
    CHECK(removed == 1);
    CHECK_OK(kc_quarantine_list(db, &q, &n));
    CHECK(n == 1 && q && q[0].key_len == 100);
    free(q);
    CHECK_OK(kc_remove_key(db, longkey, &removed));
    CHECK(removed == 0);
    kc_close(db);
}

/* Records broken behind the cache's back, each named by verify with its reason. */
static void test_verify_deep(void)
{
    kc_db *db = open_db("deep.db");
    fixture f[4];

    for (int i = 0; i < 4; i++) {
        make_artifact(&f[i], 20 + i, "matmul", "sm_90");
        CHECK_OK(kc_artifact_put(db, &f[i].a));
    }
    raw_sqlf("deep.db", "UPDATE launch_kernels SET grid_x = 0 WHERE artifact_key = '%s'", f[0].a.key);
    raw_sqlf("deep.db", "DELETE FROM launch_kernels WHERE artifact_key = '%s'", f[1].a.key);
    raw_sqlf("deep.db", "UPDATE artifacts SET op_json = '{\"op\":' WHERE key = '%s'", f[2].a.key);
    raw_sqlf("deep.db", "UPDATE launch_kernels SET args = x'00ff' WHERE artifact_key = '%s'", f[3].a.key);

    size_t checked = 0, nbad = 0;
    kc_problem *bad = NULL;
    CHECK_OK(kc_verify(db, &checked, &bad, &nbad));
    CHECK(checked == 4 && nbad == 4);
    for (size_t i = 0; i < nbad; i++) {
        const char *want = strcmp(bad[i].key, f[1].a.key) == 0 ? "no kernels"
                         : strcmp(bad[i].key, f[2].a.key) == 0 ? "op_json"
                                                               : "launch";
        if (!strstr(bad[i].reason, want))
            fprintf(stderr, "%s: %s\n", bad[i].key, bad[i].reason);
        CHECK(strstr(bad[i].reason, want) != NULL);
    }
    kc_problems_free(bad, nbad);
    kc_close(db);
}

/* The cache's bounds on a stored output are the request language's. */
_Static_assert(KC_MAX_DIM == PROTO_MAX_DIM && KC_MAX_NUMEL == (unsigned long long)PROTO_MAX_NUMEL,
               "kernel_cache's tensor limits follow proto/request.h");

/* Values no request could have produced, written behind the cache's back: every read refuses
 * the record (-EBADMSG, the reason in kc_errmsg) and verify names it with that reason; the same
 * launches are refused when stored. */
static void test_impossible_values(void)
{
    static const struct {
        const char *sql, *why; /* sql: an UPDATE up to its key's column */
    } damage[] = {
        { "UPDATE launch_kernels SET block_x = 1000000000 WHERE artifact_key", "block" },
        { "UPDATE launch_kernels SET block_x = 64, block_y = 64 WHERE artifact_key", "block" },
        { "UPDATE launch_kernels SET block_z = 128 WHERE artifact_key", "block" },
        { "UPDATE launch_kernels SET grid_y = 65536 WHERE artifact_key", "grid" },
        { "UPDATE launch_kernels SET grid_x = 2147483648 WHERE artifact_key", "grid" },
        { "UPDATE launch_kernels SET shared_bytes = 4000000000 WHERE artifact_key", "shared" },
        { "UPDATE launch_kernels SET name = 'k; rm -rf' WHERE artifact_key", "identifier" },
        { "UPDATE artifacts SET workspace_bytes = 9223372036854775807 WHERE key", "workspace" },
        { "UPDATE artifacts SET output_dtype = 'f8' WHERE key", "dtype" },
        { "UPDATE artifacts SET output_dtype = 'float16' WHERE key", "dtype" },
        { "UPDATE artifacts SET output_shape = x'0000000000000080' WHERE key", "dimension" },
        { "UPDATE artifacts SET output_shape = x'00000000000000000100000000000000' WHERE key",
          "dimension" },
        { "UPDATE artifacts SET output_shape = x'00000001000000000000000100000000' WHERE key",
          "elements" },
        { "UPDATE artifacts SET output_shape = x'' WHERE key", "rank" },
    };
    enum { N = sizeof(damage) / sizeof(damage[0]) };
    kc_db *db = open_db("impossible.db");
    fixture f[N + 1];

    for (int i = 0; i <= N; i++) {
        make_artifact(&f[i], 40 + i, "matmul", "sm_90");
        CHECK_OK(kc_artifact_put(db, &f[i].a));
    }
    for (int i = 0; i < N; i++)
        raw_sqlf("impossible.db", "%s = '%s'", damage[i].sql, f[i].a.key);
    for (int i = 0; i < N; i++) {
        kc_artifact *a = NULL;
        int r = kc_artifact_get_meta(db, f[i].a.key, &a);
        if (r != -EBADMSG)
            fprintf(stderr, "damage %d (%s): read %d\n", i, damage[i].why, r);
        CHECK(r == -EBADMSG && a == NULL);
        CHECK(kc_artifact_get(db, f[i].a.key, &a) == -EBADMSG && strstr(kc_errmsg(db), damage[i].why));
    }
    kc_artifact *good = NULL;
    CHECK_OK(kc_artifact_get(db, f[N].a.key, &good));
    kc_artifact_free(good);

    size_t checked = 0, nbad = 0;
    kc_problem *bad = NULL;
    CHECK_OK(kc_verify(db, &checked, &bad, &nbad));
    CHECK(checked == N + 1 && nbad == N);
    for (size_t b = 0; b < nbad; b++) {
        int i = 0;
        while (i < N && strcmp(bad[b].key, f[i].a.key) != 0)
            i++;
        CHECK(i < N);
        if (i < N && !strstr(bad[b].reason, damage[i].why))
            fprintf(stderr, "%s: %s (want %s)\n", bad[b].key, bad[b].reason, damage[i].why);
        CHECK(i < N && strstr(bad[b].reason, damage[i].why) != NULL);
    }
    kc_problems_free(bad, nbad);

    /* The same limits when storing. */
    kc_launch *l = &f[N].a.launch;
    l->kernels[0].block[0] = 2048;
    CHECK(kc_artifact_put(db, &f[N].a) == -EINVAL);
    l->kernels[0].block[0] = 128;
    l->workspace_bytes = KC_MAX_WORKSPACE_BYTES + 1;
    CHECK(kc_artifact_put(db, &f[N].a) == -EINVAL);
    l->workspace_bytes = KC_MAX_WORKSPACE_BYTES;
    CHECK_OK(kc_artifact_put(db, &f[N].a));
    strcpy(l->output_dtype, "f64");
    CHECK(kc_artifact_put(db, &f[N].a) == -EINVAL);
    strcpy(l->output_dtype, "f32");
    l->kernels[0].shared_bytes = KC_MAX_SHARED_BYTES;
    CHECK_OK(kc_artifact_put(db, &f[N].a));
    l->kernels[0].shared_bytes = KC_MAX_SHARED_BYTES + 1;
    CHECK(kc_artifact_put(db, &f[N].a) == -EINVAL);
    kc_close(db);
}

/* a's launch survives the record the export file and the cluster tier carry, and an export of db
 * (to NAME.export) imported into a new cache (NAME-dst.db). Returns how many records the export
 * wrote. */
static size_t check_launch_travels(kc_db *db, const kc_artifact *a, const char *name)
{
    char *rec = NULL, *err = NULL;
    kc_artifact *dec = NULL;
    CHECK_OK(kc_record_encode(a, &rec));
    CHECK_OK(kc_record_decode(rec, rec ? strlen(rec) : 0, &dec, &err));
    CHECK(dec && launch_eq(&dec->launch, &a->launch), "%s: the record's launch", name);
    kc_artifact_free(dec);
    free(rec);
    free(err);
    err = NULL;

    char file[128], path[512];
    size_t n = 0, exported = 0;
    snprintf(file, sizeof(file), "%s.export", name);
    mkpath(path, sizeof(path), file);
    CHECK_OK(kc_export(db, NULL, path, NULL, &exported, &err));
    free(err);
    err = NULL;
    snprintf(file, sizeof(file), "%s-dst.db", name);
    kc_db *dst = open_db(file);
    CHECK_OK(import_file(dst, path, &local_restore, &n, &err));
    free(err);
    kc_artifact *g = NULL;
    CHECK_OK(kc_artifact_get(dst, a->key, &g));
    CHECK(g && launch_eq(&g->launch, &a->launch), "%s: the imported launch", name);
    kc_artifact_free(g);
    kc_close(dst);
    return exported;
}

/* Dynamic launches (issue 39): the checks, the JSON text both ways, the rows, export and
 * import, the record the cluster tier signs, and a file of schema 4 migrated. */
/* make_dynamic's artifact whose first kernel reads input0, [n][4096] f16, through a tensor map
 * whose rows follow n (8192 at max). */
static void make_sym_map(fixture *f)
{
    make_dynamic(f, 5, "matmul", "sm_90a"); /* two kernels */
    kc_kernel *k = &f->a.launch.kernels[0];
    k->maps[0] = (tuner_tmap){.buf = KC_BUF_INPUT0, .dtype = TUNER_F16, .rank = 2, .dims = {4096, 8192},
                              .strides = {8192}, .box = {64, 128}, .element_strides = {1, 1}, .swizzle = 128,
                              .sym = {0, 1}, .sym_coef = {0, 1}};
    k->maps[1] = (tuner_tmap){.buf = KC_BUF_OUTPUT, .dtype = TUNER_F16, .rank = 2, .dims = {64, 64},
                              .strides = {128}, .box = {64, 8}, .element_strides = {1, 1}, .swizzle = 128};
    k->n_maps = 2;
}

/* FP8 (issue 41) in the launch contract: an FP8 matmul's operand maps (one-byte elements, 128 per
 * box row) and an FP8 output (a quantizing epilogue) pass the check and survive the JSON form;
 * an integer output is still refused. */
static void test_fp8_launch(void)
{
    fixture f;
    char *text = NULL;
    const char *why = NULL;
    kc_launch back;
    make_artifact(&f, 6, "matmul", "sm_90a");
    kc_kernel *k = &f.a.launch.kernels[0];
    k->maps[0] = (tuner_tmap){.buf = KC_BUF_INPUT0, .dtype = TUNER_F8E4M3, .rank = 2, .dims = {4096, 4096},
                              .strides = {4096}, .box = {128, 128}, .element_strides = {1, 1}, .swizzle = 128};
    k->maps[1] = (tuner_tmap){.buf = KC_BUF_INPUT0 + 1, .dtype = TUNER_F8E5M2, .rank = 2, .dims = {4096, 14336},
                              .strides = {4096}, .box = {128, 256}, .element_strides = {1, 1}, .swizzle = 128};
    k->n_maps = 2;
    strcpy(f.a.launch.output_dtype, "f8e4m3");
    CHECK_OK(kc_launch_check(&f.a.launch));
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strstr(text, "\"dtype\":\"f8e4m3\"") && strstr(text, "\"dtype\":\"f8e5m2\""), "%s", text ? text : "");
    memset(&back, 0, sizeof(back));
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch) && strcmp(back.output_dtype, "f8e4m3") == 0 &&
          back.kernels[0].maps[1].dtype == TUNER_F8E5M2);
    free(text);
    strcpy(f.a.launch.output_dtype, "i32");
    CHECK(kc_launch_check(&f.a.launch) == -EINVAL);
}

/* Tensor maps whose dimensions follow named dims (issue 39): checked against the launch's dims,
 * kept in the grid_rules blob beside the packed records, in the JSON of export files and of the
 * cluster's signed records (by index), and damage refused. */
static void test_symbolic_maps(void)
{
    fixture f;
    char *text = NULL;
    const char *why = NULL;
    kc_launch back;

    make_sym_map(&f);
    CHECK_OK(kc_launch_check(&f.a.launch));
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strstr(text, "\"maps\":[{\"dtype\":\"f16\",\"dims\":[4096,{\"dims\":[0],\"coef\":1}],"
                               "\"strides\":[8192],"),
          "%s", text ? text : "");
    memset(&back, 0, sizeof(back));
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch) && back.kernels[0].maps[0].sym[1] == 1 &&
          back.kernels[0].maps[0].dims[1] == 8192);
    /* By index only, over the launch's dims: 5 is not one of its two. */
    char *bad = text ? strdup(text) : NULL;
    char *at = bad ? strstr(bad, "{\"dims\":[0]") : NULL;
    if (at)
        at[10] = '5';
    CHECK(at && kc__launch_from_json(bad, NULL, &back, &why) == -EBADMSG);
    free(bad);
    free(text);
    text = NULL;

    /* kc_launch_check: the dims exist and the value at their max is dims[i]. */
    for (int m = 0; m < 4; m++) {
        fixture g;
        make_sym_map(&g);
        tuner_tmap *t = &g.a.launch.kernels[0].maps[0];
        switch (m) {
        case 0: t->sym[1] = 4; break;                 /* dim 2: the launch has two */
        case 1: t->sym_coef[1] = 2; break;            /* 2 * 8192 is not dims[1] */
        case 2: t->sym[1] = 3; break;                 /* n * s at max is not 8192 */
        case 3: t->sym_coef[0] = 1; break;            /* a coefficient on a fixed dimension */
        }
        CHECK(kc_launch_check(&g.a.launch) == -EINVAL, "mutation %d", m);
    }

    /* Rows: the blob holds the rules and one record per map; read back whole. */
    kc_db *db = open_db("symmap.db");
    CHECK_OK(kc_artifact_put(db, &f.a));
    kc_artifact *g = NULL;
    CHECK_OK(kc_artifact_get(db, f.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &f.a.launch));
    kc_artifact_free(g);
    g = NULL;
    CHECK(raw_int("symmap.db", "SELECT length(grid_rules) FROM launch_kernels WHERE position = 0") ==
          3 * 33 + 2 * 45);
    CHECK(raw_int("symmap.db", "SELECT length(grid_rules) FROM launch_kernels WHERE position = 1") == 0);

    /* The record the export file and the cluster tier carry (and sign) holds them. */
    char *rec = NULL, *err = NULL;
    kc_artifact *dec = NULL;
    CHECK_OK(kc_record_encode(&f.a, &rec));
    CHECK(rec && strstr(rec, "{\\\"dims\\\":[0],\\\"coef\\\":1}")); /* in the launch's text */
    CHECK_OK(kc_record_decode(rec, rec ? strlen(rec) : 0, &dec, &err));
    CHECK(dec && launch_eq(&dec->launch, &f.a.launch));
    kc_artifact_free(dec);
    free(rec);
    free(err);

    /* Damage: a cut record, records that name nothing, a coefficient that breaks the map. */
    static const char *const damage[] = {
        "UPDATE launch_kernels SET grid_rules = substr(grid_rules, 1, 150) WHERE position = 0",
        "UPDATE launch_kernels SET grid_rules = substr(grid_rules, 1, 99) || zeroblob(90) WHERE position = 0",
        /* map 0, dimension 1's sym byte (offset 99 + 9): n * s */
        "UPDATE launch_kernels SET grid_rules = substr(grid_rules, 1, 108) || x'03' || "
        "substr(grid_rules, 110) WHERE position = 0",
    };
    for (size_t i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
        CHECK_OK(kc_artifact_put(db, &f.a));
        raw_sql("symmap.db", damage[i]);
        CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG && g == NULL, "damage %zu", i);
    }
    kc_close(db);
}

static void test_dynamic_launch(void)
{
    fixture f;
    char *text = NULL;
    const char *why = NULL;
    kc_launch back;
    kc_buf b;

    CHECK(strcmp(kc_arg_name(KC_ARG_DIM0 + 3), "dim3") == 0 && kc_arg_name(KC_ARG_DIM0 + 4) == NULL &&
          kc_arg_name((kc_buf)(KC_BUF_WORKSPACE + 1)) == NULL && strcmp(kc_arg_name(KC_BUF_OUTPUT), "output") == 0);
    CHECK(kc_buf_name(KC_ARG_DIM0) == NULL && kc_buf_parse("dim0", &b) == -EINVAL);
    CHECK(kc_arg_parse("dim2", &b) == 0 && b == KC_ARG_DIM0 + 2);
    CHECK(kc_arg_parse("input3", &b) == 0 && b == KC_BUF_INPUT0 + 3);
    CHECK(kc_arg_parse("dim4", &b) == -EINVAL && kc_arg_parse(NULL, &b) == -EINVAL);

    /* The rule as docs/api.md states it, and saturation instead of overflow. */
    kc_grid_rule r = {.dims = 5, .coef = 3, .div = 7, .mul = 4, .cap = 0};
    int64_t sizes[KC_MAX_DIMS] = {10, 999, 2, 999};
    CHECK(kc_grid_rule_eval(&r, sizes) == 4 * ((3 * 20 + 6) / 7));
    r.cap = 30;
    CHECK(kc_grid_rule_eval(&r, sizes) == 30);
    r = (kc_grid_rule){.dims = 15, .coef = KC_MAX_DIM, .div = 1, .mul = KC_MAX_DIM, .cap = 0};
    int64_t big[KC_MAX_DIMS] = {KC_MAX_DIM, KC_MAX_DIM, KC_MAX_DIM, KC_MAX_DIM};
    CHECK(kc_grid_rule_eval(&r, big) == INT64_MAX);
    r.cap = 65535;
    CHECK(kc_grid_rule_eval(&r, big) == 65535);

    make_dynamic(&f, 5, "matmul", "sm_90");
    CHECK_OK(kc_launch_check(&f.a.launch));
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strcmp(text, "{\"kernels\":[{\"name\":\"hd_kernel_5_0\",\"grid\":[128,512,1],"
                                "\"block\":[128,1,1],\"shared_bytes\":0,\"args\":[\"input0\",\"output\","
                                "\"workspace\",\"dim0\",\"dim1\"],\"grid_rules\":[{\"dims\":1,\"coef\":1,"
                                "\"div\":128,\"mul\":2,\"cap\":0},{\"dims\":3,\"coef\":1,\"div\":65536,"
                                "\"mul\":1,\"cap\":1000},null]},{\"name\":\"hd_kernel_5_1\",\"grid\":[6,2,1],"
                                "\"block\":[128,1,1],\"shared_bytes\":1024,\"args\":[\"input1\","
                                "\"output\",\"workspace\"]}],\"workspace_bytes\":4101,\"output\":{"
                                "\"shape\":[8192,4096],\"dtype\":\"bf16\",\"sym\":[1,0]},\"dims\":[{"
                                "\"name\":\"n\",\"min\":1,\"max\":8192,\"multiple_of\":1},{\"name\":"
                                "\"s\",\"min\":16,\"max\":4096,\"multiple_of\":16}]}") == 0,
          "%s", text);
    memset(&back, 0, sizeof(back));
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch));

    /* Each of these breaks one rule of kc_launch_check. */
    for (int m = 0; m < 24; m++) {
        fixture g;
        make_dynamic(&g, 5, "matmul", "sm_90");
        kc_launch *l = &g.a.launch;
        kc_kernel *k = &l->kernels[0];
        switch (m) {
        case 0: k->grid_rule[0].coef = 0; break;
        case 1: k->grid_rule[0].div = 0; break;
        case 2: k->grid_rule[0].mul = 0; break;
        case 3: k->grid_rule[1].cap = -1; break;
        case 4: k->grid_rule[1].cap = 70000; break; /* beyond grid y's 65535 */
        case 5: k->grid_rule[0].dims = 4; break;    /* dim 2: the launch has two */
        case 6: k->grid[0] = 127; break;            /* not the rule's value at max */
        case 7: k->grid_rule[2].coef = 1; break;    /* a fixed dimension with a rule's number */
        case 8: k->args[4] = KC_ARG_DIM0 + 2; break;
        case 9: strcpy(l->dims[1].name, "N"); break;
        case 10: strcpy(l->dims[1].name, "1s"); break;
        case 11: strcpy(l->dims[1].name, "n"); break; /* twice */
        case 12: l->dims[1].name[0] = '\0'; break;
        case 13: l->dims[0].min = 9000; break;
        case 14: l->dims[0].min = 0; break;
        case 15: l->dims[1].min = 17; break;          /* not a multiple of 16 */
        case 16: l->dims[1].multiple_of = 0; break;
        case 17: l->dims[0].max = KC_MAX_DIM + 1; break;
        case 18: l->output_sym[1] = 4; break;         /* dim 2 */
        case 19: l->output_sym[1] = 2; break;         /* s's max is 4096 = shape[1]: fine... */
        case 20: l->output_sym[0] = 3; break;         /* n*s at max is not 8192 */
        case 21: l->output_sym[2] = 1; break;         /* an axis beyond the rank */
        case 22: l->dims[2].max = 5; break;           /* a dim beyond n_dims */
        case 23: l->n_dims = 5; break;
        }
        if (m == 19) {
            CHECK_OK(kc_launch_check(l)); /* ...since a named axis's shape is the dims' max */
            continue;
        }
        CHECK(kc_launch_check(l) == -EINVAL, "mutation %d", m);
        CHECK(kc_launch_json(l, &text) == -EINVAL || (free(text), 0), "mutation %d", m);
    }
    /* A static launch passes with every new field zero; a size argument needs a dim. */
    make_artifact(&f, 5, "matmul", "sm_90");
    f.a.launch.kernels[0].args[2] = KC_ARG_DIM0;
    CHECK(kc_launch_check(&f.a.launch) == -EINVAL);

    /* Malformed text of the new members. */
    static const char *const bad[] = {
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"]}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],\"args\":[16]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[],\"dims\":[]}",
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8}]}",
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1,\"x\":1}]}",
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1.5,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[],\"dims\":{\"n\":{\"min\":1,\"max\":8,\"multiple_of\":1}}}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[8,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"],"
        "\"grid_rules\":[{\"dims\":1,\"coef\":1,\"div\":1,\"mul\":1,\"cap\":0},null]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[8,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"],"
        "\"grid_rules\":[{\"dims\":1,\"coef\":1,\"div\":1,\"mul\":1},null,null]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[8,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"],"
        "\"grid_rules\":[{\"dims\":1,\"coef\":0,\"div\":1,\"mul\":1,\"cap\":0},null,null]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[8,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"],"
        "\"grid_rules\":[{\"dims\":0,\"coef\":1,\"div\":1,\"mul\":1,\"cap\":0},null,null]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[{\"name\":\"k\",\"grid\":[7,1,1],\"block\":[1,1,1],\"args\":[\"dim0\"],"
        "\"grid_rules\":[{\"dims\":1,\"coef\":1,\"div\":1,\"mul\":1,\"cap\":0},null,null]}],"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[],\"output\":{\"shape\":[8],\"dtype\":\"f16\",\"sym\":[1,0]},"
        "\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}]}",
        "{\"kernels\":[],\"output\":{\"shape\":[8],\"dtype\":\"f16\",\"sym\":[1]}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        back.n_kernels = 99;
        CHECK(kc__launch_from_json(bad[i], NULL, &back, &why) == -EBADMSG && why &&
              back.n_kernels == 99, "bad[%zu]", i);
    }
    /* The smallest well-formed one of those. */
    CHECK_OK(kc__launch_from_json("{\"kernels\":[{\"name\":\"k\",\"grid\":[8,1,1],\"block\":[1,1,1],"
                                  "\"args\":[\"dim0\"],\"grid_rules\":[{\"dims\":1,\"coef\":1,\"div\":1,"
                                  "\"mul\":1,\"cap\":0},null,null]}],\"output\":{\"shape\":[8],"
                                  "\"dtype\":\"f16\",\"sym\":[1]},\"dims\":[{\"name\":\"n\",\"min\":1,"
                                  "\"max\":8,\"multiple_of\":1}]}", NULL, &back, &why));
    CHECK(back.n_dims == 1 && back.output_sym[0] == 1 && back.kernels[0].args[0] == KC_ARG_DIM0 &&
          back.kernels[0].grid_rule[0].dims == 1 && back.kernels[0].grid_rule[1].dims == 0);
    free(text);
    text = NULL;

    /* Rows: stored and read back; a static artifact beside it reads static. */
    kc_db *db = open_db("dyn.db");
    fixture st;
    make_dynamic(&f, 5, "matmul", "sm_90");
    make_artifact(&st, 6, "matmul", "sm_90");
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK_OK(kc_artifact_put(db, &st.a));
    kc_artifact *g = NULL;
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &f.a.launch));
    kc_artifact_free(g);
    g = NULL;
    CHECK_OK(kc_artifact_get(db, st.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &st.a.launch) && g->launch.n_dims == 0);
    kc_artifact_free(g);
    g = NULL;
    /* Stored again: the rows are replaced, not added to. */
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK(raw_int("dyn.db", "SELECT count(*) FROM launch_dims") == 2);
    CHECK(raw_int("dyn.db", "SELECT output_axes FROM launch_dims WHERE name = 'n'") == 1);
    CHECK(raw_int("dyn.db", "SELECT length(grid_rules) FROM launch_kernels WHERE position = 0"
                            " ORDER BY length(grid_rules) DESC") == 3 * 33);
    size_t removed = 0;
    CHECK_OK(kc_verify(db, &removed, NULL, NULL));
    CHECK(removed == 2);

    /* The record the cluster tier signs, export and import. */
    CHECK(check_launch_travels(db, &f.a, "dyn") == 2);

    /* Damaged rows read as a malformed launch, never as another launch. */
    raw_sqlf("dyn.db", "UPDATE launch_kernels SET grid_rules = x'01' WHERE artifact_key = '%s'", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG);
    CHECK_OK(kc_artifact_put(db, &f.a));
    raw_sqlf("dyn.db", "UPDATE launch_dims SET output_axes = 4 WHERE artifact_key = '%s'", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG);
    CHECK_OK(kc_artifact_put(db, &f.a));
    raw_sqlf("dyn.db", "DELETE FROM launch_dims WHERE artifact_key = '%s' AND position = 1", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG); /* dim1 argument without its dim */
    CHECK_OK(kc_artifact_put(db, &f.a));
    raw_sqlf("dyn.db", "UPDATE launch_dims SET max = 4096 WHERE artifact_key = '%s' AND position = 0", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG); /* the grid and the output no longer agree */
    CHECK_OK(kc_artifact_put(db, &f.a));
    /* Removing the artifact removes its dims (ON DELETE CASCADE). */
    CHECK_OK(kc_remove_key(db, f.a.key, &removed));
    CHECK(raw_int("dyn.db", "SELECT count(*) FROM launch_dims") == 0);
    kc_close(db);

    /* A file of schema 4 (no grid_rules column, no launch_dims) opens and migrates; its static
     * records read as before and dynamic ones can be stored after. */
    db = open_db("v4.db");
    put_n(db, 0, 5, "matmul", "sm_90");
    kc_close(db);
    raw_sql("v4.db", "DROP TABLE launch_dims; ALTER TABLE launch_kernels DROP COLUMN grid_rules;"
                     " UPDATE schema_version SET version = 4;");
    CHECK(raw_int("v4.db", "SELECT count(*) FROM pragma_table_info('launch_kernels')"
                           " WHERE name = 'grid_rules'") == 0);
    db = open_db("v4.db");
    CHECK(raw_int("v4.db", "SELECT max(version) FROM schema_version") == KC_SCHEMA_VERSION);
    for (int i = 0; i < 5; i++) {
        fixture h;
        make_artifact(&h, i, "matmul", "sm_90");
        CHECK_OK(kc_artifact_get(db, h.a.key, &g));
        CHECK(g && launch_eq(&g->launch, &h.a.launch), "artifact %d", i);
        kc_artifact_free(g);
        g = NULL;
    }
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK_OK(kc_artifact_get(db, f.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &f.a.launch));
    kc_artifact_free(g);
    kc_close(db);
}

/* A dynamic launch's range_worst (schema 6): checked, in the JSON text both ways (left out when
 * 0), in every dim row, in the record the export file and the cluster tier carry, damage refused,
 * and a file of schema 5 migrated with its launches reading 0. */
static void test_range_worst(void)
{
    fixture f;
    char *text = NULL;
    const char *why = NULL;
    kc_launch back;

    make_dynamic(&f, 5, "matmul", "sm_90");
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && !strstr(text, "range_worst"), "%s", text ? text : "");
    free(text);
    text = NULL;
    f.a.launch.range_worst = 1.056;
    CHECK_OK(kc_launch_check(&f.a.launch));
    CHECK_OK(kc_launch_json(&f.a.launch, &text));
    CHECK(text && strstr(text, "\"range_worst\":1.056"), "%s", text ? text : "");
    memset(&back, 0, sizeof(back));
    CHECK_OK(kc__launch_from_json(text, NULL, &back, &why));
    CHECK(launch_eq(&back, &f.a.launch) && back.range_worst == 1.056);
    free(text);
    text = NULL;

    /* Below 1, past 1000, NaN, or on a static launch. */
    const double bad_values[] = {0.99, -1.0, 1000.5, NAN};
    for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
        fixture g;
        make_dynamic(&g, 5, "matmul", "sm_90");
        g.a.launch.range_worst = bad_values[i];
        CHECK(kc_launch_check(&g.a.launch) == -EINVAL, "range_worst %g", bad_values[i]);
    }
    fixture st;
    make_artifact(&st, 6, "matmul", "sm_90");
    st.a.launch.range_worst = 1.05;
    CHECK(kc_launch_check(&st.a.launch) == -EINVAL);
    static const char *const bad[] = {
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}],\"range_worst\":0.5}",
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}],\"range_worst\":\"1.1\"}",
        "{\"kernels\":[],\"dims\":[{\"name\":\"n\",\"min\":1,\"max\":8,\"multiple_of\":1}],\"range_worst\":2000}",
        "{\"kernels\":[],\"range_worst\":1.1}", /* a static launch */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(kc__launch_from_json(bad[i], NULL, &back, &why) == -EBADMSG, "bad[%zu]", i);

    /* Rows, the record, export and import (launch_eq compares range_worst). */
    kc_db *db = open_db("worst.db");
    CHECK_OK(kc_artifact_put(db, &f.a));
    CHECK(raw_int("worst.db", "SELECT count(*) FROM launch_dims WHERE range_worst = 1.056") == 2);
    kc_artifact *g = NULL;
    CHECK_OK(kc_artifact_get_meta(db, f.a.key, &g));
    CHECK(g && g->launch.range_worst == 1.056);
    kc_artifact_free(g);
    g = NULL;
    CHECK(check_launch_travels(db, &f.a, "worst") == 1);

    /* A damaged value reads as a malformed launch. */
    raw_sqlf("worst.db", "UPDATE launch_dims SET range_worst = 0.5 WHERE artifact_key = '%s'", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG);
    raw_sqlf("worst.db", "UPDATE launch_dims SET range_worst = 'x' WHERE artifact_key = '%s'", f.a.key);
    CHECK(kc_artifact_get(db, f.a.key, &g) == -EBADMSG);
    kc_close(db);

    /* A file of schema 5 (no range_worst column) opens and migrates; its launches read 0. */
    db = open_db("v5.db");
    f.a.launch.range_worst = 0;
    CHECK_OK(kc_artifact_put(db, &f.a));
    kc_close(db);
    raw_sql("v5.db", "ALTER TABLE launch_dims DROP COLUMN range_worst; UPDATE schema_version SET version = 5;");
    db = open_db("v5.db");
    CHECK(raw_int("v5.db", "SELECT max(version) FROM schema_version") == KC_SCHEMA_VERSION);
    CHECK_OK(kc_artifact_get(db, f.a.key, &g));
    CHECK(g && launch_eq(&g->launch, &f.a.launch) && g->launch.range_worst == 0);
    kc_artifact_free(g);
    kc_close(db);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_kc.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_key();
    test_round_trip();
    test_selection();
    test_corruption();
    test_trials();
    test_filters_remove();
    test_prune();
    test_export_import();
    test_schema();
    test_launch_types();
    test_migrate_v1();
    test_import_v1_file();
    test_two_handles();
    test_kill9();
    test_sign();
    test_import_trust();
    test_quarantine();
    test_verify_deep();
    test_impossible_values();
    test_dynamic_launch();
    test_range_worst();
    test_symbolic_maps();
    test_fp8_launch();

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (failures == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "%d check(s) failed; files left in %s\n", failures, tmpdir);
    else
        printf("all kernel_cache tests passed\n");
    return failures ? 1 : 0;
}
