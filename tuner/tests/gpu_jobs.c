/* tuner/tests/gpu_jobs.c - a GPU check's candidates compiled on threads (gpu_jobs.h). */
#include "gpu_jobs.h"

#include <pthread.h>
#include <stdlib.h>

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

void gpu_jobs_free(gpu_job *jobs, size_t n)
{
    for (size_t i = 0; jobs && i < n; i++) {
        tuner_program_free(jobs[i].prog);
        tuner_binary_free(jobs[i].bin);
        free(jobs[i].err);
    }
    free(jobs);
}
