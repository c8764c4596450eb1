/* gpu_workers/compare.c - see compare.h. */
#include "gpu_workers/compare.h"

#include <math.h>

/* The elements [begin, end) against one absolute tolerance. */
static void compare_span(const float *ref, const float *out, size_t begin, size_t end, double tol_abs, double rtol,
                         gw_compare_result *r)
{
    for (size_t i = begin; i < end; i++) {
        const double ref_v = ref[i], v = out[i];
        double d = fabs(v - ref_v);
        if (isnan(ref_v)) {
            if (isnan(v) && !signbit(v))
                continue;
            d = INFINITY;
        } else if (isinf(ref_v)) {
            if (v == ref_v)
                continue;
            d = INFINITY;
        } else if (!isfinite(v)) {
            d = INFINITY;
        }
        if (d > r->maxerr)
            r->maxerr = d;
        if (!(d <= tol_abs + rtol * fabs(ref_v))) {
            if (!r->bad)
                r->first_bad = i;
            r->bad++;
        }
    }
}

void gw_compare_range(const float *ref, const float *out, size_t begin, size_t end, const gw_tolerance *t,
                      gw_compare_result *r)
{
    r->maxerr = 0;
    r->bad = 0;
    r->first_bad = 0;
    if (t->row_len <= 0) {
        compare_span(ref, out, begin, end, t->atol * t->rms, t->rtol, r);
        return;
    }
    const size_t len = (size_t)t->row_len;
    for (size_t row = begin; row < end; row += len) {
        const size_t stop = row + len < end ? row + len : end;
        double ss = 0;
        size_t n = 0;
        for (size_t i = row; i < stop; i++)
            if (isfinite(ref[i])) {
                ss += (double)ref[i] * ref[i];
                n++;
            }
        const double row_rms = n ? sqrt(ss / (double)n) : 0;
        compare_span(ref, out, row, stop, t->atol * (row_rms > t->rms ? row_rms : t->rms), t->rtol, r);
    }
}
