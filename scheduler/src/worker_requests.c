/* Messages from workers: READY registers a worker for its targets (one
 * service per target), HEARTBEAT keeps it alive and renews the lease of the
 * task it names, PROGRESS is stored and forwarded as events, RESULT fills
 * the compile cache and finishes the task, FAILURE fails or requeues it. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "broker.h"

static const char *str_of(const json_t *body, const char *key) {
  return json_string_value(json_object_get(body, key));
}

static void reply_error(nimble_scheduler *s, const sched_envelope *env, nimble_status_t st) {
  sched_send_error(s, s->workers, env, st, NULL);
  nimble_status_free(st);
}

static void handle_ready(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const char *id = str_of(body, "worker");
  const char *ver = str_of(body, "compiler_version");
  if (strcmp(ver, s->compiler_version)) {
    sched_log(s, "worker %s refused: compiler %s, this farm runs %s", id, ver, s->compiler_version);
    reply_error(s, env,
                nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                                   "worker '%s' runs compiler %s but this farm compiles with %s",
                                   id, ver, s->compiler_version));
    return;
  }
  /* With CURVE a worker id is bound to the key that first registered it,
   * and a key to one id: a worker cannot take another's name (and so
   * answer for its tasks, or pass for a second worker in a verified
   * build). The binding lives in Redis, so it outlives restarts. */
  if (s->worker_keys) {
    const char *key = env->key;
    redisReply *rep = NULL;
    nimble_status_t st = key[0] ? nimble_sched_redis_command(s->redis, &rep, "GET nimble:worker-key:%s", key)
                                : nimble_status_make(NIMBLE_PERMISSION_DENIED,
                                                     "worker '%s' has no CURVE key", id);
    /* One key, one connected worker: a key may come back under a new id
     * (a worker restarted without --id) only once its old one is gone. */
    sched_worker *other = NULL;
    if (!st && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, id))
      other = sched_worker_find(s, rep->str);
    if (other)
      st = nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                              "worker key %s is connected as worker '%s'; it cannot also be '%s'",
                              key, other->id, id);
    if (rep) freeReplyObject(rep);
    rep = NULL;
    if (!st) st = nimble_sched_redis_command(s->redis, &rep, "HGET nimble:worker:%s key", id);
    if (!st && rep->type == REDIS_REPLY_STRING && rep->str[0] && strcmp(rep->str, key))
      st = nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                              "worker id '%s' belongs to another key; refused for key %s", id, key);
    if (rep) freeReplyObject(rep);
    if (!st) st = nimble_sched_redis_command(s->redis, NULL, "SET nimble:worker-key:%s %s", key, id);
    if (st) {
      sched_log(s, "worker %s refused: %s", id, nimble_status_message(st));
      reply_error(s, env, st);
      return;
    }
  }
  sched_worker *w = sched_worker_find(s, id);
  if (!w) {
    if (s->nwk == s->capwk) {
      size_t cap = s->capwk ? s->capwk * 2 : 8;
      sched_worker *n = realloc(s->wk, cap * sizeof *n);
      if (!n) return;
      s->wk = n;
      s->capwk = cap;
    }
    w = &s->wk[s->nwk++];
    memset(w, 0, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", id);
  }
  /* A READY means the worker holds nothing (it restarted, or was told to
   * register again while idle); a task it held runs out its lease. */
  w->task[0] = '\0';
  snprintf(w->key, sizeof w->key, "%s", env->key);
  memcpy(w->rid, env->data[0], env->size[0]);
  w->rid_len = env->size[0];
  const json_t *targets = json_object_get(body, "targets");
  w->ntargets = 0;
  for (size_t i = 0; i < json_array_size(targets) && i < SCHED_MAX_TARGETS; i++) {
    snprintf(w->targets[w->ntargets++], sizeof w->targets[0], "%s",
             json_string_value(json_array_get(targets, i)));
    sched_metrics_target(s->metrics, w->targets[w->ntargets - 1]);
  }
  const json_t *can_run = json_object_get(body, "can_run");
  w->ncan_run = 0;
  for (size_t i = 0; i < json_array_size(can_run) && i < SCHED_MAX_TARGETS; i++)
    snprintf(w->can_run[w->ncan_run++], sizeof w->can_run[0], "%s",
             json_string_value(json_array_get(can_run, i)));
  sched_kcache_ready(s, w, body);
  w->last_seen_ms = sched_now_mono_ms();
  json_int_t slots = json_integer_value(json_object_get(body, "slots"));
  char *tj = json_dumps(targets, JSON_COMPACT);
  char *cj = can_run ? json_dumps(can_run, JSON_COMPACT) : NULL;
  /* The dashboard reads workers from here: targets, what it runs, its
   * load (task, slots) and its last word (seen, epoch ms). */
  nimble_status_t st = nimble_sched_redis_command(
      s->redis, NULL,
      "HSET nimble:worker:%s targets %s can_run %s compiler_version %s seen %lld slots %lld "
      "task %s connected 1 key %s",
      id, tj ? tj : "[]", cj ? cj : "[]", ver, (long long)sched_now_epoch_ms(),
      (long long)(slots > 0 ? slots : 1), "", env->key);
  free(tj);
  free(cj);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "EXPIRE nimble:worker:%s 3600", id);
  if (st) {
    sched_log(s, "worker registry: %s", nimble_status_message(st));
    nimble_status_free(st);
  }
  sched_log(s, "worker %s ready for %zu target(s)", id, w->ntargets);
}

/* Renews the lease on `tid` when `worker` holds it. */
static void renew(nimble_scheduler *s, const char *worker, const char *tid) {
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    nimble_status_free(st);
    return;
  }
  if (!strcmp(t.state, "running") && !strcmp(t.worker, worker)) {
    t.lease_until = sched_now_epoch_ms() + s->lease_ms;
    st = nimble_sched_redis_command(s->redis, NULL, "HSET nimble:task:%s lease_until %lld", tid,
                                    (long long)t.lease_until);
    if (!st) sched_lease_set(s, tid, worker, t.lease_until);
    nimble_status_free(st);
    sched_worker *w = sched_worker_find(s, worker);
    if (w) snprintf(w->task, sizeof w->task, "%s", tid);
  }
  nimble_sched_task_deinit(&t);
}

static void handle_heartbeat(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const char *id = str_of(body, "worker");
  const char *tid = str_of(body, "task");
  sched_worker *w = sched_worker_find(s, id);
  /* With CURVE the id must be the key's: a heartbeat under another
   * worker's id would renew its leases and take over its connection. */
  if (s->worker_keys) {
    char bound[41] = "";
    if (w) {
      snprintf(bound, sizeof bound, "%s", w->key);
    } else {
      redisReply *rep;
      nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "HGET nimble:worker:%s key", id);
      if (!st && rep->type == REDIS_REPLY_STRING) snprintf(bound, sizeof bound, "%s", rep->str);
      if (!st) freeReplyObject(rep);
      nimble_status_free(st);
    }
    if (bound[0] && strcmp(bound, env->key)) {
      reply_error(s, env,
                  nimble_status_make(NIMBLE_PERMISSION_DENIED,
                                     "worker id '%s' belongs to another key", id));
      return;
    }
  }
  /* A worker that compiles through a scheduler restart keeps its lease:
   * the task hash says who holds it. */
  if (tid) renew(s, id, tid);
  if (!w) {
    reply_error(s, env,
                nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                                   "worker '%s' is not registered; send READY", id));
    return;
  }
  memcpy(w->rid, env->data[0], env->size[0]);
  w->rid_len = env->size[0];
  nimble_status_t st = nimble_sched_redis_command(
      s->redis, NULL, "HSET nimble:worker:%s seen %lld task %s connected 1", id,
      (long long)sched_now_epoch_ms(), w->task);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "EXPIRE nimble:worker:%s 3600", id);
  nimble_status_free(st);
}

static void handle_progress(nimble_scheduler *s, const json_t *body) {
  const char *tid = str_of(body, "task");
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    nimble_status_free(st);
    return;
  }
  if (strcmp(t.state, "running")) {
    nimble_sched_task_deinit(&t);
    return;
  }
  const char *phase = str_of(body, "phase");
  int percent = (int)json_integer_value(json_object_get(body, "percent"));
  /* Code generation's counts (kernels done, cache hits, farm entries
   * fetched) stay with the task until the next delivery. */
  const json_t *kernels = json_object_get(body, "kernels");
  char *ktext = kernels ? json_dumps(kernels, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (ktext && strlen(ktext) < sizeof t.kernels)
    nimble_status_free(nimble_sched_redis_command(
        s->redis, NULL, "HSET nimble:task:%s phase %s percent %d kernels %s", tid, phase, percent, ktext));
  else
    nimble_status_free(nimble_sched_redis_command(
        s->redis, NULL, "HSET nimble:task:%s phase %s percent %d", tid, phase, percent));
  free(ktext);
  redisReply *rep;
  st = nimble_sched_redis_command(s->redis, &rep, "SMEMBERS nimble:task:%s:jobs", tid);
  if (!st) {
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
      json_t *ev = json_pack("{s:s,s:s,s:i,s:s,s:s}", "task", tid, "phase", phase, "percent",
                             percent, "job", rep->element[i]->str, "target", t.target);
      if (ev && kernels) json_object_set(ev, "kernels", (json_t *)kernels);
      if (ev) sched_publish(s, rep->element[i]->str, NIMBLE_MSG_PROGRESS, ev);
      json_decref(ev);
    }
    freeReplyObject(rep);
  }
  nimble_status_free(st);
  nimble_sched_task_deinit(&t);
}

/* Jobs merged into this task under other names (client_requests.c) get the
 * artifact tagged under theirs. A failure is logged, not fatal: the
 * artifact exists under the task's name, and a resubmission retags it from
 * the cache. */
void sched_tag_merged_names(nimble_scheduler *s, const nimble_sched_task_t *t) {
  redisReply *rep = NULL;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "SMEMBERS nimble:task:%s:names", t->id);
  const char *tag = strchr(t->id, '.');
  for (size_t i = 0; !st && tag && rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
    const char *name = rep->element[i]->str;
    if (!name || !strcmp(name, t->name)) continue;
    nimble_status_t ts = sched_store_tag(s, t->name, t->manifest, name, tag + 1);
    if (ts) sched_log(s, "tagging %s as %s:%s: %s", t->manifest, name, tag + 1, nimble_status_message(ts));
    nimble_status_free(ts);
  }
  if (rep) freeReplyObject(rep);
  if (st) sched_log(s, "names merged into %s: %s", t->id, nimble_status_message(st));
  nimble_status_free(st);
}

/* Who sent a message: the registered worker of the connection, or, with
 * CURVE, the worker its key is bound to (a scheduler that restarted knows
 * no connection until the worker says READY again). */
static void sender_id(nimble_scheduler *s, const sched_worker *w, const sched_envelope *env,
                      char out[NIMBLE_SCHED_ID_MAX + 1]) {
  out[0] = '\0';
  if (w) {
    snprintf(out, NIMBLE_SCHED_ID_MAX + 1, "%s", w->id);
    return;
  }
  if (!s->worker_keys || !env->key[0]) return;
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "GET nimble:worker-key:%s", env->key);
  if (!st && rep->type == REDIS_REPLY_STRING) snprintf(out, NIMBLE_SCHED_ID_MAX + 1, "%s", rep->str);
  if (!st) freeReplyObject(rep);
  nimble_status_free(st);
}

/* ACK: the worker may forget task `tid`'s outcome, which it sends again on
 * its heartbeats until then (a RESULT written into a connection that died
 * is lost, and the task would wait out its lease and compile again). Sent
 * once the outcome is settled (recorded, or of no more use: late, for a
 * task that is gone), not when it could not be recorded: then it comes
 * again. */
static void send_ack(nimble_scheduler *s, const sched_envelope *env, const char *tid) {
  json_t *b = json_pack("{s:s}", "task", tid);
  if (b) sched_send(s, s->workers, env, NIMBLE_MSG_ACK, b);
  json_decref(b);
}

/* The worker that held task `tid` is free again once its outcome is
 * recorded: the one on this connection or, when the outcome came over a
 * connection not yet known (the worker reconnected; its next heartbeat
 * says who it is), the task's holder. Not for an outcome ignored: the
 * holder may still run the task. */
static void free_holder(nimble_scheduler *s, sched_worker *w, const char *holder, const char *tid) {
  if (!w && holder && holder[0]) w = sched_worker_find(s, holder);
  if (w && !strcmp(w->task, tid)) w->task[0] = '\0';
}

/* A RESULT: the worker pushed the artifact's blobs and its manifest, by
 * digest and untagged, to the task's repository. A copy of a verified
 * build records what its worker built (verify.c compares and publishes);
 * any other task is published here: signed, then tagged `name:tag`. */
static void handle_result(nimble_scheduler *s, sched_worker *w, const sched_envelope *env,
                          const json_t *body) {
  const char *tid = str_of(body, "task");
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    sched_log(s, "RESULT for %s: %s", tid, nimble_status_message(st));
    if (nimble_status_code(st) == NIMBLE_NOT_FOUND) send_ack(s, env, tid);
    nimble_status_free(st);
    return;
  }
  if (strcmp(t.kind, "compile") || (t.verify >= 2 && !t.group[0])) {
    sched_log(s, "RESULT for %s ignored: it is a %s task", tid,
              strcmp(t.kind, "compile") ? t.kind : "verified build's group (its copies are built)");
    send_ack(s, env, tid);
    nimble_sched_task_deinit(&t);
    return;
  }
  /* Late results are welcome while the task is not finished: the output is
   * content-addressed, so whichever delivery answers first wins. A copy of
   * a verified build is the exception: only the worker holding it may
   * answer, so that two copies are always two workers' work. */
  int late = strcmp(t.state, "queued") && strcmp(t.state, "running");
  char from[NIMBLE_SCHED_ID_MAX + 1];
  sender_id(s, w, env, from);
  /* From a connection not yet known: no ACK, so that the worker sends it
   * again once its heartbeat has said who it is. */
  int unknown = 0;
  if (!late && t.group[0] && (!from[0] || strcmp(t.state, "running") || strcmp(t.worker, from))) {
    sched_log(s, "RESULT for copy %s from %s ignored: the copy is %s on '%s'", tid,
              from[0] ? from : "an unregistered worker", t.state, t.worker);
    late = 1;
    unknown = !from[0];
  }
  if (late) {
    if (!unknown) send_ack(s, env, tid);
    /* Only this connection's worker: the task's holder may still run it
     * (a verified build's copy). */
    if (w && !strcmp(w->task, tid)) w->task[0] = '\0';
    nimble_sched_task_deinit(&t);
    return;
  }
  if (from[0]) snprintf(t.last_worker, sizeof t.last_worker, "%s", from);
  const char *key = str_of(body, "key");
  const char *tag = strchr(t.id, '.');
  if (key && strcmp(key, t.key)) {
    char why[300];
    snprintf(why, sizeof why, "worker computed compile key %s, expected %s", key, t.key);
    free(t.error);
    t.error = strdup(why);
    snprintf(t.state, sizeof t.state, "failed");
  } else if (t.group[0]) {
    snprintf(t.manifest, sizeof t.manifest, "%s", str_of(body, "manifest"));
    snprintf(t.state, sizeof t.state, "done");
    t.percent = 100;
  } else {
    snprintf(t.manifest, sizeof t.manifest, "%s", str_of(body, "manifest"));
    /* The farm vouches for the artifact by signing (name, tag, manifest)
     * and only then tags it: a result that cannot be signed fails the task
     * and leaves nothing tagged, rather than publish an artifact every
     * runtime with trusted keys refuses. A store that is away is not the
     * task's fault: it is tried again under the requeue policy. */
    nimble_status_t pub = tag ? sched_store_tag(s, t.name, t.manifest, t.name, tag + 1)
                              : nimble_status_make(NIMBLE_INTERNAL, "task id '%s' has no tag", t.id);
    if (pub && nimble_status_code(pub) == NIMBLE_UNAVAILABLE) {
      st = sched_task_retry_later(s, &t, nimble_status_message(pub));
      nimble_status_free(pub);
      if (st) sched_log(s, "RESULT for %s not recorded: %s", tid, nimble_status_message(st));
      else send_ack(s, env, tid);
      nimble_status_free(st);
      free_holder(s, w, t.worker, tid);
      nimble_sched_task_deinit(&t);
      return;
    }
    if (pub) {
      free(t.error);
      t.error = strdup(nimble_status_message(pub)); /* "signing NAME:TAG: ..." */
      nimble_status_free(pub);
      snprintf(t.state, sizeof t.state, "failed");
    } else {
      snprintf(t.state, sizeof t.state, "done");
      t.percent = 100;
      st = nimble_sched_cache_put(s->redis, t.key, t.manifest, t.name);
      if (!st) sched_tag_merged_names(s, &t);
      if (!st) sched_kcache_record(s, &t, json_object_get(body, "kcache"));
    }
  }
  /* Records measured by a compile that succeeded, whatever became of its
   * artifact: they describe the worker's CPU, not the artifact. */
  if (!st && !strcmp(t.state, "done"))
    sched_tune_record_result(s, &t, json_object_get(body, "tune_records"));
  if (!st) st = sched_task_finish(s, &t);
  if (st) sched_log(s, "RESULT for %s not recorded: %s", tid, nimble_status_message(st));
  else send_ack(s, env, tid);
  nimble_status_free(st);
  free_holder(s, w, t.worker, tid);
  nimble_sched_task_deinit(&t);
}

/* PROFILE_RESULT: the report (kept as canonical JSON text in the task)
 * and the manifest actually run. Only the worker holding the task is
 * heard: a profile measures one run on one machine. */
static void handle_profile_result(nimble_scheduler *s, sched_worker *w, const sched_envelope *env,
                                  const json_t *body) {
  const char *tid = str_of(body, "task");
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    sched_log(s, "PROFILE_RESULT for %s: %s", tid, nimble_status_message(st));
    if (nimble_status_code(st) == NIMBLE_NOT_FOUND) send_ack(s, env, tid);
    nimble_status_free(st);
    return;
  }
  if (strcmp(t.kind, "profile") || strcmp(t.state, "running") || (w && strcmp(t.worker, w->id))) {
    /* A copy sent again after the first was recorded lands here too. */
    if (strcmp(t.kind, "profile") || strcmp(t.state, "done"))
      sched_log(s, "PROFILE_RESULT for %s ignored: a %s task, %s", tid, t.kind, t.state);
    send_ack(s, env, tid);
    if (w && !strcmp(w->task, tid)) w->task[0] = '\0';
    nimble_sched_task_deinit(&t);
    return;
  }
  free(t.report);
  t.report = json_dumps(json_object_get(body, "report"), JSON_COMPACT | JSON_SORT_KEYS);
  snprintf(t.manifest, sizeof t.manifest, "%s", str_of(body, "manifest"));
  snprintf(t.state, sizeof t.state, t.report ? "done" : "failed");
  if (!t.report) t.error = strdup("the profile report could not be kept (out of memory)");
  t.percent = 100;
  st = sched_task_finish(s, &t);
  if (st) sched_log(s, "PROFILE_RESULT for %s not recorded: %s", tid, nimble_status_message(st));
  else send_ack(s, env, tid);
  nimble_status_free(st);
  free_holder(s, w, t.worker, tid);
  nimble_sched_task_deinit(&t);
}

static void handle_failure(nimble_scheduler *s, sched_worker *w, const json_t *body) {
  const char *tid = str_of(body, "task");
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    nimble_status_free(st);
    return;
  }
  if (strcmp(t.state, "running") || (w && strcmp(t.worker, w->id))) {
    nimble_sched_task_deinit(&t);
    if (w && !strcmp(w->task, tid)) w->task[0] = '\0';
    return;
  }
  const char *error = str_of(body, "error");
  int retryable = json_is_true(json_object_get(body, "retryable"));
  if (retryable) {
    st = sched_task_retry_later(s, &t, error);
  } else {
    free(t.error);
    t.error = strdup(error);
    snprintf(t.state, sizeof t.state, "failed");
    st = sched_task_finish(s, &t);
  }
  if (st) sched_log(s, "FAILURE for %s not recorded: %s", tid, nimble_status_message(st));
  nimble_status_free(st);
  free_holder(s, w, t.worker, tid);
  nimble_sched_task_deinit(&t);
}

void sched_handle_worker(nimble_scheduler *s, const sched_envelope *env, const void *data,
                         size_t size) {
  nimble_msg_type_t type;
  json_t *body;
  nimble_status_t st = nimble_message_decode(data, size, &type, &body);
  if (st) {
    reply_error(s, env, st);
    return;
  }
  sched_worker *w = sched_worker_by_rid(s, env->data[0], env->size[0]);
  if (w) w->last_seen_ms = sched_now_mono_ms();
  switch (type) {
    case NIMBLE_MSG_READY: handle_ready(s, env, body); break;
    case NIMBLE_MSG_HEARTBEAT: handle_heartbeat(s, env, body); break;
    case NIMBLE_MSG_PROGRESS: handle_progress(s, body); break;
    case NIMBLE_MSG_RESULT: handle_result(s, w, env, body); break;
    case NIMBLE_MSG_FAILURE: handle_failure(s, w, body); break;
    case NIMBLE_MSG_PROFILE_RESULT: handle_profile_result(s, w, env, body); break;
    default:
      reply_error(s, env,
                  nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                     "%s is not a worker message (expected READY, HEARTBEAT, "
                                     "PROGRESS, RESULT, PROFILE_RESULT or FAILURE)",
                                     nimble_message_type_name(type)));
  }
  json_decref(body);
}
