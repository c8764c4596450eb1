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
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_workers/measure.h"
#include "gpu_workers/serve.h"
#include "gpu_workers/wire.h"

static void measure_cb(void *ctx, const gw_measure_req *req, const atomic_bool *cancel,
                       gw_measure_result *res, bool *fatal)
{
    gw_measurer_run(ctx, req, cancel, res, fatal);
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
