/* The worker's loop: one DEALER socket to the scheduler, one compile at a
 * time. Leases are renewed from this loop while the compiler runs (a
 * heartbeat naming the task), so a lease proves the compile progresses, not
 * only that the socket is up. */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "artifact_push.h"
#include "compile_child.h"
#include "nimble/compile_key.h"
#include "nimble/kernel_cache.h"
#include "nimble/manifest.h"
#include "nimble/message.h"
#include "nimble/target.h"
#include "nimble/tune_record.h"
#include "nimble/worker.h"
#include "worker_metrics.h"

struct nimble_worker {
  char id[129];
  char targets_json[4096]; /* canonical specs, as a JSON array */
  char can_run_json[4096]; /* the targets whose code runs on this CPU, "[]" if none */
  char compiler[PATH_MAX];
  char compiler_version[257];
  char salt[256];
  char model_repo[256];
  char work_dir[PATH_MAX - 64];
  long heartbeat_ms;
  long compile_jobs; /* --jobs for the compiler; 0: not passed */
  void (*parts_hook)(const char *parts_dir, void *user);
  void *parts_hook_user;
  compile_limits limits;
  int quiet;
  void *zctx, *sock;
  nimble_store_client *store;
  volatile sig_atomic_t stopping;
  int need_ready;
  worker_metrics *metrics;
  char metrics_url[300];
  /* The task in hand; task[0] == '\0' when idle. */
  char task[129];
  char task_kind[16]; /* "compile" (TASK) or "profile" (PROFILE_TASK) */
  char profiled[NIMBLE_DIGEST_STRING_LEN + 1]; /* a profile task's manifest, once fetched */
  int64_t child_started_ms;                    /* monotonic; 0 before the child starts */
  double child_seconds;                        /* the child's run, set when it exits */
  json_t *task_body;
  char task_dir[PATH_MAX];
  compile_child child;
  int64_t last_beat_ms;
  /* The farm's kernel cache (docs/farm.md): the local folder, its handle
   * (NULL when it cannot be opened: compiles go on without sharing), and
   * per target the index sequence the scheduler has sent us up to. */
  char kcache_dir[PATH_MAX - 64];
  char kcache_repo[256];
  int kcache_farm; /* 1: fetch the TASK's entries and share new kernels */
  nimble_kernel_cache_t *kcache;
  char target_specs[16][NIMBLE_TARGET_SPEC_MAX + 1];
  size_t ntargets;
  int64_t kcache_seq[16];
  /* This task's: whether it compiles with the kernel cache, the entries
   * fetched and refused, the kernels it built (to share), and code
   * generation's last counts. */
  int task_kcache;
  int task_share; /* the scheduler keeps the farm's index (the TASK had kcache_seq) */
  long kc_fetched, kc_present, kc_bad;
  char (*kc_new)[65];
  size_t kc_nnew;
  int has_kernels;
  long k_done, k_total, k_cached;
  /* The last task's RESULT or PROFILE_RESULT, as sent, until the
   * scheduler's ACK (resend_outcome); NULL when none is pending. */
  char *outcome;
  size_t outcome_len;
  char outcome_task[129];
  nimble_msg_type_t outcome_type;
  int outcome_sends;      /* sent again so many times */
  int64_t outcome_due;    /* heartbeats from now until the next time: 1, then 2^sends */
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wlog(nimble_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wlog(nimble_worker *w, const char *fmt, ...) {
  if (w->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nimble-worker %s: ", w->id);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* The frame of a message, or NULL (said in the log) when it cannot be
 * encoded; the caller frees it. */
static char *encode_msg(nimble_worker *w, nimble_msg_type_t type, json_t *body /* stolen */, size_t *n) {
  char *out = NULL;
  nimble_status_t st = body ? nimble_message_encode(type, body, &out, n) : NIMBLE_OOM();
  json_decref(body);
  if (st) {
    wlog(w, "cannot encode %s: %s", nimble_message_type_name(type), nimble_status_message(st));
    nimble_status_free(st);
    return NULL;
  }
  return out;
}

static void send_frame(nimble_worker *w, const char *frame, size_t n) {
  if (zmq_send(w->sock, frame, n, 0) < 0 && errno != EINTR)
    wlog(w, "send failed: %s", zmq_strerror(errno));
}

static void send_msg(nimble_worker *w, nimble_msg_type_t type, json_t *body /* stolen */) {
  size_t n;
  char *out = encode_msg(w, type, body, &n);
  if (!out) return;
  send_frame(w, out, n);
  free(out);
}

/* A task's outcome is sent again until the scheduler ACKs it: once a
 * heartbeat later, then after 2, 4, ... heartbeats, OUTCOME_MAX_SENDS
 * times in all (about 17 minutes at the default heartbeat; a scheduler
 * older than ACK never answers), and at once when a scheduler that
 * restarted says it does not know us. A message written into a connection
 * that then died is lost: without this, a task whose RESULT was lost so
 * waits out its lease and compiles again. The scheduler takes a RESULT
 * twice as a late one (the artifact is content-addressed). FAILUREs are
 * not sent again: a copy could land on the task's next delivery, and a
 * lost one costs the lease, then a retry. */
#define OUTCOME_MAX_SENDS 10

static void send_outcome(nimble_worker *w, nimble_msg_type_t type, json_t *body /* stolen */) {
  size_t n;
  char *out = encode_msg(w, type, body, &n);
  if (!out) return;
  send_frame(w, out, n);
  if (w->outcome) {
    wlog(w, "task %s: its outcome was not acknowledged; the scheduler's lease decides", w->outcome_task);
    worker_metrics_outcome(w->metrics, 1);
  }
  free(w->outcome);
  w->outcome = out;
  w->outcome_len = n;
  snprintf(w->outcome_task, sizeof w->outcome_task, "%s", w->task);
  w->outcome_type = type;
  w->outcome_sends = 0;
  w->outcome_due = 1;
}

static void drop_outcome(nimble_worker *w) {
  free(w->outcome);
  w->outcome = NULL;
  w->outcome_task[0] = '\0';
}

/* Called once a heartbeat (now: 1 to send it at once). */
static void resend_outcome(nimble_worker *w, int now) {
  if (!w->outcome || (!now && --w->outcome_due > 0)) return;
  if (w->outcome_sends == OUTCOME_MAX_SENDS) {
    wlog(w, "task %s: no ACK for its outcome after %d copies; the scheduler's lease decides",
         w->outcome_task, OUTCOME_MAX_SENDS);
    worker_metrics_outcome(w->metrics, 1);
    drop_outcome(w);
    return;
  }
  w->outcome_sends++;
  worker_metrics_outcome(w->metrics, 0);
  if (!now) w->outcome_due = (int64_t)1 << w->outcome_sends;
  send_frame(w, w->outcome, w->outcome_len);
}

static void send_ready(nimble_worker *w) {
  json_t *targets = json_loads(w->targets_json, 0, NULL);
  json_t *b = json_pack("{s:s,s:o,s:s,s:i}", "worker", w->id, "targets", targets,
                        "compiler_version", w->compiler_version, "slots", 1);
  json_t *can_run = json_loads(w->can_run_json, 0, NULL);
  if (b && json_array_size(can_run)) json_object_set(b, "can_run", can_run);
  json_decref(can_run);
  /* The farm kernel cache entries we were sent, per target: a scheduler
   * that restarted goes on from there. */
  if (b && w->kcache_farm) {
    json_t *seqs = json_object();
    for (size_t i = 0; seqs && i < w->ntargets; i++)
      json_object_set_new(seqs, w->target_specs[i], json_integer(w->kcache_seq[i]));
    if (seqs) json_object_set_new(b, "kcache", seqs);
  }
  send_msg(w, NIMBLE_MSG_READY, b);
}

static void send_heartbeat(nimble_worker *w) {
  json_t *b = json_pack("{s:s}", "worker", w->id);
  if (b && w->task[0]) json_object_set_new(b, "task", json_string(w->task));
  send_msg(w, NIMBLE_MSG_HEARTBEAT, b);
  w->last_beat_ms = now_ms();
}

static void send_failure(nimble_worker *w, nimble_status_t st, int retryable) {
  const char *msg = nimble_status_message(st);
  /* The wire takes at most 64 KiB of text. */
  char *text = strndup(msg && *msg ? msg : "failed", 60 * 1024);
  wlog(w, "task %s failed: %s", w->task, text ? text : "?");
  send_msg(w, NIMBLE_MSG_FAILURE,
           json_pack("{s:s,s:s,s:s,s:b}", "task", w->task, "error", text ? text : "failed", "code",
                     nimble_status_code_name(nimble_status_code(st)), "retryable", retryable));
  free(text);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* Removes the task's scratch directory (model, stderr, parts). */
static void remove_tree(const char *dir) { nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

static double child_seconds(const nimble_worker *w) {
  return w->child_started_ms ? (double)(now_ms() - w->child_started_ms) / 1000.0 : -1.0;
}

static void end_task(nimble_worker *w) {
  compile_child_kill(&w->child);
  w->child_started_ms = 0;
  w->profiled[0] = '\0';
  worker_metrics_set_busy(w->metrics, 0);
  if (w->task_dir[0]) {
    remove_tree(w->task_dir);
    w->task_dir[0] = '\0';
  }
  json_decref(w->task_body);
  w->task_body = NULL;
  w->task[0] = '\0';
  free(w->kc_new);
  w->kc_new = NULL;
  w->kc_nnew = 0;
  w->task_kcache = w->task_share = 0;
  w->kc_fetched = w->kc_present = w->kc_bad = 0;
  w->has_kernels = 0;
  w->k_done = w->k_total = w->k_cached = 0;
  if (w->need_ready) {
    send_ready(w);
    w->need_ready = 0;
  }
}

/* Fetching a large model or pushing large parts is work too: the lease is
 * renewed from the transfer's progress, so a slow transfer does not look
 * like a dead worker. */
static void on_store_event(void *user, const nimble_store_event_t *event) {
  nimble_worker *w = user;
  if (w->task[0] && now_ms() - w->last_beat_ms >= w->heartbeat_ms) send_heartbeat(w);
}

static const char *body_str(const json_t *b, const char *k) {
  return json_string_value(json_object_get(b, k));
}

static void on_progress(void *user, const char *phase, int percent) {
  nimble_worker *w = user;
  json_t *b = json_pack("{s:s,s:s,s:i}", "task", w->task, "phase", phase, "percent", percent);
  /* Code generation's counts, and the farm entries this task fetched. */
  if (b && (w->has_kernels || w->kc_fetched))
    json_object_set_new(b, "kernels",
                        json_pack("{s:I,s:I,s:I,s:I}", "done", (json_int_t)w->k_done, "total",
                                  (json_int_t)w->k_total, "cached", (json_int_t)w->k_cached, "fetched",
                                  (json_int_t)w->kc_fetched));
  send_msg(w, NIMBLE_MSG_PROGRESS, b);
}

/* A line of the compiler's progress fd: a phase (with code generation's
 * kernel counts), or a kernel it built and stored (shared after the push). */
static void on_child_line(void *user, const compile_progress_line *l) {
  nimble_worker *w = user;
  if (l->key[0]) {
    if (!w->task_kcache || !w->kcache_farm || w->kc_nnew >= NIMBLE_KCACHE_RESULT_MAX) return;
    for (size_t i = 0; i < w->kc_nnew; i++)
      if (!strcmp(w->kc_new[i], l->key)) return;
    char(*n)[65] = realloc(w->kc_new, (w->kc_nnew + 1) * sizeof *n);
    if (!n) return;
    w->kc_new = n;
    memcpy(w->kc_new[w->kc_nnew++], l->key, 65);
    return;
  }
  if (l->has_kernels) {
    w->has_kernels = 1;
    w->k_done = l->done;
    w->k_total = l->total;
    w->k_cached = l->cached;
  }
  on_progress(w, l->phase, l->percent);
}

/* Before a compile: the farm's kernel cache entries the TASK carries
 * (`kcache`, those this worker has not been sent) into the local folder,
 * each pulled by digest from the store (the store client checks every byte
 * against it) and put under its key. An entry already here is skipped; one
 * that cannot be fetched or fails its digest is logged and left out, never
 * used: the compile builds that kernel itself. A store that is away ends
 * the fetching (the compile goes on). */
static void kcache_fetch(nimble_worker *w) {
  const json_t *b = w->task_body;
  const json_t *entries = json_object_get(b, "kcache");
  size_t i;
  const json_t *e;
  json_array_foreach((json_t *)entries, i, e) {
    const char *key = body_str(e, "key"), *ds = body_str(e, "digest");
    uint8_t *data = NULL;
    size_t size = 0;
    bool found = false;
    nimble_status_t st = w->kcache->get(w->kcache, key, &data, &size, &found, NULL);
    free(data);
    nimble_status_free(st);
    if (!st && found) {
      w->kc_present++;
      continue;
    }
    nimble_digest_t d;
    st = nimble_digest_parse(ds, &d);
    if (!st) st = nimble_store_pull_blob(w->store, w->kcache_repo, &d, &data, &size);
    if (!st) st = w->kcache->put(w->kcache, key, data, size);
    free(data);
    if (st) {
      w->kc_bad++;
      wlog(w, "warning: task %s: farm kernel cache entry %.16s… (%s) not used: %s", w->task, key, ds,
           nimble_status_message(st));
      int away = nimble_status_code(st) == NIMBLE_UNAVAILABLE;
      nimble_status_free(st);
      if (away) break;
      continue;
    }
    w->kc_fetched++;
  }
  const json_t *seq = json_object_get(b, "kcache_seq");
  for (size_t t = 0; seq && t < w->ntargets; t++)
    if (!strcmp(w->target_specs[t], body_str(b, "target"))) w->kcache_seq[t] = json_integer_value(seq);
  worker_metrics_kcache(w->metrics, body_str(b, "target"), 0, 0, w->kc_fetched, w->kc_bad, 0);
  if (json_array_size(entries))
    wlog(w, "task %s: farm kernel cache: %ld entr%s fetched, %ld already here, %ld refused", w->task,
         w->kc_fetched, w->kc_fetched == 1 ? "y" : "ies", w->kc_present, w->kc_bad);
}

/* After the artifact is pushed: each kernel the compile built, from the
 * local folder (its check passed) to the store as a blob of the kcache
 * repository; returns the RESULT's `kcache` entries [{key, digest}] (NULL
 * when none). Sharing is advisory: an entry that cannot be read or pushed
 * is logged and left out. */
static json_t *kcache_share(nimble_worker *w) {
  if (!w->task_share || !w->kcache_farm || !w->kcache || !w->kc_nnew) return NULL;
  json_t *out = json_array();
  for (size_t i = 0; out && i < w->kc_nnew; i++) {
    uint8_t *data = NULL;
    size_t size = 0;
    bool found = false;
    nimble_status_t st = w->kcache->get(w->kcache, w->kc_new[i], &data, &size, &found, NULL);
    if (!st && !found)
      st = nimble_status_make(NIMBLE_NOT_FOUND, "not in the kernel cache folder %s", w->kcache_dir);
    nimble_digest_t d;
    if (!st) st = nimble_store_push_blob(w->store, w->kcache_repo, data, size, &d);
    free(data);
    if (st) {
      wlog(w, "warning: task %s: kernel %.16s… not shared: %s", w->task, w->kc_new[i],
           nimble_status_message(st));
      int away = nimble_status_code(st) == NIMBLE_UNAVAILABLE;
      nimble_status_free(st);
      if (away) break;
      continue;
    }
    char ds[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(&d, ds);
    json_array_append_new(out, json_pack("{s:s,s:s}", "key", w->kc_new[i], "digest", ds));
  }
  if (json_array_size(out) == 0) {
    json_decref(out);
    return NULL;
  }
  return out;
}


/* A profile task: fetches the artifact (the manifest the job names, else
 * the target's tag) into DIR/parts, one file per layer, and runs
 * `nimble profile DIR/parts --input NAME=DIMS... --runs N --report
 * DIR/report.json` in the child, under the compile limits. */
static nimble_status_t start_profile(nimble_worker *w) {
  const json_t *b = w->task_body;
  const char *name = body_str(b, "name"), *spec = body_str(b, "target");
  nimble_target_t target;
  NIMBLE_RETURN_IF_ERROR(nimble_target_parse(spec, &target));
  char tag[NIMBLE_TARGET_TAG_MAX + 1];
  nimble_target_tag(&target, tag);
  const char *ref = body_str(b, "manifest") ? body_str(b, "manifest") : tag;
  snprintf(w->task_dir, sizeof w->task_dir, "%s/nimble-task.XXXXXX", w->work_dir);
  if (!mkdtemp(w->task_dir)) {
    nimble_status_t st = nimble_status_make(NIMBLE_IO_ERROR, "work dir '%s': %s", w->work_dir,
                                            strerror(errno));
    w->task_dir[0] = '\0';
    return st;
  }
  char parts[PATH_MAX + 32], errpath[PATH_MAX + 32], report[PATH_MAX + 32];
  snprintf(parts, sizeof parts, "%s/parts", w->task_dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", w->task_dir);
  snprintf(report, sizeof report, "%s/report.json", w->task_dir);
  if (mkdir(parts, 0700) != 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "'%s': %s", parts, strerror(errno));
  on_progress(w, "fetch", 0);
  uint8_t *bytes = NULL;
  size_t size = 0;
  nimble_digest_t digest;
  NIMBLE_RETURN_IF_ERROR_CTX(
      nimble_store_pull_manifest(w->store, name, ref, &bytes, &size, NULL, &digest),
      "fetching artifact %s%s%s", name, strchr(ref, ':') ? "@" : ":", ref);
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  nimble_status_t st = nimble_manifest_decode(bytes, size, &m);
  free(bytes);
  if (!st) st = nimble_manifest_check_target(&m, spec);
  for (size_t i = 0; !st && i < m.layer_count; i++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/layer-%02zu", parts, i);
    st = nimble_store_pull_blob_to_file(w->store, name, &m.layers[i].digest, path);
  }
  nimble_manifest_deinit(&m);
  if (st) return nimble_status_annotate(st, "artifact %s:%s", name, ref);
  nimble_digest_format(&digest, w->profiled);

  const json_t *inputs = json_object_get(b, "inputs");
  size_t n = json_object_size(inputs);
  char **argv = calloc(12 + 2 * n, sizeof *argv), **owned = calloc(n + 1, sizeof *owned);
  char runs[32], fd_arg[16];
  snprintf(runs, sizeof runs, "%lld", (long long)json_integer_value(json_object_get(b, "runs")));
  snprintf(fd_arg, sizeof fd_arg, "%d", NIMBLE_WORKER_PROGRESS_FD);
  size_t a = 0, k = 0;
  if (argv && owned) {
    argv[a++] = w->compiler;
    argv[a++] = "profile";
    argv[a++] = parts;
    argv[a++] = "--runs";
    argv[a++] = runs;
    argv[a++] = "--report";
    argv[a++] = report;
    argv[a++] = "--progress-fd";
    argv[a++] = fd_arg;
    const char *input;
    const json_t *dims;
    json_object_foreach((json_t *)inputs, input, dims) {
      /* NAME=4x784 ("NAME=" for a scalar), as the CLI reads it. */
      size_t cap = strlen(input) + 2 + 12 * json_array_size(dims);
      char *arg = malloc(cap);
      if (!arg) break;
      size_t off = (size_t)snprintf(arg, cap, "%s=", input);
      for (size_t d = 0; d < json_array_size(dims); d++)
        off += (size_t)snprintf(arg + off, cap - off, "%s%lld", d ? "x" : "",
                                (long long)json_integer_value(json_array_get(dims, d)));
      owned[k++] = arg;
      argv[a++] = "--input";
      argv[a++] = arg;
    }
    argv[a] = NULL;
  }
  st = argv && owned && k == n ? compile_child_start(&w->child, argv, errpath, &w->limits,
                                                    "the profiler (nimble profile)")
                               : NIMBLE_OOM();
  for (size_t i = 0; i < k; i++) free(owned[i]);
  free(owned);
  free(argv);
  if (!st) {
    w->child_started_ms = now_ms();
    wlog(w, "profiling task %s: %s on %s", w->task, w->profiled, spec);
  }
  return st;
}

/* The profiler exited 0: its report goes back as PROFILE_RESULT (checked
 * against the protocol first; a report that fails the check fails the
 * task with the reason). */
static void finish_profile(nimble_worker *w) {
  const json_t *b = w->task_body;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/report.json", w->task_dir);
  json_error_t err;
  json_t *report = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  nimble_status_t st =
      report ? nimble_ok()
             : nimble_status_make(NIMBLE_INTERNAL, "the profiler's report '%s': %s", path, err.text);
  json_t *body = NULL;
  if (!st) {
    body = json_pack("{s:s,s:s,s:O}", "task", w->task, "manifest", w->profiled, "report", report);
    st = body ? nimble_message_validate_body(NIMBLE_MSG_PROFILE_RESULT, body)
              : NIMBLE_OOM();
  }
  json_decref(report);
  worker_metrics_task_finished(w->metrics, "profile", body_str(b, "target"), st == NULL,
                               w->child_seconds);
  if (st) {
    send_failure(w, st, 0);
    nimble_status_free(st);
    json_decref(body);
  } else {
    wlog(w, "task %s profiled: median %lld ns over %lld runs", w->task,
         (long long)json_integer_value(json_object_get(json_object_get(body, "report"), "median_ns")),
         (long long)json_integer_value(json_object_get(json_object_get(body, "report"), "runs")));
    send_outcome(w, NIMBLE_MSG_PROFILE_RESULT, body);
  }
  end_task(w);
}

/* Tuning (docs/farm.md, "Tuning records"): a compile whose options have
 * tune=true gets the TASK's records as DIR/tune-in.json (written even when
 * there are none) and reports what it measured in DIR/tune-out.json. A
 * record the TASK carries that does not parse is left out (logged); the
 * compile then tunes that kernel itself. */
static nimble_status_t write_tune_in(nimble_worker *w, const char *path) {
  const json_t *texts = json_object_get(w->task_body, "tune_records");
  size_t n = json_array_size(texts), good = 0;
  nimble_tune_record_t *r = calloc(n ? n : 1, sizeof *r);
  if (!r) return NIMBLE_OOM_IN(path);
  for (size_t i = 0; i < n; i++) {
    char where[48];
    snprintf(where, sizeof where, "tune_records[%zu]", i);
    nimble_status_t st = nimble_tune_record_from_text(json_string_value(json_array_get(texts, i)), where, &r[good]);
    if (st) {
      wlog(w, "warning: task %s: a tuning record left out: %s", w->task, nimble_status_message(st));
      nimble_status_free(st);
      continue;
    }
    good++;
  }
  nimble_status_t st = nimble_tune_records_write_file(path, r, good);
  free(r);
  if (!st) wlog(w, "task %s tunes, with %zu tuning record%s from the farm", w->task, good, good == 1 ? "" : "s");
  return st;
}

/* The records the compile wrote to DIR/tune-out.json, as a RESULT's
 * `tune_records` (record texts); NULL when there are none. A missing file
 * means none; a malformed one is logged and sends none: the artifact is
 * good either way. */
static json_t *read_tune_out(nimble_worker *w) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/tune-out.json", w->task_dir);
  if (access(path, F_OK) != 0) return NULL;
  nimble_tune_record_t *r = NULL;
  size_t n = 0;
  nimble_status_t st = nimble_tune_records_read_file(path, &r, &n);
  if (st) {
    wlog(w, "warning: task %s: the compile's tuning records are not sent: %s", w->task,
         nimble_status_message(st));
    nimble_status_free(st);
    return NULL;
  }
  if (n > NIMBLE_TUNE_MESSAGE_MAX) {
    wlog(w, "warning: task %s: the compile measured %zu tuning records; the first %d are sent", w->task, n,
         NIMBLE_TUNE_MESSAGE_MAX);
    n = NIMBLE_TUNE_MESSAGE_MAX;
  }
  json_t *out = nimble_tune_records_to_texts(r, n);
  free(r);
  if (!out) wlog(w, "warning: task %s: the compile's tuning records are not sent (out of memory)", w->task);
  return out;
}

/* Fetches the model and starts the compiler. */
static nimble_status_t start_task(nimble_worker *w) {
  if (!strcmp(w->task_kind, "profile")) return start_profile(w);
  const json_t *b = w->task_body;
  nimble_digest_t model;
  NIMBLE_RETURN_IF_ERROR(nimble_digest_parse(body_str(b, "model"), &model));
  snprintf(w->task_dir, sizeof w->task_dir, "%s/nimble-task.XXXXXX", w->work_dir);
  if (!mkdtemp(w->task_dir)) {
    nimble_status_t st = nimble_status_make(NIMBLE_IO_ERROR, "work dir '%s': %s", w->work_dir,
                                            strerror(errno));
    w->task_dir[0] = '\0';
    return st;
  }
  char model_path[PATH_MAX + 32], parts[PATH_MAX + 32], errpath[PATH_MAX + 32];
  snprintf(model_path, sizeof model_path, "%s/model.%s", w->task_dir, body_str(b, "format"));
  snprintf(parts, sizeof parts, "%s/parts", w->task_dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", w->task_dir);
  if (mkdir(parts, 0700) != 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "'%s': %s", parts, strerror(errno));
  on_progress(w, "fetch", 0);
  NIMBLE_RETURN_IF_ERROR_CTX(
      nimble_store_pull_blob_to_file(w->store, w->model_repo, &model, model_path),
      "fetching model %s from repository '%s'", body_str(b, "model"), w->model_repo);
  /* A verified build's copy (kernel_cache false) compiles with no kernel
   * cache at all, so that it is an independent build. */
  w->task_kcache = !json_is_false(json_object_get(b, "kernel_cache"));
  /* A scheduler without the farm cache (--no-kcache) sends no kcache_seq:
   * then nothing is uploaded that it would not record. */
  w->task_share = w->task_kcache && json_object_get(b, "kcache_seq") != NULL;
  if (w->task_kcache && w->kcache_farm && w->kcache) {
    kcache_fetch(w);
    if (w->kc_fetched) on_progress(w, "fetch", 100);
  }

  char target_arg[300], fd_arg[16], format_arg[32], jobs_arg[24];
  char tune_in[PATH_MAX + 32], tune_out[PATH_MAX + 32];
  bool tunes = nimble_tune_wanted(json_object_get(b, "options"));
  if (tunes) {
    snprintf(tune_in, sizeof tune_in, "%s/tune-in.json", w->task_dir);
    snprintf(tune_out, sizeof tune_out, "%s/tune-out.json", w->task_dir);
    NIMBLE_RETURN_IF_ERROR_CTX(write_tune_in(w, tune_in), "task %s: the tuning records", w->task);
  }
  snprintf(target_arg, sizeof target_arg, "--target=%s", body_str(b, "target"));
  snprintf(format_arg, sizeof format_arg, "--format=%s", body_str(b, "format"));
  snprintf(fd_arg, sizeof fd_arg, "%d", NIMBLE_WORKER_PROGRESS_FD);
  /* Options go as --option KEY=VALUE, strings bare, integers in decimal,
   * booleans as true/false. */
  const json_t *opts = json_object_get(b, "options");
  size_t nopts = json_object_size(opts);
  char **argv = calloc(18 + 2 * nopts, sizeof *argv);
  char **owned = calloc(nopts + 1, sizeof *owned);
  if (!argv || !owned) {
    free(argv);
    free(owned);
    return NIMBLE_OOM();
  }
  size_t a = 0, k = 0;
  argv[a++] = w->compiler;
  argv[a++] = "compile";
  argv[a++] = model_path;
  argv[a++] = target_arg;
  argv[a++] = format_arg;
  argv[a++] = "--emit-parts";
  argv[a++] = parts;
  argv[a++] = "--progress-fd";
  argv[a++] = fd_arg;
  if (w->compile_jobs > 0) {
    snprintf(jobs_arg, sizeof jobs_arg, "%ld", w->compile_jobs);
    argv[a++] = "--jobs";
    argv[a++] = jobs_arg;
  }
  if (w->task_kcache) {
    argv[a++] = "--kernel-cache";
    argv[a++] = w->kcache_dir;
  } else {
    argv[a++] = "--no-kernel-cache";
  }
  /* Only with tune=true: a compiler without tuning refuses the flags. */
  if (tunes) {
    argv[a++] = "--tune-records";
    argv[a++] = tune_in;
    argv[a++] = "--tune-records-out";
    argv[a++] = tune_out;
  }
  const char *key;
  const json_t *val;
  json_object_foreach((json_t *)opts, key, val) {
    char *s = NULL;
    if (json_is_string(val)) {
      if (asprintf(&s, "%s=%s", key, json_string_value(val)) < 0) s = NULL;
    } else if (json_is_integer(val)) {
      if (asprintf(&s, "%s=%lld", key, (long long)json_integer_value(val)) < 0) s = NULL;
    } else {
      if (asprintf(&s, "%s=%s", key, json_is_true(val) ? "true" : "false") < 0) s = NULL;
    }
    if (!s) continue;
    owned[k++] = s;
    argv[a++] = "--option";
    argv[a++] = s;
  }
  argv[a] = NULL;
  nimble_status_t st = compile_child_start(&w->child, argv, errpath, &w->limits, NULL);
  for (size_t i = 0; i < k; i++) free(owned[i]);
  free(owned);
  free(argv);
  if (!st) {
    w->child_started_ms = now_ms();
    wlog(w, "compiling task %s for %s", w->task, body_str(b, "target"));
  }
  return st;
}

/* The compiler exited 0: push the parts and report. */
static void finish_task(nimble_worker *w) {
  const json_t *b = w->task_body;
  nimble_digest_t model, manifest, key;
  nimble_status_t st = nimble_digest_parse(body_str(b, "model"), &model);
  nimble_target_t target;
  if (!st) st = nimble_target_parse(body_str(b, "target"), &target);
  nimble_compile_key_input_t in = {.model = model,
                                   .target = body_str(b, "target"),
                                   .compiler_version = w->compiler_version,
                                   .options = json_object_get(b, "options"),
                                   .salt = w->salt};
  if (!st) st = nimble_compile_key_compute(&in, &key);
  on_progress(w, "upload", 0);
  if (!st) {
    char parts[PATH_MAX + 32];
    snprintf(parts, sizeof parts, "%s/parts", w->task_dir);
    artifact_expect ex = {.target = body_str(b, "target"),
                          .model = &model,
                          .compiler_version = w->compiler_version};
    if (w->parts_hook) w->parts_hook(parts, w->parts_hook_user);
    /* By digest, untagged: the scheduler publishes (signs, then tags). */
    st = artifact_push_parts(w->store, parts, body_str(b, "name"), NULL, &ex, &manifest);
  }
  worker_metrics_task_finished(w->metrics, "compile", body_str(b, "target"), st == NULL,
                               w->child_seconds);
  if (st) {
    int retry = nimble_status_code(st) == NIMBLE_UNAVAILABLE;
    send_failure(w, st, retry);
    nimble_status_free(st);
  } else {
    char md[NIMBLE_DIGEST_STRING_LEN + 1], kd[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(&manifest, md);
    nimble_digest_format(&key, kd);
    json_t *shared = kcache_share(w);
    if (w->has_kernels)
      worker_metrics_kcache(w->metrics, body_str(b, "target"), w->k_cached, w->k_total - w->k_cached, 0, 0,
                            (long)json_array_size(shared));
    if (w->has_kernels)
      wlog(w, "task %s done: %s; kernels: %ld, %ld from the kernel cache (%ld farm entries fetched), "
              "%zu new shared with the farm",
           w->task, md, w->k_total, w->k_cached, w->kc_fetched, json_array_size(shared));
    else
      wlog(w, "task %s done: %s", w->task, md);
    json_t *res = json_pack("{s:s,s:s,s:s}", "task", w->task, "manifest", md, "key", kd);
    if (res && shared) json_object_set(res, "kcache", shared);
    json_decref(shared);
    json_t *tuned = nimble_tune_wanted(json_object_get(b, "options")) ? read_tune_out(w) : NULL;
    if (tuned) wlog(w, "task %s: %zu tuning record%s measured, sent to the farm", w->task, json_array_size(tuned),
                    json_array_size(tuned) == 1 ? "" : "s");
    if (res && tuned) json_object_set(res, "tune_records", tuned);
    json_decref(tuned);
    send_outcome(w, NIMBLE_MSG_RESULT, res);
  }
  end_task(w);
}

static void handle_message(nimble_worker *w, const void *data, size_t size) {
  nimble_msg_type_t type;
  json_t *body;
  nimble_status_t st = nimble_message_decode(data, size, &type, &body);
  if (st) {
    wlog(w, "bad message from the scheduler: %s", nimble_status_message(st));
    nimble_status_free(st);
    return;
  }
  if (type == NIMBLE_MSG_TASK || type == NIMBLE_MSG_PROFILE_TASK) {
    if (w->task[0]) {
      /* One at a time: say so, the scheduler requeues it. */
      char saved[129];
      snprintf(saved, sizeof saved, "%s", w->task);
      snprintf(w->task, sizeof w->task, "%s", body_str(body, "task"));
      nimble_status_t busy = nimble_status_make(NIMBLE_UNAVAILABLE, "worker '%s' is busy with '%s'",
                                                w->id, saved);
      send_failure(w, busy, 1);
      nimble_status_free(busy);
      snprintf(w->task, sizeof w->task, "%s", saved);
      json_decref(body);
      return;
    }
    snprintf(w->task, sizeof w->task, "%s", body_str(body, "task"));
    snprintf(w->task_kind, sizeof w->task_kind, "%s",
             type == NIMBLE_MSG_PROFILE_TASK ? "profile" : "compile");
    w->task_body = body;
    w->child_started_ms = 0;
    worker_metrics_task_received(w->metrics, w->task_kind, body_str(body, "target"));
    worker_metrics_set_busy(w->metrics, 1);
    st = start_task(w);
    if (st) {
      int retry = nimble_status_code(st) == NIMBLE_UNAVAILABLE;
      worker_metrics_task_finished(w->metrics, w->task_kind, body_str(body, "target"), 0, -1.0);
      send_failure(w, st, retry);
      nimble_status_free(st);
      end_task(w);
    }
    return;
  }
  if (type == NIMBLE_MSG_ACK) {
    if (w->outcome && !strcmp(body_str(body, "task"), w->outcome_task)) {
      /* Worth a line only when the first copy was lost (or late). */
      if (w->outcome_sends)
        wlog(w, "task %s: the scheduler acknowledged its %s, sent %d more time%s", w->outcome_task,
             nimble_message_type_name(w->outcome_type), w->outcome_sends, w->outcome_sends == 1 ? "" : "s");
      drop_outcome(w);
    }
  } else if (type == NIMBLE_MSG_CANCEL) {
    const char *t = body_str(body, "task");
    if (t && w->task[0] && !strcmp(t, w->task)) {
      wlog(w, "task %s cancelled", w->task);
      worker_metrics_task_cancelled(w->metrics, w->task_kind, body_str(w->task_body, "target"));
      end_task(w);
    }
  } else if (type == NIMBLE_MSG_ERROR) {
    nimble_status_t e = nimble_message_body_to_status(body);
    int not_registered = strstr(nimble_status_message(e), "not registered") != NULL;
    /* Said on every heartbeat until we are idle again: log it once. */
    if (!(not_registered && w->need_ready))
      wlog(w, "scheduler: %s: %s", nimble_status_code_name(nimble_status_code(e)),
           nimble_status_message(e));
    if (not_registered) {
      resend_outcome(w, 1); /* a scheduler that restarted may not have it */
      if (w->task[0])
        w->need_ready = 1; /* after this task: READY would drop its lease */
      else
        send_ready(w);
    }
    nimble_status_free(e);
  }
  json_decref(body);
}

nimble_status_t nimble_worker_run(nimble_worker *w) {
  send_ready(w);
  w->last_beat_ms = now_ms();
  while (!w->stopping) {
    zmq_pollitem_t items[2] = {{w->sock, 0, ZMQ_POLLIN, 0},
                               {NULL, w->child.progress_fd, ZMQ_POLLIN, 0}};
    int nitems = (w->task[0] && w->child.progress_fd >= 0) ? 2 : 1;
    long wait = w->heartbeat_ms - (long)(now_ms() - w->last_beat_ms);
    if (wait < 0) wait = 0;
    if (w->task[0] && wait > 50) wait = 50; /* reap the child promptly */
    int n = zmq_poll(items, nitems, wait);
    if (n < 0 && errno != EINTR)
      return nimble_status_make(NIMBLE_INTERNAL, "zmq_poll: %s", zmq_strerror(errno));
    if (nitems == 2 && (items[1].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
      compile_child_read_progress(&w->child, on_child_line, w);
    if (items[0].revents & ZMQ_POLLIN) {
      for (int k = 0; k < 64; k++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, w->sock, ZMQ_DONTWAIT) < 0) {
          zmq_msg_close(&m);
          break;
        }
        handle_message(w, zmq_msg_data(&m), zmq_msg_size(&m));
        zmq_msg_close(&m);
      }
    }
    if (w->task[0] && w->child.pid) {
      int done;
      char *error;
      compile_child_poll(&w->child, &w->limits, &done, &error);
      if (done) {
        w->child_seconds = child_seconds(w);
        compile_child_read_progress(&w->child, on_child_line, w);
        if (error) {
          /* A compiler that fails or crashes fails the task: the same model
           * would do the same elsewhere (and so would a profile run). */
          nimble_status_t st = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s", error);
          free(error);
          worker_metrics_task_finished(w->metrics, w->task_kind, body_str(w->task_body, "target"),
                                       0, w->child_seconds);
          send_failure(w, st, 0);
          nimble_status_free(st);
          end_task(w);
        } else if (!strcmp(w->task_kind, "profile")) {
          finish_profile(w);
        } else {
          finish_task(w);
        }
      }
    }
    if (now_ms() - w->last_beat_ms >= w->heartbeat_ms) {
      send_heartbeat(w);
      resend_outcome(w, 0);
    }
  }
  return nimble_ok();
}

/* ---- life cycle ---- */

static nimble_status_t read_key_file(const char *path, const char *what, char out[41]) {
  FILE *f = fopen(path, "r");
  if (!f) return nimble_status_make(NIMBLE_NOT_FOUND, "%s '%s': %s", what, path, strerror(errno));
  char line[256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    p[strcspn(p, " \t\r\n")] = '\0';
    if (!*p || *p == '#') continue;
    uint8_t raw[32];
    if (strlen(p) != 40 || !zmq_z85_decode(raw, p)) {
      fclose(f);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s '%s': not a Z85 CURVE key", what, path);
    }
    memcpy(out, p, 41);
    found = 1;
  }
  fclose(f);
  if (!found) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s '%s' holds no key", what, path);
  return nimble_ok();
}

static nimble_status_t create_inner(const nimble_worker_options_t *o, nimble_worker *w) {
  if (!o->scheduler_endpoint)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--scheduler is required");
  if (!o->store_url) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--store is required");
  if (!o->targets) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--targets is required");
  nimble_target_t targets[16];
  size_t n;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_list_parse(o->targets, targets, 16, &n), "--targets");
  json_t *arr = json_array();
  for (size_t i = 0; i < n; i++) {
    char spec[NIMBLE_TARGET_SPEC_MAX + 1];
    nimble_target_format(&targets[i], spec);
    json_array_append_new(arr, json_string(spec));
    snprintf(w->target_specs[i], sizeof w->target_specs[i], "%s", spec);
  }
  w->ntargets = n;
  char *text = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  if (!text || strlen(text) >= sizeof w->targets_json) {
    free(text);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--targets: too long");
  }
  snprintf(w->targets_json, sizeof w->targets_json, "%s", text);
  free(text);
  /* The targets whose code this CPU runs: the ones it can profile. */
#if defined(__x86_64__)
  const char *own_triple = "x86_64-linux-gnu";
#elif defined(__aarch64__)
  const char *own_triple = "aarch64-linux-gnu";
#else
  const char *own_triple = "";
#endif
  json_t *can = json_array();
  for (size_t i = 0; i < n; i++) {
    if (strcmp(nimble_target_host_triple(&targets[i]), own_triple)) continue;
    char spec[NIMBLE_TARGET_SPEC_MAX + 1];
    nimble_target_format(&targets[i], spec);
    json_array_append_new(can, json_string(spec));
  }
  text = json_dumps(can, JSON_COMPACT);
  json_decref(can);
  if (!text || strlen(text) >= sizeof w->can_run_json) {
    free(text);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--targets: too long");
  }
  snprintf(w->can_run_json, sizeof w->can_run_json, "%s", text);
  free(text);

  if (o->worker_id) {
    size_t len = strlen(o->worker_id);
    if (len == 0 || len > 128 || strspn(o->worker_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") != len)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "--id '%s': 1 to 128 characters of [A-Za-z0-9._:-]", o->worker_id);
    snprintf(w->id, sizeof w->id, "%s", o->worker_id);
  } else {
    char host[64] = "worker";
    gethostname(host, sizeof host - 1);
    host[strspn(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")] = '\0';
    snprintf(w->id, sizeof w->id, "%s-%d", *host ? host : "worker", (int)getpid());
  }
  if (o->compiler_path) {
    snprintf(w->compiler, sizeof w->compiler, "%s", o->compiler_path);
  } else {
    char self[PATH_MAX - 16];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return nimble_status_make(NIMBLE_INTERNAL, "cannot find the worker's own path");
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) *slash = '\0';
    snprintf(w->compiler, sizeof w->compiler, "%s/nimble", self);
  }
  if (access(w->compiler, X_OK) != 0)
    return nimble_status_make(NIMBLE_NOT_FOUND, "compiler '%s': %s (see --compiler)", w->compiler,
                              strerror(errno));
  const char *ver = o->compiler_version ? o->compiler_version : NIMBLE_VERSION_STRING;
  if (!*ver || strlen(ver) > 256)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--compiler-version: 1 to 256 bytes");
  snprintf(w->compiler_version, sizeof w->compiler_version, "%s", ver);
  snprintf(w->salt, sizeof w->salt, "%s", o->salt ? o->salt : "");
  snprintf(w->model_repo, sizeof w->model_repo, "%s", o->model_repo ? o->model_repo : "models");
  const char *tmp = o->work_dir ? o->work_dir : getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  if (strlen(tmp) >= sizeof w->work_dir)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--work-dir: path too long");
  snprintf(w->work_dir, sizeof w->work_dir, "%s", tmp);
  /* The kernel cache folder: the one the compiler would use by itself,
   * unless named; the farm's entries are fetched into it. */
  if (o->kcache_dir) {
    if (!*o->kcache_dir || strlen(o->kcache_dir) >= sizeof w->kcache_dir)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--kcache-dir: 1 to %zu bytes",
                                sizeof w->kcache_dir - 1);
    snprintf(w->kcache_dir, sizeof w->kcache_dir, "%s", o->kcache_dir);
  } else {
    nimble_status_t ds = nimble_kernel_cache_default_dir(w->kcache_dir, sizeof w->kcache_dir);
    if (ds) snprintf(w->kcache_dir, sizeof w->kcache_dir, "%.*s/nimble-kernels",
                     (int)(sizeof w->kcache_dir - 32), w->work_dir);
    nimble_status_free(ds);
  }
  const char *repo = o->kcache_repo ? o->kcache_repo : "nimble-kcache";
  if (!*repo || strlen(repo) >= sizeof w->kcache_repo)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--kcache-repo: 1 to 255 bytes");
  snprintf(w->kcache_repo, sizeof w->kcache_repo, "%s", repo);
  w->kcache_farm = !o->no_kcache;
  if (w->kcache_farm) {
    /* A folder that cannot be opened costs only the sharing. */
    nimble_status_t ks = nimble_kernel_cache_open_local(w->kcache_dir, &w->kcache);
    if (ks) {
      if (!o->quiet)
        fprintf(stderr, "nimble-worker: warning: no farm kernel cache: %s\n", nimble_status_message(ks));
      nimble_status_free(ks);
      w->kcache_farm = 0;
    }
  }
  w->heartbeat_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : 1000;
  if (o->compile_jobs < 0 || o->compile_jobs > 256)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--compile-jobs: 1 to 256 threads");
  w->compile_jobs = o->compile_jobs;
  w->parts_hook = o->parts_hook;
  w->parts_hook_user = o->parts_hook_user;
  w->limits.timeout_s = o->timeout_s > 0 ? o->timeout_s : 600;
  w->limits.cpu_limit_s = o->cpu_limit_s > 0 ? o->cpu_limit_s : 600;
  w->limits.mem_limit_mb = o->mem_limit_mb ? o->mem_limit_mb : 8192;
  w->quiet = o->quiet;
  w->child.progress_fd = -1;
  w->metrics = worker_metrics_create(w->id, w->compiler_version);
  if (!w->metrics) return NIMBLE_OOM();
  if (o->metrics_address)
    NIMBLE_RETURN_IF_ERROR_CTX(
        worker_metrics_serve(w->metrics, o->metrics_address, w->metrics_url, sizeof w->metrics_url),
        "--metrics");

  nimble_store_client_options_t so = {.base_url = o->store_url,
                                      .token = o->store_token,
                                      .on_event = on_store_event,
                                      .event_user = w};
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_store_client_create(&so, &w->store), "--store %s", o->store_url);

  w->zctx = zmq_ctx_new();
  w->sock = w->zctx ? zmq_socket(w->zctx, ZMQ_DEALER) : NULL;
  if (!w->sock) return nimble_status_make(NIMBLE_INTERNAL, "zmq: %s", zmq_strerror(errno));
  int zero = 0;
  zmq_setsockopt(w->sock, ZMQ_LINGER, &zero, sizeof zero);
  int64_t max = (int64_t)NIMBLE_MESSAGE_MAX_SIZE;
  zmq_setsockopt(w->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
  int reconnect = 200;
  zmq_setsockopt(w->sock, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect);
  /* ZMTP heartbeats: a connection that goes silent (the scheduler's host
   * gone without a reset, a NAT or firewall dropping the flow) is closed
   * and made again after `timeout` with nothing heard, instead of taking
   * our messages into a TCP buffer for the quarter of an hour TCP takes to
   * give up. The PINGs are answered by the scheduler's ZeroMQ I/O thread,
   * so a busy scheduler still answers; the TTL tells it to drop a
   * connection of ours that went silent the same way. */
  long hb = w->heartbeat_ms < 100 ? 100 : w->heartbeat_ms > 60000 ? 60000 : w->heartbeat_ms;
  int ivl = (int)hb, timeout = (int)(5 * hb < 3000 ? 3000 : 5 * hb), ttl = timeout / 100 * 100;
  zmq_setsockopt(w->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
  zmq_setsockopt(w->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
  zmq_setsockopt(w->sock, ZMQ_HEARTBEAT_TTL, &ttl, sizeof ttl);
  if (o->curve_secret_file || o->scheduler_key_file) {
    if (!o->curve_secret_file || !o->scheduler_key_file)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "--curve-secret and --scheduler-key go together");
    char secret[41], pub[41], server[41];
    NIMBLE_RETURN_IF_ERROR(read_key_file(o->curve_secret_file, "--curve-secret", secret));
    NIMBLE_RETURN_IF_ERROR(read_key_file(o->scheduler_key_file, "--scheduler-key", server));
    if (zmq_curve_public(pub, secret) != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--curve-secret: %s", zmq_strerror(errno));
    if (zmq_setsockopt(w->sock, ZMQ_CURVE_SERVERKEY, server, 40) != 0 ||
        zmq_setsockopt(w->sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
        zmq_setsockopt(w->sock, ZMQ_CURVE_SECRETKEY, secret, 40) != 0)
      return nimble_status_make(NIMBLE_INTERNAL, "CURVE: %s", zmq_strerror(errno));
  }
  if (zmq_connect(w->sock, o->scheduler_endpoint) != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--scheduler '%s': %s",
                              o->scheduler_endpoint, zmq_strerror(errno));
  return nimble_ok();
}

nimble_status_t nimble_worker_create(const nimble_worker_options_t *opts, nimble_worker **out) {
  *out = NULL;
  nimble_worker *w = calloc(1, sizeof *w);
  if (!w) return NIMBLE_OOM();
  nimble_status_t st = create_inner(opts, w);
  if (st) {
    nimble_worker_destroy(w);
    return st;
  }
  *out = w;
  return nimble_ok();
}

void nimble_worker_stop(nimble_worker *w) { w->stopping = 1; }

const char *nimble_worker_metrics_url(const nimble_worker *w) {
  return w->metrics_url[0] ? w->metrics_url : NULL;
}

void nimble_worker_destroy(nimble_worker *w) {
  if (!w) return;
  compile_child_kill(&w->child);
  if (w->task_dir[0]) remove_tree(w->task_dir);
  json_decref(w->task_body);
  if (w->sock) zmq_close(w->sock);
  if (w->zctx) zmq_ctx_term(w->zctx);
  nimble_store_client_destroy(w->store);
  worker_metrics_destroy(w->metrics);
  nimble_kernel_cache_destroy(w->kcache);
  free(w->kc_new);
  free(w->outcome);
  free(w);
}
