/* kernel_cache/kc.h - the durable kernel cache: SQLite in WAL mode, prepared statements only.
 *
 * Three kinds of record:
 *  - artifacts: artifact key -> PTX, cubin (each with a SHA-256 checked on every read; a mismatch
 *    fails closed), launch description (typed rows: kc_launch), schedule, how it was chosen
 *    (kc_choice), provenance, timings;
 *  - selections: op key (a request without the schedule) -> the artifact that answers it, and
 *    how that choice was made (template default, cost model, or measured on a GPU);
 *  - trials: tuning key -> one row per candidate measured (time, error or failure reason), so a
 *    space can be re-ranked without re-measuring and fused variants can reuse an anchor's tuning;
 *  - the quarantine (schema 3): artifact keys the daemon took out of service, with the reason.
 * A dynamic op's launch (schema 5) also holds its named dims, size arguments and grid rules, and
 * (schema 6) how well its kernel fits its range (range_worst).
 *
 * Keys are lowercase hex SHA-256 of length-prefixed parts (kc_key()), so no two different part
 * lists collide by concatenation. The store survives kill -9 at any moment (WAL, one transaction
 * per logical write). Several processes may open the same file (hidetctl beside hidetd).
 *
 * Returns: 0 or a negative errno-style code: -ENOENT (no such record), -EBADMSG (stored blob
 * failed its digest), -EIO (SQLite error; kc_errmsg() has its text), -EBUSY (locked longer than
 * the 5 s busy timeout), -EINVAL, -ENOMEM.
 * A handle may be shared between threads (calls are serialised by a mutex of the handle).
 * Output parameters named ret_* are untouched on failure. Library code never logs.
 */
#ifndef HIDET_KERNEL_CACHE_KC_H
#define HIDET_KERNEL_CACHE_KC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_cache/kc_sign.h"
#include "op/tmap.h"

#define KC_KEY_LEN 64 /* hex chars; buffers are KC_KEY_LEN + 1 */
#define KC_SCHEMA_VERSION 6
/* The version hashed into op and tuning keys (scheduler/keys.c). It changes only when a stored
 * record would mean something else (schema 2's typed launches), not when a table is added beside
 * the records (schema 3's quarantine, schema 5's named dims) or a column that older records leave
 * empty (schema 4's tensor maps, schema 5's grid rules, schema 6's range_worst): that must not
 * make every op tune again. */
#define KC_KEY_SCHEMA 2

#define KC_MAX_KERNELS 4 /* launches in one kernel set */
#define KC_MAX_ARGS 12   /* pointer and size arguments of one launch */
#define KC_MAX_MAPS TUNER_MAX_TMAPS /* tensor-map arguments of one launch, after the pointers */
#define KC_MAX_INPUTS 8  /* op inputs a launch argument can name */
#define KC_MAX_RANK 6    /* dimensions of the output */
#define KC_MAX_DIMS 4    /* named dimensions of a dynamic op (TUNER_MAX_DIMS) */
#define KC_DIM_NAME_LEN 16 /* a dim's name with its NUL (TUNER_DIM_NAME_LEN) */
/* Bounds on what one record may hold (kc_artifact_put and import refuse more): generous for any
 * kernel set the tuner writes, small enough that a hostile file cannot make a reader allocate
 * without limit. */
#define KC_MAX_CODE_BYTES ((size_t)64 << 20) /* PTX, and cubin, each */
#define KC_MAX_TEXT_BYTES ((size_t)1 << 20)  /* op JSON, schedule JSON, provenance, each */
/* Bounds on a launch (kc_launch_check): the limits of CUDA itself and of the request language,
 * so that a record a request could never have produced (a damaged or forged row) is refused when
 * it is stored, imported or read, and never handed to a client. */
#define KC_MAX_GRID_X 2147483647u  /* 2^31 - 1 */
#define KC_MAX_GRID_YZ 65535u
#define KC_MAX_BLOCK_THREADS 1024u /* per block, and per x or y dimension */
#define KC_MAX_BLOCK_Z 64u
/* Dynamic shared memory of one block: the most any target op/ lists gives (sm_90, sm_100:
 * 227 KiB; tuner/arch.c has each target's own). */
#define KC_MAX_SHARED_BYTES 232448u
/* The request language's limits on a tensor (proto/request.h PROTO_MAX_DIM, PROTO_MAX_NUMEL;
 * kernel_cache/tests checks they agree). */
#define KC_MAX_DIM 2147483647LL
#define KC_MAX_NUMEL 2147483648ULL
/* The largest workspace a valid request's kernels use: partial sums in f32 of at most 256 slices
 * (reduce_cols' widest split) per element of a tensor within KC_MAX_NUMEL. */
#define KC_MAX_WORKSPACE_BYTES (256ULL * 4 * KC_MAX_NUMEL)
/* kc_launch.range_worst's largest: a ratio of two timings, far past any kernel worth keeping. */
#define KC_MAX_RANGE_WORST 1000.0

typedef struct kc_db kc_db;

/* Opens (creating and migrating as needed) the database at path; parent directories are created.
 * On failure *ret_err (malloc'd) says why. */
int kc_open(const char *path, kc_db **ret, char **ret_err);
/* Opens another connection to the file db is open on (migrated already), for a thread that must
 * not wait on db's handle lock: the scheduler stores kernels from the thread pool while the loop
 * thread serves hits through db. -EINVAL for a database without a file. */
int kc_open_another(kc_db *db, kc_db **ret, char **ret_err);
/* Closes; accepts NULL. */
void kc_close(kc_db *db);
/* Text of the last SQLite error on this handle (static storage of the handle). */
const char *kc_errmsg(kc_db *db);
/* SQLite's PRAGMA data_version for this handle: it changes when another connection (another
 * process, e.g. hidetctl) commits to the file, so callers can drop in-memory caches. */
int kc_data_version(kc_db *db, int64_t *ret);

/* Hex SHA-256 over the parts, each prefixed by its length. */
void kc_key(const char *const *parts, size_t n_parts, char out[KC_KEY_LEN + 1]);
/* The artifact key of an op key and a schedule: kc_key() over (op_key, schedule_json). The one
 * derivation of the daemon (scheduler/keys.c sched_artifact_key, tested to agree) that this
 * module repeats, to check records it did not write (import, verify). */
void kc_artifact_key(const char *op_key, const char *schedule_json, char out[KC_KEY_LEN + 1]);
/* True when s is a key as this module writes them: KC_KEY_LEN lowercase hex digits. */
bool kc_key_is_hex(const char *s);
/* Hex SHA-256 of a blob. */
void kc_sha256_hex(const void *data, size_t len, char out[KC_KEY_LEN + 1]);

/* How a stored kernel was chosen. Ordered so that it compares as a rank: a request is answered
 * by a kernel chosen at least as strongly as it asks. */
typedef enum kc_choice {
    KC_CHOSEN_DEFAULT = 0,  /* the template's default schedule (tune "none") */
    KC_CHOSEN_MODEL = 1,    /* the cost model's best (tune "model", or "measure" without a GPU) */
    KC_CHOSEN_MEASURED = 2, /* the fastest correct candidate measured on a GPU */
} kc_choice;

/* "default", "model", "measured"; "unknown" outside the enum. */
const char *kc_choice_name(kc_choice c);

/* What a kernel argument is: a pointer to a buffer - op input i (KC_BUF_INPUT0 + i), the
 * output, or the scratch workspace - or, for a dynamic op, the size of its named dim k
 * (KC_ARG_DIM0 + k), a `long long` passed by value. Same values as the tuner's TUNER_BUF_* and
 * TUNER_ARG_DIM0; stored as one byte per argument. */
typedef enum kc_buf {
    KC_BUF_INPUT0 = 0,
    KC_BUF_OUTPUT = KC_BUF_INPUT0 + KC_MAX_INPUTS,
    KC_BUF_WORKSPACE,
    KC_ARG_DIM0 = 16,
} kc_buf;

/* The buffer's name on the wire: "input0".."input7", "output", "workspace"; NULL outside the
 * buffers (a dim argument included). Static strings. */
const char *kc_buf_name(kc_buf b);
/* Parses a name kc_buf_name() writes. Returns 0, or -EINVAL (*ret untouched). */
int kc_buf_parse(const char *name, kc_buf *ret);
/* An argument's name in launch descriptions: a buffer's name, or "dim0".."dim3" for
 * KC_ARG_DIM0 + k; NULL for anything else. Static strings. */
const char *kc_arg_name(kc_buf a);
/* Parses a name kc_arg_name() writes. Returns 0, or -EINVAL (*ret untouched). */
int kc_arg_parse(const char *name, kc_buf *ret);
/* True for KC_ARG_DIM0 .. KC_ARG_DIM0 + KC_MAX_DIMS - 1. */
static inline bool kc_arg_is_dim(kc_buf a)
{
    return (int)a >= KC_ARG_DIM0 && (int)a < KC_ARG_DIM0 + KC_MAX_DIMS;
}

/* A named dimension of a dynamic op, as its kernel set answers it (op/op.h tuner_dim): the
 * sizes a launch may pass are min..max, multiples of multiple_of. */
typedef struct kc_dim {
    char name[KC_DIM_NAME_LEN]; /* [a-z_][a-z0-9_]*, unique in the launch */
    int64_t min, max, multiple_of;
} kc_dim;

/* How a dynamic op's launch sizes one grid dimension from its dims' sizes (tuner/tuner.h
 * tuner_grid_rule): grid = min(cap, mul * ceil(coef * product(sizes of the dims in `dims`) /
 * div)), cap 0: none. dims == 0 (and every other field 0): the grid dimension is fixed. */
typedef struct kc_grid_rule {
    uint8_t dims; /* bit set over kc_launch.dims */
    int64_t coef, div, mul, cap;
} kc_grid_rule;

/* The value of rule r at sizes[0..KC_MAX_DIMS) (bits outside r->dims ignored), saturating at
 * INT64_MAX instead of overflowing (callers compare it with CUDA's limits). */
int64_t kc_grid_rule_eval(const kc_grid_rule *r, const int64_t *sizes);

/* One kernel launch of a kernel set; launches run in order on one stream. Its parameters are
 * the n_args arguments (pointers and sizes), then the n_maps tensor maps (op/tmap.h; each map's
 * buf is a kc_buf naming a buffer; a dynamic op's map may have dimensions that follow dims). */
typedef struct kc_kernel {
    char name[64];          /* extern "C" entry point */
    uint32_t grid[3];       /* each >= 1; where grid_rule[d].dims != 0, its value at the dims' max */
    kc_grid_rule grid_rule[3]; /* all zero for a static op */
    uint32_t block[3];      /* each >= 1 */
    uint32_t shared_bytes;  /* dynamic shared memory */
    int n_args;             /* 0..KC_MAX_ARGS */
    kc_buf args[KC_MAX_ARGS];
    int n_maps;             /* 0..KC_MAX_MAPS */
    tuner_tmap maps[KC_MAX_MAPS];
} kc_kernel;

/* How to run an artifact: its launches, the workspace they share, and the output buffer. */
typedef struct kc_launch {
    int n_kernels;          /* 0..KC_MAX_KERNELS */
    kc_kernel kernels[KC_MAX_KERNELS];
    uint64_t workspace_bytes;
    bool has_output;        /* false only for a record that never said (answers "output": null) */
    int output_rank;        /* 0..KC_MAX_RANK */
    int64_t output_shape[KC_MAX_RANK]; /* a named axis: the product of its dims' max */
    uint8_t output_sym[KC_MAX_RANK];   /* 0: a fixed axis; else the bit set over dims it names */
    char output_dtype[8];   /* as on the wire: "f16", "bf16", "f32"; "f8e4m3", "f8e5m2" (a quantizing epilogue) */
    /* A dynamic op's named dimensions, in the order of its kernels' size arguments (the op's
     * tuner_op.dims); 0 for a static op. */
    int n_dims;             /* 0..KC_MAX_DIMS */
    kc_dim dims[KC_MAX_DIMS];
    /* How well one kernel fits a dynamic launch's range, as its range job measured it: the worst,
     * over the sizes it samples, of this launch's time against the best candidate's at that size
     * (>= 1). 0: not known (a static launch, one chosen by the model, or stored before schema 6).
     * A dispatch table cuts a range whose kernel fits it badly in two (resolve/dispatch.c). */
    double range_worst;
} kc_launch;

/* 0 when every field of l is in range (names C identifiers, grid and block within CUDA's limits
 * and >= 1, shared memory and workspace within KC_MAX_*, arguments inside the kc_buf enum, the
 * output's dtype a known one and its shape within the request language's limits, ...), else
 * -EINVAL. A dynamic launch's parts too: dims named as the request language names them, unique,
 * with 1 <= min <= max <= KC_MAX_DIM both multiples of multiple_of; dim arguments, grid rules
 * and named output axes only over existing dims; a rule with coef, div, mul >= 1, cap within
 * the grid's limit, whose value at the dims' max is grid[d]; a named axis's shape the product of
 * its dims' max; a tensor map's symbolic dimension (tuner_tmap.sym) over existing dims, its
 * sym_coef times their max being its dims[i]; range_worst 0, or in 1..KC_MAX_RANGE_WORST. A
 * static launch has none of them (all zero). kc_artifact_put and import refuse, and every read
 * reports as -EBADMSG, what this refuses. */
int kc_launch_check(const kc_launch *l);
/* The launch description as JSON text, as the export file carries it:
 * {"kernels":[{"name","grid","block","shared_bytes","args":["input0",...,"dim0"],
 *              "maps":[{"buffer":"input0", ...tuner_tmap_to_json's members}] (a symbolic map
 *                      dimension {"dims":[dim indices],"coef":N} in "dims"),
 *              "grid_rules":[null or {"dims":MASK,"coef","div","mul","cap"}, x3]}],
 *  "workspace_bytes":N, "output":{"shape":[...],"dtype":"f16","sym":[MASK,...]},
 *  "dims":[{"name","min","max","multiple_of"}], "range_worst":1.056} ("maps" left out when a
 *  kernel has none, as files written before them have none; "grid_rules", "sym" and "dims" left
 *  out for a static launch, so a static launch reads as it did before schema 5; "range_worst"
 *  left out when 0, as files written before schema 6 have none, which read it as 0; "output"
 *  left out when !has_output).
 * *ret is malloc'd. Returns 0, -EINVAL (kc_launch_check fails) or -ENOMEM. */
int kc_launch_json(const kc_launch *l, char **ret);

typedef struct kc_artifact {
    char key[KC_KEY_LEN + 1];
    char op_key[KC_KEY_LEN + 1];
    char op[24];            /* op name, for listing ("matmul") */
    char target[16];        /* "sm_90a" */
    char *op_json;          /* canonical op JSON */
    char *schedule_json;
    kc_launch launch;
    char *ptx;
    size_t ptx_len;
    uint8_t *cubin;
    size_t cubin_len;
    kc_choice choice;       /* how it was chosen; its selection carries the same */
    double latency_us;      /* < 0 when not measured */
    double predicted_us;    /* cost model's prediction */
    char *provenance_json;  /* who built it (daemon version, nvrtc, codegen, tune mode, device, host):
                             * free-form text for people; no code reads facts back out of it */
    int64_t created_at;     /* unix seconds; set by put when 0 */
    int64_t last_used_at;
} kc_artifact;

/* Stores an artifact (replacing one with the same key) and, in the same transaction, points the
 * selection for a->op_key at it with a->choice and lifts a quarantine of a->key. Digests are
 * computed here. -EINVAL when a field (the launch included) is out of range or a blob or text is
 * larger than KC_MAX_CODE_BYTES / KC_MAX_TEXT_BYTES. */
int kc_artifact_put(kc_db *db, const kc_artifact *a);
/* Reads an artifact and verifies both digests; -EBADMSG when either fails. Updates last_used_at
 * at most once a minute per key (cheap on the hit path). */
int kc_artifact_get(kc_db *db, const char *key, kc_artifact **ret);
/* Same, but without PTX and cubin (listing, kernel-set answers). */
int kc_artifact_get_meta(kc_db *db, const char *key, kc_artifact **ret);
/* Same as kc_artifact_get (verified), but not counted as a use: last_used_at is left alone, so
 * inspecting an artifact (hidetctl cache show) does not protect it from LRU pruning. */
int kc_artifact_peek(kc_db *db, const char *key, kc_artifact **ret);
void kc_artifact_free(kc_artifact *a);
/* The stored SHA-256 (hex) of an artifact's PTX and cubin, without reading either (nor checking
 * them): whether two artifacts are the same code (a dispatch table's entries). -ENOENT when no
 * artifact has the key. */
int kc_artifact_digests(kc_db *db, const char *key, char ret_ptx[KC_KEY_LEN + 1], char ret_cubin[KC_KEY_LEN + 1]);

/* Looks up the artifact chosen for an op key and how it was chosen (ret_choice may be NULL). */
int kc_selection_get(kc_db *db, const char *op_key, char ret_artifact_key[KC_KEY_LEN + 1],
                     kc_choice *ret_choice);

typedef enum {
    KC_TRIAL_OK = 0,
    KC_TRIAL_WRONG,
    KC_TRIAL_FAULT,
    KC_TRIAL_TIMEOUT,
    KC_TRIAL_COMPILE_ERROR,
    KC_TRIAL_LOAD_ERROR,
    KC_TRIAL_WORKER_DIED,
    KC_TRIAL_SLOWER, /* eliminated early: clearly slower than the best so far */
} kc_trial_status;

const char *kc_trial_status_name(kc_trial_status s);

typedef struct kc_trial {
    int candidate;       /* index in the space */
    char *schedule_json;
    kc_trial_status status;
    double latency_us;   /* median; < 0 if none */
    double max_rel_err;
    char *reason;        /* may be NULL */
    char device[96];
    int64_t measured_at;
} kc_trial;

/* Records (or replaces) one candidate's result under a tuning key. */
int kc_trial_put(kc_db *db, const char *tuning_key, const char *space_hash, const kc_trial *t);
/* All trials for a tuning key, ordered by latency (failures last). *ret is an array freed with
 * kc_trials_free(). Returns 0 with *ret_n == 0 when there are none. */
int kc_trials_get(kc_db *db, const char *tuning_key, kc_trial **ret, size_t *ret_n);
void kc_trials_free(kc_trial *t, size_t n);

/* Listing and administration (hidetctl cache ...). */
typedef struct kc_summary {
    char key[KC_KEY_LEN + 1];
    char op[24];
    char target[16];
    kc_choice choice;
    double latency_us;
    uint64_t bytes;
    int64_t created_at, last_used_at;
} kc_summary;

typedef struct kc_filter {
    const char *key_prefix; /* NULL: any */
    const char *target;     /* NULL: any */
    const char *op;         /* NULL: any */
    int64_t older_than;     /* unix seconds; 0: any. Compares last_used_at */
    size_t limit;           /* 0: no limit */
} kc_filter;

int kc_list(kc_db *db, const kc_filter *f, kc_summary **ret, size_t *ret_n);
/* Removes artifacts matching the filter (and the selections that point at them, and their
 * quarantine rows). */
int kc_remove(kc_db *db, const kc_filter *f, size_t *ret_removed);
/* Removes the artifact stored under exactly `key` (any string, hex or not) with its selections
 * and its quarantine row, in one transaction. *ret_removed: artifacts removed (0 or 1; 0 when
 * only a quarantine row was there). -ENOENT when there was neither. */
int kc_remove_key(kc_db *db, const char *key, size_t *ret_removed);
/* Removes least-recently-used artifacts until the stored bytes are <= max_bytes. */
int kc_prune_to_size(kc_db *db, uint64_t max_bytes, size_t *ret_removed);

/* Takes a stored record the daemon cannot use out of service: in one transaction the selections
 * that point at the artifact are removed (their ops are tuned again on the next request) and the
 * artifact key is recorded in the quarantine with the reason (the artifact row stays for
 * inspection until `cache rm` or pruning removes it). Idempotent; any key string is accepted.
 * Storing the same artifact key again (kc_artifact_put) lifts its quarantine. */
int kc_quarantine(kc_db *db, const char *artifact_key, const char *reason);

typedef struct kc_quarantined {
    char key[KC_KEY_LEN + 1];   /* as stored (a longer key is cut; see key_len) */
    size_t key_len;
    char op_key[KC_KEY_LEN + 1];
    char reason[256];
    int64_t at;                 /* unix seconds */
} kc_quarantined;
/* Everything in quarantine, oldest first; *ret freed with free(). */
int kc_quarantine_list(kc_db *db, kc_quarantined **ret, size_t *ret_n);

typedef struct kc_stats {
    uint64_t artifacts, selections, trials, bytes;
} kc_stats;
int kc_stats_get(kc_db *db, kc_stats *ret);

/* One record that fails a check: its key as stored (any bytes) and why (both malloc'd). */
typedef struct kc_problem {
    char *key;
    char *reason;
} kc_problem;
void kc_problems_free(kc_problem *p, size_t n);

/* Checks SQLite's integrity, then reads every artifact as the daemon would and checks it deeply:
 * both digests, every typed column in range, the launch rows (kc_launch_check), the key and op
 * key well-formed (kc_key_is_hex), the key derived from its op key and schedule
 * (kc_artifact_key), op_json an object naming the record's op, schedule_json an object, the
 * target a known one. *ret_checked counts artifacts read; each failing one is in *ret_bad
 * (malloc'd, kc_problems_free(); may be NULL to only count) with *ret_n_bad entries, in key
 * order. The quarantine is not part of this (kc_quarantine_list()).
 * Returns -EBADMSG when PRAGMA integrity_check itself fails (kc_errmsg() has its first line). */
int kc_verify(kc_db *db, size_t *ret_checked, kc_problem **ret_bad, size_t *ret_n_bad);
int kc_vacuum(kc_db *db);

/* Export and import (kc_export.c has the file format). An export file holds every artifact
 * matching f (NULL: all), self-checking (a SHA-256 over all its records in a trailer) and,
 * when a secret key is given, signed by it (Ed25519 over the trailer, kc_sign.h). It is written
 * beside path, then renamed into place; an artifact failing its digest aborts it with -EBADMSG.
 * *ret_err (malloc'd, set only on failure) says why. */
int kc_export(kc_db *db, const kc_filter *f, const char *path, const kc_sign_secret *sign,
              size_t *ret_n, char **ret_err);

/* One artifact as the export file's record (a single JSON line without its newline: every
 * field, PTX and cubin in base64 each beside its SHA-256). The same record travels elsewhere
 * (the cluster tier's entries), so there is one format to check. *ret is malloc'd (NUL-
 * terminated). Returns 0, -EINVAL (the launch fails kc_launch_check) or -ENOMEM. */
int kc_record_encode(const kc_artifact *a, char **ret);
/* Parses one such record and checks it as import does: every field present and in range, both
 * blobs against their digests, the launch, and the record as the daemon would read it (keys
 * hex, the artifact key derived from op key and schedule, op_json naming the op, a known
 * target). *ret (kc_artifact_free()) holds PTX and cubin. Returns 0, -EBADMSG with a reason in
 * *ret_err (malloc'd; may be NULL), or -ENOMEM. */
int kc_record_decode(const char *text, size_t len, kc_artifact **ret, char **ret_err);

typedef struct kc_import_opts {
    const kc_sign_public *trusted;        /* keys whose signature is accepted */
    size_t n_trusted;
    bool allow_unsigned;   /* accept a file without a signature (a local restore) */
    bool replace_stronger; /* let a record replace a selection, or an artifact, chosen more
                            * strongly than it was (kc_choice order) */
} kc_import_opts;

typedef struct kc_import_info {
    size_t n;                 /* artifacts stored */
    bool is_signed;
    char signer[KC_SIGN_ID_LEN + 1]; /* key id of the signer ("" unsigned) */
} kc_import_info;

/* Imports an export file, all or nothing, in one transaction. It is refused (nothing stored)
 * when: any byte is damaged (-EBADMSG); it is unsigned and !allow_unsigned, or signed by a key
 * not in `trusted` (-ENOKEY), or its signature does not verify (-EBADMSG); a record does not
 * hold as the daemon would read it (keys hex, the key derived from op key and schedule, op_json
 * and schedule_json parse and name the record's op, a known target, a launch that converts and
 * passes kc_launch_check, sizes within KC_MAX_*; -EBADMSG); a record would replace a selection
 * or an artifact chosen more strongly than it was, unless replace_stronger (-EEXIST); a record's
 * PTX or cubin differs from what is stored under its artifact key (-EEXIST: an artifact key
 * names an op and a schedule, so different code under it is never right; remove the stored
 * artifact first to replace it). o may be NULL (no trusted keys, nothing allowed). */
int kc_import(kc_db *db, const char *path, const kc_import_opts *o, kc_import_info *ret_info,
              char **ret_err);

#endif
