/* daemon/tests/test_hitcache.c - the hit path's answer cache: lookups, replacement, LRU eviction
 * by count and by bytes, removal and clearing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "daemon/hitcache.h"

static void key_of(int i, char out[KC_KEY_LEN + 1])
{
    /* Same 16-digit prefix for some keys so that bucket chains are exercised too. */
    snprintf(out, KC_KEY_LEN + 1, "%016x%048d", (unsigned)(i % 3), i);
}

int main(void)
{
    hd_hitcache *c = NULL;
    CHECK(hd_hitcache_new(0, 10, &c) < 0, "zero entries refused");
    CHECK(hd_hitcache_new(3, 100, &c) == 0 && c, "new");
    char k[8][KC_KEY_LEN + 1];
    for (int i = 0; i < 8; i++)
        key_of(i, k[i]);

    hd_hit h;
    CHECK(!hd_hitcache_get(c, k[0], &h), "empty");
    CHECK(hd_hitcache_put(c, "short", "x", 1, 1) < 0, "bad key refused");
    CHECK(hd_hitcache_put(c, k[0], "{\"a\":0}", 7, 1) == 0, "put 0");
    CHECK(hd_hitcache_put(c, k[1], "{\"a\":1}", 7, 2) == 0, "put 1");
    CHECK(hd_hitcache_put(c, k[2], "{\"a\":2}", 7, 0) == 0, "put 2");
    CHECK(hd_hitcache_count(c) == 3 && hd_hitcache_bytes(c) == 21, "count/bytes");
    CHECK(hd_hitcache_get(c, k[1], &h) && h.len == 7 && !strcmp(h.body, "{\"a\":1}") && h.rank == 2,
          "get 1");

    /* k[0] is now the least recently used (k[1] was read, k[2] written after k[0]). */
    CHECK(hd_hitcache_put(c, k[3], "{\"a\":3}", 7, 1) == 0, "put 3");
    CHECK(!hd_hitcache_get(c, k[0], &h), "LRU entry evicted by count");
    CHECK(hd_hitcache_get(c, k[1], &h) && hd_hitcache_get(c, k[2], &h) && hd_hitcache_get(c, k[3], &h),
          "others kept");
    CHECK(hd_hitcache_count(c) == 3, "count after eviction");

    /* Replacing an entry keeps one copy with the new bytes. */
    CHECK(hd_hitcache_put(c, k[2], "{\"b\":22}", 8, 2) == 0, "replace");
    CHECK(hd_hitcache_get(c, k[2], &h) && h.len == 8 && !strcmp(h.body, "{\"b\":22}") && h.rank == 2,
          "replaced");
    CHECK(hd_hitcache_count(c) == 3 && hd_hitcache_bytes(c) == 22, "bytes after replace: %zu",
          hd_hitcache_bytes(c));

    /* Eviction by bytes: 22 bytes are held; a 90-byte body leaves room for one 7- or 8-byte
     * entry, so the two least recently used go. */
    char big[91];
    memset(big, 'x', 90);
    big[90] = '\0';
    CHECK(hd_hitcache_put(c, k[4], big, 90, 1) == 0, "big");
    CHECK(hd_hitcache_bytes(c) <= 100, "bytes bound: %zu", hd_hitcache_bytes(c));
    CHECK(hd_hitcache_get(c, k[4], &h) && h.len == 90, "big kept");
    CHECK(hd_hitcache_count(c) == 2, "older ones evicted by bytes: %zu", hd_hitcache_count(c));
    CHECK(hd_hitcache_get(c, k[2], &h) && !hd_hitcache_get(c, k[1], &h) && !hd_hitcache_get(c, k[3], &h),
          "the most recently used small entry stays");
    char huge[200];
    memset(huge, 'y', sizeof(huge));
    CHECK(hd_hitcache_put(c, k[5], huge, sizeof(huge), 1) < 0, "larger than the cache refused");
    CHECK(hd_hitcache_get(c, k[4], &h), "refusal evicted nothing");

    hd_hitcache_remove(c, k[4]);
    CHECK(!hd_hitcache_get(c, k[4], &h) && hd_hitcache_count(c) == 1 && hd_hitcache_bytes(c) == 8,
          "remove");
    hd_hitcache_remove(c, k[4]); /* absent: no-op */

    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++)
            CHECK(hd_hitcache_put(c, k[i], "{}", 2, 1) == 0, "refill");
        hd_hitcache_clear(c);
        CHECK(hd_hitcache_count(c) == 0 && hd_hitcache_bytes(c) == 0, "clear");
        for (int i = 0; i < 3; i++)
            CHECK(!hd_hitcache_get(c, k[i], &h), "cleared %d", i);
    }
    hd_hitcache_free(c);
    hd_hitcache_free(NULL);
    return check_finish("test_hitcache");
}
