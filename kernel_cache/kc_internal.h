/* kernel_cache/kc_internal.h - what the kernel cache's own source files share: the handle, its
 * cached statements and small SQLite helpers.
 *
 * Functions named *_locked expect the caller to hold the handle's mutex (kc__lock()).
 * Nothing here is part of the module's contract; other modules use kc.h.
 */
#ifndef HIDET_KERNEL_CACHE_KC_INTERNAL_H
#define HIDET_KERNEL_CACHE_KC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "kernel_cache/kc.h"

/* The handle's prepared statements (SQL text in kc.c), prepared on first use and kept. */
enum {
    S_BEGIN,
    S_BEGIN_READ,
    S_COMMIT,
    S_ROLLBACK,
    S_ART_PUT,
    S_SEL_PUT,
    S_KERNELS_DEL,
    S_KERNEL_PUT,
    S_KERNEL_PUT_NO_MAPS,
    S_KERNELS_GET,
    S_DIMS_DEL,
    S_DIM_PUT,
    S_DIMS_GET,
    S_ART_META,
    S_ART_FULL,
    S_TOUCH,
    S_SEL_GET,
    S_TRIAL_PUT,
    S_TRIALS_GET,
    S_LIST,
    S_REMOVE,
    S_LRU,
    S_DELETE_KEY,
    S_TOTAL_BYTES,
    S_STATS,
    S_DATA_VERSION,
    S_VERIFY_ROWS,
    S_ART_DIGESTS,
    S_SEL_DEL_ART,
    S_QUAR_PUT,
    S_QUAR_DEL,
    S_QUAR_LIST,
    S__COUNT
};

struct kc_db {
    sqlite3 *sql;
    sqlite3_stmt *stmt[S__COUNT];
    pthread_mutex_t lock;
    char err[512];
};

/* Initialises libsodium once per process (thread-safe). Returns 0 or -EIO. */
int kc__sodium_ready(void);

static inline void kc__lock(kc_db *db) { pthread_mutex_lock(&db->lock); }
static inline void kc__unlock(kc_db *db) { pthread_mutex_unlock(&db->lock); }

/* Replaces the handle's error text (kc_errmsg()). */
void kc__set_err(kc_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Converts a SQLite result code to a negative errno, keeping "what: <sqlite text>" as the error. */
int kc__sqlerr(kc_db *db, int rc, const char *what);
/* The cached statement `which` (S_*), reset and with bindings cleared, or NULL (error kept). */
sqlite3_stmt *kc__stmt(kc_db *db, int which);
/* Runs a cached statement that returns no rows. */
int kc__exec_stmt(kc_db *db, int which, const char *what);

/* Transactions on the handle's connection; return 0 or a negative errno (error text kept). */
int kc__begin(kc_db *db);
int kc__begin_read(kc_db *db);
int kc__commit(kc_db *db);
/* Rolls back if a transaction is open; keeps the current error text. */
void kc__rollback(kc_db *db);

/* Brings the schema to KC_SCHEMA_VERSION (kc_schema.c). */
int kc__migrate(kc_db *db, const char *path, char **ret_err);
/* kc_import() of export-file bytes already in memory (buf[len] must be '\0'; the caller keeps
 * buf); `path` names them in messages. The import fuzzer calls it directly. */
int kc__import_buffer(kc_db *db, const char *path, const char *buf, size_t len,
                      const kc_import_opts *o, kc_import_info *ret_info, char **ret_err);

/* The launch rows of one artifact (kc_artifacts.c): replaced, or read and checked (-EBADMSG when
 * the stored rows do not make a valid kc_launch). The caller holds the lock.
 * kc__launch_put_static_locked writes a launch without dims and grid rules without touching what
 * schema 5 added: the schema-1 conversion runs before those tables and columns exist. */
int kc__launch_put_locked(kc_db *db, const char *key, const kc_launch *l);
int kc__launch_put_static_locked(kc_db *db, const char *key, const kc_launch *l);
int kc__launch_get_locked(kc_db *db, const char *key, kc_launch *ret);
/* output_shape column: KC_MAX_RANK or fewer little-endian int64, one per dimension. */
void kc__shape_encode(const kc_launch *l, unsigned char out[8 * KC_MAX_RANK], size_t *ret_len);
int kc__shape_decode(const void *blob, size_t len, kc_launch *l);

/* launch_kernels.grid_rules of a dynamic kernel: per grid dimension the dims byte, then
 * coef, div, mul and cap as little-endian int64 (empty for a static kernel). When a tensor map
 * of the kernel has a symbolic dimension, the blob goes on with one KC_MAP_SYM_PACKED record per
 * map (in the order of the maps column): per map dimension its sym byte, then its sym_coef as
 * little-endian int64 (tuner_tmap_pack's record has no room for them; schema 5 was not released
 * when they came, so the blob grew instead of the schema: a blob of exactly
 * KC_GRID_RULES_PACKED bytes is a kernel whose maps are static, as every one stored before). */
#define KC_GRID_RULE_PACKED (1 + 4 * 8)
#define KC_GRID_RULES_PACKED (3 * KC_GRID_RULE_PACKED)
#define KC_MAP_SYM_PACKED (TUNER_TMAP_MAX_RANK * (1 + 8))

static inline bool kc__kernel_has_sym_map(const kc_kernel *k)
{
    for (int m = 0; m < k->n_maps && m < KC_MAX_MAPS; m++)
        if (tuner_tmap_is_symbolic(&k->maps[m]))
            return true;
    return false;
}

/* True when a kernel sizes a grid dimension or a tensor map from the dims (a dynamic op's
 * kernel). */
static inline bool kc__kernel_is_dynamic(const kc_kernel *k)
{
    return k->grid_rule[0].dims || k->grid_rule[1].dims || k->grid_rule[2].dims || kc__kernel_has_sym_map(k);
}

/* The bytes of a dynamic kernel's grid_rules blob. */
static inline size_t kc__rules_blob_len(const kc_kernel *k)
{
    return KC_GRID_RULES_PACKED + (kc__kernel_has_sym_map(k) ? (size_t)k->n_maps * KC_MAP_SYM_PACKED : 0);
}

/* kc_launch.c */
int kc__choice_parse(const char *name, kc_choice *ret);
/* What is wrong with a launch (a static sentence), or NULL when kc_launch_check() passes it. */
const char *kc__launch_problem(const kc_launch *l);
/* Bytes a launch accounts for in an artifact's size. */
uint64_t kc__launch_bytes(const kc_launch *l);
/* Converts a launch description written as JSON text (schema 1 rows, export files) into *ret,
 * checked like kc_launch_check(). A description without "output" takes the output from the
 * canonical op JSON, as the daemon did when it answered from the text (op_json may be NULL).
 * Returns 0, or -EBADMSG with *ret_why (static text) saying what is wrong; *ret untouched. */
int kc__launch_from_json(const char *launch_json, const char *op_json, kc_launch *ret,
                         const char **ret_why);
/* How a schema-1 record (measured flag, tune mode in the provenance text) was chosen. */
kc_choice kc__choice_from_v1(bool measured, const char *provenance_json);

/* 0 when a's fields are storable, else -EINVAL. */
int kc__check_artifact(const kc_artifact *a);
/* Bytes an artifact accounts for in stats and pruning (blobs and JSON texts). */
uint64_t kc__artifact_bytes(const kc_artifact *a);
/* Stores an artifact and its selection inside the caller's transaction. ptx_sha/cubin_sha:
 * digests already checked by the caller, or NULL to compute them. */
int kc__put_locked(kc_db *db, const kc_artifact *a, const char *ptx_sha, const char *cubin_sha);
/* Reads one artifact (full: with verified blobs; touch: refresh last_used_at). *ret is the
 * caller's, freed with kc_artifact_free(). */
int kc__get_locked(kc_db *db, const char *key, bool full, bool touch, kc_artifact **ret);
int kc__list_locked(kc_db *db, const kc_filter *f, kc_summary **ret, size_t *ret_n);

/* Sets *ret_err (when ret_err is non-NULL and no message is set yet) to the formatted message
 * and returns r: for the functions that explain failures to their caller (open, export, import). */
int kc__fail(char **ret_err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Small binding and column helpers. */
static inline int kc__bind_text(sqlite3_stmt *s, int i, const char *v)
{
    return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

static inline int kc__bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n)
{
    if (n == 0)
        return sqlite3_bind_zeroblob(s, i, 0);
    return sqlite3_bind_blob64(s, i, v, n, SQLITE_STATIC);
}

static inline char *kc__strdup_col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

static inline void kc__copy_col(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static inline int64_t kc__now(void) { return (int64_t)time(NULL); }

static inline const char *kc__nz(const char *s) { return s ? s : ""; }

/* 0 when a holds as the daemon would read it beyond what kc__get_locked checks: keys hex, the
 * key derived from op key and schedule, op and target known, op_json an object naming the op,
 * schedule_json an object, sizes, choice and launch in range with at least one kernel; else -EBADMSG with *ret_why
 * (static text). Shared by verify and import (kc_admin.c). */
int kc__check_record(const kc_artifact *a, const char **ret_why);
/* 0 when a's blobs and texts are within KC_MAX_CODE_BYTES / KC_MAX_TEXT_BYTES, else -EINVAL. */
int kc__check_sizes(const kc_artifact *a);

static inline bool kc__key_ok(const char *k)
{
    size_t n = k ? strnlen(k, KC_KEY_LEN + 1) : 0;
    return n > 0 && n <= KC_KEY_LEN;
}


#endif
