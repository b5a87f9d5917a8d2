/* Task records, the compile cache, in-flight merging and tuning records in
 * Redis. Each record is one hash so that a reader sees it whole. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/sched_state.h"

void nimble_sched_task_init(nimble_sched_task_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->kind, sizeof t->kind, "compile");
}

void nimble_sched_task_deinit(nimble_sched_task_t *t) {
  free(t->options);
  free(t->error);
  free(t->inputs);
  free(t->report);
  memset(t, 0, sizeof *t);
}

nimble_status_t nimble_sched_task_save(nimble_sched_redis *r, const nimble_sched_task_t *t) {
  /* One HSET, so a reader never sees half a task. */
  nimble_status_t s = nimble_sched_redis_command(
      r, NULL,
      "HSET nimble:task:%s job %s key %s model %s format %s name %s target %s options %s "
      "state %s attempts %d worker %s lease_until %lld phase %s percent %d manifest %s "
      "error %s cached %d kind %s inputs %s runs %d report %s created_ms %lld queued_ms %lld "
      "started_ms %lld finished_ms %lld verify %d group %s last_worker %s retries %d kernels %s",
      t->id, t->job, t->key, t->model, t->format, t->name, t->target,
      t->options ? t->options : "", t->state, t->attempts, t->worker, (long long)t->lease_until,
      t->phase, t->percent, t->manifest, t->error ? t->error : "", t->cached ? 1 : 0,
      t->kind[0] ? t->kind : "compile", t->inputs ? t->inputs : "", t->runs,
      t->report ? t->report : "", (long long)t->created_ms, (long long)t->queued_ms,
      (long long)t->started_ms, (long long)t->finished_ms, t->verify, t->group, t->last_worker,
      t->retries, t->kernels);
  return s ? nimble_status_annotate(s, "saving task '%s'", t->id) : nimble_ok();
}

static void copy_field(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src); }

nimble_status_t nimble_sched_task_load(nimble_sched_redis *r, const char *id,
                                       nimble_sched_task_t *t) {
  nimble_sched_task_init(t);
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(r, &rep, "HGETALL nimble:task:%s", id));
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
    freeReplyObject(rep);
    return nimble_status_make(NIMBLE_NOT_FOUND, "task '%s' is not known", id);
  }
  copy_field(t->id, sizeof t->id, id);
  copy_field(t->kind, sizeof t->kind, "compile"); /* tasks saved before profile jobs existed */
  for (size_t i = 0; i + 1 < rep->elements; i += 2) {
    const char *f = rep->element[i]->str, *v = rep->element[i + 1]->str;
    if (!f || !v) continue;
    if (!strcmp(f, "job")) copy_field(t->job, sizeof t->job, v);
    else if (!strcmp(f, "key")) copy_field(t->key, sizeof t->key, v);
    else if (!strcmp(f, "model")) copy_field(t->model, sizeof t->model, v);
    else if (!strcmp(f, "format")) copy_field(t->format, sizeof t->format, v);
    else if (!strcmp(f, "name")) copy_field(t->name, sizeof t->name, v);
    else if (!strcmp(f, "target")) copy_field(t->target, sizeof t->target, v);
    else if (!strcmp(f, "options")) t->options = *v ? strdup(v) : NULL;
    else if (!strcmp(f, "state")) copy_field(t->state, sizeof t->state, v);
    else if (!strcmp(f, "attempts")) t->attempts = atoi(v);
    else if (!strcmp(f, "worker")) copy_field(t->worker, sizeof t->worker, v);
    else if (!strcmp(f, "lease_until")) t->lease_until = strtoll(v, NULL, 10);
    else if (!strcmp(f, "phase")) copy_field(t->phase, sizeof t->phase, v);
    else if (!strcmp(f, "percent")) t->percent = atoi(v);
    else if (!strcmp(f, "kernels")) copy_field(t->kernels, sizeof t->kernels, v);
    else if (!strcmp(f, "manifest")) copy_field(t->manifest, sizeof t->manifest, v);
    else if (!strcmp(f, "error")) t->error = *v ? strdup(v) : NULL;
    else if (!strcmp(f, "cached")) t->cached = !strcmp(v, "1");
    else if (!strcmp(f, "kind") && *v) copy_field(t->kind, sizeof t->kind, v);
    else if (!strcmp(f, "inputs")) t->inputs = *v ? strdup(v) : NULL;
    else if (!strcmp(f, "runs")) t->runs = atoi(v);
    else if (!strcmp(f, "report")) t->report = *v ? strdup(v) : NULL;
    else if (!strcmp(f, "created_ms")) t->created_ms = strtoll(v, NULL, 10);
    else if (!strcmp(f, "queued_ms")) t->queued_ms = strtoll(v, NULL, 10);
    else if (!strcmp(f, "started_ms")) t->started_ms = strtoll(v, NULL, 10);
    else if (!strcmp(f, "finished_ms")) t->finished_ms = strtoll(v, NULL, 10);
    else if (!strcmp(f, "verify")) t->verify = atoi(v);
    else if (!strcmp(f, "group")) copy_field(t->group, sizeof t->group, v);
    else if (!strcmp(f, "last_worker")) copy_field(t->last_worker, sizeof t->last_worker, v);
    else if (!strcmp(f, "retries")) t->retries = atoi(v);
  }
  freeReplyObject(rep);
  return nimble_ok();
}

const char *nimble_sched_task_queue(const nimble_sched_task_t *t) {
  return strcmp(t->kind, "profile") == 0 ? "pqueue" : "queue";
}

nimble_status_t nimble_sched_cache_put(nimble_sched_redis *r, const char *key,
                                       const char *manifest, const char *name) {
  return nimble_sched_cache_put_verified(r, key, manifest, name, 1);
}

nimble_status_t nimble_sched_cache_put_verified(nimble_sched_redis *r, const char *key,
                                                const char *manifest, const char *name,
                                                int verified) {
  return nimble_sched_redis_command(r, NULL, "HSET nimble:cache:%s manifest %s name %s verified %d",
                                    key, manifest, name, verified > 1 ? verified : 1);
}

nimble_status_t nimble_sched_cache_verified(nimble_sched_redis *r, const char *key, int *out) {
  *out = 0;
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(
      nimble_sched_redis_command(r, &rep, "HMGET nimble:cache:%s manifest verified", key));
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
      rep->element[0]->type == REDIS_REPLY_STRING)
    *out = rep->element[1]->type == REDIS_REPLY_STRING ? atoi(rep->element[1]->str) : 1;
  if (*out < 0) *out = 0;
  freeReplyObject(rep);
  return nimble_ok();
}

nimble_status_t nimble_sched_cache_get(nimble_sched_redis *r, const char *key, int *out_found,
                                       char manifest[NIMBLE_SCHED_DIGEST_LEN + 1],
                                       char name[256]) {
  *out_found = 0;
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(
      nimble_sched_redis_command(r, &rep, "HMGET nimble:cache:%s manifest name", key));
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
      rep->element[0]->type == REDIS_REPLY_STRING && rep->element[1]->type == REDIS_REPLY_STRING) {
    copy_field(manifest, NIMBLE_SCHED_DIGEST_LEN + 1, rep->element[0]->str);
    copy_field(name, 256, rep->element[1]->str);
    *out_found = 1;
  }
  freeReplyObject(rep);
  return nimble_ok();
}

nimble_status_t nimble_sched_cache_drop(nimble_sched_redis *r, const char *key) {
  return nimble_sched_redis_command(r, NULL, "DEL nimble:cache:%s", key);
}

nimble_status_t nimble_sched_inflight_claim(nimble_sched_redis *r, const char *key,
                                            const char *task, int *out_claimed,
                                            char holder[NIMBLE_SCHED_ID_MAX + 1]) {
  *out_claimed = 0;
  holder[0] = '\0';
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(
      nimble_sched_redis_command(r, &rep, "SET nimble:inflight:%s %s NX", key, task));
  int set = rep->type == REDIS_REPLY_STATUS;
  freeReplyObject(rep);
  if (set) {
    *out_claimed = 1;
    return nimble_ok();
  }
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(r, &rep, "GET nimble:inflight:%s", key));
  if (rep->type == REDIS_REPLY_STRING) copy_field(holder, NIMBLE_SCHED_ID_MAX + 1, rep->str);
  freeReplyObject(rep);
  return nimble_ok();
}

nimble_status_t nimble_sched_inflight_release(nimble_sched_redis *r, const char *key) {
  return nimble_sched_redis_command(r, NULL, "DEL nimble:inflight:%s", key);
}
