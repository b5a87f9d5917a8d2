/* The store client against real peers.
 *
 * With NIMBLE_TEST_STORE_DIR set (a fixture dir holding `addr`), the "server"
 * case runs against that server: nimble-store or Debian's docker-registry
 * (NIMBLE_TEST_STORE_KIND says which; NIMBLE_TEST_STORE_TOKEN is the bearer
 * token). Digests are checked against libsodium called directly.
 *
 * Without it, the "peer" case runs against the scripted responder of
 * http_peer.h: wrong bytes, a body cut mid-way, 503s, a Location to another
 * host, a refused connection. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http_peer.h"
#include "nimble_test.h"

#include "nimble/store_client.h"

/* ---- helpers ---------------------------------------------------------- */

typedef struct counts_t {
  int head, get, post, put, patch, other;
  int failed_transfers;
  int retries;
  long delay_total_ms;
  long min_delay_ms;
  int range_gets;
  char last_range[64];
  uint64_t progress_done, progress_total;
  long last_status;
} counts_t;

static void count_event(void *user, const nimble_store_event_t *ev) {
  counts_t *c = user;
  /* NIMBLE_TEST_TRACE=1 shows the exchanges, for debugging a failure. */
  if (getenv("NIMBLE_TEST_TRACE") && ev->kind != NIMBLE_STORE_EVENT_PROGRESS)
    fprintf(stderr, "[%d] %s %.120s%s%s -> %ld %s (delay %ld)\n", ev->kind, ev->method, ev->url,
            ev->range ? " range=" : "", ev->range ? ev->range : "", ev->http_status,
            ev->error ? ev->error : "", ev->delay_ms);
  if (ev->kind == NIMBLE_STORE_EVENT_RETRY) {
    c->retries++;
    c->delay_total_ms += ev->delay_ms;
    if (c->min_delay_ms == 0 || ev->delay_ms < c->min_delay_ms) c->min_delay_ms = ev->delay_ms;
    return;
  }
  if (ev->kind == NIMBLE_STORE_EVENT_PROGRESS) {
    c->progress_done = ev->bytes_done;
    c->progress_total = ev->bytes_total;
    return;
  }
  if (ev->kind != NIMBLE_STORE_EVENT_RESPONSE) return;
  if (!strcmp(ev->method, "HEAD")) c->head++;
  else if (!strcmp(ev->method, "GET")) c->get++;
  else if (!strcmp(ev->method, "POST")) c->post++;
  else if (!strcmp(ev->method, "PUT")) c->put++;
  else if (!strcmp(ev->method, "PATCH")) c->patch++;
  else c->other++;
  if (ev->http_status == 0) c->failed_transfers++;
  c->last_status = ev->http_status;
  if (ev->range) {
    c->range_gets++;
    snprintf(c->last_range, sizeof(c->last_range), "%s", ev->range);
  }
}

static int total_requests(const counts_t *c) {
  return c->head + c->get + c->post + c->put + c->patch + c->other;
}

/* Deterministic pseudo-random bytes, different per run (seeded by pid and
 * time) so a first push is really a first push. */
static uint64_t rng_state;
static void fill_random(uint8_t *p, size_t n) {
  if (!rng_state) rng_state = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < n; i++) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    p[i] = (uint8_t)(rng_state >> 24);
  }
}

/* "sha256:<hex>" by libsodium, independent of nimble_digest. */
static void sodium_digest_text(const void *data, size_t n, char out[72]) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, data, n);
  memcpy(out, "sha256:", 7);
  for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

static void expect_digest(const nimble_digest_t *d, const void *data, size_t n) {
  char want[72], got[NIMBLE_DIGEST_STRING_LEN + 1];
  sodium_digest_text(data, n, want);
  nimble_digest_format(d, got);
  ck_assert_str_eq(got, want);
}

static char *read_file(const char *path, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc(n > 0 ? (size_t)n : 1);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(fread(p, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_n = (size_t)n;
  return p;
}

static char *make_temp_dir(void) {
  char tmpl[] = "/tmp/nimble-store-client-XXXXXX";
  char *d = mkdtemp(tmpl);
  ck_assert_ptr_nonnull(d);
  return strdup(d);
}

/* Entries in a directory other than . and .. */
static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* ---- the server under test -------------------------------------------- */

static char server_url[128];
static const char *server_kind = "";
static const char *server_token;

static int load_server(void) {
  const char *dir = getenv("NIMBLE_TEST_STORE_DIR");
  if (!dir || !*dir) return 0;
  char path[4096];
  snprintf(path, sizeof(path), "%s/addr", dir);
  /* Plain stdio: Check's assertions may not run outside a test. */
  char addr[96] = "";
  FILE *f = fopen(path, "r");
  if (!f || !fgets(addr, sizeof(addr), f)) {
    fprintf(stderr, "NIMBLE_TEST_STORE_DIR=%s but %s is missing or empty (fixture not started?)\n",
            dir, path);
    exit(EXIT_FAILURE);
  }
  fclose(f);
  addr[strcspn(addr, "\r\n ")] = '\0';
  snprintf(server_url, sizeof(server_url), "http://%s", addr);
  server_kind = getenv("NIMBLE_TEST_STORE_KIND") ? getenv("NIMBLE_TEST_STORE_KIND") : "";
  server_token = getenv("NIMBLE_TEST_STORE_TOKEN");
  if (server_token && !*server_token) server_token = NULL;
  return 1;
}

static nimble_store_client *server_client(counts_t *counts, const char *token) {
  nimble_store_client_options_t o = {.base_url = server_url, .token = token,
                                     .backoff_base_ms = 20, .max_attempts = 3,
                                     .on_event = count_event, .event_user = counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  return c;
}

/* A repository name unique to this run and test. */
static void repo_name(char *out, size_t cap, const char *test) {
  uint8_t r[4];
  fill_random(r, sizeof(r));
  snprintf(out, cap, "nimble-test/%s-%02x%02x%02x%02x", test, r[0], r[1], r[2], r[3]);
}

START_TEST(test_blob_round_trip_matches_independent_sha256) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "roundtrip");
  size_t n = 100 * 1024 + 7;
  uint8_t *data = malloc(n);
  fill_random(data, n);

  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, n, &d));
  expect_digest(&d, data, n);

  int exists = 0;
  uint64_t size = 0;
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(c, repo, &d, &exists, &size));
  ck_assert_int_eq(exists, 1);
  ck_assert_uint_eq(size, n);

  uint8_t *back = NULL;
  size_t back_n = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, repo, &d, &back, &back_n));
  ck_assert_uint_eq(back_n, n);
  ck_assert(memcmp(back, data, n) == 0);
  free(back);

  char *dir = make_temp_dir();
  char path[4096];
  snprintf(path, sizeof(path), "%s/blob", dir);
  NIMBLE_ASSERT_OK(nimble_store_pull_blob_to_file(c, repo, &d, path));
  size_t file_n = 0;
  char *file = read_file(path, &file_n);
  ck_assert_uint_eq(file_n, n);
  ck_assert(memcmp(file, data, n) == 0);
  ck_assert_int_eq(dir_entries(dir), 1);  /* no temporary file left */
  free(file);
  remove_dir(dir);
  free(dir);

  /* The empty blob is a blob too (its digest is the FIPS empty vector). */
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, NULL, 0, &d));
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, repo, &d, &back, &back_n));
  ck_assert_uint_eq(back_n, 0);
  free(back);
  free(data);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_push_is_skipped_when_the_blob_is_present) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "skip");
  uint8_t data[4096];
  fill_random(data, sizeof(data));
  nimble_digest_t d1, d2;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, sizeof(data), &d1));
  /* First push: HEAD (404), POST, PUT. */
  ck_assert_int_eq(counts.head, 1);
  ck_assert_int_eq(counts.post, 1);
  ck_assert_int_eq(counts.put, 1);
  memset(&counts, 0, sizeof(counts));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, sizeof(data), &d2));
  ck_assert_int_eq(total_requests(&counts), 1);
  ck_assert_int_eq(counts.head, 1);
  ck_assert_int_eq(counts.last_status, 200);
  ck_assert(nimble_digest_equal(&d1, &d2));
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_chunked_upload_of_a_several_mib_blob_round_trips) {
  counts_t counts = {0};
  nimble_store_client_options_t o = {.base_url = server_url, .token = server_token,
                                     .chunk_size = 1u << 20, .backoff_base_ms = 20,
                                     .on_event = count_event, .event_user = &counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  char repo[128];
  repo_name(repo, sizeof(repo), "chunked");
  size_t n = (5u << 20) + 123;
  uint8_t *data = malloc(n);
  fill_random(data, n);
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, n, &d));
  expect_digest(&d, data, n);
  ck_assert_int_eq(counts.post, 1);
  ck_assert_int_eq(counts.patch, 6); /* five full MiB and 123 bytes */
  ck_assert_int_eq(counts.put, 1);
  ck_assert_uint_eq(counts.progress_done, n); /* progress reached the end */

  uint8_t *back = NULL;
  size_t back_n = 0;
  counts.progress_done = counts.progress_total = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, repo, &d, &back, &back_n));
  ck_assert_uint_eq(back_n, n);
  ck_assert(memcmp(back, data, n) == 0);
  ck_assert_uint_eq(counts.progress_done, n);
  ck_assert_uint_eq(counts.progress_total, n);
  free(back);
  free(data);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_push_from_a_file_streams_and_round_trips) {
  counts_t counts = {0};
  nimble_store_client_options_t o = {.base_url = server_url, .token = server_token,
                                     .chunk_size = 1u << 20, .backoff_base_ms = 20,
                                     .on_event = count_event, .event_user = &counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  char repo[128];
  repo_name(repo, sizeof(repo), "file");
  char *dir = make_temp_dir();
  char src[4096], dst[4096];
  snprintf(src, sizeof(src), "%s/src", dir);
  snprintf(dst, sizeof(dst), "%s/dst", dir);
  size_t n = (3u << 20) + 17;
  uint8_t *data = malloc(n);
  fill_random(data, n);
  FILE *f = fopen(src, "wb");
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  fclose(f);

  nimble_digest_t d;
  uint64_t size = 0;
  NIMBLE_ASSERT_OK(nimble_store_push_blob_file(c, repo, src, &d, &size));
  ck_assert_uint_eq(size, n);
  expect_digest(&d, data, n);
  ck_assert_int_eq(counts.patch, 4);
  NIMBLE_ASSERT_OK(nimble_store_pull_blob_to_file(c, repo, &d, dst));
  size_t got_n = 0;
  char *got = read_file(dst, &got_n);
  ck_assert_uint_eq(got_n, n);
  ck_assert(memcmp(got, data, n) == 0);
  free(got);

  snprintf(src, sizeof(src), "%s/missing", dir);
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob_file(c, repo, src, &d, NULL), NIMBLE_IO_ERROR,
                      "missing");
  remove_dir(dir);
  free(dir);
  free(data);
  nimble_store_client_destroy(c);
}
END_TEST

#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"

/* Pushes a config and a layer and returns an OCI manifest naming them,
 * written by hand with uneven spacing so byte-exactness is visible. */
static char *make_manifest(nimble_store_client *c, const char *repo, size_t *out_n) {
  const char *config = "{\"nimble\":{\"target\":\"x86_64-linux-gnu\"}}";
  uint8_t layer[2000];
  fill_random(layer, sizeof(layer));
  nimble_digest_t dc, dl;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, config, strlen(config), &dc));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, layer, sizeof(layer), &dl));
  char tc[72], tl[72];
  sodium_digest_text(config, strlen(config), tc);
  sodium_digest_text(layer, sizeof(layer), tl);
  char *m = NULL;
  int n = asprintf(&m,
                   "{\n  \"schemaVersion\": 2,\n  \"mediaType\": \"" OCI_MANIFEST "\",\n"
                   "  \"config\": {\"mediaType\": \"application/vnd.oci.image.config.v1+json\", "
                   "\"digest\": \"%s\", \"size\": %zu},\n"
                   "  \"layers\": [ {\"mediaType\": \"application/vnd.oci.image.layer.v1.tar\","
                   "   \"digest\": \"%s\", \"size\": %zu} ]\n}\n",
                   tc, strlen(config), tl, sizeof(layer));
  ck_assert_int_gt(n, 0);
  *out_n = (size_t)n;
  return m;
}

START_TEST(test_manifest_pushed_by_tag_pulls_byte_exact_by_tag_and_digest) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "manifest");
  size_t mn = 0;
  char *m = make_manifest(c, repo, &mn);

  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, "v1", m, mn, OCI_MANIFEST, &d));
  expect_digest(&d, m, mn);

  uint8_t *bytes = NULL;
  size_t n = 0;
  char *media = NULL;
  nimble_digest_t got;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(c, repo, "v1", &bytes, &n, &media, &got));
  ck_assert_uint_eq(n, mn);
  ck_assert(memcmp(bytes, m, mn) == 0);
  ck_assert_str_eq(media, OCI_MANIFEST);
  ck_assert(nimble_digest_equal(&got, &d));
  free(bytes);
  free(media);

  char dtext[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, dtext);
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(c, repo, dtext, &bytes, &n, NULL, NULL));
  ck_assert_uint_eq(n, mn);
  ck_assert(memcmp(bytes, m, mn) == 0);
  free(bytes);

  /* A second tag, and the list shows both. */
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, "latest", m, mn, OCI_MANIFEST, NULL));
  char **tags = NULL;
  size_t ntags = 0;
  NIMBLE_ASSERT_OK(nimble_store_list_tags(c, repo, &tags, &ntags));
  ck_assert_uint_eq(ntags, 2);
  int saw_v1 = 0, saw_latest = 0;
  for (size_t i = 0; i < ntags; i++) {
    saw_v1 |= !strcmp(tags[i], "v1");
    saw_latest |= !strcmp(tags[i], "latest");
  }
  ck_assert(saw_v1 && saw_latest);
  nimble_store_tags_free(tags, ntags);
  free(m);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_manifest_pushed_by_digest_pulls_by_digest) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "bydigest");
  size_t mn = 0;
  char *m = make_manifest(c, repo, &mn);
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_manifest(c, repo, NULL, m, mn, OCI_MANIFEST, &d));
  char dtext[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, dtext);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(c, repo, dtext, &bytes, &n, NULL, NULL));
  ck_assert_uint_eq(n, mn);
  ck_assert(memcmp(bytes, m, mn) == 0);
  free(bytes);
  free(m);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_unknown_blob_and_manifest_are_not_found) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "unknown");
  /* A repository must exist for some registries to say BLOB_UNKNOWN. */
  uint8_t seed[16];
  fill_random(seed, sizeof(seed));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, seed, sizeof(seed), NULL));
  memset(&counts, 0, sizeof(counts));

  uint8_t junk[32];
  fill_random(junk, sizeof(junk));
  nimble_digest_t d;
  nimble_digest_compute(junk, sizeof(junk), &d);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, repo, &d, &bytes, &n), NIMBLE_NOT_FOUND, "HTTP 404");
  ck_assert_ptr_null(bytes);
  ck_assert_int_eq(counts.get, 1); /* 404 is not retried */
  ck_assert_int_eq(counts.retries, 0);

  int exists = 1;
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(c, repo, &d, &exists, NULL));
  ck_assert_int_eq(exists, 0);

  /* MANIFEST_UNKNOWN, or NAME_UNKNOWN where a repository exists only once it
   * has a manifest: both are the spec's answers. */
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(c, repo, "no-such-tag", &bytes, &n, NULL, NULL),
                      NIMBLE_NOT_FOUND, "_UNKNOWN: ");

  char *dir = make_temp_dir();
  char path[4096];
  snprintf(path, sizeof(path), "%s/blob", dir);
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob_to_file(c, repo, &d, path), NIMBLE_NOT_FOUND,
                      "BLOB_UNKNOWN");
  ck_assert_int_eq(dir_entries(dir), 0);
  remove_dir(dir);
  free(dir);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_manifest_naming_a_missing_blob_is_rejected) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "dangling");
  const char *m =
      "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MANIFEST "\",\"config\":{\"mediaType\":"
      "\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:"
      "0000000000000000000000000000000000000000000000000000000000000000\",\"size\":2},"
      "\"layers\":[]}";
  nimble_status_t s = nimble_store_push_manifest(c, repo, "v1", m, strlen(m), OCI_MANIFEST, NULL);
  ck_assert_ptr_nonnull(s);
  /* The OCI error code from the JSON body is in the message. */
  ck_assert_msg(strstr(nimble_status_message(s), "MANIFEST_BLOB_UNKNOWN") ||
                    strstr(nimble_status_message(s), "BLOB_UNKNOWN"),
                "%s", nimble_status_message(s));
  ck_assert_msg(strstr(nimble_status_message(s), "HTTP 400") || strstr(nimble_status_message(s), "HTTP 404"),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_wrong_token_is_unauthenticated) {
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, "wrong-token");
  char repo[128];
  repo_name(repo, sizeof(repo), "auth");
  uint8_t data[64];
  fill_random(data, sizeof(data));
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, repo, data, sizeof(data), NULL),
                      NIMBLE_UNAUTHENTICATED, "HTTP 401");
  ck_assert_int_eq(counts.retries, 0);
  nimble_store_client_destroy(c);

  /* No token at all is refused the same way. */
  memset(&counts, 0, sizeof(counts));
  c = server_client(&counts, NULL);
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, repo, data, sizeof(data), NULL),
                      NIMBLE_UNAUTHENTICATED, "401");
  nimble_store_client_destroy(c);
}
END_TEST

/* A client whose traffic goes through a tcp_cutter in front of the server. */
static nimble_store_client *cut_client(tcp_cutter *t, counts_t *counts, size_t chunk) {
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", tcp_cutter_port(t));
  nimble_store_client_options_t o = {.base_url = url, .token = server_token,
                                     .chunk_size = chunk, .backoff_base_ms = 20,
                                     .on_event = count_event, .event_user = counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  return c;
}

static int server_port(void) {
  const char *colon = strrchr(server_url, ':');
  return colon ? atoi(colon + 1) : -1;
}

/* Where the server can say how much of the cut chunk it holds (nimble-store),
 * the upload goes on from there; where it cannot (CNCF distribution signs
 * the offset into the upload URL, and a part-written chunk invalidates it),
 * the client starts a new session. Either way the blob arrives whole. */
START_TEST(test_chunked_upload_cut_mid_chunk_recovers_and_completes) {
  size_t n = (3u << 20) + 5;
  uint8_t *data = malloc(n);
  fill_random(data, n);
  /* Cut the connection half-way through the second PATCH body. */
  tcp_cutter *t = tcp_cutter_start(server_port(), (3 << 19), -1);
  ck_assert_ptr_nonnull(t);
  counts_t counts = {0};
  nimble_store_client *c = cut_client(t, &counts, 1u << 20);
  char repo[128];
  repo_name(repo, sizeof(repo), "resume-up");
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, n, &d));
  expect_digest(&d, data, n);
  /* curl itself resends a request whose reused connection died, so how
   * the recovery went (resend, resync, new session) varies; that it
   * happened and that the blob is whole does not. */
  ck_assert_int_eq(tcp_cutter_cuts(t), 1);
  ck_assert_int_ge(counts.patch, 4);
  nimble_store_client_destroy(c);
  tcp_cutter_stop(t);

  /* Straight from the server: the blob is whole. */
  counts_t direct = {0};
  c = server_client(&direct, server_token);
  uint8_t *back = NULL;
  size_t back_n = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, repo, &d, &back, &back_n));
  ck_assert_uint_eq(back_n, n);
  ck_assert(memcmp(back, data, n) == 0);
  free(back);
  free(data);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_download_cut_mid_body_resumes_with_range_against_the_server) {
  size_t n = 2u << 20;
  uint8_t *data = malloc(n);
  fill_random(data, n);
  counts_t counts = {0};
  nimble_store_client *c = server_client(&counts, server_token);
  char repo[128];
  repo_name(repo, sizeof(repo), "resume-down");
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, repo, data, n, &d));
  nimble_store_client_destroy(c);

  tcp_cutter *t = tcp_cutter_start(server_port(), -1, 700000);
  memset(&counts, 0, sizeof(counts));
  c = cut_client(t, &counts, 0);
  char *dir = make_temp_dir();
  char path[4096];
  snprintf(path, sizeof(path), "%s/blob", dir);
  NIMBLE_ASSERT_OK(nimble_store_pull_blob_to_file(c, repo, &d, path));
  ck_assert_int_eq(tcp_cutter_cuts(t), 1);
  ck_assert_int_eq(counts.range_gets, 1);
  ck_assert_int_eq(strncmp(counts.last_range, "bytes=", 6), 0);
  size_t got_n = 0;
  char *got = read_file(path, &got_n);
  ck_assert_uint_eq(got_n, n);
  ck_assert(memcmp(got, data, n) == 0);
  ck_assert_int_eq(dir_entries(dir), 1);
  free(got);
  remove_dir(dir);
  free(dir);
  free(data);
  nimble_store_client_destroy(c);
  tcp_cutter_stop(t);
}
END_TEST

/* ---- against the scripted peer ---------------------------------------- */

static nimble_store_client *peer_client(http_peer *p, counts_t *counts, int max_attempts) {
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_peer_port(p));
  nimble_store_client_options_t o = {.base_url = url, .max_attempts = max_attempts,
                                     .backoff_base_ms = 40, .backoff_max_ms = 400,
                                     .on_event = count_event, .event_user = counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  return c;
}

START_TEST(test_tampered_blob_is_data_loss_and_leaves_no_file) {
  uint8_t good[5000], bad[5000];
  fill_random(good, sizeof(good));
  memcpy(bad, good, sizeof(bad));
  bad[4321] ^= 0x01;
  nimble_digest_t d;
  nimble_digest_compute(good, sizeof(good), &d);
  char want[72];
  sodium_digest_text(good, sizeof(good), want);
  peer_response_t script[] = {{.status = 200, .body = bad, .body_len = sizeof(bad),
                               .declared_length = -1, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  ck_assert_ptr_nonnull(p);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n), NIMBLE_DATA_LOSS, want);
  ck_assert_ptr_null(bytes);
  ck_assert_int_eq(counts.retries, 0);

  char *dir = make_temp_dir();
  char path[4096];
  snprintf(path, sizeof(path), "%s/blob", dir);
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob_to_file(c, "models/x", &d, path), NIMBLE_DATA_LOSS,
                      "content has digest");
  ck_assert_int_eq(dir_entries(dir), 0);
  remove_dir(dir);
  free(dir);

  /* A manifest asked for by digest is checked the same way. */
  char dtext[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, dtext);
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(c, "models/x", dtext, &bytes, &n, NULL, NULL),
                      NIMBLE_DATA_LOSS, want);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_manifest_not_matching_its_docker_content_digest_is_data_loss) {
  const char *body = "{\"schemaVersion\":2}";
  peer_response_t script[] = {
      {.status = 200, .body = body, .body_len = strlen(body), .declared_length = -1, .cut_after = -1,
       .headers = "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n"
                  "Docker-Content-Digest: sha256:"
                  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(c, "models/x", "v1", &bytes, &n, NULL, NULL),
                      NIMBLE_DATA_LOSS, "expected sha256:e3b0c442");
  ck_assert_ptr_null(bytes);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_download_cut_mid_body_resumes_with_range) {
  size_t n = 3u << 20;
  uint8_t *blob = malloc(n);
  fill_random(blob, n);
  nimble_digest_t d;
  nimble_digest_compute(blob, n, &d);
  long long cut = 1234567;
  peer_response_t script[] = {
      {.status = 200, .body = blob, .body_len = n, .declared_length = -1, .cut_after = cut},
      {.status = 200, .body = blob, .body_len = n, .declared_length = -1, .cut_after = -1,
       .honor_range = 1},
  };
  for (int to_file = 0; to_file <= 1; to_file++) {
    http_peer *p = http_peer_start(script, 2);
    counts_t counts = {0};
    nimble_store_client *c = peer_client(p, &counts, 3);
    char *dir = make_temp_dir();
    char path[4096];
    snprintf(path, sizeof(path), "%s/blob", dir);
    uint8_t *bytes = NULL;
    size_t got = 0;
    if (to_file) {
      NIMBLE_ASSERT_OK(nimble_store_pull_blob_to_file(c, "models/x", &d, path));
      bytes = (uint8_t *)read_file(path, &got);
    } else {
      NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got));
    }
    ck_assert_uint_eq(got, n);
    ck_assert(memcmp(bytes, blob, n) == 0);
    free(bytes);
    ck_assert_int_eq(http_peer_request_count(p), 2);
    ck_assert_str_eq(http_peer_request(p, 0)->range, "");
    ck_assert_str_eq(http_peer_request(p, 1)->range, "bytes=1234567-");
    ck_assert_int_eq(counts.failed_transfers, 1);
    ck_assert_int_eq(dir_entries(dir), to_file);
    remove_dir(dir);
    free(dir);
    nimble_store_client_destroy(c);
    http_peer_stop(p);
  }
  free(blob);
}
END_TEST

START_TEST(test_server_ignoring_range_restarts_the_hash) {
  /* After the cut the server answers 200 with the whole body again: the
   * client must start over, not append. */
  size_t n = 600000;
  uint8_t *blob = malloc(n);
  fill_random(blob, n);
  nimble_digest_t d;
  nimble_digest_compute(blob, n, &d);
  peer_response_t script[] = {
      {.status = 200, .body = blob, .body_len = n, .declared_length = -1, .cut_after = 100000},
      {.status = 200, .body = blob, .body_len = n, .declared_length = -1, .cut_after = -1},
  };
  http_peer *p = http_peer_start(script, 2);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t got = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got));
  ck_assert_uint_eq(got, n);
  ck_assert(memcmp(bytes, blob, n) == 0);
  ck_assert_str_eq(http_peer_request(p, 1)->range, "bytes=100000-");
  free(bytes);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
  free(blob);
}
END_TEST

START_TEST(test_503_twice_then_200_is_retried_with_backoff) {
  uint8_t blob[1000];
  fill_random(blob, sizeof(blob));
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  const char *busy = "{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"try later\"}]}";
  peer_response_t script[] = {
      {.status = 503, .body = busy, .body_len = strlen(busy), .declared_length = -1, .cut_after = -1},
      {.status = 503, .body = busy, .body_len = strlen(busy), .declared_length = -1, .cut_after = -1},
      {.status = 200, .body = blob, .body_len = sizeof(blob), .declared_length = -1, .cut_after = -1},
  };
  http_peer *p = http_peer_start(script, 3);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 5);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint8_t *bytes = NULL;
  size_t got = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ck_assert_uint_eq(got, sizeof(blob));
  ck_assert(memcmp(bytes, blob, got) == 0);
  free(bytes);
  ck_assert_int_eq(http_peer_request_count(p), 3);
  ck_assert_int_eq(counts.retries, 2);
  /* Backoff: base 40 ms then 80 ms, each with jitter in [half, full]. */
  ck_assert_int_ge(counts.min_delay_ms, 20);
  ck_assert_int_ge(counts.delay_total_ms, 20 + 40);
  ck_assert_int_le(counts.delay_total_ms, 40 + 80);
  long elapsed = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  ck_assert_int_ge(elapsed, counts.delay_total_ms);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_persistent_503_gives_unavailable_after_bounded_attempts) {
  const char *busy = "{\"errors\":[{\"code\":\"UNAVAILABLE\",\"message\":\"overloaded\"}]}";
  peer_response_t script[] = {{.status = 503, .body = busy, .body_len = strlen(busy),
                               .declared_length = -1, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 4);
  nimble_digest_t d;
  nimble_digest_compute("x", 1, &d);
  uint8_t *bytes = NULL;
  size_t got = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got), NIMBLE_UNAVAILABLE,
                      "HTTP 503 UNAVAILABLE: overloaded (after 4 attempts)");
  ck_assert_int_eq(http_peer_request_count(p), 4);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_4xx_other_than_429_is_not_retried) {
  const char *denied = "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"no pulls for you\"}]}";
  peer_response_t script[] = {{.status = 403, .body = denied, .body_len = strlen(denied),
                               .declared_length = -1, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 5);
  nimble_digest_t d;
  nimble_digest_compute("x", 1, &d);
  uint8_t *bytes = NULL;
  size_t got = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got),
                      NIMBLE_PERMISSION_DENIED, "HTTP 403 DENIED: no pulls for you");
  ck_assert_int_eq(http_peer_request_count(p), 1);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_429_is_retried) {
  uint8_t blob[10] = "0123456789";
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  peer_response_t script[] = {
      {.status = 429, .declared_length = -1, .cut_after = -1},
      {.status = 200, .body = blob, .body_len = sizeof(blob), .declared_length = -1, .cut_after = -1},
  };
  http_peer *p = http_peer_start(script, 2);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t got = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, "models/x", &d, &bytes, &got));
  ck_assert_int_eq(counts.retries, 1);
  free(bytes);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_connection_refused_is_unavailable_after_bounded_retries) {
  int port = http_peer_unused_port();
  ck_assert_int_gt(port, 0);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
  counts_t counts = {0};
  nimble_store_client_options_t o = {.base_url = url, .max_attempts = 3, .backoff_base_ms = 10,
                                     .on_event = count_event, .event_user = &counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  uint8_t data[16] = {0};
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL),
                      NIMBLE_UNAVAILABLE, "(after 3 attempts)");
  ck_assert_int_eq(counts.head, 3);
  ck_assert_int_eq(counts.failed_transfers, 3);
  ck_assert_int_eq(counts.retries, 2);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_retry_budget_bounds_total_time) {
  int port = http_peer_unused_port();
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
  counts_t counts = {0};
  /* Many attempts allowed, but at most ~300 ms of retrying. */
  nimble_store_client_options_t o = {.base_url = url, .max_attempts = 100, .backoff_base_ms = 100,
                                     .backoff_max_ms = 200, .retry_budget_ms = 300,
                                     .on_event = count_event, .event_user = &counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  nimble_digest_t d;
  nimble_digest_compute("x", 1, &d);
  int exists = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_blob_exists(c, "models/x", &d, &exists, NULL),
                      NIMBLE_UNAVAILABLE, "HEAD http://127.0.0.1:");
  ck_assert_int_le(counts.delay_total_ms, 300);
  ck_assert_int_lt(counts.head, 10);
  nimble_store_client_destroy(c);
}
END_TEST

START_TEST(test_chunked_upload_resumes_at_the_offset_the_server_reports) {
  /* 300 bytes in chunks of 100; the second PATCH fails (503) after the
   * server kept 50 of its bytes, as GET on the upload URL then reports. */
  uint8_t data[300];
  fill_random(data, sizeof(data));
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH 0-99 */
       .headers = "Location: /v2/models/x/blobs/uploads/u1?s=1\r\nRange: 0-99\r\n"},
      {.status = 503, .declared_length = -1, .cut_after = -1},                  /* PATCH 100-199 */
      {.status = 204, .declared_length = -1, .cut_after = -1,                   /* GET status */
       .headers = "Location: /v2/models/x/blobs/uploads/u1?s=2\r\nRange: 0-149\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH 150-249 */
       .headers = "Location: /v2/models/x/blobs/uploads/u1?s=3\r\nRange: 0-249\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH 250-299 */
       .headers = "Location: /v2/models/x/blobs/uploads/u1?s=4\r\nRange: 0-299\r\n"},
      {.status = 201, .declared_length = -1, .cut_after = -1},                  /* PUT */
  };
  http_peer *p = http_peer_start(script, 8);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_peer_port(p));
  counts_t counts = {0};
  nimble_store_client_options_t o = {.base_url = url, .chunk_size = 100, .backoff_base_ms = 10,
                                     .on_event = count_event, .event_user = &counts};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL));
  ck_assert_int_eq(http_peer_request_count(p), 8);
  ck_assert_str_eq(http_peer_request(p, 2)->content_range, "0-99");
  ck_assert_str_eq(http_peer_request(p, 3)->content_range, "100-199");
  ck_assert_str_eq(http_peer_request(p, 4)->method, "GET");
  ck_assert_str_eq(http_peer_request(p, 4)->path, "/v2/models/x/blobs/uploads/u1?s=1");
  ck_assert_str_eq(http_peer_request(p, 5)->content_range, "150-249");
  ck_assert_str_eq(http_peer_request(p, 5)->path, "/v2/models/x/blobs/uploads/u1?s=2");
  ck_assert_uint_eq(http_peer_request(p, 5)->body_len, 100);
  ck_assert_str_eq(http_peer_request(p, 6)->content_range, "250-299");
  ck_assert_uint_eq(http_peer_request(p, 6)->body_len, 50);
  char want[72];
  sodium_digest_text(data, sizeof(data), want);
  char want_path[160];
  snprintf(want_path, sizeof(want_path), "/v2/models/x/blobs/uploads/u1?s=4&digest=sha256%%3A%s",
           want + 7);
  ck_assert_str_eq(http_peer_request(p, 7)->path, want_path);
  ck_assert_uint_eq(http_peer_request(p, 7)->body_len, 0);
  ck_assert_int_eq(counts.retries, 1);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_put_answered_409_in_use_looks_for_the_blob_and_starts_over) {
  /* The store answers 409 "in use by another request" to a PUT while it
   * still runs the handler of an earlier PUT on the session whose
   * connection died (found by tests/scheduler/fault_injection.c's network
   * cuts: a worker's push failed the job). First push: the earlier PUT did
   * commit, so the HEAD after the backoff finds the blob. Second push: it
   * did not, so a new session carries the blob. */
  uint8_t data[64];
  fill_random(data, sizeof(data));
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\n"},
      {.status = 409, .declared_length = -1, .cut_after = -1},                  /* PUT */
      {.status = 200, .declared_length = -1, .cut_after = -1},                  /* HEAD: there */
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\n"},
      {.status = 409, .declared_length = -1, .cut_after = -1},                  /* PUT */
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD: absent */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u3\r\n"},
      {.status = 201, .declared_length = -1, .cut_after = -1},                  /* PUT */
  };
  http_peer *p = http_peer_start(script, 10);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 5);
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL));
  ck_assert_int_eq(http_peer_request_count(p), 4);
  ck_assert_str_eq(http_peer_request(p, 3)->method, "HEAD");
  data[0] ^= 1; /* another blob */
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL));
  ck_assert_int_eq(http_peer_request_count(p), 10);
  ck_assert_str_eq(http_peer_request(p, 7)->method, "HEAD");
  ck_assert_str_eq(http_peer_request(p, 8)->method, "POST");
  ck_assert_msg(strncmp(http_peer_request(p, 9)->path, "/v2/models/x/blobs/uploads/u3?", 30) == 0,
                "final PUT went to %s", http_peer_request(p, 9)->path);
  ck_assert_uint_eq(http_peer_request(p, 9)->body_len, sizeof(data));
  ck_assert_int_eq(counts.retries, 2);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_put_answered_digest_invalid_starts_a_new_session) {
  /* A network cut mid-PUT: libcurl resent the PUT on a fresh connection and
   * the store's session held the cut copy before the whole one, so the
   * commit found other bytes (found by tests/scheduler/fault_injection.c's
   * network cuts). We hashed what we send: a new session carries it. */
  uint8_t data[64];
  fill_random(data, sizeof(data));
  static const char spoiled[] =
      "{\"errors\":[{\"code\":\"DIGEST_INVALID\",\"message\":\"digest mismatch\"}]}";
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\n"},
      {.status = 400, .declared_length = -1, .cut_after = -1, .body = spoiled,  /* PUT */
       .body_len = sizeof(spoiled) - 1, .headers = "Content-Type: application/json\r\n"},
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\n"},
      {.status = 201, .declared_length = -1, .cut_after = -1},                  /* PUT */
      /* A 400 that is not about the digest is the caller's error. */
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u3\r\n"},
      {.status = 400, .declared_length = -1, .cut_after = -1},                  /* PUT */
  };
  http_peer *p = http_peer_start(script, 9);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 5);
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL));
  ck_assert_int_eq(http_peer_request_count(p), 6);
  ck_assert_msg(strncmp(http_peer_request(p, 5)->path, "/v2/models/x/blobs/uploads/u2?", 30) == 0,
                "final PUT went to %s", http_peer_request(p, 5)->path);
  ck_assert_uint_eq(http_peer_request(p, 5)->body_len, sizeof(data));
  data[0] ^= 1;
  nimble_status_t st = nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL);
  ck_assert_msg(st != NULL, "a plain 400 was taken for success");
  ck_assert_msg(strstr(nimble_status_message(st), "HTTP 400") != NULL, "%s",
                nimble_status_message(st));
  nimble_status_free(st);
  ck_assert_int_eq(http_peer_request_count(p), 9);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_chunked_upload_whose_commit_answer_is_lost_starts_over_when_the_blob_is_absent) {
  /* The store was SIGKILLed during the final PUT and restarted, which
   * clears its sessions (found by tests/scheduler/fault_injection.c's store
   * kills: the push gave up). HEAD says the blob is not there, so the whole
   * upload runs again in a new session. */
  uint8_t data[300];
  fill_random(data, sizeof(data));
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\nRange: 0-99\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\nRange: 0-199\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\nRange: 0-299\r\n"},
      {.status = 503, .declared_length = -1, .cut_after = -1},                  /* PUT */
      {.status = 404, .declared_length = -1, .cut_after = -1},                  /* HEAD */
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* POST */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\nRange: 0-99\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\nRange: 0-199\r\n"},
      {.status = 202, .declared_length = -1, .cut_after = -1,                   /* PATCH */
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\nRange: 0-299\r\n"},
      {.status = 201, .declared_length = -1, .cut_after = -1},                  /* PUT */
  };
  http_peer *p = http_peer_start(script, 12);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_peer_port(p));
  nimble_store_client_options_t o = {.base_url = url, .chunk_size = 100, .backoff_base_ms = 10};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL));
  ck_assert_int_eq(http_peer_request_count(p), 12);
  ck_assert_str_eq(http_peer_request(p, 6)->method, "HEAD");
  ck_assert_str_eq(http_peer_request(p, 7)->method, "POST");
  ck_assert_str_eq(http_peer_request(p, 8)->content_range, "0-99");
  ck_assert_str_eq(http_peer_request(p, 10)->content_range, "200-299");
  ck_assert_msg(strncmp(http_peer_request(p, 11)->path, "/v2/models/x/blobs/uploads/u2?", 30) == 0,
                "final PUT went to %s", http_peer_request(p, 11)->path);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_location_to_another_host_is_refused) {
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},   /* HEAD: not there */
      {.status = 202, .declared_length = -1, .cut_after = -1,   /* POST: go elsewhere */
       .headers = "Location: http://198.51.100.7:5000/v2/models/x/blobs/uploads/abc\r\n"},
  };
  http_peer *p = http_peer_start(script, 2);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t data[16] = {1};
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "models/x", data, sizeof(data), NULL),
                      NIMBLE_PERMISSION_DENIED, "leaves the store's origin");
  ck_assert_int_eq(http_peer_request_count(p), 2);
  ck_assert_int_eq(total_requests(&counts), 2);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_relative_and_same_origin_absolute_locations_are_followed) {
  /* First push: a rooted relative Location; second: an absolute one on the
   * store's own origin (what docker-registry sends). */
  char abs_loc[200];
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},
      {.status = 202, .declared_length = -1, .cut_after = -1,
       .headers = "Location: /v2/models/x/blobs/uploads/u1?_state=abc\r\n"},
      {.status = 201, .declared_length = -1, .cut_after = -1},
      {.status = 404, .declared_length = -1, .cut_after = -1},
      {.status = 202, .declared_length = -1, .cut_after = -1, .headers = abs_loc},
      {.status = 201, .declared_length = -1, .cut_after = -1},
  };
  http_peer *p = http_peer_start(script, 6);
  snprintf(abs_loc, sizeof(abs_loc), "Location: http://127.0.0.1:%d/v2/models/x/blobs/uploads/u2\r\n",
           http_peer_port(p));
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", "abc", 3, NULL));
  NIMBLE_ASSERT_OK(nimble_store_push_blob(c, "models/x", "x", 1, NULL));
  ck_assert_int_eq(http_peer_request_count(p), 6);
  const peer_request_t *put = http_peer_request(p, 2);
  ck_assert_str_eq(put->method, "PUT");
  ck_assert_str_eq(put->path,
                   "/v2/models/x/blobs/uploads/u1?_state=abc&digest=sha256%3A"
                   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ck_assert_uint_eq(put->body_len, 3);
  put = http_peer_request(p, 5);
  ck_assert_str_eq(put->path,
                   "/v2/models/x/blobs/uploads/u2?digest=sha256%3A"
                   "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881");
  ck_assert_uint_eq(put->body_len, 1);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_blob_redirect_is_followed_within_the_origin_only) {
  uint8_t blob[777];
  fill_random(blob, sizeof(blob));
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  peer_response_t script[] = {
      {.status = 307, .declared_length = -1, .cut_after = -1,
       .headers = "Location: /objects/blob-777\r\n"},
      {.status = 200, .body = blob, .body_len = sizeof(blob), .declared_length = -1,
       .cut_after = -1},
      {.status = 307, .declared_length = -1, .cut_after = -1,
       .headers = "Location: http://203.0.113.9/objects/blob-777\r\n"},
  };
  http_peer *p = http_peer_start(script, 3);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n));
  ck_assert_uint_eq(n, sizeof(blob));
  ck_assert(memcmp(bytes, blob, n) == 0);
  free(bytes);
  ck_assert_str_eq(http_peer_request(p, 1)->path, "/objects/blob-777");
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n),
                      NIMBLE_PERMISSION_DENIED, "leaves the store's origin");
  ck_assert_int_eq(http_peer_request_count(p), 3);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_truncated_body_without_resume_support_is_data_loss) {
  /* Every answer is cut at the same byte and Range is ignored: the client
   * gives up after its attempts and says what it got. */
  static uint8_t blob[200000];
  fill_random(blob, sizeof(blob));
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  peer_response_t script[] = {{.status = 200, .body = blob, .body_len = sizeof(blob),
                               .declared_length = -1, .cut_after = 50000}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n), NIMBLE_DATA_LOSS,
                      "(after 3 attempts)");
  ck_assert_ptr_null(bytes);
  /* The first answer brought 50000 new bytes, which restarts the streak;
   * the next three (Range ignored, the same 50000 again) brought none. */
  ck_assert_int_eq(http_peer_request_count(p), 4);
  ck_assert_str_eq(http_peer_request(p, 1)->range, "bytes=50000-");
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_a_peer_trickling_bytes_is_given_up_on) {
  /* Each answer honours Range but stops after 10 bytes: progress every
   * time, yet the download must end. */
  static uint8_t blob[100000];
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  peer_response_t script[] = {{.status = 200, .body = blob, .body_len = sizeof(blob),
                               .declared_length = -1, .cut_after = 10, .honor_range = 1}};
  http_peer *p = http_peer_start(script, 1);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_peer_port(p));
  nimble_store_client_options_t o = {.base_url = url, .backoff_base_ms = 1, .backoff_max_ms = 2};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n), NIMBLE_DATA_LOSS,
                      "gave up after 100 interrupted transfers (1010 bytes received)");
  ck_assert_int_eq(http_peer_request_count(p), 101);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_tag_list_follows_next_links_within_the_origin) {
  const char *page1 = "{\"name\":\"models/x\",\"tags\":[\"a\",\"b\"]}";
  const char *page2 = "{\"name\":\"models/x\",\"tags\":[\"c\"]}";
  const char *page3 = "{\"name\":\"models/x\",\"tags\":[\"d\"]}";
  peer_response_t script[] = {
      {.status = 200, .body = page1, .body_len = strlen(page1), .declared_length = -1,
       .cut_after = -1,
       .headers = "Link: </v2/models/x/tags/list?n=2&last=b>; rel=\"next\"\r\n"},
      {.status = 200, .body = page2, .body_len = strlen(page2), .declared_length = -1,
       .cut_after = -1},
      /* Second listing: the next page is on another host. */
      {.status = 200, .body = page3, .body_len = strlen(page3), .declared_length = -1,
       .cut_after = -1,
       .headers = "Link: <http://203.0.113.9/v2/models/x/tags/list?last=d>; rel=\"next\"\r\n"},
  };
  http_peer *p = http_peer_start(script, 3);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  char **tags = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_store_list_tags(c, "models/x", &tags, &n));
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(tags[0], "a");
  ck_assert_str_eq(tags[1], "b");
  ck_assert_str_eq(tags[2], "c");
  nimble_store_tags_free(tags, n);
  ck_assert_str_eq(http_peer_request(p, 1)->path, "/v2/models/x/tags/list?n=2&last=b");
  NIMBLE_ASSERT_ERROR(nimble_store_list_tags(c, "models/x", &tags, &n), NIMBLE_PERMISSION_DENIED,
                      "leaves the store's origin");
  ck_assert_ptr_null(tags);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_server_rejecting_the_digest_is_data_loss) {
  const char *bad = "{\"errors\":[{\"code\":\"DIGEST_INVALID\",\"message\":\"provided digest "
                    "did not match uploaded content\"}]}";
  /* Once may be a network cut (test_put_answered_digest_invalid_starts_a_new_session);
   * twice, in two sessions, is the store. */
  peer_response_t script[] = {
      {.status = 404, .declared_length = -1, .cut_after = -1},
      {.status = 202, .declared_length = -1, .cut_after = -1,
       .headers = "Location: /v2/models/x/blobs/uploads/u1\r\n"},
      {.status = 400, .body = bad, .body_len = strlen(bad), .declared_length = -1,
       .cut_after = -1},
      {.status = 404, .declared_length = -1, .cut_after = -1},
      {.status = 202, .declared_length = -1, .cut_after = -1,
       .headers = "Location: /v2/models/x/blobs/uploads/u2\r\n"},
      {.status = 400, .body = bad, .body_len = strlen(bad), .declared_length = -1,
       .cut_after = -1},
  };
  http_peer *p = http_peer_start(script, 6);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 5);
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "models/x", "abc", 3, NULL), NIMBLE_DATA_LOSS,
                      "HTTP 400 DIGEST_INVALID: provided digest did not match");
  ck_assert_int_eq(http_peer_request_count(p), 6);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_error_body_control_characters_are_not_echoed) {
  const char *evil = "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"line1\\nFAKE: line2\"}]}";
  peer_response_t script[] = {{.status = 403, .body = evil, .body_len = strlen(evil),
                               .declared_length = -1, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  nimble_digest_t d;
  nimble_digest_compute("x", 1, &d);
  int exists = 0;
  nimble_status_t s = nimble_store_blob_exists(c, "models/x", &d, &exists, NULL);
  /* HEAD has no body: the code comes from the status alone. */
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_PERMISSION_DENIED);
  nimble_status_free(s);
  uint8_t *bytes = NULL;
  size_t n = 0;
  s = nimble_store_pull_blob(c, "models/x", &d, &bytes, &n);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_PERMISSION_DENIED);
  ck_assert_ptr_nonnull(strstr(nimble_status_message(s), "DENIED: line1 FAKE: line2"));
  ck_assert_ptr_null(strchr(nimble_status_message(s), '\n'));
  nimble_status_free(s);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_oversized_manifest_is_refused_before_download) {
  const char small[] = "{}";
  peer_response_t script[] = {{.status = 200, .body = small, .body_len = 2,
                               .declared_length = 10 << 20, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  counts_t counts = {0};
  nimble_store_client *c = peer_client(p, &counts, 3);
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(c, "models/x", "v1", &bytes, &n, NULL, NULL),
                      NIMBLE_RESOURCE_EXHAUSTED, "4194304-byte cap");
  ck_assert_int_eq(counts.retries, 0);
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_blob_over_the_memory_cap_is_refused) {
  static uint8_t blob[4096];
  nimble_digest_t d;
  nimble_digest_compute(blob, sizeof(blob), &d);
  peer_response_t script[] = {{.status = 200, .body = blob, .body_len = sizeof(blob),
                               .declared_length = -1, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_peer_port(p));
  nimble_store_client_options_t o = {.base_url = url, .max_blob_size = 1000};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_blob(c, "models/x", &d, &bytes, &n),
                      NIMBLE_RESOURCE_EXHAUSTED, "4096 bytes, over the 1000-byte cap");
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_token_is_sent_as_bearer_header) {
  peer_response_t script[] = {{.status = 200, .declared_length = 0, .cut_after = -1}};
  http_peer *p = http_peer_start(script, 1);
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/", http_peer_port(p));
  nimble_store_client_options_t o = {.base_url = url, .token = "s3cret"};
  nimble_store_client *c = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  nimble_digest_t d;
  nimble_digest_compute("x", 1, &d);
  int exists = 0;
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(c, "models/x", &d, &exists, NULL));
  ck_assert_int_eq(exists, 1);
  ck_assert_str_eq(http_peer_request(p, 0)->authorization, "Bearer s3cret");
  /* The trailing slash of the base URL does not double. */
  ck_assert_str_eq(http_peer_request(p, 0)->path,
                   "/v2/models/x/blobs/sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881");
  nimble_store_client_destroy(c);
  http_peer_stop(p);
}
END_TEST

START_TEST(test_bad_names_and_options_are_invalid_arguments) {
  nimble_store_client *c = NULL;
  nimble_store_client_options_t o = {.base_url = "ftp://127.0.0.1:1"};
  NIMBLE_ASSERT_ERROR(nimble_store_client_create(&o, &c), NIMBLE_INVALID_ARGUMENT, "http://");
  o.base_url = "http://";
  NIMBLE_ASSERT_ERROR(nimble_store_client_create(&o, &c), NIMBLE_INVALID_ARGUMENT, "no host");
  o.base_url = "http://127.0.0.1:1";
  o.token = "two words";
  NIMBLE_ASSERT_ERROR(nimble_store_client_create(&o, &c), NIMBLE_INVALID_ARGUMENT, "character 3");
  o.token = NULL;
  NIMBLE_ASSERT_OK(nimble_store_client_create(&o, &c));
  uint8_t data[1] = {0};
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "Models/x", data, 1, NULL), NIMBLE_INVALID_ARGUMENT,
                      "character 0 (0x4d)");
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "models//x", data, 1, NULL), NIMBLE_INVALID_ARGUMENT,
                      "character 7");
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "models/", data, 1, NULL), NIMBLE_INVALID_ARGUMENT,
                      "ends with a separator");
  NIMBLE_ASSERT_ERROR(nimble_store_push_blob(c, "../etc", data, 1, NULL), NIMBLE_INVALID_ARGUMENT,
                      "character 0");
  NIMBLE_ASSERT_ERROR(nimble_store_push_manifest(c, "models/x", "-v1", "{}", 2, OCI_MANIFEST, NULL),
                      NIMBLE_INVALID_ARGUMENT, "tag '-v1': character 0");
  NIMBLE_ASSERT_ERROR(nimble_store_push_manifest(c, "models/x", "v1", "{}", 2,
                                                 "text/plain\r\nX-Evil: 1", NULL),
                      NIMBLE_INVALID_ARGUMENT, "character 10 (0x0d)");
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(c, "models/x", "sha256:abc", &bytes, &n, NULL, NULL),
                      NIMBLE_INVALID_ARGUMENT, "64 hex digits");
  nimble_store_client_destroy(c);
}
END_TEST

int main(void) {
  if (sodium_init() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("store_client");
  if (load_server()) {
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_blob_round_trip_matches_independent_sha256);
    tcase_add_test(tc, test_push_is_skipped_when_the_blob_is_present);
    tcase_add_test(tc, test_chunked_upload_of_a_several_mib_blob_round_trips);
    tcase_add_test(tc, test_push_from_a_file_streams_and_round_trips);
    tcase_add_test(tc, test_manifest_pushed_by_tag_pulls_byte_exact_by_tag_and_digest);
    tcase_add_test(tc, test_manifest_pushed_by_digest_pulls_by_digest);
    tcase_add_test(tc, test_unknown_blob_and_manifest_are_not_found);
    tcase_add_test(tc, test_manifest_naming_a_missing_blob_is_rejected);
    tcase_add_test(tc, test_chunked_upload_cut_mid_chunk_recovers_and_completes);
    tcase_add_test(tc, test_download_cut_mid_body_resumes_with_range_against_the_server);
    if (server_token || !strcmp(server_kind, "nimble-store"))
      tcase_add_test(tc, test_wrong_token_is_unauthenticated);
    suite_add_tcase(s, tc);
  } else {
    TCase *tc = tcase_create("peer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tampered_blob_is_data_loss_and_leaves_no_file);
    tcase_add_test(tc, test_manifest_not_matching_its_docker_content_digest_is_data_loss);
    tcase_add_test(tc, test_download_cut_mid_body_resumes_with_range);
    tcase_add_test(tc, test_server_ignoring_range_restarts_the_hash);
    tcase_add_test(tc, test_503_twice_then_200_is_retried_with_backoff);
    tcase_add_test(tc, test_persistent_503_gives_unavailable_after_bounded_attempts);
    tcase_add_test(tc, test_4xx_other_than_429_is_not_retried);
    tcase_add_test(tc, test_429_is_retried);
    tcase_add_test(tc, test_connection_refused_is_unavailable_after_bounded_retries);
    tcase_add_test(tc, test_retry_budget_bounds_total_time);
    tcase_add_test(tc, test_chunked_upload_resumes_at_the_offset_the_server_reports);
    tcase_add_test(tc, test_location_to_another_host_is_refused);
    tcase_add_test(tc, test_relative_and_same_origin_absolute_locations_are_followed);
    tcase_add_test(tc, test_blob_redirect_is_followed_within_the_origin_only);
    tcase_add_test(tc, test_truncated_body_without_resume_support_is_data_loss);
    tcase_add_test(tc, test_a_peer_trickling_bytes_is_given_up_on);
    tcase_add_test(tc, test_tag_list_follows_next_links_within_the_origin);
    tcase_add_test(tc, test_server_rejecting_the_digest_is_data_loss);
    tcase_add_test(tc, test_error_body_control_characters_are_not_echoed);
    tcase_add_test(tc, test_oversized_manifest_is_refused_before_download);
    tcase_add_test(tc, test_blob_over_the_memory_cap_is_refused);
    tcase_add_test(tc, test_token_is_sent_as_bearer_header);
    tcase_add_test(tc, test_put_answered_409_in_use_looks_for_the_blob_and_starts_over);
    tcase_add_test(tc, test_put_answered_digest_invalid_starts_a_new_session);
    tcase_add_test(tc, test_chunked_upload_whose_commit_answer_is_lost_starts_over_when_the_blob_is_absent);
    tcase_add_test(tc, test_bad_names_and_options_are_invalid_arguments);
    suite_add_tcase(s, tc);
  }
  return nimble_test_run(s);
}
