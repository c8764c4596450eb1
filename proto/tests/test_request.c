/* Unit tests of proto/request.c: every op, every error class (status, code, field), canonical
 * JSON stability, fusion stripping, and the committed examples on sm_80 and sm_90.
 * Usage: test_request EXAMPLES_DIR */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto/request.h"

#include "tests/check.h"
#include "tests/slurp.h"

static int parse(const char *body, proto_kernel_request *req, proto_error *err)
{
    memset(err, 0, sizeof(*err));
    return proto_kernel_request_parse(body, strlen(body), req, err);
}

static proto_kernel_request ok(const char *body, int line)
{
    proto_kernel_request req;
    proto_error err;
    memset(&req, 0, sizeof(req));
    if (parse(body, &req, &err) != 0) {
        fprintf(stderr, "line %d: expected success, got %d %s field=%s: %s\n  body: %s\n", line,
                err.status, err.code, err.field, err.message, body);
        failures++;
    }
    return req;
}
#define OK(body) ok(body, __LINE__)

static void bad(const char *body, int status, const char *code, const char *field, int line)
{
    proto_kernel_request req;
    proto_error err;
    memset(&req, 0x5a, sizeof(req));
    unsigned char before = ((unsigned char *)&req)[100];
    int r = parse(body, &req, &err);
    if (r != -EINVAL || err.status != status || strcmp(err.code, code) != 0 ||
        strcmp(err.field, field) != 0) {
        fprintf(stderr,
                "line %d: expected %d %s field=\"%s\", got r=%d %d %s field=\"%s\" (%s)\n"
                "  body: %s\n",
                line, status, code, field, r, err.status, err.code, err.field, err.message, body);
        failures++;
    }
    if (r == 0 || err.message[0] == '\0') {
        fprintf(stderr, "line %d: no message\n", line);
        failures++;
    }
    /* Outputs are untouched on failure. */
    if (((unsigned char *)&req)[100] != before) {
        fprintf(stderr, "line %d: output modified on failure\n", line);
        failures++;
    }
}
#define BAD(body, status, code, field) bad(body, status, code, field, __LINE__)

#define MM_IN "\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},{\"shape\":[64,256],\"dtype\":\"f16\"}]"

static void test_ops(void)
{
    proto_kernel_request r;

    r = OK("{\"op\":\"matmul\"," MM_IN "}");
    CHECK(r.op.kind == TUNER_OP_MATMUL && r.op.n_inputs == 2 && r.op.n_anchor_inputs == 2);
    CHECK(r.op.output.rank == 2 && r.op.output.shape[0] == 128 && r.op.output.shape[1] == 256);
    CHECK(r.op.output.dtype == TUNER_F16);
    CHECK(r.opt.target.sm == 90 && !r.opt.target.arch_specific);
    CHECK(r.opt.tune == TUNER_TUNE_MODEL && !r.opt.tune_given && r.opt.wait && r.opt.priority == PROTO_PRIO_NORMAL);
    CHECK(r.opt.budget_s == 0 && r.opt.budget_candidates == 0 && !r.opt.retune);
    CHECK(r.op.inputs[0].align == 16);
    r = OK("{\"op\":\"matmul\"," MM_IN ",\"retune\":true}");
    CHECK(r.opt.retune);
    BAD("{\"op\":\"matmul\"," MM_IN ",\"retune\":1}", 400, "invalid_field", "retune");
    r = OK("{\"op\":\"matmul\"," MM_IN "}");
    CHECK(!r.op.attrs.matmul.allow_tf32); /* normalised: only meaningful for f32 */

    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,128],\"dtype\":\"float32\"},"
           "{\"shape\":[256,64],\"dtype\":\"f32\"}],\"attrs\":{\"trans_a\":true,\"trans_b\":true},"
           "\"arch\":\"sm_90a\",\"tune\":\"measure\",\"wait\":false,\"priority\":\"blocking\","
           "\"budget\":{\"seconds\":30,\"candidates\":64}}");
    CHECK(r.op.output.shape[0] == 128 && r.op.output.shape[1] == 256);
    CHECK(r.op.attrs.matmul.allow_tf32 && r.op.attrs.matmul.trans_a && r.op.attrs.matmul.trans_b);
    CHECK(r.opt.target.sm == 90 && r.opt.target.arch_specific);
    CHECK(r.opt.tune == TUNER_TUNE_MEASURE && r.opt.tune_given && !r.opt.wait && r.opt.priority == PROTO_PRIO_BLOCKING);
    CHECK(r.opt.budget_s == 30 && r.opt.budget_candidates == 64);

    /* Batched, with a rank-2 B broadcast over the batch. */
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,128,64],\"dtype\":\"bf16\"},"
           "{\"shape\":[64,32],\"dtype\":\"bfloat16\"}]}");
    CHECK(r.op.output.rank == 3 && r.op.output.shape[0] == 8 && r.op.output.shape[2] == 32);
    CHECK(r.op.output.dtype == TUNER_BF16);
    /* fp16 and fp32 are spellings of f16 and f32 as float16 and half are. */
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,16],\"dtype\":\"fp16\"},"
           "{\"shape\":[16,32],\"dtype\":\"half\"}],\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"fp32\"}]}");
    CHECK(r.op.inputs[0].dtype == TUNER_F16 && r.op.output.dtype == TUNER_F32);
    {
        /* An unknown step names the steps there are. */
        proto_kernel_request req;
        proto_error err;
        CHECK(parse("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
                    "\"epilogue\":[{\"op\":\"gelu2\"}]}", &req, &err) == -EINVAL);
        CHECK(err.status == 422 && strcmp(err.field, "epilogue[0].op") == 0 &&
              strstr(err.message, "(steps: bias, add, sub,") && strstr(err.message, "gelu, silu") &&
              !strstr(err.message, "gelu_tanh") && strstr(err.message, "pow, log, eq, ne, lt, le, gt, ge, where, masked_fill, relu6, hardtanh)"));
    }

    /* The agreed example: prologue, bias, gelu tanh. */
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
           "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"trans_a\":false,\"trans_b\":false},"
           "\"prologue\":[{\"input\":0,\"op\":\"scale\",\"value\":0.5}],"
           "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"gelu\",\"approximate\":\"tanh\"}],"
           "\"arch\":\"sm_90\",\"tune\":\"none\",\"wait\":true,\"priority\":\"normal\","
           "\"budget\":{\"seconds\":30,\"candidates\":64}}");
    CHECK(r.op.n_inputs == 3 && r.op.n_anchor_inputs == 2);
    CHECK(r.op.prologue[0].n == 1 && r.op.prologue[0].steps[0].kind == TUNER_EW_SCALE);
    CHECK(r.op.prologue[0].steps[0].scalar == 0.5 && r.op.prologue[1].n == 0);
    CHECK(r.op.epilogue.n == 2 && r.op.epilogue.steps[0].kind == TUNER_EW_ADD);
    CHECK(r.op.epilogue.steps[0].operand == 2);
    CHECK(r.op.epilogue.steps[1].kind == TUNER_EW_GELU_TANH);
    CHECK(r.opt.tune == TUNER_TUNE_NONE);

    /* Epilogue cast changes the output dtype. */
    r = OK("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"relu\"},"
           "{\"op\":\"cast\",\"dtype\":\"float32\"}]}");
    CHECK(r.op.output.dtype == TUNER_F32 && r.op.epilogue.steps[1].dtype == TUNER_F32);

    /* conv2d NHWC and NCHW, with stride/padding/dilation pairs. */
    r = OK("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,56,56,64],\"dtype\":\"f16\"},"
           "{\"shape\":[128,3,3,64],\"dtype\":\"f16\"}],\"attrs\":{\"stride\":2,\"padding\":1}}");
    CHECK(r.op.output.rank == 4 && r.op.output.shape[0] == 1 && r.op.output.shape[1] == 28);
    CHECK(r.op.output.shape[2] == 28 && r.op.output.shape[3] == 128);
    CHECK(r.op.attrs.conv2d.groups == 1 && !r.op.attrs.conv2d.nchw);
    CHECK(r.op.attrs.conv2d.dilation[0] == 1 && r.op.attrs.conv2d.pad[1] == 1);
    r = OK("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[2,32,30,40],\"dtype\":\"f32\"},"
           "{\"shape\":[64,16,3,5],\"dtype\":\"f32\"}],\"attrs\":{\"stride\":[1,2],"
           "\"padding\":[0,2],\"dilation\":[2,1],\"groups\":2,\"layout\":\"nchw\"}}");
    CHECK(r.op.attrs.conv2d.nchw && r.op.attrs.conv2d.groups == 2);
    /* P = (30 - 2*2 - 1)/1 + 1 = 26; Q = (40 + 4 - 4 - 1)/2 + 1 = 20 */
    CHECK(r.op.output.shape[0] == 2 && r.op.output.shape[1] == 64);
    CHECK(r.op.output.shape[2] == 26 && r.op.output.shape[3] == 20);

    r = OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8,16],\"dtype\":\"half\"}],"
           "\"attrs\":{\"axis\":2}}");
    CHECK(r.op.output.rank == 3 && r.op.output.shape[2] == 16 && r.op.n_anchor_inputs == 1);

    r = OK("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
           "{\"shape\":[768],\"dtype\":\"f32\"},{\"shape\":[768],\"dtype\":\"f32\"}]}");
    CHECK(r.op.n_anchor_inputs == 3 && r.op.attrs.norm.eps == 1e-5);
    r = OK("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
           "{\"shape\":[4,768],\"dtype\":\"f16\"}],\"attrs\":{\"eps\":0.001},"
           "\"epilogue\":[{\"op\":\"add\",\"input\":1}]}");
    CHECK(r.op.n_anchor_inputs == 1 && r.op.n_inputs == 2 && r.op.attrs.norm.eps == 0.001);
    r = OK("{\"op\":\"rmsnorm\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
           "{\"shape\":[768],\"dtype\":\"f16\"}]}");
    CHECK(r.op.n_anchor_inputs == 2 && r.op.attrs.norm.eps == 1e-6);

    r = OK("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,5,6],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"kind\":\"mean\",\"axis\":-2,\"keepdim\":true}}");
    CHECK(r.op.attrs.reduce.axis == 1 && r.op.attrs.reduce.kind == TUNER_REDUCE_MEAN);
    CHECK(r.op.output.rank == 3 && r.op.output.shape[1] == 1 && r.op.output.shape[2] == 6);
    r = OK("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,5,6],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"kind\":\"max\",\"axis\":0}}");
    CHECK(r.op.output.rank == 2 && r.op.output.shape[0] == 5 && r.op.output.shape[1] == 6);
    r = OK("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[100],\"dtype\":\"f32\"}]}");
    CHECK(r.op.output.rank == 1 && r.op.output.shape[0] == 1); /* full reduction -> [1] */

    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,1,8],\"dtype\":\"f16\"},"
           "{\"shape\":[3,1],\"dtype\":\"f16\"}],\"attrs\":{\"fn\":\"add\"}}");
    CHECK(r.op.output.rank == 3 && r.op.output.shape[0] == 4 && r.op.output.shape[1] == 3);
    CHECK(r.op.output.shape[2] == 8 && r.op.n_anchor_inputs == 1);
    CHECK(r.op.epilogue.n == 1 && r.op.epilogue.steps[0].kind == TUNER_EW_ADD);
    CHECK(r.op.epilogue.steps[0].operand == 1);
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[16],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"scale\",\"value\":-2},{\"op\":\"exp\"}]},"
           "\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"bf16\"}]}");
    CHECK(r.op.epilogue.n == 3 && r.op.epilogue.steps[0].scalar == -2);
    CHECK(r.op.output.dtype == TUNER_BF16);
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[16],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"fn\":\"relu\"}}");
    CHECK(r.op.epilogue.n == 1 && r.op.epilogue.steps[0].kind == TUNER_EW_RELU);

    /* Every unary step name is known. */
    static const char *const unary[] = {"relu", "gelu", "silu", "sigmoid", "tanh",
                                        "exp", "neg", "abs", "square"};
    for (size_t i = 0; i < sizeof(unary) / sizeof(unary[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
                 "\"epilogue\":[{\"op\":\"%s\"}]}", unary[i]);
        r = OK(body);
        CHECK(r.op.epilogue.n == 1 && strcmp(tuner_ew_name(r.op.epilogue.steps[0].kind),
                                             unary[i]) == 0);
    }
    static const char *const binary[] = {"add", "sub", "mul", "div", "max", "min"};
    for (size_t i = 0; i < sizeof(binary) / sizeof(binary[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[3,4],\"dtype\":\"f16\"},"
                 "{\"shape\":[3,1],\"dtype\":\"f32\"}],\"epilogue\":[{\"op\":\"%s\",\"input\":1}]}",
                 binary[i]);
        r = OK(body);
        CHECK(r.op.epilogue.n == 1 && r.op.epilogue.steps[0].operand == 1);
    }
    /* Prologue binary step names its operand with "operand". */
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
           "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[64],\"dtype\":\"f16\"}],"
           "\"prologue\":[{\"input\":0,\"op\":\"mul\",\"operand\":2}]}");
    CHECK(r.op.prologue[0].n == 1 && r.op.prologue[0].steps[0].operand == 2);
    /* A scaled, masked softmax: the prologue on x, its mask broadcast over the rows. */
    r = OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"},{\"shape\":[128],\"dtype\":\"f16\"}],"
           "\"prologue\":[{\"input\":0,\"op\":\"scale\",\"value\":0.125},{\"input\":0,\"op\":\"add\",\"operand\":1}]}");
    CHECK(r.op.prologue[0].n == 2 && r.op.prologue[0].steps[1].operand == 1 && r.op.n_inputs == 2);
    /* align */
    r = OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\",\"align\":2}]}");
    CHECK(r.op.inputs[0].align == 2);
}

/* copy: a transpose as strides, a slice as offset and strides, every read inside x; concat. */
static void test_layout(void)
{
    proto_kernel_request r;
    r = OK("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"shape\":[6,4],\"strides\":[1,6]},\"epilogue\":[{\"op\":\"relu\"}]}");
    CHECK(r.op.kind == TUNER_OP_COPY && r.op.output.rank == 2 && r.op.output.shape[0] == 6 &&
          r.op.attrs.copy.strides[0] == 1 && r.op.attrs.copy.strides[1] == 6 && r.op.epilogue.n == 1);
    r = OK("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"bf16\"}]}");
    CHECK(r.op.output.shape[1] == 6 && r.op.attrs.copy.strides[0] == 6 && r.op.attrs.copy.strides[1] == 1,
          "a plain copy: dense strides");
    r = OK("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f32\"},{\"shape\":[3],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"shape\":[2,3],\"strides\":[12,2],\"offset\":1},\"epilogue\":[{\"op\":\"add\",\"input\":1}]}");
    CHECK(r.op.attrs.copy.offset == 1 && r.op.n_anchor_inputs == 1 && r.op.n_inputs == 2);
    /* The last element read: 18 + (2-1)*12 + (3-1)*2 = 23 < 24; one more is out. */
    BAD("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"shape\":[2,3],\"strides\":[12,2],\"offset\":18}}",
        422, "invalid_field", "attrs");
    BAD("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f32\"}],\"attrs\":{\"strides\":[1]}}",
        422, "invalid_field", "attrs.strides");
    BAD("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f32\"}],\"attrs\":{\"strides\":[-1,1]}}",
        422, "invalid_field", "attrs.strides[0]");
    BAD("{\"op\":\"copy\",\"inputs\":[{\"shape\":[4,6],\"dtype\":\"f32\"}],"
        "\"prologue\":[{\"input\":0,\"op\":\"relu\"}]}",
        422, "invalid_field", "prologue");
    r = OK("{\"op\":\"concat\",\"inputs\":[{\"shape\":[2,3],\"dtype\":\"f16\"},{\"shape\":[2,5],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"axis\":-1},\"epilogue\":[{\"op\":\"silu\"}]}");
    CHECK(r.op.kind == TUNER_OP_CONCAT && r.op.n_anchor_inputs == 2 && r.op.attrs.concat.axis == 1 &&
          r.op.output.shape[1] == 8);
    BAD("{\"op\":\"concat\",\"inputs\":[{\"shape\":[2,3],\"dtype\":\"f16\"},{\"shape\":[3,5],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"axis\":1}}",
        422, "shape_mismatch", "inputs[1]");
    BAD("{\"op\":\"concat\",\"inputs\":[{\"shape\":[2,3],\"dtype\":\"f16\"}]}", 400, "invalid_field",
        "attrs.axis");
    BAD("{\"op\":\"concat\",\"inputs\":[{\"shape\":[2,3],\"dtype\":\"f16\"},{\"shape\":[2,3],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"axis\":0},\"epilogue\":[{\"op\":\"add\",\"input\":1}]}",
        422, "invalid_field", "epilogue[0].input");
}

static void test_errors(void)
{
    /* Malformed JSON and limits of the text. */
    BAD("", 400, "invalid_json", "");
    BAD("{", 400, "invalid_json", "");
    BAD("{\"op\":\"matmul\"} trailing", 400, "invalid_json", "");
    BAD("[[[[[[[[[1]]]]]]]]]", 400, "limit_exceeded", "");
    BAD("{\"op\":\"matmul\\u0000x\"," MM_IN "}", 400, "invalid_json", "");
    {
        static const char nul[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[1],"
                                  "\"dtype\":\"f16\"}]}\0";
        proto_kernel_request r;
        proto_error e;
        CHECK(proto_kernel_request_parse(nul, sizeof(nul) - 2, &r, &e) == 0);
        CHECK(proto_kernel_request_parse(nul, sizeof(nul), &r, &e) == -EINVAL);
        CHECK(e.status == 400 && strcmp(e.code, "invalid_json") == 0);
    }
    BAD("{\"op\":\"matmul\",\"x\":[[[[[[[[1]]]]]]]]}", 400, "limit_exceeded", "");
    /* Wrong types and unknown fields -> 400 invalid_field. */
    BAD("[]", 400, "invalid_field", "");
    BAD("{\"op\":1," MM_IN "}", 400, "invalid_field", "op");
    BAD("{" MM_IN "}", 400, "invalid_field", "op");
    BAD("{\"op\":\"matmul\"}", 400, "invalid_field", "inputs");
    BAD("{\"op\":\"matmul\",\"inputs\":{}}", 400, "invalid_field", "inputs");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"colour\":1}", 400, "invalid_field", "colour");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"op\":\"matmul\"}", 400, "invalid_field", "op");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\",\"strides\":[1]},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}]}", 400, "invalid_field", "inputs[0].strides");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,\"256\"],\"dtype\":\"f16\"}]}", 400, "invalid_field", "inputs[1].shape[1]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64.5],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}]}", 400, "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":16},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}]}", 400, "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":{\"trans_a\":1}}", 400, "invalid_field",
        "attrs.trans_a");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":{\"transpose\":true}}", 400, "invalid_field",
        "attrs.transpose");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":[]}", 400, "invalid_field", "attrs");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"wait\":\"yes\"}", 400, "invalid_field", "wait");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"budget\":{\"seconds\":\"1\"}}", 400, "invalid_field",
        "budget.seconds");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"budget\":{\"minutes\":1}}", 400, "invalid_field",
        "budget.minutes");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":{}}", 400, "invalid_field", "epilogue");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"relu\",\"input\":1}]}", 400,
        "invalid_field", "epilogue[0].input");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"scale\"}]}", 400, "invalid_field",
        "epilogue[0].value");
    /* Unknown names -> 422. */
    BAD("{\"op\":\"fft\"," MM_IN "}", 422, "unknown_op", "op");
    {
        /* The message names every op the request could have meant. */
        proto_kernel_request req;
        proto_error err;
        const char body[] = "{\"op\":\"matmull\"," MM_IN "}";
        CHECK(parse(body, &req, &err) == -EINVAL);
        CHECK_STR(err.message, "unknown op \"matmull\" (known ops: matmul, conv2d, softmax, "
                               "layernorm, rmsnorm, reduce, elementwise, copy, concat, pool2d, gather, attention)");
        /* A dynamic dimension is refused as such, not as a size below one. */
        const char dyn[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,-1],\"dtype\":\"f16\"}]}";
        CHECK(parse(dyn, &req, &err) == -EINVAL && strcmp(err.field, "inputs[0].shape[1]") == 0);
        CHECK(strstr(err.message, "is named, not -1") != NULL && strstr(err.message, "\"dims\"") != NULL);
    }
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"relu\"},{\"op\":\"relu\"},"
        "{\"op\":\"swish\"}]}", 422, "unknown_op", "epilogue[2].op");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"fp8\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}]}", 422, "unknown_dtype", "inputs[0].dtype");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"int8\"}]}", 422,
        "unknown_dtype", "epilogue[0].dtype");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"fn\":\"erfc\"}}", 422, "unknown_op", "attrs.fn");
    /* Shape limits. */
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[],\"dtype\":\"f16\"}]}", 422,
        "invalid_field", "inputs[0].shape");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[1,1,1,1,1,1,1],\"dtype\":\"f16\"}]}", 422,
        "limit_exceeded", "inputs[0].shape");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,0],\"dtype\":\"f16\"}]}", 422,
        "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,-3],\"dtype\":\"f16\"}]}", 422,
        "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[2147483648],\"dtype\":\"f16\"}]}", 422,
        "limit_exceeded", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[1e300],\"dtype\":\"f16\"}]}", 422,
        "limit_exceeded", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[65536,32769],\"dtype\":\"f16\"}]}", 422,
        "limit_exceeded", "inputs[0].shape");
    OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[65536,32768],\"dtype\":\"f16\"}]}");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f32\",\"align\":2}]}", 422,
        "invalid_field", "inputs[0].align");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f32\",\"align\":12}]}", 422,
        "invalid_field", "inputs[0].align");
    /* Counts. */
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"},"
        "{\"shape\":[4],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f16\"},"
        "{\"shape\":[4],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f16\"},"
        "{\"shape\":[4],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f16\"},"
        "{\"shape\":[4],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f16\"}]}", 422,
        "limit_exceeded", "inputs");
    {
        char body[2048];
        int n = snprintf(body, sizeof(body), "{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[");
        for (int i = 0; i < 17; i++)
            n += snprintf(body + n, sizeof(body) - (size_t)n, "%s{\"op\":\"relu\"}", i ? "," : "");
        snprintf(body + n, sizeof(body) - (size_t)n, "]}");
        BAD(body, 422, "limit_exceeded", "epilogue");
    }
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},"
        "{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"}]},"
        "\"epilogue\":[{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},"
        "{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"},{\"op\":\"relu\"}]}", 422,
        "limit_exceeded", "epilogue");
    /* Inconsistent shapes -> 422 shape_mismatch. */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[32,256],\"dtype\":\"f16\"}]}", 422, "shape_mismatch", "inputs[1].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[256,32],\"dtype\":\"f16\"}],\"attrs\":{\"trans_b\":true}}", 422,
        "shape_mismatch", "inputs[1].shape[1]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[2,128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[3,64,256],\"dtype\":\"f16\"}]}", 422, "shape_mismatch", "inputs[1].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128],\"dtype\":\"f16\"},"
        "{\"shape\":[128,256],\"dtype\":\"f16\"}]}", 422, "invalid_field", "inputs[0].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f32\"}]}", 422, "invalid_field", "inputs[1].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"}]}", 422,
        "invalid_field", "inputs");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,56,56,64],\"dtype\":\"f16\"},"
        "{\"shape\":[128,3,3,32],\"dtype\":\"f16\"}]}", 422, "shape_mismatch",
        "inputs[1].shape[3]");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,64,56,56],\"dtype\":\"f16\"},"
        "{\"shape\":[128,64,3,3],\"dtype\":\"f16\"}],\"attrs\":{\"groups\":2,\"layout\":\"nchw\"}}",
        422, "shape_mismatch", "inputs[1].shape[1]");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,56,56,63],\"dtype\":\"f16\"},"
        "{\"shape\":[128,3,3,21],\"dtype\":\"f16\"}],\"attrs\":{\"groups\":2}}", 422,
        "shape_mismatch", "attrs.groups");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,2,2,8],\"dtype\":\"f16\"},"
        "{\"shape\":[8,5,5,8],\"dtype\":\"f16\"}]}", 422, "shape_mismatch", "inputs[1].shape[1]");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,2,2,8],\"dtype\":\"f16\"},"
        "{\"shape\":[8,1,1,8],\"dtype\":\"f16\"}],\"attrs\":{\"stride\":[1,2,3]}}", 400,
        "invalid_field", "attrs.stride");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,2,2,8],\"dtype\":\"f16\"},"
        "{\"shape\":[8,1,1,8],\"dtype\":\"f16\"}],\"attrs\":{\"stride\":0}}", 422,
        "invalid_field", "attrs.stride");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,2,2,8],\"dtype\":\"f16\"},"
        "{\"shape\":[8,1,1,8],\"dtype\":\"f16\"}],\"attrs\":{\"layout\":\"chwn\"}}", 422,
        "invalid_field", "attrs.layout");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,3],\"dtype\":\"f16\"},"
        "{\"shape\":[4],\"dtype\":\"f16\"}],\"attrs\":{\"fn\":\"mul\"}}", 422, "shape_mismatch",
        "inputs[1].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[128],\"dtype\":\"f16\"}],"
        "\"epilogue\":[{\"op\":\"bias\",\"input\":2}]}", 422, "shape_mismatch",
        "epilogue[0].input");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[128,2],\"dtype\":\"f16\"}],"
        "\"epilogue\":[{\"op\":\"relu\"},{\"op\":\"add\",\"input\":2}]}", 422, "shape_mismatch",
        "epilogue[1].input");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[128],\"dtype\":\"f16\"}],"
        "\"prologue\":[{\"input\":0,\"op\":\"add\",\"operand\":2}]}", 422, "shape_mismatch",
        "prologue[0].operand");
    BAD("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
        "{\"shape\":[512],\"dtype\":\"f32\"},{\"shape\":[768],\"dtype\":\"f32\"}]}", 422,
        "shape_mismatch", "inputs[1].shape");
    /* Other semantic errors. */
    BAD("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,768],\"dtype\":\"f16\"},"
        "{\"shape\":[768],\"dtype\":\"f32\"}]}", 422, "invalid_field", "inputs");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}]}", 422,
        "invalid_field", "inputs[2]");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"add\",\"input\":2}]}", 422,
        "invalid_field", "epilogue[0].input");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"add\",\"input\":0}]}", 422,
        "invalid_field", "epilogue[0].input");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"prologue\":[{\"input\":2,\"op\":\"relu\"}]}", 422,
        "invalid_field", "prologue[0].input");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"prologue\":[{\"input\":0,\"op\":\"cast\",\"dtype\":\"f32\"}]}",
        422, "invalid_field", "prologue[0].dtype");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"axis\":0}}", 422, "invalid_field", "attrs.axis");
    BAD("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"},{\"shape\":[8],\"dtype\":\"f16\"},"
        "{\"shape\":[8],\"dtype\":\"f16\"}],\"prologue\":[{\"input\":1,\"op\":\"neg\"}]}", 422, "invalid_field",
        "prologue[0].input");
    BAD("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"axis\":2}}", 422, "invalid_field", "attrs.axis");
    BAD("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"kind\":\"prod\"}}", 422, "invalid_field", "attrs.kind");
    BAD("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"eps\":0}}", 422, "invalid_field", "attrs.eps");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"fn\":\"add\"}}", 422, "invalid_field", "attrs.fn");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
        "\"epilogue\":[{\"op\":\"gelu\",\"approximate\":\"fast\"}]}", 422, "invalid_field",
        "epilogue[0].approximate");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"arch\":\"sm_75\"}", 422, "invalid_field", "arch");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"tune\":\"hard\"}", 422, "invalid_field", "tune");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"priority\":\"urgent\"}", 422, "invalid_field",
        "priority");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"budget\":{\"seconds\":0}}", 422, "invalid_field",
        "budget.seconds");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"budget\":{\"candidates\":1000000}}", 422,
        "limit_exceeded", "budget.candidates");
}

static char *canon(const char *body)
{
    proto_kernel_request r = OK(body);
    char *s = tuner_op_canonical_json(&r.op);
    CHECK(s != NULL);
    return s ? s : strdup("");
}

static void test_canonical(void)
{
    char *a = canon("{\"op\":\"matmul\"," MM_IN "}");
    /* Golden string: the cache key depends on it byte for byte. */
    const char *golden =
        "{\"attrs\":{\"allow_tf32\":false,\"trans_a\":false,\"trans_b\":false},\"epilogue\":[],"
        "\"inputs\":[{\"align\":16,\"dtype\":\"f16\",\"shape\":[128,64]},"
        "{\"align\":16,\"dtype\":\"f16\",\"shape\":[64,256]}],\"n_anchor_inputs\":2,"
        "\"op\":\"matmul\",\"output\":{\"align\":16,\"dtype\":\"f16\",\"shape\":[128,256]},"
        "\"prologue\":[[],[]]}";
    if (strcmp(a, golden) != 0) {
        fprintf(stderr, "canonical:\n  got  %s\n  want %s\n", a, golden);
        failures++;
    }
    /* Other spellings of the same op, and job options that must not matter. */
    const char *same[] = {
        "{\"inputs\":[{\"dtype\":\"float16\",\"shape\":[128,64],\"align\":256},"
        "{\"shape\":[64.0,256],\"dtype\":\"half\",\"align\":16}],\"op\":\"matmul\","
        "\"attrs\":{\"trans_b\":false,\"allow_tf32\":true,\"trans_a\":false}}",
        "{\"op\":\"matmul\"," MM_IN ",\"arch\":\"sm_80\",\"tune\":\"measure\",\"wait\":false,"
        "\"priority\":\"background\",\"budget\":{\"seconds\":5,\"candidates\":3},"
        "\"prologue\":[],\"epilogue\":[]}",
        " \n{ \"op\" : \"matmul\" ,\n\t" MM_IN " } ",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char *b = canon(same[i]);
        if (strcmp(a, b) != 0) {
            fprintf(stderr, "canonical differs for spelling %zu:\n  %s\n  %s\n", i, a, b);
            failures++;
        }
        free(b);
    }
    /* Different ops must differ. */
    const char *diff[] = {
        "{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"relu\"}]}",
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\",\"align\":8},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}]}",
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"bf16\"},"
        "{\"shape\":[64,256],\"dtype\":\"bf16\"}]}",
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,128],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"}],\"attrs\":{\"trans_a\":true}}",
    };
    for (size_t i = 0; i < sizeof(diff) / sizeof(diff[0]); i++) {
        char *b = canon(diff[i]);
        if (strcmp(a, b) == 0) {
            fprintf(stderr, "canonical equal for different op %zu\n", i);
            failures++;
        }
        free(b);
    }
    free(a);

    /* bias == add of an [N] operand; gelu default == "none"; reduce axis -1 == rank-1. */
    const char *pairs[][2] = {
        {"{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
         "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}],"
         "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"gelu\"}]}",
         "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
         "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}],"
         "\"epilogue\":[{\"input\":2,\"op\":\"add\"},{\"op\":\"gelu\",\"approximate\":\"none\"}]}"},
        {"{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"}]}",
         "{\"op\":\"reduce\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"}],"
         "\"attrs\":{\"axis\":1,\"kind\":\"sum\",\"keepdim\":false}}"},
        {"{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,8,8,4],\"dtype\":\"f16\"},"
         "{\"shape\":[4,3,3,4],\"dtype\":\"f16\"}],\"attrs\":{\"padding\":1}}",
         "{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,8,8,4],\"dtype\":\"f16\"},"
         "{\"shape\":[4,3,3,4],\"dtype\":\"f16\"}],\"attrs\":{\"padding\":[1,1],\"stride\":[1,1],"
         "\"dilation\":1,\"groups\":1,\"layout\":\"nhwc\"}}"},
        {"{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"},"
         "{\"shape\":[4],\"dtype\":\"f16\"}],\"attrs\":{\"fn\":\"add\"}}",
         "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"},"
         "{\"shape\":[4],\"dtype\":\"f16\"}],\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1}]}}"},
        {"{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"}]}",
         "{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"}],"
         "\"attrs\":{\"eps\":0.00001}}"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char *x = canon(pairs[i][0]), *y = canon(pairs[i][1]);
        if (strcmp(x, y) != 0) {
            fprintf(stderr, "canonical pair %zu differs:\n  %s\n  %s\n", i, x, y);
            failures++;
        }
        /* Canonical JSON is valid JSON. */
        cJSON *j = cJSON_Parse(x);
        CHECK(j != NULL);
        cJSON_Delete(j);
        free(x);
        free(y);
    }
    char *s = canon("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f16\"}],"
                    "\"epilogue\":[{\"op\":\"scale\",\"value\":0.1},{\"op\":\"cast\",\"dtype\":\"f32\"}]}");
    CHECK(strstr(s, "{\"op\":\"scale\",\"value\":0.10000000000000001}") != NULL);
    CHECK(strstr(s, "{\"dtype\":\"f32\",\"op\":\"cast\"}") != NULL);
    CHECK(strstr(s, "\"output\":{\"align\":16,\"dtype\":\"f32\"") != NULL);
    free(s);
}

/* PyTorch's activations as steps: their parameters, defaults, aliases, canonical JSON and errors. */
#define EW1 "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],"
static void test_activations(void)
{
    static const struct {
        const char *body, *want; /* want: the chain in the canonical JSON */
    } cases[] = {
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\",\"min\":0,\"max\":6}]}}", "[{\"max\":6,\"min\":0,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"fn\":\"relu6\"}}", "[{\"max\":6,\"min\":0,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"relu6\"}]}}", "[{\"max\":6,\"min\":0,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"hardtanh\"}]}}", "[{\"max\":1,\"min\":-1,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"hardtanh\",\"max\":2}]}}", "[{\"max\":2,\"min\":-1,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\",\"min\":-0.5}]}}", "[{\"min\":-0.5,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\",\"max\":0.25}]}}", "[{\"max\":0.25,\"op\":\"clamp\"}]"},
        {EW1 "\"attrs\":{\"fn\":\"hardswish\"}}", "[{\"op\":\"hardswish\"}]"},
        {EW1 "\"attrs\":{\"fn\":\"hardsigmoid\"}}", "[{\"op\":\"hardsigmoid\"}]"},
        {EW1 "\"attrs\":{\"fn\":\"erf\"}}", "[{\"op\":\"erf\"}]"},
        {EW1 "\"attrs\":{\"fn\":\"leaky_relu\"}}", "[{\"negative_slope\":0.01,\"op\":\"leaky_relu\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"leaky_relu\",\"negative_slope\":0.2}]}}",
         "[{\"negative_slope\":0.20000000000000001,\"op\":\"leaky_relu\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"pow\",\"exponent\":3}]}}", "[{\"exponent\":3,\"op\":\"pow\"}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"pow\",\"exponent\":-1.5},{\"op\":\"scale\",\"value\":2}]}}",
         "[{\"exponent\":-1.5,\"op\":\"pow\"},{\"op\":\"scale\",\"value\":2}]"},
        /* In a matmul's epilogue and a softmax's prologue. */
        {"{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"hardswish\"},{\"op\":\"clamp\",\"max\":1}]}",
         "[{\"op\":\"hardswish\"},{\"max\":1,\"op\":\"clamp\"}]"},
        {"{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"}],"
         "\"prologue\":[{\"op\":\"pow\",\"input\":0,\"exponent\":2}]}", "[[{\"exponent\":2,\"op\":\"pow\"}]]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *c = canon(cases[i].body);
        if (!strstr(c, cases[i].want)) {
            fprintf(stderr, "activation %zu: canonical %s lacks %s\n", i, c, cases[i].want);
            failures++;
        }
        cJSON *j = cJSON_Parse(c);
        CHECK(j != NULL);
        cJSON_Delete(j);
        free(c);
    }
    /* The step's values as the code generator reads them. */
    proto_kernel_request r = OK(EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\",\"max\":6},{\"op\":\"relu6\"}]}}");
    CHECK(r.op.epilogue.n == 2 && r.op.epilogue.steps[0].kind == TUNER_EW_CLAMP);
    CHECK(isinf(r.op.epilogue.steps[0].scalar) && r.op.epilogue.steps[0].scalar < 0 &&
          r.op.epilogue.steps[0].scalar2 == 6);
    CHECK(r.op.epilogue.steps[1].scalar == 0 && r.op.epilogue.steps[1].scalar2 == 6);

    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\"}]}}", 422, "invalid_field", "attrs.ops[0].min");
    BAD(EW1 "\"attrs\":{\"fn\":\"clamp\"}}", 422, "invalid_field", "attrs.fn");
    BAD(EW1 "\"attrs\":{\"fn\":\"pow\"}}", 422, "invalid_field", "attrs.fn");
    BAD(EW1 "\"attrs\":{\"fn\":\"hardtanh\"}}", 422, "invalid_field", "attrs.fn");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"pow\"}]}}", 400, "invalid_field", "attrs.ops[0].exponent");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"pow\",\"exponent\":\"2\"}]}}", 400, "invalid_field",
        "attrs.ops[0].exponent");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"clamp\",\"min\":0,\"max\":1e999}]}}", 400, "invalid_field",
        "attrs.ops[0].max");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"leaky_relu\",\"value\":0.1}]}}", 400, "invalid_field",
        "attrs.ops[0].value");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"relu6\",\"max\":5}]}}", 400, "invalid_field", "attrs.ops[0].max");
    BAD(EW1 "\"attrs\":{\"ops\":[{\"op\":\"erf\",\"value\":1}]}}", 400, "invalid_field", "attrs.ops[0].value");
}

/* log and the mask steps: comparisons against an input or a constant, where with two inputs,
 * masked_fill with finite and infinite values; their canonical JSON (parseable, one form per
 * spelling, both infinities apart), the parsed steps, prologue forms, and every refusal with its
 * field. */
#define EW3 "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,4,8],\"dtype\":\"f16\"},{\"shape\":[4,8],\"dtype\":\"f32\"}," \
            "{\"shape\":[2,1,8],\"dtype\":\"f16\"}],"
#define EW2 "{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,4,8],\"dtype\":\"f16\"},{\"shape\":[4,8],\"dtype\":\"f32\"}],"
#define ATT "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,64,32],\"dtype\":\"f16\"},{\"shape\":[8,32,64],\"dtype\":\"f16\"}," \
            "{\"shape\":[64,64],\"dtype\":\"f16\"}],"
static void test_masks(void)
{
    static const struct {
        const char *body, *want; /* want: the chain in the canonical JSON */
    } cases[] = {
        {EW1 "\"attrs\":{\"fn\":\"log\"}}", "\"epilogue\":[{\"op\":\"log\"}]"},
        {EW3 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"input\":1},{\"op\":\"ge\",\"value\":0.5},{\"op\":\"ne\",\"input\":2}]}}",
         "[{\"op\":\"lt\",\"operand\":1},{\"op\":\"ge\",\"value\":0.5},{\"op\":\"ne\",\"operand\":2}]"},
        {EW3 "\"attrs\":{\"fn\":\"eq\"},\"epilogue\":[{\"op\":\"mul\",\"input\":2}]}",
         "[{\"op\":\"eq\",\"operand\":1},{\"op\":\"mul\",\"operand\":2}]"},
        {EW1 "\"attrs\":{\"ops\":[{\"op\":\"le\",\"value\":-0.0},{\"op\":\"gt\",\"value\":1e-30}]}}",
         "[{\"op\":\"le\",\"value\":-0},{\"op\":\"gt\",\"value\":1.0000000000000001e-30}]"},
        {EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1,\"other\":2}]}}",
         "[{\"op\":\"where\",\"operand\":1,\"other\":2}]"},
        {EW3 "\"attrs\":{\"ops\":[{\"other\":1,\"op\":\"where\",\"input\":2}]}}",
         "[{\"op\":\"where\",\"operand\":2,\"other\":1}]"},
        {EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":\"-inf\"}]}}",
         "[{\"op\":\"masked_fill\",\"operand\":1,\"value\":\"-inf\"}]"},
        {EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":\"inf\"}]}}",
         "[{\"op\":\"masked_fill\",\"operand\":1,\"value\":\"inf\"}]"},
        {EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":-3.4028234663852886e+38}]}}",
         "[{\"op\":\"masked_fill\",\"operand\":1,\"value\":-3.4028234663852886e+38}]"},
        {EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":0}]}}",
         "[{\"op\":\"masked_fill\",\"operand\":1,\"value\":0}]"},
        /* An attention score: matmul, scale, masked_fill with a causal [S, S] mask. */
        {ATT "\"epilogue\":[{\"op\":\"scale\",\"value\":0.125},{\"op\":\"masked_fill\",\"input\":2,\"value\":\"-inf\"}]}",
         "[{\"op\":\"scale\",\"value\":0.125},{\"op\":\"masked_fill\",\"operand\":2,\"value\":\"-inf\"}]"},
        /* In a prologue: the operand key is "operand", where's second is still "other". */
        {"{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[8],\"dtype\":\"f32\"},"
         "{\"shape\":[4,1],\"dtype\":\"f32\"}],\"prologue\":[{\"op\":\"masked_fill\",\"input\":0,\"operand\":1,\"value\":\"-inf\"},"
         "{\"op\":\"where\",\"input\":0,\"operand\":2,\"other\":1},{\"op\":\"lt\",\"input\":0,\"value\":3},{\"op\":\"log\",\"input\":0}]}",
         "\"prologue\":[[{\"op\":\"masked_fill\",\"operand\":1,\"value\":\"-inf\"},{\"op\":\"where\",\"operand\":2,\"other\":1},"
         "{\"op\":\"lt\",\"value\":3},{\"op\":\"log\"}]]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *c = canon(cases[i].body);
        if (!strstr(c, cases[i].want)) {
            fprintf(stderr, "mask %zu: canonical %s lacks %s\n", i, c, cases[i].want);
            failures++;
        }
        cJSON *j = cJSON_Parse(c);
        CHECK(j != NULL, "mask %zu: canonical JSON parses: %s", i, c);
        cJSON_Delete(j);
        free(c);
    }
    /* The steps as the code generator reads them. */
    proto_kernel_request r = OK(EW3 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"input\":1},{\"op\":\"ge\",\"value\":0.5},"
                                    "{\"op\":\"where\",\"input\":1,\"other\":2},{\"op\":\"masked_fill\",\"input\":2,\"value\":\"-inf\"},"
                                    "{\"op\":\"log\"}]}}");
    const tuner_ew_step *st = r.op.epilogue.steps;
    CHECK(r.op.epilogue.n == 5 && r.op.n_inputs == 3 && r.op.output.dtype == TUNER_F16 && r.op.output.rank == 3);
    CHECK(st[0].kind == TUNER_EW_LT && st[0].operand == 1);
    CHECK(st[1].kind == TUNER_EW_GE && st[1].operand == -1 && st[1].scalar == 0.5);
    CHECK(st[2].kind == TUNER_EW_WHERE && st[2].operand == 1 && st[2].operand2 == 2);
    CHECK(st[3].kind == TUNER_EW_MASKED_FILL && st[3].operand == 2 && isinf(st[3].scalar) && st[3].scalar < 0);
    CHECK(st[4].kind == TUNER_EW_LOG && st[4].operand == -1);
    /* Spellings of one op give one canonical form (the cache key); values that differ do not,
     * -inf, inf and finfo.min each their own. */
    char *a = canon(EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":\"-inf\"}]}}");
    char *b = canon("{\"inputs\":[{\"dtype\":\"float16\",\"shape\":[2,4,8]},{\"dtype\":\"fp32\",\"shape\":[4,8]}],"
                    "\"op\":\"elementwise\",\"epilogue\":[{\"value\":\"-inf\",\"input\":1,\"op\":\"masked_fill\"}]}");
    char *c = canon(EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":\"inf\"}]}}");
    char *d = canon(EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":-3.4028234663852886e+38}]}}");
    char *f = canon(EW2 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":0}]}}");
    CHECK(strcmp(a, b) == 0, "%s vs %s", a, b);
    CHECK(strcmp(a, c) != 0 && strcmp(a, d) != 0 && strcmp(c, d) != 0 && strcmp(a, f) != 0);
    free(a), free(b), free(c), free(d), free(f);
    a = canon(EW1 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"value\":2}]}}");
    b = canon(EW1 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"value\":1}]}}");
    c = canon(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1,\"other\":2}]}}");
    d = canon(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":2,\"other\":1}]}}");
    CHECK(strcmp(a, b) != 0 && strcmp(c, d) != 0);
    free(a), free(b), free(c), free(d);
    /* The canonical form is a request again (what hidetctl cache retune sends: "operand" in an
     * epilogue is named "input"): the same canonical form comes back. */
    a = canon(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1,\"other\":2},{\"op\":\"masked_fill\",\"input\":1,"
                  "\"value\":\"inf\"},{\"op\":\"gt\",\"value\":-2.5}]}}");
    b = canon(EW3 "\"epilogue\":[{\"op\":\"where\",\"input\":1,\"other\":2},{\"op\":\"masked_fill\",\"input\":1,\"value\":\"inf\"},"
                  "{\"op\":\"gt\",\"value\":-2.5}]}");
    CHECK(strcmp(a, b) == 0, "%s vs %s", a, b);
    free(a), free(b);

    /* Refusals, each naming its field. */
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"lt\"}]}}", 400, "invalid_field", "attrs.ops[0].input");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"input\":1,\"value\":2}]}}", 400, "invalid_field", "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"eq\",\"value\":\"-inf\"}]}}", 400, "invalid_field", "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"eq\",\"value\":1e999}]}}", 400, "invalid_field", "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"ge\",\"input\":\"1\"}]}}", 400, "invalid_field", "attrs.ops[0].input");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"gt\",\"input\":5}]}}", 422, "invalid_field", "attrs.ops[0].input");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"lt\",\"other\":1}]}}", 400, "invalid_field", "attrs.ops[0].other");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1}]}}", 400, "invalid_field", "attrs.ops[0].other");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"other\":1}]}}", 400, "invalid_field", "attrs.ops[0].input");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1,\"other\":7}]}}", 422, "invalid_field", "attrs.ops[0].other");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"where\",\"input\":1,\"other\":2,\"value\":0}]}}", 400, "invalid_field",
        "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1}]}}", 400, "invalid_field", "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"value\":0}]}}", 400, "invalid_field", "attrs.ops[0].input");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":\"-Infinity\"}]}}", 400, "invalid_field",
        "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":1e999}]}}", 400, "invalid_field",
        "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":null}]}}", 400, "invalid_field",
        "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":0,\"other\":2}]}}", 400, "invalid_field",
        "attrs.ops[0].other");
    BAD(EW3 "\"attrs\":{\"ops\":[{\"op\":\"log\",\"value\":1}]}}", 400, "invalid_field", "attrs.ops[0].value");
    BAD(EW3 "\"attrs\":{\"fn\":\"where\"}}", 422, "invalid_field", "attrs.fn");
    BAD(EW3 "\"attrs\":{\"fn\":\"masked_fill\"}}", 422, "invalid_field", "attrs.fn");
    /* Operands broadcast one way, to the value: a [2,4,8] mask cannot fill a [4,8] value. */
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[2,4,8],\"dtype\":\"f32\"}],"
        "\"epilogue\":[{\"op\":\"masked_fill\",\"input\":1,\"value\":0}]}", 422, "shape_mismatch", "epilogue[0].input");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[8],\"dtype\":\"f32\"},"
        "{\"shape\":[3,8],\"dtype\":\"f32\"}],\"epilogue\":[{\"op\":\"where\",\"input\":1,\"other\":2}]}", 422,
        "shape_mismatch", "epilogue[0].other");
    /* An epilogue reads extra inputs only; every extra input is read by some step. */
    BAD(ATT "\"epilogue\":[{\"op\":\"where\",\"input\":2,\"other\":0}]}", 422, "invalid_field", "epilogue[0].other");
    BAD(ATT "\"epilogue\":[{\"op\":\"lt\",\"value\":0}]}", 422, "invalid_field", "inputs[2]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[8],\"dtype\":\"f32\"}],"
        "\"prologue\":[{\"op\":\"where\",\"input\":0,\"operand\":1}]}", 400, "invalid_field", "prologue[0].other");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[8],\"dtype\":\"f32\"}],"
        "\"prologue\":[{\"op\":\"masked_fill\",\"operand\":1,\"value\":0}]}", 400, "invalid_field", "prologue[0].input");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f32\"},{\"shape\":[8],\"dtype\":\"f32\"}],"
        "\"prologue\":[{\"op\":\"masked_fill\",\"input\":0,\"operand\":5,\"value\":0}]}", 422, "invalid_field",
        "prologue[0].operand");
}

/* pool2d: output shapes by PyTorch's rules (worked by hand), defaults, canonical JSON, and every
 * refusal naming its field. */
#define PX(shape) "{\"op\":\"pool2d\",\"inputs\":[{\"shape\":" shape ",\"dtype\":\"f16\"}],"
static void test_pool(void)
{
    static const struct {
        const char *body;
        int64_t out[4];
    } shapes[] = {
        /* ResNet: [N,112,112,64] 3x3 s2 p1 -> 56 */
        {PX("[2,112,112,64]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":2,\"padding\":1}}", {2, 56, 56, 64}},
        /* stride defaults to the kernel size */
        {PX("[1,8,9,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2}}", {1, 4, 4, 4}},
        /* ceil mode keeps a last window starting inside: 6 -> 3 (floor 2); NCHW */
        {PX("[1,3,6,6]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":2,\"ceil_mode\":true,\"layout\":\"nchw\"}}",
         {1, 3, 3, 3}},
        /* ...and drops one starting in the right padding: 5, k2 s2 p1 -> 3 */
        {PX("[1,5,5,8]") "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":2,\"stride\":2,\"padding\":1,\"ceil_mode\":true}}",
         {1, 3, 3, 8}},
        /* Inception: 147 3x3 s2 -> 73; [h, w] pairs */
        {PX("[1,147,147,64]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":[3,3],\"stride\":[2,2]}}", {1, 73, 73, 64}},
        /* dilation 2 on h only: 10 - 4 = 6 rows */
        {PX("[1,10,10,8]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":1,\"dilation\":[2,1]}}", {1, 6, 8, 8}},
        /* global and adaptive average pooling */
        {PX("[4,7,7,2048]") "\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":1}}", {4, 1, 1, 2048}},
        {PX("[2,8,17,10]") "\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":[5,3],\"layout\":\"nchw\"}}", {2, 8, 5, 3}},
        /* an adaptive output larger than the input is allowed (windows repeat), as in PyTorch */
        {PX("[1,2,2,8]") "\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":3}}", {1, 3, 3, 8}},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        proto_kernel_request r = OK(shapes[i].body);
        CHECK(r.op.kind == TUNER_OP_POOL2D && r.op.output.rank == 4 && r.op.output.dtype == TUNER_F16);
        if (memcmp(r.op.output.shape, shapes[i].out, sizeof(shapes[i].out)) != 0) {
            fprintf(stderr, "pool %zu: output [%lld,%lld,%lld,%lld]\n", i, (long long)r.op.output.shape[0],
                    (long long)r.op.output.shape[1], (long long)r.op.output.shape[2], (long long)r.op.output.shape[3]);
            failures++;
        }
    }
    /* Defaults: stride = kernel, count_include_pad for avg; canonical JSON names everything. */
    proto_kernel_request r = OK(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":[3,2]}}");
    CHECK(r.op.attrs.pool2d.stride[0] == 3 && r.op.attrs.pool2d.stride[1] == 2 && r.op.attrs.pool2d.count_include_pad &&
          !r.op.attrs.pool2d.ceil_mode && r.op.attrs.pool2d.dilation[0] == 1 && r.op.n_anchor_inputs == 1);
    char *c = canon(PX("[2,112,112,64]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":2,\"padding\":1},"
                       "\"epilogue\":[{\"op\":\"relu\"}]}");
    CHECK(strstr(c, "\"attrs\":{\"ceil_mode\":false,\"count_include_pad\":false,\"dilation\":[1,1],"
                    "\"kernel_size\":[3,3],\"kind\":\"max\",\"layout\":\"nhwc\",\"padding\":[1,1],\"stride\":[2,2]}") != NULL,
          "%s", c);
    free(c);
    char *a = canon(PX("[1,5,5,8]") "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":2,\"padding\":1}}");
    char *b = canon(PX("[1,5,5,8]") "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":2,\"padding\":1,\"count_include_pad\":false}}");
    CHECK(strcmp(a, b) != 0);
    free(a);
    free(b);
    /* A prologue on x and a fused epilogue with an operand. */
    OK("{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[1,8,8,4],\"dtype\":\"bf16\"},{\"shape\":[4],\"dtype\":\"bf16\"}],"
       "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2},\"prologue\":[{\"op\":\"relu\",\"input\":0}],"
       "\"epilogue\":[{\"op\":\"bias\",\"input\":1},{\"op\":\"relu6\"}]}");

    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kernel_size\":2}}", 400, "invalid_field", "attrs.kind");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"min\",\"kernel_size\":2}}", 422, "invalid_field", "attrs.kind");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\"}}", 400, "invalid_field", "attrs.kernel_size");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":0}}", 422, "invalid_field", "attrs.kernel_size");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"stride\":[1,0]}}", 422, "invalid_field",
        "attrs.stride[1]");
    /* padding above half the kernel, as PyTorch refuses */
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"padding\":[1,2]}}", 422, "invalid_field",
        "attrs.padding[1]");
    /* a window larger than the padded input */
    BAD(PX("[1,2,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"stride\":1}}", 422, "shape_mismatch",
        "attrs.kernel_size[0]");
    BAD(PX("[1,8,5,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":3,\"dilation\":3}}", 422, "shape_mismatch",
        "attrs.kernel_size[1]");
    /* attributes of another kind */
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"avg\",\"kernel_size\":2,\"dilation\":2}}", 422, "invalid_field",
        "attrs.dilation");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"count_include_pad\":false}}", 422,
        "invalid_field", "attrs.count_include_pad");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":1,\"kernel_size\":2}}", 422,
        "invalid_field", "attrs.kernel_size");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"output_size\":2}}", 422, "invalid_field",
        "attrs.output_size");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"adaptive_avg\"}}", 400, "invalid_field", "attrs.output_size");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"adaptive_avg\",\"output_size\":[2,0]}}", 422, "invalid_field",
        "attrs.output_size[1]");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"layout\":\"hwcn\"}}", 422, "invalid_field",
        "attrs.layout");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"ceil_mode\":1}}", 400, "invalid_field",
        "attrs.ceil_mode");
    BAD(PX("[8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2}}", 422, "invalid_field", "inputs[0].shape");
    BAD(PX("[1,8,8,4]") "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2,\"groups\":2}}", 400, "invalid_field",
        "attrs.groups");
    BAD("{\"op\":\"pool2d\",\"inputs\":[{\"shape\":[1,8,8,4],\"dtype\":\"f16\"},{\"shape\":[1,8,8,4],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"kind\":\"max\",\"kernel_size\":2}}", 422, "invalid_field", "inputs[1]");
}

/* issue 37's shape ops in the kernel language: reduce over several consecutive axes, softmax's
 * log flag, copy's constant padding - shapes, defaults, canonical JSON and refusals by field. */
#define RX(shape) "{\"op\":\"reduce\",\"inputs\":[{\"shape\":" shape ",\"dtype\":\"f16\"}],"
#define CPX(shape) "{\"op\":\"copy\",\"inputs\":[{\"shape\":" shape ",\"dtype\":\"f32\"}],"
static void test_shape_ops(void)
{
    /* NHWC global mean: [N,H,W,C] over [1,2] -> [N,C]; in any order and negative. */
    proto_kernel_request r = OK(RX("[2,7,7,64]") "\"attrs\":{\"kind\":\"mean\",\"axes\":[-2,1]}}");
    CHECK(r.op.attrs.reduce.axis == 1 && r.op.attrs.reduce.naxes == 2 && r.op.output.rank == 2 &&
          r.op.output.shape[0] == 2 && r.op.output.shape[1] == 64);
    int64_t o, a, i;
    tuner_reduce_dims(&r.op, &o, &a, &i);
    CHECK(o == 2 && a == 49 && i == 64);
    /* keepdim keeps every reduced axis as 1; NCHW [2,3] reduces the last axes. */
    r = OK(RX("[2,64,7,7]") "\"attrs\":{\"kind\":\"sum\",\"axes\":[2,3],\"keepdim\":true}}");
    CHECK(r.op.output.rank == 4 && r.op.output.shape[1] == 64 && r.op.output.shape[2] == 1 &&
          r.op.output.shape[3] == 1);
    /* One axis in "axes" is the same op as "axis". */
    char *c1 = canon(RX("[4,8]") "\"attrs\":{\"axes\":[-1]}}");
    char *c2 = canon(RX("[4,8]") "\"attrs\":{\"axis\":1}}");
    CHECK(strcmp(c1, c2) == 0, "%s vs %s", c1, c2);
    free(c1);
    free(c2);
    c1 = canon(RX("[2,7,7,64]") "\"attrs\":{\"kind\":\"max\",\"axes\":[2,1]}}");
    CHECK(strstr(c1, "\"attrs\":{\"axes\":[1,2],\"keepdim\":false,\"kind\":\"max\"}") != NULL, "%s", c1);
    free(c1);
    /* All axes of a vector: [1]. */
    r = OK(RX("[3,5]") "\"attrs\":{\"axes\":[0,1]}}");
    CHECK(r.op.output.rank == 1 && r.op.output.shape[0] == 1);
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":[1,3]}}", 422, "invalid_field", "attrs.axes");
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":[1,-3]}}", 422, "invalid_field", "attrs.axes[1]");
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":[1,4]}}", 422, "invalid_field", "attrs.axes[1]");
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":[]}}", 422, "invalid_field", "attrs.axes");
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":2}}", 400, "invalid_field", "attrs.axes");
    BAD(RX("[2,7,7,64]") "\"attrs\":{\"axes\":[1,2],\"axis\":1}}", 422, "invalid_field", "attrs.axes");

    /* log_softmax: its own canonical form; non-last axes are the graph's. */
    r = OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"}],\"attrs\":{\"log\":true}}");
    CHECK(r.op.attrs.softmax.log);
    c1 = canon("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"}],\"attrs\":{\"log\":true}}");
    c2 = canon("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"}],\"attrs\":{\"log\":false}}");
    CHECK(strstr(c1, "\"attrs\":{\"axis\":1,\"log\":true}") != NULL, "%s", c1);
    CHECK(strstr(c2, "\"attrs\":{\"axis\":1}") != NULL, "%s", c2);
    free(c1);
    free(c2);
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"}],\"attrs\":{\"log\":1}}", 400,
        "invalid_field", "attrs.log");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,128],\"dtype\":\"f16\"}],\"attrs\":{\"axis\":0}}", 422,
        "invalid_field", "attrs.axis");

    /* Padding: F.pad(x [2,3], (1, 2, 0, 1)) is a [3,6] copy with lower [0,1], upper [1,2]. */
    r = OK(CPX("[2,3]") "\"attrs\":{\"shape\":[3,6],\"strides\":[3,1],\"pad_lower\":[0,1],\"pad_upper\":[1,2],"
                      "\"pad_value\":-1.5}}");
    CHECK(r.op.attrs.copy.padded && r.op.attrs.copy.pad_value == -1.5 && r.op.attrs.copy.pad_lower[1] == 1 &&
          r.op.attrs.copy.pad_upper[0] == 1 && r.op.output.shape[1] == 6);
    c1 = canon(CPX("[2,3]") "\"attrs\":{\"shape\":[3,6],\"strides\":[3,1],\"pad_lower\":[0,1],\"pad_upper\":[1,2]}}");
    CHECK(strstr(c1, "\"attrs\":{\"offset\":0,\"pad_lower\":[0,1],\"pad_upper\":[1,2],\"pad_value\":0,"
                     "\"strides\":[3,1]}") != NULL, "%s", c1);
    free(c1);
    /* Zero padding is no padding: the plain copy's canonical form. */
    c1 = canon(CPX("[2,3]") "\"attrs\":{\"pad_lower\":[0,0],\"pad_upper\":[0,0]}}");
    c2 = canon(CPX("[2,3]") "\"attrs\":{}}");
    CHECK(strcmp(c1, c2) == 0, "%s vs %s", c1, c2);
    free(c1);
    free(c2);
    /* The region copied must lie in x: [3,6] less its padding is [2,3]. */
    BAD(CPX("[2,3]") "\"attrs\":{\"shape\":[3,6],\"strides\":[3,1],\"pad_lower\":[0,1],\"pad_upper\":[0,2]}}", 422,
        "invalid_field", "attrs");
    BAD(CPX("[2,3]") "\"attrs\":{\"pad_lower\":[1]}}", 422, "invalid_field", "attrs.pad_lower");
    BAD(CPX("[2,3]") "\"attrs\":{\"pad_lower\":[2,0]}}", 422, "invalid_field", "attrs.pad_lower");
    BAD(CPX("[2,3]") "\"attrs\":{\"pad_upper\":[0,-1]}}", 422, "invalid_field", "attrs.pad_upper[1]");
    BAD(CPX("[2,3]") "\"attrs\":{\"pad_value\":1}}", 422, "invalid_field", "attrs.pad_value");
    BAD(CPX("[2,3]") "\"attrs\":{\"shape\":[3,6],\"strides\":[3,1],\"pad_lower\":[0,1],\"pad_upper\":[1,2],"
                   "\"pad_value\":\"x\"}}", 400, "invalid_field", "attrs.pad_value");
}

/* gather and the integer dtypes: shapes (embedding, index_select on any axis, a rank-2 index),
 * the axis default and normalisation, canonical JSON and keys, an epilogue, and every refusal of
 * an integer tensor naming its field. */
#define GX(x, ix) "{\"op\":\"gather\",\"inputs\":[{\"shape\":" x ",\"dtype\":\"f16\"},{\"shape\":" ix ",\"dtype\":\"i64\"}],"
static void test_gather(void)
{
    static const struct {
        const char *body;
        int rank;
        int64_t out[4];
        int axis;
    } shapes[] = {
        /* BERT's word embeddings: ids [2, 128] into [30522, 768] */
        {GX("[30522,768]", "[2,128]") "\"attrs\":{}}", 3, {2, 128, 768}, 0},
        /* index_select along the middle and the last axis (negative) */
        {GX("[4,10,6]", "[3]") "\"attrs\":{\"axis\":1}}", 3, {4, 3, 6}, 1},
        {GX("[4,10,6]", "[5]") "\"attrs\":{\"axis\":-1}}", 3, {4, 10, 5}, 2},
        /* a rank-2 index in the middle: [4] + [2,3] + [6] */
        {GX("[4,10,6]", "[2,3]") "\"attrs\":{\"axis\":-2}}", 4, {4, 2, 3, 6}, 1},
        /* a 1-D x: the output is the index's shape */
        {GX("[100]", "[7,2]") "\"attrs\":{\"axis\":0}}", 2, {7, 2}, 0},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        proto_kernel_request r = OK(shapes[i].body);
        CHECK(r.op.kind == TUNER_OP_GATHER && r.op.output.dtype == TUNER_F16 && r.op.n_anchor_inputs == 2 &&
                  r.op.output.rank == shapes[i].rank && r.op.attrs.gather.axis == shapes[i].axis,
              "gather %zu: rank %d axis %d", i, r.op.output.rank, r.op.attrs.gather.axis);
        CHECK(memcmp(r.op.output.shape, shapes[i].out, sizeof(int64_t) * (size_t)shapes[i].rank) == 0, "gather %zu", i);
    }
    /* The default axis is 0, a negative one is normalised: one canonical form, one key. */
    char *a = canon(GX("[50,8]", "[4]") "\"attrs\":{}}");
    char *b = canon(GX("[50,8]", "[4]") "\"attrs\":{\"axis\":-2}}");
    char *c = canon("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"float16\"},"
                    "{\"shape\":[4],\"dtype\":\"int64\"}]}");
    char *d = canon("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},"
                    "{\"shape\":[4],\"dtype\":\"i32\"}]}");
    CHECK(strcmp(a, b) == 0 && strcmp(a, c) == 0, "%s / %s / %s", a, b, c);
    CHECK(strstr(a, "\"attrs\":{\"axis\":0}") && strstr(a, "\"dtype\":\"i64\",\"shape\":[4]") &&
              strstr(a, "\"op\":\"gather\""), "%s", a);
    CHECK(strcmp(a, d) != 0 && strstr(d, "\"dtype\":\"i32\""), "%s", d); /* i32 ids: another kernel */
    free(a);
    free(b);
    free(c);
    free(d);
    /* GPT-2: token embeddings plus the position embeddings of the same shape, cast to f32. */
    proto_kernel_request r = OK("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50257,768],\"dtype\":\"bf16\"},"
                                "{\"shape\":[1,64],\"dtype\":\"i32\"},{\"shape\":[64,768],\"dtype\":\"bf16\"}],"
                                "\"epilogue\":[{\"op\":\"add\",\"input\":2},{\"op\":\"cast\",\"dtype\":\"f32\"}]}");
    CHECK(r.op.n_inputs == 3 && r.op.n_anchor_inputs == 2 && r.op.output.dtype == TUNER_F32 && r.op.epilogue.n == 2);

    /* Refusals. */
    BAD(GX("[50,8]", "[4]") "\"attrs\":{\"axis\":2}}", 422, "invalid_field", "attrs.axis");
    BAD(GX("[50,8]", "[4]") "\"attrs\":{\"axis\":-3}}", 422, "invalid_field", "attrs.axis");
    BAD(GX("[50,8]", "[4]") "\"attrs\":{\"dim\":0}}", 400, "invalid_field", "attrs.dim");
    BAD(GX("[50,8]", "[4]") "\"attrs\":{\"axis\":\"0\"}}", 400, "invalid_field", "attrs.axis");
    /* the output's rank: 6 - 1 + 2 */
    BAD(GX("[2,2,2,2,2,50]", "[3,4]") "\"attrs\":{\"axis\":5}}", 422, "limit_exceeded", "inputs[1].shape");
    /* the index must be an integer, x a float */
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"f32\"}]}", 422,
        "invalid_field", "inputs[1].dtype");
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"i64\"},{\"shape\":[4],\"dtype\":\"i64\"}]}", 422,
        "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"}]}", 422, "invalid_field", "inputs");
    /* no prologue; an integer epilogue operand is refused */
    BAD(GX("[50,8]", "[4]") "\"prologue\":[{\"op\":\"relu\",\"input\":0}]}", 422, "invalid_field", "prologue");
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"i64\"},"
        "{\"shape\":[8],\"dtype\":\"i32\"}],\"epilogue\":[{\"op\":\"add\",\"input\":2}]}", 422, "invalid_field",
        "inputs[2].dtype");
    /* a step cannot read the index as its operand (it is an anchor input) */
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"i64\"}],"
        "\"epilogue\":[{\"op\":\"add\",\"input\":1}]}", 422, "invalid_field", "epilogue[0].input");

    /* Integer inputs elsewhere: refused with the input's dtype field. */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,8],\"dtype\":\"i64\"},{\"shape\":[8,8],\"dtype\":\"i64\"}]}", 422,
        "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,8],\"dtype\":\"f16\"},{\"shape\":[8,8],\"dtype\":\"f16\"},"
        "{\"shape\":[8],\"dtype\":\"int32\"}],\"epilogue\":[{\"op\":\"bias\",\"input\":2}]}", 422, "invalid_field",
        "inputs[2].dtype");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,8],\"dtype\":\"i32\"}]}", 422, "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"copy\",\"inputs\":[{\"shape\":[8,8],\"dtype\":\"i64\"}]}", 422, "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"concat\",\"inputs\":[{\"shape\":[8],\"dtype\":\"i64\"},{\"shape\":[8],\"dtype\":\"i64\"}],"
        "\"attrs\":{\"axis\":0}}", 422, "invalid_field", "inputs[0].dtype");
    /* elementwise: an integer inputs[0] converted first (attention_mask.to(float)) is accepted, with
     * more steps after the cast; without the cast first, or as an operand, refused */
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,128],\"dtype\":\"i64\"}],"
           "\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"f32\"}]}");
    CHECK(r.op.output.dtype == TUNER_F32 && r.op.inputs[0].dtype == TUNER_I64);
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,1,1,128],\"dtype\":\"i32\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"cast\",\"dtype\":\"f16\"},{\"op\":\"neg\"},{\"op\":\"shift\",\"value\":1},"
           "{\"op\":\"scale\",\"value\":-65504}]}}");
    CHECK(r.op.output.dtype == TUNER_F16 && r.op.epilogue.n == 4);
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,128],\"dtype\":\"i64\"}]}", 422, "invalid_field",
        "inputs[0].dtype");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,128],\"dtype\":\"i64\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"neg\"},{\"op\":\"cast\",\"dtype\":\"f32\"}]}}", 422, "invalid_field",
        "inputs[0].dtype");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[2,128],\"dtype\":\"f32\"},{\"shape\":[2,128],\"dtype\":\"i64\"}],"
        "\"attrs\":{\"fn\":\"add\"}}", 422, "invalid_field", "inputs[1].dtype");
    /* a cast to an integer, anywhere */
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"f32\"}],"
        "\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"i32\"}]}", 422, "invalid_field", "epilogue[0].dtype");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4],\"dtype\":\"i64\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"cast\",\"dtype\":\"int64\"}]}}", 422, "invalid_field", "attrs.ops[0].dtype");
    /* an i64 is 8 bytes: align 4 is below its element */
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"i64\",\"align\":4}]}",
        422, "invalid_field", "inputs[1].align");
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[50,8],\"dtype\":\"f16\"},{\"shape\":[4],\"dtype\":\"u8\"}]}", 422,
        "unknown_dtype", "inputs[1].dtype");
}

/* attention: layouts, GQA, decode, the mask's broadcasts, defaults and the scale, epilogue operands
 * after the anchor's inputs, canonical JSON, and every refusal by its field. */
#define AT_T(shape, dt) "{\"shape\":" shape ",\"dtype\":\"" dt "\"}"
#define AT3(q, kv, dt) "{\"op\":\"attention\",\"inputs\":[" AT_T(q, dt) "," AT_T(kv, dt) "," AT_T(kv, dt)
#define AT(q, k, v) "{\"op\":\"attention\",\"inputs\":[" q "," k "," v
static void test_attention(void)
{
    static const struct {
        const char *body;
        int n_anchor;
        int64_t out[4];
        tuner_dtype dt;
        bool causal, bshd;
        double scale;
    } good[] = {
        /* bhsd, defaults: scale 1/sqrt(64) */
        {AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "]}", 3, {2, 8, 128, 64}, TUNER_F16, false, false, 0.125},
        /* bshd, causal, GQA 32/8, Skv > S, a given scale */
        {AT3("[1,128,32,128]", "[1,256,8,128]", "bf16") "],\"attrs\":{\"layout\":\"bshd\",\"causal\":true,"
         "\"scale\":0.1}}", 3, {1, 128, 32, 128}, TUNER_BF16, true, true, 0.1},
        /* decode: S 1, MQA, a [B,1,1,Skv] f32 padding mask */
        {AT3("[4,32,1,128]", "[4,1,4096,128]", "f16") "," AT_T("[4,1,1,4096]", "f32") "]}", 4, {4, 32, 1, 128},
         TUNER_F16, false, false, 0.088388347648318447},
        /* masks of rank 1 and 2, f16 and bf16; head dims 80, 96, 256 */
        {AT3("[1,4,16,80]", "[1,2,32,80]", "f16") "," AT_T("[32]", "f16") "]}", 4, {1, 4, 16, 80}, TUNER_F16, false,
         false, 0.11180339887498948},
        {AT3("[1,16,4,96]", "[1,32,4,96]", "bf16") "," AT_T("[16,32]", "bf16") "],\"attrs\":{\"layout\":\"bshd\"}}", 4,
         {1, 16, 4, 96}, TUNER_BF16, false, true, 0.10206207261596575},
        {AT3("[2,2,8,256]", "[2,2,8,256]", "f16") "," AT_T("[2,1,8,1]", "f32") "],\"attrs\":{\"causal\":false}}", 4,
         {2, 2, 8, 256}, TUNER_F16, false, false, 0.0625},
        /* S > Skv with causal: allowed (the first rows see no key and give 0) */
        {AT3("[1,1,8,64]", "[1,1,4,64]", "f16") "],\"attrs\":{\"causal\":true}}", 3, {1, 1, 8, 64}, TUNER_F16, true,
         false, 0.125},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        proto_kernel_request r = OK(good[i].body);
        CHECK(r.op.kind == TUNER_OP_ATTENTION && r.op.n_anchor_inputs == good[i].n_anchor &&
                  r.op.n_inputs == good[i].n_anchor && r.op.output.rank == 4 && r.op.output.dtype == good[i].dt &&
                  r.op.output.align == 16 && memcmp(r.op.output.shape, good[i].out, sizeof(good[i].out)) == 0,
              "attention %zu: anchor %d rank %d", i, r.op.n_anchor_inputs, r.op.output.rank);
        CHECK(r.op.attrs.attention.causal == good[i].causal && r.op.attrs.attention.bshd == good[i].bshd &&
                  fabs(r.op.attrs.attention.scale - good[i].scale) < 1e-15,
              "attention %zu: causal %d bshd %d scale %.17g", i, r.op.attrs.attention.causal,
              r.op.attrs.attention.bshd, r.op.attrs.attention.scale);
    }

    /* The mask is inputs[3] unless a fused step reads it; operands follow the anchor's inputs. */
    proto_kernel_request r = OK(AT3("[1,4,16,64]", "[1,4,16,64]", "f16") "," AT_T("[1,4,16,64]", "f16")
                                "],\"epilogue\":[{\"op\":\"add\",\"input\":3}]}");
    CHECK(r.op.n_anchor_inputs == 3 && r.op.n_inputs == 4 && r.op.epilogue.n == 1);
    r = OK(AT3("[1,4,16,64]", "[1,4,16,64]", "f16") "," AT_T("[16,16]", "f32") "," AT_T("[64]", "f16")
           "],\"epilogue\":[{\"op\":\"bias\",\"input\":4},{\"op\":\"cast\",\"dtype\":\"f32\"}]}");
    CHECK(r.op.n_anchor_inputs == 4 && r.op.n_inputs == 5 && r.op.epilogue.n == 2 && r.op.output.dtype == TUNER_F32);

    /* Canonical JSON: explicit defaults key as absent ones (scale written out, layout by name). */
    char sc[64];
    snprintf(sc, sizeof(sc), "%.17g", 1.0 / sqrt(128.0));
    char explicit_body[512];
    snprintf(explicit_body, sizeof(explicit_body),
             AT3("[1,8,64,128]", "[1,8,64,128]", "f16") "],\"attrs\":{\"causal\":false,\"layout\":\"bhsd\","
             "\"scale\":%s}}", sc);
    char *a = canon(AT3("[1,8,64,128]", "[1,8,64,128]", "f16") "]}");
    char *b = canon(explicit_body);
    char *c = canon(AT3("[1,8,64,128]", "[1,8,64,128]", "f16") "],\"attrs\":{\"layout\":\"bshd\"}}");
    char *d = canon(AT3("[1,8,64,128]", "[1,8,64,128]", "f16") "],\"attrs\":{\"causal\":true}}");
    char *e = canon(AT3("[1,8,64,128]", "[1,8,64,128]", "f16") "],\"attrs\":{\"scale\":0.125}}");
    CHECK(strcmp(a, b) == 0, "%s / %s", a, b);
    CHECK(strstr(a, "{\"attrs\":{\"causal\":false,\"layout\":\"bhsd\",\"scale\":0.088388347648318") == a &&
              strstr(a, "\"op\":\"attention\"") && strstr(a, "\"n_anchor_inputs\":3"), "%s", a);
    CHECK(strcmp(a, c) != 0 && strstr(c, "\"layout\":\"bshd\""), "%s", c);
    CHECK(strcmp(a, d) != 0 && strstr(d, "\"causal\":true"), "%s", d);
    CHECK(strcmp(a, e) != 0 && strstr(e, "\"scale\":0.125}"), "%s", e);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);

    /* Ranks: q, k, v 4 each; the mask at most 4. */
    BAD(AT3("[8,128,64]", "[2,8,128,64]", "f16") "]}", 422, "invalid_field", "inputs[0].shape");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[1,2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "f16")) "]}", 422,
        "invalid_field", "inputs[1].shape");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "f16"), AT_T("[16,128,64]", "f16")) "]}", 422,
        "invalid_field", "inputs[2].shape");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "," AT_T("[1,2,8,128,128]", "f32") "]}", 422, "shape_mismatch",
        "inputs[3].shape");
    /* dtypes: f16/bf16, one for q, k, v; a float mask */
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f32") "]}", 422, "invalid_field", "inputs[0].dtype");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "i32") "]}", 422, "invalid_field", "inputs[0].dtype");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "bf16"), AT_T("[2,8,128,64]", "f16")) "]}", 422,
        "invalid_field", "inputs[1].dtype");
    BAD(AT(AT_T("[2,8,128,64]", "bf16"), AT_T("[2,8,128,64]", "bf16"), AT_T("[2,8,128,64]", "f16")) "]}", 422,
        "invalid_field", "inputs[2].dtype");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "," AT_T("[128,128]", "i64") "]}", 422, "invalid_field",
        "inputs[3].dtype");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "," AT_T("[128,128]", "bool") "]}", 422, "unknown_dtype",
        "inputs[3].dtype");
    /* head dims: supported, and one for q, k, v */
    BAD(AT3("[2,8,128,100]", "[2,8,128,100]", "f16") "]}", 422, "invalid_field", "inputs[0].shape");
    BAD(AT3("[2,8,128,32]", "[2,8,128,32]", "f16") "]}", 422, "invalid_field", "inputs[0].shape");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,128]", "f16"), AT_T("[2,8,128,64]", "f16")) "]}", 422,
        "shape_mismatch", "inputs[1].shape");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,128]", "f16")) "]}", 422,
        "shape_mismatch", "inputs[2].shape");
    /* k and v alike (Skv, heads) */
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,64,64]", "f16")) "]}", 422,
        "shape_mismatch", "inputs[2].shape");
    BAD(AT(AT_T("[2,8,128,64]", "f16"), AT_T("[2,8,128,64]", "f16"), AT_T("[2,4,128,64]", "f16")) "]}", 422,
        "shape_mismatch", "inputs[2].shape");
    /* batch; Hq a multiple of Hkv, in either layout (Hkv > Hq too) */
    BAD(AT3("[2,8,128,64]", "[1,8,128,64]", "f16") "]}", 422, "shape_mismatch", "inputs[1].shape");
    BAD(AT3("[2,8,128,64]", "[2,3,128,64]", "f16") "]}", 422, "shape_mismatch", "inputs[1].shape");
    BAD(AT3("[2,4,128,64]", "[2,8,128,64]", "f16") "]}", 422, "shape_mismatch", "inputs[1].shape");
    BAD(AT3("[2,128,12,64]", "[2,128,8,64]", "f16") "],\"attrs\":{\"layout\":\"bshd\"}}", 422, "shape_mismatch",
        "inputs[1].shape");
    /* ... while bhsd reads those shapes' heads from dimension 1: [2,128] heads, fine for 128 / 128 */
    OK(AT3("[2,128,12,64]", "[2,128,8,64]", "f16") "]}");
    /* a mask that does not broadcast to [B,Hq,S,Skv] = [2,8,128,256] */
    BAD(AT3("[2,8,128,64]", "[2,8,256,64]", "f16") "," AT_T("[128,128]", "f32") "]}", 422, "shape_mismatch",
        "inputs[3].shape");
    BAD(AT3("[2,8,128,64]", "[2,8,256,64]", "f16") "," AT_T("[2,2,128,256]", "f32") "]}", 422, "shape_mismatch",
        "inputs[3].shape");
    BAD(AT3("[2,8,128,64]", "[2,8,256,64]", "f16") "," AT_T("[3,1,1,256]", "f16") "]}", 422, "shape_mismatch",
        "inputs[3].shape");
    /* ... in bshd the mask stays [B,Hq,S,Skv]: q's [B,S,Hq,D] order is refused where S != Hq */
    BAD(AT3("[1,128,8,64]", "[1,128,8,64]", "f16") "," AT_T("[1,128,8,128]", "f32") "],\"attrs\":{\"layout\":\"bshd\"}}",
        422, "shape_mismatch", "inputs[3].shape");
    OK(AT3("[1,128,8,64]", "[1,128,8,64]", "f16") "," AT_T("[1,8,128,128]", "f32") "],\"attrs\":{\"layout\":\"bshd\"}}");
    /* attrs */
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"dropout\":0.1}}", 400, "invalid_field",
        "attrs.dropout");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"is_causal\":true}}", 400, "invalid_field",
        "attrs.is_causal");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"scale\":0}}", 422, "invalid_field", "attrs.scale");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"scale\":-0.125}}", 422, "invalid_field",
        "attrs.scale");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"scale\":1e999}}", 400, "invalid_field",
        "attrs.scale");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"scale\":\"nan\"}}", 400, "invalid_field",
        "attrs.scale");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"scale\":null}}", 400, "invalid_field",
        "attrs.scale");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"causal\":1}}", 400, "invalid_field",
        "attrs.causal");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"layout\":\"bsdh\"}}", 422, "invalid_field",
        "attrs.layout");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"layout\":4}}", 400, "invalid_field",
        "attrs.layout");
    /* inputs: q, k, v at least; every extra one read by a step; steps read no anchor input */
    BAD("{\"op\":\"attention\",\"inputs\":[" AT_T("[2,8,128,64]", "f16") "," AT_T("[2,8,128,64]", "f16") "]}", 422,
        "invalid_field", "inputs");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "," AT_T("[128,128]", "f32") "," AT_T("[64]", "f16") "]}", 422,
        "invalid_field", "inputs[4]");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"epilogue\":[{\"op\":\"add\",\"input\":1}]}", 422,
        "invalid_field", "epilogue[0].input");
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "," AT_T("[128]", "f16") "],\"epilogue\":[{\"op\":\"add\","
        "\"input\":3}]}", 422, "shape_mismatch", "epilogue[0].input");
    /* no prologue */
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"prologue\":[{\"op\":\"scale\",\"value\":2,\"input\":0}]}",
        422, "invalid_field", "prologue");
}

/* attention in layout bshd_packed: one qkv input [B,S,Hq+2*Hkv,D], kv_heads given or a third of
 * the heads, the mask as inputs[1], the output [B,S,Hq,D], canonical JSON, every refusal. */
#define ATP(qkv, dt) "{\"op\":\"attention\",\"inputs\":[" AT_T(qkv, dt)
#define ATP_ATTRS "\"attrs\":{\"layout\":\"bshd_packed\""
static void test_attention_packed(void)
{
    /* GPT-2: [8,512,3*12*64] viewed as [8,512,36,64], causal */
    proto_kernel_request r = OK(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"causal\":true}}");
    const int64_t o1[4] = {8, 512, 12, 64};
    CHECK(r.op.kind == TUNER_OP_ATTENTION && r.op.attrs.attention.packed && r.op.attrs.attention.bshd &&
              r.op.attrs.attention.causal && r.op.attrs.attention.kv_heads == 12 && r.op.n_anchor_inputs == 1 &&
              r.op.n_inputs == 1 && r.op.output.rank == 4 && memcmp(r.op.output.shape, o1, sizeof(o1)) == 0 &&
              r.op.output.dtype == TUNER_F16 && fabs(r.op.attrs.attention.scale - 0.125) < 1e-15,
          "packed gpt2: kv_heads %d anchor %d", r.op.attrs.attention.kv_heads, r.op.n_anchor_inputs);
    tuner_attention_dims d = tuner_attention_dims_of(&r.op);
    CHECK(d.b == 8 && d.s == 512 && d.skv == 512 && d.hq == 12 && d.hkv == 12 && d.group == 1 && d.d == 64 &&
              !d.has_mask, "packed dims");
    /* GQA: 32 query heads, 8 kv heads, a [B,1,1,S] mask (inputs[1]), an epilogue operand after it */
    r = OK(ATP("[2,100,48,128]", "bf16") "," AT_T("[2,1,1,100]", "f32") "," AT_T("[128]", "bf16") "]," ATP_ATTRS
           ",\"kv_heads\":8,\"scale\":0.1},\"epilogue\":[{\"op\":\"bias\",\"input\":2}]}");
    const int64_t o2[4] = {2, 100, 32, 128};
    CHECK(r.op.attrs.attention.kv_heads == 8 && r.op.n_anchor_inputs == 2 && r.op.n_inputs == 3 &&
              memcmp(r.op.output.shape, o2, sizeof(o2)) == 0 && r.op.attrs.attention.scale == 0.1 &&
              tuner_attention_mask_input(&r.op) == 1 && tuner_attention_dims_of(&r.op).has_mask &&
              tuner_attention_dims_of(&r.op).group == 4, "packed gqa");
    /* a step reading inputs[1] makes it an operand, not the mask */
    r = OK(ATP("[1,16,12,64]", "f16") "," AT_T("[64]", "f16") "]," ATP_ATTRS "},\"epilogue\":[{\"op\":\"add\",\"input\":1}]}");
    CHECK(r.op.n_anchor_inputs == 1 && r.op.n_inputs == 2 && !tuner_attention_dims_of(&r.op).has_mask, "packed operand");
    /* MQA: kv_heads 1 of 10 heads (8 query heads) */
    r = OK(ATP("[1,16,10,80]", "f16") "]," ATP_ATTRS ",\"kv_heads\":1}}");
    CHECK(r.op.output.shape[2] == 8 && tuner_attention_dims_of(&r.op).group == 8, "packed mqa");

    /* Canonical JSON: kv_heads and the layout written out (a given default keys as absent), the
     * other layouts without kv_heads. */
    char *a = canon(ATP("[1,64,24,128]", "f16") "]," ATP_ATTRS "}}");
    char *b = canon(ATP("[1,64,24,128]", "f16") "]," ATP_ATTRS ",\"kv_heads\":8}}");
    char *c = canon(ATP("[1,64,24,128]", "f16") "]," ATP_ATTRS ",\"kv_heads\":4}}");
    char *e = canon(AT3("[1,64,8,128]", "[1,64,8,128]", "f16") "],\"attrs\":{\"layout\":\"bshd\"}}");
    CHECK(strcmp(a, b) == 0, "%s / %s", a, b);
    CHECK(strstr(a, "{\"attrs\":{\"causal\":false,\"kv_heads\":8,\"layout\":\"bshd_packed\",\"scale\":0.088388347648318") == a,
          "%s", a);
    CHECK(strcmp(a, c) != 0 && strstr(c, "\"kv_heads\":4,"), "%s", c);
    CHECK(!strstr(e, "kv_heads") && strstr(e, "\"layout\":\"bshd\""), "%s", e);
    free(a);
    free(b);
    free(c);
    free(e);

    /* qkv: rank 4, f16/bf16, a supported head dim */
    BAD(ATP("[8,512,2304]", "f16") "]," ATP_ATTRS "}}", 422, "invalid_field", "inputs[0].shape");
    BAD(ATP("[8,512,36,64]", "f32") "]," ATP_ATTRS "}}", 422, "invalid_field", "inputs[0].dtype");
    BAD(ATP("[8,512,36,32]", "f16") "]," ATP_ATTRS "}}", 422, "invalid_field", "inputs[0].shape");
    /* heads: three equal parts when kv_heads is not given; Hq = heads - 2 Hkv a positive multiple */
    BAD(ATP("[8,512,35,64]", "f16") "]," ATP_ATTRS "}}", 422, "shape_mismatch", "inputs[0].shape");
    BAD(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"kv_heads\":18}}", 422, "shape_mismatch", "attrs.kv_heads");
    BAD(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"kv_heads\":20}}", 422, "shape_mismatch", "attrs.kv_heads");
    BAD(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"kv_heads\":5}}", 422, "shape_mismatch", "attrs.kv_heads");
    BAD(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"kv_heads\":0}}", 422, "invalid_field", "attrs.kv_heads");
    BAD(ATP("[8,512,36,64]", "f16") "]," ATP_ATTRS ",\"kv_heads\":1.5}}", 400, "invalid_field", "attrs.kv_heads");
    /* kv_heads belongs to the packed layout only */
    BAD(AT3("[2,8,128,64]", "[2,8,128,64]", "f16") "],\"attrs\":{\"kv_heads\":8}}", 422, "invalid_field",
        "attrs.kv_heads");
    BAD(AT3("[2,128,8,64]", "[2,128,8,64]", "f16") "],\"attrs\":{\"layout\":\"bshd\",\"kv_heads\":8}}", 422,
        "invalid_field", "attrs.kv_heads");
    /* the mask: a float dtype broadcasting to [B,Hq,S,S] = [2,12,64,64] */
    BAD(ATP("[2,64,36,64]", "f16") "," AT_T("[2,1,1,128]", "f32") "]," ATP_ATTRS "}}", 422, "shape_mismatch",
        "inputs[1].shape");
    BAD(ATP("[2,64,36,64]", "f16") "," AT_T("[2,36,64,64]", "f32") "]," ATP_ATTRS "}}", 422, "shape_mismatch",
        "inputs[1].shape");
    BAD(ATP("[2,64,36,64]", "f16") "," AT_T("[64,64]", "i32") "]," ATP_ATTRS "}}", 422, "invalid_field",
        "inputs[1].dtype");
    OK(ATP("[2,64,36,64]", "f16") "," AT_T("[2,12,64,64]", "bf16") "]," ATP_ATTRS "}}");
    /* q, k, v given separately in the packed layout: the second input is taken as the mask */
    BAD(ATP("[2,64,36,64]", "f16") "," AT_T("[2,64,12,64]", "f16") "," AT_T("[2,64,12,64]", "f16") "]," ATP_ATTRS "}}",
        422, "invalid_field", "inputs[2]");
    /* no inputs; a step reading qkv; no prologue */
    BAD("{\"op\":\"attention\",\"inputs\":[]," ATP_ATTRS "}}", 422, "invalid_field", "inputs");
    BAD(ATP("[1,16,12,64]", "f16") "]," ATP_ATTRS "},\"epilogue\":[{\"op\":\"add\",\"input\":0}]}", 422,
        "invalid_field", "epilogue[0].input");
    BAD(ATP("[1,16,12,64]", "f16") "]," ATP_ATTRS "},\"prologue\":[{\"op\":\"neg\",\"input\":0}]}", 422,
        "invalid_field", "prologue");
}

static void test_strip(void)
{
    proto_kernel_request r = OK(
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,256],\"dtype\":\"f16\"},{\"shape\":[256],\"dtype\":\"f16\"}],"
        "\"prologue\":[{\"input\":1,\"op\":\"neg\"}],"
        "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"cast\",\"dtype\":\"f32\"}]}");
    proto_kernel_request plain = OK("{\"op\":\"matmul\"," MM_IN "}");
    tuner_op s;
    tuner_op_strip_fusion(&r.op, &s);
    CHECK(s.n_inputs == 2 && s.epilogue.n == 0 && s.prologue[1].n == 0);
    CHECK(s.output.dtype == TUNER_F16);
    char *a = tuner_op_canonical_json(&s), *b = tuner_op_canonical_json(&plain.op);
    CHECK(a && b && strcmp(a, b) == 0);
    free(a);
    free(b);
    /* In place. */
    tuner_op_strip_fusion(&r.op, &r.op);
    CHECK(r.op.n_inputs == 2 && r.op.epilogue.n == 0);

    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,1],\"dtype\":\"f16\"},"
           "{\"shape\":[1,5],\"dtype\":\"f16\"}],\"attrs\":{\"fn\":\"add\"}}");
    tuner_op_strip_fusion(&r.op, &s);
    CHECK(s.n_inputs == 1 && s.output.rank == 2 && s.output.shape[1] == 1);
}

static void test_error_json(void)
{
    char *s = proto_error_json(422, "shape_mismatch", "a \"quoted\"\nline", "inputs[1].shape[0]");
    CHECK(s != NULL);
    if (s) {
        CHECK(strcmp(s, "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"a \\\"quoted\\\"\\n"
                        "line\",\"field\":\"inputs[1].shape[0]\"}}") == 0);
        free(s);
    }
    s = proto_error_json(500, "internal", NULL, NULL);
    CHECK(s && strcmp(s, "{\"error\":{\"code\":\"internal\",\"message\":\"\",\"field\":\"\"}}") == 0);
    free(s);
    /* Client text quoted in a message is escaped where it is not UTF-8, kept where it is. */
    static const struct {
        const char *in, *out;
    } esc[] = {
        { "plain", "plain" },
        { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
        { "a\xff" "b", "a\\xFFb" },
        { "\xc3", "\\xC3" },                  /* truncated (a %.40s cut) */
        { "\xc0\xaf", "\\xC0\\xAF" },          /* overlong '/' */
        { "\xed\xa0\x80", "\\xED\\xA0\\x80" },  /* a surrogate */
        { "\xf4\x90\x80\x80", "\\xF4\\x90\\x80\\x80" }, /* past U+10FFFF */
        { "\x80x", "\\x80x" },                /* a stray continuation byte */
    };
    for (size_t i = 0; i < sizeof(esc) / sizeof(esc[0]); i++) {
        char *o = proto_utf8_escape(esc[i].in);
        CHECK(o && strcmp(o, esc[i].out) == 0);
        free(o);
    }
    s = proto_error_json(422, "unknown_op", "unknown op \"m\xffm\"", "x\xfe");
    CHECK(s && strstr(s, "m\\\\xFFm") && strstr(s, "x\\\\xFE") && !strchr(s, '\xff'));
    free(s);
    proto_error e = {.status = 400, .code = "invalid_json", .message = "m", .field = ""};
    s = proto_error_to_json(&e);
    CHECK(s && strstr(s, "\"invalid_json\""));
    free(s);
    tuner_target t;
    CHECK(tuner_target_parse("sm_86", &t) == 0 && t.sm == 86 && !t.arch_specific);
    CHECK(tuner_target_parse("sm_90b", &t) == -EINVAL);
}

static void test_examples(const char *dir)
{
    static const char *const names[] = {
        "matmul.json", "matmul_bias_gelu.json", "batched_matmul.json", "conv2d.json",
        "softmax.json", "layernorm.json", "rmsnorm.json", "reduce_sum.json", "elementwise.json",
        "attention.json", "attention_decode.json", "attention_packed.json",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[1024];
        size_t len;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        char *text = test_slurp(path, &len);
        if (!text) {
            fprintf(stderr, "cannot read %s\n", path);
            failures++;
            continue;
        }
        static const char *const archs[] = {"sm_80", "sm_90"};
        for (int a = 0; a < 2; a++) {
            cJSON *j = cJSON_Parse(text);
            CHECK(j != NULL);
            if (!j)
                break;
            cJSON_DeleteItemFromObjectCaseSensitive(j, "arch");
            cJSON_AddStringToObject(j, "arch", archs[a]);
            char *body = cJSON_PrintUnformatted(j);
            proto_kernel_request r;
            proto_error err;
            if (proto_kernel_request_parse(body, strlen(body), &r, &err) != 0) {
                fprintf(stderr, "%s on %s: %d %s %s: %s\n", names[i], archs[a], err.status,
                        err.code, err.field, err.message);
                failures++;
            } else {
                CHECK(r.opt.target.sm == (a ? 90 : 80));
            }
            free(body);
            cJSON_Delete(j);
        }
        free(text);
    }
    /* matmul.json is the 128x256x64 fp16 problem. */
    char path[1024];
    size_t len;
    snprintf(path, sizeof(path), "%s/matmul.json", dir);
    char *text = test_slurp(path, &len);
    if (text) {
        proto_kernel_request r = OK(text);
        CHECK(r.op.output.shape[0] == 128 && r.op.output.shape[1] == 256);
        CHECK(r.op.inputs[0].shape[1] == 64 && r.opt.target.sm == 90);
        free(text);
    }
}

/* An unknown field names the closest known one at its level, and only a close one. */
static void suggest(const char *body, const char *field, const char *want, int line)
{
    proto_kernel_request req;
    proto_error err;
    char hint[96] = "";
    if (want)
        snprintf(hint, sizeof(hint), "did you mean \"%s\"?", want);
    int r = parse(body, &req, &err);
    if (r != -EINVAL || err.status != 400 || strcmp(err.code, "invalid_field") != 0 ||
        strcmp(err.field, field) != 0 || (want && !strstr(err.message, hint)) ||
        (!want && strstr(err.message, "did you mean"))) {
        fprintf(stderr, "line %d: field %s: want %s, got %d %s %s: %s\n", line, field,
                want ? hint : "no suggestion", err.status, err.code, err.field, err.message);
        failures++;
    }
}
#define SUGGEST(body, field, want) suggest(body, field, want, __LINE__)

static void test_suggestions(void)
{
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtyp\":\"f16\"}]}",
            "inputs[0].dtyp", "dtype");
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"Tune\":\"model\"}", "Tune", "tune");
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"epilouge\":[]}", "epilouge", "epilogue");
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"budget\":{\"candidate\":3}}", "budget.candidate", "candidates");
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"attrs\":{\"axes\":1}}", "attrs.axes", "axis");
    /* A long spelling of an abbreviated name: each word of the known name starts the same
     * word of the unknown one. */
    SUGGEST("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"},"
            "{\"shape\":[4,4],\"dtype\":\"f16\"}],\"attrs\":{\"transpose_b\":true}}",
            "attrs.transpose_b", "trans_b");
    SUGGEST("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"},"
            "{\"shape\":[4,4],\"dtype\":\"f16\"}],\"attrs\":{\"transpose\":true}}",
            "attrs.transpose", NULL);
    /* Nothing close: no guess. */
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"colour\":1}", "colour", NULL);
    SUGGEST("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,4],\"dtype\":\"f16\"}],"
            "\"x\":1}", "x", NULL);
}

/* Named dimensions (docs/api.md): parsing, the names on inferred shapes, where a name may not
 * stand, sizes and hints, and the canonical form. */
#define DIMS_N "\"dims\":{\"n\":{\"min\":1,\"max\":8192}}"
static void test_named_dims(void)
{
    /* matmul [n, 4096] x [4096, 1024] with a bias and a residual [n, 1024] */
    proto_kernel_request r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",4096],\"dtype\":\"f16\"},"
                                "{\"shape\":[4096,1024],\"dtype\":\"f16\"},{\"shape\":[1024],\"dtype\":\"f16\"},"
                                "{\"shape\":[\"n\",1024],\"dtype\":\"f16\"}],"
                                "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"add\",\"input\":3}]," DIMS_N "}");
    CHECK(r.op.n_dims == 1 && strcmp(r.op.dims[0].name, "n") == 0);
    CHECK(r.op.dims[0].min == 1 && r.op.dims[0].max == 8192 && r.op.dims[0].multiple_of == 1);
    CHECK(r.op.inputs[0].sym[0] == 1 && r.op.inputs[0].shape[0] == 8192 && r.op.inputs[0].sym[1] == 0);
    CHECK(r.op.output.sym[0] == 1 && r.op.output.shape[0] == 8192 && r.op.output.shape[1] == 1024);
    CHECK(r.op.inputs[3].sym[0] == 1 && !r.dyn.has_sizes);
    char *c = tuner_op_canonical_json(&r.op);
    CHECK(c && strstr(c, "\"dims\":{\"n\":{\"max\":8192,\"min\":1,\"multiple_of\":1}}") != NULL);
    CHECK(c && strstr(c, "\"shape\":[\"n\",4096]") != NULL && strstr(c, "\"shape\":[\"n\",1024]") != NULL);
    /* Another range is another op; the same request spelled otherwise is the same op. */
    proto_kernel_request r2 = OK("{\"dims\":{\"n\":{\"max\":8192,\"min\":1,\"multiple_of\":1,\"hints\":[7]}},"
                                 "\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",4096],\"dtype\":\"float16\"},"
                                 "{\"shape\":[4096,1024],\"dtype\":\"f16\"},{\"shape\":[1024],\"dtype\":\"f16\"},"
                                 "{\"shape\":[\"n\",1024],\"dtype\":\"f16\"}],\"sizes\":{\"n\":300},"
                                 "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"add\",\"input\":3}]}");
    char *c2 = tuner_op_canonical_json(&r2.op);
    CHECK(c && c2 && strcmp(c, c2) == 0);
    CHECK(r2.dyn.has_sizes && r2.dyn.sizes[0] == 300 && r2.dyn.n_hints[0] == 1 && r2.dyn.hints[0][0] == 7);
    free(c2);
    r2 = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",4096],\"dtype\":\"f16\"},"
            "{\"shape\":[4096,1024],\"dtype\":\"f16\"},{\"shape\":[1024],\"dtype\":\"f16\"},"
            "{\"shape\":[\"n\",1024],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":4096}},"
            "\"epilogue\":[{\"op\":\"bias\",\"input\":2},{\"op\":\"add\",\"input\":3}]}");
    c2 = tuner_op_canonical_json(&r2.op);
    CHECK(c && c2 && strcmp(c, c2) != 0);
    free(c);
    free(c2);

    /* Names are sorted (the kernels' parameter order); a product on axis 0; the binding. */
    r = OK("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[\"s*b\",768],\"dtype\":\"bf16\"},"
           "{\"shape\":[768],\"dtype\":\"bf16\"},{\"shape\":[768],\"dtype\":\"bf16\"}],"
           "\"dims\":{\"s\":{\"min\":16,\"max\":512,\"multiple_of\":16},\"b\":{\"min\":1,\"max\":32}}}");
    CHECK(r.op.n_dims == 2 && strcmp(r.op.dims[0].name, "b") == 0 && strcmp(r.op.dims[1].name, "s") == 0);
    CHECK(r.op.inputs[0].sym[0] == 3 && r.op.inputs[0].shape[0] == 32 * 512 && r.op.output.sym[0] == 3);
    {
        char name[64];
        CHECK_STR(tuner_sym_text(&r.op, 3, name, sizeof(name)), "b*s");
        int64_t sizes[TUNER_MAX_DIMS] = {3, 48};
        tuner_op bound;
        CHECK(tuner_op_bind(&r.op, sizes, &bound) == 0 && bound.n_dims == 0);
        CHECK(bound.inputs[0].shape[0] == 144 && bound.inputs[0].sym[0] == 0 && bound.output.shape[0] == 144);
        sizes[1] = 40; /* not a multiple of 16 */
        char why[128];
        int at = -1;
        CHECK(tuner_op_sizes_check(&r.op, sizes, why, sizeof(why), &at) == -ERANGE && at == 1);
        CHECK_STR(why, "s is 40; its range is 16..512, a multiple of 16");
        CHECK(tuner_op_bind(&r.op, sizes, &bound) == -ERANGE);
    }
    /* elementwise: a name meets the same name or 1 */
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f32\"},"
           "{\"shape\":[1,64],\"dtype\":\"f32\"},{\"shape\":[64],\"dtype\":\"f32\"},{\"shape\":[\"n\",1],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1},{\"op\":\"mul\",\"input\":2},{\"op\":\"sub\",\"input\":3}]}," DIMS_N "}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.shape[0] == 8192);
    r = OK("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[\"n\",12,64],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"kind\":\"sum\",\"axis\":-1}," DIMS_N "}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.rank == 2);
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",128,64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"n\",64,32],\"dtype\":\"f16\"}]," DIMS_N "}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.shape[0] == 8192 && r.op.output.shape[1] == 128);

    /* Refusals, each at its field. */
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}]}", 422, "invalid_field",
        "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"m\",64],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,\"n\"],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\"],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n*n\",64],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n*\",64],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,64],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "dims.n");
    BAD("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"kind\":\"sum\",\"axis\":0}," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[0]");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[\"n\",8,8,16],\"dtype\":\"f16\"},"
        "{\"shape\":[16,3,3,16],\"dtype\":\"f16\"}]," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[0]");
    /* b's K named where a's is fixed (64) */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"n\",32],\"dtype\":\"f16\"}]," DIMS_N "}", 422, "shape_mismatch", "inputs[1].shape[0]");
    /* named N and K (issue 39): a [m, k] x b [k, n] with bias [n] and residual [m, n]; q @ k^T
     * with M and N both s (b transposed); p @ v with M and K both s */
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"m\",\"k\"],\"dtype\":\"f16\"},"
           "{\"shape\":[\"k\",\"n\"],\"dtype\":\"f16\"},{\"shape\":[\"n\"],\"dtype\":\"f16\"},"
           "{\"shape\":[\"m\",\"n\"],\"dtype\":\"f16\"}],"
           "\"epilogue\":[{\"op\":\"add\",\"input\":2},{\"op\":\"add\",\"input\":3}],"
           "\"dims\":{\"m\":{\"min\":1,\"max\":512},\"n\":{\"min\":1,\"max\":256},\"k\":{\"min\":1,\"max\":128}}}");
    CHECK(r.op.n_dims == 3 && r.op.output.sym[0] == 2 && r.op.output.sym[1] == 4 && r.op.output.shape[0] == 512 &&
              r.op.output.shape[1] == 256 && r.op.inputs[0].sym[1] == 1 && r.op.inputs[1].sym[0] == 1,
          "named M, N and K");
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"s\",64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"s\",64],\"dtype\":\"f16\"}],\"attrs\":{\"trans_b\":true},"
           "\"dims\":{\"s\":{\"min\":1,\"max\":1024}}}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[1] == 1 && r.op.output.shape[1] == 1024, "q @ k^T named");
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"s\",\"s\"],\"dtype\":\"f16\"},"
           "{\"shape\":[\"s\",64],\"dtype\":\"f16\"}],\"dims\":{\"s\":{\"min\":1,\"max\":1024}}}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[1] == 0, "p @ v named");
    /* a's K named, b's K fixed; K named differently; M of a transposed a; N of a batched b; a
     * residual whose N is fixed where the output's is named */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,\"n\"],\"dtype\":\"f16\"},"
        "{\"shape\":[64,32],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":64}}}", 422, "shape_mismatch",
        "inputs[1].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,\"n\"],\"dtype\":\"f16\"},"
        "{\"shape\":[\"m\",32],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":64},\"m\":{\"min\":1,\"max\":64}}}",
        422, "shape_mismatch", "inputs[1].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,\"n\"],\"dtype\":\"f16\"},"
        "{\"shape\":[64,32],\"dtype\":\"f16\"}],\"attrs\":{\"trans_a\":true}," DIMS_N "}", 422, "invalid_field",
        "inputs[0].shape[1]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[4,8,64],\"dtype\":\"f16\"},"
        "{\"shape\":[4,64,\"n\"],\"dtype\":\"f16\"}]," DIMS_N "}", 422, "invalid_field", "inputs[1].shape[2]");
    /* an FP8 matmul's N (its kernels take a named M only) */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[64,64],\"dtype\":\"f8e4m3\"},"
        "{\"shape\":[\"n\",64],\"dtype\":\"f8e4m3\"}],\"attrs\":{\"trans_b\":true,\"out_dtype\":\"f16\"}," DIMS_N "}",
        422, "invalid_field", "inputs[1].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,64],\"dtype\":\"f16\"},{\"shape\":[64,\"n\"],\"dtype\":\"f16\"},"
        "{\"shape\":[8,256],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"add\",\"input\":2}],"
        "\"dims\":{\"n\":{\"min\":1,\"max\":256}}}", 422, "shape_mismatch", "inputs[2].shape[1]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,32],\"dtype\":\"f16\"}],\"attrs\":{\"trans_a\":true}," DIMS_N "}", 422, "invalid_field",
        "inputs[0].shape[0]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[4,64,32],\"dtype\":\"f16\"}]," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[0]");
    /* a residual of a fixed 8192 rows against the named output, and a name against a fixed size */
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"},{\"shape\":[64,32],\"dtype\":\"f16\"},"
        "{\"shape\":[8192,32],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"add\",\"input\":2}]," DIMS_N "}", 422,
        "shape_mismatch", "inputs[2].shape[0]");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f32\"},{\"shape\":[\"m\",64],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1}]},"
        "\"dims\":{\"n\":{\"min\":1,\"max\":64},\"m\":{\"min\":1,\"max\":64}}}", 422, "shape_mismatch", "inputs[1].shape[0]");
    /* names on inner axes: elementwise anywhere, the row ops off the last axis, reduce before
     * the reduced axes; a name stands on one axis of a tensor */
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"n\",\"n\"],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"fn\":\"relu\"}," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"b*s\",\"s\"],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"fn\":\"relu\"},\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":8}}}", 422,
        "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"n\",1],\"dtype\":\"f32\"},{\"shape\":[1,\"n\"],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1}]}," DIMS_N "}", 422, "invalid_field", "inputs[1].shape[1]");
    BAD("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,\"n\",64],\"dtype\":\"f32\"},{\"shape\":[4,64],\"dtype\":\"f32\"}],"
        "\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1}]},\"dims\":{\"n\":{\"min\":1,\"max\":4}}}", 422,
        "shape_mismatch", "inputs[1].shape[0]");
    BAD("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[8,\"n\"],\"dtype\":\"f16\"}]," DIMS_N "}", 422,
        "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[\"b\",\"n\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"kind\":\"sum\",\"axis\":1},\"dims\":{\"b\":{\"min\":1,\"max\":8},\"n\":{\"min\":1,\"max\":8}}}",
        422, "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[8,64,\"n\"],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"kind\":\"sum\",\"axis\":1}," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[2]");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[8,\"n\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[64,32],\"dtype\":\"f16\"}]," DIMS_N "}", 422, "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"},{\"shape\":[8,16],\"dtype\":\"i32\"}]," DIMS_N "}",
        422, "invalid_field", "inputs[0].shape[0]");
    r = OK("{\"op\":\"gather\",\"inputs\":[{\"shape\":[4,1000,3],\"dtype\":\"f16\"},{\"shape\":[8,\"n\"],\"dtype\":\"i32\"}],"
           "\"attrs\":{\"axis\":1}," DIMS_N "}");
    CHECK(r.op.output.rank == 4 && r.op.output.sym[0] == 0 && r.op.output.sym[1] == 0 && r.op.output.sym[2] == 1 &&
          r.op.output.sym[3] == 0);
    r = OK("{\"op\":\"gather\",\"inputs\":[{\"shape\":[30522,768],\"dtype\":\"f16\"},{\"shape\":[\"b\",\"s\"],\"dtype\":\"i64\"},"
           "{\"shape\":[\"s\",768],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"add\",\"input\":2}],"
           "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}}}");
    CHECK(r.op.output.rank == 3 && r.op.output.sym[0] == 1 && r.op.output.sym[1] == 2 && r.op.output.sym[2] == 0);
    BAD("{\"op\":\"gather\",\"inputs\":[{\"shape\":[30522,768],\"dtype\":\"f16\"},{\"shape\":[\"b\",\"s\"],\"dtype\":\"i64\"},"
        "{\"shape\":[512,768],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"add\",\"input\":2}],"
        "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}}}", 422, "shape_mismatch", "inputs[2].shape[0]");
    {
        proto_kernel_request req;
        proto_error err;
        CHECK(parse("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,\"n\"],\"dtype\":\"f16\"}]," DIMS_N "}", &req, &err) ==
              -EINVAL);
        CHECK(strstr(err.message, "works along") && strstr(err.message, "names stand on any axis in elementwise"));
    }
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},"
           "{\"shape\":[\"s\",768],\"dtype\":\"f16\"},{\"shape\":[\"b\",1,1],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1},{\"op\":\"mul\",\"input\":2}]},"
           "\"dims\":{\"s\":{\"min\":1,\"max\":512},\"b\":{\"min\":1,\"max\":8}}}");
    CHECK(r.op.output.rank == 3 && r.op.output.sym[0] == 1 && r.op.output.sym[1] == 2 && r.op.output.sym[2] == 0);
    CHECK(r.op.output.shape[0] == 8 && r.op.output.shape[1] == 512 && r.op.inputs[1].sym[0] == 2);
    /* [b, 1, 1, k] against [b, 12, q, k]: the output's axes take the names of whichever input
     * names them */
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[\"b\",1,1,\"k\"],\"dtype\":\"f16\"},"
           "{\"shape\":[\"b\",12,\"q\",\"k\"],\"dtype\":\"f16\"}],\"attrs\":{\"ops\":[{\"op\":\"add\",\"input\":1}]},"
           "\"dims\":{\"b\":{\"min\":1,\"max\":4},\"k\":{\"min\":1,\"max\":64},\"q\":{\"min\":1,\"max\":64}}}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[1] == 0 && r.op.output.sym[2] == 4 && r.op.output.sym[3] == 2);
    r = OK("{\"op\":\"layernorm\",\"inputs\":[{\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"},"
           "{\"shape\":[768],\"dtype\":\"f16\"},{\"shape\":[768],\"dtype\":\"f16\"},{\"shape\":[\"s\",768],\"dtype\":\"f16\"}],"
           "\"epilogue\":[{\"op\":\"add\",\"input\":3}],"
           "\"dims\":{\"s\":{\"min\":1,\"max\":512},\"b\":{\"min\":1,\"max\":8}}}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[1] == 2 && r.op.output.sym[2] == 0);
    r = OK("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"b\",12,\"s\",64],\"dtype\":\"f16\"}],"
           "\"dims\":{\"s\":{\"min\":1,\"max\":512},\"b\":{\"min\":1,\"max\":8}}}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[2] == 2 && r.op.output.sym[3] == 0);
    r = OK("{\"op\":\"reduce\",\"inputs\":[{\"shape\":[\"b\",\"s\",33,64],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"kind\":\"sum\",\"axis\":2,\"keepdim\":true},"
           "\"dims\":{\"s\":{\"min\":1,\"max\":512},\"b\":{\"min\":1,\"max\":8}}}");
    CHECK(r.op.output.rank == 4 && r.op.output.sym[0] == 1 && r.op.output.sym[1] == 2 && r.op.output.sym[2] == 0);
    /* attention: B, S and Skv named (S and Skv may share a name), the mask following them */
#define ATT_DIMS "\"dims\":{\"b\":{\"min\":1,\"max\":4},\"s\":{\"min\":1,\"max\":512},\"k\":{\"min\":1,\"max\":512}}"
    r = OK("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"b\",1,1,\"k\"],\"dtype\":\"f16\"}]," ATT_DIMS "}");
    CHECK(r.op.n_dims == 3 && r.op.output.sym[0] == 1 && r.op.output.sym[2] == 4 && r.op.output.sym[1] == 0);
    r = OK("{\"op\":\"attention\",\"inputs\":[{\"shape\":[2,\"s\",8,64],\"dtype\":\"f16\"},"
           "{\"shape\":[2,\"s\",8,64],\"dtype\":\"f16\"},{\"shape\":[2,\"s\",8,64],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"layout\":\"bshd\",\"causal\":true},\"dims\":{\"s\":{\"min\":1,\"max\":4096}}}");
    CHECK(r.op.output.sym[1] == 1 && r.op.output.shape[1] == 4096);
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",\"s\",8,64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"}]," ATT_DIMS "}",
        422, "invalid_field", "inputs[0].shape[1]");
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[4,8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[4,8,\"k\",64],\"dtype\":\"f16\"}]," ATT_DIMS "}",
        422, "shape_mismatch", "inputs[1].shape[0]");
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"}]," ATT_DIMS "}",
        422, "shape_mismatch", "inputs[2].shape[2]");
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",1,\"k\",\"s\"],\"dtype\":\"f16\"}]," ATT_DIMS "}",
        422, "shape_mismatch", "inputs[3].shape[2]");
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"k\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"b\",1,512,\"k\"],\"dtype\":\"f16\"}]," ATT_DIMS "}",
        422, "shape_mismatch", "inputs[3].shape[2]");
    /* self-attention's mask may name S and Skv's one name twice; q may not */
    r = OK("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},{\"shape\":[\"b\",8,\"s\",64],\"dtype\":\"f16\"},"
           "{\"shape\":[\"b\",1,\"s\",\"s\"],\"dtype\":\"f16\"}],"
           "\"dims\":{\"b\":{\"min\":1,\"max\":4},\"s\":{\"min\":1,\"max\":512}}}");
    CHECK(r.op.inputs[3].sym[2] == 2 && r.op.inputs[3].sym[3] == 2);
    BAD("{\"op\":\"attention\",\"inputs\":[{\"shape\":[\"s\",8,\"s\",64],\"dtype\":\"f16\"},"
        "{\"shape\":[\"s\",8,\"s\",64],\"dtype\":\"f16\"},{\"shape\":[\"s\",8,\"s\",64],\"dtype\":\"f16\"}],"
        "\"dims\":{\"s\":{\"min\":1,\"max\":512}}}", 422, "invalid_field", "inputs[0].shape[2]");
#undef ATT_DIMS
    /* the dims object itself */
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":0,\"max\":8}}}",
        422, "invalid_field", "dims.n.min");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":9,\"max\":8}}}",
        422, "invalid_field", "dims.n.max");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"max\":8}}}", 400,
        "invalid_field", "dims.n");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],"
        "\"dims\":{\"n\":{\"min\":8,\"max\":64,\"multiple_of\":16}}}", 422, "invalid_field", "dims.n.multiple_of");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"N\",64],\"dtype\":\"f16\"}],\"dims\":{\"N\":{\"min\":1,\"max\":8}}}",
        422, "invalid_field", "dims.N");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":8,"
        "\"step\":2}}}", 400, "invalid_field", "dims.n.step");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,\"max\":8,"
        "\"hints\":[9]}}}", 422, "invalid_field", "dims.n.hints[0]");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}],\"dims\":{\"n\":{\"min\":1,"
        "\"max\":2147483647}}}", 422, "limit_exceeded", "inputs[0].shape");
    /* sizes */
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}]," DIMS_N ",\"sizes\":{\"n\":9000}}",
        422, "out_of_range", "sizes.n");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}]," DIMS_N ",\"sizes\":{\"m\":9}}",
        422, "invalid_field", "sizes.m");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[8,64],\"dtype\":\"f16\"}],\"sizes\":{\"n\":9}}", 422,
        "invalid_field", "sizes");
    {
        proto_kernel_request req;
        proto_error err;
        const char body[] = "{\"op\":\"softmax\",\"inputs\":[{\"shape\":[\"n\",64],\"dtype\":\"f16\"}]," DIMS_N
                            ",\"sizes\":{\"n\":9000}}";
        CHECK(parse(body, &req, &err) == -EINVAL);
        CHECK_STR(err.message, "n is 9000; its range is 1..8192");
    }
}

/* copy with names: strides and an offset that are a coefficient times names ("768*s"), the
 * output's shape named; refusals at the field (an undeclared name, a name the input lacks, a
 * read past x at some size, names on a padded copy). */
static void test_named_copy(void)
{
#define DBS "\"dims\":{\"b\":{\"min\":1,\"max\":8},\"s\":{\"min\":1,\"max\":512}}"
    /* BERT's pooler: [b, s, 768][:, 0] */
    proto_kernel_request r = OK("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",768],\"dtype\":\"f16\"}],"
                                "\"attrs\":{\"shape\":[\"b\",768],\"strides\":[\"768*s\",1]}}");
    CHECK(r.op.output.rank == 2 && r.op.output.sym[0] == 1 && r.op.output.shape[0] == 8 && r.op.output.sym[1] == 0);
    CHECK(r.op.attrs.copy.strides[0] == 768 * 512 && r.op.attrs.copy.stride_sym[0] == 2 && r.op.attrs.copy.strides[1] == 1 &&
          r.op.attrs.copy.stride_sym[1] == 0 && r.op.attrs.copy.offset == 0 && r.op.attrs.copy.offset_sym == 0);
    char *c = tuner_op_canonical_json(&r.op);
    CHECK(c && strstr(c, "\"strides\":[\"768*s\",1]") && strstr(c, "\"shape\":[\"b\",768]"));
    free(c);
    /* bound at b=3, s=5: the strides at the sizes */
    tuner_op b;
    const int64_t sizes[TUNER_MAX_DIMS] = {3, 5, 1, 1};
    CHECK(tuner_op_bind(&r.op, sizes, &b) == 0 && b.attrs.copy.strides[0] == 768 * 5 && b.output.shape[0] == 3 &&
          b.attrs.copy.stride_sym[0] == 0);
    /* a prefix of a fixed axis cut to a name (a prepared position table [1, 512, 64] cut to
     * [1, s, 64]): the output names s, which x does not; x's strides; in x at every s <= 512 */
    r = OK("{\"op\":\"copy\",\"dims\":{\"s\":{\"min\":1,\"max\":512}},\"inputs\":[{\"shape\":[1,512,64],"
           "\"dtype\":\"f16\"}],\"attrs\":{\"shape\":[1,\"s\",64],\"strides\":[32768,64,1]}}");
    CHECK(r.op.output.sym[1] == 1 && r.op.output.shape[1] == 512 && r.op.attrs.copy.stride_sym[1] == 0);
    /* ... and refused where s could pass x's end */
    BAD("{\"op\":\"copy\",\"dims\":{\"s\":{\"min\":1,\"max\":600}},\"inputs\":[{\"shape\":[1,512,64],"
        "\"dtype\":\"f16\"}],\"attrs\":{\"shape\":[1,\"s\",64],\"strides\":[32768,64,1]}}", 422, "invalid_field",
        "attrs");
    /* a head permute with a named offset: [b, 2, s, 64][:, 1] */
    r = OK("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",2,\"s\",64],\"dtype\":\"f16\"}],"
           "\"attrs\":{\"shape\":[\"b\",\"s\",64],\"strides\":[\"128*s\",64,1],\"offset\":\"64*s\"}}");
    CHECK(r.op.attrs.copy.offset == 64 * 512 && r.op.attrs.copy.offset_sym == 2 && r.op.output.sym[1] == 2);
    c = tuner_op_canonical_json(&r.op);
    CHECK(c && strstr(c, "\"offset\":\"64*s\""));
    free(c);
    /* the default shape and strides: x's, dense (a product of names) */
    r = OK("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}]}");
    CHECK(r.op.output.sym[0] == 1 && r.op.output.sym[1] == 2 && r.op.attrs.copy.stride_sym[0] == 2 &&
          r.op.attrs.copy.strides[0] == 64 * 512);
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"strides\":[\"64*t\",64,1]}}", 422, "invalid_field", "attrs.strides[0]");
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"strides\":[\"64*s*s\",64,1]}}", 422, "invalid_field", "attrs.strides[0]");
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"strides\":[\"64*\",64,1]}}", 422, "invalid_field", "attrs.strides[0]");
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"shape\":[\"b\",\"b\",64]}}", 422, "invalid_field", "attrs.shape[1]");
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",512,64],\"dtype\":\"f16\"},{\"shape\":[64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"shape\":[\"b\",\"s\",64]},\"epilogue\":[{\"op\":\"add\",\"input\":1}]}", 422, "invalid_field",
        "attrs.strides[0]"); /* the default strides follow the output's s, which x does not name */
    /* a stride fixed at the max: at b=2, s=1 it reads past x */
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"strides\":[32768,64,1]}}", 422, "invalid_field", "attrs");
    BAD("{\"op\":\"copy\"," DBS ",\"inputs\":[{\"shape\":[\"b\",\"s\",64],\"dtype\":\"f16\"}],"
        "\"attrs\":{\"shape\":[\"b\",\"s\",66],\"pad_lower\":[0,0,1],\"pad_upper\":[0,0,1]}}", 422, "invalid_field",
        "attrs.pad_lower");
#undef DBS
}


/* FP8 (issue 41): f8e4m3/f8e5m2 as matmul's A and B only, out_dtype, scales as anchor inputs after
 * A and B, targets and layouts the kernels serve, the cache key by dtype, scale mode and out_dtype. */
#define F8_A(dt) "{\"shape\":[128,256],\"dtype\":\"" dt "\"}"
#define F8_B(dt) "{\"shape\":[64,256],\"dtype\":\"" dt "\"}"
#define F8_TB "\"trans_b\":true"
#define F8_ARCH ",\"arch\":\"sm_90a\"}"
static void test_fp8(void)
{
    /* the pairs, every spelling, the default output dtype */
    proto_kernel_request r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "}" F8_ARCH);
    CHECK(r.op.inputs[0].dtype == TUNER_F8E4M3 && r.op.output.dtype == TUNER_BF16 && r.op.n_anchor_inputs == 2);
    CHECK(r.op.output.shape[0] == 128 && r.op.output.shape[1] == 64 && tuner_dtype_size(TUNER_F8E4M3) == 1);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("float8_e4m3fn") "," F8_B("float8_e5m2") "],\"attrs\":{" F8_TB
           ",\"out_dtype\":\"f16\"}" F8_ARCH);
    CHECK(r.op.inputs[1].dtype == TUNER_F8E5M2 && r.op.output.dtype == TUNER_F16);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("e5m2") "," F8_B("e4m3") "],\"attrs\":{" F8_TB ",\"out_dtype\":\"f32\"}" F8_ARCH);
    CHECK(r.op.inputs[0].dtype == TUNER_F8E5M2 && r.op.output.dtype == TUNER_F32);
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e5m2") "," F8_B("f8e5m2") "],\"attrs\":{" F8_TB "}" F8_ARCH, 422,
        "invalid_field", "inputs[1].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f16") "],\"attrs\":{" F8_TB "}" F8_ARCH, 422, "invalid_field",
        "inputs[1].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m2") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "}" F8_ARCH, 422, "unknown_dtype",
        "inputs[0].dtype");
    /* out_dtype: FP8 only, a float the kernels write */
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB ",\"out_dtype\":\"f8e4m3\"}" F8_ARCH,
        422, "invalid_field", "attrs.out_dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB ",\"out_dtype\":\"i32\"}" F8_ARCH,
        422, "invalid_field", "attrs.out_dtype");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":{\"out_dtype\":\"f32\"}}", 422, "invalid_field", "attrs.out_dtype");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":{\"scale_a\":\"tensor\"}}", 422, "invalid_field", "attrs.scale_a");
    /* scales: tensor, row of A, column of B, as f32 anchor inputs after A and B */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"},"
           "{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"tensor\",\"scale_b\":\"tensor\"}" F8_ARCH);
    CHECK(r.op.n_anchor_inputs == 4 && r.op.attrs.matmul.scale_a == TUNER_SCALE_TENSOR &&
          r.op.attrs.matmul.scale_b == TUNER_SCALE_TENSOR);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,1],\"dtype\":\"f32\"},"
           "{\"shape\":[64],\"dtype\":\"f32\"},{\"shape\":[64],\"dtype\":\"f16\"}],\"attrs\":{" F8_TB
           ",\"scale_a\":\"row\",\"scale_b\":\"col\"},\"epilogue\":[{\"op\":\"bias\",\"input\":4},{\"op\":\"gelu\"}]" F8_ARCH);
    CHECK(r.op.n_anchor_inputs == 4 && r.op.n_inputs == 5 && r.op.attrs.matmul.scale_a == TUNER_SCALE_ROW &&
          r.op.epilogue.n == 2);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1,64],\"dtype\":\"f32\"}],"
           "\"attrs\":{" F8_TB ",\"scale_b\":\"col\"}" F8_ARCH);
    CHECK(r.op.n_anchor_inputs == 3 && r.op.attrs.matmul.scale_a == TUNER_SCALE_NONE);
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB ",\"scale_a\":\"tensor\"}" F8_ARCH,
        422, "invalid_field", "inputs");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f16\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"tensor\"}" F8_ARCH, 422, "invalid_field", "inputs[2].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"tensor\"}" F8_ARCH, 422, "shape_mismatch", "inputs[2].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[64],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"row\"}" F8_ARCH, 422, "shape_mismatch", "inputs[2].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[64,1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_b\":\"col\"}" F8_ARCH, 422, "shape_mismatch", "inputs[2].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_b\":\"row\"}" F8_ARCH, 422, "invalid_field", "attrs.scale_b");
    /* per-block: A's [M, ceil(K/128)] and B's [ceil(N/128), ceil(K/128)], together, unbatched */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,2],\"dtype\":\"f32\"},"
           "{\"shape\":[1,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"block\",\"scale_b\":\"block\"}" F8_ARCH);
    CHECK(r.op.n_anchor_inputs == 4 && r.op.attrs.matmul.scale_a == TUNER_SCALE_BLOCK);
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"block\"}" F8_ARCH, 422, "invalid_field", "attrs.scale_b");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"},{\"shape\":[1,2],"
        "\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"tensor\",\"scale_b\":\"block\"}" F8_ARCH, 422, "invalid_field",
        "attrs.scale_a");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,1],\"dtype\":\"f32\"},"
        "{\"shape\":[1,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"block\",\"scale_b\":\"block\"}" F8_ARCH, 422,
        "shape_mismatch", "inputs[2].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,2],\"dtype\":\"f32\"},"
        "{\"shape\":[2,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"block\",\"scale_b\":\"block\"}" F8_ARCH, 422,
        "shape_mismatch", "inputs[3].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[2,128,256],\"dtype\":\"f8e4m3\"}," F8_B("f8e4m3") ",{\"shape\":[128,2],"
        "\"dtype\":\"f32\"},{\"shape\":[1,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"block\",\"scale_b\":\"block\"}"
        F8_ARCH, 422, "unsupported", "attrs.scale_a");
    /* a fused step may not read a scale; FP8 nowhere else */
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"tensor\"},\"epilogue\":[{\"op\":\"mul\",\"input\":2}]" F8_ARCH, 422, "invalid_field", "epilogue[0].input");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[64],\"dtype\":\"f8e4m3\"}],\"attrs\":{" F8_TB
        "},\"epilogue\":[{\"op\":\"bias\",\"input\":2}]" F8_ARCH, 422, "invalid_field", "inputs[2].dtype");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB
        "},\"prologue\":[{\"op\":\"relu\",\"input\":0}]" F8_ARCH, 422, "invalid_field", "prologue");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f8e4m3\"}]}", 422, "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"conv2d\",\"inputs\":[{\"shape\":[1,8,8,16],\"dtype\":\"f8e4m3\"},{\"shape\":[16,3,3,16],\"dtype\":"
        "\"f8e4m3\"}]}", 422, "invalid_field", "inputs[0].dtype");
    BAD("{\"op\":\"matmul\"," MM_IN ",\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"f8e4m3\"}]}", 422, "invalid_field",
        "epilogue[0].dtype");
    BAD("{\"op\":\"softmax\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"}],\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"e5m2\"}]}",
        422, "invalid_field", "epilogue[0].dtype");
    /* elementwise: FP8 inputs decoded for the chain, casts to FP8 anywhere, the last one the output's */
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f8e5m2\"}],\"attrs\":{\"fn\":\"relu\"}}");
    CHECK(r.op.output.dtype == TUNER_F8E5M2);
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f16\"},{\"shape\":[1],\"dtype\":\"f32\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"mul\",\"input\":1},{\"op\":\"cast\",\"dtype\":\"f8e4m3\"}]}}");
    CHECK(r.op.output.dtype == TUNER_F8E4M3 && r.op.epilogue.n == 2);
    r = OK("{\"op\":\"elementwise\",\"inputs\":[{\"shape\":[4,8],\"dtype\":\"f8e4m3\"},{\"shape\":[8],\"dtype\":\"f8e5m2\"}],"
           "\"attrs\":{\"ops\":[{\"op\":\"cast\",\"dtype\":\"f8e5m2\"},{\"op\":\"add\",\"input\":1},{\"op\":\"cast\",\"dtype\":\"bf16\"}]}}");
    CHECK(r.op.output.dtype == TUNER_BF16 && r.op.epilogue.n == 3);
    /* quantizing an FP8 matmul's output: divide by the next layer's scale, cast to FP8, last */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[64],\"dtype\":\"bf16\"},"
           "{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB "},\"epilogue\":[{\"op\":\"bias\",\"input\":2},"
           "{\"op\":\"gelu\"},{\"op\":\"div\",\"input\":3},{\"op\":\"cast\",\"dtype\":\"f8e4m3\"}]" F8_ARCH);
    CHECK(r.op.output.dtype == TUNER_F8E4M3 && r.op.attrs.matmul.out_dtype == TUNER_BF16 && r.op.epilogue.n == 4);
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"epilogue\":[{\"op\":"
        "\"cast\",\"dtype\":\"f8e4m3\"},{\"op\":\"relu\"}]" F8_ARCH, 422, "invalid_field", "epilogue[0].dtype");
    /* targets and layouts the kernels serve */
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_80\"}", 422,
        "unsupported", "arch");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_86\"}", 422,
        "unsupported", "arch");
    /* sm_89 and later have FP8 mma.sync (matmul_mma): sm_89, sm_90 without the "a", sm_120 */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e5m2") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_89\"}");
    CHECK(r.op.inputs[1].dtype == TUNER_F8E5M2 && r.opt.target.sm == 89);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_90\"}");
    CHECK(r.opt.target.sm == 90 && !r.opt.target.arch_specific);
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_120\"}");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") ",{\"shape\":[256,64],\"dtype\":\"f8e4m3\"}],\"arch\":\"sm_89\"}", 422,
        "unsupported", "attrs.trans_b");
    /* sm_90a's matmul_wgmma transposes MN-major FP8 operands in the kernel: B [K,N], A [K,M] are
     * accepted there, as long as their rows (N, M) are 16 bytes */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") ",{\"shape\":[256,64],\"dtype\":\"f8e4m3\"}]" F8_ARCH);
    CHECK(!r.op.attrs.matmul.trans_b && r.op.output.shape[0] == 128 && r.op.output.shape[1] == 64);
    r = OK("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,128],\"dtype\":\"f8e4m3\"}," F8_B("f8e4m3") "],\"attrs\":{" F8_TB
           ",\"trans_a\":true}" F8_ARCH);
    CHECK(r.op.attrs.matmul.trans_a && r.op.output.shape[0] == 128 && r.op.output.shape[1] == 64);
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") ",{\"shape\":[256,40],\"dtype\":\"f8e4m3\"}]" F8_ARCH, 422,
        "unsupported", "inputs[1].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,120],\"dtype\":\"f8e4m3\"}," F8_B("f8e4m3") "],\"attrs\":{" F8_TB
        ",\"trans_a\":true}" F8_ARCH, 422, "unsupported", "inputs[0].shape");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[256,128],\"dtype\":\"f8e4m3\"}," F8_B("f8e4m3") "],\"attrs\":{" F8_TB
        ",\"trans_a\":true},\"arch\":\"sm_90\"}", 422, "unsupported", "attrs.trans_a");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,40],\"dtype\":\"f8e4m3\"},{\"shape\":[64,40],\"dtype\":\"f8e4m3\"}],"
        "\"attrs\":{" F8_TB "}" F8_ARCH, 422, "unsupported", "inputs[0].shape");
    {
        proto_kernel_request q;
        proto_error e;
        CHECK(parse("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "},\"arch\":\"sm_80\"}",
                    &q, &e) == -EINVAL);
        CHECK(strstr(e.message, "fp8 needs sm_89 mma.sync or sm_90a wgmma") != NULL);
    }
    /* The quantize step's amax (delayed scaling): an f32 [1] input that the kernel raises to the
     * largest |value| the cast receives; keyed; refused by its field where it does not fit. */
#define F8_Q(extra) "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"}" extra "]," \
                    "\"attrs\":{" F8_TB "},\"epilogue\":[{\"op\":\"div\",\"input\":2},{\"op\":\"cast\",\"dtype\":\"f8e4m3\""
    r = OK(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":3}]" F8_ARCH);
    CHECK(r.op.epilogue.n == 2 && r.op.epilogue.steps[1].amax == 4 && tuner_fp8_amax_input(&r.op) == 3 &&
          r.op.output.dtype == TUNER_F8E4M3 && r.op.n_inputs == 4);
    {
        char *k1 = canon(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":3}]" F8_ARCH);
        char *k2 = canon(F8_Q("") "}]" F8_ARCH);
        CHECK(k1 && k2 && strstr(k1, "{\"amax\":3,\"dtype\":\"f8e4m3\",\"op\":\"cast\"}") && !strstr(k2, "amax"));
        free(k1);
        free(k2);
    }
    BAD(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":7}]" F8_ARCH, 422, "invalid_field", "epilogue[1].amax");
    BAD(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":\"x\"}]" F8_ARCH, 400, "invalid_field", "epilogue[1].amax");
    BAD(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":1}]" F8_ARCH, 422, "invalid_field", "epilogue[1].amax");
    BAD(F8_Q(",{\"shape\":[1],\"dtype\":\"f16\"}") ",\"amax\":3}]" F8_ARCH, 422, "invalid_field", "epilogue[1].amax");
    BAD(F8_Q(",{\"shape\":[2],\"dtype\":\"f32\"}") ",\"amax\":3}]" F8_ARCH, 422, "invalid_field", "epilogue[1].amax");
    BAD(F8_Q("") ",\"amax\":2}]" F8_ARCH, 422, "invalid_field", "epilogue[1].amax"); /* the div reads it */
    BAD(F8_Q(",{\"shape\":[1],\"dtype\":\"f32\"}") ",\"amax\":3}],\"arch\":\"sm_89\"}", 422, "unsupported",
        "epilogue[1].amax");
    BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        "},\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"f16\",\"amax\":2}]" F8_ARCH,
        422, "invalid_field", "epilogue[0].amax");
    BAD("{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,256],\"dtype\":\"f16\"},{\"shape\":[64,256],\"dtype\":\"f16\"},"
        "{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB "},\"epilogue\":[{\"op\":\"cast\",\"dtype\":\"f16\",\"amax\":2}]" F8_ARCH,
        422, "invalid_field", "epilogue[0].amax");
#undef F8_Q
    /* the cache key differs by dtype, scale mode and out_dtype, and equal spellings share one */
    const char *bodies[] = {
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e5m2") "],\"attrs\":{" F8_TB "}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e5m2") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB "}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB ",\"out_dtype\":\"f16\"}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"tensor\"}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_b\":\"tensor\"}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
        ",\"scale_a\":\"row\"}" F8_ARCH,
        "{\"op\":\"matmul\",\"inputs\":[{\"shape\":[128,256],\"dtype\":\"f16\"},{\"shape\":[64,256],\"dtype\":\"f16\"}],"
        "\"attrs\":{" F8_TB "}" F8_ARCH,
    };
    enum { NB = sizeof(bodies) / sizeof(bodies[0]) };
    char *keys[NB];
    for (int i = 0; i < NB; i++)
        keys[i] = canon(bodies[i]);
    for (int i = 0; i < NB; i++)
        for (int j = i + 1; j < NB; j++)
            if (strcmp(keys[i], keys[j]) == 0) {
                fprintf(stderr, "fp8: bodies %d and %d share the key %s\n", i, j, keys[i]);
                failures++;
            }
    CHECK(strstr(keys[4], "\"out_dtype\":\"bf16\",\"scale_a\":\"tensor\",\"scale_b\":\"none\"") != NULL);
    CHECK(strstr(keys[7], "scale_a") == NULL && strstr(keys[7], "out_dtype") == NULL &&
          strstr(keys[7], "fast_accum") == NULL);
    /* fast accumulation: FP8 only, on by default, in the key; per-block scales always promote */
    {
        char *slow = canon("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB
                           ",\"fast_accum\":false}" F8_ARCH);
        CHECK(strstr(keys[0], "\"fast_accum\":true") && strstr(slow, "\"fast_accum\":false"));
        free(slow);
        BAD("{\"op\":\"matmul\"," MM_IN ",\"attrs\":{\"fast_accum\":false}}", 422, "invalid_field", "attrs.fast_accum");
        BAD("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") "],\"attrs\":{" F8_TB ",\"fast_accum\":1}"
            F8_ARCH, 400, "invalid_field", "attrs.fast_accum");
        proto_kernel_request q = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[128,2],"
                                    "\"dtype\":\"f32\"},{\"shape\":[1,2],\"dtype\":\"f32\"}],\"attrs\":{" F8_TB
                                    ",\"scale_a\":\"block\",\"scale_b\":\"block\",\"fast_accum\":true}" F8_ARCH);
        CHECK(!q.op.attrs.matmul.fast_accum);
    }
    char *same = canon("{\"op\":\"matmul\",\"inputs\":[" F8_A("float8_e4m3fn") "," F8_B("e4m3") "],\"attrs\":{" F8_TB
                       ",\"out_dtype\":\"bfloat16\",\"scale_a\":\"none\"}" F8_ARCH);
    CHECK(strcmp(same, keys[0]) == 0);
    free(same);
    for (int i = 0; i < NB; i++)
        free(keys[i]);
    /* stripping the fusion keeps the scales and the anchor's output dtype */
    r = OK("{\"op\":\"matmul\",\"inputs\":[" F8_A("f8e4m3") "," F8_B("f8e4m3") ",{\"shape\":[1],\"dtype\":\"f32\"},"
           "{\"shape\":[64],\"dtype\":\"f16\"}],\"attrs\":{" F8_TB ",\"scale_a\":\"tensor\",\"out_dtype\":\"f16\"},"
           "\"epilogue\":[{\"op\":\"bias\",\"input\":3},{\"op\":\"cast\",\"dtype\":\"f32\"}]" F8_ARCH);
    CHECK(r.op.output.dtype == TUNER_F32);
    tuner_op st;
    tuner_op_strip_fusion(&r.op, &st);
    CHECK(st.n_inputs == 3 && st.output.dtype == TUNER_F16 && st.epilogue.n == 0);
}

int main(int argc, char **argv)
{
    test_fp8();
    test_ops();
    test_layout();
    test_errors();
    test_canonical();
    test_activations();
    test_masks();
    test_pool();
    test_shape_ops();
    test_gather();
    test_attention();
    test_attention_packed();
    test_strip();
    test_error_json();
    test_suggestions();
    test_named_dims();
    test_named_copy();
    if (argc > 1)
        test_examples(argv[1]);
    else {
        fprintf(stderr, "usage: test_request EXAMPLES_DIR\n");
        failures++;
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_request: all passed\n");
    return 0;
}
