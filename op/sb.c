/* op/sb.c - the string builder the canonical op JSON and generated sources are written with. */
#include "op/sb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tuner_sb_init(tuner_sb *sb)
{
    memset(sb, 0, sizeof(*sb));
}

static bool sb_reserve(tuner_sb *sb, size_t extra)
{
    if (sb->oom)
        return false;
    if (sb->len + extra + 1 <= sb->cap)
        return true;
    size_t cap = sb->cap ? sb->cap : 4096;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    char *p = realloc(sb->buf, cap);
    if (!p) {
        sb->oom = true;
        return false;
    }
    sb->buf = p;
    sb->cap = cap;
    return true;
}

void tuner_sb_printf(tuner_sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || !sb_reserve(sb, (size_t)need))
        return;
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)need + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)need;
}

void tuner_sb_puts(tuner_sb *sb, const char *s)
{
    size_t n = strlen(s);
    if (!sb_reserve(sb, n))
        return;
    memcpy(sb->buf + sb->len, s, n + 1);
    sb->len += n;
}

char *tuner_sb_take(tuner_sb *sb)
{
    char *out = sb->oom ? NULL : sb->buf;
    if (sb->oom)
        free(sb->buf);
    else if (!out)
        out = calloc(1, 1);
    tuner_sb_init(sb);
    return out;
}

void tuner_sb_free(tuner_sb *sb)
{
    free(sb->buf);
    tuner_sb_init(sb);
}
