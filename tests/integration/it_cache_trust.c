/* tests/integration/it_cache_trust.c - a backup file cannot put code into a running daemon's cache
 * unless a trusted key signed it. With the real hidetd serving a kernel it compiled, forged
 * backups (digests and trailer recomputed, as anyone can) that replace the kernel's PTX under its
 * own artifact key, or bind new "measured" code to its op key, are refused by hidetctl cache
 * import: the database rows stay as they were and the daemon still answers the original kernel.
 * A backup signed by a trusted key imports; one signed by another key does not.
 * Uses HIDETD_BIN and HIDETCTL_BIN, so it can be pointed at older binaries to show the hole. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <sqlite3.h>

#include "harness.h"
#include "tests/slurp.h"

#define REQ(tune)                                                                                  \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"                       \
    "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"" tune "\"}"

static const char *ctl;

static void hex_sha256(const void *p, size_t n, char out[65])
{
    unsigned char d[32];
    crypto_hash_sha256(d, p, n);
    sodium_bin2hex(out, 65, d, 32);
}

/* kernel_cache's kc_key over (op key, schedule): SHA-256 of each part behind its 8-byte
 * little-endian length, written out here as a forger would. */
static void artifact_key(const char *op_key, const char *schedule, char out[65])
{
    crypto_hash_sha256_state st;
    unsigned char d[32];
    const char *parts[2] = {op_key, schedule};
    crypto_hash_sha256_init(&st);
    for (int i = 0; i < 2; i++) {
        uint64_t len = strlen(parts[i]);
        unsigned char pre[8];
        for (int b = 0; b < 8; b++)
            pre[b] = (unsigned char)(len >> (8 * b));
        crypto_hash_sha256_update(&st, pre, 8);
        crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], len);
    }
    crypto_hash_sha256_final(&st, d);
    sodium_bin2hex(out, 65, d, 32);
}

/* Writes an export file from `header` (the first line of a real export, so the format version
 * is the binary's own) and one record, with the digest trailer recomputed and no signature. */
static void write_forged(const char *path, const char *header, const cJSON *rec)
{
    char *line = cJSON_PrintUnformatted(rec), *body = NULL, hex[65];
    if (asprintf(&body, "%s%s\n", header, line) < 0)
        body = NULL;
    hex_sha256(body, strlen(body), hex);
    FILE *f = fopen(path, "wb");
    fprintf(f, "%send 1 %s\n", body, hex);
    fclose(f);
    free(line);
    free(body);
}

static void set_ptx(cJSON *rec, const char *text)
{
    char sha[65], b64[512];
    hex_sha256(text, strlen(text), sha);
    sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)text, strlen(text),
                      sodium_base64_VARIANT_ORIGINAL);
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "ptx", cJSON_CreateString(b64));
    cJSON_ReplaceItemInObjectCaseSensitive(rec, "ptx_sha256", cJSON_CreateString(sha));
}

/* Every row that decides what the daemon answers, as text. */
static char *snapshot(const char *db)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    char *out = strdup("");
    if (sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s, "SELECT key || ptx_sha256 || cubin_sha256 || choice || schedule_json"
                           " FROM artifacts UNION ALL SELECT op_key || artifact_key || choice"
                           " FROM selections ORDER BY 1", -1, &q, NULL) != SQLITE_OK) {
        sqlite3_close(s);
        return out;
    }
    while (sqlite3_step(q) == SQLITE_ROW) {
        char *n = NULL;
        if (asprintf(&n, "%s%s\n", out, (const char *)sqlite3_column_text(q, 0)) < 0)
            n = NULL;
        free(out);
        out = n;
    }
    sqlite3_finalize(q);
    sqlite3_close(s);
    return out;
}

int main(void)
{
    ht_daemon d;
    char *out = NULL, exp[400], forged[400], prefix[400], other[400], db2[400];
    int rc;

    if (sodium_init() < 0)
        return 1;
    ctl = getenv("HIDETCTL_BIN");
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    /* The daemon compiles and stores a kernel; remember what it answers. */
    ht_resp r = ht_post(&d, "/v1/kernels", REQ("model"));
    CHECK(r.status == 200 && r.json, "first request: %ld %.300s", r.status, r.body);
    char key[65] = "", op_key[65] = "";
    snprintf(key, sizeof(key), "%s", cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "key")));
    snprintf(op_key, sizeof(op_key), "%s",
             cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "op_key")));
    ht_resp_free(&r);
    CHECK(strlen(key) == 64 && strlen(op_key) == 64, "key %s op key %s", key, op_key);
    char path[160];
    snprintf(path, sizeof(path), "/v1/kernels/%s/ptx", key);
    ht_resp ptx0 = ht_get(&d, path);
    CHECK(ptx0.status == 200 && ptx0.len > 100, "ptx: %ld", ptx0.status);

    /* A backup, then forgeries of it. */
    snprintf(exp, sizeof(exp), "%s/backup.hkc", d.dir);
    snprintf(forged, sizeof(forged), "%s/forged.hkc", d.dir);
    rc = ht_sh(&out, "'%s' --cache '%s' cache export '%s' 2>&1", ctl, d.cache, exp);
    CHECK(rc == 0, "export: %d %s", rc, out ? out : "");
    free(out);
    char *file = test_slurp(exp, NULL);
    CHECK(file && strchr(file, '\n'), "export file unreadable");
    if (!file)
        return ht_finish("it_cache_trust");
    char *nl = strchr(file, '\n'), *rec_end = strchr(nl + 1, '\n');
    char header[64];
    snprintf(header, sizeof(header), "%.*s", (int)(nl - file + 1), file);
    *rec_end = '\0';
    cJSON *rec = cJSON_Parse(nl + 1);
    CHECK(rec != NULL, "export record does not parse");
    if (!rec)
        return ht_finish("it_cache_trust");
    char *before = snapshot(d.cache);

    /* 1. Other code under the kernel's own artifact key: refused as it is, and refused also when
     *    the operator says the file is theirs (different bytes under an existing key). */
    cJSON *evil = cJSON_Duplicate(rec, true);
    set_ptx(evil, "// hijacked\n.version 8.0\n");
    write_forged(forged, header, evil);
    cJSON_Delete(evil);
    rc = ht_sh(&out, "'%s' --cache '%s' cache import '%s' 2>&1", ctl, d.cache, forged);
    CHECK(rc != 0, "a forged backup replacing existing code was imported: %s", out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' cache import --trust-unsigned '%s' 2>&1", ctl, d.cache,
               forged);
    CHECK(rc != 0, "different code under an existing key was imported: %s", out ? out : "");
    free(out);

    /* 2. New "measured" code bound to the op key (a new schedule, its key derived correctly). */
    evil = cJSON_Duplicate(rec, true);
    const char *sched = "{\"template\":\"matmul_mma\",\"params\":{\"evil\":1}}";
    char evil_key[65];
    artifact_key(op_key, sched, evil_key);
    cJSON_ReplaceItemInObjectCaseSensitive(evil, "key", cJSON_CreateString(evil_key));
    cJSON_ReplaceItemInObjectCaseSensitive(evil, "schedule_json", cJSON_CreateString(sched));
    cJSON_ReplaceItemInObjectCaseSensitive(evil, "choice", cJSON_CreateString("measured"));
    cJSON_ReplaceItemInObjectCaseSensitive(evil, "measured", cJSON_CreateTrue());
    cJSON_ReplaceItemInObjectCaseSensitive(evil, "latency_us", cJSON_CreateNumber(1.0));
    set_ptx(evil, "// bound to the op key\n.version 8.0\n");
    write_forged(forged, header, evil);
    cJSON_Delete(evil);
    rc = ht_sh(&out, "'%s' --cache '%s' cache import '%s' 2>&1", ctl, d.cache, forged);
    CHECK(rc != 0, "a forged backup binding new code to an op was imported: %s",
             out ? out : "");
    free(out);

    /* Nothing changed: the rows, and what the daemon answers, in every tune mode. */
    char *after = snapshot(d.cache);
    CHECK(strcmp(before, after) == 0, "the database changed:\n before %s\n after %s", before,
             after);
    free(after);
    const char *reqs[] = {REQ("none"), REQ("model"), REQ("measure")};
    for (int i = 0; i < 3; i++) {
        r = ht_post(&d, "/v1/kernels", reqs[i]);
        const char *k = r.json ? cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "key")) : NULL;
        CHECK(r.status == 200 && k && strcmp(k, key) == 0 &&
                 !cJSON_IsTrue(cJSON_GetObjectItem(r.json, "measured")),
                 "request %d answered another kernel: %ld %.400s", i, r.status, r.body);
        ht_resp_free(&r);
    }
    ht_resp ptx1 = ht_get(&d, path);
    CHECK(ptx1.status == 200 && ptx1.len == ptx0.len && memcmp(ptx1.body, ptx0.body,
                                                                  ptx0.len) == 0,
             "the daemon serves other PTX under %s", key);
    ht_resp_free(&ptx1);

    /* 3. A backup signed by a trusted key imports into another cache; one whose signer is not
     *    trusted is refused (exit 6). */
    snprintf(prefix, sizeof(prefix), "%s/ops-team", d.dir);
    snprintf(other, sizeof(other), "%s/someone", d.dir);
    snprintf(db2, sizeof(db2), "%s/restored/kernels.db", d.dir);
    rc = ht_sh(&out, "'%s' keygen --out '%s' && '%s' keygen --out '%s' && "
               "'%s' --cache '%s' cache export --sign '%s.key' '%s' 2>&1", ctl, prefix, ctl, other,
               ctl, d.cache, prefix, exp);
    CHECK(rc == 0, "keygen and signed export: %d %s", rc, out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' cache import --trust-dir /nonexistent --trust '%s.pub' "
               "'%s' 2>&1", ctl, db2, other, exp);
    CHECK(rc == 6, "a backup signed by an untrusted key: %d %s", rc, out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' cache import --trust-dir /nonexistent --trust '%s.pub' "
               "'%s' 2>&1", ctl, db2, prefix, exp);
    CHECK(rc == 0 && out && strstr(out, "imported 1 artifact") && strstr(out, "signed by"),
             "a backup signed by a trusted key: %d %s", rc, out ? out : "");
    free(out);

    free(before);
    cJSON_Delete(rec);
    free(file);
    ht_resp_free(&ptx0);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_cache_trust");
}
