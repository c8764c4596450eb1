// tuner/tests/emu/emu_attn.h - host versions of attention_mma's helpers (tuner/attn/mma.c
// at_helpers) and the prelude functions its kernel body calls, for emu_mma.cpp
// (-DEXTRA_HELPERS='"emu_attn.h"'): ldmatrix and cp.async map to the emulator's collective and
// copy machinery, ex2.approx to exp2f, the 2-byte-aligned chunk path to plain shared stores (the
// prelude's hd_pack2 and HD_INF are emu_mma.cpp's).
#define at_smem gm_smem
#define __builtin_assume(x) ((void)0)
static inline void at_ldsm4(hd_u32 *r, hd_u32 a) { gm_ldsm4(r, a); }
static inline void at_ldsm4t(hd_u32 *r, hd_u32 a) { gm_ldsm4t(r, a); }
static inline float at_exp2(float x) { return exp2f(x); }
template <int A> static inline void at_chunk(hd_u32 dst, const void *src, bool ok) {
    if constexpr (A >= 16) {
        gm_cp16(dst, src, ok ? 16 : 0);
    } else if constexpr (A >= 4) {
        for (int k = 0; k < 16 / A; k++) {
            if constexpr (A == 8) gm_cp8(dst + 8 * k, (const char *)src + (ok ? 8 * k : 0), ok ? 8 : 0);
            else gm_cp4(dst + 4 * k, (const char *)src + (ok ? 4 * k : 0), ok ? 4 : 0);
        }
    } else {
        const unsigned short *s = (const unsigned short *)src;
        hd_v4 w;
        hd_u32 *p = &w.x;
        for (int k = 0; k < 4; k++) p[k] = ok ? ((hd_u32)s[2 * k] | ((hd_u32)s[2 * k + 1] << 16)) : 0u;
        gm_sts128(dst, w);
    } }
