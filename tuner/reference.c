/* tuner/reference.c - verification references for the core ops (softmax, layernorm, rmsnorm,
 * reduce, elementwise, copy, concat, pool2d, gather).
 *
 * Deliberately naive: one thread per output row (row ops) or per output element (reduce,
 * elementwise), sequential loops, double-precision accumulation of sums (more accurate than any
 * candidate's fp32 tree, so candidate error is measured against something better than itself),
 * an F32 output buffer, and the epilogue emitted by the same chain emitter with the same
 * broadcast rules as the candidates. Nothing is vectorised and no thread cooperates with another.
 */
#include "tuner/core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One thread per work item, in blocks of 128. */
static void one_launch(tuner_program *p, const tuner_op *op, const char *name, long long threads)
{
    tuner__one_launch(p, op, name, (unsigned)((threads + 127) / 128), 128);
}

static void emit_eps(tuner_sb *sb, const tuner_op *op)
{
    tuner__emit_float(sb, op->attrs.norm.eps);
}

int tuner__core_reference(const tuner_op *op, const tuner_target *t, tuner_program *p, char **err)
{
    if (!op || !t || !p)
        return -EINVAL;
    if (op->n_inputs < 1 || op->inputs[0].rank < 1 || !tuner__prologue_input0_only(op)) {
        *err = strdup("reference: unsupported op (no input, or a prologue on a core op's parameter input)");
        return -EINVAL;
    }
    const tuner_tensor *x = &op->inputs[0];
    const tuner_tensor *out = &op->output;
    const long long out_last = out->rank >= 1 ? out->shape[out->rank - 1] : 1;
    tuner_sb sb;
    tuner_sb_init(&sb);
    tuner__prelude_reference(&sb, t->sm);
    tuner_sb_puts(&sb, "extern \"C\" __global__ void hd_reference(");
    tuner__emit_params(&sb, op, TUNER_F32);
    tuner_sb_puts(&sb, ")\n{\nconst long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    /* hd_x(i): element i of input 0 as a float, after its prologue. */
    tuner__emit_input0_prologue(&sb, op);
    tuner_sb_printf(&sb, "auto hd_x = [&](long long i) -> float { return %s; };\n",
                    op->prologue[0].n ? "hd_pro0(hd_f32(in0[i]), i)" : "hd_f32(in0[i])");

    switch (op->kind) {
    case TUNER_OP_SOFTMAX:
    case TUNER_OP_LAYERNORM:
    case TUNER_OP_RMSNORM: {
        const long long D = x->shape[x->rank - 1];
        const long long R = tuner_tensor_numel(x) / D;
        tuner_sb_printf(&sb, "const long long row = tid;\nif (row >= %lldLL) return;\n", R);
        tuner_sb_printf(&sb, "const long long base = row * %lldLL;\n", D);
        if (op->kind == TUNER_OP_SOFTMAX) {
            tuner_sb_printf(&sb, "float mx = -HD_INF;\nfor (long long c = 0; c < %lldLL; c++) mx = fmaxf(mx, "
                                 "hd_x(base + c));\n",
                            D);
            tuner_sb_printf(&sb, "double sum = 0.0;\nfor (long long c = 0; c < %lldLL; c++) sum += (double)expf(hd_x(base + c) - mx);\n", D);
        } else if (op->kind == TUNER_OP_LAYERNORM) {
            tuner_sb_printf(&sb, "double s = 0.0;\nfor (long long c = 0; c < %lldLL; c++) s += (double)hd_x(base + c);\n", D);
            tuner_sb_printf(&sb, "const double meand = s / %lld.0;\ndouble q = 0.0;\n", D);
            tuner_sb_printf(&sb, "for (long long c = 0; c < %lldLL; c++) { const double d = (double)hd_x(base + c) - meand; q += d * d; }\n", D);
            tuner_sb_printf(&sb, "const float mean = (float)meand;\nconst float rstd = 1.0f / sqrtf((float)(q / %lld.0) + ", D);
            emit_eps(&sb, op);
            tuner_sb_puts(&sb, ");\n");
        } else {
            tuner_sb_printf(&sb, "double q = 0.0;\nfor (long long c = 0; c < %lldLL; c++) { const double v = hd_x(base + c); q += v * v; }\n", D);
            tuner_sb_printf(&sb, "const float rstd = 1.0f / sqrtf((float)(q / %lld.0) + ", D);
            emit_eps(&sb, op);
            tuner_sb_puts(&sb, ");\n");
        }
        tuner_sb_printf(&sb, "for (long long col = 0; col < %lldLL; col++) {\nfloat o = hd_x(base + col);\n", D);
        if (op->kind == TUNER_OP_SOFTMAX && op->attrs.softmax.log) /* never the log of a softmax */
            tuner_sb_puts(&sb, "o = (float)((double)o - (double)mx - log(sum));\n");
        else if (op->kind == TUNER_OP_SOFTMAX)
            tuner_sb_puts(&sb, "o = expf(o - mx) / (float)sum;\n");
        else if (op->kind == TUNER_OP_LAYERNORM) {
            tuner_sb_puts(&sb, "o = (o - mean) * rstd;\n");
            if (op->n_anchor_inputs == 3)
                tuner_sb_puts(&sb, "o = o * hd_f32(in1[col]) + hd_f32(in2[col]);\n");
        } else {
            tuner_sb_puts(&sb, "o = o * rstd;\n");
            if (op->n_anchor_inputs == 2)
                tuner_sb_puts(&sb, "o = o * hd_f32(in1[col]);\n");
        }
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "o", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[base + col] = o;\n}\n");
        one_launch(p, op, "hd_reference", R);
        break;
    }
    case TUNER_OP_REDUCE: {
        const int ax = op->attrs.reduce.axis;
        if (ax < 0 || ax + (op->attrs.reduce.naxes > 1 ? op->attrs.reduce.naxes : 1) > x->rank) {
            tuner_sb_free(&sb);
            *err = strdup("reference: reduce axis out of range");
            return -EINVAL;
        }
        int64_t O, A, I; /* consecutive reduced axes: one axis A of the view [O, A, I] */
        tuner_reduce_dims(op, &O, &A, &I);
        const bool rmax = op->attrs.reduce.kind == TUNER_REDUCE_MAX;
        tuner_sb_printf(&sb, "if (tid >= %lldLL) return;\n", (long long)(O * I));
        tuner_sb_printf(&sb, "const long long o = tid / %lldLL, i = tid %% %lldLL;\n", (long long)I, (long long)I);
        tuner_sb_printf(&sb, "double acc = %s;\n", rmax ? "-(double)HD_INF" : "0.0");
        tuner_sb_printf(&sb, "for (long long a = 0; a < %lldLL; a++) { const double v = hd_x((o * %lldLL + a) * %lldLL + i); "
                             "acc = %s; }\n",
                        (long long)A, (long long)A, (long long)I, rmax ? "(v > acc ? v : acc)" : "acc + v");
        tuner_sb_puts(&sb, "float o_ = (float)acc;\n");
        if (op->attrs.reduce.kind == TUNER_REDUCE_MEAN)
            tuner_sb_printf(&sb, "o_ = (float)(acc / %lld.0);\n", (long long)A);
        tuner_sb_printf(&sb, "const long long orow = tid / %lldLL, ocol = tid %% %lldLL;\n", out_last, out_last);
        tuner__bcast_ctx ec = {op, "orow", "ocol"};
        tuner__emit_chain(&sb, op, &op->epilogue, "o_", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[tid] = o_;\n");
        one_launch(p, op, "hd_reference", (long long)(O * I));
        break;
    }
    case TUNER_OP_ELEMENTWISE: {
        const long long n = tuner_tensor_numel(out);
        tuner_sb_printf(&sb, "if (tid >= %lldLL) return;\n", n);
        tuner_sb_printf(&sb, "const long long row = tid / %lldLL, col = tid %% %lldLL;\n", out_last, out_last);
        char *off = tuner__bcast_offset(x, out, "row", "col");
        if (!off) {
            tuner_sb_free(&sb);
            return -ENOMEM;
        }
        tuner_sb_printf(&sb, "float v = hd_x(%s);\n", off);
        free(off);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[tid] = v;\n");
        one_launch(p, op, "hd_reference", n);
        break;
    }
    case TUNER_OP_COPY:
    case TUNER_OP_CONCAT: {
        /* The output coordinate by a loop over the dims (not the candidates' unrolled div/mod),
         * then the source element: strides and offset for a copy, the joined input's range and
         * its own dense strides for a concat. */
        const long long n = tuner_tensor_numel(out);
        tuner_sb_printf(&sb, "if (tid >= %lldLL) return;\n", n);
        tuner_sb_printf(&sb, "const long long shp[%d] = {", out->rank);
        for (int d = 0; d < out->rank; d++)
            tuner_sb_printf(&sb, "%s%lldLL", d ? ", " : "", (long long)out->shape[d]);
        tuner_sb_printf(&sb, "};\nlong long crd[%d];\nlong long rem = tid;\n", out->rank);
        tuner_sb_printf(&sb, "for (int d = %d; d >= 0; d--) { crd[d] = rem %% shp[d]; rem /= shp[d]; }\n",
                        out->rank - 1);
        if (op->kind == TUNER_OP_COPY) {
            tuner_sb_printf(&sb, "const long long str[%d] = {", out->rank);
            for (int d = 0; d < out->rank; d++)
                tuner_sb_printf(&sb, "%s%lldLL", d ? ", " : "", (long long)op->attrs.copy.strides[d]);
            tuner_sb_printf(&sb, "};\nlong long src = %lldLL;\n", (long long)op->attrs.copy.offset);
            /* Padded: coordinates outside [lower, shape - upper) on any axis hold the value. */
            tuner_sb_printf(&sb, "const long long lo[%d] = {", out->rank);
            for (int d = 0; d < out->rank; d++)
                tuner_sb_printf(&sb, "%s%lldLL", d ? ", " : "", (long long)op->attrs.copy.pad_lower[d]);
            tuner_sb_printf(&sb, "};\nconst long long hi[%d] = {", out->rank);
            for (int d = 0; d < out->rank; d++)
                tuner_sb_printf(&sb, "%s%lldLL", d ? ", " : "",
                                (long long)(out->shape[d] - op->attrs.copy.pad_upper[d]));
            tuner_sb_puts(&sb, "};\nbool inside = true;\n");
            tuner_sb_printf(&sb, "for (int d = 0; d < %d; d++) { inside = inside && crd[d] >= lo[d] && crd[d] < hi[d]; "
                                 "src += (crd[d] - lo[d]) * str[d]; }\n",
                            out->rank);
            tuner_sb_puts(&sb, "float v = ");
            tuner__emit_float(&sb, op->attrs.copy.pad_value);
            tuner_sb_puts(&sb, ";\nif (inside) v = hd_x(src);\n");
        } else {
            const int ax = op->attrs.concat.axis;
            tuner_sb_puts(&sb, "float v = 0.0f;\nlong long base = 0;\n");
            for (int j = 0; j < op->n_inputs; j++) {
                const tuner_tensor *in = &op->inputs[j];
                tuner_sb_printf(&sb, "if (crd[%d] >= base && crd[%d] < base + %lldLL) {\n", ax, ax,
                                (long long)in->shape[ax]);
                tuner_sb_puts(&sb, "long long src = 0;\n");
                for (int d = 0; d < in->rank; d++)
                    tuner_sb_printf(&sb, "src = src * %lldLL + (crd[%d]%s);\n", (long long)in->shape[d], d,
                                    d == ax ? " - base" : "");
                tuner_sb_printf(&sb, "v = hd_f32(in%d[src]);\n}\nbase += %lldLL;\n", j, (long long)in->shape[ax]);
            }
        }
        tuner_sb_printf(&sb, "const long long row = tid / %lldLL, col = tid %% %lldLL;\n", out_last, out_last);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[tid] = v;\n");
        one_launch(p, op, "hd_reference", n);
        break;
    }
    case TUNER_OP_POOL2D: {
        /* One thread per output element, PyTorch's CPU kernels step by step: the coordinate from
         * the layout, the window's start and end (clipped to the padded input first, for avg's
         * divisor, then to the input), a double sum or a NaN-keeping max. */
        const bool nchw = op->attrs.pool2d.nchw;
        const long long N = x->shape[0], C = x->shape[nchw ? 1 : 3], H = x->shape[nchw ? 2 : 1],
                        W = x->shape[nchw ? 3 : 2];
        const long long P = out->shape[nchw ? 2 : 1], Q = out->shape[nchw ? 3 : 2];
        const int *k = op->attrs.pool2d.kernel, *st = op->attrs.pool2d.stride, *pd = op->attrs.pool2d.pad,
                  *dl = op->attrs.pool2d.dilation;
        const tuner_pool_kind kind = op->attrs.pool2d.kind;
        tuner_sb_printf(&sb, "if (tid >= %lldLL) return;\nlong long n, c, p, q;\n", N * C * P * Q);
        if (nchw)
            tuner_sb_printf(&sb, "q = tid %% %lldLL; p = (tid / %lldLL) %% %lldLL; c = (tid / (%lldLL * %lldLL)) %% %lldLL; "
                                 "n = tid / (%lldLL * %lldLL * %lldLL);\n",
                            Q, Q, P, Q, P, C, Q, P, C);
        else
            tuner_sb_printf(&sb, "c = tid %% %lldLL; q = (tid / %lldLL) %% %lldLL; p = (tid / (%lldLL * %lldLL)) %% %lldLL; "
                                 "n = tid / (%lldLL * %lldLL * %lldLL);\n",
                            C, C, Q, C, Q, P, C, Q, P);
        if (nchw)
            tuner_sb_printf(&sb, "auto at = [&](long long h, long long w) { return hd_x(((n * %lldLL + c) * %lldLL + h) * %lldLL + w); };\n",
                            C, H, W);
        else
            tuner_sb_printf(&sb, "auto at = [&](long long h, long long w) { return hd_x(((n * %lldLL + h) * %lldLL + w) * %lldLL + c); };\n",
                            H, W, C);
        if (kind == TUNER_POOL_ADAPTIVE_AVG) {
            tuner_sb_printf(&sb, "const long long hstart = (long long)floor((double)(p * %lldLL) / %lld.0);\n", H, P);
            tuner_sb_printf(&sb, "const long long hend = (long long)ceil((double)((p + 1) * %lldLL) / %lld.0);\n", H, P);
            tuner_sb_printf(&sb, "const long long wstart = (long long)floor((double)(q * %lldLL) / %lld.0);\n", W, Q);
            tuner_sb_printf(&sb, "const long long wend = (long long)ceil((double)((q + 1) * %lldLL) / %lld.0);\n", W, Q);
            tuner_sb_puts(&sb, "double sum = 0.0;\nfor (long long h = hstart; h < hend; h++) for (long long w = wstart; w < wend; w++) "
                               "sum += (double)at(h, w);\n");
            tuner_sb_puts(&sb, "float v = (float)(sum / (double)((hend - hstart) * (wend - wstart)));\n");
        } else if (kind == TUNER_POOL_MAX) {
            tuner_sb_printf(&sb, "const long long hstart = p * %d - %d, wstart = q * %d - %d;\n", st[0], pd[0], st[1], pd[1]);
            tuner_sb_puts(&sb, "float v = -HD_INF;\n");
            tuner_sb_printf(&sb, "for (int i = 0; i < %d; i++) for (int j = 0; j < %d; j++) {\n", k[0], k[1]);
            tuner_sb_printf(&sb, "const long long h = hstart + i * %d, w = wstart + j * %d;\n", dl[0], dl[1]);
            tuner_sb_printf(&sb, "if (h < 0 || h >= %lldLL || w < 0 || w >= %lldLL) continue;\n", H, W);
            tuner_sb_puts(&sb, "const float e = at(h, w);\nif (e > v || isnan(e)) v = e;\n}\n");
        } else {
            tuner_sb_printf(&sb, "long long hstart = p * %d - %d, wstart = q * %d - %d;\n", st[0], pd[0], st[1], pd[1]);
            tuner_sb_printf(&sb, "long long hend = hstart + %d, wend = wstart + %d;\n", k[0], k[1]);
            tuner_sb_printf(&sb, "if (hend > %lldLL) hend = %lldLL;\nif (wend > %lldLL) wend = %lldLL;\n", H + pd[0],
                            H + pd[0], W + pd[1], W + pd[1]);
            tuner_sb_puts(&sb, "const long long pool_size = (hend - hstart) * (wend - wstart);\n");
            tuner_sb_printf(&sb, "if (hstart < 0) hstart = 0;\nif (wstart < 0) wstart = 0;\n"
                                 "if (hend > %lldLL) hend = %lldLL;\nif (wend > %lldLL) wend = %lldLL;\n",
                            H, H, W, W);
            tuner_sb_puts(&sb, "double sum = 0.0;\nfor (long long h = hstart; h < hend; h++) for (long long w = wstart; w < wend; w++) "
                               "sum += (double)at(h, w);\n");
            tuner_sb_printf(&sb, "const long long divisor = %s;\n",
                            op->attrs.pool2d.count_include_pad ? "pool_size" : "(hend - hstart) * (wend - wstart)");
            tuner_sb_puts(&sb, "float v = (float)(sum / (double)divisor);\n");
        }
        tuner_sb_printf(&sb, "const long long row = tid / %lldLL, col = tid %% %lldLL;\n", out_last, out_last);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[tid] = v;\n");
        one_launch(p, op, "hd_reference", N * C * P * Q);
        break;
    }
    case TUNER_OP_GATHER: {
        /* One thread per output element: its coordinate (o, m, i) in [O, M, I], the id, the row
         * it selects as tuner_gather_row says (negative from the end, out of range: nothing read,
         * 0), then the epilogue. */
        const tuner_tensor *ix = &op->inputs[1];
        const int axis = op->attrs.gather.axis;
        long long I = 1;
        const long long N = x->shape[axis], M = tuner_tensor_numel(ix), n = tuner_tensor_numel(out);
        for (int d = axis + 1; d < x->rank; d++)
            I *= x->shape[d];
        tuner_sb_printf(&sb, "if (tid >= %lldLL) return;\n", n);
        tuner_sb_printf(&sb, "const long long i = tid %% %lldLL, m = (tid / %lldLL) %% %lldLL, o = tid / (%lldLL * %lldLL);\n",
                        I, I, M, I, M);
        tuner_sb_puts(&sb, "const long long id = (long long)in1[m];\n");
        tuner_sb_printf(&sb, "const long long r = id < 0 ? id + %lldLL : id;\n", N);
        tuner_sb_printf(&sb, "float v = 0.0f;\nif (r >= 0 && r < %lldLL) v = hd_x((o * %lldLL + r) * %lldLL + i);\n", N, N, I);
        tuner_sb_printf(&sb, "const long long row = tid / %lldLL, col = tid %% %lldLL;\n", out_last, out_last);
        tuner__bcast_ctx ec = {op, "row", "col"};
        tuner__emit_chain(&sb, op, &op->epilogue, "v", tuner__bcast_load, &ec);
        tuner_sb_puts(&sb, "out[tid] = v;\n");
        one_launch(p, op, "hd_reference", n);
        break;
    }
    default:
        tuner_sb_free(&sb);
        *err = strdup("reference: not a core op");
        return -EINVAL;
    }
    tuner_sb_puts(&sb, "}\n");
    p->source = tuner_sb_take(&sb);
    p->output_dtype = TUNER_F32;
    return p->source ? 0 : -ENOMEM;
}
