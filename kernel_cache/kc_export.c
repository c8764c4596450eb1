/* kernel_cache/kc_export.c - the self-checking export file (backup, moving a cache between hosts).
 *
 * Format, one record per line, all text:
 *   hidetd-kernel-cache-export 1
 *   {"key":...,"ptx":"<base64>","ptx_sha256":"<hex>","cubin":"<base64>",...}   (one per artifact)
 *   end <count> <hex SHA-256 of every byte before this line>
 * The launch description travels as JSON text ("launch_json", kc_launch_json()) and the choice as
 * its name ("choice"), with "measured" beside it for older readers; files written before schema
 * 2 have no "choice", and import derives it from "measured" and the provenance as the schema-1
 * migration does. Import converts the text into a kc_launch and refuses the file when it does
 * not convert. The trailer's digest makes any flipped byte before it visible; the trailer itself is parsed
 * strictly (exact count, exact digest, nothing after its newline). Each blob also carries its own
 * digest, checked again after decoding. Import checks all of that before it stores anything, then
 * stores every artifact in one transaction.
 */
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <sodium.h>

#define KC__EXPORT_MAGIC "hidetd-kernel-cache-export 1\n"
/* Refuse absurd files before reading them into memory. */
#define KC__IMPORT_MAX_BYTES ((off_t)16 << 30)

static int kc__add_b64(cJSON *o, const char *name, const void *data, size_t len)
{
    size_t cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
    char *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    sodium_bin2base64(b, cap, len ? data : (const void *)"", len, sodium_base64_VARIANT_ORIGINAL);
    cJSON *s = cJSON_AddStringToObject(o, name, b);
    free(b);
    return s ? 0 : -ENOMEM;
}

/* One artifact as a single-line JSON object (malloc'd). */
static int kc__artifact_line(const kc_artifact *a, char **ret)
{
    char ph[KC_KEY_LEN + 1], ch[KC_KEY_LEN + 1];
    char *launch = NULL;
    int r = kc_launch_json(&a->launch, &launch);

    if (r < 0)
        return r;
    r = -ENOMEM;
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        free(launch);
        return -ENOMEM;
    }
    kc_sha256_hex(a->ptx, a->ptx_len, ph);
    kc_sha256_hex(a->cubin, a->cubin_len, ch);
    if (!cJSON_AddStringToObject(o, "key", a->key) ||
        !cJSON_AddStringToObject(o, "op_key", a->op_key) ||
        !cJSON_AddStringToObject(o, "op", a->op) ||
        !cJSON_AddStringToObject(o, "target", a->target) ||
        !cJSON_AddStringToObject(o, "op_json", a->op_json ? a->op_json : "") ||
        !cJSON_AddStringToObject(o, "schedule_json", a->schedule_json ? a->schedule_json : "") ||
        !cJSON_AddStringToObject(o, "launch_json", launch) ||
        !cJSON_AddBoolToObject(o, "measured", a->choice == KC_CHOSEN_MEASURED) ||
        !cJSON_AddStringToObject(o, "choice", kc_choice_name(a->choice)) ||
        !(a->latency_us >= 0 ? cJSON_AddNumberToObject(o, "latency_us", a->latency_us)
                             : cJSON_AddNullToObject(o, "latency_us")) ||
        !cJSON_AddNumberToObject(o, "predicted_us", a->predicted_us) ||
        !cJSON_AddStringToObject(o, "provenance_json",
                                 a->provenance_json ? a->provenance_json : "") ||
        !cJSON_AddNumberToObject(o, "created_at", (double)a->created_at) ||
        !cJSON_AddNumberToObject(o, "last_used_at", (double)a->last_used_at) ||
        !cJSON_AddStringToObject(o, "ptx_sha256", ph) ||
        !cJSON_AddStringToObject(o, "cubin_sha256", ch))
        goto out;
    r = kc__add_b64(o, "ptx", a->ptx, a->ptx_len);
    if (r < 0)
        goto out;
    r = kc__add_b64(o, "cubin", a->cubin, a->cubin_len);
    if (r < 0)
        goto out;
    *ret = cJSON_PrintUnformatted(o);
    r = *ret ? 0 : -ENOMEM;
out:
    cJSON_Delete(o);
    free(launch);
    return r;
}

static int kc__write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Appends to the file and to the running digest. */
static int kc__emit(int fd, crypto_hash_sha256_state *st, const char *p, size_t n)
{
    crypto_hash_sha256_update(st, (const unsigned char *)p, n);
    return kc__write_all(fd, p, n);
}

int kc_export(kc_db *db, const kc_filter *f, const char *path, size_t *ret_n, char **ret_err)
{
    crypto_hash_sha256_state st;
    unsigned char d[crypto_hash_sha256_BYTES];
    char hex[KC_KEY_LEN + 1], trailer[128];
    kc_summary *list = NULL;
    size_t n = 0;
    char *tmp = NULL;
    int fd = -1, r;
    bool in_tx = false;

    if (ret_err)
        *ret_err = NULL;
    if (!db || !path || !*path)
        return kc__fail(ret_err, -EINVAL, "no database or no export path");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");
    /* Written beside the target and renamed into place: a reader never sees half a file. */
    if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
        return kc__fail(ret_err, -ENOMEM, "out of memory");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = kc__fail(ret_err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return r;
    }

    kc__lock(db);
    /* One read transaction: the export is a consistent snapshot even while hidetd writes. */
    r = kc__begin_read(db);
    if (r < 0) {
        kc__fail(ret_err, r, "%s", kc_errmsg(db));
        goto out;
    }
    in_tx = true;
    r = kc__list_locked(db, f, &list, &n);
    if (r < 0) {
        kc__fail(ret_err, r, "%s", kc_errmsg(db));
        goto out;
    }
    crypto_hash_sha256_init(&st);
    r = kc__emit(fd, &st, KC__EXPORT_MAGIC, strlen(KC__EXPORT_MAGIC));
    for (size_t i = 0; r == 0 && i < n; i++) {
        kc_artifact *a = NULL;
        char *line = NULL;
        /* Reading through the verifying path: a corrupt artifact is never exported. */
        r = kc__get_locked(db, list[i].key, true, false, &a);
        if (r < 0) {
            kc__fail(ret_err, r, "cannot export %s: %s", list[i].key, kc_errmsg(db));
            break;
        }
        r = kc__artifact_line(a, &line);
        kc_artifact_free(a);
        if (r == 0)
            r = kc__emit(fd, &st, line, strlen(line));
        if (r == 0)
            r = kc__emit(fd, &st, "\n", 1);
        free(line);
    }
    if (r < 0) {
        kc__fail(ret_err, r, "writing %s: %s", tmp, strerror(-r));
        goto out;
    }
    crypto_hash_sha256_final(&st, d);
    sodium_bin2hex(hex, sizeof(hex), d, sizeof(d));
    snprintf(trailer, sizeof(trailer), "end %zu %s\n", n, hex);
    r = kc__write_all(fd, trailer, strlen(trailer));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && close(fd) < 0)
        r = -errno;
    fd = -1;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        kc__fail(ret_err, r, "writing %s: %s", path, strerror(-r));
        goto out;
    }
    if (ret_n)
        *ret_n = n;
out:
    if (in_tx)
        kc__rollback(db);
    kc__unlock(db);
    if (fd >= 0)
        close(fd);
    if (r < 0)
        unlink(tmp);
    free(tmp);
    free(list);
    return r;
}

/* ---------------------------------------------------------------------------------------- */
/* import */

typedef struct kc__rec {
    kc_artifact a;
    char ptx_sha[KC_KEY_LEN + 1];
    char cubin_sha[KC_KEY_LEN + 1];
} kc__rec;

static void kc__rec_clear(kc__rec *r)
{
    free(r->a.op_json);
    free(r->a.schedule_json);
    free(r->a.ptx);
    free(r->a.cubin);
    free(r->a.provenance_json);
}

static const char *kc__jstr(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool kc__is_hex64(const char *s)
{
    if (!s || strlen(s) != KC_KEY_LEN)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static bool kc__jint(const cJSON *o, const char *name, int64_t *ret)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > 9007199254740992.0 || v->valuedouble != floor(v->valuedouble))
        return false;
    *ret = (int64_t)v->valuedouble;
    return true;
}

static char *kc__dupstr(const cJSON *o, const char *name, bool *ok)
{
    const char *s = kc__jstr(o, name);
    char *d;
    if (!s) {
        *ok = false;
        return NULL;
    }
    d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

/* Decodes a base64 field into a fresh buffer and checks it against the given hex digest. */
static int kc__decode_blob(const cJSON *o, const char *name, const char *sha, void **ret,
                           size_t *ret_len, bool nul_terminate)
{
    const char *b64 = kc__jstr(o, name);
    size_t in_len, out_len = 0;
    const char *end = NULL;
    unsigned char *buf;
    char got[KC_KEY_LEN + 1];

    if (!b64)
        return -EINVAL;
    in_len = strlen(b64);
    buf = malloc(in_len / 4 * 3 + 2);
    if (!buf)
        return -ENOMEM;
    if (sodium_base642bin(buf, in_len / 4 * 3 + 1, b64, in_len, NULL, &out_len, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != b64 + in_len) {
        free(buf);
        return -EBADMSG;
    }
    kc_sha256_hex(buf, out_len, got);
    if (strcmp(got, sha) != 0) {
        free(buf);
        return -EBADMSG;
    }
    if (nul_terminate)
        buf[out_len] = '\0';
    *ret = buf;
    *ret_len = out_len;
    return 0;
}

/* Parses and fully checks one artifact line into rec. */
static int kc__parse_line(const char *line, size_t len, kc__rec *rec, char **ret_err, size_t lineno)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const char *key, *op_key, *op, *target, *ph, *ch;
    const cJSON *measured, *lat, *pred;
    bool ok = true;
    void *p = NULL;
    int r = -EBADMSG;

    if (!cJSON_IsObject(o)) {
        kc__fail(ret_err, -EBADMSG, "line %zu: not a JSON object", lineno);
        goto out;
    }
    key = kc__jstr(o, "key");
    op_key = kc__jstr(o, "op_key");
    op = kc__jstr(o, "op");
    target = kc__jstr(o, "target");
    ph = kc__jstr(o, "ptx_sha256");
    ch = kc__jstr(o, "cubin_sha256");
    measured = cJSON_GetObjectItemCaseSensitive(o, "measured");
    lat = cJSON_GetObjectItemCaseSensitive(o, "latency_us");
    pred = cJSON_GetObjectItemCaseSensitive(o, "predicted_us");
    if (!key || !*key || strlen(key) > KC_KEY_LEN || !op_key || !*op_key ||
        strlen(op_key) > KC_KEY_LEN || !op || strlen(op) >= sizeof(rec->a.op) || !target ||
        strlen(target) >= sizeof(rec->a.target) || !kc__is_hex64(ph) || !kc__is_hex64(ch) ||
        !cJSON_IsBool(measured) || !(cJSON_IsNumber(lat) || cJSON_IsNull(lat)) ||
        !cJSON_IsNumber(pred) || !kc__jint(o, "created_at", &rec->a.created_at) ||
        !kc__jint(o, "last_used_at", &rec->a.last_used_at)) {
        kc__fail(ret_err, -EBADMSG, "line %zu: missing or malformed field", lineno);
        goto out;
    }
    strcpy(rec->a.key, key);
    strcpy(rec->a.op_key, op_key);
    strcpy(rec->a.op, op);
    strcpy(rec->a.target, target);
    strcpy(rec->ptx_sha, ph);
    strcpy(rec->cubin_sha, ch);
    rec->a.latency_us = cJSON_IsNull(lat) ? -1.0 : lat->valuedouble;
    rec->a.predicted_us = pred->valuedouble;
    rec->a.op_json = kc__dupstr(o, "op_json", &ok);
    rec->a.schedule_json = kc__dupstr(o, "schedule_json", &ok);
    rec->a.provenance_json = kc__dupstr(o, "provenance_json", &ok);
    const char *launch = kc__jstr(o, "launch_json");
    if (!ok || !launch) {
        kc__fail(ret_err, -EBADMSG, "line %zu: missing text field", lineno);
        goto out;
    }
    const char *why = NULL;
    if (kc__launch_from_json(launch, rec->a.op_json, &rec->a.launch, &why) < 0) {
        kc__fail(ret_err, -EBADMSG, "line %zu: artifact %s: launch description: %s", lineno, key,
                 why);
        goto out;
    }
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(o, "choice");
    if (!choice) {
        rec->a.choice = kc__choice_from_v1(cJSON_IsTrue(measured), rec->a.provenance_json);
    } else if (!cJSON_IsString(choice) ||
               kc__choice_parse(choice->valuestring, &rec->a.choice) < 0 ||
               (rec->a.choice == KC_CHOSEN_MEASURED) != cJSON_IsTrue(measured)) {
        kc__fail(ret_err, -EBADMSG, "line %zu: artifact %s: bad choice", lineno, key);
        goto out;
    }
    r = kc__decode_blob(o, "ptx", ph, &p, &rec->a.ptx_len, true);
    if (r < 0) {
        kc__fail(ret_err, r, "line %zu: artifact %s: PTX fails its digest", lineno, key);
        goto out;
    }
    rec->a.ptx = p;
    r = kc__decode_blob(o, "cubin", ch, &p, &rec->a.cubin_len, false);
    if (r < 0) {
        kc__fail(ret_err, r, "line %zu: artifact %s: cubin fails its digest", lineno, key);
        goto out;
    }
    rec->a.cubin = p;
    r = 0;
out:
    cJSON_Delete(o);
    return r;
}

static int kc__read_file(const char *path, char **ret, size_t *ret_len, char **ret_err)
{
    struct stat sb;
    char *buf = NULL;
    size_t got = 0;
    int fd, r = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kc__fail(ret_err, -errno, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > KC__IMPORT_MAX_BYTES) {
        r = kc__fail(ret_err, -EINVAL, "%s: not a regular file of sane size", path);
        goto out;
    }
    buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        r = kc__fail(ret_err, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = kc__fail(ret_err, n < 0 ? -errno : -EIO, "reading %s failed", path);
            goto out;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *ret = buf;
    *ret_len = got;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return r;
}

int kc_import(kc_db *db, const char *path, size_t *ret_n, char **ret_err)
{
    char *buf = NULL;
    size_t len = 0, n_recs = 0, count = 0;
    kc__rec *recs = NULL;
    int r;

    if (ret_err)
        *ret_err = NULL;
    if (!db || !path)
        return kc__fail(ret_err, -EINVAL, "no database or no import path");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");
    r = kc__read_file(path, &buf, &len, ret_err);
    if (r < 0)
        return r;

    /* 1. Header and trailer, and the digest over everything before the trailer. */
    size_t magic_len = strlen(KC__EXPORT_MAGIC);
    if (len < magic_len || memcmp(buf, KC__EXPORT_MAGIC, magic_len) != 0) {
        r = kc__fail(ret_err, -EBADMSG, "%s: not a hidetd kernel cache export", path);
        goto out;
    }
    if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\0', len) != NULL) {
        r = kc__fail(ret_err, -EBADMSG, "%s: truncated or damaged (no final newline)", path);
        goto out;
    }
    size_t tstart = len - 1;
    while (tstart > 0 && buf[tstart - 1] != '\n')
        tstart--;
    if (tstart < magic_len) {
        r = kc__fail(ret_err, -EBADMSG, "%s: no trailer line", path);
        goto out;
    }
    {
        char hex[KC_KEY_LEN + 1], got[KC_KEY_LEN + 1], canon[128];
        unsigned long long c = 0;
        int consumed = 0;
        size_t tlen = len - tstart;
        if (tlen >= sizeof(canon) ||
            sscanf(buf + tstart, "end %llu %64[0-9a-f]%n", &c, hex, &consumed) != 2) {
            r = kc__fail(ret_err, -EBADMSG, "%s: malformed trailer", path);
            goto out;
        }
        /* Re-render the trailer: any byte that differs from the canonical form is damage. */
        snprintf(canon, sizeof(canon), "end %llu %s\n", c, hex);
        if (strlen(canon) != tlen || memcmp(canon, buf + tstart, tlen) != 0 ||
            strlen(hex) != KC_KEY_LEN) {
            r = kc__fail(ret_err, -EBADMSG, "%s: malformed trailer", path);
            goto out;
        }
        kc_sha256_hex(buf, tstart, got);
        if (strcmp(got, hex) != 0) {
            r = kc__fail(ret_err, -EBADMSG, "%s: checksum mismatch: the file was changed or "
                         "damaged after export", path);
            goto out;
        }
        count = (size_t)c;
    }

    /* 2. Every record, decoded and checked, before anything is stored. */
    size_t lines = 0;
    for (size_t i = magic_len; i < tstart; i++)
        if (buf[i] == '\n')
            lines++;
    if (lines != count) {
        r = kc__fail(ret_err, -EBADMSG, "%s: trailer says %zu artifacts, file has %zu", path,
                     count, lines);
        goto out;
    }
    recs = calloc(count ? count : 1, sizeof(*recs));
    if (!recs) {
        r = kc__fail(ret_err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t pos = magic_len; pos < tstart; n_recs++) {
        char *nl = memchr(buf + pos, '\n', tstart - pos);
        size_t ll = (size_t)(nl - (buf + pos));
        r = kc__parse_line(buf + pos, ll, &recs[n_recs], ret_err, n_recs + 2);
        if (r < 0) {
            n_recs++;
            goto out;
        }
        r = kc__check_artifact(&recs[n_recs].a);
        if (r < 0) {
            n_recs++;
            kc__fail(ret_err, -EBADMSG, "line %zu: invalid artifact", n_recs + 1);
            r = -EBADMSG;
            goto out;
        }
        pos += ll + 1;
    }

    /* 3. Store everything in one transaction. */
    kc__lock(db);
    r = kc__begin(db);
    for (size_t i = 0; r == 0 && i < n_recs; i++)
        r = kc__put_locked(db, &recs[i].a, recs[i].ptx_sha, recs[i].cubin_sha);
    if (r == 0)
        r = kc__commit(db);
    if (r < 0) {
        kc__fail(ret_err, r, "storing imported artifacts: %s", kc_errmsg(db));
        kc__rollback(db);
    }
    kc__unlock(db);
    if (r == 0 && ret_n)
        *ret_n = n_recs;
out:
    if (recs) {
        for (size_t i = 0; i < n_recs; i++)
            kc__rec_clear(&recs[i]);
        free(recs);
    }
    free(buf);
    return r;
}
