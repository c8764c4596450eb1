/* cluster/ct_entry.c - the cluster tier's signed entries: encoding one for publishing and
 * checking one read back (ct.h has the format). Pure functions: no Redis, no loop. */
#include "cluster/ct.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#define CT__SIG_TAG "ed25519 "

const char *ct_reject_name(ct_reject r)
{
    static const char *const names[CT_REJECT_N] = {
        [CT_REJECT_UNSIGNED] = "unsigned",
        [CT_REJECT_UNTRUSTED] = "untrusted",
        [CT_REJECT_SIGNATURE] = "bad_signature",
        [CT_REJECT_MALFORMED] = "malformed",
        [CT_REJECT_WRONG_KEY] = "wrong_key",
    };
    return (unsigned)r < CT_REJECT_N ? names[r] : "unknown";
}

int ct_entry_encode(const kc_artifact *a, const kc_sign_secret *s, char **ret, size_t *ret_len)
{
    if (!a || !s || !ret || !ret_len)
        return -EINVAL;
    char *rec = NULL;
    int r = kc_record_encode(a, &rec);
    if (r < 0)
        return r;
    size_t rec_len = strlen(rec);
    unsigned char sig[KC_SIGN_BYTES];
    r = kc_sign_detached(s, CT_SIGN_CONTEXT, rec, rec_len, sig);
    if (r < 0) {
        free(rec);
        return r;
    }
    char b64[sodium_base64_ENCODED_LEN(KC_SIGN_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), sodium_base64_VARIANT_ORIGINAL);
    char *out = NULL;
    int n = asprintf(&out, "%s" CT__SIG_TAG "%s %s\n%s", CT_ENTRY_MAGIC, s->id, b64, rec);
    free(rec);
    if (n < 0)
        return -ENOMEM;
    *ret = out;
    *ret_len = (size_t)n;
    return 0;
}

static int reject(ct_reject why, ct_reject *ret_why)
{
    if (ret_why)
        *ret_why = why;
    return -EBADMSG;
}

int ct_entry_verify(const char *value, size_t len, const char *op_key,
                    const kc_sign_public *trusted, size_t n_trusted, kc_artifact **ret,
                    char ret_signer[KC_SIGN_ID_LEN + 1], ct_reject *ret_why)
{
    const size_t ml = strlen(CT_ENTRY_MAGIC);
    if (!value || !op_key || !ret)
        return -EINVAL;
    if (len < ml || memcmp(value, CT_ENTRY_MAGIC, ml) != 0)
        return reject(CT_REJECT_MALFORMED, ret_why);
    const char *p = value + ml, *end = value + len;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    /* Without a signature line the rest is taken as an unsigned record: never used. */
    if (!nl || (size_t)(nl - p) < strlen(CT__SIG_TAG) || memcmp(p, CT__SIG_TAG, strlen(CT__SIG_TAG)) != 0)
        return reject(CT_REJECT_UNSIGNED, ret_why);
    /* "ed25519 KEYID BASE64": the id is exactly KC_SIGN_ID_LEN hex digits. */
    const char *id = p + strlen(CT__SIG_TAG);
    if (nl - id < KC_SIGN_ID_LEN + 2 || id[KC_SIGN_ID_LEN] != ' ')
        return reject(CT_REJECT_MALFORMED, ret_why);
    char idbuf[KC_SIGN_ID_LEN + 1];
    memcpy(idbuf, id, KC_SIGN_ID_LEN);
    idbuf[KC_SIGN_ID_LEN] = '\0';
    const char *b64 = id + KC_SIGN_ID_LEN + 1;
    unsigned char sig[KC_SIGN_BYTES];
    size_t sig_len = 0;
    const char *b64_end = NULL;
    if (sodium_base642bin(sig, sizeof(sig), b64, (size_t)(nl - b64), NULL, &sig_len, &b64_end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        b64_end != nl || sig_len != sizeof(sig))
        return reject(CT_REJECT_MALFORMED, ret_why);
    const char *rec = nl + 1;
    size_t rec_len = (size_t)(end - rec);
    int r = kc_sign_verify(trusted, n_trusted, idbuf, CT_SIGN_CONTEXT, rec, rec_len, sig, NULL);
    if (r == -ENOKEY)
        return reject(CT_REJECT_UNTRUSTED, ret_why);
    if (r < 0)
        return reject(CT_REJECT_SIGNATURE, ret_why);
    /* Signed by a trusted key; the record must still hold as the daemon reads it (a trusted
     * node with a bug must not hand out a record this node would refuse from its own disk). */
    kc_artifact *a = NULL;
    r = kc_record_decode(rec, rec_len, &a, NULL);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return reject(CT_REJECT_MALFORMED, ret_why);
    if (strcmp(a->op_key, op_key) != 0) {
        kc_artifact_free(a);
        return reject(CT_REJECT_WRONG_KEY, ret_why);
    }
    if (ret_signer)
        memcpy(ret_signer, idbuf, sizeof(idbuf));
    *ret = a;
    return 0;
}
