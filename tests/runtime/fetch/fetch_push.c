/* Pushing artifacts for the fetch tests (see fetch_push.h). */
#include "fetch_push.h"

#include <check.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/artifact_config.h"
#include "nimble/digest.h"
#include "nimble/manifest.h"
#include "nimble/signature.h"
#include "nimble/store_client.h"
#include "nimble_test.h"

const char *const fetch_protocol_metadata_type = NIMBLE_MEDIA_TYPE_METADATA;
const char *const fetch_protocol_bytecode_type = NIMBLE_MEDIA_TYPE_BYTECODE;
const char *const fetch_protocol_constants_type = NIMBLE_MEDIA_TYPE_CONSTANTS;
const char *const fetch_protocol_kernels_x86_64_type = NIMBLE_MEDIA_TYPE_KERNELS_X86_64;
const char *const fetch_protocol_kernels_aarch64_type = NIMBLE_MEDIA_TYPE_KERNELS_AARCH64;
const char *const fetch_protocol_kernels_ptx_type = NIMBLE_MEDIA_TYPE_KERNELS_NVPTX;
const char *const fetch_protocol_config_type = NIMBLE_MEDIA_TYPE_CONFIG;

void fetch_reference_digest(const void *data, size_t size, char out[72]) {
  ck_assert_int_ne(sodium_init(), -1);
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(d, data, size);
  memcpy(out, "sha256:", 7);
  for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

static nimble_store_client *client(const char *addr) {
  char url[256];
  snprintf(url, sizeof url, "http://%s", addr);
  nimble_store_client_options_t o = {.base_url = url, .token = "test-token", .max_attempts = 2};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  return c;
}

/* The config blob: x86, one entry "main"(a: f32[4], b: f32[4]) -> c. */
static void config_bytes(char **out, size_t *size) {
  nimble_artifact_config_t cfg;
  nimble_artifact_config_init(&cfg);
  nimble_digest_t model;
  nimble_digest_compute("model", 5, &model);
  NIMBLE_ASSERT_OK(nimble_artifact_config_set_build(&cfg, "x86", "0.1.0", &model, NULL));
  nimble_entry_sig_t *e;
  NIMBLE_ASSERT_OK(nimble_artifact_config_add_entry(&cfg, "main", &e));
  nimble_config_dim_t dims[1] = {{4, NULL}};
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 0, "a", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 1));
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 0, "b", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 1));
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 1, "c", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 1));
  NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&cfg, out, size));
  nimble_artifact_config_deinit(&cfg);
}

void fetch_encode_protocol_manifest(const fetch_push_part *parts, size_t n, char **out, size_t *size) {
  char *cfg;
  size_t cfg_size;
  config_bytes(&cfg, &cfg_size);
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  nimble_digest_t d;
  nimble_digest_compute(cfg, cfg_size, &d);
  NIMBLE_ASSERT_OK(nimble_manifest_set_config(&m, &d, (int64_t)cfg_size));
  for (size_t i = 0; i < n; i++) {
    nimble_digest_compute(parts[i].data, parts[i].size, &d);
    NIMBLE_ASSERT_OK(
        nimble_manifest_add_layer(&m, parts[i].media_type, &d, (int64_t)parts[i].size, NULL));
  }
  NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, out, size));
  nimble_manifest_deinit(&m);
  free(cfg);
}

/* Replaces the one occurrence of `from` in text[0..*n) by `to`; the
 * result is a new buffer the caller frees, and text is freed. */
static char *edit_once(char *text, size_t *n, const char *from, const char *to) {
  char *at = strstr(text, from);
  ck_assert_msg(at != NULL, "'%s' is not in the encoded manifest", from);
  ck_assert_msg(strstr(at + 1, from) == NULL, "'%s' occurs more than once", from);
  size_t pre = (size_t)(at - text), fl = strlen(from), tl = strlen(to);
  size_t total = *n - fl + tl;
  char *out = malloc(total + 1);
  ck_assert_ptr_nonnull(out);
  memcpy(out, text, pre);
  memcpy(out + pre, to, tl);
  memcpy(out + pre + tl, at + fl, *n - pre - fl);
  out[total] = '\0';
  free(text);
  *n = total;
  return out;
}

void fetch_push_artifact_edited(const char *addr, const char *repo, const char *tag,
                                const fetch_push_part *parts, size_t n, const char *from,
                                const char *to, char digest_out[72]) {
  nimble_store_client *c = client(addr);
  char *cfg;
  size_t cfg_size;
  config_bytes(&cfg, &cfg_size);
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, cfg, cfg_size, &d));
  for (size_t i = 0; i < n; i++)
    NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, parts[i].data, parts[i].size, &d));
  char *m;
  size_t mn;
  fetch_encode_protocol_manifest(parts, n, &m, &mn);
  if (from) m = edit_once(m, &mn, from, to);
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, tag, m, mn, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, &d));
  nimble_digest_format(&d, digest_out);
  free(m);
  free(cfg);
  nimble_store_client_destroy(c);
}

void fetch_push_artifact(const char *addr, const char *repo, const char *tag,
                         const fetch_push_part *parts, size_t n, char digest_out[72]) {
  fetch_push_artifact_edited(addr, repo, tag, parts, n, NULL, NULL, digest_out);
}

void fetch_push_signature_object(const char *addr, const char *repo, const char *tag, const char *obj,
                                 size_t on) {
  nimble_store_client *c = client(addr);
  char *man;
  size_t mn;
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, obj, on, &d));
  char text[NIMBLE_DIGEST_STRING_LEN + 1], sigtag[160];
  nimble_digest_format(&d, text);
  NIMBLE_ASSERT_OK(nimble_signature_manifest(text, on, &man, &mn));
  snprintf(sigtag, sizeof sigtag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, tag);
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, sigtag, man, mn, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL));
  free(man);
  nimble_store_client_destroy(c);
}

void fetch_push_signature(const char *addr, const char *repo, const char *tag, const char *key_path,
                          const char *manifest_digest) {
  nimble_sign_key_t k;
  NIMBLE_ASSERT_OK(nimble_sign_key_load(key_path, &k));
  nimble_store_client *c = client(addr);
  char *obj, *man;
  size_t on, mn;
  NIMBLE_ASSERT_OK(nimble_signature_object(&k, repo, tag, manifest_digest, &obj, &on));
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, obj, on, &d));
  char text[NIMBLE_DIGEST_STRING_LEN + 1], sigtag[160];
  nimble_digest_format(&d, text);
  NIMBLE_ASSERT_OK(nimble_signature_manifest(text, on, &man, &mn));
  snprintf(sigtag, sizeof sigtag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, tag);
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, sigtag, man, mn, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL));
  free(obj);
  free(man);
  nimble_store_client_destroy(c);
  nimble_sign_key_deinit(&k);
}

void fetch_copy_tag(const char *addr, const char *repo, const char *from, const char *to) {
  nimble_store_client *c = client(addr);
  uint8_t *bytes;
  size_t n;
  char *mt = NULL;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(c, repo, from, &bytes, &n, &mt, NULL));
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, to, bytes, n, mt ? mt : NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                              NULL));
  free(bytes);
  free(mt);
  nimble_store_client_destroy(c);
}
