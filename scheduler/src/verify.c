/* Verified builds (docs/farm.md, "Verified builds"): a compile that must be
 * built by N distinct workers (SUBMIT's `verify`, or the scheduler's
 * --verify policy) and is published only when all N artifacts are
 * identical, so that one compromised or broken worker cannot put its bytes
 * under a tag, in the cache or under the farm's signature.
 *
 * The job's task "<job>.<tag>" is then a group: it is never queued itself.
 * Its N copies "<job>.<tag>:v1" .. ":vN" are ordinary compile tasks (leases,
 * heartbeats, retries and deliveries as for any task) that push to the
 * staging repository nimble-verify/<group>, by digest and untagged. Two
 * copies never run on, or come from, the same worker. When every copy is
 * done and their manifest digests are equal (the manifest names the config
 * and every layer by digest, so equal digests are equal bytes), the group
 * publishes that manifest under the job's name and tag (signed first), fills
 * the cache with it (verified = N) and is done. A copy that fails fails the
 * group; two copies that differ fail it naming both workers and both
 * digests, and nothing is tagged. */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"

#define STAGING_PREFIX "nimble-verify/"

int sched_copy_of(const char *tid, char group[NIMBLE_SCHED_ID_MAX + 1]) {
  const char *v = strrchr(tid, ':');
  if (!v || v[1] != 'v' || v[2] < '1' || v[2] > '9') return 0;
  char *end;
  long k = strtol(v + 2, &end, 10);
  if (*end || k < 1 || k > NIMBLE_SCHED_MAX_VERIFY) return 0;
  size_t n = (size_t)(v - tid);
  if (n == 0 || n > NIMBLE_SCHED_ID_MAX) return 0;
  memcpy(group, tid, n);
  group[n] = '\0';
  return (int)k;
}

static void copy_id(const char *group, int k, char out[NIMBLE_SCHED_ID_MAX + 1]) {
  /* Group ids leave room (sched_verify_create_copies checks); a cut one
   * names no task. */
  int n = snprintf(out, NIMBLE_SCHED_ID_MAX + 1, "%s:v%d", group, k);
  if (n < 0 || n > NIMBLE_SCHED_ID_MAX) out[0] = '\0';
}

nimble_status_t sched_verify_create_copies(nimble_scheduler *s, const nimble_sched_task_t *g) {
  if (strlen(g->id) + 4 > NIMBLE_SCHED_ID_MAX)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "task id '%s' leaves no room for its copies",
                              g->id);
  for (int k = 1; k <= g->verify; k++) {
    nimble_sched_task_t c;
    nimble_sched_task_init(&c);
    copy_id(g->id, k, c.id);
    snprintf(c.job, sizeof c.job, "%s", g->job);
    snprintf(c.key, sizeof c.key, "%s", g->key);
    snprintf(c.model, sizeof c.model, "%s", g->model);
    snprintf(c.format, sizeof c.format, "%s", g->format);
    snprintf(c.name, sizeof c.name, STAGING_PREFIX "%s", g->id);
    snprintf(c.target, sizeof c.target, "%s", g->target);
    snprintf(c.state, sizeof c.state, "queued");
    snprintf(c.group, sizeof c.group, "%s", g->id);
    c.verify = g->verify;
    c.options = g->options ? strdup(g->options) : NULL;
    c.created_ms = c.queued_ms = g->created_ms;
    nimble_status_t st = g->options && !c.options ? NIMBLE_OOM() : nimble_ok();
    if (!st) st = nimble_sched_task_save(s->redis, &c);
    if (!st) st = nimble_sched_redis_command(s->redis, NULL, "SADD nimble:active %s", c.id);
    if (!st)
      st = nimble_sched_redis_command(s->redis, NULL, "RPUSH nimble:queue:%s %s", c.target, c.id);
    nimble_sched_task_deinit(&c);
    if (st) return st;
  }
  /* Unfinished groups are settled again by reconciliation: a scheduler
   * killed between a copy's end and its group's settling loses nothing. */
  NIMBLE_RETURN_IF_ERROR(nimble_sched_redis_command(s->redis, NULL, "SADD nimble:groups %s", g->id));
  sched_log(s, "task %s is a verified build: %d copies on distinct workers", g->id, g->verify);
  return nimble_ok();
}

/* The CURVE key worker `id` registered with ("" when none). */
static void key_of(nimble_scheduler *s, const char *id, char out[41]) {
  out[0] = '\0';
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "HGET nimble:worker:%s key", id);
  if (!st && rep->type == REDIS_REPLY_STRING && strlen(rep->str) == 40) memcpy(out, rep->str, 41);
  if (!st) freeReplyObject(rep);
  nimble_status_free(st);
}

int sched_verify_worker_may_build(nimble_scheduler *s, const nimble_sched_task_t *c,
                                  const sched_worker *w) {
  const char *worker = w->id;
  for (int k = 1; k <= c->verify && k <= NIMBLE_SCHED_MAX_VERIFY; k++) {
    char id[NIMBLE_SCHED_ID_MAX + 1];
    copy_id(c->group, k, id);
    if (!strcmp(id, c->id)) continue;
    nimble_sched_task_t sib;
    nimble_status_t st = nimble_sched_task_load(s->redis, id, &sib);
    if (st) {
      /* Unknown is not "allowed": the copy waits for the next round. */
      nimble_status_free(st);
      return 0;
    }
    int live = !strcmp(sib.state, "running") || !strcmp(sib.state, "done");
    int taken = live && !strcmp(sib.last_worker, worker);
    /* With CURVE, distinct workers are distinct keys: a worker that came
     * back under another id is still the same worker. */
    if (live && !taken && w->key[0] && sib.last_worker[0]) {
      char k[41];
      key_of(s, sib.last_worker, k);
      taken = !strcmp(k, w->key);
    }
    nimble_sched_task_deinit(&sib);
    if (taken) return 0;
  }
  return 1;
}

/* Loads copies 1..n of group g into c[0..n-1]; *loaded how many. */
static nimble_status_t load_copies(nimble_scheduler *s, const nimble_sched_task_t *g,
                                   nimble_sched_task_t *c, int *loaded) {
  *loaded = 0;
  for (int k = 1; k <= g->verify; k++) {
    char id[NIMBLE_SCHED_ID_MAX + 1];
    copy_id(g->id, k, id);
    NIMBLE_RETURN_IF_ERROR(nimble_sched_task_load(s->redis, id, &c[k - 1]));
    (*loaded)++;
  }
  return nimble_ok();
}

int sched_verify_count_built(nimble_scheduler *s, const nimble_sched_task_t *g) {
  if (g->verify < 2 || g->group[0] || g->verify > NIMBLE_SCHED_MAX_VERIFY) return 0;
  nimble_sched_task_t c[NIMBLE_SCHED_MAX_VERIFY];
  int n = 0, built = 0;
  nimble_status_t st = load_copies(s, g, c, &n);
  nimble_status_free(st);
  for (int k = 0; k < n; k++) {
    if (!strcmp(c[k].state, "done")) built++;
    nimble_sched_task_deinit(&c[k]);
  }
  return built;
}

void sched_verify_stop_copies(nimble_scheduler *s, const nimble_sched_task_t *g) {
  for (int k = 1; k <= g->verify && k <= NIMBLE_SCHED_MAX_VERIFY; k++) {
    char id[NIMBLE_SCHED_ID_MAX + 1];
    copy_id(g->id, k, id);
    nimble_sched_task_t c;
    nimble_status_t st = nimble_sched_task_load(s->redis, id, &c);
    if (st) {
      nimble_status_free(st);
      continue;
    }
    if (!strcmp(c.state, "queued") || !strcmp(c.state, "running")) {
      sched_send_cancel(s, &c);
      snprintf(c.state, sizeof c.state, "cancelled");
      st = sched_task_finish(s, &c);
      if (st) sched_log(s, "stopping copy %s: %s", id, nimble_status_message(st));
      nimble_status_free(st);
    }
    nimble_sched_task_deinit(&c);
  }
}

/* Fails group g with `error` (taken) and stops its other copies. */
static void fail_group(nimble_scheduler *s, nimble_sched_task_t *g, char *error) {
  free(g->error);
  g->error = error ? error : strdup("verified build failed");
  snprintf(g->state, sizeof g->state, "failed");
  nimble_status_t st = sched_task_finish(s, g);
  if (st) sched_log(s, "failing %s: %s", g->id, nimble_status_message(st));
  nimble_status_free(st);
  sched_verify_stop_copies(s, g);
}

static char *format_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format_text(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = NULL;
  if (vasprintf(&out, fmt, ap) < 0) out = NULL;
  va_end(ap);
  return out;
}

/* All n copies built manifest m: publish it under the group's name and
 * tag (signed first), cache it as verified by n workers, tag it for the
 * names merged into the group. */
static void publish_group(nimble_scheduler *s, nimble_sched_task_t *g, const nimble_sched_task_t *c,
                          int n) {
  const char *tag = strchr(g->id, '.');
  const char *m = c[0].manifest;
  char workers[NIMBLE_SCHED_ID_MAX + 1] = "";
  for (int k = 0; k < n; k++) {
    size_t used = strlen(workers);
    /* A list longer than the buffer is cut short: it only names workers
     * in messages. */
    int w = snprintf(workers + used, sizeof workers - used, "%s%s", k ? "," : "", c[k].last_worker);
    if (w < 0 || (size_t)w >= sizeof workers - used) break;
  }
  nimble_status_t st = tag ? sched_store_tag(s, c[0].name, m, g->name, tag + 1)
                           : nimble_status_make(NIMBLE_INTERNAL, "task id '%s' has no tag", g->id);
  if (st) {
    fail_group(s, g, format_text("verified build of %s:%s: the %d workers (%s) agree on %s, but "
                                 "publishing it failed: %s",
                                 g->name, tag ? tag + 1 : "?", n, workers, m,
                                 nimble_status_message(st)));
    nimble_status_free(st);
    return;
  }
  /* A cache entry a single worker made for the same key with other bytes
   * is what a verified build exists to catch: say so, then replace it. */
  int found = 0;
  char old[NIMBLE_SCHED_DIGEST_LEN + 1], oldname[256];
  st = nimble_sched_cache_get(s->redis, g->key, &found, old, oldname);
  if (!st && found && strcmp(old, m))
    sched_log(s, "cache entry %s held %s (in %s), but %d workers built %s: replaced", g->key, old,
              oldname, n, m);
  nimble_status_free(st);
  st = nimble_sched_cache_put_verified(s->redis, g->key, m, g->name, n);
  if (st) sched_log(s, "caching %s: %s", g->id, nimble_status_message(st));
  nimble_status_free(st);
  snprintf(g->manifest, sizeof g->manifest, "%s", m);
  snprintf(g->last_worker, sizeof g->last_worker, "%s", workers);
  snprintf(g->state, sizeof g->state, "done");
  g->percent = 100;
  sched_tag_merged_names(s, g);
  sched_log(s, "verified build %s: workers %s built identical artifacts %s", g->id, workers, m);
  st = sched_task_finish(s, g);
  if (st) sched_log(s, "finishing %s: %s", g->id, nimble_status_message(st));
  nimble_status_free(st);
}

void sched_verify_settle(nimble_scheduler *s, const char *group) {
  nimble_sched_task_t g;
  nimble_status_t st = nimble_sched_task_load(s->redis, group, &g);
  if (st) {
    sched_log(s, "verified build %s: %s", group, nimble_status_message(st));
    nimble_status_free(st);
    return;
  }
  if ((strcmp(g.state, "queued") && strcmp(g.state, "running")) || g.verify < 2 ||
      g.verify > NIMBLE_SCHED_MAX_VERIFY || g.group[0]) {
    nimble_status_free(nimble_sched_redis_command(s->redis, NULL, "SREM nimble:groups %s", group));
    nimble_sched_task_deinit(&g);
    return;
  }
  nimble_sched_task_t c[NIMBLE_SCHED_MAX_VERIFY];
  int n = 0;
  st = load_copies(s, &g, c, &n);
  if (st) {
    sched_log(s, "verified build %s: %s", group, nimble_status_message(st)); /* next change retries */
    nimble_status_free(st);
  } else {
    const char *tag = strchr(g.id, '.');
    tag = tag ? tag + 1 : "?";
    int failed = -1, first = -1, other = -1, done = 0, started = 0;
    for (int k = 0; k < n; k++) {
      if (!strcmp(c[k].state, "failed") || !strcmp(c[k].state, "cancelled")) {
        if (failed < 0) failed = k;
      } else if (!strcmp(c[k].state, "done")) {
        done++;
        if (first < 0) first = k;
        else if (other < 0 && strcmp(c[k].manifest, c[first].manifest)) other = k;
      }
      if (strcmp(c[k].state, "queued")) started = 1;
    }
    if (other >= 0) {
      sched_log(s, "VERIFICATION FAILED for %s: worker '%s' built %s, worker '%s' built %s", g.id,
                c[first].last_worker, c[first].manifest, c[other].last_worker, c[other].manifest);
      fail_group(s, &g,
                 format_text("verified build of %s:%s failed: the workers disagree: worker '%s' "
                             "built %s, worker '%s' built %s; nothing was published",
                             g.name, tag, c[first].last_worker, c[first].manifest,
                             c[other].last_worker, c[other].manifest));
    } else if (failed >= 0) {
      fail_group(s, &g,
                 format_text("verified build of %s:%s: copy %d on worker '%s' %s: %.16000s", g.name,
                             tag, failed + 1, c[failed].last_worker[0] ? c[failed].last_worker : "?",
                             c[failed].state, c[failed].error ? c[failed].error : "(no error text)"));
    } else if (done == n) {
      publish_group(s, &g, c, n);
    } else {
      if (started && !strcmp(g.state, "queued")) {
        snprintf(g.state, sizeof g.state, "running");
        g.started_ms = sched_now_epoch_ms();
        st = nimble_sched_task_save(s->redis, &g);
        if (st) sched_log(s, "verified build %s: %s", group, nimble_status_message(st));
        nimble_status_free(st);
      }
      sched_publish_task_jobs(s, g.id); /* the client sees copies built: `verified` */
    }
  }
  for (int k = 0; k < n; k++) nimble_sched_task_deinit(&c[k]);
  nimble_sched_task_deinit(&g);
}

void sched_verify_reconcile(nimble_scheduler *s) {
  redisReply *rep;
  nimble_status_t st = nimble_sched_redis_command(s->redis, &rep, "SMEMBERS nimble:groups");
  if (st) {
    sched_log(s, "verified builds: %s", nimble_status_message(st));
    nimble_status_free(st);
    return;
  }
  for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
    char group[NIMBLE_SCHED_ID_MAX + 1];
    snprintf(group, sizeof group, "%s", rep->element[i]->str);
    sched_verify_settle(s, group);
  }
  freeReplyObject(rep);
}
