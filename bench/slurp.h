/* bench/slurp.h - a whole file into memory, for the bench tools that read a request or a record. */
#ifndef HIDETD_BENCH_SLURP_H
#define HIDETD_BENCH_SLURP_H

#include <stddef.h>

/* The bytes of `path`, NUL-terminated (for cJSON), their count in *len; NULL if it cannot be
 * opened or memory runs out. Free with free(). */
char *slurp(const char *path, size_t *len);

#endif
