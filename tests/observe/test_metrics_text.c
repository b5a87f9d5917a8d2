/* The Prometheus text encoder (nimble/metrics_text.h): the exact lines
 * written for families, samples with escaped label values, and a
 * histogram's cumulative buckets, computed by hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/metrics_text.h"
#include "nimble_test.h"

START_TEST(test_a_family_and_samples_are_written_as_the_format_says) {
  nimble_metrics_buf b;
  nimble_metrics_buf_init(&b);
  nimble_metrics_family(&b, "demo_requests_total", "counter", "Requests.\nSecond line \\ here.");
  const char *labels[] = {"route", "blob", "note", "a\"b\\c\nd", NULL};
  nimble_metrics_sample_u64(&b, "demo_requests_total", labels, 18446744073709551615ull);
  nimble_metrics_sample(&b, "demo_ratio", NULL, 0.25);
  nimble_metrics_sample(&b, "demo_ratio", NULL, INFINITY);
  nimble_metrics_sample(&b, "demo_ratio", NULL, NAN);
  ck_assert(!b.failed);
  ck_assert_str_eq(b.data,
                   "# HELP demo_requests_total Requests.\\nSecond line \\\\ here.\n"
                   "# TYPE demo_requests_total counter\n"
                   "demo_requests_total{route=\"blob\",note=\"a\\\"b\\\\c\\nd\"} 18446744073709551615\n"
                   "demo_ratio 0.25\n"
                   "demo_ratio +Inf\n"
                   "demo_ratio NaN\n");
  ck_assert_uint_eq(b.len, strlen(b.data));
  nimble_metrics_buf_free(&b);
}
END_TEST

START_TEST(test_a_histogram_writes_cumulative_buckets_then_sum_and_count) {
  static const double bounds[] = {0.01, 1};
  nimble_histogram h;
  memset(&h, 0, sizeof h);
  const double values[] = {0.003, 0.05, 1.0, 2, 1000, NAN};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
    nimble_histogram_observe(&h, bounds, 2, values[i]);
  /* 0.003 <= 0.01; 0.05 and 1.0 <= 1 (le is inclusive); 2 and 1000 only in
   * +Inf; NaN is not an observation. */
  ck_assert_uint_eq(h.count, 5);
  nimble_metrics_buf b;
  nimble_metrics_buf_init(&b);
  const char *labels[] = {"target", "x86", NULL};
  nimble_metrics_histogram(&b, "demo_seconds", labels, &h, bounds, 2);
  ck_assert_str_eq(b.data,
                   "demo_seconds_bucket{target=\"x86\",le=\"0.01\"} 1\n"
                   "demo_seconds_bucket{target=\"x86\",le=\"1\"} 3\n"
                   "demo_seconds_bucket{target=\"x86\",le=\"+Inf\"} 5\n"
                   "demo_seconds_sum{target=\"x86\"} 1003.053\n"
                   "demo_seconds_count{target=\"x86\"} 5\n");
  nimble_metrics_buf_free(&b);
}
END_TEST

START_TEST(test_the_seconds_buckets_ascend_and_fit_a_histogram) {
  ck_assert_uint_le(nimble_metrics_seconds_bucket_count, NIMBLE_HISTOGRAM_MAX_BUCKETS);
  for (size_t i = 1; i < nimble_metrics_seconds_bucket_count; i++)
    ck_assert(nimble_metrics_seconds_buckets[i - 1] < nimble_metrics_seconds_buckets[i]);
  ck_assert(nimble_metrics_seconds_buckets[nimble_metrics_seconds_bucket_count - 1] == 600);
}
END_TEST

int main(void) {
  Suite *s = suite_create("metrics_text");
  TCase *tc = tcase_create("exposition format 0.0.4");
  tcase_add_test(tc, test_a_family_and_samples_are_written_as_the_format_says);
  tcase_add_test(tc, test_a_histogram_writes_cumulative_buckets_then_sum_and_count);
  tcase_add_test(tc, test_the_seconds_buckets_ascend_and_fit_a_histogram);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
