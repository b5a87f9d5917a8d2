/* nimble-store's metrics: a small table of (method, route, status)
 * counters and per-route byte counters, errors and duration histograms. */
#include "store_metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Route names, as oci_routes.c gives them; anything else counts as "other". */
static const char *const kRoutes[] = {"base", "blob", "upload", "manifest", "tags", "metrics", "other"};
#define N_ROUTES (sizeof kRoutes / sizeof kRoutes[0])
/* Methods a client can send are unbounded; these and "other". */
static const char *const kMethods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "other"};
#define N_METHODS (sizeof kMethods / sizeof kMethods[0])
#define MAX_SERIES 256

typedef struct series {
  unsigned char method, route;
  unsigned status;
  uint64_t n;
} series;

struct nimble_store_metrics {
  pthread_mutex_t mu;
  series s[MAX_SERIES];
  size_t ns;
  uint64_t dropped; /* requests beyond MAX_SERIES distinct series */
  uint64_t in[N_ROUTES], out[N_ROUTES];
  uint64_t client_errors[N_ROUTES], server_errors[N_ROUTES], aborted[N_ROUTES];
  nimble_histogram seconds[N_ROUTES];
};

nimble_store_metrics *nimble_store_metrics_create(void) {
  nimble_store_metrics *m = calloc(1, sizeof *m);
  if (m) pthread_mutex_init(&m->mu, NULL);
  return m;
}

void nimble_store_metrics_destroy(nimble_store_metrics *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static unsigned char index_of(const char *const *list, size_t n, const char *name) {
  for (size_t i = 0; i + 1 < n; i++)
    if (name && !strcmp(list[i], name)) return (unsigned char)i;
  return (unsigned char)(n - 1);
}

/* Request durations: 1 ms to 10 minutes (blob transfers can be long). */
static const double kBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                  1,     2.5,    5,     10,   30,    60,   120, 600};
#define N_BUCKETS (sizeof kBuckets / sizeof kBuckets[0])

void nimble_store_metrics_request(nimble_store_metrics *m, const char *method, const char *route,
                                  unsigned status, int completed, uint64_t bytes_in,
                                  uint64_t bytes_out, double seconds) {
  if (!m) return;
  unsigned char mi = index_of(kMethods, N_METHODS, method), ri = index_of(kRoutes, N_ROUTES, route);
  pthread_mutex_lock(&m->mu);
  size_t i = 0;
  while (i < m->ns && !(m->s[i].method == mi && m->s[i].route == ri && m->s[i].status == status)) i++;
  if (i == m->ns && m->ns < MAX_SERIES) m->s[m->ns++] = (series){mi, ri, status, 0};
  if (i < m->ns) m->s[i].n++;
  else m->dropped++;
  m->in[ri] += bytes_in;
  m->out[ri] += bytes_out;
  if (!completed) m->aborted[ri]++;
  else if (status >= 500) m->server_errors[ri]++;
  else if (status >= 400) m->client_errors[ri]++;
  nimble_histogram_observe(&m->seconds[ri], kBuckets, N_BUCKETS, seconds);
  pthread_mutex_unlock(&m->mu);
}

void nimble_store_metrics_write(nimble_store_metrics *m, nimble_metrics_buf *b,
                                unsigned connections, unsigned in_flight) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  nimble_metrics_family(b, "nimble_store_requests_total", "counter",
                        "HTTP requests finished, by method, route and status (0: none was sent).");
  for (size_t i = 0; i < m->ns; i++) {
    char status[16];
    snprintf(status, sizeof status, "%u", m->s[i].status);
    const char *l[] = {"method", kMethods[m->s[i].method], "route", kRoutes[m->s[i].route],
                       "status", status, NULL};
    nimble_metrics_sample_u64(b, "nimble_store_requests_total", l, m->s[i].n);
  }
  nimble_metrics_family(b, "nimble_store_requests_uncounted_total", "counter",
                        "Requests beyond the series this store keeps (counted in bytes and durations).");
  nimble_metrics_sample_u64(b, "nimble_store_requests_uncounted_total", NULL, m->dropped);
  nimble_metrics_family(b, "nimble_store_received_bytes_total", "counter",
                        "Request body bytes received, by route.");
  for (size_t r = 0; r < N_ROUTES; r++) {
    const char *l[] = {"route", kRoutes[r], NULL};
    nimble_metrics_sample_u64(b, "nimble_store_received_bytes_total", l, m->in[r]);
  }
  nimble_metrics_family(b, "nimble_store_sent_bytes_total", "counter",
                        "Response body bytes sent, by route (HEAD sends none).");
  for (size_t r = 0; r < N_ROUTES; r++) {
    const char *l[] = {"route", kRoutes[r], NULL};
    nimble_metrics_sample_u64(b, "nimble_store_sent_bytes_total", l, m->out[r]);
  }
  nimble_metrics_family(b, "nimble_store_errors_total", "counter",
                        "Requests that failed, by route: client (4xx), server (5xx), aborted "
                        "(the connection ended before the response).");
  for (size_t r = 0; r < N_ROUTES; r++) {
    const char *kinds[3] = {"client", "server", "aborted"};
    const uint64_t v[3] = {m->client_errors[r], m->server_errors[r], m->aborted[r]};
    for (int k = 0; k < 3; k++) {
      const char *l[] = {"route", kRoutes[r], "kind", kinds[k], NULL};
      nimble_metrics_sample_u64(b, "nimble_store_errors_total", l, v[k]);
    }
  }
  nimble_metrics_family(b, "nimble_store_request_seconds", "histogram",
                        "Time from a request's first byte to its completion, by route.");
  for (size_t r = 0; r < N_ROUTES; r++) {
    const char *l[] = {"route", kRoutes[r], NULL};
    nimble_metrics_histogram(b, "nimble_store_request_seconds", l, &m->seconds[r], kBuckets, N_BUCKETS);
  }
  pthread_mutex_unlock(&m->mu);
  nimble_metrics_family(b, "nimble_store_connections", "gauge", "Open HTTP connections.");
  nimble_metrics_sample_u64(b, "nimble_store_connections", NULL, connections);
  nimble_metrics_family(b, "nimble_store_requests_in_flight", "gauge",
                        "Requests begun and not yet complete (this scrape included).");
  nimble_metrics_sample_u64(b, "nimble_store_requests_in_flight", NULL, in_flight);
}
