/* daemon/tests/test_routes.c - the route table (method/path matching, 404 vs 405 with Allow),
 * key and job-id checks, and the bearer-token authorisation. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "tests/check.h"
#include "daemon/routes.h"

static const char key64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static void expect(const char *method, const char *path, int status, hd_route_id id,
                   const char *allow, const char *arg)
{
    hd_route_match m;
    hd_route_find(method, path, &m);
    CHECK(m.status == status, "%s %s: status %d, want %d", method, path, m.status, status);
    if (status == 200)
        CHECK(m.id == id, "%s %s: route %d, want %d", method, path, (int)m.id, (int)id);
    if (allow)
        CHECK(m.allow && strcmp(m.allow, allow) == 0, "%s %s: Allow '%s', want '%s'", method,
              path, m.allow ? m.allow : "(null)", allow);
    if (arg)
        CHECK(m.arg && m.arg_len == strlen(arg) && strncmp(m.arg, arg, m.arg_len) == 0,
              "%s %s: arg '%.*s', want '%s'", method, path, (int)m.arg_len, m.arg ? m.arg : "", arg);
}

static void table(void)
{
    char p[256];
    expect("GET", "/healthz", 200, HD_ROUTE_HEALTHZ, NULL, NULL);
    expect("POST", "/healthz", 405, 0, "GET", NULL);
    expect("GET", "/v1/status", 200, HD_ROUTE_STATUS, NULL, NULL);
    expect("GET", "/metrics", 200, HD_ROUTE_METRICS, NULL, NULL);
    expect("DELETE", "/metrics", 405, 0, "GET", NULL);
    expect("POST", "/v1/kernels", 200, HD_ROUTE_KERNELS, NULL, NULL);
    expect("GET", "/v1/kernels", 405, 0, "POST", NULL);
    expect("POST", "/v1/spaces", 200, HD_ROUTE_SPACES, NULL, NULL);
    expect("PUT", "/v1/spaces", 405, 0, "POST", NULL);
    snprintf(p, sizeof(p), "/v1/kernels/%s", key64);
    expect("GET", p, 200, HD_ROUTE_KERNEL, NULL, key64);
    expect("POST", p, 405, 0, "GET", NULL);
    snprintf(p, sizeof(p), "/v1/kernels/%s/ptx", key64);
    expect("GET", p, 200, HD_ROUTE_KERNEL_PTX, NULL, key64);
    snprintf(p, sizeof(p), "/v1/kernels/%s/cubin", key64);
    expect("GET", p, 200, HD_ROUTE_KERNEL_CUBIN, NULL, key64);
    snprintf(p, sizeof(p), "/v1/kernels/%s/sass", key64);
    expect("GET", p, 404, 0, NULL, NULL);
    snprintf(p, sizeof(p), "/v1/kernels/%s/ptx/x", key64);
    expect("GET", p, 404, 0, NULL, NULL);
    /* A malformed key still routes (the handler answers 400, not 404). */
    expect("GET", "/v1/kernels/xyz", 200, HD_ROUTE_KERNEL, NULL, "xyz");
    expect("GET", "/v1/kernels/", 404, 0, NULL, NULL);
    expect("GET", "/v1/jobs", 200, HD_ROUTE_JOBS, NULL, NULL);
    expect("POST", "/v1/jobs", 405, 0, "GET", NULL);
    expect("GET", "/v1/jobs/17", 200, HD_ROUTE_JOB_GET, NULL, "17");
    expect("DELETE", "/v1/jobs/17", 200, HD_ROUTE_JOB_DELETE, NULL, "17");
    expect("PATCH", "/v1/jobs/17", 405, 0, "GET, DELETE", NULL);
    expect("GET", "/v1/jobs/17/x", 404, 0, NULL, NULL);
    expect("GET", "/v1/jobs/", 404, 0, NULL, NULL);
    expect("GET", "/", 404, 0, NULL, NULL);
    expect("GET", "/healthz/", 404, 0, NULL, NULL);
    expect("GET", "/V1/STATUS", 404, 0, NULL, NULL);
    expect("GET", "/v1/statusx", 404, 0, NULL, NULL);
    expect("get", "/healthz", 405, 0, "GET", NULL); /* methods are case-sensitive (RFC 9110) */
    expect("GET", "", 404, 0, NULL, NULL);

    hd_route_match m;
    hd_route_find(NULL, "/healthz", &m);
    CHECK(m.status == 404, "NULL method");
    CHECK_STR(hd_route_label(HD_ROUTE_KERNEL), "/v1/kernels/{key}");
    CHECK_STR(hd_route_label(HD_ROUTE_NONE), "other");
}

static void keys_and_ids(void)
{
    CHECK(hd_valid_key(key64, 64), "valid key");
    CHECK(!hd_valid_key(key64, 63), "short key");
    char upper[65];
    memcpy(upper, key64, 65);
    upper[10] = 'A';
    CHECK(!hd_valid_key(upper, 64), "uppercase hex");
    upper[10] = 'g';
    CHECK(!hd_valid_key(upper, 64), "non-hex");
    CHECK(!hd_valid_key(NULL, 64), "NULL");

    uint64_t id = 0;
    CHECK(hd_parse_job_id("17", 2, &id) == 0 && id == 17, "17");
    CHECK(hd_parse_job_id("9223372036854775807", 19, &id) == 0 && id == 9223372036854775807ULL, "max");
    id = 5;
    static const char *const bad[] = { "0", "017", "-1", "1x", "", "9223372036854775808",
                                       "99999999999999999999", " 1" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(hd_parse_job_id(bad[i], strlen(bad[i]), &id) < 0 && id == 5, "id '%s' accepted", bad[i]);
}

static void auth(void)
{
    CHECK(hd_auth_allowed(false, NULL, NULL), "not required (Unix socket, tcp_auth none)");
    CHECK(hd_auth_allowed(false, "Bearer wrong", "s3cret"), "not required: the header is ignored");
    CHECK(!hd_auth_allowed(true, NULL, NULL), "required, no token configured: fail closed");
    CHECK(!hd_auth_allowed(true, "Bearer ", ""), "empty token configured: fail closed");
    CHECK(!hd_auth_allowed(true, NULL, "s3cret"), "required, no header");
    CHECK(hd_auth_allowed(true, "Bearer s3cret", "s3cret"), "right token");
    CHECK(hd_auth_allowed(true, "bearer s3cret", "s3cret"), "scheme is case-insensitive");
    CHECK(hd_auth_allowed(true, "Bearer   s3cret  ", "s3cret"), "surrounding spaces");
    CHECK(!hd_auth_allowed(true, "Bearer s3cre", "s3cret"), "prefix of the token");
    CHECK(!hd_auth_allowed(true, "Bearer s3cretx", "s3cret"), "token plus a suffix");
    CHECK(!hd_auth_allowed(true, "Bearer S3CRET", "s3cret"), "token is case-sensitive");
    CHECK(!hd_auth_allowed(true, "Basic s3cret", "s3cret"), "other scheme");
    CHECK(!hd_auth_allowed(true, "Bearers3cret", "s3cret"), "no separator");
    CHECK(!hd_auth_allowed(true, "s3cret", "s3cret"), "no scheme");
    CHECK(!hd_auth_allowed(true, "", "s3cret"), "empty header");
}

/* The tuning queue's client: a uid on the Unix socket, the token on TCP (not the address). */
static void identity(void)
{
    char a[64], b[64];
    hd_client_identity(false, "uid:1000", "Bearer s3cret", "s3cret", a, sizeof(a));
    CHECK(strcmp(a, "uid:1000") == 0, "Unix socket: the uid (%s)", a);
    hd_client_identity(false, NULL, NULL, NULL, a, sizeof(a));
    CHECK(strcmp(a, "unix") == 0, "Unix socket, no credentials (%s)", a);
    hd_client_identity(true, "ip:127.0.0.1", "Bearer s3cret", "s3cret", a, sizeof(a));
    hd_client_identity(true, "ip:127.0.0.2", "bearer  s3cret ", "s3cret", b, sizeof(b));
    CHECK(strncmp(a, "token:", 6) == 0 && strlen(a) == 6 + 16, "TCP with the token (%s)", a);
    CHECK(strcmp(a, b) == 0, "one token from two addresses is one client (%s, %s)", a, b);
    CHECK(strstr(a, "s3cret") == NULL, "the token itself is not in its name");
    hd_client_identity(true, "ip:127.0.0.1", "Bearer 0ther", "0ther", b, sizeof(b));
    CHECK(strcmp(a, b) != 0, "another token is another client");
    hd_client_identity(true, "ip:127.0.0.1", NULL, "s3cret", a, sizeof(a));
    hd_client_identity(true, "ip:127.0.0.3", "Bearer wrong", "s3cret", b, sizeof(b));
    CHECK(strcmp(a, "tcp:anonymous") == 0 && strcmp(b, a) == 0,
          "TCP without the token (tcp_auth = none): one anonymous client (%s, %s)", a, b);
    hd_client_identity(true, "ip:127.0.0.1", "Bearer x", NULL, a, sizeof(a));
    CHECK(strcmp(a, "tcp:anonymous") == 0, "no token configured (%s)", a);
    char small[8];
    hd_client_identity(true, "ip:127.0.0.1", "Bearer s3cret", "s3cret", small, sizeof(small));
    CHECK(strlen(small) == 7, "truncated to the buffer");
}

static void hosts(void)
{
    CHECK(hd_host_allowed(NULL, "127.0.0.1", NULL), "no Host header");
    CHECK(hd_host_allowed("127.0.0.1:8080", "127.0.0.1", NULL), "own address");
    CHECK(hd_host_allowed("localhost:8080", "127.0.0.1", NULL), "localhost");
    CHECK(hd_host_allowed("LOCALHOST", "127.0.0.1", NULL), "case-insensitive");
    CHECK(hd_host_allowed("127.0.0.5", "10.0.0.2", NULL), "any loopback address");
    CHECK(hd_host_allowed("[::1]:8080", "::1", NULL), "IPv6 loopback in brackets");
    CHECK(hd_host_allowed("10.0.0.2:8080", "10.0.0.2", NULL), "the address connected to");
    CHECK(hd_host_allowed("[fd00::2]:80", "fd00::2", NULL), "an IPv6 address connected to");
    CHECK(hd_host_allowed("gpu-host:8080", "10.0.0.2", "other, gpu-host"), "a configured name");
    CHECK(hd_host_allowed("GPU-HOST", "10.0.0.2", "gpu-host"), "configured, case-insensitive");
    CHECK(!hd_host_allowed("evil.example:8080", "127.0.0.1", NULL), "a foreign name");
    CHECK(!hd_host_allowed("evil.example", "127.0.0.1", "gpu-host evil"), "prefix of a name");
    CHECK(!hd_host_allowed("gpu", "10.0.0.2", "gpu-host"), "a prefix of a configured name");
    CHECK(!hd_host_allowed("10.0.0.3", "10.0.0.2", NULL), "another address");
    CHECK(!hd_host_allowed("", "127.0.0.1", NULL), "an empty Host");
    CHECK(!hd_host_allowed("[::1", "::1", NULL), "an unclosed bracket");
    CHECK(!hd_host_allowed("[::1]x", "::1", NULL), "text after the bracket");
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    table();
    keys_and_ids();
    auth();
    identity();
    hosts();
    return check_finish("test_routes");
}
