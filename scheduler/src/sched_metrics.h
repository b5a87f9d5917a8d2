/* The scheduler's Prometheus metrics (private to the scheduler): counters
 * and histograms the broker's thread updates as things happen, a snapshot
 * of the connected workers it refreshes every tick, written out as text by
 * the HTTP thread. Every function locks; all are safe from any thread.
 * docs/farm.md lists the names. */
#ifndef NIMBLE_SCHED_METRICS_H
#define NIMBLE_SCHED_METRICS_H

#include <stddef.h>

#include "nimble/metrics_text.h"

typedef struct sched_metrics sched_metrics;

/* NULL when out of memory (every call below accepts NULL and does nothing). */
sched_metrics *sched_metrics_create(void);
void sched_metrics_destroy(sched_metrics *m);

/* kind: "compile" or "profile". */
/* A job entered `state` (queued, running, done, failed, cancelled). */
void sched_metrics_job_state(sched_metrics *m, const char *kind, const char *state);
/* A client request of `type` ("SUBMIT", ...) arrived; an ERROR with `code` was sent. */
void sched_metrics_request(sched_metrics *m, const char *type);
void sched_metrics_error(sched_metrics *m, const char *code);
/* The compile cache answered (hit) or not (miss) for `target`; a target
 * joined a task in flight (merged). */
void sched_metrics_cache(sched_metrics *m, const char *target, int hit);
void sched_metrics_merged(sched_metrics *m, const char *target);
/* A task was delivered after waiting `wait_s` in its queue; requeued;
 * finished in `state` after running `run_s` (< 0: it never ran). */
void sched_metrics_task_delivered(sched_metrics *m, const char *kind, const char *target,
                                  double wait_s);
void sched_metrics_task_requeued(sched_metrics *m, const char *kind, const char *target);
void sched_metrics_task_finished(sched_metrics *m, const char *kind, const char *target,
                                 const char *state, double run_s);
/* Makes `target` known (its queue gauges are written even when empty). */
void sched_metrics_target(sched_metrics *m, const char *target);

/* The connected workers, replaced whole: per worker its targets and
 * whether it holds a task. */
typedef struct sched_metrics_worker {
  const char *const *targets;
  size_t ntargets;
  int busy;
} sched_metrics_worker;
void sched_metrics_set_workers(sched_metrics *m, const sched_metrics_worker *w, size_t n);

/* Queue lengths, read from Redis by the caller at scrape time. */
typedef struct sched_metrics_queue {
  const char *kind, *target;
  long long length;
} sched_metrics_queue;

/* Writes every family. `queues` (n_queues; targets the module knows and
 * the list lacks are written as 0) and redis_up (1/0) come from the
 * scrape; queues may be NULL when Redis is away. */
void sched_metrics_write(sched_metrics *m, nimble_metrics_buf *b, const sched_metrics_queue *queues,
                         size_t n_queues, int redis_up);

/* The targets known so far, written as "T1\0T2\0...\0\0" into buf
 * (truncated to size); for the scrape's queue lookups. */
void sched_metrics_targets(sched_metrics *m, char *buf, size_t size);

#endif
