/* tuner/compile_cache.c - the optional directory of NVRTC outputs and of other tools' results
 * (compile_cache.h says when and why). An entry is one file:
 *
 *   "hidetd-nvrtc-cache 1\n"            the format: NVRTC's ("hidetd-tools-cache 1\n": a tool's)
 *   ptx_len, cubin_len, log_len          the parts' lengths, little-endian u64 (a tool's: one)
 *   ptx, cubin, log                      their bytes (no terminators)
 *   SHA-256 of everything above          32 bytes: a damaged file is a miss, not a wrong kernel
 */
#include "tuner/compile_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

static const char cache_magic[] = "hidetd-nvrtc-cache 1\n";
static const char tool_magic[] = "hidetd-tools-cache 1\n";
/* Both formats' magic strings have this length. */
#define MAGIC_LEN (sizeof(cache_magic) - 1)
_Static_assert(sizeof(tool_magic) == sizeof(cache_magic), "one magic length");
/* The most parts an entry has (NVRTC's: PTX, cubin, log). */
#define MAX_PARTS 3
/* No NVRTC output comes near this; a larger file is not ours. */
#define ENTRY_MAX ((size_t)1 << 30)

static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
static const char *cache_dir;

static void dir_init(void)
{
    const char *d = getenv("HIDETD_COMPILE_CACHE");
    if (d && *d && sodium_init() >= 0)
        cache_dir = strdup(d);
}

const char *tuner__compile_cache_dir(void)
{
    pthread_once(&dir_once, dir_init);
    return cache_dir;
}

void tuner__compile_cache_key(const char *source, const char *const *opts, int n_opts, char key[65])
{
    /* Each part ends with a NUL, so no two different lists of parts hash the same bytes. */
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    const char *version = tuner_nvrtc_version();
    crypto_hash_sha256_update(&st, (const unsigned char *)cache_magic, sizeof(cache_magic));
    crypto_hash_sha256_update(&st, (const unsigned char *)version, strlen(version) + 1);
    for (int i = 0; i < n_opts; i++)
        crypto_hash_sha256_update(&st, (const unsigned char *)opts[i], strlen(opts[i]) + 1);
    crypto_hash_sha256_update(&st, (const unsigned char *)source, strlen(source) + 1);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(key, 65, h, sizeof(h));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int entry_path(const char *key, char *path, size_t len)
{
    int n = snprintf(path, len, "%s/%s", tuner__compile_cache_dir(), key);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* The whole file (malloc'd) in *ret, its size in *ret_len; -1 when it cannot be read whole. */
static int read_file(const char *path, unsigned char **ret, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || (size_t)st.st_size > ENTRY_MAX)
        goto fail;
    size_t len = (size_t)st.st_size, got = 0;
    buf = malloc(len);
    if (!buf)
        goto fail;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        got += (size_t)n;
    }
    close(fd);
    *ret = buf;
    *ret_len = len;
    return 0;
fail:
    free(buf);
    close(fd);
    return -1;
}

/* The parts of the entry under key written in format magic with n parts: their bytes, each
 * followed by a NUL (malloc'd, in part[i]; free part[0] only: one block), their lengths in len[i].
 * 1 when found whole, 0 when there is none usable (absent, short, damaged, another format),
 * -ENOMEM. */
static int entry_get(const char *key, const char *magic, int n, char *part[], size_t len[])
{
    char path[4096];
    unsigned char *buf = NULL;
    size_t flen = 0;
    if (!tuner__compile_cache_dir() || entry_path(key, path, sizeof(path)) < 0 || read_file(path, &buf, &flen) < 0)
        return 0;
    int r = 0;
    const size_t header = MAGIC_LEN + (size_t)n * 8;
    if (flen < header + crypto_hash_sha256_BYTES || memcmp(buf, magic, MAGIC_LEN) != 0)
        goto out;
    const size_t body = flen - header - crypto_hash_sha256_BYTES;
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t l = get_u64(buf + MAGIC_LEN + 8 * (size_t)i);
        if (l > body - sum)
            goto out;
        len[i] = (size_t)l;
        sum += len[i];
    }
    if (sum != body)
        goto out;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, buf, flen - sizeof(h));
    if (sodium_memcmp(h, buf + flen - sizeof(h), sizeof(h)) != 0)
        goto out;
    /* One block: the parts in order, each with a terminator. */
    r = -ENOMEM;
    char *all = malloc(body + (size_t)n);
    if (!all)
        goto out;
    const unsigned char *src = buf + header;
    char *dst = all;
    for (int i = 0; i < n; i++) {
        memcpy(dst, src, len[i]);
        dst[len[i]] = '\0';
        part[i] = dst;
        src += len[i];
        dst += len[i] + 1;
    }
    r = 1;
out:
    free(buf);
    return r;
}

static int write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Stores n parts under key in format magic. Best effort, as tuner__compile_cache_put. */
static void entry_put(const char *key, const char *magic, int n, const void *const part[], const size_t len[])
{
    char path[4096], tmp[4096 + 64];
    if (!tuner__compile_cache_dir() || entry_path(key, path, sizeof(path)) < 0)
        return;
    unsigned char header[MAGIC_LEN + MAX_PARTS * 8];
    const size_t header_len = MAGIC_LEN + (size_t)n * 8;
    memcpy(header, magic, MAGIC_LEN);
    for (int i = 0; i < n; i++)
        put_u64(header + MAGIC_LEN + 8 * (size_t)i, len[i]);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, header, header_len);
    for (int i = 0; i < n; i++)
        crypto_hash_sha256_update(&st, part[i], len[i]);
    crypto_hash_sha256_final(&st, h);

    /* A private name, then rename: a reader sees no entry or a whole one. */
    snprintf(tmp, sizeof(tmp), "%s.%ld.%08x.tmp", path, (long)getpid(), randombytes_random());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int bad = write_all(fd, header, header_len) < 0;
    for (int i = 0; i < n && !bad; i++)
        bad = write_all(fd, part[i], len[i]) < 0;
    bad = bad || write_all(fd, h, sizeof(h)) < 0;
    if (close(fd) < 0)
        bad = 1;
    if (bad || rename(tmp, path) < 0)
        unlink(tmp);
}

int tuner__compile_cache_get(const char *key, tuner_binary **ret)
{
    char *part[3];
    size_t len[3];
    int r = entry_get(key, cache_magic, 3, part, len);
    if (r <= 0)
        return r;
    tuner_binary *b = NULL;
    if (len[0] == 0 || len[1] == 0) {
        r = 0;
        goto out;
    }
    r = -ENOMEM;
    b = calloc(1, sizeof(*b));
    if (!b || !(b->ptx = malloc(len[0] + 1)) || !(b->cubin = malloc(len[1])) || !(b->log = malloc(len[2] + 1)))
        goto out;
    memcpy(b->ptx, part[0], len[0] + 1);
    /* A PTX with a NUL inside ends there, as NVRTC's would for every reader of ptx. */
    b->ptx_len = strlen(b->ptx);
    memcpy(b->cubin, part[1], len[1]);
    b->cubin_len = len[1];
    memcpy(b->log, part[2], len[2] + 1);
    *ret = b;
    b = NULL;
    r = 1;
out:
    tuner_binary_free(b);
    free(part[0]);
    return r;
}

void tuner__compile_cache_put(const char *key, const tuner_binary *b)
{
    const void *part[3] = {b->ptx, b->cubin, b->log ? b->log : ""};
    size_t len[3] = {b->ptx_len, b->cubin_len, b->log ? strlen(b->log) : 0};
    entry_put(key, cache_magic, 3, part, len);
}

void tuner__compile_cache_tool_key(const char *const *parts, int n_parts, char key[65])
{
    /* As tuner__compile_cache_key: each part ends with its NUL; the format's magic first, so
     * no tool's key is an NVRTC key. */
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, (const unsigned char *)tool_magic, sizeof(tool_magic));
    for (int i = 0; i < n_parts; i++)
        crypto_hash_sha256_update(&st, (const unsigned char *)parts[i], strlen(parts[i]) + 1);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(key, 65, h, sizeof(h));
}

int tuner__compile_cache_get_tool(const char *key, char **ret, size_t *ret_len)
{
    char *part[1];
    size_t len[1];
    int r = entry_get(key, tool_magic, 1, part, len);
    if (r == 1) {
        *ret = part[0];
        if (ret_len)
            *ret_len = len[0];
    }
    return r;
}

void tuner__compile_cache_put_tool(const char *key, const char *text, size_t len)
{
    const void *part[1] = {text};
    size_t l[1] = {len};
    entry_put(key, tool_magic, 1, part, l);
}
