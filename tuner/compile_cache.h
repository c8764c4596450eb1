/* tuner/compile_cache.h - an optional directory of NVRTC outputs, keyed by everything that decides
 * them, for development and tests; the tests keep other tools' results there too (ptxas -v).
 *
 * With HIDETD_COMPILE_CACHE=DIR in the environment (read once per process), tuner_compile first
 * looks for DIR/KEY, KEY the SHA-256 of the NVRTC version, the compile options and the source;
 * on a miss it compiles and stores PTX, cubin and log there. Only successful compiles are kept,
 * so a failing source always reaches NVRTC and its log. Several processes may share one
 * directory: an entry is written to a private file and renamed into place, and an entry that is
 * short, damaged or of another format is a miss (and is replaced).
 *
 * Why: every daemon a test starts has an empty kernel cache, so the suite compiles the same
 * sources again and again - in both of its builds, side by side. scripts/test.sh gives each run
 * one fresh directory. The daemon's kernel cache (kernel_cache/) is the production store; this
 * one has no size bound and no eviction, and NVRTC's version is major.minor only, so a
 * directory must not outlive a toolkit update. Unset, nothing here is used.
 */
#ifndef HIDET_TUNER_COMPILE_CACHE_H
#define HIDET_TUNER_COMPILE_CACHE_H

#include "tuner/tuner.h"

/* The directory, or NULL when the cache is off. */
const char *tuner__compile_cache_dir(void);

/* The entry's name for this compile: 64 hex digits. */
void tuner__compile_cache_key(const char *source, const char *const *opts, int n_opts, char key[65]);

/* The stored binary under key (*ret, compile_ms 0), 1; 0 when there is none usable; -ENOMEM. */
int tuner__compile_cache_get(const char *key, tuner_binary **ret);

/* Stores b under key. Best effort: a cache that cannot be written is a cache that misses. */
void tuner__compile_cache_put(const char *key, const tuner_binary *b);

/* Another tool's result in the same directory, for the tests: the test command's two builds run
 * the toolkit's ptxas -v on the same PTX (tuner/tests/common.h, t_ptxas). The caller decides what
 * to store (only what the tool accepted) and what the key covers: the key is the SHA-256 of the
 * parts (each a string: the tool's version, its options, its input), in another namespace than
 * NVRTC's keys. Entries are written and checked as NVRTC's are. */
void tuner__compile_cache_tool_key(const char *const *parts, int n_parts, char key[65]);
/* The text stored under key (malloc'd, NUL-terminated; its length in *ret_len if not NULL), 1;
 * 0 when there is none usable; -ENOMEM. */
int tuner__compile_cache_get_tool(const char *key, char **ret, size_t *ret_len);
/* Stores len bytes of text under key (best effort). */
void tuner__compile_cache_put_tool(const char *key, const char *text, size_t len);

#endif
