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

/* Builds a job from its JSON object (the value of "job"). */
int hidet__job_from_json(const cJSON *o, hidet_job **ret, hidet_error *err);

#endif
