/* tuner/core_registry.c - templates owned by the reduction/elementwise side of the tuner. */
#include "tuner/template.h"

const tuner_template *const tuner__core_templates[] = {
    NULL,
};
