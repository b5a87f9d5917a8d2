/* Tuning records on the farm (docs/farm.md, "Tuning records"): `nimble
 * tune-records import|list|export` against a real farm on loopback
 * (redis-server, nimble-store, nimble-scheduler, nimble-worker with
 * farm_test_compiler, the compiler's test stand-in; see
 * tests/scheduler/farm_harness.h). What the client prints and writes is
 * checked against the hand-written records below, and against Redis read
 * directly; what a tune=true compile was handed is the file the stand-in
 * copies from its --tune-records. Case "real" (a ctest test of its own)
 * runs the real compiler on the reference CNN instead. Each test starts
 * its own farm and stops every process by pid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
#include <unistd.h>

#include "cli_farm_run.h"
#include "nimble/manifest.h"
#include "nimble/tune_record.h"
#include "nimble_test.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ASSERT_CONTAINS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in:\n%s", (needle), (hay))

#define SIG_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SIG_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define SIG_C "00000000111111112222222233333333444444445555555566666666777777aa"
#define CPU_A "skylake-avx512/1a2b3c4d"
#define CPU_B "znver4/0badf00d"

/* Two records for two CPUs, as a user would write them (B with a size
 * bucket: its own schedule for outputs of at most 4096 elements). */
#define REC_A                                                                                   \
  "{\"signature\":\"" SIG_A "\",\"target\":\"x86\",\"cpu\":\"" CPU_A "\","                      \
  "\"schedule\":{\"parallel\":false,\"min_task_work\":4096,\"conv_block\":262144,\"vector_width\":16}," \
  "\"default_us\":120.5,\"tuned_us\":98.25,\"threads\":2,\"kernel\":\"fused__conv2d_add__3\"}"
#define REC_B                                                                                   \
  "{\"signature\":\"" SIG_B "\",\"target\":\"x86\",\"cpu\":\"" CPU_B "\","                      \
  "\"schedule\":{\"parallel\":true,\"min_task_work\":65536,\"conv_block\":1024,"              \
  "\"avx512_clone\":\"yes\"},\"buckets\":[{\"max_elements\":4096,\"schedule\":{\"parallel\":false,"         \
  "\"min_task_work\":16384,\"conv_block\":65536,\"interleave\":2}}],"                                   \
  "\"default_us\":33.1,\"tuned_us\":31.75,\"threads\":4}"
#define DOC(...) "{\"format\":\"nimble.tune-records.v1\",\"records\":[" __VA_ARGS__ "]}"

/* The values REC_A and REC_B hold, written out again for comparison. */
typedef struct expect {
  const char *sig, *cpu, *kernel;
  int parallel;
  long long min_task_work, conv_block;
  double default_us, tuned_us;
  int threads;
  int clone, vector_width;
  long long bucket_max; /* its one bucket's max_elements, 0: no bucket */
  int bucket_parallel, bucket_interleave;
} expect;
static const expect kA = {SIG_A, CPU_A, "fused__conv2d_add__3", 0, 4096, 262144, 120.5, 98.25, 2,
                          NIMBLE_TUNE_CLONE_AUTO, 16, 0, 0, 0};
static const expect kB = {SIG_B, CPU_B, "", 1, 65536, 1024, 33.1, 31.75, 4, NIMBLE_TUNE_CLONE_YES, 0, 4096, 0, 2};

static void check_record(const nimble_tune_record_t *r, const expect *e) {
  ck_assert_str_eq(r->signature, e->sig);
  ck_assert_str_eq(r->target, "x86");
  ck_assert_str_eq(r->cpu, e->cpu);
  ck_assert_str_eq(r->kernel, e->kernel);
  ck_assert_int_eq(r->schedule.parallel, e->parallel);
  ck_assert_int_eq(r->schedule.min_task_work, e->min_task_work);
  ck_assert_int_eq(r->schedule.conv_block, e->conv_block);
  ck_assert_msg(r->default_us == e->default_us, "default_us %.17g, wrote %.17g", r->default_us, e->default_us);
  ck_assert_msg(r->tuned_us == e->tuned_us, "tuned_us %.17g, wrote %.17g", r->tuned_us, e->tuned_us);
  ck_assert_int_eq(r->threads, e->threads);
  ck_assert_int_eq(r->schedule.avx512_clone, e->clone);
  ck_assert_int_eq(r->schedule.vector_width, e->vector_width);
  ck_assert_int_eq(r->num_buckets, e->bucket_max ? 1 : 0);
  if (e->bucket_max) {
    ck_assert_int_eq(r->buckets[0].max_elements, e->bucket_max);
    ck_assert_int_eq(r->buckets[0].schedule.parallel, e->bucket_parallel);
    ck_assert_int_eq(r->buckets[0].schedule.interleave, e->bucket_interleave);
  }
}

/* Exactly the records in `want` (any order). */
static void check_records(const nimble_tune_record_t *r, size_t n, const expect *const *want, size_t nwant) {
  ck_assert_uint_eq(n, nwant);
  for (size_t k = 0; k < nwant; k++) {
    size_t i = 0;
    while (i < n && strcmp(r[i].signature, want[k]->sig)) i++;
    ck_assert_msg(i < n, "record %s is missing", want[k]->sig);
    check_record(&r[i], want[k]);
  }
}

/* The farm with the client token "test-token". */
static void start(farm *f, int with_worker) {
  farm_config cfg = {.token = "test-token\n"};
  farm_start(f, &cfg);
  if (with_worker) farm_start_worker(f, "w1", "x86", NULL);
}


#define ASSERT_EXIT(r, code) \
  ck_assert_msg((r).exit_code == (code), "exit %d\nstdout:\n%s\nstderr:\n%s", (r).exit_code, (r).out, (r).err)

/* `list --json`, parsed as a records document. */
static nimble_tune_record_t *list_json(farm *f, const char *kind, size_t *n) {
  cli_result r = kind ? cli_run_on_farm(f, "test-token", ARGS("tune-records", "list", "--json", "--target", kind))
                      : cli_run_on_farm(f, "test-token", ARGS("tune-records", "list", "--json"));
  ASSERT_EXIT(r, 0);
  json_error_t e;
  json_t *doc = json_loads(r.out, 0, &e);
  ck_assert_msg(doc != NULL, "list --json printed no JSON: %s\n%s", e.text, r.out);
  nimble_tune_record_t *recs = NULL;
  NIMBLE_ASSERT_OK(nimble_tune_records_from_json(doc, "list --json", &recs, n));
  json_decref(doc);
  cli_result_free(&r);
  return recs;
}

/* HGETALL nimble:tune:<kind>: the fields, joined with ',' in sorted order,
 * and each value checked to parse as the record its field names. */
static void redis_fields(farm *f, const char *kind, char *out, size_t size, nimble_tune_record_t *recs,
                         size_t *n) {
  redisReply *rep = redisCommand(f->redis, "HGETALL nimble:tune:%s", kind);
  ck_assert(rep && rep->type == REDIS_REPLY_ARRAY);
  const char *names[16];
  size_t k = 0;
  for (size_t i = 0; i + 1 < rep->elements && k < 16; i += 2, k++) {
    names[k] = rep->element[i]->str;
    json_error_t e;
    json_t *j = json_loads(rep->element[i + 1]->str, 0, &e);
    ck_assert_msg(j != NULL, "Redis value is not JSON: %s", rep->element[i + 1]->str);
    NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, names[k], &recs[k]));
    json_decref(j);
    char field[200];
    snprintf(field, sizeof field, "%s|%s", recs[k].cpu, recs[k].signature);
    ck_assert_str_eq(field, names[k]);
  }
  /* sorted, so the comparison does not depend on Redis's order */
  for (size_t i = 0; i < k; i++)
    for (size_t j = i + 1; j < k; j++)
      if (strcmp(names[j], names[i]) < 0) {
        const char *t = names[i];
        names[i] = names[j];
        names[j] = t;
      }
  out[0] = '\0';
  for (size_t i = 0; i < k; i++) {
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s", i ? "," : "", names[i]);
  }
  *n = k;
  freeReplyObject(rep);
}

START_TEST(test_imported_records_list_export_and_sit_in_redis_as_written) {
  farm f;
  start(&f, 0);
  char *file = cli_write_file("two.json", DOC(REC_A "," REC_B));
  cli_result r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", file));
  ASSERT_EXIT(r, 0);
  char want[512];
  snprintf(want, sizeof want, "imported 2 tuning records from %s\n", file);
  ck_assert_str_eq(r.out, want);
  cli_result_free(&r);

  const expect *both[] = {&kA, &kB};
  size_t n;
  nimble_tune_record_t *recs = list_json(&f, NULL, &n);
  check_records(recs, n, both, 2);
  free(recs);
  recs = list_json(&f, "x86", &n);
  check_records(recs, n, both, 2);
  free(recs);
  recs = list_json(&f, "aarch64", &n);
  ck_assert_uint_eq(n, 0);
  free(recs);

  /* The table: one line per record, speedup = default_us / tuned_us
   * (120.5 / 98.25 = 1.2265; 33.1 / 31.75 = 1.0425). */
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "list"));
  ASSERT_EXIT(r, 0);
  ASSERT_CONTAINS(r.out, "TARGET");
  ASSERT_CONTAINS(r.out, CPU_A);
  ASSERT_CONTAINS(r.out, "0123456789ab ");
  ASSERT_CONTAINS(r.out, "serial/4096/262144/vw16");
  ASSERT_CONTAINS(r.out, "parallel/65536/1024/avx512");
  ASSERT_CONTAINS(r.out, "1.23x");
  ASSERT_CONTAINS(r.out, "1.04x");
  ASSERT_CONTAINS(r.out, "\nx86      skylake-avx512/1a2b3c4d      0123456789ab fused__conv2d_add__3             "
                         "serial/4096/262144/vw16                        120.50        98.25    1.23x\n");
  ASSERT_CONTAINS(r.out, "\nx86      znver4/0badf00d              fedcba987654 -                                "
                         "parallel/65536/1024/avx512 +1 by size           33.10        31.75    1.04x\n");
  ck_assert_ptr_null(strstr(r.out, "0123456789abc")); /* the signature is cut to 12 digits */
  cli_result_free(&r);

  char *out = cli_write_file("exported.json", "");
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "export", out));
  ASSERT_EXIT(r, 0);
  ASSERT_CONTAINS(r.err, "2 tuning records exported to");
  cli_result_free(&r);
  NIMBLE_ASSERT_OK(nimble_tune_records_read_file(out, &recs, &n));
  check_records(recs, n, both, 2);
  free(recs);

  char fields[1024];
  nimble_tune_record_t stored[16];
  redis_fields(&f, "x86", fields, sizeof fields, stored, &n);
  ck_assert_str_eq(fields, CPU_A "|" SIG_A "," CPU_B "|" SIG_B);
  check_records(stored, n, both, 2);

  /* Importing A again with another time replaces it (newest wins). */
  char *again = cli_write_file("again.json",
                               DOC("{\"signature\":\"" SIG_A "\",\"target\":\"x86\",\"cpu\":\"" CPU_A "\","
                                   "\"schedule\":{\"parallel\":true,\"min_task_work\":256,\"conv_block\":2048},"
                                   "\"default_us\":120.5,\"tuned_us\":60.125,\"threads\":2}"));
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", again));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  redis_fields(&f, "x86", fields, sizeof fields, stored, &n);
  ck_assert_str_eq(fields, CPU_A "|" SIG_A "," CPU_B "|" SIG_B);
  const expect a2 = {SIG_A, CPU_A, "", 1, 256, 2048, 120.5, 60.125, 2, 0, 0, 0, 0, 0};
  const expect *after[] = {&a2, &kB};
  check_records(stored, n, after, 2);

  free(again);
  free(out);
  free(file);
  farm_stop(&f);
}
END_TEST

START_TEST(test_an_import_with_a_bad_record_is_refused_naming_it_and_stores_nothing) {
  farm f;
  start(&f, 0);
  char *file = cli_write_file("bad.json",
                              DOC(REC_A ",{\"signature\":\"" SIG_B "\",\"target\":\"x86\",\"cpu\":\"" CPU_B "\","
                                        "\"schedule\":{\"parallel\":true,\"min_task_work\":65536,\"conv_block\":0},"
                                        "\"default_us\":33.1,\"tuned_us\":31.75,\"threads\":4}"));
  cli_result r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", file));
  ASSERT_EXIT(r, 3);
  ASSERT_CONTAINS(r.err, "record 1: tune record: 'schedule.conv_block' = 0 is outside [1024, 67108864]");
  ASSERT_CONTAINS(r.err, "nothing imported");
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
  /* A target that is not a kind the farm knows is refused too. */
  char *other = cli_write_file("other.json", DOC("{\"signature\":\"" SIG_C "\",\"target\":\"x86:cpu=znver4\","
                                                 "\"cpu\":\"" CPU_B "\",\"schedule\":{\"parallel\":true,"
                                                 "\"min_task_work\":256,\"conv_block\":2048},\"default_us\":1,"
                                                 "\"tuned_us\":1,\"threads\":1}"));
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", other));
  ASSERT_EXIT(r, 3);
  ASSERT_CONTAINS(r.err, "record 0: tune record: 'target' is 'x86:cpu=znver4', not a target kind");
  cli_result_free(&r);

  /* The scheduler checks every record itself, before storing any: a
   * request past the client, its second record bad, part of a file whose
   * records start at index 5. */
  json_t *body = json_pack("{s:[s,s],s:i}", "records", REC_B,
                           "{\"signature\":\"" SIG_C "\",\"target\":\"x86\"}", "first", 5);
  nimble_msg_type_t type;
  json_t *reply = NULL;
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_TUNE_RECORDS_IMPORT, body, "test-token", &type, &reply), 0);
  ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
  ck_assert_str_eq(json_string_value(json_object_get(reply, "code")), "INVALID_ARGUMENT");
  ck_assert_str_eq(json_string_value(json_object_get(reply, "message")),
                   "tuning records import refused, nothing stored: record 6: tune record: 'cpu' is missing");
  json_decref(reply);

  redisReply *rep = redisCommand(f.redis, "KEYS nimble:tune:*");
  ck_assert(rep && rep->type == REDIS_REPLY_ARRAY);
  ck_assert_uint_eq(rep->elements, 0);
  freeReplyObject(rep);
  size_t n;
  nimble_tune_record_t *recs = list_json(&f, NULL, &n);
  ck_assert_uint_eq(n, 0);
  free(recs);

  /* The requests need the token like every other. */
  r = cli_run_on_farm(&f, "wrong-token", ARGS("tune-records", "list"));
  ASSERT_EXIT(r, 7);
  cli_result_free(&r);
  free(other);
  free(file);
  farm_stop(&f);
}
END_TEST

/* Reads the records the stand-in compiler was handed last. */
static nimble_tune_record_t *handed(farm *f, size_t *n) {
  char path[400];
  snprintf(path, sizeof path, "%s.tune-in", f->compile_log);
  nimble_tune_record_t *r = NULL;
  NIMBLE_ASSERT_OK(nimble_tune_records_read_file(path, &r, n));
  return r;
}

START_TEST(test_a_tune_true_compile_gets_the_farms_records_and_its_own_come_back) {
  farm f;
  start(&f, 1);
  /* Two x86 records and one for aarch64, which an x86 task never carries. */
  char *file = cli_write_file("three.json",
                              DOC(REC_A "," REC_B ",{\"signature\":\"" SIG_C "\",\"target\":\"aarch64\","
                                  "\"cpu\":\"neoverse-n1/00000001\",\"schedule\":{\"parallel\":true,"
                                  "\"min_task_work\":256,\"conv_block\":2048},\"default_us\":1,"
                                  "\"tuned_us\":1,\"threads\":1}"));
  cli_result r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", file));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);

  /* The compile reports: a new record (C on CPU_A), A measured again, and
   * one for aarch64 (not this task's kind: the scheduler drops it). */
  char *model = cli_write_file(
      "tuned.onnx",
      "model: tuned on the farm\n"
      "tune-out " DOC("{\"signature\":\"" SIG_C "\",\"target\":\"x86\",\"cpu\":\"" CPU_A "\","
                      "\"schedule\":{\"parallel\":true,\"min_task_work\":1024,\"conv_block\":8192},"
                      "\"default_us\":10.5,\"tuned_us\":7.25,\"threads\":2,\"kernel\":\"fused__dense__1\"},"
                      "{\"signature\":\"" SIG_A "\",\"target\":\"x86\",\"cpu\":\"" CPU_A "\","
                      "\"schedule\":{\"parallel\":false,\"min_task_work\":4096,\"conv_block\":262144},"
                      "\"default_us\":121,\"tuned_us\":97.5,\"threads\":2},"
                      "{\"signature\":\"" SIG_B "\",\"target\":\"aarch64\",\"cpu\":\"neoverse-n1/00000001\","
                      "\"schedule\":{\"parallel\":true,\"min_task_work\":256,\"conv_block\":2048},"
                      "\"default_us\":2,\"tuned_us\":1,\"threads\":1}") "\n");
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", model, "--targets=x86", "--name", "team/tuned", "--option", "tune=true", "--timeout",
                  "60"));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  ck_assert_int_eq(farm_count_compiles(&f, "option=tune=true tune"), 1);

  /* It was handed exactly the two x86 records, values as written. */
  size_t n;
  nimble_tune_record_t *in = handed(&f, &n);
  const expect *both[] = {&kA, &kB};
  check_records(in, n, both, 2);
  free(in);

  /* Its x86 records are the farm's now; the aarch64 one was dropped. */
  char fields[1024];
  nimble_tune_record_t stored[16];
  redis_fields(&f, "x86", fields, sizeof fields, stored, &n);
  ck_assert_str_eq(fields, CPU_A "|" SIG_C "," CPU_A "|" SIG_A "," CPU_B "|" SIG_B);
  const expect a2 = {SIG_A, CPU_A, "", 0, 4096, 262144, 121, 97.5, 2};
  const expect c = {SIG_C, CPU_A, "fused__dense__1", 1, 1024, 8192, 10.5, 7.25, 2};
  const expect *now[] = {&a2, &kB, &c};
  check_records(stored, n, now, 3);
  redis_fields(&f, "aarch64", fields, sizeof fields, stored, &n);
  ck_assert_str_eq(fields, "neoverse-n1/00000001|" SIG_C);
  ck_assert(farm_sched_log_contains(&f, "a record for aarch64 from a task for x86"));

  /* Without tune=true the compile gets no records and no flags. */
  char *plain = cli_write_file("plain.onnx", "model: not tuned\n");
  r = cli_run_on_farm(&f, "test-token",
                      ARGS("submit", plain, "--targets=x86", "--name", "team/plain", "--timeout", "60"));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  ck_assert_int_eq(farm_count_compiles(&f, " tune"), 1);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2);

  /* A compile whose records file is malformed, or missing, still succeeds;
   * nothing of it is stored. */
  char *broken = cli_write_file("broken.onnx", "model: broken records\ntune-out {\"format\":\n");
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", broken, "--targets=x86", "--name", "team/broken", "--option", "tune=true", "--timeout",
                  "60"));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  char *none = cli_write_file("none.onnx", "model: no records file\ntune-out-none\n");
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", none, "--targets=x86", "--name", "team/none", "--option", "tune=true", "--timeout",
                  "60"));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  ck_assert_int_eq(farm_count_compiles(&f, "option=tune=true tune"), 3);
  /* A verified build cannot tune: two workers' measurements may differ. */
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", none, "--targets=x86", "--name", "team/verified", "--option", "tune=true", "--verify=2",
                  "--timeout", "60"));
  ck_assert_int_ne(r.exit_code, 0);
  ASSERT_CONTAINS(r.err, "verified builds (verify=2) cannot tune");
  cli_result_free(&r);
  ck_assert_int_eq(farm_count_compiles(&f, "option=tune=true tune"), 3);
  redis_fields(&f, "x86", fields, sizeof fields, stored, &n);
  check_records(stored, n, now, 3);
  /* The last compile was handed the farm's three x86 records. */
  in = handed(&f, &n);
  check_records(in, n, now, 3);
  free(in);

  free(none);
  free(broken);
  free(plain);
  free(model);
  free(file);
  farm_stop(&f);
}
END_TEST

/* Record i of a generated set: its signature is i in hex, its CPU one of
 * three, its times exact binary fractions derived from i. */
static void generated(int i, const char *kind, nimble_tune_record_t *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->signature, sizeof r->signature, "%064x", i);
  snprintf(r->target, sizeof r->target, "%s", kind);
  snprintf(r->cpu, sizeof r->cpu, "testcpu%d/0000000%d", i % 3, i % 3);
  r->schedule.parallel = i % 2;
  r->schedule.min_task_work = 256 + i;
  r->schedule.conv_block = 1024 + 8 * i;
  r->schedule.avx512_clone = i % 3; /* auto, yes, no */
  r->schedule.vector_width = (int32_t[]){0, 4, 8, 16}[i % 4];
  r->schedule.interleave = (int32_t[]){0, 1, 2, 4}[(i / 4) % 4];
  r->default_us = 100 + i * 0.25;
  r->tuned_us = 50 + i * 0.125;
  r->threads = 1 + i % 8;
}

/* The records are exactly the generated ones of `kind` with index in
 * [lo, hi), each once. */
static void check_generated(const nimble_tune_record_t *r, size_t n, const char *kind, int lo, int hi) {
  ck_assert_uint_eq(n, (size_t)(hi - lo));
  char *seen = calloc((size_t)hi, 1);
  for (size_t k = 0; k < n; k++) {
    unsigned i;
    ck_assert_msg(sscanf(r[k].signature, "%x", &i) == 1 && (int)i >= lo && (int)i < hi, "unexpected %s",
                  r[k].signature);
    ck_assert_msg(!seen[i], "record %u twice", i);
    seen[i] = 1;
    nimble_tune_record_t want;
    generated((int)i, kind, &want);
    ck_assert_str_eq(r[k].signature, want.signature);
    ck_assert_str_eq(r[k].target, kind);
    ck_assert_str_eq(r[k].cpu, want.cpu);
    ck_assert_int_eq(r[k].schedule.parallel, want.schedule.parallel);
    ck_assert_int_eq(r[k].schedule.min_task_work, want.schedule.min_task_work);
    ck_assert_int_eq(r[k].schedule.conv_block, want.schedule.conv_block);
    ck_assert_int_eq(r[k].schedule.avx512_clone, want.schedule.avx512_clone);
    ck_assert_int_eq(r[k].schedule.vector_width, want.schedule.vector_width);
    ck_assert_int_eq(r[k].schedule.interleave, want.schedule.interleave);
    ck_assert(r[k].default_us == want.default_us && r[k].tuned_us == want.tuned_us);
    ck_assert_int_eq(r[k].threads, want.threads);
  }
  free(seen);
}

START_TEST(test_many_records_go_in_parts_come_back_in_pages_and_a_task_carries_the_newest_2048) {
  farm f;
  start(&f, 1);
  /* 2100 x86 records and 10 for aarch64: more than one message holds. */
  enum { NX = 2100, NA = 10 };
  nimble_tune_record_t *all = calloc(NX + NA, sizeof *all);
  for (int i = 0; i < NX; i++) generated(i, "x86", &all[i]);
  for (int i = 0; i < NA; i++) generated(i, "aarch64", &all[NX + i]);
  char *dir = cli_write_file("dummy", "");
  char bad[512], good[512];
  snprintf(bad, sizeof bad, "%s.bad.json", dir);
  snprintf(good, sizeof good, "%s.many.json", dir);
  /* First with record 2050 bad: refused before anything is sent. */
  all[2050].schedule.conv_block = 0;
  json_t *doc = nimble_tune_records_to_json(all, NX + NA);
  ck_assert(json_dump_file(doc, bad, JSON_COMPACT) == 0);
  json_decref(doc);
  all[2050].schedule.conv_block = 1024 + 8 * 2050;
  cli_result r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", bad));
  ASSERT_EXIT(r, 3);
  ASSERT_CONTAINS(r.err, "record 2050: tune record: 'schedule.conv_block' = 0");
  cli_result_free(&r);
  redisReply *rep = redisCommand(f.redis, "KEYS nimble:tune:*");
  ck_assert_uint_eq(rep->elements, 0);
  freeReplyObject(rep);

  NIMBLE_ASSERT_OK(nimble_tune_records_write_file(good, all, NX + NA));
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "import", good));
  ASSERT_EXIT(r, 0);
  ASSERT_CONTAINS(r.out, "imported 2110 tuning records from");
  cli_result_free(&r);
  rep = redisCommand(f.redis, "HLEN nimble:tune:x86");
  ck_assert_int_eq(rep->integer, NX);
  freeReplyObject(rep);

  /* The pages, asked for directly: 2048, then the rest across the kinds. */
  json_t *body = json_object();
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_TUNE_RECORDS_LIST, body, "test-token", &type, &reply), 0);
  ck_assert_int_eq(type, NIMBLE_MSG_TUNE_RECORDS);
  ck_assert_uint_eq(json_array_size(json_object_get(reply, "records")), 2048);
  ck_assert_int_eq(json_integer_value(json_object_get(reply, "next")), 2048);
  ck_assert_int_eq(json_integer_value(json_object_get(reply, "total")), NX + NA);
  json_decref(reply);
  body = json_pack("{s:i}", "offset", 2048);
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_TUNE_RECORDS_LIST, body, "test-token", &type, &reply), 0);
  ck_assert_uint_eq(json_array_size(json_object_get(reply, "records")), NX + NA - 2048);
  ck_assert_int_eq(json_integer_value(json_object_get(reply, "next")), NX + NA);
  json_decref(reply);

  size_t n;
  nimble_tune_record_t *got = list_json(&f, "x86", &n);
  check_generated(got, n, "x86", 0, NX);
  free(got);
  got = list_json(&f, "aarch64", &n);
  check_generated(got, n, "aarch64", 0, NA);
  free(got);
  got = list_json(&f, NULL, &n);
  ck_assert_uint_eq(n, NX + NA);
  free(got);
  char out[512];
  snprintf(out, sizeof out, "%s.exported.json", dir);
  r = cli_run_on_farm(&f, "test-token", ARGS("tune-records", "export", out, "--target", "x86"));
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  NIMBLE_ASSERT_OK(nimble_tune_records_read_file(out, &got, &n));
  check_generated(got, n, "x86", 0, NX);
  free(got);

  /* A tune job (the option as the string "true" here, which the compile
   * reads the same) is handed the newest 2048 x86 records: the file's
   * last 2048. */
  char model[72];
  farm_push_model(&f, "model: tuned with many records\n", model);
  body = json_pack("{s:s,s:s,s:s,s:[s],s:{s:s}}", "model", model, "format", "onnx", "name", "team/many",
                   "targets", "x86", "options", "tune", "true");
  ck_assert_int_eq(farm_request(&f, NIMBLE_MSG_SUBMIT, body, "test-token", &type, &reply), 0);
  ck_assert_int_eq(type, NIMBLE_MSG_ACCEPTED);
  json_t *st = farm_wait_job(&f, json_string_value(json_object_get(reply, "job")), "done", 60000, "test-token");
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  json_decref(st);
  json_decref(reply);
  ck_assert_int_eq(farm_count_compiles(&f, "option=tune=true tune"), 1);
  got = handed(&f, &n);
  check_generated(got, n, "x86", NX - 2048, NX);
  free(got);

  free(all);
  free(dir);
  farm_stop(&f);
}
END_TEST

static char g_compiler[512], g_models[512];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The digest of the x86 kernel library layer of the manifest `submit`
 * printed for team/<name> (its last line's reference). */
static void kernels_digest(farm *f, const char *out, char digest[72]) {
  const char *at = strstr(out, "@sha256:");
  ck_assert_msg(at != NULL, "no reference in:\n%s", out);
  char manifest[72];
  memcpy(manifest, at + 1, 71);
  manifest[71] = '\0';
  const char *repo = strstr(out, "team/");
  ck_assert(repo != NULL);
  char name[64];
  size_t k = strcspn(repo, ":");
  ck_assert(k < sizeof name);
  memcpy(name, repo, k);
  name[k] = '\0';
  uint8_t *bytes;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, name, manifest, &bytes, &n, NULL, NULL));
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(bytes, n, &m));
  free(bytes);
  digest[0] = '\0';
  for (size_t i = 0; i < m.layer_count; i++)
    if (strstr(m.layers[i].media_type, "kernels.x86_64-linux-gnu")) nimble_digest_format(&m.layers[i].digest, digest);
  nimble_manifest_deinit(&m);
  ck_assert_msg(digest[0], "no x86 kernel library in %s", manifest);
}

/* The real compiler on a worker: a tune=true job of the reference CNN
 * measures its kernels, the records land in Redis, and a second tune=true
 * job (another budget, so not the cache) is handed them, measures nothing
 * and builds the same kernels. */
START_TEST(test_a_real_tuned_compile_shares_its_records_and_the_next_one_reuses_them) {
  farm f;
  start(&f, 0);
  /* No address-space limit (the sanitizer build's ASan runtime cannot
   * live with one, as in test_farm_kcache); a kernel cache of its own. */
  char kc[400];
  snprintf(kc, sizeof kc, "%s/kcache-real", f.dir);
  const char *wa[] = {"--compiler", g_compiler, "--mem-limit-mb", "0", "--compile-jobs", "2", "--kcache-dir", kc,
                      NULL};
  farm_start_worker(&f, "w-real", "x86", wa);
  char model[600];
  snprintf(model, sizeof model, "%s/cnn.onnx", g_models);
  /* The budget must compile every schedule point (half of it), or the
   * records cover only the kernels measured (docs/tuning.md): 32 plain
   * compiles' time, as long as one takes on this machine now. */
  char plain[700];
  snprintf(plain, sizeof plain, "%s/plain.nimble", f.dir);
  double t0 = now_s();
  cli_result r = cli_run(ARGS("compile", model, "-o", plain, "--no-kernel-cache"), NULL);
  ASSERT_EXIT(r, 0);
  cli_result_free(&r);
  char budget_a[64], budget_b[64];
  int budget = (int)(32 * (now_s() - t0)) + 1;
  if (budget < 8) budget = 8;
  snprintf(budget_a, sizeof budget_a, "tune_budget_s=%d", budget);
  snprintf(budget_b, sizeof budget_b, "tune_budget_s=%d", budget + 1);
  t0 = now_s();
  r = cli_run_on_farm(&f, "test-token",
                      ARGS("submit", model, "--targets=x86", "--name", "team/cnn-a", "--option", "tune=true",
                           "--option", "tune_threads=2", "--option", budget_a, "--option",
                           "tune_inputs=x=1x3x32x32", "--timeout", "300"));
  double first_s = now_s() - t0;
  ASSERT_EXIT(r, 0);
  char kernels_a[72];
  kernels_digest(&f, r.out, kernels_a);
  cli_result_free(&r);

  /* 9 kernels, 9 records (docs/tuning.md; test_compile_tune), all for
   * this machine's CPU, each under its own cpu|signature. */
  redisReply *rep = redisCommand(f.redis, "HGETALL nimble:tune:x86");
  ck_assert(rep && rep->type == REDIS_REPLY_ARRAY);
  ck_assert_uint_eq(rep->elements, 18);
  nimble_tune_record_t first;
  memset(&first, 0, sizeof first);
  for (size_t i = 0; i + 1 < rep->elements; i += 2) {
    json_t *j = json_loads(rep->element[i + 1]->str, 0, NULL);
    nimble_tune_record_t rec;
    NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, rep->element[i]->str, &rec));
    json_decref(j);
    char field[200];
    snprintf(field, sizeof field, "%s|%s", rec.cpu, rec.signature);
    ck_assert_str_eq(field, rep->element[i]->str);
    ck_assert_str_eq(rec.target, "x86");
    ck_assert_int_eq(rec.threads, 2);
    if (i == 0) first = rec;
    ck_assert_str_eq(rec.cpu, first.cpu);
  }
  freeReplyObject(rep);
  size_t n;
  nimble_tune_record_t *listed = list_json(&f, "x86", &n);
  ck_assert_uint_eq(n, 9);
  free(listed);
  rep = redisCommand(f.redis, "GET nimble:tune:seq");
  ck_assert_str_eq(rep->str, "9");
  freeReplyObject(rep);

  t0 = now_s();
  r = cli_run_on_farm(&f, "test-token",
             ARGS("submit", model, "--targets=x86", "--name", "team/cnn-b", "--option", "tune=true", "--option",
                  "tune_threads=2", "--option", budget_b, "--option", "tune_inputs=x=1x3x32x32",
                  "--timeout", "300"));
  double second_s = now_s() - t0;
  ASSERT_EXIT(r, 0);
  ck_assert_ptr_null(strstr(r.out, "(cached)"));
  char kernels_b[72];
  kernels_digest(&f, r.out, kernels_b);
  cli_result_free(&r);
  char log[400];
  snprintf(log, sizeof log, "%s/worker-w-real.log", f.dir);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "grep -c 'tunes, with 9 tuning records from the farm' '%s'", log);
  FILE *p = popen(cmd, "r");
  int handed_9 = 0;
  ck_assert(p && fscanf(p, "%d", &handed_9) == 1);
  pclose(p);
  ck_assert_int_eq(handed_9, 1);
  /* It measured nothing new: no record was stored again. */
  rep = redisCommand(f.redis, "GET nimble:tune:seq");
  ck_assert_str_eq(rep->str, "9");
  freeReplyObject(rep);
  /* The schedules it applied are the ones the first compile chose. */
  ck_assert_str_eq(kernels_b, kernels_a);
  fprintf(stderr, "test_cli_tune_records: real compiler: first tuned job %.1f s, second (9 records given) %.1f s\n",
          first_s, second_s);
  farm_stop(&f);
}
END_TEST

int main(void) {
  const char *build = getenv("NIMBLE_BUILD_DIR"), *models = getenv("NIMBLE_MODELS_DIR");
  snprintf(g_compiler, sizeof g_compiler, "%s/client/nimble", build ? build : ".");
  snprintf(g_models, sizeof g_models, "%s", models ? models : "");
  const char *only = getenv("CK_RUN_CASE");
  if (only && !strcmp(only, "real")) {
    char cnn[600];
    snprintf(cnn, sizeof cnn, "%s/cnn.onnx", g_models);
    if (!build || access(g_compiler, X_OK) != 0 || access(cnn, R_OK) != 0) {
      printf("skipped: needs the compiler (%s) and the reference CNN (%s)\n", g_compiler, cnn);
      return 77;
    }
  }
  Suite *s = suite_create("cli_tune_records");
  TCase *tr = tcase_create("real");
  tcase_set_timeout(tr, 600);
  tcase_add_test(tr, test_a_real_tuned_compile_shares_its_records_and_the_next_one_reuses_them);
  suite_add_tcase(s, tr);
  TCase *tc = tcase_create("farm");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_imported_records_list_export_and_sit_in_redis_as_written);
  tcase_add_test(tc, test_an_import_with_a_bad_record_is_refused_naming_it_and_stores_nothing);
  tcase_add_test(tc, test_a_tune_true_compile_gets_the_farms_records_and_its_own_come_back);
  tcase_add_test(tc, test_many_records_go_in_parts_come_back_in_pages_and_a_task_carries_the_newest_2048);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
