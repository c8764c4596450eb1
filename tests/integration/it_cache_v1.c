/* tests/integration/it_cache_v1.c - a kernel cache written by an older hidetd (schema 1,
 * kernel_cache/tests/data/v1.sql) is migrated when the real daemon opens it, and the daemon then
 * serves every stored kernel set with exactly the bytes the older daemon answered
 * (v1-answers.jsonl), its PTX and cubin verified. Op keys include the code generator's hash,
 * which changes between builds, so the sets are fetched by artifact key. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "harness.h"

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");

    char *dump = ht_read_src("kernel_cache/tests/data/v1.sql");
    char *answers = ht_read_src("kernel_cache/tests/data/v1-answers.jsonl");
    CHECK(dump && answers, "fixture files missing");
    if (!dump || !answers)
        return ht_finish("it_cache_v1");
    char dir[320];
    snprintf(dir, sizeof(dir), "%s/cache", d.dir);
    mkdir(dir, 0700);
    sqlite3 *s = NULL;
    CHECK(sqlite3_open(d.cache, &s) == SQLITE_OK, "create %s", d.cache);
    CHECK(sqlite3_exec(s, dump, NULL, NULL, NULL) == SQLITE_OK, "load v1.sql: %s",
             sqlite3_errmsg(s));
    sqlite3_close(s);
    free(dump);

    if (ht_start(&d) != 0)
        return 1;
    int n = 0;
    for (char *line = answers, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        cJSON *want = cJSON_Parse(line);
        const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(want, "key"));
        CHECK(key != NULL, "answer line without a key");
        if (!key) {
            cJSON_Delete(want);
            continue;
        }
        char path[160];
        snprintf(path, sizeof(path), "/v1/kernels/%s", key);
        ht_resp r = ht_get(&d, path);
        /* The fixture predates "origin" and the final newline of JSON answers: today's answer
         * is the same bytes with that one field after "cached" (this daemon's cache: "local"),
         * then a newline. */
        const char *cut = strstr(line, "\"cached\":true,");
        char *expect = NULL;
        CHECK(cut != NULL, "fixture line without \"cached\":true");
        if (cut) {
            int at = (int)(cut - line) + (int)strlen("\"cached\":true,");
            if (asprintf(&expect, "%.*s\"origin\":\"local\",%s\n", at, line, line + at) < 0)
                expect = NULL;
        }
        CHECK(r.status == 200 && r.body && expect && strcmp(r.body, expect) == 0,
                 "GET %s: %ld\n got  %s\n want %s", path, r.status, r.body ? r.body : "",
                 expect ? expect : line);
        free(expect);
        ht_resp_free(&r);
        for (int b = 0; b < 2; b++) {
            snprintf(path, sizeof(path), "/v1/kernels/%s/%s", key, b ? "cubin" : "ptx");
            r = ht_get(&d, path);
            CHECK(r.status == 200 && r.len > 0, "GET %s: %ld", path, r.status);
            ht_resp_free(&r);
        }
        cJSON_Delete(want);
        n++;
    }
    CHECK(n == 4, "%d kernel sets checked", n);
    free(answers);

    /* hidetctl reads the migrated file too, and its digests still hold. */
    char *out = NULL;
    int rc = ht_sh(&out, "'%s' --cache '%s' cache verify", getenv("HIDETCTL_BIN"), d.cache);
    CHECK(rc == 0 && out && strstr(out, "4 artifacts"), "cache verify: %d %s", rc,
             out ? out : "");
    free(out);

    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_cache_v1");
}
