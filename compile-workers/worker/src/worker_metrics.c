/* The worker's metrics and its /metrics port (libmicrohttpd, one internal
 * thread). Targets get their series on first use, up to WM_MAX_TARGETS;
 * later ones count under target="other". */
#include "worker_metrics.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nimble/listen_address.h"
#include "nimble/metrics_text.h"

#define WM_MAX_TARGETS 32

typedef struct wm_target {
  char name[256];
  uint64_t received[2], finished[2], failed[2], cancelled[2];
  uint64_t kc_hits, kc_misses, kc_fetched, kc_refused, kc_shared; /* compiles only */
  nimble_histogram seconds[2];
} wm_target;

struct worker_metrics {
  pthread_mutex_t mu;
  char worker[129], compiler_version[257];
  wm_target t[WM_MAX_TARGETS + 1]; /* the last is "other" */
  size_t nt;
  int busy;
  uint64_t resent, unacknowledged; /* RESULT / PROFILE_RESULT copies (worker_loop.c) */
  struct MHD_Daemon *daemon;
};

static const char *const kKinds[2] = {"compile", "profile"};

worker_metrics *worker_metrics_create(const char *worker, const char *compiler_version) {
  worker_metrics *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->mu, NULL);
  snprintf(m->worker, sizeof m->worker, "%s", worker);
  snprintf(m->compiler_version, sizeof m->compiler_version, "%s", compiler_version);
  snprintf(m->t[WM_MAX_TARGETS].name, sizeof m->t[0].name, "other");
  return m;
}

void worker_metrics_destroy(worker_metrics *m) {
  if (!m) return;
  if (m->daemon) MHD_stop_daemon(m->daemon);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static int kind_index(const char *kind) { return kind && !strcmp(kind, "profile"); }

/* Under the lock. */
static wm_target *target_of(worker_metrics *m, const char *target) {
  for (size_t i = 0; i < m->nt; i++)
    if (!strcmp(m->t[i].name, target)) return &m->t[i];
  if (m->nt == WM_MAX_TARGETS || strlen(target) >= sizeof m->t[0].name) return &m->t[WM_MAX_TARGETS];
  wm_target *p = &m->t[m->nt++];
  snprintf(p->name, sizeof p->name, "%s", target);
  return p;
}

void worker_metrics_task_received(worker_metrics *m, const char *kind, const char *target) {
  if (!m || !target) return;
  pthread_mutex_lock(&m->mu);
  target_of(m, target)->received[kind_index(kind)]++;
  pthread_mutex_unlock(&m->mu);
}

void worker_metrics_task_finished(worker_metrics *m, const char *kind, const char *target, int ok,
                                  double seconds) {
  if (!m || !target) return;
  int k = kind_index(kind);
  pthread_mutex_lock(&m->mu);
  wm_target *p = target_of(m, target);
  p->finished[k]++;
  if (!ok) p->failed[k]++;
  if (seconds >= 0)
    nimble_histogram_observe(&p->seconds[k], nimble_metrics_seconds_buckets,
                             nimble_metrics_seconds_bucket_count, seconds);
  pthread_mutex_unlock(&m->mu);
}

void worker_metrics_task_cancelled(worker_metrics *m, const char *kind, const char *target) {
  if (!m || !target) return;
  pthread_mutex_lock(&m->mu);
  target_of(m, target)->cancelled[kind_index(kind)]++;
  pthread_mutex_unlock(&m->mu);
}

void worker_metrics_kcache(worker_metrics *m, const char *target, long hits, long misses, long fetched,
                           long refused, long shared) {
  if (!m || !target) return;
  pthread_mutex_lock(&m->mu);
  wm_target *p = target_of(m, target);
  p->kc_hits += hits > 0 ? (uint64_t)hits : 0;
  p->kc_misses += misses > 0 ? (uint64_t)misses : 0;
  p->kc_fetched += fetched > 0 ? (uint64_t)fetched : 0;
  p->kc_refused += refused > 0 ? (uint64_t)refused : 0;
  p->kc_shared += shared > 0 ? (uint64_t)shared : 0;
  pthread_mutex_unlock(&m->mu);
}

void worker_metrics_outcome(worker_metrics *m, int given_up) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  if (given_up) m->unacknowledged++;
  else m->resent++;
  pthread_mutex_unlock(&m->mu);
}

void worker_metrics_set_busy(worker_metrics *m, int busy) {
  if (!m) return;
  pthread_mutex_lock(&m->mu);
  m->busy = busy;
  pthread_mutex_unlock(&m->mu);
}

/* Writes one per-target counter family for kind k. */
static void per_target(nimble_metrics_buf *b, const worker_metrics *m, size_t nt, const char *name,
                       const char *help, int k, size_t field) {
  nimble_metrics_family(b, name, "counter", help);
  for (size_t i = 0; i < nt; i++) {
    const wm_target *t = i < m->nt ? &m->t[i] : &m->t[WM_MAX_TARGETS];
    const uint64_t *v = (const uint64_t *)((const char *)t + field);
    const char *l[] = {"target", t->name, NULL};
    nimble_metrics_sample_u64(b, name, l, v[k]);
  }
}

static void write_all(worker_metrics *m, nimble_metrics_buf *b) {
  pthread_mutex_lock(&m->mu);
  const wm_target *o = &m->t[WM_MAX_TARGETS];
  size_t nt = o->received[0] || o->received[1] ? WM_MAX_TARGETS + 1 : m->nt;
  nimble_metrics_family(b, "nimble_worker_info", "gauge", "This worker: its id and compiler version.");
  const char *info[] = {"worker", m->worker, "compiler_version", m->compiler_version, NULL};
  nimble_metrics_sample_u64(b, "nimble_worker_info", info, 1);
  nimble_metrics_family(b, "nimble_worker_busy", "gauge", "1 while the worker holds a task.");
  nimble_metrics_sample_u64(b, "nimble_worker_busy", NULL, (uint64_t)m->busy);
  nimble_metrics_family(b, "nimble_worker_outcomes_resent_total", "counter",
                        "RESULT or PROFILE_RESULT copies sent again before the scheduler's ACK.");
  nimble_metrics_sample_u64(b, "nimble_worker_outcomes_resent_total", NULL, m->resent);
  nimble_metrics_family(b, "nimble_worker_outcomes_unacknowledged_total", "counter",
                        "Task outcomes given up on after their last copy went unacknowledged.");
  nimble_metrics_sample_u64(b, "nimble_worker_outcomes_unacknowledged_total", NULL, m->unacknowledged);
  nimble_metrics_family(b, "nimble_worker_tasks_received_total", "counter",
                        "Tasks received: compile (TASK) and profile (PROFILE_TASK).");
  for (size_t i = 0; i < nt; i++)
    for (int k = 0; k < 2; k++) {
      const wm_target *t = i < m->nt ? &m->t[i] : o;
      const char *l[] = {"kind", kKinds[k], "target", t->name, NULL};
      nimble_metrics_sample_u64(b, "nimble_worker_tasks_received_total", l, t->received[k]);
    }
  per_target(b, m, nt, "nimble_worker_compiles_total",
             "Compile tasks finished, either way (RESULT or FAILURE sent).", 0,
             offsetof(wm_target, finished));
  per_target(b, m, nt, "nimble_worker_compile_failures_total",
             "Compile tasks that failed (compiler, model fetch or artifact push).", 0,
             offsetof(wm_target, failed));
  per_target(b, m, nt, "nimble_worker_compiles_cancelled_total",
             "Compile tasks the scheduler cancelled while they ran.", 0,
             offsetof(wm_target, cancelled));
  nimble_metrics_family(b, "nimble_worker_compile_seconds", "histogram",
                        "Wall-clock time of the compiler process, start to exit.");
  for (size_t i = 0; i < nt; i++) {
    const wm_target *t = i < m->nt ? &m->t[i] : o;
    const char *l[] = {"target", t->name, NULL};
    nimble_metrics_histogram(b, "nimble_worker_compile_seconds", l, &t->seconds[0],
                             nimble_metrics_seconds_buckets, nimble_metrics_seconds_bucket_count);
  }
  per_target(b, m, nt, "nimble_worker_kernel_cache_hits_total",
             "Kernels compiles found in the kernel cache (LLVM skipped).", 0, offsetof(wm_target, kc_hits));
  per_target(b, m, nt, "nimble_worker_kernel_cache_misses_total",
             "Kernels compiles built with LLVM (not in the kernel cache).", 0, offsetof(wm_target, kc_misses));
  per_target(b, m, nt, "nimble_worker_kcache_fetched_total",
             "Farm kernel cache entries fetched from the store before compiles.", 0,
             offsetof(wm_target, kc_fetched));
  per_target(b, m, nt, "nimble_worker_kcache_refused_total",
             "Farm kernel cache entries that could not be fetched or failed their digest (not used).", 0,
             offsetof(wm_target, kc_refused));
  per_target(b, m, nt, "nimble_worker_kcache_shared_total",
             "Kernels compiles built, pushed to the store and reported to the farm's index.", 0,
             offsetof(wm_target, kc_shared));
  per_target(b, m, nt, "nimble_worker_profiles_total",
             "Profile tasks finished, either way (PROFILE_RESULT or FAILURE sent).", 1,
             offsetof(wm_target, finished));
  per_target(b, m, nt, "nimble_worker_profile_failures_total", "Profile tasks that failed.", 1,
             offsetof(wm_target, failed));
  nimble_metrics_family(b, "nimble_worker_profile_seconds", "histogram",
                        "Wall-clock time of the profiling process, start to exit.");
  for (size_t i = 0; i < nt; i++) {
    const wm_target *t = i < m->nt ? &m->t[i] : o;
    const char *l[] = {"target", t->name, NULL};
    nimble_metrics_histogram(b, "nimble_worker_profile_seconds", l, &t->seconds[1],
                             nimble_metrics_seconds_buckets, nimble_metrics_seconds_bucket_count);
  }
  pthread_mutex_unlock(&m->mu);
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type,
                               const char *data, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
  worker_metrics *m = cls;
  (void)version;
  (void)upload_data;
  if (*upload_data_size) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (!*req_cls) {
    *req_cls = m;
    return MHD_YES;
  }
  static const char kText[] = "text/plain; charset=utf-8";
  if (strcmp(url, "/metrics"))
    return respond(c, MHD_HTTP_NOT_FOUND, kText, "not found: try /metrics\n", 24);
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, kText, "GET /metrics\n", 13);
  nimble_metrics_buf b;
  nimble_metrics_buf_init(&b);
  write_all(m, &b);
  enum MHD_Result ret = b.failed || !b.data
                            ? respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, kText, "out of memory\n", 14)
                            : respond(c, MHD_HTTP_OK, NIMBLE_METRICS_CONTENT_TYPE, b.data, b.len);
  nimble_metrics_buf_free(&b);
  return ret;
}

nimble_status_t worker_metrics_serve(worker_metrics *m, const char *address, char *out_url,
                                     size_t url_size) {
  if (!m) return NIMBLE_OOM();
  char host[256];
  struct addrinfo *res;
  NIMBLE_RETURN_IF_ERROR(nimble_listen_address_resolve(address, "127.0.0.1:9091", host, sizeof host, &res));
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
  if (res->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR, res->ai_addr,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_END);
  freeaddrinfo(res);
  if (!m->daemon) return nimble_status_make(NIMBLE_UNAVAILABLE, "cannot listen on '%s' (in use?)", address);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
  if (out_url)
    snprintf(out_url, url_size, strchr(host, ':') ? "http://[%s]:%u" : "http://%s:%u", host,
             info ? info->port : 0u);
  return nimble_ok();
}
