/* tuner/tests/emu/emu_dyn.h - what the generators of dynamic ops' candidates for the CPU emulator
 * share (gen_mma_dyn.c, gen_attn_dyn.c, gen_fp8_mma.c; emu_mma.cpp runs what they write): the command line, the
 * kernel source and launches written for the emulator, the size sets' sizes.txt and inputs, and
 * the check over the sets. A generator gives its cases, its size sets, its inputs' values and
 * its check of one set.
 *   GEN DIR CASE INDEX   writes DIR/kern.cu (the kernel source after the template's helpers,
 *                        whose device helpers are the emulator's own; a Hopper kernel's
 *                        rewritten for emu_hopper.h), DIR/launch.h (the launches, whose dims
 *                        arguments are the emulator's g_dims and tensor maps emu_tmap's) and, per size
 *                        set j, DIR/s<j>/ with sizes.txt (dims, each launch's grid by
 *                        tuner_grid_rule_eval, the buffers' bytes) and in<i>.bin; prints the
 *                        schedule (exit 3: INDEX past the space; 4: the case has no space for
 *                        the target)
 *   GEN DIR CASE check   checks DIR/s<j>/out.bin for every j (exit 1 when one is wrong) */
#ifndef HIDET_TUNER_TESTS_EMU_EMU_DYN_H
#define HIDET_TUNER_TESTS_EMU_EMU_DYN_H

#include <stdbool.h>
#include <stdint.h>

#include "tuner/tuner.h"

#define EMU_N_SETS 4
#define EMU_MARGIN 256 /* poisoned bytes past the output (emu_mma.cpp writes 0xa5 there) */

typedef struct emu_dyn_gen {
    tuner_op (*case_op)(int c);
    void (*set_sizes)(const tuner_op *op, int j, int64_t *sz); /* the sizes of set j */
    int (*check_set)(const char *dir, const tuner_op *op, const int64_t *sz); /* 0: right */
    float (*input_value)(int input); /* an element of input i (drawn with t_rnd_int) */
    const char *helpers_end;         /* the line after which the kernel source is written */
    tuner_target target;
    /* NULL: INDEX numbers every candidate of the space; else only this template's (without CTA
     * clusters, which the emulator lacks). */
    const char *template_name;
    int n_sets; /* size sets (0: EMU_N_SETS; a static op's one) */
} emu_dyn_gen;

/* One size set's files as a check reads them: DIR/in<i>.bin and DIR/out.bin, and how many bytes
 * of the poisoned margin past the output the emulation changed. */
typedef struct emu_set {
    void *in[TUNER_MAX_INPUTS];
    unsigned char *out;
    long margin;
} emu_set;
/* Reads set DIR of op, whose output is out_bytes long; false (the verdict "WRONG: no output"
 * printed, nothing left to free) when an input is missing or the output is not out_bytes plus
 * the margin. */
bool emu_set_load(const char *dir, const tuner_op *op, size_t out_bytes, emu_set *s);
/* Prints the set's verdict - ok or WRONG, `what` (its sizes), bad elements of total, the largest
 * relative error, the margin bytes written - frees s and returns 0 when right, 1 when not. */
int emu_set_verdict(emu_set *s, const tuner_op *op, const char *what, long bad, long long total, double maxerr);

/* x's shape at sizes sz, and its element count. */
void emu_shape_at(const tuner_tensor *x, const int64_t *sz, long long *shape);
long long emu_numel_at(const tuner_tensor *x, const int64_t *sz);

int emu_dyn_main(int argc, char **argv, const emu_dyn_gen *g);

#endif
