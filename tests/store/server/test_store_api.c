/* The OCI distribution API of a running nimble-store, through libcurl.
 * Each test starts its own server in a fresh directory. Expected digests are
 * literals from sha256sum or computed with libsodium by the harness. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nimble_test.h"
#include "store_harness.h"

/* printf 'hello' | sha256sum ; printf 'world' | sha256sum */
#define HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define WORLD "sha256:486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7"
#define TOKEN STORE_TEST_TOKEN

static store_proc srv;

static void start_with(const char *const *extra) {
  ck_assert_int_eq(store_dir_create(&srv), 0);
  ck_assert_msg(store_proc_start(&srv, extra) == 0, "nimble-store did not start (%s)",
                store_bin_path());
}

static void setup(void) { start_with(NULL); }

/* The server must exit 0 after every test: under ASan that also says it
 * leaked nothing and hit no undefined behaviour on the way. */
static void teardown(void) {
  int status = srv.pid > 0 ? store_proc_stop(&srv, SIGTERM) : 0;
  char log[600];
  snprintf(log, sizeof log, "%s/log", srv.dir);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "tail -n 40 '%s' >&2", log);
    if (system(cmd) != 0) { /* the log is only a diagnostic */
    }
  }
  store_dir_remove(&srv);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "nimble-store exited with wait status %d", status);
}

/* srv.base + a formatted path, in one of four rotating static buffers: for
 * the test's own thread only. */
static char *url(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *url(const char *fmt, ...) {
  static char buf[4][1200];
  static int next;
  char path[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(path, sizeof path, fmt, ap);
  va_end(ap);
  char *out = buf[next++ % 4];
  snprintf(out, 1200, "%s%s", srv.base, path);
  return out;
}

static int files_in(const char *sub) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", srv.root, sub);
  return count_files(path);
}

/* Asserts an OCI error response: status, code, and a message fragment. */
static void expect_oci_error(http_result *r, long status, const char *code, const char *fragment) {
  ck_assert_msg(r->status == status, "status %ld, want %ld (body %s)", r->status, status, r->body);
  json_error_t err;
  json_t *root = json_loads(r->body, 0, &err);
  ck_assert_msg(root != NULL, "error body is not JSON: %s", r->body);
  json_t *e = json_array_get(json_object_get(root, "errors"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(e, "code")), code);
  const char *msg = json_string_value(json_object_get(e, "message"));
  ck_assert_msg(msg && strstr(msg, fragment), "message '%s' lacks '%s'", msg, fragment);
  ck_assert(json_object_get(e, "detail") != NULL);
  json_decref(root);
}

static void expect_header(http_result *r, const char *name, const char *want) {
  char *v = http_header(r, name);
  ck_assert_msg(v != NULL, "no %s header in:\n%s", name, r->headers);
  ck_assert_str_eq(v, want);
  free(v);
}

static void push_blob(const char *name, const char *data, size_t len) {
  char digest[72];
  test_sha256(data, len, digest);
  http_result r;
  http_do("POST", url("/v2/%s/blobs/uploads/?digest=%s", name, digest), TOKEN, data, len, NULL, &r);
  ck_assert_msg(r.status == 201, "push of %s: %ld %s", digest, r.status, r.body);
  http_result_free(&r);
}

START_TEST(test_base_endpoint_answers_with_the_api_version_header) {
  http_result r;
  http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  expect_header(&r, "Docker-Distribution-API-Version", "registry/2.0");
  http_result_free(&r);
  http_do("GET", url("/v3/"), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "UNSUPPORTED", "not an OCI distribution API path");
  http_result_free(&r);
}
END_TEST

START_TEST(test_monolithic_upload_round_trips_with_head_and_get) {
  http_result r;
  http_do("POST", url("/v2/models/a/blobs/uploads/?digest=" HELLO), TOKEN, "hello", 5, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  expect_header(&r, "Location", "/v2/models/a/blobs/" HELLO);
  expect_header(&r, "Docker-Content-Digest", HELLO);
  http_result_free(&r);

  http_do("HEAD", url("/v2/models/a/blobs/" HELLO), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  expect_header(&r, "Content-Length", "5");
  expect_header(&r, "Docker-Content-Digest", HELLO);
  ck_assert_uint_eq(r.body_len, 0);
  http_result_free(&r);

  /* Blobs are global: another repository name reads the same bytes. */
  http_do("GET", url("/v2/other/blobs/" HELLO), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(r.body_len, 5);
  ck_assert(memcmp(r.body, "hello", 5) == 0);
  http_result_free(&r);
  ck_assert_int_eq(files_in("blobs"), 1);
  ck_assert_int_eq(files_in("uploads"), 0);
}
END_TEST

START_TEST(test_range_reads_return_206_with_the_right_bytes_and_416_outside) {
  const char *text = "0123456789abcdefghij";
  push_blob("r", text, 20);
  char digest[72];
  test_sha256(text, 20, digest);
  struct {
    const char *range, *body, *content_range;
  } cases[] = {{"Range: bytes=0-3", "0123", "bytes 0-3/20"},
               {"Range: bytes=10-", "abcdefghij", "bytes 10-19/20"},
               {"Range: bytes=-4", "ghij", "bytes 16-19/20"},
               {"Range: bytes=18-100", "ij", "bytes 18-19/20"}};
  for (size_t i = 0; i < 4; i++) {
    const char *h[] = {cases[i].range, NULL};
    http_result r;
    http_do("GET", url("/v2/r/blobs/%s", digest), NULL, NULL, 0, h, &r);
    ck_assert_msg(r.status == 206, "%s: %ld", cases[i].range, r.status);
    ck_assert_uint_eq(r.body_len, strlen(cases[i].body));
    ck_assert(memcmp(r.body, cases[i].body, r.body_len) == 0);
    expect_header(&r, "Content-Range", cases[i].content_range);
    http_result_free(&r);
  }
  const char *h[] = {"Range: bytes=20-", NULL};
  http_result r;
  http_do("GET", url("/v2/r/blobs/%s", digest), NULL, NULL, 0, h, &r);
  expect_oci_error(&r, 416, "SIZE_INVALID", "outside the blob of 20 bytes");
  expect_header(&r, "Content-Range", "bytes */20");
  http_result_free(&r);
}
END_TEST

START_TEST(test_chunked_upload_resumes_from_the_range_the_server_reports) {
  http_result r;
  http_do("POST", url("/v2/c/blobs/uploads/"), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 202);
  char *loc = http_header(&r, "Location");
  char *uuid = http_header(&r, "Docker-Upload-UUID");
  ck_assert_ptr_nonnull(loc);
  ck_assert_ptr_nonnull(uuid);
  ck_assert(strstr(loc, uuid) != NULL);
  expect_header(&r, "Range", "0-0");
  http_result_free(&r);

  const char *h1[] = {"Content-Range: 0-2", "Content-Type: application/octet-stream", NULL};
  http_do("PATCH", url("%s", loc), TOKEN, "hel", 3, h1, &r);
  ck_assert_int_eq(r.status, 202);
  expect_header(&r, "Range", "0-2");
  http_result_free(&r);

  /* A client that lost track asks where the upload stands. */
  http_do("GET", url("%s", loc), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 204);
  expect_header(&r, "Range", "0-2");
  expect_header(&r, "Location", loc);
  expect_header(&r, "Docker-Upload-UUID", uuid);
  http_result_free(&r);

  /* A chunk that does not continue at byte 3 is refused with 416. */
  const char *bad[] = {"Content-Range: 1-2", NULL};
  http_do("PATCH", url("%s", loc), TOKEN, "el", 2, bad, &r);
  ck_assert_int_eq(r.status, 416);
  expect_header(&r, "Range", "0-2");
  http_result_free(&r);

  const char *h2[] = {"Content-Range: 3-3", NULL};
  http_do("PATCH", url("%s", loc), TOKEN, "l", 1, h2, &r);
  ck_assert_int_eq(r.status, 202);
  expect_header(&r, "Range", "0-3");
  http_result_free(&r);
  ck_assert_int_eq(files_in("blobs"), 0); /* nothing visible before the PUT */

  /* The final PUT carries the last byte. */
  http_do("PUT", url("%s?digest=" HELLO, loc), TOKEN, "o", 1, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  expect_header(&r, "Docker-Content-Digest", HELLO);
  http_result_free(&r);
  http_do("GET", url("/v2/c/blobs/" HELLO), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "hello");
  http_result_free(&r);

  /* The session is over. */
  http_do("GET", url("%s", loc), TOKEN, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "BLOB_UPLOAD_UNKNOWN", "unknown or has expired");
  http_result_free(&r);
  ck_assert_int_eq(files_in("uploads"), 0);
  free(loc);
  free(uuid);
}
END_TEST

START_TEST(test_digest_mismatch_is_rejected_and_nothing_is_stored) {
  http_result r;
  http_do("POST", url("/v2/d/blobs/uploads/?digest=" WORLD), TOKEN, "hello", 5, NULL, &r);
  expect_oci_error(&r, 400, "DIGEST_INVALID", "hash to " HELLO);
  http_result_free(&r);
  http_do("POST", url("/v2/d/blobs/uploads/?digest=sha256:abc"), TOKEN, "hello", 5, NULL, &r);
  expect_oci_error(&r, 400, "DIGEST_INVALID", "64 hex digits");
  http_result_free(&r);

  http_do("POST", url("/v2/d/blobs/uploads/"), TOKEN, NULL, 0, NULL, &r);
  char *loc = http_header(&r, "Location");
  http_result_free(&r);
  http_do("PUT", url("%s?digest=" WORLD, loc), TOKEN, "hello", 5, NULL, &r);
  expect_oci_error(&r, 400, "DIGEST_INVALID", "digest mismatch");
  http_result_free(&r);
  free(loc);
  ck_assert_int_eq(files_in("blobs"), 0);
  ck_assert_int_eq(files_in("uploads"), 0);
  http_do("HEAD", url("/v2/d/blobs/" HELLO), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 404);
  http_result_free(&r);
}
END_TEST

START_TEST(test_writes_without_or_with_a_wrong_token_are_rejected) {
  const char *tokens[] = {NULL, "wrong-token", "test-toke", "test-token2"};
  for (int i = 0; i < 4; i++) {
    http_result r;
    http_do("POST", url("/v2/w/blobs/uploads/?digest=" HELLO), tokens[i], "hello", 5, NULL, &r);
    expect_oci_error(&r, 401, "UNAUTHORIZED", tokens[i] ? "not valid" : "authentication required");
    expect_header(&r, "WWW-Authenticate", "Bearer realm=\"nimble\"");
    http_result_free(&r);
    http_do("PUT", url("/v2/w/manifests/latest"), tokens[i], "{}", 2, NULL, &r);
    ck_assert_int_eq(r.status, 401);
    http_result_free(&r);
  }
  ck_assert_int_eq(files_in("blobs"), 0);
  ck_assert_int_eq(files_in("uploads"), 0);
  ck_assert_int_eq(files_in("repositories"), 0);
  /* Reads stay open by default. */
  http_result r;
  http_do("GET", url("/v2/w/blobs/" HELLO), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "BLOB_UNKNOWN", "is not in the store");
  http_result_free(&r);
}
END_TEST

START_TEST(test_traversal_and_malformed_names_are_rejected_with_name_invalid) {
  const char *paths[] = {
      "/v2/../x/blobs/" HELLO, "/v2/%2e%2e/x/blobs/" HELLO, "/v2/a/%2E%2E/b/manifests/latest",
      "/v2/Upper/tags/list",   "/v2/a//b/tags/list",        "/v2/a%2f..%2fb/tags/list"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    http_result r;
    http_do("GET", url("%s", paths[i]), TOKEN, NULL, 0, NULL, &r);
    ck_assert_msg(r.status == 400, "%s: %ld %s", paths[i], r.status, r.body);
    expect_oci_error(&r, 400, "NAME_INVALID", "invalid repository name");
    http_result_free(&r);
  }
  http_result r;
  http_do("POST", url("/v2/../../escape/blobs/uploads/?digest=" HELLO), TOKEN, "hello", 5, NULL,
          &r);
  expect_oci_error(&r, 400, "NAME_INVALID", "character 0");
  http_result_free(&r);
  ck_assert_int_eq(count_files(srv.dir), 3); /* tokens, addr, log: nothing else */
}
END_TEST

static const char *manifest_fmt =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
    "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":5,"
    "\"digest\":\"" HELLO
    "\"},"
    "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"size\":5,"
    "\"digest\":\"" WORLD "\"}],\"annotations\":{\"n\":\"%d\"}}";

static void put_manifest(const char *name, const char *ref, const char *body, long want) {
  const char *h[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json", NULL};
  http_result r;
  http_do("PUT", url("/v2/%s/manifests/%s", name, ref), TOKEN, body, strlen(body), h, &r);
  ck_assert_msg(r.status == want, "PUT %s:%s: %ld %s", name, ref, r.status, r.body);
  http_result_free(&r);
}

START_TEST(test_manifest_round_trips_byte_exact_by_tag_and_by_digest) {
  push_blob("m/x", "hello", 5);
  push_blob("m/x", "world", 5);
  char body[1024], digest[72];
  snprintf(body, sizeof body, manifest_fmt, 1);
  test_sha256(body, strlen(body), digest);
  const char *h[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json", NULL};
  http_result r;
  http_do("PUT", url("/v2/m/x/manifests/v1"), TOKEN, body, strlen(body), h, &r);
  ck_assert_int_eq(r.status, 201);
  expect_header(&r, "Docker-Content-Digest", digest);
  char loc[200];
  snprintf(loc, sizeof loc, "/v2/m/x/manifests/%s", digest);
  expect_header(&r, "Location", loc);
  http_result_free(&r);

  const char *refs[] = {"v1", digest};
  for (int i = 0; i < 2; i++) {
    http_do("GET", url("/v2/m/x/manifests/%s", refs[i]), NULL, NULL, 0, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.body_len, strlen(body));
    ck_assert(memcmp(r.body, body, r.body_len) == 0);
    expect_header(&r, "Content-Type", "application/vnd.oci.image.manifest.v1+json");
    expect_header(&r, "Docker-Content-Digest", digest);
    http_result_free(&r);
  }
  http_do("HEAD", url("/v2/m/x/manifests/v1"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  char len[16];
  snprintf(len, sizeof len, "%zu", strlen(body));
  expect_header(&r, "Content-Length", len);
  http_result_free(&r);

  /* Pushing by digest checks it. */
  http_do("PUT", url("/v2/m/x/manifests/" HELLO), TOKEN, body, strlen(body), h, &r);
  expect_oci_error(&r, 400, "DIGEST_INVALID", digest);
  http_result_free(&r);
}
END_TEST

START_TEST(test_tags_list_is_sorted_and_paginated) {
  push_blob("t", "hello", 5);
  push_blob("t", "world", 5);
  const char *tags[] = {"v3", "v1", "latest", "v2"};
  for (int i = 0; i < 4; i++) {
    char body[1024];
    snprintf(body, sizeof body, manifest_fmt, i);
    put_manifest("t", tags[i], body, 201);
  }
  http_result r;
  http_do("GET", url("/v2/t/tags/list"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "{\"name\":\"t\",\"tags\":[\"latest\",\"v1\",\"v2\",\"v3\"]}");
  http_result_free(&r);
  http_do("GET", url("/v2/t/tags/list?n=2&last=latest"), NULL, NULL, 0, NULL, &r);
  ck_assert_str_eq(r.body, "{\"name\":\"t\",\"tags\":[\"v1\",\"v2\"]}");
  expect_header(&r, "Link", "</v2/t/tags/list?n=2&last=v2>; rel=\"next\"");
  http_result_free(&r);
  http_do("GET", url("/v2/nosuch/tags/list"), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "NAME_UNKNOWN", "repository 'nosuch' is unknown");
  http_result_free(&r);
}
END_TEST

START_TEST(test_manifest_referencing_a_missing_blob_is_refused) {
  push_blob("mb", "hello", 5); /* config present, layer "world" missing */
  char body[1024];
  snprintf(body, sizeof body, manifest_fmt, 0);
  const char *h[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json", NULL};
  http_result r;
  http_do("PUT", url("/v2/mb/manifests/v1"), TOKEN, body, strlen(body), h, &r);
  expect_oci_error(&r, 400, "MANIFEST_BLOB_UNKNOWN", "layers[0] references a missing blob");
  http_result_free(&r);
  http_do("GET", url("/v2/mb/manifests/v1"), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "NAME_UNKNOWN", "repository 'mb' is unknown");
  http_result_free(&r);
  /* Malformed JSON is MANIFEST_INVALID. */
  http_do("PUT", url("/v2/mb/manifests/v1"), TOKEN, "{\"schemaVersion\":2,", 19, h, &r);
  expect_oci_error(&r, 400, "MANIFEST_INVALID", "not valid JSON");
  http_result_free(&r);
}
END_TEST

START_TEST(test_manifest_over_4_mib_is_refused_with_413) {
  size_t len = 4 * 1024 * 1024 + 1;
  char *big = malloc(len);
  memset(big, ' ', len);
  /* With Expect: 100-continue, as curl sends for large bodies, the refusal
   * comes before any of the body is sent. */
  const char *h[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json",
                     "Expect: 100-continue", NULL};
  http_result r;
  http_do("PUT", url("/v2/big/manifests/v1"), TOKEN, big, len, h, &r);
  expect_oci_error(&r, 413, "SIZE_INVALID", "4194305 bytes exceeds the limit of 4194304");
  http_result_free(&r);
  /* Same without a declared length (chunked transfer). */
  const char *hc[] = {"Content-Type: application/vnd.oci.image.manifest.v1+json",
                      "Transfer-Encoding: chunked", NULL};
  http_do("PUT", url("/v2/big/manifests/v1"), TOKEN, big, len, hc, &r);
  expect_oci_error(&r, 413, "SIZE_INVALID", "exceeds the limit of 4194304");
  http_result_free(&r);
  free(big);
  http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  http_result_free(&r);
}
END_TEST

START_TEST(test_unknown_things_get_their_own_error_codes) {
  push_blob("u", "hello", 5);
  push_blob("u", "world", 5);
  char body[1024];
  snprintf(body, sizeof body, manifest_fmt, 0);
  put_manifest("u", "v1", body, 201);
  http_result r;
  http_do("GET", url("/v2/u/manifests/v2"), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "MANIFEST_UNKNOWN", "tag 'v2' is unknown");
  http_result_free(&r);
  http_do(
      "GET",
      url("/v2/u/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000"),
      NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 404, "BLOB_UNKNOWN", "is not in the store");
  http_result_free(&r);
  http_do("GET", url("/v2/u/blobs/uploads/0123456789abcdef0123456789abcdef"), TOKEN, NULL, 0, NULL,
          &r);
  expect_oci_error(&r, 404, "BLOB_UPLOAD_UNKNOWN", "unknown or has expired");
  http_result_free(&r);
  http_do("PATCH", url("/v2/u/blobs/uploads/not-an-id"), TOKEN, "x", 1, NULL, &r);
  expect_oci_error(&r, 404, "BLOB_UPLOAD_UNKNOWN", "32 hex digits");
  http_result_free(&r);
  http_do("DELETE", url("/v2/u/manifests/v1"), TOKEN, NULL, 0, NULL, &r);
  expect_oci_error(&r, 405, "UNSUPPORTED", "DELETE is not supported");
  http_result_free(&r);
}
END_TEST

typedef struct pusher {
  const char *data;
  size_t len;
  char digest[72];
  long status;
} pusher;

static void *push_thread(void *arg) {
  pusher *p = arg;
  /* Its own buffer: url() rotates static ones and is for one thread only. */
  char u[300];
  snprintf(u, sizeof u, "%s/v2/race/blobs/uploads/?digest=%s", srv.base, p->digest);
  http_result r;
  http_do("POST", u, TOKEN, p->data, p->len, NULL, &r);
  p->status = r.status;
  http_result_free(&r);
  return NULL;
}

START_TEST(test_concurrent_identical_uploads_store_one_blob) {
  size_t len = 2 << 20;
  char *data = malloc(len);
  for (size_t i = 0; i < len; i++) data[i] = (char)(i * 31 + (i >> 9));
  pusher p[5];
  pthread_t th[5];
  for (int i = 0; i < 5; i++) {
    p[i].data = data;
    p[i].len = len;
    test_sha256(data, len, p[i].digest);
    pthread_create(&th[i], NULL, push_thread, &p[i]);
  }
  for (int i = 0; i < 5; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(p[i].status, 201);
  }
  ck_assert_int_eq(files_in("blobs"), 1);
  ck_assert_int_eq(files_in("uploads"), 0);
  http_result r;
  http_do("GET", url("/v2/race/blobs/%s", p[0].digest), NULL, NULL, 0, NULL, &r);
  ck_assert_uint_eq(r.body_len, len);
  ck_assert(memcmp(r.body, data, len) == 0);
  http_result_free(&r);
  free(data);
}
END_TEST

START_TEST(test_client_disconnecting_mid_body_leaves_nothing_visible) {
  int fd = raw_connect(srv.addr);
  ck_assert_int_ge(fd, 0);
  char req[512];
  int n = snprintf(req, sizeof req,
                   "POST /v2/cut/blobs/uploads/?digest=" HELLO
                   " HTTP/1.1\r\nHost: %s\r\n"
                   "Authorization: Bearer " TOKEN "\r\nContent-Length: 1000000\r\n\r\nhel",
                   srv.addr);
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  char uploads[600];
  snprintf(uploads, sizeof uploads, "%s/uploads", srv.root);
  ck_assert(wait_file_count(uploads, 1, 5000)); /* the session exists while the body streams */
  close(fd);
  ck_assert(wait_file_count(uploads, 0, 5000)); /* and is dropped when the client goes */
  ck_assert_int_eq(files_in("blobs"), 0);
  http_result r;
  http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  http_result_free(&r);
}
END_TEST

START_TEST(test_a_chunk_cut_off_mid_body_is_resumed_from_the_reported_range) {
  /* Large enough to be streamed to disk as it arrives (small bodies are
   * read whole before the server acts on them). */
  enum { TOTAL = 200000, SENT = 120000 };
  char *data = malloc(TOTAL);
  for (size_t i = 0; i < TOTAL; i++) data[i] = (char)(i % 253);
  char digest[72];
  test_sha256(data, TOTAL, digest);
  http_result r;
  http_do("POST", url("/v2/cut/blobs/uploads/"), TOKEN, NULL, 0, NULL, &r);
  char *loc = http_header(&r, "Location");
  http_result_free(&r);
  ck_assert_ptr_nonnull(loc);
  int fd = raw_connect(srv.addr);
  ck_assert_int_ge(fd, 0);
  char req[512];
  int n = snprintf(req, sizeof req,
                   "PATCH %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer " TOKEN
                   "\r\nContent-Length: %d\r\n\r\n",
                   loc, srv.addr, TOTAL);
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  for (size_t off = 0; off < SENT;) {
    ssize_t w = write(fd, data + off, SENT - off);
    ck_assert_int_gt(w, 0);
    off += (size_t)w;
  }
  /* Wait until the server has all the bytes sent, then cut the connection. */
  char want_range[32];
  snprintf(want_range, sizeof want_range, "0-%d", SENT - 1);
  int seen = 0;
  for (int i = 0; i < 500 && !seen; i++) {
    http_do("GET", url("%s", loc), TOKEN, NULL, 0, NULL, &r);
    char *range = http_header(&r, "Range");
    seen = range && strcmp(range, want_range) == 0;
    free(range);
    http_result_free(&r);
    if (!seen) usleep(10000);
  }
  ck_assert(seen);
  close(fd);
  /* The session keeps the bytes that arrived; the client continues there. */
  char content_range[64];
  snprintf(content_range, sizeof content_range, "Content-Range: %d-%d", SENT, TOTAL - 1);
  const char *h[] = {content_range, NULL};
  long status = 0;
  for (int i = 0; i < 500; i++) { /* until the cut request has let go */
    http_do("PATCH", url("%s", loc), TOKEN, data + SENT, TOTAL - SENT, h, &r);
    status = r.status;
    http_result_free(&r);
    if (status != 409) break;
    usleep(10000);
  }
  ck_assert_int_eq(status, 202);
  http_do("PUT", url("%s?digest=%s", loc, digest), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  http_result_free(&r);
  http_do("GET", url("/v2/cut/blobs/%s", digest), NULL, NULL, 0, NULL, &r);
  ck_assert_uint_eq(r.body_len, TOTAL);
  ck_assert(memcmp(r.body, data, TOTAL) == 0);
  http_result_free(&r);
  free(loc);
  free(data);
}
END_TEST

START_TEST(test_garbage_requests_leave_the_server_serving) {
  const char *requests[] = {
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS hello */
      "GARBAGE\r\n\r\n",
      "GET /v2/\x01\x02/tags/list HTTP/1.1\r\nHost: x\r\n\r\n",
      "PUT /v2/a/manifests/t HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
      "PUT /v2/a/manifests/t HTTP/1.1\r\nHost: x\r\nContent-Length: "
      "99999999999999999999999\r\n\r\n",
      "PATCH /v2/a/blobs/uploads/0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: x\r\n"
      "Authorization: Bearer " TOKEN "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "GET /v2/a/tags/list?n=-1 HTTP/1.1\r\nHost: x\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
    int fd = raw_connect(srv.addr);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(requests[i]);
    ck_assert_int_eq(write(fd, requests[i], len), (ssize_t)len);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    for (int k = 0; k < 100 && read(fd, buf, sizeof buf) > 0; k++) {
    }
    close(fd);
  }
  char big[301];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  http_result r;
  http_do("GET", url("/v2/%s/tags/list", big), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 400, "NAME_INVALID", "at most 255");
  http_result_free(&r);
  http_do("GET", url("/v2/a/tags/list?n=-1"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 404); /* unknown repository comes first */
  http_result_free(&r);
  http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  http_result_free(&r);
  ck_assert_int_eq(files_in("blobs") + files_in("uploads") + files_in("repositories"), 0);
}
END_TEST

START_TEST(test_mount_of_a_stored_blob_is_created_at_once) {
  push_blob("src", "hello", 5);
  http_result r;
  http_do("POST", url("/v2/dst/blobs/uploads/?mount=" HELLO "&from=src"), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  expect_header(&r, "Location", "/v2/dst/blobs/" HELLO);
  http_result_free(&r);
  http_do("POST", url("/v2/dst/blobs/uploads/?mount=" WORLD "&from=src"), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 202); /* not stored: an ordinary upload starts */
  http_result_free(&r);
}
END_TEST

/* The two limits get separate servers: with a connection cap of 2, a
 * connection the server has not finished closing after an early 413 could
 * turn the next request of the size test into a 429 on a loaded machine. */
static void size_limit_setup(void) {
  const char *extra[] = {"--max-blob-size", "1K", "--quiet", NULL};
  start_with(extra);
}

static void connection_limit_setup(void) {
  const char *extra[] = {"--max-connections", "2", "--quiet", NULL};
  start_with(extra);
}

START_TEST(test_blobs_over_the_size_limit_get_413_and_the_server_stays_up) {
  char data[2000];
  memset(data, 'x', sizeof data);
  char digest[72];
  test_sha256(data, sizeof data, digest);
  http_result r;
  http_do("POST", url("/v2/l/blobs/uploads/?digest=%s", digest), TOKEN, data, sizeof data, NULL,
          &r);
  expect_oci_error(&r, 413, "SIZE_INVALID", "limit of 1024 bytes");
  http_result_free(&r);
  /* Chunked transfer: no length is declared, the limit is hit while streaming. */
  http_do("POST", url("/v2/l/blobs/uploads/"), TOKEN, NULL, 0, NULL, &r);
  char *loc = http_header(&r, "Location");
  http_result_free(&r);
  const char *h[] = {"Transfer-Encoding: chunked", NULL};
  http_do("PATCH", url("%s", loc), TOKEN, data, sizeof data, h, &r);
  expect_oci_error(&r, 413, "SIZE_INVALID", "limit of 1024 bytes");
  http_result_free(&r);
  http_do("GET", url("%s", loc), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 204);
  expect_header(&r, "Range", "0-0"); /* the refused chunk left nothing behind */
  http_result_free(&r);
  free(loc);
  ck_assert_int_eq(files_in("blobs"), 0);
  http_do("POST", url("/v2/l/blobs/uploads/?digest=" HELLO), TOKEN, "hello", 5, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  http_result_free(&r);
}
END_TEST

START_TEST(test_connections_over_the_limit_get_429) {
  int a = raw_connect(srv.addr), b = raw_connect(srv.addr);
  ck_assert(a >= 0 && b >= 0);
  /* Once the server has registered both idle connections, a third one is
   * told to come back later. */
  http_result r;
  for (int i = 0; i < 250; i++) {
    http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
    if (r.status == 429) break;
    http_result_free(&r);
    usleep(20 * 1000);
  }
  expect_oci_error(&r, 429, "TOO_MANY_REQUESTS", "more than 2 connections");
  expect_header(&r, "Retry-After", "1");
  http_result_free(&r);
  close(a);
  close(b);
  for (int i = 0; i < 100; i++) {
    http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
    long status = r.status;
    http_result_free(&r);
    if (status == 200) return;
    usleep(20 * 1000);
  }
  ck_abort_msg("the server did not serve again after the extra connections closed");
}
END_TEST

static void auth_reads_setup(void) {
  const char *extra[] = {"--auth-reads", NULL};
  start_with(extra);
}

START_TEST(test_auth_reads_makes_reads_need_a_token) {
  http_result r;
  http_do("GET", url("/v2/"), NULL, NULL, 0, NULL, &r);
  expect_oci_error(&r, 401, "UNAUTHORIZED", "authentication required");
  expect_header(&r, "WWW-Authenticate", "Bearer realm=\"nimble\"");
  http_result_free(&r);
  http_do("GET", url("/v2/"), TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  http_result_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_api");
  TCase *tc = tcase_create("api");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_base_endpoint_answers_with_the_api_version_header);
  tcase_add_test(tc, test_monolithic_upload_round_trips_with_head_and_get);
  tcase_add_test(tc, test_range_reads_return_206_with_the_right_bytes_and_416_outside);
  tcase_add_test(tc, test_chunked_upload_resumes_from_the_range_the_server_reports);
  tcase_add_test(tc, test_digest_mismatch_is_rejected_and_nothing_is_stored);
  tcase_add_test(tc, test_writes_without_or_with_a_wrong_token_are_rejected);
  tcase_add_test(tc, test_traversal_and_malformed_names_are_rejected_with_name_invalid);
  tcase_add_test(tc, test_manifest_round_trips_byte_exact_by_tag_and_by_digest);
  tcase_add_test(tc, test_tags_list_is_sorted_and_paginated);
  tcase_add_test(tc, test_manifest_referencing_a_missing_blob_is_refused);
  tcase_add_test(tc, test_manifest_over_4_mib_is_refused_with_413);
  tcase_add_test(tc, test_unknown_things_get_their_own_error_codes);
  tcase_add_test(tc, test_concurrent_identical_uploads_store_one_blob);
  tcase_add_test(tc, test_client_disconnecting_mid_body_leaves_nothing_visible);
  tcase_add_test(tc, test_a_chunk_cut_off_mid_body_is_resumed_from_the_reported_range);
  tcase_add_test(tc, test_garbage_requests_leave_the_server_serving);
  tcase_add_test(tc, test_mount_of_a_stored_blob_is_created_at_once);
  suite_add_tcase(s, tc);
  TCase *lim = tcase_create("limits");
  tcase_add_checked_fixture(lim, size_limit_setup, teardown);
  tcase_add_test(lim, test_blobs_over_the_size_limit_get_413_and_the_server_stays_up);
  suite_add_tcase(s, lim);
  TCase *conn = tcase_create("connection_limit");
  tcase_add_checked_fixture(conn, connection_limit_setup, teardown);
  tcase_add_test(conn, test_connections_over_the_limit_get_429);
  suite_add_tcase(s, conn);
  TCase *ar = tcase_create("auth_reads");
  tcase_add_checked_fixture(ar, auth_reads_setup, teardown);
  tcase_add_test(ar, test_auth_reads_makes_reads_need_a_token);
  suite_add_tcase(s, ar);
  return nimble_test_run(s);
}
