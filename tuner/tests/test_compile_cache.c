/* tuner/tests/test_compile_cache.c - HIDETD_COMPILE_CACHE (tuner/compile_cache.h): a second
 * identical compile is served from the directory with the first one's PTX, cubin and log; another
 * target or source is another entry; a damaged, truncated or foreign entry is a miss and is
 * replaced; a failing compile is not stored; and with the variable unset nothing is written.
 * Tools' results (t_ptxas, ptxas -v in the tests): stored when ptxas accepts, read back instead of
 * running ptxas again, never mixed with NVRTC's entries, a rejection never stored. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tuner/compile_cache.h"
#include "tuner/tests/common.h"

static char dir[] = "/tmp/hidetd-compile-cache.XXXXXX";

static const char *source_a = "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] *= 2.0f; }\n";
static const char *source_b = "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] += 1.0f; }\n";
static const char *source_bad = "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] = q; }\n";

/* The entries' names (keys) in the directory, at most max, into names; returns how many. */
static int list_entries(char names[][65], int max)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && strlen(e->d_name) == 64 && n < max)
            memcpy(names[n++], e->d_name, 65);
    if (d)
        closedir(d);
    return n;
}

/* The one name in now[] that is not in before[] (there is one when this is called). */
static const char *new_entry(char before[][65], int nb, char now[][65], int nn)
{
    for (int i = 0; i < nn; i++) {
        bool seen = false;
        for (int j = 0; j < nb; j++)
            seen = seen || strcmp(now[i], before[j]) == 0;
        if (!seen)
            return now[i];
    }
    return NULL;
}

static int count_entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

/* The only entry's path (there is one when this is called). */
static void only_entry(char *path, size_t len)
{
    DIR *d = opendir(dir);
    path[0] = '\0';
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            snprintf(path, len, "%s/%s", dir, e->d_name);
    if (d)
        closedir(d);
}

static bool same_binary(const tuner_binary *x, const tuner_binary *y)
{
    return x->ptx_len == y->ptx_len && strcmp(x->ptx, y->ptx) == 0 && x->cubin_len == y->cubin_len &&
           memcmp(x->cubin, y->cubin, x->cubin_len) == 0 && strcmp(x->log, y->log) == 0;
}

static tuner_binary *compile(const char *src, int sm)
{
    tuner_target t = {.sm = sm};
    tuner_binary *b = NULL;
    char *err = NULL;
    int rc = tuner_compile(src, &t, &b, &err);
    CHECK(rc == 0, "compile for sm_%d: %d %s", sm, rc, err ? err : "");
    free(err);
    return b;
}

/* Rewrites the entry at path through f (which may change its bytes and length). */
static void rewrite(const char *path, void (*f)(unsigned char *, size_t *))
{
    FILE *in = fopen(path, "rb");
    CHECK(in != NULL, "open %s", path);
    if (!in)
        return;
    static unsigned char buf[1 << 22];
    size_t len = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    f(buf, &len);
    FILE *out = fopen(path, "wb");
    CHECK(out && fwrite(buf, 1, len, out) == len && fclose(out) == 0, "rewrite %s", path);
}

static void flip_a_byte(unsigned char *b, size_t *len)
{
    b[*len / 2] ^= 0x40;
}

static void truncate_half(unsigned char *b, size_t *len)
{
    (void)b;
    *len /= 2;
}

static void foreign(unsigned char *b, size_t *len)
{
    memcpy(b, "hidetd-nvrtc-cache 9\n", 21);
    (void)len;
}

/* t_ptxas and the tools' entries, with the cache at dir (in the cached child). */
static void check_tool_entries(const tuner_binary *b)
{
    char before[8][65], now[8][65], key[65];
    int nb = list_entries(before, 8);
    char *out = NULL;
    CHECK(t_ptxas(b->ptx, "sm_80", "-v", &out) == 0 && out && strstr(out, "Used "), "ptxas -v accepts: %s",
          out ? out : "(none)");
    int nn = list_entries(now, 8);
    CHECK(nn == nb + 1, "an accepted PTX stores one entry: %d then %d", nb, nn);
    const char *e = new_entry(before, nb, now, nn);
    CHECK(e != NULL, "the new entry");
    if (!e) {
        free(out);
        return;
    }
    memcpy(key, e, sizeof(key));
    /* What is stored is ptxas's output, and a second run reads it: the entry replaced by a text
     * ptxas never printed comes back as it is. */
    char *got = NULL;
    size_t len = 0;
    CHECK(tuner__compile_cache_get_tool(key, &got, &len) == 1 && got && out && strcmp(got, out) == 0 &&
              len == strlen(out),
          "the entry holds ptxas's output");
    free(got);
    const char *fake = "stored, not run\n";
    tuner__compile_cache_put_tool(key, fake, strlen(fake));
    char *again = NULL;
    CHECK(t_ptxas(b->ptx, "sm_80", "-v", &again) == 0 && again && strcmp(again, fake) == 0,
          "a second run reads the entry: %s", again ? again : "(none)");
    free(again);
    CHECK(list_entries(now, 8) == nn, "a hit stores nothing");
    /* Another option list or arch is another entry. */
    CHECK(t_ptxas(b->ptx, "sm_80", "", NULL) == 0, "ptxas without -v accepts");
    CHECK(t_ptxas(b->ptx, "sm_86", "-v", NULL) == 0, "ptxas for sm_86 accepts");
    CHECK(list_entries(now, 8) == nn + 2, "options and arch are in the key");
    /* A tool's entry is not an NVRTC entry, nor the other way round. */
    tuner_binary *bin = NULL;
    CHECK(tuner__compile_cache_get(key, &bin) == 0 && bin == NULL, "a tool's entry is no NVRTC entry");
    CHECK(tuner__compile_cache_get_tool(before[0], &got, NULL) == 0, "an NVRTC entry is no tool's entry");
    /* A damaged entry is a miss: ptxas runs again and the entry is whole again. */
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, key);
    rewrite(path, flip_a_byte);
    CHECK(tuner__compile_cache_get_tool(key, &got, NULL) == 0, "a damaged tool's entry is a miss");
    again = NULL;
    CHECK(t_ptxas(b->ptx, "sm_80", "-v", &again) == 0 && again && strstr(again, "Used ") && strcmp(again, fake) != 0,
          "a damaged entry: ptxas runs again");
    free(again);
    CHECK(tuner__compile_cache_get_tool(key, &got, NULL) == 1, "and its entry is whole again");
    free(got);
    /* A rejection is not stored, and comes with ptxas's messages each time. */
    nn = list_entries(now, 8);
    for (int i = 0; i < 2; i++) {
        char *bad = NULL;
        CHECK(t_ptxas(".version 8.0\n.target sm_80\n.address_size 64\nnot ptx;\n", "sm_80", "-v", &bad) != 0 &&
                  bad && strstr(bad, "error"),
              "bad PTX is rejected with ptxas's error: %s", bad ? bad : "(none)");
        free(bad);
    }
    CHECK(list_entries(now, 8) == nn, "rejections are not stored");
    /* Nothing outside ptxas's option alphabet reaches the shell. */
    CHECK(t_ptxas(b->ptx, "sm_80;true", "", NULL) == -1 && t_ptxas(b->ptx, "sm_80", "-v $(true)", NULL) == -1,
          "arch and options are checked");
    free(out);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    /* The variable is read once per process: each half runs in a child of its own. Unset,
     * tuner_compile works and the directory stays empty. */
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("HIDETD_COMPILE_CACHE");
        tuner_binary *plain = compile(source_a, 80);
        CHECK(tuner__compile_cache_dir() == NULL && count_entries() == 0, "unset: no cache");
        tuner_binary_free(plain);
        _exit(t_failures ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the uncached half passed");

    pid = fork();
    if (pid == 0) {
        setenv("HIDETD_COMPILE_CACHE", dir, 1);
        tuner_binary *first = compile(source_a, 80);
        CHECK(tuner__compile_cache_dir() && strcmp(tuner__compile_cache_dir(), dir) == 0, "the directory");
        CHECK(count_entries() == 1, "a miss stores one entry: %d", count_entries());
        char path[4096];
        only_entry(path, sizeof(path));
        struct stat st0, st1;
        CHECK(stat(path, &st0) == 0, "stat %s", path);

        tuner_binary *again = compile(source_a, 80);
        CHECK(first && again && same_binary(first, again), "a hit gives the stored PTX, cubin and log");
        CHECK(stat(path, &st1) == 0 && st1.st_ino == st0.st_ino, "a hit does not rewrite the entry");

        /* The key covers the target and the source. */
        tuner_binary *other_sm = compile(source_a, 90);
        tuner_binary *other_src = compile(source_b, 80);
        CHECK(count_entries() == 3, "other target, other source: three entries, got %d", count_entries());
        CHECK(other_sm && first && strcmp(other_sm->ptx, first->ptx) != 0, "sm_90's PTX is its own");
        tuner_binary_free(other_sm);
        tuner_binary_free(other_src);

        /* Damaged entries are misses: compiled again, the same result, the entry whole again. */
        void (*damage[])(unsigned char *, size_t *) = {flip_a_byte, truncate_half, foreign};
        const char *what[] = {"a flipped byte", "a truncated entry", "another format"};
        char key[65];
        for (size_t i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
            rewrite(path, damage[i]);
            tuner_binary *got = NULL;
            /* The entry's name is its key. */
            snprintf(key, sizeof(key), "%s", strrchr(path, '/') + 1);
            CHECK(tuner__compile_cache_get(key, &got) == 0 && got == NULL, "%s is a miss", what[i]);
            tuner_binary *re = compile(source_a, 80);
            CHECK(re && first && same_binary(re, first), "%s: compiled again", what[i]);
            CHECK(tuner__compile_cache_get(key, &got) == 1 && got && same_binary(got, first),
                  "%s: replaced by a whole entry", what[i]);
            tuner_binary_free(got);
            tuner_binary_free(re);
        }

        /* A failing compile reaches NVRTC each time (its log) and is not stored. */
        for (int i = 0; i < 2; i++) {
            tuner_target t = {.sm = 80};
            tuner_binary *b = NULL;
            char *err = NULL;
            CHECK(tuner_compile(source_bad, &t, &b, &err) == -EINVAL && err && strstr(err, "\"q\""),
                  "a bad source fails with NVRTC's log: %s", err ? err : "(none)");
            free(err);
            tuner_binary_free(b);
        }
        CHECK(count_entries() == 3, "failures are not stored: %d entries", count_entries());
        if (first)
            check_tool_entries(first);
        /* No private files are left behind. */
        DIR *d = opendir(dir);
        int tmp = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            tmp += strstr(e->d_name, ".tmp") != NULL;
        if (d)
            closedir(d);
        CHECK(tmp == 0, "no temporary files left: %d", tmp);
        tuner_binary_free(first);
        tuner_binary_free(again);
        _exit(t_failures ? 1 : 0);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the cached half passed");

    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (t_failures) {
        fprintf(stderr, "test_compile_cache: %d failure(s)\n", t_failures);
        return 1;
    }
    printf("test_compile_cache: all checks passed\n");
    return 0;
}
