/* kernel_cache/kc_schema.c - the database schema and its migrations (schema_version table).
 *
 * Opening a file brings it to KC_SCHEMA_VERSION, one migration per version, each in its own
 * transaction; a file newer than this binary is refused, never changed.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

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
int kc__migrate(kc_db *db, const char *path, char **ret_err)
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
