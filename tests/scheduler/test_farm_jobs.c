/* Whole-farm jobs on loopback: a job over three targets on three workers,
 * the compile cache (and its store check), merging of identical tasks in
 * flight, and cancel. The store's contents are checked with the store
 * client against what test_compiler's rules give for the model bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "farm_harness.h"
#include "nimble/artifact_config.h"
#include "nimble/manifest.h"
#include "nimble_test.h"

static const char *task_field(const json_t *status, size_t i, const char *key) {
  return json_string_value(json_object_get(json_array_get(json_object_get(status, "tasks"), i), key));
}

static void expect_blob_text(farm *f, const char *repo, const nimble_digest_t *d, const char *want,
                             size_t want_len) {
  uint8_t *bytes;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(f->store, repo, d, &bytes, &n));
  ck_assert_uint_eq(n, want_len);
  ck_assert(memcmp(bytes, want, n) == 0);
  free(bytes);
}

/* Checks the artifact of `spec` for `model_text` against test_compiler's
 * rules; returns the constants layer's digest. */
static nimble_digest_t check_artifact(farm *f, const char *repo, const char *manifest_text,
                                      const char *spec, const char *model_text) {
  nimble_digest_t md, model;
  NIMBLE_ASSERT_OK(nimble_digest_parse(manifest_text, &md));
  nimble_digest_compute(model_text, strlen(model_text), &model);
  char model_hex[65];
  nimble_digest_format_hex(&model, model_hex);
  uint8_t *bytes;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, repo, manifest_text, &bytes, &n, NULL, NULL));
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(bytes, n, &m));
  free(bytes);
  NIMBLE_ASSERT_OK(nimble_manifest_check_target(&m, spec));

  uint8_t *cfg_bytes;
  size_t cfg_n;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(f->store, repo, &m.config.digest, &cfg_bytes, &cfg_n));
  nimble_artifact_config_t cfg;
  NIMBLE_ASSERT_OK(nimble_artifact_config_decode(cfg_bytes, cfg_n, &cfg));
  free(cfg_bytes);
  ck_assert_str_eq(cfg.target, spec);
  ck_assert(nimble_digest_equal(&cfg.model, &model));
  ck_assert_str_eq(cfg.compiler_version, NIMBLE_VERSION_STRING);
  nimble_artifact_config_deinit(&cfg);

  char want[1024];
  /* The metadata part the compiler wrote is pushed as its own layer. */
  int k = snprintf(want, sizeof want, "NIMBLE-TEST-METADATA\ntarget=%s\nmodel=%s\n", spec, model_hex);
  const nimble_descriptor_t *meta = nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_METADATA);
  ck_assert(meta != NULL);
  ck_assert_str_eq(meta->media_type, "application/vnd.nimble.executable.metadata.v1");
  expect_blob_text(f, repo, &meta->digest, want, (size_t)k);
  k = snprintf(want, sizeof want, "NIMBLE-TEST-BYTECODE\ntarget=%s\nmodel=%s\n", spec, model_hex);
  const nimble_descriptor_t *bc = nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE);
  ck_assert(bc != NULL);
  expect_blob_text(f, repo, &bc->digest, want, (size_t)k);
  const nimble_descriptor_t *c = nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_CONSTANTS);
  ck_assert(c != NULL);
  k = snprintf(want, sizeof want, "NIMBLE-TEST-CONSTANTS\n%s", model_text);
  expect_blob_text(f, repo, &c->digest, want, (size_t)k);
  nimble_digest_t constants = c->digest;
  const char *host = strncmp(spec, "aarch64", 7) ? "x86_64-linux-gnu" : "aarch64-linux-gnu";
  const nimble_descriptor_t *kern =
      nimble_manifest_find_layer(&m, nimble_manifest_kernels_media_type(host));
  ck_assert_msg(kern != NULL, "no %s kernels for %s", host, spec);
  k = snprintf(want, sizeof want, "NIMBLE-TEST-KERNELS %s\nmodel=%s\n", host, model_hex);
  expect_blob_text(f, repo, &kern->digest, want, (size_t)k);
  int want_layers = !strncmp(spec, "cuda", 4) ? 5 : 4;
  ck_assert_uint_eq(m.layer_count, (size_t)want_layers);
  nimble_manifest_deinit(&m);
  return constants;
}

START_TEST(test_job_over_three_targets_on_three_workers_puts_three_manifests_in_the_store) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w-x86", "x86", NULL);
  farm_start_worker(&f, "w-arm", "aarch64", NULL);
  farm_start_worker(&f, "w-cuda", "cuda", NULL);
  void *sub = zmq_socket(f.zctx, ZMQ_SUB);
  ck_assert_int_eq(zmq_connect(sub, f.events_ep), 0);
  ck_assert_int_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
  farm_sleep_ms(300); /* let the subscription reach the publisher */

  const char *model_text = "model A: three targets\n";
  char model[72];
  farm_push_model(&f, model_text, model);
  const char *targets[] = {"x86", "aarch64", "cuda", NULL};
  json_t *acc = farm_submit(&f, model, "team/demo", targets, NULL);
  ck_assert(json_is_false(json_object_get(acc, "cached")));
  char job[64];
  snprintf(job, sizeof job, "%s", json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  json_t *st = farm_wait_job(&f, job, "done", 30000, NULL);
  ck_assert_msg(st && !strcmp(json_string_value(json_object_get(st, "state")), "done"),
                "job did not finish: %s", st ? json_dumps(st, 0) : "no status");
  nimble_digest_t constants[3];
  for (size_t i = 0; i < 3; i++) {
    ck_assert_str_eq(task_field(st, i, "target"), targets[i]);
    ck_assert_str_eq(task_field(st, i, "state"), "done");
    constants[i] = check_artifact(&f, "team/demo", task_field(st, i, "manifest"), targets[i], model_text);
    /* Pushed under the target's tag too. */
    nimble_digest_t by_tag;
    uint8_t *b;
    size_t n;
    NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f.store, "team/demo", targets[i], &b, &n, NULL, &by_tag));
    free(b);
    char tagged[72];
    nimble_digest_format(&by_tag, tagged);
    ck_assert_str_eq(tagged, task_field(st, i, "manifest"));
  }
  /* The weights are one blob for all three targets. */
  ck_assert(nimble_digest_equal(&constants[0], &constants[1]));
  ck_assert(nimble_digest_equal(&constants[0], &constants[2]));
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 3);
  json_decref(st);

  /* Events: progress from the compiler and the final state, on the job's topic. */
  int saw_progress = 0, saw_done = 0;
  for (int k = 0; k < 500; k++) {
    zmq_msg_t topic, msg;
    zmq_msg_init(&topic);
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&topic, sub, ZMQ_DONTWAIT) < 0) break;
    ck_assert(zmq_msg_more(&topic));
    ck_assert(zmq_msg_recv(&msg, sub, 0) >= 0);
    ck_assert_uint_eq(zmq_msg_size(&topic), strlen(job));
    ck_assert(memcmp(zmq_msg_data(&topic), job, strlen(job)) == 0);
    nimble_msg_type_t type;
    json_t *body;
    NIMBLE_ASSERT_OK(nimble_message_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &type, &body));
    if (type == NIMBLE_MSG_PROGRESS && !strcmp(json_string_value(json_object_get(body, "phase")), "codegen") &&
        json_integer_value(json_object_get(body, "percent")) == 70)
      saw_progress = 1;
    if (type == NIMBLE_MSG_JOB_STATUS && !strcmp(json_string_value(json_object_get(body, "state")), "done"))
      saw_done = 1;
    json_decref(body);
    zmq_msg_close(&topic);
    zmq_msg_close(&msg);
  }
  ck_assert_msg(saw_progress, "no 'codegen 70' progress event");
  ck_assert_msg(saw_done, "no JOB_STATUS done event");
  zmq_close(sub);
  farm_stop(&f);
}
END_TEST

static char *submit_named(farm *f, const char *model, const char *name, const char *target,
                          int *cached) {
  const char *targets[] = {target, NULL};
  json_t *acc = farm_submit(f, model, name, targets, NULL);
  *cached = json_is_true(json_object_get(acc, "cached"));
  char *job = strdup(json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  return job;
}

static char *submit_one(farm *f, const char *model, const char *target, int *cached) {
  return submit_named(f, model, "team/cache", target, cached);
}

/* The manifest digest the store's tag NAME:TAG points at. */
static void tagged_manifest(farm *f, const char *name, const char *tag, char out[72]) {
  uint8_t *bytes = NULL;
  size_t n = 0;
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, name, tag, &bytes, &n, NULL, &d));
  free(bytes);
  nimble_digest_format(&d, out);
}

START_TEST(test_resubmission_is_answered_from_the_cache_until_a_blob_is_deleted) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  const char *model_text = "model B: cached\n";
  char model[72];
  farm_push_model(&f, model_text, model);
  int cached;
  char *job1 = submit_one(&f, model, "x86", &cached);
  ck_assert(!cached);
  json_t *st1 = farm_wait_job(&f, job1, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st1, "state")), "done");
  char manifest[72];
  snprintf(manifest, sizeof manifest, "%s", task_field(st1, 0, "manifest"));

  char *job2 = submit_one(&f, model, "x86", &cached);
  ck_assert_msg(cached, "the second submit was not answered from the cache");
  json_t *st2 = farm_wait_job(&f, job2, "done", 1000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st2, "state")), "done");
  ck_assert_str_eq(task_field(st2, 0, "manifest"), manifest);
  ck_assert(json_is_true(json_object_get(json_array_get(json_object_get(st2, "tasks"), 0), "cached")));
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);

  /* A hit under another name is fetchable under that name. */
  char *job2b = submit_named(&f, model, "team/other", "x86", &cached);
  ck_assert_msg(cached, "a submit under another name was not answered from the cache");
  json_t *st2b = farm_wait_job(&f, job2b, "done", 1000, NULL);
  char tagged[72];
  tagged_manifest(&f, "team/other", "x86", tagged);
  ck_assert_str_eq(tagged, manifest);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  json_decref(st2b);
  free(job2b);

  /* Delete the bytecode blob from the store's root: the cache must not
   * answer with an artifact the store can no longer serve. */
  uint8_t *bytes;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f.store, "team/cache", manifest, &bytes, &n, NULL, NULL));
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(bytes, n, &m));
  free(bytes);
  char hex[65], path[600];
  nimble_digest_format_hex(&nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE)->digest, hex);
  nimble_manifest_deinit(&m);
  snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", f.store_root, hex, hex);
  ck_assert_msg(unlink(path) == 0, "cannot delete %s", path);

  char *job3 = submit_one(&f, model, "x86", &cached);
  ck_assert_msg(!cached, "answered from the cache although a blob is gone");
  json_t *st3 = farm_wait_job(&f, job3, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st3, "state")), "done");
  /* Same inputs, same bytes: the same manifest, rebuilt. */
  ck_assert_str_eq(task_field(st3, 0, "manifest"), manifest);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2);
  int exists = 0;
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_digest_parse(manifest, &d));
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(f.store, "team/cache", &d, &exists, NULL));
  ck_assert(exists);
  json_decref(st1);
  json_decref(st2);
  json_decref(st3);
  free(job1);
  free(job2);
  free(job3);
  farm_stop(&f);
}
END_TEST

START_TEST(test_identical_submissions_in_flight_merge_into_one_task) {
  farm f;
  farm_start(&f, NULL);
  const char *model_text = "model C: merged\nsleep 1500\n";
  char model[72];
  farm_push_model(&f, model_text, model);
  int cached;
  /* No worker yet: both jobs are queued when the second arrives. */
  char *job1 = submit_one(&f, model, "x86", &cached);
  char *job2 = submit_named(&f, model, "team/merged", "x86", &cached);
  char key1[80], key2[80];
  snprintf(key1, sizeof key1, "nimble:job:%s", job1);
  snprintf(key2, sizeof key2, "nimble:job:%s", job2);
  char *t1 = farm_redis_hget(&f, key1, "task:0"), *t2 = farm_redis_hget(&f, key2, "task:0");
  ck_assert(t1 && t2);
  ck_assert_str_eq(t1, t2);
  farm_start_worker(&f, "w1", "x86", NULL);
  farm_start_worker(&f, "w2", "x86", NULL);
  json_t *s1 = farm_wait_job(&f, job1, "done", 20000, NULL);
  json_t *s2 = farm_wait_job(&f, job2, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s1, "state")), "done");
  ck_assert_str_eq(json_string_value(json_object_get(s2, "state")), "done");
  ck_assert_str_eq(task_field(s1, 0, "manifest"), task_field(s2, 0, "manifest"));
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  /* Each job's name has the artifact, though one task compiled it. */
  char tagged[72];
  tagged_manifest(&f, "team/cache", "x86", tagged);
  ck_assert_str_eq(tagged, task_field(s1, 0, "manifest"));
  tagged_manifest(&f, "team/merged", "x86", tagged);
  ck_assert_str_eq(tagged, task_field(s1, 0, "manifest"));
  json_decref(s1);
  json_decref(s2);
  free(t1);
  free(t2);
  free(job1);
  free(job2);
  farm_stop(&f);
}
END_TEST

START_TEST(test_cancel_stops_the_compile_and_frees_the_worker) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72], quick[72];
  farm_push_model(&f, "model D: long\nsleep 20000\n", model);
  farm_push_model(&f, "model E: quick\n", quick);
  int cached;
  char *job = submit_one(&f, model, "x86", &cached);
  char key[80], tkey[200];
  snprintf(key, sizeof key, "nimble:job:%s", job);
  char *tid = farm_redis_hget(&f, key, "task:0");
  snprintf(tkey, sizeof tkey, "nimble:task:%s", tid);
  ck_assert(farm_wait_redis_field(&f, tkey, "state", "running", 10000));
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_CANCEL, json_pack("{s:s}", "job", job), NULL, &type, &reply), 0);
  ck_assert_int_eq(type, NIMBLE_MSG_JOB_STATUS);
  ck_assert_str_eq(json_string_value(json_object_get(reply, "state")), "cancelled");
  ck_assert_str_eq(task_field(reply, 0, "state"), "cancelled");
  json_decref(reply);
  char *state = farm_redis_hget(&f, tkey, "state");
  ck_assert_str_eq(state, "cancelled");
  free(state);
  /* The worker is free again: a new job runs at once, not after 20 s. */
  char *job2 = submit_one(&f, quick, "x86", &cached);
  json_t *st = farm_wait_job(&f, job2, "done", 8000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  json_decref(st);
  /* Cancelling a job nobody knows is NOT_FOUND. */
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_CANCEL, json_pack("{s:s}", "job", "j-999"), NULL, &type, &reply), 0);
  ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
  ck_assert_str_eq(json_string_value(json_object_get(reply, "code")), "NOT_FOUND");
  ck_assert(strstr(json_string_value(json_object_get(reply, "message")), "j-999") != NULL);
  json_decref(reply);
  free(job);
  free(job2);
  free(tid);
  farm_stop(&f);
}
END_TEST

START_TEST(test_options_reach_the_compiler_and_are_part_of_the_compile_key) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model T: options\n", model);
  const char *jobs[3];
  json_t *bodies[3] = {
      json_pack("{s:i,s:b,s:s}", "opt_level", 3, "tune", 0, "layout", "NCHW"),
      json_pack("{s:i}", "opt_level", 2),
      json_pack("{s:s,s:i,s:b}", "layout", "NCHW", "opt_level", 3, "tune", 0)};
  int cached[3];
  for (int i = 0; i < 3; i++) {
    json_t *body = json_pack("{s:s,s:s,s:s,s:[s],s:o}", "model", model, "format", "onnx", "name",
                             "team/opts", "targets", "x86", "options", bodies[i]);
    nimble_msg_type_t type;
    json_t *reply;
    ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_SUBMIT, body, NULL, &type, &reply), 0);
    ck_assert_int_eq(type, NIMBLE_MSG_ACCEPTED);
    cached[i] = json_is_true(json_object_get(reply, "cached"));
    jobs[i] = strdup(json_string_value(json_object_get(reply, "job")));
    json_decref(reply);
    json_t *st = farm_wait_job(&f, jobs[i], "done", 20000, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
    json_decref(st);
  }
  /* Other options, another key; the same options in another order, the same key. */
  ck_assert(!cached[0] && !cached[1] && cached[2]);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2);
  ck_assert_int_eq(farm_count_compiles(&f, "option=layout=NCHW option=opt_level=3 option=tune=false"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, "option=opt_level=2"), 1);
  for (int i = 0; i < 3; i++) free((void *)jobs[i]);
  farm_stop(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("farm_jobs");
  TCase *tc = tcase_create("jobs");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_job_over_three_targets_on_three_workers_puts_three_manifests_in_the_store);
  tcase_add_test(tc, test_resubmission_is_answered_from_the_cache_until_a_blob_is_deleted);
  tcase_add_test(tc, test_identical_submissions_in_flight_merge_into_one_task);
  tcase_add_test(tc, test_cancel_stops_the_compile_and_frees_the_worker);
  tcase_add_test(tc, test_options_reach_the_compiler_and_are_part_of_the_compile_key);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
