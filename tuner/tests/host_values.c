/* tuner/tests/host_values.c - exact host values for the tuner's GPU checks (host_values.h). */
#include "host_values.h"

#include <math.h>
#include <string.h>

uint16_t t_f32_to_f16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    if ((b & 0x7fffffff) == 0)
        return sign;
    if ((b & 0x7fffffff) == 0x7f800000)
        return (uint16_t)(sign | 0x7c00);
    int e = (int)((b >> 23) & 0xff) - 127 + 15;
    uint16_t m = (uint16_t)((b >> 13) & 0x3ff);
    return (uint16_t)(sign | (uint16_t)(e << 10) | m);
}

float t_f16_to_f32(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 0x400), e - 25);
    return s ? -v : v;
}

uint16_t t_f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}

float t_bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

float t_host_get(tuner_dtype dt, const void *h, size_t k)
{
    float v;
    uint16_t u;
    switch (dt) {
    case TUNER_F32:
        memcpy(&v, (const char *)h + 4 * k, 4);
        return v;
    case TUNER_F16:
    case TUNER_BF16:
        memcpy(&u, (const char *)h + 2 * k, 2);
        return dt == TUNER_F16 ? t_f16_to_f32(u) : t_bf16_to_f32(u);
    case TUNER_F8E4M3:
    case TUNER_F8E5M2:
        return tuner_fp8_to_f32(dt, ((const uint8_t *)h)[k]);
    default:
        return 0.0f;
    }
}

void t_host_put(tuner_dtype dt, void *h, size_t k, float f)
{
    if (dt == TUNER_F32) {
        memcpy((char *)h + 4 * k, &f, 4);
        return;
    }
    if (tuner_dtype_is_fp8(dt)) {
        ((uint8_t *)h)[k] = tuner_f32_to_fp8(dt, f);
        return;
    }
    const uint16_t v = dt == TUNER_F16 ? t_f32_to_f16(f) : t_f32_to_bf16(f);
    memcpy((char *)h + 2 * k, &v, 2);
}

uint64_t t_rng_state = 12345;

int t_rnd_int(int lo, int hi)
{
    t_rng_state = t_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int)((t_rng_state >> 33) % (uint64_t)(hi - lo + 1));
}
