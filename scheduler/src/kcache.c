/* The farm's kernel cache, the scheduler's half (docs/farm.md, "The farm's
 * kernel cache"): an index per target in Redis of the kernel objects
 * workers built, whose bytes are blobs in the store.
 *
 *   nimble:kcache:<target>        hash: kernel key -> blob digest (one
 *                                 entry per key: the first digest wins)
 *   nimble:kcache:<target>:order  sorted set: "KEY=DIGEST" scored by the
 *                                 sequence number it was added under
 *   nimble:kcache:<target>:seq    counter: the last sequence number given
 *
 * A worker's RESULT reports the kernels its compile built (pushed as blobs
 * first); new keys get the next sequence numbers. Each TASK carries the
 * entries its worker has not been sent yet, by sequence, so a worker
 * catches up a bounded number of entries per task and never asks. Beyond
 * the cap the lowest sequence numbers (the oldest entries) are evicted:
 * ZPOPMIN, then HDEL. The scheduler is one thread, so the steps need no
 * transaction; a crash between them leaves at worst an entry in the hash
 * without its order (never sent again: a worker that built it reports it
 * and HSETNX keeps it out), or an order entry that is sent and fetched. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"

static void kc_log_status(nimble_scheduler *s, const char *what, nimble_status_t st) {
  if (!st) return;
  sched_log(s, "kernel cache: %s: %s", what, nimble_status_message(st));
  nimble_status_free(st);
}

void sched_kcache_ready(nimble_scheduler *s, sched_worker *w, const json_t *body) {
  const json_t *seqs = json_object_get(body, "kcache");
  for (size_t i = 0; i < w->ntargets; i++) {
    json_int_t v = json_integer_value(json_object_get(seqs, w->targets[i]));
    w->kcache_seq[i] = v > 0 ? (int64_t)v : 0;
  }
  (void)s;
}

static int64_t current_seq(nimble_scheduler *s, const char *target, nimble_status_t *st) {
  redisReply *rep;
  *st = nimble_sched_redis_command(s->redis, &rep, "GET nimble:kcache:%s:seq", target);
  if (*st) return 0;
  int64_t cur = rep->type == REDIS_REPLY_STRING ? strtoll(rep->str, NULL, 10) : 0;
  freeReplyObject(rep);
  return cur;
}

void sched_kcache_fill_task(nimble_scheduler *s, sched_worker *w, const nimble_sched_task_t *t,
                            json_t *b) {
  /* A verified build's copies must be independent builds: a cache filled
   * by another worker (or by this one from the farm) would let one bad
   * object reach every copy, so they compile with no kernel cache. */
  if (t->group[0]) {
    json_object_set_new(b, "kernel_cache", json_false());
    return;
  }
  if (!s->kcache_cap) return;
  size_t ti = 0;
  while (ti < w->ntargets && strcmp(w->targets[ti], t->target)) ti++;
  if (ti == w->ntargets) return;
  nimble_status_t st;
  int64_t cur = current_seq(s, t->target, &st);
  if (st) {
    kc_log_status(s, "reading the index", st);
    return;
  }
  /* A sequence past the counter means Redis lost the index (no AOF): the
   * worker starts over with the index as it is now. */
  int64_t from = w->kcache_seq[ti] <= cur ? w->kcache_seq[ti] : 0;
  redisReply *rep;
  st = nimble_sched_redis_command(s->redis, &rep,
                                  "ZRANGEBYSCORE nimble:kcache:%s:order (%lld +inf WITHSCORES LIMIT 0 %d",
                                  t->target, (long long)from, NIMBLE_KCACHE_TASK_MAX);
  if (st) {
    kc_log_status(s, "reading the index", st);
    return;
  }
  json_t *entries = json_array();
  int64_t upto = from;
  for (size_t i = 0; entries && rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements; i += 2) {
    const char *member = rep->element[i]->str;
    const char *eq = member ? strchr(member, '=') : NULL;
    if (!eq || eq - member != 64) continue;
    char key[65];
    memcpy(key, member, 64);
    key[64] = '\0';
    json_array_append_new(entries, json_pack("{s:s,s:s}", "key", key, "digest", eq + 1));
    int64_t seq = strtoll(rep->element[i + 1]->str, NULL, 10);
    if (seq > upto) upto = seq;
  }
  freeReplyObject(rep);
  if (!entries) return;
  /* Nothing newer: the worker has everything up to the counter. */
  if (json_array_size(entries) == 0) upto = cur > from ? cur : from;
  w->kcache_seq[ti] = upto;
  json_object_set_new(b, "kcache_seq", json_integer(upto));
  if (json_array_size(entries)) {
    sched_log(s, "kernel cache: task %s: %zu entr%s for worker %s (sequence %lld to %lld of %lld)",
              t->id, json_array_size(entries), json_array_size(entries) == 1 ? "y" : "ies", w->id,
              (long long)from + 1, (long long)upto, (long long)cur);
    json_object_set_new(b, "kcache", entries);
  } else {
    json_decref(entries);
  }
}

void sched_kcache_record(nimble_scheduler *s, const nimble_sched_task_t *t, const json_t *entries) {
  if (!s->kcache_cap || !json_array_size(entries)) return;
  size_t added = 0, i;
  json_t *e;
  json_array_foreach((json_t *)entries, i, e) {
    const char *key = json_string_value(json_object_get(e, "key"));
    const char *digest = json_string_value(json_object_get(e, "digest"));
    if (!key || !digest) continue;
    redisReply *rep;
    nimble_status_t st =
        nimble_sched_redis_command(s->redis, &rep, "HSETNX nimble:kcache:%s %s %s", t->target, key, digest);
    if (st) {
      kc_log_status(s, "recording an entry", st);
      return;
    }
    int fresh = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    if (!fresh) continue; /* known already, perhaps built by another worker at the same time */
    st = nimble_sched_redis_command(s->redis, &rep, "INCR nimble:kcache:%s:seq", t->target);
    if (st) {
      kc_log_status(s, "recording an entry", st);
      return;
    }
    long long seq = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    st = nimble_sched_redis_command(s->redis, NULL, "ZADD nimble:kcache:%s:order %lld %s=%s", t->target,
                                    seq, key, digest);
    if (st) {
      kc_log_status(s, "recording an entry", st);
      return;
    }
    added++;
  }
  /* Over the cap: the oldest entries go (their blobs stay in the store). */
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "ZCARD nimble:kcache:%s:order", t->target);
  if (st) {
    kc_log_status(s, "evicting", st);
    return;
  }
  long long card = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
  freeReplyObject(rep);
  long long evicted = 0;
  if (card > s->kcache_cap) {
    st = nimble_sched_redis_command(s->redis, &rep, "ZPOPMIN nimble:kcache:%s:order %lld", t->target,
                                    card - (long long)s->kcache_cap);
    if (st) {
      kc_log_status(s, "evicting", st);
      return;
    }
    for (size_t k = 0; rep->type == REDIS_REPLY_ARRAY && k + 1 < rep->elements; k += 2) {
      const char *member = rep->element[k]->str;
      if (!member || strlen(member) < 65 || member[64] != '=') continue;
      kc_log_status(s, "evicting",
                    nimble_sched_redis_command(s->redis, NULL, "HDEL nimble:kcache:%s %b", t->target, member,
                                               (size_t)64));
      evicted++;
    }
    freeReplyObject(rep);
  }
  sched_log(s, "kernel cache %s: task %s reported %zu kernel%s, %zu new; %lld in the index%s", t->target,
            t->id, json_array_size(entries), json_array_size(entries) == 1 ? "" : "s", added,
            card - evicted, evicted ? " after evicting the oldest" : "");
}
