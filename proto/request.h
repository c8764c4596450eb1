/* proto/request.h - strict validation of kernel requests (the JSON body of POST /v1/kernels and
 * POST /v1/spaces) into a canonical tuner_op, and the canonical JSON that keys the cache.
 *
 * Every field of the request language (docs/api.md) is checked here, once, so the rest of the
 * daemon only ever sees a tuner_op that obeys the conventions of op/op.h: known ops, dtypes
 * and steps, shapes within limits, consistent operand shapes, inferred output. A rejected request
 * yields a proto_error that names the HTTP status, the machine code, a human sentence and the
 * offending field path ("inputs[1].shape[0]", "epilogue[2].op").
 *
 * Nothing here logs, blocks or keeps state; every function is thread-safe.
 */
#ifndef HIDET_PROTO_REQUEST_H
#define HIDET_PROTO_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "op/op.h"

/* Limits of the request language (beyond TUNER_MAX_RANK / _INPUTS / _STEPS). */
#define PROTO_MAX_JSON_DEPTH 8            /* nesting of arrays and objects */
#define PROTO_MAX_DIM 2147483647LL        /* 2^31 - 1 */
#define PROTO_MAX_NUMEL 2147483648LL      /* 2^31 elements per tensor */
#define PROTO_MAX_BUDGET_S 86400.0
#define PROTO_MAX_BUDGET_CANDIDATES 100000

/* Priorities; the values equal scheduler/sched.h's SCHED_PRIO_* (lower runs first; daemon/server.c
 * asserts it where a request becomes a job). */
enum { PROTO_PRIO_BLOCKING = 0, PROTO_PRIO_NORMAL = 1, PROTO_PRIO_BACKGROUND = 2 };

/* The job options a request carries beside what it asks for: the same fields, defaults and
 * checks for a kernel request and a graph request (proto_parse_job_options). */
typedef struct proto_job_options {
    tuner_target target;  /* default sm_90; meaningless when arch_native */
    bool arch_given;      /* the body named "arch" (else the daemon's default_arch applies) */
    bool arch_native;     /* "arch": "native": the exact target of the daemon's GPU, which the
                           * resolver decides (resolve_apply_defaults) */
    tuner_tune_mode tune; /* default TUNER_TUNE_MODEL */
    bool tune_given;      /* the body named "tune" (else the daemon's default_mode may apply) */
    bool wait;            /* default true */
    int priority;         /* PROTO_PRIO_*; default PROTO_PRIO_NORMAL */
    double budget_s;      /* 0: the scheduler's default */
    int budget_candidates; /* 0: the scheduler's default */
    bool retune;          /* "retune": true: tune again, though a kernel is stored, and replace
                           * the one a cluster tier has pinned (docs/cluster.md); default false;
                           * kernel requests only */
} proto_job_options;

/* What a request with named dimensions says beyond its op (docs/api.md, "Named dimensions"):
 * the sizes worth tuning first, and the sizes the client is about to launch with. Neither is part
 * of the op's key. Indices are op.dims's. */
#define PROTO_MAX_HINTS 16
typedef struct proto_dynamic {
    int n_hints[TUNER_MAX_DIMS];
    int64_t hints[TUNER_MAX_DIMS][PROTO_MAX_HINTS];
    bool has_sizes;                /* "sizes" was given: a size for every dim */
    int64_t sizes[TUNER_MAX_DIMS];
} proto_dynamic;

/* A validated kernel request. */
typedef struct proto_kernel_request {
    tuner_op op;
    proto_job_options opt;
    proto_dynamic dyn; /* all zero unless op.n_dims > 0 */
} proto_kernel_request;

/* Why a request was refused: everything the error answer needs. */
typedef struct proto_error {
    int status;        /* 400, 422, ... */
    char code[32];     /* "invalid_json", "invalid_field", "unknown_op", ... */
    char message[512]; /* one human sentence (an unknown step's lists every step: ~250 bytes) */
    char field[96];    /* path of the offending field, "" when none */
} proto_error;

/* Parses and validates a request body of len bytes (it need not be NUL-terminated).
 * Returns 0 and fills *ret, or -EINVAL and fills *ret_err (then *ret is untouched), or -ENOMEM
 * (then *ret_err says "internal"). ret_err may not be NULL. */
int proto_kernel_request_parse(const char *body, size_t len, proto_kernel_request *ret,
                               proto_error *ret_err);

/* The canonical JSON of a parsed op and its fusion anchor are tuner_op_canonical_json() and
 * tuner_op_strip_fusion() (op/op.h): the scheduler keys on the same form. */

/* Fills e with status, code, field (NULL: "") and the formatted message; returns -EINVAL. For
 * validators of other JSON languages (graph/) that answer with the same error shape. */
__attribute__((format(printf, 5, 6)))
int proto_fail(proto_error *e, int status, const char *code, const char *field, const char *fmt,
               ...);

struct cJSON;
/* The checks every JSON body gets before and while cJSON parses it: not empty, no NUL byte, no
 * \u0000 in a string (cJSON would cut the string there), nesting at most PROTO_MAX_JSON_DEPTH,
 * well-formed (the error names the byte). 0 and *root (the caller deletes it), or the error in
 * *e (-ENOMEM when memory ran out). */
int proto_parse_json_body(const char *body, size_t len, struct cJSON **root, proto_error *e);

/* The job options of a request object: "arch", "tune", "wait", "priority", "budget" and
 * "retune", checked, into *opt, every field of which it sets (the defaults where a key is
 * absent). Graph requests use it too, so both answer the same errors (a graph body refuses
 * "retune" as an unknown key before this runs). 0, or -EINVAL with *e filled. */
int proto_parse_job_options(const struct cJSON *root, proto_job_options *opt, proto_error *e);

/* masked_fill's value, in a step or a graph node's attrs: a finite number, or the string "-inf"
 * or "inf" (JSON has no infinity; attention masks fill with -inf). 0 with *ret set, or -EINVAL
 * (400 invalid_field at field). */
int proto_fill_value(const struct cJSON *v, const char *field, double *ret, proto_error *e);

/* Refuses (400 invalid_field, the field's path) a member of obj not in allowed (NULL-terminated),
 * suggesting the closest allowed name, and a member given twice: a strict language, so that a
 * misspelt option is an error rather than silently its default. path prefixes the field ("" at
 * the top level). 0 or -EINVAL. */
int proto_check_keys(const struct cJSON *obj, const char *const *allowed, const char *path,
                     proto_error *e);

/* The name in known (NULL-terminated) closest to s, when it is close enough to be a slip of the
 * keyboard (edit distance, case ignored: one edit in a name of up to 3 letters, two up to 6,
 * three beyond), else NULL. For "did you mean" in errors about unknown names. */
const char *proto_closest_name(const char *s, const char *const *known);

/* {"error":{"code":CODE,"message":MESSAGE,"field":FIELD}} with proper escaping; NULL message or
 * field are written as "". Messages and fields quote client text (op names, keys, arch strings,
 * truncated with %.40s), so every byte that is not part of well-formed UTF-8 is written as the
 * four characters \xNN: the answer is always valid UTF-8 JSON. status is not part of the body
 * (it is the HTTP status). Returns a malloc'd string, or NULL on allocation failure. */
char *proto_error_json(int status, const char *code, const char *message, const char *field);

/* A malloc'd copy of s in which every byte that is not part of well-formed UTF-8 (stray
 * continuation bytes, truncated or overlong sequences, surrogates, code points past U+10FFFF)
 * is replaced by the text \xNN (two uppercase hex digits). NULL on allocation failure. */
char *proto_utf8_escape(const char *s);

/* Same, from a proto_error. */
char *proto_error_to_json(const proto_error *err);

/* The static name of a PROTO_PRIO_* value ("blocking", "normal", "background"); never NULL ("?"
 * out of range). The names of ops, dtypes, steps, reduce kinds, tune modes and archs, and their
 * parsers, are op/'s (op/op.h). */
const char *proto_priority_name(int priority);

#endif
