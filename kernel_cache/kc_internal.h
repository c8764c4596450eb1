/* kernel_cache/kc_internal.h - helpers shared by the kernel cache's own source files only.
 *
 * Functions named *_locked expect the caller to hold the handle's mutex (kc__lock_db()).
 * Nothing here is part of the module's contract; other modules use kc.h.
 */
#ifndef HIDET_KERNEL_CACHE_KC_INTERNAL_H
#define HIDET_KERNEL_CACHE_KC_INTERNAL_H

#include "kernel_cache/kc.h"

/* Initialises libsodium once per process (thread-safe). Returns 0 or -EIO. */
int kc__sodium_ready(void);

void kc__lock_db(kc_db *db);
void kc__unlock_db(kc_db *db);
/* Transactions on the handle's connection; return 0 or a negative errno (error text kept). */
int kc__begin(kc_db *db);
int kc__begin_read(kc_db *db);
int kc__commit(kc_db *db);
/* Rolls back if a transaction is open; keeps the current error text. */
void kc__rollback(kc_db *db);
/* Replaces the handle's error text. */
void kc__errf(kc_db *db, const char *msg);

/* 0 when a's fields are storable, else -EINVAL. */
int kc__check_artifact(const kc_artifact *a);
/* Bytes an artifact accounts for in stats and pruning (blobs and JSON texts). */
uint64_t kc__artifact_bytes(const kc_artifact *a);
/* Stores an artifact and its selection inside the caller's transaction. ptx_sha/cubin_sha:
 * digests already checked by the caller, or NULL to compute them. */
int kc__put_locked(kc_db *db, const kc_artifact *a, const char *ptx_sha, const char *cubin_sha);
/* Reads one artifact (full: with verified blobs; touch: refresh last_used_at). *ret is the
 * caller's, freed with kc_artifact_free(). */
int kc__get_locked(kc_db *db, const char *key, bool full, bool touch, kc_artifact **ret);
int kc__list_locked(kc_db *db, const kc_filter *f, kc_summary **ret, size_t *ret_n);

/* Sets *ret_err (when ret_err is non-NULL and no message is set yet) to the formatted message
 * and returns r: for the functions that explain failures to their caller (open, export, import). */
int kc__fail(char **ret_err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
