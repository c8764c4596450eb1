/* clients/c/client_internal.h - helpers shared by libhidet-client's source files only. */
#ifndef HIDET_CLIENTS_C_CLIENT_INTERNAL_H
#define HIDET_CLIENTS_C_CLIENT_INTERNAL_H

#include "hidet/client.h"

#include <cJSON.h>

#include "op/tmap.h"

/* Fills err (when not NULL) with status and a formatted message; returns r. */
int hidet__fail(hidet_error *err, int r, int http_status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Clears err (when not NULL). */
void hidet__ok(hidet_error *err);
/* Maps an HTTP error status to the negative code documented in client.h. */
int hidet__status_code(int status);
/* true when s is exactly HIDET_KEY_LEN lowercase hex characters. */
bool hidet__is_key(const char *s);

/* hidet_default_address(), and in why (why_len bytes, may be NULL) how it was chosen. */
int hidet__default_address(char **ret, char *why, size_t why_len);

/* A parsed tensor-map parameter (checked by hidet_kernel_set_parse) as op/tmap.h describes it,
 * for encoding. */
void hidet__tmap_of(const hidet_tensor_map *in, tuner_tmap *out);

/* A kernel set from its JSON object; json (len bytes) is kept as the set's text, or the object
 * printed when json is NULL. A set without "dims" takes inherit's (n_inherit of them: the
 * dispatch table's, or an entry's ranges). */
int hidet__kernel_set_from_json(const cJSON *root, const char *json, size_t len,
                                const hidet_dim *inherit, int n_inherit, hidet_kernel_set **ret,
                                hidet_error *err);
/* "output": {"shape", "dtype"}, shape entries sizes or names of dims (sym: their bit sets, shape
 * the size at the dims' max). */
int hidet__output_parse(const cJSON *o, const hidet_dim *dims, int n_dims, int *ret_rank,
                        int64_t *shape, unsigned *sym, char *dtype, size_t dtype_len,
                        hidet_error *err);

/* ---- named dims (dims.c) ---- */
/* The index of name in dims, or -1. */
int hidet__dim_index(const hidet_dim *dims, int n_dims, const char *name);
/* A "dims" object into out (sorted by name), *ret_n of them; -EPROTO with why (starting with the
 * member path, ".n.max: ...") otherwise. */
int hidet__dims_parse(const cJSON *o, hidet_dim *out, int *ret_n, char *why, size_t why_len);
/* "n" or "b*s" as a bit set over dims; -EPROTO with why. */
int hidet__dims_mask(const hidet_dim *dims, int n_dims, const char *expr, unsigned *ret,
                     char *why, size_t why_len);
/* A grid rule object; -EPROTO with why (".div: ...") for a missing, bad or unknown member. */
int hidet__grid_rule_parse(const cJSON *o, const hidet_dim *dims, int n_dims, hidet_grid_rule *r,
                           char *why, size_t why_len);
/* The rule's grid at sizes (by dims index) into *ret; -ERANGE when it lies outside 1 .. CUDA's
 * limit for grid dimension d. */
int hidet__grid_rule_eval(const hidet_grid_rule *r, const int64_t *sizes, int d, int64_t *ret);
/* Sizes by name (names[i]: sizes[i], i < n) into out, by dims index, each checked against its
 * range: -EINVAL for a missing, unknown or repeated name, -ERANGE for a size out of range (the
 * message as op/op_dims.c's, err->field "sizes.NAME"). */
int hidet__sizes_resolve(const hidet_dim *dims, int n_dims, const char *const *names,
                         const int64_t *sizes, size_t n, int64_t *out, hidet_error *err);

/* Builds a job from its JSON object (the value of "job"). */
int hidet__job_from_json(const cJSON *o, hidet_job **ret, hidet_error *err);

#endif
