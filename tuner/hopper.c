/* tuner/hopper.c - the Hopper (sm_90a) machinery the wgmma templates share (see tuner/hopper.h). */
#include "tuner/hopper.h"

#include <stdio.h>

const char tuner__hopper_helpers[] =
    "// ---- tuner/hopper helpers ----\n"
    "HD_INLINE void wg_bar_init(hd_u32 a, int n) { asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: "
    "\"r\"(a), \"r\"(n) : \"memory\"); }\n"
    "HD_INLINE void wg_expect(hd_u32 a, int bytes) { asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, "
    "[%0], %1;\" :: \"r\"(a), \"r\"(bytes) : \"memory\"); }\n"
    "HD_INLINE void wg_arrive(hd_u32 a) { asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(a) : "
    "\"memory\"); }\n"
    "HD_INLINE hd_u32 wg_try(hd_u32 a, int parity) { hd_u32 ok; asm volatile(\"{ .reg .pred p; "
    "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\" : \"=r\"(ok) : \"r\"(a), "
    "\"r\"(parity) : \"memory\"); return ok; }\n"
    "HD_INLINE void wg_wait(hd_u32 a, int parity) { while (!wg_try(a, parity)) { } }\n"
    /* Bulk tensor copies into this CTA's shared memory, completing on an mbarrier. */
    "HD_INLINE void wg_tma2(hd_u32 dst, const void *map, int c0, int c1, hd_u32 bar) { asm volatile("
    "\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\" "
    ":: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(bar) : \"memory\"); }\n"
    "HD_INLINE void wg_tma3(hd_u32 dst, const void *map, int c0, int c1, int c2, hd_u32 bar) { asm volatile("
    "\"cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\" "
    ":: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(bar) : \"memory\"); }\n"
    "HD_INLINE void wg_tma4(hd_u32 dst, const void *map, int c0, int c1, int c2, int c3, hd_u32 bar) { asm volatile("
    "\"cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\" "
    ":: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(c3), \"r\"(bar) : \"memory\"); }\n"
    /* An im2col copy of an NHWC input (4-D map: c, w, h, n) at window offsets (ow, oh). */
    "HD_INLINE void wg_tma_i2c(hd_u32 dst, const void *map, int c, int w, int h, int n, unsigned short ow, "
    "unsigned short oh, hd_u32 bar) { asm volatile(\"cp.async.bulk.tensor.4d.shared::cluster.global.im2col."
    "mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\" :: \"r\"(dst), \"l\"(map), "
    "\"r\"(c), \"r\"(w), \"r\"(h), \"r\"(n), \"r\"(bar), \"h\"(ow), \"h\"(oh) : \"memory\"); }\n"
    /* Bulk tensor stores from this CTA's shared memory (bulk async-group completion). */
    "HD_INLINE void wg_tma_st2(const void *map, int c0, int c1, hd_u32 src) { asm volatile("
    "\"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\" "
    ":: \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(src) : \"memory\"); }\n"
    "HD_INLINE void wg_tma_st3(const void *map, int c0, int c1, int c2, hd_u32 src) { asm volatile("
    "\"cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\" "
    ":: \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(c2), \"r\"(src) : \"memory\"); }\n"
    /* The same, multicast: the box lands at this offset in every CTA of ctaMask, completing
     * bytes on each one's mbarrier at the barrier's offset. */
    "HD_INLINE void wg_tma2_mc(hd_u32 dst, const void *map, int c0, int c1, hd_u32 bar, unsigned short mask) { asm "
    "volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
    "[%1, {%2, %3}], [%4], %5;\" :: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(bar), \"h\"(mask) : "
    "\"memory\"); }\n"
    "HD_INLINE void wg_tma3_mc(hd_u32 dst, const void *map, int c0, int c1, int c2, hd_u32 bar, unsigned short mask) { "
    "asm volatile(\"cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
    "[%0], [%1, {%2, %3, %4}], [%5], %6;\" :: \"r\"(dst), \"l\"(map), \"r\"(c0), \"r\"(c1), \"r\"(c2), "
    "\"r\"(bar), \"h\"(mask) : \"memory\"); }\n"
    /* Arrive on the mbarrier at the same offset in CTA `peer` of the cluster. Default (CTA)
     * release semantics: the consumers only read the stage, and their wgmma reads are complete
     * (wait_group) before they arrive. .release.cluster would put a MEMBAR.ALL.GPU before every
     * arrive: measured on an H100, 4096x768x3072 took 98.8 us with it, 43.9 without. */
    "HD_INLINE void wg_arrive_peer(hd_u32 a, unsigned peer) { asm volatile(\"{ .reg .b32 ra; mapa.shared::cluster.u32 "
    "ra, %0, %1; mbarrier.arrive.shared::cluster.b64 _, [ra]; }\" :: \"r\"(a), \"r\"(peer) : \"memory\"); }\n"
    "HD_INLINE void wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
    "HD_INLINE void wg_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }\n"
    "template <int N> HD_INLINE void wg_wait_group() { asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: "
    "\"n\"(N) : \"memory\"); }\n"
    /* Shared-memory matrix descriptor, 128-byte swizzle, in two words. The low word holds the
     * start address >> 4 (bits 0-13) and the leading byte offset >> 4 (bits 16-29); the high
     * word the stride byte offset, 1 KiB for every operand here (>> 4 = 64), and layout type 1
     * (bits 62-63). The ring is 1024-byte aligned, so the base-offset field stays 0. The start
     * field takes bits 4-17 of the address: a CTA of a cluster sees its shared memory at
     * addresses with bits above those set, which the mask drops. Below 2^18 a descriptor moved
     * by a multiple of 16 bytes is its low word plus bytes / 16, so the consumers add offsets
     * to one base instead of packing every descriptor anew. */
    "HD_INLINE hd_u32 wg_desc_lo(hd_u32 saddr, hd_u32 lbo) { return ((saddr & 0x3ffffu) >> 4) | ((lbo >> 4) << 16); }\n"
    "HD_INLINE hd_u64 wg_desc(hd_u32 lo) { hd_u64 d; asm(\"mov.b64 %0, {%1, %2};\" : \"=l\"(d) : \"r\"(lo), "
    "\"r\"(64u | (1u << 30))); return d; }\n"
    /* A CUtensorMap, as the launcher passes it by value (op/tmap.h). */
    "struct __align__(64) hd_tmap_t { hd_u64 v[16]; };\n"
    "// ---- end of hopper helpers ----\n";

void tuner__hopper_emit_mma_fn(tuner_sb *sb, const char *fname, tuner_dtype dt, int n, bool a_regs, int ta, int tb,
                               bool scale_d_arg)
{
    const int nacc = n / 2;
    const char *ty = dt == TUNER_F16 ? "f16" : "bf16";
    /* Operands after the accumulators: the A descriptor (or A's four registers), B's
     * descriptor, the scale-d value. */
    const int na = a_regs ? 4 : 1;
    tuner_sb_printf(sb, "HD_INLINE void %s(float *d, %s, hd_u64 db%s) {\nasm volatile(\"{\\n"
                        ".reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n"
                        "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {",
                    fname, a_regs ? "const hd_u32 *a" : "hd_u64 da", scale_d_arg ? ", int sd" : "", nacc + na + 1, n,
                    ty, ty);
    for (int i = 0; i < nacc; i++)
        tuner_sb_printf(sb, "%s%%%d", i ? ", " : "", i);
    if (a_regs) /* no transpose bit for A in registers */
        tuner_sb_printf(sb, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\\n\"\n: ", nacc, nacc + 1,
                        nacc + 2, nacc + 3, nacc + 4, tb);
    else
        tuner_sb_printf(sb, "}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n: ", nacc, nacc + 1, ta, tb);
    for (int i = 0; i < nacc; i++)
        tuner_sb_printf(sb, "%s\"+f\"(d[%d])", i ? ", " : "", i);
    if (a_regs)
        tuner_sb_puts(sb, "\n: \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), ");
    else
        tuner_sb_puts(sb, "\n: \"l\"(da), \"l\"(db), ");
    tuner_sb_printf(sb, "\"r\"(%s) : \"memory\");\n}\n", scale_d_arg ? "sd" : "1");
}

void tuner__hopper_emit_stage_acquire(tuner_sb *sb, int stages, int stage_bytes, const char *bars, const char *ring)
{
    tuner_sb_printf(sb,
                    "wg_wait(%s + 8 * (%d + wg_s), wg_ph ^ 1);\n"
                    "const hd_u32 wg_full = %s + 8 * wg_s;\n"
                    "const hd_u32 wg_st = %s + wg_s * %d;\n",
                    bars, stages, bars, ring, stage_bytes);
}

void tuner__hopper_emit_stage_advance(tuner_sb *sb, int stages)
{
    tuner_sb_printf(sb, "if (++wg_s == %d) { wg_s = 0; wg_ph ^= 1; }\n", stages);
}

void tuner__hopper_emit_setmaxnreg(tuner_sb *sb, bool inc, int regs)
{
    tuner_sb_printf(sb, "asm volatile(\"setmaxnreg.%s.sync.aligned.u32 %d;\" ::: \"memory\");\n", inc ? "inc" : "dec",
                    regs);
}

void tuner__hopper_emit_map_param(tuner_sb *sb, const char *param)
{
    tuner_sb_printf(sb, ", const __grid_constant__ hd_tmap_t %s", param);
}

void tuner__hopper_emit_map_addr(tuner_sb *sb, const char *param, const char *addr)
{
    tuner_sb_printf(sb, "const char *const %s = reinterpret_cast<const char *>(&%s);\n", addr, param);
}

tuner_tmap tuner__hopper_tmap_tiled(int buf, tuner_dtype dt, int rank, const uint64_t *dims, const uint64_t *strides,
                                    const uint32_t *box)
{
    tuner_tmap m = {.buf = buf, .mode = TUNER_TMAP_TILED, .dtype = dt, .rank = rank, .swizzle = 128};
    for (int i = 0; i < rank; i++) {
        m.dims[i] = dims[i];
        m.box[i] = box[i];
        m.element_strides[i] = 1;
        if (i + 1 < rank)
            m.strides[i] = strides[i];
    }
    return m;
}
