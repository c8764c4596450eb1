/* gpu_workers/wire.h - the framed message protocol between hidetd and its worker processes.
 *
 * hidetd and hidetd-worker (or the stand-in) talk over one socketpair. Every message is a frame:
 *
 *     u32 length      bytes that follow this field (type included), little-endian
 *     u32 type        gw_msg_type
 *     u32 json_len    then json_len bytes of a JSON object (the header; no NUL)
 *     u32 n_blobs     then n_blobs times: u32 blob_len, blob_len bytes (cubin images, ...)
 *
 * Nothing may follow the last blob inside a frame. The daemon must not trust a worker's bytes (a
 * crashing worker can write garbage), so decoding is strict: sizes are bounded before anything is
 * allocated, the header must be a JSON object, every field is type- and range-checked, and any
 * violation makes the whole stream unusable (the pool then kills the worker).
 *
 * Messages (direction, header fields, blobs):
 *   HELLO     w->d  {"pid", "device": {...}} or {"pid", "error": "driver text"}
 *   HEARTBEAT w->d  {"busy": id-string or ""}
 *   MEASURE   d->w  gw_measure_req fields; blobs: candidate, reference and heater images (the
 *                   last two may be empty)
 *   RESULT    w->d  gw_measure_result fields plus "fatal" (the worker exits after sending it)
 *   CANCEL    d->w  {"id"}
 *   SHUTDOWN  d->w  {}
 *   LOG       w->d  {"msg"}
 * Identifiers (uint64) travel as decimal strings because JSON numbers are doubles.
 */
#ifndef HIDET_GPU_WORKERS_WIRE_H
#define HIDET_GPU_WORKERS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gpu_workers/gw.h"

#define GW_WIRE_MAX_FRAME (80u << 20) /* two images plus header, with room */
#define GW_WIRE_MAX_JSON (256u << 10)
#define GW_WIRE_MAX_BLOBS 4
#define GW_WIRE_MAX_IMAGE (32u << 20)
#define GW_WIRE_MAX_ELEMS (UINT64_C(1) << 34) /* per buffer */
#define GW_WIRE_MAX_REPS 100000
#define GW_WIRE_MAX_HEAT_MS 10000.0 /* a measure request's heat_ms */
#define GW_WIRE_MAX_LOG 1024

typedef enum {
    GW_MSG_HELLO = 1,
    GW_MSG_HEARTBEAT,
    GW_MSG_MEASURE,
    GW_MSG_RESULT,
    GW_MSG_CANCEL,
    GW_MSG_SHUTDOWN,
    GW_MSG_LOG,
    GW_MSG__END
} gw_msg_type;

/* One decoded frame. Everything is owned by the message; release with gw_wire_msg_clear(). */
typedef struct gw_wire_msg {
    uint32_t type;
    cJSON *json; /* a JSON object */
    int n_blobs;
    uint8_t *blobs[GW_WIRE_MAX_BLOBS];
    size_t blob_len[GW_WIRE_MAX_BLOBS];
} gw_wire_msg;

/* Frees what m owns and zeroes it. Accepts a zeroed message. */
void gw_wire_msg_clear(gw_wire_msg *m);

/* Builds one frame. json may be NULL (sent as {}). Returns 0 and a malloc'd frame in *ret /
 * *ret_len (caller frees), -EMSGSIZE when it would exceed the limits, -ENOMEM. */
int gw_wire_encode(uint32_t type, const cJSON *json, int n_blobs, const uint8_t *const *blobs,
                   const size_t *blob_lens, uint8_t **ret, size_t *ret_len);

/* Decodes the frame at the start of buf. Returns 0 with *ret filled and *ret_used set to the
 * frame's size; -EAGAIN when buf holds only part of a frame (nothing consumed); -EMSGSIZE when the
 * announced sizes exceed the limits; -EBADMSG on malformed content; -ENOMEM. */
int gw_wire_parse(const uint8_t *buf, size_t len, gw_wire_msg *ret, size_t *ret_used);

/* Accumulates a byte stream and yields frames (the pool's read side). */
typedef struct gw_wire_reader {
    uint8_t *buf;
    size_t len, cap;
    int error; /* sticky: once a frame was bad the stream is dead */
} gw_wire_reader;

/* Appends bytes. Returns 0, -ENOMEM, or the sticky error. */
int gw_wire_reader_feed(gw_wire_reader *r, const void *data, size_t n);
/* Takes the next complete frame: 0 with *ret filled, -EAGAIN when none is complete yet, or a
 * negative error (sticky) as gw_wire_parse(). */
int gw_wire_reader_next(gw_wire_reader *r, gw_wire_msg *ret);
void gw_wire_reader_clear(gw_wire_reader *r);

/* Blocking helpers for the worker side. send writes a whole frame (0, -errno, -EPIPE when the
 * peer is gone); recv reads one frame (0, -EPIPE on end of stream, or a parse error). */
int gw_wire_send_fd(int fd, uint32_t type, const cJSON *json, int n_blobs,
                    const uint8_t *const *blobs, const size_t *blob_lens);
int gw_wire_recv_fd(int fd, gw_wire_msg *ret);

/* Typed messages. Encoders return 0 and a malloc'd frame (*ret, *ret_len) or -errno. Decoders
 * return 0 or -EBADMSG (the message does not have that shape or a field is out of range) and
 * leave their outputs untouched on failure. */

/* MEASURE. The decoded request's images point into m's blobs: m must outlive *ret. */
int gw_wire_encode_measure(const gw_measure_req *req, uint8_t **ret, size_t *ret_len);
int gw_wire_decode_measure(const gw_wire_msg *m, gw_measure_req *ret);
/* Checks a request's internal consistency (indices, roles, limits); 0 or -EINVAL. Also used by
 * gw_measure() before anything is queued. */
int gw_wire_check_req(const gw_measure_req *req);

/* RESULT. fatal: the worker's context is unusable and it exits after sending this. */
int gw_wire_encode_result(const gw_measure_result *res, bool fatal, uint8_t **ret, size_t *ret_len);
int gw_wire_decode_result(const gw_wire_msg *m, gw_measure_result *ret, bool *ret_fatal);

/* Device descriptions as JSON objects (HELLO and the probe output). The JSON form carries index,
 * name, sm, sm_count, mem_bytes, driver_version; the pool-side fields stay zero. */
cJSON *gw_wire_device_json(const gw_device_info *d);
int gw_wire_device_from_json(const cJSON *j, gw_device_info *ret);

/* HELLO: exactly one of dev and error is non-NULL. */
int gw_wire_encode_hello(int pid, const gw_device_info *dev, const char *error, uint8_t **ret,
                         size_t *ret_len);
/* 0 with *ret_dev filled (*ret_has_dev true), or with the worker's error copied into err
 * (*ret_has_dev false); -EBADMSG when malformed. */
int gw_wire_decode_hello(const gw_wire_msg *m, gw_device_info *ret_dev, bool *ret_has_dev,
                         char *err, size_t errlen);

/* The probe's stdout: {"devices": [...], "error": "why none" (optional)}. Text need not be
 * NUL-terminated. Returns 0 with *ret_n devices written (at most max) and the error text (or "")
 * in err; -EBADMSG when the text is not such a document. */
char *gw_wire_probe_json(const gw_device_info *devs, int n, const char *error);
int gw_wire_parse_probe(const char *text, size_t len, gw_device_info *devs, int max, int *ret_n,
                        char *err, size_t errlen);

/* Small bodies: HEARTBEAT ({"busy": id or ""}), CANCEL ({"id"}), SHUTDOWN ({}), LOG ({"msg"}).
 * id is 0 for "none". */
int gw_wire_encode_simple(uint32_t type, uint64_t id, const char *msg, uint8_t **ret,
                          size_t *ret_len);
/* Reads the id of HEARTBEAT / CANCEL messages; 0 or -EBADMSG. */
int gw_wire_decode_id(const gw_wire_msg *m, uint64_t *ret_id);
/* Reads the text of a LOG message into buf (truncated to buflen - 1); 0 or -EBADMSG. */
int gw_wire_decode_log(const gw_wire_msg *m, char *buf, size_t buflen);

#endif
