/* daemon/tests/test_config.c - the config parser (every error with its line number, sizes,
 * durations, booleans, quoting), command-line parsing and flag precedence, reload diffs. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/check.h"
#include "daemon/config.h"

static void sizes(void)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        { "0", 0 }, { "65536", 65536 }, { "1B", 1 }, { "1K", 1024 }, { "1KiB", 1024 },
        { "1KB", 1000 }, { "1MiB", 1048576 }, { "1M", 1048576 }, { "2MB", 2000000 },
        { "1.5GiB", 1610612736ULL }, { "1GB", 1000000000ULL }, { "3TiB", 3298534883328ULL },
        { "512 KiB", 524288 },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 7;
        CHECK(hd_parse_size(ok[i].s, &v) == 0 && v == ok[i].v, "size '%s' -> %llu", ok[i].s,
              (unsigned long long)v);
    }
    static const char *const bad[] = { "", "-1", "1XB", "MiB", "1.5", "0x10", "1e3", " 1", "1 kib",
                                       "inf", "1.", ".5K", "99999999999TiB" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 7;
        CHECK(hd_parse_size(bad[i], &v) == -EINVAL && v == 7, "size '%s' accepted", bad[i]);
    }
}

static void durations(void)
{
    static const struct {
        const char *s;
        double v;
    } ok[] = {
        { "30s", 30 }, { "30", 30 }, { "250ms", 0.25 }, { "1m", 60 }, { "2min", 120 },
        { "1m30s", 90 }, { "2h", 7200 }, { "1d", 86400 }, { "0", 0 }, { "1.5s", 1.5 },
        { "1h1m1s", 3661 }, { "1s500ms", 1.5 },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        double v = -1;
        CHECK(hd_parse_duration(ok[i].s, &v) == 0 && v > ok[i].v - 1e-9 && v < ok[i].v + 1e-9,
              "duration '%s' -> %g", ok[i].s, v);
    }
    static const char *const bad[] = { "", "s", "-1s", "1x", "1m30", "1 s", "10 seconds", "1s-",
                                       "1e3s", "nan" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double v = -7;
        CHECK(hd_parse_duration(bad[i], &v) == -EINVAL && v == -7, "duration '%s' accepted", bad[i]);
    }
}

static void booleans_and_http(void)
{
    bool b = false;
    CHECK(hd_parse_bool("yes", &b) == 0 && b, "yes");
    CHECK(hd_parse_bool("Off", &b) == 0 && !b, "Off");
    CHECK(hd_parse_bool("1", &b) == 0 && b, "1");
    CHECK(hd_parse_bool("maybe", &b) == -EINVAL && b, "maybe");

    char host[64];
    int port = 0;
    CHECK(hd_parse_http_addr("8080", host, sizeof(host), &port) == 0 && port == 8080, "8080");
    CHECK_STR(host, "127.0.0.1");
    CHECK(hd_parse_http_addr("0.0.0.0:9000", host, sizeof(host), &port) == 0 && port == 9000, "0.0.0.0");
    CHECK_STR(host, "0.0.0.0");
    CHECK(hd_parse_http_addr("[::1]:80", host, sizeof(host), &port) == 0 && port == 80, "[::1]");
    CHECK_STR(host, "::1");
    CHECK(hd_parse_http_addr("localhost:1", host, sizeof(host), &port) == 0, "localhost");
    static const char *const bad[] = { "", "65536", "host:", ":80", "::1:80", "[::1]80",
                                       "[zz]:80", "a b:80", "80x", "-80" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(hd_parse_http_addr(bad[i], host, sizeof(host), &port) == -EINVAL, "http '%s' accepted", bad[i]);

    CHECK(hd_host_is_loopback("127.0.0.1"), "127.0.0.1");
    CHECK(hd_host_is_loopback("127.1.2.3"), "127.1.2.3");
    CHECK(hd_host_is_loopback("::1"), "::1");
    CHECK(hd_host_is_loopback("localhost"), "localhost");
    CHECK(hd_host_is_loopback("::ffff:127.0.0.1"), "mapped");
    CHECK(!hd_host_is_loopback("0.0.0.0"), "0.0.0.0");
    CHECK(!hd_host_is_loopback("10.0.0.1"), "10.0.0.1");
    CHECK(!hd_host_is_loopback("::"), "::");
    CHECK(!hd_host_is_loopback("example.com"), "name");
}

static const char full_file[] =
    "# hidetd configuration\n"
    "\n"
    "[server]\n"
    "socket = /run/hidetd/hidetd.sock\n"
    "socket_mode = 0600\n"
    "http = 127.0.0.1:8080   # loopback only\n"
    "token = \"abc#def\"\n"
    "max_body = 2MiB\n"
    "max_connections = 64\n"
    "request_timeout = 5s\n"
    "idle_timeout = 2m\n"
    "  ; an indented comment\n"
    "[cache]\n"
    "path = /var/lib/hidetd/kernels.db\n"
    "max_size = 10GiB\n"
    "[tuning]\n"
    "default_mode = measure\n"
    "budget_seconds = 1m30s\n"
    "budget_candidates = 32\n"
    "fused_retime_top = 3\n"
    "measure_requires_gpu = yes\n"
    "max_queued_jobs = 10\n"
    "max_running_jobs = 2\n"
    "[workers]\n"
    "mode = standin\n"
    "launch_timeout = 500ms\n"
    "heartbeat = 200ms\n"
    "max_restarts = 2\n"
    "[log]\n"
    "level = debug\n"
    "[shutdown]\n"
    "grace = 0\n";

static void full(void)
{
    hd_config c;
    CHECK(hd_config_init(&c) == 0, "init");
    char *err = NULL;
    int r = hd_config_load_string(&c, full_file, "t.conf", &err);
    CHECK(r == 0, "full file: %s", err ? err : "");
    free(err);
    CHECK_STR(c.socket, "/run/hidetd/hidetd.sock");
    CHECK(c.socket_mode == 0600, "mode %o", c.socket_mode);
    CHECK_STR(c.http, "127.0.0.1:8080");
    CHECK_STR(c.token, "abc#def");
    CHECK(c.max_body == 2097152, "max_body");
    CHECK(c.max_connections == 64, "max_connections");
    CHECK(c.request_timeout == 5 && c.idle_timeout == 120, "timeouts");
    CHECK_STR(c.cache_path, "/var/lib/hidetd/kernels.db");
    CHECK(c.cache_max_size == 10737418240ULL, "max_size");
    CHECK(c.default_mode == TUNER_TUNE_MEASURE, "default_mode");
    CHECK(c.budget_seconds == 90 && c.budget_candidates == 32 && c.fused_retime_top == 3, "budgets");
    CHECK(c.measure_requires_gpu && c.max_queued_jobs == 10 && c.max_running_jobs == 2, "tuning");
    CHECK(c.workers == HD_WORKERS_STANDIN, "workers");
    CHECK(c.launch_timeout == 0.5 && c.heartbeat == 0.2 && c.max_restarts == 2, "worker timing");
    CHECK(c.log_level == HD_LOG_DEBUG, "level");
    CHECK(c.grace == 0, "grace");
    hd_config_clear(&c);
}

/* Each bad file must fail at the given line with a message naming the problem, and leave the
 * configuration untouched. */
static void errors(void)
{
    static const struct {
        const char *text;
        const char *want; /* "t.conf:LINE: ..." prefix and a fragment */
        const char *fragment;
    } bad[] = {
        { "max_body = 1MiB\n", "t.conf:1:", "outside any [section]" },
        { "[server]\nmax_body = 1XB\n", "t.conf:2:", "bad value \"1XB\"" },
        { "[server]\n\n# c\nnope = 1\n", "t.conf:4:", "unknown key 'nope'" },
        { "[sever]\n", "t.conf:1:", "unknown section [sever]" },
        { "[server\n", "t.conf:1:", "without ']'" },
        { "[server] x\n", "t.conf:1:", "text after the section header" },
        { "[server]\njust words\n", "t.conf:2:", "expected 'key = value'" },
        { "[server]\nmax_body = 1MiB\nmax_body = 2MiB\n", "t.conf:3:", "given twice" },
        { "[server]\ntoken = \"abc\n", "t.conf:2:", "unterminated" },
        { "[server]\ntoken = \"a\\q\"\n", "t.conf:2:", "unknown escape" },
        { "[server]\ntoken = \"a\" b\n", "t.conf:2:", "after the closing quote" },
        { "[server]\nsocket_mode = 0999\n", "t.conf:2:", "socket_mode" },
        { "[server]\nhttp = nowhere\n", "t.conf:2:", "[HOST:]PORT" },
        { "[server]\nmax_connections = 0\n", "t.conf:2:", "max_connections" },
        { "[server]\nmax_connections = 12abc\n", "t.conf:2:", "12abc" },
        { "[server]\nrequest_timeout = 0s\n", "t.conf:2:", "request_timeout" },
        { "[server]\nsocket =\n", "t.conf:2:", "socket" },
        { "[cache]\nmax_size = -5\n", "t.conf:2:", "max_size" },
        { "[tuning]\ndefault_mode = fast\n", "t.conf:2:", "none, model or measure" },
        { "[tuning]\nmeasure_requires_gpu = perhaps\n", "t.conf:2:", "true or false" },
        { "[tuning]\nbudget_seconds = 10 seconds\n", "t.conf:2:", "budget_seconds" },
        { "[workers]\nmode = gpu\n", "t.conf:2:", "auto, none, standin or path" },
        { "[log]\nlevel = loud\n", "t.conf:2:", "debug, info, warn or error" },
        { "[shutdown]\ngrace = forever\n", "t.conf:2:", "grace" },
        { "[server]\n= 5\n", "t.conf:2:", "bad key name" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hd_config c;
        hd_config_init(&c);
        uint64_t before = c.max_body;
        char *err = NULL;
        int r = hd_config_load_string(&c, bad[i].text, "t.conf", &err);
        CHECK(r == -EINVAL, "case %zu accepted", i);
        CHECK(err && strncmp(err, bad[i].want, strlen(bad[i].want)) == 0,
              "case %zu: message '%s' should start with '%s'", i, err ? err : "", bad[i].want);
        CHECK(err && strstr(err, bad[i].fragment), "case %zu: message '%s' lacks '%s'", i,
              err ? err : "", bad[i].fragment);
        CHECK(c.max_body == before, "case %zu changed the config", i);
        free(err);
        hd_config_clear(&c);
    }

    /* All or nothing: a good first line does not stick when a later line is bad. */
    hd_config c;
    hd_config_init(&c);
    char *err = NULL;
    CHECK(hd_config_load_string(&c, "[server]\nmax_body = 5MiB\nbogus = 1\n", "t.conf", &err) < 0, "bad");
    CHECK(c.max_body == 1048576, "partial apply: %llu", (unsigned long long)c.max_body);
    free(err);

    /* A missing file is reported with its path. */
    err = NULL;
    CHECK(hd_config_load_file(&c, "/nonexistent/hidetd.conf", &err) == -ENOENT, "missing file");
    CHECK(err && strstr(err, "/nonexistent/hidetd.conf"), "message: %s", err ? err : "");
    free(err);
    hd_config_clear(&c);

    /* CRLF line endings and a missing final newline are fine. */
    hd_config_init(&c);
    CHECK(hd_config_load_string(&c, "[log]\r\nlevel = warn\r\n[server]\r\nmax_body=3K", "t", NULL) == 0,
          "crlf");
    CHECK(c.log_level == HD_LOG_WARN && c.max_body == 3072, "crlf values");
    hd_config_clear(&c);
}

static int parse_cli(hd_cli *cli, char **err, int argc, ...)
{
    char *argv[32];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    argv[argc] = NULL;
    return hd_cli_parse(argc, argv, cli, err);
}

static void cli(void)
{
    hd_cli c;
    char *err = NULL;
    CHECK(parse_cli(&c, &err, 7, "hidetd", "--socket", "/tmp/s", "--cache=/tmp/c.db", "--workers",
                    "none", "--help") == 0, "parse: %s", err ? err : "");
    CHECK_STR(c.socket, "/tmp/s");
    CHECK_STR(c.cache, "/tmp/c.db");
    CHECK_STR(c.workers, "none");
    CHECK(c.help && !c.version, "help");

    static const struct {
        int argc;
        const char *argv[4];
        const char *fragment;
    } bad[] = {
        { 2, { "hidetd", "--bogus" }, "unknown option '--bogus'" },
        { 2, { "hidetd", "--socket" }, "needs a value" },
        { 2, { "hidetd", "extra" }, "unexpected argument 'extra'" },
        { 3, { "hidetd", "--log-level", "loud" }, "bad level 'loud'" },
        { 3, { "hidetd", "--http", "x:y" }, "--http: bad address" },
        { 3, { "hidetd", "--socket", "" }, "non-empty" },
        { 2, { "hidetd", "-x" }, "unknown option '-x'" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        int r = hd_cli_parse(bad[i].argc, (char *const *)bad[i].argv, &c, &err);
        CHECK(r == -EINVAL, "cli case %zu accepted", i);
        CHECK(err && strstr(err, bad[i].fragment), "cli case %zu: '%s' lacks '%s'", i,
              err ? err : "", bad[i].fragment);
        free(err);
    }
}

static void precedence(void)
{
    char path[] = "/tmp/hidetd-cfg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    const char *text = "[server]\nsocket = /from/file.sock\nmax_body = 4KiB\n"
                       "[cache]\npath = /from/file.db\n[log]\nlevel = error\n"
                       "[workers]\npath = /opt/worker\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);

    hd_cli c;
    char *err = NULL;
    CHECK(parse_cli(&c, &err, 7, "hidetd", "--config", path, "--socket", "/from/flag.sock",
                    "--log-level", "debug") == 0, "parse");
    hd_config cfg;
    CHECK(hd_config_build(&c, &cfg, &err) == 0, "build: %s", err ? err : "");
    CHECK_STR(cfg.socket, "/from/flag.sock");        /* flag beats file */
    CHECK_STR(cfg.cache_path, "/from/file.db");      /* file beats default */
    CHECK(cfg.max_body == 4096, "file value kept");
    CHECK(cfg.log_level == HD_LOG_DEBUG, "flag level");
    CHECK(cfg.workers == HD_WORKERS_PATH, "path alone means mode=path");
    CHECK_STR(cfg.workers_path, "/opt/worker");
    CHECK(cfg.max_connections == 1024, "default kept");

    /* --workers keyword and path forms. */
    hd_config cfg2;
    CHECK(parse_cli(&c, &err, 5, "hidetd", "--config", path, "--workers", "standin") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg2, &err) == 0, "build");
    CHECK(cfg2.workers == HD_WORKERS_STANDIN, "standin");
    hd_config_clear(&cfg2);
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--workers", "/bin/true") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg2, &err) == 0, "build");
    CHECK(cfg2.workers == HD_WORKERS_PATH, "path mode");
    CHECK_STR(cfg2.workers_path, "/bin/true");

    /* Reload diff: which keys changed, live or restart. */
    char live[256], restart[256];
    int n = hd_config_diff(&cfg, &cfg2, live, sizeof(live), restart, sizeof(restart));
    CHECK(n > 0, "diff count");
    CHECK(strstr(live, "log.level") && strstr(live, "server.max_body"), "live: %s", live);
    CHECK(strstr(restart, "server.socket") && strstr(restart, "cache.path") &&
          strstr(restart, "workers.path"), "restart: %s", restart);
    CHECK(!strstr(live, "server.socket"), "socket is not live");
    CHECK(hd_config_diff(&cfg, &cfg, live, sizeof(live), restart, sizeof(restart)) == 0 && !live[0] &&
          !restart[0], "self diff");
    hd_config_clear(&cfg);
    hd_config_clear(&cfg2);

    /* A missing config file given by flag fails the build. */
    err = NULL;
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--config", "/nonexistent.conf") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) < 0 && err && strstr(err, "/nonexistent.conf"), "missing");
    free(err);
    unlink(path);
}

static void finish_checks(void)
{
    hd_cli c;
    hd_config cfg;
    char *err = NULL;
    /* Non-loopback without a token: refused with a message about the token. */
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--http", "0.0.0.0:8080") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == -EINVAL, "non-loopback without token accepted");
    CHECK(err && strstr(err, "token"), "message: %s", err ? err : "");
    free(err);
    err = NULL;
    CHECK(parse_cli(&c, &err, 5, "hidetd", "--http", "0.0.0.0:8080", "--token", "s3cret") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == 0, "with token: %s", err ? err : "");
    hd_config_clear(&cfg);
    /* Loopback is no boundary: a token is required there too, unless tcp_auth = none. */
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--http", "8080") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == -EINVAL && err && strstr(err, "token"),
          "loopback without token accepted");
    free(err);
    err = NULL;
    CHECK(parse_cli(&c, &err, 4, "hidetd", "--http", "8080", "--http-no-auth") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == 0, "loopback, --http-no-auth: %s", err ? err : "");
    CHECK_STR(cfg.http, "8080");
    CHECK(!cfg.tcp_auth, "tcp_auth none");
    hd_config_clear(&cfg);
    CHECK(parse_cli(&c, &err, 6, "hidetd", "--http", "0.0.0.0:8080", "--http-no-auth", "--token",
                    "s3cret") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == -EINVAL && err && strstr(err, "loopback"),
          "--http-no-auth on a non-loopback bind accepted");
    free(err);
    err = NULL;
    /* A token with a space is refused (it could never be sent in a header intact). */
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--token", "a b") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == -EINVAL, "token with space");
    free(err);
    err = NULL;

    /* token_file: the first line is the token. */
    char path[] = "/tmp/hidetd-tok-XXXXXX";
    int fd = mkstemp(path);
    CHECK(write(fd, "t0ken\nignored\n", 14) == 14, "write");
    close(fd);
    hd_config_init(&cfg);
    char text[256];
    snprintf(text, sizeof(text), "[server]\ntoken_file = %s\nhttp = 0.0.0.0:1\n", path);
    CHECK(hd_config_load_string(&cfg, text, "t", &err) == 0, "load");
    CHECK(hd_config_finish(&cfg, &err) == 0, "finish: %s", err ? err : "");
    CHECK_STR(cfg.token, "t0ken");
    hd_config_clear(&cfg);
    /* --token-file and $HIDETD_TOKEN_FILE keep the secret off the command line; the flag wins
     * over the environment, which wins over the file's token. */
    CHECK(parse_cli(&c, &err, 5, "hidetd", "--http", "8080", "--token-file", path) == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == 0, "--token-file: %s", err ? err : "");
    CHECK_STR(cfg.token, "t0ken");
    hd_config_clear(&cfg);
    setenv("HIDETD_TOKEN_FILE", path, 1);
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--http", "8080") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) == 0, "$HIDETD_TOKEN_FILE: %s", err ? err : "");
    CHECK_STR(cfg.token, "t0ken");
    hd_config_clear(&cfg);
    CHECK(parse_cli(&c, &err, 3, "hidetd", "--token-file", "/nonexistent/token") == 0, "parse");
    CHECK(hd_config_build(&c, &cfg, &err) < 0 && err && strstr(err, "/nonexistent/token"),
          "--token-file wins over the environment");
    free(err);
    err = NULL;
    unsetenv("HIDETD_TOKEN_FILE");
    unlink(path);

    /* mode = path without a path. */
    hd_config_init(&cfg);
    CHECK(hd_config_load_string(&cfg, "[workers]\nmode = path\n", "t", NULL) == 0, "load");
    CHECK(hd_config_finish(&cfg, &err) == -EINVAL && err && strstr(err, "path"), "mode=path");
    free(err);
    hd_config_clear(&cfg);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0, "write %s", path);
    if (f)
        fclose(f);
}

/* Files that are not configurations: a FIFO (refused without blocking), an empty file, a
 * directory; a file of comments only is a configuration that sets nothing. */
static void special_files(void)
{
    char dir[] = "/tmp/hidetd-cfg-XXXXXX", path[64], fifo[64], tok[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof(path), "%s/hidetd.conf", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(tok, sizeof(tok), "%s/token", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    hd_config c;
    char *err = NULL;
    hd_config_init(&c);
    /* Nothing writes to the FIFO: a blocking open would never return. */
    CHECK(hd_config_load_file(&c, fifo, &err) == -EINVAL && err && strstr(err, "regular file") &&
          strstr(err, "FIFO"), "FIFO: %s", err ? err : "");
    free(err);
    err = NULL;
    CHECK(hd_config_load_file(&c, dir, &err) < 0 && err, "a directory was read");
    free(err);
    err = NULL;
    static const char *const empty[] = { "", "\n", " \t\r\n\n" };
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        write_file(path, empty[i]);
        CHECK(hd_config_load_file(&c, path, &err) == -EINVAL && err && strstr(err, "empty"),
              "empty file %zu: %s", i, err ? err : "");
        free(err);
        err = NULL;
    }
    write_file(path, "# every key at its default\n");
    CHECK(hd_config_load_file(&c, path, &err) == 0, "comments only: %s", err ? err : "");
    /* A token file is read the same way (and again on every reload). */
    hd_cli cli;
    CHECK(parse_cli(&cli, &err, 5, "hidetd", "--http", "8080", "--token-file", fifo) == 0, "parse");
    hd_config b;
    CHECK(hd_config_build(&cli, &b, &err) == -EINVAL && err && strstr(err, "regular file"),
          "token FIFO: %s", err ? err : "");
    free(err);
    err = NULL;
    hd_config_clear(&c);
    unlink(fifo);
    unlink(path);
    unlink(tok);
    rmdir(dir);
}

/* A reload is checked against what runs: the restart keys come from the running configuration,
 * so a loopback `http` in the file cannot make tcp_auth = none pass on a 0.0.0.0 listener. */
static void reload_checks(void)
{
    char dir[] = "/tmp/hidetd-cfg-XXXXXX", path[64], tok[64], text[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof(path), "%s/hidetd.conf", dir);
    snprintf(tok, sizeof(tok), "%s/token", dir);
    write_file(tok, "t0ken\n");
    snprintf(text, sizeof(text), "[server]\nhttp = 0.0.0.0:8080\ntoken_file = %s\n", tok);
    write_file(path, text);
    hd_cli cli;
    char *err = NULL;
    CHECK(parse_cli(&cli, &err, 3, "hidetd", "--config", path) == 0, "parse");
    hd_config running, next;
    CHECK(hd_config_build(&cli, &running, &err) == 0, "start: %s", err ? err : "");
    hd_listen_info public = { .n_tcp = 1, .tcp_public = true, .public_addr = "0.0.0.0:8080" };
    hd_listen_info local = { .n_tcp = 1, .tcp_public = false };
    CHECK(hd_config_check_listeners(&running, &public, &err) == 0, "token on 0.0.0.0");

    /* The attack: the file names loopback beside tcp_auth = none. */
    write_file(path, "[server]\nhttp = 127.0.0.1:8080\ntcp_auth = none\n");
    char restart[256];
    int n = -1;
    CHECK(hd_config_build_reload(&cli, &running, &next, restart, sizeof(restart), &n, &err) ==
              -EINVAL && err && strstr(err, "0.0.0.0:8080"),
          "tcp_auth = none reloaded on a 0.0.0.0 listener: %s", err ? err : "");
    free(err);
    err = NULL;
    /* The same file on a loopback listener: allowed, the http change reported. */
    hd_config lo;
    hd_config_init(&lo);
    free(lo.http);
    lo.http = strdup("127.0.0.1:9090");
    lo.token = strdup("x");
    CHECK(hd_config_build_reload(&cli, &lo, &next, restart, sizeof(restart), &n, &err) == 0,
          "loopback: %s", err ? err : "");
    CHECK(n == 1 && strcmp(restart, "server.http") == 0, "restart keys: %d '%s'", n, restart);
    CHECK_STR(next.http, "127.0.0.1:9090");
    CHECK(!next.tcp_auth && hd_config_check_listeners(&next, &local, &err) == 0, "none on loopback");
    /* ...but not on a passed socket that is not loopback (no `http` tells of it). */
    CHECK(hd_config_check_listeners(&next, &public, &err) == -EINVAL && err &&
          strstr(err, "0.0.0.0:8080"), "passed 0.0.0.0 socket: %s", err ? err : "");
    free(err);
    err = NULL;
    hd_config_clear(&next);
    hd_config_clear(&lo);

    /* A file that would not start the daemon is refused on reload too, though its restart keys
     * are not applied. */
    write_file(path, "[workers]\nmode = path\n");
    CHECK(hd_config_build_reload(&cli, &running, &next, restart, sizeof(restart), &n, &err) ==
              -EINVAL && err && strstr(err, "path"), "mode = path alone: %s", err ? err : "");
    free(err);
    err = NULL;
    /* Restart keys changed beside live ones: the live ones come, the restart ones are counted. */
    snprintf(text, sizeof(text), "[server]\nhttp = 0.0.0.0:9999\nsocket_mode = 0600\n"
                                 "token_file = %s\nmax_body = 4KiB\n", tok);
    write_file(path, text);
    CHECK(hd_config_build_reload(&cli, &running, &next, restart, sizeof(restart), &n, &err) == 0,
          "reload: %s", err ? err : "");
    CHECK(n == 2 && strstr(restart, "server.http") && strstr(restart, "server.socket_mode"),
          "restart keys: %d '%s'", n, restart);
    CHECK_STR(next.http, "0.0.0.0:8080");
    CHECK(next.socket_mode == running.socket_mode && next.max_body == 4096, "kept and applied");
    hd_config_clear(&next);
    /* An empty file: a failed reload. */
    write_file(path, "");
    CHECK(hd_config_build_reload(&cli, &running, &next, restart, sizeof(restart), &n, &err) ==
              -EINVAL && err && strstr(err, "empty"), "empty: %s", err ? err : "");
    free(err);
    hd_config_clear(&running);
    unlink(path);
    unlink(tok);
    rmdir(dir);
}

static void defaults(void)
{
    setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
    setenv("XDG_CACHE_HOME", "/home/u/.cache", 1);
    hd_config c;
    hd_config_init(&c);
    CHECK_STR(c.socket, "/run/user/1000/hidetd.sock");
    CHECK_STR(c.cache_path, "/home/u/.cache/hidetd/kernels.db");
    CHECK(c.http == NULL && c.token == NULL, "tcp off, no token");
    CHECK(c.socket_mode == 0660 && c.max_body == 1048576 && c.workers == HD_WORKERS_AUTO, "defaults");
    /* Fair sharing by default: TCP and the Unix socket apart, no client more than half of
     * either, or of the job queue; a bounded cache. */
    CHECK(c.tcp_auth && c.header_timeout == 5, "tcp_auth token, header_timeout 5s");
    CHECK(hd_config_unix_max_connections(&c) == 1024 && hd_config_tcp_max_connections(&c) == 1024,
          "listener limits");
    CHECK(hd_config_max_connections_per_client(&c) == 512, "per-client connections");
    CHECK(hd_config_max_queued_jobs_per_client(&c) == 512, "per-client queued jobs");
    CHECK(hd_config_max_blocking_jobs_per_client(&c) == 256, "per-client blocking jobs");
    CHECK(c.cache_max_size == 10ULL << 30, "cache max_size 10GiB");
    c.tcp_max_connections = 100;
    c.max_queued_jobs = 10;
    CHECK(hd_config_tcp_max_connections(&c) == 100 && hd_config_unix_max_connections(&c) == 1024,
          "tcp_max_connections alone");
    CHECK(hd_config_max_queued_jobs_per_client(&c) == 5 &&
          hd_config_max_blocking_jobs_per_client(&c) == 2, "quotas follow max_queued_jobs");
    hd_config_clear(&c);
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/v", 1);
    hd_config_init(&c);
    /* No runtime dir: beside the cache, where clients look (hidet_default_address()). */
    CHECK_STR(c.socket, "/home/v/.cache/hidetd/hidetd.sock");
    CHECK_STR(c.cache_path, "/home/v/.cache/hidetd/kernels.db");
    hd_config_clear(&c);
    /* $HIDETD_SOCKET, the clients' first rule, is the daemon's too ("unix:" or not); a URL in
     * it is the clients' business. */
    setenv("HIDETD_SOCKET", "unix:/srv/h.sock", 1);
    hd_config_init(&c);
    CHECK_STR(c.socket, "/srv/h.sock");
    hd_config_clear(&c);
    setenv("HIDETD_SOCKET", "http://127.0.0.1:8734", 1);
    setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
    hd_config_init(&c);
    CHECK_STR(c.socket, "/run/user/7/hidetd.sock");
    hd_config_clear(&c);
    unsetenv("HIDETD_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    hd_config_clear(NULL);
}

int main(void)
{
    sizes();
    durations();
    booleans_and_http();
    full();
    errors();
    cli();
    precedence();
    finish_checks();
    special_files();
    reload_checks();
    defaults();
    return check_finish("test_config");
}
