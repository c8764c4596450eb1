/* tests/fuzz/fuzz_config.c - the configuration file parser. An operator's hidetd.conf is trusted
 * less than the code: a typo, a stray binary, an enormous line or a truncated edit must give a
 * message and leave the running configuration as it was, never a crash or a read out of bounds.
 * The input is applied as an INI text over the defaults; a rejected text must leave the
 * configuration byte for byte the same (load_string is all or nothing), and an accepted one must
 * survive a copy, a diff against the defaults and a reload on top of itself. */
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    hd_config c, before, again;
    if (hd_config_init(&c) < 0) {
        free(text);
        return 0;
    }
    if (hd_config_copy(&c, &before) < 0) {
        hd_config_clear(&c);
        free(text);
        return 0;
    }
    char *err = NULL;
    if (hd_config_load_string(&c, text, "fuzz.conf", &err) < 0) {
        /* All or nothing: a refused text changed nothing, and says why. */
        if (hd_config_diff(&before, &c, NULL, 0, NULL, 0) != 0 || !err)
            abort();
    } else if (hd_config_copy(&c, &again) == 0) {
        char live[1024], restart[1024];
        hd_config_diff(&before, &again, live, sizeof(live), restart, sizeof(restart));
        char *err2 = NULL;
        if (hd_config_load_string(&again, text, "fuzz.conf", &err2) < 0)
            abort(); /* what was accepted once is accepted again */
        free(err2);
        hd_config_clear(&again);
    }
    free(err);
    hd_config_clear(&before);
    hd_config_clear(&c);
    free(text);
    return 0;
}
