/* tuner/compile_cache.c - the optional directory of NVRTC outputs (compile_cache.h says when and
 * why). An entry is one file:
 *
 *   "hidetd-nvrtc-cache 1\n"            the format
 *   ptx_len, cubin_len, log_len          three little-endian u64
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
#define MAGIC_LEN (sizeof(cache_magic) - 1)
#define HEADER_LEN (MAGIC_LEN + 3 * 8)
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

int tuner__compile_cache_get(const char *key, tuner_binary **ret)
{
    char path[4096];
    unsigned char *buf = NULL;
    size_t len = 0;
    if (!tuner__compile_cache_dir() || entry_path(key, path, sizeof(path)) < 0 || read_file(path, &buf, &len) < 0)
        return 0;
    int r = 0;
    tuner_binary *b = NULL;
    if (len < HEADER_LEN + crypto_hash_sha256_BYTES || memcmp(buf, cache_magic, MAGIC_LEN) != 0)
        goto out;
    uint64_t ptx_len = get_u64(buf + MAGIC_LEN), cubin_len = get_u64(buf + MAGIC_LEN + 8),
             log_len = get_u64(buf + MAGIC_LEN + 16);
    size_t body = len - HEADER_LEN - crypto_hash_sha256_BYTES;
    if (ptx_len > body || cubin_len > body || log_len > body || ptx_len + cubin_len + log_len != body ||
        ptx_len == 0 || cubin_len == 0)
        goto out;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, buf, len - sizeof(h));
    if (sodium_memcmp(h, buf + len - sizeof(h), sizeof(h)) != 0)
        goto out;

    r = -ENOMEM;
    b = calloc(1, sizeof(*b));
    if (!b || !(b->ptx = malloc(ptx_len + 1)) || !(b->cubin = malloc(cubin_len)) || !(b->log = malloc(log_len + 1)))
        goto out;
    const unsigned char *p = buf + HEADER_LEN;
    memcpy(b->ptx, p, ptx_len);
    b->ptx[ptx_len] = '\0';
    b->ptx_len = strlen(b->ptx);
    memcpy(b->cubin, p + ptx_len, cubin_len);
    b->cubin_len = cubin_len;
    memcpy(b->log, p + ptx_len + cubin_len, log_len);
    b->log[log_len] = '\0';
    *ret = b;
    b = NULL;
    r = 1;
out:
    tuner_binary_free(b);
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

void tuner__compile_cache_put(const char *key, const tuner_binary *b)
{
    char path[4096], tmp[4096 + 64];
    if (!tuner__compile_cache_dir() || entry_path(key, path, sizeof(path)) < 0)
        return;
    size_t log_len = b->log ? strlen(b->log) : 0;
    unsigned char header[HEADER_LEN];
    memcpy(header, cache_magic, MAGIC_LEN);
    put_u64(header + MAGIC_LEN, b->ptx_len);
    put_u64(header + MAGIC_LEN + 8, b->cubin_len);
    put_u64(header + MAGIC_LEN + 16, log_len);
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, header, sizeof(header));
    crypto_hash_sha256_update(&st, (const unsigned char *)b->ptx, b->ptx_len);
    crypto_hash_sha256_update(&st, b->cubin, b->cubin_len);
    crypto_hash_sha256_update(&st, (const unsigned char *)b->log, log_len);
    crypto_hash_sha256_final(&st, h);

    /* A private name, then rename: a reader sees no entry or a whole one. */
    snprintf(tmp, sizeof(tmp), "%s.%ld.%08x.tmp", path, (long)getpid(), randombytes_random());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    int bad = write_all(fd, header, sizeof(header)) < 0 || write_all(fd, b->ptx, b->ptx_len) < 0 ||
              write_all(fd, b->cubin, b->cubin_len) < 0 || write_all(fd, b->log, log_len) < 0 ||
              write_all(fd, h, sizeof(h)) < 0;
    if (close(fd) < 0)
        bad = 1;
    if (bad || rename(tmp, path) < 0)
        unlink(tmp);
}
