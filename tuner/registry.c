/* tuner/registry.c - looking templates up across both registries (gemm and core). */
#include "tuner/template.h"

#include <string.h>

/* Order matters only for tuner_space_build's item order: gemm templates first, then attention,
 * then core. */
const tuner_template *const *const tuner__registries[] = {
    tuner__gemm_templates,
    tuner__attn_templates,
    tuner__core_templates,
    NULL,
};

const tuner_template *tuner__template_find(const char *name)
{
    if (!name)
        return NULL;
    for (int r = 0; tuner__registries[r]; r++)
        for (int i = 0; tuner__registries[r][i]; i++)
            if (strcmp(tuner__registries[r][i]->name, name) == 0)
                return tuner__registries[r][i];
    return NULL;
}
