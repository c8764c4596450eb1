/* kernel_cache/kc.c - the SQLite kernel cache behind kc.h: the handle, its statements, hashing,
 * open and close.
 *
 * One kc_db wraps one SQLite connection plus its cached prepared statements. A mutex per handle
 * makes a handle safe to share between threads; separate processes share the file through WAL.
 * Every logical write is one transaction, so a kill -9 leaves either the old or the new state.
 * The records live in kc_artifacts.c, kc_trials.c and kc_admin.c; the schema in kc_schema.c.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>
#include <sqlite3.h>

/* Columns read for an artifact's metadata; the full read appends digests and blobs. */
#define KC__META_COLS                                                                              \
    "key, op_key, op, target, op_json, schedule_json, choice, latency_us, predicted_us,"         \
    " provenance_json, created_at, last_used_at, workspace_bytes, output_dtype, output_shape"

/* Shared filter clause: ?1 key prefix, ?2 target, ?3 op, ?4 older_than (0 any). */
#define KC__FILTER_WHERE                                                                           \
    " WHERE (?1 IS NULL OR substr(key, 1, length(?1)) = ?1)"                                      \
    " AND (?2 IS NULL OR target = ?2) AND (?3 IS NULL OR op = ?3)"                                \
    " AND (?4 = 0 OR last_used_at < ?4)"

static const char *const kc__sql[S__COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_BEGIN_READ] = "BEGIN DEFERRED",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_ART_PUT] =
        "INSERT INTO artifacts (key, op_key, op, target, op_json, schedule_json, choice,"
        " latency_us, predicted_us, provenance_json, created_at, last_used_at, bytes,"
        " workspace_bytes, output_dtype, output_shape, ptx_sha256, cubin_sha256, ptx, cubin)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
        " ?19, ?20)"
        " ON CONFLICT(key) DO UPDATE SET op_key = excluded.op_key, op = excluded.op,"
        " target = excluded.target, op_json = excluded.op_json,"
        " schedule_json = excluded.schedule_json, choice = excluded.choice,"
        " latency_us = excluded.latency_us, predicted_us = excluded.predicted_us,"
        " provenance_json = excluded.provenance_json, created_at = excluded.created_at,"
        " last_used_at = excluded.last_used_at, bytes = excluded.bytes,"
        " workspace_bytes = excluded.workspace_bytes, output_dtype = excluded.output_dtype,"
        " output_shape = excluded.output_shape, ptx_sha256 = excluded.ptx_sha256,"
        " cubin_sha256 = excluded.cubin_sha256, ptx = excluded.ptx, cubin = excluded.cubin",
    [S_SEL_PUT] = "INSERT INTO selections (op_key, artifact_key, choice, updated_at)"
                  " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(op_key) DO UPDATE SET"
                  " artifact_key = excluded.artifact_key, choice = excluded.choice,"
                  " updated_at = excluded.updated_at",
    [S_KERNELS_DEL] = "DELETE FROM launch_kernels WHERE artifact_key = ?1",
    [S_KERNEL_PUT] = "INSERT INTO launch_kernels (artifact_key, position, name, grid_x, grid_y,"
                     " grid_z, block_x, block_y, block_z, shared_bytes, args, maps, grid_rules)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    /* A kernel without tensor maps and grid rules leaves those columns at their defaults: so
     * the schema-1 conversion, which runs before schemas 4 and 5 added them, writes its rows
     * with the same code. */
    [S_KERNEL_PUT_NO_MAPS] = "INSERT INTO launch_kernels (artifact_key, position, name, grid_x,"
                             " grid_y, grid_z, block_x, block_y, block_z, shared_bytes, args)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [S_KERNELS_GET] = "SELECT position, name, grid_x, grid_y, grid_z, block_x, block_y, block_z,"
                      " shared_bytes, args, maps, grid_rules FROM launch_kernels"
                      " WHERE artifact_key = ?1 ORDER BY position",
    [S_DIMS_DEL] = "DELETE FROM launch_dims WHERE artifact_key = ?1",
    [S_DIM_PUT] = "INSERT INTO launch_dims (artifact_key, position, name, min, max, multiple_of,"
                  " output_axes, range_worst) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_DIMS_GET] = "SELECT position, name, min, max, multiple_of, output_axes, range_worst FROM launch_dims"
                   " WHERE artifact_key = ?1 ORDER BY position",
    [S_ART_META] = "SELECT " KC__META_COLS " FROM artifacts WHERE key = ?1",
    [S_ART_FULL] = "SELECT " KC__META_COLS ", ptx_sha256, cubin_sha256, ptx, cubin"
                   " FROM artifacts WHERE key = ?1",
    [S_TOUCH] = "UPDATE artifacts SET last_used_at = ?2 WHERE key = ?1 AND last_used_at < ?2",
    [S_SEL_GET] = "SELECT artifact_key, choice FROM selections WHERE op_key = ?1",
    [S_TRIAL_PUT] = "INSERT OR REPLACE INTO trials (tuning_key, candidate, space_hash,"
                    " schedule_json, status, latency_us, max_rel_err, reason, device, measured_at)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [S_TRIALS_GET] = "SELECT candidate, schedule_json, status, latency_us, max_rel_err, reason,"
                     " device, measured_at FROM trials WHERE tuning_key = ?1"
                     " ORDER BY (status <> 0 OR latency_us IS NULL), latency_us, candidate",
    [S_LIST] = "SELECT key, op, target, choice, latency_us, bytes, created_at, last_used_at"
               " FROM artifacts" KC__FILTER_WHERE
               " ORDER BY last_used_at DESC, key LIMIT ?5",
    [S_REMOVE] = "DELETE FROM artifacts" KC__FILTER_WHERE,
    [S_LRU] = "SELECT key, bytes FROM artifacts ORDER BY last_used_at ASC, key",
    [S_DELETE_KEY] = "DELETE FROM artifacts WHERE key = ?1",
    [S_TOTAL_BYTES] = "SELECT coalesce(sum(bytes), 0) FROM artifacts",
    [S_STATS] = "SELECT (SELECT count(*) FROM artifacts), (SELECT count(*) FROM selections),"
                " (SELECT count(*) FROM trials), (SELECT coalesce(sum(bytes), 0) FROM artifacts)",
    [S_DATA_VERSION] = "PRAGMA data_version",
    [S_VERIFY_ROWS] = "SELECT key FROM artifacts ORDER BY key",
    [S_ART_DIGESTS] = "SELECT ptx_sha256, cubin_sha256, choice, op_key FROM artifacts WHERE key = ?1",
    [S_SEL_DEL_ART] = "DELETE FROM selections WHERE artifact_key = ?1",
    /* The first reason stays: quarantining again (another request hit the same bad record)
     * changes nothing. */
    [S_QUAR_PUT] = "INSERT INTO quarantine (artifact_key, op_key, reason, at)"
                   " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(artifact_key) DO NOTHING",
    [S_QUAR_DEL] = "DELETE FROM quarantine WHERE artifact_key = ?1",
    [S_QUAR_LIST] = "SELECT artifact_key, op_key, reason, at FROM quarantine"
                    " ORDER BY at, artifact_key",
};


/* ---------------------------------------------------------------------------------------- */
/* hashing */

static pthread_once_t kc__sodium_once = PTHREAD_ONCE_INIT;
static int kc__sodium_status = -1;

static void kc__sodium_init_once(void)
{
    kc__sodium_status = sodium_init() < 0 ? -1 : 0;
}

int kc__sodium_ready(void)
{
    pthread_once(&kc__sodium_once, kc__sodium_init_once);
    return kc__sodium_status == 0 ? 0 : -EIO;
}

static void kc__hex(const unsigned char *d, size_t n, char *out)
{
    sodium_bin2hex(out, n * 2 + 1, d, n);
}

void kc_sha256_hex(const void *data, size_t len, char out[KC_KEY_LEN + 1])
{
    unsigned char d[crypto_hash_sha256_BYTES];

    /* crypto_hash_sha256 works without sodium_init(), but initialise anyway so the library's
     * CPU-feature selection is done once, thread-safely. */
    (void)kc__sodium_ready();
    crypto_hash_sha256(d, data ? data : (const void *)"", len);
    kc__hex(d, sizeof(d), out);
}

void kc_artifact_key(const char *op_key, const char *schedule_json, char out[KC_KEY_LEN + 1])
{
    /* The op key already names the record kind and every version, so two parts suffice. */
    const char *parts[] = {op_key ? op_key : "", schedule_json ? schedule_json : ""};
    kc_key(parts, 2, out);
}

bool kc_key_is_hex(const char *s)
{
    if (!s || strnlen(s, KC_KEY_LEN + 1) != KC_KEY_LEN)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

void kc_key(const char *const *parts, size_t n_parts, char out[KC_KEY_LEN + 1])
{
    crypto_hash_sha256_state st;
    unsigned char d[crypto_hash_sha256_BYTES];

    (void)kc__sodium_ready();
    crypto_hash_sha256_init(&st);
    for (size_t i = 0; i < n_parts; i++) {
        /* An 8-byte little-endian length before each part: ("ab","c") never equals ("a","bc").
         * A NULL part gets an all-ones length, so it differs from the empty string. */
        uint64_t len = parts[i] ? strlen(parts[i]) : UINT64_MAX;
        unsigned char prefix[8];
        for (int b = 0; b < 8; b++)
            prefix[b] = (unsigned char)(len >> (8 * b));
        crypto_hash_sha256_update(&st, prefix, sizeof(prefix));
        if (parts[i])
            crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], len);
    }
    crypto_hash_sha256_final(&st, d);
    kc__hex(d, sizeof(d), out);
}

/* ---------------------------------------------------------------------------------------- */
/* handle helpers */


void kc__set_err(kc_db *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof(db->err), fmt, ap);
    va_end(ap);
}

/* Converts a SQLite result at the module boundary, keeping its text for kc_errmsg(). */
int kc__sqlerr(kc_db *db, int rc, const char *what)
{
    kc__set_err(db, "%s: %s", what, sqlite3_errmsg(db->sql));
    switch (rc & 0xff) {
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return -EBADMSG;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_FULL:
        return -ENOSPC;
    default:
        return -EIO;
    }
}

/* Returns the cached statement, reset and with bindings cleared, or NULL (error recorded). */
sqlite3_stmt *kc__stmt(kc_db *db, int which)
{
    sqlite3_stmt *s = db->stmt[which];

    if (!s) {
        int rc = sqlite3_prepare_v3(db->sql, kc__sql[which], -1, SQLITE_PREPARE_PERSISTENT, &s,
                                    NULL);
        if (rc != SQLITE_OK) {
            kc__sqlerr(db, rc, "prepare");
            return NULL;
        }
        db->stmt[which] = s;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Runs a statement that returns no rows. */
int kc__exec_stmt(kc_db *db, int which, const char *what)
{
    sqlite3_stmt *s = kc__stmt(db, which);
    int rc;

    if (!s)
        return -EIO;
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return kc__sqlerr(db, rc, what);
    return 0;
}

int kc__begin(kc_db *db) { return kc__exec_stmt(db, S_BEGIN, "begin"); }
int kc__commit(kc_db *db) { return kc__exec_stmt(db, S_COMMIT, "commit"); }
void kc__rollback(kc_db *db)
{
    /* Keep the error of the statement that failed, not the rollback's. */
    char saved[sizeof(db->err)];
    memcpy(saved, db->err, sizeof(saved));
    if (!sqlite3_get_autocommit(db->sql))
        (void)kc__exec_stmt(db, S_ROLLBACK, "rollback");
    memcpy(db->err, saved, sizeof(saved));
}


/* ---------------------------------------------------------------------------------------- */
/* open / close */

static int kc__mkdirs(const char *path, char **ret_err)
{
    char *dir = strdup(path);
    int r = 0;

    if (!dir)
        return -ENOMEM;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        goto out;
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
            r = -errno;
            if (asprintf(ret_err, "cannot create directory %s: %s", dir, strerror(errno)) < 0)
                *ret_err = NULL;
            goto out;
        }
        *p = c;
        if (c == '\0')
            break;
    }
out:
    free(dir);
    return r;
}

int kc__fail(char **ret_err, int r, const char *fmt, ...)
{
    va_list ap;
    if (ret_err && !*ret_err) {
        va_start(ap, fmt);
        if (vasprintf(ret_err, fmt, ap) < 0)
            *ret_err = NULL;
        va_end(ap);
    }
    return r;
}

int kc_open(const char *path, kc_db **ret, char **ret_err)
{
    kc_db *db = NULL;
    char *mode = NULL;
    int r, rc;

    if (ret_err)
        *ret_err = NULL;
    if (!path || !*path || !ret)
        return kc__fail(ret_err, -EINVAL, "no database path given");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");
    r = kc__mkdirs(path, ret_err);
    if (r < 0)
        return kc__fail(ret_err, r, "cannot create the directories of %s", path);

    db = calloc(1, sizeof(*db));
    if (!db)
        return kc__fail(ret_err, -ENOMEM, "out of memory");
    pthread_mutex_init(&db->lock, NULL);

    /* NOMUTEX: the handle's own mutex serialises use of the connection and its statements. */
    rc = sqlite3_open_v2(path, &db->sql,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        r = kc__fail(ret_err, -EIO, "cannot open %s: %s", path,
                          db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(db->sql, 1);
    sqlite3_busy_timeout(db->sql, 5000);

    /* The first statement that reads the file is where a non-database shows itself. */
    sqlite3_stmt *s = NULL;
    rc = sqlite3_prepare_v2(db->sql, "PRAGMA journal_mode=WAL", -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            const unsigned char *m = sqlite3_column_text(s, 0);
            mode = m ? strdup((const char *)m) : NULL;
            rc = SQLITE_OK;
        }
        sqlite3_finalize(s);
    }
    if ((rc & 0xff) == SQLITE_NOTADB) {
        r = kc__fail(ret_err, -EBADMSG, "%s is not a SQLite database (or is encrypted or "
                          "corrupt); refusing to use it as the kernel cache", path);
        goto fail;
    }
    if (rc != SQLITE_OK) {
        r = kc__fail(ret_err, -EIO, "%s: cannot enable WAL: %s", path,
                          sqlite3_errmsg(db->sql));
        goto fail;
    }
    if (!mode || strcmp(mode, "wal") != 0) {
        r = kc__fail(ret_err, -EIO, "%s: the file system does not support WAL mode "
                          "(journal mode is %s)", path, mode ? mode : "unknown");
        goto fail;
    }
    rc = sqlite3_exec(db->sql, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                      "PRAGMA cache_size=-16384; PRAGMA mmap_size=268435456;", NULL, NULL,
                      NULL);
    if (rc != SQLITE_OK) {
        r = kc__fail(ret_err, -EIO, "%s: %s", path, sqlite3_errmsg(db->sql));
        goto fail;
    }
    r = kc__migrate(db, path, ret_err);
    if (r < 0)
        goto fail;
    free(mode);
    *ret = db;
    return 0;

fail:
    free(mode);
    kc_close(db);
    return r;
}

int kc_open_another(kc_db *db, kc_db **ret, char **ret_err)
{
    if (ret_err)
        *ret_err = NULL;
    if (!db || !ret)
        return kc__fail(ret_err, -EINVAL, "no database given");
    kc__lock(db);
    const char *f = sqlite3_db_filename(db->sql, "main");
    char *path = f && *f ? strdup(f) : NULL;
    kc__unlock(db);
    if (!path)
        return kc__fail(ret_err, f && *f ? -ENOMEM : -EINVAL, "the database has no file");
    int r = kc_open(path, ret, ret_err);
    free(path);
    return r;
}

void kc_close(kc_db *db)
{
    if (!db)
        return;
    for (int i = 0; i < S__COUNT; i++)
        sqlite3_finalize(db->stmt[i]);
    sqlite3_close(db->sql);
    pthread_mutex_destroy(&db->lock);
    free(db);
}

const char *kc_errmsg(kc_db *db)
{
    return db ? db->err : "no database handle";
}

int kc_data_version(kc_db *db, int64_t *ret)
{
    int r = 0;

    if (!db || !ret)
        return -EINVAL;
    kc__lock(db);
    sqlite3_stmt *s = kc__stmt(db, S_DATA_VERSION);
    if (!s) {
        r = -EIO;
        goto out;
    }
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        r = kc__sqlerr(db, rc, "data_version");
        goto out;
    }
    *ret = sqlite3_column_int64(s, 0);
out:
    if (s)
        sqlite3_reset(s);
    kc__unlock(db);
    return r;
}

int kc__begin_read(kc_db *db) { return kc__exec_stmt(db, S_BEGIN_READ, "begin"); }
