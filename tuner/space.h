/* tuner/space.h - internal helpers of the space builder shared by the core templates. */
#ifndef HIDET_TUNER_SPACE_H
#define HIDET_TUNER_SPACE_H

#include <stddef.h>

#include "tuner/template.h"

/* NULL-terminated list of the NULL-terminated template lists (registry.c). */
extern const tuner_template *const *const tuner__registries[];

/* Sets s's n params (names static) to values; what else s holds stays. n <= TUNER_MAX_PARAMS. */
void tuner__schedule_params(tuner_schedule *s, int n, const char *const *param_names, const int *values);

/* Appends one schedule of template `name` with n params (names static) to *items. 0 or -ENOMEM. */
int tuner__space_push(tuner_schedule **items, size_t *n, const char *name, int n_params,
                      const char *const *param_names, const int *values);

/* 64-bit FNV-1a over bytes, continuing from h (start with TUNER_FNV_OFFSET). */
#define TUNER_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t tuner__fnv1a(uint64_t h, const void *data, size_t len);

#endif
