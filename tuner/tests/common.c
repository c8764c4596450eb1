/* tuner/tests/common.c - see common.h. */
#include "common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tuner/compile_cache.h"

_Atomic int t_failures;

t_subset t_sub = {.shard = 1, .n_shards = 1, .every = 1, .rest = 0};

int t_subset_init(int *argc, char **argv)
{
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--shard"))
            continue;
        int k = 0, n = 0;
        char end = 0;
        if (i + 1 >= *argc || sscanf(argv[i + 1], "%d/%d%c", &k, &n, &end) != 2 || n < 1 || k < 1 || k > n) {
            fprintf(stderr, "--shard wants K/N with 1 <= K <= N\n");
            return -1;
        }
        t_sub.shard = k;
        t_sub.n_shards = n;
        for (int j = i; j + 2 <= *argc; j++)
            argv[j] = argv[j + 2];
        *argc -= 2;
        i--;
    }
    /* HIDET_TEST_SAMPLE_BUILD is the build's default (meson's registration), which
     * HIDET_TEST_SAMPLE from the caller's environment overrides. */
    const char *s = getenv("HIDET_TEST_SAMPLE");
    if (!s || !*s)
        s = getenv("HIDET_TEST_SAMPLE_BUILD");
    if (s && *s) {
        int every = 0, rest = 0, got;
        char end = 0;
        got = sscanf(s, "%d+%d%c", &every, &rest, &end);
        if (got < 1 || got > 2 || every < 1 || rest < 0 || rest >= every) {
            fprintf(stderr, "HIDET_TEST_SAMPLE=%s: want S or S+R with S >= 1 and 0 <= R < S\n", s);
            return -1;
        }
        t_sub.every = every;
        t_sub.rest = rest;
    }
    if (t_sub.n_shards > 1)
        printf("subset: shard %d of %d (the jobs i with i %% %d == %d)\n", t_sub.shard, t_sub.n_shards,
               t_sub.n_shards, t_sub.shard - 1);
    if (t_sub.every > 1)
        printf("subset: HIDET_TEST_SAMPLE=%d+%d: every source generated and checked, compiled: job j of each case "
               "with j %% %d == %d (the rest are named \"generated only\")\n",
               t_sub.every, t_sub.rest, t_sub.every, t_sub.rest);
    fflush(stdout);
    return 0;
}

bool t_in_shard(size_t i)
{
    return i % (size_t)t_sub.n_shards == (size_t)(t_sub.shard - 1);
}

bool t_in_sample(size_t j)
{
    return j % (size_t)t_sub.every == (size_t)t_sub.rest;
}

bool t_sampling(void)
{
    return t_sub.every > 1;
}

bool t_in_check_sample(size_t i)
{
    static long every = -1;
    if (every < 0) {
        const char *e = getenv("HIDET_TEST_CHECK_EVERY");
        every = e && atol(e) > 1 ? atol(e) : 1;
    }
    return i % (size_t)every == 0;
}

tuner_tensor t_tensor(tuner_dtype dt, int rank, const long long *shape, int align)
{
    tuner_tensor t;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    for (int i = 0; i < rank; i++)
        t.shape[i] = shape[i];
    t.dtype = dt;
    t.align = align;
    return t;
}

static tuner_op base_op(tuner_op_kind k, tuner_dtype dt, long long rows, long long d, int align)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = k;
    long long shape[2] = {rows, d};
    op.inputs[0] = t_tensor(dt, 2, shape, align);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 2, shape, 16);
    op.epilogue.n = 0;
    for (int i = 0; i < TUNER_MAX_INPUTS; i++)
        op.prologue[i].n = 0;
    return op;
}

tuner_op t_softmax(tuner_dtype dt, long long rows, long long d, int align)
{
    return base_op(TUNER_OP_SOFTMAX, dt, rows, d, align);
}

tuner_op t_layernorm(tuner_dtype dt, long long rows, long long d, int align, bool affine)
{
    tuner_op op = base_op(TUNER_OP_LAYERNORM, dt, rows, d, align);
    op.attrs.norm.eps = 1e-5;
    if (affine) {
        long long s[1] = {d};
        op.inputs[1] = t_tensor(dt, 1, s, align);
        op.inputs[2] = t_tensor(dt, 1, s, align);
        op.n_inputs = op.n_anchor_inputs = 3;
    }
    return op;
}

tuner_op t_rmsnorm(tuner_dtype dt, long long rows, long long d, int align, bool gamma)
{
    tuner_op op = base_op(TUNER_OP_RMSNORM, dt, rows, d, align);
    op.attrs.norm.eps = 1e-6;
    if (gamma) {
        long long s[1] = {d};
        op.inputs[1] = t_tensor(dt, 1, s, align);
        op.n_inputs = op.n_anchor_inputs = 2;
    }
    return op;
}

tuner_op t_reduce(tuner_dtype dt, int rank, const long long *shape, int axis, tuner_reduce_kind k, bool keepdim,
                  int align)
{
    return t_reduce_axes(dt, rank, shape, axis, 1, k, keepdim, align);
}

tuner_op t_reduce_axes(tuner_dtype dt, int rank, const long long *shape, int axis, int naxes, tuner_reduce_kind k,
                       bool keepdim, int align)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_REDUCE;
    op.inputs[0] = t_tensor(dt, rank, shape, align);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.attrs.reduce.kind = k;
    op.attrs.reduce.axis = axis;
    op.attrs.reduce.naxes = naxes;
    op.attrs.reduce.keepdim = keepdim;
    long long os[TUNER_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < rank; d++) {
        if (d >= axis && d < axis + naxes) {
            if (keepdim)
                os[orank++] = 1;
        } else {
            os[orank++] = shape[d];
        }
    }
    op.output = t_tensor(dt, orank, os, 16);
    return op;
}

void t_add_epilogue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un)
{
    int idx = op->n_inputs++;
    op->inputs[idx] = t_tensor(op->inputs[0].dtype, rank, shape, 16);
    tuner_ew_step *s = &op->epilogue.steps[op->epilogue.n++];
    s->kind = bin;
    s->operand = idx;
    s = &op->epilogue.steps[op->epilogue.n++];
    s->kind = un;
    s->operand = -1;
    s->scalar = 0.5;
}

void t_add_prologue(tuner_op *op, tuner_ew_kind bin, int rank, const long long *shape, tuner_ew_kind un)
{
    int idx = op->n_inputs++;
    op->inputs[idx] = t_tensor(op->inputs[0].dtype, rank, shape, 16);
    tuner_ew_chain *ch = &op->prologue[0];
    ch->steps[ch->n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = 0.5};
    ch->steps[ch->n++] = (tuner_ew_step){.kind = bin, .operand = idx};
    ch->steps[ch->n++] = (tuner_ew_step){.kind = un, .operand = -1};
}

tuner_op t_elementwise(tuner_dtype dt, long long rows, long long d, int align)
{
    tuner_op op = base_op(TUNER_OP_ELEMENTWISE, dt, rows, d, align);
    long long s[1] = {d};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, s, TUNER_EW_GELU_TANH);
    tuner_ew_step *st = &op.epilogue.steps[op.epilogue.n++];
    st->kind = TUNER_EW_SCALE;
    st->operand = -1;
    st->scalar = 0.125;
    st = &op.epilogue.steps[op.epilogue.n++];
    st->kind = TUNER_EW_CAST;
    st->operand = -1;
    st->dtype = dt;
    return op;
}

tuner_op t_transpose3(tuner_dtype dt, long long a, long long b, long long c)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_COPY;
    long long in[3] = {a, b, c}, out[3] = {c, a, b};
    op.inputs[0] = t_tensor(dt, 3, in, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 3, out, 16);
    op.attrs.copy.strides[0] = 1;
    op.attrs.copy.strides[1] = b * c;
    op.attrs.copy.strides[2] = c;
    long long bias[1] = {b};
    t_add_epilogue(&op, TUNER_EW_ADD, 1, bias, TUNER_EW_RELU);
    return op;
}

tuner_op t_slice2(tuner_dtype dt, long long rows, long long d, long long start, long long n, long long step)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_COPY;
    long long in[2] = {rows, d}, out[2] = {n, (d + step - 1) / step};
    op.inputs[0] = t_tensor(dt, 2, in, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 2, out, 16);
    op.attrs.copy.offset = start * d;
    op.attrs.copy.strides[0] = d;
    op.attrs.copy.strides[1] = step;
    return op;
}

tuner_op t_pad2(tuner_dtype dt, long long rows, long long d, const long long lower[2], const long long upper[2],
                double value)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_COPY;
    long long in[2] = {rows, d}, out[2] = {rows + lower[0] + upper[0], d + lower[1] + upper[1]};
    op.inputs[0] = t_tensor(dt, 2, in, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 2, out, 16);
    op.attrs.copy.strides[0] = d;
    op.attrs.copy.strides[1] = 1;
    op.attrs.copy.padded = true;
    for (int k = 0; k < 2; k++) {
        op.attrs.copy.pad_lower[k] = lower[k];
        op.attrs.copy.pad_upper[k] = upper[k];
    }
    op.attrs.copy.pad_value = value;
    return op;
}

tuner_op t_expand2(tuner_dtype dt, long long n, long long d)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_COPY;
    long long in[2] = {1, d}, out[3] = {n, 1, d};
    op.inputs[0] = t_tensor(dt, 2, in, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 3, out, 16);
    op.attrs.copy.strides[2] = 1; /* a new leading axis and a size-1 axis read with stride 0 */
    return op;
}

tuner_op t_matmul(tuner_dtype dt, long long bt_a, long long bt_b, long long M, long long N, long long K, bool ta,
                  bool tb, int align)
{
    tuner_op op = {.kind = TUNER_OP_MATMUL, .n_inputs = 2, .n_anchor_inputs = 2};
    long long sa[3], sb[3];
    int ra = 0, rb = 0;
    if (bt_a)
        sa[ra++] = bt_a;
    sa[ra++] = ta ? K : M;
    sa[ra++] = ta ? M : K;
    if (bt_b)
        sb[rb++] = bt_b;
    sb[rb++] = tb ? N : K;
    sb[rb++] = tb ? K : N;
    op.inputs[0] = t_tensor(dt, ra, sa, align);
    op.inputs[1] = t_tensor(dt, rb, sb, align);
    const long long bt = bt_a ? bt_a : bt_b;
    long long so[3] = {bt, M, N};
    op.output = bt ? t_tensor(dt, 3, so, 16) : t_tensor(dt, 2, so + 1, 16);
    op.attrs.matmul.trans_a = ta;
    op.attrs.matmul.trans_b = tb;
    return op;
}

tuner_op t_fp8_matmul(tuner_dtype da, tuner_dtype db, tuner_dtype out, long long bt, long long M, long long N,
                      long long K, tuner_scale_kind sa, tuner_scale_kind sb, bool bias)
{
    tuner_op op = t_matmul(TUNER_F16, bt, 0, M, N, K, false, true, 16);
    op.inputs[0].dtype = da;
    op.inputs[1].dtype = db;
    op.output.dtype = op.attrs.matmul.out_dtype = out;
    op.attrs.matmul.scale_a = sa;
    op.attrs.matmul.scale_b = sb;
    op.attrs.matmul.fast_accum = sa != TUNER_SCALE_BLOCK;     int n = 2;
    if (sa == TUNER_SCALE_BLOCK) {         const long long as[2] = {M, (K + 127) / 128}, bs[2] = {(N + 127) / 128, (K + 127) / 128};
        op.inputs[n++] = t_tensor(TUNER_F32, 2, as, 16);
        op.inputs[n++] = t_tensor(TUNER_F32, 2, bs, 16);
    }
    if (sa != TUNER_SCALE_NONE && sa != TUNER_SCALE_BLOCK) {
        const long long len = sa == TUNER_SCALE_ROW ? M : 1;
        op.inputs[n++] = t_tensor(TUNER_F32, 1, &len, 16);
    }
    if (sb != TUNER_SCALE_NONE && sb != TUNER_SCALE_BLOCK) {
        const long long len = sb == TUNER_SCALE_COL ? N : 1;
        op.inputs[n++] = t_tensor(TUNER_F32, 1, &len, 16);
    }
    op.n_inputs = op.n_anchor_inputs = n;
    if (bias) {
        op.inputs[n] = t_tensor(TUNER_F16, 1, &N, 16);
        op.epilogue.steps[0] = (tuner_ew_step){.kind = TUNER_EW_ADD, .operand = n};
        op.epilogue.steps[1] = (tuner_ew_step){.kind = TUNER_EW_GELU_ERF, .operand = -1};
        op.epilogue.n = 2;
        op.n_inputs = n + 1;
    }
    return op;
}

tuner_op t_fp8_quantized(tuner_op op)
{
    const long long one = 1;
    op.inputs[op.n_inputs] = t_tensor(TUNER_F32, 1, &one, 16);
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_DIV, .operand = op.n_inputs++};
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = TUNER_F8E4M3};
    op.output.dtype = TUNER_F8E4M3;
    return op;
}

tuner_op t_fp8_mn(tuner_op op, bool a_mn, bool b_mn)
{
    for (int w = 0; w < 2; w++) {
        tuner_tensor *t = &op.inputs[w];
        if (!(w ? b_mn : a_mn))
            continue;
        const long long r = t->shape[t->rank - 2], c = t->shape[t->rank - 1];
        t->shape[t->rank - 2] = c;
        t->shape[t->rank - 1] = r;
        if (w)
            op.attrs.matmul.trans_b = false;
        else
            op.attrs.matmul.trans_a = true;
    }
    return op;
}

tuner_op t_fp8_quantized_amax(tuner_op op)
{
    op = t_fp8_quantized(op);
    const long long one = 1;
    op.inputs[op.n_inputs] = t_tensor(TUNER_F32, 1, &one, 16);
    op.epilogue.steps[op.epilogue.n - 1].amax = ++op.n_inputs;
    return op;
}

tuner_op t_fp8_promoted(tuner_op op)
{
    op.attrs.matmul.fast_accum = false;
    return op;
}

tuner_op t_conv_nhwc(tuner_dtype dt, long long n, long long h, long long w, long long c, long long k, int r,
                     int stride, int pad, int groups)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_CONV2D;
    long long xs[4] = {n, h, w, c}, ws[4] = {k, r, r, c / groups};
    long long p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - r) / stride + 1;
    long long os[4] = {n, p, q, k};
    op.inputs[0] = t_tensor(dt, 4, xs, 16);
    op.inputs[1] = t_tensor(dt, 4, ws, 16);
    op.n_inputs = op.n_anchor_inputs = 2;
    op.output = t_tensor(dt, 4, os, 16);
    op.attrs.conv2d.stride[0] = op.attrs.conv2d.stride[1] = stride;
    op.attrs.conv2d.pad[0] = op.attrs.conv2d.pad[1] = pad;
    op.attrs.conv2d.dilation[0] = op.attrs.conv2d.dilation[1] = 1;
    op.attrs.conv2d.groups = groups;
    return op;
}

tuner_op t_concat3(tuner_dtype dt, long long r, const long long d[3], long long c)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_CONCAT;
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        long long s[3] = {r, d[i], c};
        op.inputs[i] = t_tensor(dt, 3, s, 16);
        total += d[i];
    }
    op.n_inputs = op.n_anchor_inputs = 3;
    long long o[3] = {r, total, c};
    op.output = t_tensor(dt, 3, o, 16);
    op.attrs.concat.axis = 1;
    op.epilogue.steps[op.epilogue.n++] = (tuner_ew_step){.kind = TUNER_EW_SILU, .operand = -1};
    return op;
}

bool t_shared_launchable(unsigned long dynamic, unsigned long static_bytes)
{
    return dynamic > 48 * 1024 || dynamic + static_bytes <= 48 * 1024;
}

/* Bytes of static shared memory the PTX gives kernel `entry`: its own `.shared` arrays (NVRTC
 * names a kernel's __shared__ variable _ZZ<len><entry>E<len><name>) and the module's (unmangled
 * names). A declaration is "[indent].shared .align A .<type><bits> name[count];". */
static unsigned long ptx_static_shared(const char *ptx, const char *entry)
{
    char mine[96];
    snprintf(mine, sizeof(mine), "%zu%sE", strlen(entry), entry);
    unsigned long total = 0;
    for (const char *q = ptx; (q = strstr(q, ".shared .align ")) != NULL; q++) {
        /* A declaration starts its line: `.extern .shared` (dynamic memory) and instructions
         * (ld.shared, ...) do not. */
        const char *line = q;
        while (line > ptx && (line[-1] == ' ' || line[-1] == '\t'))
            line--;
        if (line > ptx && line[-1] != '\n')
            continue;
        const char *type = strchr(q + strlen(".shared .align "), ' '), *open = strchr(q, '['), *eol = strchr(q, '\n');
        if (!type || !open || (eol && open > eol) || type > open || type[1] != '.')
            continue;
        const char *name = strchr(type + 1, ' ');
        if (!name || name > open)
            continue;
        if (!strncmp(name + 1, "_ZZ", 3)) {
            const char *own = strstr(name, mine);
            if (!own || own > open)
                continue;
        }
        const unsigned long bits = strtoul(type + 3, NULL, 10), count = strtoul(open + 1, NULL, 10);
        total += count * (bits / 8);
    }
    return total;
}

bool t_compile_check(const char *what, const char *source, const tuner_target *t, const tuner_program *p,
                     double *ret_ms)
{
    tuner_binary *b = NULL;
    char *err = NULL;
    int r = tuner_compile(source, t, &b, &err);
    if (r < 0) {
        fprintf(stderr, "%s: tuner_compile failed (%d): %s\n", what, r, err ? err : "");
        if (getenv("HIDET_TEST_DUMP"))
            fprintf(stderr, "%s\n", source);
        free(err);
        return false;
    }
    bool ok = b->ptx_len > 0 && b->cubin_len > 0;
    /* Every launch names an entry point of the PTX, and asks for more than 48 KiB of dynamic
     * shared memory where its static arrays would push it past 48 KiB: a launcher raises the
     * limit only above 48 KiB (docs/api.md, tuner__dynamic_shared). */
    for (int k = 0; p && k < p->n_kernels; k++) {
        char needle[96];
        snprintf(needle, sizeof(needle), ".entry %s(", p->kernels[k].name);
        if (!strstr(b->ptx, needle)) {
            fprintf(stderr, "%s: no entry %s in the PTX\n", what, p->kernels[k].name);
            ok = false;
        }
        const unsigned long dyn = p->kernels[k].shared_bytes, stat = ptx_static_shared(b->ptx, p->kernels[k].name);
        if (!t_shared_launchable(dyn, stat)) {
            fprintf(stderr, "%s: %s asks for %lu bytes of dynamic shared memory beside %lu static: "
                            "a launcher would not raise the limit\n", what, p->kernels[k].name, dyn, stat);
            ok = false;
        }
    }
    /* tuner_compile's cubin is ptxas's work already: NVRTC assembles the PTX for the real
     * target in-process (a rejected PTX fails the compile). The toolkit's ptxas assembles the
     * same PTX again for the first program of each target a test compiles, which shows that
     * the two agree; doing it for every program doubled the assembly time of the suite. */
    static _Atomic unsigned char again[256];
    if (again[tuner_target_id_of(t) & 255]++) {
        if (ret_ms)
            *ret_ms = b->compile_ms;
        tuner_binary_free(b);
        return ok;
    }
    char arch[16], *out = NULL;
    snprintf(arch, sizeof(arch), "sm_%d%s", t->sm, t->arch_specific ? "a" : "");
    int rc = t_ptxas(b->ptx, arch, "", &out);
    if (rc != 0) {
        fprintf(stderr, "%s: ptxas -arch=%s rejected the PTX (rc %d):\n%s\n", what, arch, rc, out ? out : "");
        ok = false;
    }
    free(out);
    if (ret_ms)
        *ret_ms = b->compile_ms;
    tuner_binary_free(b);
    return ok;
}

/* Runs cmd (through the shell); its exit status (-1 when it could not run or did not exit) and,
 * if out, what it printed on stdout (malloc'd; NULL when out of memory). */
static int run_capture(const char *cmd, char **out)
{
    if (out)
        *out = NULL;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 4096, len = 0, r;
    char *buf = malloc(cap);
    char sink[4096];
    /* Read to the end even without a buffer: the child must not block on a full pipe. */
    while ((r = buf ? fread(buf + len, 1, cap - len - 1, p) : fread(sink, 1, sizeof(sink), p)) > 0) {
        if (!buf)
            continue;
        len += r;
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                continue;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define T_PTXAS "/usr/local/cuda/bin/ptxas"

/* The toolkit's ptxas --version, read once: part of every cache key, so that a result of one
 * ptxas is never taken for another's. NULL when it cannot be read: then nothing is cached. */
static pthread_once_t ptxas_once = PTHREAD_ONCE_INIT;
static char *ptxas_version;

static void ptxas_version_init(void)
{
    char *v = NULL;
    if (run_capture(T_PTXAS " --version 2>&1", &v) == 0 && v && strstr(v, "ptxas"))
        ptxas_version = v;
    else
        free(v);
}

int t_ptxas(const char *ptx, const char *arch, const char *opts, char **out)
{
    if (out)
        *out = NULL;
    /* arch and opts go into a shell command: only what ptxas's options are made of. */
    for (const char *c = arch; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_", *c))
            return -1;
    for (const char *c = opts; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=,. ", *c))
            return -1;
    char key[65];
    bool cached = false;
    if (tuner__compile_cache_dir()) {
        pthread_once(&ptxas_once, ptxas_version_init);
        if (ptxas_version) {
            const char *parts[] = {"ptxas", ptxas_version, arch, opts, ptx};
            tuner__compile_cache_tool_key(parts, 5, key);
            cached = true;
            char *text = NULL;
            if (tuner__compile_cache_get_tool(key, &text, NULL) == 1) {
                if (out)
                    *out = text;
                else
                    free(text);
                return 0;
            }
        }
    }
    char path[] = "/tmp/hidet-ptxXXXXXX.ptx";
    int fd = mkstemps(path, 4);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return -1;
    }
    bool written = fputs(ptx, f) >= 0;
    if (fclose(f) != 0 || !written) {
        unlink(path);
        return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof(cmd), T_PTXAS " -arch=%s %s -o /dev/null %s 2>&1", arch, opts, path);
    char *text = NULL;
    int rc = run_capture(cmd, &text);
    unlink(path);
    /* Only an acceptance is kept: a rejection runs ptxas again next time, and prints its
     * messages from the run that made them. */
    if (rc == 0 && cached && text)
        tuner__compile_cache_put_tool(key, text, strlen(text));
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double t_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

tuner_op t_gather(tuner_dtype dt, int xr, const long long *xs, int axis, tuner_dtype it, int ir, const long long *is)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_GATHER;
    op.attrs.gather.axis = axis;
    op.inputs[0] = t_tensor(dt, xr, xs, 16);
    op.inputs[1] = t_tensor(it, ir, is, 16);
    op.n_inputs = op.n_anchor_inputs = 2;
    long long os[TUNER_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++)
        os[r++] = xs[d];
    for (int d = 0; d < ir; d++)
        os[r++] = is[d];
    for (int d = axis + 1; d < xr; d++)
        os[r++] = xs[d];
    op.output = t_tensor(dt, r, os, 16);
    return op;
}

tuner_op t_int_cast(tuner_dtype it, tuner_dtype dt, int rank, const long long *shape)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_ELEMENTWISE;
    op.inputs[0] = t_tensor(it, rank, shape, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, rank, shape, 16);
    tuner_ew_chain *c = &op.epilogue;
    c->steps[c->n++] = (tuner_ew_step){.kind = TUNER_EW_CAST, .operand = -1, .dtype = dt};
    c->steps[c->n++] = (tuner_ew_step){.kind = TUNER_EW_NEG, .operand = -1};
    c->steps[c->n++] = (tuner_ew_step){.kind = TUNER_EW_SHIFT, .operand = -1, .scalar = 1.0};
    c->steps[c->n++] = (tuner_ew_step){.kind = TUNER_EW_SCALE, .operand = -1, .scalar = -10000.0};
    return op;
}

tuner_op t_pool(tuner_dtype dt, tuner_pool_kind kind, bool nchw, long long n, long long c, long long h,
                long long w, const int *k, int s, int pad, int d, bool ceil, long long P, long long Q)
{
    tuner_op op;
    memset(&op, 0, sizeof(op));
    op.kind = TUNER_OP_POOL2D;
    op.attrs.pool2d.kind = kind;
    op.attrs.pool2d.nchw = nchw;
    if (k) {
        op.attrs.pool2d.kernel[0] = k[0], op.attrs.pool2d.kernel[1] = k[1];
        op.attrs.pool2d.stride[0] = op.attrs.pool2d.stride[1] = s;
        op.attrs.pool2d.pad[0] = op.attrs.pool2d.pad[1] = pad;
        op.attrs.pool2d.dilation[0] = op.attrs.pool2d.dilation[1] = d;
        op.attrs.pool2d.ceil_mode = ceil;
        op.attrs.pool2d.count_include_pad = kind == TUNER_POOL_AVG;
        P = tuner_pool_out_size(h, k[0], s, pad, d, ceil);
        Q = tuner_pool_out_size(w, k[1], s, pad, d, ceil);
    }
    long long xs[4] = {n, h, w, c}, os[4] = {n, P, Q, c};
    if (nchw) {
        xs[1] = c, xs[2] = h, xs[3] = w;
        os[1] = c, os[2] = P, os[3] = Q;
    }
    op.inputs[0] = t_tensor(dt, 4, xs, 16);
    op.n_inputs = op.n_anchor_inputs = 1;
    op.output = t_tensor(dt, 4, os, 16);
    return op;
}
