/* kernel_cache/tests/test_mem.c - the memory tier: lookups, replacement, LRU eviction
 * by count and by bytes, removal and clearing, tags, ageing and confirmation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "kernel_cache/kc_mem.h"

static void key_of(int i, char out[KC_KEY_LEN + 1])
{
    /* Same 16-digit prefix for some keys so that bucket chains are exercised too. */
    snprintf(out, KC_KEY_LEN + 1, "%016x%048d", (unsigned)(i % 3), i);
}

int main(void)
{
    kc_mem *c = NULL;
    CHECK(kc_mem_new(0, 10, &c) < 0, "zero entries refused");
    CHECK(kc_mem_new(3, 100, &c) == 0 && c, "new");
    char k[8][KC_KEY_LEN + 1];
    for (int i = 0; i < 8; i++)
        key_of(i, k[i]);

    kc_mem_hit h;
    CHECK(!kc_mem_get(c, k[0], &h), "empty");
    CHECK(kc_mem_put(c, "short", "x", 1, 1, NULL) < 0, "bad key refused");
    CHECK(kc_mem_put(c, k[0], "{\"a\":0}", 7, 1, NULL) == 0, "put 0");
    CHECK(kc_mem_put(c, k[1], "{\"a\":1}", 7, 2, NULL) == 0, "put 1");
    CHECK(kc_mem_put(c, k[2], "{\"a\":2}", 7, 0, NULL) == 0, "put 2");
    CHECK(kc_mem_count(c) == 3 && kc_mem_bytes(c) == 21, "count/bytes");
    CHECK(kc_mem_get(c, k[1], &h) && h.len == 7 && !strcmp(h.body, "{\"a\":1}") && h.rank == 2,
          "get 1");

    /* k[0] is now the least recently used (k[1] was read, k[2] written after k[0]). */
    CHECK(kc_mem_put(c, k[3], "{\"a\":3}", 7, 1, NULL) == 0, "put 3");
    CHECK(!kc_mem_get(c, k[0], &h), "LRU entry evicted by count");
    CHECK(kc_mem_get(c, k[1], &h) && kc_mem_get(c, k[2], &h) && kc_mem_get(c, k[3], &h),
          "others kept");
    CHECK(kc_mem_count(c) == 3, "count after eviction");

    /* Replacing an entry keeps one copy with the new bytes. */
    CHECK(kc_mem_put(c, k[2], "{\"b\":22}", 8, 2, NULL) == 0, "replace");
    CHECK(kc_mem_get(c, k[2], &h) && h.len == 8 && !strcmp(h.body, "{\"b\":22}") && h.rank == 2,
          "replaced");
    CHECK(kc_mem_count(c) == 3 && kc_mem_bytes(c) == 22, "bytes after replace: %zu",
          kc_mem_bytes(c));

    /* Eviction by bytes: 22 bytes are held; a 90-byte body leaves room for one 7- or 8-byte
     * entry, so the two least recently used go. */
    char big[91];
    memset(big, 'x', 90);
    big[90] = '\0';
    CHECK(kc_mem_put(c, k[4], big, 90, 1, NULL) == 0, "big");
    CHECK(kc_mem_bytes(c) <= 100, "bytes bound: %zu", kc_mem_bytes(c));
    CHECK(kc_mem_get(c, k[4], &h) && h.len == 90, "big kept");
    CHECK(kc_mem_count(c) == 2, "older ones evicted by bytes: %zu", kc_mem_count(c));
    CHECK(kc_mem_get(c, k[2], &h) && !kc_mem_get(c, k[1], &h) && !kc_mem_get(c, k[3], &h),
          "the most recently used small entry stays");
    char huge[200];
    memset(huge, 'y', sizeof(huge));
    CHECK(kc_mem_put(c, k[5], huge, sizeof(huge), 1, NULL) < 0, "larger than the cache refused");
    CHECK(kc_mem_get(c, k[4], &h), "refusal evicted nothing");

    kc_mem_remove(c, k[4]);
    CHECK(!kc_mem_get(c, k[4], &h) && kc_mem_count(c) == 1 && kc_mem_bytes(c) == 8,
          "remove");
    kc_mem_remove(c, k[4]); /* absent: no-op */

    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++)
            CHECK(kc_mem_put(c, k[i], "{}", 2, 1, NULL) == 0, "refill");
        kc_mem_clear(c);
        CHECK(kc_mem_count(c) == 0 && kc_mem_bytes(c) == 0, "clear");
        for (int i = 0; i < 3; i++)
            CHECK(!kc_mem_get(c, k[i], &h), "cleared %d", i);
    }

    /* Tags, and ageing: every entry stale at once, each confirmed or put again current. */
    char long_tag[KC_KEY_LEN + 2];
    memset(long_tag, 'a', sizeof(long_tag) - 1);
    long_tag[sizeof(long_tag) - 1] = '\0';
    CHECK(kc_mem_put(c, k[0], "{}", 2, 1, long_tag) == -EINVAL, "a tag longer than a key refused");
    CHECK(kc_mem_put(c, k[0], "{}", 2, 1, k[6]) == 0 && kc_mem_put(c, k[1], "{}", 2, 2, NULL) == 0,
          "tagged puts");
    CHECK(kc_mem_get(c, k[0], &h) && !strcmp(h.tag, k[6]) && !h.stale, "tag kept, current");
    CHECK(kc_mem_get(c, k[1], &h) && !strcmp(h.tag, "") && !h.stale, "no tag");
    kc_mem_age(c);
    CHECK(kc_mem_get(c, k[0], &h) && h.stale && kc_mem_get(c, k[1], &h) && h.stale, "aged");
    kc_mem_confirm(c, k[0]);
    CHECK(kc_mem_get(c, k[0], &h) && !h.stale && kc_mem_get(c, k[1], &h) && h.stale,
          "confirmed one");
    CHECK(kc_mem_put(c, k[1], "{}", 2, 2, NULL) == 0 && kc_mem_get(c, k[1], &h) && !h.stale,
          "put again: current");
    kc_mem_confirm(c, k[7]); /* absent: no-op */
    kc_mem_free(c);
    kc_mem_free(NULL);
    return check_finish("test_kc_mem");
}
