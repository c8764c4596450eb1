/* clients/c/client.c - libhidet-client's transport (libcurl) and the API calls on top of it.
 *
 * One CURL easy handle per client, reset (not recreated) before each request: curl keeps the
 * connection open between requests, so a process that asks for many kernels connects once.
 */
#include "clients/c/client_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>
#include <curl/curl.h>

/* An answer larger than this is not something hidetd sends; refuse to buffer it. */
#define HIDET_MAX_BODY ((size_t)1 << 30)

struct hidet_client {
    CURL *curl;
    hidet_address addr;
    char *auth;     /* "Authorization: Bearer ..." or NULL */
    long timeout_ms;
    char curl_err[CURL_ERROR_SIZE];
    /* How the address was chosen when the caller gave none ("" otherwise): a failed connect
     * says it, so "cannot connect" names the rule as well as the path. */
    char default_why[160];
};

typedef struct hidet__buf {
    char *data;
    size_t len, cap;
    bool too_big;
} hidet__buf;

static size_t hidet__write_cb(char *p, size_t size, size_t nmemb, void *user)
{
    hidet__buf *b = user;
    size_t n = size * nmemb;

    if (b->len + n + 1 > HIDET_MAX_BODY) {
        b->too_big = true;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

int hidet_address_parse(const char *address, hidet_address *ret)
{
    hidet_address a;

    if (!address || !*address || !ret)
        return -EINVAL;
    for (const char *p = address; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == ' ')
            return -EINVAL;
    memset(&a, 0, sizeof(a));
    if (strncmp(address, "http://", 7) == 0 || strncmp(address, "https://", 8) == 0) {
        const char *host = address + (address[4] == 's' ? 8 : 7);
        size_t n = strlen(address);
        if (*host == '\0' || *host == '/' || *host == ':')
            return -EINVAL;
        while (n > 0 && address[n - 1] == '/')
            n--;
        if (n >= sizeof(a.base_url))
            return -EINVAL;
        a.kind = HIDET_ADDRESS_HTTP;
        memcpy(a.base_url, address, n);
        a.base_url[n] = '\0';
    } else {
        const char *path = address;
        if (strncmp(address, "unix:", 5) == 0)
            path = address + 5;
        else if (strstr(address, "://"))
            return -EINVAL; /* some other scheme */
        /* A socket path: absolute, or relative to the working directory ("hidetd.sock",
         * "./run/h.sock"). "host:8734" is not one: a colon outside "unix:" means someone meant
         * TCP and left out http://. */
        if (*path == '\0' || (path[0] != '/' && strchr(path, ':')))
            return -EINVAL;
        if (strlen(path) >= sizeof(a.socket_path))
            return -EINVAL;
        a.kind = HIDET_ADDRESS_UNIX;
        strcpy(a.socket_path, path);
        /* The host part is not used for routing over a Unix socket, only sent as Host:. */
        strcpy(a.base_url, "http://localhost");
    }
    *ret = a;
    return 0;
}

/* ---- the default address ------------------------------------------------------------------
 *
 * One rule for every client and (without the existence checks) for the daemon's own default
 * listen path (daemon/config.c), so that a hidetd started without --socket is found by a client
 * given no address. Python's copy: clients/python/hidetd_unix.py, default_address(). */

#define HIDET_SYSTEM_SOCKET "/run/hidetd/hidetd.sock"

/* The value of an environment variable when it is an absolute path, else NULL. */
static const char *hidet__abs_env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '/' ? v : NULL;
}

static bool hidet__exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int hidet__default_address(char **ret, char *why, size_t why_len)
{
    const char *e = getenv("HIDETD_SOCKET");
    const char *rt = hidet__abs_env("XDG_RUNTIME_DIR");
    const char *note;
    char *user = NULL, *s = NULL;

    if (!ret)
        return -EINVAL;
    if (e && *e) {
        s = strdup(e);
        note = "from $HIDETD_SOCKET";
        goto done;
    }
    if (rt && asprintf(&user, "%s/hidetd.sock", rt) < 0)
        return -ENOMEM;
    if (user && hidet__exists(user)) {
        s = user;
        user = NULL;
        note = "$XDG_RUNTIME_DIR/hidetd.sock";
        goto done;
    }
    if (hidet__exists(HIDET_SYSTEM_SOCKET)) {
        s = strdup(HIDET_SYSTEM_SOCKET);
        note = "the system service's socket";
        goto done;
    }
    note = "the default; $HIDETD_SOCKET is unset and " HIDET_SYSTEM_SOCKET " does not exist";
    if (user) {
        s = user;
        user = NULL;
        goto done;
    }
    /* No runtime directory (a login without pam_systemd, a container): the daemon's cache
     * directory, which is private to the user. */
    const char *xc = hidet__abs_env("XDG_CACHE_HOME"), *home = hidet__abs_env("HOME");
    if (xc) {
        if (asprintf(&s, "%s/hidetd/hidetd.sock", xc) < 0)
            s = NULL;
    } else if (home) {
        if (asprintf(&s, "%s/.cache/hidetd/hidetd.sock", home) < 0)
            s = NULL;
    } else {
        s = strdup("./hidetd.sock");
    }
done:
    free(user);
    if (!s)
        return -ENOMEM;
    if (why && why_len)
        snprintf(why, why_len, "%s", note);
    *ret = s;
    return 0;
}

int hidet_default_address(char **ret)
{
    return hidet__default_address(ret, NULL, 0);
}

int hidet_token_from_file(const char *path, char **ret, hidet_error *err)
{
    char line[4096];
    FILE *f;

    if (!path || !ret)
        return hidet__fail(err, -EINVAL, 0, "no token file or result pointer");
    f = fopen(path, "re");
    if (!f) {
        int r = -errno;
        return hidet__fail(err, r, 0, "cannot read the token file %s: %s", path, strerror(-r));
    }
    /* The first line, as hidetd reads its own token file (a trailing newline is usual). */
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0])
        return hidet__fail(err, -EINVAL, 0, "the token file %s is empty", path);
    char *t = strdup(line);
    if (!t)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    hidet__ok(err);
    *ret = t;
    return 0;
}

int hidet_default_token(char **ret, hidet_error *err)
{
    const char *file = getenv("HIDETD_TOKEN_FILE"), *tok = getenv("HIDETD_TOKEN");

    if (!ret)
        return hidet__fail(err, -EINVAL, 0, "no result pointer");
    if (file && *file) {
        int r = hidet_token_from_file(file, ret, err);
        if (r < 0 && err) {
            char m[sizeof(err->message)];
            snprintf(m, sizeof(m), "%s", err->message);
            snprintf(err->message, sizeof(err->message), "$HIDETD_TOKEN_FILE: %.480s", m);
        }
        return r;
    }
    char *t = NULL;
    if (tok && *tok && !(t = strdup(tok)))
        return hidet__fail(err, -ENOMEM, 0, "out of memory");
    hidet__ok(err);
    *ret = t;
    return 0;
}

static pthread_once_t hidet__curl_once = PTHREAD_ONCE_INIT;
static CURLcode hidet__curl_status = CURLE_FAILED_INIT;
static void hidet__curl_init(void) { hidet__curl_status = curl_global_init(CURL_GLOBAL_DEFAULT); }

int hidet_client_open(const char *address, const char *token, hidet_client **ret,
                      hidet_error *err)
{
    hidet_client *c = NULL;
    hidet_address a;
    char *dflt = NULL, why[160] = "";
    int r;

    if (!ret)
        return hidet__fail(err, -EINVAL, 0, "no result pointer");
    if (!address) {
        if (hidet__default_address(&dflt, why, sizeof(why)) < 0)
            return hidet__fail(err, -ENOMEM, 0, "out of memory");
        address = dflt;
    }
    r = hidet_address_parse(address, &a);
    if (r < 0) {
        r = hidet__fail(err, -EINVAL, 0,
                        "bad address '%s'%s%s%s (want unix:/path, a socket path or "
                        "http://host:port)", address, why[0] ? " (" : "", why, why[0] ? ")" : "");
        free(dflt);
        return r;
    }
    free(dflt);
    /* Only TCP needs the token (the Unix socket is guarded by its file mode), so an unset or
     * unreadable $HIDETD_TOKEN_FILE never stands in the way of a local client. */
    char *env_token = NULL;
    if (!token && a.kind == HIDET_ADDRESS_HTTP) {
        r = hidet_default_token(&env_token, err);
        if (r < 0)
            return r;
        token = env_token;
    }
    if (token && (strchr(token, '\r') || strchr(token, '\n'))) {
        free(env_token);
        return hidet__fail(err, -EINVAL, 0, "the token contains a line break");
    }
    pthread_once(&hidet__curl_once, hidet__curl_init);
    if (hidet__curl_status != CURLE_OK) {
        r = hidet__fail(err, -EIO, 0, "libcurl failed to initialise");
        goto fail;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto fail;
    }
    c->addr = a;
    snprintf(c->default_why, sizeof(c->default_why), "%s", why);
    c->curl = curl_easy_init();
    if (!c->curl) {
        r = hidet__fail(err, -ENOMEM, 0, "curl_easy_init failed");
        goto fail;
    }
    if (token && *token && asprintf(&c->auth, "Authorization: Bearer %s", token) < 0) {
        c->auth = NULL;
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto fail;
    }
    free(env_token);
    hidet__ok(err);
    *ret = c;
    return 0;
fail:
    free(env_token);
    hidet_client_free(c);
    return r;
}

hidet_client *hidet_client_free(hidet_client *c)
{
    if (!c)
        return NULL;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->auth);
    free(c);
    return NULL;
}

int hidet_client_set_timeout(hidet_client *c, long ms)
{
    if (!c || ms < 0)
        return -EINVAL;
    c->timeout_ms = ms;
    return 0;
}

/* Turns an error answer's body into err; the body may be anything (a proxy's HTML page). */
static int hidet__error_answer(int status, const hidet__buf *b, hidet_error *err)
{
    int r = hidet__status_code(status);
    cJSON *root = b->data ? cJSON_ParseWithLength(b->data, b->len) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(e, "field");

    hidet__fail(err, r, status, "HTTP %d%s%s", status, cJSON_IsString(msg) ? ": " : "",
                cJSON_IsString(msg) ? msg->valuestring : "");
    if (err && cJSON_IsString(msg))
        snprintf(err->message, sizeof(err->message), "%s", msg->valuestring);
    if (err && cJSON_IsString(code))
        snprintf(err->code, sizeof(err->code), "%s", code->valuestring);
    if (err && cJSON_IsString(field))
        snprintf(err->field, sizeof(err->field), "%s", field->valuestring);
    cJSON_Delete(root);
    return r;
}

static int hidet__curl_code(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -ECONNRESET;
    }
}

/* "Failed to connect to localhost port 80" is curl's view of a Unix socket; say instead which
 * address was tried, why that one, what the system answered, and how to start hidetd. */
static int hidet__connect_failed(hidet_client *c, hidet_error *err)
{
    long os_errno = 0;
    const char *what;

    curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
    if (c->addr.kind == HIDET_ADDRESS_HTTP)
        return hidet__fail(err, -ECONNREFUSED, 0,
                           "cannot connect to hidetd at %s: %s. Is hidetd running with "
                           "--http (or [server] http) on that port?", c->addr.base_url,
                           c->curl_err[0] ? c->curl_err : "connection failed");
    switch (os_errno) {
    case ENOENT: what = "no such socket"; break;
    case ECONNREFUSED: what = "nothing listens on it (a hidetd that has stopped?)"; break;
    case EACCES: what = "permission denied (the system socket is for group hidetd)"; break;
    default:
        what = os_errno ? strerror((int)os_errno) : c->curl_err[0] ? c->curl_err : "failed";
    }
    if (c->default_why[0])
        return hidet__fail(err, -ECONNREFUSED, 0,
                           "cannot connect to hidetd at %s: %s (%s). Is hidetd running? Start "
                           "it with 'hidetd' or scripts/run.sh (they listen there by default) "
                           "or 'systemctl start hidetd.socket'; $HIDETD_SOCKET names another "
                           "socket", c->addr.socket_path, what,
                           c->default_why);
    return hidet__fail(err, -ECONNREFUSED, 0,
                       "cannot connect to hidetd at %s: %s. Is hidetd running there? Start it "
                       "with 'hidetd --socket %s'", c->addr.socket_path, what,
                       c->addr.socket_path);
}

/* One HTTP exchange. On a 2xx answer *ret_status and *ret_body (owned by the caller) are set;
 * any other outcome is an error with err filled. */
static int hidet__request(hidet_client *c, const char *method, const char *path, const char *body,
                          int *ret_status, hidet__buf *ret_body, hidet_error *err)
{
    struct curl_slist *hdr = NULL, *h;
    hidet__buf b = {0};
    char *url = NULL;
    long status = 0;
    CURLcode cc;
    int r;

    if (!c || !path || path[0] != '/')
        return hidet__fail(err, -EINVAL, 0, "bad client or path");
    if (asprintf(&url, "%s%s", c->addr.base_url, path) < 0)
        return hidet__fail(err, -ENOMEM, 0, "out of memory");

    curl_easy_reset(c->curl);
    c->curl_err[0] = '\0';
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, hidet__write_cb);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
    /* Only the scheme the address named: never follow a redirect to somewhere else. */
    curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "libhidet-client/0.1");
    if (c->addr.kind == HIDET_ADDRESS_UNIX)
        curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->addr.socket_path);
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
        curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        h = curl_slist_append(hdr, "Content-Type: application/json");
        if (!h)
            goto oom;
        hdr = h;
        /* No "Expect: 100-continue" round trip for large bodies. */
        h = curl_slist_append(hdr, "Expect:");
        if (!h)
            goto oom;
        hdr = h;
    }
    if (c->auth) {
        h = curl_slist_append(hdr, c->auth);
        if (!h)
            goto oom;
        hdr = h;
    }
    if (hdr)
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdr);

    cc = curl_easy_perform(c->curl);
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        if (b.too_big)
            r = hidet__fail(err, -EPROTO, (int)status, "the answer is larger than %zu bytes",
                            HIDET_MAX_BODY);
        else if (cc == CURLE_COULDNT_CONNECT)
            r = hidet__connect_failed(c, err);
        else
            r = hidet__fail(err, hidet__curl_code(cc), 0, "%s %s: %s", method,
                            c->addr.kind == HIDET_ADDRESS_UNIX ? c->addr.socket_path : url,
                            c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc));
        goto out;
    }
    if (status < 200 || status > 299) {
        r = hidet__error_answer((int)status, &b, err);
        goto out;
    }
    if (!b.data) {
        b.data = calloc(1, 1);
        if (!b.data)
            goto oom;
    }
    hidet__ok(err);
    if (ret_status)
        *ret_status = (int)status;
    *ret_body = b;
    b.data = NULL;
    r = 0;
    goto out;
oom:
    r = hidet__fail(err, -ENOMEM, 0, "out of memory");
out:
    /* The header list must outlive the transfer; drop the reference before freeing it. */
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    free(b.data);
    free(url);
    return r;
}

int hidet_get(hidet_client *c, const char *path, char **ret_body, size_t *ret_len,
              hidet_error *err)
{
    hidet__buf b = {0};
    int r;

    if (!ret_body)
        return hidet__fail(err, -EINVAL, 0, "no result pointer");
    r = hidet__request(c, "GET", path, NULL, NULL, &b, err);
    if (r < 0)
        return r;
    *ret_body = b.data;
    if (ret_len)
        *ret_len = b.len;
    return 0;
}

int hidet_post_json(hidet_client *c, const char *path, const char *json, int *ret_status,
                    char **ret_body, size_t *ret_len, hidet_error *err)
{
    hidet__buf b = {0};
    int r;

    if (!json || !ret_body)
        return hidet__fail(err, -EINVAL, 0, "no body or no result pointer");
    r = hidet__request(c, "POST", path, json, ret_status, &b, err);
    if (r < 0)
        return r;
    *ret_body = b.data;
    if (ret_len)
        *ret_len = b.len;
    return 0;
}

int hidet_request_kernels(hidet_client *c, const char *request_json, hidet_kernel_set **ret_set,
                          hidet_job **ret_job, hidet_error *err)
{
    hidet__buf b = {0};
    int status = 0, r;

    if (!request_json || !ret_set)
        return hidet__fail(err, -EINVAL, 0, "no request or no result pointer");
    r = hidet__request(c, "POST", "/v1/kernels", request_json, &status, &b, err);
    if (r < 0)
        return r;
    if (status == 202) {
        if (!ret_job)
            r = hidet__fail(err, -EAGAIN, status, "the daemon queued a job (the request had "
                            "\"wait\":false) and no job pointer was given");
        else
            r = hidet_job_parse(b.data, b.len, ret_job, err);
    } else if (hidet_is_dispatch(b.data, b.len)) {
        r = hidet__fail(err, -EPROTO, status, "the answer is a dispatch table (the request names "
                        "dims): ask with hidet_request_dispatch()");
    } else {
        r = hidet_kernel_set_parse(b.data, b.len, ret_set, err);
    }
    if (r < 0 && err)
        err->http_status = status;
    free(b.data);
    return r;
}

int hidet_request_dispatch(hidet_client *c, const char *request_json, hidet_dispatch **ret,
                           hidet_error *err)
{
    hidet__buf b = {0};
    int status = 0, r;

    if (!request_json || !ret)
        return hidet__fail(err, -EINVAL, 0, "no request or no result pointer");
    r = hidet__request(c, "POST", "/v1/kernels", request_json, &status, &b, err);
    if (r < 0)
        return r;
    if (status == 202)
        r = hidet__fail(err, -EPROTO, status, "the daemon queued a job: a request for a dispatch "
                        "table waits only for its generic set, so leave \"wait\" out");
    else if (!hidet_is_dispatch(b.data, b.len))
        r = hidet__fail(err, -EPROTO, status, "the answer is a kernel set, not a dispatch table "
                        "(the request names no dims): ask with hidet_request_kernels()");
    else
        r = hidet_dispatch_parse(b.data, b.len, ret, err);
    if (r < 0 && err)
        err->http_status = status;
    free(b.data);
    return r;
}

int hidet_kernel_set_get(hidet_client *c, const char *key, hidet_kernel_set **ret,
                         hidet_error *err)
{
    char path[32 + HIDET_KEY_LEN];
    hidet__buf b = {0};
    int r;

    if (!hidet__is_key(key) || !ret)
        return hidet__fail(err, -EINVAL, 0, "not a kernel key: %s", key ? key : "(null)");
    snprintf(path, sizeof(path), "/v1/kernels/%s", key);
    r = hidet__request(c, "GET", path, NULL, NULL, &b, err);
    if (r < 0)
        return r;
    r = hidet_kernel_set_parse(b.data, b.len, ret, err);
    free(b.data);
    return r;
}

static int hidet__fetch(hidet_client *c, const char *key, const char *what, char **ret,
                        size_t *ret_len, hidet_error *err)
{
    char path[48 + HIDET_KEY_LEN];
    hidet__buf b = {0};
    int r;

    if (!hidet__is_key(key) || !ret)
        return hidet__fail(err, -EINVAL, 0, "not a kernel key: %s", key ? key : "(null)");
    snprintf(path, sizeof(path), "/v1/kernels/%s/%s", key, what);
    r = hidet__request(c, "GET", path, NULL, NULL, &b, err);
    if (r < 0)
        return r;
    *ret = b.data;
    if (ret_len)
        *ret_len = b.len;
    return 0;
}

int hidet_fetch_ptx(hidet_client *c, const char *key, char **ret, size_t *ret_len,
                    hidet_error *err)
{
    return hidet__fetch(c, key, "ptx", ret, ret_len, err);
}

int hidet_fetch_cubin(hidet_client *c, const char *key, void **ret, size_t *ret_len,
                      hidet_error *err)
{
    char *p = NULL;
    int r = hidet__fetch(c, key, "cubin", &p, ret_len, err);
    if (r == 0)
        *ret = p;
    return r;
}

static bool hidet__is_job_id(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n >= 32)
        return false;
    for (; *id; id++)
        if (!((*id >= '0' && *id <= '9') || (*id >= 'a' && *id <= 'z') ||
              (*id >= 'A' && *id <= 'Z') || *id == '-' || *id == '_'))
            return false;
    return true;
}

static int hidet__job_call(hidet_client *c, const char *method, const char *id, hidet_job **ret,
                           hidet_error *err)
{
    char path[64];
    hidet__buf b = {0};
    hidet_job *j = NULL;
    int r;

    if (!hidet__is_job_id(id))
        return hidet__fail(err, -EINVAL, 0, "not a job id: %s", id ? id : "(null)");
    snprintf(path, sizeof(path), "/v1/jobs/%s", id);
    r = hidet__request(c, method, path, NULL, NULL, &b, err);
    if (r < 0)
        return r;
    r = hidet_job_parse(b.data, b.len, &j, err);
    free(b.data);
    if (r < 0)
        return r;
    if (ret)
        *ret = j;
    else
        hidet_job_free(j);
    return 0;
}

int hidet_job_get(hidet_client *c, const char *id, hidet_job **ret, hidet_error *err)
{
    if (!ret)
        return hidet__fail(err, -EINVAL, 0, "no result pointer");
    return hidet__job_call(c, "GET", id, ret, err);
}

int hidet_job_cancel(hidet_client *c, const char *id, hidet_job **ret, hidet_error *err)
{
    return hidet__job_call(c, "DELETE", id, ret, err);
}

int hidet_jobs_list(hidet_client *c, hidet_job ***ret, size_t *ret_n, hidet_error *err)
{
    hidet__buf b = {0};
    hidet_job **v = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    int r;

    if (!ret || !ret_n)
        return hidet__fail(err, -EINVAL, 0, "no result pointer");
    r = hidet__request(c, "GET", "/v1/jobs", NULL, NULL, &b, err);
    if (r < 0)
        return r;
    root = cJSON_ParseWithLength(b.data, b.len);
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
    if (!cJSON_IsArray(jobs)) {
        r = hidet__fail(err, -EPROTO, 200, "the job list has no \"jobs\" array");
        goto out;
    }
    size_t total = (size_t)cJSON_GetArraySize(jobs);
    v = calloc(total ? total : 1, sizeof(*v));
    if (!v) {
        r = hidet__fail(err, -ENOMEM, 0, "out of memory");
        goto out;
    }
    for (const cJSON *o = jobs->child; o; o = o->next) {
        r = hidet__job_from_json(o, &v[n], err);
        if (r < 0)
            goto out;
        n++;
    }
    hidet__ok(err);
    *ret = v;
    *ret_n = n;
    v = NULL;
    r = 0;
out:
    hidet_jobs_free(v, n);
    cJSON_Delete(root);
    free(b.data);
    return r;
}
