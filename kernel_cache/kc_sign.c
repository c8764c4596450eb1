/* kernel_cache/kc_sign.c - Ed25519 key files and detached signatures over libsodium (kc_sign.h).
 * Nothing cryptographic is written here: keys, signatures, hashing and base64 are libsodium's.
 */
#include "kernel_cache/kc_sign.h"
#include "kernel_cache/kc_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

_Static_assert(KC_SIGN_PUBLIC_BYTES == crypto_sign_PUBLICKEYBYTES, "Ed25519 public key size");
_Static_assert(KC_SIGN_SECRET_BYTES == crypto_sign_SECRETKEYBYTES, "Ed25519 secret key size");
_Static_assert(KC_SIGN_BYTES == crypto_sign_BYTES, "Ed25519 signature size");

#define KC__PUB_TAG "hidetd-ed25519-public"
#define KC__SEC_TAG "hidetd-ed25519-secret"
/* A key file is one short line; anything longer is not one. */
#define KC__KEY_FILE_MAX 512

void kc_sign_key_id(const unsigned char key[KC_SIGN_PUBLIC_BYTES], char out[KC_SIGN_ID_LEN + 1])
{
    unsigned char h[crypto_generichash_BYTES];
    (void)kc__sodium_ready();
    crypto_generichash(h, sizeof(h), key, KC_SIGN_PUBLIC_BYTES, NULL, 0);
    sodium_bin2hex(out, KC_SIGN_ID_LEN + 1, h, KC_SIGN_ID_LEN / 2);
}

void kc_sign_public_of(const kc_sign_secret *s, kc_sign_public *ret)
{
    kc_sign_public p;
    crypto_sign_ed25519_sk_to_pk(p.key, s->key);
    kc_sign_key_id(p.key, p.id);
    *ret = p;
}

void kc_sign_secret_wipe(kc_sign_secret *s)
{
    if (s)
        sodium_memzero(s, sizeof(*s));
}

/* "TAG KEYID BASE64\n" for n key bytes, into a malloc'd string. */
static char *kc__key_line(const char *tag, const char *id, const unsigned char *key, size_t n)
{
    char b64[sodium_base64_ENCODED_LEN(KC_SIGN_SECRET_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    char *line = NULL;
    sodium_bin2base64(b64, sizeof(b64), key, n, sodium_base64_VARIANT_ORIGINAL);
    if (asprintf(&line, "%s %s %s\n", tag, id, b64) < 0)
        line = NULL;
    sodium_memzero(b64, sizeof(b64));
    return line;
}

static int kc__write_new(const char *path, mode_t mode, const char *text, char **ret_err)
{
    size_t len = strlen(text), off = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return kc__fail(ret_err, -errno, "cannot create %s: %s", path, strerror(errno));
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int r = w < 0 ? -errno : -EIO;
            close(fd);
            unlink(path);
            return kc__fail(ret_err, r, "writing %s: %s", path, strerror(-r));
        }
        off += (size_t)w;
    }
    /* A key that is lost on a crash right after keygen would be a surprise; sync it. */
    if (fsync(fd) < 0 || close(fd) < 0) {
        int r = -errno;
        unlink(path);
        return kc__fail(ret_err, r, "writing %s: %s", path, strerror(-r));
    }
    return 0;
}

int kc_sign_keygen(const char *prefix, kc_sign_public *ret_pub, char **ret_err)
{
    kc_sign_secret s;
    kc_sign_public p;
    char *sec_path = NULL, *pub_path = NULL, *sec_line = NULL, *pub_line = NULL;
    int r;

    if (!prefix || !*prefix)
        return kc__fail(ret_err, -EINVAL, "no key file prefix given");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");
    if (asprintf(&sec_path, "%s.key", prefix) < 0) {
        sec_path = NULL;
        r = kc__fail(ret_err, -ENOMEM, "out of memory");
        goto out;
    }
    if (asprintf(&pub_path, "%s.pub", prefix) < 0) {
        pub_path = NULL;
        r = kc__fail(ret_err, -ENOMEM, "out of memory");
        goto out;
    }
    /* Both names are checked first so that a refusal leaves no half pair behind. */
    if (access(sec_path, F_OK) == 0 || access(pub_path, F_OK) == 0) {
        r = kc__fail(ret_err, -EEXIST, "%s or %s exists; refusing to overwrite a key", sec_path,
                     pub_path);
        goto out;
    }
    crypto_sign_keypair(p.key, s.key);
    kc_sign_key_id(p.key, p.id);
    memcpy(s.id, p.id, sizeof(s.id));
    sec_line = kc__key_line(KC__SEC_TAG, s.id, s.key, KC_SIGN_SECRET_BYTES);
    pub_line = kc__key_line(KC__PUB_TAG, p.id, p.key, KC_SIGN_PUBLIC_BYTES);
    if (!sec_line || !pub_line) {
        r = kc__fail(ret_err, -ENOMEM, "out of memory");
        goto out;
    }
    r = kc__write_new(sec_path, 0600, sec_line, ret_err);
    if (r < 0)
        goto out;
    r = kc__write_new(pub_path, 0644, pub_line, ret_err);
    if (r < 0) {
        unlink(sec_path);
        goto out;
    }
    if (ret_pub)
        *ret_pub = p;
out:
    kc_sign_secret_wipe(&s);
    if (sec_line) {
        sodium_memzero(sec_line, strlen(sec_line));
        free(sec_line);
    }
    free(pub_line);
    free(sec_path);
    free(pub_path);
    return r;
}

/* Reads a key file of the given tag into key (n bytes) and id, strictly. */
static int kc__load_key(const char *path, const char *tag, bool secret, unsigned char *key,
                        size_t n, char id[KC_SIGN_ID_LEN + 1], char **ret_err)
{
    char buf[KC__KEY_FILE_MAX + 1];
    struct stat sb;
    ssize_t got;
    size_t len, out_len = 0, tag_len = strlen(tag);
    const char *end = NULL;
    int fd, r = 0;

    if (!path)
        return kc__fail(ret_err, -EINVAL, "no key file given");
    if (kc__sodium_ready() < 0)
        return kc__fail(ret_err, -EIO, "libsodium failed to initialise");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kc__fail(ret_err, -errno, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        r = kc__fail(ret_err, -EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if (secret && (sb.st_mode & 077)) {
        r = kc__fail(ret_err, -EPERM, "%s: a secret key must not be readable by group or "
                     "others (chmod 600)", path);
        goto out;
    }
    do
        got = read(fd, buf, sizeof(buf) - 1);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        r = kc__fail(ret_err, -errno, "reading %s: %s", path, strerror(errno));
        goto out;
    }
    len = (size_t)got;
    buf[len] = '\0';
    if (len && buf[len - 1] == '\n')
        buf[--len] = '\0';
    /* "TAG KEYID BASE64" and nothing else. */
    if (len >= KC__KEY_FILE_MAX || memchr(buf, '\0', len) || len < tag_len + KC_SIGN_ID_LEN + 3 ||
        memcmp(buf, tag, tag_len) != 0 || buf[tag_len] != ' ' ||
        buf[tag_len + 1 + KC_SIGN_ID_LEN] != ' ') {
        r = kc__fail(ret_err, -EBADMSG, "%s: not a %s key file", path,
                     secret ? "hidetd secret" : "hidetd public");
        goto out;
    }
    const char *idp = buf + tag_len + 1, *b64 = idp + KC_SIGN_ID_LEN + 1;
    if (sodium_base642bin(key, n, b64, strlen(b64), NULL, &out_len, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        out_len != n || *end != '\0') {
        r = kc__fail(ret_err, -EBADMSG, "%s: the key is not %zu bytes of base64", path, n);
        goto out;
    }
    unsigned char pk[KC_SIGN_PUBLIC_BYTES];
    char want[KC_SIGN_ID_LEN + 1];
    if (secret) {
        /* The secret key's second half is its public key; it must be the one its seed makes. */
        unsigned char seed_pk[KC_SIGN_PUBLIC_BYTES], seed_sk[KC_SIGN_SECRET_BYTES];
        crypto_sign_seed_keypair(seed_pk, seed_sk, key);
        bool same = sodium_memcmp(seed_sk, key, KC_SIGN_SECRET_BYTES) == 0;
        sodium_memzero(seed_sk, sizeof(seed_sk));
        if (!same) {
            r = kc__fail(ret_err, -EBADMSG, "%s: the secret key is inconsistent", path);
            goto out;
        }
        memcpy(pk, seed_pk, sizeof(pk));
    } else {
        memcpy(pk, key, sizeof(pk));
    }
    kc_sign_key_id(pk, want);
    if (memcmp(idp, want, KC_SIGN_ID_LEN) != 0) {
        r = kc__fail(ret_err, -EBADMSG, "%s: the key id does not match the key (want %s)", path,
                     want);
        goto out;
    }
    memcpy(id, want, sizeof(want));
out:
    sodium_memzero(buf, sizeof(buf));
    close(fd);
    return r;
}

int kc_sign_load_secret(const char *path, kc_sign_secret *ret, char **ret_err)
{
    kc_sign_secret s;
    int r;

    if (!ret)
        return kc__fail(ret_err, -EINVAL, "no key buffer");
    r = kc__load_key(path, KC__SEC_TAG, true, s.key, sizeof(s.key), s.id, ret_err);
    if (r == 0)
        *ret = s;
    kc_sign_secret_wipe(&s);
    return r;
}

int kc_sign_load_public(const char *path, kc_sign_public *ret, char **ret_err)
{
    kc_sign_public p;
    int r;

    if (!ret)
        return kc__fail(ret_err, -EINVAL, "no key buffer");
    r = kc__load_key(path, KC__PUB_TAG, false, p.key, sizeof(p.key), p.id, ret_err);
    if (r == 0)
        *ret = p;
    return r;
}

static int kc__cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int kc_sign_load_dir(const char *dir, kc_sign_public **keys, size_t *n_keys, char **ret_err)
{
    DIR *d;
    struct dirent *e;
    char **names = NULL;
    size_t n_names = 0;
    kc_sign_public *v = NULL;
    int r = 0;

    if (!dir || !keys || !n_keys)
        return kc__fail(ret_err, -EINVAL, "no directory given");
    d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return kc__fail(ret_err, -errno, "cannot read %s: %s", dir, strerror(errno));
    }
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l < 5 || strcmp(e->d_name + l - 4, ".pub") != 0)
            continue;
        char **nn = realloc(names, (n_names + 1) * sizeof(*names));
        if (!nn || asprintf(&nn[n_names], "%s/%s", dir, e->d_name) < 0) {
            if (nn)
                names = nn;
            r = kc__fail(ret_err, -ENOMEM, "out of memory");
            goto out;
        }
        names = nn;
        n_names++;
    }
    /* Sorted, so messages about a bad file come out the same on every run. */
    if (n_names)
        qsort(names, n_names, sizeof(*names), kc__cmp_names);
    v = malloc((*n_keys + n_names + 1) * sizeof(*v));
    if (!v) {
        r = kc__fail(ret_err, -ENOMEM, "out of memory");
        goto out;
    }
    if (*n_keys)
        memcpy(v, *keys, *n_keys * sizeof(*v));
    for (size_t i = 0; i < n_names; i++) {
        r = kc_sign_load_public(names[i], &v[*n_keys + i], ret_err);
        if (r < 0)
            goto out;
    }
    free(*keys);
    *keys = v;
    *n_keys += n_names;
    v = NULL;
out:
    closedir(d);
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    free(v);
    return r;
}

/* context || 0x00 || msg, malloc'd. */
static unsigned char *kc__signed_bytes(const char *context, const void *msg, size_t len,
                                       size_t *ret_len)
{
    size_t cl = strlen(context);
    unsigned char *b = malloc(cl + 1 + len + 1);
    if (!b)
        return NULL;
    memcpy(b, context, cl);
    b[cl] = 0;
    if (len)
        memcpy(b + cl + 1, msg, len);
    *ret_len = cl + 1 + len;
    return b;
}

int kc_sign_detached(const kc_sign_secret *s, const char *context, const void *msg, size_t len,
                     unsigned char sig[KC_SIGN_BYTES])
{
    size_t n = 0;
    unsigned char *b;

    if (!s || !context || (len && !msg) || !sig)
        return -EINVAL;
    if (kc__sodium_ready() < 0)
        return -EIO;
    b = kc__signed_bytes(context, msg, len, &n);
    if (!b)
        return -ENOMEM;
    crypto_sign_detached(sig, NULL, b, n, s->key);
    free(b);
    return 0;
}

int kc_sign_verify(const kc_sign_public *trusted, size_t n_trusted, const char *id,
                   const char *context, const void *msg, size_t len,
                   const unsigned char sig[KC_SIGN_BYTES], const kc_sign_public **ret_key)
{
    const kc_sign_public *k = NULL;
    size_t n = 0;
    unsigned char *b;
    int r;

    if (!id || !context || (len && !msg) || !sig || (n_trusted && !trusted))
        return -EINVAL;
    if (kc__sodium_ready() < 0)
        return -EIO;
    for (size_t i = 0; i < n_trusted && !k; i++)
        if (strcmp(trusted[i].id, id) == 0)
            k = &trusted[i];
    if (!k)
        return -ENOKEY;
    b = kc__signed_bytes(context, msg, len, &n);
    if (!b)
        return -ENOMEM;
    r = crypto_sign_verify_detached(sig, b, n, k->key) == 0 ? 0 : -EBADMSG;
    free(b);
    if (r == 0 && ret_key)
        *ret_key = k;
    return r;
}
