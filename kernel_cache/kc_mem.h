/* kernel_cache/kc_mem.h - the memory tier in front of the SQLite cache: recent answers by key.
 *
 * Maps a key (an op key) to the exact bytes of its kernel-set answer (cached:true), so a repeated
 * POST /v1/kernels costs a hash-table lookup: no SQLite, no JSON building. The resolver also keeps
 * its request memo in one (a body's digest -> its op key). Least-recently-used entries are evicted
 * beyond max_entries or max_bytes. The resolver (resolve/) clears it whenever the database may
 * have changed under it (kc_data_version() moved: another process wrote; or a tuning job ended:
 * an artifact or selection may have been replaced), so an answer served from here is never
 * staler than one read from SQLite.
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
} kc_mem_hit;

int kc_mem_new(size_t max_entries, size_t max_bytes, kc_mem **ret);
/* Frees everything; accepts NULL. */
void kc_mem_free(kc_mem *c);

/* Looks up op_key and marks it most recently used. Returns true and fills *ret (pointing into the
 * cache: valid until the next put/remove/clear) or false. */
bool kc_mem_get(kc_mem *c, const char *op_key, kc_mem_hit *ret);
/* Stores a copy of body (replacing any entry for op_key), evicting LRU entries as needed. A body
 * larger than max_bytes is not stored (returns -E2BIG). */
int kc_mem_put(kc_mem *c, const char *op_key, const char *body, size_t len, int rank);
void kc_mem_remove(kc_mem *c, const char *op_key);
void kc_mem_clear(kc_mem *c);

size_t kc_mem_count(const kc_mem *c);
size_t kc_mem_bytes(const kc_mem *c);

#endif
