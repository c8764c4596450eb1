/* gpu_workers/compare.h - the verification's element test: a candidate's output against the
 * reference's, both as floats, apart from the GPU that produced them (measure.c runs it over
 * parts of the output on the measurer's threads; tests/test_compare.c runs it on the CPU).
 *
 * An element passes when |out - ref| <= atol * rms + rtol * |ref|, where rms is the root mean
 * square of the reference's finite elements - of the whole output, or, with rows (row_len > 0),
 * the larger of that and the rms of the element's own row (row_len consecutive elements).
 * The row's scale matters where rows differ in magnitude by orders: a causal attention's first
 * queries average a few values, its last thousands, so at S = 16K the first rows are about 40x
 * the whole output's rms. Their errors (the dtype's rounding of the softmax weights, relative
 * to the row) are then far above atol times the whole output's rms, in any correct kernel, while
 * a row of average or smaller magnitude keeps the whole output's scale.
 * A NaN in the reference must be a NaN the candidate computed (a positive quiet NaN: the 0xff
 * poison of an element never written has its sign bit set), an infinity the same infinity; a
 * non-finite output where the reference is finite fails. */
#ifndef HIDET_GPU_WORKERS_COMPARE_H
#define HIDET_GPU_WORKERS_COMPARE_H

#include <stddef.h>
#include <stdint.h>

typedef struct gw_tolerance {
    double atol, rtol;
    double rms;      /* of the whole reference's finite elements */
    int64_t row_len; /* > 0: rows of this many elements, each also scaled by its own rms */
} gw_tolerance;

typedef struct gw_compare_result {
    double maxerr;    /* the largest |out - ref| (inf for a non-finite mismatch) */
    size_t bad;       /* elements outside the tolerance */
    size_t first_bad; /* the first of them (an index into the arrays) */
} gw_compare_result;

/* Compares elements [begin, end) of ref and out; with rows, begin and end are multiples of
 * t->row_len. */
void gw_compare_range(const float *ref, const float *out, size_t begin, size_t end, const gw_tolerance *t,
                      gw_compare_result *r);

#endif
