/* kernel_cache/kc_admin.c - listing and administration (hidetctl cache ...): list, remove,
 * prune, stats, verify, vacuum.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>


static void kc__bind_filter(sqlite3_stmt *s, const kc_filter *f, bool with_limit)
{
    kc__bind_text(s, 1, f && f->key_prefix && *f->key_prefix ? f->key_prefix : NULL);
    kc__bind_text(s, 2, f && f->target && *f->target ? f->target : NULL);
    kc__bind_text(s, 3, f && f->op && *f->op ? f->op : NULL);
    sqlite3_bind_int64(s, 4, f ? f->older_than : 0);
    if (with_limit)
        sqlite3_bind_int64(s, 5, f && f->limit ? (int64_t)f->limit : -1);
}

int kc__list_locked(kc_db *db, const kc_filter *f, kc_summary **ret, size_t *ret_n)
{
    kc_summary *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;
    sqlite3_stmt *s = kc__stmt(db, S_LIST);

    if (!s)
        return -EIO;
    kc__bind_filter(s, f, true);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            kc_summary *nv = realloc(v, nc * sizeof(*v));
            if (!nv) {
                r = -ENOMEM;
                goto out;
            }
            v = nv;
            cap = nc;
        }
        kc_summary *e = &v[n++];
        memset(e, 0, sizeof(*e));
        kc__copy_col(s, 0, e->key, sizeof(e->key));
        kc__copy_col(s, 1, e->op, sizeof(e->op));
        kc__copy_col(s, 2, e->target, sizeof(e->target));
        e->choice = (kc_choice)sqlite3_column_int(s, 3); /* CHECKed by the schema */
        e->latency_us = sqlite3_column_type(s, 4) == SQLITE_NULL ? -1.0
                                                                 : sqlite3_column_double(s, 4);
        e->bytes = (uint64_t)sqlite3_column_int64(s, 5);
        e->created_at = sqlite3_column_int64(s, 6);
        e->last_used_at = sqlite3_column_int64(s, 7);
    }
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "list artifacts");
        goto out;
    }
    *ret = v;
    *ret_n = n;
    v = NULL;
out:
    sqlite3_reset(s);
    free(v);
    return r;
}

int kc_list(kc_db *db, const kc_filter *f, kc_summary **ret, size_t *ret_n)
{
    int r;

    if (!db || !ret || !ret_n)
        return -EINVAL;
    kc__lock(db);
    r = kc__list_locked(db, f, ret, ret_n);
    kc__unlock(db);
    return r;
}

int kc_remove(kc_db *db, const kc_filter *f, size_t *ret_removed)
{
    int r, rc;

    if (!db)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_REMOVE);
    if (!s) {
        r = -EIO;
        goto out;
    }
    kc__bind_filter(s, f, false);
    /* One statement is one transaction; selections go with their artifact (ON DELETE CASCADE). */
    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "remove artifacts");
        sqlite3_reset(s);
        goto out;
    }
    if (ret_removed)
        *ret_removed = (size_t)sqlite3_changes(db->sql);
    sqlite3_reset(s);
    r = 0;
out:
    kc__unlock(db);
    return r;
}

static int kc__total_bytes(kc_db *db, uint64_t *ret)
{
    sqlite3_stmt *s = kc__stmt(db, S_TOTAL_BYTES);
    int rc;

    if (!s)
        return -EIO;
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return kc__sqlerr(db, rc, "sum sizes");
    }
    *ret = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return 0;
}

int kc_prune_to_size(kc_db *db, uint64_t max_bytes, size_t *ret_removed)
{
    char (*victims)[KC_KEY_LEN + 1] = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    int r, rc;

    if (!db)
        return -EINVAL;
    kc__lock(db);
    r = kc__begin(db);
    if (r < 0)
        goto out;
    r = kc__total_bytes(db, &total);
    if (r < 0)
        goto fail;
    if (total > max_bytes) {
        sqlite3_stmt *s = kc__stmt(db, S_LRU);
        if (!s) {
            r = -EIO;
            goto fail;
        }
        /* Collect the victims first, oldest use first, then delete: no writes under a cursor. */
        while (total > max_bytes && (rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 32;
                void *nv = realloc(victims, nc * sizeof(*victims));
                if (!nv) {
                    sqlite3_reset(s);
                    r = -ENOMEM;
                    goto fail;
                }
                victims = nv;
                cap = nc;
            }
            kc__copy_col(s, 0, victims[n++], KC_KEY_LEN + 1);
            uint64_t b = (uint64_t)sqlite3_column_int64(s, 1);
            total = b > total ? 0 : total - b;
        }
        sqlite3_reset(s);
        for (size_t i = 0; i < n; i++) {
            sqlite3_stmt *d = kc__stmt(db, S_DELETE_KEY);
            if (!d) {
                r = -EIO;
                goto fail;
            }
            kc__bind_text(d, 1, victims[i]);
            rc = sqlite3_step(d);
            sqlite3_reset(d);
            if (rc != SQLITE_DONE) {
                r = kc__sqlerr(db, rc, "prune");
                goto fail;
            }
        }
    }
    r = kc__commit(db);
    if (r < 0)
        goto fail;
    if (ret_removed)
        *ret_removed = n;
    goto out;
fail:
    kc__rollback(db);
out:
    kc__unlock(db);
    free(victims);
    return r;
}

int kc_stats_get(kc_db *db, kc_stats *ret)
{
    int r = 0, rc;

    if (!db || !ret)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_STATS);
    if (!s) {
        r = -EIO;
        goto out;
    }
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        r = kc__sqlerr(db, rc, "stats");
        goto out;
    }
    ret->artifacts = (uint64_t)sqlite3_column_int64(s, 0);
    ret->selections = (uint64_t)sqlite3_column_int64(s, 1);
    ret->trials = (uint64_t)sqlite3_column_int64(s, 2);
    ret->bytes = (uint64_t)sqlite3_column_int64(s, 3);
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    return r;
}

static int kc__push_key(char ***v, size_t *n, const char *key)
{
    char **nv = realloc(*v, (*n + 1) * sizeof(**v));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[*n] = strdup(key);
    if (!nv[*n])
        return -ENOMEM;
    (*n)++;
    return 0;
}

int kc_verify(kc_db *db, size_t *ret_checked, size_t *ret_bad, char ***bad_keys)
{
    char **bad = NULL;
    size_t n_bad = 0, checked = 0;
    bool integrity_ok = true;
    sqlite3_stmt *s = NULL;
    int r = 0, rc;

    if (!db)
        return -EINVAL;
    kc__lock(db);
    /* integrity_check is a one-off; it is not worth a cached statement. */
    rc = sqlite3_prepare_v2(db->sql, "PRAGMA integrity_check", -1, &s, NULL);
    if (rc != SQLITE_OK) {
        r = kc__sqlerr(db, rc, "integrity_check");
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(s, 0);
        if (!t || strcmp((const char *)t, "ok") != 0) {
            if (integrity_ok)
                kc__set_err(db, "integrity_check: %s", t ? (const char *)t : "?");
            integrity_ok = false;
        }
    }
    sqlite3_finalize(s);
    s = NULL;
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "integrity_check");
        goto out;
    }
    r = kc__exec_stmt(db, S_BEGIN_READ, "begin");
    if (r < 0)
        goto out;
    s = kc__stmt(db, S_VERIFY_ROWS);
    if (!s) {
        r = -EIO;
        kc__rollback(db);
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        char got[KC_KEY_LEN + 1];
        bool ok = true;
        for (int c = 0; c < 2; c++) {
            const unsigned char *want = sqlite3_column_text(s, 1 + c);
            const void *b = sqlite3_column_blob(s, 3 + c);
            kc_sha256_hex(b, (size_t)sqlite3_column_bytes(s, 3 + c), got);
            if (!want || strcmp((const char *)want, got) != 0)
                ok = false;
        }
        checked++;
        if (!ok) {
            if (bad_keys) {
                const unsigned char *k = sqlite3_column_text(s, 0);
                r = kc__push_key(&bad, &n_bad, k ? (const char *)k : "");
                if (r < 0)
                    break;
            } else {
                n_bad++;
            }
        }
    }
    sqlite3_reset(s);
    s = NULL;
    kc__rollback(db); /* ends the read transaction */
    if (r < 0)
        goto out;
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "verify");
        goto out;
    }
    if (!integrity_ok) {
        /* A damaged b-tree is reported as an error even if every readable row verified. */
        r = -EBADMSG;
        goto out;
    }
    if (ret_checked)
        *ret_checked = checked;
    if (ret_bad)
        *ret_bad = n_bad;
    if (bad_keys) {
        *bad_keys = bad;
        bad = NULL;
    }
out:
    if (s)
        sqlite3_finalize(s);
    if (bad) {
        for (size_t i = 0; i < n_bad; i++)
            free(bad[i]);
        free(bad);
    }
    kc__unlock(db);
    return r;
}

int kc_vacuum(kc_db *db)
{
    int r = 0, rc;

    if (!db)
        return -EINVAL;
    kc__lock(db);
    rc = sqlite3_exec(db->sql, "VACUUM", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        r = kc__sqlerr(db, rc, "vacuum");
        goto out;
    }
    /* Give the WAL's space back too; a busy reader only makes this a partial checkpoint. */
    (void)sqlite3_wal_checkpoint_v2(db->sql, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
out:
    kc__unlock(db);
    return r;
}
