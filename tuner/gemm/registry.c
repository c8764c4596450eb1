/* tuner/gemm/registry.c - matmul and conv2d templates (tensor-core and SIMT). */
#include "tuner/template.h"

const tuner_template *const tuner__gemm_templates[] = {
    NULL,
};
