/* kernel_cache/kc_admin.c - listing and administration (hidetctl cache ...): list, remove,
 * prune, stats, the quarantine, verify, vacuum; and the check of a whole record as the daemon
 * would read it, which verify and import share.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <sqlite3.h>

#include "op/op.h"


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

/* Runs a cached statement bound to one key; *ret_changes: rows it changed. */
static int kc__exec_key(kc_db *db, int which, const char *key, const char *what,
                        size_t *ret_changes)
{
    sqlite3_stmt *s = kc__stmt(db, which);
    int rc;

    if (!s)
        return -EIO;
    kc__bind_text(s, 1, key);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, what);
    if (ret_changes)
        *ret_changes = (size_t)sqlite3_changes(db->sql);
    return 0;
}

int kc_remove_key(kc_db *db, const char *key, size_t *ret_removed)
{
    size_t arts = 0, quar = 0;
    int r;

    if (!db || !key)
        return -EINVAL;
    kc__lock(db);
    r = kc__begin(db);
    if (r < 0)
        goto out;
    /* The trigger takes the artifact's quarantine row along; a row without an artifact (a key
     * quarantined that was never stored, or stored elsewhere) is removed explicitly. */
    r = kc__exec_key(db, S_DELETE_KEY, key, "remove artifact", &arts);
    if (r == 0)
        r = kc__exec_key(db, S_QUAR_DEL, key, "remove from quarantine", &quar);
    if (r == 0)
        r = kc__commit(db);
    if (r < 0) {
        kc__rollback(db);
        goto out;
    }
    if (arts == 0 && quar == 0) {
        kc__set_err(db, "no artifact %s", key);
        r = -ENOENT;
        goto out;
    }
    if (ret_removed)
        *ret_removed = arts;
out:
    kc__unlock(db);
    return r;
}

int kc_quarantine(kc_db *db, const char *artifact_key, const char *reason)
{
    char op_key[KC_KEY_LEN + 1] = "";
    int r, rc;

    if (!db || !artifact_key)
        return -EINVAL;
    kc__lock(db);
    r = kc__begin(db);
    if (r < 0)
        goto out;
    sqlite3_stmt *s = kc__stmt(db, S_ART_DIGESTS);
    if (!s) {
        r = -EIO;
        goto fail;
    }
    kc__bind_text(s, 1, artifact_key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        kc__copy_col(s, 3, op_key, sizeof(op_key));
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "read artifact");
        goto fail;
    }
    r = kc__exec_key(db, S_SEL_DEL_ART, artifact_key, "remove selections", NULL);
    if (r < 0)
        goto fail;
    s = kc__stmt(db, S_QUAR_PUT);
    if (!s) {
        r = -EIO;
        goto fail;
    }
    kc__bind_text(s, 1, artifact_key);
    kc__bind_text(s, 2, op_key);
    kc__bind_text(s, 3, reason ? reason : "");
    sqlite3_bind_int64(s, 4, kc__now());
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "quarantine");
        goto fail;
    }
    r = kc__commit(db);
    if (r == 0)
        goto out;
fail:
    kc__rollback(db);
out:
    kc__unlock(db);
    return r;
}

int kc_quarantine_list(kc_db *db, kc_quarantined **ret, size_t *ret_n)
{
    kc_quarantined *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;

    if (!db || !ret || !ret_n)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_QUAR_LIST);
    if (!s) {
        r = -EIO;
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            kc_quarantined *nv = realloc(v, nc * sizeof(*v));
            if (!nv) {
                r = -ENOMEM;
                goto out;
            }
            v = nv;
            cap = nc;
        }
        kc_quarantined *q = &v[n++];
        memset(q, 0, sizeof(*q));
        kc__copy_col(s, 0, q->key, sizeof(q->key));
        q->key_len = (size_t)sqlite3_column_bytes(s, 0);
        kc__copy_col(s, 1, q->op_key, sizeof(q->op_key));
        kc__copy_col(s, 2, q->reason, sizeof(q->reason));
        q->at = sqlite3_column_int64(s, 3);
    }
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "list quarantine");
        goto out;
    }
    *ret = v;
    *ret_n = n;
    v = NULL;
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    free(v);
    return r;
}

/* A text that must hold a JSON object; with `op`, one whose "op" member is that string. */
static bool kc__json_object(const char *text, const char *op)
{
    cJSON *j = text ? cJSON_ParseWithOpts(text, NULL, true) : NULL;
    bool ok = cJSON_IsObject(j);
    if (ok && op) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "op"));
        ok = name && strcmp(name, op) == 0;
    }
    cJSON_Delete(j);
    return ok;
}

int kc__check_record(const kc_artifact *a, const char **ret_why)
{
    char want[KC_KEY_LEN + 1];
    tuner_op_kind kind;
    tuner_target target;
    const char *why = NULL;

    if (!kc_key_is_hex(a->key))
        why = "the key is not 64 lowercase hex digits";
    else if (!kc_key_is_hex(a->op_key))
        why = "the op key is not 64 lowercase hex digits";
    else if (kc__check_sizes(a) < 0)
        why = "PTX, cubin or a JSON text is larger than a record may be";
    else if (kc_artifact_key(a->op_key, a->schedule_json, want), strcmp(want, a->key) != 0)
        why = "the key is not the artifact key of its op key and schedule";
    else if (tuner_op_parse(a->op, &kind) < 0)
        why = "the op is not one this build knows";
    else if (!kc__json_object(a->op_json, a->op))
        why = "op_json is not a JSON object naming the record's op";
    else if (!kc__json_object(a->schedule_json, NULL))
        why = "schedule_json is not a JSON object";
    else if (tuner_target_parse(a->target, &target) < 0)
        why = "the target is not one this build knows";
    else if (a->choice < KC_CHOSEN_DEFAULT || a->choice > KC_CHOSEN_MEASURED)
        why = "the choice is out of range";
    else if (!(why = kc__launch_problem(&a->launch)) && a->launch.n_kernels < 1)
        why = "the launch description has no kernels";
    if (why) {
        if (ret_why)
            *ret_why = why;
        return -EBADMSG;
    }
    return 0;
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

void kc_problems_free(kc_problem *p, size_t n)
{
    if (!p)
        return;
    for (size_t i = 0; i < n; i++) {
        free(p[i].key);
        free(p[i].reason);
    }
    free(p);
}

static int kc__push_problem(kc_problem **v, size_t *n, const char *key, const char *reason)
{
    kc_problem *nv = realloc(*v, (*n + 1) * sizeof(**v));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[*n].key = strdup(key);
    nv[*n].reason = strdup(reason);
    if (!nv[*n].key || !nv[*n].reason) {
        free(nv[*n].key);
        free(nv[*n].reason);
        return -ENOMEM;
    }
    (*n)++;
    return 0;
}

/* The keys of every artifact, read first so that the deep reads below use the handle's
 * statements one at a time. */
static int kc__all_keys(kc_db *db, char ***ret, size_t *ret_n)
{
    sqlite3_stmt *s = kc__stmt(db, S_VERIFY_ROWS);
    char **v = NULL;
    size_t n = 0;
    int r = 0, rc;

    if (!s)
        return -EIO;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const unsigned char *k = sqlite3_column_text(s, 0);
        char **nv = realloc(v, (n + 1) * sizeof(*v));
        if (!nv) {
            r = -ENOMEM;
            break;
        }
        v = nv;
        v[n] = strdup(k ? (const char *)k : "");
        if (!v[n]) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    sqlite3_reset(s);
    if (r == 0 && rc != SQLITE_DONE)
        r = kc__sqlerr(db, rc, "verify");
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

int kc_verify(kc_db *db, size_t *ret_checked, kc_problem **ret_bad, size_t *ret_n_bad)
{
    kc_problem *bad = NULL;
    size_t n_bad = 0, n_keys = 0;
    char **keys = NULL;
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
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "integrity_check");
        goto out;
    }
    r = kc__begin_read(db);
    if (r < 0)
        goto out;
    r = kc__all_keys(db, &keys, &n_keys);
    /* Each record through the daemon's own read (digests, typed columns, launch rows), then
     * what that read takes on trust (keys, texts, target). */
    for (size_t i = 0; r == 0 && i < n_keys; i++) {
        kc_artifact *a = NULL;
        const char *why = NULL;
        char reason[sizeof(db->err)];
        int g = kc__get_locked(db, keys[i], true, false, &a);
        if (g == -EBADMSG || g == -ENOENT) {
            snprintf(reason, sizeof(reason), "%s", kc_errmsg(db));
        } else if (g < 0) {
            r = g;
            break;
        } else if (kc__check_record(a, &why) < 0) {
            snprintf(reason, sizeof(reason), "%s", why);
        } else {
            reason[0] = '\0';
        }
        kc_artifact_free(a);
        if (reason[0]) {
            if (ret_bad)
                r = kc__push_problem(&bad, &n_bad, keys[i], reason);
            else
                n_bad++;
        }
    }
    kc__rollback(db); /* ends the read transaction */
    if (r < 0)
        goto out;
    if (!integrity_ok) {
        /* A damaged b-tree is reported as an error even if every readable row verified. */
        r = -EBADMSG;
        goto out;
    }
    if (ret_checked)
        *ret_checked = n_keys;
    if (ret_n_bad)
        *ret_n_bad = n_bad;
    if (ret_bad) {
        *ret_bad = bad;
        bad = NULL;
    }
out:
    kc_problems_free(bad, n_bad);
    for (size_t i = 0; i < n_keys; i++)
        free(keys[i]);
    free(keys);
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
