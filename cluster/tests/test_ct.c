/* cluster/tests/test_ct.c - the cluster tier's pure parts: Redis URLs, and signed entries
 * (accepted from a trusted key; rejected, each for its own reason, when unsigned, signed by
 * another key, changed in any byte, or of another op key). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/ct.h"
#include "tests/check.h"

static void test_url(void)
{
    ct_url u;
    char *err = NULL;
    CHECK(ct_url_parse("redis://127.0.0.1:6380/2", &u, &err) == 0);
    CHECK(!u.unix_socket && strcmp(u.host, "127.0.0.1") == 0 && u.port == 6380 && u.db == 2);
    CHECK(ct_url_parse("redis://cache.example", &u, &err) == 0);
    CHECK(u.port == 6379 && u.db == 0 && !u.user[0] && !u.password[0]);
    CHECK(ct_url_parse("redis://:s%40cret@h:1/0", &u, &err) == 0);
    CHECK(strcmp(u.password, "s@cret") == 0 && !u.user[0]);
    CHECK(ct_url_parse("redis://tuner:pw@[::1]:7000", &u, &err) == 0);
    CHECK(strcmp(u.user, "tuner") == 0 && strcmp(u.password, "pw") == 0);
    CHECK(strcmp(u.host, "::1") == 0 && u.port == 7000);
    char red[512];
    ct_url_redacted(&u, red, sizeof(red));
    CHECK(strcmp(red, "redis://tuner:***@[::1]:7000/0") == 0, "%s", red);
    CHECK(ct_url_parse("unix:///run/redis.sock?db=3", &u, &err) == 0);
    CHECK(u.unix_socket && strcmp(u.path, "/run/redis.sock") == 0 && u.db == 3);
    const char *bad[] = {"", "http://h", "redis://", "redis://h:0", "redis://h:70000",
                         "redis://h/x", "redis://user@h", "redis://h h", "unix://rel.sock",
                         "unix:///s?x=1", "redis://:%zz@h", "redis://[::1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        CHECK(ct_url_parse(bad[i], &u, &err) == -EINVAL && err, "%s", bad[i]);
        free(err);
    }
    err = NULL;
    CHECK(ct_url_parse("rediss://h:6380", &u, &err) == -EINVAL && err && strstr(err, "TLS"));
    free(err);
}

static char ptx[] = "// PTX of a test kernel\n.version 8.0\n";
static unsigned char cubin[600];

static void make(kc_artifact *a, const char *tag)
{
    memset(a, 0, sizeof(*a));
    const char *parts[2] = {"op", tag};
    kc_key(parts, 2, a->op_key);
    strcpy(a->op, "matmul");
    strcpy(a->target, "sm_90");
    a->op_json = "{\"op\":\"matmul\"}";
    a->schedule_json = "{\"template\":\"matmul_mma\"}";
    kc_artifact_key(a->op_key, a->schedule_json, a->key);
    a->provenance_json = "{\"daemon\":\"test\"}";
    a->launch.n_kernels = 1;
    strcpy(a->launch.kernels[0].name, "hd_kernel");
    for (int k = 0; k < 3; k++)
        a->launch.kernels[0].grid[k] = a->launch.kernels[0].block[k] = 1;
    a->launch.kernels[0].n_args = 2;
    a->launch.kernels[0].args[0] = KC_BUF_INPUT0;
    a->launch.kernels[0].args[1] = KC_BUF_OUTPUT;
    a->launch.has_output = true;
    a->launch.output_rank = 1;
    a->launch.output_shape[0] = 64;
    strcpy(a->launch.output_dtype, "f16");
    a->ptx = ptx;
    a->ptx_len = strlen(ptx);
    for (size_t i = 0; i < sizeof(cubin); i++)
        cubin[i] = (unsigned char)(i * 7);
    a->cubin = cubin;
    a->cubin_len = sizeof(cubin);
    a->choice = KC_CHOSEN_MODEL;
    a->latency_us = -1;
    a->predicted_us = 12.5;
}

static void keys(const char *dir, const char *name, kc_sign_secret *s, kc_sign_public *p)
{
    char prefix[512], path[600];
    char *err = NULL;
    snprintf(prefix, sizeof(prefix), "%s/%s", dir, name);
    CHECK(kc_sign_keygen(prefix, p, &err) == 0, "%s", err ? err : "");
    snprintf(path, sizeof(path), "%s.key", prefix);
    CHECK(kc_sign_load_secret(path, s, &err) == 0, "%s", err ? err : "");
    free(err);
}

static int verify(const char *v, size_t n, const char *op_key, const kc_sign_public *tr,
                  size_t ntr, ct_reject *why)
{
    kc_artifact *got = NULL;
    int r = ct_entry_verify(v, n, op_key, tr, ntr, &got, NULL, why);
    kc_artifact_free(got);
    return r;
}

static void test_entry(void)
{
    char dir[] = "/tmp/test_ct.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    kc_sign_secret s1, s2;
    kc_sign_public p1, p2;
    keys(dir, "one", &s1, &p1);
    keys(dir, "two", &s2, &p2);
    kc_artifact a;
    make(&a, "1");
    char *v = NULL;
    size_t n = 0;
    CHECK(ct_entry_encode(&a, &s1, &v, &n) == 0 && v && n == strlen(v));
    CHECK(strncmp(v, CT_ENTRY_MAGIC, strlen(CT_ENTRY_MAGIC)) == 0);

    /* Accepted from a trusted key, with several keys trusted at once (rotation). */
    kc_sign_public both[2] = {p2, p1};
    kc_artifact *got = NULL;
    char signer[KC_SIGN_ID_LEN + 1] = "";
    ct_reject why = CT_REJECT_N;
    CHECK(ct_entry_verify(v, n, a.op_key, both, 2, &got, signer, &why) == 0 && got);
    CHECK(strcmp(signer, p1.id) == 0);
    CHECK(got && strcmp(got->key, a.key) == 0 && got->cubin_len == sizeof(cubin) &&
          memcmp(got->cubin, cubin, sizeof(cubin)) == 0 && got->choice == KC_CHOSEN_MODEL &&
          got->ptx_len == strlen(ptx) && strcmp(got->ptx, ptx) == 0);
    kc_artifact_free(got);

    /* Untrusted signer. */
    CHECK(verify(v, n, a.op_key, &p2, 1, &why) == -EBADMSG && why == CT_REJECT_UNTRUSTED);
    CHECK(verify(v, n, a.op_key, NULL, 0, &why) == -EBADMSG && why == CT_REJECT_UNTRUSTED);
    /* Another op key than the one asked for (a valid entry copied under another key). */
    kc_artifact b;
    make(&b, "2");
    CHECK(verify(v, n, b.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_WRONG_KEY);

    /* Every single flipped byte after the magic is caught (sampled every 7 bytes). */
    size_t ml = strlen(CT_ENTRY_MAGIC);
    int caught = 0, tried = 0;
    for (size_t i = ml; i < n; i += 7) {
        char *c = malloc(n);
        memcpy(c, v, n);
        c[i] ^= 0x01;
        tried++;
        if (verify(c, n, a.op_key, &p1, 1, &why) == -EBADMSG)
            caught++;
        free(c);
    }
    CHECK(caught == tried, "%d of %d", caught, tried);
    /* The signature line of the record (after the "ed25519 " tag) flipped: bad signature. */
    char *c = malloc(n);
    memcpy(c, v, n);
    c[n - 10] ^= 0x02;
    CHECK(verify(c, n, a.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_SIGNATURE);
    free(c);

    /* Unsigned: the magic and the record alone. */
    const char *rec = strchr(v + ml, '\n') + 1;
    char *u = NULL;
    CHECK(asprintf(&u, "%s%s", CT_ENTRY_MAGIC, rec) > 0);
    CHECK(verify(u, strlen(u), a.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_UNSIGNED);
    free(u);
    CHECK(verify("garbage", 7, a.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_MALFORMED);

    /* Signed by a trusted key but not a record this daemon would read: malformed. */
    kc_artifact bad = a;
    bad.schedule_json = "{\"template\":\"other\"}"; /* the key no longer derives from it */
    char *bv = NULL;
    size_t bn = 0;
    CHECK(ct_entry_encode(&bad, &s1, &bv, &bn) == 0);
    CHECK(verify(bv, bn, a.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_MALFORMED);
    free(bv);

    free(v);
    kc_sign_secret_wipe(&s1);
    kc_sign_secret_wipe(&s2);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A dynamic op's entry (issue 39): its dims, size argument, grid rule and named output axis
 * travel in the signed record and come back as they were; the signature covers them. */
static void test_entry_dynamic(void)
{
    char dir[] = "/tmp/test_ct.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    kc_sign_secret s1;
    kc_sign_public p1;
    keys(dir, "one", &s1, &p1);
    kc_artifact a;
    make(&a, "dyn");
    kc_launch *l = &a.launch;
    l->n_dims = 1;
    l->dims[0] = (kc_dim){.name = "n", .min = 1, .max = 64, .multiple_of = 1};
    l->output_sym[0] = 1;
    kc_kernel *k = &l->kernels[0];
    k->args[k->n_args++] = KC_ARG_DIM0;
    k->grid_rule[0] = (kc_grid_rule){.dims = 1, .coef = 1, .div = 32, .mul = 1, .cap = 0};
    k->grid[0] = 2;
    char *v = NULL;
    size_t n = 0;
    ct_reject why = CT_REJECT_N;
    CHECK(ct_entry_encode(&a, &s1, &v, &n) == 0 && v);
    kc_artifact *got = NULL;
    CHECK(v && ct_entry_verify(v, n, a.op_key, &p1, 1, &got, NULL, &why) == 0 && got);
    if (got) {
        const kc_launch *g = &got->launch;
        CHECK(g->n_dims == 1 && strcmp(g->dims[0].name, "n") == 0 && g->dims[0].max == 64 &&
              g->output_sym[0] == 1 && g->kernels[0].n_args == 3 && g->kernels[0].args[2] == KC_ARG_DIM0 &&
              memcmp(&g->kernels[0].grid_rule[0], &k->grid_rule[0], sizeof(kc_grid_rule)) == 0);
    }
    kc_artifact_free(got);
    /* The dim's range changed in the record (its max 64 -> 96: sizes the kernel was never
     * built for) is refused by the signature, which covers the launch text. */
    char *at = v ? strstr(v, "\\\"max\\\":64") : NULL;
    CHECK(at != NULL, "the record carries the dim's max as escaped JSON text");
    if (at) {
        at[8] = '9'; /* \"max\":64 -> \"max\":96 */
        at[9] = '6';
        CHECK(verify(v, n, a.op_key, &p1, 1, &why) == -EBADMSG && why == CT_REJECT_SIGNATURE);
    }
    free(v);
    kc_sign_secret_wipe(&s1);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* The completion channel's names: the pattern matches every op's channel of one prefix only,
 * with glob characters of the prefix escaped; a channel gives back its op key, and anything else
 * (another prefix, a short or upper-case key, a lease key, trailing bytes) is refused. */
static void test_channel(void)
{
    char pat[64];
    CHECK(ct_channel_pattern("hidetd", pat, sizeof(pat)) == 0 && strcmp(pat, "hidetd:{*}:done") == 0,
          "%s", pat);
    CHECK(ct_channel_pattern("a*b?[c]\\", pat, sizeof(pat)) == 0 &&
              strcmp(pat, "a\\*b\\?\\[c\\]\\\\:{*}:done") == 0,
          "%s", pat);
    CHECK(ct_channel_pattern("hidetd", pat, 15) == -ENOSPC);
    CHECK(ct_channel_pattern("hidetd", pat, 16) == 0);
    CHECK(ct_channel_pattern("a*", pat, 3) == -ENOSPC);

    char key[KC_KEY_LEN + 1], out[KC_KEY_LEN + 1], name[200];
    for (int i = 0; i < KC_KEY_LEN; i++)
        key[i] = "0123456789abcdef"[i % 16];
    key[KC_KEY_LEN] = '\0';
    int n = snprintf(name, sizeof(name), "hidetd:{%s}:done", key);
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n, out) == 0 && strcmp(out, key) == 0);
    /* Not NUL-terminated as received: the length decides. */
    name[n] = 'x';
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n, out) == 0);
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n + 1, out) == -EINVAL);
    CHECK(ct_channel_op_key("other", name, (size_t)n, out) == -EINVAL);
    CHECK(ct_channel_op_key("hidet", name, (size_t)n, out) == -EINVAL);
    n = snprintf(name, sizeof(name), "hidetd:{%s}:lease", key);
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n, out) == -EINVAL);
    n = snprintf(name, sizeof(name), "hidetd:{%.63s}:done", key);
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n, out) == -EINVAL);
    key[3] = 'A';
    n = snprintf(name, sizeof(name), "hidetd:{%s}:done", key);
    CHECK(ct_channel_op_key("hidetd", name, (size_t)n, out) == -EINVAL);
    CHECK(ct_channel_op_key("hidetd", NULL, 0, out) == -EINVAL);
}

int main(void)
{
    test_url();
    test_entry();
    test_entry_dynamic();
    test_channel();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
