/* tests/integration/it_cache_heal.c - records the daemon cannot use are found and can be removed
 * from outside. In a cache the real hidetd filled, rows are broken behind its back with sqlite3:
 * a launch row with a zero grid, an argument byte outside the buffer enum, launch rows deleted;
 * `hidetctl cache verify` names each record with its key and exits non-zero. A record under a key
 * that is not hex and holds ESC and a newline is listed without raw control characters (table
 * and --json) and removed with `cache rm --exact`. The real daemon, started on the damaged cache,
 * serves each broken record's op as a miss (tuned again, never a 500), puts each record in
 * quarantine once (one warning, /metrics counts it), and the new kernel heals the record.
 * Uses HIDETD_BIN and HIDETCTL_BIN, so it can be pointed at older binaries to show the holes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "harness.h"

#define REQ(m)                                                                                     \
    "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[" #m ",64],\"dtype\":\"f16\"},"                    \
    "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"arch\":\"sm_90\",\"tune\":\"model\"}"

#define BAD_KEY "evil\033[2J\nkey"

/* Runs sql with ?1 bound to a, ?2 to b (either may be NULL). */
static void sql(const char *db, const char *text, const char *a, const char *b)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    CHECK(sqlite3_open(db, &s) == SQLITE_OK, "open %s", db);
    sqlite3_busy_timeout(s, 5000);
    for (const char *rest = text; rest && *rest;) {
        CHECK(sqlite3_prepare_v2(s, rest, -1, &q, &rest) == SQLITE_OK, "%s: %s", text,
                 sqlite3_errmsg(s));
        if (!q)
            break;
        if (sqlite3_bind_parameter_count(q) >= 1)
            sqlite3_bind_text(q, 1, a, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(q) >= 2)
            sqlite3_bind_text(q, 2, b, -1, SQLITE_STATIC);
        int rc = sqlite3_step(q);
        CHECK(rc == SQLITE_DONE, "%s: %s", text, sqlite3_errmsg(s));
        sqlite3_finalize(q);
    }
    sqlite3_close(s);
}

static int count(const char *db, const char *key)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    int n = -1;
    if (sqlite3_open(db, &s) == SQLITE_OK &&
        sqlite3_prepare_v2(s, "SELECT count(*) FROM artifacts WHERE key = ?1", -1, &q, NULL) ==
            SQLITE_OK) {
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW)
            n = sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(s);
    return n;
}

/* True when s holds a C0 control other than newline and tab (JSON indents with tabs), or DEL. */
static bool has_controls(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f)
            return true;
    return false;
}

int main(void)
{
    const char *ctl = getenv("HIDETCTL_BIN");
    const char *reqs[] = {REQ(128), REQ(192), REQ(256), REQ(320)};
    char keys[4][65];
    char *out = NULL;
    ht_daemon d;
    int rc;

    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;
    for (int i = 0; i < 4; i++) {
        ht_resp r = ht_post(&d, "/v1/kernels", reqs[i]);
        const char *k = r.json ? cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "key")) : NULL;
        CHECK(r.status == 200 && k, "request %d: %ld %.300s", i, r.status, r.body);
        snprintf(keys[i], sizeof(keys[i]), "%s", k ? k : "");
        ht_resp_free(&r);
    }
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    rc = ht_sh(&out, "'%s' --cache '%s' cache verify 2>&1", ctl, d.cache);
    CHECK(rc == 0, "verify of the daemon's own records: %d %s", rc, out ? out : "");
    free(out);

    /* Broken launch descriptions: the daemon would answer 500 for each of these ops. */
    sql(d.cache, "UPDATE launch_kernels SET grid_x = 0 WHERE artifact_key = ?1", keys[0], NULL);
    sql(d.cache, "UPDATE launch_kernels SET args = x'00ff' WHERE artifact_key = ?1", keys[1], NULL);
    sql(d.cache, "DELETE FROM launch_kernels WHERE artifact_key = ?1", keys[2], NULL);
    rc = ht_sh(&out, "'%s' --cache '%s' cache verify 2>&1", ctl, d.cache);
    CHECK(rc != 0, "verify passed broken records: %s", out ? out : "");
    for (int i = 0; i < 3; i++)
        CHECK(out && strstr(out, keys[i]), "verify does not name %s: %s", keys[i],
                 out ? out : "");
    CHECK(out && !strstr(out, keys[3]), "verify names the good record: %s", out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' --json cache verify", ctl, d.cache);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    CHECK(rc != 0 && j && cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")) &&
             cJSON_GetArraySize(cJSON_GetObjectItem(j, "bad")) == 3,
             "verify --json: %d %s", rc, out ? out : "");
    cJSON_Delete(j);
    free(out);

    /* The daemon on the damaged cache: every broken op is tuned again; asked again, it is a hit. */
    CHECK(ht_start(&d) == 0, "restart on the damaged cache");
    for (int i = 0; i < 3; i++) {
        for (int again = 0; again < 2; again++) {
            ht_resp r = ht_post(&d, "/v1/kernels", reqs[i]);
            const cJSON *cached = r.json ? cJSON_GetObjectItem(r.json, "cached") : NULL;
            CHECK(r.status == 200 && cJSON_IsBool(cached) && cJSON_IsTrue(cached) == (again == 1),
                     "broken record %d, request %d: %ld %.300s", i, again, r.status, r.body);
            ht_resp_free(&r);
        }
    }
    ht_resp m = ht_get(&d, "/metrics");
    CHECK(m.status == 200 && m.body && strstr(m.body, "\nhidetd_cache_quarantined_total 3\n"),
             "quarantine not counted: %.200s",
             m.body && strstr(m.body, "quarantined") ? strstr(m.body, "quarantined") : "");
    ht_resp_free(&m);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    char *log = NULL;
    ht_sh(&log, "grep -c 'put in quarantine' '%s'", d.log);
    CHECK(log && atoi(log) == 3, "quarantine warnings: %s", log ? log : "");
    free(log);
    for (int i = 0; i < 3; i++)
        CHECK(ht_log_contains(&d, keys[i]), "the warning does not name %s", keys[i]);
    rc = ht_sh(&out, "'%s' --cache '%s' cache verify 2>&1", ctl, d.cache);
    CHECK(rc == 0 && out && strstr(out, "all good"), "the re-tuned records did not heal: %d %s",
             rc, out ? out : "");
    free(out);
    /* Broken again behind its back, for the removal below. */
    sql(d.cache, "UPDATE launch_kernels SET grid_x = 0 WHERE artifact_key = ?1", keys[0], NULL);
    sql(d.cache, "UPDATE launch_kernels SET args = x'00ff' WHERE artifact_key = ?1", keys[1], NULL);
    sql(d.cache, "DELETE FROM launch_kernels WHERE artifact_key = ?1", keys[2], NULL);

    /* A record under a key that is not hex, with ESC and a newline in it. */
    sql(d.cache, "CREATE TABLE copy AS SELECT * FROM artifacts WHERE key = ?1;"
                 "UPDATE copy SET key = ?2;"
                 "INSERT INTO artifacts SELECT * FROM copy; DROP TABLE copy;", keys[3], BAD_KEY);
    CHECK(count(d.cache, BAD_KEY) == 1, "the odd record was not planted");
    rc = ht_sh(&out, "'%s' --cache '%s' cache ls", ctl, d.cache);
    CHECK(rc == 0 && out && strstr(out, "5 artifacts"), "ls: %d %s", rc, out ? out : "");
    CHECK(out && !has_controls(out), "ls prints control characters from a key");
    CHECK(out && strstr(out, "evil\\x1b[2J\\x0akey"), "ls does not show the key escaped: %s",
             out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' --json cache ls", ctl, d.cache);
    CHECK(rc == 0 && out && !has_controls(out), "ls --json: %d", rc);
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' cache verify 2>&1", ctl, d.cache);
    CHECK(rc != 0 && out && !has_controls(out) && strstr(out, "evil\\x1b"),
             "verify of the odd key: %d %s", rc, out ? out : "");
    free(out);
    /* A prefix must be hex; the whole key, any bytes, is removed with --exact. */
    rc = ht_sh(&out, "'%s' --cache '%s' cache rm evil 2>&1", ctl, d.cache);
    CHECK(rc == 2, "rm of a non-hex prefix: %d %s", rc, out ? out : "");
    free(out);
    rc = ht_sh(&out, "'%s' --cache '%s' cache rm --exact \"$(printf 'evil\\033[2J\\nkey')\" 2>&1",
               ctl, d.cache);
    CHECK(rc == 0 && out && !has_controls(out), "rm --exact: %d %s", rc, out ? out : "");
    free(out);
    CHECK(count(d.cache, BAD_KEY) == 0, "the odd record is still there");
    CHECK(count(d.cache, keys[3]) == 1, "rm --exact removed the record it was copied from");
    /* The broken ones go by key; then verify is clean again. */
    rc = ht_sh(&out, "'%s' --cache '%s' cache rm %s %s %s && '%s' --cache '%s' cache verify 2>&1",
               ctl, d.cache, keys[0], keys[1], keys[2], ctl, d.cache);
    CHECK(rc == 0 && out && strstr(out, "all good"), "rm and verify: %d %s", rc,
             out ? out : "");
    free(out);
    ht_cleanup(&d);
    return ht_finish("it_cache_heal");
}
