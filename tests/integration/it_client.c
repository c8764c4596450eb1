/* tests/integration/it_client.c - the C client library and hidetctl against the real daemon (with
 * stand-in workers): build a request, get a kernel set, fetch PTX and cubin, follow a job, read a
 * structured error; hidetctl's kernel/status/jobs/space commands and its cache administration
 * (ls, verify, keygen, a signed export, a trusted import into a fresh database that a new daemon
 * then answers from); the default address ($HIDETD_SOCKET) for daemon, hidetctl and library. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hidet/client.h"

static char ctl[512];

static void library(const ht_daemon *d, char *ret_key)
{
    char addr[400];
    snprintf(addr, sizeof(addr), "unix:%s", d->socket);
    hidet_client *c = NULL;
    hidet_error err = {0};
    CHECK(hidet_client_open(addr, NULL, &c, &err) == 0, "open: %s", err.message);
    if (!c)
        return;

    hidet_request *r = NULL;
    CHECK(hidet_request_new("matmul", &r) == 0, "request_new");
    int64_t a[] = {256, 128}, b[] = {128, 64}, bias[] = {64};
    hidet_request_add_input(r, a, 2, "f16");
    hidet_request_add_input(r, b, 2, "f16");
    hidet_request_add_input(r, bias, 1, "f16");
    hidet_step *s = NULL;
    hidet_request_epilogue(r, "bias", &s);
    hidet_step_int(s, "input", 2);
    hidet_request_epilogue(r, "gelu", NULL);
    hidet_request_set_arch(r, "sm_90");
    hidet_request_set_tune(r, "model");
    char *json = NULL;
    CHECK(hidet_request_json(r, &json) == 0, "request_json");

    hidet_kernel_set *set = NULL;
    int rc = hidet_request_kernels(c, json, &set, NULL, &err);
    CHECK(rc == 0 && set, "request_kernels: %d %s", rc, err.message);
    if (set) {
        CHECK(set->n_kernels == 1, "fused set has %zu kernels", set->n_kernels);
        CHECK(!set->cached && !set->measured, "cached %d measured %d", set->cached, set->measured);
        CHECK(set->output_rank == 2 && set->output_shape[0] == 256 && set->output_shape[1] == 64,
                 "output shape");
        CHECK(set->kernels[0].n_params == 4, "params %zu (A, B, bias, C)", set->kernels[0].n_params);
        snprintf(ret_key, 65, "%s", set->key);
        char *ptx = NULL;
        size_t n = 0;
        CHECK(hidet_fetch_ptx(c, set->key, &ptx, &n, &err) == 0, "fetch_ptx: %s", err.message);
        if (ptx)
            CHECK(ht_ptxas(ptx, n, "sm_90") == 0, "ptxas rejects the fetched PTX");
        free(ptx);
        void *cubin = NULL;
        CHECK(hidet_fetch_cubin(c, set->key, &cubin, &n, &err) == 0, "fetch_cubin: %s", err.message);
        CHECK(cubin && n > 4 && !memcmp(cubin, "\177ELF", 4), "cubin is not ELF");
        free(cubin);
    }
    hidet_kernel_set_free(set);
    set = NULL;
    CHECK(hidet_request_kernels(c, json, &set, NULL, &err) == 0 && set && set->cached, "second is a hit");
    hidet_kernel_set_free(set);
    free(json);
    hidet_request_free(r);

    /* A structured error. */
    rc = hidet_request_kernels(c, "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f7\"},"
                                  "{\"shape\":[4,4],\"dtype\":\"f16\"}]}", &set, NULL, &err);
    CHECK(rc < 0 && err.http_status == 422, "bad dtype: rc %d status %d", rc, err.http_status);
    CHECK(!strcmp(err.code, "unknown_dtype") && !strcmp(err.field, "inputs[0].dtype"),
             "error code '%s' field '%s'", err.code, err.field);

    /* A job, followed to the end. */
    hidet_job *job = NULL;
    rc = hidet_request_kernels(c, "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,1000],\"dtype\":\"f16\"}],"
                                  "\"tune\":\"measure\",\"wait\":false,\"budget\":{\"candidates\":4}}",
                               &set, &job, &err);
    CHECK(rc == 0 && job, "wait:false gives a job: %d %s", rc, err.message);
    for (int i = 0; job && i < 600 && (job->state == HIDET_JOB_QUEUED || job->state == HIDET_JOB_RUNNING); i++) {
        char id[32];
        snprintf(id, sizeof(id), "%s", job->id);
        hidet_job_free(job);
        job = NULL;
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
        CHECK(hidet_job_get(c, id, &job, &err) == 0, "job_get: %s", err.message);
    }
    CHECK(job && job->state == HIDET_JOB_DONE && job->result && job->measured,
             "job ended %s", job ? hidet_job_state_name(job->state) : "?");
    hidet_job_free(job);
    hidet_client_free(c);
}

static void cli(const ht_daemon *d, const char *key)
{
    char *out = NULL;
    int st = ht_sh(&out, "%s --socket '%s' status", ctl, d->socket);
    CHECK(st == 0 && strstr(out, "Stand-in"), "hidetctl status: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "%s --socket '%s' --json status", ctl, d->socket);
    cJSON *j = cJSON_Parse(out);
    CHECK(st == 0 && j, "hidetctl --json status is not JSON: %s", out);
    cJSON_Delete(j);
    free(out);

    char ptx[400];
    snprintf(ptx, sizeof(ptx), "%s/out.ptx", d->dir);
    st = ht_sh(&out, "cd '%s' && %s --socket '%s' kernel examples/requests/softmax.json --ptx '%s'",
               getenv("HIDETD_SRC"), ctl, d->socket, ptx);
    CHECK(st == 0 && access(ptx, F_OK) == 0, "hidetctl kernel: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "cd '%s' && %s --socket '%s' space examples/requests/layernorm.json",
               getenv("HIDETD_SRC"), ctl, d->socket);
    CHECK(st == 0 && strstr(out, "layernorm"), "hidetctl space: %d\n%.500s", st, out);
    free(out);
    st = ht_sh(&out, "%s --socket '%s' jobs", ctl, d->socket);
    CHECK(st == 0, "hidetctl jobs: %d\n%s", st, out);
    free(out);

    /* stats: the library's requests above were at least one miss (the first fused matmul) and
     * one hit (the same again); the cache has its default 10 GiB cap. */
    st = ht_sh(&out, "%s --socket '%s' stats", ctl, d->socket);
    CHECK(st == 0 && strstr(out, "hits") && strstr(out, "misses (tuned)") &&
          strstr(out, "requests") && strstr(out, "Candidates:") && strstr(out, "compiled") &&
          strstr(out, "cancelled") && strstr(out, d->cache) && strstr(out, "of 10.0 GiB") &&
          strstr(out, " %"), "hidetctl stats: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "%s --socket '%s' --json stats", ctl, d->socket);
    j = cJSON_Parse(out);
    const cJSON *cache = cJSON_GetObjectItemCaseSensitive(j, "cache");
    const cJSON *hits = cJSON_GetObjectItemCaseSensitive(j, "hits");
    const cJSON *misses = cJSON_GetObjectItemCaseSensitive(j, "misses");
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(j, "hit_rate");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(cache, "max_bytes");
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "candidates"), "compiled");
    CHECK(st == 0 && cJSON_IsNumber(hits) && hits->valuedouble >= 1 && cJSON_IsNumber(misses) &&
          misses->valuedouble >= 1 && cJSON_IsNumber(rate) && rate->valuedouble > 0 &&
          rate->valuedouble < 1 && cJSON_IsNumber(max) && max->valuedouble == 10737418240.0 &&
          cJSON_IsNumber(comp) && comp->valuedouble >= 1,
          "hidetctl --json stats: %d\n%s", st, out);
    cJSON_Delete(j);
    free(out);

    /* warm: every example request (a startup manifest of files), then a JSON Lines file with a
     * bad request and a line that is not JSON, and an array with an element that is no object. */
    int n_examples = 0;
    st = ht_sh(&out, "ls '%s'/examples/requests/*.json | wc -l", getenv("HIDETD_SRC"));
    n_examples = out ? atoi(out) : 0;
    free(out);
    char want[96];
    snprintf(want, sizeof(want), "warm: %d requests in ", n_examples);
    st = ht_sh(&out, "cd '%s' && %s --socket '%s' warm examples/requests/*.json 2>&1",
               getenv("HIDETD_SRC"), ctl, d->socket);
    CHECK(st == 0 && n_examples > 5 && strstr(out, want) && strstr(out, ", 0 failed") &&
          !strstr(out, "\033"), "warm examples: %d\n%s", st, out);
    free(out);
    char jl[400];
    snprintf(jl, sizeof(jl), "%s/manifest.jsonl", d->dir);
    const char *lines =
        "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,1000],\"dtype\":\"f16\"}]}\n"
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f7\"},"
        "{\"shape\":[4,4],\"dtype\":\"f16\"}]}\n"
        "\n"
        "{\"op\": softmax\n";
    ht_write_file(jl, lines, strlen(lines));
    st = ht_sh(&out, "%s --socket '%s' warm '%s' 2>&1", ctl, d->socket, jl);
    char where2[512], where4[512];
    snprintf(where2, sizeof(where2), "%s:2: hidetd answered 422 unknown_dtype", jl);
    snprintf(where4, sizeof(where4), "%s:4: not JSON", jl);
    CHECK(st == 1 && strstr(out, where2) && strstr(out, "unknown dtype \"f7\"") &&
          strstr(out, where4) && strstr(out, "warm: 3 requests") && strstr(out, "1 hit,") &&
          strstr(out, "2 failed"), "warm with bad lines: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "printf '[{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,1000],"
               "\"dtype\":\"f16\"}]}, 5]' | %s --socket '%s' --json warm -", ctl, d->socket);
    j = cJSON_Parse(out);
    const cJSON *errs = cJSON_GetObjectItemCaseSensitive(j, "errors");
    const cJSON *w0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(errs, 0), "where");
    CHECK(st == 1 && cJSON_GetArraySize(errs) == 1 && cJSON_IsString(w0) &&
          !strcmp(w0->valuestring, "<stdin>[1]") &&
          cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "hits")) == 1,
          "warm --json of an array: %d\n%s", st, out);
    cJSON_Delete(j);
    free(out);

    /* A blocking kernel request on a terminal shows its job's progress (script(1) gives it
     * one); the kernel it prints is the same. */
    if (access("/usr/bin/script", X_OK) == 0) {
        char req[400];
        snprintf(req, sizeof(req), "%s/measure.json", d->dir);
        const char *body = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[64,999],"
                           "\"dtype\":\"f16\"}],\"tune\":\"measure\",\"budget\":{\"candidates\":6}}";
        ht_write_file(req, body, strlen(body));
        st = ht_sh(&out, "script -qec \"%s --socket '%s' kernel '%s'\" /dev/null", ctl,
                   d->socket, req);
        CHECK(st == 0 && strstr(out, "candidates [") && strstr(out, " done: ") &&
              strstr(out, "newly built, measured") && strstr(out, "hd_softmax"),
              "kernel progress on a terminal: %d\n%s", st, out);
        free(out);
    } else {
        printf("SKIP part: script(1) is missing, the terminal progress of 'kernel' is not checked\n");
    }

    /* Exit codes scripts rely on. */
    st = ht_sh(NULL, "%s --socket '%s/nobody.sock' status >/dev/null 2>&1", ctl, d->dir);
    CHECK(st == 3, "cannot connect should exit 3, got %d", st);
    st = ht_sh(NULL, "%s --socket '%s' frobnicate >/dev/null 2>&1", ctl, d->socket);
    CHECK(st == 2, "usage error should exit 2, got %d", st);

    /* Cache administration on the live database (WAL lets hidetctl read beside the daemon). */
    st = ht_sh(&out, "%s --cache '%s' cache ls", ctl, d->cache);
    CHECK(st == 0 && strstr(out, "matmul") && strstr(out, "softmax"), "cache ls: %d\n%s", st, out);
    free(out);
    /* Which database, without --cache: $HIDETD_CACHE, else the running daemon's (its
     * /v1/status names it), ahead of the system's and the user default. */
    st = ht_sh(&out, "HIDETD_SOCKET='%s' %s cache ls", d->socket, ctl);
    CHECK(st == 0 && strstr(out, "softmax"), "cache ls via /v1/status: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "HIDETD_CACHE='%s/none.db' %s --socket '%s' cache ls 2>&1", d->dir, ctl,
               d->socket);
    CHECK(st == 4 && strstr(out, "none.db") && strstr(out, "$HIDETD_CACHE"),
          "$HIDETD_CACHE before the daemon's: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "HIDETD_CACHE='%s/none.db' %s --cache '%s' cache ls", d->dir, ctl, d->cache);
    CHECK(st == 0 && strstr(out, "softmax"), "--cache before $HIDETD_CACHE: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "HIDETD_CACHE='%s' %s --socket '%s/nobody.sock' cache ls", d->cache, ctl,
               d->dir);
    CHECK(st == 0 && strstr(out, "softmax"), "$HIDETD_CACHE without a daemon: %d\n%s", st, out);
    free(out);
    /* No daemon, no variable: the user default (in a HOME of the test's own), named. */
    st = ht_sh(&out, "env -u HIDETD_CACHE -u XDG_CACHE_HOME HOME='%s' %s --socket "
               "'%s/nobody.sock' cache ls 2>&1", d->dir, ctl, d->dir);
    CHECK((st == 4 && strstr(out, "/.cache/hidetd/kernels.db") && strstr(out, "no daemon")) ||
          access("/var/lib/hidetd/kernels.db", F_OK) == 0, "user default: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "%s --cache '%s' cache verify", ctl, d->cache);
    CHECK(st == 0, "cache verify: %d\n%s", st, out);
    free(out);
    /* The documented flow: a signing key, a signed export, an import that trusts the key. */
    char exp[400];
    snprintf(exp, sizeof(exp), "%s/export.hidetd", d->dir);
    st = ht_sh(&out, "%s keygen --out '%s/signer' && %s --cache '%s' cache export --sign "
               "'%s/signer.key' '%s'", ctl, d->dir, ctl, d->cache, d->dir, exp);
    CHECK(st == 0, "cache export: %d\n%s", st, out);
    free(out);
    st = ht_sh(&out, "%s --cache '%s/imported.db' cache import --trust '%s/signer.pub' '%s'", ctl,
               d->dir, d->dir, exp);
    CHECK(st == 0, "cache import: %d\n%s", st, out);
    free(out);
    (void)key;
}

/* One default address everywhere: with only $HIDETD_SOCKET set, the daemon listens there, and
 * hidetctl and the C library given no address find it; with no daemon, hidetctl's message names
 * the socket it tried and says how to start hidetd. */
static void default_address(void)
{
    ht_daemon d;
    char *out = NULL;
    ht_init(&d);
    /* The harness passes --socket; this daemon must take the variable instead. */
    snprintf(d.socket, sizeof(d.socket), "%s/by-env/h.sock", d.dir);
    setenv("HIDETD_SOCKET", d.socket, 1);
    int st = ht_sh(&out, "%s status 2>&1", ctl);
    CHECK(st == 3 && strstr(out, d.socket) && strstr(out, "Is hidetd running?") &&
          strstr(out, "scripts/run.sh") && strstr(out, "$HIDETD_SOCKET") &&
          !strstr(out, "port 80"), "no daemon: %d\n%s", st, out);
    free(out);

    /* The variable names a socket in a directory of the caller's: hidetd creates only its own
     * default's directory (hidetd(8)), so the directory is made here. */
    char by_env[sizeof(d.dir) + 8];
    snprintf(by_env, sizeof(by_env), "%s/by-env", d.dir);
    CHECK(mkdir(by_env, 0700) == 0, "mkdir %s", by_env);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(d.log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        dup2(fd, 1);
        execl(getenv("HIDETD_BIN"), "hidetd", "--cache", d.cache, "--workers", "standin",
              (char *)NULL);
        _exit(127);
    }
    d.pid = pid;
    for (int i = 0; i < 200 && access(d.socket, F_OK) != 0; i++) {
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
    }
    CHECK(access(d.socket, F_OK) == 0, "hidetd did not listen on $HIDETD_SOCKET %s", d.socket);
    st = ht_sh(&out, "%s status", ctl);
    CHECK(st == 0 && strstr(out, "Stand-in"), "hidetctl via $HIDETD_SOCKET: %d\n%s", st, out);
    free(out);
    hidet_client *c = NULL;
    hidet_error err = {0};
    char *body = NULL;
    CHECK(hidet_client_open(NULL, NULL, &c, &err) == 0, "open default: %s", err.message);
    CHECK(c && hidet_get(c, "/healthz", &body, NULL, &err) == 0, "library via $HIDETD_SOCKET: %s",
          err.message);
    free(body);
    hidet_client_free(c);
    unsetenv("HIDETD_SOCKET");
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
}

/* clients/python/hidetd_unix.py's default_address() and libhidet-client's agree, rule by rule. */
static void python_agrees(void)
{
    char dir[] = "/tmp/hidet-pyaddr-XXXXXX", sock[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(sock, sizeof(sock), "%s/hidetd.sock", dir);
    struct { const char *hidetd_socket, *runtime, *cache_home, *home; bool make_sock; } cases[] = {
        {"unix:/x/y.sock", dir, NULL, "/h", false},
        {NULL, dir, NULL, "/h", false},
        {NULL, dir, NULL, "/h", true},
        {NULL, NULL, "/c", "/h", false},
        {NULL, "relative", NULL, "/h", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *names[] = {"HIDETD_SOCKET", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "HOME"};
        const char *vals[] = {cases[i].hidetd_socket, cases[i].runtime, cases[i].cache_home,
                              cases[i].home};
        char envs[512] = "";
        for (int k = 0; k < 4; k++) {
            if (vals[k]) {
                setenv(names[k], vals[k], 1);
                size_t n = strlen(envs);
                snprintf(envs + n, sizeof(envs) - n, " %s='%s'", names[k], vals[k]);
            } else {
                unsetenv(names[k]);
            }
        }
        if (cases[i].make_sock)
            ht_write_file(sock, "", 0);
        char *c_addr = NULL, *py = NULL;
        CHECK(hidet_default_address(&c_addr) == 0, "hidet_default_address");
        int st = ht_sh(&py, "env -i%s PYTHONPATH='%s/clients/python' python3 -c "
                       "'import hidetd_unix; print(hidetd_unix.default_address())'", envs,
                       getenv("HIDETD_SRC"));
        size_t n = py ? strlen(py) : 0;
        if (n && py[n - 1] == '\n')
            py[n - 1] = '\0';
        CHECK(st == 0 && c_addr && py && !strcmp(c_addr, py), "case %zu:%s: C %s, Python %s", i,
              envs, c_addr ? c_addr : "?", py ? py : "?");
        free(c_addr);
        free(py);
        unlink(sock);
    }
    unsetenv("HIDETD_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("XDG_CACHE_HOME");
    rmdir(dir);
}

int main(void)
{
    /* Real compiles: the progress check needs a job that lasts, and scripts/test.sh's compile
     * cache (tuner/compile_cache.h) may already hold every candidate of its softmax. */
    unsetenv("HIDETD_COMPILE_CACHE");
    snprintf(ctl, sizeof(ctl), "%s", getenv("HIDETCTL_BIN") ? getenv("HIDETCTL_BIN") : "hidetctl");
    ht_daemon d;
    ht_init(&d);
    ht_use_standin(&d);
    /* Both change the environment; the daemons below get explicit paths. */
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    python_agrees();
    default_address();
    if (home)
        setenv("HOME", home, 1);
    free(home);
    if (ht_start(&d) != 0)
        return 1;
    char key[65] = "";
    library(&d, key);
    cli(&d, key);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");

    /* A daemon on the imported database answers the fused request from the cache. */
    snprintf(d.cache, sizeof(d.cache), "%s/imported.db", d.dir);
    if (ht_start(&d) != 0)
        return 1;
    ht_resp r = ht_post(&d, "/v1/kernels",
                        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,128],\"dtype\":\"f16\"},"
                        "{\"shape\":[128,64],\"dtype\":\"f16\"},{\"shape\":[64],\"dtype\":\"f16\"}],"
                        "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"gelu\"}],"
                        "\"arch\":\"sm_90\",\"tune\":\"model\"}");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(r.json, "key");
    CHECK(r.status == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.json, "cached")),
             "imported entry not a hit: %ld %.300s", r.status, r.body);
    CHECK(cJSON_IsString(k) && !strcmp(k->valuestring, key), "imported key differs");
    ht_resp_free(&r);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");
    ht_cleanup(&d);
    return ht_finish("it_client");
}
