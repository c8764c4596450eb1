/* tuner/tests/emu/gen_grouped.c - writes conv2d_grouped candidates' sources for emu_kernel.cpp.
 *
 *   gen_grouped DIR N H W C K R S SH SW PH PW DH DW GROUPS NPICK [BIAS F32OUT TILES SO]
 *
 * The op: f16 NHWC x [N,H,W,C], w [K,R,S,C/GROUPS], stride/pad/dilation per axis; BIAS 1 adds a
 * bias [K] and relu epilogue, F32OUT 1 an f32 output. For sm_90a it writes DIR/k0.cu (the space's
 * default) and NPICK evenly spaced conv2d_grouped candidates (only those with tiles = TILES and
 * so = SO where given): each a #define header of the geometry and launch, then the kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tuner/tuner.h"
#include "tuner/tests/common.h"

int main(int argc, char **argv)
{
    if (argc < 17) { fprintf(stderr, "usage\n"); return 2; }
    const char *dir = argv[1];
    long long n = atoll(argv[2]), h = atoll(argv[3]), w = atoll(argv[4]), c = atoll(argv[5]), k = atoll(argv[6]);
    int r = atoi(argv[7]), s = atoi(argv[8]), sh = atoi(argv[9]), sw = atoi(argv[10]), ph = atoi(argv[11]),
        pw = atoi(argv[12]), dh = atoi(argv[13]), dw = atoi(argv[14]), groups = atoi(argv[15]);
    int npick = atoi(argv[16]);
    int bias = argc > 17 ? atoi(argv[17]) : 0;
    int f32out = argc > 18 ? atoi(argv[18]) : 0;
    int want_tiles = argc > 19 ? atoi(argv[19]) : 0;
    int want_so = argc > 20 ? atoi(argv[20]) : -1;
    tuner_op op = t_conv_nhwc(TUNER_F16, n, h, w, c, k, r, 1, 0, groups);
    op.inputs[1].shape[2] = s;
    op.attrs.conv2d.stride[0] = sh; op.attrs.conv2d.stride[1] = sw;
    op.attrs.conv2d.pad[0] = ph; op.attrs.conv2d.pad[1] = pw;
    op.attrs.conv2d.dilation[0] = dh; op.attrs.conv2d.dilation[1] = dw;
    op.output.shape[1] = (h + 2 * ph - dh * (r - 1) - 1) / sh + 1;
    op.output.shape[2] = (w + 2 * pw - dw * (s - 1) - 1) / sw + 1;
    if (bias) {
        long long kb[1] = {k};
        t_add_epilogue(&op, TUNER_EW_ADD, 1, kb, TUNER_EW_RELU);
    }
    if (f32out) op.output.dtype = TUNER_F32;
    tuner_target t = {90, true};
    tuner_space *sp = NULL; char *err = NULL;
    if (tuner_space_build(&op, &t, &sp, &err)) { fprintf(stderr, "space: %s\n", err); return 1; }
    size_t mine[4096], nm = 0;
    for (size_t i = 0; i < sp->n; i++) if (!strcmp(sp->items[i].template_name, "conv2d_grouped") && nm < 4096 && (!want_tiles || tuner_schedule_param(&sp->items[i], "tiles", 1) == want_tiles) && (want_so < 0 || tuner_schedule_param(&sp->items[i], "so", 0) == want_so)) mine[nm++] = i;
    size_t def = tuner_default_index(&op, &t, sp);
    size_t picks[64]; int np = 0;
    picks[np++] = def;
    for (int i = 0; i < npick && nm; i++) picks[np++] = mine[npick > 1 ? (size_t)i * (nm - 1) / (npick - 1) : 0];
    for (int i = 0; i < np; i++) {
        tuner_program *p = NULL; err = NULL;
        if (tuner_generate(&op, &t, &sp->items[picks[i]], &p, &err)) { fprintf(stderr, "gen: %s\n", err); return 1; }
        if (strcmp(p->kernels[0].name, "hd_conv2d_grouped")) { fprintf(stderr, "default not mine: %s\n", p->kernels[0].name); continue; }
        char path[512]; snprintf(path, sizeof path, "%s/k%d.cu", dir, i);
        FILE *f = fopen(path, "w");
        char *sj = tuner_schedule_json(&sp->items[picks[i]]);
        fprintf(f, "// %s\n#define GX %u\n#define GY %u\n#define THREADS %u\n#define SMEM %u\n", sj, p->kernels[0].grid[0], p->kernels[0].grid[1], p->kernels[0].block[0], p->kernels[0].shared_bytes);
        fprintf(f, "#define N_ %lld\n#define H_ %lld\n#define W_ %lld\n#define C_ %lld\n#define K_ %lld\n#define R_ %d\n#define S_ %d\n#define SH %d\n#define SW %d\n#define PH %d\n#define PW %d\n#define DH %d\n#define DW %d\n#define G_ %d\n#define P_ %lld\n#define Q_ %lld\n#define BIAS %d\n#define F32OUT %d\n",
                n, h, w, c, k, r, s, sh, sw, ph, pw, dh, dw, groups, (long long)op.output.shape[1], (long long)op.output.shape[2], bias, f32out);
        const char *body = strstr(p->source, "// ---- end of prelude ----");
        fputs(body, f);
        fclose(f);
        free(sj);
        tuner_program_free(p);
    }
    printf("%d kernels\n", np);
    return 0;
}
