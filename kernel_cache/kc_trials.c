/* kernel_cache/kc_trials.c - trials: one row per candidate measured under a tuning key. */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>


const char *kc_trial_status_name(kc_trial_status s)
{
    switch (s) {
    case KC_TRIAL_OK: return "ok";
    case KC_TRIAL_WRONG: return "wrong";
    case KC_TRIAL_FAULT: return "fault";
    case KC_TRIAL_TIMEOUT: return "timeout";
    case KC_TRIAL_COMPILE_ERROR: return "compile_error";
    case KC_TRIAL_LOAD_ERROR: return "load_error";
    case KC_TRIAL_WORKER_DIED: return "worker_died";
    case KC_TRIAL_SLOWER: return "slower";
    }
    return "unknown";
}

int kc_trial_put(kc_db *db, const char *tuning_key, const char *space_hash, const kc_trial *t)
{
    int r = 0, rc;

    if (!db || !kc__key_ok(tuning_key) || !t || memchr(t->device, '\0', sizeof(t->device)) == NULL)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_TRIAL_PUT);
    if (!s) {
        r = -EIO;
        goto out;
    }
    kc__bind_text(s, 1, tuning_key);
    sqlite3_bind_int(s, 2, t->candidate);
    kc__bind_text(s, 3, kc__nz(space_hash));
    kc__bind_text(s, 4, kc__nz(t->schedule_json));
    sqlite3_bind_int(s, 5, (int)t->status);
    if (t->latency_us >= 0)
        sqlite3_bind_double(s, 6, t->latency_us);
    else
        sqlite3_bind_null(s, 6);
    sqlite3_bind_double(s, 7, t->max_rel_err);
    kc__bind_text(s, 8, t->reason);
    kc__bind_text(s, 9, t->device);
    sqlite3_bind_int64(s, 10, t->measured_at ? t->measured_at : kc__now());
    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        r = kc__sqlerr(db, rc, "store trial");
out:
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    kc__unlock(db);
    return r;
}

void kc_trials_free(kc_trial *t, size_t n)
{
    if (!t)
        return;
    for (size_t i = 0; i < n; i++) {
        free(t[i].schedule_json);
        free(t[i].reason);
    }
    free(t);
}

int kc_trials_get(kc_db *db, const char *tuning_key, kc_trial **ret, size_t *ret_n)
{
    kc_trial *v = NULL;
    size_t n = 0, cap = 0;
    int r = 0, rc;

    if (!db || !tuning_key || !ret || !ret_n)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_TRIALS_GET);
    if (!s) {
        r = -EIO;
        goto out;
    }
    kc__bind_text(s, 1, tuning_key);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            kc_trial *nv = realloc(v, nc * sizeof(*v));
            if (!nv) {
                r = -ENOMEM;
                goto out;
            }
            v = nv;
            cap = nc;
        }
        kc_trial *t = &v[n++];
        memset(t, 0, sizeof(*t));
        t->candidate = sqlite3_column_int(s, 0);
        t->schedule_json = kc__strdup_col(s, 1);
        t->status = (kc_trial_status)sqlite3_column_int(s, 2);
        t->latency_us = sqlite3_column_type(s, 3) == SQLITE_NULL ? -1.0
                                                                 : sqlite3_column_double(s, 3);
        t->max_rel_err = sqlite3_column_double(s, 4);
        t->reason = kc__strdup_col(s, 5);
        kc__copy_col(s, 6, t->device, sizeof(t->device));
        t->measured_at = sqlite3_column_int64(s, 7);
        if (!t->schedule_json || (sqlite3_column_type(s, 5) != SQLITE_NULL && !t->reason)) {
            r = -ENOMEM;
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "read trials");
        goto out;
    }
    *ret = v;
    *ret_n = n;
    v = NULL;
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    if (v)
        kc_trials_free(v, n);
    return r;
}
