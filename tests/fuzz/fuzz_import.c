/* tests/fuzz/fuzz_import.c - the cache export file as `hidetctl cache import` reads it. A backup
 * is a file anyone could have written: whatever its bytes, import must refuse it cleanly (nothing
 * stored) or store records that pass every check the daemon applies when it reads them, never
 * crash or read out of bounds. The first input byte chooses how the rest is used:
 *  - even: the file as it is (header, trailer, signature line parsing);
 *  - odd: the header and records of a file, to which the target appends a trailer with the right
 *    count and SHA-256, so that mutations reach the record decoder and the artifact checks
 *    instead of dying at the checksum.
 * Imports go into one database per process, unsigned files allowed (a signature cannot be
 * forged by a fuzzer; the signature line's parser still sees every input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "kernel_cache/kc.h"
#include "kernel_cache/kc_internal.h"

static kc_db *db;

static void open_db(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/hidetd-fuzz-import-%ld.db", (long)getpid());
    unlink(path);
    if (kc_open(path, &db, NULL) < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!db)
        open_db();
    if (size < 1)
        return 0;
    bool add_trailer = data[0] & 1;
    data++;
    size--;
    size_t cap = size + 128;
    char *buf = malloc(cap + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    size_t len = size;
    if (add_trailer && memchr(data, '\0', size) == NULL) {
        if (len == 0 || buf[len - 1] != '\n')
            buf[len++] = '\n';
        size_t lines = 0;
        for (size_t i = 0; i < len; i++)
            lines += buf[i] == '\n';
        char hex[KC_KEY_LEN + 1];
        kc_sha256_hex(buf, len, hex);
        /* The header line is not a record. */
        len += (size_t)snprintf(buf + len, cap - len, "end %zu %s\n", lines ? lines - 1 : 0, hex);
    }
    buf[len] = '\0';
    kc_import_opts o = { .allow_unsigned = true };
    kc_import_info info;
    char *err = NULL;
    int r = kc__import_buffer(db, "fuzz", buf, len, &o, &info, &err);
    if (r < 0 && !err)
        abort(); /* every refusal says why */
    free(err);
    free(buf);
    return 0;
}
