/* daemon/routes.c - see routes.h. */
#include "daemon/routes.h"

#include "daemon/config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

static const char *const labels[HD_ROUTE_COUNT] = {
    [HD_ROUTE_HEALTHZ] = "/healthz",
    [HD_ROUTE_STATUS] = "/v1/status",
    [HD_ROUTE_METRICS] = "/metrics",
    [HD_ROUTE_KERNELS] = "/v1/kernels",
    [HD_ROUTE_KERNEL] = "/v1/kernels/{key}",
    [HD_ROUTE_KERNEL_PTX] = "/v1/kernels/{key}/ptx",
    [HD_ROUTE_KERNEL_CUBIN] = "/v1/kernels/{key}/cubin",
    [HD_ROUTE_SPACES] = "/v1/spaces",
    [HD_ROUTE_JOBS] = "/v1/jobs",
    [HD_ROUTE_JOB_GET] = "/v1/jobs/{id}",
    [HD_ROUTE_JOB_DELETE] = "/v1/jobs/{id}",
    [HD_ROUTE_GRAPHS] = "/v1/graphs",
    [HD_ROUTE_GRAPH_JOB] = "/v1/graphs/jobs/{id}",
};

const char *hd_route_label(hd_route_id id)
{
    if ((int)id < 0 || id >= HD_ROUTE_COUNT)
        return "other";
    return labels[id];
}

static void set(hd_route_match *m, const char *method, const char *want, hd_route_id id,
                const char *allow)
{
    if (strcmp(method, want) == 0) {
        m->status = 200;
        m->id = id;
    } else {
        m->status = 405;
        m->allow = allow;
    }
}

void hd_route_find(const char *method, const char *path, hd_route_match *ret)
{
    hd_route_match m = { .status = 404, .id = HD_ROUTE_NONE };
    if (!method || !path || !ret) {
        if (ret)
            *ret = m;
        return;
    }
    static const char kernels[] = "/v1/kernels/";
    static const char jobs[] = "/v1/jobs/";
    static const char graph_jobs[] = "/v1/graphs/jobs/";
    if (strcmp(path, "/healthz") == 0) {
        set(&m, method, "GET", HD_ROUTE_HEALTHZ, "GET");
    } else if (strcmp(path, "/v1/status") == 0) {
        set(&m, method, "GET", HD_ROUTE_STATUS, "GET");
    } else if (strcmp(path, "/metrics") == 0) {
        set(&m, method, "GET", HD_ROUTE_METRICS, "GET");
    } else if (strcmp(path, "/v1/kernels") == 0) {
        set(&m, method, "POST", HD_ROUTE_KERNELS, "POST");
    } else if (strcmp(path, "/v1/spaces") == 0) {
        set(&m, method, "POST", HD_ROUTE_SPACES, "POST");
    } else if (strcmp(path, "/v1/jobs") == 0) {
        set(&m, method, "GET", HD_ROUTE_JOBS, "GET");
    } else if (strcmp(path, "/v1/graphs") == 0) {
        set(&m, method, "POST", HD_ROUTE_GRAPHS, "POST");
    } else if (strncmp(path, graph_jobs, sizeof(graph_jobs) - 1) == 0) {
        const char *arg = path + sizeof(graph_jobs) - 1;
        size_t len = strlen(arg);
        if (len == 0 || strchr(arg, '/'))
            goto done;
        set(&m, method, "GET", HD_ROUTE_GRAPH_JOB, "GET");
        m.arg = arg;
        m.arg_len = len;
    } else if (strncmp(path, kernels, sizeof(kernels) - 1) == 0) {
        const char *arg = path + sizeof(kernels) - 1;
        const char *slash = strchr(arg, '/');
        size_t len = slash ? (size_t)(slash - arg) : strlen(arg);
        if (len == 0)
            goto done;
        hd_route_id id;
        if (!slash)
            id = HD_ROUTE_KERNEL;
        else if (strcmp(slash, "/ptx") == 0)
            id = HD_ROUTE_KERNEL_PTX;
        else if (strcmp(slash, "/cubin") == 0)
            id = HD_ROUTE_KERNEL_CUBIN;
        else
            goto done;
        set(&m, method, "GET", id, "GET");
        m.arg = arg;
        m.arg_len = len;
    } else if (strncmp(path, jobs, sizeof(jobs) - 1) == 0) {
        const char *arg = path + sizeof(jobs) - 1;
        size_t len = strlen(arg);
        if (len == 0 || strchr(arg, '/'))
            goto done;
        m.arg = arg;
        m.arg_len = len;
        if (strcmp(method, "GET") == 0) {
            m.status = 200;
            m.id = HD_ROUTE_JOB_GET;
        } else if (strcmp(method, "DELETE") == 0) {
            m.status = 200;
            m.id = HD_ROUTE_JOB_DELETE;
        } else {
            m.status = 405;
            m.allow = "GET, DELETE";
        }
    }
done:
    *ret = m;
}

bool hd_valid_key(const char *s, size_t len)
{
    if (!s || len != 64)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

int hd_parse_job_id(const char *s, size_t len, uint64_t *ret)
{
    if (!s || !ret || len == 0 || len > 19 || s[0] == '0')
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v == 0 || v > (uint64_t)INT64_MAX)
        return -EINVAL;
    *ret = v;
    return 0;
}

bool hd_auth_allowed(bool required, const char *authorization, const char *token)
{
    if (!required)
        return true;
    if (!token || !*token || !authorization)
        return false;
    const char *p = authorization;
    while (*p == ' ')
        p++;
    if (strncasecmp(p, "Bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
        return false;
    p += 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    /* Compare digests, not the strings: equal-length, constant-time, and the time taken does not
     * depend on where (or whether) the lengths differ. */
    unsigned char a[crypto_generichash_BYTES], b[crypto_generichash_BYTES];
    crypto_generichash(a, sizeof(a), (const unsigned char *)p, n, NULL, 0);
    crypto_generichash(b, sizeof(b), (const unsigned char *)token, strlen(token), NULL, 0);
    return sodium_memcmp(a, b, sizeof(a)) == 0;
}

void hd_client_identity(bool tcp, const char *owner, const char *authorization, const char *token,
                        char *out, size_t n)
{
    if (!out || n == 0)
        return;
    if (!tcp) {
        snprintf(out, n, "%s", owner && *owner ? owner : "unix");
        return;
    }
    if (!hd_auth_allowed(true, authorization, token)) {
        snprintf(out, n, "tcp:anonymous");
        return;
    }
    /* A digest under a context of its own: the name shows in no log, but even where it did it
     * would not help anyone to guess the token. */
    static const unsigned char ctx[] = "hidetd client identity v1";
    unsigned char d[crypto_generichash_BYTES_MIN];
    crypto_generichash(d, sizeof(d), (const unsigned char *)token, strlen(token), ctx,
                       sizeof(ctx) - 1);
    char hex[2 * 8 + 1];
    sodium_bin2hex(hex, sizeof(hex), d, 8);
    snprintf(out, n, "token:%s", hex);
}

/* Whether the n bytes at s spell name (case-insensitively). */
static bool name_is(const char *s, size_t n, const char *name)
{
    return name && strlen(name) == n && n > 0 && strncasecmp(s, name, n) == 0;
}

bool hd_host_allowed(const char *host, const char *local_addr, const char *allowed)
{
    if (!host)
        return true;
    const char *h = host;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    /* The name without its port: "[::1]:8080" -> "::1", "host:8080" -> "host". */
    char name[256];
    if (n && h[0] == '[') {
        const char *close = memchr(h, ']', n);
        if (!close || (size_t)(close - h) - 1 >= sizeof(name))
            return false;
        size_t after = n - (size_t)(close - h) - 1;
        if (after && close[1] != ':')
            return false;
        n = (size_t)(close - h) - 1;
        memcpy(name, h + 1, n);
    } else {
        const char *colon = memchr(h, ':', n);
        if (colon)
            n = (size_t)(colon - h);
        if (n >= sizeof(name))
            return false;
        memcpy(name, h, n);
    }
    name[n] = '\0';
    if (n == 0)
        return false;
    if (hd_host_is_loopback(name))
        return true;
    if (local_addr && *local_addr && name_is(name, n, local_addr))
        return true;
    for (const char *p = allowed ? allowed : ""; *p;) {
        size_t len = strcspn(p, " \t,");
        if (name_is(p, len, name) && len == n)
            return true;
        p += len;
        p += strspn(p, " \t,");
    }
    return false;
}
