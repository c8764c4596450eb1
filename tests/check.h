/* tests/check.h - the plain check macros of the C tests whose checks need no message (cache,
 * protocol, clients, workers, scheduler, ops suite, GPU self-test): a failing check prints where
 * and what, counts in `failures`, and the test goes on, so one run reports every broken case.
 * Threaded tests keep an atomic counter of their own. */
#ifndef HIDET_TESTS_CHECK_H
#define HIDET_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                \
    do {                                                                                  \
        long long a_ = (long long)(a), b_ = (long long)(b);                               \
        if (a_ != b_) {                                                                   \
            fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, \
                    a_, b_);                                                              \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *a_ = (a), *b_ = (b);                                                     \
        if (!a_ || strcmp(a_, b_) != 0) {                                                    \
            fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
                    a_ ? a_ : "(null)", b_);                                                 \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

#endif
