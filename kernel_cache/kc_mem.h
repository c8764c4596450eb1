/* kernel_cache/kc_mem.h - the memory tier in front of the SQLite cache: recent answers by key.
 *
 * Maps a key (an op key) to the exact bytes of its kernel-set answer (cached:true), so a repeated
 * POST /v1/kernels costs a hash-table lookup: no SQLite, no JSON building. The resolver also keeps
 * its request memo in one (a body's digest -> its op key). Least-recently-used entries are evicted
 * beyond max_entries or max_bytes. An entry may carry a tag (for answers: the artifact key the
 * answer was rendered from). kc_mem_age() makes every entry stale at once: a stale hit says so,
 * and its holder checks it (the resolver: is the op still selected to that artifact, chosen the
 * same way?) and confirms or removes it. The resolver ages its answers when the database changed
 * under it (kc_data_version() moved: another connection wrote), and removes an op's answer when
 * its tuning job ends, so an answer served from here is never staler than one read from
 * SQLite.
 *
 * Loop-thread only (no locks). Returns 0 or a negative errno.
 */
#ifndef HIDET_KERNEL_CACHE_KC_MEM_H
#define HIDET_KERNEL_CACHE_KC_MEM_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel_cache/kc.h"

typedef struct kc_mem kc_mem;

typedef struct kc_mem_hit {
    const char *body; /* the answer JSON, NUL-terminated */
    size_t len;
    int rank;         /* how the stored kernel was chosen: 0 default (tune none), 1 cost model,
                       * 2 measured on a GPU; the caller decides whether that satisfies a request */
    const char *tag;  /* the tag given to kc_mem_put ("" without one) */
    bool stale;       /* put before the last kc_mem_age(): to be checked, then kc_mem_confirm() */
} kc_mem_hit;

int kc_mem_new(size_t max_entries, size_t max_bytes, kc_mem **ret);
/* Frees everything; accepts NULL. */
void kc_mem_free(kc_mem *c);

/* Looks up op_key and marks it most recently used. Returns true and fills *ret (pointing into the
 * cache: valid until the next put/remove/clear) or false. */
bool kc_mem_get(kc_mem *c, const char *op_key, kc_mem_hit *ret);
/* Stores a copy of body (replacing any entry for op_key), evicting LRU entries as needed, with an
 * optional tag (NULL: none; at most KC_KEY_LEN characters, else -EINVAL). A body larger than
 * max_bytes is not stored (returns -E2BIG). */
int kc_mem_put(kc_mem *c, const char *op_key, const char *body, size_t len, int rank,
               const char *tag);
void kc_mem_remove(kc_mem *c, const char *op_key);
void kc_mem_clear(kc_mem *c);
/* Makes every entry stale (O(1)); kc_mem_confirm() makes op_key's entry current again. */
void kc_mem_age(kc_mem *c);
void kc_mem_confirm(kc_mem *c, const char *op_key);

size_t kc_mem_count(const kc_mem *c);
size_t kc_mem_bytes(const kc_mem *c);

#endif
