/* `nimble submit`: uploads a model to the store, sends SUBMIT to the
 * scheduler and follows the job (events plus STATUS polls) until every
 * target is finished, then prints one artifact reference per target. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "farm_client.h"
#include "nimble/cli_progress.h"
#include "nimble/digest.h"
#include "nimble/target.h"

#define SUBMIT_DEFAULT_TIMEOUT_S 600
/* The longest one scheduler request may take before it counts as down. */
#define SUBMIT_REQUEST_MS 10000L
/* How often the job's state is asked for besides the events: after 50 ms,
 * then twice as long each time, up to once a second. */
#define SUBMIT_POLL_MS 1000L
#define SUBMIT_FIRST_POLL_MS 50L

typedef struct submit_target {
  char spec[NIMBLE_TARGET_SPEC_MAX + 1];
  char tag[NIMBLE_TARGET_TAG_MAX + 1];
  size_t line;          /* the progress reporter's index */
  char state[16];       /* the last state shown */
  char phase[40];
  int percent;
  int workers;          /* while queued (or verifying): workers serving the target; -1 unknown */
  int verify, verified; /* a verified build: workers asked for, copies built; 0 when not one */
  char manifest[(NIMBLE_DIGEST_STRING_LEN + 1)]; /* "" until done */
  char *error;          /* owned: the failure text, NULL when none */
  bool cached;
  /* Code generation's counts from the worker (docs/farm.md, "The farm's
   * kernel cache"): kernels done of all, kernel cache hits among them,
   * farm entries its worker fetched before the compile; -1: none yet. */
  long k_done, k_total, k_cached, k_fetched;
  int shown_codegen; /* the codegen percent last drawn, -1 none (plain mode draws every 10%) */
} submit_target;

typedef struct submit_job {
  submit_target targets[NIMBLE_TARGET_LIST_MAX];
  size_t count;
  char job[160];
  char state[16];
  const char *store;  /* borrowed */
  const char *name;   /* borrowed */
  bool verbose;       /* -v: each target's kernel cache numbers at the end */
  bool plain;         /* progress as lines (not a terminal): kernels every 10% */
  nimble_cli_progress *progress; /* owned */
} submit_job;

static const nimble_cli_command *self(void);

static void job_free(submit_job *j) {
  for (size_t i = 0; i < j->count; i++) free(j->targets[i].error);
  nimble_cli_progress_destroy(j->progress);
}

static bool job_finished(const submit_job *j) {
  return !strcmp(j->state, "done") || !strcmp(j->state, "failed") ||
         !strcmp(j->state, "cancelled");
}

/* Shows target t's current state on its progress line. */
static void show(submit_job *j, submit_target *t) {
  const char *state = t->state;
  char detail[600] = "";
  int percent = -1;
  if (!strcmp(state, "running") && t->verify >= 2) {
    /* A verified build: copies on distinct workers, compared when built. */
    state = "verifying";
    int n = snprintf(detail, sizeof detail, "%d of %d builds done", t->verified, t->verify);
    if (t->workers >= 0 && t->workers < t->verify && n > 0)
      snprintf(detail + n, sizeof detail - (size_t)n,
               "; %d worker%s serve%s this target, %d needed: waiting for more", t->workers,
               t->workers == 1 ? "" : "s", t->workers == 1 ? "s" : "", t->verify);
  } else if (!strcmp(state, "running")) {
    state = "compiling";
    int n = snprintf(detail, sizeof detail, "%s", t->phase);
    percent = t->phase[0] ? t->percent : -1;
    /* Within code generation, the kernels: "codegen: 4/6 kernels, 4
     * cached, 6 farm entries fetched" (the percent is the kernels'). */
    if (n > 0 && t->k_total > 0 && !strcmp(t->phase, "codegen"))
      n += snprintf(detail + n, sizeof detail - (size_t)n, ": %ld/%ld kernels, %ld cached", t->k_done,
                    t->k_total, t->k_cached);
    /* As lines (a log), one per kernel would flood it: every 10%. */
    if (j->plain && !strcmp(t->phase, "codegen") && t->k_total > 0 && t->k_done < t->k_total &&
        t->shown_codegen >= 0 && percent / 10 == t->shown_codegen / 10)
      return;
    t->shown_codegen = !strcmp(t->phase, "codegen") ? percent : -1;
    if (n > 0 && (size_t)n < sizeof detail && t->k_fetched > 0 &&
        (!strcmp(t->phase, "codegen") || !strcmp(t->phase, "fetch")))
      snprintf(detail + n, sizeof detail - (size_t)n, "%s%ld farm entr%s fetched",
               t->k_total > 0 && !strcmp(t->phase, "codegen") ? ", " : ": ", t->k_fetched,
               t->k_fetched == 1 ? "y" : "ies");
  } else if (!strcmp(state, "queued") && t->verify >= 2 && t->workers >= 0 &&
             t->workers < t->verify) {
    snprintf(detail, sizeof detail,
             "a verified build needs %d distinct workers; %d serve%s this target: waiting for more",
             t->verify, t->workers, t->workers == 1 ? "s" : "");
  } else if (!strcmp(state, "done")) {
    char *ref = nimble_farm_reference(j->store, j->name, t->tag, t->manifest);
    snprintf(detail, sizeof detail, "%s%s", t->cached ? "cached " : "", ref ? ref : t->manifest);
    free(ref);
    percent = 100;
  } else if (!strcmp(state, "failed") && t->error) {
    /* The first line only; the whole text comes at the end. */
    snprintf(detail, sizeof detail, "%.*s", (int)strcspn(t->error, "\n"), t->error);
  } else if (!strcmp(state, "queued") && t->workers == 0) {
    snprintf(detail, sizeof detail, "no worker for this target is connected; waiting for one");
  }
  nimble_status_t s =
      nimble_cli_progress_update(j->progress, t->line, state, percent, detail[0] ? detail : NULL);
  nimble_status_free(s); /* progress is a courtesy: a failure to draw it is not the job's */
}

/* The task's `kernels` counts into t; true when they changed. */
static bool take_kernels(submit_target *t, const json_t *k) {
  if (!json_is_object(k)) return false;
  long done = (long)json_integer_value(json_object_get(k, "done"));
  long total = (long)json_integer_value(json_object_get(k, "total"));
  long cached = (long)json_integer_value(json_object_get(k, "cached"));
  long fetched = (long)json_integer_value(json_object_get(k, "fetched"));
  bool changed = done != t->k_done || total != t->k_total || cached != t->k_cached || fetched != t->k_fetched;
  t->k_done = done;
  t->k_total = total;
  t->k_cached = cached;
  t->k_fetched = fetched;
  return changed;
}

static submit_target *find_target(submit_job *j, const char *spec) {
  for (size_t i = 0; spec && i < j->count; i++)
    if (!strcmp(j->targets[i].spec, spec)) return &j->targets[i];
  return NULL;
}

/* Takes in a JOB_STATUS body (borrowed). */
static void apply_status(submit_job *j, const json_t *body) {
  const char *job = json_string_value(json_object_get(body, "job"));
  if (!job || strcmp(job, j->job) != 0) return;
  snprintf(j->state, sizeof j->state, "%s", json_string_value(json_object_get(body, "state")));
  size_t i;
  json_t *task;
  json_array_foreach(json_object_get(body, "tasks"), i, task) {
    submit_target *t = find_target(j, json_string_value(json_object_get(task, "target")));
    if (!t) continue;
    const char *state = json_string_value(json_object_get(task, "state"));
    const char *phase = json_string_value(json_object_get(task, "phase"));
    json_t *pct = json_object_get(task, "percent");
    const char *manifest = json_string_value(json_object_get(task, "manifest"));
    const char *error = json_string_value(json_object_get(task, "error"));
    bool cached = json_is_true(json_object_get(task, "cached"));
    int percent = json_is_integer(pct) ? (int)json_integer_value(pct) : -1;
    json_t *wk = json_object_get(task, "workers");
    int workers = json_is_integer(wk) ? (int)json_integer_value(wk) : -1;
    int verify = (int)json_integer_value(json_object_get(task, "verify"));
    int verified = (int)json_integer_value(json_object_get(task, "verified"));
    bool changed = strcmp(t->state, state) != 0 || strcmp(t->phase, phase ? phase : "") != 0 ||
                   t->percent != percent || t->cached != cached || t->workers != workers ||
                   t->verify != verify || t->verified != verified;
    if (take_kernels(t, json_object_get(task, "kernels"))) changed = true;
    t->verify = verify;
    t->verified = verified;
    snprintf(t->state, sizeof t->state, "%s", state);
    snprintf(t->phase, sizeof t->phase, "%s", phase ? phase : "");
    t->percent = percent;
    t->workers = workers;
    t->cached = cached;
    if (manifest) snprintf(t->manifest, sizeof t->manifest, "%s", manifest);
    if (error && (!t->error || strcmp(t->error, error) != 0)) {
      free(t->error);
      t->error = strdup(error);
      changed = true;
    }
    if (changed) show(j, t);
  }
}

/* Takes in a PROGRESS event body (borrowed). */
static void apply_progress(submit_job *j, const json_t *body) {
  const char *job = json_string_value(json_object_get(body, "job"));
  if (!job || strcmp(job, j->job) != 0) return;
  submit_target *t = find_target(j, json_string_value(json_object_get(body, "target")));
  /* A verified build's copies report no progress of their own (the status
   * says how many are built). */
  if (!t || !strcmp(t->state, "done") || !strcmp(t->state, "failed") || t->verify >= 2) return;
  snprintf(t->state, sizeof t->state, "running");
  snprintf(t->phase, sizeof t->phase, "%s", json_string_value(json_object_get(body, "phase")));
  t->percent = (int)json_integer_value(json_object_get(body, "percent"));
  take_kernels(t, json_object_get(body, "kernels"));
  show(j, t);
}

static nimble_status_t ask_status(nimble_farm_conn *conn, submit_job *j, long timeout_ms) {
  nimble_msg_type_t type;
  json_t *reply;
  NIMBLE_RETURN_IF_ERROR(nimble_farm_request(conn, NIMBLE_MSG_STATUS,
                                             json_pack("{s:s}", "job", j->job), timeout_ms,
                                             &type, &reply));
  if (type == NIMBLE_MSG_JOB_STATUS) apply_status(j, reply);
  json_decref(reply);
  if (type != NIMBLE_MSG_JOB_STATUS)
    return nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered STATUS with %s",
                              nimble_message_type_name(type));
  return nimble_ok();
}

/* Follows the job until it is finished or deadline (monotonic ms) passes. */
static nimble_status_t follow(nimble_farm_conn *conn, submit_job *j, const char *events,
                              long long deadline, long timeout_s) {
  NIMBLE_RETURN_IF_ERROR(nimble_farm_subscribe(conn, events, j->job));
  long long next_poll = 0;
  long poll_ms = SUBMIT_FIRST_POLL_MS;
  for (;;) {
    long long now = nimble_farm_now_ms();
    if (now >= deadline)
      return nimble_status_make(NIMBLE_DEADLINE_EXCEEDED,
                                "job %s did not finish within %ld s (--timeout); it goes on: "
                                "see 'nimble status %s'",
                                j->job, timeout_s, j->job);
    if (now >= next_poll) {
      long left = (long)(deadline - now);
      NIMBLE_RETURN_IF_ERROR(
          ask_status(conn, j, left < SUBMIT_REQUEST_MS ? left : SUBMIT_REQUEST_MS));
      if (job_finished(j)) return nimble_ok();
      /* Soon at first, then less often: a short job is seen done at once
       * even where no event reaches this client (events endpoint not
       * reachable), and a long one costs a STATUS a second. */
      next_poll = nimble_farm_now_ms() + poll_ms;
      poll_ms = poll_ms * 2 < SUBMIT_POLL_MS ? poll_ms * 2 : SUBMIT_POLL_MS;
      continue;
    }
    long long until = next_poll < deadline ? next_poll : deadline;
    nimble_msg_type_t type;
    json_t *body;
    NIMBLE_RETURN_IF_ERROR(nimble_farm_next_event(conn, (long)(until - now), &type, &body));
    if (!body) continue;
    if (type == NIMBLE_MSG_JOB_STATUS) apply_status(j, body);
    if (type == NIMBLE_MSG_PROGRESS) apply_progress(j, body);
    json_decref(body);
    if (job_finished(j)) return nimble_ok();
  }
}

/* ---- the command line ------------------------------------------------------ */

typedef struct submit_args {
  const char *model;
  const char *targets;
  const char *name;
  const char *format;
  const char *events;
  bool wait, json, verbose;
  long timeout_s;
  int verify; /* 0: not asked */
  json_t *options; /* owned */
} submit_args;

/* "K=V" into args->options: integers in decimal, true/false as booleans,
 * anything else a string. Returns an exit code (0 fine). */
static int take_option(submit_args *a, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv)
    return nimble_cli_usage_error(self(), "--option '%s' is not KEY=VALUE", kv);
  char key[256];
  if ((size_t)(eq - kv) >= sizeof key)
    return nimble_cli_usage_error(self(), "--option key in '%s' is too long", kv);
  memcpy(key, kv, (size_t)(eq - kv));
  key[eq - kv] = '\0';
  if (json_object_get(a->options, key))
    return nimble_cli_usage_error(self(), "--option '%s' is given twice", key);
  const char *v = eq + 1;
  json_t *value;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!strcmp(v, "true") || !strcmp(v, "false"))
    value = json_boolean(!strcmp(v, "true"));
  else if (v[0] && !*end && !errno && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')))
    value = json_integer(n);
  else
    value = json_string(v);
  if (!value || json_object_set_new(a->options, key, value) != 0)
    return nimble_cli_usage_error(self(), "--option '%s': value is not valid UTF-8", kv);
  return NIMBLE_EXIT_OK;
}

/* A repository name from the model's file name: lowercase letters and
 * digits kept, runs of anything else one '-', e.g. "My Model.onnx" →
 * "my-model". */
static void default_name(const char *path, char *out, size_t size) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) len = (size_t)(dot - base);
  size_t o = 0;
  for (size_t i = 0; i < len && o + 1 < size; i++) {
    char c = base[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
      out[o++] = c;
    else if (o > 0 && out[o - 1] != '-')
      out[o++] = '-';
  }
  while (o > 0 && out[o - 1] == '-') o--;
  out[o] = '\0';
  if (o == 0) snprintf(out, size, "model");
}

static int parse_args(int argc, char **argv, submit_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v = NULL;
    int r;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      nimble_cli_print_command_help(self(), stdout);
      return -1;
    } else if (!strcmp(arg, "--wait")) {
      a->wait = true;
    } else if (!strcmp(arg, "--no-wait")) {
      a->wait = false;
    } else if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if (!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) {
      a->verbose = true;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--targets", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--targets needs a value");
      a->targets = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--name", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--name needs a value");
      a->name = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--format", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--format needs a value");
      if (strcmp(v, "onnx") != 0 && strcmp(v, "nir") != 0)
        return nimble_cli_usage_error(self(), "--format '%s' is not onnx or nir", v);
      a->format = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--events", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--events needs a value");
      a->events = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--option", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--option needs KEY=VALUE");
      int rc = take_option(a, v);
      if (rc) return rc;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--verify", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--verify needs a number of workers");
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (errno || *end || end == v || n < 1 || n > 16)
        return nimble_cli_usage_error(self(), "--verify '%s' is not 1..16 workers", v);
      a->verify = (int)n;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--timeout", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--timeout needs a number of seconds");
      char *end;
      errno = 0;
      long t = strtol(v, &end, 10);
      if (errno || *end || end == v || t < 1 || t > 86400)
        return nimble_cli_usage_error(self(), "--timeout '%s' is not 1..86400 seconds", v);
      a->timeout_s = t;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return nimble_cli_usage_error(self(), "unknown option '%s'", arg);
    } else if (a->model) {
      return nimble_cli_usage_error(self(), "expected one model file, got '%s' and '%s'",
                                    a->model, arg);
    } else {
      a->model = arg;
    }
  }
  if (!a->model) return nimble_cli_usage_error(self(), "no model file given");
  if (!a->targets) return nimble_cli_usage_error(self(), "no targets given (--targets=x86,...)");
  return NIMBLE_EXIT_OK;
}

/* ---- the work ---------------------------------------------------------------- */

static nimble_status_t digest_file(const char *path, nimble_digest_t *out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot read model '%s': %s", path,
                              strerror(errno));
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) nimble_digest_ctx_update(&ctx, buf, n);
  int err = ferror(f);
  fclose(f);
  if (err) return nimble_status_make(NIMBLE_IO_ERROR, "error reading model '%s'", path);
  nimble_digest_ctx_final(&ctx, out);
  return nimble_ok();
}

/* -v: where each target's kernels came from (a target answered from the
 * compile cache built none). */
static void print_kernels(const submit_job *j) {
  for (size_t i = 0; i < j->count; i++) {
    const submit_target *t = &j->targets[i];
    if (strcmp(t->state, "done") || t->cached) continue;
    if (t->k_total >= 0)
      fprintf(stderr, "nimble: %s: %ld kernels: %ld kernel cache hits, %ld misses (compiled); "
                      "%ld farm kernel cache entries fetched by the worker\n",
              t->spec, t->k_total, t->k_cached, t->k_total - t->k_cached, t->k_fetched > 0 ? t->k_fetched : 0);
    else
      fprintf(stderr, "nimble: %s: the worker reported no kernel counts\n", t->spec);
  }
}

static void print_result(const submit_job *j, const submit_args *a, const char *model,
                         bool accepted_cached) {
  if (j->verbose) print_kernels(j);
  if (a->json) {
    json_t *targets = json_array();
    for (size_t i = 0; i < j->count; i++) {
      const submit_target *t = &j->targets[i];
      json_t *o = json_pack("{s:s,s:s,s:s,s:b}", "target", t->spec, "tag", t->tag, "state",
                            t->state, "cached", t->cached);
      if (t->manifest[0]) {
        json_object_set_new(o, "manifest", json_string(t->manifest));
        char *ref = nimble_farm_reference(j->store, j->name, t->tag, t->manifest);
        if (ref) json_object_set_new(o, "reference", json_string(ref));
        free(ref);
      }
      if (t->error) json_object_set_new(o, "error", json_string(t->error));
      if (t->k_total >= 0 && !t->cached)
        json_object_set_new(o, "kernels",
                            json_pack("{s:I,s:I,s:I,s:I}", "done", (json_int_t)t->k_done, "total",
                                      (json_int_t)t->k_total, "cached", (json_int_t)t->k_cached,
                                      "fetched", (json_int_t)(t->k_fetched > 0 ? t->k_fetched : 0)));
      json_array_append_new(targets, o);
    }
    json_t *doc = json_pack("{s:s,s:s,s:s,s:s,s:b,s:o}", "job", j->job, "state", j->state,
                            "name", j->name, "model", model, "cached", accepted_cached,
                            "targets", targets);
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (text) printf("%s\n", text);
    free(text);
    return;
  }
  for (size_t i = 0; i < j->count; i++) {
    const submit_target *t = &j->targets[i];
    if (!strcmp(t->state, "done")) {
      char *ref = nimble_farm_reference(j->store, j->name, t->tag, t->manifest);
      printf("%s %s%s\n", t->spec, ref ? ref : t->manifest, t->cached ? " (cached)" : "");
      free(ref);
    } else {
      const char *err = t->error ? t->error : "";
      size_t n = strlen(err);
      fprintf(stderr, "nimble: target '%s' %s%s\n%s%s", t->spec, t->state, n ? ":" : "", err,
              n && err[n - 1] != '\n' ? "\n" : "");
    }
  }
  if (accepted_cached)
    fprintf(stderr, "nimble: job %s: every target was answered from the cache (cached)\n",
            j->job);
}

static int fail(nimble_status_t s, nimble_farm_peer_t peer) {
  int rc = nimble_farm_exit_code(s, peer);
  nimble_cli_report(s);
  return rc;
}

static int submit(nimble_cli_ctx *ctx, submit_args *a) {
  nimble_target_t parsed[NIMBLE_TARGET_LIST_MAX];
  size_t count = 0;
  nimble_status_t s = nimble_target_list_parse(a->targets, parsed, NIMBLE_TARGET_LIST_MAX, &count);
  if (s) {
    int rc = nimble_cli_usage_error(self(), "--targets: %s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  int rc = nimble_cli_load_config(ctx);
  if (rc) return rc;
  const char *scheduler = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_SCHEDULER);
  const char *store = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_STORE);
  const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
  if (!scheduler) scheduler = NIMBLE_CLI_DEFAULT_SCHEDULER;
  if (!store) store = NIMBLE_CLI_DEFAULT_STORE;
  char events[512];
  s = nimble_farm_events_endpoint(a->events, scheduler, events, sizeof events);
  if (s && a->wait) {
    rc = nimble_cli_usage_error(self(), "%s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  nimble_status_free(s);

  char name[256];
  if (a->name)
    snprintf(name, sizeof name, "%s", a->name);
  else
    default_name(a->model, name, sizeof name);
  const char *format = a->format;
  if (!format) {
    size_t n = strlen(a->model);
    format = n > 4 && !strcmp(a->model + n - 4, ".nir") ? "nir" : "onnx";
  }

  nimble_digest_t digest;
  s = digest_file(a->model, &digest);
  if (s) {
    nimble_cli_report(s);
    return NIMBLE_EXIT_INPUT;
  }
  char model[(NIMBLE_DIGEST_STRING_LEN + 1)];
  nimble_digest_format(&digest, model);

  /* The SUBMIT body, checked before anything is uploaded so that a bad
   * --name is a usage error, not a refusal after the upload. */
  json_t *specs = json_array();
  submit_job job;
  memset(&job, 0, sizeof job);
  job.count = count;
  job.store = store;
  job.name = name;
  job.verbose = a->verbose;
  for (size_t i = 0; i < count; i++) {
    nimble_target_format(&parsed[i], job.targets[i].spec);
    nimble_target_tag(&parsed[i], job.targets[i].tag);
    job.targets[i].percent = -1;
    job.targets[i].workers = -1;
    job.targets[i].k_done = job.targets[i].k_total = job.targets[i].k_cached = job.targets[i].k_fetched = -1;
    job.targets[i].shown_codegen = -1;
    json_array_append_new(specs, json_string(job.targets[i].spec));
  }
  json_t *body = json_pack("{s:s,s:s,s:s,s:o}", "model", model, "format", format, "name", name,
                           "targets", specs);
  if (json_object_size(a->options) > 0) json_object_set(body, "options", a->options);
  if (a->verify > 1) json_object_set_new(body, "verify", json_integer(a->verify));
  s = nimble_message_validate_body(NIMBLE_MSG_SUBMIT, body);
  if (s) {
    json_decref(body);
    rc = nimble_cli_usage_error(self(), "%s%s", nimble_status_message(s),
                                a->name ? "" : " (the name comes from the file name; give --name)");
    nimble_status_free(s);
    return rc;
  }

  /* The model, unless the store has it. */
  nimble_store_client *sc;
  s = nimble_farm_store_client(store, token, &sc);
  if (s) {
    json_decref(body);
    return fail(s, NIMBLE_FARM_PEER_STORE);
  }
  int exists = 0;
  s = nimble_store_blob_exists(sc, NIMBLE_FARM_MODEL_REPO, &digest, &exists, NULL);
  if (!s && !exists) {
    nimble_digest_t pushed;
    s = nimble_store_push_blob_file(sc, NIMBLE_FARM_MODEL_REPO, a->model, &pushed, NULL);
    if (!s && !nimble_digest_equal(&pushed, &digest))
      s = nimble_status_make(NIMBLE_DATA_LOSS, "model '%s' changed while it was uploaded",
                             a->model);
  }
  nimble_store_client_destroy(sc);
  if (s) {
    json_decref(body);
    return fail(nimble_status_annotate(s, "uploading model '%s' to the store at %s", a->model,
                                       store),
                NIMBLE_FARM_PEER_STORE);
  }
  if (!a->json)
    fprintf(stderr, "nimble: model %s %s\n", model,
            exists ? "is already in the store" : "uploaded to the store");

  nimble_farm_conn conn;
  s = nimble_farm_connect(scheduler, token, &conn);
  if (s) {
    json_decref(body);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  long long deadline = nimble_farm_now_ms() + a->timeout_s * 1000LL;
  long first = a->timeout_s * 1000L < SUBMIT_REQUEST_MS ? a->timeout_s * 1000L : SUBMIT_REQUEST_MS;
  nimble_msg_type_t type;
  json_t *reply;
  s = nimble_farm_request(&conn, NIMBLE_MSG_SUBMIT, body, first, &type, &reply);
  if (!s && type != NIMBLE_MSG_ACCEPTED) {
    s = nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered SUBMIT with %s",
                           nimble_message_type_name(type));
    json_decref(reply);
  }
  if (s) {
    nimble_farm_close(&conn);
    return fail(s, NIMBLE_FARM_PEER_SCHEDULER);
  }
  snprintf(job.job, sizeof job.job, "%s", json_string_value(json_object_get(reply, "job")));
  bool accepted_cached = json_is_true(json_object_get(reply, "cached"));
  json_decref(reply);

  if (!a->wait) {
    nimble_farm_close(&conn);
    if (a->json)
      printf("{\"job\": \"%s\", \"cached\": %s}\n", job.job, accepted_cached ? "true" : "false");
    else
      printf("%s\n", job.job);
    return NIMBLE_EXIT_OK;
  }

  job.plain = nimble_cli_progress_mode_for(stderr, a->json) != NIMBLE_CLI_PROGRESS_TTY;
  s = nimble_cli_progress_create(stderr, nimble_cli_progress_mode_for(stderr, a->json), 0,
                                 &job.progress);
  for (size_t i = 0; !s && i < count; i++)
    s = nimble_cli_progress_add(job.progress, job.targets[i].spec, &job.targets[i].line);
  if (!s) s = follow(&conn, &job, events, deadline, a->timeout_s);
  nimble_farm_close(&conn);
  if (s) {
    rc = nimble_status_code(s) == NIMBLE_DEADLINE_EXCEEDED ? NIMBLE_EXIT_FAILURE
                                                           : nimble_farm_exit_code(s, NIMBLE_FARM_PEER_SCHEDULER);
    nimble_cli_report(s);
    job_free(&job);
    return rc;
  }
  print_result(&job, a, model, accepted_cached);
  rc = strcmp(job.state, "done") == 0 ? NIMBLE_EXIT_OK : NIMBLE_EXIT_FAILURE;
  job_free(&job);
  return rc;
}

static int run_submit(nimble_cli_ctx *ctx, int argc, char **argv) {
  submit_args a = {.wait = true, .timeout_s = SUBMIT_DEFAULT_TIMEOUT_S, .options = json_object()};
  int rc = parse_args(argc, argv, &a);
  if (rc < 0)
    rc = NIMBLE_EXIT_OK; /* --help */
  else if (rc == NIMBLE_EXIT_OK)
    rc = submit(ctx, &a);
  json_decref(a.options);
  return rc;
}

const nimble_cli_command nimble_cmd_submit = {
    "submit",
    "Compile a model on the farm for one or more targets.",
    "submit MODEL --targets=LIST [--name NAME] [--wait|--no-wait] [--json] [-v]\n"
    "       [--option K=V]... [--verify N] [--timeout S] [--format onnx|nir] [--events EP]",
    "Uploads MODEL to the store (repository 'models'; skipped when the store\n"
    "has it), sends the job to the scheduler and shows one progress line per\n"
    "target until every target is finished. Then prints, per target, the\n"
    "artifact reference STORE/NAME:TAG@sha256:..., with '(cached)' when the\n"
    "farm's cache answered it.\n"
    "\n"
    "Options:\n"
    "  --targets=LIST    targets, comma-separated: x86,aarch64,cuda:arch=sm_90\n"
    "  --name NAME       the store repository of the artifacts (default: the\n"
    "                    model's file name, lowercased)\n"
    "  --no-wait         print the job id and exit (see 'nimble status')\n"
    "  --wait            follow the job to its end (the default)\n"
    "  --json            progress as JSON lines on stderr, the result as one\n"
    "                    JSON document on stdout\n"
    "  -v, --verbose     after the job, each target's kernels: kernel cache hits\n"
    "                    and misses, and the farm kernel cache entries its worker\n"
    "                    fetched (the progress line shows them during codegen)\n"
    "  --option K=V      a compiler option (integers and true/false are typed)\n"
    "  --verify N        have N distinct workers build each target and publish\n"
    "                    only when their artifacts are identical (a verified\n"
    "                    build; 1..16, default 1 or the farm's policy)\n"
    "  --timeout S       give up waiting after S seconds (default 600)\n"
    "  --format F        onnx or nir (default: from the file name, else onnx)\n"
    "  --events EP       the scheduler's events endpoint (default $NIMBLE_EVENTS,\n"
    "                    else the scheduler's port + 2: 5555 -> 5557)\n"
    "\n"
    "Exit status: 0 every target succeeded; 1 a target failed or the wait\n"
    "timed out; 2 usage error (an unknown target is named); 3 MODEL cannot be\n"
    "read; 4 bad configuration; 5 the scheduler cannot be reached or does not\n"
    "answer; 6 the store cannot be reached; 7 the scheduler or the store\n"
    "refused the token.\n",
    run_submit,
};

static const nimble_cli_command *self(void) { return &nimble_cmd_submit; }
