/* tests/integration/harness.c - see harness.h. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tests/slurp.h"

_Atomic int ht_failures;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

void ht_init(ht_daemon *d)
{
    memset(d, 0, sizeof(*d));
    d->pid = -1;
    snprintf(d->dir, sizeof(d->dir), "/tmp/hidetd-it-XXXXXX");
    if (!mkdtemp(d->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(d->socket, sizeof(d->socket), "%s/hidetd.sock", d->dir);
    snprintf(d->cache, sizeof(d->cache), "%s/cache/kernels.db", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/hidetd.log", d->dir);
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void ht_arg(ht_daemon *d, const char *arg)
{
    if (d->n_extra < (int)(sizeof(d->extra) / sizeof(d->extra[0])))
        d->extra[d->n_extra++] = arg;
}

void ht_use_standin(ht_daemon *d)
{
    char state_dir[sizeof(d->dir) + 16];
    snprintf(state_dir, sizeof(state_dir), "%s/standin", d->dir);
    ht_sh(NULL, "mkdir -p '%s'", state_dir);
    setenv("HIDETD_STANDIN_STATE_DIR", state_dir, 1);
    unsetenv("HIDETD_STANDIN_FAULTS");
    ht_arg(d, "--workers");
    ht_arg(d, "standin");
}

void ht_write_config(ht_daemon *d, const char *text)
{
    snprintf(d->config, sizeof(d->config), "%s/hidetd.conf", d->dir);
    ht_write_file(d->config, text, strlen(text));
}

int ht_free_port(void)
{
    /* Ask the kernel for a free port, then hand it to whoever listens next. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        perror("free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

void ht_enable_http(ht_daemon *d)
{
    d->http_port = ht_free_port();
    /* Every TCP request needs the token, loopback included. */
    snprintf(d->token_file, sizeof(d->token_file), "%s/token", d->dir);
    ht_write_file(d->token_file, HT_TOKEN "\n", strlen(HT_TOKEN) + 1);
}

static pid_t spawn(ht_daemon *d)
{
    const char *bin = env_or("HIDETD_BIN", "hidetd");
    const char *argv[48];
    int n = 0;
    static char http_arg[64];
    argv[n++] = bin;
    argv[n++] = "--socket";
    argv[n++] = d->socket;
    argv[n++] = "--cache";
    argv[n++] = d->cache;
    if (d->config[0]) {
        argv[n++] = "--config";
        argv[n++] = d->config;
    }
    if (d->http_port) {
        snprintf(http_arg, sizeof(http_arg), "127.0.0.1:%d", d->http_port);
        argv[n++] = "--http";
        argv[n++] = http_arg;
        argv[n++] = "--token-file";
        argv[n++] = d->token_file;
    }
    for (int i = 0; i < d->n_extra; i++)
        argv[n++] = d->extra[i];
    argv[n] = NULL;

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execv(bin, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    return pid;
}

static void print_log(const ht_daemon *d)
{
    char *out = NULL;
    ht_sh(&out, "tail -n 40 '%s'", d->log);
    fprintf(stderr, "---- hidetd log (%s) ----\n%s---- end of log ----\n", d->log, out ? out : "");
    free(out);
}

int ht_start(ht_daemon *d)
{
    d->pid = spawn(d);
    double deadline = now_s() + 20;
    while (now_s() < deadline) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            fprintf(stderr, "hidetd exited during start-up (status %d)\n", st);
            d->pid = -1;
            print_log(d);
            return -1;
        }
        ht_resp r = ht_get(d, "/healthz");
        long status = r.status;
        ht_resp_free(&r);
        if (status == 200)
            return 0;
        sleep_ms(50);
    }
    fprintf(stderr, "hidetd did not answer /healthz within 20 s\n");
    print_log(d);
    return -1;
}

static int wait_exit(pid_t pid, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (now_s() < deadline) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0)
            return -1;
        sleep_ms(20);
    }
    return -1;
}

int ht_run_expect_exit(ht_daemon *d, double timeout_s)
{
    pid_t pid = spawn(d);
    int st = wait_exit(pid, timeout_s);
    if (st < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return st;
}

static bool log_has(const ht_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

bool ht_log_contains(const ht_daemon *d, const char *needle)
{
    /* hidetd's log writer writes the lines of up to 10 ms at once, so a line logged just before
     * what the test saw (an answer, READY) may not be in the file yet: look again for up to 2 s. */
    for (int i = 0; i < 100; i++) {
        if (log_has(d, needle))
            return true;
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    return log_has(d, needle);
}

int ht_stop(ht_daemon *d, int sig)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig);
    int st = wait_exit(d->pid, 20);
    if (st < 0) {
        fprintf(stderr, "hidetd did not exit within 20 s of signal %d; killing it\n", sig);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        print_log(d);
    }
    d->pid = -1;
    if (sig != SIGKILL) {
        bool bad = ht_log_contains(d, "AddressSanitizer") || ht_log_contains(d, "LeakSanitizer") ||
                   ht_log_contains(d, "runtime error:");
        CHECK(!bad, "sanitizer report in the daemon's log %s", d->log);
        if (bad)
            print_log(d);
    }
    return st;
}

void ht_cleanup(ht_daemon *d)
{
    if (d->pid > 0)
        ht_stop(d, SIGKILL);
    if (ht_failures == 0)
        ht_sh(NULL, "rm -rf '%s'", d->dir);
    else
        fprintf(stderr, "kept %s for inspection\n", d->dir);
}

size_t ht_curl_write(char *p, size_t sz, size_t n, void *ud)
{
    ht_buf *g = ud;
    size_t add = sz * n;
    char *nb = realloc(g->buf, g->len + add + 1);
    if (!nb)
        return 0;
    memcpy(nb + g->len, p, add);
    g->buf = nb;
    g->len += add;
    g->buf[g->len] = 0;
    return add;
}

ht_resp ht_request(const ht_daemon *d, bool tcp, const char *method, const char *path,
                   const char *body, size_t body_len, const char *const *headers)
{
    ht_resp r = {0};
    ht_buf g = {0};
    CURL *c = curl_easy_init();
    char url[512];
    if (tcp) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", d->http_port, path);
    } else {
        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ht_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    if (tcp)
        hl = curl_slist_append(hl, "Authorization: Bearer " HT_TOKEN);
    for (int i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ct)
            snprintf(r.content_type, sizeof(r.content_type), "%s", ct);
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    r.body = g.buf ? g.buf : calloc(1, 1);
    r.len = g.len;
    if (strstr(r.content_type, "json"))
        r.json = cJSON_Parse(r.body);
    return r;
}

ht_resp ht_get(const ht_daemon *d, const char *path)
{
    return ht_request(d, false, "GET", path, NULL, 0, NULL);
}

ht_resp ht_post(const ht_daemon *d, const char *path, const char *body)
{
    return ht_request(d, false, "POST", path, body, strlen(body), NULL);
}

void ht_resp_free(ht_resp *r)
{
    free(r->body);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof(*r));
}

const char *ht_error_code(const ht_resp *r)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r->json, "error");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    return cJSON_IsString(c) ? c->valuestring : "";
}

char *ht_read_src(const char *relpath)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", env_or("HIDETD_SRC", "."), relpath);
    char *buf = test_slurp(path, NULL);
    if (!buf)
        fprintf(stderr, "cannot read %s\n", path);
    return buf;
}

int ht_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

int ht_sh(char **out, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    ht_buf g = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        ht_curl_write(chunk, 1, n, &g);
    int st = pclose(p);
    if (out)
        *out = g.buf ? g.buf : calloc(1, 1);
    else
        free(g.buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int ht_ptxas(const char *ptx, size_t len, const char *arch)
{
    char path[] = "/tmp/hidetd-ptx-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    ht_write_file(path, ptx, len);
    char *out = NULL;
    int st = ht_sh(&out, "ptxas -arch=%s '%s' -o /dev/null 2>&1", arch, path);
    if (st != 0)
        fprintf(stderr, "ptxas -arch=%s rejected the PTX (status %d):\n%s\n", arch, st, out);
    free(out);
    unlink(path);
    return st == 0 ? 0 : -1;
}

int ht_cuobjdump(const void *cubin, size_t len, int sm)
{
    if (ht_sh(NULL, "command -v cuobjdump >/dev/null 2>&1") != 0)
        return 1;
    char path[] = "/tmp/hidetd-cubin-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    ht_write_file(path, cubin, len);
    char *out = NULL;
    int st = ht_sh(&out, "cuobjdump -elf '%s' 2>&1", path);
    char want[32];
    snprintf(want, sizeof(want), "sm=%d", sm);
    int rc = (st == 0 && strstr(out, want)) ? 0 : -1;
    if (rc)
        fprintf(stderr, "cuobjdump could not read the cubin as %s (status %d):\n%.2000s\n", want, st, out);
    free(out);
    unlink(path);
    return rc;
}

int ht_sass_count(const void *cubin, size_t len, const char *opcode)
{
    if (ht_sh(NULL, "command -v cuobjdump >/dev/null 2>&1") != 0)
        return -2;
    char path[] = "/tmp/hidetd-cubin-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    ht_write_file(path, cubin, len);
    char *out = NULL;
    int st = ht_sh(&out, "cuobjdump -sass '%s' 2>&1", path);
    int n = -1;
    if (st != 0 && out && strstr(out, "nvdisasm")) /* cuobjdump disassembles through nvdisasm */
        n = -2;
    else if (st == 0 && out) {
        n = 0;
        for (const char *at = out; (at = strstr(at, opcode)) != NULL; at += strlen(opcode))
            n++;
    }
    free(out);
    unlink(path);
    return n;
}

int ht_finish(const char *name)
{
    if (ht_failures)
        fprintf(stderr, "%s: %d check(s) failed\n", name, (int)ht_failures);
    else
        printf("%s: all checks passed\n", name);
    return ht_failures ? 1 : 0;
}
