/* cluster/ct.h - the cluster tier: a Redis server shared by many daemons as the second level of
 * the kernel cache (the node's SQLite file is the first). It plugs into the resolver's remote
 * slot (resolve/resolve.h, resolve_remote): a local miss asks Redis; a remote hit is verified
 * and handed back (the resolver stores it locally before serving it); every kernel a job stores
 * here is published, first winner pinned (SET NX).
 *
 * A shared cache of cubins is a shared store of code that runs on every node, so nothing is
 * taken on trust: every entry is signed (Ed25519, kernel_cache/kc_sign.h) by the publishing
 * node's key over the whole artifact record (op key, artifact key, the digests of PTX and cubin,
 * how it was chosen, the launch), and a reader accepts only an entry signed by a key in its
 * trusted list whose blobs match their digests and whose op key is the one it asked for.
 * Anything else is rejected, counted by reason, and the op is tuned locally.
 *
 * Tune once per fleet: before a publishing node tunes an op for a waiting request it takes a
 * lease, PREFIX:{OPKEY}:lease = its node id (SET NX PX lease), renewed while it holds it and
 * deleted (only if still its own) when the job ends. A node that finds another's lease waits
 * for the entry; it is answered with the published kernel, or takes the lease over once it is
 * gone (the holder ended without a kernel, or died and its lease expired), or tunes anyway after
 * lease_wait. Read-only nodes take no leases and never wait.
 *
 * Completion channel: the node that publishes an entry, and the node that releases a lease,
 * PUBLISHes on PREFIX:{OPKEY}:done right after the SET / the DEL (in the same Lua script). Every
 * publishing node holds a second connection, the subscriber, with one PSUBSCRIBE on
 * PREFIX:{*}:done for its whole life: a waiting node is woken by the message and looks again
 * (reads and verifies the entry, or tries the lease); the message's text is never trusted.
 * Why one pattern rather than a SUBSCRIBE per waited op: waits are short and many, so per-op
 * subscriptions would cost two more round trips per wait and leave a window between seeing the
 * lease and the subscription taking effect in which the message is lost; a message goes out once
 * per op tuned in the whole fleet (rare: tuning takes seconds to minutes) and is a few dozen
 * bytes, so every node receiving every op's message costs little, and Redis matches a PUBLISH
 * against one pattern per node. Messages can be lost (the subscriber reconnecting), so a waiting
 * node still polls, every lease_poll while the subscriber is up and every CT_POLL_MS while it is
 * not, and never later than the lease's expiry (a holder that died). When the subscriber comes
 * back, every waiting node looks once at once.
 *
 * Keys (docs/cluster.md has the whole layout):
 *   key    PREFIX:{OPKEY}:entry      (the braces are a Redis Cluster hash tag: every key of one
 *                                     op lands in one slot)
 *          PREFIX:{OPKEY}:lease      the node id of the node tuning it
 *   channel PREFIX:{OPKEY}:done      completion messages ("entry" or "released": a hint only)
 *   value  "hidetd-cluster-entry 1\n"
 *          "ed25519 KEYID BASE64SIG\n"
 *          RECORD                     (kc_record_encode(): one JSON line)
 *   The signature is kc_sign_detached() with the context CT_SIGN_CONTEXT over RECORD's bytes.
 *
 * Each Redis connection (hiredis' asynchronous API on the daemon's libuv loop, so the loop never
 * waits for Redis) has a timeout on connecting and on every command; a command that times out
 * drops the connection (a server that stopped answering is treated as down) and the caller gets
 * a miss. Reconnects back off exponentially. While the tier is down every lookup is a miss and
 * every publish is dropped: the daemon serves its own cache and tunes locally.
 *
 * Returns: 0 or a negative errno-style code; ret_* outputs untouched on failure. Library code:
 * nothing here logs; events the daemon should log reach it through ct_config.on_event.
 * Loop thread only (except the pure functions ct_url_parse, ct_entry_*).
 */
#ifndef HIDET_CLUSTER_CT_H
#define HIDET_CLUSTER_CT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "kernel_cache/kc.h"
#include "kernel_cache/kc_sign.h"
#include "resolve/resolve.h"

#define CT_SIGN_CONTEXT "hidetd-cluster-entry 1"
#define CT_POLL_MS 100 /* how often a waiting node looks for the entry while the subscriber is down */
#define CT_ENTRY_MAGIC "hidetd-cluster-entry 1\n"

/* ---- where Redis is --------------------------------------------------------------------- */

typedef struct ct_url {
    bool unix_socket;   /* unix://PATH */
    char host[256];     /* redis://: a host name or address (IPv6 without brackets) */
    int port;           /* default 6379 */
    char path[256];     /* unix:// */
    char user[128];     /* "" none (AUTH with the password only, or no AUTH) */
    char password[256]; /* "" none */
    int db;             /* SELECT; 0 by default */
} ct_url;

/* Parses redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] and unix://PATH[?db=N] (user and password
 * percent-decoded). rediss:// is refused with a message saying why (this build's hiredis has
 * no TLS). Returns 0 or -EINVAL with *ret_err (malloc'd) saying why. */
int ct_url_parse(const char *url, ct_url *ret, char **ret_err);
/* The URL with the password replaced by "***" (for logs and /v1/status); writes at most len. */
void ct_url_redacted(const ct_url *u, char *out, size_t len);

/* ---- signed entries (pure; unit-tested) ------------------------------------------------- */

typedef enum {
    CT_REJECT_UNSIGNED = 0, /* no signature line */
    CT_REJECT_UNTRUSTED,    /* signed by a key not in the trusted list */
    CT_REJECT_SIGNATURE,    /* the signature does not verify: the entry was changed */
    CT_REJECT_MALFORMED,    /* not an entry, or the record fails its checks (digests, fields) */
    CT_REJECT_WRONG_KEY,    /* a valid record, but of another op key than the one asked for */
    CT_REJECT_N,
} ct_reject;

/* "unsigned", "untrusted", "bad_signature", "malformed", "wrong_key" (metric labels). */
const char *ct_reject_name(ct_reject r);

/* The entry's value for an artifact, signed by s. *ret malloc'd, *ret_len its length.
 * Returns 0, -EINVAL (the artifact does not encode) or -ENOMEM. */
int ct_entry_encode(const kc_artifact *a, const kc_sign_secret *s, char **ret, size_t *ret_len);

/* Checks an entry's value read under op_key: signature by a trusted key, then the record (digests
 * and every check of kc_record_decode()), then its op key. 0 and *ret (kc_artifact_free()) and,
 * when ret_signer is non-NULL, the signer's key id; else -EBADMSG with *ret_why (untouched on
 * success) or -ENOMEM. */
int ct_entry_verify(const char *value, size_t len, const char *op_key,
                    const kc_sign_public *trusted, size_t n_trusted, kc_artifact **ret,
                    char ret_signer[KC_SIGN_ID_LEN + 1], ct_reject *ret_why);

/* ---- the completion channel (pure; unit-tested) ---------------------------------------- */

/* The subscriber's pattern for prefix: PREFIX:{*}:done with the glob characters of the prefix
 * (* ? [ ] \) escaped. Returns 0, or -ENOSPC when it does not fit in len. */
int ct_channel_pattern(const char *prefix, char *out, size_t len);
/* The op key of a completion channel PREFIX:{OPKEY}:done (name, len: as received, not
 * NUL-terminated). Returns 0 with ret_op_key set, or -EINVAL for any other channel. */
int ct_channel_op_key(const char *prefix, const char *name, size_t len,
                      char ret_op_key[KC_KEY_LEN + 1]);

/* ---- the tier ---------------------------------------------------------------------------- */

typedef struct ct_tier ct_tier;

typedef enum {
    CT_EVENT_CONNECTED = 0, /* info */
    CT_EVENT_DOWN,          /* warn: the connection failed or was lost; msg says why */
    CT_EVENT_REJECTED,      /* warn: an entry failed verification; msg names op key and reason */
    CT_EVENT_ERROR,         /* warn: a command failed (an error reply, a timeout) */
} ct_event;

typedef struct ct_config {
    const char *url;              /* required */
    const char *prefix;           /* key prefix; NULL: "hidetd" */
    double ttl_s;                 /* entries expire after this; 0: never */
    double timeout_s;             /* connect and every command; <= 0: 1 s */
    double backoff_min_s;         /* first reconnect delay; <= 0: 0.1 s */
    double backoff_max_s;         /* longest; <= 0: 30 s */
    double lease_s;               /* a lease lives this long unless renewed; <= 0: 30 s */
    double lease_wait_s;          /* longest wait on another node's lease; <= 0: 600 s */
    double lease_poll_s;          /* a waiting node's fallback poll while the subscriber is up
                                   * (CT_POLL_MS while it is down); <= 0: 1 s */
    const kc_sign_secret *sign;   /* copied; NULL: a read-only node (never publishes) */
    const kc_sign_public *trusted; /* copied; keys whose entries are accepted */
    size_t n_trusted;
    void (*on_event)(void *udata, ct_event ev, const char *msg); /* may be NULL */
    /* Told the round-trip time of every command Redis answered (for a histogram); may be NULL. */
    void (*on_latency)(void *udata, double seconds);
    void *udata;
} ct_config;

typedef enum {
    CT_STATE_CONNECTING = 0,
    CT_STATE_UP,
    CT_STATE_DOWN, /* waiting to reconnect */
    CT_STATE_CLOSED, /* closed, or (the subscriber) never opened: a read-only node */
} ct_state;

const char *ct_state_name(ct_state s); /* "connecting", "up", "down", "closed" */

typedef struct ct_stats {
    ct_state state;              /* the command connection */
    ct_state sub_state;          /* the subscriber (CT_STATE_CLOSED on a read-only node) */
    bool read_only;
    char url[512];               /* redacted */
    char prefix[64];
    char last_error[256];        /* "" none */
    uint64_t hits;               /* verified entries handed to the resolver */
    uint64_t misses;             /* no entry (or the tier was down or timed out) */
    uint64_t publishes;          /* entries written */
    uint64_t publish_pinned;     /* not written: an entry was there first (first winner pinned) */
    uint64_t publish_dropped;    /* not written: the tier was down or the command failed */
    uint64_t rejected[CT_REJECT_N];
    uint64_t timeouts;           /* commands (and connects) that timed out */
    uint64_t errors;             /* error replies and lost connections */
    uint64_t connects;           /* connections made (setup answered) */
    uint64_t sub_connects;       /* subscriptions made (PSUBSCRIBE confirmed) */
    char node_id[33];            /* this node's lease value */
    uint64_t leases;             /* leases taken (this node tuned the op for the fleet) */
    uint64_t lease_waits;        /* claims that found another node's lease and waited */
    uint64_t lease_wait_hits;    /* waits answered by the other node's published kernel */
    uint64_t lease_takeovers;    /* leases taken after waiting (the holder ended or died) */
    uint64_t lease_wait_timeouts; /* waits that gave up after lease_wait and tuned here */
    size_t leases_held;          /* leases held now */
    uint64_t lease_wakeups_message; /* waiting claims that looked again because of a message */
    uint64_t lease_wakeups_poll;    /* ... because their poll timer fired */
    double lease_poll_s;         /* the fallback poll while the subscriber is up */
} ct_stats;

/* Creates the tier and starts connecting. Returns 0, -EINVAL with *ret_err (a bad URL or prefix)
 * or -ENOMEM. */
int ct_new(uv_loop_t *loop, const ct_config *cfg, ct_tier **ret, char **ret_err);
/* The resolver's slot, bound to t (lookup; publish, claim and release NULL for a read-only
 * node). */
void ct_remote(ct_tier *t, resolve_remote *ret);
void ct_stats_get(const ct_tier *t, ct_stats *ret);
/* Closes: every pending lookup is answered (a miss) now, the connection and timers are closed;
 * the memory goes once libuv has closed them (run the loop). Unplug the tier from the resolver
 * first. Accepts NULL. */
void ct_close(ct_tier *t);

#endif
