/* resolve/tests/fixture.h - a resolver over a real temporary cache and scheduler (no GPU pool,
 * no remote tier), the setup and teardown test_resolve.c and test_dispatch.c share. */
#ifndef HIDET_RESOLVE_TESTS_FIXTURE_H
#define HIDET_RESOLVE_TESTS_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "kernel_cache/kc.h"
#include "resolve/resolve.h"
#include "scheduler/sched.h"
#include "tests/check.h"

typedef struct resolve_fixture {
    char dir[64];     /* the cache's temporary folder */
    char dbpath[128]; /* the cache in it (a test may open a second connection) */
    uv_loop_t loop;
    kc_db *db;
    sched *s;
    resolver *r;
} resolve_fixture;

/* Opens it in a new /tmp/hidetd-NAME-XXXXXX; -1 when the folder cannot be made. */
static inline int resolve_fixture_open(resolve_fixture *f, const char *name)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/hidetd-%s-XXXXXX", name);
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->dbpath, sizeof(f->dbpath), "%s/kernels.db", f->dir);
    uv_loop_init(&f->loop);
    char *err = NULL;
    CHECK(kc_open(f->dbpath, &f->db, &err) == 0, "kc_open: %s", err ? err : "");
    free(err);
    sched_config sc;
    sched_config_defaults(&sc);
    CHECK(sched_new(&f->loop, f->db, NULL, &sc, &f->s) == 0, "sched");
    resolve_config rc;
    resolve_config_defaults(&rc);
    CHECK(resolve_new(&f->loop, f->db, f->s, NULL, &rc, &f->r) == 0, "resolver");
    return 0;
}

/* Frees the scheduler and the resolver, runs the loop until the handles the test closed are
 * closed too, and removes the folder. */
static inline void resolve_fixture_close(resolve_fixture *f)
{
    sched_free(f->s);
    resolve_free(f->r);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&f->loop) == 0, "loop closed");
    kc_close(f->db);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->dir);
}

#endif
