/* gpu_workers/wire.c - framing and strict decoding of the worker protocol (see wire.h). */
#include "gpu_workers/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void gw_wire_msg_clear(gw_wire_msg *m)
{
    if (!m)
        return;
    cJSON_Delete(m->json);
    for (int i = 0; i < m->n_blobs && i < GW_WIRE_MAX_BLOBS; i++)
        free(m->blobs[i]);
    memset(m, 0, sizeof(*m));
}

int gw_wire_encode(uint32_t type, const cJSON *json, int n_blobs, const uint8_t *const *blobs,
                   const size_t *blob_lens, uint8_t **ret, size_t *ret_len)
{
    char *text = NULL;
    uint8_t *buf = NULL;
    int r;

    if (!ret || !ret_len || n_blobs < 0 || n_blobs > GW_WIRE_MAX_BLOBS || type == 0 ||
        type >= GW_MSG__END || (n_blobs > 0 && (!blobs || !blob_lens)))
        return -EINVAL;

    text = json ? cJSON_PrintUnformatted(json) : strdup("{}");
    if (!text)
        return -ENOMEM;
    size_t jlen = strlen(text);
    if (jlen > GW_WIRE_MAX_JSON) {
        r = -EMSGSIZE;
        goto out;
    }
    /* Sizes are summed in 64 bits and bounded before the allocation. */
    uint64_t body = 4 + 4 + (uint64_t)jlen + 4;
    for (int i = 0; i < n_blobs; i++) {
        if (blob_lens[i] > GW_WIRE_MAX_IMAGE || (blob_lens[i] && !blobs[i])) {
            r = blob_lens[i] > GW_WIRE_MAX_IMAGE ? -EMSGSIZE : -EINVAL;
            goto out;
        }
        body += 4 + (uint64_t)blob_lens[i];
    }
    if (body > GW_WIRE_MAX_FRAME) {
        r = -EMSGSIZE;
        goto out;
    }
    size_t total = 4 + (size_t)body;
    buf = malloc(total);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    uint8_t *p = buf;
    put_u32(p, (uint32_t)body);
    put_u32(p + 4, type);
    put_u32(p + 8, (uint32_t)jlen);
    p += 12;
    memcpy(p, text, jlen);
    p += jlen;
    put_u32(p, (uint32_t)n_blobs);
    p += 4;
    for (int i = 0; i < n_blobs; i++) {
        put_u32(p, (uint32_t)blob_lens[i]);
        p += 4;
        if (blob_lens[i])
            memcpy(p, blobs[i], blob_lens[i]);
        p += blob_lens[i];
    }
    *ret = buf;
    *ret_len = total;
    buf = NULL;
    r = 0;
out:
    free(text);
    free(buf);
    return r;
}

int gw_wire_parse(const uint8_t *buf, size_t len, gw_wire_msg *ret, size_t *ret_used)
{
    gw_wire_msg m = {0};
    int r;

    if (!buf || !ret || !ret_used)
        return -EINVAL;
    if (len < 4)
        return -EAGAIN;
    uint32_t body = get_u32(buf);
    /* The size check comes first so that a garbage length never makes us wait for 4 GiB. */
    if (body > GW_WIRE_MAX_FRAME)
        return -EMSGSIZE;
    if (body < 12)
        return -EBADMSG;
    if (len - 4 < body)
        return -EAGAIN;

    const uint8_t *p = buf + 4, *end = buf + 4 + body;
    m.type = get_u32(p);
    if (m.type == 0 || m.type >= GW_MSG__END)
        return -EBADMSG;
    uint32_t jlen = get_u32(p + 4);
    p += 8;
    if (jlen > GW_WIRE_MAX_JSON)
        return -EMSGSIZE;
    if ((size_t)(end - p) < (size_t)jlen + 4)
        return -EBADMSG;
    /* The header must be exactly one JSON object with nothing after it. */
    const char *jend = NULL;
    m.json = cJSON_ParseWithLengthOpts((const char *)p, jlen, &jend, false);
    if (!m.json || !cJSON_IsObject(m.json) || jend != (const char *)p + jlen) {
        r = -EBADMSG;
        goto fail;
    }
    p += jlen;
    uint32_t nb = get_u32(p);
    p += 4;
    if (nb > GW_WIRE_MAX_BLOBS) {
        r = -EBADMSG;
        goto fail;
    }
    for (uint32_t i = 0; i < nb; i++) {
        if (end - p < 4) {
            r = -EBADMSG;
            goto fail;
        }
        uint32_t bl = get_u32(p);
        p += 4;
        if (bl > GW_WIRE_MAX_IMAGE) {
            r = -EMSGSIZE;
            goto fail;
        }
        if ((size_t)(end - p) < bl) {
            r = -EBADMSG;
            goto fail;
        }
        m.blobs[i] = malloc(bl ? bl : 1);
        if (!m.blobs[i]) {
            r = -ENOMEM;
            goto fail;
        }
        m.n_blobs = (int)i + 1;
        memcpy(m.blobs[i], p, bl);
        m.blob_len[i] = bl;
        p += bl;
    }
    if (p != end) {
        r = -EBADMSG;
        goto fail;
    }
    *ret = m;
    *ret_used = 4 + (size_t)body;
    return 0;
fail:
    gw_wire_msg_clear(&m);
    return r;
}

int gw_wire_reader_feed(gw_wire_reader *r, const void *data, size_t n)
{
    if (!r || (n && !data))
        return -EINVAL;
    if (r->error)
        return r->error;
    if (n > SIZE_MAX - r->len)
        return r->error = -EMSGSIZE;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        uint8_t *nb = realloc(r->buf, cap);
        if (!nb)
            return r->error = -ENOMEM;
        r->buf = nb;
        r->cap = cap;
    }
    if (n)
        memcpy(r->buf + r->len, data, n);
    r->len += n;
    return 0;
}

int gw_wire_reader_next(gw_wire_reader *r, gw_wire_msg *ret)
{
    size_t used = 0;

    if (!r || !ret)
        return -EINVAL;
    if (r->error)
        return r->error;
    if (!r->len)
        return -EAGAIN;
    int e = gw_wire_parse(r->buf, r->len, ret, &used);
    if (e == -EAGAIN)
        return e;
    if (e < 0)
        return r->error = e;
    memmove(r->buf, r->buf + used, r->len - used);
    r->len -= used;
    return 0;
}

void gw_wire_reader_clear(gw_wire_reader *r)
{
    if (!r)
        return;
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EPIPE || errno == ECONNRESET ? -EPIPE : -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Returns 0, -EPIPE on end of stream, -errno. */
static int read_all(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t rd = read(fd, p, n);
        if (rd < 0) {
            if (errno == EINTR)
                continue;
            return errno == ECONNRESET ? -EPIPE : -errno;
        }
        if (rd == 0)
            return -EPIPE;
        p += rd;
        n -= (size_t)rd;
    }
    return 0;
}

int gw_wire_send_fd(int fd, uint32_t type, const cJSON *json, int n_blobs,
                    const uint8_t *const *blobs, const size_t *blob_lens)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = gw_wire_encode(type, json, n_blobs, blobs, blob_lens, &buf, &len);
    if (r < 0)
        return r;
    r = write_all(fd, buf, len);
    free(buf);
    return r;
}

int gw_wire_recv_fd(int fd, gw_wire_msg *ret)
{
    uint8_t hdr[4];
    uint8_t *buf = NULL;
    size_t used = 0;
    int r;

    if (!ret)
        return -EINVAL;
    r = read_all(fd, hdr, 4);
    if (r < 0)
        return r;
    uint32_t body = get_u32(hdr);
    if (body > GW_WIRE_MAX_FRAME)
        return -EMSGSIZE;
    if (body < 12)
        return -EBADMSG;
    buf = malloc(4 + (size_t)body);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, hdr, 4);
    r = read_all(fd, buf + 4, body);
    if (r < 0)
        goto out;
    r = gw_wire_parse(buf, 4 + (size_t)body, ret, &used);
    if (r == -EAGAIN)
        r = -EBADMSG;
out:
    free(buf);
    return r;
}

/* ---- strict field access ---- */

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

static int get_num(const cJSON *o, const char *name, double lo, double hi, double *out)
{
    const cJSON *v = field(o, name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return -EBADMSG;
    *out = v->valuedouble;
    return 0;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *out)
{
    double d;
    if (get_num(o, name, lo, hi, &d) < 0 || d != floor(d))
        return -EBADMSG;
    *out = (int64_t)d;
    return 0;
}

static int get_bool(const cJSON *o, const char *name, bool *out)
{
    const cJSON *v = field(o, name);
    if (!cJSON_IsBool(v))
        return -EBADMSG;
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Copies a string field; rejects strings that do not fit (with the NUL) or hold a NUL. */
static int get_str(const cJSON *o, const char *name, char *buf, size_t buflen)
{
    const cJSON *v = field(o, name);
    if (!cJSON_IsString(v) || !v->valuestring)
        return -EBADMSG;
    size_t n = strlen(v->valuestring);
    if (n >= buflen)
        return -EBADMSG;
    memcpy(buf, v->valuestring, n + 1);
    return 0;
}

static int get_id(const cJSON *o, const char *name, uint64_t *out)
{
    char s[24];
    if (get_str(o, name, s, sizeof(s)) < 0)
        return -EBADMSG;
    if (!s[0]) {
        *out = 0;
        return 0;
    }
    uint64_t v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return -EBADMSG;
        unsigned dgt = (unsigned)(*c - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -EBADMSG;
        v = v * 10 + dgt;
    }
    *out = v;
    return 0;
}

static bool add_id(cJSON *o, const char *name, uint64_t id)
{
    char s[24];
    if (id)
        snprintf(s, sizeof(s), "%" PRIu64, id);
    else
        s[0] = 0;
    return cJSON_AddStringToObject(o, name, s) != NULL;
}

static int encode_json(uint32_t type, cJSON *j, int n_blobs, const uint8_t *const *blobs,
                       const size_t *lens, uint8_t **ret, size_t *ret_len)
{
    if (!j)
        return -ENOMEM;
    int r = gw_wire_encode(type, j, n_blobs, blobs, lens, ret, ret_len);
    cJSON_Delete(j);
    return r;
}

static bool valid_name(const char *s)
{
    if (!s[0])
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_'))
            return false;
    return true;
}

/* ---- MEASURE ---- */

static int check_module(const gw_module *m, int n_buffers, bool required)
{
    if (m->n_launches < 0 || m->n_launches > GW_MAX_LAUNCHES)
        return -EINVAL;
    if (required && (m->n_launches < 1 || !m->image || !m->image_len))
        return -EINVAL;
    if (m->n_launches > 0 && (!m->image || !m->image_len))
        return -EINVAL;
    if (m->image_len > GW_WIRE_MAX_IMAGE)
        return -EINVAL;
    for (int i = 0; i < m->n_launches; i++) {
        const gw_launch *l = &m->launches[i];
        if (!memchr(l->name, 0, sizeof(l->name)) || !valid_name(l->name))
            return -EINVAL;
        for (int k = 0; k < 3; k++)
            if (l->grid[k] < 1 || l->block[k] < 1 || l->grid[k] > 0x7fffffffu ||
                l->block[k] > 1024)
                return -EINVAL;
        if ((uint64_t)l->block[0] * l->block[1] * l->block[2] > 1024)
            return -EINVAL;
        if (l->shared_bytes > (1u << 20))
            return -EINVAL;
        if (l->n_args < 0 || l->n_args > GW_MAX_ARGS)
            return -EINVAL;
        for (int a = 0; a < l->n_args; a++) {
            if (l->args[a] == GW_ARG_I64) {
                if (l->values[a] < -GW_ARG_I64_MAX || l->values[a] > GW_ARG_I64_MAX)
                    return -EINVAL;
            } else if (l->args[a] < 0 || l->args[a] >= n_buffers || l->values[a] != 0) {
                return -EINVAL;
            }
        }
        if (l->n_maps < 0 || l->n_maps > GW_MAX_MAPS || l->n_args + l->n_maps > GW_MAX_ARGS)
            return -EINVAL;
        for (int k = 0; k < l->n_maps; k++)
            if (l->maps[k].buf < 0 || l->maps[k].buf >= n_buffers ||
                tuner_tmap_check(&l->maps[k], NULL, 0, NULL, 0) < 0)
                return -EINVAL;
    }
    return 0;
}

int gw_wire_check_req(const gw_measure_req *req)
{
    if (!req || req->n_buffers < 1 || req->n_buffers > GW_MAX_BUFFERS)
        return -EINVAL;
    for (int i = 0; i < req->n_buffers; i++) {
        const gw_buffer *b = &req->buffers[i];
        if ((unsigned)b->role > GW_BUF_SCRATCH || (unsigned)b->dtype > GW_F8E5M2 || b->elems < 1 ||
            b->elems > GW_WIRE_MAX_ELEMS)
            return -EINVAL;
        /* Integers are inputs with a fill range; nothing else carries one. */
        const bool is_int = b->dtype == GW_I32 || b->dtype == GW_I64;
        const int64_t lo = req->int_range[i][0], hi = req->int_range[i][1];
        if (is_int ? (b->role != GW_BUF_INPUT || lo >= hi || lo < -GW_INT_RANGE_MAX || hi > GW_INT_RANGE_MAX)
                   : (lo != 0 || hi != 0))
            return -EINVAL;
    }
    if (check_module(&req->candidate, req->n_buffers, true) < 0 ||
        check_module(&req->reference, req->n_buffers, req->check) < 0 ||
        check_module(&req->heater, req->n_buffers, false) < 0)
        return -EINVAL;
    if (req->output_buffer < 0 || req->output_buffer >= req->n_buffers ||
        req->buffers[req->output_buffer].role != GW_BUF_OUTPUT)
        return -EINVAL;
    if (req->check) {
        if (req->ref_output_buffer < 0 || req->ref_output_buffer >= req->n_buffers ||
            req->buffers[req->ref_output_buffer].role != GW_BUF_REF_OUTPUT ||
            req->buffers[req->ref_output_buffer].dtype != GW_F32 ||
            req->buffers[req->ref_output_buffer].elems != req->buffers[req->output_buffer].elems)
            return -EINVAL;
        if (!isfinite(req->rtol) || !isfinite(req->atol) || req->rtol < 0 || req->atol < 0)
            return -EINVAL;
        const uint64_t out_elems = req->buffers[req->output_buffer].elems;
        if (req->row_len < 0 || (uint64_t)req->row_len > out_elems ||
            (req->row_len > 0 && out_elems % (uint64_t)req->row_len))
            return -EINVAL;
    }
    if (req->warmup < 0 || req->warmup > 1000 || req->min_reps < 1 ||
        req->max_reps < req->min_reps || req->max_reps > GW_WIRE_MAX_REPS)
        return -EINVAL;
    if (!isfinite(req->min_time_ms) || req->min_time_ms < 0 || req->min_time_ms > 600000 ||
        !isfinite(req->beat_us) || req->beat_us < 0 || !isfinite(req->heat_ms) || req->heat_ms < 0 ||
        req->heat_ms > GW_WIRE_MAX_HEAT_MS)
        return -EINVAL;
    /* A heater only heats (and keeps the clock between timed spans). */
    if (req->heater.n_launches > 0 && !(req->heat_ms > 0))
        return -EINVAL;
    return 0;
}

/* A tensor map's buffer as the wire names buffers: by index. */
static cJSON *buf_number(int buf)
{
    return cJSON_CreateNumber(buf);
}

static cJSON *module_json(const gw_module *m)
{
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "launches");
    if (!arr)
        goto fail;
    for (int i = 0; i < m->n_launches; i++) {
        const gw_launch *l = &m->launches[i];
        cJSON *lj = cJSON_CreateObject();
        if (!lj || !cJSON_AddItemToArray(arr, lj))
            goto fail_item;
        int grid[3] = {(int)l->grid[0], (int)l->grid[1], (int)l->grid[2]};
        int block[3] = {(int)l->block[0], (int)l->block[1], (int)l->block[2]};
        if (!cJSON_AddStringToObject(lj, "name", l->name) ||
            !cJSON_AddItemToObject(lj, "grid", cJSON_CreateIntArray(grid, 3)) ||
            !cJSON_AddItemToObject(lj, "block", cJSON_CreateIntArray(block, 3)) ||
            !cJSON_AddNumberToObject(lj, "shared", l->shared_bytes) ||
            !cJSON_AddItemToObject(lj, "args", cJSON_CreateIntArray(l->args, l->n_args)))
            goto fail;
        /* A dynamic op's map is measured where its dims are at their max, the values dims[]
         * already hold: the worker gets it as the static map it is there. */
        tuner_tmap maps[GW_MAX_MAPS];
        for (int k = 0; k < l->n_maps && k < GW_MAX_MAPS; k++) {
            maps[k] = l->maps[k];
            memset(maps[k].sym, 0, sizeof(maps[k].sym));
            memset(maps[k].sym_coef, 0, sizeof(maps[k].sym_coef));
        }
        if (!tuner_tmaps_add_json(lj, maps, l->n_maps, "buf", buf_number))
            goto fail;
        /* "values" only where a scalar is passed, so a request without reads as before. */
        bool scalars = false;
        for (int a = 0; a < l->n_args; a++)
            scalars = scalars || l->args[a] == GW_ARG_I64;
        if (scalars) {
            double v[GW_MAX_ARGS];
            for (int a = 0; a < l->n_args; a++)
                v[a] = (double)l->values[a];
            if (!cJSON_AddItemToObject(lj, "values", cJSON_CreateDoubleArray(v, l->n_args)))
                goto fail;
        }
        continue;
    fail_item:
        cJSON_Delete(lj);
        goto fail;
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

static int int_array(const cJSON *o, const char *name, int lo, int hi, int maxn, int *out,
                     int *ret_n, int exact)
{
    const cJSON *a = field(o, name);
    if (!cJSON_IsArray(a))
        return -EBADMSG;
    int n = cJSON_GetArraySize(a);
    if (n > maxn || (exact >= 0 && n != exact))
        return -EBADMSG;
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a)
    {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
            v->valuedouble < lo || v->valuedouble > hi)
            return -EBADMSG;
        out[i++] = (int)v->valuedouble;
    }
    if (ret_n)
        *ret_n = n;
    return 0;
}

/* A launch's "maps" (absent: none): tuner_tmap_to_json's members and "buf", a buffer index
 * (checked against the request's buffers by check_module). */
static int decode_maps(const cJSON *arr, gw_launch *l)
{
    l->n_maps = 0;
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > GW_MAX_MAPS)
        return -EBADMSG;
    const cJSON *mj;
    cJSON_ArrayForEach(mj, arr)
    {
        int64_t buf;
        if (get_int(mj, "buf", 0, GW_MAX_BUFFERS - 1, &buf) < 0)
            return -EBADMSG;
        tuner_tmap *m = &l->maps[l->n_maps++];
        m->buf = (int)buf;
        if (tuner_tmap_from_json(mj, "buf", m, NULL, 0, NULL, 0) < 0)
            return -EBADMSG;
    }
    return 0;
}

/* A launch's "values" (its args already read): present exactly when an argument is a scalar,
 * one integer per argument, 0 at a buffer's place (check_module bounds the scalars). */
static int decode_values(const cJSON *arr, gw_launch *l)
{
    bool scalars = false;
    memset(l->values, 0, sizeof(l->values));
    for (int a = 0; a < l->n_args; a++)
        scalars = scalars || l->args[a] == GW_ARG_I64;
    if (!arr)
        return scalars ? -EBADMSG : 0;
    if (!scalars || !cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != l->n_args)
        return -EBADMSG;
    int a = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr)
    {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
            fabs(v->valuedouble) > (double)GW_ARG_I64_MAX ||
            (l->args[a] != GW_ARG_I64 && v->valuedouble != 0))
            return -EBADMSG;
        l->values[a++] = (int64_t)v->valuedouble;
    }
    return 0;
}

static int module_from_json(const cJSON *o, gw_module *m)
{
    const cJSON *arr = field(o, "launches");
    if (!cJSON_IsObject(o) || !cJSON_IsArray(arr))
        return -EBADMSG;
    int n = cJSON_GetArraySize(arr);
    if (n < 0 || n > GW_MAX_LAUNCHES)
        return -EBADMSG;
    m->n_launches = n;
    int i = 0;
    const cJSON *lj;
    cJSON_ArrayForEach(lj, arr)
    {
        gw_launch *l = &m->launches[i++];
        int g[3], b[3];
        int64_t sh;
        if (!cJSON_IsObject(lj) || get_str(lj, "name", l->name, sizeof(l->name)) < 0 ||
            int_array(lj, "grid", 1, 0x7fffffff, 3, g, NULL, 3) < 0 ||
            int_array(lj, "block", 1, 1024, 3, b, NULL, 3) < 0 ||
            get_int(lj, "shared", 0, 1 << 20, &sh) < 0 ||
            int_array(lj, "args", GW_ARG_I64, GW_MAX_BUFFERS - 1, GW_MAX_ARGS, l->args, &l->n_args,
                      -1) < 0 ||
            decode_values(field(lj, "values"), l) < 0)
            return -EBADMSG;
        for (int k = 0; k < 3; k++) {
            l->grid[k] = (uint32_t)g[k];
            l->block[k] = (uint32_t)b[k];
        }
        l->shared_bytes = (uint32_t)sh;
        if (decode_maps(field(lj, "maps"), l) < 0)
            return -EBADMSG;
    }
    return 0;
}

int gw_wire_encode_measure(const gw_measure_req *req, uint8_t **ret, size_t *ret_len)
{
    if (!ret || !ret_len || gw_wire_check_req(req) < 0)
        return -EINVAL;
    cJSON *j = cJSON_CreateObject();
    cJSON *bufs = j ? cJSON_AddArrayToObject(j, "buffers") : NULL;
    if (!bufs)
        goto fail;
    for (int i = 0; i < req->n_buffers; i++) {
        /* [role, dtype, elems], and an integer input's fill range: [..., int_lo, int_hi]. */
        const gw_buffer *b = &req->buffers[i];
        double t[5] = {b->role, b->dtype, (double)b->elems, (double)req->int_range[i][0],
                       (double)req->int_range[i][1]};
        cJSON *e = cJSON_CreateDoubleArray(t, b->dtype == GW_I32 || b->dtype == GW_I64 ? 5 : 3);
        if (!e || !cJSON_AddItemToArray(bufs, e)) {
            cJSON_Delete(e);
            goto fail;
        }
    }
    const char *const module_names[3] = {"candidate", "reference", "heater"};
    const gw_module *const modules[3] = {&req->candidate, &req->reference, &req->heater};
    for (int i = 0; i < 3; i++) {
        cJSON *mj = module_json(modules[i]);
        if (!mj || !cJSON_AddItemToObject(j, module_names[i], mj)) {
            cJSON_Delete(mj);
            goto fail;
        }
    }
    if (!add_id(j, "id", req->id) || !cJSON_AddNumberToObject(j, "output", req->output_buffer) ||
        !cJSON_AddNumberToObject(j, "ref_output", req->check ? req->ref_output_buffer : -1) ||
        !cJSON_AddBoolToObject(j, "check", req->check) ||
        !cJSON_AddNumberToObject(j, "rtol", req->check ? req->rtol : 0) ||
        !cJSON_AddNumberToObject(j, "atol", req->check ? req->atol : 0) ||
        !cJSON_AddNumberToObject(j, "row_len", req->check ? (double)req->row_len : 0) ||
        !cJSON_AddNumberToObject(j, "warmup", req->warmup) ||
        !cJSON_AddNumberToObject(j, "min_reps", req->min_reps) ||
        !cJSON_AddNumberToObject(j, "max_reps", req->max_reps) ||
        !cJSON_AddNumberToObject(j, "min_time_ms", req->min_time_ms) ||
        !cJSON_AddNumberToObject(j, "beat_us", req->beat_us) ||
        !cJSON_AddNumberToObject(j, "heat_ms", req->heat_ms))
        goto fail;
    const uint8_t *blobs[3] = {req->candidate.image, req->reference.image, req->heater.image};
    size_t lens[3] = {req->candidate.image_len, req->reference.n_launches ? req->reference.image_len : 0,
                      req->heater.n_launches ? req->heater.image_len : 0};
    return encode_json(GW_MSG_MEASURE, j, 3, blobs, lens, ret, ret_len);
fail:
    cJSON_Delete(j);
    return -ENOMEM;
}

int gw_wire_decode_measure(const gw_wire_msg *m, gw_measure_req *ret)
{
    gw_measure_req q;
    int64_t v;
    double d;

    if (!m || !ret || m->type != GW_MSG_MEASURE || !m->json || m->n_blobs != 3)
        return -EBADMSG;
    memset(&q, 0, sizeof(q));
    const cJSON *j = m->json, *bufs = field(j, "buffers"), *e;
    if (!cJSON_IsArray(bufs))
        return -EBADMSG;
    int n = cJSON_GetArraySize(bufs);
    if (n < 1 || n > GW_MAX_BUFFERS)
        return -EBADMSG;
    q.n_buffers = n;
    int i = 0;
    cJSON_ArrayForEach(e, bufs)
    {
        double t[5] = {0, 0, 0, 0, 0};
        int k = 0;
        const cJSON *x;
        const int size = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : 0;
        if (size != 3 && size != 5)
            return -EBADMSG;
        cJSON_ArrayForEach(x, e)
        {
            /* The fill range (members 3 and 4) may be negative; the others may not. */
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || (k < 3 && x->valuedouble < 0) ||
                fabs(x->valuedouble) > (double)GW_WIRE_MAX_ELEMS || x->valuedouble != floor(x->valuedouble))
                return -EBADMSG;
            t[k++] = x->valuedouble;
        }
        if (t[0] > GW_BUF_SCRATCH || t[1] > GW_F8E5M2 || t[2] < 1 || t[2] > (double)GW_WIRE_MAX_ELEMS ||
            (size == 5) != (t[1] == GW_I32 || t[1] == GW_I64))
            return -EBADMSG;
        q.buffers[i].role = (gw_buf_role)t[0];
        q.buffers[i].dtype = (gw_dtype)t[1];
        q.buffers[i].elems = (uint64_t)t[2];
        q.int_range[i][0] = (int64_t)t[3];
        q.int_range[i][1] = (int64_t)t[4];
        i++;
    }
    if (module_from_json(field(j, "candidate"), &q.candidate) < 0 ||
        module_from_json(field(j, "reference"), &q.reference) < 0 ||
        module_from_json(field(j, "heater"), &q.heater) < 0)
        return -EBADMSG;
    q.candidate.image = m->blobs[0];
    q.candidate.image_len = m->blob_len[0];
    q.reference.image = m->blob_len[1] ? m->blobs[1] : NULL;
    q.reference.image_len = m->blob_len[1];
    q.heater.image = m->blob_len[2] ? m->blobs[2] : NULL;
    q.heater.image_len = m->blob_len[2];
    if (get_id(j, "id", &q.id) < 0 || get_bool(j, "check", &q.check) < 0)
        return -EBADMSG;
    if (get_int(j, "output", 0, GW_MAX_BUFFERS - 1, &v) < 0)
        return -EBADMSG;
    q.output_buffer = (int)v;
    if (get_int(j, "ref_output", -1, GW_MAX_BUFFERS - 1, &v) < 0)
        return -EBADMSG;
    q.ref_output_buffer = (int)v;
    if (get_num(j, "rtol", 0, 1e30, &q.rtol) < 0 || get_num(j, "atol", 0, 1e30, &q.atol) < 0 ||
        get_int(j, "row_len", 0, (double)GW_WIRE_MAX_ELEMS, &q.row_len) < 0)
        return -EBADMSG;
    if (get_int(j, "warmup", 0, 1000, &v) < 0)
        return -EBADMSG;
    q.warmup = (int)v;
    if (get_int(j, "min_reps", 1, GW_WIRE_MAX_REPS, &v) < 0)
        return -EBADMSG;
    q.min_reps = (int)v;
    if (get_int(j, "max_reps", 1, GW_WIRE_MAX_REPS, &v) < 0)
        return -EBADMSG;
    q.max_reps = (int)v;
    if (get_num(j, "min_time_ms", 0, 600000, &q.min_time_ms) < 0 ||
        get_num(j, "beat_us", 0, 1e30, &d) < 0 || get_num(j, "heat_ms", 0, GW_WIRE_MAX_HEAT_MS, &q.heat_ms) < 0)
        return -EBADMSG;
    q.beat_us = d;
    /* The same consistency rules as on the sending side (indices, roles, NUL-free names). */
    if (gw_wire_check_req(&q) < 0)
        return -EBADMSG;
    *ret = q;
    return 0;
}

/* ---- RESULT ---- */

static bool add_err(cJSON *j, const char *name, double v)
{
    /* JSON has no NaN/Inf; a non-finite error travels as null and comes back as +Inf. */
    if (!isfinite(v))
        return cJSON_AddNullToObject(j, name) != NULL;
    return cJSON_AddNumberToObject(j, name, v) != NULL;
}

static int get_err(const cJSON *j, const char *name, double *out)
{
    const cJSON *v = field(j, name);
    if (cJSON_IsNull(v)) {
        *out = INFINITY;
        return 0;
    }
    return get_num(j, name, 0, HUGE_VAL, out);
}

int gw_wire_encode_result(const gw_measure_result *res, bool fatal, uint8_t **ret, size_t *ret_len)
{
    if (!res || !ret || !ret_len || (unsigned)res->status > GW_NO_DEVICE)
        return -EINVAL;
    char reason[sizeof(res->reason)];
    snprintf(reason, sizeof(reason), "%s", res->reason);
    cJSON *j = cJSON_CreateObject();
    if (!j || !add_id(j, "id", res->id) || !cJSON_AddNumberToObject(j, "status", res->status) ||
        !cJSON_AddNumberToObject(j, "device", res->device) ||
        !add_err(j, "median_us", res->median_us) || !add_err(j, "min_us", res->min_us) ||
        !cJSON_AddNumberToObject(j, "reps", res->reps) ||
        !cJSON_AddBoolToObject(j, "early_stopped", res->early_stopped) ||
        !add_err(j, "max_abs_err", res->max_abs_err) ||
        !add_err(j, "max_rel_err", res->max_rel_err) ||
        !cJSON_AddStringToObject(j, "reason", reason) || !cJSON_AddBoolToObject(j, "fatal", fatal)) {
        cJSON_Delete(j);
        return -ENOMEM;
    }
    return encode_json(GW_MSG_RESULT, j, 0, NULL, NULL, ret, ret_len);
}

int gw_wire_decode_result(const gw_wire_msg *m, gw_measure_result *ret, bool *ret_fatal)
{
    gw_measure_result r;
    int64_t v;
    bool fatal;

    if (!m || !ret || m->type != GW_MSG_RESULT || !m->json || m->n_blobs != 0)
        return -EBADMSG;
    memset(&r, 0, sizeof(r));
    const cJSON *j = m->json;
    if (get_id(j, "id", &r.id) < 0 || get_int(j, "status", 0, GW_NO_DEVICE, &v) < 0)
        return -EBADMSG;
    r.status = (gw_status)v;
    if (get_int(j, "device", -1, 1 << 20, &v) < 0)
        return -EBADMSG;
    r.device = (int)v;
    if (get_err(j, "median_us", &r.median_us) < 0 || get_err(j, "min_us", &r.min_us) < 0 ||
        get_int(j, "reps", 0, GW_WIRE_MAX_REPS, &v) < 0)
        return -EBADMSG;
    r.reps = (int)v;
    if (get_bool(j, "early_stopped", &r.early_stopped) < 0 ||
        get_err(j, "max_abs_err", &r.max_abs_err) < 0 ||
        get_err(j, "max_rel_err", &r.max_rel_err) < 0 ||
        get_str(j, "reason", r.reason, sizeof(r.reason)) < 0 || get_bool(j, "fatal", &fatal) < 0)
        return -EBADMSG;
    *ret = r;
    if (ret_fatal)
        *ret_fatal = fatal;
    return 0;
}

/* ---- devices, HELLO, probe ---- */

cJSON *gw_wire_device_json(const gw_device_info *d)
{
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddNumberToObject(j, "index", d->index) ||
        !cJSON_AddStringToObject(j, "name", d->name) || !cJSON_AddNumberToObject(j, "sm", d->sm) ||
        !cJSON_AddNumberToObject(j, "sm_count", d->sm_count) ||
        !cJSON_AddNumberToObject(j, "mem_bytes", (double)d->mem_bytes) ||
        !cJSON_AddNumberToObject(j, "driver_version", d->driver_version)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

int gw_wire_device_from_json(const cJSON *j, gw_device_info *ret)
{
    gw_device_info d;
    int64_t v;

    if (!cJSON_IsObject(j) || !ret)
        return -EBADMSG;
    memset(&d, 0, sizeof(d));
    if (get_int(j, "index", 0, GW_MAX_DEVICES - 1, &v) < 0)
        return -EBADMSG;
    d.index = (int)v;
    if (get_str(j, "name", d.name, sizeof(d.name)) < 0 || get_int(j, "sm", 10, 200, &v) < 0)
        return -EBADMSG;
    d.sm = (int)v;
    if (get_int(j, "sm_count", 1, 100000, &v) < 0)
        return -EBADMSG;
    d.sm_count = (int)v;
    if (get_int(j, "mem_bytes", 0, 9007199254740992.0, &v) < 0)
        return -EBADMSG;
    d.mem_bytes = (uint64_t)v;
    if (get_int(j, "driver_version", 0, 1000000, &v) < 0)
        return -EBADMSG;
    d.driver_version = (int)v;
    *ret = d;
    return 0;
}

int gw_wire_encode_hello(int pid, const gw_device_info *dev, const char *error, uint8_t **ret,
                         size_t *ret_len)
{
    if (!ret || !ret_len || (!dev == !error))
        return -EINVAL;
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddNumberToObject(j, "pid", pid))
        goto fail;
    if (dev) {
        cJSON *d = gw_wire_device_json(dev);
        if (!d || !cJSON_AddItemToObject(j, "device", d)) {
            cJSON_Delete(d);
            goto fail;
        }
    } else {
        char e[GW_WIRE_MAX_LOG];
        snprintf(e, sizeof(e), "%s", error);
        if (!cJSON_AddStringToObject(j, "error", e))
            goto fail;
    }
    return encode_json(GW_MSG_HELLO, j, 0, NULL, NULL, ret, ret_len);
fail:
    cJSON_Delete(j);
    return -ENOMEM;
}

int gw_wire_decode_hello(const gw_wire_msg *m, gw_device_info *ret_dev, bool *ret_has_dev,
                         char *err, size_t errlen)
{
    int64_t pid;
    char e[GW_WIRE_MAX_LOG];

    if (!m || !ret_dev || !ret_has_dev || m->type != GW_MSG_HELLO || !m->json || m->n_blobs)
        return -EBADMSG;
    if (get_int(m->json, "pid", 0, 1e9, &pid) < 0)
        return -EBADMSG;
    const cJSON *d = field(m->json, "device");
    if (d) {
        gw_device_info info;
        if (field(m->json, "error") || gw_wire_device_from_json(d, &info) < 0)
            return -EBADMSG;
        *ret_dev = info;
        *ret_has_dev = true;
        return 0;
    }
    if (get_str(m->json, "error", e, sizeof(e)) < 0)
        return -EBADMSG;
    if (err && errlen)
        snprintf(err, errlen, "%s", e);
    *ret_has_dev = false;
    return 0;
}

char *gw_wire_probe_json(const gw_device_info *devs, int n, const char *error)
{
    cJSON *j = cJSON_CreateObject(), *arr = j ? cJSON_AddArrayToObject(j, "devices") : NULL;
    char *s = NULL;
    if (!arr)
        goto out;
    for (int i = 0; i < n; i++) {
        cJSON *d = gw_wire_device_json(&devs[i]);
        if (!d || !cJSON_AddItemToArray(arr, d)) {
            cJSON_Delete(d);
            goto out;
        }
    }
    if (error && !cJSON_AddStringToObject(j, "error", error))
        goto out;
    s = cJSON_Print(j);
out:
    cJSON_Delete(j);
    return s;
}

int gw_wire_parse_probe(const char *text, size_t len, gw_device_info *devs, int max, int *ret_n,
                        char *err, size_t errlen)
{
    gw_device_info tmp[GW_MAX_DEVICES];
    int r = -EBADMSG;

    if (!text || !ret_n || max < 0 || (max > 0 && !devs) || len > GW_WIRE_MAX_JSON)
        return -EBADMSG;
    cJSON *j = cJSON_ParseWithLength(text, len);
    const cJSON *arr = j ? field(j, "devices") : NULL, *d;
    if (!cJSON_IsObject(j) || !cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > GW_MAX_DEVICES)
        goto out;
    const cJSON *e = field(j, "error");
    if (e && !cJSON_IsString(e))
        goto out;
    int n = 0;
    cJSON_ArrayForEach(d, arr)
    {
        if (gw_wire_device_from_json(d, &tmp[n]) < 0)
            goto out;
        /* Device indices must be unique: a worker is started per index. */
        for (int k = 0; k < n; k++)
            if (tmp[k].index == tmp[n].index)
                goto out;
        n++;
    }
    if (n > max)
        n = max;
    memcpy(devs, tmp, (size_t)n * sizeof(*devs));
    *ret_n = n;
    if (err && errlen)
        snprintf(err, errlen, "%s", e ? e->valuestring : "");
    r = 0;
out:
    cJSON_Delete(j);
    return r;
}

/* ---- small messages ---- */

int gw_wire_encode_simple(uint32_t type, uint64_t id, const char *msg, uint8_t **ret,
                          size_t *ret_len)
{
    cJSON *j = cJSON_CreateObject();
    bool ok = j != NULL;
    switch (type) {
    case GW_MSG_HEARTBEAT:
        ok = ok && add_id(j, "busy", id);
        break;
    case GW_MSG_CANCEL:
        ok = ok && add_id(j, "id", id);
        break;
    case GW_MSG_SHUTDOWN:
        break;
    case GW_MSG_LOG: {
        char t[GW_WIRE_MAX_LOG];
        snprintf(t, sizeof(t), "%s", msg ? msg : "");
        ok = ok && cJSON_AddStringToObject(j, "msg", t);
        break;
    }
    default:
        cJSON_Delete(j);
        return -EINVAL;
    }
    if (!ok) {
        cJSON_Delete(j);
        return -ENOMEM;
    }
    return encode_json(type, j, 0, NULL, NULL, ret, ret_len);
}

int gw_wire_decode_id(const gw_wire_msg *m, uint64_t *ret_id)
{
    if (!m || !ret_id || !m->json || m->n_blobs)
        return -EBADMSG;
    if (m->type == GW_MSG_HEARTBEAT)
        return get_id(m->json, "busy", ret_id);
    if (m->type == GW_MSG_CANCEL)
        return get_id(m->json, "id", ret_id);
    return -EBADMSG;
}

int gw_wire_decode_log(const gw_wire_msg *m, char *buf, size_t buflen)
{
    char t[GW_WIRE_MAX_LOG];
    if (!m || !buf || !buflen || m->type != GW_MSG_LOG || !m->json || m->n_blobs ||
        get_str(m->json, "msg", t, sizeof(t)) < 0)
        return -EBADMSG;
    snprintf(buf, buflen, "%s", t);
    return 0;
}
