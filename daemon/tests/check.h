/* daemon/tests/check.h - the tiny check macros of the daemon's unit tests: a failing check prints
 * where and why and the test continues, so one run reports every broken case. */
#ifndef HIDET_DAEMON_TESTS_CHECK_H
#define HIDET_DAEMON_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        CHECK(a_ && b_ && strcmp(a_, b_) == 0, "'%s' != '%s'", a_ ? a_ : "(null)",                  \
              b_ ? b_ : "(null)");                                                                 \
    } while (0)

static inline int check_finish(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
