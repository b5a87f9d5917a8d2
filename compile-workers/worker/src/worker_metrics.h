/* The worker's Prometheus metrics and the HTTP port that serves them
 * (private to the worker). The work loop counts; libmicrohttpd's thread
 * writes the text; one mutex between them. docs/farm.md lists the names. */
#ifndef NIMBLE_WORKER_METRICS_H
#define NIMBLE_WORKER_METRICS_H

#include <stddef.h>

#include "nimble/status.h"

typedef struct worker_metrics worker_metrics;

/* `worker` and `compiler_version` label nimble_worker_info (copied). NULL
 * when out of memory; every call accepts NULL. */
worker_metrics *worker_metrics_create(const char *worker, const char *compiler_version);
/* Stops the HTTP port first if one was started. */
void worker_metrics_destroy(worker_metrics *m);

/* A task of `kind` ("compile" or "profile") for `target` arrived. */
void worker_metrics_task_received(worker_metrics *m, const char *kind, const char *target);
/* It ended: `ok`, with its child (compiler or profiler) having run `seconds`
 * (< 0: no child ran, e.g. the model could not be fetched). */
void worker_metrics_task_finished(worker_metrics *m, const char *kind, const char *target, int ok,
                                  double seconds);
void worker_metrics_task_cancelled(worker_metrics *m, const char *kind, const char *target);
/* The kernel cache (docs/farm.md, "The farm's kernel cache") of one
 * compile for `target`: code generation's hits and misses, the farm
 * entries fetched and refused before it, the kernels shared after it. */
void worker_metrics_kcache(worker_metrics *m, const char *target, long hits, long misses, long fetched,
                           long refused, long shared);
/* 1 while the worker holds a task. */
void worker_metrics_set_busy(worker_metrics *m, int busy);
/* A task's outcome sent again (given_up 0), or given up on unacknowledged (1). */
void worker_metrics_outcome(worker_metrics *m, int given_up);

/* Serves GET /metrics on `address` ("HOST:PORT", port 0: any) from its own
 * thread; *out_url (may be NULL) receives "http://HOST:PORT" bound. */
nimble_status_t worker_metrics_serve(worker_metrics *m, const char *address, char *out_url,
                                     size_t url_size);

#endif
