/* tuner/attn/registry.c - the attention templates (see tuner/attn/attn.h). */
#include "tuner/attn/attn.h"

/* Equal default ranks pick in this order (tuner/template.h): the decode template where it
 * applies (few query rows), then Hopper's, then the portable one. */
const tuner_template *const tuner__attn_templates[] = {
    &tuner__attn_decode,
    &tuner__attn_wgmma,
    &tuner__attn_mma,
    NULL,
};
