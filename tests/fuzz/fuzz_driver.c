/* Standalone driver for the fuzz targets when they are not built with -fsanitize=fuzzer: runs the
 * target over every file of a seed corpus, then over a fixed number of deterministic mutations
 * of those seeds (seeded PRNG), so the suite is reproducible and fast.
 * Usage: fuzz_X CORPUS_DIR [ITERATIONS] [SEED] */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

/* Seeds as large as an export file of a few small kernels; corpora as grown by the campaigns. */
#define DRIVER_MAX_INPUT 65536
#define MAX_SEEDS 4096

typedef struct seed {
    uint8_t *data;
    size_t len;
} seed;

static uint64_t rng_state;

/* xorshift64*: deterministic, good enough to pick mutations. */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static size_t rnd_below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

/* Tokens of both languages: mutations that splice them in reach deeper states than bit flips. */
static const char *const tokens[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u0000", "null", "true", "false", "-1", "0",
    "1e309", "2147483648", "4.5", "\"op\"", "\"inputs\"", "\"shape\"", "\"dtype\"", "\"attrs\"",
    "\"epilogue\"", "\"prologue\"", "\"input\"", "\"operand\"", "\"f16\"", "\"matmul\"",
    "\"conv2d\"", "\"elementwise\"", "\"bias\"", "\"cast\"", "\"scale\"", "\"value\"",
    "\r\n", "\r\n\r\n", " HTTP/1.1\r\n", "GET ", "POST ", "/v1/kernels", "Content-Length: ",
    "Transfer-Encoding: chunked\r\n", "Connection: close\r\n", "Expect: 100-continue\r\n",
    "0\r\n\r\n", "ffffffff\r\n", "%00", "%zz", "?a=b", "\xff\xfe", "\0",
};

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    int n = 1 + (int)rnd_below(6);
    for (int k = 0; k < n; k++) {
        switch (rnd_below(7)) {
        case 0: /* flip a bit */
            if (len)
                buf[rnd_below(len)] ^= (uint8_t)(1u << rnd_below(8));
            break;
        case 1: /* random byte */
            if (len)
                buf[rnd_below(len)] = (uint8_t)rnd();
            break;
        case 2: { /* delete a range */
            if (!len)
                break;
            size_t at = rnd_below(len), cnt = 1 + rnd_below(len - at < 16 ? len - at : 16);
            memmove(buf + at, buf + at + cnt, len - at - cnt);
            len -= cnt;
            break;
        }
        case 3: { /* duplicate a range */
            if (!len)
                break;
            size_t at = rnd_below(len), cnt = 1 + rnd_below(len - at < 32 ? len - at : 32);
            if (len + cnt > cap)
                break;
            memmove(buf + at + cnt, buf + at, len - at);
            len += cnt;
            break;
        }
        case 4:
        case 5: { /* insert a token */
            const char *t = tokens[rnd_below(sizeof(tokens) / sizeof(tokens[0]))];
            size_t tl = t[0] ? strlen(t) : 1, at = rnd_below(len + 1);
            if (len + tl > cap)
                break;
            memmove(buf + at + tl, buf + at, len - at);
            memcpy(buf + at, t, tl);
            len += tl;
            break;
        }
        default: /* truncate */
            len = rnd_below(len + 1);
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    static seed seeds[MAX_SEEDS]; /* static: too large for the stack */
    size_t n_seeds = 0;
    long iterations = argc > 2 ? atol(argv[2]) : 20000;
    rng_state = argc > 3 ? strtoull(argv[3], NULL, 0) : UINT64_C(0x9e3779b97f4a7c15);
    if (rng_state == 0)
        rng_state = 1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS] [SEED]\n", argv[0]);
        return 2;
    }

    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 2;
    }
    /* Sorted file names, so the run does not depend on directory order. */
    struct dirent **names;
    closedir(d);
    int nn = scandir(argv[1], &names, NULL, alphasort);
    for (int i = 0; i < nn; i++) {
        char path[4096];
        if (names[i]->d_name[0] != '.' && n_seeds < MAX_SEEDS) {
            snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]->d_name);
            FILE *f = fopen(path, "rb");
            if (f) {
                uint8_t *buf = malloc(DRIVER_MAX_INPUT);
                size_t len = fread(buf, 1, DRIVER_MAX_INPUT, f);
                fclose(f);
                seeds[n_seeds].data = buf;
                seeds[n_seeds].len = len;
                n_seeds++;
            }
        }
        free(names[i]);
    }
    free(names);
    if (n_seeds == 0) {
        fprintf(stderr, "%s: empty corpus\n", argv[1]);
        return 2;
    }

    for (size_t i = 0; i < n_seeds; i++)
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].len);
    uint8_t *buf = malloc(DRIVER_MAX_INPUT);
    for (long it = 0; it < iterations; it++) {
        const seed *s = &seeds[rnd_below(n_seeds)];
        memcpy(buf, s->data, s->len);
        size_t len = mutate(buf, s->len, DRIVER_MAX_INPUT);
        /* Exact-size copy, so the sanitizers see any read past the input. */
        uint8_t *in = malloc(len ? len : 1);
        memcpy(in, buf, len);
        LLVMFuzzerTestOneInput(in, len);
        free(in);
    }
    free(buf);
    for (size_t i = 0; i < n_seeds; i++)
        free(seeds[i].data);
    printf("%s: %zu seeds, %ld mutations, no crash\n", argv[0], n_seeds, iterations);
    return 0;
}
