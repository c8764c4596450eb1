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
           strlen(kc__nz(a->schedule_json)) + kc__launch_bytes(&a->launch) +
           strlen(kc__nz(a->provenance_json));
}

int kc__check_sizes(const kc_artifact *a)
{
    if (a->ptx_len > KC_MAX_CODE_BYTES || a->cubin_len > KC_MAX_CODE_BYTES ||
        strnlen(kc__nz(a->op_json), KC_MAX_TEXT_BYTES + 1) > KC_MAX_TEXT_BYTES ||
        strnlen(kc__nz(a->schedule_json), KC_MAX_TEXT_BYTES + 1) > KC_MAX_TEXT_BYTES ||
        strnlen(kc__nz(a->provenance_json), KC_MAX_TEXT_BYTES + 1) > KC_MAX_TEXT_BYTES)
        return -EINVAL;
    return 0;
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
    if (a->choice < KC_CHOSEN_DEFAULT || a->choice > KC_CHOSEN_MEASURED)
        return -EINVAL;
    if (kc__check_sizes(a) < 0)
        return -EINVAL;
    return kc_launch_check(&a->launch);
}

void kc__shape_encode(const kc_launch *l, unsigned char out[8 * KC_MAX_RANK], size_t *ret_len)
{
    int n = l->output_rank < 0 ? 0 : l->output_rank > KC_MAX_RANK ? KC_MAX_RANK : l->output_rank;
    for (int d = 0; d < n; d++)
        for (int b = 0; b < 8; b++)
            out[8 * d + b] = (unsigned char)((uint64_t)l->output_shape[d] >> (8 * b));
    *ret_len = 8 * (size_t)n;
}

int kc__shape_decode(const void *blob, size_t len, kc_launch *l)
{
    const unsigned char *p = blob;
    if (len % 8 != 0 || len > 8 * KC_MAX_RANK || (len && !p))
        return -EBADMSG;
    l->output_rank = (int)(len / 8);
    for (int d = 0; d < l->output_rank; d++) {
        uint64_t v = 0;
        for (int b = 0; b < 8; b++)
            v |= (uint64_t)p[8 * d + b] << (8 * b);
        l->output_shape[d] = (int64_t)v;
    }
    return 0;
}

static void kc__put_le64(uint8_t *p, int64_t v)
{
    for (int b = 0; b < 8; b++)
        p[b] = (uint8_t)((uint64_t)v >> (8 * b));
}

static int64_t kc__get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return (int64_t)v;
}

/* A dynamic kernel's grid_rules blob (kc__rules_blob_len bytes; KC_GRID_RULE_PACKED). */
static void kc__rules_pack(const kc_kernel *k, uint8_t *out)
{
    const kc_grid_rule *r = k->grid_rule;
    if (kc__kernel_has_sym_map(k))
        for (int m = 0; m < k->n_maps; m++) {
            uint8_t *p = out + KC_GRID_RULES_PACKED + m * KC_MAP_SYM_PACKED;
            for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 9) {
                p[0] = k->maps[m].sym[d];
                kc__put_le64(p + 1, (int64_t)k->maps[m].sym_coef[d]);
            }
        }
    for (int d = 0; d < 3; d++) {
        uint8_t *p = out + d * KC_GRID_RULE_PACKED;
        p[0] = r[d].dims;
        kc__put_le64(p + 1, r[d].coef);
        kc__put_le64(p + 9, r[d].div);
        kc__put_le64(p + 17, r[d].mul);
        kc__put_le64(p + 25, r[d].cap);
    }
}

/* The maps' symbolic dimensions from the records after the rules (the maps already read). */
static void kc__map_sym_unpack(const uint8_t *in, kc_kernel *k)
{
    for (int m = 0; m < k->n_maps; m++) {
        const uint8_t *p = in + m * KC_MAP_SYM_PACKED;
        for (int d = 0; d < TUNER_TMAP_MAX_RANK; d++, p += 9) {
            k->maps[m].sym[d] = p[0];
            k->maps[m].sym_coef[d] = (uint64_t)kc__get_le64(p + 1);
        }
    }
}

static void kc__rules_unpack(const uint8_t in[KC_GRID_RULES_PACKED], kc_grid_rule r[3])
{
    for (int d = 0; d < 3; d++) {
        const uint8_t *p = in + d * KC_GRID_RULE_PACKED;
        r[d] = (kc_grid_rule){p[0], kc__get_le64(p + 1), kc__get_le64(p + 9),
                              kc__get_le64(p + 17), kc__get_le64(p + 25)};
    }
}

/* Runs a cached statement that takes the artifact key as ?1 and returns no rows. */
static int kc__exec_with_key(kc_db *db, int which, const char *key, const char *what)
{
    sqlite3_stmt *s = kc__stmt(db, which);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, key);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE ? 0 : kc__sqlerr(db, rc, what);
}

/* The kernel rows (and, with_dims, the dim rows) of one artifact; see kc__launch_put_locked. */
static int kc__launch_rows_put(kc_db *db, const char *key, const kc_launch *l, bool with_dims)
{
    sqlite3_stmt *s;
    int rc, r;

    r = kc__exec_with_key(db, S_KERNELS_DEL, key, "store launch");
    if (r == 0 && with_dims)
        r = kc__exec_with_key(db, S_DIMS_DEL, key, "store launch dims");
    if (r < 0)
        return r;
    for (int i = 0; i < l->n_kernels; i++) {
        const kc_kernel *k = &l->kernels[i];
        /* One byte per argument, its kc_buf value: the enum has fewer than 256 members. */
        unsigned char args[KC_MAX_ARGS];
        for (int a = 0; a < k->n_args; a++)
            args[a] = (unsigned char)k->args[a];
        uint8_t maps[KC_MAX_MAPS * TUNER_TMAP_PACKED];
        for (int m = 0; m < k->n_maps; m++)
            tuner_tmap_pack(&k->maps[m], maps + m * TUNER_TMAP_PACKED);
        const bool dynamic = kc__kernel_is_dynamic(k);
        uint8_t rules[KC_GRID_RULES_PACKED + KC_MAX_MAPS * KC_MAP_SYM_PACKED];
        if (dynamic)
            kc__rules_pack(k, rules);
        if ((k->n_maps || dynamic) && !with_dims)
            return -EINVAL; /* the conversion's callers only hand static, map-less launches */
        s = kc__stmt(db, k->n_maps || dynamic ? S_KERNEL_PUT : S_KERNEL_PUT_NO_MAPS);
        if (!s)
            return -EIO;
        kc__bind_text(s, 1, key);
        sqlite3_bind_int(s, 2, i);
        kc__bind_text(s, 3, k->name);
        for (int d = 0; d < 3; d++) {
            sqlite3_bind_int64(s, 4 + d, k->grid[d]);
            sqlite3_bind_int64(s, 7 + d, k->block[d]);
        }
        sqlite3_bind_int64(s, 10, k->shared_bytes);
        kc__bind_blob(s, 11, args, (size_t)k->n_args);
        if (k->n_maps || dynamic) {
            kc__bind_blob(s, 12, maps, (size_t)k->n_maps * TUNER_TMAP_PACKED);
            kc__bind_blob(s, 13, rules, dynamic ? kc__rules_blob_len(k) : 0);
        }
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        if (rc != SQLITE_DONE)
            return kc__sqlerr(db, rc, "store launch");
    }
    for (int k = 0; with_dims && k < l->n_dims; k++) {
        const kc_dim *d = &l->dims[k];
        int64_t axes = 0;
        for (int a = 0; l->has_output && a < l->output_rank; a++)
            if (l->output_sym[a] & (1u << k))
                axes |= INT64_C(1) << a;
        s = kc__stmt(db, S_DIM_PUT);
        if (!s)
            return -EIO;
        kc__bind_text(s, 1, key);
        sqlite3_bind_int(s, 2, k);
        kc__bind_text(s, 3, d->name);
        sqlite3_bind_int64(s, 4, d->min);
        sqlite3_bind_int64(s, 5, d->max);
        sqlite3_bind_int64(s, 6, d->multiple_of);
        sqlite3_bind_int64(s, 7, axes);
        sqlite3_bind_double(s, 8, l->range_worst);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        if (rc != SQLITE_DONE)
            return kc__sqlerr(db, rc, "store launch dims");
    }
    return 0;
}

/* Replaces the launch rows of one artifact; the caller holds the lock and the transaction. */
int kc__launch_put_locked(kc_db *db, const char *key, const kc_launch *l)
{
    return kc__launch_rows_put(db, key, l, true);
}

int kc__launch_put_static_locked(kc_db *db, const char *key, const kc_launch *l)
{
    if (l->n_dims)
        return -EINVAL;
    return kc__launch_rows_put(db, key, l, false);
}

/* An INTEGER column that must hold a value in [lo, hi]. */
static bool kc__int_col(sqlite3_stmt *s, int i, int64_t lo, int64_t hi, int64_t *ret)
{
    if (sqlite3_column_type(s, i) != SQLITE_INTEGER)
        return false;
    int64_t v = sqlite3_column_int64(s, i);
    if (v < lo || v > hi)
        return false;
    *ret = v;
    return true;
}

/* Reads the dim rows of one artifact into l (its output already read): -EBADMSG when they are
 * not numbered 0, 1, ... or name an output axis the output does not have. */
static int kc__dims_get_locked(kc_db *db, const char *key, kc_launch *l)
{
    sqlite3_stmt *s = kc__stmt(db, S_DIMS_GET);
    int r = 0, rc;

    if (!s)
        return -EIO;
    kc__bind_text(s, 1, key);
    l->n_dims = 0;
    memset(l->dims, 0, sizeof(l->dims));
    memset(l->output_sym, 0, sizeof(l->output_sym));
    l->range_worst = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t pos, v[3], axes;
        const unsigned char *name = sqlite3_column_text(s, 1);
        kc_dim *d = &l->dims[l->n_dims];
        const int rank = l->has_output ? l->output_rank : 0;
        if (l->n_dims >= KC_MAX_DIMS || !kc__int_col(s, 0, l->n_dims, l->n_dims, &pos) ||
            !kc__int_col(s, 2, 1, KC_MAX_DIM, &v[0]) || !kc__int_col(s, 3, 1, KC_MAX_DIM, &v[1]) ||
            !kc__int_col(s, 4, 1, KC_MAX_DIM, &v[2]) ||
            !kc__int_col(s, 5, 0, (INT64_C(1) << rank) - 1, &axes) || !name ||
            strlen((const char *)name) >= sizeof(d->name)) {
            r = -EBADMSG;
            break;
        }
        /* every row of the artifact holds the launch's range_worst (kc_launch_check bounds it) */
        if (sqlite3_column_type(s, 6) != SQLITE_FLOAT && sqlite3_column_type(s, 6) != SQLITE_INTEGER) {
            r = -EBADMSG;
            break;
        }
        l->range_worst = sqlite3_column_double(s, 6);
        strcpy(d->name, (const char *)name);
        d->min = v[0];
        d->max = v[1];
        d->multiple_of = v[2];
        for (int a = 0; a < rank; a++)
            if (axes & (INT64_C(1) << a))
                l->output_sym[a] |= (uint8_t)(1u << l->n_dims);
        l->n_dims++;
    }
    if (r == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE)
        r = kc__sqlerr(db, rc, "read launch dims");
    sqlite3_reset(s);
    return r;
}

/* Reads the kernel rows of one artifact into l (its other fields already read). */
int kc__launch_get_locked(kc_db *db, const char *key, kc_launch *l)
{
    sqlite3_stmt *s = kc__stmt(db, S_KERNELS_GET);
    int r = 0, rc;

    if (!s)
        return -EIO;
    kc__bind_text(s, 1, key);
    l->n_kernels = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t v[8];
        bool ok = l->n_kernels < KC_MAX_KERNELS && kc__int_col(s, 0, l->n_kernels, l->n_kernels, &v[0]);
        for (int c = 0; ok && c < 6; c++)
            ok = kc__int_col(s, 2 + c, 1, UINT32_MAX, &v[1 + c]);
        ok = ok && kc__int_col(s, 8, 0, UINT32_MAX, &v[7]);
        const unsigned char *name = sqlite3_column_text(s, 1);
        const unsigned char *args = sqlite3_column_blob(s, 9);
        size_t n_args = (size_t)sqlite3_column_bytes(s, 9);
        const uint8_t *maps = sqlite3_column_blob(s, 10);
        size_t maps_len = (size_t)sqlite3_column_bytes(s, 10);
        const uint8_t *rules = sqlite3_column_blob(s, 11);
        size_t rules_len = (size_t)sqlite3_column_bytes(s, 11);
        kc_kernel *k = &l->kernels[l->n_kernels];
        if (!ok || !name || strlen((const char *)name) >= sizeof(k->name) || n_args > KC_MAX_ARGS ||
            maps_len % TUNER_TMAP_PACKED || maps_len / TUNER_TMAP_PACKED > KC_MAX_MAPS ||
            (rules_len != 0 && rules_len != KC_GRID_RULES_PACKED &&
             rules_len != KC_GRID_RULES_PACKED + maps_len / TUNER_TMAP_PACKED * KC_MAP_SYM_PACKED) ||
            (rules_len > KC_GRID_RULES_PACKED && maps_len == 0)) {
            r = -EBADMSG;
            break;
        }
        memset(k, 0, sizeof(*k));
        strcpy(k->name, (const char *)name);
        for (int d = 0; d < 3; d++) {
            k->grid[d] = (uint32_t)v[1 + d];
            k->block[d] = (uint32_t)v[4 + d];
        }
        k->shared_bytes = (uint32_t)v[7];
        k->n_args = (int)n_args;
        for (size_t a = 0; a < n_args; a++)
            k->args[a] = (kc_buf)args[a];
        if (rules_len)
            kc__rules_unpack(rules, k->grid_rule);
        for (size_t m = 0; m < maps_len / TUNER_TMAP_PACKED; m++)
            if (tuner_tmap_unpack(maps + m * TUNER_TMAP_PACKED, KC_BUF_WORKSPACE, &k->maps[k->n_maps++]) < 0)
                r = -EBADMSG;
        if (r == 0 && rules_len > KC_GRID_RULES_PACKED) {
            kc__map_sym_unpack(rules + KC_GRID_RULES_PACKED, k);
            /* Records of nothing symbolic would have been left out: reading them is damage. */
            if (!kc__kernel_has_sym_map(k))
                r = -EBADMSG;
            for (int m = 0; m < k->n_maps; m++)
                if (tuner_tmap_check(&k->maps[m], NULL, 0, NULL, 0) < 0)
                    r = -EBADMSG;
        }
        if (r < 0)
            break;
        l->n_kernels++;
    }
    if (r == 0 && rc != SQLITE_ROW && rc != SQLITE_DONE)
        r = kc__sqlerr(db, rc, "read launch");
    sqlite3_reset(s);
    if (r == 0)
        r = kc__dims_get_locked(db, key, l);
    const char *why = NULL;
    if (r == 0 && (why = kc__launch_problem(l)) != NULL)
        r = -EBADMSG;
    if (r == -EBADMSG)
        kc__set_err(db, "artifact %s: its stored launch description is malformed%s%s", key,
                    why ? ": " : "", why ? why : "");
    sqlite3_reset(s);
    return r;
}

/* Stores one artifact and its selection; the caller holds the lock and the transaction.
 * Digests given (from an import file, already checked) or computed here. */
int kc__put_locked(kc_db *db, const kc_artifact *a, const char *ptx_sha, const char *cubin_sha)
{
    char ph[KC_KEY_LEN + 1], ch[KC_KEY_LEN + 1];
    int64_t now = kc__now();
    int64_t created = a->created_at ? a->created_at : now;
    int64_t used = a->last_used_at ? a->last_used_at : created;
    unsigned char shape[8 * KC_MAX_RANK];
    size_t shape_len = 0;
    sqlite3_stmt *s;
    int rc;

    kc__shape_encode(&a->launch, shape, &shape_len);
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
    sqlite3_bind_int(s, 7, (int)a->choice);
    if (a->latency_us >= 0)
        sqlite3_bind_double(s, 8, a->latency_us);
    else
        sqlite3_bind_null(s, 8);
    sqlite3_bind_double(s, 9, a->predicted_us);
    kc__bind_text(s, 10, kc__nz(a->provenance_json));
    sqlite3_bind_int64(s, 11, created);
    sqlite3_bind_int64(s, 12, used);
    sqlite3_bind_int64(s, 13, (int64_t)kc__artifact_bytes(a));
    sqlite3_bind_int64(s, 14, (int64_t)a->launch.workspace_bytes);
    if (a->launch.has_output) {
        kc__bind_text(s, 15, a->launch.output_dtype);
        kc__bind_blob(s, 16, shape, shape_len);
    } else {
        sqlite3_bind_null(s, 15);
        sqlite3_bind_null(s, 16);
    }
    kc__bind_text(s, 17, ptx_sha);
    kc__bind_text(s, 18, cubin_sha);
    kc__bind_blob(s, 19, a->ptx, a->ptx_len);
    kc__bind_blob(s, 20, a->cubin, a->cubin_len);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "store artifact");
    int r = kc__launch_put_locked(db, a->key, &a->launch);
    if (r < 0)
        return r;

    s = kc__stmt(db, S_SEL_PUT);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, a->op_key);
    kc__bind_text(s, 2, a->key);
    sqlite3_bind_int(s, 3, (int)a->choice);
    sqlite3_bind_int64(s, 4, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "store selection");

    /* Stored again (a new build, an import of a good copy): it is usable, so it leaves the
     * quarantine. */
    s = kc__stmt(db, S_QUAR_DEL);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, a->key);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "lift quarantine");
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
    a->latency_us = sqlite3_column_type(s, 7) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, 7);
    a->predicted_us = sqlite3_column_double(s, 8);
    a->provenance_json = kc__strdup_col(s, 9);
    a->created_at = sqlite3_column_int64(s, 10);
    a->last_used_at = sqlite3_column_int64(s, 11);
    if (!a->op_json || !a->schedule_json || !a->provenance_json)
        return -ENOMEM;
    /* Typed columns are checked, not trusted: another writer (or a damaged file) could have
     * stored anything, and a wrong launch would be handed to clients. */
    int64_t choice, ws;
    if (!kc__int_col(s, 6, KC_CHOSEN_DEFAULT, KC_CHOSEN_MEASURED, &choice) ||
        !kc__int_col(s, 12, 0, INT64_MAX, &ws))
        return -EBADMSG;
    a->choice = (kc_choice)choice;
    a->launch.workspace_bytes = (uint64_t)ws;
    if (sqlite3_column_type(s, 13) != SQLITE_NULL) {
        a->launch.has_output = true;
        kc__copy_col(s, 13, a->launch.output_dtype, sizeof(a->launch.output_dtype));
        if (kc__shape_decode(sqlite3_column_blob(s, 14), (size_t)sqlite3_column_bytes(s, 14),
                             &a->launch) < 0)
            return -EBADMSG;
    }
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
    if (r == -EBADMSG)
        kc__set_err(db, "artifact %s: a stored field is out of range", key);
    if (r < 0)
        goto out;
    if (full) {
        void *p = NULL;
        r = kc__read_blob(s, 17, 15, &p, &a->ptx_len, true);
        if (r < 0) {
            kc__set_err(db, "artifact %s: PTX does not match its stored digest", key);
            goto out;
        }
        a->ptx = p;
        r = kc__read_blob(s, 18, 16, &p, &a->cubin_len, false);
        if (r < 0) {
            kc__set_err(db, "artifact %s: cubin does not match its stored digest", key);
            goto out;
        }
        a->cubin = p;
    }
    sqlite3_reset(s);
    r = kc__launch_get_locked(db, key, &a->launch);
    if (r < 0)
        goto out;
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
                     kc_choice *ret_choice)
{
    int64_t choice;
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
    if (!kc__int_col(s, 1, KC_CHOSEN_DEFAULT, KC_CHOSEN_MEASURED, &choice)) {
        kc__set_err(db, "selection for %s: its choice is out of range", op_key);
        r = -EBADMSG;
        goto out;
    }
    kc__copy_col(s, 0, ret_artifact_key, KC_KEY_LEN + 1);
    if (ret_choice)
        *ret_choice = (kc_choice)choice;
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    return r;
}

int kc_artifact_digests(kc_db *db, const char *key, char ret_ptx[KC_KEY_LEN + 1], char ret_cubin[KC_KEY_LEN + 1])
{
    int r = 0, rc;

    if (!db || !key || !ret_ptx || !ret_cubin)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_ART_DIGESTS);
    if (!s) {
        r = -EIO;
        goto out;
    }
    kc__bind_text(s, 1, key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        r = -ENOENT;
        goto out;
    }
    if (rc != SQLITE_ROW) {
        r = kc__sqlerr(db, rc, "read artifact digests");
        goto out;
    }
    kc__copy_col(s, 0, ret_ptx, KC_KEY_LEN + 1);
    kc__copy_col(s, 1, ret_cubin, KC_KEY_LEN + 1);
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    return r;
}
