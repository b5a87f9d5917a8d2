/* The scheduler's HTTP port (--metrics HOST:PORT): Prometheus metrics at
 * /metrics, the farm dashboard at / and the state it polls at /api/state.
 *
 * libmicrohttpd serves it from one internal thread, so requests are
 * handled one at a time and the thread's own Redis connection needs no
 * lock. The broker is read only through its metrics module (which locks);
 * everything else comes from Redis, as the dashboard's design asks: the
 * page shows the farm's state as the scheduler recorded it, so it works
 * the same across a scheduler restart. No authentication: bind the port to
 * loopback or a private network (docs/farm.md). */
#include <hiredis/hiredis.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "broker.h"
#include "nimble/listen_address.h"

/* The page, embedded at build time from dashboard.html (embed_file.cmake). */
extern const unsigned char sched_dashboard_html[];
extern const unsigned long sched_dashboard_html_len;

/* Jobs the state shows, newest first. */
#define STATE_MAX_JOBS 50

struct sched_http {
  struct MHD_Daemon *daemon;
  nimble_scheduler *s; /* s->metrics and settings fixed at create only */
  nimble_sched_redis *redis;
};

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type,
                               const void *data, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  if (!strncmp(type, "text/html", 9))
    /* The page loads nothing from anywhere: its script and style are
     * inline, and it talks only to this port. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; "
                            "style-src 'unsafe-inline'; connect-src 'self'; img-src data:");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *text) {
  return respond(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* ---- Redis reads ---- */

/* Every key matching `pattern` (SCAN; a farm has few queues and workers).
 * *out is a new JSON array of strings. */
static nimble_status_t scan_keys(nimble_sched_redis *r, const char *pattern, json_t **out) {
  *out = json_array();
  char cursor[32] = "0";
  do {
    redisReply *rep;
    nimble_status_t st =
        nimble_sched_redis_command(r, &rep, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
    if (st) {
      json_decref(*out);
      *out = NULL;
      return st;
    }
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_STRING) {
      snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
      const redisReply *keys = rep->element[1];
      for (size_t i = 0; keys->type == REDIS_REPLY_ARRAY && i < keys->elements; i++)
        if (keys->element[i]->type == REDIS_REPLY_STRING)
          json_array_append_new(*out, json_string(keys->element[i]->str));
    } else {
      snprintf(cursor, sizeof cursor, "0");
    }
    freeReplyObject(rep);
  } while (strcmp(cursor, "0"));
  return nimble_ok();
}

/* [{"kind","target","length"}] for every non-empty queue. */
static nimble_status_t read_queues(nimble_sched_redis *r, json_t **out) {
  json_t *keys;
  NIMBLE_RETURN_IF_ERROR(scan_keys(r, "nimble:*queue:*", &keys));
  *out = json_array();
  size_t i;
  json_t *k;
  nimble_status_t st = nimble_ok();
  json_array_foreach(keys, i, k) {
    const char *key = json_string_value(k);
    const char *kind = !strncmp(key, "nimble:queue:", 13)    ? "compile"
                       : !strncmp(key, "nimble:pqueue:", 14) ? "profile"
                                                              : NULL;
    if (!kind) continue;
    redisReply *rep;
    st = nimble_sched_redis_command(r, &rep, "LLEN %s", key);
    if (st) break;
    json_array_append_new(*out, json_pack("{s:s,s:s,s:I}", "kind", kind, "target",
                                          strchr(key + 7, ':') + 1, "length",
                                          (json_int_t)rep->integer));
    freeReplyObject(rep);
  }
  json_decref(keys);
  if (st) {
    json_decref(*out);
    *out = NULL;
  }
  return st;
}

/* A hash as a JSON object of strings (empty when absent). */
static nimble_status_t read_hash(nimble_sched_redis *r, const char *key, json_t **out) {
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(r, &rep, "HGETALL %s", key));
  *out = json_object();
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements; i += 2)
    if (rep->element[i]->str && rep->element[i + 1]->str)
      json_object_set_new(*out, rep->element[i]->str, json_string(rep->element[i + 1]->str));
  freeReplyObject(rep);
  return nimble_ok();
}

static json_int_t int_of(const json_t *o, const char *key) {
  const char *v = json_string_value(json_object_get(o, key));
  return v ? (json_int_t)strtoll(v, NULL, 10) : 0;
}

static json_t *parsed_or_empty_array(const char *text) {
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  return json_is_array(j) ? j : (json_decref(j), json_array());
}

static nimble_status_t read_workers(nimble_sched_redis *r, json_t **out) {
  json_t *keys;
  NIMBLE_RETURN_IF_ERROR(scan_keys(r, "nimble:worker:*", &keys));
  *out = json_array();
  size_t i;
  json_t *k;
  nimble_status_t st = nimble_ok();
  json_array_foreach(keys, i, k) {
    json_t *h;
    st = read_hash(r, json_string_value(k), &h);
    if (st) break;
    const char *task = json_string_value(json_object_get(h, "task"));
    json_t *w = json_pack(
        "{s:s,s:o,s:o,s:s,s:I,s:I,s:b,s:s}", "id", json_string_value(k) + strlen("nimble:worker:"),
        "targets", parsed_or_empty_array(json_string_value(json_object_get(h, "targets"))),
        "can_run", parsed_or_empty_array(json_string_value(json_object_get(h, "can_run"))),
        "task", task ? task : "", "slots", int_of(h, "slots") > 0 ? int_of(h, "slots") : 1,
        "seen_ms", int_of(h, "seen"), "connected", int_of(h, "connected") == 1,
        "compiler_version",
        json_string_value(json_object_get(h, "compiler_version"))
            ? json_string_value(json_object_get(h, "compiler_version"))
            : "");
    json_decref(h);
    if (w) json_array_append_new(*out, w);
  }
  json_decref(keys);
  if (st) {
    json_decref(*out);
    *out = NULL;
  }
  return st;
}

/* One task for the page: everything the task hash says. */
static json_t *task_json(const nimble_sched_task_t *t, int job_cancelled) {
  const char *state = t->state;
  if (job_cancelled && (!strcmp(state, "queued") || !strcmp(state, "running"))) state = "cancelled";
  json_t *e = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:i,s:b,s:I,s:I,s:I}", "task", t->id,
                        "kind", t->kind, "target", t->target, "state", state, "phase", t->phase,
                        "percent", t->percent, "worker", t->worker, "attempts", t->attempts,
                        "cached", t->cached, "created_ms", (json_int_t)t->created_ms,
                        "started_ms", (json_int_t)t->started_ms, "finished_ms",
                        (json_int_t)t->finished_ms);
  if (!e) return NULL;
  if (t->manifest[0]) json_object_set_new(e, "manifest", json_string(t->manifest));
  if (t->error) json_object_set_new(e, "error", json_string(t->error));
  json_t *report = t->report ? json_loads(t->report, 0, NULL) : NULL;
  if (report) json_object_set_new(e, "profile", report);
  return e;
}

static nimble_status_t read_job(nimble_sched_redis *r, long long n, json_t **out) {
  *out = NULL;
  char key[64], job[40];
  snprintf(job, sizeof job, "j-%lld", n);
  snprintf(key, sizeof key, "nimble:job:%s", job);
  json_t *h;
  NIMBLE_RETURN_IF_ERROR(read_hash(r, key, &h));
  if (json_object_size(h) == 0) {
    json_decref(h);
    return nimble_ok();
  }
  int cancelled = int_of(h, "cancelled") == 1;
  json_t *targets = parsed_or_empty_array(json_string_value(json_object_get(h, "targets")));
  json_t *tasks = json_array();
  int done = 0, failed = 0, running = 0, ncancelled = 0;
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; i < json_array_size(targets); i++) {
    char field[32];
    snprintf(field, sizeof field, "task:%zu", i);
    const char *tid = json_string_value(json_object_get(h, field));
    nimble_sched_task_t t;
    if (tid) {
      st = nimble_sched_task_load(r, tid, &t);
      if (st && nimble_status_code(st) == NIMBLE_NOT_FOUND) {
        nimble_status_free(st);
        st = nimble_ok();
        tid = NULL;
      } else if (st) {
        break;
      }
    }
    if (!tid) { /* the submit is still being recorded */
      nimble_sched_task_init(&t);
      snprintf(t.state, sizeof t.state, "queued");
      snprintf(t.target, sizeof t.target, "%s", json_string_value(json_array_get(targets, i)));
    }
    json_t *e = task_json(&t, cancelled);
    nimble_sched_task_deinit(&t);
    const char *state = json_string_value(json_object_get(e, "state"));
    if (state && !strcmp(state, "done")) done++;
    else if (state && !strcmp(state, "failed")) failed++;
    else if (state && !strcmp(state, "running")) running++;
    else if (state && !strcmp(state, "cancelled")) ncancelled++;
    if (e) json_array_append_new(tasks, e);
  }
  size_t ntargets = json_array_size(targets);
  json_decref(targets);
  if (!st) {
    const char *kind = json_string_value(json_object_get(h, "kind"));
    const char *name = json_string_value(json_object_get(h, "name"));
    *out = json_pack("{s:s,s:s,s:s,s:s,s:I,s:o}", "job", job, "kind", kind ? kind : "compile",
                     "name", name ? name : "", "state",
                     sched_job_state_of(ntargets, done, failed, running, ncancelled, cancelled),
                     "created_ms", int_of(h, "created_ms"), "tasks", tasks);
    tasks = NULL;
  }
  json_decref(tasks);
  json_decref(h);
  return st;
}

static nimble_status_t read_state(sched_http *h, json_t **out) {
  nimble_sched_redis *r = h->redis;
  *out = NULL;
  json_t *stats, *queues = NULL, *workers = NULL, *jobs = json_array();
  NIMBLE_RETURN_IF_ERROR(read_hash(r, "nimble:stats", &stats));
  nimble_status_t st = read_queues(r, &queues);
  if (!st) st = read_workers(r, &workers);
  redisReply *rep = NULL;
  if (!st) st = nimble_sched_redis_command(r, &rep, "GET nimble:next-job");
  long long last = rep && rep->type == REDIS_REPLY_STRING ? strtoll(rep->str, NULL, 10) : 0;
  if (rep) freeReplyObject(rep);
  for (long long n = last; !st && n >= 1 && n > last - STATE_MAX_JOBS; n--) {
    json_t *job;
    st = read_job(r, n, &job);
    if (job) json_array_append_new(jobs, job);
  }
  if (!st)
    *out = json_pack("{s:s,s:I,s:I,s:{s:I,s:I,s:I},s:o,s:o,s:o}", "version", NIMBLE_VERSION_STRING,
                     "now_ms", (json_int_t)sched_now_epoch_ms(), "worker_timeout_ms",
                     (json_int_t)h->s->worker_timeout_ms, "stats", "cache_hits",
                     int_of(stats, "cache_hits"), "cache_misses", int_of(stats, "cache_misses"),
                     "jobs", (json_int_t)last, "queues", queues, "workers", workers, "jobs", jobs);
  else {
    json_decref(queues);
    json_decref(workers);
    json_decref(jobs);
  }
  json_decref(stats);
  if (!st && !*out) st = NIMBLE_OOM();
  return st;
}

/* ---- routes ---- */

static enum MHD_Result serve_metrics(sched_http *h, struct MHD_Connection *c) {
  /* Queue lengths come from Redis now; the targets the broker knows with
   * an empty queue are written as 0 by the metrics module. */
  json_t *queues = NULL;
  nimble_status_t st = read_queues(h->redis, &queues);
  int redis_up = st == NULL;
  nimble_status_free(st);
  size_t n = json_array_size(queues);
  sched_metrics_queue *q = calloc(n ? n : 1, sizeof *q);
  for (size_t i = 0; q && i < n; i++) {
    json_t *e = json_array_get(queues, i);
    q[i].kind = json_string_value(json_object_get(e, "kind"));
    q[i].target = json_string_value(json_object_get(e, "target"));
    q[i].length = json_integer_value(json_object_get(e, "length"));
  }
  nimble_metrics_buf b;
  nimble_metrics_buf_init(&b);
  sched_metrics_write(h->s->metrics, &b, redis_up && q ? q : NULL, n, redis_up);
  enum MHD_Result ret = b.failed || !b.data
                            ? respond_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n")
                            : respond(c, MHD_HTTP_OK, NIMBLE_METRICS_CONTENT_TYPE, b.data, b.len);
  nimble_metrics_buf_free(&b);
  free(q);
  json_decref(queues);
  return ret;
}

static enum MHD_Result serve_state(sched_http *h, struct MHD_Connection *c) {
  json_t *state;
  nimble_status_t st = read_state(h, &state);
  if (st) {
    json_t *e = json_pack("{s:s}", "error", nimble_status_message(st));
    nimble_status_free(st);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    enum MHD_Result ret = respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "application/json",
                                  text ? text : "{}", text ? strlen(text) : 2);
    free(text);
    return ret;
  }
  char *text = json_dumps(state, JSON_COMPACT);
  json_decref(state);
  if (!text) return respond_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  enum MHD_Result ret = respond(c, MHD_HTTP_OK, "application/json", text, strlen(text));
  free(text);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls) {
  sched_http *h = cls;
  (void)version;
  (void)upload_data;
  if (*upload_data_size) { /* no route takes a body: discard it */
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (!*req_cls) { /* first call: wait for the end of any body */
    *req_cls = h;
    return MHD_YES;
  }
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    return ret;
  }
  if (!strcmp(url, "/metrics")) return serve_metrics(h, c);
  if (!strcmp(url, "/api/state")) return serve_state(h, c);
  if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
    return respond(c, MHD_HTTP_OK, "text/html; charset=utf-8", sched_dashboard_html,
                   (size_t)sched_dashboard_html_len);
  return respond_text(c, MHD_HTTP_NOT_FOUND, "not found: try /, /metrics or /api/state\n");
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  sched_http *h = cls;
  if (h->s->quiet) return;
  fputs("nimble-scheduler: http: ", stderr);
  vfprintf(stderr, fmt, ap);
}

nimble_status_t sched_http_start(nimble_scheduler *s, const char *address) {
  char host[256];
  struct addrinfo *res;
  NIMBLE_RETURN_IF_ERROR(nimble_listen_address_resolve(address, "127.0.0.1:9090", host, sizeof host, &res));
  sched_http *h = calloc(1, sizeof *h);
  if (!h) {
    freeaddrinfo(res);
    return NIMBLE_OOM();
  }
  h->s = s;
  nimble_status_t st = nimble_sched_redis_connect(s->redis_host, s->redis_port, &h->redis);
  if (!st) {
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (res->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER,
                                 mhd_log, h, MHD_OPTION_SOCK_ADDR, res->ai_addr,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
    if (!h->daemon)
      st = nimble_status_make(NIMBLE_UNAVAILABLE, "cannot listen on '%s' (in use?)", address);
  }
  freeaddrinfo(res);
  if (st) {
    sched_http_stop(h);
    return st;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
  unsigned port = info ? info->port : 0;
  snprintf(s->http_url, sizeof s->http_url, strchr(host, ':') ? "http://[%s]:%u" : "http://%s:%u",
           host, port);
  s->http = h;
  return nimble_ok();
}

void sched_http_stop(sched_http *h) {
  if (!h) return;
  if (h->daemon) MHD_stop_daemon(h->daemon);
  nimble_sched_redis_destroy(h->redis);
  free(h);
}
