/* The compile worker daemon: serves the compiler to the scheduler.
 *
 * A worker connects (DEALER) to the scheduler's worker endpoint, says READY
 * with its targets and compiler version, and then, one task at a time:
 * fetches the model blob from the store, runs the compiler in a child
 * process under time and memory limits (so a crashing or hostile model
 * cannot take the worker down), pushes the artifact's parts and its manifest
 * (by digest, untagged: the scheduler signs and tags what it publishes) to
 * the store, and reports the manifest digest. While the child runs the
 * work loop renews the task's lease and forwards the compiler's progress.
 * The compiler command contract (arguments, the parts directory, progress
 * lines) is in docs/farm.md.
 *
 *   nimble_worker_options_t o = {.scheduler_endpoint = "tcp://127.0.0.1:5556",
 *                                .store_url = "http://127.0.0.1:5000",
 *                                .targets = "x86,aarch64"};
 *   nimble_worker *w;
 *   NIMBLE_RETURN_IF_ERROR(nimble_worker_create(&o, &w));
 *   nimble_status_t st = nimble_worker_run(w);   // until nimble_worker_stop
 *   nimble_worker_destroy(w);
 */
#ifndef NIMBLE_WORKER_H
#define NIMBLE_WORKER_H

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_worker nimble_worker;

/* Strings are borrowed for the duration of create (copied). Zero numeric
 * fields mean the default. */
typedef struct nimble_worker_options_t {
  const char *scheduler_endpoint; /* required: the scheduler's --workers endpoint */
  const char *store_url;          /* required */
  const char *store_token;        /* bearer token for pushes, or NULL */
  const char *targets;            /* required: a target list, e.g. "x86,cuda:arch=sm_90" */
  const char *worker_id;          /* default "<hostname>-<pid>" */
  const char *compiler_path;      /* default: "nimble" next to the running binary */
  const char *compiler_version;   /* default NIMBLE_VERSION_STRING */
  const char *salt;               /* compile-key salt; must match the scheduler's */
  const char *model_repo;         /* repository holding model blobs, default "models" */
  const char *work_dir;           /* scratch space, default $TMPDIR or /tmp */
  const char *curve_secret_file;  /* the worker's Z85 secret key: use CURVE */
  const char *scheduler_key_file; /* the scheduler's Z85 public key (with CURVE) */
  long heartbeat_ms;              /* default 1000 */
  long timeout_s;                 /* wall-clock limit of one compile, default 600 */
  long cpu_limit_s;               /* RLIMIT_CPU of the compiler, default 600 */
  long mem_limit_mb;              /* RLIMIT_AS of the compiler, default 8192; -1: none */
  int quiet;
  const char *metrics_address;    /* "HOST:PORT" (port 0: any) for GET /metrics; NULL: none */
  long compile_jobs;              /* threads of one compile (the compiler's --jobs); 0: its default */
  /* A test hook: called with the parts directory after the compiler
   * succeeded and before anything is pushed. nimble-worker never sets it;
   * tests/scheduler/evil_worker.c does, to be a worker that tampers with
   * what it built (docs/farm.md, "Verified builds"). */
  void (*parts_hook)(const char *parts_dir, void *user);
  void *parts_hook_user;
  /* The kernel cache (docs/farm.md, "The farm's kernel cache"): the folder
   * the compiler keeps kernels in (--kernel-cache; default the compiler's
   * own: $NIMBLE_KERNEL_CACHE, else $XDG_CACHE_HOME/nimble/kernels, else
   * ~/.cache/nimble/kernels, else WORK_DIR/nimble-kernels), filled before
   * each compile with the farm's entries the TASK carries, and the kernels
   * a compile built shared back as blobs of `kcache_repo` (default
   * "nimble-kcache"). no_kcache: 1 keeps the folder local (nothing fetched
   * or shared). */
  const char *kcache_dir;
  const char *kcache_repo;
  int no_kcache;
} nimble_worker_options_t;

/* Checks the options and connects. Caller destroys *out. */
nimble_status_t nimble_worker_create(const nimble_worker_options_t *opts, nimble_worker **out);

/* "http://HOST:PORT" of the /metrics port, NULL without one. Borrowed. */
const char *nimble_worker_metrics_url(const nimble_worker *w);

/* Serves tasks until nimble_worker_stop. */
nimble_status_t nimble_worker_run(nimble_worker *w);

/* Async-signal-safe. */
void nimble_worker_stop(nimble_worker *w);

/* Kills a compile still running, then frees. */
void nimble_worker_destroy(nimble_worker *w);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_WORKER_H */
