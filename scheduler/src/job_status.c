/* JOB_STATUS bodies: a job's state and one status per target, read from the
 * job hash and the task hashes it points to. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"

/* How many connected workers serve `target` (the task's canonical spec, as
 * workers advertise it): compile it, or, for a profile task, run it. */
static size_t workers_serving(const nimble_scheduler *s, const char *target, int profile) {
  size_t n = 0;
  for (size_t i = 0; i < s->nwk; i++) {
    size_t count = profile ? s->wk[i].ncan_run : s->wk[i].ntargets;
    for (size_t k = 0; k < count; k++)
      if (!strcmp(profile ? s->wk[i].can_run[k] : s->wk[i].targets[k], target)) {
        n++;
        break;
      }
  }
  return n;
}

const char *sched_job_state_of(size_t n, int n_done, int n_failed, int n_running, int n_cancelled,
                               int cancelled) {
  if (cancelled) return "cancelled";
  if ((size_t)n_done == n) return "done";
  if (n_failed && (size_t)(n_done + n_failed + n_cancelled) == n) return "failed";
  if (n_running || n_done || n_failed) return "running";
  return "queued";
}

static json_t *task_entry(nimble_scheduler *s, const nimble_sched_task_t *t,
                          const char *target, int cancelled) {
  const char *state = t->state;
  /* A cancelled job shows its unfinished targets as cancelled, even when a
   * task shared with another job goes on for that job. */
  if (cancelled && (!strcmp(state, "queued") || !strcmp(state, "running"))) state = "cancelled";
  json_t *e = json_pack("{s:s,s:s}", "target", target, "state", state);
  if (!e) return NULL;
  if (t->phase[0]) json_object_set_new(e, "phase", json_string(t->phase));
  if (t->percent > 0 && t->percent <= 100) json_object_set_new(e, "percent", json_integer(t->percent));
  if (!strcmp(state, "done")) json_object_set_new(e, "manifest", json_string(t->manifest));
  if (!strcmp(state, "failed"))
    json_object_set_new(e, "error", json_string(t->error && *t->error ? t->error : "failed"));
  if (t->cached) json_object_set_new(e, "cached", json_true());
  if (t->kernels[0]) {
    json_t *k = json_loads(t->kernels, 0, NULL);
    if (json_is_object(k)) json_object_set_new(e, "kernels", k);
    else json_decref(k);
  }
  /* A queued task says whether anyone can take it: without a worker for
   * its target it waits until one joins, and the client should say so. */
  int profile = !strcmp(t->kind, "profile");
  /* A verified build says how many workers it needs and how many copies
   * are built; while it is unfinished, `workers` tells whether enough
   * distinct workers are connected to finish it. */
  int group = t->verify >= 2 && !t->group[0];
  int live = !strcmp(state, "queued") || !strcmp(state, "running");
  if (group) {
    json_object_set_new(e, "verify", json_integer(t->verify));
    json_object_set_new(e, "verified", json_integer(!strcmp(state, "done")
                                                        ? t->verify
                                                        : sched_verify_count_built(s, t)));
  }
  if (!strcmp(state, "queued") || (group && live))
    json_object_set_new(e, "workers", json_integer((json_int_t)workers_serving(s, target, profile)));
  if (profile && !strcmp(state, "done") && t->report) {
    json_t *r = json_loads(t->report, 0, NULL);
    if (r) json_object_set_new(e, "profile", r);
  }
  return e;
}

nimble_status_t sched_job_status(nimble_scheduler *s, const char *job, json_t **out_body) {
  *out_body = NULL;
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "HGETALL nimble:job:%s", job));
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
    freeReplyObject(rep);
    return nimble_status_make(NIMBLE_NOT_FOUND, "job '%s' is not known", job);
  }
  const char *targets_text = NULL;
  int cancelled = 0;
  for (size_t i = 0; i + 1 < rep->elements; i += 2) {
    if (!strcmp(rep->element[i]->str, "targets")) targets_text = rep->element[i + 1]->str;
    if (!strcmp(rep->element[i]->str, "cancelled")) cancelled = !strcmp(rep->element[i + 1]->str, "1");
  }
  json_t *targets = targets_text ? json_loads(targets_text, 0, NULL) : NULL;
  json_t *tasks = json_array();
  int n_done = 0, n_failed = 0, n_running = 0, n_cancelled = 0;
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; !st && i < json_array_size(targets); i++) {
    const char *spec = json_string_value(json_array_get(targets, i));
    char field[32];
    snprintf(field, sizeof field, "task:%zu", i);
    const char *tid = NULL;
    for (size_t j = 0; j + 1 < rep->elements; j += 2)
      if (!strcmp(rep->element[j]->str, field)) tid = rep->element[j + 1]->str;
    nimble_sched_task_t t;
    nimble_sched_task_init(&t);
    if (tid) {
      st = nimble_sched_task_load(s->redis, tid, &t);
      if (st) break;
    } else {
      snprintf(t.state, sizeof t.state, "queued"); /* the submit is still being recorded */
    }
    json_t *e = task_entry(s, &t, spec ? spec : "x86", cancelled);
    const char *state = json_string_value(json_object_get(e, "state"));
    if (state && !strcmp(state, "done")) n_done++;
    else if (state && !strcmp(state, "failed")) n_failed++;
    else if (state && !strcmp(state, "running")) n_running++;
    else if (state && !strcmp(state, "cancelled")) n_cancelled++;
    json_array_append_new(tasks, e);
    nimble_sched_task_deinit(&t);
  }
  freeReplyObject(rep);
  size_t n = json_array_size(targets);
  json_decref(targets);
  if (st) {
    json_decref(tasks);
    return st;
  }
  const char *state = sched_job_state_of(n, n_done, n_failed, n_running, n_cancelled, cancelled);
  *out_body = json_pack("{s:s,s:s,s:o}", "job", job, "state", state, "tasks", tasks);
  if (!*out_body) return NIMBLE_OOM();
  return nimble_ok();
}
