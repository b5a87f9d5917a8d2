/* Tuning records, the scheduler's half (docs/farm.md, "Tuning records"):
 * the farm's copy of every record workers measured or clients imported, one
 * hash per target kind in Redis.
 *
 *   nimble:tune:<kind>        hash: "<cpu>|<signature>" -> the record's
 *                             compact JSON (sorted keys); the newest wins
 *   nimble:tune:<kind>:order  sorted set: the same fields, scored by the
 *                             sequence number they were last stored under
 *   nimble:tune:seq           counter: the last sequence number given
 *
 * A RESULT's records are checked one by one (nimble_tune_record_from_json)
 * and the bad ones logged and dropped: they never fail the job. An import
 * is all or nothing: one bad record refuses it, naming the record. A TASK
 * whose job asks for tune=true carries the newest records of its target
 * kind (at most NIMBLE_TUNE_MESSAGE_MAX). Beyond NIMBLE_TUNE_MAX_RECORDS
 * per kind, the records stored longest ago go (ZPOPMIN, then HDEL). As in
 * kcache.c, the scheduler is one thread and the steps need no transaction:
 * a crash between HSET and ZADD leaves a record outside the order, which the
 * next store of the same field puts back. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "nimble/target.h"
#include "nimble/tune_record.h"

/* Redis keeps one hash and one order per target kind, kind k's name
 * KIND(k) (nimble/target.h). */
#define NKINDS NIMBLE_TARGET_KIND_COUNT
#define KIND(k) nimble_target_kind_name((nimble_target_kind_t)(k))

static void tr_log_status(nimble_scheduler *s, const char *what, nimble_status_t st) {
  if (!st) return;
  sched_log(s, "tuning records: %s: %s", what, nimble_status_message(st));
  nimble_status_free(st);
}

/* Stores n checked records under sequence numbers after the counter's
 * (newest wins: HSET replaces, ZADD moves the field to the end), then
 * evicts beyond the cap in each kind it touched. */
static nimble_status_t store_records(nimble_scheduler *s, const nimble_tune_record_t *r, size_t n) {
  if (n == 0) return nimble_ok();
  redisReply *rep;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "INCRBY nimble:tune:seq %lld", (long long)n));
  long long last = rep->type == REDIS_REPLY_INTEGER ? rep->integer : (long long)n;
  freeReplyObject(rep);
  int touched[NKINDS] = {0};
  for (size_t i = 0; i < n; i++) {
    char *text = nimble_tune_record_to_text(&r[i]);
    if (!text) return NIMBLE_OOM_IN("tuning records");
    char field[NIMBLE_TUNE_CPU_MAX + NIMBLE_TUNE_SIGNATURE_LEN + 2];
    snprintf(field, sizeof field, "%s|%s", r[i].cpu, r[i].signature);
    nimble_status_t st =
        nimble_sched_redis_command(s->redis, NULL, "HSET nimble:tune:%s %s %s", r[i].target, field, text);
    free(text);
    if (!st)
      st = nimble_sched_redis_command(s->redis, NULL, "ZADD nimble:tune:%s:order %lld %s", r[i].target,
                                      last - (long long)n + 1 + (long long)i, field);
    if (st) return st;
    nimble_target_kind_t kind;
    if (nimble_target_kind_from_name(r[i].target, &kind)) touched[kind] = 1;
  }
  for (size_t k = 0; k < NKINDS; k++) {
    if (!touched[k]) continue;
    NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "ZCARD nimble:tune:%s:order", KIND(k)));
    long long card = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    if (card <= NIMBLE_TUNE_MAX_RECORDS) continue;
    NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &rep, "ZPOPMIN nimble:tune:%s:order %lld",
                                                      KIND(k), card - NIMBLE_TUNE_MAX_RECORDS));
    long long evicted = 0;
    for (size_t e = 0; rep->type == REDIS_REPLY_ARRAY && e + 1 < rep->elements; e += 2) {
      if (rep->element[e]->type != REDIS_REPLY_STRING) continue;
      tr_log_status(s, "evicting",
                    nimble_sched_redis_command(s->redis, NULL, "HDEL nimble:tune:%s %b", KIND(k),
                                               rep->element[e]->str, (size_t)rep->element[e]->len));
      evicted++;
    }
    freeReplyObject(rep);
    sched_log(s, "tuning records %s: %lld stored longest ago evicted (at most %d kept)", KIND(k), evicted,
              NIMBLE_TUNE_MAX_RECORDS);
  }
  return nimble_ok();
}

/* The texts of the records of `kind` at positions [from, from + count) of
 * its order (oldest first, or newest first when `newest`), appended to
 * arr. Fields whose hash value is gone are skipped. */
static nimble_status_t append_page(nimble_scheduler *s, const char *kind, long long from, long long count,
                                   int newest, json_t *arr) {
  if (count <= 0) return nimble_ok();
  redisReply *order;
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, &order, "%s nimble:tune:%s:order %lld %lld",
                                                    newest ? "ZREVRANGE" : "ZRANGE", kind, from,
                                                    from + count - 1));
  if (order->type != REDIS_REPLY_ARRAY || order->elements == 0) {
    freeReplyObject(order);
    return nimble_ok();
  }
  size_t n = order->elements;
  const char **argv = calloc(n + 2, sizeof *argv);
  size_t *lens = calloc(n + 2, sizeof *lens);
  char key[64];
  snprintf(key, sizeof key, "nimble:tune:%s", kind);
  nimble_status_t st = argv && lens ? nimble_ok() : NIMBLE_OOM_IN("tuning records");
  redisReply *vals = NULL;
  if (!st) {
    argv[0] = "HMGET";
    lens[0] = 5;
    argv[1] = key;
    lens[1] = strlen(key);
    for (size_t i = 0; i < n; i++) {
      argv[i + 2] = order->element[i]->str ? order->element[i]->str : "";
      lens[i + 2] = order->element[i]->str ? order->element[i]->len : 0;
    }
    st = nimble_sched_redis_command_argv(s->redis, &vals, (int)(n + 2), argv, lens);
  }
  for (size_t i = 0; !st && vals->type == REDIS_REPLY_ARRAY && i < vals->elements; i++) {
    const redisReply *v = vals->element[i];
    if (v->type != REDIS_REPLY_STRING) continue; /* a field without its value: skipped */
    if (json_array_append_new(arr, json_stringn(v->str, v->len)) != 0) st = NIMBLE_OOM_IN("tuning records");
  }
  if (vals) freeReplyObject(vals);
  freeReplyObject(order);
  free(argv);
  free(lens);
  return st;
}

/* The target kind of task t ("x86", ...), or NULL (logged). */
static const char *task_kind(nimble_scheduler *s, const nimble_sched_task_t *t) {
  nimble_target_t target;
  nimble_status_t st = nimble_target_parse(t->target, &target);
  if (st) {
    tr_log_status(s, "a task's target", st);
    return NULL;
  }
  return nimble_target_kind_name(target.kind);
}

void sched_tune_fill_task(nimble_scheduler *s, const nimble_sched_task_t *t, json_t *b) {
  if (!nimble_tune_wanted(json_object_get(b, "options"))) return;
  const char *kind = task_kind(s, t);
  if (!kind) return;
  nimble_status_t st;
  json_t *records = json_array();
  if (!records) return;
  st = append_page(s, kind, 0, NIMBLE_TUNE_MESSAGE_MAX, 1, records);
  if (st) {
    /* The compile tunes from scratch: slower, never wrong. */
    tr_log_status(s, "reading the records for a task", st);
    json_array_clear(records);
  }
  sched_log(s, "tuning records: task %s (tune=true) carries %zu record%s of %s", t->id,
            json_array_size(records), json_array_size(records) == 1 ? "" : "s", kind);
  json_object_set_new(b, "tune_records", records);
}

void sched_tune_record_result(nimble_scheduler *s, const nimble_sched_task_t *t, const json_t *texts) {
  size_t n = json_array_size(texts);
  if (n == 0) return;
  const char *kind = task_kind(s, t);
  if (!kind) return;
  nimble_status_t st;
  nimble_tune_record_t *r = calloc(n, sizeof *r);
  if (!r) return;
  size_t good = 0;
  for (size_t i = 0; i < n; i++) {
    char where[NIMBLE_SCHED_ID_MAX + 64];
    snprintf(where, sizeof where, "task %s: tune_records[%zu]", t->id, i);
    st = nimble_tune_record_from_text(json_string_value(json_array_get(texts, i)), where, &r[good]);
    if (!st && strcmp(r[good].target, kind))
      st = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: a record for %s from a task for %s", where,
                              r[good].target, kind);
    if (st) {
      tr_log_status(s, "dropped", st);
      continue;
    }
    good++;
  }
  st = store_records(s, r, good);
  free(r);
  if (st) {
    tr_log_status(s, "storing a task's records", st);
    return;
  }
  sched_log(s, "tuning records %s: task %s reported %zu, %zu stored", kind, t->id, n, good);
}

void sched_tune_handle_import(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const json_t *texts = json_object_get(body, "records");
  size_t n = json_array_size(texts);
  long long first = (long long)json_integer_value(json_object_get(body, "first"));
  nimble_tune_record_t *r = calloc(n ? n : 1, sizeof *r);
  nimble_status_t st = r ? nimble_ok() : NIMBLE_OOM_IN("tuning records");
  /* All or nothing: every record is checked before any is stored. */
  for (size_t i = 0; !st && i < n; i++) {
    char where[64];
    snprintf(where, sizeof where, "record %lld", first + (long long)i);
    st = nimble_tune_record_from_text(json_string_value(json_array_get(texts, i)), where, &r[i]);
  }
  if (st) st = nimble_status_annotate(st, "tuning records import refused, nothing stored");
  if (!st) st = store_records(s, r, n);
  free(r);
  if (st) {
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    return;
  }
  sched_log(s, "tuning records: %zu imported", n);
  json_t *reply = json_pack("{s:I}", "imported", (json_int_t)n);
  sched_send(s, s->clients, env, NIMBLE_MSG_TUNE_RECORDS_IMPORTED, reply);
  json_decref(reply);
}

void sched_tune_handle_list(nimble_scheduler *s, const sched_envelope *env, const json_t *body) {
  const char *only = json_string_value(json_object_get(body, "target"));
  long long offset = (long long)json_integer_value(json_object_get(body, "offset"));
  /* The kinds in a fixed order, each oldest first: a page is a slice of
   * that sequence. */
  long long counts[NKINDS] = {0}, total = 0;
  nimble_status_t st = nimble_ok();
  for (size_t k = 0; !st && k < NKINDS; k++) {
    if (only && strcmp(only, KIND(k))) continue;
    redisReply *rep;
    st = nimble_sched_redis_command(s->redis, &rep, "ZCARD nimble:tune:%s:order", KIND(k));
    if (st) break;
    counts[k] = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    total += counts[k];
    freeReplyObject(rep);
  }
  json_t *records = json_array();
  if (!st && !records) st = NIMBLE_OOM_IN("tuning records");
  /* `next`: the positions this page covered, whether or not each still
   * had its record (one gone between ZRANGE and HMGET is skipped). */
  long long skip = offset, want = NIMBLE_TUNE_MESSAGE_MAX, next = offset;
  for (size_t k = 0; !st && k < NKINDS && want > 0; k++) {
    if (skip >= counts[k]) {
      skip -= counts[k];
      continue;
    }
    long long take = counts[k] - skip < want ? counts[k] - skip : want;
    st = append_page(s, KIND(k), skip, take, 0, records);
    want -= take;
    next += take;
    skip = 0;
  }
  if (total > INT32_MAX) total = INT32_MAX;
  if (next > INT32_MAX) next = INT32_MAX;
  json_t *reply = st ? NULL : json_pack("{s:O,s:I,s:I,s:I}", "records", records, "offset", (json_int_t)offset,
                                        "next", (json_int_t)next, "total", (json_int_t)total);
  if (!st && !reply) st = NIMBLE_OOM_IN("tuning records");
  json_decref(records);
  if (st) {
    sched_send_error(s, s->clients, env, st, NULL);
    nimble_status_free(st);
    return;
  }
  sched_send(s, s->clients, env, NIMBLE_MSG_TUNE_RECORDS, reply);
  json_decref(reply);
}
