/* The scheduler's state in Redis: jobs, tasks, per-target queues, the
 * compile cache, in-flight merging, the worker registry and tuning records.
 *
 * Every key starts with "nimble:" (docs/farm.md lists them). The connection
 * wrapper reconnects once per command when Redis went away (a restarted
 * Redis, with AOF on, comes back with every job), and reports UNAVAILABLE
 * when it cannot; callers then leave their in-memory view unchanged and try
 * again later, so a Redis restart costs time, never a job.
 *
 * Ownership: a nimble_sched_task_t owns `options`, `error`, `inputs` and
 * `report`; release it
 * with nimble_sched_task_deinit. Strings passed in are borrowed.
 */
#ifndef NIMBLE_SCHED_STATE_H
#define NIMBLE_SCHED_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_SCHED_ID_MAX 128
#define NIMBLE_SCHED_DIGEST_LEN 71

typedef struct nimble_sched_redis nimble_sched_redis;
struct redisReply;

/* Connects (2 s timeout, 5 s per command). Caller destroys *out. */
nimble_status_t nimble_sched_redis_connect(const char *host, int port, nimble_sched_redis **out);
void nimble_sched_redis_destroy(nimble_sched_redis *r);

/* Runs one command (hiredis format), reconnecting once when the connection
 * was lost. A Redis error reply is INTERNAL naming the command. On success
 * *out_reply (when out_reply is non-NULL) is the caller's, freed with
 * freeReplyObject. UNAVAILABLE when Redis cannot be reached. */
nimble_status_t nimble_sched_redis_command(nimble_sched_redis *r, struct redisReply **out_reply,
                                           const char *fmt, ...);
/* The same for a command given as argc arguments of argvlen[i] bytes each
 * (borrowed): for commands with many arguments (HMGET of a page). */
nimble_status_t nimble_sched_redis_command_argv(nimble_sched_redis *r, struct redisReply **out_reply, int argc,
                                                const char **argv, const size_t *argvlen);

typedef struct nimble_sched_task_t {
  char id[NIMBLE_SCHED_ID_MAX + 1];
  char kind[16]; /* "compile" (SUBMIT) or "profile" (PROFILE) */
  char job[NIMBLE_SCHED_ID_MAX + 1]; /* the job that created it */
  char key[NIMBLE_SCHED_DIGEST_LEN + 1];   /* compile key */
  char model[NIMBLE_SCHED_DIGEST_LEN + 1];
  char format[8];
  char name[256];   /* repository of the artifact */
  char target[256]; /* canonical spec */
  char *options;    /* owned canonical JSON object text, or NULL */
  char state[16];   /* queued running done failed cancelled */
  int attempts;     /* deliveries so far */
  char worker[NIMBLE_SCHED_ID_MAX + 1]; /* holder while running, else "" */
  int64_t lease_until;                  /* epoch ms, 0 when not running */
  char phase[33];
  int percent;
  char manifest[NIMBLE_SCHED_DIGEST_LEN + 1]; /* "" until done */
  char *error;                                /* owned, or NULL */
  int cached;
  /* Profile tasks: the input shapes (canonical JSON object text), the
   * timed runs, and the report once done (canonical JSON object text). */
  char *inputs;  /* owned, or NULL */
  int runs;
  char *report;  /* owned, or NULL */
  /* Epoch ms: created, last put in its queue, last delivered, finished
   * (0 until then). */
  int64_t created_ms, queued_ms, started_ms, finished_ms;
  /* Verified builds (docs/farm.md, "Verified builds"): `verify` is the
   * number of workers that must build the same bytes (0 or 1: one build).
   * A task with verify >= 2 is a group: it is never queued itself; its
   * copies "<id>:v1" .. "<id>:vN" are, each with `group` naming it. */
  int verify;
  char group[NIMBLE_SCHED_ID_MAX + 1];    /* a copy's group task, else "" */
  char last_worker[NIMBLE_SCHED_ID_MAX + 1]; /* the worker it was last delivered to (kept once finished), else "" */
  /* Failures the worker reported retryable (the store's or the transport's
   * fault): they do not count as deliveries, and back off (requeue policy). */
  int retries;
  /* Code generation's counts from the worker's last PROGRESS (canonical JSON
   * object text {cached, done, fetched?, total}; "" until then): kernels
   * done of all, cache hits among them, farm kernel cache entries fetched. */
  char kernels[160];
} nimble_sched_task_t;

/* The Redis list a queued task waits in: "queue" for compile tasks,
 * "pqueue" for profile tasks (nimble:<list>:<target>). */
const char *nimble_sched_task_queue(const nimble_sched_task_t *t);

void nimble_sched_task_init(nimble_sched_task_t *t);
void nimble_sched_task_deinit(nimble_sched_task_t *t);

/* Writes every field of the task hash nimble:task:<id>. */
nimble_status_t nimble_sched_task_save(nimble_sched_redis *r, const nimble_sched_task_t *t);
/* Loads nimble:task:<id> into *t (initialised here); NOT_FOUND when absent. */
nimble_status_t nimble_sched_task_load(nimble_sched_redis *r, const char *id,
                                       nimble_sched_task_t *t);

/* Compile cache: nimble:cache:<key> holds the manifest digest and the
 * repository it was pushed to. get: *out_found 0 when absent. */
nimble_status_t nimble_sched_cache_put(nimble_sched_redis *r, const char *key,
                                       const char *manifest, const char *name);
/* The same, recording that `verified` workers built these bytes (field
 * `verified`; an entry without it counts as 1). */
nimble_status_t nimble_sched_cache_put_verified(nimble_sched_redis *r, const char *key,
                                                const char *manifest, const char *name,
                                                int verified);
/* How many workers built the cached entry's bytes: 0 when there is none. */
nimble_status_t nimble_sched_cache_verified(nimble_sched_redis *r, const char *key, int *out);
nimble_status_t nimble_sched_cache_get(nimble_sched_redis *r, const char *key, int *out_found,
                                       char manifest[NIMBLE_SCHED_DIGEST_LEN + 1],
                                       char name[256]);
nimble_status_t nimble_sched_cache_drop(nimble_sched_redis *r, const char *key);

/* In-flight merging: SET NX nimble:inflight:<key> task. *out_claimed is 1
 * when this call set it; otherwise `holder` receives the task that holds it. */
nimble_status_t nimble_sched_inflight_claim(nimble_sched_redis *r, const char *key,
                                            const char *task, int *out_claimed,
                                            char holder[NIMBLE_SCHED_ID_MAX + 1]);
nimble_status_t nimble_sched_inflight_release(nimble_sched_redis *r, const char *key);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_SCHED_STATE_H */
