/* resolve/resolve_int.h - what resolve.c shares with the dispatch tables of dynamic ops
 * (resolve/dispatch.c); internal to resolve/. Loop thread only, as everything in resolve/. */
#ifndef HIDET_RESOLVE_RESOLVE_INT_H
#define HIDET_RESOLVE_RESOLVE_INT_H

#include "resolve/resolve.h"

/* Sets res FAILED with the API's status, code, message and field (NULL: ""). */
void resolve__fail(resolve_result *res, int status, const char *code, const char *message, const char *field);

/* Makes json (malloc'd, handed over) the answer in res: the resolver owns it until its next
 * call. */
void resolve__answer_owned(resolver *r, resolve_result *res, char *json, resolve_origin origin);

/* The tiers that answer at once - memory, then the local cache - for op_key under rq's rank
 * policy. true with res ANSWERED (or FAILED on a cache error); false on a miss (res untouched
 * but for its origin). Starts nothing. */
bool resolve__lookup(resolver *r, const resolve_request *rq, const char *op_key, resolve_result *res);

sched *resolve__sched(resolver *r);
kc_db *resolve__db(resolver *r);

/* Called with the wait's udata when the wait ends without its callback (cancelled by the
 * caller, or the resolver freed): the owner of udata frees it there. */
void resolve__wait_set_cleanup(resolve_wait *w, void (*udata_free)(void *udata));

/* A request with named dimensions (kr->op.n_dims > 0), validated and completed by
 * resolve_apply_defaults: the dispatch table (docs/api.md, "Named dimensions"). Answers, waits
 * or fails as resolve_kernel does; only the generic set is waited for. */
void resolve__dispatch(resolver *r, const proto_kernel_request *kr, const resolve_request *rq, resolve_cb cb,
                       void *udata, resolve_result *ret, resolve_wait **ret_wait);

#endif
