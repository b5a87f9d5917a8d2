/* A farm on loopback for the scheduler suites: real redis-server (through
 * tests/support/redis_fixture.sh), real nimble-store (store_fixture.sh),
 * the nimble-scheduler and nimble-worker binaries, and test_compiler as the
 * compiler. Every process is stopped by its pid in farm_stop, which also
 * runs at exit (a failed Check assertion exits the test process). */
#ifndef NIMBLE_FARM_HARNESS_H
#define NIMBLE_FARM_HARNESS_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <sys/types.h>

#include "nimble/message.h"
#include "nimble/store_client.h"

#define FARM_MAX_WORKERS 8

/* A guardian process that runs a shell command once the test process is
 * gone, however it ended (a failed Check assertion or a timeout ends it
 * without atexit handlers): it stops the servers the fixture scripts
 * started, which are not our children. */
typedef struct farm_guard {
  int fd;    /* write end of a pipe the guardian reads; EOF means "clean up" */
  pid_t pid;
} farm_guard;

void farm_guard_start(farm_guard *g, const char *cleanup_cmd);
/* Closes the pipe, so the guardian runs its command now, and reaps it. */
void farm_guard_end(farm_guard *g);

typedef struct farm {
  farm_guard guard;
  char dir[256];
  char redis_dir[300], store_dir[300];
  char redis_host[64];
  int redis_port;
  char store_url[128];
  char store_root[320];
  pid_t sched_pid;
  char sched_log[320];
  char clients_ep[256], workers_ep[256], events_ep[256];
  char sched_args[24][320]; /* extra scheduler arguments */
  int nsched_args;
  pid_t workers[FARM_MAX_WORKERS];
  int nworkers;
  char compile_log[320];
  void *zctx, *client;
  nimble_store_client *store;
  redisContext *redis;
  char store_args[256];     /* the store's extra arguments, kept for a restart */
  pid_t store_pid;          /* a store farm_start_store started (our child), else 0 */
  char worker_store_url[128]; /* when set, workers use it instead of store_url (a proxy) */
  char worker_sched_ep[128];  /* when set, workers use it instead of workers_ep (a proxy) */
  pid_t proxy_pid;
  int proxy_cmd, proxy_reply; /* pipes to and from the proxy */
} farm;

typedef struct farm_config {
  int aof;          /* redis --appendonly yes */
  long lease_ms;    /* default 2000 */
  const char *token; /* client token file content, or NULL: no auth */
  const char *curve_secret; /* scheduler CURVE secret (Z85), with worker_keys */
  const char *worker_keys;  /* allowed worker public keys, one a line */
  const char *store_args;   /* extra nimble-store arguments ("--max-blob-size 64K"), or NULL */
  const char *signing_key;  /* nimble-scheduler --signing-key FILE, or NULL: unsigned */
  const char *sched_store_token; /* the scheduler's store token, when not the farm's own */
  const char *const *sched_extra; /* more scheduler arguments, NULL-terminated (at most 8) */
} farm_config;

/* Starts redis, the store and the scheduler in a fresh temporary dir. */
void farm_start(farm *f, const farm_config *cfg);
/* Stops every process it started (by pid) and removes the dir. */
void farm_stop(farm *f);

/* (Re)starts the scheduler; on a restart it binds the endpoints it had. */
void farm_start_scheduler(farm *f);
/* Sends sig to the scheduler and reaps it; returns its wait status. */
int farm_stop_scheduler(farm *f, int sig);
/* Stops redis (SIGTERM, AOF flushed) and starts it again on the same port. */
void farm_restart_redis(farm *f);

/* SIGKILLs redis (no shutdown, the AOF holds what it acknowledged) and
 * starts it again on the same port with --appendonly yes. */
void farm_crash_redis(farm *f);

/* Sends sig to the store (the fixture's or ours) and waits until it is gone. */
void farm_kill_store(farm *f, int sig);
/* Starts nimble-store again on the same port and root (the blobs, tags and
 * manifests stay; its start-up clears uploads/), as our child. */
void farm_start_store(farm *f);

/* A TCP proxy (a child process) from a loopback port to host:port; returns
 * the port. Workers started afterwards reach the store (or the scheduler)
 * through it when the caller sets worker_store_url (worker_sched_ep) to it.
 * One proxy per farm. */
int farm_proxy_start(farm *f, const char *host, int port);
/* Resets (RST) every connection the proxy has, held ones too; returns how
 * many it relayed. */
int farm_proxy_cut(farm *f);
/* Holds every connection the proxy relays: both ends stay open and nothing
 * passes any more, as when a peer's host vanished; new connections are
 * relayed. Returns how many. */
int farm_proxy_hold(farm *f);

/* Starts a worker; returns its index (a slot freed by a kill is reused). extra: NULL-terminated extra args. */
int farm_start_worker(farm *f, const char *id, const char *targets, const char *const *extra);
/* The same with another worker program (a path under the build dir, e.g.
 * "tests/scheduler/farm_evil_worker") that takes nimble-worker's options. */
int farm_start_worker_exe(farm *f, const char *exe, const char *id, const char *targets,
                          const char *const *extra);
/* Sends sig to worker i and reaps it. */
void farm_kill_worker(farm *f, int i, int sig);
/* 1 while worker i runs. */
int farm_worker_alive(farm *f, int i);

/* Pushes model text to the store's "models" repository; writes its digest. */
void farm_push_model(farm *f, const char *text, char digest[72]);

/* One request/reply with the scheduler (10 s). Takes `body`; *out_body is
 * the caller's. token may be NULL. Returns 0, or -1 on a timeout. */
int farm_request(farm *f, nimble_msg_type_t type, json_t *body, const char *token,
                 nimble_msg_type_t *out_type, json_t **out_body);
/* SUBMIT {model, format onnx, name, targets}; returns the ACCEPTED body. */
json_t *farm_submit(farm *f, const char *model, const char *name, const char *const *targets,
                    const char *token);
/* Prints the tails of the scheduler's and workers' logs to stderr, headed
 * by `why` (farm_wait_job does when its wait times out). */
void farm_print_logs(farm *f, const char *why);
/* Polls STATUS until the job's state is `state` or timeout_ms passes;
 * returns the last JOB_STATUS body (caller's). A wait of a second or more
 * that times out prints the logs (farm_print_logs); a shorter one is a
 * probe of the job's state. */
json_t *farm_wait_job(farm *f, const char *job, const char *state, long timeout_ms,
                      const char *token);
/* Waits until HGET key field equals value (value NULL: any non-empty). */
int farm_wait_redis_field(farm *f, const char *key, const char *field, const char *value,
                          long timeout_ms);
/* HGET as a malloc'd string, NULL when absent. */
char *farm_redis_hget(farm *f, const char *key, const char *field);
/* Lines in the compile log that contain `needle` (NULL: all lines). */
int farm_count_compiles(farm *f, const char *needle);
/* 1 when the scheduler's log contains text. */
int farm_sched_log_contains(farm *f, const char *text);
/* The value of metric line `series` (e.g. 'name{target="x86"}') on the
 * /metrics port worker `id` printed in its log (started with --metrics),
 * read with curl; -1 if the series is absent. */
long long farm_worker_metric(farm *f, const char *id, const char *series);
/* Whether worker `id`'s log (stderr) holds `text`. */
int farm_worker_log_contains(farm *f, const char *id, const char *text);
void farm_sleep_ms(long ms);

#endif
