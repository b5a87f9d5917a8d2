/* The filesystem backend without HTTP: blobs, uploads, manifests, tags.
 * Expected digests are literals computed with sha256sum, or libsodium. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "nimble_test.h"
#include "store_harness.h"

#include "nimble/store_fs.h"

/* printf 'hello' | sha256sum */
#define HELLO_DIGEST "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define HELLO_PATH \
  "blobs/sha256/2c/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
/* printf 'world' | sha256sum */
#define WORLD_DIGEST "sha256:486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7"

static store_proc dir;
static nimble_store_fs *store;

static void setup(void) {
  ck_assert_int_eq(store_dir_create(&dir), 0);
  NIMBLE_ASSERT_OK(nimble_store_fs_create(dir.root, NULL, &store));
}

static void teardown(void) {
  nimble_store_fs_destroy(store);
  store = NULL;
  store_dir_remove(&dir);
}

static nimble_digest_t digest_of(const char *text) {
  nimble_digest_t d;
  nimble_status_t s = nimble_digest_parse(text, &d);
  ck_assert_ptr_null(s);
  return d;
}

static int exists(const char *rel) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir.root, rel);
  return access(path, F_OK) == 0;
}

static int files_under(const char *rel) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir.root, rel);
  return count_files(path);
}

START_TEST(test_blob_put_stores_at_its_digest_path) {
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, &d));
  char text[72];
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, HELLO_DIGEST);
  ck_assert(exists(HELLO_PATH));
  uint64_t size = 0;
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_stat(store, &d, &size));
  ck_assert_uint_eq(size, 5);
  int fd = -1;
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_open(store, &d, &fd, &size));
  char buf[8] = {0};
  ck_assert_int_eq(read(fd, buf, sizeof buf), 5);
  close(fd);
  ck_assert_str_eq(buf, "hello");
  ck_assert_int_eq(files_under("uploads"), 0);
}
END_TEST

START_TEST(test_blob_put_with_wrong_digest_stores_nothing) {
  nimble_digest_t want = digest_of(WORLD_DIGEST);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_blob_put(store, "hello", 5, &want, NULL), NIMBLE_DATA_LOSS,
                      "expected " WORLD_DIGEST ", content is " HELLO_DIGEST);
  ck_assert_int_eq(files_under("blobs"), 0);
  ck_assert_int_eq(files_under("uploads"), 0);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_blob_stat(store, &want, NULL), NIMBLE_NOT_FOUND,
                      "is not in the store");
}
END_TEST

START_TEST(test_chunked_upload_commits_to_the_blob) {
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(store, id));
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_id_check(id));
  nimble_store_upload_writer *w = NULL;
  uint64_t off = 99;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_open(store, id, &w, &off));
  ck_assert_uint_eq(off, 0);
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_write(w, "hel", 3));
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_close(w));
  uint64_t size = 0;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_size(store, id, &size));
  ck_assert_uint_eq(size, 3);
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_open(store, id, &w, &off));
  ck_assert_uint_eq(off, 3);
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_write(w, "lo", 2));
  ck_assert_uint_eq(nimble_store_upload_writer_offset(w), 5);
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_close(w));
  ck_assert(!exists(HELLO_PATH)); /* not visible before the commit */
  nimble_digest_t d = digest_of(HELLO_DIGEST);
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_commit(store, id, &d, &size));
  ck_assert_uint_eq(size, 5);
  ck_assert(exists(HELLO_PATH));
  ck_assert_int_eq(files_under("uploads"), 0);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_size(store, id, &size), NIMBLE_NOT_FOUND, id);
}
END_TEST

START_TEST(test_commit_with_wrong_digest_stores_nothing_and_ends_the_session) {
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(store, id));
  nimble_store_upload_writer *w = NULL;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_open(store, id, &w, NULL));
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_write(w, "hello", 5));
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_close(w));
  nimble_digest_t want = digest_of(WORLD_DIGEST);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_commit(store, id, &want, NULL), NIMBLE_DATA_LOSS,
                      "the 5 bytes uploaded hash to " HELLO_DIGEST);
  ck_assert_int_eq(files_under("blobs"), 0);
  ck_assert_int_eq(files_under("uploads"), 0);
}
END_TEST

START_TEST(test_a_session_has_one_writer_at_a_time) {
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(store, id));
  nimble_store_upload_writer *w = NULL, *w2 = NULL;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_open(store, id, &w, NULL));
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_open(store, id, &w2, NULL), NIMBLE_FAILED_PRECONDITION,
                      "in use by another request");
  nimble_digest_t d = digest_of(HELLO_DIGEST);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_commit(store, id, &d, NULL),
                      NIMBLE_FAILED_PRECONDITION, "in use");
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_close(w));
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_cancel(store, id));
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_cancel(store, id), NIMBLE_NOT_FOUND, "unknown");
}
END_TEST

START_TEST(test_upload_over_the_size_limit_is_refused_and_keeps_its_bytes) {
  nimble_store_fs *small = NULL;
  char root[400];
  snprintf(root, sizeof root, "%s/small", dir.dir);
  nimble_store_fs_options opt = {.max_blob_size = 8};
  NIMBLE_ASSERT_OK(nimble_store_fs_create(root, &opt, &small));
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(small, id));
  nimble_store_upload_writer *w = NULL;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_open(small, id, &w, NULL));
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_write(w, "hello", 5));
  NIMBLE_ASSERT_ERROR(nimble_store_upload_writer_write(w, "world", 5), NIMBLE_RESOURCE_EXHAUSTED,
                      "limit of 8 bytes");
  NIMBLE_ASSERT_ERROR(nimble_store_upload_writer_write(w, "x", SIZE_MAX), NIMBLE_RESOURCE_EXHAUSTED,
                      "limit");
  NIMBLE_ASSERT_OK(nimble_store_upload_writer_close(w));
  uint64_t size = 0;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_size(small, id, &size));
  ck_assert_uint_eq(size, 5);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_blob_put(small, "123456789", 9, NULL, NULL),
                      NIMBLE_RESOURCE_EXHAUSTED, "9 bytes exceeds the limit of 8");
  nimble_store_fs_destroy(small);
}
END_TEST

START_TEST(test_bad_upload_ids_are_refused_before_touching_files) {
  uint64_t size;
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_size(store, "../../etc/passwd", &size),
                      NIMBLE_INVALID_ARGUMENT, "32 hex digits");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_size(store, "0123456789abcdef0123456789abcdeF", &size),
                      NIMBLE_INVALID_ARGUMENT, "character 31");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_size(store, "0123456789abcdef0123456789abcdef", &size),
                      NIMBLE_NOT_FOUND, "unknown or has expired");
}
END_TEST

START_TEST(test_expiry_removes_idle_sessions_and_reopening_removes_all) {
  char old_id[NIMBLE_STORE_UPLOAD_ID_LEN + 1], new_id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(store, old_id));
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_start(store, new_id));
  char path[600];
  snprintf(path, sizeof path, "%s/uploads/%s", dir.root, old_id);
  struct utimbuf t = {.actime = time(NULL) - 7200, .modtime = time(NULL) - 7200};
  ck_assert_int_eq(utime(path, &t), 0);
  size_t removed = 0;
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_expire(store, 3600, &removed));
  ck_assert_uint_eq(removed, 1);
  uint64_t size;
  NIMBLE_ASSERT_ERROR(nimble_store_fs_upload_size(store, old_id, &size), NIMBLE_NOT_FOUND, old_id);
  NIMBLE_ASSERT_OK(nimble_store_fs_upload_size(store, new_id, &size));
  /* A restart (a new store object on the same root) drops every session. */
  nimble_store_fs_destroy(store);
  store = NULL;
  NIMBLE_ASSERT_OK(nimble_store_fs_create(dir.root, NULL, &store));
  ck_assert_int_eq(files_under("uploads"), 0);
}
END_TEST

typedef struct racer {
  nimble_store_fs *store;
  nimble_status_t status;
  const char *data;
  size_t len;
  nimble_digest_t digest;
} racer;

static void *race_upload(void *arg) {
  racer *r = arg;
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
  r->status = nimble_store_fs_upload_start(r->store, id);
  nimble_store_upload_writer *w = NULL;
  if (!r->status) r->status = nimble_store_fs_upload_open(r->store, id, &w, NULL);
  for (size_t off = 0; !r->status && off < r->len; off += 4096)
    r->status = nimble_store_upload_writer_write(w, r->data + off,
                                                 r->len - off < 4096 ? r->len - off : 4096);
  if (!r->status) r->status = nimble_store_upload_writer_close(w);
  if (!r->status) r->status = nimble_store_fs_upload_commit(r->store, id, &r->digest, NULL);
  return NULL;
}

START_TEST(test_identical_concurrent_uploads_store_one_blob) {
  size_t len = 1 << 20;
  char *data = malloc(len);
  for (size_t i = 0; i < len; i++) data[i] = (char)(i * 7 + 3);
  char want[72];
  test_sha256(data, len, want);
  racer r[6];
  pthread_t th[6];
  for (int i = 0; i < 6; i++) {
    r[i] = (racer){.store = store, .data = data, .len = len, .digest = digest_of(want)};
    pthread_create(&th[i], NULL, race_upload, &r[i]);
  }
  for (int i = 0; i < 6; i++) {
    pthread_join(th[i], NULL);
    NIMBLE_ASSERT_OK(r[i].status);
  }
  ck_assert_int_eq(files_under("blobs"), 1);
  ck_assert_int_eq(files_under("uploads"), 0);
  char path[600];
  snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", dir.root, want + 7, want + 7);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_size, (off_t)len);
  free(data);
}
END_TEST

/* A minimal OCI image manifest over the "hello" config and "world" layer. */
static const char *manifest_json =
    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
    "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":5,"
    "\"digest\":\"" HELLO_DIGEST
    "\"},"
    "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"size\":5,"
    "\"digest\":\"" WORLD_DIGEST "\"}]}";

START_TEST(test_manifest_round_trips_byte_exact_by_tag_and_digest) {
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, NULL));
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "world", 5, NULL, NULL));
  nimble_digest_t d;
  size_t len = strlen(manifest_json);
  NIMBLE_ASSERT_OK(nimble_store_fs_manifest_put(store, "models/m", "v1", NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                                manifest_json, len, &d));
  char want[72], got[72];
  test_sha256(manifest_json, len, want);
  nimble_digest_format(&d, got);
  ck_assert_str_eq(got, want);
  const char *refs[] = {"v1", want};
  for (int i = 0; i < 2; i++) {
    void *bytes = NULL;
    size_t n = 0;
    char *media = NULL;
    NIMBLE_ASSERT_OK(
        nimble_store_fs_manifest_get(store, "models/m", refs[i], &bytes, &n, &media, &d));
    ck_assert_uint_eq(n, len);
    ck_assert(memcmp(bytes, manifest_json, len) == 0);
    ck_assert_str_eq(media, NIMBLE_MEDIA_TYPE_OCI_MANIFEST);
    free(bytes);
    free(media);
  }
  char tagfile[600];
  snprintf(tagfile, sizeof tagfile, "%s/repositories/models/m/_manifests/tags/v1", dir.root);
  FILE *f = fopen(tagfile, "r");
  ck_assert_ptr_nonnull(f);
  char line[100] = {0};
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  fclose(f);
  char want_line[80];
  snprintf(want_line, sizeof want_line, "%s\n", want);
  ck_assert_str_eq(line, want_line);
}
END_TEST

START_TEST(test_manifest_with_a_missing_blob_is_refused) {
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, NULL));
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_put(store, "m", "v1", NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                                   manifest_json, strlen(manifest_json), NULL),
                      NIMBLE_NOT_FOUND, "layers[0] references a missing blob: blob " WORLD_DIGEST);
  ck_assert(!nimble_store_fs_repo_exists(store, "m"));
  char **tags;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_store_fs_tags_list(store, "m", &tags, &n), NIMBLE_NOT_FOUND,
                      "repository 'm' is unknown");
}
END_TEST

START_TEST(test_manifest_with_wrong_blob_size_is_refused) {
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, NULL));
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "worl", 4, NULL, NULL));
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "world!", 6, NULL, &d));
  const char *m =
      "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"x\",\"size\":5,\"digest\":\"" HELLO_DIGEST
      "\"},\"layers\":[{\"mediaType\":\"y\",\"size\":5,\"digest\":"
      "\"sha256:711e9609339e92b03ddc0a211827dba421f38f9ed8b9d806e1ffdd8c15ffa03d\"}]}";
  NIMBLE_ASSERT_ERROR(
      nimble_store_fs_manifest_put(store, "m", "v1", NIMBLE_MEDIA_TYPE_OCI_MANIFEST, m, strlen(m), NULL),
      NIMBLE_FAILED_PRECONDITION, "size 5, the stored blob has 6 bytes");
}
END_TEST

START_TEST(test_malformed_manifests_are_refused_naming_the_field) {
  struct {
    const char *json, *fragment;
    nimble_status_code_t code;
  } cases[] = {
      {"{", "not valid JSON", NIMBLE_INVALID_ARGUMENT},
      {"[]", "not a JSON object", NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":1}", "schemaVersion must be the integer 2", NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":2,\"layers\":[]}", "config is not a JSON object",
       NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"x\",\"size\":-1,\"digest\":\"" HELLO_DIGEST
       "\"},\"layers\":[]}",
       "config.size", NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":2,\"config\":{\"mediaType\":\"x\",\"size\":5,\"digest\":\"" HELLO_DIGEST
       "\"},\"layers\":[{\"mediaType\":\"y\",\"size\":1,\"digest\":\"sha256:abc\"}]}",
       "layers[0].digest", NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":2,\"schemaVersion\":2}", "duplicate", NIMBLE_INVALID_ARGUMENT},
      {"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\"}",
       "differs from the Content-Type", NIMBLE_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nimble_status_t s = nimble_store_fs_manifest_put(store, "m", "t", NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                                     cases[i].json, strlen(cases[i].json), NULL);
    ck_assert_msg(s && nimble_status_code(s) == cases[i].code &&
                      strstr(nimble_status_message(s), cases[i].fragment),
                  "case %zu: %s", i, nimble_status_message(s));
    nimble_status_free(s);
  }
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_put(store, "m", "t", "text/plain", "{}", 2, NULL),
                      NIMBLE_UNIMPLEMENTED, "unsupported manifest media type 'text/plain'");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_put(store, "../m", "t", NULL, "{}", 2, NULL),
                      NIMBLE_INVALID_ARGUMENT, "invalid repository name");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_put(store, "m", "bad/tag", NULL, "{}", 2, NULL),
                      NIMBLE_INVALID_ARGUMENT, "invalid tag");
  ck_assert(!nimble_store_fs_repo_exists(store, "m"));
}
END_TEST

START_TEST(test_manifest_over_4_mib_is_refused) {
  size_t len = NIMBLE_STORE_MANIFEST_MAX + 1;
  char *big = malloc(len);
  memset(big, ' ', len);
  NIMBLE_ASSERT_ERROR(
      nimble_store_fs_manifest_put(store, "m", "t", NIMBLE_MEDIA_TYPE_OCI_MANIFEST, big, len, NULL),
      NIMBLE_RESOURCE_EXHAUSTED, "4194305 bytes exceeds the limit of 4194304");
  free(big);
}
END_TEST

START_TEST(test_push_by_digest_checks_the_digest_and_index_needs_its_manifests) {
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, NULL));
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "world", 5, NULL, NULL));
  size_t len = strlen(manifest_json);
  char want[72];
  test_sha256(manifest_json, len, want);
  NIMBLE_ASSERT_ERROR(
      nimble_store_fs_manifest_put(store, "m", HELLO_DIGEST, NULL, manifest_json, len, NULL),
      NIMBLE_DATA_LOSS, want);
  /* No Content-Type: the manifest's own mediaType is used. */
  NIMBLE_ASSERT_OK(nimble_store_fs_manifest_put(store, "m", want, NULL, manifest_json, len, NULL));
  char **tags;
  size_t n = 99;
  NIMBLE_ASSERT_OK(nimble_store_fs_tags_list(store, "m", &tags, &n));
  ck_assert_uint_eq(n, 0);
  nimble_store_fs_tags_free(tags, n);

  char index[1024];
  snprintf(
      index, sizeof index,
      "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"size\":%zu,\"digest\":\"%s\"},"
      "{\"mediaType\":\"%s\",\"size\":5,\"digest\":\"" WORLD_DIGEST "\"}]}",
      NIMBLE_MEDIA_TYPE_OCI_MANIFEST, len, want, NIMBLE_MEDIA_TYPE_OCI_MANIFEST);
  NIMBLE_ASSERT_OK(nimble_store_fs_manifest_put(store, "m", "all", NIMBLE_MEDIA_TYPE_OCI_INDEX, index,
                                                strlen(index), NULL));
  snprintf(index, sizeof index,
           "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"size\":5,\"digest\":"
           "\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"}]}",
           NIMBLE_MEDIA_TYPE_OCI_MANIFEST);
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_put(store, "m", "none", NIMBLE_MEDIA_TYPE_OCI_INDEX,
                                                   index, strlen(index), NULL),
                      NIMBLE_NOT_FOUND, "manifests[0] references a missing blob");
}
END_TEST

START_TEST(test_tags_list_is_sorted_and_lookups_name_what_is_missing) {
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "hello", 5, NULL, NULL));
  NIMBLE_ASSERT_OK(nimble_store_fs_blob_put(store, "world", 5, NULL, NULL));
  const char *names[] = {"v2", "latest", "V1", "a.b"};
  for (int i = 0; i < 4; i++)
    NIMBLE_ASSERT_OK(nimble_store_fs_manifest_put(store, "r", names[i], NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
                                                  manifest_json, strlen(manifest_json), NULL));
  char **tags;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_fs_tags_list(store, "r", &tags, &n));
  ck_assert_uint_eq(n, 4);
  ck_assert_str_eq(tags[0], "V1");
  ck_assert_str_eq(tags[1], "a.b");
  ck_assert_str_eq(tags[2], "latest");
  ck_assert_str_eq(tags[3], "v2");
  nimble_store_fs_tags_free(tags, n);
  nimble_digest_t d;
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_resolve(store, "r", "v3", &d), NIMBLE_NOT_FOUND,
                      "tag 'v3' is unknown in repository 'r'");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_resolve(store, "r", HELLO_DIGEST, &d),
                      NIMBLE_NOT_FOUND, "is unknown in repository 'r'");
  NIMBLE_ASSERT_ERROR(nimble_store_fs_manifest_resolve(store, "q", "v1", &d), NIMBLE_NOT_FOUND,
                      "repository 'q' is unknown");
  ck_assert_int_eq(files_under("uploads"), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_fs");
  TCase *tc = tcase_create("fs");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_blob_put_stores_at_its_digest_path);
  tcase_add_test(tc, test_blob_put_with_wrong_digest_stores_nothing);
  tcase_add_test(tc, test_chunked_upload_commits_to_the_blob);
  tcase_add_test(tc, test_commit_with_wrong_digest_stores_nothing_and_ends_the_session);
  tcase_add_test(tc, test_a_session_has_one_writer_at_a_time);
  tcase_add_test(tc, test_upload_over_the_size_limit_is_refused_and_keeps_its_bytes);
  tcase_add_test(tc, test_bad_upload_ids_are_refused_before_touching_files);
  tcase_add_test(tc, test_expiry_removes_idle_sessions_and_reopening_removes_all);
  tcase_add_test(tc, test_identical_concurrent_uploads_store_one_blob);
  tcase_add_test(tc, test_manifest_round_trips_byte_exact_by_tag_and_digest);
  tcase_add_test(tc, test_manifest_with_a_missing_blob_is_refused);
  tcase_add_test(tc, test_manifest_with_wrong_blob_size_is_refused);
  tcase_add_test(tc, test_malformed_manifests_are_refused_naming_the_field);
  tcase_add_test(tc, test_manifest_over_4_mib_is_refused);
  tcase_add_test(tc, test_push_by_digest_checks_the_digest_and_index_needs_its_manifests);
  tcase_add_test(tc, test_tags_list_is_sorted_and_lookups_name_what_is_missing);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
