/* cluster/ct_url.c - where the cluster tier's Redis is: redis:// and unix:// URLs (ct.h). */
#include "cluster/ct.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int url_fail(char **ret_err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int url_fail(char **ret_err, const char *fmt, ...)
{
    va_list ap;
    if (ret_err) {
        va_start(ap, fmt);
        if (vasprintf(ret_err, fmt, ap) < 0)
            *ret_err = NULL;
        va_end(ap);
    }
    return -EINVAL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copies [s, s+n) percent-decoded into out (cap bytes with the NUL); false when it does not fit
 * or an escape is malformed or decodes to NUL. */
static bool pct_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return false;
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

/* A decimal integer in [lo, hi] spanning exactly [s, s+n). */
static bool parse_int(const char *s, size_t n, int lo, int hi, int *ret)
{
    long v = 0;
    if (n == 0 || n > 9)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *ret = (int)v;
    return true;
}

int ct_url_parse(const char *url, ct_url *ret, char **ret_err)
{
    ct_url u;
    memset(&u, 0, sizeof(u));
    u.port = 6379;
    if (!url || !ret)
        return url_fail(ret_err, "no Redis URL");
    if (strncmp(url, "rediss://", 9) == 0)
        return url_fail(ret_err, "rediss:// (TLS) is not available: this build's hiredis has no "
                                 "TLS support; use redis:// on a trusted network or a TLS tunnel "
                                 "(stunnel, a service mesh) to a local port");
    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7;
        const char *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 0 || p[0] != '/' || n >= sizeof(u.path))
            return url_fail(ret_err, "unix:// needs an absolute socket path: unix:///run/redis.sock");
        memcpy(u.path, p, n);
        u.path[n] = '\0';
        if (q) {
            if (strncmp(q, "?db=", 4) != 0 || !parse_int(q + 4, strlen(q + 4), 0, 1000000, &u.db))
                return url_fail(ret_err, "unix:// takes only ?db=N after the path");
        }
        u.unix_socket = true;
        *ret = u;
        return 0;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return url_fail(ret_err, "a Redis URL starts with redis:// or unix://");
    const char *p = url + 8;
    const char *end = p + strlen(p);
    const char *slash = strchr(p, '/');
    const char *hostend = slash ? slash : end;
    /* The password may hold '@' only percent-encoded; the last '@' before the path ends the
     * credentials. */
    const char *at = NULL;
    for (const char *c = p; c < hostend; c++)
        if (*c == '@')
            at = c;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (!colon)
            return url_fail(ret_err, "credentials in a Redis URL are [USER]:PASSWORD@");
        if (!pct_decode(p, (size_t)(colon - p), u.user, sizeof(u.user)) ||
            !pct_decode(colon + 1, (size_t)(at - colon - 1), u.password, sizeof(u.password)))
            return url_fail(ret_err, "bad or too long user or password in the Redis URL");
        p = at + 1;
    }
    const char *portsep = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(hostend - p));
        if (!rb || rb == p + 1)
            return url_fail(ret_err, "unterminated [IPv6] address in the Redis URL");
        if ((size_t)(rb - p - 1) >= sizeof(u.host))
            return url_fail(ret_err, "host name too long");
        memcpy(u.host, p + 1, (size_t)(rb - p - 1));
        u.host[rb - p - 1] = '\0';
        if (rb + 1 < hostend) {
            if (rb[1] != ':')
                return url_fail(ret_err, "text after the [IPv6] address in the Redis URL");
            portsep = rb + 1;
        }
    } else {
        portsep = memchr(p, ':', (size_t)(hostend - p));
        const char *he = portsep ? portsep : hostend;
        if (he == p || (size_t)(he - p) >= sizeof(u.host))
            return url_fail(ret_err, "no host (or too long) in the Redis URL");
        for (const char *c = p; c < he; c++)
            if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_')
                return url_fail(ret_err, "bad character in the Redis URL's host");
        memcpy(u.host, p, (size_t)(he - p));
        u.host[he - p] = '\0';
    }
    if (portsep && !parse_int(portsep + 1, (size_t)(hostend - portsep - 1), 1, 65535, &u.port))
        return url_fail(ret_err, "bad port in the Redis URL");
    if (slash && slash + 1 < end && !parse_int(slash + 1, (size_t)(end - slash - 1), 0, 1000000, &u.db))
        return url_fail(ret_err, "the Redis URL's path is the database number: redis://HOST:PORT/0");
    *ret = u;
    return 0;
}

void ct_url_redacted(const ct_url *u, char *out, size_t len)
{
    if (!len)
        return;
    if (u->unix_socket) {
        snprintf(out, len, "unix://%s%s%.0d", u->path, u->db ? "?db=" : "", u->db);
        return;
    }
    bool v6 = strchr(u->host, ':') != NULL;
    snprintf(out, len, "redis://%s%s%s%s%s%s:%d/%d", u->user, u->password[0] ? ":***" : "",
             u->user[0] || u->password[0] ? "@" : "", v6 ? "[" : "", u->host, v6 ? "]" : "",
             u->port, u->db);
}
