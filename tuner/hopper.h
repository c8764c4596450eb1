/* tuner/hopper.h - the Hopper (sm_90a) machinery the warp-specialised wgmma templates share
 * (internal to tuner/): matmul_wgmma and conv2d_wgmma (tuner/gemm/wgmma.c), attention_wgmma
 * (tuner/attn/wgmma.c).
 *
 * Every such kernel is the same skeleton: a producer warpgroup whose one thread issues bulk
 * tensor copies (TMA) into a ring of 128-byte-swizzled shared-memory stages, each with a `full`
 * mbarrier (armed with the stage's byte count, completed by the copies) and an `empty` one (one
 * arrive per consumer warp once its wgmma are done reading the stage); consumer warpgroups that
 * wait for full stages and issue wgmma.mma_async from shared-memory matrix descriptors (or, for
 * A, registers). The device helpers below (one string, emitted once per program) and the C
 * emitters are that skeleton's vocabulary; the templates add their own loops around it.
 *
 * Conventions of the emitted code: a producer thread walks the ring with `int wg_s, wg_ph`
 * (stage and phase parity); stage s's `full` barrier is at bars + 8 * s, its `empty` one at
 * bars + 8 * (stages + s); a fresh barrier's previous phase counts as complete, so the first
 * pass waits on parity wg_ph ^ 1 = 1 and proceeds.
 */
#ifndef HIDET_TUNER_HOPPER_H
#define HIDET_TUNER_HOPPER_H

#include <stdbool.h>
#include <stdint.h>

#include "op/tmap.h"
#include "tuner/codegen.h"

/* Device helpers (after tuner__prelude): mbarrier init / expect_tx / arrive / try_wait / wait
 * (wg_bar_init, wg_expect, wg_arrive, wg_try, wg_wait), bulk tensor loads of 2, 3 and 4
 * dimensions (wg_tma2/3/4), multicast ones (wg_tma2_mc/3_mc), an im2col load (wg_tma_i2c), bulk
 * tensor stores (wg_tma_st2/3), a remote arrive in a cluster peer (wg_arrive_peer), the wgmma
 * fence, commit and wait_group<N> (wg_fence, wg_commit, wg_wait_group), 128-byte-swizzle matrix
 * descriptors (wg_desc_lo(saddr, lbo) and wg_desc(lo): stride byte offset 1 KiB, so a K-major
 * operand is 128-byte rows, 8-row groups 1 KiB apart, and an MN-major one is 64-element column
 * chunks `lbo` bytes apart), and hd_tmap_t, a CUtensorMap as a kernel parameter. */
extern const char tuner__hopper_helpers[];

/* Emits `fname`, a wrapper of one wgmma.mma_async m64{n}k16 with fp32 accumulators d[n / 2]
 * per thread and f16 or bf16 (dt) operands:
 *   a_regs false: fname(float *d, hd_u64 da, hd_u64 db[, int sd]), A from a shared-memory
 *                 descriptor; ta, tb its and B's transpose bits (1: MN-major);
 *   a_regs true:  fname(float *d, const hd_u32 *a, hd_u64 db[, int sd]), A's fragment in four
 *                 registers of packed pairs (the m64k16 A layout: a[0] row r cols 2q..2q+1,
 *                 a[1] row r + 8, a[2] row r cols + 8, a[3] both); ta is ignored.
 * With scale_d_arg the last argument sd is the scale-d predicate (0: d = A*B, overwriting d),
 * else d += A*B always. */
void tuner__hopper_emit_mma_fn(tuner_sb *sb, const char *fname, tuner_dtype dt, int n, bool a_regs, int ta, int tb,
                               bool scale_d_arg);

/* Inside a producer thread's loop: waits until the ring's stage wg_s is free (its `empty`
 * barrier; `bars` names the ring's first barrier) and declares its `full` barrier wg_full and
 * its shared address wg_st (`ring` + wg_s * stage_bytes). */
void tuner__hopper_emit_stage_acquire(tuner_sb *sb, int stages, int stage_bytes, const char *bars, const char *ring);
/* Moves wg_s to the next stage (wg_ph flips at the ring's end). */
void tuner__hopper_emit_stage_advance(tuner_sb *sb, int stages);
/* setmaxnreg.inc or .dec to `regs` (a multiple of 8, 24..256) for the executing warpgroup. */
void tuner__hopper_emit_setmaxnreg(tuner_sb *sb, bool inc, int regs);

/* ", const __grid_constant__ hd_tmap_t <param>": a tensor map passed by value (op/tmap.h). */
void tuner__hopper_emit_map_param(tuner_sb *sb, const char *param);
/* "const char *const <addr> = <the parameter's generic address>;", as the copies take it. */
void tuner__hopper_emit_map_addr(tuner_sb *sb, const char *param, const char *addr);

/* A tiled map with 128-byte swizzle, element strides 1, zero fill, no L2 promotion: dims[0] is
 * the contiguous dimension, strides[0..rank-2] the byte strides of dimensions 1..rank-1. */
tuner_tmap tuner__hopper_tmap_tiled(int buf, tuner_dtype dt, int rank, const uint64_t *dims, const uint64_t *strides,
                                    const uint32_t *box);

#endif
