/* tests/fuzz/fuzz_cluster.c - what the cluster tier reads from outside: Redis URLs (from the
 * configuration and the command line) and entries read back from Redis, which anyone who can
 * write to Redis controls. The first byte picks the parser. An entry is checked against one
 * fixed trusted key: whatever the bytes, ct_entry_verify must answer with a reason or, only for
 * an entry that key really signed, an artifact of the op key asked for; never a crash, a read out
 * of bounds, or an accepted entry without a valid signature. (The record inside a signed entry is
 * the export file's record, fuzzed through fuzz_import.) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "cluster/ct.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kc_sign_public pub;
    static bool ready;
    if (!ready) {
        unsigned char seed[32] = {1}, sk[64];
        if (sodium_init() < 0)
            abort();
        crypto_sign_seed_keypair(pub.key, sk, seed);
        kc_sign_key_id(pub.key, pub.id);
        ready = true;
    }
    if (size < 1)
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (data[0] & 1) {
        ct_url u;
        char *err = NULL;
        int r = ct_url_parse(text, &u, &err);
        if (r == 0) {
            char red[512];
            ct_url_redacted(&u, red, sizeof(red));
            if (err || (u.unix_socket ? u.path[0] != '/' : !u.host[0] || u.port < 1))
                abort();
        } else if (r != -EINVAL || !err) {
            abort(); /* a refusal always says why */
        }
        free(err);
    } else {
        static const char op_key[] =
            "0000000000000000000000000000000000000000000000000000000000000000";
        kc_artifact *a = NULL;
        ct_reject why = CT_REJECT_N;
        int r = ct_entry_verify(text, size - 1, op_key, &pub, 1, &a, NULL, &why);
        if (r == 0) {
            /* Only the holder of the fixed key's secret can get here: no seed holds one. */
            if (!a || strcmp(a->op_key, op_key) != 0)
                abort();
        } else if (r == -EBADMSG) {
            if (a || why >= CT_REJECT_N)
                abort();
        } else if (r != -ENOMEM) {
            abort();
        }
        kc_artifact_free(a);
    }
    free(text);
    return 0;
}
