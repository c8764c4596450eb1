/* tests/check.h - the check macros of every C test: a failing check prints where and what (and,
 * when given, a printf-style note of why), counts in `failures` (atomic: threaded tests check
 * from several threads), and the test goes on, so one run reports every broken case. A test whose
 * checks span several files defines CHECK_FAILURES as the name of one shared counter (declared
 * `_Atomic int`) before including this header. */
#ifndef HIDET_TESTS_CHECK_H
#define HIDET_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef CHECK_FAILURES
#define CHECK_FAILURES failures
static _Atomic int failures;
#endif

/* CHECK without a note passes check_note an empty format, which is intended. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

/* The optional note of CHECK: nothing for "", else ": " and the formatted text. */
__attribute__((format(printf, 1, 2), unused)) static void check_note(const char *fmt, ...)
{
    if (!fmt[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* CHECK(cond) or CHECK(cond, "format", args...). */
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s", __FILE__, __LINE__, #cond);        \
            check_note("" __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                          \
            CHECK_FAILURES++;                                                                   \
        }                                                                                 \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                \
    do {                                                                                  \
        long long a_ = (long long)(a), b_ = (long long)(b);                               \
        if (a_ != b_) {                                                                   \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, \
                    a_, b_);                                                              \
            CHECK_FAILURES++;                                                                   \
        }                                                                                 \
    } while (0)

#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *a_ = (a), *b_ = (b);                                                     \
        if (!a_ || strcmp(a_, b_) != 0) {                                                    \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
                    a_ ? a_ : "(null)", b_);                                                 \
            CHECK_FAILURES++;                                                                      \
        }                                                                                    \
    } while (0)

/* The test's exit status: 0 when every check passed, and a line that says so either way. */
__attribute__((unused)) static int check_finish(const char *name)
{
    if (CHECK_FAILURES) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, (int)CHECK_FAILURES);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
