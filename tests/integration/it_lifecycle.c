/* tests/integration/it_lifecycle.c - start-up and shutdown: a live daemon on the same socket
 * refuses a second one clearly, a stale socket file does not stop a start, SIGTERM and SIGINT exit
 * 0 and remove the socket, TCP serves the same API on loopback, a non-loopback bind without a
 * token is refused, and the daemon starts and serves with no GPU and no worker. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

int main(void)
{
    ht_daemon d;
    ht_init(&d);
    ht_enable_http(&d);
    ht_arg(&d, "--workers");
    ht_arg(&d, "none");
    if (ht_start(&d) != 0)
        return 1;

    /* The same API over TCP, keep-alive included. */
    ht_resp r = ht_request(&d, true, "GET", "/healthz", NULL, 0, NULL);
    CHECK(r.status == 200, "TCP healthz: %ld", r.status);
    ht_resp_free(&r);
    const char *req = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[32,1000],\"dtype\":\"f16\"}],"
                      "\"arch\":\"sm_90\",\"tune\":\"model\"}";
    r = ht_request(&d, true, "POST", "/v1/kernels", req, strlen(req), NULL);
    CHECK(r.status == 200, "TCP kernel: %ld %.300s", r.status, r.body);
    ht_resp_free(&r);
    r = ht_post(&d, "/v1/kernels", req);
    CHECK(r.status == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.json, "cached")),
             "unix after TCP is a hit: %ld", r.status);
    ht_resp_free(&r);

    r = ht_get(&d, "/v1/status");
    CHECK(r.status == 200 && r.json, "status: %ld", r.status);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r.json, "gpu_available")),
             "gpu_available should be false with --workers none: %.300s", r.body);
    CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r.json, "workers")), "workers array");
    CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r.json, "cache")), "cache object");
    ht_resp_free(&r);

    /* A second daemon on the same socket refuses to start, with a clear message. */
    ht_daemon second = d;
    snprintf(second.log, sizeof(second.log), "%s/second.log", d.dir);
    snprintf(second.cache, sizeof(second.cache), "%s/second.db", d.dir);
    second.http_port = 0;
    int st = ht_run_expect_exit(&second, 10);
    CHECK(st != 0 && st != -1, "second daemon exit status %d", st);
    CHECK(ht_log_contains(&second, "already") || ht_log_contains(&second, "another"),
             "second daemon did not explain the refusal (see %s)", second.log);
    r = ht_get(&d, "/healthz");
    CHECK(r.status == 200, "first daemon hurt by the second: %ld", r.status);
    ht_resp_free(&r);

    /* SIGINT exits 0 and removes the socket. */
    CHECK(ht_stop(&d, SIGINT) == 0, "SIGINT exit status");
    CHECK(access(d.socket, F_OK) != 0, "socket left after SIGINT");

    /* A stale socket file (nobody listening) does not stop the start. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, d.socket, strnlen(d.socket, sizeof(a.sun_path) - 1));
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind stale");
    close(fd); /* the file stays, nobody listens */
    CHECK(access(d.socket, F_OK) == 0, "stale file missing");
    if (ht_start(&d) != 0)
        return 1;
    r = ht_post(&d, "/v1/kernels", req);
    CHECK(r.status == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.json, "cached")),
             "after stale socket: %ld", r.status);
    ht_resp_free(&r);
    CHECK(ht_stop(&d, SIGTERM) == 0, "SIGTERM exit status");

    /* TCP on a non-loopback address needs a token. */
    ht_daemon open_tcp;
    ht_init(&open_tcp);
    ht_arg(&open_tcp, "--workers");
    ht_arg(&open_tcp, "none");
    ht_arg(&open_tcp, "--http");
    ht_arg(&open_tcp, "0.0.0.0:0");
    st = ht_run_expect_exit(&open_tcp, 10);
    CHECK(st != 0 && st != -1, "non-loopback without token: exit %d", st);
    CHECK(ht_log_contains(&open_tcp, "token"), "no explanation about the token (%s)", open_tcp.log);
    ht_cleanup(&open_tcp);

    /* A --socket in a directory that does not exist: refused with a reason, and no directory
     * is made (only the default socket's directory is). */
    ht_daemon typo;
    ht_init(&typo);
    char missing[sizeof(typo.dir) + 16];
    snprintf(missing, sizeof(missing), "%s/typo", typo.dir);
    snprintf(typo.socket, sizeof(typo.socket), "%.280s/x.sock", missing);
    ht_arg(&typo, "--workers");
    ht_arg(&typo, "none");
    st = ht_run_expect_exit(&typo, 10);
    CHECK(st != 0 && st != -1, "socket in a missing directory: exit %d", st);
    CHECK(access(missing, F_OK) != 0, "%s was created", missing);
    CHECK(ht_log_contains(&typo, "directory does not exist"), "no reason given (%s)", typo.log);
    ht_cleanup(&typo);

    /* No GPU driver (a worker that the loader cannot start: libcuda.so.1 missing, exit 127):
     * one line that says what that means, not the loader's complaint. */
    ht_daemon nodrv;
    ht_init(&nodrv);
    char fake[sizeof(nodrv.dir) + 16];
    snprintf(fake, sizeof(fake), "%s/worker.sh", nodrv.dir);
    FILE *f = fopen(fake, "w");
    CHECK(f != NULL, "%s", fake);
    if (f) {
        fprintf(f, "#!/bin/sh\necho \"$0: error while loading shared libraries: libcuda.so.1: "
                   "cannot open shared object file: No such file or directory\" >&2\nexit 127\n");
        fclose(f);
        chmod(fake, 0755);
    }
    ht_arg(&nodrv, "--workers");
    ht_arg(&nodrv, fake);
    if (ht_start(&nodrv) == 0) {
        CHECK(ht_log_contains(&nodrv, "no GPU driver found: serving; tune measure answers from "
                                      "the cost model"), "no one-line no-GPU notice (%s)", nodrv.log);
        CHECK(!ht_log_contains(&nodrv, "error while loading") && !ht_log_contains(&nodrv, "/../"),
              "the loader's error or a ../ path in the log (%s)", nodrv.log);
        CHECK(ht_stop(&nodrv, SIGTERM) == 0, "no-driver daemon: SIGTERM exit status");
    } else {
        CHECK(false, "hidetd did not serve without a GPU driver");
    }
    ht_cleanup(&nodrv);

    ht_cleanup(&d);
    return ht_finish("it_lifecycle");
}
