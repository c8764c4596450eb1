/* op/sb.h - a growable string builder.
 *
 * The canonical op JSON (op/op_json.c) and every program the tuner generates are written with it.
 * It lives in op/ rather than beside the code generator so that the request parser, which needs
 * the canonical JSON, links nothing heavier than cJSON. Errors are sticky: after a failed
 * allocation every append is ignored and tuner_sb_take() returns NULL, so callers check once.
 */
#ifndef HIDET_OP_SB_H
#define HIDET_OP_SB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tuner_sb {
    char *buf;
    size_t len, cap;
    bool oom; /* set once an allocation failed; further appends are ignored */
} tuner_sb;

void tuner_sb_init(tuner_sb *sb);
/* printf-style append. */
void tuner_sb_printf(tuner_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tuner_sb_puts(tuner_sb *sb, const char *s);
/* Hands the string over (caller frees) and resets sb; NULL if an allocation failed. */
char *tuner_sb_take(tuner_sb *sb);
void tuner_sb_free(tuner_sb *sb);

#endif
