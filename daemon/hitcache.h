/* daemon/hitcache.h - the in-memory answer cache of the cache-hit path.
 *
 * Maps an op key to the exact bytes of its kernel-set answer (cached:true), so a repeated
 * POST /v1/kernels costs a request parse, a key hash and a hash-table lookup: no SQLite, no JSON
 * building. Least-recently-used entries are evicted beyond max_entries or max_bytes. The daemon
 * clears it whenever the database may have changed under it (kc_data_version() moved: another
 * process wrote; or a tuning job ended: an artifact or selection may have been replaced), so an
 * answer served from here is never staler than one read from SQLite.
 *
 * Loop-thread only (no locks). Returns 0 or a negative errno.
 */
#ifndef HIDET_DAEMON_HITCACHE_H
#define HIDET_DAEMON_HITCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernel_cache/kc.h"

typedef struct hd_hitcache hd_hitcache;

typedef struct hd_hit {
    const char *body; /* the answer JSON, NUL-terminated */
    size_t len;
    int rank;         /* how the stored kernel was chosen: 0 default (tune none), 1 cost model,
                       * 2 measured on a GPU; the caller decides whether that satisfies a request */
} hd_hit;

int hd_hitcache_new(size_t max_entries, size_t max_bytes, hd_hitcache **ret);
/* Frees everything; accepts NULL. */
void hd_hitcache_free(hd_hitcache *c);

/* Looks up op_key and marks it most recently used. Returns true and fills *ret (pointing into the
 * cache: valid until the next put/remove/clear) or false. */
bool hd_hitcache_get(hd_hitcache *c, const char *op_key, hd_hit *ret);
/* Stores a copy of body (replacing any entry for op_key), evicting LRU entries as needed. A body
 * larger than max_bytes is not stored (returns -E2BIG). */
int hd_hitcache_put(hd_hitcache *c, const char *op_key, const char *body, size_t len, int rank);
void hd_hitcache_remove(hd_hitcache *c, const char *op_key);
void hd_hitcache_clear(hd_hitcache *c);

size_t hd_hitcache_count(const hd_hitcache *c);
size_t hd_hitcache_bytes(const hd_hitcache *c);

#endif
