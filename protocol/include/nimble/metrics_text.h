/* Prometheus text exposition (format 0.0.4), shared by the daemons'
 * /metrics endpoints (docs/farm.md lists the metrics).
 *
 * Encoding only: each daemon keeps its own metric state (under its own
 * lock) and writes it into a nimble_metrics_buf when scraped.
 *
 *   nimble_metrics_buf b;
 *   nimble_metrics_buf_init(&b);
 *   nimble_metrics_family(&b, "nimble_store_requests_total", "counter", "HTTP requests served.");
 *   const char *labels[] = {"method", "GET", "route", "blob", "status", "200", NULL};
 *   nimble_metrics_sample_u64(&b, "nimble_store_requests_total", labels, 3);
 *   ... b.data (NUL-terminated, b.len bytes) unless b.failed ...
 *   nimble_metrics_buf_free(&b);
 *
 * Label values are escaped (\\, \", \n) as the format requires; names are
 * the caller's literals. A histogram is cumulative buckets with `le`, then
 * _sum and _count. */
#ifndef NIMBLE_METRICS_TEXT_H
#define NIMBLE_METRICS_TEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The content type a /metrics response carries. */
#define NIMBLE_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A growing text buffer; `failed` is set (and the text dropped) when memory
 * runs out, so writers need not check each call. */
typedef struct nimble_metrics_buf {
  char *data; /* owned, NUL-terminated once anything was written */
  size_t len, cap;
  int failed;
} nimble_metrics_buf;

void nimble_metrics_buf_init(nimble_metrics_buf *b);
void nimble_metrics_buf_free(nimble_metrics_buf *b);

/* The # HELP and # TYPE lines of a metric family; type is "counter",
 * "gauge" or "histogram". */
void nimble_metrics_family(nimble_metrics_buf *b, const char *name, const char *type,
                           const char *help);

/* One sample line. `labels` alternates names and values and ends with NULL;
 * NULL for none. */
void nimble_metrics_sample(nimble_metrics_buf *b, const char *name, const char *const *labels,
                           double value);
/* The same with an exact integer value. */
void nimble_metrics_sample_u64(nimble_metrics_buf *b, const char *name,
                               const char *const *labels, uint64_t value);

#define NIMBLE_HISTOGRAM_MAX_BUCKETS 24

/* A histogram's state over caller-given upper bounds (ascending, at most
 * NIMBLE_HISTOGRAM_MAX_BUCKETS; +Inf is implicit). Zero-initialise it. */
typedef struct nimble_histogram {
  uint64_t counts[NIMBLE_HISTOGRAM_MAX_BUCKETS + 1]; /* per bucket, not cumulative */
  double sum;
  uint64_t count;
} nimble_histogram;

/* Adds one observation (a NaN is ignored). */
void nimble_histogram_observe(nimble_histogram *h, const double *bounds, size_t num_bounds,
                              double value);

/* Writes NAME_bucket{...,le="B"} (cumulative, then le="+Inf"), NAME_sum and
 * NAME_count; `labels` as for nimble_metrics_sample. The caller writes the
 * family line (type "histogram") first. */
void nimble_metrics_histogram(nimble_metrics_buf *b, const char *name, const char *const *labels,
                              const nimble_histogram *h, const double *bounds, size_t num_bounds);

/* Buckets for durations in seconds: 5 ms to 10 minutes. */
extern const double nimble_metrics_seconds_buckets[];
extern const size_t nimble_metrics_seconds_bucket_count;

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_METRICS_TEXT_H */
