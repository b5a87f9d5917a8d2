/* Interoperability: a real OCI registry (Debian's docker-registry, CNCF
 * distribution) accepts Nimble's manifest and config blob, computes the same
 * manifest digest, and hands the bytes back unchanged. The registry is
 * started on loopback by tests/support/registry_fixture.sh and stopped by
 * pid in the teardown. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nimble_test.h"

#include "nimble/artifact_config.h"
#include "nimble/manifest.h"

static char g_dir[256];
static char g_addr[64];

static int fixture(const char *verb) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  char cmd[1024];
  if (!src) return -1;
  snprintf(cmd, sizeof(cmd), "bash '%s/tests/support/registry_fixture.sh' %s '%s'", src, verb,
           g_dir);
  return system(cmd);
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof(g_dir), "%s/nimble-proto-reg-XXXXXX", tmp ? tmp : "/tmp");
  g_addr[0] = '\0';
  if (!mkdtemp(g_dir)) return;
  if (fixture("start") != 0) return;
  char path[300];
  snprintf(path, sizeof(path), "%s/addr", g_dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(g_addr, sizeof(g_addr), f)) g_addr[0] = '\0';
  fclose(f);
  g_addr[strcspn(g_addr, "\r\n")] = '\0';
}

static void teardown(void) {
  if (!g_dir[0]) return;
  fixture("stop");
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

typedef struct response {
  long status;
  char *body;
  size_t size;
  char location[1024];
  char digest[128];
} response;

static size_t on_body(char *data, size_t size, size_t n, void *user) {
  response *r = user;
  size_t add = size * n;
  char *grown = realloc(r->body, r->size + add + 1);
  if (!grown) return 0;
  memcpy(grown + r->size, data, add);
  r->size += add;
  grown[r->size] = '\0';
  r->body = grown;
  return add;
}

/* Keeps the Location and Docker-Content-Digest headers. */
static size_t on_header(char *data, size_t size, size_t n, void *user) {
  response *r = user;
  size_t len = size * n;
  struct {
    const char *name;
    char *dst;
    size_t cap;
  } keep[] = {{"location:", r->location, sizeof(r->location)},
              {"docker-content-digest:", r->digest, sizeof(r->digest)}};
  for (size_t k = 0; k < 2; k++) {
    size_t nl = strlen(keep[k].name);
    if (len > nl && strncasecmp(data, keep[k].name, nl) == 0) {
      size_t start = nl;
      while (start < len && data[start] == ' ') start++;
      size_t end = len;
      while (end > start && (data[end - 1] == '\r' || data[end - 1] == '\n')) end--;
      size_t copy = end - start < keep[k].cap - 1 ? end - start : keep[k].cap - 1;
      memcpy(keep[k].dst, data + start, copy);
      keep[k].dst[copy] = '\0';
    }
  }
  return len;
}

/* One request; the caller frees r->body. */
static void request(const char *method, const char *url, const char *content_type,
                    const char *accept, const void *body, size_t size, response *r) {
  memset(r, 0, sizeof(*r));
  CURL *c = curl_easy_init();
  ck_assert_ptr_nonnull(c);
  struct curl_slist *headers = NULL;
  char h[256];
  if (content_type) {
    snprintf(h, sizeof(h), "Content-Type: %s", content_type);
    headers = curl_slist_append(headers, h);
  }
  if (accept) {
    snprintf(h, sizeof(h), "Accept: %s", accept);
    headers = curl_slist_append(headers, h);
  }
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
  } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
  }
  CURLcode rc = curl_easy_perform(c);
  ck_assert_msg(rc == CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
}

/* Monolithic upload: POST for a session, then PUT ?digest=. */
static void push_blob(const char *repo, const void *data, size_t size) {
  char url[2048], text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_t d;
  nimble_digest_compute(data, size, &d);
  nimble_digest_format(&d, text);
  response r;
  snprintf(url, sizeof(url), "http://%s/v2/%s/blobs/uploads/", g_addr, repo);
  request("POST", url, NULL, NULL, NULL, 0, &r);
  ck_assert_int_eq(r.status, 202);
  free(r.body);
  const char *loc = r.location;
  if (strncmp(loc, "http", 4) == 0) {
    snprintf(url, sizeof(url), "%s%sdigest=%s", loc, strchr(loc, '?') ? "&" : "?", text);
  } else {
    snprintf(url, sizeof(url), "http://%s%s%sdigest=%s", g_addr, loc, strchr(loc, '?') ? "&" : "?",
             text);
  }
  request("PUT", url, "application/octet-stream", NULL, data, size, &r);
  ck_assert_msg(r.status == 201, "blob PUT gave %ld: %s", r.status, r.body ? r.body : "");
  free(r.body);
}

START_TEST(test_registry_stores_a_nimble_artifact_byte_exact_under_our_digest) {
  ck_assert_msg(g_addr[0], "docker-registry did not start (see %s/registry.log)", g_dir);
  /* Build a cuda artifact: config blob, bytecode, constants, both kernels. */
  nimble_artifact_config_t cfg;
  nimble_digest_t model, d;
  nimble_entry_sig_t *e;
  nimble_artifact_config_init(&cfg);
  nimble_digest_compute("model bytes", 11, &model);
  NIMBLE_ASSERT_OK(nimble_artifact_config_set_build(&cfg, "cuda:arch=sm_90", "0.1.0", &model, NULL));
  NIMBLE_ASSERT_OK(nimble_artifact_config_add_entry(&cfg, "main", &e));
  nimble_config_dim_t dims[2] = {{0, "n"}, {4, NULL}};
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 0, "x", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 2));
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 1, "y", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 2));
  char *cfg_bytes;
  size_t cfg_size;
  NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&cfg, &cfg_bytes, &cfg_size));

  static const char metadata[] = "NIMB metadata part", bytecode[] = "bytecode section",
                    constants[] = "weights weights", host[] = "\x7f" "ELF host kernels",
                    ptx[] = ".version 7.8\n.target sm_90\n";
  struct {
    const char *media_type, *data, *title;
  } parts[] = {{NIMBLE_MEDIA_TYPE_METADATA, metadata, "metadata"},
               {NIMBLE_MEDIA_TYPE_BYTECODE, bytecode, "bytecode"},
               {NIMBLE_MEDIA_TYPE_CONSTANTS, constants, "constants"},
               {NIMBLE_MEDIA_TYPE_KERNELS_X86_64, host, "kernels.x86_64.so"},
               {NIMBLE_MEDIA_TYPE_KERNELS_NVPTX, ptx, "kernels.ptx"}};
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  nimble_digest_compute(cfg_bytes, cfg_size, &d);
  NIMBLE_ASSERT_OK(nimble_manifest_set_config(&m, &d, (int64_t)cfg_size));
  push_blob("nimble/proto-test", cfg_bytes, cfg_size);
  for (size_t i = 0; i < 5; i++) {
    size_t n = strlen(parts[i].data);
    nimble_digest_compute(parts[i].data, n, &d);
    NIMBLE_ASSERT_OK(nimble_manifest_add_layer(&m, parts[i].media_type, &d, (int64_t)n,
                                               parts[i].title));
    push_blob("nimble/proto-test", parts[i].data, n);
  }
  NIMBLE_ASSERT_OK(nimble_manifest_check_target(&m, cfg.target));
  char *bytes;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, &bytes, &size));
  char ours[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_compute(bytes, size, &d);
  nimble_digest_format(&d, ours);

  /* The registry validates the manifest (every blob present) and names it
   * by the digest of the exact bytes: ours. */
  char url[1024];
  response r;
  snprintf(url, sizeof(url), "http://%s/v2/nimble/proto-test/manifests/cuda", g_addr);
  request("PUT", url, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL, bytes, size, &r);
  ck_assert_msg(r.status == 201, "manifest PUT gave %ld: %s", r.status, r.body ? r.body : "");
  ck_assert_str_eq(r.digest, ours);
  free(r.body);

  /* Fetched back by tag and by digest: the same bytes, which decode to the
   * same manifest. */
  for (int by_digest = 0; by_digest < 2; by_digest++) {
    snprintf(url, sizeof(url), "http://%s/v2/nimble/proto-test/manifests/%s", g_addr,
             by_digest ? ours : "cuda");
    request("GET", url, NULL, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.size, size);
    ck_assert(memcmp(r.body, bytes, size) == 0);
    nimble_manifest_t back;
    NIMBLE_ASSERT_OK(nimble_manifest_decode(r.body, r.size, &back));
    ck_assert_uint_eq(back.layer_count, 5);
    nimble_manifest_deinit(&back);
    free(r.body);
  }

  /* The config blob comes back and decodes to what was written. */
  char cfg_digest[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&m.config.digest, cfg_digest);
  snprintf(url, sizeof(url), "http://%s/v2/nimble/proto-test/blobs/%s", g_addr, cfg_digest);
  request("GET", url, NULL, NULL, NULL, 0, &r);
  ck_assert_int_eq(r.status, 200);
  nimble_artifact_config_t cfg_back;
  NIMBLE_ASSERT_OK(nimble_artifact_config_decode(r.body, r.size, &cfg_back));
  ck_assert_str_eq(cfg_back.target, "cuda:arch=sm_90");
  ck_assert_str_eq(cfg_back.entries[0].inputs[0].dims[0].symbol, "n");
  nimble_artifact_config_deinit(&cfg_back);
  free(r.body);

  free(bytes);
  free(cfg_bytes);
  nimble_manifest_deinit(&m);
  nimble_artifact_config_deinit(&cfg);
}
END_TEST

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  Suite *s = suite_create("manifest_registry");
  TCase *tc = tcase_create("docker-registry");
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_registry_stores_a_nimble_artifact_byte_exact_under_our_digest);
  suite_add_tcase(s, tc);
  int rc = nimble_test_run(s);
  curl_global_cleanup();
  return rc;
}
