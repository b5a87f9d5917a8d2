/* Signatures of local executables (nimble/executable_signature.h): the
 * signature part `nimble compile --sign` adds, and the policy
 * `nimble-run --require-signature` checks through the loader's check hook,
 * after the digests and before any part is parsed or a kernel mapped. */
#include "nimble/executable_signature.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/digest.h"
#include "nimble/signature.h"

/* The message an executable's signature signs. */
static size_t signed_message(const uint8_t digest[32], uint8_t *out) {
  size_t n = strlen(NIMBLE_SIGNED_PREFIX);
  memcpy(out, NIMBLE_SIGNED_PREFIX, n);
  memcpy(out + n, digest, 32);
  return n + 32;
}

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
  if (sodium_init() < 0) return nimble_status_make(NIMBLE_INTERNAL, "sign: libsodium failed to initialise");
  nimble_sign_key_t key;
  NIMBLE_RETURN_IF_ERROR(nimble_sign_key_load(key_path, &key));
  uint8_t *p = calloc(1, NIMBLE_SIGNATURE_PART_SIZE);
  if (!p) {
    nimble_sign_key_deinit(&key);
    return NIMBLE_OOM_IN("sign");
  }
  memcpy(p, NIMBLE_PART_MAGIC, 4);
  nimble_put_u32(p + 4, NIMBLE_PART_SIGNATURE);
  nimble_put_u32(p + 8, NIMBLE_EXECUTABLE_FORMAT_VERSION);
  nimble_put_u32(p + 12, 0);
  uint8_t *body = p + NIMBLE_PART_HEADER_SIZE;
  nimble_put_u32(body, NIMBLE_SIGNATURE_ALGORITHM_ED25519);
  nimble_put_u32(body + 4, 0);
  memcpy(body + 8, key.public_key, 32);
  uint8_t msg[64];
  size_t n = signed_message(digest, msg);
  crypto_sign_detached(body + 40, NULL, msg, n, key.secret);
  nimble_sign_key_deinit(&key);
  /* The part's own digest (nimble_part_seal's, which the shared runtime
   * does not export). */
  nimble_digest_t d;
  nimble_digest_compute(p, NIMBLE_SIGNATURE_PART_SIZE - NIMBLE_PART_DIGEST_SIZE, &d);
  memcpy(p + NIMBLE_SIGNATURE_PART_SIZE - NIMBLE_PART_DIGEST_SIZE, d.bytes, NIMBLE_PART_DIGEST_SIZE);
  *part = p;
  *part_size = NIMBLE_SIGNATURE_PART_SIZE;
  return nimble_ok();
}

nimble_status_t nimble_executable_sign_image(const void *image, size_t size, const char *key_path, void **out,
                                             size_t *out_size) {
  if (!out || !out_size) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sign: NULL argument");
  void *sig = NULL;
  size_t sig_size = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_executable_sign_part(image, size, key_path, &sig, &sig_size));
  /* The image loaded above, so its header and section table are sound. */
  const uint8_t *img = image;
  uint32_t count = nimble_get_u32(img + 12);
  nimble_executable_part_t parts[NIMBLE_MAX_SECTIONS + 1];
  size_t n = 0;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = img + NIMBLE_FILE_HEADER_SIZE + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    uint32_t kind = nimble_get_u32(e);
    if (kind == NIMBLE_PART_SIGNATURE) continue; /* replaced */
    parts[n].kind = (nimble_part_kind_t)kind;
    parts[n].data = img + nimble_get_u64(e + 8);
    parts[n].size = (size_t)nimble_get_u64(e + 16);
    n++;
  }
  parts[n].kind = NIMBLE_PART_SIGNATURE;
  parts[n].data = sig;
  parts[n].size = sig_size;
  n++;
  nimble_status_t s = nimble_executable_join_parts(parts, n, out, out_size);
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
  if (sodium_init() < 0) return nimble_status_make(NIMBLE_INTERNAL, "signature: libsodium failed to initialise");
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
  /* The loader checked the part's structure: algorithm, size. */
  if (signature_size != NIMBLE_SIGNATURE_BODY_SIZE)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED, "%sa signature of %zu bytes", p->what, signature_size);
  const uint8_t *key = (const uint8_t *)signature + 8, *sig = (const uint8_t *)signature + 40;
  char hex[65];
  nimble_sign_key_hex(key, hex);
  size_t i = 0;
  while (i < p->keys.count && sodium_memcmp(p->keys.keys[i], key, 32) != 0) i++;
  if (i == p->keys.count)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED, "%ssigned by key %s, which is not one of the %s",
                              p->what, hex, p->keys.source);
  uint8_t msg[64];
  size_t n = signed_message(digest, msg);
  if (crypto_sign_verify_detached(sig, msg, n, key) != 0)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "%sthe signature by key %s does not verify: the executable is not the one "
                              "that was signed",
                              p->what, hex);
  return nimble_ok();
}
