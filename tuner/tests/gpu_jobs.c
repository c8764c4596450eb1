/* tuner/tests/gpu_jobs.c - a GPU check's candidates compiled on threads (gpu_jobs.h). */
#include "gpu_jobs.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct job_queue {
    gpu_job *jobs;
    size_t n, next;
    pthread_mutex_t mu;
} job_queue;

static void *compile_worker(void *arg)
{
    job_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        const size_t i = q->next++;
        pthread_mutex_unlock(&q->mu);
        if (i >= q->n)
            return NULL;
        gpu_job *j = &q->jobs[i];
        if (tuner_generate(j->op, j->t, j->s, &j->prog, &j->err) == 0)
            tuner_compile(j->prog->source, j->t, &j->bin, &j->err);
    }
}

void gpu_jobs_compile(gpu_job *jobs, size_t n, int threads)
{
    job_queue q = {.jobs = jobs, .n = n};
    pthread_mutex_init(&q.mu, NULL);
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < threads && i < 64; i++)
        if (pthread_create(&th[started], NULL, compile_worker, &q) == 0)
            started++;
    if (!started)
        compile_worker(&q);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&q.mu);
}

gpu_job *gpu_jobs_pick(const tuner_op *op, const tuner_target *t, const tuner_space *sp, size_t dflt_max,
                       bool default_first, size_t *ret_n)
{
    size_t limit = dflt_max ? dflt_max : sp->n;
    const char *env = getenv("HIDET_VERIFY_MAX");
    if (env && atoi(env) > 0)
        limit = (size_t)atoi(env);
    if (limit > sp->n)
        limit = sp->n;
    const size_t def = default_first ? tuner_default_index(op, t, sp) : sp->n;
    size_t n = 0;
    gpu_job *jobs = calloc(limit + 1, sizeof(*jobs));
    if (!jobs) {
        *ret_n = 0;
        return NULL;
    }
    /* HIDET_VERIFY_PARAM=name=value[,name=value...]: only the candidates with those parameter
     * values (e.g. swap=1,split_k=2, a new kind of schedule checked apart), the default too. */
    const char *only = getenv("HIDET_VERIFY_PARAM");
    if (default_first)
        jobs[n++] = (gpu_job){.op = op, .t = t, .s = &sp->items[def]};
    for (size_t i = 0; i < limit; i++) {
        const size_t idx = limit == sp->n ? i : i * (sp->n - 1) / (limit > 1 ? limit - 1 : 1);
        if (!tuner_schedule_matches(&sp->items[idx], only))
            continue;
        if (idx != def)
            jobs[n++] = (gpu_job){.op = op, .t = t, .s = &sp->items[idx]};
    }
    *ret_n = n;
    return jobs;
}

void gpu_jobs_free(gpu_job *jobs, size_t n)
{
    for (size_t i = 0; jobs && i < n; i++) {
        tuner_program_free(jobs[i].prog);
        tuner_binary_free(jobs[i].bin);
        free(jobs[i].err);
    }
    free(jobs);
}
