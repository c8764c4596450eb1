/* clients/c/hidetctl_cache.c - hidetctl's cache commands: cache ls, show, rm, prune, export,
 * import, verify and vacuum, run directly on the kernel database through kernel_cache/ (no
 * daemon needed; with one running, WAL lets both use the file); and keygen, the key pair that
 * signs exports.
 *
 * Every text that comes from the database or an import file (keys, names, JSON, reasons, error
 * messages that quote them) is printed through safe_text(): a stored key may hold any byte.
 */
#include "clients/c/hidetctl_internal.h"

#include "kernel_cache/kc.h"
#include "kernel_cache/kc_sign.h"
#include "op/op.h"

#include "hidetd_config.h"
#include "hidet/client.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

/* ---- parsing of arguments ------------------------------------------------------------------- */

/* "30d", "12h", "90m", "45s", "2w", "600" (seconds). */
static int parse_duration(const char *s, int64_t *ret)
{
    char *end = NULL;
    double v;
    int64_t mul = 1;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (*end) {
        switch (*end) {
        case 's': mul = 1; break;
        case 'm': mul = 60; break;
        case 'h': mul = 3600; break;
        case 'd': mul = 86400; break;
        case 'w': mul = 7 * 86400; break;
        default: return -EINVAL;
        }
        if (end[1] != '\0')
            return -EINVAL;
    }
    if (v * (double)mul > 1e12)
        return -EINVAL;
    *ret = (int64_t)(v * (double)mul);
    return 0;
}

/* "1048576", "500K", "500M", "2G", "1.5GiB", "10MB" (K, M, G, T are powers of 1024). */
static int parse_size(const char *s, uint64_t *ret)
{
    char *end = NULL;
    double v, mul = 1;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -EINVAL;
    if (*end) {
        switch (*end) {
        case 'B': mul = 1; break;
        case 'K': case 'k': mul = 1024.0; break;
        case 'M': mul = 1024.0 * 1024; break;
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
        default: return -EINVAL;
        }
        const char *rest = end + 1;
        if (*end != 'B' && strcmp(rest, "") != 0 && strcmp(rest, "B") != 0 &&
            strcmp(rest, "iB") != 0)
            return -EINVAL;
        if (*end == 'B' && *rest)
            return -EINVAL;
    }
    if (v * mul > 1.8e19)
        return -EINVAL;
    *ret = (uint64_t)(v * mul);
    return 0;
}

/* Where the packaged service keeps its cache (deploy/hidetd.service.in passes it as --cache). */
#define SYSTEM_CACHE "/var/lib/hidetd/kernels.db"

static char *default_cache(void)
{
    const char *e = getenv("XDG_CACHE_HOME");
    char *s = NULL;
    if (e && *e) {
        if (asprintf(&s, "%s/hidetd/kernels.db", e) < 0)
            return NULL;
        return s;
    }
    e = getenv("HOME");
    if (asprintf(&s, "%s/.cache/hidetd/kernels.db", e && *e ? e : ".") < 0)
        return NULL;
    return s;
}

/* ---- subcommands ----------------------------------------------------------------------------- */

static int kc_exit(int r)
{
    if (r == -ENOENT)
        return EXIT_NOT_FOUND;
    if (r == -EBADMSG)
        return EXIT_CORRUPT;
    return EXIT_DAEMON;
}

/* "hidetctl: PREFIX: MESSAGE" on stderr, the message made safe (it may quote stored keys). */
static void print_err(const char *prefix, const char *msg)
{
    char *t = safe_text(msg);
    fail(EXIT_DAEMON, "%s%s%s", prefix ? prefix : "", prefix ? ": " : "", t ? t : "?");
    free(t);
}

/* A safe copy of a stored text to add to JSON or a table; "" when out of memory. The caller
 * frees. */
static char *st(const char *s)
{
    char *t = safe_text(s);
    return t ? t : strdup("");
}

/* Adds a stored text to a JSON object, made safe. */
static void add_text(cJSON *j, const char *name, const char *s)
{
    char *t = st(s);
    cJSON_AddStringToObject(j, name, t ? t : "");
    free(t);
}

/* The kernel database the cache commands use, first match wins (documented in hidetctl.1):
 * --cache; $HIDETD_CACHE; the running daemon's own (its /v1/status names it); the system
 * service's, when that file exists; the default of a user's hidetd. *ret_why says which. */
static char *find_cache(const opts *o, const char **ret_why)
{
    const char *e = getenv("HIDETD_CACHE");
    cJSON *status = NULL;
    hidet_error herr;
    char *path = NULL;

    if (o->cache) {
        *ret_why = "--cache";
        return strdup(o->cache);
    }
    if (e && *e) {
        *ret_why = "$HIDETD_CACHE";
        return strdup(e);
    }
    /* A daemon that does not answer at once is not waited for: the cache commands work without
     * one. Its path counts only when it is absolute and here (a daemon over --url may be on
     * another machine). */
    if (daemon_status(o, 2000, &status, &herr) == 0) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(status, "cache");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "path");
        if (cJSON_IsString(p) && p->valuestring[0] == '/' && access(p->valuestring, F_OK) == 0)
            path = strdup(p->valuestring);
        cJSON_Delete(status);
        if (path) {
            *ret_why = "the running hidetd's, from /v1/status";
            return path;
        }
    }
    if (access(SYSTEM_CACHE, F_OK) == 0) {
        *ret_why = "the system service's";
        return strdup(SYSTEM_CACHE);
    }
    *ret_why = "the default of a user's hidetd; no daemon answered, and neither --cache, "
               "$HIDETD_CACHE nor " SYSTEM_CACHE " names one";
    return default_cache();
}

static int open_cache(const opts *o, bool create, kc_db **ret, char **ret_created)
{
    const char *why = "";
    char *path = find_cache(o, &why);
    char *err = NULL;
    int r;

    if (!path)
        return EXIT_DAEMON;
    bool absent = access(path, F_OK) != 0;
    if (!create && absent) {
        fail(EXIT_NOT_FOUND, "no kernel cache at %s (%s)", path, why);
        free(path);
        return EXIT_NOT_FOUND;
    }
    r = kc_open(path, ret, &err);
    if (r < 0) {
        char prefix[400];
        snprintf(prefix, sizeof(prefix), "%s (%s)", path, why);
        print_err(prefix, err ? err : strerror(-r));
        free(err);
        free(path);
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    if (ret_created && absent) {
        *ret_created = path;
        path = NULL;
    }
    free(path);
    return 0;
}

/* Removes a database file that this run created (and its WAL and shared-memory files), after a
 * refused import: nothing was stored, so nothing is left behind either. */
static void remove_created(const char *path)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        char *p = NULL;
        if (asprintf(&p, "%s%s", path, suffix[i]) >= 0)
            unlink(p);
        free(p);
    }
}

static cJSON *summary_json(const kc_summary *s)
{
    cJSON *j = cJSON_CreateObject();
    add_text(j, "key", s->key);
    add_text(j, "op", s->op);
    add_text(j, "arch", s->target);
    cJSON_AddBoolToObject(j, "measured", s->choice == KC_CHOSEN_MEASURED);
    if (s->latency_us >= 0)
        cJSON_AddNumberToObject(j, "latency_us", s->latency_us);
    else
        cJSON_AddNullToObject(j, "latency_us");
    cJSON_AddNumberToObject(j, "bytes", (double)s->bytes);
    cJSON_AddNumberToObject(j, "created_at", (double)s->created_at);
    cJSON_AddNumberToObject(j, "last_used_at", (double)s->last_used_at);
    return j;
}

static int cache_ls(const opts *o, kc_db *db, int argc)
{
    kc_filter f = {.target = o->arch, .op = o->op};
    kc_summary *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    int r;

    if (argc != 0)
        return usage_error("'cache ls' takes no arguments");
    r = kc_list(db, &f, &v, &n);
    if (r < 0) {
        print_err(NULL, kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json) {
        cJSON *w = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(w, "artifacts");
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(a, summary_json(&v[i]));
        print_json(w);
        cJSON_Delete(w);
    } else {
        table t = {.ncols = 7, .align = "lllrrrl"};
        table_row(&t, "KEY", "OP", "ARCH", "MEASURED", "LATENCY", "SIZE", "LAST USED");
        for (size_t i = 0; i < n; i++) {
            char lat[32], sz[32], age[32];
            /* A well-formed key is shown by its first 16 digits; any other whole, made safe,
             * so that it can be found and removed (cache rm --exact). */
            char *key = kc_key_is_hex(v[i].key) ? strndup(v[i].key, 16) : st(v[i].key);
            char *op = st(v[i].op), *target = st(v[i].target);
            fmt_us(v[i].latency_us, lat, sizeof(lat));
            fmt_size(v[i].bytes, sz, sizeof(sz));
            fmt_age(v[i].last_used_at, age, sizeof(age));
            table_row(&t, key, op, target,
                      v[i].choice == KC_CHOSEN_MEASURED ? "yes" : "no", lat, sz, age);
            free(key);
            free(op);
            free(target);
            total += v[i].bytes;
        }
        table_print(&t, stdout);
        table_free(&t);
        char sz[32];
        fmt_size(total, sz, sizeof(sz));
        printf("%zu artifact%s, %s\n", n, n == 1 ? "" : "s", sz);
    }
    free(v);
    return EXIT_OK;
}

/* Resolves a key or unique key prefix to a full key. Only lowercase hex is matched as a prefix:
 * a prefix of some other string could match keys nobody meant; such keys are named whole with
 * --exact. */
static int resolve_key(kc_db *db, const char *prefix, char out[KC_KEY_LEN + 1])
{
    kc_filter f = {.key_prefix = prefix, .limit = 2};
    kc_summary *v = NULL;
    size_t n = 0;
    int r;

    for (const char *p = prefix; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            char *t = st(prefix);
            r = usage_error("'%s' is not a key or key prefix (lowercase hex); give a key that is "
                            "not hex whole with --exact", t);
            free(t);
            return r;
        }
    if (!*prefix || strlen(prefix) > KC_KEY_LEN)
        return usage_error("'%s' is not a key", prefix);
    r = kc_list(db, &f, &v, &n);
    if (r < 0) {
        print_err(NULL, kc_errmsg(db));
        return kc_exit(r);
    }
    if (n == 0) {
        free(v);
        return fail(EXIT_NOT_FOUND, "no artifact %s in the cache", prefix);
    }
    if (n > 1) {
        free(v);
        return usage_error("key prefix '%s' is ambiguous; give more characters", prefix);
    }
    memcpy(out, v[0].key, KC_KEY_LEN + 1);
    free(v);
    return 0;
}

static int cache_show(const opts *o, kc_db *db, int argc, char **argv)
{
    char key[KC_KEY_LEN + 1];
    kc_artifact *a = NULL;
    int rc, r;

    if (argc != 1)
        return usage_error("'cache show' takes one KEY");
    const char *want = argv[0];
    if (!o->exact) {
        if ((rc = resolve_key(db, argv[0], key)))
            return rc;
        want = key;
    }
    /* The full, verifying read (show says so when a blob is damaged), not counted as a use. */
    r = kc_artifact_peek(db, want, &a);
    if (r < 0) {
        print_err(NULL, kc_errmsg(db));
        return kc_exit(r);
    }
    /* The launch as the export file writes it: the same text schema 1 stored. */
    char *launch = NULL;
    if (kc_launch_json(&a->launch, &launch) < 0) {
        print_err(a->key, "cannot render the launch description");
        kc_artifact_free(a);
        return EXIT_DAEMON;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        add_text(j, "key", a->key);
        add_text(j, "op_key", a->op_key);
        add_text(j, "op", a->op);
        add_text(j, "arch", a->target);
        cJSON_AddBoolToObject(j, "measured", a->choice == KC_CHOSEN_MEASURED);
        if (a->latency_us >= 0)
            cJSON_AddNumberToObject(j, "latency_us", a->latency_us);
        else
            cJSON_AddNullToObject(j, "latency_us");
        cJSON_AddNumberToObject(j, "predicted_us", a->predicted_us);
        cJSON_AddNumberToObject(j, "ptx_bytes", (double)a->ptx_len);
        cJSON_AddNumberToObject(j, "cubin_bytes", (double)a->cubin_len);
        cJSON_AddNumberToObject(j, "created_at", (double)a->created_at);
        cJSON_AddNumberToObject(j, "last_used_at", (double)a->last_used_at);
        /* The stored JSON documents are embedded as JSON, or as (safe) text if they do not
         * parse or hold bytes cJSON would print raw (DEL, C1 controls, invalid UTF-8). */
        const char *names[] = {"op_json", "schedule", "launch", "provenance"};
        const char *vals[] = {a->op_json, a->schedule_json, launch, a->provenance_json};
        for (int i = 0; i < 4; i++) {
            cJSON *p = text_is_safe(vals[i]) ? cJSON_Parse(vals[i] ? vals[i] : "") : NULL;
            if (!p) {
                char *t = st(vals[i]);
                p = cJSON_CreateString(t);
                free(t);
            }
            cJSON_AddItemToObject(j, i == 0 ? "op_request" : names[i], p);
        }
        print_json(j);
        cJSON_Delete(j);
    } else {
        char lat[32], pred[32], ps[32], cs[32], ct[64], lu[64];
        fmt_us(a->latency_us, lat, sizeof(lat));
        fmt_us(a->predicted_us, pred, sizeof(pred));
        fmt_size(a->ptx_len, ps, sizeof(ps));
        fmt_size(a->cubin_len, cs, sizeof(cs));
        fmt_time(a->created_at, ct, sizeof(ct));
        fmt_time(a->last_used_at, lu, sizeof(lu));
        char *t[8] = {st(a->key), st(a->op_key), st(a->op), st(a->target), st(a->op_json),
                      st(a->schedule_json), st(launch), st(a->provenance_json)};
        printf("key          %s\n", t[0]);
        printf("op key       %s\n", t[1]);
        printf("op           %s on %s\n", t[2], t[3]);
        printf("measured     %s\n", a->choice == KC_CHOSEN_MEASURED ? "yes"
                                 : a->choice == KC_CHOSEN_MODEL ? "no (ranked by the cost model)"
                                                                : "no (the template's default)");
        printf("latency      %s (predicted %s)\n", lat, pred);
        printf("ptx / cubin  %s / %s (digests verified)\n", ps, cs);
        printf("created      %s\n", ct);
        printf("last used    %s\n", lu);
        /* The op key's canonical form, not a request (cache retune turns it into one). */
        printf("canonical op %s\n", t[4]);
        printf("schedule     %s\n", t[5]);
        printf("launch       %s\n", t[6]);
        printf("provenance   %s\n", t[7]);
        for (int i = 0; i < 8; i++)
            free(t[i]);
    }
    free(launch);
    kc_artifact_free(a);
    return EXIT_OK;
}

/* A canonical step as a request spells it: "gelu_tanh" is the canonical name of gelu with
 * "approximate": "tanh" (a request has one spelling per step). */
static void step_to_request(cJSON *st)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(st, "op");
    if (cJSON_IsString(op) && strcmp(op->valuestring, "gelu_tanh") == 0) {
        cJSON_ReplaceItemInObjectCaseSensitive(st, "op", cJSON_CreateString("gelu"));
        cJSON_AddStringToObject(st, "approximate", "tanh");
    }
}

/* Turns an op's canonical JSON (op/op_json.c) back into the request it was validated from, in
 * place: the derived fields go (n_anchor_inputs, output), prologue chains kept per anchor input
 * become one list of steps naming their "input", an epilogue step's operand, "operand" in the
 * canonical form, is named "input" as a request names it (docs/api.md), and steps get their
 * request names (step_to_request). The daemon checks the result as any request. Returns 0 or
 * -EINVAL when j does not have the canonical form. */
static int canonical_to_request(cJSON *j)
{
    cJSON_DeleteItemFromObjectCaseSensitive(j, "n_anchor_inputs");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "output");
    cJSON *epi = cJSON_GetObjectItemCaseSensitive(j, "epilogue");
    cJSON *st;
    if (epi && !cJSON_IsArray(epi))
        return -EINVAL;
    cJSON_ArrayForEach(st, epi) {
        cJSON *operand = cJSON_DetachItemFromObjectCaseSensitive(st, "operand");
        if (operand)
            cJSON_AddItemToObject(st, "input", operand);
        step_to_request(st);
    }
    cJSON *pro = cJSON_DetachItemFromObjectCaseSensitive(j, "prologue");
    if (!pro)
        return 0;
    cJSON *flat = cJSON_CreateArray(), *chain;
    int input = 0, r = flat && cJSON_IsArray(pro) ? 0 : -EINVAL;
    cJSON_ArrayForEach(chain, pro) {
        if (r < 0 || !cJSON_IsArray(chain)) {
            r = -EINVAL;
            break;
        }
        cJSON_ArrayForEach(st, chain) {
            cJSON *step = cJSON_Duplicate(st, true);
            if (!step || !cJSON_IsObject(step)) {
                cJSON_Delete(step);
                r = -EINVAL;
                break;
            }
            cJSON_AddNumberToObject(step, "input", input);
            step_to_request(step);
            cJSON_AddItemToArray(flat, step);
        }
        input++;
    }
    cJSON_Delete(pro);
    if (r < 0 || cJSON_GetArraySize(flat) == 0) {
        cJSON_Delete(flat);
        return r;
    }
    cJSON_AddItemToObject(j, "prologue", flat);
    return 0;
}

/* cache retune KEY: the daemon tunes the artifact's op again. The cache keeps each artifact's
 * op as its canonical JSON (op/op.h: the validated request with every default explicit) and its
 * target; hidetctl turns them back into a request (canonical_to_request) and sends it to the
 * daemon with "retune": true, so the daemon keys, tunes, stores and
 * (with a cluster tier) publishes it as it does for any client, replacing the pinned entry. No
 * daemon endpoint is needed for this, and the KEY is looked up in the daemon's own cache file
 * (cmd_cache asks the daemon for its path unless --cache names one). The tune mode is the one
 * the stored kernel was chosen with, unless --tune says otherwise. */
static int cache_retune(const opts *o, kc_db *db, int argc, char **argv)
{
    char key[KC_KEY_LEN + 1];
    kc_artifact *a = NULL;
    int rc, r;

    if (argc != 1)
        return usage_error("'cache retune' takes one KEY");
    const char *want = argv[0];
    if (!o->exact) {
        if ((rc = resolve_key(db, argv[0], key)))
            return rc;
        want = key;
    }
    /* The metadata only: a kernel whose blobs are damaged is a good reason to re-tune it. */
    r = kc_artifact_get_meta(db, want, &a);
    if (r == -ENOENT) {
        char *t = st(want);
        fail(EXIT_NOT_FOUND, "no artifact %s in the cache", t);
        free(t);
        return EXIT_NOT_FOUND;
    }
    if (r < 0) {
        print_err(NULL, kc_errmsg(db));
        return kc_exit(r);
    }
    cJSON *j = a->op_json ? cJSON_Parse(a->op_json) : NULL;
    if (!cJSON_IsObject(j) || canonical_to_request(j) < 0) {
        cJSON_Delete(j);
        print_err(a->key, "its stored request does not parse; remove it with hidetctl cache rm "
                          "and ask for the op again");
        kc_artifact_free(a);
        return EXIT_CORRUPT;
    }
    const char *tune = o->tune ? o->tune
                       : a->choice == KC_CHOSEN_MEASURED ? "measure"
                       : a->choice == KC_CHOSEN_MODEL    ? "model"
                                                          : "none";
    /* The daemon computes the op key itself: an answer with another key says so
     * (daemon_retune). */
    cJSON_DeleteItemFromObjectCaseSensitive(j, "arch");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "tune");
    cJSON_AddStringToObject(j, "arch", a->target);
    cJSON_AddStringToObject(j, "tune", tune);
    cJSON_AddBoolToObject(j, "retune", true);
    cJSON_AddBoolToObject(j, "wait", !o->no_wait);
    char *req = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    rc = req ? daemon_retune(o, req, a->key) : EXIT_DAEMON;
    free(req);
    kc_artifact_free(a);
    return rc;
}

static int cache_rm(const opts *o, kc_db *db, int argc, char **argv)
{
    int rc = EXIT_OK;
    cJSON *removed = o->json ? cJSON_CreateArray() : NULL;

    if (argc < 1)
        return usage_error("'cache rm' takes one or more KEYs");
    for (int i = 0; i < argc; i++) {
        char key[KC_KEY_LEN + 1];
        const char *target = argv[i];
        size_t n = 0;
        int r = 0;
        /* --exact: the string as stored, whatever it holds. A whole hex key is exact too, so a
         * key that is only in quarantine (no artifact row) can be removed without --exact. */
        if (!o->exact && !kc_key_is_hex(argv[i])) {
            r = resolve_key(db, argv[i], key);
            target = key;
        }
        if (r) {
            /* Keep going; report the most serious problem at the end. */
            if (r != EXIT_NOT_FOUND || rc == EXIT_OK)
                rc = r;
            continue;
        }
        r = kc_remove_key(db, target, &n);
        if (r < 0) {
            print_err(NULL, kc_errmsg(db));
            if (r != -ENOENT || rc == EXIT_OK)
                rc = kc_exit(r);
            continue;
        }
        char *t = st(target);
        if (removed)
            cJSON_AddItemToArray(removed, cJSON_CreateString(t));
        else
            printf("removed %s\n", t);
        free(t);
    }
    if (removed) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddItemToObject(w, "removed", removed);
        print_json(w);
        cJSON_Delete(w);
    }
    return rc;
}

static int cache_prune(const opts *o, kc_db *db, int argc)
{
    int64_t older = 0;
    uint64_t max = 0;
    size_t by_filter = 0, by_size = 0;
    kc_stats before, after;
    int r;

    if (argc != 0)
        return usage_error("'cache prune' takes options only");
    if (!o->older_than && !o->max_size && !o->arch)
        return usage_error("'cache prune' needs --older-than, --max-size or --arch");
    if (o->older_than && parse_duration(o->older_than, &older) < 0)
        return usage_error("bad duration '%s' (try 30d, 12h, 90m)", o->older_than);
    if (o->max_size && parse_size(o->max_size, &max) < 0)
        return usage_error("bad size '%s' (try 500M, 2G)", o->max_size);
    r = kc_stats_get(db, &before);
    if (r == 0 && (o->older_than || o->arch)) {
        kc_filter f = {.target = o->arch, .older_than = o->older_than ? time(NULL) - older : 0};
        /* older_than 0 means "any age"; a zero-length duration means "everything until now". */
        if (o->older_than && f.older_than <= 0)
            f.older_than = 1;
        r = kc_remove(db, &f, &by_filter);
    }
    if (r == 0 && o->max_size)
        r = kc_prune_to_size(db, max, &by_size);
    if (r == 0)
        r = kc_stats_get(db, &after);
    if (r < 0) {
        print_err(NULL, kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "removed", (double)(by_filter + by_size));
        cJSON_AddNumberToObject(j, "bytes_before", (double)before.bytes);
        cJSON_AddNumberToObject(j, "bytes_after", (double)after.bytes);
        cJSON_AddNumberToObject(j, "artifacts", (double)after.artifacts);
        print_json(j);
        cJSON_Delete(j);
    } else {
        char b[32], a[32];
        fmt_size(before.bytes, b, sizeof(b));
        fmt_size(after.bytes, a, sizeof(a));
        printf("removed %zu artifact%s; %s -> %s, %llu left\n", by_filter + by_size,
               by_filter + by_size == 1 ? "" : "s", b, a, (unsigned long long)after.artifacts);
    }
    return EXIT_OK;
}

static int cache_export(const opts *o, kc_db *db, int argc, char **argv)
{
    kc_sign_secret key;
    char id[KC_SIGN_ID_LEN + 1] = "";
    char *err = NULL;
    size_t n = 0;
    int r;

    if (argc != 1)
        return usage_error("'cache export' takes one FILE");
    memset(&key, 0, sizeof(key));
    if (o->sign) {
        r = kc_sign_load_secret(o->sign, &key, &err);
        if (r < 0) {
            print_err("cannot use the signing key", err ? err : strerror(-r));
            free(err);
            return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON;
        }
        memcpy(id, key.id, sizeof(id));
    }
    r = kc_export(db, NULL, argv[0], o->sign ? &key : NULL, &n, &err);
    kc_sign_secret_wipe(&key);
    if (r < 0) {
        print_err("export failed", err ? err : strerror(-r));
        free(err);
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    free(err);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "exported", (double)n);
        cJSON_AddStringToObject(j, "file", argv[0]);
        if (o->sign)
            cJSON_AddStringToObject(j, "signed_by", id);
        else
            cJSON_AddNullToObject(j, "signed_by");
        print_json(j);
        cJSON_Delete(j);
    } else if (o->sign) {
        printf("exported %zu artifact%s to %s, signed by key %s\n", n, n == 1 ? "" : "s",
               argv[0], id);
    } else {
        printf("exported %zu artifact%s to %s\n", n, n == 1 ? "" : "s", argv[0]);
    }
    if (!o->sign)
        fprintf(stderr, "hidetctl: note: the file is not signed; importing it needs "
                        "--trust-unsigned (sign with --sign KEY; see hidetctl keygen)\n");
    return EXIT_OK;
}

/* The keys an import trusts: every --trust file and every *.pub of the trusted-keys directory. */
static int load_trusted(const opts *o, kc_sign_public **ret, size_t *ret_n)
{
    kc_sign_public *keys = NULL;
    size_t n = 0;
    char *err = NULL;
    int r = 0;

    keys = calloc((size_t)o->n_trust + 1, sizeof(*keys));
    if (!keys)
        return EXIT_DAEMON;
    for (int i = 0; i < o->n_trust; i++) {
        r = kc_sign_load_public(o->trust[i], &keys[n], &err);
        if (r < 0)
            break;
        n++;
    }
    if (r == 0)
        r = kc_sign_load_dir(o->trust_dir ? o->trust_dir : HIDETD_SYSCONFDIR "/hidetd/trusted.d",
                             &keys, &n, &err);
    if (r < 0) {
        print_err("cannot read a trusted key", err ? err : strerror(-r));
        free(err);
        free(keys);
        return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON;
    }
    *ret = keys;
    *ret_n = n;
    return 0;
}

static int cache_import(const opts *o, kc_db *db, int argc, char **argv)
{
    kc_sign_public *keys = NULL;
    size_t n_keys = 0;
    kc_import_info info;
    char *err = NULL;
    int r, rc;

    if (argc != 1)
        return usage_error("'cache import' takes one FILE");
    if ((rc = load_trusted(o, &keys, &n_keys)))
        return rc;
    kc_import_opts io = {.trusted = keys, .n_trusted = n_keys,
                         .allow_unsigned = o->trust_unsigned,
                         .replace_stronger = o->replace_stronger};
    r = kc_import(db, argv[0], &io, &info, &err);
    free(keys);
    if (r == -ENOKEY && err && !o->trust_unsigned) {
        /* Say which keys were trusted: the directory read (the default one differs by
         * installation) and how many --trust files. */
        char *more = NULL;
        if (asprintf(&more, "%s; trusted were the *.pub keys in %s%s and %d --trust file%s", err,
                     o->trust_dir ? o->trust_dir : HIDETD_SYSCONFDIR "/hidetd/trusted.d",
                     o->trust_dir ? "" : " (the default)", o->n_trust,
                     o->n_trust == 1 ? "" : "s") >= 0) {
            free(err);
            err = more;
        }
    }
    if (r < 0) {
        print_err("import refused, nothing stored", err ? err : strerror(-r));
        free(err);
        if (r == -EBADMSG)
            return EXIT_CORRUPT;
        if (r == -ENOKEY || r == -EEXIST)
            return EXIT_REFUSED;
        return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON;
    }
    free(err);
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "imported", (double)info.n);
        if (info.is_signed)
            cJSON_AddStringToObject(j, "signed_by", info.signer);
        else
            cJSON_AddNullToObject(j, "signed_by");
        print_json(j);
        cJSON_Delete(j);
    } else if (info.is_signed) {
        printf("imported %zu artifact%s from %s, signed by trusted key %s\n", info.n,
               info.n == 1 ? "" : "s", argv[0], info.signer);
    } else {
        printf("imported %zu artifact%s from %s (unsigned, trusted by --trust-unsigned)\n",
               info.n, info.n == 1 ? "" : "s", argv[0]);
    }
    return EXIT_OK;
}

static int cache_verify(const opts *o, kc_db *db, int argc)
{
    size_t checked = 0, nbad = 0, nq = 0;
    kc_problem *bad = NULL;
    kc_quarantined *q = NULL;
    int r;

    if (argc != 0)
        return usage_error("'cache verify' takes no arguments");
    r = kc_verify(db, &checked, &bad, &nbad);
    if (r == 0)
        r = kc_quarantine_list(db, &q, &nq);
    if (r < 0) {
        print_err("verify failed", kc_errmsg(db));
        kc_problems_free(bad, nbad);
        return r == -EBADMSG ? EXIT_CORRUPT : EXIT_DAEMON;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject(), *a, *p, *qa;
        cJSON_AddNumberToObject(j, "checked", (double)checked);
        cJSON_AddBoolToObject(j, "ok", nbad == 0 && nq == 0);
        /* "bad": the keys (as before), "problems": each with its reason. */
        a = cJSON_AddArrayToObject(j, "bad");
        p = cJSON_AddArrayToObject(j, "problems");
        for (size_t i = 0; i < nbad; i++) {
            char *k = st(bad[i].key);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToArray(a, cJSON_CreateString(k));
            cJSON_AddStringToObject(e, "key", k);
            add_text(e, "reason", bad[i].reason);
            cJSON_AddItemToArray(p, e);
            free(k);
        }
        qa = cJSON_AddArrayToObject(j, "quarantined");
        for (size_t i = 0; i < nq; i++) {
            cJSON *e = cJSON_CreateObject();
            add_text(e, "key", q[i].key);
            cJSON_AddBoolToObject(e, "key_cut", q[i].key_len > KC_KEY_LEN);
            add_text(e, "op_key", q[i].op_key);
            add_text(e, "reason", q[i].reason);
            cJSON_AddNumberToObject(e, "at", (double)q[i].at);
            cJSON_AddItemToArray(qa, e);
        }
        print_json(j);
        cJSON_Delete(j);
    } else {
        for (size_t i = 0; i < nbad; i++) {
            char *k = st(bad[i].key), *why = st(bad[i].reason);
            printf("BAD          %s: %s\n", k, why);
            free(k);
            free(why);
        }
        for (size_t i = 0; i < nq; i++) {
            char *k = st(q[i].key), *why = st(q[i].reason), when[64];
            fmt_time(q[i].at, when, sizeof(when));
            printf("QUARANTINED  %s%s: %s (since %s)\n", k, q[i].key_len > KC_KEY_LEN ? "..." : "",
                   why, when);
            free(k);
            free(why);
        }
        printf("checked %zu artifact%s: ", checked, checked == 1 ? "" : "s");
        if (nbad == 0 && nq == 0)
            printf("all good\n");
        else
            printf("%zu bad, %zu quarantined\n", nbad, nq);
    }
    kc_problems_free(bad, nbad);
    free(q);
    return nbad || nq ? EXIT_CORRUPT : EXIT_OK;
}

static int cache_vacuum(const opts *o, kc_db *db, int argc)
{
    int r;

    if (argc != 0)
        return usage_error("'cache vacuum' takes no arguments");
    r = kc_vacuum(db);
    if (r < 0) {
        print_err("vacuum failed", kc_errmsg(db));
        return kc_exit(r);
    }
    if (o->json)
        puts("{\"vacuumed\":true}");
    else
        printf("vacuumed\n");
    return EXIT_OK;
}

int cmd_cache(const opts *o, int argc, char **argv)
{
    static const struct {
        const char *name;
        unsigned allowed;
        int min_args, max_args;
    } subs[] = {
        {"ls", OPT_ARCH | OPT_OP, 0, 0},
        {"show", OPT_EXACT, 1, 1},
        {"rm", OPT_EXACT, 1, 1 << 20},
        {"prune", OPT_OLDER | OPT_MAXSIZE | OPT_ARCH, 0, 0},
        {"export", OPT_SIGN, 1, 1},
        {"import", OPT_TRUST | OPT_TRUST_DIR | OPT_TRUST_UNSIGNED | OPT_REPLACE_STRONGER, 1, 1},
        {"verify", 0, 0, 0},
        {"vacuum", 0, 0, 0},
        {"retune", OPT_EXACT | OPT_TUNE | OPT_NO_WAIT, 1, 1},
    };
    kc_db *db = NULL;
    const char *sub;
    int rc, i, n = (int)(sizeof(subs) / sizeof(subs[0]));

    if (argc < 1)
        return usage_error("'cache' needs a subcommand: ls, show, rm, prune, export, import, "
                           "verify, vacuum, retune");
    sub = argv[0];
    for (i = 0; i < n; i++)
        if (strcmp(sub, subs[i].name) == 0)
            break;
    if (i == n)
        return usage_error("unknown cache subcommand '%s'", sub);
    char what[32];
    snprintf(what, sizeof(what), "cache %s", sub);
    if ((rc = only_opts(o, subs[i].allowed, what)))
        return rc;
    /* Usage errors first, before touching any file. */
    if (argc - 1 < subs[i].min_args || argc - 1 > subs[i].max_args)
        return usage_error("wrong number of arguments for '%s' (see --help)", what);
    if (o->arch && strcmp(o->arch, "native") == 0)
        return usage_error("--arch native is the daemon's GPU, resolved per request; '%s' "
                           "filters stored entries by their arch (sm_80 .. sm_90a)", what);
    if (strcmp(sub, "prune") == 0) {
        int64_t d;
        uint64_t sz;
        if (!o->older_than && !o->max_size && !o->arch)
            return usage_error("'cache prune' needs --older-than, --max-size or --arch");
        if (o->older_than && parse_duration(o->older_than, &d) < 0)
            return usage_error("bad duration '%s' (try 30d, 12h, 90m)", o->older_than);
        if (o->max_size && parse_size(o->max_size, &sz) < 0)
            return usage_error("bad size '%s' (try 500M, 2G)", o->max_size);
    }
    if (strcmp(sub, "import") == 0 && argc == 2 && access(argv[1], R_OK) != 0) {
        int e = errno;
        return fail(e == ENOENT ? EXIT_NOT_FOUND : EXIT_DAEMON, "cannot read %s: %s", argv[1],
                    strerror(e));
    }
    /* retune goes to the daemon: the KEY is looked up in the daemon's own cache file. */
    opts ro = *o;
    char *daemon_db = NULL;
    if (strcmp(sub, "retune") == 0) {
        if (!o->cache && (rc = daemon_cache_path(o, &daemon_db)))
            return rc;
        if (daemon_db && access(daemon_db, R_OK) != 0) {
            /* A daemon on another host (--url), or one whose file this user may not read. */
            fail(EXIT_NOT_FOUND, "cannot read the daemon's kernel cache %s here: %s; give "
                                 "its path (or a copy) with --cache", daemon_db, strerror(errno));
            free(daemon_db);
            return EXIT_NOT_FOUND;
        }
        if (daemon_db)
            ro.cache = daemon_db;
    }
    /* Only import may create the database: a typo in --cache must not look like an empty cache. */
    char *created = NULL;
    rc = open_cache(&ro, strcmp(sub, "import") == 0, &db, &created);
    free(daemon_db);
    if (rc)
        return rc;
    argc--;
    argv++;
    if (strcmp(sub, "ls") == 0)
        rc = cache_ls(o, db, argc);
    else if (strcmp(sub, "show") == 0)
        rc = cache_show(o, db, argc, argv);
    else if (strcmp(sub, "rm") == 0)
        rc = cache_rm(o, db, argc, argv);
    else if (strcmp(sub, "prune") == 0)
        rc = cache_prune(o, db, argc);
    else if (strcmp(sub, "export") == 0)
        rc = cache_export(o, db, argc, argv);
    else if (strcmp(sub, "import") == 0)
        rc = cache_import(o, db, argc, argv);
    else if (strcmp(sub, "verify") == 0)
        rc = cache_verify(o, db, argc);
    else if (strcmp(sub, "retune") == 0)
        rc = cache_retune(o, db, argc, argv);
    else
        rc = cache_vacuum(o, db, argc);
    kc_close(db);
    if (created && rc != EXIT_OK)
        remove_created(created);
    free(created);
    return rc;
}

int cmd_keygen(const opts *o, int argc, char **argv)
{
    kc_sign_public pub;
    const char *prefix = o->out ? o->out : "hidetd-sign";
    char *err = NULL;
    int rc, r;

    (void)argv;
    if ((rc = only_opts(o, OPT_OUT, "keygen")))
        return rc;
    if (argc != 0)
        return usage_error("'keygen' takes options only (--out PREFIX)");
    r = kc_sign_keygen(prefix, &pub, &err);
    if (r < 0) {
        print_err("keygen failed", err ? err : strerror(-r));
        free(err);
        return EXIT_DAEMON;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        char *sec = NULL, *pubf = NULL;
        if (asprintf(&sec, "%s.key", prefix) < 0)
            sec = NULL;
        if (asprintf(&pubf, "%s.pub", prefix) < 0)
            pubf = NULL;
        cJSON_AddStringToObject(j, "key_id", pub.id);
        cJSON_AddStringToObject(j, "secret_key", sec ? sec : "");
        cJSON_AddStringToObject(j, "public_key", pubf ? pubf : "");
        print_json(j);
        cJSON_Delete(j);
        free(sec);
        free(pubf);
    } else {
        printf("key %s: secret key %s.key (mode 0600; keep it private), public key %s.pub "
               "(give it to the hosts that import)\n", pub.id, prefix, prefix);
    }
    return EXIT_OK;
}
