/* tuner/codegen.h - helpers every template uses to write CUDA C (internal).
 *
 * tuner_sb is a growable string builder; tuner__prelude() emits the small self-contained
 * definitions generated kernels rely on (half/bf16 types and conversions, cp.async, ldmatrix and
 * mma.sync wrappers as inline PTX, fast math), so no heavy CUDA header is ever included and a
 * candidate compiles quickly. tuner__emit_chain() inlines a fused prologue/epilogue chain: the
 * expression is re-emitted from the enum-only IR in tuner/op.h, never from client text.
 */
#ifndef HIDET_TUNER_CODEGEN_H
#define HIDET_TUNER_CODEGEN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "tuner/op.h"

typedef struct tuner_sb {
    char *buf;
    size_t len, cap;
    bool oom; /* set once an allocation failed; further appends are ignored */
} tuner_sb;

void tuner_sb_init(tuner_sb *sb);
/* printf-style append. */
void tuner_sb_printf(tuner_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tuner_sb_puts(tuner_sb *sb, const char *s);
/* Hands the string over (caller frees) and resets sb; NULL if an allocation failed. */
char *tuner_sb_take(tuner_sb *sb);
void tuner_sb_free(tuner_sb *sb);

/* Appends the common prelude (types, conversions, inline-PTX wrappers) for target sm. */
void tuner__prelude(tuner_sb *sb, int sm);

/* C type name of a dtype in generated code ("half_t", "bf16_t", "float"). */
const char *tuner__ctype(tuner_dtype d);

/* Emits statements that apply `chain` to the float variable named `var` (updated in place).
 * Operands of binary steps are read as `operand_expr(i)`: the caller supplies, through `load`,
 * a C expression for element of inputs[i] that lines up with the current output element
 * (broadcast already resolved), e.g. "bias_ptr[col]". `load` returns a malloc'd string. */
typedef char *(*tuner_operand_load_fn)(void *ctx, int input_index);
void tuner__emit_chain(tuner_sb *sb, const tuner_op *op, const tuner_ew_chain *chain, const char *var,
                       tuner_operand_load_fn load, void *ctx);

#endif
