/* tuner/core_registry.c - templates owned by the reduction/elementwise side of the tuner. */
#include "tuner/core.h"

const tuner_template *const tuner__core_templates[] = {
    &tuner__softmax_rows,
    &tuner__layernorm_rows,
    &tuner__rmsnorm_rows,
    &tuner__reduce_rows,
    &tuner__reduce_cols,
    &tuner__elementwise,
    &tuner__copy,
    &tuner__concat,
    &tuner__conv2d_grouped,
    &tuner__conv2d_direct,
    &tuner__pool2d,
    &tuner__gather,
    NULL,
};
