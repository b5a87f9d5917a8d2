/* Requests from clients: SUBMIT fans a job out into one task per target
 * (answered from the compile cache when the store still has the artifact,
 * merged with an identical task in flight otherwise), STATUS reports a job,
 * CANCEL stops it; TUNE_RECORDS_LIST and TUNE_RECORDS_IMPORT read and add
 * tuning records (tune_records.c). Every request carries the client's
 * bearer token in the body member "token" when the scheduler has a token
 * file. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "nimble/compile_key.h"
#include "nimble/target.h"
#include "nimble/tune_record.h"

static const char *str_of(const json_t *body, const char *key) {
  return json_string_value(json_object_get(body, key));
}

/* Creates or joins the task for target `spec` of job `job`; writes the task
 * id used into tid and sets *cached when the cache answered. */
static nimble_status_t submit_target(nimble_scheduler *s, const char *job, const json_t *body,
                                     const char *spec, const char *options_text, int verify,
                                     char tid[NIMBLE_SCHED_ID_MAX + 1], int *cached) {
  *cached = 0;
  nimble_target_t target;
  NIMBLE_RETURN_IF_ERROR(nimble_target_parse(spec, &target));
  nimble_compile_key_input_t in = {.target = spec,
                                   .compiler_version = s->compiler_version,
                                   .options = json_object_get(body, "options"),
                                   .salt = s->salt};
  NIMBLE_RETURN_IF_ERROR(nimble_digest_parse(str_of(body, "model"), &in.model));
  nimble_digest_t key;
  NIMBLE_RETURN_IF_ERROR(nimble_compile_key_compute(&in, &key));
  char keytext[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&key, keytext);
  char tag[NIMBLE_TARGET_TAG_MAX + 1];
  nimble_target_tag(&target, tag);

  nimble_sched_task_t t;
  nimble_sched_task_init(&t);
  snprintf(t.id, sizeof t.id, "%s.%s", job, tag);
  snprintf(t.job, sizeof t.job, "%s", job);
  snprintf(t.key, sizeof t.key, "%s", keytext);
  snprintf(t.model, sizeof t.model, "%s", str_of(body, "model"));
  snprintf(t.format, sizeof t.format, "%s", str_of(body, "format"));
  snprintf(t.name, sizeof t.name, "%s", str_of(body, "name"));
  snprintf(t.target, sizeof t.target, "%s", spec);
  t.options = options_text ? strdup(options_text) : NULL;
  t.created_ms = t.queued_ms = sched_now_epoch_ms();
  t.verify = verify > 1 ? verify : 0;
  sched_metrics_target(s->metrics, spec);

  /* 1. The cache, served only while the store still has every blob, and
   * for a verified build only when at least as many workers built it. */
  int found, verified = 0;
  char manifest[NIMBLE_SCHED_DIGEST_LEN + 1], name[256];
  nimble_status_t st = nimble_sched_cache_get(s->redis, keytext, &found, manifest, name);
  if (!st && found) st = nimble_sched_cache_verified(s->redis, keytext, &verified);
  if (!st && found && verified < verify) {
    sched_log(s, "cache entry %s -> %s not used: %d worker(s) built it, job %s asks for %d", keytext,
              manifest, verified, job, verify);
    found = 0;
  }
  if (!st && found) {
    int ok = 0;
    sched_cache_verify(s, name, manifest, t.name, tag, &ok);
    if (ok) {
      snprintf(t.state, sizeof t.state, "done");
      snprintf(t.manifest, sizeof t.manifest, "%s", manifest);
      t.cached = 1;
      t.percent = 100;
      t.finished_ms = t.created_ms;
      *cached = 1;
    } else {
      sched_log(s, "cache entry %s -> %s dropped: the store lacks part of it", keytext, manifest);
      st = nimble_sched_cache_drop(s->redis, keytext);
    }
  }
  if (!st) {
    /* Counted for the metrics and, in Redis, for the dashboard's hit rate. */
    sched_metrics_cache(s->metrics, spec, *cached);
    nimble_status_free(nimble_sched_redis_command(s->redis, NULL, "HINCRBY nimble:stats %s 1",
                                                  *cached ? "cache_hits" : "cache_misses"));
  }
  if (!st && !*cached) {
    /* 2. Merge with an identical task in flight (SET NX key -> task). */
    int claimed;
    char holder[NIMBLE_SCHED_ID_MAX + 1];
    st = nimble_sched_inflight_claim(s->redis, keytext, t.id, &claimed, holder);
    if (!st && !claimed) {
      nimble_sched_task_t h;
      nimble_status_t hs = nimble_sched_task_load(s->redis, holder, &h);
      int live = !hs && (!strcmp(h.state, "queued") || !strcmp(h.state, "running"));
      /* A job joins a task that builds at least as carefully as it asks. */
      int enough = !hs && (h.verify > 1 ? h.verify : 1) >= verify;
      nimble_status_free(hs);
      if (!hs) nimble_sched_task_deinit(&h);
      if (live && !enough)
        sched_log(s, "job %s target %s not merged into task %s: it asks for %d workers", job, spec,
                  holder, verify);
      if (live && enough) {
        snprintf(tid, NIMBLE_SCHED_ID_MAX + 1, "%s", holder);
        sched_log(s, "job %s target %s merged into task %s", job, spec, holder);
        sched_metrics_merged(s->metrics, spec);
        /* A job under another name gets the artifact tagged there too when
         * the task finishes (handle_result). */
        st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:task:%s:names %s", holder,
                                        t.name);
        nimble_sched_task_deinit(&t);
        if (st) return st;
        return nimble_sched_redis_command(s->redis, NULL, "SADD nimble:task:%s:jobs %s", holder,
                                          job);
      }
      /* A stale claim (its task finished without releasing it), or one a
       * less verified task holds: take over. */
      st = nimble_sched_redis_command(s->redis, NULL, "SET nimble:inflight:%s %s", keytext, t.id);
    }
    if (!st) snprintf(t.state, sizeof t.state, "queued");
  }
  if (!st) st = nimble_sched_task_save(s->redis, &t);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:task:%s:jobs %s", t.id, job);
  if (!st && !*cached && t.verify >= 2) {
    /* A verified build: its copies are queued, never the group itself. */
    st = sched_verify_create_copies(s, &t);
  } else if (!st && !*cached) {
    st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:active %s", t.id);
    if (!st)
      st = nimble_sched_redis_command(s->redis, NULL, "RPUSH nimble:queue:%s %s", spec, t.id);
  }
  snprintf(tid, NIMBLE_SCHED_ID_MAX + 1, "%s", t.id);
  nimble_sched_task_deinit(&t);
  return st;
}

/* Counts the state a new or changed job is in (sched_note_job_state). */
static void note_state(nimble_scheduler *s, const char *job) {
  json_t *status;
  nimble_status_t st = sched_job_status(s, job, &status);
  if (st) {
    nimble_status_free(st);
    return;
  }
  sched_note_job_state(s, status);
  json_decref(status);
}

static void handle_submit(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "INCR nimble:next-job");
  if (st) {
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    return;
  }
  char job[64];
  snprintf(job, sizeof job, "j-%lld", rep->integer);
  freeReplyObject(rep);

  const json_t *targets = json_object_get(body, "targets");
  const json_t *options = json_object_get(body, "options");
  /* The job's own `verify` (protocol checked 1..16) or the policy's. */
  int verify = (int)json_integer_value(json_object_get(body, "verify"));
  if (verify < s->verify_policy) verify = s->verify_policy;
  /* A tuned build depends on its worker's measurements: two workers'
   * copies may differ and cannot be compared byte for byte. */
  if (verify > 1 && nimble_tune_wanted(options)) {
    st = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "verified builds (verify=%d%s) cannot tune: a tuned build depends on its worker's "
                            "measurements, so two workers' copies may differ; submit without tune=true, or "
                            "without verification",
                            verify, s->verify_policy > 1 ? ", the scheduler's policy" : "");
    sched_send_error(s, s->clients, env, st, job);
    nimble_status_free(st);
    return;
  }
  char *options_text = options ? json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  char *targets_text = json_dumps(targets, JSON_COMPACT);
  /* The job record first: tasks point back to it. */
  st = nimble_sched_redis_command(
      s->redis, NULL,
      "HSET nimble:job:%s kind compile model %s format %s name %s targets %s options %s "
      "cancelled 0 created_ms %lld verify %d",
      job, str_of(body, "model"), str_of(body, "format"), str_of(body, "name"),
      targets_text ? targets_text : "[]", options_text ? options_text : "",
      (long long)sched_now_epoch_ms(), verify);
  int all_cached = 1;
  for (size_t i = 0; !st && i < json_array_size(targets); i++) {
    const char *spec = json_string_value(json_array_get(targets, i));
    char tid[NIMBLE_SCHED_ID_MAX + 1];
    int cached;
    st = submit_target(s, job, body, spec, options_text, verify, tid, &cached);
    if (st) st = nimble_status_annotate(st, "target '%s'", spec);
    if (!st) st = nimble_sched_redis_command(s->redis, NULL, "HSET nimble:job:%s task:%d %s", job, (int)i, tid);
    if (!cached) all_cached = 0;
  }
  free(options_text);
  free(targets_text);
  if (st) {
    sched_send_error(s, s->clients, env, st, job);
    nimble_status_free(st);
    return;
  }
  sched_log(s, "job %s accepted (%zu target(s)%s%s)", job, json_array_size(targets),
            all_cached ? ", all from the cache" : "", verify > 1 ? ", verified builds" : "");
  json_t *reply = json_pack("{s:s,s:b}", "job", job, "cached", all_cached);
  sched_send(s, s->clients, env, NIMBLE_MSG_ACCEPTED, reply);
  json_decref(reply);
  note_state(s, job);
  sched_dispatch(s);
}

/* PROFILE: one task that runs artifact `name` (the target's tag, or the
 * manifest given) on a worker that can run the target, queued on
 * nimble:pqueue:<target>. No cache and no merging: a profile measures the
 * worker it runs on, now. */
static void handle_profile(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const char *spec = str_of(body, "target");
  nimble_target_t target;
  nimble_status_t st = nimble_target_parse(spec, &target);
  redisReply *rep = NULL;
  if (!st) st = nimble_sched_redis_command(s->redis, &rep, "INCR nimble:next-job");
  if (st) {
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    return;
  }
  char job[64];
  snprintf(job, sizeof job, "j-%lld", rep->integer);
  freeReplyObject(rep);
  char tag[NIMBLE_TARGET_TAG_MAX + 1];
  nimble_target_tag(&target, tag);
  char *inputs = json_dumps(json_object_get(body, "inputs"), JSON_COMPACT | JSON_SORT_KEYS);
  json_int_t runs = json_integer_value(json_object_get(body, "runs"));
  const char *manifest = str_of(body, "manifest");

  nimble_sched_task_t t;
  nimble_sched_task_init(&t);
  snprintf(t.kind, sizeof t.kind, "profile");
  snprintf(t.id, sizeof t.id, "%s.%s", job, tag);
  snprintf(t.job, sizeof t.job, "%s", job);
  snprintf(t.name, sizeof t.name, "%s", str_of(body, "name"));
  snprintf(t.target, sizeof t.target, "%s", spec);
  snprintf(t.state, sizeof t.state, "queued");
  if (manifest) snprintf(t.manifest, sizeof t.manifest, "%s", manifest);
  t.inputs = inputs;
  t.runs = runs > 0 ? (int)runs : 10;
  t.created_ms = t.queued_ms = sched_now_epoch_ms();
  sched_metrics_target(s->metrics, spec);

  char targets[300];
  snprintf(targets, sizeof targets, "[\"%s\"]", spec); /* a canonical spec needs no escaping */
  st = nimble_sched_redis_command(
      s->redis, NULL,
      "HSET nimble:job:%s kind profile name %s targets %s inputs %s runs %d manifest %s "
      "cancelled 0 created_ms %lld task:0 %s",
      job, t.name, targets, inputs ? inputs : "{}", t.runs, manifest ? manifest : "",
      (long long)t.created_ms, t.id);
  if (!st) st = nimble_sched_task_save(s->redis, &t);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:task:%s:jobs %s", t.id, job);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:active %s", t.id);
  if (!st) st = nimble_sched_redis_command(s->redis, NULL, "RPUSH nimble:pqueue:%s %s", spec, t.id);
  nimble_sched_task_deinit(&t);
  if (st) {
    sched_send_error(s, s->clients, env, st, job);
    nimble_status_free(st);
    return;
  }
  sched_log(s, "profile job %s accepted (%s on %s)", job, str_of(body, "name"), spec);
  json_t *reply = json_pack("{s:s,s:b}", "job", job, "cached", 0);
  sched_send(s, s->clients, env, NIMBLE_MSG_ACCEPTED, reply);
  json_decref(reply);
  note_state(s, job);
  sched_dispatch(s);
}

static void cancel_task(nimble_scheduler *s, const char *tid) {
  nimble_sched_task_t t;
  nimble_status_t st = nimble_sched_task_load(s->redis, tid, &t);
  if (st) {
    nimble_status_free(st);
    return;
  }
  if (!strcmp(t.state, "queued") || !strcmp(t.state, "running")) {
    sched_send_cancel(s, &t);
    snprintf(t.state, sizeof t.state, "cancelled");
    st = sched_task_finish(s, &t);
    nimble_status_free(st);
    if (t.verify >= 2 && !t.group[0]) sched_verify_stop_copies(s, &t);
  }
  nimble_sched_task_deinit(&t);
}

static void handle_cancel(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const char *job = str_of(body, "job");
  if (!job) {
    nimble_status_t st = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                            "body.job: a client cancels a job, not a task");
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    return;
  }
  json_t *status;
  nimble_status_t st = sched_job_status(s, job, &status); /* NOT_FOUND for an unknown job */
  if (!st) {
    json_decref(status);
    st = nimble_sched_redis_command(s->redis, NULL, "HSET nimble:job:%s cancelled 1", job);
  }
  redisReply *rep = NULL;
  if (!st) st = nimble_sched_redis_command(s->redis, &rep, "HGETALL nimble:job:%s", job);
  if (st) {
    sched_send_error(s, s->clients, env, st, job);
    nimble_status_free(st);
    return;
  }
  /* A task shared with another job keeps running for that job. */
  for (size_t i = 0; i + 1 < rep->elements; i += 2) {
    if (strncmp(rep->element[i]->str, "task:", 5)) continue;
    const char *tid = rep->element[i + 1]->str;
    redisReply *left = NULL;
    st = nimble_sched_redis_command(s->redis, NULL, "SREM nimble:task:%s:jobs %s", tid, job);
    if (!st) st = nimble_sched_redis_command(s->redis, &left, "SCARD nimble:task:%s:jobs", tid);
    if (!st && left->integer == 0) cancel_task(s, tid);
    if (left) freeReplyObject(left);
    nimble_status_free(st);
    st = nimble_ok();
  }
  freeReplyObject(rep);
  sched_log(s, "job %s cancelled", job);
  st = sched_job_status(s, job, &status);
  if (st) {
    sched_send_error(s, s->clients, env, st, job);
    nimble_status_free(st);
    return;
  }
  sched_note_job_state(s, status);
  sched_send(s, s->clients, env, NIMBLE_MSG_JOB_STATUS, status);
  sched_publish(s, job, NIMBLE_MSG_JOB_STATUS, status);
  json_decref(status);
}

void sched_handle_client(nimble_scheduler *s, const sched_envelope *env, const void *data,
                         size_t size) {
  nimble_msg_type_t type;
  json_t *body = NULL;
  nimble_status_t st = nimble_message_decode(data, size, &type, &body);
  if (!st) sched_metrics_request(s->metrics, nimble_message_type_name(type));
  if (!st) st = sched_check_token(s, body);
  if (!st && type != NIMBLE_MSG_SUBMIT && type != NIMBLE_MSG_STATUS && type != NIMBLE_MSG_CANCEL &&
      type != NIMBLE_MSG_PROFILE && type != NIMBLE_MSG_TUNE_RECORDS_LIST &&
      type != NIMBLE_MSG_TUNE_RECORDS_IMPORT)
    st = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "%s is not a client request (expected SUBMIT, PROFILE, STATUS, CANCEL, "
                            "TUNE_RECORDS_LIST or TUNE_RECORDS_IMPORT)",
                            nimble_message_type_name(type));
  if (st) {
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    json_decref(body);
    return;
  }
  if (type == NIMBLE_MSG_SUBMIT) {
    handle_submit(s, env, body);
  } else if (type == NIMBLE_MSG_PROFILE) {
    handle_profile(s, env, body);
  } else if (type == NIMBLE_MSG_CANCEL) {
    handle_cancel(s, env, body);
  } else if (type == NIMBLE_MSG_TUNE_RECORDS_LIST) {
    sched_tune_handle_list(s, env, body);
  } else if (type == NIMBLE_MSG_TUNE_RECORDS_IMPORT) {
    sched_tune_handle_import(s, env, body);
  } else {
    json_t *status;
    const char *job = str_of(body, "job");
    st = sched_job_status(s, job, &status);
    if (st) {
      sched_send_error(s, s->clients, env, st, job);
      nimble_status_free(st);
    } else {
      sched_send(s, s->clients, env, NIMBLE_MSG_JOB_STATUS, status);
      json_decref(status);
    }
  }
  json_decref(body);
}
