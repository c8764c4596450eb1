/* kernel_cache/kc_export.c - the self-checking, signed export file (backup, moving a cache
 * between hosts).
 *
 * Format, one record per line, all text:
 *   hidetd-kernel-cache-export 2
 *   {"key":...,"ptx":"<base64>","ptx_sha256":"<hex>","cubin":"<base64>",...}   (one per artifact)
 *   end <count> <hex SHA-256 of every byte before this line>
 *   sig ed25519 <key id> <base64 signature>                   (signed files only)
 * The signature is kc_sign_detached() with the context "hidetd-kernel-cache-export 2" over the
 * trailer line's bytes, newline included: the trailer holds the digest of everything before it,
 * so the signature covers every byte of the file but its own line. Files of format 1 (written
 * before signing existed) are the same without a signature line; they, and unsigned files of
 * format 2, are imported only when the caller allows unsigned files.
 * The launch description travels as JSON text ("launch_json", kc_launch_json()) and the choice as
 * its name ("choice"), with "measured" beside it for older readers; files written before schema
 * 2 have no "choice", and import derives it from "measured" and the provenance as the schema-1
 * migration does. The trailer's digest makes any flipped byte before it visible; the trailer and
 * the signature line are parsed strictly (exact count, exact digest, nothing after the last
 * newline). Each blob also carries its own digest, checked again after decoding.
 * Import checks all of that, and every record as the daemon would read it (kc__check_record),
 * before it stores anything; then, in one transaction, it refuses a record that would replace a
 * stronger choice or different code under the same artifact key, or stores every artifact.
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

#define KC__EXPORT_MAGIC "hidetd-kernel-cache-export 2\n"
#define KC__EXPORT_MAGIC_V1 "hidetd-kernel-cache-export 1\n"
#define KC__SIGN_CONTEXT "hidetd-kernel-cache-export 2"
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

int kc_export(kc_db *db, const kc_filter *f, const char *path, const kc_sign_secret *sign,
              size_t *ret_n, char **ret_err)
{
    crypto_hash_sha256_state st;
    unsigned char d[crypto_hash_sha256_BYTES];
    char hex[KC_KEY_LEN + 1], trailer[128];
    char sig_line[sizeof("sig ed25519  \n") + KC_SIGN_ID_LEN +
                  sodium_base64_ENCODED_LEN(KC_SIGN_BYTES, sodium_base64_VARIANT_ORIGINAL)];
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
    if (r == 0 && sign) {
        unsigned char sig[KC_SIGN_BYTES];
        char b64[sodium_base64_ENCODED_LEN(KC_SIGN_BYTES, sodium_base64_VARIANT_ORIGINAL)];
        r = kc_sign_detached(sign, KC__SIGN_CONTEXT, trailer, strlen(trailer), sig);
        if (r < 0) {
            kc__fail(ret_err, r, "signing %s failed", path);
            goto out;
        }
        sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), sodium_base64_VARIANT_ORIGINAL);
        snprintf(sig_line, sizeof(sig_line), "sig ed25519 %s %s\n", sign->id, b64);
        r = kc__write_all(fd, sig_line, strlen(sig_line));
    }
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
    /* Bounded before decoding: a record never holds more code than a stored one may. */
    if (in_len > KC_MAX_CODE_BYTES / 3 * 4 + 4)
        return -EFBIG;
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
    /* Keys are checked first: they are the only text of a record that messages repeat. */
    if (!kc_key_is_hex(key)) {
        kc__fail(ret_err, -EBADMSG, "line %zu: the key is not 64 lowercase hex digits", lineno);
        goto out;
    }
    if (!kc_key_is_hex(op_key) || !op || strlen(op) >= sizeof(rec->a.op) || !target ||
        strlen(target) >= sizeof(rec->a.target) || !kc_key_is_hex(ph) || !kc_key_is_hex(ch) ||
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
    if (strlen(launch) > KC_MAX_TEXT_BYTES ||
        kc__launch_from_json(launch, rec->a.op_json, &rec->a.launch, &why) < 0) {
        if (!why)
            why = "too long";
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
        r = r == -ENOMEM ? r : -EBADMSG;
        kc__fail(ret_err, r, "line %zu: artifact %s: PTX fails its digest or is too large",
                 lineno, key);
        goto out;
    }
    rec->a.ptx = p;
    r = kc__decode_blob(o, "cubin", ch, &p, &rec->a.cubin_len, false);
    if (r < 0) {
        r = r == -ENOMEM ? r : -EBADMSG;
        kc__fail(ret_err, r, "line %zu: artifact %s: cubin fails its digest or is too large",
                 lineno, key);
        goto out;
    }
    rec->a.cubin = p;
    /* As the daemon would read it: what it derives keys from and hands to clients. */
    if (kc__check_record(&rec->a, &why) < 0) {
        r = -EBADMSG;
        kc__fail(ret_err, r, "line %zu: artifact %s: %s", lineno, key, why);
        goto out;
    }
    r = 0;
out:
    cJSON_Delete(o);
    return r;
}

int kc_record_encode(const kc_artifact *a, char **ret)
{
    if (!a || !ret)
        return -EINVAL;
    return kc__artifact_line(a, ret);
}

int kc_record_decode(const char *text, size_t len, kc_artifact **ret, char **ret_err)
{
    if (!text || !ret)
        return -EINVAL;
    kc_artifact *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    kc__rec rec;
    memset(&rec, 0, sizeof(rec));
    char *err = NULL;
    /* Line numbers mean nothing outside a file: the record is "line 1" of itself, and the
     * prefix is cut from the message. */
    int r = kc__parse_line(text, len, &rec, &err, 1);
    if (r < 0) {
        kc__rec_clear(&rec);
        free(a);
        if (err && ret_err) {
            const char *m = strncmp(err, "line 1: ", 8) == 0 ? err + 8 : err;
            *ret_err = strdup(m);
        }
        free(err);
        return r;
    }
    *a = rec.a;
    *ret = a;
    return 0;
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

/* Parses "end COUNT HEX\n" at buf[start, end) strictly. */
static bool kc__parse_trailer(const char *buf, size_t start, size_t end, size_t *ret_count,
                              char hex[KC_KEY_LEN + 1])
{
    char canon[128];
    unsigned long long c = 0;
    size_t tlen = end - start;

    if (tlen >= sizeof(canon))
        return false;
    memcpy(canon, buf + start, tlen);
    canon[tlen] = '\0';
    if (sscanf(canon, "end %llu %64[0-9a-f]", &c, hex) != 2 || strlen(hex) != KC_KEY_LEN)
        return false;
    /* Re-render the trailer: any byte that differs from the canonical form is damage. */
    char want[128];
    snprintf(want, sizeof(want), "end %llu %s\n", c, hex);
    if (strcmp(want, canon) != 0)
        return false;
    *ret_count = (size_t)c;
    return true;
}

/* Checks the signature line buf[start, end) over the trailer buf[tstart, start). */
static int kc__check_signature(const char *path, const char *buf, size_t tstart, size_t start,
                               size_t end, const kc_import_opts *o, kc_import_info *info,
                               char **ret_err)
{
    char line[256], id[KC_SIGN_ID_LEN + 1];
    unsigned char sig[KC_SIGN_BYTES];
    size_t len = end - start, sig_len = 0;
    const char *b64_end = NULL;
    const kc_sign_public *k = NULL;

    if (len >= sizeof(line))
        return kc__fail(ret_err, -EBADMSG, "%s: malformed signature line", path);
    memcpy(line, buf + start, len);
    line[len] = '\0';
    /* "sig ed25519 KEYID BASE64\n" */
    const char *tag = "sig ed25519 ";
    size_t tl = strlen(tag);
    if (len < tl + KC_SIGN_ID_LEN + 3 || memcmp(line, tag, tl) != 0 ||
        line[tl + KC_SIGN_ID_LEN] != ' ' || line[len - 1] != '\n')
        return kc__fail(ret_err, -EBADMSG, "%s: malformed signature line", path);
    memcpy(id, line + tl, KC_SIGN_ID_LEN);
    id[KC_SIGN_ID_LEN] = '\0';
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return kc__fail(ret_err, -EBADMSG, "%s: malformed signature line", path);
    line[len - 1] = '\0';
    const char *b64 = line + tl + KC_SIGN_ID_LEN + 1;
    if (sodium_base642bin(sig, sizeof(sig), b64, strlen(b64), NULL, &sig_len, &b64_end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        sig_len != sizeof(sig) || *b64_end != '\0')
        return kc__fail(ret_err, -EBADMSG, "%s: malformed signature line", path);
    int r = kc_sign_verify(o ? o->trusted : NULL, o ? o->n_trusted : 0, id, KC__SIGN_CONTEXT,
                           buf + tstart, start - tstart, sig, &k);
    if (r == -ENOKEY)
        return kc__fail(ret_err, r, "%s: signed by key %s, which is not trusted (give its public "
                        "key with --trust or put it in the trusted-keys directory)", path, id);
    if (r < 0)
        return kc__fail(ret_err, r, "%s: the signature of key %s does not "
                        "verify: the file was changed after it was signed", path, id);
    info->is_signed = true;
    memcpy(info->signer, k->id, sizeof(info->signer));
    return 0;
}

/* Refuses a record that would replace something chosen more strongly or different code under the
 * same key; the caller holds the lock and the write transaction. */
static int kc__import_conflicts(kc_db *db, const kc__rec *rec, const kc_import_opts *o,
                                size_t lineno, char **ret_err)
{
    bool stronger_ok = o && o->replace_stronger;
    sqlite3_stmt *s = kc__stmt(db, S_ART_DIGESTS);
    int rc, r = 0;

    if (!s)
        return -EIO;
    kc__bind_text(s, 1, rec->a.key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const unsigned char *ph = sqlite3_column_text(s, 0), *ch = sqlite3_column_text(s, 1);
        int choice = sqlite3_column_int(s, 2);
        if (!ph || !ch || strcmp((const char *)ph, rec->ptx_sha) != 0 ||
            strcmp((const char *)ch, rec->cubin_sha) != 0)
            r = kc__fail(ret_err, -EEXIST, "line %zu: artifact %s: the stored artifact under "
                         "this key has different PTX or cubin; an artifact key names one op and "
                         "schedule, so this is refused (remove the stored one with 'cache rm' "
                         "to replace it)", lineno, rec->a.key);
        else if (choice > (int)rec->a.choice && !stronger_ok)
            r = kc__fail(ret_err, -EEXIST, "line %zu: artifact %s: stored as %s, the file has "
                         "it as %s (--replace-stronger to replace it)", lineno, rec->a.key,
                         kc_choice_name((kc_choice)choice), kc_choice_name(rec->a.choice));
    } else if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "read artifact");
    }
    sqlite3_reset(s);
    if (r < 0)
        return r;
    s = kc__stmt(db, S_SEL_GET);
    if (!s)
        return -EIO;
    kc__bind_text(s, 1, rec->a.op_key);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        int choice = sqlite3_column_int(s, 1);
        if (choice > (int)rec->a.choice && !stronger_ok)
            r = kc__fail(ret_err, -EEXIST, "line %zu: op %s: the stored selection was %s, the "
                         "file's artifact %s was %s (--replace-stronger to replace it)", lineno,
                         rec->a.op_key, kc_choice_name((kc_choice)choice), rec->a.key,
                         kc_choice_name(rec->a.choice));
    } else if (rc != SQLITE_DONE) {
        r = kc__sqlerr(db, rc, "read selection");
    }
    sqlite3_reset(s);
    return r;
}

int kc__import_buffer(kc_db *db, const char *path, const char *buf, size_t len,
                      const kc_import_opts *o, kc_import_info *ret_info, char **ret_err)
{
    size_t n_recs = 0, count = 0, magic_len;
    kc__rec *recs = NULL;
    kc_import_info info;
    bool v1;
    int r;

    memset(&info, 0, sizeof(info));
    if (ret_err)
        *ret_err = NULL;
    if (!db || !path || !buf || buf[len] != '\0')
        return kc__fail(ret_err, -EINVAL, "no database or no import data");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");

    /* 1. Header, trailer (and signature line), and the digest over everything before the
     *    trailer. */
    magic_len = strlen(KC__EXPORT_MAGIC);
    _Static_assert(sizeof(KC__EXPORT_MAGIC) == sizeof(KC__EXPORT_MAGIC_V1), "same header length");
    v1 = len >= magic_len && memcmp(buf, KC__EXPORT_MAGIC_V1, magic_len) == 0;
    if (!v1 && (len < magic_len || memcmp(buf, KC__EXPORT_MAGIC, magic_len) != 0)) {
        r = kc__fail(ret_err, -EBADMSG, "%s: not a hidetd kernel cache export", path);
        goto out;
    }
    if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\0', len) != NULL) {
        r = kc__fail(ret_err, -EBADMSG, "%s: truncated or damaged (no final newline)", path);
        goto out;
    }
    /* The last line, and the one before it. */
    size_t lstart = len - 1;
    while (lstart > 0 && buf[lstart - 1] != '\n')
        lstart--;
    size_t tstart = lstart, tend = len;
    bool has_sig = !v1 && len - lstart > 4 && memcmp(buf + lstart, "sig ", 4) == 0;
    if (has_sig && lstart > magic_len) {
        tend = lstart;
        tstart = tend - 1;
        while (tstart > 0 && buf[tstart - 1] != '\n')
            tstart--;
    }
    if (tstart < magic_len || (has_sig && tend == len)) {
        r = kc__fail(ret_err, -EBADMSG, "%s: no trailer line", path);
        goto out;
    }
    {
        char hex[KC_KEY_LEN + 1], got[KC_KEY_LEN + 1];
        if (!kc__parse_trailer(buf, tstart, tend, &count, hex)) {
            r = kc__fail(ret_err, -EBADMSG, "%s: malformed trailer", path);
            goto out;
        }
        kc_sha256_hex(buf, tstart, got);
        if (strcmp(got, hex) != 0) {
            r = kc__fail(ret_err, -EBADMSG, "%s: checksum mismatch: the file was changed or "
                         "damaged after export", path);
            goto out;
        }
    }
    /* 2. Who vouches for it: a trusted signature, or the caller's explicit trust. */
    if (has_sig) {
        r = kc__check_signature(path, buf, tstart, tend, len, o, &info, ret_err);
        if (r < 0)
            goto out;
    } else if (!o || !o->allow_unsigned) {
        r = kc__fail(ret_err, -ENOKEY, "%s: the file is not signed; import it only if you made "
                     "it yourself (--trust-unsigned)", path);
        goto out;
    }

    /* 3. Every record, decoded and checked, before anything is stored. */
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

    /* 4. In one transaction: refuse what would replace a stronger choice or other code, else
     *    store everything. */
    kc__lock(db);
    r = kc__begin(db);
    if (r < 0)
        kc__fail(ret_err, r, "%s", kc_errmsg(db));
    for (size_t i = 0; r == 0 && i < n_recs; i++) {
        r = kc__import_conflicts(db, &recs[i], o, i + 2, ret_err);
        if (r == 0)
            r = kc__put_locked(db, &recs[i].a, recs[i].ptx_sha, recs[i].cubin_sha);
        if (r < 0)
            kc__fail(ret_err, r, "storing imported artifacts: %s", kc_errmsg(db));
    }
    if (r == 0) {
        r = kc__commit(db);
        if (r < 0)
            kc__fail(ret_err, r, "storing imported artifacts: %s", kc_errmsg(db));
    }
    if (r < 0)
        kc__rollback(db);
    kc__unlock(db);
    if (r == 0) {
        info.n = n_recs;
        if (ret_info)
            *ret_info = info;
    }
out:
    if (recs) {
        for (size_t i = 0; i < n_recs; i++)
            kc__rec_clear(&recs[i]);
        free(recs);
    }
    return r;
}

int kc_import(kc_db *db, const char *path, const kc_import_opts *o, kc_import_info *ret_info,
              char **ret_err)
{
    char *buf = NULL;
    size_t len = 0;
    if (ret_err)
        *ret_err = NULL;
    if (!db || !path)
        return kc__fail(ret_err, -EINVAL, "no database or no import path");
    int r = kc__read_file(path, &buf, &len, ret_err);
    if (r < 0)
        return r;
    r = kc__import_buffer(db, path, buf, len, o, ret_info, ret_err);
    free(buf);
    return r;
}
