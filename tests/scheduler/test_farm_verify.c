/* Trust what you run (issue #16), the farm's part: verified builds, the
 * requeue policy for store outages, and results the farm cannot sign.
 * Farms on loopback (farm_harness.h): real redis-server, nimble-store,
 * nimble-scheduler and nimble-workers, with test_compiler (a deterministic
 * stand-in) or the real `nimble` compiler.
 *
 * Every artifact is checked against something the farm did not compute:
 * manifests and blobs are pulled back and hashed with libsodium, the
 * stand-in's bytecode part is compared with the text test_compiler.c
 * writes for that model, the real compiler's parts with a local `nimble
 * compile` of the same program, and the tamperer's copy with that text with
 * one bit flipped. */
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "farm_harness.h"
#include "nimble/signature.h"
#include "nimble_test.h"

/* ---- helpers ---- */

static void hex_of(const uint8_t *h, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* "sha256:<hex>" of bytes, by libsodium. */
static void sha256_digest(const void *bytes, size_t n, char out[72]) {
  uint8_t h[32];
  crypto_hash_sha256(h, bytes, n);
  memcpy(out, "sha256:", 7);
  hex_of(h, 32, out + 7);
}

static char *submit_verified(farm *f, const char *model, const char *format, const char *name,
                             int verify) {
  json_t *body = json_pack("{s:s,s:s,s:s,s:[s]}", "model", model, "format", format, "name", name,
                           "targets", "x86");
  if (verify) json_object_set_new(body, "verify", json_integer(verify));
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert_msg(farm_request(f, NIMBLE_MSG_SUBMIT, body, NULL, &type, &reply) == 0, "no reply");
  if (type != NIMBLE_MSG_ACCEPTED) {
    char *txt = json_dumps(reply, 0);
    ck_abort_msg("SUBMIT answered %s", txt);
  }
  char *job = strdup(json_string_value(json_object_get(reply, "job")));
  json_decref(reply);
  return job;
}

static const json_t *task0(const json_t *status) {
  return json_array_get(json_object_get(status, "tasks"), 0);
}

static const char *task_str(const json_t *status, const char *k) {
  return json_string_value(json_object_get(task0(status), k));
}

static long long task_int(const json_t *status, const char *k) {
  const json_t *v = json_object_get(task0(status), k);
  return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Pulls repo:ref, checks its bytes hash (libsodium) to the digest the store
 * answered, and returns the manifest's JSON (caller's) and digest. */
static json_t *pull_manifest(farm *f, const char *repo, const char *ref, char digest[72]) {
  uint8_t *bytes = NULL;
  size_t n = 0;
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, repo, ref, &bytes, &n, NULL, &d));
  char mine[72], theirs[72];
  sha256_digest(bytes, n, mine);
  nimble_digest_format(&d, theirs);
  ck_assert_str_eq(mine, theirs);
  json_t *m = json_loadb((const char *)bytes, n, 0, NULL);
  ck_assert_ptr_nonnull(m);
  free(bytes);
  memcpy(digest, mine, 72);
  return m;
}

/* Pulls the blob `digest` and checks that its bytes hash to it; caller frees. */
static uint8_t *pull_blob(farm *f, const char *repo, const char *digest, size_t *n) {
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_digest_parse(digest, &d));
  uint8_t *bytes = NULL;
  NIMBLE_ASSERT_OK(nimble_store_pull_blob(f->store, repo, &d, &bytes, n));
  char mine[72];
  sha256_digest(bytes, *n, mine);
  ck_assert_str_eq(mine, digest);
  return bytes;
}

/* The layer of manifest m titled `title` (test_compiler and the worker
 * title layers with their file names). */
static const char *layer_digest(const json_t *m, const char *title) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(m, "layers"), i, l) {
    const char *t = json_string_value(
        json_object_get(json_object_get(l, "annotations"), "org.opencontainers.image.title"));
    if (t && !strcmp(t, title)) return json_string_value(json_object_get(l, "digest"));
  }
  return NULL;
}

/* What test_compiler writes as the bytecode part of `model` for x86. */
static void stand_in_bytecode(const char *model_text, char *out, size_t cap) {
  uint8_t h[32];
  crypto_hash_sha256(h, (const uint8_t *)model_text, strlen(model_text));
  char hex[65];
  hex_of(h, 32, hex);
  snprintf(out, cap, "NIMBLE-TEST-BYTECODE\ntarget=x86\nmodel=%s\n", hex);
}

static void assert_tag_absent(farm *f, const char *repo, const char *tag) {
  uint8_t *b = NULL;
  size_t n;
  nimble_status_t st = nimble_store_pull_manifest(f->store, repo, tag, &b, &n, NULL, NULL);
  ck_assert_msg(st != NULL, "%s:%s exists", repo, tag);
  ck_assert_int_eq(nimble_status_code(st), NIMBLE_NOT_FOUND);
  nimble_status_free(st);
}

static char *key_of_task(farm *f, const char *task) {
  char key[200];
  snprintf(key, sizeof key, "nimble:task:%s", task);
  return farm_redis_hget(f, key, "key");
}

static char *task_field(farm *f, const char *task, const char *field) {
  char key[200];
  snprintf(key, sizeof key, "nimble:task:%s", task);
  return farm_redis_hget(f, key, field);
}

/* ---- verified builds ---- */

START_TEST(test_two_honest_workers_build_identical_bytes_and_the_job_publishes_them) {
  farm f;
  farm_start(&f, NULL);
  const char *j1[] = {"--compile-jobs", "1", NULL}, *j2[] = {"--compile-jobs", "2", NULL};
  farm_start_worker(&f, "w-one", "x86", j1);
  farm_start_worker(&f, "w-two", "x86", j2);
  const char *text = "model V: verified\nsleep 300\n";
  char model[72];
  farm_push_model(&f, text, model);
  char *job = submit_verified(&f, model, "onnx", "team/verified", 2);
  json_t *s = farm_wait_job(&f, job, "done", 30000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "state %s: %s",
                json_string_value(json_object_get(s, "state")), task_str(s, "error"));
  ck_assert_int_eq(task_int(s, "verify"), 2);
  ck_assert_int_eq(task_int(s, "verified"), 2);
  const char *reported = task_str(s, "manifest");

  /* Two compiles, one per worker, one with -j 1 and one with -j 2. */
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2);
  ck_assert_int_eq(farm_count_compiles(&f, " jobs=1"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, " jobs=2"), 1);
  char tid[160], c1[170], c2[170];
  snprintf(tid, sizeof tid, "%s.x86", job);
  snprintf(c1, sizeof c1, "%s:v1", tid);
  snprintf(c2, sizeof c2, "%s:v2", tid);
  char *w1 = task_field(&f, c1, "last_worker"), *w2 = task_field(&f, c2, "last_worker");
  char *m1 = task_field(&f, c1, "manifest"), *m2 = task_field(&f, c2, "manifest");
  ck_assert_ptr_nonnull(w1);
  ck_assert_ptr_nonnull(w2);
  ck_assert_msg(strcmp(w1, w2) != 0, "both copies on %s", w1);
  ck_assert_str_eq(m1, reported);
  ck_assert_str_eq(m2, reported);

  /* Each worker's artifact, from the staging repository, and the published
   * one are the same bytes: the manifest and every blob hash alike, and
   * the bytecode is what the stand-in writes for this model. */
  char staging[200], d_staged[72], d_pub[72];
  snprintf(staging, sizeof staging, "nimble-verify/%s", tid);
  json_t *ms = pull_manifest(&f, staging, reported, d_staged);
  json_t *mp = pull_manifest(&f, "team/verified", "x86", d_pub);
  ck_assert_str_eq(d_pub, reported);
  ck_assert_str_eq(d_staged, reported);
  size_t n;
  uint8_t *bc = pull_blob(&f, "team/verified", layer_digest(mp, "bytecode"), &n);
  char want[200];
  stand_in_bytecode(text, want, sizeof want);
  ck_assert_uint_eq(n, strlen(want));
  ck_assert(memcmp(bc, want, n) == 0);
  free(bc);
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(mp, "layers"), i, l) {
    uint8_t *b = pull_blob(&f, "team/verified", json_string_value(json_object_get(l, "digest")), &n);
    free(b);
  }

  /* The cache remembers that two workers built it: a verify=2 resubmit is
   * a hit, a verify=3 one is not (and waits: only two workers). */
  char *key = key_of_task(&f, tid);
  char ckey[200];
  snprintf(ckey, sizeof ckey, "nimble:cache:%s", key);
  char *verified = farm_redis_hget(&f, ckey, "verified");
  ck_assert_str_eq(verified, "2");
  char *job2 = submit_verified(&f, model, "onnx", "team/verified", 2);
  json_t *s2 = farm_wait_job(&f, job2, "done", 5000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s2, "state")), "done");
  ck_assert(json_is_true(json_object_get(task0(s2), "cached")));
  char *job3 = submit_verified(&f, model, "onnx", "team/verified", 3);
  farm_sleep_ms(1500);
  json_t *s3 = farm_wait_job(&f, job3, "done", 100, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s3, "state")), "running");
  ck_assert_int_eq(task_int(s3, "verify"), 3);
  ck_assert_int_eq(task_int(s3, "verified"), 2);
  ck_assert_int_eq(task_int(s3, "workers"), 2);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 4);
  json_decref(s3);
  json_decref(s2);
  json_decref(ms);
  json_decref(mp);
  json_decref(s);
  free(w1), free(w2), free(m1), free(m2), free(key), free(verified);
  free(job), free(job2), free(job3);
  farm_stop(&f);
}
END_TEST

START_TEST(test_a_worker_that_flips_a_byte_fails_the_job_naming_both_workers) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w-honest", "x86", NULL);
  farm_start_worker_exe(&f, "tests/scheduler/farm_evil_worker", "w-evil", "x86", NULL);
  const char *text = "model E: tampered\nsleep 300\n";
  char model[72];
  farm_push_model(&f, text, model);
  char *job = submit_verified(&f, model, "onnx", "team/poisoned", 2);
  json_t *s = farm_wait_job(&f, job, "failed", 30000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "failed");
  const char *error = task_str(s, "error");
  ck_assert_ptr_nonnull(error);

  char tid[160], c1[170], c2[170];
  snprintf(tid, sizeof tid, "%s.x86", job);
  snprintf(c1, sizeof c1, "%s:v1", tid);
  snprintf(c2, sizeof c2, "%s:v2", tid);
  char *m1 = task_field(&f, c1, "manifest"), *m2 = task_field(&f, c2, "manifest");
  char *w1 = task_field(&f, c1, "last_worker");
  ck_assert_str_ne(m1, m2);
  /* The error names both workers and both digests. */
  ck_assert_msg(strstr(error, "'w-honest'") && strstr(error, "'w-evil'") && strstr(error, m1) &&
                    strstr(error, m2) && strstr(error, "nothing was published"),
                "%s", error);
  ck_assert(farm_sched_log_contains(&f, "VERIFICATION FAILED"));

  /* Nothing tagged or signed under the job's name, nothing cached, and
   * neither manifest is in the job's repository even by digest. */
  assert_tag_absent(&f, "team/poisoned", "x86");
  assert_tag_absent(&f, "team/poisoned", "x86.sig");
  assert_tag_absent(&f, "team/poisoned", m1);
  assert_tag_absent(&f, "team/poisoned", m2);
  char *key = key_of_task(&f, tid), ckey[200];
  snprintf(ckey, sizeof ckey, "nimble:cache:%s", key);
  char *cached = farm_redis_hget(&f, ckey, "manifest");
  ck_assert_ptr_null(cached);

  /* The evidence stays in the staging repository: the honest copy's
   * bytecode is the stand-in's text, the tamperer's differs from it in one
   * bit of its middle byte. */
  char staging[200], d[72];
  snprintf(staging, sizeof staging, "nimble-verify/%s", tid);
  const char *honest = !strcmp(w1, "w-honest") ? m1 : m2, *evil = honest == m1 ? m2 : m1;
  json_t *mh = pull_manifest(&f, staging, honest, d);
  json_t *me = pull_manifest(&f, staging, evil, d);
  char want[200];
  stand_in_bytecode(text, want, sizeof want);
  size_t nh, ne;
  uint8_t *bh = pull_blob(&f, staging, layer_digest(mh, "bytecode"), &nh);
  uint8_t *be = pull_blob(&f, staging, layer_digest(me, "bytecode"), &ne);
  ck_assert_uint_eq(nh, strlen(want));
  ck_assert(memcmp(bh, want, nh) == 0);
  ck_assert_uint_eq(ne, nh);
  size_t diffs = 0;
  for (size_t i = 0; i < ne; i++)
    if (be[i] != bh[i]) {
      diffs++;
      ck_assert_uint_eq(i, ne / 2);
      ck_assert_int_eq(be[i] ^ bh[i], 1);
    }
  ck_assert_uint_eq(diffs, 1);
  free(bh), free(be);
  json_decref(mh), json_decref(me);
  json_decref(s);
  free(m1), free(m2), free(w1), free(key), free(job);
  farm_stop(&f);
}
END_TEST

START_TEST(test_the_verify_policy_waits_for_a_second_worker_and_says_so) {
  farm f;
  const char *extra[] = {"--verify", "2", NULL};
  farm_config cfg = {.sched_extra = extra};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w-first", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model W: waits\n", model);
  /* A plain submit: the scheduler's policy makes it a verified build. */
  char *job = submit_verified(&f, model, "onnx", "team/waits", 0);
  char tid[160], c1[170], c2[170];
  snprintf(tid, sizeof tid, "%s.x86", job);
  snprintf(c1, sizeof c1, "%s:v1", tid);
  snprintf(c2, sizeof c2, "%s:v2", tid);
  char k1[200];
  snprintf(k1, sizeof k1, "nimble:task:%s", c1);
  /* One copy is built; the other is never given to the same worker. */
  ck_assert(farm_wait_redis_field(&f, k1, "state", "done", 15000));
  farm_sleep_ms(1500);
  json_t *s = farm_wait_job(&f, job, "done", 100, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "running");
  ck_assert_int_eq(task_int(s, "verify"), 2);
  ck_assert_int_eq(task_int(s, "verified"), 1);
  ck_assert_int_eq(task_int(s, "workers"), 1);
  char *st2 = task_field(&f, c2, "state");
  ck_assert_str_eq(st2, "queued");
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  assert_tag_absent(&f, "team/waits", "x86");
  /* A second worker joins: it builds the other copy and the job is done. */
  farm_start_worker(&f, "w-second", "x86", NULL);
  json_decref(s);
  s = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "done");
  char *w2 = task_field(&f, c2, "last_worker");
  ck_assert_str_eq(w2, "w-second");
  char d[72];
  json_t *m = pull_manifest(&f, "team/waits", "x86", d);
  ck_assert_str_eq(d, task_str(s, "manifest"));
  json_decref(m);
  json_decref(s);
  free(st2), free(w2), free(job);
  farm_stop(&f);
}
END_TEST

/* CURVE keys for a farm: the scheduler's pair and n workers' pairs, the
 * files written under dir (sched.public, w<i>.secret). */
typedef struct curve_keys {
  char sched_pub[41], sched_sec[41];
  char pub[3][41], sec[3][41];
  char allow[200];
  char sched_pub_path[400], sec_path[3][400];
} curve_keys;

static void curve_keys_make(curve_keys *k) {
  ck_assert_int_eq(zmq_curve_keypair(k->sched_pub, k->sched_sec), 0);
  k->allow[0] = '\0';
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(zmq_curve_keypair(k->pub[i], k->sec[i]), 0);
    size_t used = strlen(k->allow);
    snprintf(k->allow + used, sizeof k->allow - used, "%s\n", k->pub[i]);
  }
}

static void curve_keys_write(curve_keys *k, const char *dir) {
  snprintf(k->sched_pub_path, sizeof k->sched_pub_path, "%s/sched.public", dir);
  FILE *fp = fopen(k->sched_pub_path, "w");
  ck_assert_ptr_nonnull(fp);
  fprintf(fp, "%s\n", k->sched_pub);
  fclose(fp);
  for (int i = 0; i < 3; i++) {
    snprintf(k->sec_path[i], sizeof k->sec_path[i], "%s/w%d.secret", dir, i);
    fp = fopen(k->sec_path[i], "w");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp, "%s\n", k->sec[i]);
    fclose(fp);
  }
}

/* With CURVE a restarted scheduler takes each copy's RESULT from the
 * worker its key is bound to, before the worker says READY again: no
 * copy is built twice. */
START_TEST(test_a_verified_build_survives_a_scheduler_restart) {
  curve_keys k;
  curve_keys_make(&k);
  farm f;
  farm_config cfg = {.lease_ms = 8000, .curve_secret = k.sched_sec, .worker_keys = k.allow};
  farm_start(&f, &cfg);
  curve_keys_write(&k, f.dir);
  const char *a[] = {"--curve-secret", k.sec_path[0], "--scheduler-key", k.sched_pub_path, NULL};
  const char *b[] = {"--curve-secret", k.sec_path[1], "--scheduler-key", k.sched_pub_path, NULL};
  farm_start_worker(&f, "w-a", "x86", a);
  farm_start_worker(&f, "w-b", "x86", b);
  char model[72];
  farm_push_model(&f, "model R: restarted\nsleep 1500\n", model);
  char *job = submit_verified(&f, model, "onnx", "team/restarted", 2);
  char k1[200], k2[200];
  snprintf(k1, sizeof k1, "nimble:task:%s.x86:v1", job);
  snprintf(k2, sizeof k2, "nimble:task:%s.x86:v2", job);
  ck_assert(farm_wait_redis_field(&f, k1, "state", "running", 10000));
  ck_assert(farm_wait_redis_field(&f, k2, "state", "running", 10000));
  farm_stop_scheduler(&f, SIGKILL);
  farm_sleep_ms(300);
  farm_start_scheduler(&f);
  json_t *s = farm_wait_job(&f, job, "done", 30000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "%s: %s",
                json_string_value(json_object_get(s, "state")), task_str(s, "error"));
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2); /* the copies kept their leases */
  char d[72];
  json_t *m = pull_manifest(&f, "team/restarted", "x86", d);
  ck_assert_str_eq(d, task_str(s, "manifest"));
  json_decref(m);
  json_decref(s);
  free(job);
  farm_stop(&f);
}
END_TEST

/* With CURVE a worker id belongs to the key that registered it, and a key
 * is one connected worker: one compromised worker cannot pass for the
 * second worker a verified build needs, under its own key or another's id. */
START_TEST(test_one_key_cannot_be_two_workers_of_a_verified_build) {
  curve_keys k;
  curve_keys_make(&k);
  farm f;
  farm_config cfg = {.curve_secret = k.sched_sec, .worker_keys = k.allow};
  farm_start(&f, &cfg);
  curve_keys_write(&k, f.dir);
  const char *a[] = {"--curve-secret", k.sec_path[0], "--scheduler-key", k.sched_pub_path, NULL};
  const char *b[] = {"--curve-secret", k.sec_path[1], "--scheduler-key", k.sched_pub_path, NULL};
  farm_start_worker(&f, "w-a", "x86", a);
  ck_assert(farm_wait_redis_field(&f, "nimble:worker:w-a", "connected", "1", 10000));
  /* Key A again, under a second id, while w-a is connected. */
  farm_start_worker(&f, "w-a2", "x86", a);
  /* Key B under w-a's id. */
  farm_start_worker(&f, "w-a", "x86", b);
  char model[72];
  farm_push_model(&f, "model K: one key\n", model);
  char *job = submit_verified(&f, model, "onnx", "team/onekey", 2);
  farm_sleep_ms(3000);
  json_t *s = farm_wait_job(&f, job, "done", 100, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "running");
  ck_assert_int_eq(task_int(s, "verified"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  char want[200];
  snprintf(want, sizeof want, "worker w-a2 refused: worker key %s is connected as worker 'w-a'",
           k.pub[0]);
  ck_assert_msg(farm_sched_log_contains(&f, want), "no '%s'", want);
  snprintf(want, sizeof want, "worker w-a refused: worker id 'w-a' belongs to another key; refused for key %s",
           k.pub[1]);
  ck_assert_msg(farm_sched_log_contains(&f, want), "no '%s'", want);
  /* The impostor's heartbeats under w-a's id are refused too (they would
   * take over w-a's connection). */
  char logpath[400];
  snprintf(logpath, sizeof logpath, "%s/worker-w-a.log", f.dir);
  FILE *lf = fopen(logpath, "r");
  ck_assert_ptr_nonnull(lf);
  static char logtext[1 << 20];
  size_t ln = fread(logtext, 1, sizeof logtext - 1, lf);
  fclose(lf);
  logtext[ln] = '\0';
  ck_assert_msg(strstr(logtext, "scheduler: PERMISSION_DENIED: worker id 'w-a' belongs to another key"),
                "the impostor's heartbeats were not refused: %s", logtext);
  /* A worker with a key of its own is the second worker. */
  const char *c[] = {"--curve-secret", k.sec_path[2], "--scheduler-key", k.sched_pub_path, NULL};
  farm_start_worker(&f, "w-c", "x86", c);
  json_decref(s);
  s = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "done");
  json_decref(s);
  free(job);
  farm_stop(&f);
}
END_TEST

/* The real compiler: two workers, one compiling on 1 thread and the other
 * on 2 (and each with its own empty kernel cache), agree byte for byte,
 * and so does a local `nimble compile` of the same program. */
START_TEST(test_the_real_compiler_on_two_workers_with_j1_and_j2_agrees_byte_for_byte) {
  const char *build = getenv("NIMBLE_BUILD_DIR"), *src = getenv("NIMBLE_SOURCE_DIR");
  char compiler[512], program[512];
  snprintf(compiler, sizeof compiler, "%s/client/nimble", build);
  snprintf(program, sizeof program, "%s/tests/client/programs/seq_encoder.nir", src);
  if (access(compiler, X_OK) != 0) {
    fprintf(stderr, "skipped: no %s\n", compiler);
    return;
  }
  farm f;
  farm_config cfg = {.lease_ms = 60000};
  farm_start(&f, &cfg);
  char cache1[400], cache2[400], local[400], cmd[4096];
  snprintf(cache1, sizeof cache1, "%s/kcache-1", f.dir);
  snprintf(cache2, sizeof cache2, "%s/kcache-2", f.dir);
  snprintf(local, sizeof local, "%s/local-parts", f.dir);
  /* No address-space limit: in the sanitizer build the real compiler's
   * ASan runtime reserves terabytes of shadow at start and aborts under
   * any RLIMIT_AS (the limit itself is test_farm_failures' business). */
  const char *j1[] = {"--compiler", compiler, "--compile-jobs", "1", "--timeout-s", "300", "--mem-limit-mb", "0", NULL};
  const char *j2[] = {"--compiler", compiler, "--compile-jobs", "2", "--timeout-s", "300", "--mem-limit-mb", "0", NULL};
  setenv("NIMBLE_KERNEL_CACHE", cache1, 1);
  farm_start_worker(&f, "w-j1", "x86", j1);
  setenv("NIMBLE_KERNEL_CACHE", cache2, 1);
  farm_start_worker(&f, "w-j2", "x86", j2);
  unsetenv("NIMBLE_KERNEL_CACHE");
  /* The program as a model blob. */
  FILE *fp = fopen(program, "rb");
  ck_assert_ptr_nonnull(fp);
  static char text[1 << 16];
  size_t tn = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[tn] = '\0';
  char model[72];
  farm_push_model(&f, text, model);
  char *job = submit_verified(&f, model, "nir", "team/real", 2);
  json_t *s = farm_wait_job(&f, job, "done", 150000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "state %s: %s",
                json_string_value(json_object_get(s, "state")), task_str(s, "error"));
  char d[72];
  json_t *m = pull_manifest(&f, "team/real", "x86", d);
  ck_assert_str_eq(d, task_str(s, "manifest"));

  /* A local compile (its own empty kernel cache off) gives the same parts. */
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && '%s' compile '%s' --target=x86 --format=nir --emit-parts '%s' "
           "--no-kernel-cache -j 2 >'%s.log' 2>&1",
           local, compiler, program, local, local);
  ck_assert_int_eq(system(cmd), 0);
  size_t i;
  json_t *l;
  int compared = 0;
  json_array_foreach(json_object_get(m, "layers"), i, l) {
    const char *title = json_string_value(
        json_object_get(json_object_get(l, "annotations"), "org.opencontainers.image.title"));
    ck_assert_ptr_nonnull(title);
    char path[700];
    snprintf(path, sizeof path, "%s/%s", local, title);
    fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "local compile has no %s", title);
    static uint8_t buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    char mine[72];
    sha256_digest(buf, n, mine);
    ck_assert_msg(!strcmp(mine, json_string_value(json_object_get(l, "digest"))),
                  "layer %s: local %s, farm %s", title, mine,
                  json_string_value(json_object_get(l, "digest")));
    compared++;
  }
  ck_assert_int_ge(compared, 3);
  json_decref(m);
  json_decref(s);
  free(job);
  farm_stop(&f);
}
END_TEST

/* ---- the requeue policy (docs/reliability.md, defect 4) ---- */

START_TEST(test_a_store_outage_longer_than_three_deliveries_does_not_fail_the_task) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model O: outage\n", model);
  farm_kill_store(&f, SIGKILL);
  char *job = submit_verified(&f, model, "onnx", "team/outage", 0);
  char tid[160], key[200];
  snprintf(tid, sizeof tid, "%s.x86", job);
  snprintf(key, sizeof key, "nimble:task:%s", tid);
  /* Four retryable failures: three deliveries would have failed it. */
  ck_assert(farm_wait_redis_field(&f, key, "retries", "4", 30000));
  json_t *s = farm_wait_job(&f, job, "done", 100, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "queued");
  json_decref(s);
  farm_start_store(&f);
  s = farm_wait_job(&f, job, "done", 40000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "%s: %s",
                json_string_value(json_object_get(s, "state")), task_str(s, "error"));
  char *attempts = farm_redis_hget(&f, key, "attempts");
  char *retries = farm_redis_hget(&f, key, "retries");
  ck_assert_str_eq(attempts, "1"); /* only the delivery that finished counts */
  ck_assert_int_ge(atoi(retries), 4);
  ck_assert(farm_sched_log_contains(&f, "the delivery not counted"));
  char d[72];
  json_t *m = pull_manifest(&f, "team/outage", "x86", d);
  ck_assert_str_eq(d, task_str(s, "manifest"));
  json_decref(m);
  json_decref(s);
  free(attempts), free(retries), free(job);
  farm_stop(&f);
}
END_TEST

START_TEST(test_retryable_failures_are_bounded_by_max_retries) {
  farm f;
  const char *extra[] = {"--max-retries", "2", NULL};
  farm_config cfg = {.sched_extra = extra};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model B: bounded\n", model);
  farm_kill_store(&f, SIGKILL);
  char *job = submit_verified(&f, model, "onnx", "team/bounded", 0);
  json_t *s = farm_wait_job(&f, job, "failed", 30000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "failed");
  const char *error = task_str(s, "error");
  ck_assert_msg(strstr(error, "failed 3 times") && strstr(error, "--max-retries 2") &&
                    strstr(error, "fetching model"),
                "%s", error);
  json_decref(s);
  free(job);
  farm_stop(&f);
}
END_TEST

/* ---- a result the farm cannot sign ---- */

START_TEST(test_a_result_the_scheduler_cannot_sign_fails_the_job_and_tags_nothing) {
  char dir[] = "/tmp/nimble-verify-sign.XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char keyfile[300];
  snprintf(keyfile, sizeof keyfile, "%s/farm.key", dir);
  uint8_t pub[NIMBLE_SIGN_KEY_BYTES];
  NIMBLE_ASSERT_OK(nimble_sign_keygen(keyfile, pub));
  farm f;
  /* The scheduler's store token is refused: its signature object cannot
   * be pushed, so it cannot sign (workers push with the farm's token). */
  farm_config cfg = {.signing_key = keyfile, .sched_store_token = "not-a-farm-token\n"};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model U: unsignable\n", model);
  char *job = submit_verified(&f, model, "onnx", "team/unsignable", 0);
  json_t *s = farm_wait_job(&f, job, "failed", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(s, "state")), "failed");
  const char *error = task_str(s, "error");
  ck_assert_msg(strstr(error, "signing team/unsignable:x86") && strstr(error, "UNAUTHORIZED"),
                "%s", error);
  /* Nothing published: no tag, no signature, no cache entry. */
  assert_tag_absent(&f, "team/unsignable", "x86");
  assert_tag_absent(&f, "team/unsignable", "x86.sig");
  char tid[160];
  snprintf(tid, sizeof tid, "%s.x86", job);
  char *key = key_of_task(&f, tid), ckey[200];
  snprintf(ckey, sizeof ckey, "nimble:cache:%s", key);
  char *cached = farm_redis_hget(&f, ckey, "manifest");
  ck_assert_ptr_null(cached);
  /* Failed once, not retried: a refused signature is not the store being away. */
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  json_decref(s);
  free(key), free(job);
  farm_stop(&f);
  snprintf(keyfile, sizeof keyfile, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(keyfile), 0);
}
END_TEST

int main(void) {
  if (sodium_init() < 0) return 1;
  Suite *s = suite_create("farm_verify");
  TCase *tc = tcase_create("verify");
  tcase_set_timeout(tc, 170);
  tcase_add_test(tc, test_two_honest_workers_build_identical_bytes_and_the_job_publishes_them);
  tcase_add_test(tc, test_a_worker_that_flips_a_byte_fails_the_job_naming_both_workers);
  tcase_add_test(tc, test_the_verify_policy_waits_for_a_second_worker_and_says_so);
  tcase_add_test(tc, test_a_verified_build_survives_a_scheduler_restart);
  tcase_add_test(tc, test_one_key_cannot_be_two_workers_of_a_verified_build);
  tcase_add_test(tc, test_the_real_compiler_on_two_workers_with_j1_and_j2_agrees_byte_for_byte);
  tcase_add_test(tc, test_a_store_outage_longer_than_three_deliveries_does_not_fail_the_task);
  tcase_add_test(tc, test_retryable_failures_are_bounded_by_max_retries);
  tcase_add_test(tc, test_a_result_the_scheduler_cannot_sign_fails_the_job_and_tags_nothing);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
