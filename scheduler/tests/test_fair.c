/* scheduler/tests/test_fair.c - the queue's order between clients (fair queueing), exactly.
 *
 * White-box: the scheduler runs with its real queue (submit, join, quotas, the pump, job end),
 * but a job that leaves the queue is not tuned: the start hook (sched->start_job) records which
 * job started and leaves it running, and the test ends it (as a finished job would end) to let
 * the next one start. With max_running_jobs = 1 the recorded order is the order jobs would run
 * in, with no NVRTC or worker in the way, so hundreds of jobs take milliseconds. test_sched.c
 * checks the same turns with real jobs.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/sched_int.h"
#include "tuner/tuner.h"

#include "tests/check.h"

/* ---- environment: loop, cache, scheduler whose jobs only record that they started ---- */

#define MAX_STARTS 2048

typedef struct started {
    uint64_t id;
    char peer[64];
    int priority;
} started;

static started g_started[MAX_STARTS];
static int g_n_started;
static sched_job *g_running; /* the job started last and not ended yet */

static void record_start(sched_job *j)
{
    if (g_n_started < MAX_STARTS) {
        started *st = &g_started[g_n_started];
        st->id = j->info.id;
        snprintf(st->peer, sizeof(st->peer), "%s", j->peer);
        st->priority = j->info.priority;
    }
    g_n_started++;
    g_running = j;
}

typedef struct env {
    uv_loop_t loop;
    char dir[128];
    kc_db *db;
    sched *s;
} env;

static void env_open(env *e, int max_queued, int per_peer, int blocking_per_peer)
{
    memset(e, 0, sizeof(*e));
    g_n_started = 0;
    g_running = NULL;
    CHECK(uv_loop_init(&e->loop) == 0);
    snprintf(e->dir, sizeof(e->dir), "/tmp/hidetd-fair-test-XXXXXX");
    if (!mkdtemp(e->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/kc.db", e->dir);
    char *err = NULL;
    if (kc_open(path, &e->db, &err) < 0) {
        fprintf(stderr, "kc_open: %s\n", err ? err : "?");
        exit(1);
    }
    sched_config cfg;
    sched_config_defaults(&cfg);
    cfg.max_running_jobs = 1;
    cfg.max_queued_jobs = max_queued;
    cfg.max_queued_per_peer = per_peer;
    cfg.max_blocking_per_peer = blocking_per_peer;
    CHECK(sched_new(&e->loop, e->db, NULL, &cfg, &e->s) == 0);
    e->s->start_job = record_start;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void flag_cb(void *udata)
{
    *(int *)udata = 1;
}

static void env_close(env *e)
{
    int drained = 0;
    sched_drain(e->s, 0, flag_cb, &drained);
    for (int i = 0; i < 1000 && !drained; i++)
        uv_run(&e->loop, UV_RUN_NOWAIT);
    CHECK(drained);
    sched_free(e->s);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&e->loop) == 0);
    kc_close(e->db);
    nftw(e->dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* Lets the pump run: the queue's head starts if nothing runs. */
static void pump(env *e)
{
    uv_run(&e->loop, UV_RUN_NOWAIT);
}

/* Ends the running job (as a finished job ends) and lets the next one start. */
static void finish_running(env *e)
{
    CHECK(g_running != NULL);
    if (!g_running)
        return;
    sched_job *j = g_running;
    g_running = NULL;
    sched__job_end(j, SCHED_DONE, NULL, NULL);
    pump(e);
}

/* Runs every queued job to its end; returns how many started. */
static int finish_all(env *e)
{
    int before = g_n_started;
    while (g_running)
        finish_running(e);
    return g_n_started - before;
}

/* ---- ops and requests ---- */

static tuner_op softmax_f16(int64_t rows, int64_t d)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_SOFTMAX;
    op.n_inputs = op.n_anchor_inputs = 1;
    op.inputs[0].rank = 2;
    op.inputs[0].shape[0] = rows;
    op.inputs[0].shape[1] = d;
    op.inputs[0].dtype = TUNER_F16;
    op.inputs[0].align = 16;
    op.output = op.inputs[0];
    return op;
}

/* Submits client peer's op number i (distinct ops: distinct keys) at priority; returns the job
 * id, 0 on failure (rc in *ret_rc when given). */
static uint64_t submit(env *e, const char *peer, int i, int priority, int *ret_rc)
{
    tuner_op op = softmax_f16(1 + i / 1024, 64 * (1 + i % 1024));
    sched_request r;
    memset(&r, 0, sizeof(r));
    r.op = &op;
    r.target = (tuner_target){90, false};
    r.mode = TUNER_TUNE_NONE;
    r.priority = priority;
    r.peer = peer;
    uint64_t id = 0;
    int rc = sched_submit(e->s, &r, NULL, NULL, &id, NULL);
    if (ret_rc)
        *ret_rc = rc;
    return rc == 0 ? id : 0;
}

/* Where job id started (index into g_started), -1 if it did not. */
static int start_pos(uint64_t id)
{
    for (int i = 0; i < g_n_started && i < MAX_STARTS; i++)
        if (g_started[i].id == id)
            return i;
    return -1;
}

/* How many jobs of peer started between positions from (inclusive) and to (exclusive). */
static int starts_of(const char *peer, int from, int to)
{
    int n = 0;
    for (int i = from; i < to && i < MAX_STARTS; i++)
        n += strcmp(g_started[i].peer, peer) == 0;
    return n;
}

/* ---- cases ---- */

/* Client A has `flood` jobs queued (one of them running); client B submits one op: B's job is
 * the next to start (at most one more of A's may come first, and none does here). Before fair
 * queueing it started after all of A's. */
static void test_flood(int flood)
{
    env e;
    env_open(&e, 2 * flood + 8, flood + 4, 1);
    int rc = 0;
    for (int i = 0; i < flood; i++) {
        CHECK(submit(&e, "uid:1000", i, SCHED_PRIO_NORMAL, &rc) != 0);
        if (rc) {
            fprintf(stderr, "flood job %d: %d\n", i, rc);
            break;
        }
    }
    pump(&e);
    CHECK(g_n_started == 1 && strcmp(g_started[0].peer, "uid:1000") == 0);
    /* A few of A's jobs run through before B comes. */
    finish_running(&e);
    finish_running(&e);
    int b_at = g_n_started;
    uint64_t b = submit(&e, "token:b", 5000, SCHED_PRIO_NORMAL, NULL);
    CHECK(b != 0);
    pump(&e);
    CHECK(g_n_started == b_at); /* A's job still runs */
    finish_running(&e);
    int pos = start_pos(b);
    CHECK(pos >= 0);
    CHECK(starts_of("uid:1000", b_at, pos) <= 1);
    if (pos < 0 || starts_of("uid:1000", b_at, pos) > 1)
        fprintf(stderr, "flood %d: B started at %d, %d of A's jobs after it came\n", flood, pos,
                starts_of("uid:1000", b_at, pos < 0 ? g_n_started : pos));
    /* B comes back with one more while A still floods: again next but for at most one of A's. */
    finish_running(&e);
    int b2_at = g_n_started;
    uint64_t b2 = submit(&e, "token:b", 5001, SCHED_PRIO_NORMAL, NULL);
    finish_running(&e);
    finish_running(&e);
    int pos2 = start_pos(b2);
    CHECK(pos2 >= 0 && starts_of("uid:1000", b2_at, pos2) <= 1);
    finish_all(&e);
    CHECK(g_n_started == flood + 2);
    env_close(&e);
}

/* Three clients submit three ops each, one client after the other, in one loop iteration: the
 * jobs run one of each client in turn, each client's in its own order. */
static void test_three_clients(void)
{
    env e;
    env_open(&e, 64, 16, 4);
    const char *peers[3] = {"uid:1", "uid:2", "token:c"};
    uint64_t ids[3][3];
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 3; k++)
            ids[c][k] = submit(&e, peers[c], c * 10 + k, SCHED_PRIO_NORMAL, NULL);
    pump(&e);
    finish_all(&e);
    CHECK(g_n_started == 9);
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < 3; c++)
            CHECK(start_pos(ids[c][k]) == k * 3 + c);
    env_close(&e);

    /* A client that arrives while the others are in their second round joins the round being
     * served: it runs before their third jobs. */
    env_open(&e, 64, 16, 4);
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 4; k++)
            CHECK(submit(&e, peers[c], c * 10 + k, SCHED_PRIO_NORMAL, NULL) != 0);
    pump(&e);          /* round 0: uid:1 runs */
    finish_running(&e); /* round 0: uid:2 runs */
    finish_running(&e); /* round 1: uid:1 runs */
    uint64_t late = submit(&e, peers[2], 99, SCHED_PRIO_NORMAL, NULL);
    finish_all(&e);
    CHECK(g_n_started == 9);
    /* uid:1 r0, uid:2 r0, uid:1 r1, uid:2 r1, token:c r1, uid:1 r2, ... */
    CHECK(start_pos(late) == 4);
    CHECK(strcmp(g_started[3].peer, "uid:2") == 0 && strcmp(g_started[5].peer, "uid:1") == 0);
    env_close(&e);
}

/* Priorities still come first: turns only order jobs of one priority. */
static void test_priorities_dominate(void)
{
    env e;
    env_open(&e, 64, 32, 16);
    uint64_t bg = submit(&e, "uid:2", 0, SCHED_PRIO_BACKGROUND, NULL);
    uint64_t a[6];
    for (int i = 0; i < 6; i++)
        a[i] = submit(&e, "uid:1", 1 + i, SCHED_PRIO_BLOCKING, NULL);
    uint64_t bn = submit(&e, "uid:2", 10, SCHED_PRIO_NORMAL, NULL);
    uint64_t an = submit(&e, "uid:1", 11, SCHED_PRIO_NORMAL, NULL);
    pump(&e);
    finish_all(&e);
    CHECK(g_n_started == 9);
    for (int i = 0; i < 6; i++)
        CHECK(start_pos(a[i]) == i); /* all of uid:1's blocking jobs, though uid:2 waits */
    CHECK(start_pos(bn) == 6 && start_pos(an) == 7);
    CHECK(start_pos(bg) == 8);
    env_close(&e);
}

/* Joining a queued job: the raise of its priority is charged to the joiner's own quota (so it
 * cannot lift the job past the blocking cap), and the job runs in the joiner's turn. */
static void test_join_raise_cap(void)
{
    env e;
    env_open(&e, 64, 16, 2);
    uint64_t a[8];
    for (int i = 0; i < 8; i++)
        a[i] = submit(&e, "uid:1", i, SCHED_PRIO_NORMAL, NULL);
    /* uid:1 joins its own queued jobs at blocking: two raises fit its blocking cap, no more. */
    for (int i = 1; i < 6; i++)
        CHECK(submit(&e, "uid:1", i, SCHED_PRIO_BLOCKING, NULL) == a[i]);
    sched_job_info info;
    int blocking = 0;
    for (int i = 0; i < 8; i++) {
        CHECK(sched_job_get(e.s, a[i], &info) == 0);
        blocking += info.priority == SCHED_PRIO_BLOCKING;
    }
    CHECK(blocking == 2);
    CHECK(sched_job_get(e.s, a[1], &info) == 0 && info.priority == SCHED_PRIO_BLOCKING);
    CHECK(sched_job_get(e.s, a[2], &info) == 0 && info.priority == SCHED_PRIO_BLOCKING);
    CHECK(sched_job_get(e.s, a[3], &info) == 0 && info.priority == SCHED_PRIO_NORMAL);
    /* A new blocking job of its own is refused as before. */
    int rc = 0;
    CHECK(submit(&e, "uid:1", 40, SCHED_PRIO_BLOCKING, &rc) == 0 && rc == -EDQUOT);

    /* Another client with room raises one of them: the job is now charged to it (its blocking
     * room shrinks, uid:1's queue share grows back) and runs in its turn. */
    CHECK(submit(&e, "uid:2", 7, SCHED_PRIO_BLOCKING, NULL) == a[7]);
    CHECK(sched_job_get(e.s, a[7], &info) == 0 && info.priority == SCHED_PRIO_BLOCKING);
    uint64_t b1 = submit(&e, "uid:2", 20, SCHED_PRIO_BLOCKING, &rc);
    CHECK(b1 != 0);
    CHECK(submit(&e, "uid:2", 21, SCHED_PRIO_BLOCKING, &rc) == 0 && rc == -EDQUOT);
    /* uid:2 has no blocking room left: its blocking join of a normal job raises nothing, and
     * the join itself succeeds. */
    CHECK(submit(&e, "uid:2", 4, SCHED_PRIO_BLOCKING, &rc) == a[4] && rc == 0);
    CHECK(sched_job_get(e.s, a[4], &info) == 0 && info.priority == SCHED_PRIO_NORMAL);
    /* A background job joined at blocking without blocking room goes to normal: as far as the
     * joiner's own room allows. */
    uint64_t bg = submit(&e, "uid:3", 30, SCHED_PRIO_BACKGROUND, NULL);
    CHECK(submit(&e, "uid:2", 30, SCHED_PRIO_BLOCKING, &rc) == bg && rc == 0);
    CHECK(sched_job_get(e.s, bg, &info) == 0 && info.priority == SCHED_PRIO_NORMAL);

    pump(&e);
    finish_all(&e);
    /* Blocking: uid:1's a1 and uid:2's a7 in round 0, then a2 and b1 in round 1. */
    CHECK(start_pos(a[1]) == 0 && start_pos(a[7]) == 1);
    CHECK(start_pos(a[2]) == 2 && start_pos(b1) == 3);
    env_close(&e);
}

/* An op that sits deep in a flooder's backlog: a victim that joins it waits no longer than for
 * an op of its own (the job moves to the victim's turn), and the flooder gains nothing by
 * joining its own jobs again. */
static void test_join_turn(void)
{
    env e;
    env_open(&e, 1100, 520, 128);
    uint64_t a[500];
    for (int i = 0; i < 500; i++)
        a[i] = submit(&e, "uid:1000", i, SCHED_PRIO_NORMAL, NULL);
    CHECK(a[499] != 0);
    pump(&e);
    finish_running(&e);
    /* The flooder joins its own last job: no move. */
    CHECK(submit(&e, "uid:1000", 499, SCHED_PRIO_NORMAL, NULL) == a[499]);
    int at = g_n_started;
    CHECK(submit(&e, "token:v", 499, SCHED_PRIO_NORMAL, NULL) == a[499]);
    finish_running(&e);
    finish_running(&e);
    int pos = start_pos(a[499]);
    CHECK(pos >= 0 && pos - at <= 1);
    finish_all(&e);
    CHECK(g_n_started == 500);
    env_close(&e);
}

int main(void)
{
    test_flood(30);
    test_flood(500);
    test_three_clients();
    test_priorities_dominate();
    test_join_raise_cap();
    test_join_turn();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("fair queueing: ok\n");
    return 0;
}
