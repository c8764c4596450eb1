/* tuner/tests/gpu_jobs.h - the candidates of a GPU check program (tuner_gpu_verify and the
 * attention templates' tuner_gpu_attn_*), generated and compiled on threads before they run:
 * NVRTC is nearly all of such a program's time, and tuner_generate and tuner_compile are
 * thread-safe. Part of the tuner_gpu_check library (with gpu_driver.h). */
#ifndef HIDET_TUNER_TESTS_GPU_JOBS_H
#define HIDET_TUNER_TESTS_GPU_JOBS_H

#include <stdbool.h>
#include <stddef.h>

#include "tuner/tuner.h"

typedef struct gpu_job {
    const tuner_op *op;
    const tuner_target *t;
    const tuner_schedule *s;
    tuner_program *prog; /* NULL when generation failed (err says why) */
    tuner_binary *bin;   /* NULL when generation or the compile failed */
    char *err;           /* malloc'd */
    double measured_us;  /* the caller's: a time it measured */
} gpu_job;

/* The candidates of space sp (built for op on t) that a check runs: at most HIDET_VERIFY_MAX
 * of them (from the environment; else dflt_max, 0 meaning all), evenly spread over the space;
 * with default_first, the space's default (tuner_default_index) first and not again among them.
 * A calloc'd array of *ret_n jobs (op, t and s set) for gpu_jobs_compile. */
gpu_job *gpu_jobs_pick(const tuner_op *op, const tuner_target *t, const tuner_space *sp, size_t dflt_max,
                       bool default_first, size_t *ret_n);

/* Generates and compiles jobs[0..n) (op, t and s set; prog, bin and err NULL) on up to `threads`
 * threads, on this one where none can be started; returns when all are done. */
void gpu_jobs_compile(gpu_job *jobs, size_t n, int threads);

/* Frees each job's program, binary and message, then the array itself (NULL is fine). */
void gpu_jobs_free(gpu_job *jobs, size_t n);

#endif
