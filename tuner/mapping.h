/* tuner/mapping.h - Hidet task mappings: which worker (thread, lane, warp) does which task.
 *
 * A task mapping assigns a grid of tasks (1-3 dims) to a number of workers:
 *   spatial(d...)  one task per worker: prod(d) workers, worker w gets coordinate w decomposed
 *                  over d (the last dim of `order` varies fastest);
 *   repeat(d...)   one worker does every task of the grid, in order (first dim of `order` outermost);
 *   a * b          composition: workers multiply (worker w = w_a * workers(b) + w_b), task shapes
 *                  multiply dimension-wise, and task coordinate = outer * inner_shape + inner,
 *                  the outer mapping's tasks enumerated outermost.
 * Templates describe their loads, computations and stores with mappings; the emitter turns a
 * mapping into the loop nest (unrolled for repeats) and index arithmetic of one worker, and the
 * CPU enumerator is the executable definition the tests check the emitted code against.
 *
 * Mappings are small values (no allocation); composing invalid operands gives rank 0.
 */
#ifndef HIDET_TUNER_MAPPING_H
#define HIDET_TUNER_MAPPING_H

#include <stdbool.h>

#include "tuner/codegen.h"

#define TUNER_MAP_MAX_RANK 3
#define TUNER_MAP_MAX_ATOMS 8

typedef struct tuner_map_atom {
    bool spatial;                 /* false: repeat */
    int dims[TUNER_MAP_MAX_RANK];
    int order[TUNER_MAP_MAX_RANK]; /* order[0] outermost/slowest ... order[rank-1] fastest */
} tuner_map_atom;

typedef struct tuner_mapping {
    int rank; /* 1..3; 0 means invalid */
    int n_atoms;
    tuner_map_atom atoms[TUNER_MAP_MAX_ATOMS]; /* atoms[0] is the outermost factor */
} tuner_mapping;

/* spatial(d0[, d1[, d2]]) / repeat(...) in row-major order; dims beyond `rank` are ignored.
 * Returns a mapping of rank 0 when rank is not 1..3 or a used dim is < 1. */
tuner_mapping tuner_map_spatial(int rank, int d0, int d1, int d2);
tuner_mapping tuner_map_repeat(int rank, int d0, int d1, int d2);
/* Same with an explicit order (a permutation of 0..rank-1, order[0] slowest). */
tuner_mapping tuner_map_atom_ordered(bool spatial, int rank, const int *dims, const int *order);
/* a * b. Rank 0 when ranks differ, either is invalid, or more than TUNER_MAP_MAX_ATOMS atoms. */
tuner_mapping tuner_map_compose(tuner_mapping a, tuner_mapping b);

/* Number of workers the mapping needs (product over spatial atoms). 0 when invalid. */
long tuner_map_workers(const tuner_mapping *m);
/* Task shape per dimension (dims >= rank set to 1). */
void tuner_map_shape(const tuner_mapping *m, long shape[TUNER_MAP_MAX_RANK]);
/* Tasks per worker (product over repeat atoms). */
long tuner_map_tasks_per_worker(const tuner_mapping *m);

/* CPU enumerator: writes the coordinates of worker's tasks, in execution order, into
 * ret_coords[0..max) (rows of TUNER_MAP_MAX_RANK; unused dims 0). Returns the number of tasks
 * (which may exceed max: only the first max are written), or -EINVAL for a bad mapping/worker. */
long tuner_map_tasks(const tuner_mapping *m, long worker, long (*ret_coords)[TUNER_MAP_MAX_RANK],
                     long max);

/* Emits the opening of a loop nest that runs the following code once per task of the worker
 * given by the C expression `worker` (an int in [0, workers), e.g. "threadIdx.x", "lane"):
 * inside, `const int <names[d]>` holds the task coordinate of dimension d. Repeat atoms become
 * `#pragma unroll` loops in task order. `tmp` is a unique identifier prefix for temporaries (so
 * nests can be nested). Close the nest with tuner_map_emit_end() with the same mapping.
 * Inside the nest, `<tmp>_a<i>_<d>` is atom i's coordinate in dim d: for a repeat atom it is the
 * unrolled loop variable (a compile-time constant after unrolling), so it can index a register
 * array without spilling it to local memory (e.g. slot j of repeat(nv) * spatial(32) is
 * <tmp>_a0_0). */
void tuner_map_emit_begin(tuner_sb *sb, const tuner_mapping *m, const char *worker, const char *tmp,
                          const char *const names[TUNER_MAP_MAX_RANK]);
void tuner_map_emit_end(tuner_sb *sb, const tuner_mapping *m);

/* Writes a human-readable form, e.g. "spatial(4,8)*repeat(2,1)", into buf. Returns buf. */
char *tuner_map_str(const tuner_mapping *m, char *buf, int len);

#endif
