/* nimble-store against a real OCI client: skopeo reads what we serve, byte
 * for byte, and pushes an OCI image layout through the upload protocol.
 *
 * The read test uses the server of the ctest fixture (tests/support/
 * store_fixture.sh, directory in NIMBLE_TEST_STORE_FIXTURE_DIR); the push
 * test starts its own server with --auth-reads, because Docker-style clients
 * send a token only when the /v2/ ping challenges them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "nimble_test.h"
#include "store_harness.h"

#define HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define WORLD "sha256:486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7"

/* Runs a shell command; returns its exit status, output in out (NUL-ended). */
static int run(const char *cmd, char *out, size_t out_size, size_t *out_len) {
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(out, 1, out_size - 1, p);
  out[n] = '\0';
  if (out_len) *out_len = n;
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void fixture_addr(char *out, size_t size) {
  const char *dir = getenv("NIMBLE_TEST_STORE_FIXTURE_DIR");
  ck_assert_msg(dir != NULL, "NIMBLE_TEST_STORE_FIXTURE_DIR is not set (run through ctest)");
  char path[600];
  snprintf(path, sizeof path, "%s/addr", dir);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "no %s: the store fixture did not start", path);
  ck_assert_ptr_nonnull(fgets(out, (int)size, f));
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

START_TEST(test_skopeo_inspect_raw_returns_the_exact_manifest_bytes) {
  char addr[96], u[400];
  fixture_addr(addr, sizeof addr);
  const char *blobs[] = {"hello", "world"};
  const char *digests[] = {HELLO, WORLD};
  for (int i = 0; i < 2; i++) {
    snprintf(u, sizeof u, "http://%s/v2/interop/inspect/blobs/uploads/?digest=%s", addr,
             digests[i]);
    http_result r;
    http_do("POST", u, STORE_TEST_TOKEN, blobs[i], 5, NULL, &r);
    ck_assert_int_eq(r.status, 201);
    http_result_free(&r);
  }
  /* Odd but valid JSON spacing: a server that re-encoded would change it. */
  const char *manifest =
      "{ \"schemaVersion\": 2,\n  \"mediaType\": \"application/vnd.oci.image.manifest.v1+json\",\n"
      "  \"config\": {\"mediaType\": \"application/vnd.oci.image.config.v1+json\", \"size\": 5, "
      "\"digest\": \"" HELLO
      "\"},\n"
      "  \"layers\": [ {\"mediaType\": \"application/vnd.oci.image.layer.v1.tar\", \"size\": 5, "
      "\"digest\": \"" WORLD "\"} ] }\n";
  const char *h[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json", NULL};
  snprintf(u, sizeof u, "http://%s/v2/interop/inspect/manifests/v1", addr);
  http_result r;
  http_do("PUT", u, STORE_TEST_TOKEN, manifest, strlen(manifest), h, &r);
  ck_assert_int_eq(r.status, 201);
  http_result_free(&r);

  char cmd[600], out[8192];
  size_t len = 0;
  snprintf(cmd, sizeof cmd,
           "timeout 60 skopeo inspect --raw --tls-verify=false docker://%s/interop/inspect:v1",
           addr);
  ck_assert_int_eq(run(cmd, out, sizeof out, &len), 0);
  ck_assert_uint_eq(len, strlen(manifest));
  ck_assert(memcmp(out, manifest, len) == 0);
}
END_TEST

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* Writes `data` as a blob of the OCI layout at dir; returns its digest. */
static void layout_blob(const char *dir, const char *data, size_t len, char digest[72]) {
  test_sha256(data, len, digest);
  char name[120];
  snprintf(name, sizeof name, "blobs/sha256/%s", digest + 7);
  write_file(dir, name, data, len);
}

START_TEST(test_skopeo_copy_pushes_an_oci_layout_that_reads_back_identically) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  const char *extra[] = {"--auth-reads", "--quiet", NULL};
  ck_assert_int_eq(store_proc_start(&p, extra), 0);

  char layout[400];
  snprintf(layout, sizeof layout, "%s/layout", p.dir);
  char sub[500];
  snprintf(sub, sizeof sub, "%s/blobs/sha256", layout);
  char mk[600];
  snprintf(mk, sizeof mk, "mkdir -p '%s'", sub);
  ck_assert_int_eq(system(mk), 0);
  const char *config =
      "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]"
      "}}";
  char layer[70000];
  for (size_t i = 0; i < sizeof layer; i++) layer[i] = (char)(i % 251);
  char cd[72], ld[72], md[72];
  layout_blob(layout, config, strlen(config), cd);
  layout_blob(layout, layer, sizeof layer, ld);
  char manifest[1024];
  snprintf(manifest, sizeof manifest,
           "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
           "\"config\":{\"mediaType\":\"application/"
           "vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%zu},"
           "\"layers\":[{\"mediaType\":\"application/"
           "vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":%zu}]}",
           cd, strlen(config), ld, sizeof layer);
  layout_blob(layout, manifest, strlen(manifest), md);
  char index[512];
  snprintf(index, sizeof index,
           "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/"
           "vnd.oci.image.manifest.v1+json\","
           "\"digest\":\"%s\",\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":"
           "\"v1\"}}]}",
           md, strlen(manifest));
  write_file(layout, "index.json", index, strlen(index));
  write_file(layout, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);

  char cmd[1400], out[8192];
  size_t len = 0;
  snprintf(cmd, sizeof cmd,
           "timeout 120 skopeo copy --quiet --preserve-digests --dest-tls-verify=false "
           "--dest-registry-token " STORE_TEST_TOKEN " oci:%s:v1 docker://%s/interop/push:v1 2>&1",
           layout, p.addr);
  int rc = run(cmd, out, sizeof out, NULL);
  ck_assert_msg(rc == 0, "skopeo copy failed (%d): %s", rc, out);

  /* What skopeo reads back, and what the server serves, are the bytes the
   * layout holds. */
  snprintf(cmd, sizeof cmd,
           "timeout 60 skopeo inspect --raw --tls-verify=false --registry-token " STORE_TEST_TOKEN
           " docker://%s/interop/push:v1",
           p.addr);
  ck_assert_int_eq(run(cmd, out, sizeof out, &len), 0);
  ck_assert_uint_eq(len, strlen(manifest));
  ck_assert(memcmp(out, manifest, len) == 0);
  char u[400];
  snprintf(u, sizeof u, "%s/v2/interop/push/blobs/%s", p.base, ld);
  http_result r;
  http_do("GET", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(r.body_len, sizeof layer);
  ck_assert(memcmp(r.body, layer, sizeof layer) == 0);
  http_result_free(&r);
  snprintf(u, sizeof u, "%s/v2/interop/push/manifests/v1", p.base);
  http_do("HEAD", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  char *got = http_header(&r, "Docker-Content-Digest");
  ck_assert_str_eq(got, md);
  free(got);
  http_result_free(&r);
  int status = store_proc_stop(&p, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store_dir_remove(&p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_interop");
  TCase *tc = tcase_create("skopeo");
  tcase_set_timeout(tc, 180);
  tcase_add_test(tc, test_skopeo_inspect_raw_returns_the_exact_manifest_bytes);
  tcase_add_test(tc, test_skopeo_copy_pushes_an_oci_layout_that_reads_back_identically);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
