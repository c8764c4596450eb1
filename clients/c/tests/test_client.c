/* clients/c/tests/test_client.c - unit tests of libhidet-client (suite unit, client):
 * address parsing, the request builder (its JSON parsed back and compared), kernel-set and job
 * parsing from canned answers, and the transport against a scripted one-thread HTTP server on a
 * Unix socket (request line, headers, body, keep-alive reuse, error answers, connect failure).
 */
#include "hidet/client.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cJSON.h>

#include "tests/check.h"

#define KEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OPKEY "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void test_address(void)
{
    hidet_address a;

    CHECK(hidet_address_parse("unix:/run/hidetd/hidetd.sock", &a) == 0);
    CHECK(a.kind == HIDET_ADDRESS_UNIX && strcmp(a.socket_path, "/run/hidetd/hidetd.sock") == 0);
    CHECK(strcmp(a.base_url, "http://localhost") == 0);
    CHECK(hidet_address_parse("/tmp/h.sock", &a) == 0 && a.kind == HIDET_ADDRESS_UNIX &&
          strcmp(a.socket_path, "/tmp/h.sock") == 0);
    CHECK(hidet_address_parse("./h.sock", &a) == 0 && strcmp(a.socket_path, "./h.sock") == 0);
    /* A bare file name is a path in the working directory, as it is to hidetd --socket. */
    CHECK(hidet_address_parse("hidetd.sock", &a) == 0 && a.kind == HIDET_ADDRESS_UNIX &&
          strcmp(a.socket_path, "hidetd.sock") == 0);
    CHECK(hidet_address_parse("http://127.0.0.1:8734", &a) == 0);
    CHECK(a.kind == HIDET_ADDRESS_HTTP && strcmp(a.base_url, "http://127.0.0.1:8734") == 0);
    CHECK(hidet_address_parse("http://tuner:80/", &a) == 0 &&
          strcmp(a.base_url, "http://tuner:80") == 0);
    CHECK(hidet_address_parse("https://tuner.example/api//", &a) == 0 &&
          strcmp(a.base_url, "https://tuner.example/api") == 0);

    /* Refused: untouched output. */
    memset(&a, 0x5a, sizeof(a));
    CHECK(hidet_address_parse("", &a) == -EINVAL);
    CHECK(hidet_address_parse(NULL, &a) == -EINVAL);
    CHECK(hidet_address_parse("localhost:8734", &a) == -EINVAL);
    CHECK(hidet_address_parse("ftp://host/x", &a) == -EINVAL);
    CHECK(hidet_address_parse("http://", &a) == -EINVAL);
    CHECK(hidet_address_parse("http://:80", &a) == -EINVAL);
    CHECK(hidet_address_parse("http://host/a b", &a) == -EINVAL);
    CHECK(hidet_address_parse("http://host\r\nX: y", &a) == -EINVAL);
    char longp[200];
    memset(longp, 'a', sizeof(longp));
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    CHECK(hidet_address_parse(longp, &a) == -EINVAL);
    CHECK(((unsigned char *)&a)[0] == 0x5a);
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static void test_builder(void)
{
    hidet_request *r = NULL;
    hidet_step *s = NULL;
    char *json = NULL;
    const int64_t a[] = {128, 64}, b[] = {64, 256}, c[] = {256}, pads[] = {1, 2};

    CHECK(hidet_request_new(NULL, &r) == -EINVAL);
    CHECK(hidet_request_new("matmul", &r) == 0);
    CHECK(hidet_request_add_input(r, a, 2, "f16") == 0);
    CHECK(hidet_request_add_input(r, b, 2, "f16") == 0);
    CHECK(hidet_request_add_input(r, c, 1, "f16") == 0);
    CHECK(hidet_request_add_input(r, c, 9, "f16") == -EINVAL);
    CHECK(hidet_request_add_input(r, c, 1, NULL) == -EINVAL);
    CHECK(hidet_request_attr_bool(r, "trans_a", true) == 0);
    CHECK(hidet_request_attr_bool(r, "trans_a", false) == 0); /* replaces */
    CHECK(hidet_request_attr_bool(r, "trans_b", false) == 0);
    CHECK(hidet_request_attr_int(r, "groups", 4) == 0);
    CHECK(hidet_request_attr_double(r, "eps", 1e-5) == 0);
    CHECK(hidet_request_attr_double(r, "eps2", NAN) == -EINVAL);
    CHECK(hidet_request_attr_int_array(r, "pad", pads, 2) == 0);
    CHECK(hidet_request_attr_string(r, "layout", "nhwc\"x") == 0);
    CHECK(hidet_request_prologue(r, 0, "scale", &s) == 0 && s);
    CHECK(hidet_step_double(s, "value", 0.5) == 0);
    CHECK(hidet_step_string(s, "op", "evil") == -EINVAL);
    CHECK(hidet_request_epilogue(r, "bias", &s) == 0);
    CHECK(hidet_step_int(s, "input", 2) == 0);
    CHECK(hidet_request_epilogue(r, "gelu", &s) == 0);
    CHECK(hidet_step_string(s, "approximate", "tanh") == 0);
    CHECK(hidet_request_prologue(r, -1, "scale", NULL) == -EINVAL);
    CHECK(hidet_request_set_arch(r, "sm_90a") == 0);
    CHECK(hidet_request_set_tune(r, "measure") == 0);
    CHECK(hidet_request_set_wait(r, false) == 0);
    CHECK(hidet_request_set_priority(r, "background") == 0);
    CHECK(hidet_request_set_budget(r, 30, 64) == 0);
    CHECK(hidet_request_json(r, &json) == 0 && json);

    cJSON *j = cJSON_Parse(json);
    CHECK(cJSON_IsObject(j));
    CHECK(cJSON_IsString(get(j, "op")) && strcmp(get(j, "op")->valuestring, "matmul") == 0);
    const cJSON *in = get(j, "inputs");
    CHECK(cJSON_GetArraySize(in) == 3);
    const cJSON *in0 = cJSON_GetArrayItem(in, 0), *in2 = cJSON_GetArrayItem(in, 2);
    CHECK(cJSON_GetArraySize(get(in0, "shape")) == 2 &&
          cJSON_GetArrayItem(get(in0, "shape"), 0)->valuedouble == 128 &&
          cJSON_GetArrayItem(get(in0, "shape"), 1)->valuedouble == 64);
    CHECK(strcmp(get(in0, "dtype")->valuestring, "f16") == 0);
    CHECK(cJSON_GetArraySize(get(in2, "shape")) == 1);
    const cJSON *at = get(j, "attrs");
    CHECK(cJSON_IsFalse(get(at, "trans_a")) && cJSON_IsFalse(get(at, "trans_b")));
    CHECK(cJSON_GetArraySize(at) == 6);
    CHECK(get(at, "groups")->valuedouble == 4 && get(at, "eps")->valuedouble == 1e-5);
    CHECK(cJSON_GetArraySize(get(at, "pad")) == 2 &&
          cJSON_GetArrayItem(get(at, "pad"), 1)->valuedouble == 2);
    CHECK(strcmp(get(at, "layout")->valuestring, "nhwc\"x") == 0);
    const cJSON *pro = get(j, "prologue"), *epi = get(j, "epilogue");
    CHECK(cJSON_GetArraySize(pro) == 1 && cJSON_GetArraySize(epi) == 2);
    const cJSON *p0 = cJSON_GetArrayItem(pro, 0);
    CHECK(get(p0, "input")->valuedouble == 0 && strcmp(get(p0, "op")->valuestring, "scale") == 0 &&
          get(p0, "value")->valuedouble == 0.5);
    const cJSON *e0 = cJSON_GetArrayItem(epi, 0), *e1 = cJSON_GetArrayItem(epi, 1);
    CHECK(strcmp(get(e0, "op")->valuestring, "bias") == 0 && get(e0, "input")->valuedouble == 2);
    CHECK(strcmp(get(e1, "op")->valuestring, "gelu") == 0 &&
          strcmp(get(e1, "approximate")->valuestring, "tanh") == 0 && !get(e1, "input"));
    CHECK(strcmp(get(j, "arch")->valuestring, "sm_90a") == 0);
    CHECK(strcmp(get(j, "tune")->valuestring, "measure") == 0);
    CHECK(cJSON_IsFalse(get(j, "wait")));
    CHECK(strcmp(get(j, "priority")->valuestring, "background") == 0);
    CHECK(get(get(j, "budget"), "seconds")->valuedouble == 30 &&
          get(get(j, "budget"), "candidates")->valuedouble == 64);
    cJSON_Delete(j);
    free(json);
    hidet_request_free(r);

    /* A minimal request carries only what was set: the daemon's defaults apply. */
    CHECK(hidet_request_new("softmax", &r) == 0);
    CHECK(hidet_request_json(r, &json) == 0);
    CHECK(json && strcmp(json, "{\"op\":\"softmax\",\"inputs\":[]}") == 0);
    free(json);
    CHECK(hidet_request_free(r) == NULL);
    CHECK(hidet_request_free(NULL) == NULL);
}

static const char canned_set[] =
    "{\"key\":\"" KEY "\",\"op_key\":\"" OPKEY "\",\"cached\":true,\"origin\":\"remote\","
    "\"measured\":false,\"warning\":\"no GPU: ranked by the cost model\",\"op\":\"matmul\",\"arch\":\"sm_90\","
    "\"output\":{\"shape\":[128,256],\"dtype\":\"f16\"},\"workspace_bytes\":4096,"
    "\"kernels\":[{\"name\":\"hidet_matmul_0\",\"arch\":\"sm_90\",\"grid\":[2,4,1],"
    "\"block\":[128,1,1],\"shared_bytes\":49152,\"params\":["
    "{\"index\":0,\"buffer\":\"input0\",\"type\":\"pointer\"},"
    "{\"index\":1,\"buffer\":\"input1\",\"type\":\"pointer\"},"
    "{\"index\":2,\"buffer\":\"input2\",\"type\":\"pointer\"},"
    "{\"index\":3,\"buffer\":\"workspace\",\"type\":\"pointer\"},"
    "{\"index\":4,\"buffer\":\"output\",\"type\":\"pointer\"}],"
    "\"ptx_url\":\"/v1/kernels/" KEY "/ptx\",\"cubin_url\":\"/v1/kernels/" KEY "/cubin\","
    "\"latency_us\":null},"
    "{\"name\":\"hidet_reduce_1\",\"arch\":\"sm_90\",\"grid\":[1,1,1],\"block\":[256,1,1],"
    "\"shared_bytes\":0,\"params\":[{\"index\":0,\"buffer\":\"workspace\",\"type\":\"pointer\"},"
    "{\"index\":1,\"buffer\":\"output\",\"type\":\"pointer\"},"
    "{\"index\":2,\"buffer\":\"input1\",\"type\":\"tensor_map\",\"tensor_map\":{\"dtype\":\"bf16\","
    "\"dims\":[256,64,3],\"strides\":[512,32768],\"box\":[64,128,1],\"element_strides\":[1,1,1],"
    "\"swizzle\":128,\"l2_promotion\":256,\"oob_fill\":\"nan\"}},"
    "{\"index\":3,\"buffer\":\"input0\",\"type\":\"tensor_map\",\"tensor_map\":{\"mode\":\"im2col\","
    "\"dtype\":\"f16\",\"dims\":[64,10,13,3],\"strides\":[128,1280,16640],\"element_strides\":[1,1,2,1],"
    "\"lower_corner\":[-2,-1],\"upper_corner\":[-6,-1],\"channels_per_pixel\":64,\"pixels_per_column\":128,"
    "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}}],\"latency_us\":3.5}],"
    "\"latency_us\":null,\"predicted_us\":10.2,"
    "\"schedule\":{\"template\":\"matmul_mma\",\"params\":{\"block_m\":128}}}";

static void test_parse_set(void)
{
    hidet_kernel_set *s = NULL;
    hidet_error e;

    /* A daemon from before "origin": parsed, origin "". */
    const char *field = "\"origin\":\"remote\",";
    char *old = strdup(canned_set);
    char *o = old ? strstr(old, field) : NULL;
    CHECK(o != NULL);
    if (o) {
        memmove(o, o + strlen(field), strlen(o + strlen(field)) + 1);
        CHECK(hidet_kernel_set_parse(old, strlen(old), &s, &e) == 0 && s && s->origin[0] == '\0');
        hidet_kernel_set_free(s);
        s = NULL;
    }
    free(old);

    CHECK(hidet_kernel_set_parse(canned_set, strlen(canned_set), &s, &e) == 0);
    if (!s)
        return;
    CHECK(strcmp(s->key, KEY) == 0 && strcmp(s->op_key, OPKEY) == 0);
    CHECK(s->cached && !s->measured);
    CHECK(strcmp(s->origin, "remote") == 0);
    CHECK(s->warning && strstr(s->warning, "cost model"));
    CHECK(strcmp(s->op, "matmul") == 0 && strcmp(s->arch, "sm_90") == 0);
    CHECK(s->output_rank == 2 && s->output_shape[0] == 128 && s->output_shape[1] == 256 &&
          strcmp(s->output_dtype, "f16") == 0);
    CHECK(s->workspace_bytes == 4096);
    CHECK(s->latency_us < 0 && fabs(s->predicted_us - 10.2) < 1e-9);
    CHECK(s->n_kernels == 2);
    const hidet_kernel *k = &s->kernels[0];
    CHECK(strcmp(k->name, "hidet_matmul_0") == 0 && strcmp(k->arch, "sm_90") == 0);
    CHECK(k->grid[0] == 2 && k->grid[1] == 4 && k->grid[2] == 1);
    CHECK(k->block[0] == 128 && k->block[1] == 1 && k->block[2] == 1);
    CHECK(k->shared_bytes == 49152 && k->latency_us < 0);
    CHECK(k->n_params == 5);
    if (k->n_params == 5) {
        CHECK(k->params[0].kind == HIDET_BUFFER_INPUT && k->params[0].input == 0);
        CHECK(k->params[2].kind == HIDET_BUFFER_INPUT && k->params[2].input == 2);
        CHECK(k->params[3].kind == HIDET_BUFFER_WORKSPACE && k->params[3].input == -1);
        CHECK(k->params[4].kind == HIDET_BUFFER_OUTPUT && k->params[4].index == 4);
        CHECK(strcmp(k->params[4].type, "pointer") == 0);
    }
    CHECK(k->ptx_url && strstr(k->ptx_url, "/ptx") && k->cubin_url);
    CHECK(s->kernels[1].latency_us == 3.5 && s->kernels[1].ptx_url == NULL);
    /* The second kernel's tensor maps, as cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col take
     * them. */
    CHECK(s->kernels[1].n_params == 4 && !s->kernels[0].params[4].is_tensor_map);
    if (s->kernels[1].n_params == 4) {
        const hidet_param *p = &s->kernels[1].params[2];
        const hidet_tensor_map *m = &p->tensor_map;
        CHECK(p->is_tensor_map && !strcmp(p->type, "tensor_map") && p->kind == HIDET_BUFFER_INPUT && p->input == 1);
        CHECK(!strcmp(m->dtype, "bf16") && m->rank == 3 && m->dims[0] == 256 && m->dims[2] == 3 &&
              m->strides[0] == 512 && m->strides[1] == 32768 && m->box[1] == 128 && m->element_strides[2] == 1 &&
              m->swizzle == 128 && m->l2_promotion == 256 && m->oob_nan && !m->im2col &&
              m->channels_per_pixel == 0 && m->lower_corner[0] == 0);
        p = &s->kernels[1].params[3];
        m = &p->tensor_map;
        CHECK(p->is_tensor_map && p->kind == HIDET_BUFFER_INPUT && p->input == 0 && m->im2col);
        CHECK(!strcmp(m->dtype, "f16") && m->rank == 4 && m->dims[1] == 10 && m->dims[3] == 3 &&
              m->strides[2] == 16640 && m->element_strides[2] == 2 && m->box[0] == 0 && m->lower_corner[0] == -2 &&
              m->lower_corner[1] == -1 && m->upper_corner[0] == -6 && m->upper_corner[1] == -1 &&
              m->channels_per_pixel == 64 && m->pixels_per_column == 128 && !m->oob_nan);
    }
    CHECK(s->json && strcmp(s->json, canned_set) == 0);
    CHECK(hidet_kernel_set_free(s) == NULL);
    CHECK(hidet_kernel_set_free(NULL) == NULL);

    /* Broken answers are refused, never half-parsed. */
    static const char *const bad[] = {
        "", "[]", "{\"key\":\"abc\",\"kernels\":[]}",
        "{\"key\":\"" KEY "\"}",
        "{\"key\":\"" KEY "\",\"kernels\":[]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1],\"block\":[1,1,1]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,-1],\"block\":[1,1,1]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"grid\":[1,1,1],\"block\":[1,1,1]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"params\":[{\"index\":0,\"buffer\":\"inputX\"}]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1]}],"
        "\"output\":{\"shape\":[1,2,3,4,5,6,7,8,9]}}",
        /* a tensor map without its description, and one the encoder would refuse (box row
         * of 256 bytes under a 128-byte swizzle) */
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"tensor_map\"}]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"tensor_map\",\"tensor_map\":{"
        "\"dtype\":\"f16\",\"dims\":[256],\"strides\":[],\"box\":[128],\"element_strides\":[1],"
        "\"swizzle\":128,\"l2_promotion\":0,\"oob_fill\":\"zero\"}}]}]}",
        /* an im2col map with a box, and one whose bounding box holds no pixel */
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"tensor_map\",\"tensor_map\":{"
        "\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[64,10,13,3],\"strides\":[128,1280,16640],"
        "\"box\":[64,1,1,1],\"element_strides\":[1,1,1,1],\"lower_corner\":[-1,-1],\"upper_corner\":[-1,-1],"
        "\"channels_per_pixel\":64,\"pixels_per_column\":128,\"swizzle\":128,\"l2_promotion\":0,"
        "\"oob_fill\":\"zero\"}}]}]}",
        "{\"key\":\"" KEY "\",\"kernels\":[{\"name\":\"k\",\"grid\":[1,1,1],\"block\":[1,1,1],"
        "\"params\":[{\"index\":0,\"buffer\":\"input0\",\"type\":\"tensor_map\",\"tensor_map\":{"
        "\"mode\":\"im2col\",\"dtype\":\"f16\",\"dims\":[64,10,13,3],\"strides\":[128,1280,16640],"
        "\"element_strides\":[1,1,1,1],\"lower_corner\":[-1,-1],\"upper_corner\":[-11,-1],"
        "\"channels_per_pixel\":64,\"pixels_per_column\":128,\"swizzle\":128,\"l2_promotion\":0,"
        "\"oob_fill\":\"zero\"}}]}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        s = (hidet_kernel_set *)&e; /* must stay untouched */
        int r = hidet_kernel_set_parse(bad[i], strlen(bad[i]), &s, &e);
        CHECK(r == -EPROTO);
        CHECK(s == (hidet_kernel_set *)&e);
        CHECK(e.message[0] != '\0');
    }
}

static void test_parse_job(void)
{
    static const char job[] =
        "{\"job\":{\"id\":\"17\",\"url\":\"/v1/jobs/17\",\"state\":\"done\",\"op\":\"matmul\","
        "\"arch\":\"sm_90\",\"tune\":\"measure\",\"priority\":\"normal\","
        "\"candidates\":{\"total\":64,\"done\":63,\"failed\":1},\"best_us\":12.5,"
        "\"best_schedule\":{},\"elapsed_s\":1.25,\"waiters\":3,"
        "\"result\":\"/v1/kernels/" KEY "\",\"measured\":true,\"warning\":\"w\"}}";
    static const char failed[] =
        "{\"job\":{\"id\":9,\"state\":\"failed\",\"candidates\":{\"total\":0,\"done\":0,"
        "\"failed\":0},\"best_us\":null,\"error\":{\"code\":\"no_valid_candidate\","
        "\"message\":\"every candidate failed\"}}}";
    hidet_job *j = NULL;
    hidet_error e;

    CHECK(hidet_job_parse(job, strlen(job), &j, &e) == 0);
    if (j) {
        CHECK(strcmp(j->id, "17") == 0 && j->state == HIDET_JOB_DONE);
        CHECK(strcmp(j->op, "matmul") == 0 && strcmp(j->tune, "measure") == 0);
        CHECK(j->total == 64 && j->done == 63 && j->failed == 1);
        CHECK(j->best_us == 12.5 && j->elapsed_s == 1.25 && j->waiters == 3);
        CHECK(j->result && strcmp(j->result_key, KEY) == 0 && j->measured);
        CHECK(j->warning && strcmp(j->warning, "w") == 0 && j->error_message == NULL);
    }
    hidet_job_free(j);
    j = NULL;
    CHECK(hidet_job_parse(failed, strlen(failed), &j, &e) == 0);
    if (j) {
        CHECK(strcmp(j->id, "9") == 0 && j->state == HIDET_JOB_FAILED && j->best_us < 0);
        CHECK(strcmp(j->error_code, "no_valid_candidate") == 0 && j->error_message);
        CHECK(j->result == NULL && j->result_key[0] == '\0');
    }
    hidet_job_free(j);
    j = NULL;
    CHECK(hidet_job_parse("{\"job\":{\"state\":\"done\"}}", 24, &j, &e) == -EPROTO && !j);
    CHECK(hidet_job_free(NULL) == NULL);
    CHECK(strcmp(hidet_job_state_name(HIDET_JOB_CANCELLED), "cancelled") == 0);
}

/* ---- a scripted HTTP server on a Unix socket ----------------------------------------------- */

typedef struct server {
    int listen_fd;
    int connections;          /* accepted so far */
    int n_answers;
    const char *const *answers; /* one full HTTP response per request, in order */
    const size_t *lens;
    char requests[8][4096];   /* what arrived, head and body */
} server;

static void *server_main(void *arg)
{
    server *s = arg;
    int fd = -1, served = 0;

    while (served < s->n_answers) {
        if (fd < 0) {
            fd = accept(s->listen_fd, NULL, NULL);
            if (fd < 0)
                return NULL;
            s->connections++;
        }
        /* Read one request: head, then Content-Length bytes of body. */
        char *buf = s->requests[served];
        size_t len = 0, cap = sizeof(s->requests[0]) - 1;
        char *end = NULL;
        long body = 0;
        for (;;) {
            ssize_t n = read(fd, buf + len, cap - len);
            if (n <= 0) {
                close(fd);
                fd = -1;
                break;
            }
            len += (size_t)n;
            buf[len] = '\0';
            if (!end && (end = strstr(buf, "\r\n\r\n"))) {
                const char *cl = strcasestr(buf, "\r\nContent-Length:");
                body = cl ? strtol(cl + 17, NULL, 10) : 0;
            }
            if (end && (size_t)(end + 4 - buf) + (size_t)body <= len)
                break;
        }
        if (fd < 0)
            continue; /* the client closed; it will reconnect */
        const char *ans = s->answers[served];
        size_t alen = s->lens[served++];
        if (write(fd, ans, alen) != (ssize_t)alen)
            break;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void test_transport(void)
{
    char dir[] = "/tmp/test_client.XXXXXX", path[96], addr[128];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    hidet_client *c = NULL;
    hidet_error e;
    pthread_t th;
    char set_answer[4096];
    static const char err_body[] =
        "{\"error\":{\"code\":\"shape_mismatch\",\"message\":\"K differs\","
        "\"field\":\"inputs[1].shape[0]\"}}";
    char err_answer[512];
    /* The PTX answer holds a NUL byte: bodies are bytes, not C strings. */
    static const char ptx_answer[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\n"
        "a\0b\nc";
    static const char job_body[] =
        "{\"job\":{\"id\":\"5\",\"state\":\"queued\",\"candidates\":{\"total\":8}}}";
    static const char list_body[] =
        "{\"jobs\":[{\"id\":\"1\",\"state\":\"running\"},{\"id\":\"2\",\"state\":\"cancelled\"}]}";
    static const char nf_body[] =
        "{\"error\":{\"code\":\"not_found\",\"message\":\"no such job\",\"field\":\"\"}}";
    char job_answer[512], list_answer[512], notfound[512];
    /* A dispatch table (docs/api.md, "Named dimensions"): one generic set over n, one entry. */
    static const char table_body[] =
        "{\"op\":\"softmax\",\"dims\":{\"n\":{\"min\":1,\"max\":64}},"
        "\"output\":{\"shape\":[\"n\",128],\"dtype\":\"f16\"},\"dispatch\":{\"generic\":"
        "{\"key\":\"" KEY "\",\"output\":{\"shape\":[\"n\",128],\"dtype\":\"f16\"},"
        "\"kernels\":[{\"name\":\"sm\",\"grid\":[{\"dims\":[\"n\"],\"coef\":1,\"div\":4,"
        "\"mul\":1,\"cap\":0},1,1],\"block\":[128,1,1],\"params\":[{\"index\":0,"
        "\"buffer\":\"input0\",\"type\":\"pointer\"},{\"index\":1,\"buffer\":\"output\","
        "\"type\":\"pointer\"},{\"index\":2,\"type\":\"int\",\"dim\":\"n\"}]}]},"
        "\"entries\":[{\"ranges\":{\"n\":[1,16]},\"state\":\"untuned\"}]}}";
    char table_answer[2048];
    snprintf(table_answer, sizeof(table_answer),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(table_body), table_body);

    snprintf(err_answer, sizeof(err_answer),
             "HTTP/1.1 422 Unprocessable Entity\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s", strlen(err_body), err_body);
    snprintf(job_answer, sizeof(job_answer),
             "HTTP/1.1 202 Accepted\r\nContent-Length: %zu\r\n\r\n%s", strlen(job_body), job_body);
    snprintf(list_answer, sizeof(list_answer),
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(list_body), list_body);
    snprintf(notfound, sizeof(notfound),
             "HTTP/1.1 404 Not Found\r\nContent-Length: %zu\r\n\r\n%s", strlen(nf_body), nf_body);
    snprintf(set_answer, sizeof(set_answer),
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(canned_set), canned_set);
    const char *answers[] = {set_answer, err_answer, ptx_answer, job_answer, list_answer, notfound,
                             table_answer, table_answer};
    const size_t lens[] = {strlen(set_answer), strlen(err_answer), sizeof(ptx_answer) - 1,
                           strlen(job_answer), strlen(list_answer), strlen(notfound),
                           strlen(table_answer), strlen(table_answer)};

    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/hidetd.sock", dir);
    snprintf(addr, sizeof(addr), "unix:%s", path);

    /* Nothing listening yet: cannot connect. */
    CHECK(hidet_client_open(addr, "sekrit", &c, &e) == 0);
    /* Only a guard against a hung test; no check depends on time. */
    CHECK(hidet_client_set_timeout(c, 20000) == 0);
    hidet_kernel_set *set = NULL;
    hidet_job *job = NULL;
    int r = hidet_request_kernels(c, "{\"op\":\"matmul\"}", &set, &job, &e);
    CHECK(r == -ECONNREFUSED && e.http_status == 0 && e.message[0]);

    server s = {.answers = answers, .lens = lens, .n_answers = 8};
    s.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    CHECK(bind(s.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(listen(s.listen_fd, 4) == 0);
    CHECK(pthread_create(&th, NULL, server_main, &s) == 0);

    r = hidet_request_kernels(c, "{\"op\":\"matmul\"}", &set, &job, &e);
    CHECK(r == 0 && set && !job);
    if (set)
        CHECK(strcmp(set->key, KEY) == 0 && set->n_kernels == 2);
    set = hidet_kernel_set_free(set);
    CHECK(strncmp(s.requests[0], "POST /v1/kernels HTTP/1.1\r\n", 27) == 0);
    CHECK(strstr(s.requests[0], "\r\nAuthorization: Bearer sekrit\r\n") != NULL);
    CHECK(strstr(s.requests[0], "\r\nContent-Type: application/json\r\n") != NULL);
    CHECK(strstr(s.requests[0], "\r\n\r\n{\"op\":\"matmul\"}") != NULL);

    r = hidet_request_kernels(c, "{\"op\":\"matmul\"}", &set, &job, &e);
    CHECK(r == -EINVAL && e.http_status == 422 && !set);
    CHECK(strcmp(e.code, "shape_mismatch") == 0 && strcmp(e.message, "K differs") == 0 &&
          strcmp(e.field, "inputs[1].shape[0]") == 0);

    char *ptx = NULL;
    size_t len = 0;
    CHECK(hidet_fetch_ptx(c, "not-a-key", &ptx, &len, &e) == -EINVAL && !ptx);
    CHECK(hidet_fetch_ptx(c, KEY, &ptx, &len, &e) == 0);
    CHECK(ptx && len == 5 && memcmp(ptx, "a\0b\nc", 5) == 0 && ptx[5] == '\0');
    free(ptx);
    CHECK(strncmp(s.requests[2], "GET /v1/kernels/" KEY "/ptx HTTP/1.1\r\n", 16 + 64 + 15) == 0);

    r = hidet_request_kernels(c, "{\"op\":\"matmul\",\"wait\":false}", &set, &job, &e);
    CHECK(r == 0 && !set && job);
    if (job)
        CHECK(strcmp(job->id, "5") == 0 && job->state == HIDET_JOB_QUEUED && job->total == 8);
    job = hidet_job_free(job);

    hidet_job **v = NULL;
    size_t n = 0;
    CHECK(hidet_jobs_list(c, &v, &n, &e) == 0 && n == 2);
    if (n == 2)
        CHECK(v[0]->state == HIDET_JOB_RUNNING && v[1]->state == HIDET_JOB_CANCELLED);
    hidet_jobs_free(v, n);

    CHECK(hidet_job_cancel(c, "../etc", NULL, &e) == -EINVAL);
    CHECK(hidet_job_cancel(c, "99", NULL, &e) == -ENOENT && e.http_status == 404);
    CHECK(strcmp(e.code, "not_found") == 0);
    CHECK(strncmp(s.requests[5], "DELETE /v1/jobs/99 HTTP/1.1\r\n", 29) == 0);

    /* A dispatch table: refused as a kernel set (saying what to call), parsed as a table. */
    r = hidet_request_kernels(c, "{\"op\":\"softmax\"}", &set, &job, &e);
    CHECK(r == -EPROTO && !set && !job && strstr(e.message, "hidet_request_dispatch()") &&
          e.http_status == 200, "%s", e.message);
    hidet_dispatch *d = NULL;
    r = hidet_request_dispatch(c, "{\"op\":\"softmax\"}", &d, &e);
    CHECK(r == 0 && d && d->n_entries == 1 && d->entries[0].state == HIDET_ENTRY_UNTUNED,
          "%s", e.message);
    CHECK(strncmp(s.requests[7], "POST /v1/kernels HTTP/1.1\r\n", 27) == 0);
    hidet_dispatch_free(d);

    pthread_join(th, NULL);
    /* Eight requests, one connection: the handle kept it alive. */
    CHECK(s.connections == 1);
    close(s.listen_fd);
    hidet_client_free(c);
    CHECK(hidet_client_free(NULL) == NULL);

    CHECK(hidet_client_open("nonsense:1", NULL, &c, &e) == -EINVAL && e.message[0]);
    unlink(path);
    rmdir(dir);
}

/* The token rule of client.h over TCP against the scripted server: the caller's token, else
 * $HIDETD_TOKEN_FILE's first line, else $HIDETD_TOKEN; the Unix socket reads neither. */
static void test_token(void)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    const char *answers[] = {ok, ok, ok, ok};
    const size_t lens[] = {sizeof(ok) - 1, sizeof(ok) - 1, sizeof(ok) - 1, sizeof(ok) - 1};
    server s = {.answers = answers, .lens = lens, .n_answers = 4};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    char dir[] = "/tmp/test_token.XXXXXX", file[96], url[64];
    hidet_client *c = NULL;
    hidet_error e;
    pthread_t th;
    char *body = NULL, *tok = NULL;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof(file), "%s/token", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("from-file\nsecond line\n", f);
    fclose(f);
    s.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(bind(s.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(listen(s.listen_fd, 4) == 0 && getsockname(s.listen_fd, (struct sockaddr *)&sa, &sl) == 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    CHECK(pthread_create(&th, NULL, server_main, &s) == 0);

    /* 1. $HIDETD_TOKEN alone; 2. $HIDETD_TOKEN_FILE wins over it; 3. the caller's token wins;
     * 4. "" sends none. */
    const char *want[] = {"Bearer from-env", "Bearer from-file", "Bearer given", NULL};
    const char *given[] = {NULL, NULL, "given", ""};
    setenv("HIDETD_TOKEN", "from-env", 1);
    unsetenv("HIDETD_TOKEN_FILE");
    for (int i = 0; i < 4; i++) {
        if (i == 1)
            setenv("HIDETD_TOKEN_FILE", file, 1);
        CHECK(hidet_client_open(url, given[i], &c, &e) == 0);
        hidet_client_set_timeout(c, 20000);
        CHECK(hidet_get(c, "/v1/status", &body, NULL, &e) == 0);
        free(body);
        body = NULL;
        c = hidet_client_free(c);
        char *auth = strcasestr(s.requests[i], "\r\nAuthorization: ");
        if (want[i])
            CHECK(auth && strncmp(auth + 17, want[i], strlen(want[i])) == 0 &&
                  auth[17 + strlen(want[i])] == '\r');
        else
            CHECK(auth == NULL);
    }
    pthread_join(th, NULL);
    close(s.listen_fd);

    CHECK(hidet_token_from_file(file, &tok, &e) == 0 && tok && strcmp(tok, "from-file") == 0);
    free(tok);
    tok = NULL;
    /* A token file that cannot be read is an error naming it, over TCP; never over Unix. */
    char absent[128];
    snprintf(absent, sizeof(absent), "%s/absent", dir);
    setenv("HIDETD_TOKEN_FILE", absent, 1);
    CHECK(hidet_client_open(url, NULL, &c, &e) == -ENOENT && !c &&
          strstr(e.message, "$HIDETD_TOKEN_FILE") && strstr(e.message, absent));
    CHECK(hidet_default_token(&tok, &e) == -ENOENT && !tok);
    CHECK(hidet_client_open("unix:/nonexistent/h.sock", NULL, &c, &e) == 0);
    c = hidet_client_free(c);
    f = fopen(file, "w");
    if (f)
        fclose(f);
    CHECK(hidet_token_from_file(file, &tok, &e) == -EINVAL && strstr(e.message, "empty"));
    unsetenv("HIDETD_TOKEN_FILE");
    CHECK(hidet_default_token(&tok, &e) == 0 && tok && strcmp(tok, "from-env") == 0);
    free(tok);
    unsetenv("HIDETD_TOKEN");
    CHECK(hidet_default_token(&tok, &e) == 0 && tok == NULL);
    unlink(file);
    rmdir(dir);
}

/* hidet_default_address(): each rule of client.h in turn, with files made in a temporary dir. */
static void test_default_address(void)
{
    char dir[] = "/tmp/hidet-default-XXXXXX", path[128], *a = NULL;
    bool system = access("/run/hidetd/hidetd.sock", F_OK) == 0;

    CHECK(mkdtemp(dir) != NULL);
    CHECK(hidet_default_address(NULL) == -EINVAL);
    setenv("HIDETD_SOCKET", "unix:/x/y.sock", 1);
    setenv("XDG_RUNTIME_DIR", dir, 1);
    CHECK(hidet_default_address(&a) == 0 && strcmp(a, "unix:/x/y.sock") == 0);
    free(a);
    /* An empty variable counts as unset. */
    setenv("HIDETD_SOCKET", "", 1);
    snprintf(path, sizeof(path), "%s/hidetd.sock", dir);
    CHECK(hidet_default_address(&a) == 0 && strcmp(a, system ? "/run/hidetd/hidetd.sock" : path) == 0);
    free(a);
    /* The user's socket, once it exists, wins over the system one. */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK(hidet_default_address(&a) == 0 && strcmp(a, path) == 0);
    free(a);
    unlink(path);
    /* No runtime dir: the cache directory (a relative XDG_RUNTIME_DIR is not one). */
    setenv("XDG_RUNTIME_DIR", "relative", 1);
    setenv("XDG_CACHE_HOME", "/c", 1);
    if (!system) {
        CHECK(hidet_default_address(&a) == 0 && strcmp(a, "/c/hidetd/hidetd.sock") == 0);
        free(a);
        unsetenv("XDG_CACHE_HOME");
        setenv("HOME", "/home/u", 1);
        CHECK(hidet_default_address(&a) == 0 && strcmp(a, "/home/u/.cache/hidetd/hidetd.sock") == 0);
        free(a);
    }
    unsetenv("HIDETD_SOCKET");
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("XDG_CACHE_HOME");
    rmdir(dir);

    /* A client opened without an address uses it; a failed connect names the path, the rule
     * and how to start hidetd, not curl's "localhost port 80". */
    snprintf(path, sizeof(path), "%s/nothing.sock", dir);
    setenv("HIDETD_SOCKET", path, 1);
    hidet_client *c = NULL;
    hidet_error err;
    char *body = NULL;
    CHECK(hidet_client_open(NULL, NULL, &c, &err) == 0);
    CHECK(hidet_get(c, "/healthz", &body, NULL, &err) == -ECONNREFUSED);
    CHECK(strstr(err.message, path) && strstr(err.message, "no such socket") &&
          strstr(err.message, "$HIDETD_SOCKET") && strstr(err.message, "scripts/run.sh") &&
          !strstr(err.message, "port 80"));
    if (failures)
        fprintf(stderr, "message: %s\n", err.message);
    hidet_client_free(c);
    unsetenv("HIDETD_SOCKET");
}

int main(void)
{
    test_address();
    test_default_address();
    test_builder();
    test_parse_set();
    test_parse_job();
    test_transport();
    test_token();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("all client tests passed\n");
    return failures ? 1 : 0;
}
