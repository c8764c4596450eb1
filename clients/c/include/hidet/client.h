/* hidet/client.h - libhidet-client: ask a running hidetd for tuned, fused GPU kernels.
 *
 * A client talks HTTP/1.1 to hidetd over its Unix socket or TCP (one reused connection per
 * client, so a series of requests costs one connect). It sends operator requests as JSON (build
 * them with hidet_request_*() or write them yourself), and gets back a kernel set: the launch
 * description of one or more kernels that live in one module, whose PTX and cubin it can fetch.
 *
 * Conventions:
 *  - Every int function returns 0 or a negative errno-style code and, when err is not NULL,
 *    fills *err (cleared on success): -ECONNREFUSED cannot connect, -ETIMEDOUT timed out,
 *    -ECONNRESET the connection broke, -ENOENT the daemon answered 404, -EACCES 401,
 *    -EINVAL 400/422 (or a bad argument: then http_status is 0), -E2BIG 413, -EBUSY 429,
 *    -EAGAIN 503, -EREMOTEIO any other error answer, -EPROTO an answer that is not what the
 *    API promises, -ENOMEM.
 *  - Output parameters ret_* are set only on success; what they receive belongs to the caller and
 *    is released with the matching *_free() (every *_free() accepts NULL and returns NULL) or, for
 *    plain strings and byte buffers, with free().
 *  - A client is not safe for concurrent use from several threads; use one per thread.
 */
#ifndef HIDET_CLIENT_H
#define HIDET_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HIDET_EXPORT __attribute__((visibility("default")))
#else
#define HIDET_EXPORT
#endif

#define HIDET_KEY_LEN 64 /* hex characters of a kernel key; buffers are HIDET_KEY_LEN + 1 */
#define HIDET_MAX_RANK 8

/* What went wrong, as precisely as the daemon said it. */
typedef struct hidet_error {
    int http_status;   /* 0 when no HTTP answer was received */
    char code[32];     /* API error code ("invalid_field", "not_found", ...) or "" */
    char message[512]; /* a sentence for people; always set on failure */
    char field[128];   /* the request field at fault ("inputs[1].shape[0]") or "" */
} hidet_error;

/* ---- addresses ---------------------------------------------------------------------------- */

typedef enum {
    HIDET_ADDRESS_UNIX = 0, /* "unix:/run/hidetd.sock", "/run/hidetd.sock", "hidetd.sock" */
    HIDET_ADDRESS_HTTP,     /* "http://127.0.0.1:8734", "https://tuner.example:443/prefix" */
} hidet_address_kind;

typedef struct hidet_address {
    hidet_address_kind kind;
    char socket_path[108]; /* UNIX: the socket file */
    char base_url[512];    /* what request paths are appended to, no trailing '/';
                            * "http://localhost" for UNIX */
} hidet_address;

/* Parses an address string; -EINVAL when it is none of the forms above (or too long). A path
 * without '/' ("hidetd.sock") is relative to the working directory; "host:port" without
 * "http://" is refused. */
HIDET_EXPORT int hidet_address_parse(const char *address, hidet_address *ret);

/* The address to use when the caller names none, the same for every hidetd client (hidetctl,
 * this library, the Python helper), first match wins:
 *   1. $HIDETD_SOCKET, as given (a socket path, "unix:PATH" or "http://host:port");
 *   2. $XDG_RUNTIME_DIR/hidetd.sock when that file exists (a user's hidetd);
 *   3. /run/hidetd/hidetd.sock when that exists (the system service, deploy/hidetd.socket);
 *   4. $XDG_RUNTIME_DIR/hidetd.sock when XDG_RUNTIME_DIR is set, else
 *      $XDG_CACHE_HOME/hidetd/hidetd.sock, else ~/.cache/hidetd/hidetd.sock (else, with no
 *      HOME either, ./hidetd.sock).
 * Rule 4 is also where hidetd listens when started without --socket, so a daemon started by hand
 * or by scripts/run.sh is found without configuration. *ret (malloc'd, released with free())
 * is the address; 0, or -EINVAL (ret NULL) or -ENOMEM. hidet_client_open() with a NULL address
 * uses it, and a failed connect then says which rule chose the address. */
HIDET_EXPORT int hidet_default_address(char **ret);

/* ---- the token ---------------------------------------------------------------------------- */

/* The bearer token a TCP daemon asks for (the Unix socket needs none), by the rule every hidetd
 * client shares (docs/api.md, "Authentication"), first match wins:
 *   1. a token file the caller names (hidetctl --token-file; hidet_token_from_file());
 *   2. a token the caller names (hidetctl --token; hidet_client_open()'s token argument);
 *   3. the file $HIDETD_TOKEN_FILE names;
 *   4. $HIDETD_TOKEN.
 * A token file holds the token on its first line (the rest is ignored), as hidetd reads its own
 * --token-file. Prefer files: a token on a command line is visible to every local user in ps.
 *
 * hidet_token_from_file: *ret (malloc'd, free()) is the token in path; -ENOENT/-EACCES/... when it
 * cannot be read, -EINVAL when its first line is empty, with err naming the file.
 * hidet_default_token: rules 3 and 4: *ret is the token (malloc'd) or NULL when neither variable
 * is set; the errors of hidet_token_from_file for $HIDETD_TOKEN_FILE's file. */
HIDET_EXPORT int hidet_token_from_file(const char *path, char **ret, hidet_error *err);
HIDET_EXPORT int hidet_default_token(char **ret, hidet_error *err);

/* ---- client ------------------------------------------------------------------------------- */

typedef struct hidet_client hidet_client;

/* Creates a client for address (NULL: hidet_default_address()); token is sent as
 * "Authorization: Bearer ..." (NULL: for an http:// address hidet_default_token(), whose error
 * this returns, for a Unix socket none; "": none).
 * Nothing is connected yet: the first request connects; when it cannot, err->message names the
 * address tried and how to start hidetd. */
HIDET_EXPORT int hidet_client_open(const char *address, const char *token, hidet_client **ret,
                                   hidet_error *err);
HIDET_EXPORT hidet_client *hidet_client_free(hidet_client *c);
/* Limits each whole request to ms milliseconds (0: no limit, the default, since a request with
 * "wait":true lasts as long as its tuning). Connecting is always limited to 10 s. */
HIDET_EXPORT int hidet_client_set_timeout(hidet_client *c, long ms);

/* GET path (e.g. "/v1/status"); *ret_body is the body, NUL-terminated, *ret_len its length
 * without the NUL. A non-2xx answer is an error. */
HIDET_EXPORT int hidet_get(hidet_client *c, const char *path, char **ret_body, size_t *ret_len,
                           hidet_error *err);
/* POST a JSON body to path; *ret_status receives the 2xx status (200 or 202). */
HIDET_EXPORT int hidet_post_json(hidet_client *c, const char *path, const char *json,
                                 int *ret_status, char **ret_body, size_t *ret_len,
                                 hidet_error *err);

/* ---- kernel sets -------------------------------------------------------------------------- */

typedef enum {
    HIDET_BUFFER_INPUT = 0, /* the op's input number `input` */
    HIDET_BUFFER_OUTPUT,
    HIDET_BUFFER_WORKSPACE,
    HIDET_BUFFER_OTHER, /* a name this client version does not know; see buffer */
    HIDET_BUFFER_SIZE,  /* no buffer: an "int" parameter, the size of a named dim (below) */
} hidet_buffer_kind;

/* A "tensor_map" parameter (docs/api.md): a TMA descriptor of the buffer, which the launcher
 * encodes with cuTensorMapEncodeTiled, or with cuTensorMapEncodeIm2col where im2col is set
 * (these fields; the address is the buffer's, interleave none) and passes by value, 128 bytes.
 * hidet_plan_* does this itself. */
typedef struct hidet_tensor_map {
    char dtype[8];          /* element type: "f16", "bf16", "f32", "i32", "i64" */
    int rank;               /* 1..5 (im2col 3..5); dimension 0 is the contiguous one */
    uint64_t dims[5];       /* elements per dimension */
    uint64_t strides[4];    /* bytes between steps of dimensions 1..rank-1 */
    uint32_t box[5];        /* tiled: elements one copy moves per dimension; im2col: 0 */
    uint32_t element_strides[5];
    int swizzle;            /* bytes: 0, 32, 64, 128 */
    int l2_promotion;       /* bytes: 0, 64, 128, 256 */
    bool oob_nan;           /* out-of-bounds elements read as NaN (else zero) */
    /* "mode": "im2col" (cuTensorMapEncodeIm2col's pixelBoxLowerCorner, pixelBoxUpperCorner,
     * channelsPerPixel, pixelsPerColumn; corners per spatial dimension, rank - 2 of them). */
    bool im2col;
    int lower_corner[3], upper_corner[3];
    uint32_t channels_per_pixel, pixels_per_column;
} hidet_tensor_map;

typedef struct hidet_param {
    int index;              /* position in the kernel's parameter list */
    hidet_buffer_kind kind;
    int input;              /* HIDET_BUFFER_INPUT: which input; else -1 */
    char buffer[32];        /* as sent: "input0", "output", "workspace" */
    char type[16];          /* "pointer", "tensor_map" or "int" (a `long long` size, passed by
                             * value; kind HIDET_BUFFER_SIZE, buffer ""); or a newer kind this
                             * client refuses to launch */
    bool is_tensor_map;     /* type "tensor_map": tensor_map holds the description */
    hidet_tensor_map tensor_map;
} hidet_param;

typedef struct hidet_kernel {
    char *name;             /* entry point in the module */
    char arch[16];
    uint32_t grid[3], block[3];
    uint32_t shared_bytes;  /* dynamic shared memory to launch with */
    hidet_param *params;
    size_t n_params;
    double latency_us;      /* < 0 when not measured */
    char *ptx_url, *cubin_url; /* may be NULL */
} hidet_kernel;

/* Named dimensions (docs/api.md, "Named dimensions"): what a kernel set of a dynamic op adds. */
#define HIDET_MAX_DIMS 4
#define HIDET_DIM_NAME_LEN 16 /* a name is [a-z_][a-z0-9_]*, at most 15 characters */

/* A dimension whose size is known only at launch: every size is in [min, max] and a multiple of
 * multiple_of. */
typedef struct hidet_dim {
    char name[HIDET_DIM_NAME_LEN];
    int64_t min, max;    /* 1 <= min <= max <= 2^31-1, both multiples of multiple_of */
    int64_t multiple_of; /* >= 1 */
} hidet_dim;

/* A grid dimension that depends on the sizes: mul * ceil(coef * P / div), capped at cap when
 * cap > 0, where P is the product of the sizes of the dims in `dims` (bit k: the kernel set's
 * dims[k]). dims 0: the dimension is the kernel's fixed grid value. */
typedef struct hidet_grid_rule {
    unsigned dims;
    int64_t coef, div, mul, cap;
} hidet_grid_rule;

/* The dimensions of a "tensor_map" parameter that follow the sizes (docs/api.md: a map dims
 * entry {"dims": ["n"], "coef": 1}): per map dimension i, dims[i] 0 (fixed) or the bit set over
 * the set's dims, the dimension then being coef[i] times the product of their sizes; the
 * parameter's tensor_map.dims[i] holds that value at the dims' max. */
typedef struct hidet_map_dims {
    unsigned dims[5];
    uint64_t coef[5];
} hidet_map_dims;

/* What a kernel of a dynamic set adds to its hidet_kernel (kept beside it, so hidet_kernel keeps
 * its size): its grid rules, the dim each "int" parameter takes and the dims its tensor maps
 * follow. A rule's dimension of hidet_kernel.grid holds the rule's value at the dims' max. */
typedef struct hidet_kernel_dims {
    hidet_grid_rule grid[3];
    int *param_dim; /* n_params entries, by position in params: the index in the set's dims of
                     * an "int" parameter, -1 for the others */
    hidet_map_dims *map_dims; /* n_params entries, by position in params (all zero but for a
                               * "tensor_map" parameter that follows dims); NULL when no map of
                               * the kernel does */
} hidet_kernel_dims;

typedef struct hidet_kernel_set {
    char key[HIDET_KEY_LEN + 1];    /* artifact key: fetch PTX/cubin with it */
    char op_key[HIDET_KEY_LEN + 1]; /* "" when absent */
    bool cached;                    /* answered from the cache */
    bool measured;                  /* chosen by timing on a GPU, not only by the cost model */
    char *warning;                  /* NULL when none */
    char op[32];
    char arch[16];
    int output_rank;
    int64_t output_shape[HIDET_MAX_RANK];
    char output_dtype[8];
    uint64_t workspace_bytes;
    hidet_kernel *kernels;          /* launch all of them, in order, on one stream */
    size_t n_kernels;
    double latency_us;              /* < 0 when not measured */
    double predicted_us;            /* < 0 when absent */
    char *json;                     /* the answer as received */
    /* Where the daemon found it: "local" (its own cache), "remote" (a verified entry of the
     * cluster tier) or "tuned" (tuned or generated for this request); "" from a daemon that does
     * not say. This and what follows were added at the end: the struct only grows there. */
    char origin[16];
    /* A dynamic op's set (docs/api.md, "Named dimensions"); n_dims 0 and kernel_dims NULL for a
     * static one. Its kernels take the sizes at launch: hidet_kernel_set_bind() checks them and
     * gives each kernel's grid and "int" parameters. */
    int n_dims;
    hidet_dim dims[HIDET_MAX_DIMS];   /* sorted by name */
    /* Per output axis: 0, a fixed size; else a bit set over dims, the axis being the product of
     * their sizes ("n", "b*s"), and output_shape holding that product at the dims' max. */
    unsigned output_dims[HIDET_MAX_RANK];
    hidet_kernel_dims *kernel_dims;   /* n_kernels entries, or NULL */
} hidet_kernel_set;

/* Parses a kernel-set answer (len bytes of json). -EPROTO (with err) when it does not match. A
 * set of a dynamic op must declare every name it uses (int parameters, grid rules, output axes)
 * in its "dims"; one inside a dispatch table may leave "dims" out (hidet_dispatch_parse). */
HIDET_EXPORT int hidet_kernel_set_parse(const char *json, size_t len, hidet_kernel_set **ret,
                                        hidet_error *err);
HIDET_EXPORT hidet_kernel_set *hidet_kernel_set_free(hidet_kernel_set *s);

/* Sizes are given by name: names[i] has size sizes[i], i < n, every dim of the set (or table)
 * exactly once. A size outside its dim's range is -ERANGE with the message "n is 9000; its range
 * is 1..8192" (", a multiple of 8" when multiple_of > 1) and err->field "sizes.n"; a missing,
 * unknown or repeated name is -EINVAL. */

/* Kernel `kernel` of s launched at the sizes: *ret_grid (3 entries) its grid, grid rules
 * evaluated (-ERANGE when one exceeds CUDA's limits), and ret_ints[index] (by parameter index, so
 * an array of the kernel's n_params entries; others are left alone) the value of each "int"
 * parameter, which the kernel takes by value as a `long long`. A static set takes n = 0 and
 * gives its fixed grid. Refuses (-EPROTO) a kernel with a parameter type it does not know. */
HIDET_EXPORT int hidet_kernel_set_bind(const hidet_kernel_set *s, size_t kernel,
                                       const char *const *names, const int64_t *sizes, size_t n,
                                       uint32_t ret_grid[3], long long *ret_ints, hidet_error *err);
/* The tensor map of parameter params[param] of kernel `kernel` at the sizes (names, sizes, n as
 * above): the description to encode for this launch (cuTensorMapEncodeTiled), each dimension
 * that follows dims evaluated; a map that follows none is returned as it is. -EINVAL when the
 * parameter is not a "tensor_map"; -ERANGE when a dimension leaves 1..2^32 at these sizes. A
 * launcher encodes the map per buffer address and sizes (hidet_plan_* passes fixed shapes only,
 * and refuses a set whose maps follow dims). */
HIDET_EXPORT int hidet_kernel_set_bind_map(const hidet_kernel_set *s, size_t kernel, size_t param,
                                           const char *const *names, const int64_t *sizes,
                                           size_t n, hidet_tensor_map *ret, hidet_error *err);
/* The size of output axis `axis` at the sizes (a fixed axis: its size); -ERANGE/-EINVAL as
 * above. */
HIDET_EXPORT int hidet_kernel_set_output_dim(const hidet_kernel_set *s, int axis,
                                             const char *const *names, const int64_t *sizes,
                                             size_t n, int64_t *ret, hidet_error *err);

/* ---- dispatch tables ---------------------------------------------------------------------- */

typedef enum {
    HIDET_ENTRY_READY = 0, /* its kernel_set was tuned for its ranges */
    HIDET_ENTRY_TUNING,    /* its job runs (job is its URL) */
    HIDET_ENTRY_UNTUNED,   /* nothing yet: request again with "sizes" to have it tuned */
    HIDET_ENTRY_UNKNOWN,   /* a state this client version does not know: never launched */
} hidet_entry_state;

typedef struct hidet_dispatch_entry {
    /* The sizes the entry covers, per dim of the table (same order): lo[k] .. hi[k]. */
    int64_t lo[HIDET_MAX_DIMS], hi[HIDET_MAX_DIMS];
    hidet_entry_state state;
    char state_name[16];          /* as sent */
    hidet_kernel_set *kernel_set; /* READY: its set, whose dims are the entry's ranges when the
                                   * answer leaves them out; else NULL */
    char *job;                    /* TUNING (or READY and coarse, its own tuning): the job's URL
                                   * ("/v1/jobs/12"); else NULL */
    bool coarse;                  /* READY with the kernel of a wider range it was cut from
                                   * (docs/api.md, "coarse"): request again with "sizes" to have it
                                   * tuned itself */
} hidet_dispatch_entry;

/* The answer to a request whose shapes name dims: one generic kernel set valid for every size,
 * and entries tuned for ranges of the sizes. */
typedef struct hidet_dispatch {
    char op[32], arch[16];
    char op_key[HIDET_KEY_LEN + 1];
    int n_dims;
    hidet_dim dims[HIDET_MAX_DIMS]; /* sorted by name */
    int output_rank;
    int64_t output_shape[HIDET_MAX_RANK]; /* at the dims' max on named axes */
    unsigned output_dims[HIDET_MAX_RANK]; /* as in hidet_kernel_set */
    char output_dtype[8];
    hidet_kernel_set *generic;
    hidet_dispatch_entry *entries;
    size_t n_entries;
    char *json;                     /* the answer as received */
} hidet_dispatch;

/* Parses a dispatch-table answer; -EPROTO naming the field when it does not match docs/api.md.
 * hidet_is_dispatch() tells the two answers of POST /v1/kernels apart (it has "dispatch"). */
HIDET_EXPORT int hidet_dispatch_parse(const char *json, size_t len, hidet_dispatch **ret,
                                      hidet_error *err);
HIDET_EXPORT hidet_dispatch *hidet_dispatch_free(hidet_dispatch *d);
HIDET_EXPORT bool hidet_is_dispatch(const char *json, size_t len);
/* The kernel set to launch at the sizes: that of the entry whose ranges hold every size (the
 * first; entries do not overlap) when it is READY, else the generic set; *ret_entry (may be
 * NULL) the index of that entry whatever its state (so a caller can ask for a range that is not
 * ready to be tuned), or -1 when none holds them. The set belongs to d. Sizes outside the
 * table's dims: -ERANGE as above. */
HIDET_EXPORT int hidet_dispatch_select(const hidet_dispatch *d, const char *const *names,
                                       const int64_t *sizes, size_t n,
                                       const hidet_kernel_set **ret, long *ret_entry,
                                       hidet_error *err);

/* ---- jobs --------------------------------------------------------------------------------- */

typedef enum {
    HIDET_JOB_QUEUED = 0,
    HIDET_JOB_RUNNING,
    HIDET_JOB_DONE,
    HIDET_JOB_FAILED,
    HIDET_JOB_CANCELLED,
    HIDET_JOB_UNKNOWN, /* a state this client version does not know; see json */
} hidet_job_state;

typedef struct hidet_job {
    char id[32];
    hidet_job_state state;
    char op[32], arch[16], tune[16], priority[16];
    int64_t total, done, failed; /* candidates */
    double best_us;              /* < 0 when none yet */
    double elapsed_s;
    int64_t waiters;
    char *result;                /* "/v1/kernels/KEY" when done, else NULL */
    char result_key[HIDET_KEY_LEN + 1]; /* KEY of result, or "" */
    bool measured;
    char *warning;               /* NULL when none */
    char error_code[32];         /* when failed */
    char *error_message;         /* when failed, else NULL */
    char *json;                  /* the job object as received */
} hidet_job;

/* Parses {"job":{...}} or a bare job object. */
HIDET_EXPORT int hidet_job_parse(const char *json, size_t len, hidet_job **ret, hidet_error *err);
HIDET_EXPORT hidet_job *hidet_job_free(hidet_job *j);
/* Static names: "queued", "running", ...; never NULL. */
HIDET_EXPORT const char *hidet_job_state_name(hidet_job_state s);

/* ---- calls -------------------------------------------------------------------------------- */

/* POST /v1/kernels with a request (JSON text). A 200 answer fills *ret_set; a 202 answer (the
 * request had "wait":false) fills *ret_job, or fails with -EAGAIN when ret_job is NULL. Exactly
 * one of the two is set on success. */
HIDET_EXPORT int hidet_request_kernels(hidet_client *c, const char *request_json,
                                       hidet_kernel_set **ret_set, hidet_job **ret_job,
                                       hidet_error *err);
/* POST /v1/kernels with a request that names dims: the dispatch table. A request with "sizes"
 * (hidet_request_size()) has the ranges holding them tuned, as jobs, without waiting for them. */
HIDET_EXPORT int hidet_request_dispatch(hidet_client *c, const char *request_json,
                                        hidet_dispatch **ret, hidet_error *err);
/* GET /v1/kernels/KEY. */
HIDET_EXPORT int hidet_kernel_set_get(hidet_client *c, const char *key, hidet_kernel_set **ret,
                                      hidet_error *err);
/* The module's PTX (NUL-terminated text) and cubin (bytes) by artifact key. */
HIDET_EXPORT int hidet_fetch_ptx(hidet_client *c, const char *key, char **ret, size_t *ret_len,
                                 hidet_error *err);
HIDET_EXPORT int hidet_fetch_cubin(hidet_client *c, const char *key, void **ret, size_t *ret_len,
                                   hidet_error *err);
/* GET /v1/jobs/ID, DELETE /v1/jobs/ID (ret may be NULL), GET /v1/jobs. */
HIDET_EXPORT int hidet_job_get(hidet_client *c, const char *id, hidet_job **ret, hidet_error *err);
HIDET_EXPORT int hidet_job_cancel(hidet_client *c, const char *id, hidet_job **ret,
                                  hidet_error *err);
HIDET_EXPORT int hidet_jobs_list(hidet_client *c, hidet_job ***ret, size_t *ret_n,
                                 hidet_error *err);
/* Frees an array from hidet_jobs_list(); returns NULL. */
HIDET_EXPORT hidet_job **hidet_jobs_free(hidet_job **v, size_t n);

/* ---- request builder ---------------------------------------------------------------------- */

typedef struct hidet_request hidet_request;
typedef struct hidet_step hidet_step; /* one prologue/epilogue step, owned by its request */

/* A request for op ("matmul", "conv2d", "softmax", ...). Names are not checked here: the
 * daemon validates the request and says which field is wrong. */
HIDET_EXPORT int hidet_request_new(const char *op, hidet_request **ret);
HIDET_EXPORT hidet_request *hidet_request_free(hidet_request *r);
/* Appends an input tensor (rank 0..HIDET_MAX_RANK, dtype "f16", "bf16", "f32", or "i32", "i64"
 * where the op reads integers: gather's index, an elementwise cast's input). */
HIDET_EXPORT int hidet_request_add_input(hidet_request *r, const int64_t *shape, int rank,
                                         const char *dtype);
/* Appends an input whose axes may be names: dims[d] non-NULL makes axis d the named dim (or
 * product, "b*s") dims[d], declared with hidet_request_dim(); shape[d] is read where dims[d] is
 * NULL. dims NULL: as hidet_request_add_input(). */
HIDET_EXPORT int hidet_request_add_input_named(hidet_request *r, const char *const *dims,
                                               const int64_t *shape, int rank, const char *dtype);
/* Declares dims.name: its range min..max, every size a multiple of multiple_of (<= 1: left out,
 * the daemon's default 1); again for one name replaces it. */
HIDET_EXPORT int hidet_request_dim(hidet_request *r, const char *name, int64_t min, int64_t max,
                                   int64_t multiple_of);
/* Appends v to dims.name.hints (declare the dim first: -ENOENT otherwise). */
HIDET_EXPORT int hidet_request_dim_hint(hidet_request *r, const char *name, int64_t v);
/* Sets sizes.name: a size the caller is about to launch with (its range is tuned). */
HIDET_EXPORT int hidet_request_size(hidet_request *r, const char *name, int64_t v);
/* Sets attrs.name (replacing an earlier value). */
HIDET_EXPORT int hidet_request_attr_int(hidet_request *r, const char *name, int64_t v);
HIDET_EXPORT int hidet_request_attr_bool(hidet_request *r, const char *name, bool v);
HIDET_EXPORT int hidet_request_attr_double(hidet_request *r, const char *name, double v);
HIDET_EXPORT int hidet_request_attr_string(hidet_request *r, const char *name, const char *v);
HIDET_EXPORT int hidet_request_attr_int_array(hidet_request *r, const char *name,
                                              const int64_t *v, size_t n);
/* Appends {"op":op} to the epilogue, or {"input":input,"op":op} to the prologue; add the step's
 * other fields with hidet_step_*(). *ret_step (may be NULL) stays valid until r is freed. */
HIDET_EXPORT int hidet_request_epilogue(hidet_request *r, const char *op, hidet_step **ret_step);
HIDET_EXPORT int hidet_request_prologue(hidet_request *r, int input, const char *op,
                                        hidet_step **ret_step);
HIDET_EXPORT int hidet_step_int(hidet_step *s, const char *name, int64_t v);
HIDET_EXPORT int hidet_step_double(hidet_step *s, const char *name, double v);
HIDET_EXPORT int hidet_step_string(hidet_step *s, const char *name, const char *v);
/* Top-level options; unset ones are left out so the daemon's defaults apply. tune: "none",
 * "model", "measure"; priority: "blocking", "normal", "background". Budget: seconds <= 0 or
 * candidates <= 0 leaves that limit out. */
HIDET_EXPORT int hidet_request_set_arch(hidet_request *r, const char *arch);
HIDET_EXPORT int hidet_request_set_tune(hidet_request *r, const char *tune);
HIDET_EXPORT int hidet_request_set_wait(hidet_request *r, bool wait);
HIDET_EXPORT int hidet_request_set_priority(hidet_request *r, const char *priority);
HIDET_EXPORT int hidet_request_set_budget(hidet_request *r, double seconds, int64_t candidates);
/* The request as compact JSON; *ret is released with free(). */
HIDET_EXPORT int hidet_request_json(const hidet_request *r, char **ret);

/* ---- launch plans (hidet_plan_*) --------------------------------------------------------- */

/* A launch plan (docs/graphs.md) made runnable: parse the plan hidetd answers for a graph (or a
 * saved copy), bind the caller's device memory to its inputs, weights and outputs by name, load
 * its kernels, run the prepare steps once and the steps on every forward pass, on a CUstream.
 *
 * The CUDA driver is not linked: libcuda.so.1 is opened (dlopen) at the first hidet_plan_load()
 * ($HIDETD_LIBCUDA names another file), so programs that only parse plans run without a GPU;
 * a machine without the driver gets -ELIBACC with dlopen's reason. Device work happens in the
 * calling thread's current CUDA context (when there is none, the primary context of device 0
 * is made current). Device pointers are CUdeviceptr values, streams CUstream handles (NULL:
 * the legacy default stream). A plan is not safe for concurrent use; one plan's arena serves
 * one forward pass at a time.
 *
 * Order: hidet_plan_parse() (or hidet_plan_request()), hidet_plan_bind() every weight,
 * hidet_plan_load(), hidet_plan_prepare(); then per pass bind the inputs and outputs and
 * hidet_plan_launch(). Errors: -EPROTO a plan that breaks docs/graphs.md (the message names the
 * field), -EINVAL a bad argument or binding, -ENOENT an unknown name, -EALREADY a call out of
 * order, -ELIBACC no driver, -EIO a CUDA call failed (its name and text in the message). */

typedef struct hidet_plan hidet_plan;

typedef enum {
    HIDET_PLAN_INPUT = 0, /* given on every pass */
    HIDET_PLAN_WEIGHT,    /* given once, before hidet_plan_prepare() */
    HIDET_PLAN_OUTPUT,    /* written by every pass */
} hidet_plan_role;

typedef struct hidet_plan_tensor {
    char name[132];
    int rank;
    int64_t shape[HIDET_MAX_RANK];
    char dtype[8];  /* "f16", "bf16", "f32", "i32", "i64" */
    uint64_t bytes; /* dense row-major size */
} hidet_plan_tensor;

/* Parses a plan (len bytes of JSON) and checks it: every binding resolves, every buffer lies
 * in its region, every bound tensor is large enough for what the kernel reads or writes. */
HIDET_EXPORT int hidet_plan_parse(const char *json, size_t len, hidet_plan **ret,
                                  hidet_error *err);
/* POST /v1/graphs with a graph request (JSON text; "wait" must not be false) and parses the
 * plan answered. */
HIDET_EXPORT int hidet_plan_request(hidet_client *c, const char *graph_request_json,
                                    hidet_plan **ret, hidet_error *err);
/* Frees the plan, its modules and the device memory hidet_plan_load() allocated (in the
 * current context); NULL is accepted. */
HIDET_EXPORT hidet_plan *hidet_plan_free(hidet_plan *p);

/* The plan's tensors of a role, in the plan's order; NULL past the end. */
HIDET_EXPORT size_t hidet_plan_count(const hidet_plan *p, hidet_plan_role role);
HIDET_EXPORT const hidet_plan_tensor *hidet_plan_tensor_at(const hidet_plan *p,
                                                           hidet_plan_role role, size_t i);
/* Bytes of the arena and of the constants region (allocate them once). */
HIDET_EXPORT uint64_t hidet_plan_arena_bytes(const hidet_plan *p);
HIDET_EXPORT uint64_t hidet_plan_constants_bytes(const hidet_plan *p);
/* Number of steps of the forward pass, and of the prepare phase. */
HIDET_EXPORT size_t hidet_plan_steps(const hidet_plan *p, bool prepare);
/* Where an intermediate (a plan "buffers" entry, e.g. "h3" or "#workspace0") lives: in the
 * constants region (*ret_constants) or the arena, at *ret_offset, *ret_bytes long. -ENOENT when
 * the plan has no such buffer. */
HIDET_EXPORT int hidet_plan_buffer(const hidet_plan *p, const char *name, bool *ret_constants,
                                   uint64_t *ret_offset, uint64_t *ret_bytes);

/* Binds device memory of `bytes` bytes to the input, weight or output `name`; -ENOENT names
 * the plan's tensors, -EINVAL when bytes is less than the tensor's size or ptr is 0 or not
 * 16-byte aligned (a tensor with named axes: its size at the sizes, checked at the launch).
 * Rebinding is allowed (a new input each pass). */
HIDET_EXPORT int hidet_plan_bind(hidet_plan *p, const char *name, uint64_t ptr, uint64_t bytes,
                                 hidet_error *err);
/* Optional, before hidet_plan_load(): the caller's own arena and constants memory (at least
 * the plan's sizes, 256-byte aligned; 0 where the plan needs none). Otherwise
 * hidet_plan_load() allocates them with cuMemAlloc. */
HIDET_EXPORT int hidet_plan_set_memory(hidet_plan *p, uint64_t arena, uint64_t constants,
                                       hidet_error *err);
/* Opens the driver, fetches every kernel set's cubin from c (its PTX, JIT-compiled, when the
 * cubin does not load on this GPU), loads the modules and allocates what hidet_plan_set_memory()
 * did not give. Once per plan. */
HIDET_EXPORT int hidet_plan_load(hidet_plan *p, hidet_client *c, hidet_error *err);
/* Runs the prepare steps on stream (every weight bound); again after weights change. */
HIDET_EXPORT int hidet_plan_prepare(hidet_plan *p, void *stream, hidet_error *err);
/* Launches the steps on stream (every input, weight and output bound; prepare run). A plan
 * with named dims first applies the sizes (hidet_plan_apply_sizes() below). */
HIDET_EXPORT int hidet_plan_launch(hidet_plan *p, void *stream, hidet_error *err);

/* ---- plans with named dims (docs/graphs.md, "Named dimensions"; since 2.2) ---------------- *
 *
 * A plan answered for a graph whose inputs name dims ("b", "s") declares them (1 to
 * HIDET_MAX_DIMS, each with its range) and runs at any sizes in range. Its arena, buffers and
 * constants are laid out at every name's max: hidet_plan_arena_bytes() is allocated once.
 * hidet_plan_tensor_at() gives each tensor's shape and bytes at the names' max.
 *
 * Per pass: hidet_plan_set_shape() each input whose shape changed (the sizes come from the
 * inputs' axes that are one name; an axis that is a product "b*s" and the fixed axes are checked
 * against them), or hidet_plan_set_sizes() for a name no input axis gives alone; bind the inputs
 * and outputs (their bytes are checked at the launch against their size at the sizes; read an
 * output's shape with hidet_plan_shape()), then hidet_plan_launch(). When the sizes change, each
 * step chooses its kernel set - the ready entry of its dispatch table whose ranges hold them,
 * else the table's generic set - and binds it: grid rules evaluated, "int" parameters set,
 * tensor maps described at the sizes (their encodings are kept per address and sizes, so
 * returning to sizes met lately encodes nothing). Same sizes as the last pass: nothing is
 * redone. Refusals: -EINVAL for sizes that disagree ("input 'x' shape[0]: b is 6 here, but 4
 * from input 'm' shape[0]", err->field "x.shape[0]") or that no input gives; -ERANGE for a size
 * outside its range, worded as the daemon words it ("b is 9000; its range is 1..8192", ", a
 * multiple of 8" where multiple_of > 1; err->field "sizes.b").
 *
 * This client does not ask the daemon to tune a range that is not ready yet: the generic set
 * serves it until a plan answered later (hidet_plan_request() with "sizes" in the graph
 * request) lists it ready. The Python runtime re-asks in the background. */

/* The plan's named dims, sorted by name (0 and NULL for a static plan). */
HIDET_EXPORT int hidet_plan_n_dims(const hidet_plan *p);
HIDET_EXPORT const hidet_dim *hidet_plan_dim_at(const hidet_plan *p, int i);
/* The shape of input `name` for the next passes (rank its rank; rank 0 forgets it). -ENOENT for
 * no such input, -EINVAL for a different rank or a size below 1; the sizes are checked when
 * applied. */
HIDET_EXPORT int hidet_plan_set_shape(hidet_plan *p, const char *name, const int64_t *shape,
                                      int rank, hidet_error *err);
/* Sizes by name (names[i]: sizes[i], i < n), replacing those given before (n = 0: none); they
 * take precedence over the inputs' shapes, which must agree with them. -EINVAL for a name the
 * plan does not declare. */
HIDET_EXPORT int hidet_plan_set_sizes(hidet_plan *p, const char *const *names,
                                      const int64_t *sizes, size_t n, hidet_error *err);
/* Resolves the sizes (explicit, then from the input shapes), checks them (see above) and binds
 * every step at them; hidet_plan_launch() does it, call it to check sizes or read shapes before.
 * A static plan: nothing to do, 0. */
HIDET_EXPORT int hidet_plan_apply_sizes(hidet_plan *p, hidet_error *err);
/* The size of dim `name` applied last: 0, -ENOENT (no such dim), -EALREADY (none applied). */
HIDET_EXPORT int hidet_plan_size(const hidet_plan *p, const char *name, int64_t *ret);
/* The shape (up to HIDET_MAX_RANK entries; may be NULL), rank and bytes of an input, weight or
 * output at the sizes applied last (a tensor without names: its fixed shape). -EALREADY for a
 * tensor with named axes before any sizes were applied. */
HIDET_EXPORT int hidet_plan_shape(const hidet_plan *p, const char *name,
                                  int64_t shape[HIDET_MAX_RANK], int *ret_rank,
                                  uint64_t *ret_bytes, hidet_error *err);
/* What a launch runs for kernel `kernel` of step `step` at the sizes applied last (for checks
 * and tools; needs no GPU): *ret_entry the dispatch-table entry holding the sizes (-1: none, or
 * a step without a table), ret_key the key of the chosen kernel set, ret_grid its grid,
 * ret_args[j] (j < n_args) the 8 bytes passed as parameter j (a pointer: base address plus
 * offset, the arena's and constants' bases 0 before hidet_plan_load(); an "int" parameter: the
 * size; a tensor map: its buffer's address), *ret_n_params the kernel's parameter count. Any
 * ret_* may be NULL. */
HIDET_EXPORT int hidet_plan_step_kernel(const hidet_plan *p, size_t step, size_t kernel,
                                        long *ret_entry, char ret_key[HIDET_KEY_LEN + 1],
                                        uint32_t ret_grid[3], uint64_t *ret_args, size_t n_args,
                                        size_t *ret_n_params, hidet_error *err);

#ifdef __cplusplus
}
#endif

#endif
