/* Fuzz target: the graph parser, the partitioner and the planner on whatever parses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "graph/graph.h"
#include "tests/fuzz/fuzz.h"

static void check_error(const proto_error *e)
{
    if (e->status < 400 || e->status > 599 || e->code[0] == '\0' || e->message[0] == '\0')
        abort();
    char *j = proto_error_to_json(e);
    cJSON *p = j ? cJSON_Parse(j) : NULL;
    if (!p)
        abort();
    cJSON_Delete(p);
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    graph_request rq;
    proto_error err;
    if (graph_request_parse((const char *)data, size, &rq, &err) != 0) {
        check_error(&err);
        return 0;
    }
    graph_plan p;
    if (graph_partition(&rq.g, &rq.opt.target, &p, &err) != 0) {
        check_error(&err);
        graph_request_free(&rq);
        return 0;
    }
    /* Every kernel reads only tensors that exist; every forward kernel's inputs are ready before
     * it runs (the order is a topological one). */
    uint64_t *ws = calloc((size_t)p.n_kernels + 1, sizeof(uint64_t));
    const cJSON **sets = calloc((size_t)p.n_kernels + 1, sizeof(*sets));
    if (!ws || !sets)
        abort();
    for (int k = 0; k < p.n_kernels; k++)
        ws[k] = (uint64_t)(k % 3) * 1000;
    if (graph_plan_place(&p, ws) != 0)
        abort();
    /* Arena buffers alive at the same step never overlap. */
    for (int a = 0; a < p.n_tensors; a++)
        for (int b = a + 1; b < p.n_tensors; b++) {
            const graph_plan_tensor *x = &p.tensors[a], *y = &p.tensors[b];
            bool ax = x->region == GRAPH_REGION_ARENA || x->region == GRAPH_REGION_WORKSPACE;
            bool ay = y->region == GRAPH_REGION_ARENA || y->region == GRAPH_REGION_WORKSPACE;
            if (!ax || !ay || x->first < 0 || y->first < 0)
                continue;
            bool live = x->first <= y->last && y->first <= x->last;
            bool overlap = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            if (live && overlap && x->bytes && y->bytes)
                abort();
            if (x->offset + x->bytes > p.arena_bytes)
                abort();
        }
    char *json = NULL;
    if (graph_plan_render(&rq, &p, sets, "k", &json) != 0 || !json)
        abort();
    cJSON *o = cJSON_Parse(json);
    if (!o)
        abort();
    cJSON_Delete(o);
    free(json);
    free(ws);
    free(sets);
    graph_plan_free(&p);
    graph_request_free(&rq);
    return 0;
}
