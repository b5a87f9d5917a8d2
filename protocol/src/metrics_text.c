/* Prometheus text exposition format 0.0.4: families, samples, histograms. */
#include "nimble/metrics_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double nimble_metrics_seconds_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                 2.5,   5,    10,    30,   60,  120,  300, 600};
const size_t nimble_metrics_seconds_bucket_count =
    sizeof nimble_metrics_seconds_buckets / sizeof nimble_metrics_seconds_buckets[0];

void nimble_metrics_buf_init(nimble_metrics_buf *b) { memset(b, 0, sizeof *b); }

void nimble_metrics_buf_free(nimble_metrics_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static int reserve(nimble_metrics_buf *b, size_t more) {
  if (b->failed) return 0;
  if (more > SIZE_MAX / 2 - b->len) goto fail;
  if (b->len + more + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more + 1) cap *= 2;
  char *n = realloc(b->data, cap);
  if (!n) goto fail;
  b->data = n;
  b->cap = cap;
  return 1;
fail:
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 1;
  return 0;
}

static void put(nimble_metrics_buf *b, const char *s, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void puts_(nimble_metrics_buf *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(nimble_metrics_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(nimble_metrics_buf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Escapes `s` as the format wants: label values escape \ " and newline;
 * HELP text escapes \ and newline only. */
static void escaped(nimble_metrics_buf *b, const char *s, int quote) {
  for (; *s; s++) {
    if (*s == '\\') puts_(b, "\\\\");
    else if (*s == '\n') puts_(b, "\\n");
    else if (*s == '"' && quote) puts_(b, "\\\"");
    else put(b, s, 1);
  }
}

static void number(nimble_metrics_buf *b, double v) {
  if (isnan(v)) puts_(b, "NaN");
  else if (isinf(v)) puts_(b, v > 0 ? "+Inf" : "-Inf");
  else printf_(b, "%.12g", v);
}

void nimble_metrics_family(nimble_metrics_buf *b, const char *name, const char *type,
                           const char *help) {
  puts_(b, "# HELP ");
  puts_(b, name);
  puts_(b, " ");
  escaped(b, help, 0);
  puts_(b, "\n# TYPE ");
  puts_(b, name);
  puts_(b, " ");
  puts_(b, type);
  puts_(b, "\n");
}

/* name{labels[,extra_key="extra_value"]} */
static void series(nimble_metrics_buf *b, const char *name, const char *suffix,
                   const char *const *labels, const char *extra_key, const char *extra_value) {
  puts_(b, name);
  puts_(b, suffix);
  int any = 0;
  for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
    puts_(b, any ? "," : "{");
    puts_(b, labels[i]);
    puts_(b, "=\"");
    escaped(b, labels[i + 1], 1);
    puts_(b, "\"");
    any = 1;
  }
  if (extra_key) {
    puts_(b, any ? "," : "{");
    puts_(b, extra_key);
    puts_(b, "=\"");
    escaped(b, extra_value, 1);
    puts_(b, "\"");
    any = 1;
  }
  if (any) puts_(b, "}");
  puts_(b, " ");
}

void nimble_metrics_sample(nimble_metrics_buf *b, const char *name, const char *const *labels,
                           double value) {
  series(b, name, "", labels, NULL, NULL);
  number(b, value);
  puts_(b, "\n");
}

void nimble_metrics_sample_u64(nimble_metrics_buf *b, const char *name,
                               const char *const *labels, uint64_t value) {
  series(b, name, "", labels, NULL, NULL);
  printf_(b, "%" PRIu64 "\n", value);
}

void nimble_histogram_observe(nimble_histogram *h, const double *bounds, size_t num_bounds,
                              double value) {
  if (isnan(value)) return;
  if (num_bounds > NIMBLE_HISTOGRAM_MAX_BUCKETS) num_bounds = NIMBLE_HISTOGRAM_MAX_BUCKETS;
  size_t i = 0;
  while (i < num_bounds && value > bounds[i]) i++;
  h->counts[i]++;
  h->sum += value;
  h->count++;
}

void nimble_metrics_histogram(nimble_metrics_buf *b, const char *name, const char *const *labels,
                              const nimble_histogram *h, const double *bounds, size_t num_bounds) {
  if (num_bounds > NIMBLE_HISTOGRAM_MAX_BUCKETS) num_bounds = NIMBLE_HISTOGRAM_MAX_BUCKETS;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= num_bounds; i++) {
    cumulative += h->counts[i];
    char le[32];
    if (i < num_bounds) snprintf(le, sizeof le, "%g", bounds[i]);
    else snprintf(le, sizeof le, "+Inf");
    series(b, name, "_bucket", labels, "le", le);
    printf_(b, "%" PRIu64 "\n", cumulative);
  }
  series(b, name, "_sum", labels, NULL, NULL);
  number(b, h->sum);
  puts_(b, "\n");
  series(b, name, "_count", labels, NULL, NULL);
  printf_(b, "%" PRIu64 "\n", h->count);
}
