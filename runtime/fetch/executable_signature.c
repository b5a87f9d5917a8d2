/* Signatures of local executables (nimble/fetch.h): the
 * signature part `nimble compile --sign` adds, and the policy
 * `nimble-run --require-signature` checks through the loader's check hook,
 * after the digests and before any part is parsed or a kernel mapped. */
#include "nimble/fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/executable_format.h"
#include "nimble/signature.h"

static nimble_status_t capture_digest(void *user, const uint8_t digest[32], const void *sig, size_t sig_size) {
  (void)sig;
  (void)sig_size;
  memcpy(user, digest, 32);
  return nimble_ok();
}

nimble_status_t nimble_executable_sign_part(const void *image, size_t size, const char *key_path, void **part,
                                            size_t *part_size) {
  if (!image || !key_path || !part || !part_size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sign: NULL argument");
  uint8_t digest[32];
  nimble_executable *exe = NULL;
  NIMBLE_RETURN_IF_ERROR(
      nimble_executable_load_memory_checked(image, size, NIMBLE_LOAD_NO_KERNELS, capture_digest, digest, &exe));
  nimble_executable_release(exe);
  nimble_sign_key_t key;
  NIMBLE_RETURN_IF_ERROR(nimble_sign_key_load(key_path, &key));
  uint8_t msg[NIMBLE_SIGNATURE_MESSAGE_MAX], sig[NIMBLE_SIGN_SIGNATURE_BYTES];
  size_t n = nimble_signature_message(digest, msg);
  nimble_status_t s = nimble_sign_bytes(&key, msg, n, sig);
  if (!s) s = nimble_signature_part_make(key.public_key, sig, part, part_size);
  nimble_sign_key_deinit(&key);
  return s;
}

nimble_status_t nimble_executable_sign_image(const void *image, size_t size, const char *key_path, void **out,
                                             size_t *out_size) {
  if (!out || !out_size) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sign: NULL argument");
  void *sig = NULL;
  size_t sig_size = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_executable_sign_part(image, size, key_path, &sig, &sig_size));
  /* The image loaded above, so its header and section table are sound. */
  nimble_status_t s = nimble_image_put_part(image, size, NIMBLE_PART_SIGNATURE, sig, sig_size, out, out_size);
  free(sig);
  return s;
}

struct nimble_signature_policy {
  nimble_trusted_keys_t keys;
  char *what;
};

nimble_status_t nimble_signature_policy_create(const char *trusted_keys, const char *what,
                                               nimble_signature_policy **out) {
  if (!out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature policy: NULL argument");
  *out = NULL;
  const char *path = trusted_keys ? trusted_keys : getenv("NIMBLE_TRUSTED_KEYS");
  if (!path || !*path)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "a signature is required but no trusted keys are given (--trusted-keys FILE or "
                              "$NIMBLE_TRUSTED_KEYS)");
  nimble_signature_policy *p = calloc(1, sizeof *p);
  if (!p) return NIMBLE_OOM_IN("signature policy");
  if (asprintf(&p->what, "%s%s", what ? what : "", what ? ": " : "") < 0) p->what = NULL;
  if (!p->what) {
    free(p);
    return NIMBLE_OOM_IN("signature policy");
  }
  nimble_status_t s = nimble_trusted_keys_load(path, &p->keys);
  if (s) {
    nimble_signature_policy_destroy(p);
    return s;
  }
  *out = p;
  return nimble_ok();
}

void nimble_signature_policy_destroy(nimble_signature_policy *p) {
  if (!p) return;
  nimble_trusted_keys_deinit(&p->keys);
  free(p->what);
  free(p);
}

nimble_status_t nimble_signature_policy_check(void *policy, const uint8_t digest[32], const void *signature,
                                              size_t signature_size) {
  const nimble_signature_policy *p = policy;
  if (!signature)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "%snot signed, and a signature by one of the %s is required (sign it with "
                              "`nimble compile --sign KEY`)",
                              p->what, p->keys.source);
  const uint8_t *key, *sig;
  nimble_status_t s = nimble_signature_body_read(signature, signature_size, &key, &sig);
  if (s) {
    nimble_status_free(s);
    return nimble_status_make(NIMBLE_PERMISSION_DENIED, "%sa signature part that is not Ed25519", p->what);
  }
  char hex[65];
  nimble_sign_key_hex(key, hex);
  size_t i = 0;
  while (i < p->keys.count && memcmp(p->keys.keys[i], key, NIMBLE_SIGN_KEY_BYTES) != 0) i++;
  if (i == p->keys.count)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED, "%ssigned by key %s, which is not one of the %s", p->what,
                              hex, p->keys.source);
  uint8_t msg[NIMBLE_SIGNATURE_MESSAGE_MAX];
  size_t n = nimble_signature_message(digest, msg);
  s = nimble_sign_verify_bytes(key, msg, n, sig);
  if (s) {
    nimble_status_free(s);
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "%sthe signature by key %s does not verify: the executable is not the one "
                              "that was signed",
                              p->what, hex);
  }
  return nimble_ok();
}
