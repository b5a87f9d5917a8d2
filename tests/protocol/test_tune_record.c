/* Tuning records: a hand-written document parses to the values written in
 * it, writing and reading a file gives them back, and each malformed field
 * is refused with its name. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nimble_test.h"

#include "nimble/tune_record.h"

#define SIG "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define GOOD                                                                                     \
  "{\"signature\":\"" SIG "\",\"target\":\"x86\",\"cpu\":\"skylake-avx512/1a2b3c4d\","          \
  "\"schedule\":{\"parallel\":false,\"min_task_work\":4096,\"conv_block\":262144},"            \
  "\"default_us\":120.5,\"tuned_us\":98.25,\"threads\":2,\"kernel\":\"fused__conv2d__3\"}"

/* A bucket's schedule, as JSON members. */
#define SCHED "\"schedule\":{\"parallel\":true,\"min_task_work\":16384,\"conv_block\":65536,\"vector_width\":16}"

static json_t *parse(const char *text) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  ck_assert_msg(j != NULL, "test JSON: %s", e.text);
  return j;
}

START_TEST(test_a_written_record_reads_as_written) {
  json_t *j = parse(GOOD);
  nimble_tune_record_t r;
  NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, NULL, &r));
  ck_assert_str_eq(r.signature, SIG);
  ck_assert_str_eq(r.target, "x86");
  ck_assert_str_eq(r.cpu, "skylake-avx512/1a2b3c4d");
  ck_assert_str_eq(r.kernel, "fused__conv2d__3");
  ck_assert(!r.schedule.parallel);
  ck_assert_int_eq(r.schedule.min_task_work, 4096);
  ck_assert_int_eq(r.schedule.conv_block, 262144);
  ck_assert(r.default_us == 120.5 && r.tuned_us == 98.25);
  ck_assert_int_eq(r.threads, 2);
  ck_assert_int_eq(r.schedule.avx512_clone, NIMBLE_TUNE_CLONE_AUTO); /* absent: auto */
  json_decref(j);
}
END_TEST

/* GOOD with `from` replaced by `to`, into text. */
static void substitute(const char *from, const char *to, char *text, size_t size) {
  const char *at = strstr(GOOD, from);
  ck_assert_ptr_nonnull(at);
  snprintf(text, size, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
}

/* GOOD's schedule with `knob` added ("" for none), parsed into *r, then
 * written as text (which must name `field` exactly when `written`) and
 * read back into *again. */
static void knob_round_trip(const char *knob, const char *field, bool written, nimble_tune_record_t *r,
                            nimble_tune_record_t *again) {
  char text[2048], to[96];
  snprintf(to, sizeof to, "\"conv_block\":262144%s%s", *knob ? "," : "", knob);
  substitute("\"conv_block\":262144", to, text, sizeof text);
  json_t *j = parse(text);
  NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, NULL, r));
  json_decref(j);
  char *back = nimble_tune_record_to_text(r);
  ck_assert_ptr_nonnull(back);
  ck_assert_msg((strstr(back, field) != NULL) == written, "'%s' written as %s", knob, back);
  NIMBLE_ASSERT_OK(nimble_tune_record_from_text(back, "back", again));
  free(back);
}

/* The AVX-512 clone choice: "yes" and "no" read and write back; "auto" is
 * the default and is not written (readers before the knob refuse knobs
 * they do not know); a choice differs from the default schedule. */
START_TEST(test_the_clone_choice_reads_and_writes) {
  const char *names[] = {"auto", "yes", "no"};
  const int32_t want[] = {NIMBLE_TUNE_CLONE_AUTO, NIMBLE_TUNE_CLONE_YES, NIMBLE_TUNE_CLONE_NO};
  for (int i = 0; i < 3; i++) {
    char knob[64];
    snprintf(knob, sizeof knob, "\"avx512_clone\":\"%s\"", names[i]);
    nimble_tune_record_t r, again;
    knob_round_trip(knob, "avx512_clone", i != 0, &r, &again);
    ck_assert_int_eq(r.schedule.avx512_clone, want[i]);
    ck_assert(nimble_tune_schedule_equal(&again.schedule, &r.schedule));
    nimble_tune_schedule_t d = nimble_tune_schedule_default(), c = d;
    c.avx512_clone = want[i];
    ck_assert(nimble_tune_schedule_equal(&c, &d) == (i == 0));
  }
}
END_TEST

/* The vector width: 4, 8 or 16 read and write back; absent is 0 (the
 * target's), which is not written. */
START_TEST(test_the_vector_width_reads_and_writes) {
  const int widths[] = {0, 4, 8, 16};
  for (int i = 0; i < 4; i++) {
    char knob[64] = "";
    if (widths[i]) snprintf(knob, sizeof knob, "\"vector_width\":%d", widths[i]);
    nimble_tune_record_t r, again;
    knob_round_trip(knob, "vector_width", widths[i] != 0, &r, &again);
    ck_assert_int_eq(r.schedule.vector_width, widths[i]);
    ck_assert_int_eq(again.schedule.vector_width, widths[i]);
    nimble_tune_schedule_t d = nimble_tune_schedule_default(), c = d;
    c.vector_width = widths[i];
    ck_assert(nimble_tune_schedule_equal(&c, &d) == (widths[i] == 0));
  }
}
END_TEST

/* The interleave count: 1, 2 or 4 read and write back; absent is 0
 * (LLVM's choice), which is not written. */
START_TEST(test_the_interleave_count_reads_and_writes) {
  const int counts[] = {0, 1, 2, 4};
  for (int i = 0; i < 4; i++) {
    char knob[64] = "";
    if (counts[i]) snprintf(knob, sizeof knob, "\"interleave\":%d", counts[i]);
    nimble_tune_record_t r, again;
    knob_round_trip(knob, "interleave", counts[i] != 0, &r, &again);
    ck_assert_int_eq(r.schedule.interleave, counts[i]);
    ck_assert_int_eq(again.schedule.interleave, counts[i]);
    nimble_tune_schedule_t d = nimble_tune_schedule_default(), c = d;
    c.interleave = counts[i];
    ck_assert(nimble_tune_schedule_equal(&c, &d) == (counts[i] == 0));
  }
}
END_TEST

/* Size buckets read and write back; a call picks the first bucket whose
 * max_elements holds its output, else the record's schedule; a record
 * without buckets writes none (older readers see what they know). */
START_TEST(test_size_buckets_read_write_and_pick_by_elements) {
  char text[2048];
  substitute("\"default_us\":120.5",
             "\"buckets\":[{\"max_elements\":2048," SCHED "},{\"max_elements\":16384,"
             "\"schedule\":{\"parallel\":true,\"min_task_work\":4096,\"conv_block\":65536,\"interleave\":2}}],"
             "\"default_us\":120.5",
             text, sizeof text);
  json_t *j = parse(text);
  nimble_tune_record_t r, again;
  NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, NULL, &r));
  json_decref(j);
  ck_assert_int_eq(r.num_buckets, 2);
  ck_assert_int_eq(r.buckets[0].max_elements, 2048);
  ck_assert_int_eq(r.buckets[0].schedule.vector_width, 16);
  ck_assert_int_eq(r.buckets[1].max_elements, 16384);
  ck_assert_int_eq(r.buckets[1].schedule.min_task_work, 4096);
  ck_assert_int_eq(r.buckets[1].schedule.interleave, 2);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 1), &r.buckets[0].schedule);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 2048), &r.buckets[0].schedule);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 2049), &r.buckets[1].schedule);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 16384), &r.buckets[1].schedule);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 16385), &r.schedule);
  ck_assert(!r.schedule.parallel); /* the record's own, for sizes past the buckets */
  char *back = nimble_tune_record_to_text(&r);
  ck_assert_ptr_nonnull(back);
  ck_assert_msg(strlen(back) < 1536, "%zu bytes", strlen(back));
  NIMBLE_ASSERT_OK(nimble_tune_record_from_text(back, "back", &again));
  free(back);
  ck_assert_int_eq(again.num_buckets, 2);
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(again.buckets[i].max_elements, r.buckets[i].max_elements);
    ck_assert(nimble_tune_schedule_equal(&again.buckets[i].schedule, &r.buckets[i].schedule));
  }
  j = parse(GOOD);
  NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, NULL, &r));
  json_decref(j);
  ck_assert_int_eq(r.num_buckets, 0);
  ck_assert_ptr_eq(nimble_tune_record_schedule_for(&r, 1), &r.schedule);
  back = nimble_tune_record_to_text(&r);
  ck_assert_ptr_null(strstr(back, "buckets"));
  free(back);
}
END_TEST

START_TEST(test_a_file_round_trips) {
  json_t *j = parse(GOOD);
  nimble_tune_record_t r[2];
  NIMBLE_ASSERT_OK(nimble_tune_record_from_json(j, NULL, &r[0]));
  json_decref(j);
  r[1] = r[0];
  r[1].schedule.parallel = true;
  r[1].kernel[0] = '\0';
  char path[] = "/tmp/test_tune_record_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  NIMBLE_ASSERT_OK(nimble_tune_records_write_file(path, r, 2));
  nimble_tune_record_t *back = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_tune_records_read_file(path, &back, &n));
  ck_assert_uint_eq(n, 2);
  ck_assert(back[1].schedule.parallel && !back[0].schedule.parallel);
  ck_assert_str_eq(back[1].kernel, "");
  ck_assert_int_eq(back[1].schedule.conv_block, 262144);
  ck_assert(back[0].tuned_us == 98.25);
  free(back);
  /* The file is the documented document: format first-class. */
  FILE *f = fopen(path, "r");
  char text[4096];
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[got] = '\0';
  ck_assert_ptr_nonnull(strstr(text, "\"format\": \"nimble.tune-records.v1\""));
  unlink(path);
}
END_TEST

/* GOOD with `from` replaced by `to`, parsed: the error must hold `want`. */
static void refused(const char *from, const char *to, const char *want) {
  char text[2048];
  substitute(from, to, text, sizeof text);
  json_t *j = parse(text);
  nimble_tune_record_t r;
  NIMBLE_ASSERT_ERROR(nimble_tune_record_from_json(j, "record 7", &r), NIMBLE_INVALID_ARGUMENT, want);
  json_decref(j);
}

START_TEST(test_bad_fields_are_refused_by_name) {
  refused("\"signature\":\"0123", "\"signature\":\"X123", "'signature' must be 64 lowercase hex");
  refused("\"target\":\"x86\",", "", "'target' is missing");
  refused("\"target\":\"x86\"", "\"target\":\"x86:cpu=znver4\"",
          "record 7: tune record: 'target' is 'x86:cpu=znver4', not a target kind");
  refused("skylake-avx512/1a2b3c4d", "sky|lake", "'cpu' holds characters");
  refused("\"parallel\":false", "\"parallel\":1", "'schedule.parallel' must be true or false");
  refused("\"min_task_work\":4096", "\"min_task_work\":0", "'schedule.min_task_work' = 0 is outside");
  refused("\"conv_block\":262144", "\"conv_block\":99999999999", "'schedule.conv_block' = 99999999999 is outside");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"unroll\":4", "schedule knob 'unroll' is unknown");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"avx512_clone\":\"always\"",
          "'schedule.avx512_clone' must be \"auto\", \"yes\" or \"no\"");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"avx512_clone\":true", "'schedule.avx512_clone' must be");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"vector_width\":12",
          "'schedule.vector_width' must be 4, 8 or 16");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"vector_width\":64", "'schedule.vector_width' = 64 is outside");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"interleave\":3", "'schedule.interleave' must be 1, 2 or 4");
  refused("\"conv_block\":262144", "\"conv_block\":4096,\"interleave\":0", "'schedule.interleave' = 0 is outside");
  /* Size buckets: an array of 1 to 3, max_elements rising, each schedule
   * checked as the record's, its errors naming the bucket. */
  const char *at = "\"default_us\":120.5";
  refused(at, "\"buckets\":{},\"default_us\":120.5", "'buckets' must be an array of 1 to 3 objects");
  refused(at, "\"buckets\":[],\"default_us\":120.5", "'buckets' must be an array of 1 to 3 objects");
  refused(at, "\"buckets\":[1],\"default_us\":120.5", "'buckets[0]' must be an object");
  refused(at, "\"buckets\":[{\"max_elements\":0," SCHED "}],\"default_us\":120.5",
          "'buckets[0].max_elements' must be an integer of at least 1");
  refused(at, "\"buckets\":[{\"max_elements\":64," SCHED "},{\"max_elements\":64," SCHED "}],\"default_us\":120.5",
          "'buckets[1].max_elements' (64) must exceed the bucket's before it (64)");
  refused(at, "\"buckets\":[{\"max_elements\":64,\"schedule\":{\"parallel\":true}}],\"default_us\":120.5",
          "'buckets[0].schedule.min_task_work' must be an integer");
  refused(at, "\"buckets\":[{\"max_elements\":64}],\"default_us\":120.5", "'buckets[0].schedule' must be an object");
  refused(at,
          "\"buckets\":[{\"max_elements\":1," SCHED "},{\"max_elements\":2," SCHED "},{\"max_elements\":3," SCHED
          "},{\"max_elements\":4," SCHED "}],\"default_us\":120.5",
          "'buckets' must be an array of 1 to 3 objects");
  refused("\"tuned_us\":98.25", "\"tuned_us\":-1", "'tuned_us' = -1 is not a time");
  refused("\"threads\":2", "\"threads\":0", "'threads' = 0 is outside");
  refused("\"threads\":2", "\"threads\":2.5", "record 7: tune record: 'threads' must be an integer");
}
END_TEST

START_TEST(test_bad_documents_are_refused) {
  nimble_tune_record_t *r = NULL;
  size_t n = 0;
  json_t *j = parse("{\"format\":\"nimble.tune-records.v2\",\"records\":[]}");
  NIMBLE_ASSERT_ERROR(nimble_tune_records_from_json(j, "in.json", &r, &n), NIMBLE_INVALID_ARGUMENT,
                      "in.json: tune records: 'format' must be");
  json_decref(j);
  j = parse("{\"format\":\"nimble.tune-records.v1\",\"records\":[" GOOD ",{}]}");
  NIMBLE_ASSERT_ERROR(nimble_tune_records_from_json(j, "in.json", &r, &n), NIMBLE_INVALID_ARGUMENT,
                      "in.json: record 1: tune record: 'signature' is missing");
  ck_assert_ptr_null(r);
  json_decref(j);
  NIMBLE_ASSERT_ERROR(nimble_tune_records_read_file("/nonexistent/records.json", &r, &n), NIMBLE_IO_ERROR,
                      "/nonexistent/records.json");
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune_record");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_a_written_record_reads_as_written);
  tcase_add_test(tc, test_the_clone_choice_reads_and_writes);
  tcase_add_test(tc, test_the_vector_width_reads_and_writes);
  tcase_add_test(tc, test_the_interleave_count_reads_and_writes);
  tcase_add_test(tc, test_size_buckets_read_write_and_pick_by_elements);
  tcase_add_test(tc, test_a_file_round_trips);
  tcase_add_test(tc, test_bad_fields_are_refused_by_name);
  tcase_add_test(tc, test_bad_documents_are_refused);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
