/* kernel_cache/kc.c - the SQLite kernel cache behind kc.h.
 *
 * One kc_db wraps one SQLite connection plus its cached prepared statements. A mutex per handle
 * makes a handle safe to share between threads; separate processes share the file through WAL.
 * Every logical write is one transaction, so a kill -9 leaves either the old or the new state.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sodium.h>
#include <sqlite3.h>

/* Ordered migrations: entry i brings the schema from version i to i + 1. Each runs in one
 * transaction together with the bump of schema_version, so a crash mid-way changes nothing.
 * Blob columns come last in `artifacts` so that reading the metadata (the cache-hit path) stops
 * before the overflow pages that hold PTX and cubin. A rowid table on purpose: in a WITHOUT ROWID
 * table the b-tree search itself compares whole (overflowing) rows, which made the hit ~40x slower. */
static const char *const kc__migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE artifacts ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  op_key TEXT NOT NULL,"
    "  op TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  op_json TEXT NOT NULL,"
    "  schedule_json TEXT NOT NULL,"
    "  launch_json TEXT NOT NULL,"
    "  measured INTEGER NOT NULL,"
    "  latency_us REAL,"
    "  predicted_us REAL,"
    "  provenance_json TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  last_used_at INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL,"
    "  ptx_sha256 TEXT NOT NULL,"
    "  cubin_sha256 TEXT NOT NULL,"
    "  ptx BLOB NOT NULL,"
    "  cubin BLOB NOT NULL"
    ");"
    "CREATE INDEX artifacts_last_used ON artifacts(last_used_at);"
    "CREATE INDEX artifacts_op_key ON artifacts(op_key);"
    "CREATE TABLE selections ("
    "  op_key TEXT PRIMARY KEY NOT NULL,"
    "  artifact_key TEXT NOT NULL REFERENCES artifacts(key) ON DELETE CASCADE,"
    "  measured INTEGER NOT NULL,"
    "  updated_at INTEGER NOT NULL"
    ");"
    "CREATE INDEX selections_artifact ON selections(artifact_key);"
    "CREATE TABLE trials ("
    "  tuning_key TEXT NOT NULL,"
    "  candidate INTEGER NOT NULL,"
    "  space_hash TEXT NOT NULL,"
    "  schedule_json TEXT NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  latency_us REAL,"
    "  max_rel_err REAL NOT NULL,"
    "  reason TEXT,"
    "  device TEXT NOT NULL,"
    "  measured_at INTEGER NOT NULL,"
    "  PRIMARY KEY (tuning_key, candidate)"
    ");",
};
#define KC__N_MIGRATIONS (sizeof(kc__migrations) / sizeof(kc__migrations[0]))
_Static_assert(KC__N_MIGRATIONS == KC_SCHEMA_VERSION, "one migration per schema version");

/* Columns read for an artifact's metadata; the full read appends digests and blobs. */
#define KC__META_COLS                                                                              \
    "key, op_key, op, target, op_json, schedule_json, launch_json, measured, latency_us,"         \
    " predicted_us, provenance_json, created_at, last_used_at"

/* Shared filter clause: ?1 key prefix, ?2 target, ?3 op, ?4 older_than (0 any). */
#define KC__FILTER_WHERE                                                                           \
    " WHERE (?1 IS NULL OR substr(key, 1, length(?1)) = ?1)"                                      \
    " AND (?2 IS NULL OR target = ?2) AND (?3 IS NULL OR op = ?3)"                                \
    " AND (?4 = 0 OR last_used_at < ?4)"

enum {
    S_BEGIN,
    S_BEGIN_READ,
    S_COMMIT,
    S_ROLLBACK,
    S_ART_PUT,
    S_SEL_PUT,
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
    S__COUNT
};

static const char *const kc__sql[S__COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_BEGIN_READ] = "BEGIN DEFERRED",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_ART_PUT] =
        "INSERT INTO artifacts (key, op_key, op, target, op_json, schedule_json, launch_json,"
        " measured, latency_us, predicted_us, provenance_json, created_at, last_used_at, bytes,"
        " ptx_sha256, cubin_sha256, ptx, cubin)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"
        " ON CONFLICT(key) DO UPDATE SET op_key = excluded.op_key, op = excluded.op,"
        " target = excluded.target, op_json = excluded.op_json,"
        " schedule_json = excluded.schedule_json, launch_json = excluded.launch_json,"
        " measured = excluded.measured, latency_us = excluded.latency_us,"
        " predicted_us = excluded.predicted_us, provenance_json = excluded.provenance_json,"
        " created_at = excluded.created_at, last_used_at = excluded.last_used_at,"
        " bytes = excluded.bytes, ptx_sha256 = excluded.ptx_sha256,"
        " cubin_sha256 = excluded.cubin_sha256, ptx = excluded.ptx, cubin = excluded.cubin",
    [S_SEL_PUT] = "INSERT INTO selections (op_key, artifact_key, measured, updated_at)"
                  " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(op_key) DO UPDATE SET"
                  " artifact_key = excluded.artifact_key, measured = excluded.measured,"
                  " updated_at = excluded.updated_at",
    [S_ART_META] = "SELECT " KC__META_COLS " FROM artifacts WHERE key = ?1",
    [S_ART_FULL] = "SELECT " KC__META_COLS ", ptx_sha256, cubin_sha256, ptx, cubin"
                   " FROM artifacts WHERE key = ?1",
    [S_TOUCH] = "UPDATE artifacts SET last_used_at = ?2 WHERE key = ?1 AND last_used_at < ?2",
    [S_SEL_GET] = "SELECT artifact_key, measured FROM selections WHERE op_key = ?1",
    [S_TRIAL_PUT] = "INSERT OR REPLACE INTO trials (tuning_key, candidate, space_hash,"
                    " schedule_json, status, latency_us, max_rel_err, reason, device, measured_at)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [S_TRIALS_GET] = "SELECT candidate, schedule_json, status, latency_us, max_rel_err, reason,"
                     " device, measured_at FROM trials WHERE tuning_key = ?1"
                     " ORDER BY (status <> 0 OR latency_us IS NULL), latency_us, candidate",
    [S_LIST] = "SELECT key, op, target, measured, latency_us, bytes, created_at, last_used_at"
               " FROM artifacts" KC__FILTER_WHERE
               " ORDER BY last_used_at DESC, key LIMIT ?5",
    [S_REMOVE] = "DELETE FROM artifacts" KC__FILTER_WHERE,
    [S_LRU] = "SELECT key, bytes FROM artifacts ORDER BY last_used_at ASC, key",
    [S_DELETE_KEY] = "DELETE FROM artifacts WHERE key = ?1",
    [S_TOTAL_BYTES] = "SELECT coalesce(sum(bytes), 0) FROM artifacts",
    [S_STATS] = "SELECT (SELECT count(*) FROM artifacts), (SELECT count(*) FROM selections),"
                " (SELECT count(*) FROM trials), (SELECT coalesce(sum(bytes), 0) FROM artifacts)",
    [S_DATA_VERSION] = "PRAGMA data_version",
    [S_VERIFY_ROWS] = "SELECT key, ptx_sha256, cubin_sha256, ptx, cubin FROM artifacts ORDER BY key",
};

struct kc_db {
    sqlite3 *sql;
    sqlite3_stmt *stmt[S__COUNT];
    pthread_mutex_t lock;
    char err[512];
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

static void kc__lock(kc_db *db) { pthread_mutex_lock(&db->lock); }
static void kc__unlock(kc_db *db) { pthread_mutex_unlock(&db->lock); }

static void kc__set_err(kc_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kc__set_err(kc_db *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof(db->err), fmt, ap);
    va_end(ap);
}

/* Converts a SQLite result at the module boundary, keeping its text for kc_errmsg(). */
static int kc__sqlerr(kc_db *db, int rc, const char *what)
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
static sqlite3_stmt *kc__stmt(kc_db *db, int which)
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
static int kc__exec_stmt(kc_db *db, int which, const char *what)
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

static int kc__bind_text(sqlite3_stmt *s, int i, const char *v)
{
    return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

static int kc__bind_blob(sqlite3_stmt *s, int i, const void *v, size_t n)
{
    if (n == 0)
        return sqlite3_bind_zeroblob(s, i, 0);
    return sqlite3_bind_blob64(s, i, v, n, SQLITE_STATIC);
}

static char *kc__strdup_col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

static void kc__copy_col(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static int64_t kc__now(void) { return (int64_t)time(NULL); }

static const char *kc__nz(const char *s) { return s ? s : ""; }

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

static int kc__read_version(kc_db *db, int64_t *ret_version)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->sql, "SELECT version FROM schema_version", -1, &s, NULL);
    int64_t v = 0;
    bool found = false;

    if (rc != SQLITE_OK)
        return kc__sqlerr(db, rc, "read schema version");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        v = sqlite3_column_int64(s, 0);
        found = true;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return kc__sqlerr(db, rc, "read schema version");
    if (!found) {
        rc = sqlite3_exec(db->sql, "INSERT INTO schema_version (version) VALUES (0)", NULL, NULL,
                          NULL);
        if (rc != SQLITE_OK)
            return kc__sqlerr(db, rc, "init schema version");
    }
    *ret_version = v;
    return 0;
}

/* Applies pending migrations, one transaction each, re-reading the version inside the
 * transaction so two processes opening a fresh file at once do not both migrate. */
static int kc__migrate(kc_db *db, const char *path, char **ret_err)
{
    /* The common case, an up-to-date file, needs no write lock: opening must not wait behind a
     * long writer (an import in hidetctl) nor fail for a user who may only read the file. */
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT max(version) FROM schema_version", -1, &q, NULL) ==
        SQLITE_OK) {
        int rc = sqlite3_step(q);
        int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
        sqlite3_finalize(q);
        if (v == KC_SCHEMA_VERSION)
            return 0;
    } else {
        sqlite3_finalize(q); /* no schema_version table yet: a new file */
    }
    for (;;) {
        int64_t v = 0;
        int r = kc__begin(db);
        if (r < 0)
            return kc__fail(ret_err, r, "%s: %s", path, db->err);
        int rc = sqlite3_exec(db->sql,
                              "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
                              NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            r = kc__sqlerr(db, rc, "create schema_version");
            goto fail;
        }
        r = kc__read_version(db, &v);
        if (r < 0)
            goto fail;
        if (v > KC_SCHEMA_VERSION || v < 0) {
            kc__rollback(db);
            return kc__fail(ret_err, -EPROTONOSUPPORT,
                                 "%s: database schema version %lld is newer than this binary "
                                 "supports (%d); use a newer hidetd/hidetctl or another cache file",
                                 path, (long long)v, KC_SCHEMA_VERSION);
        }
        if (v == KC_SCHEMA_VERSION)
            return kc__commit(db) < 0 ? kc__fail(ret_err, -EIO, "%s: %s", path, db->err) : 0;
        rc = sqlite3_exec(db->sql, kc__migrations[v], NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            r = kc__sqlerr(db, rc, "migration");
            goto fail;
        }
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db->sql, "UPDATE schema_version SET version = ?1", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(s, 1, v + 1);
            rc = sqlite3_step(s);
            sqlite3_finalize(s);
            rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        }
        if (rc != SQLITE_OK) {
            r = kc__sqlerr(db, rc, "bump schema version");
            goto fail;
        }
        r = kc__commit(db);
        if (r < 0)
            goto fail;
        continue;
    fail:
        kc__rollback(db);
        return kc__fail(ret_err, r, "%s: migrating to schema %lld: %s", path,
                             (long long)v + 1, db->err);
    }
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

/* ---------------------------------------------------------------------------------------- */
/* artifacts */

static bool kc__key_ok(const char *k)
{
    size_t n = k ? strnlen(k, KC_KEY_LEN + 1) : 0;
    return n > 0 && n <= KC_KEY_LEN;
}

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

/* ---------------------------------------------------------------------------------------- */
/* trials */

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

/* ---------------------------------------------------------------------------------------- */
/* listing and administration */

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
        e->measured = sqlite3_column_int(s, 3) != 0;
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

/* Exposed to kc_export.c, which runs its own transactions under the lock. */
void kc__lock_db(kc_db *db) { kc__lock(db); }
void kc__unlock_db(kc_db *db) { kc__unlock(db); }
int kc__begin_read(kc_db *db) { return kc__exec_stmt(db, S_BEGIN_READ, "begin"); }
void kc__errf(kc_db *db, const char *msg) { kc__set_err(db, "%s", msg); }
