/* cluster/ct_channel.c - names on the completion channel (ct.h): the subscriber's pattern and
 * the op key of a channel a message came on. Pure functions. */
#include "cluster/ct.h"

#include <errno.h>
#include <string.h>

int ct_channel_pattern(const char *prefix, char *out, size_t len)
{
    static const char suffix[] = ":{*}:done";
    size_t n = 0;
    for (const char *p = prefix; *p; p++) {
        /* A prefix is matched literally: Redis' glob would read these as wildcards. */
        bool special = strchr("*?[]\\", *p) != NULL;
        if (n + (special ? 2 : 1) >= len)
            return -ENOSPC;
        if (special)
            out[n++] = '\\';
        out[n++] = *p;
    }
    if (n + sizeof(suffix) > len)
        return -ENOSPC;
    memcpy(out + n, suffix, sizeof(suffix));
    return 0;
}

int ct_channel_op_key(const char *prefix, const char *name, size_t len,
                      char ret_op_key[KC_KEY_LEN + 1])
{
    size_t pl = strlen(prefix);
    /* PREFIX ":{" OPKEY "}:done" */
    if (!name || len != pl + 2 + KC_KEY_LEN + 6 || memcmp(name, prefix, pl) != 0 ||
        memcmp(name + pl, ":{", 2) != 0 || memcmp(name + pl + 2 + KC_KEY_LEN, "}:done", 6) != 0)
        return -EINVAL;
    char key[KC_KEY_LEN + 1];
    memcpy(key, name + pl + 2, KC_KEY_LEN);
    key[KC_KEY_LEN] = '\0';
    if (!kc_key_is_hex(key))
        return -EINVAL;
    memcpy(ret_op_key, key, sizeof(key));
    return 0;
}
