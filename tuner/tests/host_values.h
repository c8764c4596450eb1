/* tuner/tests/host_values.h - the host side of the tuner's GPU checks (gpu_verify and the
 * attention templates' gpu_attn*): inputs whose values are exact in their dtype, so that a
 * reference computed from them sees what the kernel sees, and the 16-bit formats read back.
 * Part of tuner_test_common. */
#ifndef HIDET_TUNER_TESTS_HOST_VALUES_H
#define HIDET_TUNER_TESTS_HOST_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "tuner/tuner.h"

/* f16 bits of f, which must be exact in f16: zero, infinite, or normal with 11 significant bits
 * (no rounding is done). */
uint16_t t_f32_to_f16(float f);
/* The value of f16 bits (subnormals, infinities and NaN included). */
float t_f16_to_f32(uint16_t h);
/* bf16 bits of f, which must be exact in bf16 (its low 16 bits are dropped). */
uint16_t t_f32_to_bf16(float f);
float t_bf16_to_f32(uint16_t h);

/* Element k of a host buffer of dtype dt as a float: F32, F16, BF16 and the FP8 formats; 0 for
 * any other. */
float t_host_get(tuner_dtype dt, const void *h, size_t k);
/* Stores f, which must be exact in dt (F32, F16, BF16 or an FP8 format, rounded there), as element
 * k of a host buffer of dt. */
void t_host_put(tuner_dtype dt, void *h, size_t k, float f);

/* The checks' deterministic generator: a 64-bit LCG whose state starts at 12345 (a program that
 * wants its sequence again sets t_rng_state). Returns an int uniform in [lo, hi]. */
extern uint64_t t_rng_state;
int t_rnd_int(int lo, int hi);

#endif
