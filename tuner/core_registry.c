/* tuner/core_registry.c - templates owned by the reduction/elementwise side of the tuner, and
 * their tune:"none" preferences. */
#include "tuner/core.h"

#include <errno.h>
#include <string.h>

const tuner_template *const tuner__core_templates[] = {
    &tuner__softmax_rows,
    &tuner__layernorm_rows,
    &tuner__rmsnorm_rows,
    &tuner__reduce_rows,
    &tuner__reduce_cols,
    &tuner__elementwise,
    NULL,
};

int tuner__core_preferred(const tuner_op *op, const tuner_target *t, const char *tmpl, tuner_schedule *ret)
{
    if (!op || !t || !tmpl || !ret)
        return -EINVAL;
    const tuner_template *tp = NULL;
    for (int i = 0; tuner__core_templates[i]; i++)
        if (strcmp(tuner__core_templates[i]->name, tmpl) == 0)
            tp = tuner__core_templates[i];
    if (!tp || !tp->applies(op, t))
        return -ENOENT;
    int r;
    if (tp == &tuner__reduce_cols)
        r = tuner__cols_preferred(op, t, ret);
    else if (tp == &tuner__elementwise)
        r = tuner__elementwise_preferred(op, t, ret);
    else
        r = tuner__rows_preferred(op, t, ret);
    if (r == 0)
        ret->template_name = tp->name;
    return r;
}
