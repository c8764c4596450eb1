/* tuner/tuner.h - the tuner's public face: schedule spaces, code generation, the cost model and
 * NVRTC compilation.
 *
 * A schedule space is the list of valid candidates (template + hardware-centric parameters) for
 * one op on one target; it is the same for every input size of that op, only alignment can
 * change which candidates are valid. tuner_generate() turns (op, target, schedule) into a
 * tuner_program: one CUDA C translation unit and the launches that run it. tuner_compile() turns
 * source into PTX and a cubin with NVRTC. None of these touch a GPU or the CUDA driver, and all
 * are thread-safe (they are run on libuv's thread pool, never on the loop thread).
 *
 * Every function returns 0 or a negative errno-style code; where an error message is useful it is
 * returned in *ret_err (malloc'd, caller frees) and outputs are left untouched.
 */
#ifndef HIDET_TUNER_TUNER_H
#define HIDET_TUNER_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "op/op.h"
#include "op/tmap.h"

#define TUNER_MAX_PARAMS 16
#define TUNER_MAX_KERNELS 4
#define TUNER_MAX_ARGS 12

/* One candidate: a template and its parameter values. Names are static strings. */
typedef struct tuner_schedule {
    const char *template_name; /* e.g. "matmul_mma", "softmax_warp" */
    int n_params;
    struct {
        const char *name;
        int value;
    } params[TUNER_MAX_PARAMS];
} tuner_schedule;

/* Value of a named parameter, or `dflt` when the schedule has none by that name. */
int tuner_schedule_param(const tuner_schedule *s, const char *name, int dflt);
/* Whether s has every "name=value" of spec (comma-separated, e.g. "swap=1,split_k=2"); a NULL or
 * empty spec matches every schedule. The GPU checks pick kinds of schedules with it. */
bool tuner_schedule_matches(const tuner_schedule *s, const char *spec);

typedef struct tuner_space {
    size_t n;
    tuner_schedule *items;
    /* Hash of the space's definition (templates, parameter tables, validity rules) for this op
     * kind and target: a tuning record is only reused while it matches. 16 hex chars + NUL. */
    char hash[17];
} tuner_space;

/* Builds the valid candidates for op on target. *ret is freed with tuner_space_free().
 * Returns -EINVAL with a message when the op is not supported on that target. */
int tuner_space_build(const tuner_op *op, const tuner_target *t, tuner_space **ret, char **ret_err);
void tuner_space_free(tuner_space *s);

/* What kernel arguments refer to: buffers, and the sizes of a dynamic op's named dims. */
enum {
    TUNER_BUF_INPUT0 = 0, /* TUNER_BUF_INPUT0 + i is op.inputs[i] */
    TUNER_BUF_OUTPUT = TUNER_MAX_INPUTS,
    TUNER_BUF_WORKSPACE,
    /* TUNER_ARG_DIM0 + k: a `long long` parameter, passed by value, holding the size of
     * op.dims[k] at this launch (on the wire: {"type": "int", "dim": name}). */
    TUNER_ARG_DIM0 = 16,
};

/* How a dynamic op's launch sizes one grid dimension from the sizes of its named dims:
 *     grid = min(cap, mul * ceil(coef * product(sizes of the dims in `dims`) / div))
 * (cap 0: no cap). dims 0: the dimension is the fixed tuner_launch.grid value. A rule's value
 * at the op's tuning sizes (the dims' max) is what tuner_launch.grid holds, and it grows with the
 * sizes, so a launch that fits CUDA's limits at max fits them at every size. */
typedef struct tuner_grid_rule {
    uint8_t dims; /* bit set over op.dims */
    int64_t coef, div, mul, cap;
} tuner_grid_rule;

/* grid for the sizes sizes[0..n_dims) under rule r (r->dims != 0). */
static inline int64_t tuner_grid_rule_eval(const tuner_grid_rule *r, const int64_t *sizes)
{
    int64_t n = r->coef * tuner_dims_product(sizes, r->dims);
    int64_t g = r->mul * ((n + r->div - 1) / r->div);
    return r->cap > 0 && g > r->cap ? r->cap : g;
}

/* One kernel launch. Its parameters are the n_args arguments above in order (device pointers to
 * buffers, and dims' sizes), then n_maps TMA tensor maps (op/tmap.h; maps[i].buf is a
 * TUNER_BUF_*), each passed by value; fixed sizes and strides are baked into the code (they are
 * part of the cache key). Launches run in order on one stream. */
typedef struct tuner_launch {
    char name[64]; /* extern "C" __global__ entry point */
    unsigned grid[3], block[3];
    /* A dynamic op's grid: grid_rule[d].dims != 0 where dimension d depends on the sizes;
     * grid[d] is then its value at the op's tuning sizes. All zero for a static op. */
    tuner_grid_rule grid_rule[3];
    unsigned shared_bytes; /* dynamic shared memory; > 48 KiB needs the attribute set at load */
    int n_args;
    int args[TUNER_MAX_ARGS]; /* TUNER_BUF_*, TUNER_ARG_DIM0 + k */
    int n_maps;
    tuner_tmap maps[TUNER_MAX_TMAPS];
} tuner_launch;

typedef struct tuner_program {
    char *source; /* CUDA C, one translation unit for every launch; no #include of heavy headers */
    int n_kernels;
    tuner_launch kernels[TUNER_MAX_KERNELS];
    size_t workspace_bytes; /* 0 when no launch uses TUNER_BUF_WORKSPACE; a dynamic op's is sized
                             * for its tuning sizes (the largest), so it serves every size */
    /* The output buffer's dtype. Equals op.output.dtype for candidates; F32 for references. */
    tuner_dtype output_dtype;
} tuner_program;

/* Generates the program for one schedule. */
int tuner_generate(const tuner_op *op, const tuner_target *t, const tuner_schedule *s,
                   tuner_program **ret, char **ret_err);

/* A simple, obviously-correct program computing the same function (prologue and epilogue
 * included) with fp32 accumulation and an F32 output buffer: the verification reference. */
int tuner_reference(const tuner_op *op, const tuner_target *t, tuner_program **ret, char **ret_err);
void tuner_program_free(tuner_program *p);

/* Analytical cost model: predicted time in microseconds of one schedule on the target (occupancy,
 * waves, bytes moved, tensor-core or FMA throughput). Lower is better; never negative. */
double tuner_predict_us(const tuner_op *op, const tuner_target *t, const tuner_schedule *s);

/* Index into space->items of the fixed good default used by tune:"none". */
size_t tuner_default_index(const tuner_op *op, const tuner_target *t, const tuner_space *space);

/* Fills order[0..space->n) with item indices ranked by the cost model, best first; a dynamic
 * op's by the worst of each item's ratios to the best prediction at the top, the middle and the
 * bottom of its range, 1.2x worse where the model picks it first at none of them (tuner/space.c,
 * rank_over_range). predicted_us may be NULL; otherwise it receives
 * each item's prediction at the tuning sizes (by item index). */
void tuner_rank(const tuner_op *op, const tuner_target *t, const tuner_space *space,
                size_t *order, double *predicted_us);

/* The sizes through a dynamic op's range a measured job compares its candidates at: sample 0 is
 * the bottom (each name at its min), TUNER_RANGE_MIDDLE the geometric middle (each name at
 * floor(sqrt(min x max)) rounded down to its multiple_of: where the job times each candidate a
 * second time), TUNER_RANGE_SAMPLES - 1 the top (each name at its max: the tuning sizes); between
 * them each name steps geometrically, rounded down to its multiple_of, so that a tile height that
 * leaves much of a tile row empty anywhere in the range shows. */
#define TUNER_RANGE_SAMPLES 17
#define TUNER_RANGE_MIDDLE 8
#define TUNER_RANGE_TOP (TUNER_RANGE_SAMPLES - 1)

/* Sample k's sizes of op's names (above) into sizes. */
void tuner_range_sample(const tuner_op *op, int k, int64_t sizes[TUNER_MAX_DIMS]);

/* Whether op's named dimensions hold more than one size between them: a range with sizes below
 * its top, which the samples above step through (false for a static op). */
bool tuner_range_spans(const tuner_op *op);

/* What the model tells a measured range job (scheduler/tune.c) besides the order. The job times
 * each candidate at the top and the middle and carries those times to every sample by the model's
 * ratio for that candidate (from the middle at and below it, from the top above), then compares
 * the candidates by their worst ratio to the best carried time at any sample: how far from the
 * best kernel it has for each size each runs, which is what a range's entry is held to. */
typedef struct tuner_range_prices {
    bool ranged;   /* false for a static op or a range of one size: carry is all 1 */
    double *carry; /* caller's, TUNER_RANGE_SAMPLES per item (may be NULL): item i's prediction at
                      sample k over its prediction at the timed size it is carried from (1 where
                      it has none) */
} tuner_range_prices;

/* tuner_rank, and (prices may be NULL) a dynamic op's range prices, above. */
void tuner_rank_ranged(const tuner_op *op, const tuner_target *t, const tuner_space *space, size_t *order,
                       double *predicted_us, tuner_range_prices *prices);

/* Serialises a schedule as a JSON object string {"template": ..., "params": {...}} (malloc'd). */
char *tuner_schedule_json(const tuner_schedule *s);

/* NVRTC output for one source. */
typedef struct tuner_binary {
    char *ptx;
    size_t ptx_len; /* without the terminating NUL */
    uint8_t *cubin;
    size_t cubin_len;
    char *log;        /* NVRTC's log (may be empty, never NULL) */
    double compile_ms;
} tuner_binary;

/* Compiles source for the target to PTX and a cubin. On a compile error returns -EINVAL and
 * *ret_err holds "nvrtc: <error>\n<log>". */
int tuner_compile(const char *source, const tuner_target *t, tuner_binary **ret, char **ret_err);
void tuner_binary_free(tuner_binary *b);

/* Compiles the prelude every generated program starts with and an empty kernel for the target,
 * and throws the result away: what NVRTC does only once per process (loading its builtins
 * library, faulting in its code, setting up its front end) is paid here, at start, rather than
 * by the first job. Any thread. Returns 0 or tuner_compile's error (*ret_err as there). */
int tuner_warm_up(const tuner_target *t, char **ret_err);

/* "13.0" - the NVRTC version compiled against at run time (part of the cache key). */
const char *tuner_nvrtc_version(void);
/* Hash of the code generator's sources (part of the cache key): changes whenever a template does. */
const char *tuner_codegen_version(void);
/* The NVRTC options that decide numerics (part of the cache key), e.g. "--ftz=false ...". */
const char *tuner_numerics_flags(void);

#endif
