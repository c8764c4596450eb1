/* tuner/gemm/cost.c - analytical cost model shared by the GEMM-like templates.
 *
 * The model only has to rank: clearly bad candidates (idle SMs, a last wave with a handful of
 * tiles, tiny warp tiles on a big problem, no latency hiding, a huge split-K workspace) must come
 * out slow, and a good tile for the shape must come out near the top. Terms:
 *  - the main loop as a ring of k tiles on each SM (tuner__gemm_ring_us): every k tile is
 *    loaded (a latency, then the longer of its transfers at its share of L2 and of DRAM
 *    bandwidth: the unique operands cross DRAM once, the rest of the panels hit L2) and then
 *    computed at the SM's tensor (or FMA) rate, scaled by an efficiency that grows with the
 *    warp tile (operand reuse from registers) and with how many warps the SM has to hide
 *    latency; the pipeline's depth bounds how many loads are under way; tiles run in waves of
 *    (blocks per SM x SMs); a non-persistent block's fill and drain, exposed where its k loop is
 *    short; plus the fused epilogue's arithmetic;
 *  - split-K: fp32 partials written and read back, plus a second launch; or, summed inside a
 *    cluster, one pass over the partial tiles through distributed shared memory;
 *  - a fixed launch overhead per kernel.
 */
#include <math.h>

#include "tuner/core.h"
#include "tuner/gemm/gemm.h"

#define LAUNCH_US 3.0
/* Latency of one k tile's load, from issue to arrival, for the ring below: from DRAM and from
 * L2. Fitted on an H100 to the times of a few hundred schedules per case measured by
 * bench/calibrate.py (bench/results/2026-11-25-h100-model-ring), where the same tile with 3 to
 * 12 stages ran e.g. at 37, 31, 28, 26, 24 and 21 us (64x64 wgmma tiles on 128x4096x4096, a
 * weight stream), while the best 4096^3 tiles (128x256, L2 hits) need no more than 3 stages. */
#define DRAM_LATENCY_US 1.2
#define L2_LATENCY_US 0.2
/* The exponent of the smooth maximum of the ring's two bounds (below): large, since the
 * pipeline is close to deterministic; finite, since loads' latencies spread. */
#define RING_SMOOTHING 8.0

double tuner__gemm_ring_us(const tuner_arch *a, const tuner__gemm_ring *r)
{
    if (r->ktiles <= 0)
        return 0.0;
    /* Bytes per us. L2: 4.25 times DRAM's (12.75 TB/s on an H100). Calibrated wgmma tiles whose
     * k tiles read the most operand bytes per FLOP (block_m 64, swapped or not) sustain more:
     * 62-66 bytes per clock and SM on an H200 at 1965 MHz, 50-59 on an H100 (700 and 2100 x 4096
     * x 4096, bench/results/2026-11-30-h200-session12/f/calib; 4096^3, 2048x14336x4096,
     * 4096x3072x768 of 2026-11-25-h100-model-ring and -calibration-2), where 4.0 allowed 46. Yet
     * raising it to that (5-5.5) ranks the calibrated cases worse overall: the bound also stands
     * in for effects modelled nowhere else (a plain raster's extra DRAM reads, block_n 64 tiles'
     * slower wgmma, CTA pairs' edge on 1000^3), so it is raised only as far as those stay put. */
    const double dram_bw = a->dram_gbps * 1e3, l2_bw = 4.25 * dram_bw;
    const double sms = r->sms < 1 ? 1 : r->sms;
    /* What one k tile occupies: the SM's tensor cores, its share of DRAM bandwidth for the part
     * of the tile that misses L2, its share of L2 bandwidth. */
    const double demand[3] = {
        r->compute_us,
        r->stage_bytes * r->dram_frac / (dram_bw / sms),
        r->stage_bytes * r->l2_penalty / (l2_bw / sms),
    };
    double busiest = 0;
    for (int k = 0; k < 3; k++)
        busiest = demand[k] > busiest ? demand[k] : busiest;
    /* A k tile's round trip: the latency, its transfer, its computation. The bytes that miss L2
     * stream from DRAM through L2 to the SM while the rest come from L2: the transfer takes the
     * longer of its DRAM and L2 times, not their sum, which priced shallow rings as
     * latency-bound where they are not: on an H200, 128x192 tiles of 700x4096x4096 with 3, 4
     * and 5 stages ran 38.7, 36.6 and 40.0 us, predicted 51.4, 38.7 and 38.4 with the sum (the
     * 5-stage one picked), 43.8, 36.9 and 38.2 without (bench/results/2026-11-30-h200-session12,
     * f/calib). */
    const double round_trip = r->dram_frac * DRAM_LATENCY_US + (1.0 - r->dram_frac) * L2_LATENCY_US +
                              r->extra_latency_us + demand[0] + (demand[1] > demand[2] ? demand[1] : demand[2]);
    /* A producer of its own (a gathering warpgroup) sets a pace of its own, not a latency the
     * ring's depth hides: it fills one stage at a time. */
    busiest = r->producer_us > busiest ? r->producer_us : busiest;
    /* A k tile per `busiest` at best; with `slots` of them circulating, one per round trip /
     * slots at best (Little's law): a shallow ring is latency-bound, a deep one runs at the
     * pace of its bottleneck. */
    int slots = r->slots < 1 ? 1 : r->slots;
    /* A non-persistent block has no more k tiles to load than its tile's k loop holds: a ring
     * deeper than that only holds empty stages (and costs shared memory). Without this cap a
     * single k tile (examples/requests/matmul.json: K = 64, block_k 64) was predicted 11 times
     * less latency-bound with 12 stages than with 2, and the 96 KiB ring ranked first. */
    if (r->tile_ktiles > 0) {
        const double cap = ceil(r->tile_ktiles) * (r->blocks > 0 ? r->blocks : 1);
        if (slots > cap)
            slots = (int)cap;
    }
    const double latency_bound = round_trip / slots;
    double per_ktile = pow(pow(busiest, RING_SMOOTHING) + pow(latency_bound, RING_SMOOTHING), 1.0 / RING_SMOOTHING);
    /* A non-persistent block fills its ring before computing and computes its last stages with
     * nothing left to load: per tile, about `depth` k tiles of the lesser of compute and
     * memory do not overlap. Resident blocks cover each other's fill and drain once they drift
     * apart, which they do less the shorter their k loop (blocks of a wave start together): the
     * exposed share is taken as (depth / k tiles per tile)^2. On an H100 this separates the
     * 1x1 convolution's mma tiles (256 -> 64 channels: k loops of 4-8 tiles, 3-5 stages; 31-41
     * us measured, against 29 for the persistent wgmma tiles) from the weight streams of skinny
     * GEMMs (64 k tiles, 12 stages), where the ring alone was right
     * (bench/results/2026-11-25-h100-model-ring, calibration-conv.json). */
    if (r->tile_ktiles > 0) {
        const double mem = demand[1] > demand[2] ? demand[1] : demand[2];
        const double lesser = demand[0] < mem ? demand[0] : mem;
        const double depth = (double)slots / (r->blocks > 0 ? r->blocks : 1);
        const double share = depth < r->tile_ktiles ? depth / r->tile_ktiles : 1.0;
        per_ktile += share * share * lesser;
    }
    return r->ktiles * per_ktile;
}

/* Each CTA writes its partial tile to shared memory and, after a cluster barrier, sums its
 * share of the tile from all `split` partials: two barriers and a few remote reads per output
 * pair. An estimate; the one pair measured on an H100 (matmul_mma, 1x4096x4096, 16x128 tiles in
 * 4 slices) ran 14.37 us against 14.48 with the workspace. */
/* The gather of unaligned operands (tuner/gemm/wgmma.c): per 16-byte chunk a producer thread
 * issues about 60 instructions (coordinates and bounds, two predicated 16-byte loads, four
 * shuffles, the funnel shift, a shared store), and a warp's 4 lanes per 128-byte line issue
 * them on one scheduler: chunks x 60 cycles per k tile, at 1.75 GHz. Its loads go to registers
 * one k tile ahead, so a k tile also takes at least one load's round trip: 0.3 us from L2,
 * 0.6 from DRAM (an ld.global's under load, less than a TMA box's: DRAM_LATENCY_US). A
 * first estimate, not fitted on a GPU: the two bounds, smoothly the larger. */
#define GATHER_CYCLES_PER_CHUNK 60.0
#define GATHER_CLOCK_MHZ 1750.0
#define GATHER_L2_RT_US 0.3
#define GATHER_DRAM_RT_US 0.6

double tuner__gemm_gather_us(double chunks, double dram_frac)
{
    if (chunks <= 0)
        return 0.0;
    const double issue = chunks * GATHER_CYCLES_PER_CHUNK / GATHER_CLOCK_MHZ;
    const double rt = dram_frac * GATHER_DRAM_RT_US + (1.0 - dram_frac) * GATHER_L2_RT_US;
    return pow(pow(issue, RING_SMOOTHING) + pow(rt, RING_SMOOTHING), 1.0 / RING_SMOOTHING);
}

double tuner__gemm_cluster_sum_us(int split)
{
    return 0.6 + 0.1 * split;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

double tuner__gemm_epilogue_us(const tuner__gemm_problem *p, double elements)
{
    /* tuner__chain_instr per element at about 4.3e5 element-instructions per us on one SM
     * (H100, 128x128 tiles with bias + GELU: about 1.2 us each). */
    return elements * tuner__chain_instr(&p->op->epilogue) / 4.3e5;
}

/* A full-size epilogue operand read per fragment from global memory: each thread's pairs
 * after the main loop, 16 bytes per row per quad, stalled on L1TEX while the tensor cores idle.
 * Measured on an H200: the SwiGLU gate 4096x11008x4096 (silu, then mul by an [M, N] f16
 * operand), pingpong 128x128 tiles, cost 119 us over the bare GEMM's 556, ~21 tiles per SM: 5.7
 * us per 16384-element tile (bench/results/2026-11-29-h200-kernel-gaps). */
#define OPERAND_FRAG_US_PER_ELEMENT 3.5e-4
/* The share of a TMA-loaded operand tile's DRAM time that is not hidden behind the main loop
 * (it competes with the operands' own loads). An estimate. */
#define OPERAND_TMA_EXPOSED 0.25

double tuner__gemm_operand_us(const tuner__gemm_problem *p, const tuner_arch *a, double elements, double sms,
                              int in_smem)
{
    const tuner_op *op = p->op;
    int full = 0;
    for (int i = op->n_anchor_inputs; i < op->n_inputs; i++) {
        const tuner_tensor *t = &op->inputs[i];
        const bool read = tuner_ew_chain_reads(&op->epilogue, i);
        bool same = false;
        if (p->conv) { /* the output's shape: its [N*P*Q, K] matrix */
            same = t->rank == op->output.rank;
            for (int d = 0; same && d < t->rank; d++)
                same = t->shape[d] == op->output.shape[d];
        } else {
            same = t->rank >= 2 && t->shape[t->rank - 1] == p->N && t->shape[t->rank - 2] == p->M;
        }
        full += read && same;
    }
    const int frag = full > in_smem ? full - in_smem : 0;
    const double per_sm_bw = a->dram_gbps * 1e3 / (sms < 1 ? 1 : sms); /* bytes per us */
    return frag * elements * OPERAND_FRAG_US_PER_ELEMENT +
           in_smem * OPERAND_TMA_EXPOSED * elements * tuner_dtype_size(p->out_dt) / per_sm_bw;
}

double tuner__gemm_cost(const tuner__gemm_problem *p, const tuner_arch *a, const tuner__gemm_cost_in *c)
{
    if (!p || !a || !c || c->block_m < 1 || c->block_n < 1 || c->block_k < 1 || c->threads < 32)
        return 1e12;
    const int esz = tuner_dtype_size(p->dt);
    const int split = c->split_k < 1 ? 1 : c->split_k;
    const long long tm = (p->M + c->block_m - 1) / c->block_m, tn = (p->N + c->block_n - 1) / c->block_n;
    const long long kps = tuner__gemm_k_per_split(p->K, split, c->block_k);
    const long long tiles = tm * tn * p->batch * split;

    /* Occupancy: blocks per SM limited by shared memory (1 KiB reserved per block), registers
     * and threads. */
    int by_smem = c->smem_bytes > 0 ? a->max_smem_per_sm / (c->smem_bytes + 1024) : 32;
    int regs = c->regs_per_thread > 0 ? c->regs_per_thread : 64;
    int by_regs = a->regs_per_sm / (regs * c->threads);
    int by_thr = a->max_threads_per_sm / c->threads;
    int bps = by_smem < by_regs ? by_smem : by_regs;
    bps = bps < by_thr ? bps : by_thr;
    if (bps > 32)
        bps = 32;
    if (bps < 1)
        return 1e12;
    const double conc = (double)bps * a->sm_count;
    double waves = ceil((double)tiles / conc);
    /* A split-K cluster's CTAs are placed in one GPC, so fewer clusters fit at once than the
     * SMs' block slots suggest (tuner__arch_cluster_fit; on an H100, 32x32 tiles of
     * 1x4096x4096 in 128 clusters of 4 ran 27 us against 20 for 16x128 tiles in 32,
     * bench/results/2026-11-25-h100-model-ring). */
    if (split > 1 && c->split_in_cluster) {
        const double at_once = (double)tuner__arch_cluster_fit(a, split) * bps;
        const double cluster_waves = ceil((double)(tiles / split) / at_once);
        waves = cluster_waves > waves ? cluster_waves : waves;
    }
    /* Blocks sharing one SM in a wave: fewer than bps when the tiles do not fill the GPU (then
     * SMs idle instead: ceil() above models that). */
    const long long per_sm = (tiles + a->sm_count - 1) / a->sm_count;
    const int blocks_here = (int)(per_sm < bps ? per_sm : bps);

    /* Efficiency of the inner loop. */
    double eff;
    double rate_tflops;
    if (c->tensor_core) {
        /* FP8 (matmul_mma's m16n8k32): the target's FP8 mma.sync rate, twice fp16's where known
         * (tuner/arch.c); the operands' bytes (esz 1) halve their load and panel terms below. */
        rate_tflops = c->tf32 ? a->tc_f16_tflops * 0.5 : p->fp8 ? a->tc_fp8_tflops : a->tc_f16_tflops;
        /* Per k16 step a warp issues MI*NI mma and MI + NI/2 ldmatrix: reuse ~ 2*MI*NI/(2MI+NI). */
        double mi = c->warp_m / 16.0, ni = c->warp_n / 8.0;
        double reuse = (mi * ni) / (mi + ni / 2.0); /* 64x64: 4*8/8 = 4; 32x32: 2*4/4 = 2 */
        /* Calibrated on an H100 (4096^3 fp16): 64x64 warp tiles reach ~0.65 of the mma.sync
         * rate, 64x32 ~0.72 of that. */
        eff = clampd(0.20 + 0.12 * reuse, 0.25, 0.70);
    } else {
        rate_tflops = a->fma_f32_tflops;
        /* warp_m/warp_n carry the thread tile for SIMT. */
        double tt = (double)c->warp_m * c->warp_n;
        eff = clampd(0.25 + 0.01 * tt, 0.25, 0.80);
    }
    /* Measured: a 2-stage ring runs at ~0.6 of a 3-4 stage one (the copy of the next tile is
     * exposed); block_k 64 halves barriers per mma over 32 (~5-8%). */
    if (c->async_copy)
        eff *= c->stages >= 3 ? 1.0 : 0.6;
    else
        eff *= 0.6; /* register-staged loads: load latency exposed once per tile */
    /* (An FP8 k tile of block_k holds the mma steps and barriers of a 16-bit one of half that.) */
    const int bk16 = p->fp8 ? c->block_k / 2 : c->block_k;
    if (c->tensor_core)
        eff *= bk16 >= 64 ? 1.0 : bk16 >= 32 ? 0.93 : 0.8;
    /* Latency hiding: fewer than 8 resident warps per SM leaves the tensor pipe idle. */
    double warps_sm = (double)blocks_here * c->threads / 32.0;
    eff *= clampd(warps_sm / 8.0, 0.35, 1.0);
    /* Two resident blocks overlap one's barrier/epilogue with the other's mma. */
    if (blocks_here < 2)
        eff *= 0.96;

    const double rate_sm = rate_tflops * 1e6 / a->sm_count; /* FLOP per us per SM */
    const long long k_used = kps < p->K ? kps : p->K;
    const long long ktiles = (k_used + c->block_k - 1) / c->block_k;

    /* Memory: what the blocks read (their A and B panels, through L2; rows past M or N are
     * zero-filled, not read), what crosses DRAM. */
    const double rows = (double)(p->M < c->block_m ? p->M : c->block_m) + (double)(p->N < c->block_n ? p->N : c->block_n);
    const double panel_bytes = (double)tiles * rows * (double)kps * esz;
    double vec_pen = 1.0;
    int va = c->vec_a < 1 ? 1 : c->vec_a, vb = c->vec_b < 1 ? 1 : c->vec_b;
    int vmin = va < vb ? va : vb;
    if (vmin * esz < 16)
        vec_pen = sqrt(16.0 / (vmin * esz));
    /* Operands cross DRAM once: for a convolution that is the image, not its im2col matrix
     * (the R*S-fold re-reads are the panel traffic above). */
    double uniq = p->conv ? ((double)tuner_tensor_numel(&p->op->inputs[0]) + (double)tuner_tensor_numel(&p->op->inputs[1])) * esz
                          : ((double)p->batch * (p->M * p->K + p->K * p->N)) * esz;
    uniq += (double)p->batch * p->M * p->N * tuner_dtype_size(p->out_dt);
    /* In flight: every resident block keeps stages - 1 k tiles of its operands loading
     * (register-staged loads one). */
    const int depth = c->async_copy && c->stages > 2 ? c->stages - 1 : 1;
    /* A wave runs `blocks_here` blocks per SM concurrently: its time is that many tiles' k
     * tiles on one SM. */
    const tuner__gemm_ring ring = {
        .ktiles = waves * blocks_here * (double)ktiles,
        .slots = blocks_here * depth,
        .compute_us = 2.0 * c->block_m * c->block_n * (double)c->block_k / (rate_sm * eff) *
                      (c->compute_scale > 0 ? c->compute_scale : 1.0),
        .stage_bytes = rows * c->block_k * esz,
        .dram_frac = panel_bytes > uniq ? uniq / panel_bytes : 1.0,
        .l2_penalty = vec_pen,
        .sms = tiles < a->sm_count ? (double)tiles : (double)a->sm_count,
        .tile_ktiles = (double)ktiles,
        .blocks = blocks_here,
    };
    /* A fused epilogue's arithmetic runs after each tile's main loop; other resident blocks
     * compute meanwhile. */
    double t_main = tuner__gemm_ring_us(a, &ring) +
                    waves * tuner__gemm_epilogue_us(p, (double)c->block_m * c->block_n);
    double t = t_main + LAUNCH_US;
    if (split > 1 && c->split_in_cluster) {
        t += tuner__gemm_cluster_sum_us(split);
    } else if (split > 1) {
        double ws = (double)split * p->batch * p->M * p->N * 4.0;
        t += 2.0 * ws / (a->dram_gbps * 1e3) + LAUNCH_US;
    }
    return t;
}

double tuner__gemm_tc_rate_factor(const tuner__gemm_problem *p)
{
    return p->fp8 ? 2.0 : 1.0;
}
