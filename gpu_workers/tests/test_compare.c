/* gpu_workers/tests/test_compare.c - the verification's element test (gpu_workers/compare.h) on
 * the CPU, with outputs shaped like the one that made it take rows: a causal attention's, whose
 * first queries average a few values of V and its last thousands.
 *
 * The reference: rows r = 0..R-1 of D values of scale 1 / sqrt(r + 1), a few exactly 0 (as a
 * cancellation leaves them). A correct bf16 kernel's output differs by about the dtype's unit
 * roundoff (2^-8) of its own row's scale, which at R = 16384 rows is about 40x the whole
 * output's rms in the first rows. With bf16's tolerances (4e-2, scheduler/tune.c):
 *  - without rows the correct output fails (the causal bf16 rows at 8K and 16K tokens had every
 *    candidate refused, session 22 call e: "no candidate passed (116 candidates, 116 wrong)");
 *  - with rows of D it passes, and an error of a quarter of a late row's scale in one element is
 *    still caught, as is an element never written (the 0xff poison, a NaN with the sign bit);
 *  - a row no larger than average keeps the whole output's scale: the same output scaled so that
 *    every row has one magnitude compares as it did without rows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_workers/compare.h"

static int failures;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { ROWS = 16384, D = 128 };

static uint64_t rng = 12345;
static double uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / (double)(1ULL << 52) - 1.0;
}

static double rms_of(const float *x, size_t n)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    return sqrt(ss / (double)n);
}

static gw_compare_result run(const float *ref, const float *out, size_t n, double rms, int64_t row_len)
{
    const gw_tolerance t = {.atol = 4e-2, .rtol = 4e-2, .rms = rms, .row_len = row_len};
    gw_compare_result r;
    gw_compare_range(ref, out, 0, n, &t, &r);
    return r;
}

int main(void)
{
    const size_t n = (size_t)ROWS * D;
    float *ref = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    float *flat_ref = malloc(n * sizeof(float)), *flat_out = malloc(n * sizeof(float));
    if (!ref || !out || !flat_ref || !flat_out)
        return 2;
    const double u = 1.0 / 256; /* bf16's unit roundoff, 2^-8 */
    for (size_t r = 0; r < ROWS; r++) {
        const double scale = 1.0 / sqrt((double)r + 1);
        for (size_t c = 0; c < D; c++) {
            const size_t i = r * D + c;
            const double v = c % 37 == 5 ? 0.0 : scale * uniform(); /* some exact zeros */
            const double e = u * scale * uniform();                  /* a correct kernel's error */
            ref[i] = (float)v;
            out[i] = (float)(v + e);
            flat_ref[i] = (float)(v / scale * 0.02); /* every row one magnitude */
            flat_out[i] = (float)((v + e) / scale * 0.02);
        }
    }
    const double rms = rms_of(ref, n), flat_rms = rms_of(flat_ref, n);

    gw_compare_result r = run(ref, out, n, rms, 0);
    CHECK(r.bad > 0, "without rows a correct causal bf16 output should fail the whole output's scale (bad 0)");
    printf("without rows: %zu of %zu out of tolerance, first at row %zu (rms %.4g)\n", r.bad, n, r.first_bad / D, rms);
    r = run(ref, out, n, rms, D);
    CHECK(r.bad == 0, "with rows: %zu elements out of tolerance, first at %zu", r.bad, r.first_bad);

    /* A wrong element in a late row (a quarter of its scale) is caught; so is one never written. */
    const size_t late = (size_t)(ROWS - 3) * D + 17;
    const float keep = out[late];
    out[late] = (float)(ref[late] + 0.25 / sqrt((double)ROWS - 2));
    r = run(ref, out, n, rms, D);
    CHECK(r.bad == 1 && r.first_bad == late, "a late row's wrong element: bad %zu, first %zu", r.bad, r.first_bad);
    out[late] = keep;
    uint32_t poison = 0xffffffffu;
    memcpy(&out[D * 5 + 3], &poison, sizeof(poison));
    r = run(ref, out, n, rms, D);
    CHECK(r.bad == 1 && r.first_bad == (size_t)D * 5 + 3 && isinf(r.maxerr), "the 0xff poison: bad %zu", r.bad);

    /* Rows of one magnitude: the same verdicts with and without rows, element for element. */
    flat_out[D * 100 + 9] += (float)(0.5 * 0.02);
    const gw_compare_result a = run(flat_ref, flat_out, n, flat_rms, 0), b = run(flat_ref, flat_out, n, flat_rms, D);
    CHECK(a.bad == b.bad && a.first_bad == b.first_bad && a.bad >= 1, "one magnitude: %zu / %zu bad without / with rows",
          a.bad, b.bad);

    /* A range of whole rows compares as those rows of the whole (measure.c's parts). */
    const gw_tolerance t = {.atol = 4e-2, .rtol = 4e-2, .rms = rms, .row_len = D};
    gw_compare_result part;
    out[late] = (float)(ref[late] + 0.25 / sqrt((double)ROWS - 2));
    gw_compare_range(ref, out, (size_t)(ROWS - 8) * D, n, &t, &part);
    CHECK(part.bad == 1 && part.first_bad == late, "a part of rows: bad %zu, first %zu", part.bad, part.first_bad);

    free(ref);
    free(out);
    free(flat_ref);
    free(flat_out);
    printf("compare: %d failures\n", failures);
    return failures ? 1 : 0;
}
