/* kernel_cache/kc_sign.h - signing keys and detached signatures (Ed25519, libsodium) for records
 * that cross a trust boundary: backups today (hidetctl cache export --sign), entries of a shared
 * cluster tier later. A cubin is code that runs on the GPU of whoever loads it, so what arrives
 * from elsewhere is used only when a key its reader trusts signed it.
 *
 * Key files are one line of text each (a trailing newline is allowed, nothing else):
 *   public:  "hidetd-ed25519-public KEYID BASE64"   BASE64: the 32-byte public key
 *   secret:  "hidetd-ed25519-secret KEYID BASE64"   BASE64: libsodium's 64-byte secret key
 *                                                   (seed followed by the public key); mode 0600
 * KEYID is the lowercase hex of the first 8 bytes of BLAKE2b-256 (crypto_generichash, no key) of
 * the 32 public-key bytes. It names a key in messages and in signatures; it is checked against the
 * key whenever a file is read, so a key id can never stand for another key.
 *
 * A signature is over a context string and a message: crypto_sign_detached() of
 * context || 0x00 || message. The context names what is signed ("hidetd-kernel-cache-export 2"),
 * so a signature made for one kind of record is never valid for another.
 *
 * Returns: 0 or a negative errno-style code. Functions that read or write files explain failures
 * in *ret_err (malloc'd; set only on failure). Output parameters are untouched on failure.
 * Library code: nothing here logs.
 */
#ifndef HIDET_KERNEL_CACHE_KC_SIGN_H
#define HIDET_KERNEL_CACHE_KC_SIGN_H

#include <stdbool.h>
#include <stddef.h>

#define KC_SIGN_ID_LEN 16     /* hex chars of a key id; buffers are KC_SIGN_ID_LEN + 1 */
#define KC_SIGN_PUBLIC_BYTES 32
#define KC_SIGN_SECRET_BYTES 64
#define KC_SIGN_BYTES 64      /* one detached signature */

typedef struct kc_sign_public {
    unsigned char key[KC_SIGN_PUBLIC_BYTES];
    char id[KC_SIGN_ID_LEN + 1];
} kc_sign_public;

/* Holds secret material: wipe it with kc_sign_secret_wipe() when done. */
typedef struct kc_sign_secret {
    unsigned char key[KC_SIGN_SECRET_BYTES];
    char id[KC_SIGN_ID_LEN + 1];
} kc_sign_secret;

/* The key id of a public key (see above). */
void kc_sign_key_id(const unsigned char key[KC_SIGN_PUBLIC_BYTES], char out[KC_SIGN_ID_LEN + 1]);

/* Makes a new key pair and writes PREFIX.key (the secret key, created with mode 0600) and
 * PREFIX.pub. Refuses (-EEXIST) when either file exists: a key is never overwritten. The public
 * half is returned in *ret_pub (may be NULL). */
int kc_sign_keygen(const char *prefix, kc_sign_public *ret_pub, char **ret_err);

/* Read and check a key file. A secret key file readable by group or others is refused (-EPERM);
 * a file that is not exactly the format above, or whose key id or halves do not match, is
 * -EBADMSG. */
int kc_sign_load_secret(const char *path, kc_sign_secret *ret, char **ret_err);
int kc_sign_load_public(const char *path, kc_sign_public *ret, char **ret_err);
/* Every "*.pub" file of a directory (a trusted-keys directory such as /etc/hidetd/trusted.d),
 * appended to *keys (realloc'd; *n_keys updated). A directory that does not exist adds nothing
 * and is not an error; an unreadable or malformed key file is. On failure *keys and *n_keys are
 * left as they were. */
int kc_sign_load_dir(const char *dir, kc_sign_public **keys, size_t *n_keys, char **ret_err);

/* The public half of a secret key. */
void kc_sign_public_of(const kc_sign_secret *s, kc_sign_public *ret);
void kc_sign_secret_wipe(kc_sign_secret *s);

/* Signs context || 0x00 || msg with s. Returns 0, or -EINVAL. */
int kc_sign_detached(const kc_sign_secret *s, const char *context, const void *msg, size_t len,
                     unsigned char sig[KC_SIGN_BYTES]);
/* Checks a signature made by the key named `id` against the trusted keys. Returns 0 (and, when
 * ret_key is non-NULL, the key that signed), -ENOKEY when no trusted key has that id, or
 * -EBADMSG when the signature does not verify. */
int kc_sign_verify(const kc_sign_public *trusted, size_t n_trusted, const char *id,
                   const char *context, const void *msg, size_t len,
                   const unsigned char sig[KC_SIGN_BYTES], const kc_sign_public **ret_key);

#endif
