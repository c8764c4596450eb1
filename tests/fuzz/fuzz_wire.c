/* tests/fuzz/fuzz_wire.c - the worker protocol as the daemon reads it. A worker that crashes can
 * write anything into its socket, so the pool's stream reader and every typed decoder must refuse
 * malformed frames without crashing, leaking or reading out of bounds. The input is fed to the
 * stream reader in two pieces (split at a byte the input chooses), every frame that comes out is
 * passed to each typed decoder, and a decoded measure request goes through the consistency check
 * the pool applies. The probe's JSON parser gets the raw bytes too. */
#include <stdbool.h>
#include <stdio.h>

#include "fuzz.h"
#include "gpu_workers/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_wire_reader r = {0};
    size_t cut = size ? data[0] % (size + 1) : 0;
    gw_wire_reader_feed(&r, data, cut);
    gw_wire_reader_feed(&r, data + cut, size - cut);
    for (int frames = 0; frames < 64; frames++) {
        gw_wire_msg m = {0};
        if (gw_wire_reader_next(&r, &m) != 0)
            break;
        gw_measure_req req;
        if (gw_wire_decode_measure(&m, &req) == 0)
            (void)gw_wire_check_req(&req);
        gw_measure_result res;
        bool fatal;
        (void)gw_wire_decode_result(&m, &res, &fatal);
        gw_device_info dev;
        bool has_dev;
        char err[128];
        (void)gw_wire_decode_hello(&m, &dev, &has_dev, err, sizeof(err));
        gw_wire_msg_clear(&m);
    }
    gw_wire_reader_clear(&r);

    gw_device_info devs[4];
    int n;
    char err[128];
    (void)gw_wire_parse_probe((const char *)data, size, devs, 4, &n, err, sizeof(err));
    return 0;
}
