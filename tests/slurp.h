/* tests/slurp.h - reads a whole file into a NUL-terminated, malloc'd buffer, for the C tests
 * (examples, exported caches, configuration files). Header-only like tests/check.h. */
#ifndef HIDET_TESTS_SLURP_H
#define HIDET_TESTS_SLURP_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes plus a terminating NUL, and their count in *len (len may be NULL); NULL when
 * the file cannot be opened or read whole, or memory runs out. */
__attribute__((unused)) static char *test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    if (buf && len)
        *len = (size_t)n;
    return buf;
}

#endif
