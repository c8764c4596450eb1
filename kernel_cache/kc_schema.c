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
#include <stdlib.h>

#include <sqlite3.h>

/* Schema 1 -> 2 (the SQL around kc__convert_v2). Typed columns replace the launch description's
 * JSON text and the `measured` flags; `artifacts` is rebuilt rather than altered because ADD
 * COLUMN would put the new columns after the blobs, and the hit path reads every column it needs
 * before the blobs (see below). The new table is filled here with what copies as is; the launch
 * and the choice are converted row by row in C. */
static const char kc__v2_before[] =
    "CREATE TABLE artifacts_v2 ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  op_key TEXT NOT NULL,"
    "  op TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  op_json TEXT NOT NULL,"
    "  schedule_json TEXT NOT NULL,"
    "  choice INTEGER NOT NULL CHECK (choice BETWEEN 0 AND 2)," /* kc_choice */
    "  latency_us REAL,"
    "  predicted_us REAL,"
    "  provenance_json TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  last_used_at INTEGER NOT NULL,"
    "  bytes INTEGER NOT NULL,"
    "  workspace_bytes INTEGER NOT NULL CHECK (workspace_bytes >= 0),"
    "  output_dtype TEXT,"  /* NULL: the output is not known (answers "output": null) */
    "  output_shape BLOB,"  /* little-endian int64 per dimension (kc__shape_encode) */
    "  ptx_sha256 TEXT NOT NULL,"
    "  cubin_sha256 TEXT NOT NULL,"
    "  ptx BLOB NOT NULL,"
    "  cubin BLOB NOT NULL"
    ");"
    "INSERT INTO artifacts_v2 (key, op_key, op, target, op_json, schedule_json, choice,"
    "  latency_us, predicted_us, provenance_json, created_at, last_used_at, bytes,"
    "  workspace_bytes, ptx_sha256, cubin_sha256, ptx, cubin)"
    " SELECT key, op_key, op, target, op_json, schedule_json, 1, latency_us, predicted_us,"
    "  provenance_json, created_at, last_used_at, bytes, 0, ptx_sha256, cubin_sha256, ptx, cubin"
    " FROM artifacts;"
    /* One row per launch, in order; args holds one byte per argument, its kc_buf value. The
     * rows are small, so WITHOUT ROWID: the hit path reads them with one b-tree search. */
    "CREATE TABLE launch_kernels ("
    "  artifact_key TEXT NOT NULL REFERENCES artifacts(key) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  grid_x INTEGER NOT NULL, grid_y INTEGER NOT NULL, grid_z INTEGER NOT NULL,"
    "  block_x INTEGER NOT NULL, block_y INTEGER NOT NULL, block_z INTEGER NOT NULL,"
    "  shared_bytes INTEGER NOT NULL,"
    "  args BLOB NOT NULL,"
    "  PRIMARY KEY (artifact_key, position)"
    ") WITHOUT ROWID;"
    "ALTER TABLE selections ADD COLUMN choice INTEGER NOT NULL DEFAULT 1"
    "  CHECK (choice BETWEEN 0 AND 2);";

static const char kc__v2_after[] =
    /* A selection was always written with its artifact's flag, so it takes the artifact's
     * choice; one whose artifact could not be converted goes (its op is tuned again). */
    "DELETE FROM selections WHERE artifact_key NOT IN (SELECT key FROM artifacts_v2);"
    "UPDATE selections SET choice ="
    "  (SELECT choice FROM artifacts_v2 WHERE artifacts_v2.key = selections.artifact_key);"
    "ALTER TABLE selections DROP COLUMN measured;"
    "DROP TABLE artifacts;"
    "ALTER TABLE artifacts_v2 RENAME TO artifacts;"
    "CREATE INDEX artifacts_last_used ON artifacts(last_used_at);"
    "CREATE INDEX artifacts_op_key ON artifacts(op_key);";

/* Converts every schema-1 artifact: its launch_json into typed columns and launch_kernels rows,
 * its measured flag and provenance's tune mode into a kc_choice. This is the only place that
 * reads those texts back. A row that does not convert is dropped rather than failing the open:
 * the daemon refused to answer from such a launch description anyway (500), so the record was
 * already useless, and without it its op is simply tuned again on the next request; refusing
 * the open would instead take the whole cache (and the daemon) down for one bad row. */
static int kc__convert_v2(kc_db *db)
{
    sqlite3_stmt *q = NULL, *u = NULL, *d = NULL;
    int r = 0, rc;

    rc = sqlite3_prepare_v2(db->sql, "SELECT key, op_json, launch_json, measured, provenance_json"
                            " FROM artifacts", -1, &q, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db->sql, "UPDATE artifacts_v2 SET choice = ?2,"
                                " workspace_bytes = ?3, output_dtype = ?4, output_shape = ?5,"
                                " bytes = max(0, bytes - ?6 + ?7) WHERE key = ?1", -1, &u, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db->sql, "DELETE FROM artifacts_v2 WHERE key = ?1", -1, &d, NULL);
    if (rc != SQLITE_OK) {
        r = kc__sqlerr(db, rc, "prepare conversion");
        goto out;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(q, 0);
        const char *op_json = (const char *)sqlite3_column_text(q, 1);
        const char *launch_json = (const char *)sqlite3_column_text(q, 2);
        const char *prov = (const char *)sqlite3_column_text(q, 4);
        kc_launch l;
        unsigned char shape[8 * KC_MAX_RANK];
        size_t shape_len = 0;
        if (!key)
            continue;
        /* Schema 1 knew no named dims: a row that claims some was not written by hidetd. */
        if (kc__launch_from_json(launch_json, op_json, &l, NULL) < 0 || l.n_dims > 0) {
            sqlite3_bind_text(d, 1, key, -1, SQLITE_TRANSIENT);
            rc = sqlite3_step(d);
            sqlite3_reset(d);
            if (rc != SQLITE_DONE) {
                r = kc__sqlerr(db, rc, "drop unconvertible artifact");
                goto out;
            }
            continue;
        }
        kc__shape_encode(&l, shape, &shape_len);
        sqlite3_bind_text(u, 1, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(u, 2, (int)kc__choice_from_v1(sqlite3_column_int(q, 3) != 0, prov));
        sqlite3_bind_int64(u, 3, (int64_t)l.workspace_bytes);
        if (l.has_output) {
            sqlite3_bind_text(u, 4, l.output_dtype, -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(u, 5, shape, (int)shape_len, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_null(u, 4);
            sqlite3_bind_null(u, 5);
        }
        /* The stored size counted the launch text; it now counts the rows. */
        sqlite3_bind_int64(u, 6, launch_json ? (int64_t)strlen(launch_json) : 0);
        sqlite3_bind_int64(u, 7, (int64_t)kc__launch_bytes(&l));
        rc = sqlite3_step(u);
        sqlite3_reset(u);
        sqlite3_clear_bindings(u);
        if (rc != SQLITE_DONE) {
            r = kc__sqlerr(db, rc, "convert artifact");
            goto out;
        }
        r = kc__launch_put_static_locked(db, key, &l);
        if (r < 0)
            goto out;
    }
    if (rc != SQLITE_DONE)
        r = kc__sqlerr(db, rc, "read schema-1 artifacts");
out:
    sqlite3_finalize(q);
    sqlite3_finalize(u);
    sqlite3_finalize(d);
    return r;
}

/* Schema 2 -> 3: the quarantine, where the daemon puts records it cannot use (kc_quarantine()).
 * No foreign key to artifacts: any key may be quarantined, also one whose row is gone or was never
 * there. A trigger removes a quarantine row with its artifact, whichever statement deletes it
 * (cache rm, prune, a filter); a migration that rebuilds `artifacts` must create it again. */
static const char kc__v3[] =
    "CREATE TABLE quarantine ("
    "  artifact_key TEXT PRIMARY KEY NOT NULL,"
    "  op_key TEXT NOT NULL," /* the artifact's op key when it was quarantined, or '' */
    "  reason TEXT NOT NULL,"
    "  at INTEGER NOT NULL"
    ");"
    "CREATE TRIGGER artifacts_leave_quarantine AFTER DELETE ON artifacts BEGIN"
    "  DELETE FROM quarantine WHERE artifact_key = old.key;"
    " END;";

/* Schema 3 -> 4: a launch's tensor-map parameters (op/tmap.h), tuner_tmap_pack records one after
 * the other; kernels stored before take none. */
static const char kc__v4[] = "ALTER TABLE launch_kernels ADD COLUMN maps BLOB NOT NULL DEFAULT x'';";

/* Schema 4 -> 5: dynamic ops (named dims, issue 39). A kernel's grid rules (KC_GRID_RULES_PACKED
 * bytes, empty for a static kernel) and a table of the launch's dims beside the artifacts (so the
 * `artifacts` rows, read on every hit, keep their column order): one row per dim in the order of
 * the kernels' size arguments, with the bit set of the output axes it names (the transpose of
 * kc_launch.output_sym). Records stored before have neither and read as static launches. */
static const char kc__v5[] =
    "ALTER TABLE launch_kernels ADD COLUMN grid_rules BLOB NOT NULL DEFAULT x'';"
    "CREATE TABLE launch_dims ("
    "  artifact_key TEXT NOT NULL REFERENCES artifacts(key) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  min INTEGER NOT NULL, max INTEGER NOT NULL, multiple_of INTEGER NOT NULL,"
    "  output_axes INTEGER NOT NULL,"
    "  PRIMARY KEY (artifact_key, position)"
    ") WITHOUT ROWID;";

/* Schema 5 -> 6: a dynamic launch's range_worst (kc_launch), repeated in each of its dims' rows
 * so that a hit reads it with them and the `artifacts` rows keep their column order; 0 (not
 * known) for the records stored before. */
static const char kc__v6[] = "ALTER TABLE launch_dims ADD COLUMN range_worst REAL NOT NULL DEFAULT 0;";

/* Ordered migrations: entry i brings the schema from version i to i + 1: `sql`, then `convert`
 * (when there is one), then `sql_after`. Each runs in one transaction together with the bump of
 * schema_version, so a crash mid-way changes nothing.
 * Blob columns come last in `artifacts` so that reading the metadata (the cache-hit path) stops
 * before the overflow pages that hold PTX and cubin. A rowid table on purpose: in a WITHOUT ROWID
 * table the b-tree search itself compares whole (overflowing) rows, which made the hit ~40x slower. */
static const struct {
    const char *sql;
    int (*convert)(kc_db *db);
    const char *sql_after;
} kc__migrations[] = {
    /* 0 -> 1 */
    {"CREATE TABLE artifacts ("
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
    ");", NULL, NULL},
    /* 1 -> 2 */
    {kc__v2_before, kc__convert_v2, kc__v2_after},
    /* 2 -> 3 */
    {kc__v3, NULL, NULL},
    /* 3 -> 4 */
    {kc__v4, NULL, NULL},
    /* 4 -> 5 */
    {kc__v5, NULL, NULL},
    /* 5 -> 6 */
    {kc__v6, NULL, NULL},
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

static int kc__exec(kc_db *db, const char *sql, const char *what)
{
    int rc = sql ? sqlite3_exec(db->sql, sql, NULL, NULL, NULL) : SQLITE_OK;
    return rc == SQLITE_OK ? 0 : kc__sqlerr(db, rc, what);
}

/* Applies pending migrations, one transaction each, re-reading the version inside the
 * transaction so two processes opening a fresh file at once do not both migrate. */
static int kc__migrate_steps(kc_db *db, const char *path, char **ret_err)
{
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
        r = kc__exec(db, kc__migrations[v].sql, "migration");
        if (r == 0 && kc__migrations[v].convert)
            r = kc__migrations[v].convert(db);
        if (r == 0)
            r = kc__exec(db, kc__migrations[v].sql_after, "migration");
        if (r < 0)
            goto fail;
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
    /* A table is rebuilt by creating its successor and dropping it: with foreign keys enforced,
     * DROP TABLE would first delete (and cascade to) every row that refers to it. The pragma
     * cannot change inside a transaction, so it is off around all the migrations' transactions
     * and back on for the handle's normal work. */
    int r = kc__exec(db, "PRAGMA foreign_keys=OFF", "foreign_keys");
    if (r < 0)
        return kc__fail(ret_err, r, "%s: %s", path, db->err);
    r = kc__migrate_steps(db, path, ret_err);
    int r2 = kc__exec(db, "PRAGMA foreign_keys=ON", "foreign_keys");
    if (r == 0 && r2 < 0)
        r = kc__fail(ret_err, r2, "%s: %s", path, db->err);
    return r;
}
