/* scheduler/tune.c - running one job: build and rank the space, compile on libuv's thread pool,
 * measure on GPU workers, record trials, store the winner.
 *
 * NONE / MODEL: the default (or the model's best) schedule is generated and compiled on the
 * thread pool; if it does not compile the next ranked one is tried, and the job only fails when
 * none compiles. The artifact is stored with measured=false.
 *
 * MEASURE: the model's top `budget_candidates` are the candidates. Candidates with a trial under
 * the same tuning key are not measured again: their recorded result is reused. The reference is
 * compiled once; candidates compile ahead of measurement (compile_ahead) and are measured one at
 * a time per GPU of the job: on its home GPU, and on the other GPUs of the same model while they
 * are idle (pick_slot). The search stops at the candidate budget, or at
 * the time budget once one candidate passed. Every result is recorded with kc_trial_put, so a
 * space can be re-ranked later without re-measuring. Candidates that came close are timed again
 * in a final round (below). The fastest correct candidate is stored with measured=true.
 *
 * Measured ranges: a dynamic op whose range holds more than one size is served at every size but
 * its buffers (and the kernels' grid[]) are those of the top, the dims' max. Each candidate is
 * timed there, verified against the reference; once that passed (not stopped early), it is timed
 * again, unverified, at the range's middle (sched__mid_sizes: each dim at the geometric middle of
 * its range): the same buffers, the size arguments, grids and tensor maps at the middle. The
 * candidates are compared by the worst of their ratios to the best time at sizes sampled through
 * the range (the two times carried there by the model; see "comparing a measured range's
 * candidates"); latency_us, best_us and what the kernel set
 * reports stay the top's time. The top's trial is recorded under the tuning key and the middle's
 * under mid_key (sched_mid_tuning_key); a later job reuses a passing candidate only when both are
 * there (apply_trials). A kernel that fails at the middle (fault, timeout, load error) is
 * recorded as failing. Nothing is stopped early (beat_us); the final round times its finalists
 * at both sizes again. Static ops, and a range of one size, are timed once, as before.
 *
 * Fusion rule: a fused op (prologue or epilogue) whose anchor - the same op without fusion, see
 * sched_op_strip_fusion - has ok trials under the anchor's tuning key re-times only the anchor's
 * best `fused_retime_top` schedules with the fusion applied (over a range, best by the worst
 * ratio its job compared them by; when none of them passes, the rest of the ranked space is
 * tuned). Otherwise the fused op is tuned fully. Trials of a fused op are always recorded under
 * the fused op's own tuning key, never under the anchor's: the anchor's record must only hold
 * timings of the anchor itself.
 *
 * Only thread-pool work (tuner_generate, tuner_reference, tuner_compile) runs off the loop
 * thread; it reads the job's op and target, which never change after submit.
 */
#include "scheduler/sched_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hidetd_config.h"

typedef enum {
    WORK_CANDIDATE = 0, /* MEASURE: one candidate, result to a sched_cand */
    WORK_REFERENCE,     /* MEASURE: the verification reference */
    WORK_FINAL,         /* the schedule to store without measuring (NONE/MODEL, reused winner) */
    WORK_SPACE,         /* the job's schedule space, built and ranked */
    WORK_STORE,         /* the chosen kernel, written to the cache through s->store_db */
} work_kind;

struct sched_work {
    uv_work_t req;
    sched_work *prev, *next; /* job->works */
    sched_job *job;
    work_kind kind;
    sched_cand *cand;   /* WORK_CANDIDATE */
    size_t item;        /* schedule index (WORK_CANDIDATE, WORK_FINAL) */
    tuner_schedule schedule; /* copy: names are static strings */
    tuner_program *prog;
    tuner_binary *bin;
    char *err;
    int rc;
    double compile_s;
    /* WORK_SPACE: what build_space made (handed to the job when it is still running) */
    tuner_space *space;
    size_t *order;
    double *pred;
    tuner_range_prices prices; /* its carry owned */
    char msg[512];
    /* WORK_STORE: the artifact (owned: the job may end and free its binaries meanwhile) */
    kc_artifact *art;
    bool measured;
};

static void pump_measure(sched_job *j);
static void finish_measure(sched_job *j);
static void final_measured(sched_job *j, sched_cand *c, const gw_measure_result *res);
static void measure_done(void *udata, const gw_measure_result *res);
static void end_final_round(sched_job *j);
static void try_next_final(sched_job *j);
static void space_done(sched_job *j, sched_work *w);

/* ---- small helpers ---- */

/* "<what>: <detail>" into *slot unless it already holds a message. */
static void set_error(char **slot, const char *what, const char *detail)
{
    if (*slot)
        return;
    size_t n = strlen(what) + strlen(detail) + 3;
    char *p = malloc(n);
    if (!p)
        return;
    snprintf(p, n, "%s: %s", what, detail);
    *slot = p;
}

static void fail(sched_job *j, const char *code, const char *msg)
{
    sched__job_end(j, SCHED_FAILED, code, msg);
}

static void free_cand_binary(sched_cand *c)
{
    tuner_program_free(c->prog);
    tuner_binary_free(c->bin);
    c->prog = NULL;
    c->bin = NULL;
}

void sched__job_cancel_measurements(sched_job *j)
{
    /* Compilations that have not started are dropped (their completion runs with UV_ECANCELED);
     * running ones finish and are discarded. */
    for (sched_work *w = j->works; w; w = w->next)
        uv_cancel((uv_req_t *)&w->req);
    for (size_t i = 0; i < j->n_cands; i++) {
        sched_cand *c = j->cands[i];
        if (c->st == SCHED__CAND_MEASURING && c->ticket) {
            gw_ticket *t = c->ticket;
            c->ticket = NULL;
            gw_cancel(j->s->pool, t); /* the callback may run now or later; either way it discards */
        }
    }
}

void sched__job_drop_binaries(sched_job *j)
{
    /* The pool copied every request it accepted, so no binary is needed once the job ended. */
    for (size_t i = 0; i < j->n_cands; i++)
        free_cand_binary(j->cands[i]);
    tuner_program_free(j->ref_prog);
    tuner_binary_free(j->ref_bin);
    j->ref_prog = NULL;
    j->ref_bin = NULL;
    free(j->first_err);
    j->first_err = NULL;
}

void sched__job_free_run(sched_job *j)
{
    sched__job_drop_binaries(j);
    for (size_t i = 0; i < j->n_cands; i++) {
        free(j->cands[i]->schedule_json);
        free(j->cands[i]);
    }
    free(j->cands);
    j->cands = NULL;
    j->n_cands = j->cap_cands = 0;
    j->best = NULL;
    kc_trials_free(j->trials, j->n_trials);
    kc_trials_free(j->mid_trials, j->n_mid_trials);
    j->trials = NULL;
    j->n_trials = 0;
    j->mid_trials = NULL;
    j->n_mid_trials = 0;
    tuner_space_free(j->space);
    j->space = NULL;
    free(j->order);
    free(j->pred);
    free(j->prices.carry);
    j->order = NULL;
    j->pred = NULL;
    memset(&j->prices, 0, sizeof(j->prices));
}

/* Tolerances of gw.h's check by the op's numerics: the loosest dtype the anchor computes in.
 * attention is always an f16 or bf16 op (its q, k, v; an f32 mask or output cast does not make
 * it fp32) and takes that dtype's t, as matmul and softmax do: its candidates round the softmax
 * weights to the dtype for the P.V product (FlashAttention's scheme), whose error is about the
 * dtype's unit roundoff relative to the output's rms (independent roundings of weights that sum
 * to 1), 2e-3 of it for bf16 and 5e-4 for f16, well inside t * rms + t * |ref|; a fully masked
 * row is 0 in both. */
static void tolerances(const tuner_op *op, double *rtol, double *atol)
{
    bool has_f16 = false, has_bf16 = false;
    for (int i = 0; i < op->n_anchor_inputs; i++) {
        has_f16 |= op->inputs[i].dtype == TUNER_F16;
        has_bf16 |= op->inputs[i].dtype == TUNER_BF16;
    }
    has_f16 |= op->output.dtype == TUNER_F16;
    has_bf16 |= op->output.dtype == TUNER_BF16;
    double t;
    if (has_bf16)
        t = 4e-2;
    else if (has_f16)
        t = 1e-2;
    else if ((op->kind == TUNER_OP_MATMUL && op->attrs.matmul.allow_tf32) ||
             op->kind == TUNER_OP_CONV2D)
        t = 1e-2; /* tf32 tensor cores; conv2d has no flag and its fp32 templates may use them */
    else
        t = 1e-4;
    /* FP8: what its accumulation may lose, and an FP8 output's rounding to the neighbour of the
     * reference's code (op/op.h). */
    t += tuner_fp8_accum_loss(op) + tuner_fp8_step(op->output.dtype);
    *rtol = t;
    *atol = t;
}

/* ---- thread-pool work ---- */

/* The CPUs background work runs on: the process's CPUs (its affinity when the first pool thread
 * lowers itself, which every pool thread inherited) less the lowest one, left to the loop thread,
 * when there are two or more. A nice value alone does not keep a compile off the loop's core: on
 * Linux 6.18 (EEVDF) the loop thread, woken while a nice-19 compile ran on its CPU, waited 1 ms
 * or more for it hundreds of times a second (perf sched; SCHED_IDLE compiles did no better;
 * bench/results/2026-11-29-hits-tail) - the running thread's protected slice (0.7-3 ms) and the
 * loop's own lag are what EEVDF makes a waking thread wait for. A core the compiles never run
 * on has no such wait. The loop thread is not pinned: the wake-up path finds that core idle and
 * puts it there, and the loop can still move when something else holds it. */
static pthread_once_t background_cpus_once = PTHREAD_ONCE_INIT;
static cpu_set_t background_cpus;
static bool background_cpus_set;

static void background_cpus_init(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) < 0 || CPU_COUNT(&set) < 2)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            CPU_CLR(c, &set);
            break;
        }
    }
    background_cpus = set;
    background_cpus_set = true;
}

void sched_thread_background(void)
{
    static _Thread_local bool lowered;
    if (lowered)
        return;
    lowered = true;
    /* Linux applies the nice value of PRIO_PROCESS to a single thread when given its id. */
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    pthread_once(&background_cpus_once, background_cpus_init);
    if (background_cpus_set)
        (void)sched_setaffinity(0, sizeof(background_cpus), &background_cpus);
}

static int build_space(sched_job *j, const tuner_op *op, tuner_space **ret_space, size_t **ret_order,
                       double **ret_pred, tuner_range_prices *ret_prices, char *msg, size_t msg_len);

static void work_run(uv_work_t *req)
{
    sched_thread_background();
    sched_work *w = req->data;
    sched_job *j = w->job;
    if (w->kind == WORK_SPACE) {
        w->rc = build_space(j, &j->op, &w->space, &w->order, &w->pred, &w->prices, w->msg, sizeof(w->msg));
        return;
    }
    if (w->kind == WORK_STORE) {
        w->rc = kc_artifact_put(j->s->store_db, w->art);
        if (w->rc == -EIO)
            set_error(&w->err, "sqlite", kc_errmsg(j->s->store_db));
        return;
    }
    tuner_program *prog = NULL;
    if (w->kind == WORK_REFERENCE)
        w->rc = tuner_reference(&j->op, &j->target, &prog, &w->err);
    else
        w->rc = tuner_generate(&j->op, &j->target, &w->schedule, &prog, &w->err);
    if (w->rc < 0) {
        if (!w->err)
            set_error(&w->err, "generate", strerror(-w->rc));
        return;
    }
    w->prog = prog;
    double t0 = sched__now_s();
    w->rc = tuner_compile(prog->source, &j->target, &w->bin, &w->err);
    w->compile_s = sched__now_s() - t0;
    if (w->rc < 0 && !w->err)
        set_error(&w->err, "nvrtc", strerror(-w->rc));
}

static void work_done(uv_work_t *req, int status);

static sched_work *new_work(sched_job *j, work_kind kind, sched_cand *c, size_t item)
{
    sched_work *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->req.data = w;
    w->job = j;
    w->kind = kind;
    w->cand = c;
    w->item = item;
    if (kind == WORK_CANDIDATE || kind == WORK_FINAL)
        w->schedule = j->space->items[item];
    return w;
}

/* Hands a work filled in completely to the pool (the pool may run it at once). On failure the
 * work is freed, whatever it owns is the caller's again. */
static int submit_work(sched_work *w)
{
    sched_job *j = w->job;
    int rc = uv_queue_work(j->s->loop, &w->req, work_run, work_done);
    if (rc < 0) {
        free(w);
        return rc;
    }
    w->next = j->works;
    if (j->works)
        j->works->prev = w;
    j->works = w;
    sched__job_ref(j);
    j->s->outstanding++;
    return 0;
}

static int queue_work(sched_job *j, work_kind kind, sched_cand *c, size_t item)
{
    sched_work *w = new_work(j, kind, c, item);
    return w ? submit_work(w) : -ENOMEM;
}

/* ---- artifacts ---- */

/* The cache's buffer enum mirrors the tuner's, so an argument maps by value. */
_Static_assert((int)KC_BUF_INPUT0 == (int)TUNER_BUF_INPUT0, "kc_buf mirrors TUNER_BUF_*");
_Static_assert(KC_MAX_INPUTS == TUNER_MAX_INPUTS, "kc_buf mirrors TUNER_BUF_*");
_Static_assert((int)KC_BUF_OUTPUT == (int)TUNER_BUF_OUTPUT, "kc_buf mirrors TUNER_BUF_*");
_Static_assert((int)KC_BUF_WORKSPACE == (int)TUNER_BUF_WORKSPACE, "kc_buf mirrors TUNER_BUF_*");
_Static_assert(KC_MAX_KERNELS >= TUNER_MAX_KERNELS && KC_MAX_ARGS >= TUNER_MAX_ARGS &&
               KC_MAX_RANK >= TUNER_MAX_RANK, "a program's launches fit a kc_launch");
_Static_assert(sizeof(((kc_kernel *)0)->name) >= sizeof(((tuner_launch *)0)->name),
               "kernel names fit");
_Static_assert((int)KC_ARG_DIM0 == (int)TUNER_ARG_DIM0 && KC_MAX_DIMS == TUNER_MAX_DIMS,
               "a size argument maps by value");
_Static_assert(sizeof(((kc_dim *)0)->name) == sizeof(((tuner_dim *)0)->name), "dim names fit");

/* The launch description stored with the artifact: the program's launches, its workspace, and
 * the output buffer's shape and dtype (what the kernel set answers). */
void sched__fill_launch(const tuner_op *op, const tuner_program *p, kc_launch *l)
{
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < p->n_kernels && i < TUNER_MAX_KERNELS; i++) {
        const tuner_launch *t = &p->kernels[i];
        kc_kernel *k = &l->kernels[l->n_kernels++];
        snprintf(k->name, sizeof(k->name), "%s", t->name);
        for (int d = 0; d < 3; d++) {
            k->grid[d] = t->grid[d];
            k->block[d] = t->block[d];
        }
        k->shared_bytes = t->shared_bytes;
        /* A dynamic op's rules; grid[] already holds their values at the dims' max. */
        for (int d = 0; d < 3; d++)
            if (t->grid_rule[d].dims)
                k->grid_rule[d] = (kc_grid_rule){t->grid_rule[d].dims, t->grid_rule[d].coef,
                                                 t->grid_rule[d].div, t->grid_rule[d].mul,
                                                 t->grid_rule[d].cap};
        /* Buffers and sizes: kc_buf numbers them as TUNER_BUF_* and TUNER_ARG_DIM0 do. */
        for (int a = 0; a < t->n_args && a < TUNER_MAX_ARGS; a++)
            k->args[k->n_args++] = (kc_buf)t->args[a];
        /* TUNER_BUF_* and kc_buf number the buffers alike. */
        for (int m = 0; m < t->n_maps && m < KC_MAX_MAPS; m++)
            k->maps[k->n_maps++] = t->maps[m];
    }
    l->workspace_bytes = p->workspace_bytes;
    l->has_output = true;
    for (int i = 0; i < op->output.rank && i < TUNER_MAX_RANK; i++) {
        l->output_sym[l->output_rank] = op->output.sym[i];
        l->output_shape[l->output_rank++] = op->output.shape[i];
    }
    snprintf(l->output_dtype, sizeof(l->output_dtype), "%s", tuner_dtype_name(p->output_dtype));
    /* A dynamic op's dims, in the order of its size arguments; the answer names them. */
    for (int k = 0; k < op->n_dims && k < KC_MAX_DIMS; k++) {
        kc_dim *d = &l->dims[l->n_dims++];
        memcpy(d->name, op->dims[k].name, sizeof(d->name));
        d->min = op->dims[k].min;
        d->max = op->dims[k].max;
        d->multiple_of = op->dims[k].multiple_of;
    }
}

/* Who built the artifact, for people reading the cache (hidetctl cache show); how it was chosen
 * is stored as the typed kc_choice, not read back from here. */
static char *provenance_json(const sched_job *j, const char *mode)
{
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) < 0)
        host[0] = '\0';
    char *out = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    cJSON_AddStringToObject(root, "daemon", HIDETD_VERSION);
    cJSON_AddStringToObject(root, "nvrtc", tuner_nvrtc_version());
    cJSON_AddStringToObject(root, "codegen", tuner_codegen_version());
    cJSON_AddStringToObject(root, "mode", mode);
    if (j->device_name[0])
        cJSON_AddStringToObject(root, "device", j->device_name);
    else
        cJSON_AddNullToObject(root, "device");
    cJSON_AddStringToObject(root, "host", host);
    cJSON_AddNumberToObject(root, "created", (double)time(NULL));
    out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

/* The job's kernel is stored: it ends DONE (or FAILED when the cache refused it). */
static void store_done(sched_job *j, const kc_artifact *a, bool measured, int rc, const char *err)
{
    if (rc < 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "storing the kernel failed: %s", err ? err : strerror(-rc));
        fail(j, "cache_error", msg);
        return;
    }
    memcpy(j->info.artifact_key, a->key, sizeof(a->key));
    j->info.measured = measured;
    if (measured) {
        j->info.best_us = a->latency_us;
        snprintf(j->info.best_schedule, sizeof(j->info.best_schedule), "%s", a->schedule_json);
    }
    sched__job_end(j, SCHED_DONE, NULL, NULL);
}

/* Stores an artifact (owned: freed here) and then ends the job. The write goes to the thread
 * pool through the scheduler's own connection; without one, or when the work cannot be queued,
 * it is written here. */
static void store_artifact(sched_job *j, kc_artifact *a, bool measured)
{
    sched *s = j->s;
    sched_work *w = s->store_db ? new_work(j, WORK_STORE, NULL, 0) : NULL;
    if (w) {
        w->art = a;
        w->measured = measured;
        if (submit_work(w) == 0)
            return;
    }
    int rc = kc_artifact_put(s->db, a);
    store_done(j, a, measured, rc, rc == -EIO ? kc_errmsg(s->db) : NULL);
    kc_artifact_free(a);
}

static char *dup_bytes(const void *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

/* What a measured range job's artifact records of how its kernel fits the range (kc_launch
 * range_worst, which a dispatch table reads to cut the range in two): the pick's worst ratio
 * against the best candidate at each sample; 0 where that is not known. */
static double stored_range_worst(const sched_job *j, const kc_launch *l, bool measured)
{
    const double w = j->info.range_worst;
    if (!measured || l->n_dims == 0 || !(w >= 1.0))
        return 0;
    return w < KC_MAX_RANGE_WORST ? w : KC_MAX_RANGE_WORST;
}

/* Stores the chosen program and ends the job DONE (or FAILED when the cache refuses). */
static void store_and_finish(sched_job *j, size_t item, const char *schedule_json,
                             const tuner_program *prog, const tuner_binary *bin, bool measured,
                             double latency_us)
{
    kc_artifact *a = calloc(1, sizeof(*a));
    if (!a) {
        fail(j, "internal", "out of memory");
        return;
    }
    sched_artifact_key(j->info.op_key, schedule_json, a->key);
    memcpy(a->op_key, j->info.op_key, sizeof(a->op_key));
    snprintf(a->op, sizeof(a->op), "%s", tuner_op_name(j->op.kind));
    snprintf(a->target, sizeof(a->target), "%s", j->info.target);
    a->op_json = strdup(j->op_json);
    a->schedule_json = strdup(schedule_json);
    sched__fill_launch(&j->op, prog, &a->launch);
    a->launch.range_worst = stored_range_worst(j, &a->launch, measured);
    a->ptx = dup_bytes(bin->ptx, bin->ptx_len);
    a->ptx_len = bin->ptx_len;
    a->cubin = (uint8_t *)dup_bytes(bin->cubin, bin->cubin_len);
    a->cubin_len = bin->cubin_len;
    /* A "measure" job that fell back to the cost model (no GPU) stored a model choice. */
    a->choice = measured ? KC_CHOSEN_MEASURED
              : j->info.mode == TUNER_TUNE_NONE ? KC_CHOSEN_DEFAULT : KC_CHOSEN_MODEL;
    a->latency_us = measured ? latency_us : -1;
    a->predicted_us = j->pred[item];
    a->provenance_json = provenance_json(j, tuner_tune_name(j->info.mode));
    if (!a->op_json || !a->schedule_json || !a->ptx || !a->cubin || !a->provenance_json) {
        kc_artifact_free(a);
        fail(j, "internal", "out of memory");
        return;
    }
    store_artifact(j, a, measured);
}

/* ---- NONE / MODEL ---- */

/* The item tried at position `attempt`: NONE tries its default first, then the ranked order. */
static bool final_item(sched_job *j, size_t attempt, size_t *ret)
{
    size_t n = j->space->n;
    if (j->info.mode != TUNER_TUNE_NONE) {
        if (attempt >= n)
            return false;
        *ret = j->order[attempt];
        return true;
    }
    size_t dflt = tuner_default_index(&j->op, &j->target, j->space);
    if (dflt >= n)
        dflt = j->order[0];
    if (attempt == 0) {
        *ret = dflt;
        return true;
    }
    /* Ranked order without the default. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (j->order[i] == dflt)
            continue;
        if (++k == attempt) {
            *ret = j->order[i];
            return true;
        }
    }
    return false;
}

static void try_next_final(sched_job *j)
{
    size_t item;
    if (!final_item(j, j->attempt, &item)) {
        char msg[512];
        snprintf(msg, sizeof(msg), "no candidate compiled: %s", j->first_err ? j->first_err : "");
        fail(j, "compile_error", msg);
        return;
    }
    int rc = queue_work(j, WORK_FINAL, NULL, item);
    if (rc < 0)
        fail(j, "internal", "cannot queue compilation");
}

static void final_done(sched_job *j, sched_work *w)
{
    if (w->rc < 0) {
        if (!j->first_err) {
            j->first_err = w->err;
            w->err = NULL;
        }
        if (j->info.mode == TUNER_TUNE_MEASURE) {
            /* A reused winner that no longer compiles cannot be stored. */
            char msg[512];
            snprintf(msg, sizeof(msg), "the best measured candidate does not compile: %s",
                     j->first_err ? j->first_err : "");
            fail(j, "compile_error", msg);
            return;
        }
        j->info.candidates_failed++;
        j->attempt++;
        try_next_final(j);
        return;
    }
    char *sj = tuner_schedule_json(&j->space->items[w->item]);
    if (!sj) {
        fail(j, "internal", "out of memory");
        return;
    }
    bool measured = j->info.mode == TUNER_TUNE_MEASURE;
    double lat = measured && j->best ? j->best->latency_us : -1;
    if (!measured)
        j->info.candidates_done = 1;
    store_and_finish(j, w->item, sj, w->prog, w->bin, measured, lat);
    free(sj);
}

/* ---- MEASURE ---- */

static int add_cand(sched_job *j, size_t item)
{
    for (size_t i = 0; i < j->n_cands; i++)
        if (j->cands[i]->item == item)
            return 0;
    if (j->n_cands == j->cap_cands) {
        size_t cap = j->cap_cands ? 2 * j->cap_cands : 16;
        sched_cand **p = realloc(j->cands, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        j->cands = p;
        j->cap_cands = cap;
    }
    sched_cand *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->schedule_json = tuner_schedule_json(&j->space->items[item]);
    if (!c->schedule_json) {
        free(c);
        return -ENOMEM;
    }
    c->job = j;
    c->item = item;
    c->latency_us = -1;
    c->dev_slot = -1;
    c->measured_slot = -1;
    c->final_us = -1;
    c->mid_us = -1;
    c->final_mid_us = -1;
    j->cands[j->n_cands++] = c;
    return 0;
}

/* ---- comparing a measured range's candidates ----
 *
 * A static job compares its candidates by time. A measured range job compares each by its worst
 * ratio to the best candidate's time at each of the range's samples (tuner_range_sample: the
 * bottom, the middle, the top and 14 sizes between) - how far from the best kernel it has for
 * each size it runs, which is what an entry is held to (within 1.10x of the exact-size kernel at
 * every size). A candidate is timed at the top and the middle only; its time at a sample is the
 * middle's (at and below the middle) or the top's (above) carried there by the model's ratio for
 * that candidate (tuner_rank_ranged's prices): the model's shape of one kernel's time over sizes
 * - a tile row more or less, a wave more or less - is what it gets right, and a bias common to
 * the sizes cancels. The worst ratio is put in microseconds at the top (times the best top time),
 * so that it reads like a time: never less than the candidate's own top time. There is no early
 * stopping (beat_us): a candidate slow at the top may still be the best for the range when every
 * faster one loses more lower down.
 *
 * It replaced (top + middle) x the model's worst ratio below the top, which halved a candidate's
 * own loss at the top in the sum and let the model's view of the bottom outweigh what was timed:
 * for 1409..1536 rows of [n,4096] x [4096,14336] on the H200 it chose a 128x184 tile that runs a
 * ninth tile row above 1472 (1.11x the best at 1536; 306-308 us at 1500, 0.90x the exact kernel);
 * compared at the top, the middle and the bottom only, the range took 128x192 (282 us at 1500,
 * 1.00x the exact kernel), but 2049..2304 a 128x160 tile that runs 14 tile rows at 2100 where the
 * exact kernel runs 14 of 152 rows (0.944x the exact kernel, 1.05x between the samples; bench/
 * results/2026-11-30-h200-session14/c-f). The samples between are not measured on a GPU yet:
 * replayed on call f's recorded times, they choose 128x144 there (the model: 1.5% above the exact
 * kernel at 2100). */

/* Which candidates a comparison takes, with the times it reads (latency_us and mid_us: a
 * finalist's are the final round's once it passed there). */
typedef enum {
    RANGE_FIRST,          /* every candidate that passed */
    RANGE_FINAL,          /* those that passed the final round */
    RANGE_WINNER_REUSED,  /* the final round's winner and the candidates reused from earlier jobs */
} range_set;

static bool range_member(const sched_job *j, const sched_cand *c, range_set set)
{
    if (c->status != KC_TRIAL_OK || c->latency_us < 0 || c->mid_us < 0)
        return false;
    switch (set) {
    case RANGE_FIRST: return true;
    case RANGE_FINAL: return c->final_us >= 0 && c->final_mid_us >= 0;
    case RANGE_WINNER_REUSED: return c == j->best || c->reused;
    }
    return false;
}

/* Times `top` and `mid` of the candidate of `item` carried to every sample of the range (from
 * the middle at and below it, from the top above: tuner_range_prices), by carry (n_items x
 * TUNER_RANGE_SAMPLES; NULL: not carried). */
static void carry_times(const double *carry, size_t n_items, size_t item, double top, double mid,
                        double t[TUNER_RANGE_SAMPLES])
{
    const double *c = carry && item < n_items ? carry + item * TUNER_RANGE_SAMPLES : NULL;
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
        t[k] = (k <= TUNER_RANGE_MIDDLE ? mid : top) * (c ? c[k] : 1.0);
}

/* c's times at the range's samples. */
static void range_times(const sched_job *j, const sched_cand *c, double t[TUNER_RANGE_SAMPLES])
{
    carry_times(j->prices.ranged ? j->prices.carry : NULL, j->space->n, c->item, c->latency_us, c->mid_us, t);
}

/* The worst of times t's ratios to best, in microseconds at the top. */
static double range_worst(const double t[TUNER_RANGE_SAMPLES], const double best[TUNER_RANGE_SAMPLES])
{
    double worst = 1.0;
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
        worst = best[k] > 0 && t[k] / best[k] > worst ? t[k] / best[k] : worst;
    return worst * best[TUNER_RANGE_TOP];
}

/* The least time at each size over the set's candidates; false when the set is empty. */
static bool range_bests(const sched_job *j, range_set set, double best[TUNER_RANGE_SAMPLES])
{
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
        best[k] = HUGE_VAL;
    for (size_t i = 0; i < j->n_cands; i++) {
        if (!range_member(j, j->cands[i], set))
            continue;
        double t[TUNER_RANGE_SAMPLES];
        range_times(j, j->cands[i], t);
        for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
            best[k] = t[k] < best[k] ? t[k] : best[k];
    }
    return best[TUNER_RANGE_TOP] < HUGE_VAL;
}

/* The set's candidate with the least worst ratio (ties: the first); NULL when none. best receives
 * the set's least time at each sample (range_bests). */
static sched_cand *range_pick(const sched_job *j, range_set set, double best[TUNER_RANGE_SAMPLES])
{
    if (!range_bests(j, set, best))
        return NULL;
    sched_cand *win = NULL;
    double win_us = HUGE_VAL;
    for (size_t i = 0; i < j->n_cands; i++) {
        sched_cand *c = j->cands[i];
        if (!range_member(j, c, set))
            continue;
        double t[TUNER_RANGE_SAMPLES];
        range_times(j, c, t);
        const double us = range_worst(t, best);
        if (us < win_us) {
            win = c;
            win_us = us;
        }
    }
    return win;
}

/* What a candidate is compared by among the first round's: its time, or in a measured range job
 * its worst ratio against the candidates timed so far (above: j->range_best, which consider_best
 * keeps; +inf until it has both times). */
static double cand_us(const sched_job *j, const sched_cand *c)
{
    if (!j->has_mid)
        return c->latency_us;
    if (!range_member(j, c, RANGE_FIRST))
        return HUGE_VAL;
    double t[TUNER_RANGE_SAMPLES];
    range_times(j, c, t);
    return range_worst(t, j->range_best);
}

/* c (NULL: none passed, as when the job began) becomes the job's best, and what its info says;
 * in a range job its worst ratio against j->range_best, which its callers keep current. */
static void set_best(sched_job *j, sched_cand *c)
{
    j->best = c; /* the binaries of the others are trimmed by trim_binaries */
    j->info.range_worst = -1;
    if (!c) {
        j->info.best_us = j->info.best_mid_us = -1;
        j->info.best_schedule[0] = '\0';
        return;
    }
    j->info.best_us = c->latency_us;
    j->info.best_mid_us = j->has_mid ? c->mid_us : -1;
    if (j->has_mid && range_member(j, c, RANGE_FIRST) && j->range_best[TUNER_RANGE_TOP] < HUGE_VAL) {
        double t[TUNER_RANGE_SAMPLES];
        range_times(j, c, t);
        j->info.range_worst = range_worst(t, j->range_best) / j->range_best[TUNER_RANGE_TOP];
    }
    snprintf(j->info.best_schedule, sizeof(j->info.best_schedule), "%s", c->schedule_json);
}

/* c has its result: the best may change. In a range job every candidate's ratios may (c can set,
 * or by failing at the middle give up, a size's best time), so the bests are taken again and the
 * pick is made again over all. */
static void consider_best(sched_job *j, sched_cand *c)
{
    if (j->has_mid) {
        set_best(j, range_pick(j, RANGE_FIRST, j->range_best));
        return;
    }
    if (c->status != KC_TRIAL_OK || c->latency_us < 0)
        return;
    if (j->best && cand_us(j, j->best) <= cand_us(j, c))
        return;
    set_best(j, c);
}

/* The trial of schedule sj among trials; NULL when none. */
static const kc_trial *find_trial(const kc_trial *trials, size_t n_trials, const char *sj)
{
    for (size_t t = 0; t < n_trials; t++)
        if (trials[t].schedule_json && strcmp(trials[t].schedule_json, sj) == 0)
            return &trials[t];
    return NULL;
}

/* Marks candidates that already have a trial under this tuning key as done with that result. A
 * measured range job reuses a passing top trial only with the middle's passing trial (under
 * mid_key): a candidate timed at the top alone (recorded before ranges were timed twice, or a job
 * that ended between its two requests) is measured again at both, since its top time alone
 * cannot be compared with the others' (which take both). A failing top trial is reused as it is. */
static void apply_trials(sched_job *j, const kc_trial *trials, size_t n_trials)
{
    for (size_t i = 0; i < j->n_cands; i++) {
        sched_cand *c = j->cands[i];
        if (c->st != SCHED__CAND_PENDING)
            continue;
        const kc_trial *top = find_trial(trials, n_trials, c->schedule_json), *mid = NULL;
        if (!top)
            continue;
        if (j->has_mid && top->status == KC_TRIAL_OK) {
            mid = find_trial(j->mid_trials, j->n_mid_trials, c->schedule_json);
            if (!mid || mid->status != KC_TRIAL_OK || mid->latency_us < 0)
                continue;
        }
        c->mid_us = mid ? mid->latency_us : -1;
        c->st = SCHED__CAND_DONE;
        c->has_result = true;
        c->reused = true;
        c->status = top->status;
        c->latency_us = top->status == KC_TRIAL_OK ? top->latency_us : -1;
        j->info.candidates_done++;
        if (c->status != KC_TRIAL_OK && c->status != KC_TRIAL_SLOWER)
            j->info.candidates_failed++;
        if ((int)c->status >= 0 && (int)c->status < SCHED__N_TRIAL_STATUS)
            j->fail_counts[c->status]++;
        consider_best(j, c);
    }
}

/* Stores c's trial under `key` (the job's tuning key, or a range job's mid_key). A trial that
 * cannot be stored only costs a re-measurement later; the job goes on. */
static void put_trial(sched_job *j, const char *key, const sched_cand *c, kc_trial_status status, double latency,
                      double max_rel_err, const char *reason)
{
    kc_trial t;
    memset(&t, 0, sizeof(t));
    t.candidate = (int)c->item;
    t.schedule_json = c->schedule_json;
    t.status = status;
    t.latency_us = latency;
    t.max_rel_err = max_rel_err;
    t.reason = (char *)(reason && reason[0] ? reason : NULL);
    snprintf(t.device, sizeof(t.device), "%s", j->device_name);
    t.measured_at = (int64_t)time(NULL);
    (void)kc_trial_put(j->s->db, key, j->space->hash, &t);
}

static void record_trial(sched_job *j, sched_cand *c, kc_trial_status status, double latency,
                         double max_rel_err, const char *reason)
{
    c->has_result = true;
    c->status = status;
    c->latency_us = status == KC_TRIAL_OK ? latency : -1;
    put_trial(j, j->tuning_key, c, status, latency, max_rel_err, reason);
    j->info.candidates_done++;
    /* An early-stopped candidate ran correctly; it only lost. */
    if (status != KC_TRIAL_OK && status != KC_TRIAL_SLOWER) {
        j->info.candidates_failed++;
        j->s->stats.candidates_failed++;
    }
    if ((int)status >= 0 && (int)status < SCHED__N_TRIAL_STATUS)
        j->fail_counts[status]++;
    consider_best(j, c);
}

/* Whether c was timed correctly on a GPU in this job (not reused from the cache's trials). */
static bool timed_here(const sched_cand *c)
{
    return c->measured_slot >= 0 && c->status == KC_TRIAL_OK && c->latency_us >= 0;
}

/* How many candidates timed on c's GPU in this job are faster than c (ties by position), by
 * cand_us. */
static int rank_on_gpu(const sched_job *j, const sched_cand *c)
{
    int n = 0;
    const double cu = cand_us(j, c);
    for (size_t i = 0; i < j->n_cands; i++) {
        const sched_cand *o = j->cands[i];
        if (o == c || !timed_here(o) || o->measured_slot != c->measured_slot)
            continue;
        const double ou = cand_us(j, o);
        if (ou < cu || (ou == cu && o->item < c->item))
            n++;
    }
    return n;
}

/* The least cand_us taken on the job's GPU `slot` in this job; 0 when none. */
static double best_on_gpu(const sched_job *j, int slot)
{
    double best = 0;
    for (size_t i = 0; i < j->n_cands; i++) {
        const sched_cand *c = j->cands[i];
        if (!timed_here(c) || c->measured_slot != slot)
            continue;
        const double u = cand_us(j, c);
        if (best == 0 || u < best)
            best = u;
    }
    return best;
}

/* Whether the job's kernels are long enough for its final round to heat the GPU first
 * (SCHED__HEAT_*): its best's time (a range job's at the top) so far. It only falls. */
static bool heated(const sched_job *j)
{
    return j->best && j->best->latency_us >= SCHED__HEAT_MIN_US;
}

/* Whether c goes to the final round (see SCHED__FINAL_*): on several GPUs among the fastest of
 * its GPU; on one, among the fastest and within the margin of the best (more of them, and a
 * wider margin, in a heated job). In a static job, once out, a candidate stays out: ranks only
 * grow and the best only falls as candidates are timed, and a job stops being heated but never
 * starts (a range's ratios move with its bests: see trim_binaries). */
static bool finalist(const sched_job *j, const sched_cand *c)
{
    if (!timed_here(c))
        return false;
    if (j->n_devs > 1)
        return rank_on_gpu(j, c) < SCHED__FINAL_PER_GPU;
    const bool hot = heated(j);
    return rank_on_gpu(j, c) < (hot ? SCHED__FINAL_HEATED : SCHED__FINAL_ONE_GPU) &&
           cand_us(j, c) <= (1.0 + (hot ? SCHED__HEAT_MARGIN : SCHED__FINAL_MARGIN)) *
                                best_on_gpu(j, c->measured_slot);
}

/* Frees the binaries of measured candidates that are neither the best nor finalists: in a static
 * job they can no longer win. In a range job a later candidate can move a size's best time and
 * so bring one back among the best: it then enters no final round (only candidates with their
 * binary do), and should it win, its kernel is compiled again (finish_measure). Memory stays at a
 * few binaries per job either way. */
static void trim_binaries(sched_job *j)
{
    for (size_t i = 0; i < j->n_cands; i++) {
        sched_cand *c = j->cands[i];
        if (c->st == SCHED__CAND_DONE && c->bin && c != j->best && !finalist(j, c))
            free_cand_binary(c);
    }
}

/* The time a candidate about to run on the job's GPU `slot` must beat, or be stopped early: the
 * job's best on one GPU; with several, the best timed on that same GPU (GPUs of one model still
 * differ by a few percent, see the final round). 0 (timed in full) in a measured range job: no
 * top time alone rules a candidate out there (see "comparing a measured range's candidates"). */
static double beat_us(const sched_job *j, int slot)
{
    if (j->has_mid)
        return 0;
    return j->n_devs <= 1 ? (j->best ? cand_us(j, j->best) : 0) : best_on_gpu(j, slot);
}

/* A trial timed again (or found failing) in the final round replaces the first record. */
static void rewrite_trial(sched_job *j, sched_cand *c, double max_rel_err, const char *reason)
{
    put_trial(j, j->tuning_key, c, c->status, c->latency_us, max_rel_err, reason);
}

/* Records (or replaces) c's timing at the range's middle under the job's mid_key: what a later
 * job needs to reuse c's top trial (apply_trials). */
static void put_mid_trial(sched_job *j, sched_cand *c, kc_trial_status status, double latency,
                          const char *reason)
{
    put_trial(j, j->mid_key, c, status, status == KC_TRIAL_OK ? latency : -1, 0, reason);
}

/* "at the middle of the range (n=1145): <why>" into out. */
static void mid_reason(const sched_job *j, const char *why, char *out, size_t n)
{
    int len = snprintf(out, n, "at the middle of the range (");
    for (int k = 0; k < j->op.n_dims && len >= 0 && (size_t)len < n; k++)
        len += snprintf(out + len, n - (size_t)len, "%s%s=%lld", k ? ", " : "", j->op.dims[k].name,
                        (long long)j->mid_sizes[k]);
    if (len >= 0 && (size_t)len < n)
        snprintf(out + len, n - (size_t)len, "): %s", why && why[0] ? why : "failed");
}

/* The worker's launches of a program: buffers by their index in the request, and a dynamic op's
 * sizes as scalars - by default each dim's max: the sizes the op's shapes (and so the request's
 * buffers) and the launches' grid[] hold, what a candidate is measured at. */
int sched__map_launches_at(const tuner_op *op, const tuner_program *p, gw_module *m,
                           const int *bufmap, const int64_t *sizes)
{
    int rc = 0;
    m->n_launches = p->n_kernels < GW_MAX_LAUNCHES ? p->n_kernels : GW_MAX_LAUNCHES;
    for (int i = 0; i < m->n_launches; i++) {
        const tuner_launch *l = &p->kernels[i];
        gw_launch *g = &m->launches[i];
        snprintf(g->name, sizeof(g->name), "%s", l->name);
        for (int d = 0; d < 3; d++) {
            g->grid[d] = l->grid[d];
            if (sizes && l->grid_rule[d].dims)
                g->grid[d] = (unsigned)tuner_grid_rule_eval(&l->grid_rule[d], sizes);
            g->block[d] = l->block[d];
        }
        g->shared_bytes = l->shared_bytes;
        g->n_args = l->n_args < GW_MAX_ARGS ? l->n_args : GW_MAX_ARGS;
        for (int a = 0; a < g->n_args; a++) {
            int b = l->args[a];
            const int dim = b - TUNER_ARG_DIM0;
            g->values[a] = 0;
            if (dim >= 0 && dim < op->n_dims && dim < TUNER_MAX_DIMS) {
                g->args[a] = GW_ARG_I64;
                g->values[a] = sizes ? sizes[dim] : op->dims[dim].max;
                continue;
            }
            /* An argument that names no buffer of the request stays out of range, so the request
             * is refused (-1 would read as GW_ARG_I64). */
            const int idx = (b >= 0 && b <= TUNER_BUF_WORKSPACE) ? bufmap[b] : -1;
            g->args[a] = idx >= 0 ? idx : GW_MAX_BUFFERS;
        }
        g->n_maps = l->n_maps < GW_MAX_MAPS ? l->n_maps : GW_MAX_MAPS;
        for (int k = 0; k < g->n_maps; k++) {
            const int b = l->maps[k].buf;
            g->maps[k] = l->maps[k];
            /* A map whose dimensions follow the sizes is encoded for these sizes, as a client
             * launching the kernel at them would. */
            if (sizes && tuner_tmap_bind(&l->maps[k], sizes, &g->maps[k]) < 0)
                rc = -EINVAL;
            g->maps[k].buf = (b >= 0 && b <= TUNER_BUF_WORKSPACE) ? bufmap[b] : -1;
        }
    }
    return rc;
}

void sched__map_launches(const tuner_op *op, const tuner_program *p, gw_module *m,
                         const int *bufmap)
{
    (void)sched__map_launches_at(op, p, m, bufmap, NULL);
}

bool sched__mid_sizes(const tuner_op *op, int64_t sizes[TUNER_MAX_DIMS])
{
    tuner_range_sample(op, TUNER_RANGE_MIDDLE, sizes);
    /* (below the top wherever a dim's range holds two sizes or more: sqrt(min * max) < max) */
    return tuner_range_spans(op);
}

static void set_image(gw_module *m, const tuner_binary *b)
{
    if (b->cubin && b->cubin_len) {
        m->image = b->cubin;
        m->image_len = b->cubin_len;
    } else {
        m->image = (const uint8_t *)b->ptx;
        m->image_len = b->ptx_len + 1; /* PTX is passed NUL-terminated */
    }
}

static uint64_t ws_elems(size_t bytes)
{
    return (uint64_t)((bytes + 3) / 4);
}

/* Builds the worker request for one candidate: inputs, the candidate's output and workspace, the
 * reference's F32 output and workspace. With `sizes` (a measured range job's middle), the same
 * buffers, the candidate's launches at those sizes (sched__map_launches_at) and no check: the
 * reference is not sent, the top's request verified the candidate. < 0 when the candidate's
 * tensor maps do not bind at `sizes`. */
static int build_request(sched_job *j, sched_cand *c, gw_measure_req *r, const int64_t *sizes)
{
    const tuner_op *op = &j->op;
    memset(r, 0, sizeof(*r));
    r->id = j->info.id * 100000u + c->item;
    int cand_map[TUNER_BUF_WORKSPACE + 1], ref_map[TUNER_BUF_WORKSPACE + 1];
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        cand_map[i] = ref_map[i] = -1;
    int n = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        r->buffers[n] = (gw_buffer){GW_BUF_INPUT, (gw_dtype)op->inputs[i].dtype,
                                    (uint64_t)tuner_tensor_numel(&op->inputs[i])};
        if (tuner_dtype_is_int(op->inputs[i].dtype))
            tuner_int_fill_range(op, i, &r->int_range[n][0], &r->int_range[n][1]);
        cand_map[TUNER_BUF_INPUT0 + i] = ref_map[TUNER_BUF_INPUT0 + i] = n++;
    }
    uint64_t out_elems = (uint64_t)tuner_tensor_numel(&op->output);
    r->buffers[n] = (gw_buffer){GW_BUF_OUTPUT, (gw_dtype)c->prog->output_dtype, out_elems};
    r->output_buffer = cand_map[TUNER_BUF_OUTPUT] = n++;
    if (c->prog->workspace_bytes) {
        r->buffers[n] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, ws_elems(c->prog->workspace_bytes)};
        cand_map[TUNER_BUF_WORKSPACE] = n++;
    }
    r->buffers[n] = (gw_buffer){GW_BUF_REF_OUTPUT, GW_F32, out_elems};
    r->ref_output_buffer = ref_map[TUNER_BUF_OUTPUT] = n++;
    if (j->ref_prog->workspace_bytes) {
        r->buffers[n] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, ws_elems(j->ref_prog->workspace_bytes)};
        ref_map[TUNER_BUF_WORKSPACE] = n++;
    }
    r->n_buffers = n;
    r->warmup = 3;
    r->min_reps = 10;
    r->max_reps = 200;
    r->min_time_ms = 20;
    set_image(&r->candidate, c->bin);
    if (sizes) {
        /* The reference's buffers stay: the worker keeps one op's inputs by the request's
         * buffers (gpu_workers/measure.c), so this request finds the top's. */
        r->ref_output_buffer = -1;
        return sched__map_launches_at(op, c->prog, &r->candidate, cand_map, sizes);
    }
    sched__map_launches(op, c->prog, &r->candidate, cand_map);
    set_image(&r->reference, j->ref_bin);
    sched__map_launches(op, j->ref_prog, &r->reference, ref_map);
    r->check = true;
    tolerances(op, &r->rtol, &r->atol);
    /* Attention's rows (a query's D outputs) differ in scale: a causal op's first queries
     * average a few values of V, its last thousands. Each is held to its own row's scale where
     * that is the larger (gpu_workers/compare.h). */
    r->row_len = op->kind == TUNER_OP_ATTENTION ? op->output.shape[op->output.rank - 1] : 0;
    return 0;
}

/* A heated final round's request (SCHED__HEAT_*): heat_ms, and the first round's best as the
 * heater of every other finalist, on the same inputs and output, with a workspace of its own when
 * it needs one. Heated by itself, a tile that draws less power kept a higher clock than it gets
 * among other kernels: FP8 row/col 8192x14336x4096 on an H200 timed a 128x256 tile as fast as a
 * pingpong 128x128 one (768 against 769 us) that ran 8% ahead of it in bench's alternation with
 * cuBLASLt (bench/results/2026-12-01-h200-session24, c). Behind one common neighbour the
 * finalists all run at the clock it leaves them. Without room for the workspace, or when the best
 * writes another output dtype, the candidate heats itself. */
static void set_heating(sched_job *j, const sched_cand *c, gw_measure_req *r, const int64_t *sizes)
{
    r->heat_ms = SCHED__HEAT_MS;
    const sched_cand *h = j->best;
    if (!h || h == c || !h->bin || h->prog->output_dtype != c->prog->output_dtype ||
        (h->prog->workspace_bytes && r->n_buffers >= GW_MAX_BUFFERS))
        return;
    int map[TUNER_BUF_WORKSPACE + 1];
    for (int i = 0; i <= TUNER_BUF_WORKSPACE; i++)
        map[i] = -1;
    for (int i = 0; i < j->op.n_inputs; i++)
        map[TUNER_BUF_INPUT0 + i] = i; /* build_request lays the inputs out first */
    map[TUNER_BUF_OUTPUT] = r->output_buffer;
    gw_measure_req q = *r;
    if (h->prog->workspace_bytes) {
        q.buffers[q.n_buffers] = (gw_buffer){GW_BUF_SCRATCH, GW_F32, ws_elems(h->prog->workspace_bytes)};
        map[TUNER_BUF_WORKSPACE] = q.n_buffers++;
    }
    set_image(&q.heater, h->bin);
    if (sizes) {
        if (sched__map_launches_at(&j->op, h->prog, &q.heater, map, sizes) < 0)
            return;
    } else {
        sched__map_launches(&j->op, h->prog, &q.heater, map);
    }
    *r = q;
}

static kc_trial_status trial_status(const gw_measure_result *res)
{
    switch (res->status) {
    case GW_OK: return res->early_stopped ? KC_TRIAL_SLOWER : KC_TRIAL_OK;
    case GW_WRONG: return KC_TRIAL_WRONG;
    case GW_FAULT: return KC_TRIAL_FAULT;
    case GW_TIMEOUT: return KC_TRIAL_TIMEOUT;
    case GW_LOAD_ERROR: return KC_TRIAL_LOAD_ERROR;
    case GW_WORKER_DIED: return KC_TRIAL_WORKER_DIED;
    default: return KC_TRIAL_WORKER_DIED;
    }
}

/* Sends c's request at the range's middle to the job's GPU `slot`: in the first round holding
 * that GPU as the top's request did, in the final round as one more answer the round waits for.
 * 0, or < 0 (c left DONE) when the request cannot be made or the pool refuses it. */
static int send_mid(sched_job *j, sched_cand *c, int slot, bool final)
{
    gw_measure_req req;
    if (build_request(j, c, &req, j->mid_sizes) < 0)
        return -ERANGE; /* told apart from the pool's refusals */
    if (final && j->info.final_heated)
        set_heating(j, c, &req, j->mid_sizes);
    int rc;
    c->at_mid = true;
    c->st = SCHED__CAND_MEASURING;
    if (final) {
        c->in_final = true;
        j->n_final_pending++;
    } else {
        c->dev_slot = slot;
        j->dev_busy[slot] = true;
    }
    j->n_measuring++;
    j->s->outstanding++;
    sched__job_ref(j);
    gw_ticket *t = NULL;
    rc = gw_measure(j->s->pool, j->devs[slot], j->target.sm, &req, measure_done, c, &t);
    if (rc < 0) {
        j->s->outstanding--;
        j->refs--; /* cannot reach zero: the caller's request holds the job */
        j->n_measuring--;
        if (final) {
            c->in_final = false;
            j->n_final_pending--;
        } else {
            j->dev_busy[slot] = false;
            c->dev_slot = -1;
        }
        c->at_mid = false;
        c->st = SCHED__CAND_DONE;
        return rc;
    }
    if (c->st == SCHED__CAND_MEASURING && c->at_mid)
        c->ticket = t; /* unless the callback already ran */
    return 0;
}

/* c failed at the range's middle (`why`): a kernel that faults, hangs or cannot be sent at a size
 * of its range is no kernel for the range. Both its records say so, the middle's under mid_key. */
static void fail_at_mid(sched_job *j, sched_cand *c, kc_trial_status st, const char *why, double max_rel_err)
{
    char reason[sizeof(((gw_measure_result *)0)->reason) + 128];
    mid_reason(j, why, reason, sizeof(reason));
    put_mid_trial(j, c, st, -1, reason);
    record_trial(j, c, st, -1, max_rel_err, reason);
}

/* The first round's answer at the middle: c's trial (its top time, or the middle's failure) is
 * recorded now, with the middle's under mid_key. */
static void mid_measured(sched_job *j, sched_cand *c, const gw_measure_result *res)
{
    c->st = SCHED__CAND_DONE;
    kc_trial_status st = trial_status(res);
    if (st == KC_TRIAL_OK) {
        c->mid_us = res->median_us;
        put_mid_trial(j, c, KC_TRIAL_OK, res->median_us, NULL);
        record_trial(j, c, KC_TRIAL_OK, c->top_us, c->top_rel_err, NULL);
        return;
    }
    fail_at_mid(j, c, st, res->reason, res->max_rel_err);
}

static void measure_done(void *udata, const gw_measure_result *res)
{
    sched_cand *c = udata;
    sched_job *j = c->job;
    sched *s = j->s;
    s->outstanding--;
    c->ticket = NULL;
    j->n_measuring--;
    if (c->dev_slot >= 0)
        j->dev_busy[c->dev_slot] = false;
    int slot = c->dev_slot;
    c->dev_slot = -1;
    const bool at_mid = c->at_mid;
    if (!c->in_final)
        c->at_mid = false; /* final_measured reads it */

    if (j->ended) {
        c->st = SCHED__CAND_DONE;
        free_cand_binary(c);
        goto out;
    }
    if (c->in_final) {
        final_measured(j, c, res);
        goto out;
    }
    if (res->status == GW_CANCELLED) {
        /* Not ours (we only cancel ended jobs): the pool is closing. Nothing was measured. */
        c->st = SCHED__CAND_DONE;
        j->cancelled_measurements++;
        j->no_gpu_left = true;
        j->stop = true;
        free_cand_binary(c);
    } else if (res->status == GW_NO_DEVICE) {
        /* That GPU went out of service before running it: try another one. */
        if (slot >= 0)
            j->dev_gone[slot] = true;
        c->st = SCHED__CAND_READY;
        j->n_ready++;
    } else if (at_mid) {
        mid_measured(j, c, res);
        trim_binaries(j);
    } else {
        c->st = SCHED__CAND_DONE;
        s->stats.candidates_measured++;
        if (res->device >= 0 && res->device < 32)
            j->info.measured_on |= 1u << res->device;
        c->measured_slot = slot;
        kc_trial_status st = trial_status(res);
        double lat = res->status == GW_OK ? res->median_us : -1;
        if (j->has_mid && st == KC_TRIAL_OK) {
            /* Timed and verified at the top: now at the middle, on the same GPU. */
            c->top_us = lat;
            c->top_rel_err = res->max_rel_err;
            int rc = send_mid(j, c, slot, false);
            if (rc == 0)
                goto pump;
            if (rc == -ENODEV) {
                /* That GPU is gone: time the candidate again, at both sizes, on another. */
                j->dev_gone[slot] = true;
                c->st = SCHED__CAND_READY;
                j->n_ready++;
                goto pump;
            }
            char why[160];
            if (rc == -ERANGE)
                snprintf(why, sizeof(why), "its tensor maps do not bind at these sizes");
            else
                snprintf(why, sizeof(why), "the worker pool refused the request: %s", strerror(-rc));
            fail_at_mid(j, c, KC_TRIAL_LOAD_ERROR, why, 0);
            free_cand_binary(c);
        } else {
            record_trial(j, c, st, lat, res->max_rel_err, res->reason);
        }
        trim_binaries(j);
    }
pump:
    pump_measure(j);
out:
    sched__job_unref(j);
    sched__after_outstanding(s);
}

static bool device_usable(sched_job *j, int slot)
{
    if (j->dev_gone[slot])
        return false;
    const gw_device_info *devs = NULL;
    size_t n = gw_pool_devices(j->s->pool, &devs);
    int d = j->devs[slot];
    if (d < 0 || (size_t)d >= n || devs[d].state == GW_DEV_OUT_OF_SERVICE) {
        j->dev_gone[slot] = true;
        return false;
    }
    return true;
}

/* Whether the job's GPU `slot` has nothing to do right now (no request running or queued). */
static bool device_idle(sched_job *j, int slot)
{
    const gw_device_info *devs = NULL;
    size_t n = gw_pool_devices(j->s->pool, &devs);
    return (size_t)j->devs[slot] < n && devs[j->devs[slot]].state == GW_DEV_READY;
}

/* Where the job's next candidate goes: its home GPU when the job has nothing running there,
 * else another GPU that is idle; -1 to wait. A job thus stays on one GPU while other jobs keep
 * the others busy (each GPU pays for a job's inputs and reference once, and its times need no
 * final round), and spreads over every GPU that would otherwise wait. A home gone out of
 * service is replaced by the next usable GPU. */
static int pick_slot(sched_job *j)
{
    if (!device_usable(j, j->home))
        for (int d = 0; d < j->n_devs; d++)
            if (device_usable(j, d)) {
                j->home = d;
                break;
            }
    if (device_usable(j, j->home) && !j->dev_busy[j->home])
        return j->home;
    for (int d = 0; d < j->n_devs; d++)
        if (d != j->home && device_usable(j, d) && !j->dev_busy[d] && device_idle(j, d))
            return d;
    return -1;
}

static void start_measurements(sched_job *j)
{
    for (size_t i = 0; i < j->n_cands && j->n_ready > 0 && !j->stop && !j->ended; i++) {
        sched_cand *c = j->cands[i];
        if (c->st != SCHED__CAND_READY)
            continue;
        int alive = 0;
        for (int d = 0; d < j->n_devs; d++)
            alive += device_usable(j, d);
        if (alive == 0) {
            j->no_gpu_left = true;
            j->stop = true;
            return;
        }
        int slot = pick_slot(j);
        if (slot < 0)
            return; /* its home GPU times one of its candidates, and no other GPU is idle */
        gw_measure_req req;
        (void)build_request(j, c, &req, NULL); /* at the top: nothing to bind */
        req.beat_us = beat_us(j, slot);
        c->st = SCHED__CAND_MEASURING;
        c->dev_slot = slot;
        j->dev_busy[slot] = true;
        j->n_ready--;
        j->n_measuring++;
        j->s->outstanding++;
        sched__job_ref(j);
        gw_ticket *t = NULL;
        int rc = gw_measure(j->s->pool, j->devs[slot], j->target.sm, &req, measure_done, c, &t);
        if (rc < 0) {
            j->s->outstanding--;
            j->refs--; /* cannot reach zero: the active list holds the job */
            j->n_measuring--;
            j->dev_busy[slot] = false;
            c->dev_slot = -1;
            if (rc == -ENODEV) {
                /* That GPU is gone: retry this candidate on another one. */
                j->n_ready++;
                j->dev_gone[slot] = true;
                c->st = SCHED__CAND_READY;
                i--;
                continue;
            }
            /* The pool refused this request (a launch it cannot run, an image too large): the
             * candidate's fault, not the GPU's. */
            char reason[160];
            snprintf(reason, sizeof(reason), "the worker pool refused the request: %s",
                     strerror(-rc));
            c->st = SCHED__CAND_DONE;
            record_trial(j, c, KC_TRIAL_LOAD_ERROR, -1, 0, reason);
            free_cand_binary(c);
            continue;
        }
        if (c->st == SCHED__CAND_MEASURING)
            c->ticket = t; /* unless the callback already ran */
    }
}

static void summary(sched_job *j, char *buf, size_t n)
{
    int len = snprintf(buf, n, "no candidate passed (%zu candidates", j->n_cands);
    for (int st = 1; st < SCHED__N_TRIAL_STATUS && len >= 0 && (size_t)len < n; st++)
        if (j->fail_counts[st])
            len += snprintf(buf + len, n - (size_t)len, ", %d %s", j->fail_counts[st],
                            kc_trial_status_name((kc_trial_status)st));
    int unmeasured = 0;
    for (size_t i = 0; i < j->n_cands; i++)
        unmeasured += !j->cands[i]->has_result;
    if (unmeasured && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, ", %d not measured%s", unmeasured,
                        j->no_gpu_left ? ": no GPU left" : j->stopped_by_budget ? ": time budget" : "");
    if (len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ")");
}

static void finish_measure(sched_job *j)
{
    sched_cand *b = j->best;
    if (!b && j->no_gpu_left && !j->s->cfg.measure_requires_gpu) {
        /* Every GPU of the job went away before a candidate passed: answer like a request that
         * found no GPU at all, from the cost model. */
        j->info.mode = TUNER_TUNE_MODEL;
        snprintf(j->info.warning, sizeof(j->info.warning),
                 "no GPU worker for sm_%d: ranked by the cost model, not measured", j->target.sm);
        j->attempt = 0;
        try_next_final(j);
        return;
    }
    if (!b) {
        char msg[512];
        summary(j, msg, sizeof(msg));
        fail(j, j->no_gpu_left && j->info.candidates_done == 0 ? "no_gpu" : "no_valid_candidate", msg);
        return;
    }
    if (b->prog && b->bin) {
        store_and_finish(j, b->item, b->schedule_json, b->prog, b->bin, true, b->latency_us);
        return;
    }
    /* The winner's timing was reused from an earlier job. Its artifact may still be stored under
     * the same key: then only the selection and timing need to be written again. */
    char key[KC_KEY_LEN + 1];
    sched_artifact_key(j->info.op_key, b->schedule_json, key);
    kc_artifact *a = NULL;
    if (kc_artifact_get(j->s->db, key, &a) == 0) {
        a->choice = KC_CHOSEN_MEASURED;
        a->latency_us = b->latency_us;
        a->launch.range_worst = stored_range_worst(j, &a->launch, true);
        store_artifact(j, a, true);
        return;
    }
    if (queue_work(j, WORK_FINAL, NULL, b->item) < 0)
        fail(j, "internal", "cannot queue compilation");
}

/* When the re-timed anchor schedules all failed, the fused op is tuned like any other. */
static bool widen_after_retime(sched_job *j)
{
    if (!j->retime || j->best || j->stop)
        return false;
    j->retime = false;
    size_t before = j->n_cands;
    size_t limit = (size_t)j->budget_candidates;
    for (size_t i = 0; i < j->space->n && j->n_cands - before < limit; i++)
        if (add_cand(j, j->order[i]) < 0)
            break;
    j->info.candidates_total = (int)j->n_cands;
    apply_trials(j, j->trials, j->n_trials);
    return j->n_cands > before;
}

/* ---- the final round ----
 *
 * GPUs of one model still differ by a few percent (clocks, temperature, power limits), so
 * comparing times taken on different GPUs would let the GPU pick the winner. A job measured on
 * several GPUs (see pick_slot) therefore stops candidates early only against the best of their
 * own GPU, and ends with a round in which the best of each GPU is timed again, one after
 * another, on one GPU (the one that timed the best, if still usable): the fastest there wins.
 * On one GPU the run-to-run spread of a single timing (a few percent on short kernels) does the
 * same to candidates that came close: the best was often just the luckiest run. So a job
 * measured on one GPU ends with a round too, when two or more candidates came within
 * SCHED__FINAL_MARGIN of its best: they are timed again one after another and the fastest of
 * the round wins. Their records are rewritten with those times; a candidate that fails its
 * second check (wrong, fault) is recorded as failing. In a measured range job a finalist is
 * timed again at both sizes, on the round's GPU (the middle once the top passed), and compared
 * by their worst ratios among the round's times: keeping its first middle time would mix the
 * round's GPU with the first round's. */

/* The job's device slot for a round: the best's, else any usable one; -1 when none is left. */
static int final_slot(sched_job *j)
{
    if (j->best->measured_slot >= 0 && device_usable(j, j->best->measured_slot))
        return j->best->measured_slot;
    for (int d = 0; d < j->n_devs; d++)
        if (device_usable(j, d))
            return d;
    return -1;
}

/* Starts the round when it is due; returns whether it started (its end finishes the job). */
static bool start_final_round(sched_job *j)
{
    if (j->final_round_done || !j->best || j->no_gpu_left)
        return false;
    j->final_round_done = true;
    /* Room for either kind of round. */
    sched_cand *fin[GW_MAX_DEVICES * SCHED__FINAL_PER_GPU + SCHED__FINAL_HEATED];
    int n = 0;
    bool mixed = false;
    for (size_t i = 0; i < j->n_cands && n < (int)(sizeof(fin) / sizeof(fin[0])); i++) {
        sched_cand *c = j->cands[i];
        if (c->bin && finalist(j, c)) {
            mixed = mixed || (n > 0 && c->measured_slot != fin[0]->measured_slot);
            fin[n++] = c;
        }
    }
    /* Several GPUs: only when the finalists came from more than one. One GPU: when two came
     * close. */
    int slot = (j->n_devs > 1 ? mixed : n >= 2) ? final_slot(j) : -1;
    if (slot < 0)
        return false;
    j->final_slot = slot;
    j->info.final_heated = heated(j); /* (SCHED__HEAT_*) */
    const gw_device_info *devs = NULL;
    size_t n_pool = gw_pool_devices(j->s->pool, &devs);
    j->info.final_device = (size_t)j->devs[slot] < n_pool ? devs[j->devs[slot]].index : j->devs[slot];
    /* Held while the requests are queued, so that a callback running meanwhile cannot end the
     * round before the last one is out. */
    j->n_final_pending = 1;
    for (int i = 0; i < n; i++) {
        sched_cand *c = fin[i];
        gw_measure_req req;
        (void)build_request(j, c, &req, NULL); /* beat_us 0: timed in full */
        if (j->info.final_heated)
            set_heating(j, c, &req, NULL);
        c->in_final = true;
        c->st = SCHED__CAND_MEASURING;
        j->n_measuring++;
        j->n_final_pending++;
        j->s->outstanding++;
        sched__job_ref(j);
        gw_ticket *t = NULL;
        if (gw_measure(j->s->pool, j->devs[slot], j->target.sm, &req, measure_done, c, &t) < 0) {
            j->s->outstanding--;
            j->refs--; /* cannot reach zero: the active list holds the job */
            j->n_measuring--;
            j->n_final_pending--;
            c->in_final = false;
            c->st = SCHED__CAND_DONE;
            continue;
        }
        j->info.final_candidates++;
        if (c->st == SCHED__CAND_MEASURING)
            c->ticket = t; /* unless the callback already ran */
    }
    if (--j->n_final_pending > 0)
        return true;
    if (j->info.final_candidates == 0) {
        j->info.final_device = -1; /* nothing could be queued: the first round's best stands */
        return false;
    }
    end_final_round(j); /* every answer came back already */
    return true;
}

/* The round is over: the fastest candidate of the round wins (in a range job, by its worst ratio
 * among the round's times), unless a result reused from an earlier job is faster still (in a range
 * job: compared with the winner alone). Without any time from the round (its GPU went away), the
 * first round's best stands unless the round found it failing. */
static void end_final_round(sched_job *j)
{
    sched_cand *first = j->best, *win = NULL;
    if (j->has_mid) {
        double best[TUNER_RANGE_SAMPLES];
        win = range_pick(j, RANGE_FINAL, best);
        if (win || first->status != KC_TRIAL_OK) {
            j->best = win;
            if (win)
                j->best = range_pick(j, RANGE_WINNER_REUSED, best);
            else
                consider_best(j, first);
        }
        /* The round rewrote its finalists' times: the bests set_best reports against. */
        (void)range_bests(j, RANGE_FIRST, j->range_best);
    } else {
        for (size_t i = 0; i < j->n_cands; i++) {
            sched_cand *c = j->cands[i];
            if (c->final_us >= 0 && (!win || c->final_us < win->final_us))
                win = c;
        }
        if (win || first->status != KC_TRIAL_OK) {
            j->best = win;
            for (size_t i = 0; i < j->n_cands; i++)
                if (!win || j->cands[i]->reused)
                    consider_best(j, j->cands[i]);
        }
    }
    if (j->best)
        set_best(j, j->best); /* the info: the round's times */
    j->info.final_changed = j->best != first;
    trim_binaries(j);
    finish_measure(j);
}

/* A finalist's time at one size after the round: the worse of its two timings where both ran on
 * the round's GPU, each with the module loaded for it then; from another GPU the round's alone.
 * A kernel fast in some runs and slow in others is held to its slow one: on an H200 one cubin
 * of [104,4096]x[4096,4096] (swapped 64x56, 12 stages), loaded six times with buffers of its
 * own each time, ran 11.9 us in one of the six and 13.2-14.9 in the others, in one process,
 * where its neighbours repeated to 1% (bench/results/2026-11-30-h200-session16, calls a and
 * c); a round that kept only its lucky timing would pick it. */
static double final_us_of(const sched_job *j, const sched_cand *c, double first_us, double round_us)
{
    return c->measured_slot == j->final_slot && first_us > round_us ? first_us : round_us;
}

static void final_measured(sched_job *j, sched_cand *c, const gw_measure_result *res)
{
    const bool at_mid = c->at_mid;
    c->at_mid = false;
    c->in_final = false;
    c->st = SCHED__CAND_DONE;
    j->n_final_pending--;
    kc_trial_status st = trial_status(res);
    if (res->status == GW_OK && j->has_mid && !at_mid) {
        /* The top again; then the middle, on the round's GPU (a request that cannot be made
         * leaves the candidate out of the round: nothing learnt). */
        c->top_us = final_us_of(j, c, c->latency_us, res->median_us);
        c->top_rel_err = res->max_rel_err;
        snprintf(c->top_reason, sizeof(c->top_reason), "%.159s", res->reason);
        if (send_mid(j, c, j->final_slot, true) == 0)
            return; /* the round now waits for the middle's answer instead */
    } else if (res->status == GW_OK) {
        j->s->stats.candidates_measured++;
        if (at_mid) {
            c->final_us = c->latency_us = c->top_us;
            c->final_mid_us = c->mid_us = final_us_of(j, c, c->mid_us, res->median_us);
            /* Each size's record says how the round timed it (heated, behind a heater). */
            put_mid_trial(j, c, KC_TRIAL_OK, c->mid_us, res->reason[0] ? res->reason : NULL);
            rewrite_trial(j, c, c->top_rel_err, c->top_reason[0] ? c->top_reason : NULL);
        } else {
            c->final_us = c->latency_us = final_us_of(j, c, c->latency_us, res->median_us);
            rewrite_trial(j, c, res->max_rel_err, res->reason);
        }
    } else if (st == KC_TRIAL_WRONG || st == KC_TRIAL_FAULT || st == KC_TRIAL_TIMEOUT ||
               st == KC_TRIAL_LOAD_ERROR) {
        /* Passed once, failed now: not a kernel to hand out. */
        j->s->stats.candidates_failed++;
        j->info.candidates_failed++;
        c->status = st;
        c->latency_us = -1;
        char reason[sizeof(res->reason) + 128];
        snprintf(reason, sizeof(reason), "%s", res->reason);
        if (at_mid) {
            mid_reason(j, res->reason, reason, sizeof(reason));
            put_mid_trial(j, c, st, -1, reason);
        }
        rewrite_trial(j, c, res->max_rel_err, reason);
    }
    /* Cancelled, no device, a dead worker: nothing learnt about the candidate. */
    if (j->n_final_pending == 0)
        end_final_round(j);
}

/* How many candidates the job may have compiling or compiled and waiting for a GPU. Compiling a
 * candidate (NVRTC, hundreds of ms of one core) usually takes longer than timing it (tens of ms
 * of a GPU), so a fixed small number leaves the GPUs idle: automatically, a job takes its share
 * of the compile threads, one thread left free for space builds and kernel stores. */
static int compile_ahead(const sched_job *j)
{
    const sched_config *cfg = &j->s->cfg;
    if (cfg->compile_ahead > 0)
        return cfg->compile_ahead;
    int per_gpu = 2 * (j->n_devs > 1 ? j->n_devs : 1);
    int running = j->s->n_running > 1 ? j->s->n_running : 1;
    int share = (cfg->compile_threads - 1) / running;
    return share > per_gpu ? share : per_gpu;
}

/* Queues compiles up to the job's compile_ahead; < 0 when the job failed. */
static int queue_compiles(sched_job *j)
{
    int ahead = compile_ahead(j);
    while (!j->stop && j->n_compiling + j->n_ready < ahead && j->next_compile < j->n_cands) {
        sched_cand *c = j->cands[j->next_compile];
        if (c->st != SCHED__CAND_PENDING) {
            j->next_compile++;
            continue;
        }
        if (queue_work(j, WORK_CANDIDATE, c, c->item) < 0) {
            fail(j, "internal", "cannot queue compilation");
            return -1;
        }
        j->next_compile++;
        c->st = SCHED__CAND_COMPILING;
        j->n_compiling++;
    }
    return 0;
}

static void pump_measure(sched_job *j)
{
    if (j->ended)
        return;
    double budget = j->budget_s > 0 ? j->budget_s : j->s->cfg.budget_s;
    /* The time budget ends the search, not the job: until one candidate passed, it goes on (the
     * candidate budget still bounds it), so a short budget never turns a tunable op into a
     * failure. */
    if (!j->stop && j->best && (double)(uv_hrtime() - j->start_ns) / 1e9 > budget) {
        j->stop = true;
        j->stopped_by_budget = true;
    }
    /* Compiles are queued, candidates handed to idle GPUs, and compiles queued again in the room
     * the hand-over made, so the next candidate compiles while the GPUs time these. */
    if (queue_compiles(j) < 0)
        return;
    if (j->ref_bin && !j->stop)
        start_measurements(j);
    if (j->ended || queue_compiles(j) < 0)
        return;

    if (j->n_compiling > 0 || j->n_measuring > 0 || j->ref_compiling)
        return;
    /* Nothing in flight. With work left that could not be started (no GPU left for it), the job
     * ends with what it has. */
    if (j->next_compile < j->n_cands || j->n_ready > 0)
        j->stop = true;
    if (widen_after_retime(j)) {
        pump_measure(j);
        return;
    }
    /* Binaries compiled but never measured are dropped. */
    for (size_t i = 0; i < j->n_cands; i++) {
        sched_cand *c = j->cands[i];
        if (c->st == SCHED__CAND_READY) {
            c->st = SCHED__CAND_DONE;
            if (c != j->best)
                free_cand_binary(c);
        }
    }
    j->n_ready = 0;
    if (start_final_round(j))
        return;
    finish_measure(j);
}

static void candidate_done(sched_job *j, sched_work *w)
{
    sched_cand *c = w->cand;
    j->n_compiling--;
    if (w->rc < 0) {
        c->st = SCHED__CAND_DONE;
        char reason[512];
        snprintf(reason, sizeof(reason), "%s", w->err ? w->err : "compile failed");
        record_trial(j, c, KC_TRIAL_COMPILE_ERROR, -1, 0, reason);
        pump_measure(j);
        return;
    }
    c->prog = w->prog;
    c->bin = w->bin;
    w->prog = NULL;
    w->bin = NULL;
    c->st = SCHED__CAND_READY;
    j->n_ready++;
    pump_measure(j);
}

static void reference_done(sched_job *j, sched_work *w)
{
    j->ref_compiling = false;
    if (w->rc < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "the verification reference does not compile: %s",
                 w->err ? w->err : "");
        fail(j, "compile_error", msg);
        return;
    }
    j->ref_prog = w->prog;
    j->ref_bin = w->bin;
    w->prog = NULL;
    w->bin = NULL;
    pump_measure(j);
}

static void work_done(uv_work_t *req, int status)
{
    sched_work *w = req->data;
    sched_job *j = w->job;
    sched *s = j->s;
    s->outstanding--;
    if (w->prev)
        w->prev->next = w->next;
    else
        j->works = w->next;
    if (w->next)
        w->next->prev = w->prev;
    if (w->bin) {
        s->stats.candidates_compiled++;
        s->stats.compile_seconds_total += w->compile_s;
    }
    if (w->kind == WORK_CANDIDATE && j->ended) {
        j->n_compiling--;
        w->cand->st = SCHED__CAND_DONE;
    } else if (w->kind == WORK_REFERENCE && j->ended) {
        j->ref_compiling = false;
    } else if (status == UV_ECANCELED && w->kind != WORK_STORE) {
        /* Only work of ended jobs is cancelled; anything else would be a failure of that step. */
        w->rc = -ECANCELED;
    }
    if (!j->ended) {
        switch (w->kind) {
        case WORK_CANDIDATE: candidate_done(j, w); break;
        case WORK_REFERENCE: reference_done(j, w); break;
        case WORK_FINAL: final_done(j, w); break;
        case WORK_SPACE: space_done(j, w); break;
        case WORK_STORE: store_done(j, w->art, w->measured, w->rc, w->err); break;
        }
    }
    tuner_space_free(w->space);
    free(w->order);
    free(w->pred);
    free(w->prices.carry);
    kc_artifact_free(w->art);
    tuner_program_free(w->prog);
    tuner_binary_free(w->bin);
    free(w->err);
    free(w);
    sched__job_unref(j);
    sched__after_outstanding(s);
}

/* ---- starting a job ---- */

static int build_space(sched_job *j, const tuner_op *op, tuner_space **ret_space, size_t **ret_order,
                       double **ret_pred, tuner_range_prices *ret_prices, char *msg, size_t msg_len)
{
    char *err = NULL;
    tuner_space *sp = NULL;
    int rc = tuner_space_build(op, &j->target, &sp, &err);
    if (rc < 0 || !sp || sp->n == 0) {
        snprintf(msg, msg_len, "%s", err ? err : "no schedule of any template applies to this op");
        free(err);
        tuner_space_free(sp);
        return rc < 0 ? rc : -ENOTSUP;
    }
    free(err);
    size_t *order = calloc(sp->n, sizeof(*order));
    double *pred = ret_pred ? calloc(sp->n, sizeof(*pred)) : NULL;
    double *carry = ret_prices ? calloc(sp->n * TUNER_RANGE_SAMPLES, sizeof(*carry)) : NULL;
    if (!order || (ret_pred && !pred) || (ret_prices && !carry)) {
        free(order);
        free(pred);
        free(carry);
        tuner_space_free(sp);
        snprintf(msg, msg_len, "out of memory");
        return -ENOMEM;
    }
    tuner_range_prices prices = {.carry = carry};
    tuner_rank_ranged(op, &j->target, sp, order, pred, ret_prices ? &prices : NULL);
    *ret_space = sp;
    *ret_order = order;
    if (ret_pred)
        *ret_pred = pred;
    if (ret_prices)
        *ret_prices = prices;
    return 0;
}

/* A passing anchor trial and what ranks it: its time, or for an anchor over a range its
 * worst ratio (range_worst, as the anchor's job compared it). */
typedef struct anchor_rank {
    const kc_trial *t;
    double us;
    size_t pos; /* in kc_trials_get's order (by latency): ties keep it */
} anchor_rank;

static int anchor_rank_cmp(const void *a, const void *b)
{
    const anchor_rank *x = a, *y = b;
    if (x->us != y->us)
        return x->us < y->us ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Fused op with a tuned anchor: candidates are the anchor's best ok schedules that exist in the
 * fused space too - for an anchor over a range, best by its worst ratio (one without its middle
 * trial after those with one). Returns how many were added. */
static size_t add_anchor_best(sched_job *j, const gw_device_info *dev)
{
    tuner_op anchor;
    if (!sched_op_strip_fusion(&j->op, &anchor))
        return 0;
    tuner_space *asp = NULL;
    size_t *aorder = NULL;
    tuner_range_prices aprices = {0};
    char msg[256];
    if (build_space(j, &anchor, &asp, &aorder, NULL, &aprices, msg, sizeof(msg)) < 0)
        return 0;
    free(aorder);
    const size_t n_items = asp->n;
    char akey[KC_KEY_LEN + 1];
    kc_trial *trials = NULL, *mids = NULL;
    size_t n_trials = 0, n_mids = 0, added = 0;
    if (sched_tuning_key(&anchor, &j->target, dev, asp->hash, akey) < 0 ||
        kc_trials_get(j->s->db, akey, &trials, &n_trials) < 0)
        n_trials = 0;
    tuner_space_free(asp);
    int64_t mid_sizes[TUNER_MAX_DIMS];
    if (n_trials && sched__mid_sizes(&anchor, mid_sizes)) {
        char mkey[KC_KEY_LEN + 1];
        sched_mid_tuning_key(akey, mid_sizes, anchor.n_dims, mkey);
        if (kc_trials_get(j->s->db, mkey, &mids, &n_mids) < 0)
            n_mids = 0;
    }
    anchor_rank *rank = n_trials ? calloc(n_trials, sizeof(*rank)) : NULL;
    /* Over a range: each passing trial's times carried to the range's samples (as range_times),
     * the least at each, then each one's worst ratio to them (range_worst). */
    double (*at)[TUNER_RANGE_SAMPLES] = n_mids ? calloc(n_trials, sizeof(*at)) : NULL;
    double best[TUNER_RANGE_SAMPLES];
    for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
        best[k] = HUGE_VAL;
    size_t n_rank = 0;
    for (size_t t = 0; rank && t < n_trials; t++) {
        if (trials[t].status != KC_TRIAL_OK || !trials[t].schedule_json)
            continue;
        double us = trials[t].latency_us;
        if (n_mids) {
            const kc_trial *m = find_trial(mids, n_mids, trials[t].schedule_json);
            const size_t item = (size_t)trials[t].candidate;
            us = HUGE_VAL;
            if (at && m && m->status == KC_TRIAL_OK && m->latency_us >= 0) {
                double *tt = at[n_rank];
                carry_times(aprices.ranged ? aprices.carry : NULL, n_items, item, trials[t].latency_us,
                            m->latency_us, tt);
                for (int k = 0; k < TUNER_RANGE_SAMPLES; k++)
                    best[k] = tt[k] < best[k] ? tt[k] : best[k];
                us = 0; /* ranked below, once the bests are known */
            }
        }
        rank[n_rank] = (anchor_rank){&trials[t], us, n_rank};
        n_rank++;
    }
    for (size_t r = 0; at && r < n_rank; r++)
        if (rank[r].us == 0)
            rank[r].us = range_worst(at[r], best);
    free(at);
    if (n_rank > 1)
        qsort(rank, n_rank, sizeof(*rank), anchor_rank_cmp);

    int top = j->s->cfg.fused_retime_top;
    for (size_t r = 0; r < n_rank && (int)added < top; r++) {
        for (size_t i = 0; i < j->space->n; i++) {
            size_t item = j->order[i];
            char *sj = tuner_schedule_json(&j->space->items[item]);
            bool same = sj && strcmp(sj, rank[r].t->schedule_json) == 0;
            free(sj);
            if (same) {
                size_t before = j->n_cands;
                if (add_cand(j, item) == 0 && j->n_cands > before)
                    added++;
                break;
            }
        }
    }
    free(rank);
    free(aprices.carry);
    kc_trials_free(mids, n_mids);
    kc_trials_free(trials, n_trials);
    return added;
}

static void start_measure(sched_job *j)
{
    sched *s = j->s;
    int idx[GW_MAX_DEVICES];
    int n = gw_pool_usable_for_sm(s->pool, j->target.sm, idx);
    const gw_device_info *devs = NULL;
    gw_pool_devices(s->pool, &devs);
    const gw_device_info *first = &devs[idx[0]];
    /* One tuning key per job: only GPUs identical to the first (name, SM count, driver) measure
     * it, so trials recorded under that key are all comparable. */
    j->n_devs = 0;
    for (int i = 0; i < n; i++) {
        const gw_device_info *d = &devs[idx[i]];
        if (strcmp(d->name, first->name) == 0 && d->sm_count == first->sm_count &&
            d->driver_version / 1000 == first->driver_version / 1000)
            j->devs[j->n_devs++] = idx[i];
    }
    /* Home: the GPU fewest running jobs call home. */
    int homed[GW_MAX_DEVICES] = {0};
    for (const sched_job *o = s->active; o; o = o->next)
        if (o != j && o->running && o->n_devs > 0)
            for (int d = 0; d < j->n_devs; d++)
                homed[d] += j->devs[d] == o->devs[o->home];
    j->home = 0;
    for (int d = 1; d < j->n_devs; d++)
        if (homed[d] < homed[j->home])
            j->home = d;
    gw_device_info dev = *first;
    snprintf(j->device_name, sizeof(j->device_name), "%s", dev.name);
    if (sched_tuning_key(&j->op, &j->target, &dev, j->space->hash, j->tuning_key) < 0) {
        fail(j, "internal", "out of memory");
        return;
    }

    if (add_anchor_best(j, &dev) > 0) {
        j->retime = true;
    } else {
        size_t limit = (size_t)(j->budget_candidates > 0 ? j->budget_candidates
                                                         : s->cfg.budget_candidates);
        for (size_t i = 0; i < j->space->n && i < limit; i++) {
            if (add_cand(j, j->order[i]) < 0) {
                fail(j, "internal", "out of memory");
                return;
            }
        }
    }
    if (!j->budget_candidates)
        j->budget_candidates = s->cfg.budget_candidates;
    j->info.candidates_total = (int)j->n_cands;

    if (kc_trials_get(s->db, j->tuning_key, &j->trials, &j->n_trials) < 0) {
        j->trials = NULL; /* an unreadable record only costs re-measuring */
        j->n_trials = 0;
    }
    j->has_mid = sched__mid_sizes(&j->op, j->mid_sizes);
    if (j->has_mid) {
        j->info.n_range_dims = j->op.n_dims < TUNER_MAX_DIMS ? j->op.n_dims : TUNER_MAX_DIMS;
        for (int k = 0; k < j->info.n_range_dims; k++) {
            snprintf(j->info.range_dims[k], sizeof(j->info.range_dims[k]), "%s", j->op.dims[k].name);
            j->info.range_top[k] = j->op.dims[k].max;
            j->info.range_mid[k] = j->mid_sizes[k];
        }
        sched_mid_tuning_key(j->tuning_key, j->mid_sizes, j->op.n_dims, j->mid_key);
        if (kc_trials_get(s->db, j->mid_key, &j->mid_trials, &j->n_mid_trials) < 0) {
            j->mid_trials = NULL;
            j->n_mid_trials = 0;
        }
    }
    apply_trials(j, j->trials, j->n_trials);

    /* Everything reused: no reference needed, the winner is known. */
    bool all_done = true;
    for (size_t i = 0; i < j->n_cands; i++)
        all_done = all_done && j->cands[i]->st == SCHED__CAND_DONE;
    if (all_done && (j->best || !j->retime)) {
        finish_measure(j);
        return;
    }
    if (queue_work(j, WORK_REFERENCE, NULL, 0) < 0) {
        fail(j, "internal", "cannot queue compilation");
        return;
    }
    j->ref_compiling = true;
    pump_measure(j);
}

/* The space is built and ranked (rc 0; else msg says why not): measure, or pick and store one
 * schedule. */
static void start_with_space(sched_job *j, int rc, const char *why)
{
    sched *s = j->s;
    char msg[512];
    if (rc < 0) {
        fail(j, rc == -ENOMEM ? "internal" : "unsupported", why);
        return;
    }
    if (j->info.mode == TUNER_TUNE_MEASURE) {
        int idx[GW_MAX_DEVICES];
        if (gw_pool_usable_for_sm(s->pool, j->target.sm, idx) == 0) {
            /* The GPU went away between submit and start. */
            if (s->cfg.measure_requires_gpu) {
                snprintf(msg, sizeof(msg), "no GPU worker for sm_%d", j->target.sm);
                fail(j, "no_gpu", msg);
                return;
            }
            j->info.mode = TUNER_TUNE_MODEL;
            snprintf(j->info.warning, sizeof(j->info.warning),
                     "no GPU worker for sm_%d: ranked by the cost model, not measured", j->target.sm);
        } else {
            start_measure(j);
            return;
        }
    }
    j->info.candidates_total = 1;
    j->attempt = 0;
    try_next_final(j);
}

static void space_done(sched_job *j, sched_work *w)
{
    if (w->rc == 0) {
        j->space = w->space;
        j->order = w->order;
        j->pred = w->pred;
        j->prices = w->prices;
        w->space = NULL;
        w->order = NULL;
        w->pred = NULL;
        w->prices.carry = NULL;
    }
    start_with_space(j, w->rc, w->msg);
}

void sched__job_start(sched_job *j)
{
    /* Building and ranking a space takes milliseconds (hundreds of candidates through the cost
     * model): on the thread pool, so that cache hits are not held up meanwhile. */
    if (queue_work(j, WORK_SPACE, NULL, 0) == 0)
        return;
    char msg[512];
    int rc = build_space(j, &j->op, &j->space, &j->order, &j->pred, &j->prices, msg, sizeof(msg));
    start_with_space(j, rc, msg);
}
