/* kernel_cache/kc_artifacts.c - artifacts (compiled kernels with their digests) and selections
 * (op key -> the artifact that answers it).
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>


uint64_t kc__artifact_bytes(const kc_artifact *a)
{
    return (uint64_t)a->ptx_len + a->cubin_len + strlen(kc__nz(a->op_json)) +
           strlen(kc__nz(a->schedule_json)) + strlen(kc__nz(a->launch_json)) +
           strlen(kc__nz(a->provenance_json));
}

int kc__check_artifact(const kc_artifact *a)
{
    if (!a || !kc__key_ok(a->key) || !kc__key_ok(a->op_key))
        return -EINVAL;
    if (memchr(a->op, '\0', sizeof(a->op)) == NULL ||
        memchr(a->target, '\0', sizeof(a->target)) == NULL)
        return -EINVAL;
    if ((a->ptx_len && !a->ptx) || (a->cubin_len && !a->cubin))
        return -EINVAL;
    return 0;
}

/* Stores one artifact and its selection; the caller holds the lock and the transaction.
 * Digests given (from an import file, already checked) or computed here. */
int kc__put_locked(kc_db *db, const kc_artifact *a, const char *ptx_sha, const char *cubin_sha)
{
    char ph[KC_KEY_LEN + 1], ch[KC_KEY_LEN + 1];
    int64_t now = kc__now();
    int64_t created = a->created_at ? a->created_at : now;
    int64_t used = a->last_used_at ? a->last_used_at : created;
    sqlite3_stmt *s;
    int rc;

    if (!ptx_sha) {
        kc_sha256_hex(a->ptx, a->ptx_len, ph);
        ptx_sha = ph;
    }
    if (!cubin_sha) {
        kc_sha256_hex(a->cubin, a->cubin_len, ch);
        cubin_sha = ch;
    }
    s = kc__stmt(db, S_ART_PUT);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, a->key);
    kc__bind_text(s, 2, a->op_key);
    kc__bind_text(s, 3, a->op);
    kc__bind_text(s, 4, a->target);
    kc__bind_text(s, 5, kc__nz(a->op_json));
    kc__bind_text(s, 6, kc__nz(a->schedule_json));
    kc__bind_text(s, 7, kc__nz(a->launch_json));
    sqlite3_bind_int(s, 8, a->measured ? 1 : 0);
    if (a->latency_us >= 0)
        sqlite3_bind_double(s, 9, a->latency_us);
    else
        sqlite3_bind_null(s, 9);
    sqlite3_bind_double(s, 10, a->predicted_us);
    kc__bind_text(s, 11, kc__nz(a->provenance_json));
    sqlite3_bind_int64(s, 12, created);
    sqlite3_bind_int64(s, 13, used);
    sqlite3_bind_int64(s, 14, (int64_t)kc__artifact_bytes(a));
    kc__bind_text(s, 15, ptx_sha);
    kc__bind_text(s, 16, cubin_sha);
    kc__bind_blob(s, 17, a->ptx, a->ptx_len);
    kc__bind_blob(s, 18, a->cubin, a->cubin_len);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "store artifact");

    s = kc__stmt(db, S_SEL_PUT);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, a->op_key);
    kc__bind_text(s, 2, a->key);
    sqlite3_bind_int(s, 3, a->measured ? 1 : 0);
    sqlite3_bind_int64(s, 4, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "store selection");
    return 0;
}

int kc_artifact_put(kc_db *db, const kc_artifact *a)
{
    int r;

    if (!db)
        return -EINVAL;
    r = kc__check_artifact(a);
    if (r < 0)
        return r;
    kc__lock(db);
    r = kc__begin(db);
    if (r < 0)
        goto out;
    r = kc__put_locked(db, a, NULL, NULL);
    if (r == 0)
        r = kc__commit(db);
    if (r < 0)
        kc__rollback(db);
out:
    kc__unlock(db);
    return r;
}

void kc_artifact_free(kc_artifact *a)
{
    if (!a)
        return;
    free(a->op_json);
    free(a->schedule_json);
    free(a->launch_json);
    free(a->ptx);
    free(a->cubin);
    free(a->provenance_json);
    free(a);
}

static int kc__fill_meta(sqlite3_stmt *s, kc_artifact *a)
{
    kc__copy_col(s, 0, a->key, sizeof(a->key));
    kc__copy_col(s, 1, a->op_key, sizeof(a->op_key));
    kc__copy_col(s, 2, a->op, sizeof(a->op));
    kc__copy_col(s, 3, a->target, sizeof(a->target));
    a->op_json = kc__strdup_col(s, 4);
    a->schedule_json = kc__strdup_col(s, 5);
    a->launch_json = kc__strdup_col(s, 6);
    a->measured = sqlite3_column_int(s, 7) != 0;
    a->latency_us = sqlite3_column_type(s, 8) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, 8);
    a->predicted_us = sqlite3_column_double(s, 9);
    a->provenance_json = kc__strdup_col(s, 10);
    a->created_at = sqlite3_column_int64(s, 11);
    a->last_used_at = sqlite3_column_int64(s, 12);
    if (!a->op_json || !a->schedule_json || !a->launch_json || !a->provenance_json)
        return -ENOMEM;
    return 0;
}

/* Copies a blob column and checks it against its stored digest: -EBADMSG on mismatch. */
static int kc__read_blob(sqlite3_stmt *s, int col, int sha_col, void **ret, size_t *ret_len,
                         bool nul_terminate)
{
    const void *b = sqlite3_column_blob(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    const unsigned char *want = sqlite3_column_text(s, sha_col);
    char got[KC_KEY_LEN + 1];
    unsigned char *copy;

    kc_sha256_hex(b, n, got);
    if (!want || strcmp((const char *)want, got) != 0)
        return -EBADMSG;
    copy = malloc(n + (nul_terminate ? 1 : 0) + (n == 0 ? 1 : 0));
    if (!copy)
        return -ENOMEM;
    if (n)
        memcpy(copy, b, n);
    if (nul_terminate)
        copy[n] = '\0';
    *ret = copy;
    *ret_len = n;
    return 0;
}

/* Reads one artifact; the caller holds the lock. touch: refresh last_used_at (at most once a
 * minute, since every refresh is a write transaction). */
int kc__get_locked(kc_db *db, const char *key, bool full, bool touch, kc_artifact **ret)
{
    sqlite3_stmt *s = kc__stmt(db, full ? S_ART_FULL : S_ART_META);
    kc_artifact *a = NULL;
    int r = 0, rc;

    if (!s)
        return -EIO;
    kc__bind_text(s, 1, key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        kc__set_err(db, "no artifact %s", key);
        r = -ENOENT;
        goto out;
    }
    if (rc != SQLITE_ROW) {
        r = kc__sqlerr(db, rc, "read artifact");
        goto out;
    }
    a = calloc(1, sizeof(*a));
    if (!a) {
        r = -ENOMEM;
        goto out;
    }
    r = kc__fill_meta(s, a);
    if (r < 0)
        goto out;
    if (full) {
        void *p = NULL;
        r = kc__read_blob(s, 15, 13, &p, &a->ptx_len, true);
        if (r < 0) {
            kc__set_err(db, "artifact %s: PTX does not match its stored digest", key);
            goto out;
        }
        a->ptx = p;
        r = kc__read_blob(s, 16, 14, &p, &a->cubin_len, false);
        if (r < 0) {
            kc__set_err(db, "artifact %s: cubin does not match its stored digest", key);
            goto out;
        }
        a->cubin = p;
    }
    sqlite3_reset(s);
    if (touch) {
        int64_t now = kc__now();
        if (now - a->last_used_at >= 60) {
            sqlite3_stmt *t = kc__stmt(db, S_TOUCH);
            /* Best effort: a failed refresh only makes LRU pruning slightly less exact. */
            if (t) {
                kc__bind_text(t, 1, key);
                sqlite3_bind_int64(t, 2, now);
                if (sqlite3_step(t) == SQLITE_DONE)
                    a->last_used_at = now;
                sqlite3_reset(t);
            }
        }
    }
    *ret = a;
    a = NULL;
out:
    sqlite3_reset(s);
    kc_artifact_free(a);
    return r;
}

static int kc__get(kc_db *db, const char *key, bool full, bool touch, kc_artifact **ret)
{
    int r;

    if (!db || !key || !*key || !ret)
        return -EINVAL;
    kc__lock(db);
    r = kc__get_locked(db, key, full, touch, ret);
    kc__unlock(db);
    return r;
}

int kc_artifact_get(kc_db *db, const char *key, kc_artifact **ret)
{
    return kc__get(db, key, true, true, ret);
}

int kc_artifact_get_meta(kc_db *db, const char *key, kc_artifact **ret)
{
    return kc__get(db, key, false, true, ret);
}

int kc_artifact_peek(kc_db *db, const char *key, kc_artifact **ret)
{
    return kc__get(db, key, true, false, ret);
}

int kc_selection_get(kc_db *db, const char *op_key, char ret_artifact_key[KC_KEY_LEN + 1],
                     bool *ret_measured)
{
    int r = 0, rc;

    if (!db || !op_key || !ret_artifact_key)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_SEL_GET);
    if (!s) {
        r = -EIO;
        goto out;
    }
    kc__bind_text(s, 1, op_key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        r = -ENOENT;
        goto out;
    }
    if (rc != SQLITE_ROW) {
        r = kc__sqlerr(db, rc, "read selection");
        goto out;
    }
    kc__copy_col(s, 0, ret_artifact_key, KC_KEY_LEN + 1);
    if (ret_measured)
        *ret_measured = sqlite3_column_int(s, 1) != 0;
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    return r;
}
