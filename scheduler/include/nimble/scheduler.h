/* The compile farm's scheduler: a ZeroMQ broker with its state in Redis.
 *
 * Clients (the `nimble` CLI) talk to one ROUTER endpoint (SUBMIT, STATUS,
 * CANCEL), workers to another (READY, HEARTBEAT, PROGRESS, RESULT, FAILURE),
 * and progress is published on a PUB endpoint. A job fans out into one task
 * per target; tasks wait in one queue per target (a Majordomo-style service
 * per target) and go only to workers that advertise that target. Everything
 * a restart must not lose (jobs, tasks, queues, the compile cache, tuning
 * records, the worker registry) lives in Redis; workers hold leases they
 * renew from their work loop, and a task delivered 3 times without
 * finishing fails with the reason. docs/farm.md describes the flows and the
 * Redis keys.
 *
 *   nimble_scheduler_options_t o = {.clients_endpoint = "tcp://127.0.0.1:*", ...};
 *   nimble_scheduler *s;
 *   NIMBLE_RETURN_IF_ERROR(nimble_scheduler_create(&o, &s));
 *   nimble_status_t st = nimble_scheduler_run(s);   // until nimble_scheduler_stop
 *   nimble_scheduler_destroy(s);
 */
#ifndef NIMBLE_SCHEDULER_H
#define NIMBLE_SCHEDULER_H

#include <stddef.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most workers one verified build may ask for (SUBMIT's `verify`). */
#define NIMBLE_SCHED_MAX_VERIFY 16

typedef struct nimble_scheduler nimble_scheduler;

/* Options; every string is borrowed for the duration of create (copied).
 * Zero means the default for numeric fields. */
typedef struct nimble_scheduler_options_t {
  const char *clients_endpoint; /* required, e.g. "tcp://127.0.0.1:*" */
  const char *workers_endpoint; /* required */
  const char *events_endpoint;  /* required (PUB) */
  const char *redis_host;       /* required */
  int redis_port;               /* required */
  const char *store_url;        /* required: "http://host:port" (cache checks) */
  const char *store_token;      /* optional bearer token for the store */
  const char *token_file;       /* optional: client tokens; NULL lets anyone in */
  const char *curve_secret_file; /* optional: Z85 secret key of the scheduler */
  const char *worker_keys_file;  /* with curve_secret_file: allowed worker public keys */
  const char *compiler_version; /* default NIMBLE_VERSION_STRING */
  const char *salt;             /* compile-key salt, default "" */
  long lease_ms;                /* task lease, default 30000 */
  long worker_timeout_ms;       /* a silent worker is dropped after this, default 10000 */
  int max_deliveries;           /* default 3 */
  int max_retries;              /* retryable failures (store or transport) a task may
                                 * have before it fails, default 10; they back off and
                                 * do not count as deliveries */
  int verify;                   /* policy: every compile is built by at least this many
                                 * distinct workers and published only when their
                                 * artifacts are identical; 0 or 1: one build (a job may
                                 * ask for more with SUBMIT's `verify`) */
  int quiet;                    /* no log lines on stderr */
  const char *metrics_address;  /* "HOST:PORT" (port 0: any) for /metrics and the
                                 * dashboard; NULL: no HTTP port */
  const char *signing_key_file; /* optional: Ed25519 secret key (nimble keys generate);
                                 * every (repository, tag, manifest) the farm publishes
                                 * or tags is signed and a `<tag>.sig` signature object
                                 * pushed beside it (docs/farm.md, "Signing") */
  long kcache_cap;              /* the farm kernel cache's entries per target (docs/farm.md,
                                 * "The farm's kernel cache"), oldest evicted first;
                                 * 0: the default, 65536 */
  int no_kcache;                /* 1: no farm kernel cache (TASKs carry no entries,
                                 * RESULTs' entries are not recorded) */
} nimble_scheduler_options_t;

/* Binds the sockets, connects to Redis and reloads queued and running tasks.
 * Caller destroys *out. Errors name the option or endpoint at fault. */
nimble_status_t nimble_scheduler_create(const nimble_scheduler_options_t *opts,
                                        nimble_scheduler **out);

/* The endpoint actually bound (port 0 / '*' resolved): which is "clients",
 * "workers" or "events", or "metrics" ("http://HOST:PORT", NULL without an
 * HTTP port). Borrowed from s; NULL for another name. */
const char *nimble_scheduler_endpoint(const nimble_scheduler *s, const char *which);

/* Serves until nimble_scheduler_stop is called (from a signal handler too). */
nimble_status_t nimble_scheduler_run(nimble_scheduler *s);

/* Async-signal-safe: makes nimble_scheduler_run return soon. */
void nimble_scheduler_stop(nimble_scheduler *s);

void nimble_scheduler_destroy(nimble_scheduler *s);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_SCHEDULER_H */
