/* daemon/answers.c - see answers.h. Built with cJSON; the order of keys follows the agreed
 * wire format so answers read the same in every client's logs. */
#include "daemon/answers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "proto/request.h"

/* Adds a number, or null when the value is "unknown" (negative or not finite). */
static cJSON *add_us(cJSON *obj, const char *name, double us)
{
    if (us < 0 || !isfinite(us))
        return cJSON_AddNullToObject(obj, name);
    return cJSON_AddNumberToObject(obj, name, us);
}

static int finish(cJSON *root, char **ret)
{
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

static cJSON *job_object(const sched_job_info *info)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    char buf[128];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)info->id);
    cJSON_AddStringToObject(j, "id", buf);
    snprintf(buf, sizeof(buf), "/v1/jobs/%llu", (unsigned long long)info->id);
    cJSON_AddStringToObject(j, "url", buf);
    cJSON_AddStringToObject(j, "state", sched_state_name(info->state));
    cJSON_AddStringToObject(j, "op", info->op);
    cJSON_AddStringToObject(j, "arch", info->target);
    cJSON_AddStringToObject(j, "tune", tuner_tune_name(info->mode));
    cJSON_AddStringToObject(j, "priority", proto_priority_name(info->priority));
    cJSON *c = cJSON_AddObjectToObject(j, "candidates");
    if (c) {
        cJSON_AddNumberToObject(c, "total", info->candidates_total);
        cJSON_AddNumberToObject(c, "done", info->candidates_done);
        cJSON_AddNumberToObject(c, "failed", info->candidates_failed);
    }
    add_us(j, "best_us", info->best_us);
    cJSON *best = info->best_schedule[0] ? cJSON_Parse(info->best_schedule) : NULL;
    if (best)
        cJSON_AddItemToObject(j, "best_schedule", best);
    else
        cJSON_AddNullToObject(j, "best_schedule");
    if (info->mode == TUNER_TUNE_MEASURE) {
        cJSON *on = cJSON_AddArrayToObject(j, "measured_on");
        for (int d = 0; on && d < 32; d++)
            if (info->measured_on & (1u << d))
                cJSON_AddItemToArray(on, cJSON_CreateNumber(d));
        if (info->final_device >= 0) {
            cJSON *fr = cJSON_AddObjectToObject(j, "final_round");
            if (fr) {
                cJSON_AddNumberToObject(fr, "device", info->final_device);
                cJSON_AddNumberToObject(fr, "candidates", info->final_candidates);
                cJSON_AddBoolToObject(fr, "changed", info->final_changed);
                cJSON_AddBoolToObject(fr, "heated", info->final_heated);
            }
        } else {
            cJSON_AddNullToObject(j, "final_round");
        }
        /* A measured range: where its candidates were timed, and the best's time at the middle. */
        if (info->n_range_dims > 0) {
            cJSON *at = cJSON_AddObjectToObject(j, "timed_at");
            cJSON *top = at ? cJSON_AddObjectToObject(at, "top") : NULL;
            cJSON *mid = at ? cJSON_AddObjectToObject(at, "middle") : NULL;
            for (int k = 0; top && mid && k < info->n_range_dims; k++) {
                cJSON_AddNumberToObject(top, info->range_dims[k], (double)info->range_top[k]);
                cJSON_AddNumberToObject(mid, info->range_dims[k], (double)info->range_mid[k]);
            }
            add_us(j, "best_middle_us", info->best_mid_us);
            if (info->range_worst >= 1.0)
                cJSON_AddNumberToObject(j, "range_worst", round(info->range_worst * 1000.0) / 1000.0);
            else
                cJSON_AddNullToObject(j, "range_worst");
        }
    }
    cJSON_AddNumberToObject(j, "elapsed_s", round(info->elapsed_s * 1000.0) / 1000.0);
    cJSON_AddNumberToObject(j, "waiters", info->waiters);
    if (info->state == SCHED_DONE) {
        snprintf(buf, sizeof(buf), "/v1/kernels/%s", info->artifact_key);
        cJSON_AddStringToObject(j, "result", buf);
        cJSON_AddBoolToObject(j, "measured", info->measured);
    }
    if (info->warning[0])
        cJSON_AddStringToObject(j, "warning", info->warning);
    if (info->state == SCHED_FAILED) {
        cJSON *e = cJSON_AddObjectToObject(j, "error");
        if (e) {
            cJSON_AddStringToObject(e, "code", info->error_code[0] ? info->error_code : "internal");
            cJSON_AddStringToObject(e, "message", info->error);
        }
    }
    return j;
}

int hd_job_json(const sched_job_info *info, char **ret)
{
    if (!info || !ret)
        return -EINVAL;
    cJSON *root = cJSON_CreateObject();
    cJSON *j = job_object(info);
    if (!root || !j) {
        cJSON_Delete(root);
        cJSON_Delete(j);
        return -ENOMEM;
    }
    cJSON_AddItemToObject(root, "job", j);
    return finish(root, ret);
}

int hd_jobs_json(const sched_job_info *infos, size_t n, char **ret)
{
    if ((!infos && n) || !ret)
        return -EINVAL;
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "jobs") : NULL;
    if (!arr) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *j = job_object(&infos[i]);
        if (!j) {
            cJSON_Delete(root);
            return -ENOMEM;
        }
        cJSON_AddItemToArray(arr, j);
    }
    return finish(root, ret);
}

int hd_space_json(const tuner_op *op, const tuner_target *t, const tuner_space *space,
                  const size_t *order, const double *predicted_us, char **ret)
{
    if (!op || !t || !space || (!order && space->n) || !ret)
        return -EINVAL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return -ENOMEM;
    char arch[16];
    cJSON_AddStringToObject(root, "op", tuner_op_name(op->kind));
    cJSON_AddStringToObject(root, "arch", tuner_target_name(t, arch, sizeof(arch)));
    cJSON_AddStringToObject(root, "space_hash", space->hash);
    cJSON_AddNumberToObject(root, "count", (double)space->n);
    cJSON *cands = cJSON_AddArrayToObject(root, "candidates");
    if (!cands) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    for (size_t i = 0; i < space->n; i++) {
        size_t idx = order[i];
        if (idx >= space->n) {
            cJSON_Delete(root);
            return -EINVAL;
        }
        const tuner_schedule *s = &space->items[idx];
        cJSON *c = cJSON_CreateObject();
        if (!c) {
            cJSON_Delete(root);
            return -ENOMEM;
        }
        cJSON_AddItemToArray(cands, c);
        cJSON_AddNumberToObject(c, "index", (double)idx);
        cJSON_AddStringToObject(c, "template", s->template_name ? s->template_name : "");
        cJSON *params = cJSON_AddObjectToObject(c, "params");
        for (int p = 0; params && p < s->n_params && p < TUNER_MAX_PARAMS; p++)
            cJSON_AddNumberToObject(params, s->params[p].name, s->params[p].value);
        if (predicted_us)
            add_us(c, "predicted_us", predicted_us[idx]);
        else
            cJSON_AddNullToObject(c, "predicted_us");
    }
    return finish(root, ret);
}

int hd_status_json(const hd_status_view *v, char **ret)
{
    if (!v || !ret || (!v->devices && v->n_devices))
        return -EINVAL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return -ENOMEM;
    cJSON_AddStringToObject(root, "version", v->version ? v->version : "");
    cJSON_AddNumberToObject(root, "uptime_s", floor(v->uptime_s));
    cJSON_AddBoolToObject(root, "gpu_available", v->gpu_available);
    cJSON *ws = cJSON_AddArrayToObject(root, "workers");
    for (size_t i = 0; ws && i < v->n_devices; i++) {
        const gw_device_info *d = &v->devices[i];
        cJSON *w = cJSON_CreateObject();
        if (!w)
            break;
        cJSON_AddItemToArray(ws, w);
        char arch[16];
        snprintf(arch, sizeof(arch), "sm_%d", d->sm);
        cJSON_AddNumberToObject(w, "index", d->index);
        cJSON_AddStringToObject(w, "name", d->name);
        cJSON_AddStringToObject(w, "arch", arch);
        cJSON_AddNumberToObject(w, "sm_count", d->sm_count);
        cJSON_AddNumberToObject(w, "memory_bytes", (double)d->mem_bytes);
        cJSON_AddNumberToObject(w, "driver_version", d->driver_version);
        cJSON_AddStringToObject(w, "state", gw_device_state_name(d->state));
        cJSON_AddNumberToObject(w, "restarts", d->restarts);
        cJSON_AddNumberToObject(w, "pid", d->pid);
        cJSON_AddNumberToObject(w, "busy_s", round(d->busy_s * 1000.0) / 1000.0);
        cJSON_AddNumberToObject(w, "measured", (double)d->measured);
        cJSON_AddNumberToObject(w, "failed", (double)d->failed);
        cJSON_AddStringToObject(w, "last_error", d->last_error);
        /* Why, since when and until when (the next probe) a GPU is out of service; null while
         * it serves. Times are Unix seconds. */
        if (d->state == GW_DEV_OUT_OF_SERVICE) {
            cJSON *o = cJSON_AddObjectToObject(w, "out_of_service");
            if (o) {
                cJSON_AddStringToObject(o, "reason", d->oos_reason);
                cJSON_AddNumberToObject(o, "since", round(d->oos_since * 1000.0) / 1000.0);
                if (d->next_probe > 0)
                    cJSON_AddNumberToObject(o, "next_probe",
                                            round(d->next_probe * 1000.0) / 1000.0);
                else
                    cJSON_AddNullToObject(o, "next_probe"); /* a probe runs now */
            }
        } else {
            cJSON_AddNullToObject(w, "out_of_service");
        }
        cJSON_AddNumberToObject(w, "out_of_service_count", (double)d->oos_count);
        cJSON_AddNumberToObject(w, "probes", (double)d->probes);
        cJSON_AddNumberToObject(w, "hung_kills", (double)d->hung_kills);
        cJSON_AddNumberToObject(w, "loop_stalls", (double)d->loop_stalls);
        cJSON_AddNumberToObject(w, "log_lines_dropped", (double)d->log_dropped);
    }
    cJSON *jobs = cJSON_AddObjectToObject(root, "jobs");
    if (jobs) {
        cJSON_AddNumberToObject(jobs, "queued", (double)v->jobs_queued);
        cJSON_AddNumberToObject(jobs, "running", (double)v->jobs_running);
        cJSON_AddNumberToObject(jobs, "done", (double)v->jobs_done);
        cJSON_AddNumberToObject(jobs, "failed", (double)v->jobs_failed);
        cJSON_AddNumberToObject(jobs, "cancelled", (double)v->jobs_cancelled);
    }
    cJSON *cands = cJSON_AddObjectToObject(root, "candidates");
    if (cands) {
        cJSON_AddNumberToObject(cands, "compiled", (double)v->candidates_compiled);
        cJSON_AddNumberToObject(cands, "measured", (double)v->candidates_measured);
        cJSON_AddNumberToObject(cands, "failed", (double)v->candidates_failed);
    }
    cJSON *cache = cJSON_AddObjectToObject(root, "cache");
    if (cache) {
        if (v->have_cache_stats) {
            cJSON_AddNumberToObject(cache, "artifacts", (double)v->cache.artifacts);
            cJSON_AddNumberToObject(cache, "selections", (double)v->cache.selections);
            cJSON_AddNumberToObject(cache, "trials", (double)v->cache.trials);
            cJSON_AddNumberToObject(cache, "bytes", (double)v->cache.bytes);
        } else {
            cJSON_AddNullToObject(cache, "artifacts");
            cJSON_AddNullToObject(cache, "selections");
            cJSON_AddNullToObject(cache, "trials");
            cJSON_AddNullToObject(cache, "bytes");
        }
        cJSON_AddStringToObject(cache, "path", v->cache_path ? v->cache_path : "");
        if (v->cache_max_bytes)
            cJSON_AddNumberToObject(cache, "max_bytes", (double)v->cache_max_bytes);
        else
            cJSON_AddNullToObject(cache, "max_bytes");
        cJSON_AddNumberToObject(cache, "hits", (double)v->cache_hits);
        cJSON_AddNumberToObject(cache, "misses", (double)v->cache_misses);
    }
    if (v->cluster) {
        const ct_stats *c = v->cluster;
        cJSON *cl = cJSON_AddObjectToObject(root, "cluster");
        if (cl) {
            cJSON_AddStringToObject(cl, "state", ct_state_name(c->state));
            cJSON_AddStringToObject(cl, "url", c->url);
            cJSON_AddStringToObject(cl, "prefix", c->prefix);
            cJSON_AddBoolToObject(cl, "read_only", c->read_only);
            cJSON_AddNumberToObject(cl, "hits", (double)c->hits);
            cJSON_AddNumberToObject(cl, "misses", (double)c->misses);
            cJSON_AddNumberToObject(cl, "publishes", (double)c->publishes);
            cJSON_AddNumberToObject(cl, "publish_pinned", (double)c->publish_pinned);
            cJSON_AddNumberToObject(cl, "publish_dropped", (double)c->publish_dropped);
            cJSON *rj = cJSON_AddObjectToObject(cl, "rejected");
            for (int i = 0; rj && i < CT_REJECT_N; i++)
                cJSON_AddNumberToObject(rj, ct_reject_name((ct_reject)i), (double)c->rejected[i]);
            cJSON_AddNumberToObject(cl, "timeouts", (double)c->timeouts);
            cJSON_AddNumberToObject(cl, "errors", (double)c->errors);
            cJSON_AddNumberToObject(cl, "connects", (double)c->connects);
            cJSON_AddStringToObject(cl, "node_id", c->node_id);
            cJSON_AddNumberToObject(cl, "leases", (double)c->leases);
            cJSON_AddNumberToObject(cl, "leases_held", (double)c->leases_held);
            cJSON_AddNumberToObject(cl, "lease_waits", (double)c->lease_waits);
            cJSON_AddNumberToObject(cl, "lease_wait_hits", (double)c->lease_wait_hits);
            cJSON_AddNumberToObject(cl, "lease_takeovers", (double)c->lease_takeovers);
            cJSON_AddNumberToObject(cl, "lease_wait_timeouts", (double)c->lease_wait_timeouts);
            /* The completion channel: "off" on a read-only node (it never waits). */
            cJSON_AddStringToObject(cl, "subscriber",
                                    c->read_only ? "off" : ct_state_name(c->sub_state));
            cJSON_AddNumberToObject(cl, "subscriber_connects", (double)c->sub_connects);
            cJSON_AddNumberToObject(cl, "lease_poll", c->lease_poll_s);
            cJSON *wk = cJSON_AddObjectToObject(cl, "lease_wakeups");
            if (wk) {
                cJSON_AddNumberToObject(wk, "message", (double)c->lease_wakeups_message);
                cJSON_AddNumberToObject(wk, "poll", (double)c->lease_wakeups_poll);
            }
            cJSON_AddStringToObject(cl, "last_error", c->last_error);
        }
    }
    return finish(root, ret);
}
