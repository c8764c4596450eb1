/* Fuzz target: the kernel request parser and the canonical JSON of whatever it accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto/request.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    proto_kernel_request req;
    proto_error err;

    int r = proto_kernel_request_parse((const char *)data, size, &req, &err);
    if (r != 0) {
        /* Every refusal is a well-formed error. */
        if (err.status < 400 || err.status > 599 || err.code[0] == '\0' || err.message[0] == '\0')
            abort();
        char *j = proto_error_to_json(&err);
        if (!j)
            abort();
        cJSON *p = cJSON_Parse(j);
        if (!p)
            abort();
        cJSON_Delete(p);
        free(j);
        return 0;
    }
    /* Whatever is accepted obeys op/op.h and has a stable, valid canonical form. */
    const tuner_op *op = &req.op;
    if (op->n_inputs < 1 || op->n_inputs > TUNER_MAX_INPUTS || op->n_anchor_inputs < 1 ||
        op->n_anchor_inputs > op->n_inputs || op->output.rank < 1 ||
        op->output.rank > TUNER_MAX_RANK || op->epilogue.n > TUNER_MAX_STEPS)
        abort();
    for (int i = 0; i < op->n_inputs; i++)
        if (op->inputs[i].rank < 1 || tuner_tensor_numel(&op->inputs[i]) > PROTO_MAX_NUMEL)
            abort();
    for (int i = 0; i < op->epilogue.n; i++) {
        int ops[2];
        for (int j = tuner_ew_operands(&op->epilogue.steps[i], ops) - 1; j >= 0; j--)
            if (ops[j] < 0 || ops[j] >= op->n_inputs)
                abort();
    }
    char *a = tuner_op_canonical_json(op);
    char *b = tuner_op_canonical_json(op);
    if (!a || !b || strcmp(a, b) != 0)
        abort();
    cJSON *p = cJSON_Parse(a);
    if (!p)
        abort();
    cJSON_Delete(p);
    tuner_op s;
    tuner_op_strip_fusion(op, &s);
    char *c = tuner_op_canonical_json(&s);
    if (!c)
        abort();
    free(a);
    free(b);
    free(c);
    return 0;
}
