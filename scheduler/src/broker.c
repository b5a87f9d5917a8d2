/* The scheduler's loop: two ROUTER sockets (clients, workers), one PUB
 * socket for events and, with CURVE, the ZAP handler; between messages it
 * expires leases, drops silent workers and hands queued tasks out. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "broker.h"

int64_t sched_now_epoch_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sched_now_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sched_log(nimble_scheduler *s, const char *fmt, ...) {
  if (s->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("nimble-scheduler: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void log_status(nimble_scheduler *s, const char *what, nimble_status_t st) {
  if (!st) return;
  sched_log(s, "%s: %s: %s", what, nimble_status_code_name(nimble_status_code(st)),
            nimble_status_message(st));
  nimble_status_free(st);
}

static void send_frames(nimble_scheduler *s, void *sock, const sched_envelope *env,
                        const char *data, size_t size) {
  for (int i = 0; env && i < env->count; i++)
    if (zmq_send(sock, env->data[i], env->size[i], ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return;
  if (zmq_send(sock, data, size, ZMQ_DONTWAIT) < 0)
    sched_log(s, "send failed: %s", zmq_strerror(errno));
}

void sched_send(nimble_scheduler *s, void *sock, const sched_envelope *env, nimble_msg_type_t type,
                const json_t *body) {
  char *out;
  size_t n;
  nimble_status_t st = nimble_message_encode(type, body, &out, &n);
  if (st) {
    log_status(s, "encoding a reply", st);
    return;
  }
  send_frames(s, sock, env, out, n);
  free(out);
}

void sched_send_error(nimble_scheduler *s, void *sock, const sched_envelope *env,
                      nimble_status_t error, const char *job) {
  sched_metrics_error(s->metrics, nimble_status_code_name(nimble_status_code(error)));
  char *out;
  size_t n;
  nimble_status_t st = nimble_message_encode_error(error, job, &out, &n);
  if (st) {
    log_status(s, "encoding an error", st);
    return;
  }
  send_frames(s, sock, env, out, n);
  free(out);
}

void sched_publish(nimble_scheduler *s, const char *job, nimble_msg_type_t type,
                   const json_t *body) {
  char *out;
  size_t n;
  nimble_status_t st = nimble_message_encode(type, body, &out, &n);
  if (st) {
    log_status(s, "encoding an event", st);
    return;
  }
  if (zmq_send(s->events, job, strlen(job), ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
    zmq_send(s->events, out, n, ZMQ_DONTWAIT);
  free(out);
}

void sched_publish_task_jobs(nimble_scheduler *s, const char *tid) {
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "SMEMBERS nimble:task:%s:jobs", tid);
  if (st) {
    log_status(s, "publishing", st);
    return;
  }
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
    json_t *body;
    st = sched_job_status(s, rep->element[i]->str, &body);
    if (st) {
      log_status(s, "publishing", st);
      continue;
    }
    sched_note_job_state(s, body);
    sched_publish(s, rep->element[i]->str, NIMBLE_MSG_JOB_STATUS, body);
    json_decref(body);
  }
  freeReplyObject(rep);
}

void sched_note_job_state(nimble_scheduler *s, const json_t *status) {
  const char *job = json_string_value(json_object_get(status, "job"));
  const char *state = json_string_value(json_object_get(status, "state"));
  if (!job || !state) return;
  redisReply *rep;
  nimble_status_t st =
      nimble_sched_redis_command(s->redis, &rep, "HMGET nimble:job:%s state kind", job);
  if (st) {
    log_status(s, "job state", st);
    return;
  }
  int same = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[0]->type == REDIS_REPLY_STRING && !strcmp(rep->element[0]->str, state);
  char kind[16] = "compile";
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
      rep->element[1]->type == REDIS_REPLY_STRING)
    snprintf(kind, sizeof kind, "%s", rep->element[1]->str);
  freeReplyObject(rep);
  if (same) return;
  st = nimble_sched_redis_command(s->redis, NULL, "HSET nimble:job:%s state %s", job, state);
  if (st) {
    log_status(s, "job state", st);
    return;
  }
  sched_metrics_job_state(s->metrics, kind, state);
}

/* ---- leases and workers ---- */

sched_lease *sched_lease_find(nimble_scheduler *s, const char *task) {
  for (size_t i = 0; i < s->nleases; i++)
    if (!strcmp(s->leases[i].task, task)) return &s->leases[i];
  return NULL;
}

void sched_lease_set(nimble_scheduler *s, const char *task, const char *worker, int64_t until) {
  sched_lease *l = sched_lease_find(s, task);
  if (!l) {
    if (s->nleases == s->capleases) {
      size_t cap = s->capleases ? s->capleases * 2 : 16;
      sched_lease *n = realloc(s->leases, cap * sizeof *n);
      if (!n) return; /* the task hash still holds the lease; reload finds it */
      s->leases = n;
      s->capleases = cap;
    }
    l = &s->leases[s->nleases++];
    snprintf(l->task, sizeof l->task, "%s", task);
  }
  snprintf(l->worker, sizeof l->worker, "%s", worker);
  l->until_ms = until;
}

void sched_lease_drop(nimble_scheduler *s, const char *task) {
  sched_lease *l = sched_lease_find(s, task);
  if (!l) return;
  *l = s->leases[--s->nleases];
}

sched_worker *sched_worker_find(nimble_scheduler *s, const char *id) {
  for (size_t i = 0; i < s->nwk; i++)
    if (!strcmp(s->wk[i].id, id)) return &s->wk[i];
  return NULL;
}

sched_worker *sched_worker_by_rid(nimble_scheduler *s, const uint8_t *rid, size_t len) {
  for (size_t i = 0; i < s->nwk; i++)
    if (s->wk[i].rid_len == len && !memcmp(s->wk[i].rid, rid, len)) return &s->wk[i];
  return NULL;
}

void sched_worker_drop(nimble_scheduler *s, sched_worker *w, const char *why) {
  sched_log(s, "worker %s %s", w->id, why);
  nimble_status_free(
      nimble_sched_redis_command(s->redis, NULL, "HSET nimble:worker:%s connected 0 task %s", w->id, ""));
  *w = s->wk[--s->nwk];
}

static void free_worker_of(nimble_scheduler *s, const char *tid) {
  for (size_t i = 0; i < s->nwk; i++)
    if (!strcmp(s->wk[i].task, tid)) s->wk[i].task[0] = '\0';
}

/* Takes task t back from its worker: state queued, no lease, saved, and
 * out of its queue list; the callers put it back in the queue or in
 * nimble:delayed. */
static nimble_status_t take_back(nimble_scheduler *s, nimble_sched_task_t *t) {
  free_worker_of(s, t->id);
  snprintf(t->state, sizeof t->state, "queued");
  t->worker[0] = '\0';
  t->lease_until = 0;
  t->queued_ms = sched_now_epoch_ms();
  NIMBLE_RETURN_IF_ERROR(nimble_sched_task_save(s->redis, t));
  sched_lease_drop(s, t->id);
  sched_metrics_task_requeued(s->metrics, t->kind, t->target);
  const char *q = nimble_sched_task_queue(t);
  NIMBLE_RETURN_IF_ERROR(
      nimble_sched_redis_command(s->redis, NULL, "LREM nimble:%s:%s 0 %s", q, t->target, t->id));
  return nimble_ok();
}

/* ---- task transitions ---- */

nimble_status_t sched_task_finish(nimble_scheduler *s, nimble_sched_task_t *t) {
  int ran = t->started_ms > 0 && strcmp(t->state, "cancelled") != 0;
  t->worker[0] = '\0';
  t->lease_until = 0;
  t->finished_ms = sched_now_epoch_ms();
  NIMBLE_RETURN_IF_ERROR(nimble_sched_task_save(s->redis, t));
  sched_metrics_task_finished(s->metrics, t->kind, t->target, t->state,
                              ran ? (double)(t->finished_ms - t->started_ms) / 1000.0 : -1.0);
  sched_lease_drop(s, t->id);
  free_worker_of(s, t->id);
  if (!strcmp(t->kind, "compile")) {
    /* Only the holder's claim is released: a newer task may own the key. */
    redisReply *rep;
    NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "GET nimble:inflight:%s", t->key));
    int ours = rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, t->id);
    freeReplyObject(rep);
    if (ours) NIMBLE_RETURN_IF_ERROR(nimble_sched_inflight_release(s->redis, t->key));
  }
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, NULL, "SREM nimble:active %s", t->id));
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, NULL, "LREM nimble:%s:%s 0 %s",
                                                    nimble_sched_task_queue(t), t->target, t->id));
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, NULL, "ZREM nimble:delayed %s", t->id));
  sched_log(s, "task %s %s%s%s", t->id, t->state, t->error ? ": " : "", t->error ? t->error : "");
  sched_publish_task_jobs(s, t->id);
  /* A copy of a verified build decides its group's fate once it ends. */
  if (t->group[0]) sched_verify_settle(s, t->group);
  return nimble_ok();
}

nimble_status_t sched_task_retry_later(nimble_scheduler *s, nimble_sched_task_t *t,
                                       const char *why) {
  /* The delivery is given back: a store outage says nothing about the
   * task, and must not spend the deliveries meant for a model that kills
   * its worker. The bound is --max-retries of these. */
  if (t->attempts > 0) t->attempts--;
  t->retries++;
  if (t->retries > s->max_retries) {
    char msg[1024];
    snprintf(msg, sizeof msg,
             "task '%s' failed %d times for reasons its workers called retryable (the store "
             "or the network; --max-retries %d); last time: %s",
             t->id, t->retries, s->max_retries, why);
    free(t->error);
    t->error = strdup(msg);
    snprintf(t->state, sizeof t->state, "failed");
    return sched_task_finish(s, t);
  }
  int shift = t->retries - 1 < 4 ? t->retries - 1 : 4;
  int64_t backoff = (int64_t)500 << shift; /* 0.5, 1, 2, 4, 8, 8, ... s */
  NIMBLE_RETURN_IF_ERROR(take_back(s, t));
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, NULL, "ZADD nimble:delayed %lld %s",
                                                    (long long)(t->queued_ms + backoff), t->id));
  sched_log(s, "task %s queued again in %lld ms (retryable failure %d of %d, the delivery not "
               "counted): %s",
            t->id, (long long)backoff, t->retries, s->max_retries, why);
  sched_publish_task_jobs(s, t->id);
  return nimble_ok();
}

/* Moves the tasks whose backoff is over from nimble:delayed to the front of
 * their queue. */
static void release_delayed(nimble_scheduler *s) {
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(
      s->redis, &rep, "ZRANGEBYSCORE nimble:delayed -inf %lld LIMIT 0 64",
      (long long)sched_now_epoch_ms());
  if (st) {
    log_status(s, "delayed tasks", st);
    return;
  }
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
    const char *tid = rep->element[i]->str;
    nimble_sched_task_t t;
    st = nimble_sched_task_load(s->redis, tid, &t);
    if (st && nimble_status_code(st) != NIMBLE_NOT_FOUND) break; /* Redis away: next tick */
    int loaded = !st, queued = loaded && !strcmp(t.state, "queued");
    nimble_status_free(st);
    st = nimble_ok();
    if (queued)
      st = nimble_sched_redis_command(s->redis, NULL, "LPUSH nimble:%s:%s %s",
                                      nimble_sched_task_queue(&t), t.target, tid);
    if (!st) st = nimble_sched_redis_command(s->redis, NULL, "ZREM nimble:delayed %s", tid);
    if (loaded) nimble_sched_task_deinit(&t);
    if (st) break;
  }
  log_status(s, "delayed tasks", st);
  freeReplyObject(rep);
}

void sched_send_cancel(nimble_scheduler *s, const nimble_sched_task_t *t) {
  if (strcmp(t->state, "running")) return;
  sched_worker *w = sched_worker_find(s, t->worker);
  if (!w || strcmp(w->task, t->id)) return;
  json_t *b = json_pack("{s:s}", "task", t->id);
  sched_envelope env = {.count = 1};
  memcpy(env.data[0], w->rid, w->rid_len);
  env.size[0] = w->rid_len;
  if (b) sched_send(s, s->workers, &env, NIMBLE_MSG_CANCEL, b);
  json_decref(b);
}

nimble_status_t sched_task_requeue(nimble_scheduler *s, nimble_sched_task_t *t, const char *why) {
  if (t->attempts >= s->max_deliveries) {
    char msg[1024];
    snprintf(msg, sizeof msg,
             "task '%s' was delivered %d times without finishing; last time: %s", t->id,
             t->attempts, why);
    free(t->error);
    t->error = strdup(msg);
    snprintf(t->state, sizeof t->state, "failed");
    return sched_task_finish(s, t);
  }
  NIMBLE_RETURN_IF_ERROR(take_back(s, t));
  const char *q = nimble_sched_task_queue(t);
  /* Back to the front: it has waited longest. */
  NIMBLE_RETURN_IF_ERROR(
      nimble_sched_redis_command(s->redis, NULL, "LPUSH nimble:%s:%s %s", q, t->target, t->id));
  sched_log(s, "task %s requeued (delivery %d of %d): %s", t->id, t->attempts, s->max_deliveries,
            why);
  sched_publish_task_jobs(s, t->id);
  return nimble_ok();
}

static void send_task(nimble_scheduler *s, sched_worker *w, const nimble_sched_task_t *t) {
  int profile = !strcmp(t->kind, "profile");
  json_t *b;
  if (profile) {
    b = json_pack("{s:s,s:s,s:s,s:s,s:o?,s:i,s:I,s:i}", "task", t->id, "job", t->job, "name",
                  t->name, "target", t->target, "inputs",
                  t->inputs ? json_loads(t->inputs, 0, NULL) : NULL, "runs", t->runs > 0 ? t->runs : 10,
                  "lease_ms", (json_int_t)s->lease_ms, "attempt", t->attempts);
    if (b && t->manifest[0]) json_object_set_new(b, "manifest", json_string(t->manifest));
  } else {
    b = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:i}", "task", t->id, "job", t->job,
                  "model", t->model, "format", t->format, "name", t->name, "target",
                  t->target, "key", t->key, "lease_ms", (json_int_t)s->lease_ms, "attempt",
                  t->attempts);
    if (b && t->options) {
      json_t *o = json_loads(t->options, 0, NULL);
      if (o) json_object_set_new(b, "options", o);
    }
  }
  if (!b) return;
  if (!profile) sched_kcache_fill_task(s, w, t, b);
  if (!profile) sched_tune_fill_task(s, t, b);
  sched_envelope env = {.count = 1};
  memcpy(env.data[0], w->rid, w->rid_len);
  env.size[0] = w->rid_len;
  sched_send(s, s->workers, &env, profile ? NIMBLE_MSG_PROFILE_TASK : NIMBLE_MSG_TASK, b);
  json_decref(b);
}

/* Gives worker w the first queued task of one of its targets: compile
 * queues first, then the profile queues of the targets it can run. 1 when
 * given. */
/* Puts back, at the front and in their order, the copies a worker was not
 * allowed to build (another copy of their group is its). */
static void put_back(nimble_scheduler *s, const char *q, const char *target,
                     char (*skipped)[NIMBLE_SCHED_ID_MAX + 1], size_t n) {
  for (size_t i = n; i-- > 0;)
    log_status(s, "dispatch",
               nimble_sched_redis_command(s->redis, NULL, "LPUSH nimble:%s:%s %s", q, target,
                                          skipped[i]));
}

#define SCHED_MAX_SKIPPED 32

static int dispatch_one(nimble_scheduler *s, sched_worker *w) {
  for (size_t k = 0; k < w->ntargets + w->ncan_run; k++) {
    int profile = k >= w->ntargets;
    const char *target = profile ? w->can_run[k - w->ntargets] : w->targets[k];
    const char *q = profile ? "pqueue" : "queue";
    char skipped[SCHED_MAX_SKIPPED][NIMBLE_SCHED_ID_MAX + 1];
    size_t nskipped = 0;
    while (nskipped < SCHED_MAX_SKIPPED) {
      redisReply *rep;
      nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "LPOP nimble:%s:%s", q, target);
      if (st) {
        log_status(s, "dispatch", st);
        put_back(s, q, target, skipped, nskipped);
        return 0;
      }
      if (rep->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        break;
      }
      char tid[NIMBLE_SCHED_ID_MAX + 1];
      snprintf(tid, sizeof tid, "%s", rep->str);
      freeReplyObject(rep);
      nimble_sched_task_t t;
      st = nimble_sched_task_load(s->redis, tid, &t);
      if (st) {
        log_status(s, "dispatch", st);
        continue;
      }
      if (strcmp(t.state, "queued")) { /* a stale entry: cancelled or finished */
        nimble_sched_task_deinit(&t);
        continue;
      }
      /* A verified build needs distinct workers: never two copies on one. */
      if (t.group[0] && !sched_verify_worker_may_build(s, &t, w)) {
        snprintf(skipped[nskipped++], sizeof skipped[0], "%s", t.id);
        nimble_sched_task_deinit(&t);
        continue;
      }
      int64_t now = sched_now_epoch_ms();
      t.attempts++;
      snprintf(t.state, sizeof t.state, "running");
      snprintf(t.worker, sizeof t.worker, "%s", w->id);
      snprintf(t.last_worker, sizeof t.last_worker, "%s", w->id);
      t.lease_until = now + s->lease_ms;
      t.started_ms = now;
      t.kernels[0] = '\0'; /* this delivery's counts come with its PROGRESS */
      st = nimble_sched_task_save(s->redis, &t);
      if (st) {
        /* Not recorded: put it back; reconciliation repairs a failed push. */
        log_status(s, "dispatch", st);
        nimble_status_free(nimble_sched_redis_command(s->redis, NULL, "LPUSH nimble:%s:%s %s",
                                                      nimble_sched_task_queue(&t), t.target, t.id));
        nimble_sched_task_deinit(&t);
        put_back(s, q, target, skipped, nskipped);
        return 0;
      }
      int64_t since = t.queued_ms ? t.queued_ms : t.created_ms;
      sched_metrics_task_delivered(s->metrics, t.kind, t.target,
                                   since ? (double)(now - since) / 1000.0 : 0.0);
      sched_lease_set(s, t.id, w->id, t.lease_until);
      snprintf(w->task, sizeof w->task, "%s", t.id);
      send_task(s, w, &t);
      sched_log(s, "%s task %s (%s) -> worker %s, delivery %d", t.kind, t.id, t.target, w->id,
                t.attempts);
      sched_publish_task_jobs(s, t.id);
      if (t.group[0]) sched_verify_settle(s, t.group); /* the group now runs */
      nimble_sched_task_deinit(&t);
      put_back(s, q, target, skipped, nskipped);
      return 1;
    }
    put_back(s, q, target, skipped, nskipped);
  }
  return 0;
}

void sched_dispatch(nimble_scheduler *s) {
  for (size_t i = 0; i < s->nwk; i++)
    if (!s->wk[i].task[0]) dispatch_one(s, &s->wk[i]);
}

static void expire_leases(nimble_scheduler *s) {
  int64_t now = sched_now_epoch_ms();
  for (size_t i = 0; i < s->nleases;) {
    sched_lease l = s->leases[i];
    if (l.until_ms > now) {
      i++;
      continue;
    }
    nimble_sched_task_t t;
    nimble_status_t st = nimble_sched_task_load(s->redis, l.task, &t);
    if (st && nimble_status_code(st) != NIMBLE_NOT_FOUND) {
      log_status(s, "lease check", st); /* Redis away: try again next tick */
      return;
    }
    if (st || strcmp(t.state, "running") || strcmp(t.worker, l.worker)) {
      nimble_status_free(st);
      if (!st) nimble_sched_task_deinit(&t);
      sched_lease_drop(s, l.task);
      continue;
    }
    /* A worker that let its lease lapse is not handed more work until it
     * speaks again (it is told to send READY then): it may be dead. */
    sched_worker *w = sched_worker_find(s, l.worker);
    if (w && !strcmp(w->task, l.task)) {
      char why[300];
      snprintf(why, sizeof why, "dropped: its lease on %s lapsed", l.task);
      sched_worker_drop(s, w, why);
    }
    char why[300];
    snprintf(why, sizeof why, "worker '%s' stopped renewing its lease", l.worker);
    st = sched_task_requeue(s, &t, why);
    nimble_sched_task_deinit(&t);
    if (st) {
      log_status(s, "lease expiry", st);
      return;
    }
    /* requeue dropped the lease: this slot now holds another one. */
  }
}

static void expire_workers(nimble_scheduler *s) {
  int64_t now = sched_now_mono_ms();
  for (size_t i = 0; i < s->nwk;) {
    if (now - s->wk[i].last_seen_ms > s->worker_timeout_ms) {
      sched_worker_drop(s, &s->wk[i], "went silent; dropped");
    } else {
      i++;
    }
  }
}

/* Puts every active queued task that is missing from its queue back in it,
 * and (re)loads the leases of running ones: at start-up, and now and then
 * to repair a dispatch that Redis interrupted. */
static nimble_status_t reconcile(nimble_scheduler *s) {
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "SMEMBERS nimble:active"));
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !st; i++) {
    nimble_sched_task_t t;
    st = nimble_sched_task_load(s->redis, rep->element[i]->str, &t);
    if (st) break;
    sched_metrics_target(s->metrics, t.target);
    const char *q = nimble_sched_task_queue(&t);
    if (!strcmp(t.state, "running")) {
      if (!sched_lease_find(s, t.id)) sched_lease_set(s, t.id, t.worker, t.lease_until);
    } else if (!strcmp(t.state, "queued") && !(t.verify >= 2 && !t.group[0])) {
      /* (A verified build's group task is never queued: its copies are.) */
      redisReply *pos;
      st = nimble_sched_redis_command(s->redis, &pos, "LPOS nimble:%s:%s %s", q, t.target, t.id);
      if (!st && pos->type == REDIS_REPLY_NIL) {
        /* One waiting out a retry backoff is not missing. */
        freeReplyObject(pos);
        st = nimble_sched_redis_command(s->redis, &pos, "ZSCORE nimble:delayed %s", t.id);
      }
      if (!st) {
        int missing = pos->type == REDIS_REPLY_NIL;
        freeReplyObject(pos);
        if (missing)
          st = nimble_sched_redis_command(s->redis, NULL, "RPUSH nimble:%s:%s %s", q, t.target,
                                          t.id);
      }
    }
    nimble_sched_task_deinit(&t);
  }
  freeReplyObject(rep);
  if (!st) sched_verify_reconcile(s);
  return st;
}

/* ---- receiving ---- */

/* Receives one multipart message: routing frames into env, the last frame
 * into *payload (a zmq_msg the caller closes). 0 when nothing was waiting. */
static int recv_message(void *sock, sched_envelope *env, zmq_msg_t *payload) {
  env->count = 0;
  env->key[0] = '\0';
  zmq_msg_init(payload);
  if (zmq_msg_recv(payload, sock, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(payload);
    return 0;
  }
  int frames = 0;
  while (zmq_msg_more(payload)) {
    /* The frame just read was routing (identity or delimiter). */
    if (env->count < 2 && zmq_msg_size(payload) <= sizeof env->data[0]) {
      memcpy(env->data[env->count], zmq_msg_data(payload), zmq_msg_size(payload));
      env->size[env->count++] = zmq_msg_size(payload);
    }
    zmq_msg_close(payload);
    zmq_msg_init(payload);
    if (zmq_msg_recv(payload, sock, 0) < 0) {
      zmq_msg_close(payload);
      return 0;
    }
    if (++frames > SCHED_MAX_FRAMES) env->count = 0; /* garbage; drained, dropped below */
  }
  if (env->count == 0) {
    zmq_msg_close(payload);
    return -1;
  }
  /* With CURVE the ZAP handler named the peer's key as its user id. */
  const char *user = zmq_msg_gets(payload, "User-Id");
  if (user && strlen(user) == 40) memcpy(env->key, user, 41);
  return 1;
}

static void drain(nimble_scheduler *s, void *sock, int is_workers) {
  for (int n = 0; n < 256; n++) {
    sched_envelope env;
    zmq_msg_t m;
    int r = recv_message(sock, &env, &m);
    if (r == 0) return;
    if (r < 0) continue;
    if (is_workers)
      sched_handle_worker(s, &env, zmq_msg_data(&m), zmq_msg_size(&m));
    else
      sched_handle_client(s, &env, zmq_msg_data(&m), zmq_msg_size(&m));
    zmq_msg_close(&m);
  }
}

/* ---- life cycle ---- */

static nimble_status_t bind_socket(void *sock, const char *ep, char out[256], const char *what) {
  if (zmq_bind(sock, ep) != 0)
    return nimble_status_make(NIMBLE_UNAVAILABLE, "--%s %s: cannot bind: %s", what, ep,
                              zmq_strerror(errno));
  size_t n = 256;
  if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, out, &n) != 0)
    return nimble_status_make(NIMBLE_INTERNAL, "--%s: ZMQ_LAST_ENDPOINT: %s", what,
                              zmq_strerror(errno));
  return nimble_ok();
}

static nimble_status_t create_inner(const nimble_scheduler_options_t *o, nimble_scheduler *s) {
  if (!o->clients_endpoint || !o->workers_endpoint || !o->events_endpoint)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "--clients, --workers and --events endpoints are required");
  if (!o->redis_host) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--redis is required");
  if (!o->store_url) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--store is required");
  const char *ver = o->compiler_version ? o->compiler_version : NIMBLE_VERSION_STRING;
  if (!*ver || strlen(ver) > 256)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--compiler-version: 1 to 256 bytes");
  snprintf(s->compiler_version, sizeof s->compiler_version, "%s", ver);
  if (o->salt && strlen(o->salt) >= sizeof s->salt)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--salt: at most 255 bytes");
  snprintf(s->salt, sizeof s->salt, "%s", o->salt ? o->salt : "");
  s->lease_ms = o->lease_ms > 0 ? o->lease_ms : 30000;
  if (s->lease_ms > 86400000)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--lease-ms: at most 86400000");
  s->worker_timeout_ms = o->worker_timeout_ms > 0 ? o->worker_timeout_ms : 10000;
  s->max_deliveries = o->max_deliveries > 0 ? o->max_deliveries : 3;
  s->max_retries = o->max_retries > 0 ? o->max_retries : 10;
  if (o->verify < 0 || o->verify > NIMBLE_SCHED_MAX_VERIFY)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--verify: 1 to %d workers",
                              NIMBLE_SCHED_MAX_VERIFY);
  s->verify_policy = o->verify > 1 ? o->verify : 1;
  if (o->kcache_cap < 0 || o->kcache_cap > 100000000)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--kcache-cap: 1 to 100000000 entries");
  s->kcache_cap = o->no_kcache ? 0 : o->kcache_cap > 0 ? o->kcache_cap : 65536;
  s->quiet = o->quiet;

  if (o->token_file) NIMBLE_RETURN_IF_ERROR(sched_load_tokens(s, o->token_file));
  if (o->signing_key_file) {
    if (!(s->signing_key = malloc(sizeof *s->signing_key)))
      return NIMBLE_OOM();
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_sign_key_load(o->signing_key_file, s->signing_key),
                               "--signing-key");
  }

  nimble_store_client_options_t so = {.base_url = o->store_url,
                                      .token = o->store_token,
                                      .connect_timeout_ms = 2000,
                                      .max_attempts = 2,
                                      .retry_budget_ms = 5000,
                                      .request_timeout_ms = 10000};
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_store_client_create(&so, &s->store), "--store %s",
                             o->store_url);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_sched_redis_connect(o->redis_host, o->redis_port, &s->redis),
                             "--redis");
  snprintf(s->redis_host, sizeof s->redis_host, "%s", o->redis_host);
  s->redis_port = o->redis_port;
  s->metrics = sched_metrics_create();
  if (!s->metrics) return NIMBLE_OOM();

  s->zctx = zmq_ctx_new();
  if (!s->zctx) return nimble_status_make(NIMBLE_INTERNAL, "zmq_ctx_new: %s", zmq_strerror(errno));
  s->clients = zmq_socket(s->zctx, ZMQ_ROUTER);
  s->workers = zmq_socket(s->zctx, ZMQ_ROUTER);
  s->events = zmq_socket(s->zctx, ZMQ_PUB);
  if (!s->clients || !s->workers || !s->events)
    return nimble_status_make(NIMBLE_INTERNAL, "zmq_socket: %s", zmq_strerror(errno));
  int zero = 0;
  zmq_setsockopt(s->clients, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s->workers, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s->events, ZMQ_LINGER, &zero, sizeof zero);
  /* A frame over the protocol's limit is dropped by the transport (and the
   * peer disconnected) before it is ever buffered whole. */
  int64_t max = (int64_t)NIMBLE_MESSAGE_MAX_SIZE;
  zmq_setsockopt(s->clients, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(s->workers, ZMQ_MAXMSGSIZE, &max, sizeof max);
  if (o->curve_secret_file || o->worker_keys_file) {
    if (!o->curve_secret_file || !o->worker_keys_file)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "--curve-secret and --worker-keys go together");
    NIMBLE_RETURN_IF_ERROR(sched_setup_curve(s, o->curve_secret_file, o->worker_keys_file));
  }
  NIMBLE_RETURN_IF_ERROR(bind_socket(s->clients, o->clients_endpoint, s->clients_ep, "clients"));
  NIMBLE_RETURN_IF_ERROR(bind_socket(s->workers, o->workers_endpoint, s->workers_ep, "workers"));
  NIMBLE_RETURN_IF_ERROR(bind_socket(s->events, o->events_endpoint, s->events_ep, "events"));

  NIMBLE_RETURN_IF_ERROR_CTX(reconcile(s), "reloading tasks from redis");
  s->last_reconcile_ms = sched_now_mono_ms();
  if (o->metrics_address) NIMBLE_RETURN_IF_ERROR_CTX(sched_http_start(s, o->metrics_address), "--metrics");
  if (s->nleases) sched_log(s, "reloaded %zu running task(s) from redis", s->nleases);
  return nimble_ok();
}

nimble_status_t nimble_scheduler_create(const nimble_scheduler_options_t *opts,
                                        nimble_scheduler **out) {
  *out = NULL;
  nimble_scheduler *s = calloc(1, sizeof *s);
  if (!s) return NIMBLE_OOM();
  nimble_status_t st = create_inner(opts, s);
  if (st) {
    nimble_scheduler_destroy(s);
    return st;
  }
  *out = s;
  return nimble_ok();
}

const char *nimble_scheduler_endpoint(const nimble_scheduler *s, const char *which) {
  if (!strcmp(which, "clients")) return s->clients_ep;
  if (!strcmp(which, "workers")) return s->workers_ep;
  if (!strcmp(which, "events")) return s->events_ep;
  if (!strcmp(which, "metrics")) return s->http_url[0] ? s->http_url : NULL;
  return NULL;
}

void nimble_scheduler_stop(nimble_scheduler *s) { s->stopping = 1; }

/* The metrics' snapshot of the connected workers, refreshed every tick. */
static void update_worker_metrics(nimble_scheduler *s) {
  size_t n = s->nwk;
  sched_metrics_worker *w = calloc(n ? n : 1, sizeof *w);
  const char *(*targets)[SCHED_MAX_TARGETS] = calloc(n ? n : 1, sizeof *targets);
  if (w && targets) {
    for (size_t i = 0; i < n; i++) {
      for (size_t k = 0; k < s->wk[i].ntargets; k++) targets[i][k] = s->wk[i].targets[k];
      w[i].targets = targets[i];
      w[i].ntargets = s->wk[i].ntargets;
      w[i].busy = s->wk[i].task[0] != '\0';
    }
    sched_metrics_set_workers(s->metrics, w, n);
  }
  free(w);
  free(targets);
}

nimble_status_t nimble_scheduler_run(nimble_scheduler *s) {
  while (!s->stopping) {
    zmq_pollitem_t items[3] = {{s->clients, 0, ZMQ_POLLIN, 0},
                               {s->workers, 0, ZMQ_POLLIN, 0},
                               {s->zap, 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, s->zap ? 3 : 2, 100);
    if (n < 0 && errno != EINTR)
      return nimble_status_make(NIMBLE_INTERNAL, "zmq_poll: %s", zmq_strerror(errno));
    if (s->zap && (items[2].revents & ZMQ_POLLIN)) sched_handle_zap(s);
    if (items[1].revents & ZMQ_POLLIN) drain(s, s->workers, 1);
    if (items[0].revents & ZMQ_POLLIN) drain(s, s->clients, 0);
    expire_leases(s);
    expire_workers(s);
    release_delayed(s);
    int64_t now = sched_now_mono_ms();
    if (now - s->last_reconcile_ms > 5000) {
      log_status(s, "reconcile", reconcile(s));
      s->last_reconcile_ms = now;
    }
    sched_dispatch(s);
    update_worker_metrics(s);
  }
  return nimble_ok();
}

void nimble_scheduler_destroy(nimble_scheduler *s) {
  if (!s) return;
  sched_http_stop(s->http); /* first: its thread reads s->metrics */
  s->http = NULL;
  if (s->clients) zmq_close(s->clients);
  if (s->workers) zmq_close(s->workers);
  if (s->events) zmq_close(s->events);
  if (s->zap) zmq_close(s->zap);
  if (s->zctx) zmq_ctx_term(s->zctx);
  nimble_sched_redis_destroy(s->redis);
  nimble_store_client_destroy(s->store);
  if (s->signing_key) nimble_sign_key_deinit(s->signing_key);
  free(s->signing_key);
  free(s->tokens);
  free(s->worker_keys);
  free(s->wk);
  free(s->leases);
  sched_metrics_destroy(s->metrics);
  free(s);
}
