/* The scheduler's metrics: one mutex over plain counters, histograms and
 * the worker snapshot. Targets get their series on first use, up to
 * SCHED_METRICS_MAX_TARGETS; later ones are counted under target="other". */
#include "sched_metrics.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHED_METRICS_MAX_TARGETS 64
#define N_KINDS 2
#define N_STATES 5
#define MAX_NAMED 24

static const char *const kKinds[N_KINDS] = {"compile", "profile"};
static const char *const kStates[N_STATES] = {"queued", "running", "done", "failed", "cancelled"};

typedef struct per_target {
  char name[256];
  uint64_t cache_hits, cache_misses, merged;
  uint64_t delivered[N_KINDS], requeued[N_KINDS];
  uint64_t finished[N_KINDS][N_STATES];
  nimble_histogram wait[N_KINDS], run[N_KINDS];
  uint64_t workers, busy; /* snapshot */
} per_target;

typedef struct named_count {
  char name[40];
  uint64_t n;
} named_count;

struct sched_metrics {
  pthread_mutex_t mu;
  uint64_t jobs[N_KINDS][N_STATES];
  named_count requests[MAX_NAMED], errors[MAX_NAMED];
  per_target t[SCHED_METRICS_MAX_TARGETS + 1]; /* the last is "other" */
  size_t nt;
  uint64_t connected, busy;
};

sched_metrics *sched_metrics_create(void) {
  sched_metrics *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  snprintf(m->t[SCHED_METRICS_MAX_TARGETS].name, sizeof m->t[0].name, "other");
  return m;
}

void sched_metrics_destroy(sched_metrics *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static int kind_index(const char *kind) { return kind && !strcmp(kind, "profile") ? 1 : 0; }

static int state_index(const char *state) {
  for (int i = 0; i < N_STATES; i++)
    if (state && !strcmp(state, kStates[i])) return i;
  return -1;
}

/* Under the lock. */
static per_target *target_of(sched_metrics *m, const char *target) {
  for (size_t i = 0; i < m->nt; i++)
    if (!strcmp(m->t[i].name, target)) return &m->t[i];
  if (m->nt == SCHED_METRICS_MAX_TARGETS || strlen(target) >= sizeof m->t[0].name)
    return &m->t[SCHED_METRICS_MAX_TARGETS];
  per_target *p = &m->t[m->nt++];
  snprintf(p->name, sizeof p->name, "%s", target);
  return p;
}

static void count_named(named_count *list, const char *name) {
  for (int i = 0; i < MAX_NAMED; i++) {
    if (!list[i].name[0]) snprintf(list[i].name, sizeof list[i].name, "%s", name);
    if (!strcmp(list[i].name, name)) {
      list[i].n++;
      return;
    }
  }
}

#define LOCKED(m, body)              \
  do {                               \
    if (!(m)) return;                \
    pthread_mutex_lock(&(m)->mu);    \
    body;                            \
    pthread_mutex_unlock(&(m)->mu);  \
  } while (0)

void sched_metrics_job_state(sched_metrics *m, const char *kind, const char *state) {
  int s = state_index(state);
  if (s < 0) return;
  LOCKED(m, m->jobs[kind_index(kind)][s]++);
}

void sched_metrics_request(sched_metrics *m, const char *type) {
  LOCKED(m, count_named(m->requests, type));
}

void sched_metrics_error(sched_metrics *m, const char *code) {
  LOCKED(m, count_named(m->errors, code));
}

void sched_metrics_cache(sched_metrics *m, const char *target, int hit) {
  LOCKED(m, {
    per_target *p = target_of(m, target);
    if (hit) p->cache_hits++;
    else p->cache_misses++;
  });
}

void sched_metrics_merged(sched_metrics *m, const char *target) {
  LOCKED(m, target_of(m, target)->merged++);
}

void sched_metrics_task_delivered(sched_metrics *m, const char *kind, const char *target,
                                  double wait_s) {
  int k = kind_index(kind);
  LOCKED(m, {
    per_target *p = target_of(m, target);
    p->delivered[k]++;
    nimble_histogram_observe(&p->wait[k], nimble_metrics_seconds_buckets,
                             nimble_metrics_seconds_bucket_count, wait_s < 0 ? 0 : wait_s);
  });
}

void sched_metrics_task_requeued(sched_metrics *m, const char *kind, const char *target) {
  LOCKED(m, target_of(m, target)->requeued[kind_index(kind)]++);
}

void sched_metrics_task_finished(sched_metrics *m, const char *kind, const char *target,
                                 const char *state, double run_s) {
  int k = kind_index(kind), s = state_index(state);
  if (s < 0) return;
  LOCKED(m, {
    per_target *p = target_of(m, target);
    p->finished[k][s]++;
    if (run_s >= 0)
      nimble_histogram_observe(&p->run[k], nimble_metrics_seconds_buckets,
                               nimble_metrics_seconds_bucket_count, run_s);
  });
}

void sched_metrics_target(sched_metrics *m, const char *target) {
  LOCKED(m, target_of(m, target));
}

void sched_metrics_set_workers(sched_metrics *m, const sched_metrics_worker *w, size_t n) {
  LOCKED(m, {
    for (size_t i = 0; i <= SCHED_METRICS_MAX_TARGETS; i++) m->t[i].workers = m->t[i].busy = 0;
    m->connected = n;
    m->busy = 0;
    for (size_t i = 0; i < n; i++) {
      if (w[i].busy) m->busy++;
      for (size_t k = 0; k < w[i].ntargets; k++) {
        per_target *p = target_of(m, w[i].targets[k]);
        p->workers++;
        if (w[i].busy) p->busy++;
      }
    }
  });
}

void sched_metrics_targets(sched_metrics *m, char *buf, size_t size) {
  if (size < 2) return;
  buf[0] = buf[1] = '\0';
  LOCKED(m, {
    size_t off = 0;
    for (size_t i = 0; i < m->nt; i++) {
      size_t len = strlen(m->t[i].name);
      if (off + len + 2 > size) break;
      memcpy(buf + off, m->t[i].name, len + 1);
      off += len + 1;
    }
    buf[off] = '\0';
  });
}

/* The targets written: the known ones, and "other" once used. */
static size_t targets_written(const sched_metrics *m) {
  const per_target *o = &m->t[SCHED_METRICS_MAX_TARGETS];
  int other_used = o->cache_hits || o->cache_misses || o->merged || o->workers;
  for (int k = 0; k < N_KINDS && !other_used; k++) {
    other_used = o->delivered[k] || o->requeued[k] || o->run[k].count;
    for (int s = 0; s < N_STATES; s++) other_used |= o->finished[k][s] != 0;
  }
  return other_used ? SCHED_METRICS_MAX_TARGETS + 1 : m->nt;
}

static const per_target *nth(const sched_metrics *m, size_t i) {
  return i < m->nt ? &m->t[i] : &m->t[SCHED_METRICS_MAX_TARGETS];
}

void sched_metrics_write(sched_metrics *m, nimble_metrics_buf *b, const sched_metrics_queue *queues,
                         size_t n_queues, int redis_up) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  size_t nt = targets_written(m);
  const double *bk = nimble_metrics_seconds_buckets;
  size_t nbk = nimble_metrics_seconds_bucket_count;

  nimble_metrics_family(b, "nimble_scheduler_jobs_total", "counter",
                        "Jobs that entered each state, by kind (compile: SUBMIT, profile: PROFILE).");
  for (int k = 0; k < N_KINDS; k++)
    for (int s = 0; s < N_STATES; s++) {
      const char *l[] = {"kind", kKinds[k], "state", kStates[s], NULL};
      nimble_metrics_sample_u64(b, "nimble_scheduler_jobs_total", l, m->jobs[k][s]);
    }

  nimble_metrics_family(b, "nimble_scheduler_requests_total", "counter",
                        "Client requests received, by message type.");
  for (int i = 0; i < MAX_NAMED && m->requests[i].name[0]; i++) {
    const char *l[] = {"type", m->requests[i].name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_requests_total", l, m->requests[i].n);
  }
  nimble_metrics_family(b, "nimble_scheduler_errors_total", "counter",
                        "ERROR replies sent to clients and workers, by status code.");
  for (int i = 0; i < MAX_NAMED && m->errors[i].name[0]; i++) {
    const char *l[] = {"code", m->errors[i].name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_errors_total", l, m->errors[i].n);
  }

  nimble_metrics_family(b, "nimble_scheduler_cache_hits_total", "counter",
                        "Targets of SUBMIT answered from the compile cache.");
  for (size_t i = 0; i < nt; i++) {
    const char *l[] = {"target", nth(m, i)->name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_cache_hits_total", l, nth(m, i)->cache_hits);
  }
  nimble_metrics_family(b, "nimble_scheduler_cache_misses_total", "counter",
                        "Targets of SUBMIT the compile cache could not answer.");
  for (size_t i = 0; i < nt; i++) {
    const char *l[] = {"target", nth(m, i)->name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_cache_misses_total", l, nth(m, i)->cache_misses);
  }
  nimble_metrics_family(b, "nimble_scheduler_merged_total", "counter",
                        "Cache misses that joined an identical task already in flight.");
  for (size_t i = 0; i < nt; i++) {
    const char *l[] = {"target", nth(m, i)->name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_merged_total", l, nth(m, i)->merged);
  }

  nimble_metrics_family(b, "nimble_scheduler_tasks_delivered_total", "counter",
                        "Tasks handed to a worker (each delivery of a requeued task counts).");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < N_KINDS; k++) {
      const char *l[] = {"kind", kKinds[k], "target", nth(m, i)->name, NULL};
      nimble_metrics_sample_u64(b, "nimble_scheduler_tasks_delivered_total", l, nth(m, i)->delivered[k]);
    }
  nimble_metrics_family(b, "nimble_scheduler_tasks_requeued_total", "counter",
                        "Tasks put back in their queue (lapsed lease, retryable failure).");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < N_KINDS; k++) {
      const char *l[] = {"kind", kKinds[k], "target", nth(m, i)->name, NULL};
      nimble_metrics_sample_u64(b, "nimble_scheduler_tasks_requeued_total", l, nth(m, i)->requeued[k]);
    }
  nimble_metrics_family(b, "nimble_scheduler_tasks_finished_total", "counter",
                        "Tasks finished, by final state (cache hits are not tasks that ran).");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < N_KINDS; k++)
      for (int s = 2; s < N_STATES; s++) {
        const char *l[] = {"kind", kKinds[k], "target", nth(m, i)->name, "state", kStates[s], NULL};
        nimble_metrics_sample_u64(b, "nimble_scheduler_tasks_finished_total", l,
                                  nth(m, i)->finished[k][s]);
      }

  nimble_metrics_family(b, "nimble_scheduler_task_wait_seconds", "histogram",
                        "Time a task waited in its queue before a delivery.");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < N_KINDS; k++) {
      const char *l[] = {"kind", kKinds[k], "target", nth(m, i)->name, NULL};
      nimble_metrics_histogram(b, "nimble_scheduler_task_wait_seconds", l, &nth(m, i)->wait[k], bk, nbk);
    }
  nimble_metrics_family(b, "nimble_scheduler_task_run_seconds", "histogram",
                        "Time from the delivery that finished a task to its RESULT or FAILURE.");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < N_KINDS; k++) {
      const char *l[] = {"kind", kKinds[k], "target", nth(m, i)->name, NULL};
      nimble_metrics_histogram(b, "nimble_scheduler_task_run_seconds", l, &nth(m, i)->run[k], bk, nbk);
    }

  if (queues) {
    nimble_metrics_family(b, "nimble_scheduler_queue_length", "gauge",
                          "Tasks waiting in each queue (read from Redis when scraped).");
    for (size_t i = 0; i < n_queues; i++) {
      const char *l[] = {"kind", queues[i].kind, "target", queues[i].target, NULL};
      nimble_metrics_sample_u64(b, "nimble_scheduler_queue_length", l,
                                queues[i].length < 0 ? 0 : (uint64_t)queues[i].length);
    }
    for (size_t i = 0; i < m->nt; i++)
      for (int k = 0; k < N_KINDS; k++) {
        int listed = 0;
        for (size_t q = 0; q < n_queues && !listed; q++)
          listed = !strcmp(queues[q].target, m->t[i].name) && !strcmp(queues[q].kind, kKinds[k]);
        if (listed) continue;
        const char *l[] = {"kind", kKinds[k], "target", m->t[i].name, NULL};
        nimble_metrics_sample_u64(b, "nimble_scheduler_queue_length", l, 0);
      }
  }

  nimble_metrics_family(b, "nimble_scheduler_workers", "gauge",
                        "Connected workers that serve each target.");
  for (size_t i = 0; i < nt; i++) {
    const char *l[] = {"target", nth(m, i)->name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_workers", l, nth(m, i)->workers);
  }
  nimble_metrics_family(b, "nimble_scheduler_workers_busy", "gauge",
                        "Connected workers that serve each target and hold a task now.");
  for (size_t i = 0; i < nt; i++) {
    const char *l[] = {"target", nth(m, i)->name, NULL};
    nimble_metrics_sample_u64(b, "nimble_scheduler_workers_busy", l, nth(m, i)->busy);
  }
  nimble_metrics_family(b, "nimble_scheduler_workers_connected", "gauge", "Connected workers.");
  nimble_metrics_sample_u64(b, "nimble_scheduler_workers_connected", NULL, m->connected);
  nimble_metrics_family(b, "nimble_scheduler_redis_up", "gauge",
                        "1 when the scrape could read Redis, else 0.");
  nimble_metrics_sample_u64(b, "nimble_scheduler_redis_up", NULL, redis_up ? 1 : 0);
  pthread_mutex_unlock(&m->mu);
}
