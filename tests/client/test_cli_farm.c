/* `nimble submit`, `nimble status` and `nimble fetch` against a real farm on
 * loopback (redis-server, nimble-store, nimble-scheduler, nimble-worker with
 * farm_test_compiler, the documented test stand-in for the compiler; see
 * tests/scheduler/farm_harness.h). The client is the real binary; what it
 * prints is checked against the store (pulled with the store client), the
 * scheduler's own STATUS answers and test_compiler's output rules. Each test
 * starts its own farm and stops every process by pid. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli_farm_run.h"
#include "nimble/manifest.h"
#include "nimble_test.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ASSERT_CONTAINS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in:\n%s", (needle), (hay))

static const char *const kTargets[] = {"x86", "aarch64", "cuda"};

/* The farm with the client token "test-token" (the store's token too) and
 * one worker for the three targets (and cuda:arch=sm_90). */
static void start(farm *f) {
  farm_config cfg = {.token = "test-token\n"};
  farm_start(f, &cfg);
  farm_start_worker(f, "w1", "x86,aarch64,cuda,cuda:arch=sm_90", NULL);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/* The reference line of `target` in submit's output: "TARGET REF[ (cached)]".
 * Writes the manifest digest and returns 1 when the line says cached. */
static int reference_of(farm *f, const char *out, const char *name, const char *target,
                        char manifest[72]) {
  char prefix[512];
  snprintf(prefix, sizeof prefix, "%s %s/%s:%s@", target, f->store_url, name, target);
  const char *p = out;
  for (;;) {
    ck_assert_msg(p && *p, "no line '%s...' in:\n%s", prefix, out);
    if (!strncmp(p, prefix, strlen(prefix))) break;
    p = strchr(p, '\n');
    if (p) p++;
  }
  p += strlen(prefix);
  ck_assert_msg(strncmp(p, "sha256:", 7) == 0 && strlen(p) >= 71, "bad reference in %s", out);
  memcpy(manifest, p, 71);
  manifest[71] = '\0';
  nimble_digest_t d;
  NIMBLE_ASSERT_OK(nimble_digest_parse(manifest, &d));
  const char *eol = strchr(p, '\n');
  return eol && (size_t)(eol - p) > 71 && !strncmp(p + 71, " (cached)", 9);
}

/* The store serves `manifest` under repo; it is for `target` and the tag
 * names the same manifest. */
static void check_store_serves(farm *f, const char *repo, const char *manifest, const char *target) {
  uint8_t *bytes;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, repo, manifest, &bytes, &n, NULL, NULL));
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(bytes, n, &m));
  NIMBLE_ASSERT_OK(nimble_manifest_check_target(&m, target));
  nimble_manifest_deinit(&m);
  free(bytes);
  nimble_digest_t by_tag;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, repo, target, &bytes, &n, NULL, &by_tag));
  free(bytes);
  char tagged[72];
  nimble_digest_format(&by_tag, tagged);
  ck_assert_str_eq(tagged, manifest);
}

static char *model_file(const char *name, const char *text) { return cli_write_file(name, text); }

START_TEST(test_submit_to_three_targets_prints_three_references_the_store_serves) {
  farm f;
  start(&f);
  char *model = model_file("three.onnx", "model: three targets from the cli\n");
  cli_result r =
      cli_run_on_farm(&f, "test-token", ARGS("submit", model, "--targets=x86,aarch64,cuda", "--name",
                                    "team/cli", "--timeout", "60"));
  ck_assert_msg(r.exit_code == 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.exit_code, r.out, r.err);
  ASSERT_CONTAINS(r.err, "uploaded to the store");
  for (int i = 0; i < 3; i++) {
    char manifest[72];
    ck_assert_int_eq(reference_of(&f, r.out, "team/cli", kTargets[i], manifest), 0);
    check_store_serves(&f, "team/cli", manifest, kTargets[i]);
  }
  /* The model is in `models`, under the digest of its bytes. */
  nimble_digest_t d;
  const char *text = "model: three targets from the cli\n";
  nimble_digest_compute(text, strlen(text), &d);
  int exists = 0;
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(f.store, "models", &d, &exists, NULL));
  ck_assert_int_eq(exists, 1);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 3);
  cli_result_free(&r);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_a_resubmission_is_answered_from_the_cache_quickly_and_says_cached) {
  farm f;
  start(&f);
  char *model = model_file("again.onnx", "model: submitted twice\n");
  const char *const *args =
      ARGS("submit", model, "--targets=x86,aarch64,cuda", "--name", "team/again", "--timeout", "60");
  cli_result first = cli_run_on_farm(&f, "test-token", args);
  ck_assert_msg(first.exit_code == 0, "first: %s", first.err);
  long long t0 = now_ms();
  cli_result second = cli_run_on_farm(&f, "test-token", args);
  long long took = now_ms() - t0;
  ck_assert_msg(second.exit_code == 0, "second: %s", second.err);
  ck_assert_msg(took < 5000, "a cached submit took %lld ms", took);
  ASSERT_CONTAINS(second.err, "is already in the store");
  ASSERT_CONTAINS(second.err, "answered from the cache (cached)");
  for (int i = 0; i < 3; i++) {
    char m1[72], m2[72];
    ck_assert_int_eq(reference_of(&f, first.out, "team/again", kTargets[i], m1), 0);
    ck_assert_int_eq(reference_of(&f, second.out, "team/again", kTargets[i], m2), 1);
    ck_assert_str_eq(m1, m2);
  }
  /* Nothing was compiled the second time. */
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 3);
  cli_result_free(&first);
  cli_result_free(&second);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_submit_json_gives_job_state_model_and_a_reference_per_target) {
  farm f;
  start(&f);
  const char *text = "model: json output\n";
  char *model = model_file("json.onnx", text);
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=x86,cuda:arch=sm_90", "--name",
                             "team/json", "--json", "--timeout", "60"));
  ck_assert_msg(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  json_error_t err;
  json_t *doc = json_loads(r.out, 0, &err);
  ck_assert_msg(doc != NULL, "stdout is not one JSON document (%s):\n%s", err.text, r.out);
  const char *job = json_string_value(json_object_get(doc, "job"));
  ck_assert(job && !strncmp(job, "j-", 2));
  ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "done");
  ck_assert_str_eq(json_string_value(json_object_get(doc, "name")), "team/json");
  ck_assert(json_is_false(json_object_get(doc, "cached")));
  nimble_digest_t d;
  nimble_digest_compute(text, strlen(text), &d);
  char want_model[72];
  nimble_digest_format(&d, want_model);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "model")), want_model);

  /* The scheduler's own answer for the job, asked independently. */
  json_t *st = farm_wait_job(&f, job, "done", 10000, "test-token");
  json_t *targets = json_object_get(doc, "targets");
  ck_assert_uint_eq(json_array_size(targets), 2);
  const char *specs[] = {"x86", "cuda:arch=sm_90"};
  for (size_t i = 0; i < 2; i++) {
    json_t *t = json_array_get(targets, i);
    ck_assert_str_eq(json_string_value(json_object_get(t, "target")), specs[i]);
    ck_assert_str_eq(json_string_value(json_object_get(t, "state")), "done");
    ck_assert(json_is_false(json_object_get(t, "cached")));
    ck_assert_ptr_null(json_object_get(t, "error"));
    const char *manifest = json_string_value(json_object_get(t, "manifest"));
    json_t *task = json_array_get(json_object_get(st, "tasks"), i);
    ck_assert_str_eq(json_string_value(json_object_get(task, "target")), specs[i]);
    ck_assert_str_eq(manifest, json_string_value(json_object_get(task, "manifest")));
    /* The tag: the kind alone without options, kind-<16 hex> with them. */
    const char *tag = json_string_value(json_object_get(t, "tag"));
    if (i == 0) {
      ck_assert_str_eq(tag, "x86");
    } else {
      ck_assert_uint_eq(strlen(tag), 5 + 16);
      ck_assert(!strncmp(tag, "cuda-", 5));
      nimble_digest_t h;
      nimble_digest_compute(specs[1], strlen(specs[1]), &h);
      char hex[65];
      nimble_digest_format_hex(&h, hex);
      ck_assert(!strncmp(tag + 5, hex, 16));
    }
    char want_ref[512];
    snprintf(want_ref, sizeof want_ref, "%s/team/json:%s@%s", f.store_url, tag, manifest);
    ck_assert_str_eq(json_string_value(json_object_get(t, "reference")), want_ref);
  }
  /* Progress went to stderr as JSON lines, one object each. */
  char *line = strtok(r.err, "\n");
  int objects = 0;
  for (; line; line = strtok(NULL, "\n")) {
    json_t *o = json_loads(line, 0, &err);
    ck_assert_msg(o != NULL, "stderr line is not JSON: %s", line);
    ck_assert(json_string_value(json_object_get(o, "target")) != NULL);
    json_decref(o);
    objects++;
  }
  ck_assert_int_ge(objects, 4); /* pending and done for each target at least */
  json_decref(st);
  json_decref(doc);
  cli_result_free(&r);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_submit_no_wait_prints_the_job_and_status_follows_it_to_done) {
  farm f;
  start(&f);
  char *model = model_file("later.onnx", "model: later\nsleep 2000\n");
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=x86,aarch64", "--name", "team/later",
                             "--no-wait"));
  ck_assert_msg(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  char job[64];
  ck_assert_int_eq(sscanf(r.out, "%63s", job), 1);
  ck_assert(!strncmp(job, "j-", 2));
  char want_out[80];
  snprintf(want_out, sizeof want_out, "%s\n", job);
  ck_assert_str_eq(r.out, want_out);
  cli_result_free(&r);

  /* Right away the job is not done (the compiler sleeps 2 s). */
  cli_result s = cli_run_on_farm(&f, "test-token", ARGS("status", job));
  ck_assert_int_eq(s.exit_code, 0);
  char head[96];
  snprintf(head, sizeof head, "job %s: ", job);
  ck_assert_msg(!strncmp(s.out, head, strlen(head)), "%s", s.out);
  ck_assert_msg(strstr(s.out, ": done\n") == NULL, "done too soon:\n%s", s.out);
  cli_result_free(&s);

  json_t *st = farm_wait_job(&f, job, "done", 20000, "test-token");
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  s = cli_run_on_farm(&f, "test-token", ARGS("status", job));
  ck_assert_int_eq(s.exit_code, 0);
  snprintf(head, sizeof head, "job %s: done\n", job);
  ck_assert_msg(!strncmp(s.out, head, strlen(head)), "%s", s.out);
  for (size_t i = 0; i < 2; i++) {
    json_t *task = json_array_get(json_object_get(st, "tasks"), i);
    char line[256];
    snprintf(line, sizeof line, "  %-24s %-9s %s\n",
             json_string_value(json_object_get(task, "target")), "done",
             json_string_value(json_object_get(task, "manifest")));
    ASSERT_CONTAINS(s.out, line);
  }
  cli_result_free(&s);

  /* --json is the scheduler's JOB_STATUS body. */
  s = cli_run_on_farm(&f, "test-token", ARGS("status", "--json", job));
  ck_assert_int_eq(s.exit_code, 0);
  json_t *got = json_loads(s.out, 0, NULL);
  ck_assert_msg(got != NULL, "%s", s.out);
  ck_assert(json_equal(got, st));
  json_decref(got);
  cli_result_free(&s);

  /* An unknown job: the scheduler's NOT_FOUND, exit 1. */
  s = cli_run_on_farm(&f, "test-token", ARGS("status", "j-999"));
  ck_assert_int_eq(s.exit_code, 1);
  ASSERT_CONTAINS(s.err, "j-999");
  cli_result_free(&s);
  json_decref(st);
  free(model);
  farm_stop(&f);
}
END_TEST

/* Reads a whole file; caller frees. */
static uint8_t *slurp(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  ck_assert_msg(fp != NULL, "cannot open %s", path);
  uint8_t *buf = malloc(1 << 20);
  *n = fread(buf, 1, 1 << 20, fp);
  fclose(fp);
  return buf;
}

/* The user's path for a signing farm: `nimble keys generate` makes the
 * farm's key, the scheduler signs with it, and `nimble fetch` with the
 * printed line as its trusted keys fetches; with another key's line it
 * refuses (exit 1, naming the artifact and the key) and writes nothing;
 * without keys it fetches with one warning line. */
START_TEST(test_fetch_with_trusted_keys_takes_only_what_the_farm_signed) {
  char key[512], other[512], keys[512], foreign[512];
  snprintf(key, sizeof key, "%s/farm.key", cli_scratch_dir());
  snprintf(other, sizeof other, "%s/other.key", cli_scratch_dir());
  unlink(key);
  unlink(other);
  cli_result k = cli_run(ARGS("keys", "generate", key, "farm"), NULL);
  ck_assert_msg(k.exit_code == 0, "%s", k.err);
  char *keys_path = cli_write_file("trusted.keys", k.out);
  snprintf(keys, sizeof keys, "%s", keys_path);
  free(keys_path);
  cli_result o = cli_run(ARGS("keys", "generate", other, "other"), NULL);
  ck_assert_int_eq(o.exit_code, 0);
  keys_path = cli_write_file("foreign.keys", o.out);
  snprintf(foreign, sizeof foreign, "%s", keys_path);
  free(keys_path);
  char farm_pub[65];
  snprintf(farm_pub, sizeof farm_pub, "%.64s", k.out + strlen("ed25519 "));

  farm f;
  farm_config cfg = {.token = "test-token\n", .signing_key = key};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  char *model = model_file("signed.onnx", "model: signed\n");
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=x86", "--name", "team/signed", "--timeout", "60"));
  ck_assert_msg(r.exit_code == 0, "%s", r.err);
  char manifest[72];
  reference_of(&f, r.out, "team/signed", "x86", manifest);
  cli_result_free(&r);

  char dir[512];
  snprintf(dir, sizeof dir, "%s/signed-parts", cli_scratch_dir());
  r = cli_run_on_farm(&f, "test-token",
                      ARGS("fetch", "team/signed", "--target=x86", "--trusted-keys", keys, "-o", dir));
  ck_assert_msg(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  ASSERT_CONTAINS(r.out, manifest);
  ck_assert_msg(strstr(r.err, "not verified") == NULL, "%s", r.err);
  cli_result_free(&r);

  char dir2[512];
  snprintf(dir2, sizeof dir2, "%s/foreign-parts", cli_scratch_dir());
  r = cli_run_on_farm(&f, "test-token",
                      ARGS("fetch", "team/signed", "--target=x86", "--trusted-keys", foreign, "-o", dir2));
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "team/signed:x86@");
  ASSERT_CONTAINS(r.err, farm_pub);
  ASSERT_CONTAINS(r.err, "not trusted");
  ck_assert_msg(access(dir2, F_OK) != 0, "%s was written", dir2);
  cli_result_free(&r);

  r = cli_run_on_farm(&f, "test-token", ARGS("fetch", "team/signed", "--target=x86", "-o", dir2));
  ck_assert_int_eq(r.exit_code, 0);
  ASSERT_CONTAINS(r.err, "warning: team/signed:x86: the publisher of this artifact is not verified");
  cli_result_free(&r);
  free(model);
  cli_result_free(&k);
  cli_result_free(&o);
  farm_stop(&f);
}
END_TEST

START_TEST(test_fetch_writes_parts_whose_digests_match_the_manifest) {
  farm f;
  start(&f);
  const char *text = "model: fetch me\n";
  char *model = model_file("fetch.onnx", text);
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=x86,aarch64", "--name", "team/fetch",
                             "--timeout", "60"));
  ck_assert_msg(r.exit_code == 0, "%s", r.err);
  char manifest[72];
  reference_of(&f, r.out, "team/fetch", "aarch64", manifest);
  cli_result_free(&r);

  char dir[512];
  snprintf(dir, sizeof dir, "%s/parts-aarch64", cli_scratch_dir());
  r = cli_run_on_farm(&f, "test-token", ARGS("fetch", "team/fetch", "--target=aarch64", "-o", dir));
  ck_assert_msg(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
  ASSERT_CONTAINS(r.out, manifest);
  cli_result_free(&r);

  /* -o FILE.nimble joins the parts into one executable and has the
   * runtime's loader check it first: test_compiler's stand-in parts are
   * not an executable, so it is refused, and neither the file nor the
   * temporary parts directory is left behind (the real compiler's
   * artifact is fetched this way by scripts/farm-run.sh). */
  char file[512];
  snprintf(file, sizeof file, "%s/fetched.nimble", cli_scratch_dir());
  r = cli_run_on_farm(&f, "test-token", ARGS("fetch", "team/fetch", "--target=aarch64", "-o", file));
  ck_assert_int_eq(r.exit_code, 1);
  ck_assert_msg(strstr(r.err, "part header") || strstr(r.err, "does not load"), "%s", r.err);
  ck_assert_msg(access(file, F_OK) != 0, "%s was written", file);
  char listing[700];
  snprintf(listing, sizeof listing, "ls -d '%s'.parts-* > /dev/null 2>&1", file);
  ck_assert_msg(system(listing) != 0, "a parts directory beside %s was left behind", file);
  cli_result_free(&r);

  char path[700];
  size_t n;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  uint8_t *bytes = slurp(path, &n);
  nimble_digest_t d, want;
  nimble_digest_compute(bytes, n, &d);
  NIMBLE_ASSERT_OK(nimble_digest_parse(manifest, &want));
  ck_assert(nimble_digest_equal(&d, &want));
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(bytes, n, &m));
  free(bytes);
  snprintf(path, sizeof path, "%s/config.json", dir);
  bytes = slurp(path, &n);
  nimble_digest_compute(bytes, n, &d);
  ck_assert(nimble_digest_equal(&d, &m.config.digest));
  free(bytes);
  ck_assert_uint_ge(m.layer_count, 3);
  int saw_bytecode = 0;
  for (size_t i = 0; i < m.layer_count; i++) {
    const char *title = nimble_descriptor_annotation(&m.layers[i], NIMBLE_ANNOTATION_TITLE);
    snprintf(path, sizeof path, "%s/%s", dir, title);
    bytes = slurp(path, &n);
    ck_assert_uint_eq(n, (size_t)m.layers[i].size);
    nimble_digest_compute(bytes, n, &d);
    ck_assert_msg(nimble_digest_equal(&d, &m.layers[i].digest), "layer %s differs", title);
    if (!strcmp(title, "bytecode")) {
      /* test_compiler's rule for the bytecode part. */
      nimble_digest_t md;
      nimble_digest_compute(text, strlen(text), &md);
      char hex[65], want_text[256];
      nimble_digest_format_hex(&md, hex);
      snprintf(want_text, sizeof want_text, "NIMBLE-TEST-BYTECODE\ntarget=aarch64\nmodel=%s\n", hex);
      ck_assert_uint_eq(n, strlen(want_text));
      ck_assert(!memcmp(bytes, want_text, n));
      saw_bytecode = 1;
    }
    free(bytes);
  }
  ck_assert(saw_bytecode);
  nimble_manifest_deinit(&m);

  /* By digest: the same manifest. */
  char dir2[512];
  snprintf(dir2, sizeof dir2, "%s/parts-by-digest", cli_scratch_dir());
  r = cli_run_on_farm(&f, "test-token",
             ARGS("fetch", "team/fetch", "--target=aarch64", "--digest", manifest, "-o", dir2,
                  "--json"));
  ck_assert_msg(r.exit_code == 0, "%s", r.err);
  json_t *doc = json_loads(r.out, 0, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "manifest")), manifest);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "directory")), dir2);
  json_decref(doc);
  cli_result_free(&r);

  /* A target the repository has no artifact for, and a manifest that is not
   * for the target asked. */
  r = cli_run_on_farm(&f, "test-token", ARGS("fetch", "team/fetch", "--target=cuda", "-o", dir2));
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "no artifact team/fetch for target 'cuda'");
  cli_result_free(&r);
  r = cli_run_on_farm(&f, "test-token",
             ARGS("fetch", "team/fetch", "--target=x86", "--digest", manifest, "-o", dir2));
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "not for target 'x86'");
  cli_result_free(&r);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_an_unknown_target_is_a_usage_error_naming_it) {
  char *model = model_file("any.onnx", "model: never sent\n");
  cli_result r = cli_run(ARGS("--scheduler", "tcp://127.0.0.1:1", "--store", "http://127.0.0.1:1",
                              "submit", model, "--targets=x86,riscv64"),
                         NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "riscv64");
  ASSERT_CONTAINS(r.err, "Usage: nimble submit");
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
  r = cli_run(ARGS("submit", model), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "no targets given");
  cli_result_free(&r);
  r = cli_run(ARGS("fetch", "team/x", "--target=mips"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "mips");
  cli_result_free(&r);
  r = cli_run(ARGS("submit", model, "--targets=x86", "--name", "Bad Name"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "name");
  cli_result_free(&r);
  free(model);
}
END_TEST

START_TEST(test_a_wrong_token_exits_7_saying_the_token_was_refused) {
  farm f;
  start(&f);
  char *model = model_file("token.onnx", "model: token\n");
  /* The store lets anyone read, so the model upload (the store has the
   * model after this first push) is skipped and the scheduler refuses. */
  farm_push_model(&f, "model: token\n", (char[72]){0});
  cli_result r = cli_run_on_farm(&f, "not-the-token", ARGS("submit", model, "--targets=x86", "--name",
                                                  "team/token", "--timeout", "20"));
  ck_assert_int_eq(r.exit_code, 7);
  ASSERT_CONTAINS(r.err, "the scheduler refused the request");
  ASSERT_CONTAINS(r.err, "token is not valid");
  cli_result_free(&r);
  /* A model the store lacks: the store refuses the upload, also 7. */
  char *model2 = model_file("token2.onnx", "model: token, not in the store\n");
  r = cli_run_on_farm(&f, "not-the-token", ARGS("submit", model2, "--targets=x86", "--name", "team/token"));
  ck_assert_int_eq(r.exit_code, 7);
  ASSERT_CONTAINS(r.err, "uploading model");
  ASSERT_CONTAINS(r.err, "401");
  cli_result_free(&r);
  r = cli_run_on_farm(&f, "not-the-token", ARGS("status", "j-1"));
  ck_assert_int_eq(r.exit_code, 7);
  cli_result_free(&r);
  free(model);
  free(model2);
  farm_stop(&f);
}
END_TEST

/* A model over the store's blob limit (64 KiB here): submit fails saying
 * so, the store keeps nothing of it, no job starts, and the farm goes on
 * serving the next submission. */
START_TEST(test_an_oversized_model_upload_is_refused_and_loses_nothing) {
  farm f;
  farm_config cfg = {.token = "test-token\n", .store_args = "--max-blob-size 64K"};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  size_t n = 200 * 1024;
  char *big = malloc(n + 1);
  ck_assert_ptr_nonnull(big);
  memset(big, 'x', n);
  memcpy(big, "model: too big\n", 15);
  big[n - 1] = '\n';
  big[n] = '\0';
  char *model = model_file("big.onnx", big);
  cli_result r = cli_run_on_farm(&f, "test-token",
                                 ARGS("submit", model, "--targets=x86", "--name", "team/big", "--timeout", "30"));
  ck_assert_msg(r.exit_code != 0, "submit of an oversized model succeeded:\n%s", r.out);
  ASSERT_CONTAINS(r.err, "uploading model");
  ASSERT_CONTAINS(r.err, "413");
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
  nimble_digest_t d;
  nimble_digest_compute(big, n, &d);
  int exists = 1;
  NIMBLE_ASSERT_OK(nimble_store_blob_exists(f.store, "models", &d, &exists, NULL));
  ck_assert_int_eq(exists, 0);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 0);
  /* The farm is unharmed: a model under the limit compiles. */
  char *small = model_file("small.onnx", "model: small enough\n");
  r = cli_run_on_farm(&f, "test-token",
                      ARGS("submit", small, "--targets=x86", "--name", "team/small", "--timeout", "30"));
  ck_assert_msg(r.exit_code == 0, "stderr: %s", r.err);
  ASSERT_CONTAINS(r.out, "team/small:x86@sha256:");
  cli_result_free(&r);
  free(small);
  free(model);
  free(big);
  farm_stop(&f);
}
END_TEST

/* A loopback TCP port nothing listens on (bound then closed). */
static int closed_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(s, (struct sockaddr *)&a, &len);
  close(s);
  return ntohs(a.sin_port);
}

START_TEST(test_a_scheduler_or_store_that_is_down_gives_its_own_exit_code_in_time) {
  farm f;
  start(&f);
  char *model = model_file("down.onnx", "model: nobody listens\n");
  char sched[64];
  snprintf(sched, sizeof sched, "tcp://127.0.0.1:%d", closed_port());
  long long t0 = now_ms();
  cli_result r = cli_run(ARGS("--scheduler", sched, "--store", f.store_url, "--token",
                              "test-token", "submit", model, "--targets=x86", "--timeout", "2"),
                         NULL);
  long long took = now_ms() - t0;
  ck_assert_int_eq(r.exit_code, 5);
  ASSERT_CONTAINS(r.err, "did not answer within 2.0 s");
  ASSERT_CONTAINS(r.err, sched);
  ck_assert_msg(took < 8000, "took %lld ms", took);
  cli_result_free(&r);

  char store[64];
  snprintf(store, sizeof store, "http://127.0.0.1:%d", closed_port());
  r = cli_run(ARGS("--scheduler", f.clients_ep, "--store", store, "submit", model,
                   "--targets=x86"),
              NULL);
  ck_assert_int_eq(r.exit_code, 6);
  ASSERT_CONTAINS(r.err, store);
  cli_result_free(&r);
  r = cli_run(ARGS("--store", store, "fetch", "team/x", "--target=x86", "-o",
                   "/nonexistent/never"),
              NULL);
  ck_assert_int_eq(r.exit_code, 6);
  cli_result_free(&r);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_a_model_the_compiler_rejects_shows_its_error_per_target_and_fails) {
  farm f;
  start(&f);
  /* test_compiler prints the text after "fail" and exits 1. */
  char *model = model_file("garbage.onnx", "\x01\x02garbage\nfail not an ONNX model: bad magic\n");
  cli_result r = cli_run_on_farm(&f, "test-token", ARGS("submit", model, "--targets=x86,aarch64,cuda",
                                               "--name", "team/garbage", "--timeout", "60"));
  ck_assert_int_eq(r.exit_code, 1);
  ck_assert_str_eq(r.out, "");
  for (int i = 0; i < 3; i++) {
    char line[128];
    snprintf(line, sizeof line, "nimble: target '%s' failed:", kTargets[i]);
    ASSERT_CONTAINS(r.err, line);
  }
  const char *p = r.err;
  int count = 0;
  while ((p = strstr(p, "not an ONNX model: bad magic")) != NULL) {
    count++;
    p++;
  }
  ck_assert_int_ge(count, 3);
  cli_result_free(&r);
  free(model);
  farm_stop(&f);
}
END_TEST

START_TEST(test_options_reach_the_compiler_and_a_wait_past_the_timeout_fails_naming_the_job) {
  farm f;
  start(&f);
  char *model = model_file("opts.onnx", "model: options\n");
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=x86", "--name", "team/opts", "--option",
                             "opt_level=3", "--option", "fast_math=true", "--option",
                             "layout=nchw", "--timeout", "60"));
  ck_assert_msg(r.exit_code == 0, "%s", r.err);
  ck_assert_int_eq(farm_count_compiles(&f, "option=opt_level=3"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, "option=fast_math=true"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, "option=layout=nchw"), 1);
  cli_result_free(&r);
  r = cli_run_on_farm(&f, "test-token", ARGS("submit", model, "--targets=x86", "--option", "broken"));
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "'broken' is not KEY=VALUE");
  cli_result_free(&r);

  /* The compiler sleeps 5 s; the client gives up after 2 and says where
   * to look. */
  char *slow = model_file("slow.onnx", "model: slow\nsleep 5000\n");
  long long t0 = now_ms();
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", slow, "--targets=x86", "--name", "team/slow", "--timeout", "2"));
  long long took = now_ms() - t0;
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "did not finish within 2 s");
  ASSERT_CONTAINS(r.err, "nimble status j-");
  ck_assert_msg(took < 6000, "took %lld ms", took);
  cli_result_free(&r);
  free(slow);
  free(model);
  farm_stop(&f);
}
END_TEST

/* A target no connected worker serves: the task waits in its queue and the
 * client says why it is not moving; a worker that joins later takes it. */
START_TEST(test_a_target_without_a_worker_says_so_and_completes_when_one_joins) {
  farm f;
  farm_config cfg = {.token = "test-token\n"};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w-x86", "x86", NULL);
  char *model = model_file("lonely.onnx", "model: lonely\n");
  cli_result r = cli_run_on_farm(&f, "test-token",
                        ARGS("submit", model, "--targets=aarch64", "--name", "team/lonely",
                             "--timeout", "2"));
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "aarch64: queued - no worker for this target is connected");
  ASSERT_CONTAINS(r.err, "did not finish within 2 s");
  const char *at = strstr(r.err, "nimble status j-");
  ck_assert_msg(at != NULL, "%s", r.err);
  char job[64];
  ck_assert_int_eq(sscanf(at + strlen("nimble status "), "%63[a-z0-9-]", job), 1);
  cli_result_free(&r);

  cli_result s = cli_run_on_farm(&f, "test-token", ARGS("status", job));
  ck_assert_int_eq(s.exit_code, 0);
  ASSERT_CONTAINS(s.out, "queued    (no worker for this target is connected)");
  cli_result_free(&s);
  s = cli_run_on_farm(&f, "test-token", ARGS("status", "--json", job));
  json_t *got = json_loads(s.out, 0, NULL);
  ck_assert_msg(got != NULL, "%s", s.out);
  json_t *task = json_array_get(json_object_get(got, "tasks"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(task, "state")), "queued");
  ck_assert_int_eq(json_integer_value(json_object_get(task, "workers")), 0);
  json_decref(got);
  cli_result_free(&s);

  /* Nothing was lost: an aarch64 worker joins and the job finishes. */
  farm_start_worker(&f, "w-a64", "aarch64", NULL);
  json_t *st = farm_wait_job(&f, job, "done", 20000, "test-token");
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  task = json_array_get(json_object_get(st, "tasks"), 0);
  ck_assert_ptr_null(json_object_get(task, "workers"));
  json_decref(st);
  free(model);
  farm_stop(&f);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli_farm");
  TCase *tc = tcase_create("farm");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_submit_to_three_targets_prints_three_references_the_store_serves);
  tcase_add_test(tc, test_a_resubmission_is_answered_from_the_cache_quickly_and_says_cached);
  tcase_add_test(tc, test_submit_json_gives_job_state_model_and_a_reference_per_target);
  tcase_add_test(tc, test_submit_no_wait_prints_the_job_and_status_follows_it_to_done);
  tcase_add_test(tc, test_fetch_writes_parts_whose_digests_match_the_manifest);
  tcase_add_test(tc, test_fetch_with_trusted_keys_takes_only_what_the_farm_signed);
  tcase_add_test(tc, test_an_unknown_target_is_a_usage_error_naming_it);
  tcase_add_test(tc, test_a_wrong_token_exits_7_saying_the_token_was_refused);
  tcase_add_test(tc, test_an_oversized_model_upload_is_refused_and_loses_nothing);
  tcase_add_test(tc, test_a_scheduler_or_store_that_is_down_gives_its_own_exit_code_in_time);
  tcase_add_test(tc, test_a_model_the_compiler_rejects_shows_its_error_per_target_and_fails);
  tcase_add_test(tc, test_options_reach_the_compiler_and_a_wait_past_the_timeout_fails_naming_the_job);
  tcase_add_test(tc, test_a_target_without_a_worker_says_so_and_completes_when_one_joins);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
