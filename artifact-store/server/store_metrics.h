/* nimble-store's Prometheus metrics (GET /metrics): every request is
 * counted when libmicrohttpd reports it complete, by method, route and
 * status, with its bytes and duration. Thread-safe (one mutex): requests
 * complete on their connection threads. docs/store.md lists the names. */
#ifndef NIMBLE_STORE_METRICS_H
#define NIMBLE_STORE_METRICS_H

#include <stdint.h>

#include "nimble/metrics_text.h"

typedef struct nimble_store_metrics nimble_store_metrics;

/* NULL when out of memory; every call accepts NULL. */
nimble_store_metrics *nimble_store_metrics_create(void);
void nimble_store_metrics_destroy(nimble_store_metrics *m);

/* One finished request: `route` is a route name ("blob", "manifest", ...),
 * `status` the HTTP status sent (0: none), `completed` 0 when the
 * connection ended before the response did. */
void nimble_store_metrics_request(nimble_store_metrics *m, const char *method, const char *route,
                                  unsigned status, int completed, uint64_t bytes_in,
                                  uint64_t bytes_out, double seconds);

/* Writes every family; `connections` and `in_flight` are the gauges the
 * server tracks itself. */
void nimble_store_metrics_write(nimble_store_metrics *m, nimble_metrics_buf *b,
                                unsigned connections, unsigned in_flight);

#endif
