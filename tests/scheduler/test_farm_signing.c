/* The farm signs what it publishes (docs/farm.md, "Signing"): a farm on
 * loopback whose scheduler has --signing-key pushes a `<tag>.sig`
 * signature object for a worker's RESULT, for a job merged into another's
 * task under its own name, and for a cache hit tagged under a new name.
 * Each object is read back with the store client and jansson and checked
 * with libsodium-backed nimble_signature_verify against the public key
 * nimble_sign_keygen gave, for exactly (repository, tag, manifest), and
 * the runtime's fetcher (where built) passes them with the farm's key and
 * refuses them with another; a farm without a key publishes none, and a
 * key others can read stops the scheduler at start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "farm_harness.h"
#ifdef NIMBLE_TEST_HAS_FETCH
#include "nimble/fetch.h"
#endif
#include "nimble/signature.h"
#include "nimble_test.h"

static char g_dir[256], g_key[300], g_pub[65];

static void make_key(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/nimble-farm-sign.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  snprintf(g_key, sizeof g_key, "%s/farm.key", g_dir);
  uint8_t pub[NIMBLE_SIGN_KEY_BYTES];
  NIMBLE_ASSERT_OK(nimble_sign_keygen(g_key, pub));
  nimble_sign_key_hex(pub, g_pub);
}

static void remove_key(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  ck_assert_int_eq(system(cmd), 0);
}

static char *submit_named(farm *f, const char *model, const char *name, int *cached) {
  const char *targets[] = {"x86", NULL};
  json_t *acc = farm_submit(f, model, name, targets, NULL);
  *cached = json_is_true(json_object_get(acc, "cached"));
  char *job = strdup(json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  return job;
}

static void tagged_manifest(farm *f, const char *name, const char *tag, char out[72]) {
  uint8_t *bytes = NULL;
  size_t n = 0;
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, name, tag, &bytes, &n, NULL, &d));
  free(bytes);
  nimble_digest_format(&d, out);
}

/* Reads name:tag.sig back and checks it signs (name, tag, manifest) under
 * the farm's key and under no other. */
static void assert_signed(farm *f, const char *name, const char *tag, const char *manifest) {
  char sigtag[160];
  snprintf(sigtag, sizeof sigtag, "%s.sig", tag);
  uint8_t *mb, *ob;
  size_t mn, on;
  char *mt = NULL;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, name, sigtag, &mb, &mn, &mt, NULL));
  ck_assert_str_eq(mt, "application/vnd.oci.image.manifest.v1+json");
  json_t *m = json_loadb((const char *)mb, mn, 0, NULL);
  ck_assert_ptr_nonnull(m);
  json_t *cfg = json_object_get(m, "config");
  ck_assert_str_eq(json_string_value(json_object_get(cfg, "mediaType")), "application/vnd.nimble.signature.v1+json");
  ck_assert_uint_eq(json_array_size(json_object_get(m, "layers")), 0);
  nimble_digest_t od;
  NIMBLE_ASSERT_OK(nimble_digest_parse(json_string_value(json_object_get(cfg, "digest")), &od));
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(f->store, name, &od, &ob, &on));
  json_t *o = json_loadb((const char *)ob, on, 0, NULL);
  ck_assert_ptr_nonnull(o);
#define F(k) json_string_value(json_object_get(o, k))
  ck_assert_str_eq(F("format"), "nimble-artifact-signature-v1");
  ck_assert_str_eq(F("repository"), name);
  ck_assert_str_eq(F("tag"), tag);
  ck_assert_str_eq(F("manifest"), manifest);
  ck_assert_str_eq(F("key"), g_pub);
  char line[100];
  snprintf(line, sizeof line, "ed25519 %s farm\n", g_pub);
  nimble_trusted_keys_t t;
  NIMBLE_ASSERT_OK(nimble_trusted_keys_parse(line, strlen(line), "farm keys", &t));
  NIMBLE_ASSERT_OK(nimble_signature_verify(&t, name, tag, manifest, F("repository"), F("tag"), F("manifest"),
                                           F("key"), F("signature"), NULL));
  /* The same object does not vouch for the manifest under another tag. */
  NIMBLE_ASSERT_ERROR(nimble_signature_verify(&t, name, "other", manifest, F("repository"), F("tag"),
                                              F("manifest"), F("key"), F("signature"), NULL),
                      NIMBLE_PERMISSION_DENIED, "replayed");
#undef F
  nimble_trusted_keys_deinit(&t);
  json_decref(o);
  json_decref(m);
  free(ob);
  free(mb);
  free(mt);
}

#ifdef NIMBLE_TEST_HAS_FETCH
/* The runtime's fetcher on what the scheduler signed: the farm's key
 * passes the check (the fetch then goes on to the blobs: test_compiler's
 * stand-in parts are no executable, so it ends in a load error, not a
 * refusal); another key is refused naming the farm's key. */
static void assert_fetcher_trusts(farm *f, const char *name, const char *tag) {
  char ref[512], keys[400], cache[400], line[120];
  snprintf(ref, sizeof ref, "%s/%s:%s", f->store_url, name, tag);
  snprintf(keys, sizeof keys, "%s/trusted.keys", g_dir);
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  FILE *fp = fopen(keys, "w");
  ck_assert_ptr_nonnull(fp);
  fprintf(fp, "ed25519 %s farm\n", g_pub);
  fclose(fp);
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.cache_dir = cache;
  o.trusted_keys = keys;
  nimble_executable *exe = NULL;
  nimble_fetch_stats_t st;
  nimble_status_t s = nimble_fetch_artifact_stats(&o, ref, &exe, &st);
  ck_assert_msg(s != NULL, "test_compiler's parts loaded");
  ck_assert_msg(nimble_status_code(s) != NIMBLE_PERMISSION_DENIED, "%s", nimble_status_message(s));
  /* Past the check: the blobs were fetched (or, for a second name of the
   * same manifest, found in the cache). */
  ck_assert_msg(st.blobs_fetched + st.blobs_from_cache == 5, "%u fetched, %u from cache: %s",
                st.blobs_fetched, st.blobs_from_cache, nimble_status_message(s));
  ck_assert_msg(strstr(nimble_status_message(s), "fetch: loading"), "%s", nimble_status_message(s));
  nimble_status_free(s);
  /* Another key only. */
  fp = fopen(keys, "w");
  ck_assert_ptr_nonnull(fp);
  snprintf(line, sizeof line, "ed25519 %064d other\n", 0);
  fputs(line, fp);
  fclose(fp);
  s = nimble_fetch_artifact(&o, ref, &exe);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_PERMISSION_DENIED);
  ck_assert_msg(strstr(nimble_status_message(s), ref) && strstr(nimble_status_message(s), g_pub),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
}
#endif

START_TEST(test_a_signing_farm_signs_results_merged_names_and_cache_hits) {
  make_key();
  farm f;
  farm_config cfg = {.signing_key = g_key};
  farm_start(&f, &cfg);
  char model[72];
  farm_push_model(&f, "model S: signed\nsleep 1500\n", model);
  int cached;
  /* No worker yet: the second job merges into the first one's task. */
  char *job1 = submit_named(&f, model, "team/signed", &cached);
  char *job2 = submit_named(&f, model, "team/merged", &cached);
  farm_start_worker(&f, "w1", "x86", NULL);
  json_t *s1 = farm_wait_job(&f, job1, "done", 20000, NULL);
  json_t *s2 = farm_wait_job(&f, job2, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s1, "state")), "done");
  ck_assert_str_eq(json_string_value(json_object_get(s2, "state")), "done");
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  char manifest[72];
  tagged_manifest(&f, "team/signed", "x86", manifest);
  assert_signed(&f, "team/signed", "x86", manifest);
  tagged_manifest(&f, "team/merged", "x86", manifest);
  assert_signed(&f, "team/merged", "x86", manifest);

  /* A cache hit under a third name is tagged and signed there. */
  char *job3 = submit_named(&f, model, "team/other", &cached);
  ck_assert_msg(cached, "the third submit was not answered from the cache");
  tagged_manifest(&f, "team/other", "x86", manifest);
  assert_signed(&f, "team/other", "x86", manifest);
#ifdef NIMBLE_TEST_HAS_FETCH
  assert_fetcher_trusts(&f, "team/signed", "x86");
  assert_fetcher_trusts(&f, "team/other", "x86");
#endif
  ck_assert(farm_sched_log_contains(&f, "signed team/other:x86"));
  json_decref(s1);
  json_decref(s2);
  free(job1);
  free(job2);
  free(job3);
  farm_stop(&f);
  remove_key();
}
END_TEST

START_TEST(test_a_farm_without_a_key_publishes_no_signature) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model U: unsigned\n", model);
  int cached;
  char *job = submit_named(&f, model, "team/plain", &cached);
  json_t *s = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "done");
  uint8_t *b = NULL;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_store_pull_manifest(f.store, "team/plain", "x86.sig", &b, &n, NULL, NULL),
                      NIMBLE_NOT_FOUND, "x86.sig");
  json_decref(s);
  free(job);
  farm_stop(&f);
}
END_TEST

START_TEST(test_a_signing_key_others_can_read_stops_the_scheduler_at_start) {
  make_key();
  ck_assert_int_eq(chmod(g_key, 0644), 0);
  char cmd[2048], log[400];
  snprintf(log, sizeof log, "%s/sched.log", g_dir);
  snprintf(cmd, sizeof cmd,
           "'%s/scheduler/nimble-scheduler' --clients tcp://127.0.0.1:0 --workers tcp://127.0.0.1:0 "
           "--events tcp://127.0.0.1:0 --redis 127.0.0.1:1 --store http://127.0.0.1:1 "
           "--signing-key '%s' >'%s' 2>&1",
           getenv("NIMBLE_BUILD_DIR"), g_key, log);
  int rc = system(cmd);
  ck_assert(WIFEXITED(rc) && WEXITSTATUS(rc) != 0);
  FILE *fp = fopen(log, "r");
  ck_assert_ptr_nonnull(fp);
  char text[2048] = "";
  size_t n = fread(text, 1, sizeof text - 1, fp);
  text[n] = '\0';
  fclose(fp);
  ck_assert_msg(strstr(text, "--signing-key") && strstr(text, "mode 0644") && strstr(text, g_key),
                "scheduler said: %s", text);
  remove_key();
}
END_TEST

int main(void) {
  Suite *s = suite_create("farm_signing");
  TCase *tc = tcase_create("signing");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_a_signing_farm_signs_results_merged_names_and_cache_hits);
  tcase_add_test(tc, test_a_farm_without_a_key_publishes_no_signature);
  tcase_add_test(tc, test_a_signing_key_others_can_read_stops_the_scheduler_at_start);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
