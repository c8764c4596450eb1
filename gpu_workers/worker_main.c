/* gpu_workers/worker_main.c - hidetd-worker: serves one GPU to hidetd (or lists the GPUs).
 *
 *   hidetd-worker --probe
 *       prints {"devices": [...], "error": "..."} on stdout and exits 0; zero devices, with the
 *       driver's reason, when cuInit fails (no driver, no GPU).
 *   hidetd-worker --device N --fd FD [--heartbeat S] [--launch-timeout S]
 *       serves device N over the socket FD with the protocol of gpu_workers/wire.h.
 *
 * The only binary of hidetd that links the CUDA driver. Everything of substance lives in
 * measure.c (the measurement) and serve.c (the protocol loop).
 *
 * Test hook (inject.h): HIDETD_WORKER_PLANT="fault@N,hang@M" replaces the candidate of the Nth
 * measure request with a planted kernel that writes far out of bounds (a real illegal-address
 * fault on the GPU) and of the Mth with one that never ends (a real launch timeout), counted
 * across restarts in $HIDETD_WORKER_PLANT_STATE_DIR. tests/gpu/daemon_faults.py uses it to show
 * that the daemon recovers from both; without the variable nothing changes.
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "gpu_workers/inject.h"
#include "gpu_workers/measure.h"
#include "gpu_workers/serve.h"
#include "gpu_workers/wire.h"

/* Planted kernels, one pointer argument (the candidate's output buffer). */
static const char planted_ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    /* Writes 1 TiB past the output: CUDA_ERROR_ILLEGAL_ADDRESS. */
    ".visible .entry planted_fault(.param .u64 p_out)\n"
    "{\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  add.s64 %rd2, %rd2, 1099511627776;\n"
    "  st.global.u32 [%rd2], 0;\n"
    "  ret;\n"
    "}\n"
    /* Spins until the (NaN-poisoned) output holds 5.0, which never happens. */
    ".visible .entry planted_hang(.param .u64 p_out)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .f32 %f1;\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "LOOP:\n"
    "  ld.volatile.global.f32 %f1, [%rd2];\n"
    "  setp.neu.f32 %p, %f1, 0f40A00000;\n"
    "  @%p bra LOOP;\n"
    "  ret;\n"
    "}\n";

static void measure_cb(void *ctx, const gw_measure_req *req, const atomic_bool *cancel,
                       gw_measure_result *res, bool *fatal)
{
    gw__planned plan;
    gw__inject_next("HIDETD_WORKER_PLANT", "HIDETD_WORKER_PLANT_STATE_DIR", &plan);
    bool fault = !strcmp(plan.kind, "fault"), hang = !strcmp(plan.kind, "hang");
    if (!fault && !hang) {
        gw_measurer_run(ctx, req, cancel, res, fatal);
        return;
    }
    gw_measure_req planted = *req;
    gw_launch *l = &planted.candidate.launches[0];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", fault ? "planted_fault" : "planted_hang");
    l->grid[0] = l->grid[1] = l->grid[2] = 1;
    l->block[0] = 32;
    l->block[1] = l->block[2] = 1;
    l->n_args = 1;
    l->args[0] = req->output_buffer;
    planted.candidate.n_launches = 1;
    planted.candidate.image = (const uint8_t *)planted_ptx;
    planted.candidate.image_len = sizeof(planted_ptx); /* with the NUL: PTX text */
    gw_measurer_run(ctx, &planted, cancel, res, fatal);
}

int main(int argc, char **argv)
{
    gw__args a;
    char err[256] = "";

    if (gw__parse_args(argc, argv, &a) < 0)
        return 2;
    if (a.probe) {
        gw_device_info devs[GW_MAX_DEVICES];
        int n = 0;
        gw_probe_devices(devs, GW_MAX_DEVICES, &n, err, sizeof(err));
        char *s = gw_wire_probe_json(devs, n, n ? NULL : err);
        if (!s)
            return 1;
        printf("%s\n", s);
        free(s);
        return 0;
    }
    gw_measurer *m = NULL;
    if (gw_measurer_new(a.device, a.launch_timeout_s, &m, err, sizeof(err)) < 0)
        return gw__serve(a.fd, NULL, err, a.heartbeat_s, NULL, NULL);
    int rc = gw__serve(a.fd, gw_measurer_device(m), NULL, a.heartbeat_s, measure_cb, m);
    gw_measurer_free(m);
    return rc;
}
