/* Private to the scheduler: the broker's state and the helpers its files
 * share (broker.c runs the loop; client_requests.c, worker_requests.c,
 * job_status.c, security.c and cache_check.c each handle one concern). */
#ifndef NIMBLE_SCHED_BROKER_H
#define NIMBLE_SCHED_BROKER_H

#include <jansson.h>
#include <signal.h>
#include <stdint.h>

#include "nimble/message.h"
#include "nimble/sched_state.h"
#include "nimble/scheduler.h"
#include "nimble/signature.h"
#include "nimble/store_client.h"
#include "sched_metrics.h"

#define SCHED_MAX_TARGETS 16

typedef struct sched_http sched_http;
#define SCHED_MAX_FRAMES 8

typedef struct sched_worker {
  char id[NIMBLE_SCHED_ID_MAX + 1];
  uint8_t rid[256]; /* ROUTER routing id of its connection */
  size_t rid_len;
  char targets[SCHED_MAX_TARGETS][256];
  size_t ntargets;
  char can_run[SCHED_MAX_TARGETS][256]; /* targets it can run artifacts of (profile jobs) */
  size_t ncan_run;
  char task[NIMBLE_SCHED_ID_MAX + 1]; /* "" when idle */
  int64_t last_seen_ms;              /* monotonic */
  char key[41];                      /* with CURVE: its public key (Z85), bound to its id */
  /* Per target (as targets[]): the farm kernel cache index sequence the
   * worker has been sent up to (its READY's kcache, then each TASK's). */
  int64_t kcache_seq[SCHED_MAX_TARGETS];
} sched_worker;

typedef struct sched_lease {
  char task[NIMBLE_SCHED_ID_MAX + 1];
  char worker[NIMBLE_SCHED_ID_MAX + 1];
  int64_t until_ms; /* epoch ms, as stored in Redis */
} sched_lease;

/* The routing envelope of a received message: every frame before the
 * payload (identity, and the empty delimiter a REQ peer adds). */
typedef struct sched_envelope {
  uint8_t data[2][256];
  size_t size[2];
  int count;
  char key[41]; /* with CURVE: the peer's public key (Z85, from ZAP), else "" */
} sched_envelope;

struct nimble_scheduler {
  char clients_ep[256], workers_ep[256], events_ep[256];
  char compiler_version[257];
  char salt[256];
  long lease_ms, worker_timeout_ms;
  int max_deliveries, quiet;
  int max_retries;   /* retryable failures before a task fails (requeue policy) */
  int verify_policy; /* --verify: the least number of workers that build each compile */
  long kcache_cap;   /* farm kernel cache entries per target; 0: the farm cache is off */
  void *zctx, *clients, *workers, *events, *zap;
  nimble_sched_redis *redis;
  nimble_store_client *store;
  nimble_sign_key_t *signing_key; /* NULL: artifacts are published unsigned */
  nimble_digest_t *tokens; /* sha256 of each client token; NULL: no auth */
  size_t ntokens;
  uint8_t (*worker_keys)[32]; /* CURVE allow-list; NULL: CURVE off */
  size_t nworker_keys;
  sched_worker *wk;
  size_t nwk, capwk;
  sched_lease *leases;
  size_t nleases, capleases;
  int64_t last_reconcile_ms;
  char redis_host[256];
  int redis_port;
  sched_metrics *metrics;    /* NULL only when out of memory */
  struct sched_http *http;   /* NULL without --metrics */
  char http_url[300];        /* "http://HOST:PORT" bound, "" without --metrics */
  uint8_t last_refused_key[32]; /* ZAP log: a refused key is logged once per minute */
  int64_t last_refused_ms;
  volatile sig_atomic_t stopping;
};

int64_t sched_now_epoch_ms(void);
int64_t sched_now_mono_ms(void);
void sched_log(nimble_scheduler *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sends `type`/`body` (borrowed) to a peer on `sock`; errors are logged. */
void sched_send(nimble_scheduler *s, void *sock, const sched_envelope *env, nimble_msg_type_t type,
                const json_t *body);
void sched_send_error(nimble_scheduler *s, void *sock, const sched_envelope *env,
                      nimble_status_t error, const char *job);
/* Publishes one event for `job` on the PUB socket: frames [job][message]. */
void sched_publish(nimble_scheduler *s, const char *job, nimble_msg_type_t type, const json_t *body);
/* Publishes the JOB_STATUS of every job waiting on task `tid`. */
void sched_publish_task_jobs(nimble_scheduler *s, const char *tid);

/* Leases (in memory; the truth is also in each task hash). */
void sched_lease_set(nimble_scheduler *s, const char *task, const char *worker, int64_t until);
void sched_lease_drop(nimble_scheduler *s, const char *task);
sched_lease *sched_lease_find(nimble_scheduler *s, const char *task);

sched_worker *sched_worker_find(nimble_scheduler *s, const char *id);
sched_worker *sched_worker_by_rid(nimble_scheduler *s, const uint8_t *rid, size_t len);

/* Hands queued tasks to idle workers. */
void sched_dispatch(nimble_scheduler *s);
/* Puts a task back in its queue or fails it when it has had its deliveries. */
nimble_status_t sched_task_requeue(nimble_scheduler *s, nimble_sched_task_t *t, const char *why);
/* The requeue policy for failures that are not the task's (the worker said
 * `retryable`: the store or the network failed): the delivery is given
 * back, the task waits in nimble:delayed for a backoff (0.5 s doubling to
 * 8 s) and is queued again at the front; after --max-retries of them it
 * fails naming the count and the last error. */
nimble_status_t sched_task_retry_later(nimble_scheduler *s, nimble_sched_task_t *t,
                                       const char *why);
/* Tells the worker holding running task t (if connected) to stop it. */
void sched_send_cancel(nimble_scheduler *s, const nimble_sched_task_t *t);
/* Marks a task finished (done/failed/cancelled): saves it, drops its lease,
 * in-flight claim and active mark, frees its worker, publishes. */
nimble_status_t sched_task_finish(nimble_scheduler *s, nimble_sched_task_t *t);

/* client_requests.c / worker_requests.c */
void sched_handle_client(nimble_scheduler *s, const sched_envelope *env, const void *data,
                         size_t size);
void sched_handle_worker(nimble_scheduler *s, const sched_envelope *env, const void *data,
                         size_t size);

/* job_status.c: the JOB_STATUS body of a job (new reference). */
nimble_status_t sched_job_status(nimble_scheduler *s, const char *job, json_t **out_body);
/* A job's state from its targets' states (`cancelled`: the job was). */
const char *sched_job_state_of(size_t n_targets, int n_done, int n_failed, int n_running,
                               int n_cancelled, int cancelled);
/* Records the state of `status` (a JOB_STATUS body) in the job hash and,
 * when it changed, counts the job entering it (nimble_scheduler_jobs_total). */
void sched_note_job_state(nimble_scheduler *s, const json_t *status);
/* Drops worker w from the in-memory registry (its Redis record says
 * connected 0). */
void sched_worker_drop(nimble_scheduler *s, sched_worker *w, const char *why);

/* sched_http.c: the HTTP port (--metrics): /metrics, the dashboard at /,
 * its state at /api/state. It runs in its own thread with its own Redis
 * connection and reads the broker only through s->metrics. */
nimble_status_t sched_http_start(nimble_scheduler *s, const char *address);
void sched_http_stop(struct sched_http *h);

/* security.c */
nimble_status_t sched_load_tokens(nimble_scheduler *s, const char *path);
nimble_status_t sched_check_token(nimble_scheduler *s, const json_t *body);
nimble_status_t sched_setup_curve(nimble_scheduler *s, const char *secret_file,
                                  const char *keys_file);
void sched_handle_zap(nimble_scheduler *s);
/* Reads a Z85 key (40 characters, first non-comment line) from a file. */
nimble_status_t sched_read_z85_key(const char *path, uint8_t out[32]);

/* cache_check.c: *out_ok 1 when the store still has the manifest and every
 * blob it references, and the manifest is then tagged `want_name:tag` (the
 * name and target the new job asked for: a hit compiled under another name
 * must be fetchable under this one). Any failure reads as "not cached":
 * recompiling is always safe. */
void sched_cache_verify(nimble_scheduler *s, const char *name, const char *manifest,
                        const char *want_name, const char *tag, int *out_ok);

/* signing.c: with --signing-key, signs (repo, tag, manifest) and pushes the
 * signature object tagged `<tag>.sig` in `repo` (nimble/signature.h); does
 * nothing without a key. */
nimble_status_t sched_sign(nimble_scheduler *s, const char *repo, const char *tag,
                           const char *manifest);

/* Publishes the manifest `manifest` of repository `from` as `to:tag`: pulls
 * it by digest (its bytes checked), signs (to, tag, manifest) and only then
 * pushes it under the tag (blobs are global in the store, so only the
 * manifest is pushed). A manifest that cannot be signed is not tagged. */
nimble_status_t sched_store_tag(nimble_scheduler *s, const char *from, const char *manifest,
                                const char *to, const char *tag);

/* worker_requests.c: tags the artifact of finished task t under the names
 * of the jobs merged into it (failures are logged). */
void sched_tag_merged_names(nimble_scheduler *s, const nimble_sched_task_t *t);

/* kcache.c: the farm's kernel cache (docs/farm.md, "The farm's kernel
 * cache"). Adds to compile TASK body b (for worker w, task t) what the
 * worker needs: `kernel_cache` false for a verified build's copy (it
 * compiles with no kernel cache at all), else the index entries of t's
 * target it has not been sent (`kcache`, at most NIMBLE_KCACHE_TASK_MAX)
 * and the sequence they reach (`kcache_seq`). Redis errors only log. */
void sched_kcache_fill_task(nimble_scheduler *s, sched_worker *w, const nimble_sched_task_t *t,
                            json_t *b);
/* Records the entries a RESULT reports (`kcache`, [{key, digest}]) in the
 * index of t's target (new keys only; the oldest evicted beyond the cap). */
void sched_kcache_record(nimble_scheduler *s, const nimble_sched_task_t *t, const json_t *entries);
/* READY: the sequences the worker has seen (body's `kcache`), per target. */
void sched_kcache_ready(nimble_scheduler *s, sched_worker *w, const json_t *body);

/* tune_records.c: tuning records (docs/farm.md, "Tuning records"), kept
 * per target kind in Redis. Adds `tune_records` (the newest records of t's
 * target kind, at most NIMBLE_TUNE_MESSAGE_MAX) to compile TASK body b when
 * its options have tune=true; Redis errors only log (the task goes with
 * none). */
void sched_tune_fill_task(nimble_scheduler *s, const nimble_sched_task_t *t, json_t *b);
/* Stores the records a RESULT of task t reports (`tune_records`, texts):
 * each checked, the bad ones (or ones for another target kind) logged and
 * dropped. */
void sched_tune_record_result(nimble_scheduler *s, const nimble_sched_task_t *t, const json_t *texts);
/* Client requests TUNE_RECORDS_LIST and TUNE_RECORDS_IMPORT (body
 * validated, token checked): each answers on env. */
void sched_tune_handle_list(nimble_scheduler *s, const sched_envelope *env, const json_t *body);
void sched_tune_handle_import(nimble_scheduler *s, const sched_envelope *env, const json_t *body);

/* verify.c: verified builds (docs/farm.md, "Verified builds"). */
/* Writes the group task id of copy `tid` ("<group>:v<k>") into group and
 * returns k, or 0 when tid is not a copy. */
int sched_copy_of(const char *tid, char group[NIMBLE_SCHED_ID_MAX + 1]);
/* Creates the copies of group task g (its verify, key, model, ... set) in
 * the queue of its target: "<g>:v1" .. "<g>:vN", pushed to the staging
 * repository nimble-verify/<g>. */
nimble_status_t sched_verify_create_copies(nimble_scheduler *s, const nimble_sched_task_t *g);
/* 1 when worker w may build copy c: no other copy of its group is running
 * on it or was built by it (with CURVE: by its key, under any id). */
int sched_verify_worker_may_build(nimble_scheduler *s, const nimble_sched_task_t *c,
                                  const sched_worker *w);
/* After a copy changed: fails the group when a copy failed or two copies
 * differ (naming both workers and both digests; nothing is tagged), publishes
 * it when all N agree, else records that it runs. */
void sched_verify_settle(nimble_scheduler *s, const char *group);
/* Stops the unfinished copies of group g (sending CANCEL to their workers). */
void sched_verify_stop_copies(nimble_scheduler *s, const nimble_sched_task_t *g);
/* Settles every unfinished group (nimble:groups): at start-up and with
 * reconciliation, for a scheduler that stopped between a copy's end and
 * its group's settling. */
void sched_verify_reconcile(nimble_scheduler *s);
/* The copies of group g that finished with a manifest. */
int sched_verify_count_built(nimble_scheduler *s, const nimble_sched_task_t *g);

#endif
