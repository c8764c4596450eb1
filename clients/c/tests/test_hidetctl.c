/* clients/c/tests/test_hidetctl.c - hidetctl's command line (suite unit, client): argument
 * errors exit 2, an absent daemon exits 3, and the cache commands against a temporary database
 * filled through kernel_cache/ (ls, show, rm, prune, verify, vacuum, export/import round trip,
 * a flipped byte refused with exit 5, keygen, signed export and trusted import, a stronger
 * selection kept unless --replace-stronger). Usage: test_hidetctl PATH/TO/hidetctl
 */
#include "kernel_cache/kc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <sqlite3.h>

static const char *hidetctl;
static const char *child_env[4]; /* "NAME=value" set in hidetctl's environment, NULL-ended */
static char tmpdir[256];
static char out[1 << 16]; /* stdout of the last run */
static char errout[1 << 14];

#include "tests/check.h"

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Runs hidetctl with the given arguments (NULL-terminated); returns its exit status. */
static int run(const char *first, ...)
{
    const char *argv[32];
    char op[512], ep[512];
    int n = 0, status = 0;
    va_list ap;

    argv[n++] = hidetctl;
    va_start(ap, first);
    for (const char *a = first; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    snprintf(op, sizeof(op), "%s/stdout", tmpdir);
    snprintf(ep, sizeof(ep), "%s/stderr", tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(op, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        /* Defaults must not leak in from the environment running the tests. */
        unsetenv("HIDETD_SOCKET");
        unsetenv("HIDETD_TOKEN");
        unsetenv("HIDETD_TOKEN_FILE");
        for (int i = 0; child_env[i]; i++)
            putenv((char *)child_env[i]);
        execv(hidetctl, (char *const *)argv);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    slurp(op, out, sizeof(out));
    slurp(ep, errout, sizeof(errout));
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (getenv("TEST_VERBOSE")) {
        fprintf(stderr, "$ hidetctl");
        for (int i = 1; argv[i]; i++)
            fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, "  -> %d\n%s%s", rc, out, errout);
    }
    return rc;
}

#define RUN_EXPECT(code, ...)                                                                      \
    do {                                                                                           \
        int rc_ = run(__VA_ARGS__, (const char *)NULL);                                            \
        if (rc_ != (code)) {                                                                       \
            fprintf(stderr, "%s:%d: exit %d, wanted %d; stderr: %s\n", __FILE__, __LINE__, rc_,    \
                    (code), errout);                                                               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void fill(const char *path, int n, char keys[][KC_KEY_LEN + 1])
{
    kc_db *db = NULL;
    char *err = NULL;
    char ptx[600];
    unsigned char cubin[300];

    if (kc_open(path, &db, &err) < 0) {
        fprintf(stderr, "kc_open: %s\n", err);
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        kc_artifact a = {0};
        char num[16];
        const char *parts[] = {"hidetctl-test", num};
        snprintf(num, sizeof(num), "%d", i);
        parts[0] = "op";
        kc_key(parts, 2, a.op_key);
        snprintf(a.op, sizeof(a.op), "%s", i < 3 ? "matmul" : "softmax");
        snprintf(a.target, sizeof(a.target), "%s", i % 2 ? "sm_80" : "sm_90");
        memset(ptx, 'a' + i, sizeof(ptx) - 1);
        ptx[sizeof(ptx) - 1] = '\0';
        memset(cubin, i, sizeof(cubin));
        /* As the daemon writes them (import checks): the op named in its JSON, the key derived
         * from op key and schedule. */
        a.op_json = i < 3 ? "{\"op\":\"matmul\"}" : "{\"op\":\"softmax\"}";
        a.schedule_json = "{\"template\":\"t\"}";
        kc_artifact_key(a.op_key, a.schedule_json, a.key);
        memcpy(keys[i], a.key, sizeof(a.key));
        a.launch = (kc_launch){
            .n_kernels = 1,
            .kernels = {{.name = "k", .grid = {4, 1, 1}, .block = {64, 1, 1}, .n_args = 2,
                         .args = {KC_BUF_INPUT0, KC_BUF_OUTPUT}}}};
        a.provenance_json = "{}";
        a.ptx = ptx;
        a.ptx_len = sizeof(ptx) - 1;
        a.cubin = cubin;
        a.cubin_len = sizeof(cubin);
        a.choice = i % 2 == 0 ? KC_CHOSEN_MEASURED : KC_CHOSEN_MODEL;
        a.latency_us = a.choice == KC_CHOSEN_MEASURED ? 12.5 : -1;
        /* Distinct ages: #0 unused for 10 days, the others recent. */
        a.created_at = a.last_used_at = (int64_t)time(NULL) - (i == 0 ? 10 * 86400 : 100 - i);
        if (kc_artifact_put(db, &a) < 0) {
            fprintf(stderr, "put: %s\n", kc_errmsg(db));
            exit(1);
        }
    }
    kc_close(db);
}

static int count_json_artifacts(void)
{
    cJSON *j = cJSON_Parse(out);
    int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "artifacts"));
    if (!j)
        n = -1;
    cJSON_Delete(j);
    return n;
}

static void test_usage(void)
{
    char sock[512];
    snprintf(sock, sizeof(sock), "%s/absent.sock", tmpdir);

    RUN_EXPECT(2, "--bogus");
    CHECK(strstr(errout, "unknown option") != NULL);
    /* A filter that names nothing that exists is an error, not an empty listing. */
    RUN_EXPECT(2, "--op", "matmull", "cache", "ls");
    CHECK(strstr(errout, "--op matmull: no such op (known ops: matmul, conv2d,") != NULL);
    RUN_EXPECT(2, "--arch", "sm_91", "cache", "ls");
    CHECK(strstr(errout, "known archs: native, sm_80, sm_86, sm_89, sm_90, sm_90a") != NULL);
    /* native is the daemon's to resolve (docs/api.md): accepted for a daemon command (which
     * then fails to connect here), refused with a reason for a cache filter. */
    char req[300];
    snprintf(req, sizeof(req), "%s/req.json", tmpdir);
    FILE *rf = fopen(req, "w");
    fputs("{\"op\":\"softmax\"}", rf);
    fclose(rf);
    RUN_EXPECT(3, "--socket", sock, "--arch", "native", "space", req, "--limit", "5");
    /* warm takes kernel requests; a graph gets a pointer to 'hidetctl graph'. */
    rf = fopen(req, "w");
    fputs("{\"graph\":{\"inputs\":[],\"nodes\":[],\"outputs\":[]}}", rf);
    fclose(rf);
    RUN_EXPECT(1, "--socket", sock, "warm", req);
    CHECK(strstr(errout, "a graph request") && strstr(errout, "'hidetctl graph FILE'"));
    RUN_EXPECT(2, "--arch", "native", "cache", "ls");
    CHECK(strstr(errout, "daemon's GPU") != NULL);
    RUN_EXPECT(2, "frobnicate");
    RUN_EXPECT(2, "--json");
    RUN_EXPECT(2, "kernel");
    RUN_EXPECT(2, "kernel", "a.json", "b.json");
    RUN_EXPECT(2, "--tune", "fast", "kernel", "a.json");
    RUN_EXPECT(2, "kernel", "a.json", "--no-wait", "--ptx", "x.ptx");
    RUN_EXPECT(2, "kernel", "/nonexistent/request.json");
    RUN_EXPECT(2, "status", "extra");
    RUN_EXPECT(2, "status", "--watch");
    RUN_EXPECT(2, "jobs", "1", "2");
    RUN_EXPECT(2, "cancel");
    RUN_EXPECT(2, "cancel", "abc");
    CHECK(strstr(errout, "'abc' is not a job ID") != NULL);
    RUN_EXPECT(2, "jobs", "-1");
    RUN_EXPECT(2, "space", "a.json", "--limit", "0");
    RUN_EXPECT(2, "kernel", "a.json", "--limit", "3");
    RUN_EXPECT(2, "--socket", "/a.sock", "--url", "http://h:1", "status");
    RUN_EXPECT(2, "--cache");
    CHECK(strstr(errout, "needs a value") != NULL);
    RUN_EXPECT(2, "cache");
    RUN_EXPECT(2, "cache", "bogus");
    RUN_EXPECT(2, "cache", "ls", "--ptx", "x");
    RUN_EXPECT(2, "cache", "prune");
    RUN_EXPECT(2, "cache", "prune", "--older-than", "3x");
    RUN_EXPECT(2, "cache", "prune", "--max-size", "12Q");
    RUN_EXPECT(0, "--help");
    CHECK(strstr(out, "Exit status") != NULL && strstr(out, "cannot connect") != NULL);
    RUN_EXPECT(0, "--version");

    /* --json: local errors are JSON too, in the shape of the daemon's, on stderr. */
    const char *json_cases[][3] = {{"--bogus", "--json", "usage"},
                                   {"kernel", "/nonexistent/request.json", "usage"},
                                   {"--socket", sock, "cannot_connect"}};
    for (int i = 0; i < 3; i++) {
        int rc = i == 2 ? run("--json", json_cases[i][0], json_cases[i][1], "status", (const char *)NULL)
                        : run("--json", json_cases[i][0], json_cases[i][1], (const char *)NULL);
        cJSON *j = cJSON_Parse(errout), *er = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(er, "code");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(er, "message");
        CHECK(rc == (i == 2 ? 3 : 2) && cJSON_IsString(code) &&
              strcmp(code->valuestring, json_cases[i][2]) == 0 && cJSON_IsString(msg) &&
              strncmp(msg->valuestring, "hidetctl", 8) != 0);
        if (!j)
            fprintf(stderr, "case %d: not JSON: %s\n", i, errout);
        cJSON_Delete(j);
    }

    /* Nothing listens there. */
    RUN_EXPECT(3, "--socket", sock, "status");
    RUN_EXPECT(3, "--socket", sock, "jobs");
    RUN_EXPECT(3, "--url", "http://127.0.0.1:1", "status");
}

/* A one-request HTTP server on loopback TCP: records the request (head and body), answers a
 * status, or `body` when set. */
typedef struct fake {
    int fd;
    char head[4096];
    const char *body;
} fake;

static void *fake_main(void *arg)
{
    fake *f = arg;
    static const char status[] = "{\"version\":\"fake\",\"uptime_s\":1,\"gpu_available\":false}";
    const char *body = f->body ? f->body : status;
    char ans[4096];
    size_t len = 0;
    int c = accept(f->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    for (;;) {
        /* The head, then Content-Length bytes of body: all read before the answer. */
        const char *end = strstr(f->head, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(f->head, "\r\nContent-Length:");
            size_t want = (size_t)(end + 4 - f->head) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
            if (len >= want)
                break;
        }
        if (len >= sizeof(f->head) - 1)
            break;
        ssize_t n = read(c, f->head + len, sizeof(f->head) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        f->head[len] = '\0';
    }
    int n = snprintf(ans, sizeof(ans), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
    if (write(c, ans, (size_t)n) != n)
        perror("write");
    close(c);
    return NULL;
}

/* hidetctl status against the fake server with the token given as args/env; the Authorization
 * header it sent (empty when none) into auth. Returns hidetctl's exit status. */
static int token_sent(const char *env, const char *opt, const char *val, char *auth, size_t cap)
{
    fake f = {0};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    char url[64];
    pthread_t th;

    f.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(f.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f.fd, 1) < 0 ||
        getsockname(f.fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("fake server");
        exit(1);
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    pthread_create(&th, NULL, fake_main, &f);
    child_env[0] = env;
    child_env[1] = NULL;
    int rc = opt ? run("--url", url, opt, val, "status", (const char *)NULL)
                 : run("--url", url, "status", (const char *)NULL);
    child_env[0] = NULL;
    /* Unblock the accept when hidetctl never connected. */
    int k = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(k, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        perror("connect");
    close(k);
    pthread_join(th, NULL);
    close(f.fd);
    const char *a = strstr(f.head, "\r\nAuthorization: ");
    size_t n = a ? strcspn(a + 17, "\r") : 0;
    snprintf(auth, cap, "%.*s", (int)n, a ? a + 17 : "");
    return rc;
}

/* hidetctl CMD FILE against a fake daemon answering body once; the request it got into head.
 * Returns hidetctl's exit status. */
static int serve_once(const char *body, const char *cmd, const char *file, char *head, size_t cap)
{
    fake f = {.body = body};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    char url[64];
    pthread_t th;

    f.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(f.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f.fd, 1) < 0 ||
        getsockname(f.fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("fake server");
        exit(1);
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    pthread_create(&th, NULL, fake_main, &f);
    int rc = run("--url", url, cmd, file, (const char *)NULL);
    int k = socket(AF_INET, SOCK_STREAM, 0); /* unblocks the accept if hidetctl never came */
    if (connect(k, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        perror("connect");
    close(k);
    pthread_join(th, NULL);
    close(f.fd);
    snprintf(head, cap, "%s", f.head);
    return rc;
}

/* 'kernel' for a request with named dims: the dispatch table printed, rules as formulas and
 * size parameters by their dim. */
static void test_kernel_dispatch(void)
{
    static const char table[] =
        "{\"op\":\"softmax\",\"arch\":\"sm_90\",\"dims\":{\"n\":{\"min\":1,\"max\":64}},"
        "\"output\":{\"shape\":[\"n\",128],\"dtype\":\"f16\"},\"dispatch\":{\"generic\":"
        "{\"key\":\"1111111111111111111111111111111111111111111111111111111111111111\","
        "\"op\":\"softmax\",\"arch\":\"sm_90\",\"output\":{\"shape\":[\"n\",128],\"dtype\":"
        "\"f16\"},\"kernels\":[{\"name\":\"sm\",\"grid\":[{\"dims\":[\"n\"],\"coef\":1,"
        "\"div\":4,\"mul\":2,\"cap\":10},1,1],\"block\":[128,1,1],\"params\":[{\"index\":0,"
        "\"buffer\":\"input0\",\"type\":\"pointer\"},{\"index\":1,\"buffer\":\"output\","
        "\"type\":\"pointer\"},{\"index\":2,\"type\":\"int\",\"dim\":\"n\"}]}]},"
        "\"entries\":[{\"ranges\":{\"n\":[1,16]},\"state\":\"tuning\",\"job\":\"/v1/jobs/12\"},"
        "{\"ranges\":{\"n\":[17,32]},\"state\":\"untuned\"}]}}";
    char req[300], head[4096];

    snprintf(req, sizeof(req), "%s/dyn.json", tmpdir);
    FILE *rf = fopen(req, "w");
    fputs("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",128],\"dtype\":\"f16\"}],"
          "\"dims\":{\"n\":{\"min\":1,\"max\":64}}}", rf);
    fclose(rf);
    int rc = serve_once(table, "kernel", req, head, sizeof(head));
    CHECK(rc == 0, "%s", errout);
    CHECK(strstr(head, "POST /v1/kernels ") != NULL);
    CHECK(strstr(out, "a dispatch table of 2 entries") != NULL, "%s", out);
    CHECK(strstr(out, "dims       n 1..64") && strstr(out, "output     [n,128] f16"), "%s", out);
    CHECK(strstr(out, "/v1/jobs/12") && strstr(out, "untuned"), "%s", out);
    CHECK(strstr(out, "min(10,2*ceil(n/4)),1,1") && strstr(out, "input0 output n:int"), "%s", out);
    /* warm sends it too, and counts its generic set. */
    rc = serve_once(table, "warm", req, head, sizeof(head));
    CHECK(rc == 0 && strstr(head, "\"dims\""), "%s", errout);
    CHECK(strstr(out, "1 tuned, 0 failed") || strstr(errout, "1 tuned, 0 failed"), "%s%s", out, errout);
}

/* 'jobs ID' for a measured range job: where its candidates were timed, the best's times there and
 * its worst ratio to the best candidate at a size of the range; a static job has no such line. */
static void test_job_range(void)
{
    static const char range_job[] =
        "{\"job\":{\"id\":\"7\",\"url\":\"/v1/jobs/7\",\"state\":\"done\",\"op\":\"matmul\","
        "\"arch\":\"sm_90a\",\"tune\":\"measure\",\"priority\":\"normal\",\"candidates\":{\"total\":128,"
        "\"done\":128,\"failed\":0},\"best_us\":105.632,\"best_schedule\":null,\"measured_on\":[0],"
        "\"final_round\":null,\"timed_at\":{\"top\":{\"n\":2304},\"middle\":{\"n\":2172}},"
        "\"best_middle_us\":108.864,\"range_worst\":1.145,\"elapsed_s\":10.7,\"waiters\":0}}";
    static const char static_job[] =
        "{\"job\":{\"id\":\"8\",\"url\":\"/v1/jobs/8\",\"state\":\"running\",\"op\":\"matmul\","
        "\"arch\":\"sm_90a\",\"tune\":\"measure\",\"priority\":\"normal\",\"candidates\":{\"total\":128,"
        "\"done\":3,\"failed\":0},\"best_us\":99.04,\"best_schedule\":null,\"measured_on\":[0],"
        "\"final_round\":null,\"elapsed_s\":1.5,\"waiters\":1}}";
    char head[4096];
    int rc = serve_once(range_job, "jobs", "7", head, sizeof(head));
    CHECK(rc == 0 && strstr(head, "GET /v1/jobs/7 ") != NULL, "%s", errout);
    CHECK(strstr(out, "a range: timed at n=2304 (top) and n=2172 (middle), the best 105.6 us and 108.9 us there; "
                      "at worst 1.145x the best candidate") != NULL,
          "%s", out);
    rc = serve_once(static_job, "jobs", "8", head, sizeof(head));
    CHECK(rc == 0 && strstr(out, "best so far 99.0 us") && !strstr(out, "a range"), "%s", out);
}

/* The token rule shared by every client: --token-file, --token, $HIDETD_TOKEN_FILE (its first
 * line), $HIDETD_TOKEN. */
static void test_token(void)
{
    char file[300], envf[340], absent[300], auth[256];
    snprintf(file, sizeof(file), "%s/token", tmpdir);
    snprintf(envf, sizeof(envf), "HIDETD_TOKEN_FILE=%s", file);
    snprintf(absent, sizeof(absent), "%s/no-token", tmpdir);
    FILE *f = fopen(file, "w");
    fputs("tok-file\n", f);
    fclose(f);

    CHECK(token_sent("HIDETD_TOKEN=tok-env", NULL, NULL, auth, sizeof(auth)) == 0 &&
          strcmp(auth, "Bearer tok-env") == 0);
    CHECK(strstr(out, "GPU not available") != NULL);
    CHECK(token_sent(envf, NULL, NULL, auth, sizeof(auth)) == 0 &&
          strcmp(auth, "Bearer tok-file") == 0);
    CHECK(token_sent("HIDETD_TOKEN=tok-env", "--token-file", file, auth, sizeof(auth)) == 0 &&
          strcmp(auth, "Bearer tok-file") == 0);
    CHECK(token_sent(envf, "--token", "tok-arg", auth, sizeof(auth)) == 0 &&
          strcmp(auth, "Bearer tok-arg") == 0);
    CHECK(token_sent(NULL, NULL, NULL, auth, sizeof(auth)) == 0 && auth[0] == '\0');
    /* A token file that cannot be read is named, and nothing is sent. */
    CHECK(token_sent(NULL, "--token-file", absent, auth, sizeof(auth)) == 2 &&
          strstr(errout, absent) != NULL);
    RUN_EXPECT(2, "--token-file", file, "--token", "x", "status");
    CHECK(strstr(errout, "not both") != NULL);
}

static void test_cache(void)
{
    char db[512], db2[512], db3[512], exp[512], bad[512], none[512];
    char keys[6][KC_KEY_LEN + 1];
    char prefix[13];

    snprintf(db, sizeof(db), "%s/a/kernels.db", tmpdir);
    snprintf(db2, sizeof(db2), "%s/b/kernels.db", tmpdir);
    snprintf(db3, sizeof(db3), "%s/c/kernels.db", tmpdir);
    snprintf(exp, sizeof(exp), "%s/backup.hkc", tmpdir);
    snprintf(bad, sizeof(bad), "%s/flipped.hkc", tmpdir);
    snprintf(none, sizeof(none), "%s/none/kernels.db", tmpdir);
    fill(db, 6, keys);

    RUN_EXPECT(4, "--cache", none, "cache", "ls");
    CHECK(access(none, F_OK) != 0); /* a look must not create a database */

    RUN_EXPECT(0, "--cache", db, "cache", "ls");
    CHECK(strstr(out, "KEY") && strstr(out, "6 artifacts"));
    snprintf(prefix, sizeof(prefix), "%.12s", keys[3]);
    CHECK(strstr(out, prefix) != NULL);
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "ls");
    CHECK(count_json_artifacts() == 6);
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "ls", "--arch", "sm_80");
    CHECK(count_json_artifacts() == 3);
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "ls", "--op", "matmul", "--arch", "sm_90");
    CHECK(count_json_artifacts() == 2);

    /* show: a unique prefix works, an unknown key is "not found". */
    snprintf(prefix, sizeof(prefix), "%.10s", keys[1]);
    RUN_EXPECT(0, "--cache", db, "cache", "show", prefix);
    CHECK(strstr(out, keys[1]) && strstr(out, "sm_80"));
    /* The stored op JSON is the canonical form, not a request: it is not labelled one. */
    CHECK(strstr(out, "\ncanonical op ") && !strstr(out, "\nrequest "));
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "show", keys[2]);
    {
        cJSON *j = cJSON_Parse(out);
        const cJSON *pb = cJSON_GetObjectItemCaseSensitive(j, "ptx_bytes");
        CHECK(cJSON_IsNumber(pb) && pb->valuedouble == 599);
        cJSON_Delete(j);
    }
    RUN_EXPECT(4, "--cache", db, "cache", "show",
               "0000000000000000000000000000000000000000000000000000000000000000");
    RUN_EXPECT(2, "--cache", db, "cache", "show", "not-hex");

    /* export, then import into a fresh database: same artifacts. Unsigned, it needs
     * --trust-unsigned; signed, the signer's public key. */
    RUN_EXPECT(0, "--cache", db, "cache", "export", exp);
    CHECK(strstr(out, "exported 6 artifacts") != NULL && strstr(errout, "not signed") != NULL);
    RUN_EXPECT(6, "--cache", db2, "--trust-dir", none, "cache", "import", exp);
    CHECK(strstr(errout, "--trust-unsigned") != NULL);
    /* A refused import stores nothing and leaves no (empty) database file behind. */
    CHECK(access(db2, F_OK) != 0);
    RUN_EXPECT(0, "--cache", db2, "cache", "import", "--trust-unsigned", exp);
    CHECK(strstr(out, "imported 6 artifacts") != NULL);
    {
        char kprefix[512], pub[600], sec[600], sexp[512], db4[512];
        snprintf(kprefix, sizeof(kprefix), "%s/signer", tmpdir);
        snprintf(pub, sizeof(pub), "%s.pub", kprefix);
        snprintf(sec, sizeof(sec), "%s.key", kprefix);
        snprintf(sexp, sizeof(sexp), "%s/signed.hkc", tmpdir);
        snprintf(db4, sizeof(db4), "%s/d/kernels.db", tmpdir);
        RUN_EXPECT(2, "keygen", "extra");
        RUN_EXPECT(0, "keygen", "--out", kprefix);
        CHECK(access(pub, R_OK) == 0 && access(sec, R_OK) == 0);
        RUN_EXPECT(1, "keygen", "--out", kprefix); /* never overwrites a key */
        RUN_EXPECT(2, "--cache", db, "cache", "ls", "--sign", sec);
        RUN_EXPECT(0, "--cache", db, "cache", "export", "--sign", sec, sexp);
        CHECK(strstr(out, "signed by key") != NULL);
        RUN_EXPECT(6, "--cache", db4, "--trust-dir", none, "cache", "import", sexp);
        /* "not trusted" names what was trusted: the directory read. */
        CHECK(strstr(errout, "not trusted") && strstr(errout, none) &&
              strstr(errout, "0 --trust files"));
        CHECK(access(db4, F_OK) != 0);
        RUN_EXPECT(0, "--cache", db4, "--trust-dir", none, "--json", "cache", "import", "--trust",
                   pub, sexp);
        cJSON *j = cJSON_Parse(out);
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "imported")) == 6 &&
              cJSON_IsString(cJSON_GetObjectItem(j, "signed_by")));
        cJSON_Delete(j);
        /* Importing the same file again changes nothing and is allowed. Once db4 holds #1
         * (a model choice in the file) as measured, the file would replace a stronger choice:
         * refused (6) unless --replace-stronger. */
        RUN_EXPECT(0, "--cache", db4, "--trust-dir", none, "cache", "import", "--trust", pub,
                   sexp);
        sqlite3 *s = NULL;
        char sql[512];
        CHECK(sqlite3_open(db4, &s) == SQLITE_OK);
        sqlite3_busy_timeout(s, 5000);
        snprintf(sql, sizeof(sql), "UPDATE artifacts SET choice = 2 WHERE key = '%s';"
                 "UPDATE selections SET choice = 2 WHERE artifact_key = '%s'", keys[1], keys[1]);
        CHECK(sqlite3_exec(s, sql, NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(s);
        RUN_EXPECT(6, "--cache", db4, "--trust-dir", none, "cache", "import", "--trust", pub,
                   sexp);
        CHECK(strstr(errout, "measured") != NULL && strstr(errout, "nothing stored") != NULL);
        RUN_EXPECT(0, "--cache", db4, "--trust-dir", none, "cache", "import", "--trust", pub,
                   "--replace-stronger", sexp);
    }
    RUN_EXPECT(0, "--cache", db2, "--json", "cache", "ls");
    CHECK(count_json_artifacts() == 6);
    RUN_EXPECT(0, "--cache", db2, "cache", "verify");
    RUN_EXPECT(4, "--cache", db3, "cache", "import", "/nonexistent/backup");

    /* A flipped byte anywhere in the backup: refused with 5, nothing stored. */
    {
        FILE *f = fopen(exp, "rb");
        static unsigned char buf[1 << 16];
        size_t len = f ? fread(buf, 1, sizeof(buf), f) : 0;
        if (f)
            fclose(f);
        CHECK(len > 100);
        size_t positions[] = {3, len / 2, len - 20};
        for (int p = 0; p < 3; p++) {
            buf[positions[p]] ^= 0x04;
            f = fopen(bad, "wb");
            fwrite(buf, 1, len, f);
            fclose(f);
            buf[positions[p]] ^= 0x04;
            RUN_EXPECT(5, "--cache", db3, "cache", "import", "--trust-unsigned", bad);
            CHECK(strstr(errout, "nothing stored") != NULL);
            /* ... and no database file was left behind. */
            RUN_EXPECT(4, "--cache", db3, "--json", "cache", "ls");
            CHECK(access(db3, F_OK) != 0);
        }
    }

    /* rm: by key and by prefix; a second time it is gone. */
    RUN_EXPECT(0, "--cache", db, "cache", "rm", keys[5]);
    snprintf(prefix, sizeof(prefix), "%.12s", keys[4]);
    RUN_EXPECT(0, "--cache", db, "cache", "rm", prefix);
    RUN_EXPECT(4, "--cache", db, "cache", "rm", keys[5]);
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "ls");
    CHECK(count_json_artifacts() == 4);

    /* prune by age removes #0 only (10 days unused). */
    RUN_EXPECT(0, "--cache", db, "cache", "prune", "--older-than", "2d");
    CHECK(strstr(out, "removed 1 artifact") != NULL);
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "show", keys[1]);
    RUN_EXPECT(4, "--cache", db, "cache", "show", keys[0]);

    /* verify finds a damaged blob: exit 5, and show refuses it with 5. */
    {
        sqlite3 *s = NULL;
        char sql[256];
        CHECK(sqlite3_open(db, &s) == SQLITE_OK);
        sqlite3_busy_timeout(s, 5000);
        snprintf(sql, sizeof(sql), "UPDATE artifacts SET cubin = x'00' WHERE key = '%s'", keys[2]);
        CHECK(sqlite3_exec(s, sql, NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(s);
    }
    RUN_EXPECT(5, "--cache", db, "cache", "verify");
    CHECK(strstr(out, keys[2]) != NULL);
    RUN_EXPECT(5, "--cache", db, "--json", "cache", "verify");
    RUN_EXPECT(5, "--cache", db, "cache", "show", keys[2]);
    RUN_EXPECT(5, "--cache", db, "cache", "export", exp);

    /* prune to a size of zero empties it; vacuum works on the result. */
    RUN_EXPECT(0, "--cache", db, "cache", "prune", "--max-size", "0");
    RUN_EXPECT(0, "--cache", db, "--json", "cache", "ls");
    CHECK(count_json_artifacts() == 0);
    RUN_EXPECT(0, "--cache", db, "cache", "vacuum");
    RUN_EXPECT(0, "--cache", db, "cache", "verify");

    /* prune by arch with a size limit in other units. */
    RUN_EXPECT(0, "--cache", db2, "cache", "prune", "--arch", "sm_80", "--max-size", "1.5MiB");
    RUN_EXPECT(0, "--cache", db2, "--json", "cache", "ls");
    CHECK(count_json_artifacts() == 3);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_hidetctl PATH/TO/hidetctl\n");
        return 2;
    }
    hidetctl = argv[1];
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_hidetctl.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_usage();
    test_token();
    test_kernel_dispatch();
    test_job_range();
    test_cache();
    if (failures) {
        fprintf(stderr, "%d check(s) failed; files left in %s\n", failures, tmpdir);
        return 1;
    }
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("all hidetctl tests passed\n");
    return 0;
}
