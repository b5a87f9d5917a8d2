/* nimble-worker: the command line around the worker loop. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/store_client.h"

#include "nimble/worker.h"

static nimble_worker *g_worker;

static void on_signal(int sig) {
  (void)sig;
  if (g_worker) nimble_worker_stop(g_worker);
}

static void usage(FILE *f) {
  fputs("usage: nimble-worker --scheduler EP --store URL --targets LIST [options]\n"
        "\n"
        "  --scheduler EP          the scheduler's worker endpoint, e.g. tcp://127.0.0.1:5556\n"
        "  --store URL             artifact store, e.g. http://127.0.0.1:5000\n"
        "  --targets LIST          targets this worker compiles for, e.g. x86,aarch64\n"
        "  --id ID                 worker id (default HOSTNAME-PID)\n"
        "  --compiler PATH         compiler command (default: nimble next to this binary)\n"
        "  --compiler-version V    version reported (default " NIMBLE_VERSION_STRING ")\n"
        "  --salt S                compile-key salt; must match the scheduler's\n"
        "  --model-repo REPO       repository holding model blobs (default models)\n"
        "  --store-token-file F    bearer token for the store (first line)\n"
        "  --work-dir DIR          scratch space (default $TMPDIR or /tmp)\n"
        "  --heartbeat-ms N        heartbeat and lease renewal period (default 1000)\n"
        "  --timeout-s N           wall-clock limit of one compile (default 600)\n"
        "  --cpu-limit-s N         CPU-time limit of one compile (default 600)\n"
        "  --mem-limit-mb N        address-space limit of one compile (default 8192; 0: none)\n"
        "  --compile-jobs N        threads of one compile (the compiler's --jobs; default: its own)\n"
        "  --kcache-dir DIR        the compiler's kernel cache folder, filled from the farm's\n"
        "                          kernel cache before each compile (default: the compiler's\n"
        "                          own, $NIMBLE_KERNEL_CACHE or ~/.cache/nimble/kernels)\n"
        "  --kcache-repo REPO      store repository of the farm's kernel blobs (default\n"
        "                          nimble-kcache)\n"
        "  --no-kcache             no farm kernel cache: fetch no entries, share no kernels\n"
        "                          (the folder still serves this worker's own compiles)\n"
        "  --curve-secret F        this worker's Z85 CURVE secret key\n"
        "  --scheduler-key F       the scheduler's Z85 CURVE public key\n"
        "  --metrics HOST:PORT     serve GET /metrics (Prometheus text) on this address\n"
        "                          (no authentication; port 0: any, printed at start)\n"
        "  --quiet                 no log lines\n"
        "  --help                  this text\n",
        f);
}

static int parse_long(const char *opt, const char *v, long min, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || !*v || x < min) {
    fprintf(stderr, "nimble-worker: %s: '%s' is not an integer >= %ld\n", opt, v, min);
    return -1;
  }
  *out = x;
  return 0;
}

int main(int argc, char **argv) {
  nimble_worker_options_t o = {0};
  const char *token_file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--quiet")) {
      o.quiet = 1;
      continue;
    }
    if (!strcmp(a, "--no-kcache")) {
      o.no_kcache = 1;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "nimble-worker: %s: missing value (or unknown option)\n", a);
      usage(stderr);
      return 2;
    }
    const char *v = argv[++i];
    long mem = 0;
    if (!strcmp(a, "--scheduler")) o.scheduler_endpoint = v;
    else if (!strcmp(a, "--store")) o.store_url = v;
    else if (!strcmp(a, "--targets")) o.targets = v;
    else if (!strcmp(a, "--id")) o.worker_id = v;
    else if (!strcmp(a, "--compiler")) o.compiler_path = v;
    else if (!strcmp(a, "--compiler-version")) o.compiler_version = v;
    else if (!strcmp(a, "--salt")) o.salt = v;
    else if (!strcmp(a, "--model-repo")) o.model_repo = v;
    else if (!strcmp(a, "--store-token-file")) token_file = v;
    else if (!strcmp(a, "--work-dir")) o.work_dir = v;
    else if (!strcmp(a, "--curve-secret")) o.curve_secret_file = v;
    else if (!strcmp(a, "--scheduler-key")) o.scheduler_key_file = v;
    else if (!strcmp(a, "--metrics")) o.metrics_address = v;
    else if (!strcmp(a, "--kcache-dir")) o.kcache_dir = v;
    else if (!strcmp(a, "--kcache-repo")) o.kcache_repo = v;
    else if (!strcmp(a, "--heartbeat-ms")) {
      if (parse_long(a, v, 1, &o.heartbeat_ms)) return 2;
    } else if (!strcmp(a, "--timeout-s")) {
      if (parse_long(a, v, 1, &o.timeout_s)) return 2;
    } else if (!strcmp(a, "--cpu-limit-s")) {
      if (parse_long(a, v, 1, &o.cpu_limit_s)) return 2;
    } else if (!strcmp(a, "--compile-jobs")) {
      if (parse_long(a, v, 1, &o.compile_jobs)) return 2;
    } else if (!strcmp(a, "--mem-limit-mb")) {
      if (parse_long(a, v, 0, &mem)) return 2;
      o.mem_limit_mb = mem == 0 ? -1 : mem;
    } else {
      fprintf(stderr, "nimble-worker: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!o.scheduler_endpoint || !o.store_url || !o.targets) {
    fprintf(stderr, "nimble-worker: --scheduler, --store and --targets are required\n");
    usage(stderr);
    return 2;
  }
  char token[1024];
  if (token_file) {
    nimble_status_t ts = nimble_store_read_token_file(token_file, token, sizeof token);
    if (ts) {
      fprintf(stderr, "nimble-worker: --store-token-file: %s\n", nimble_status_message(ts));
      nimble_status_free(ts);
      return 2;
    }
    o.store_token = token;
  }
  nimble_status_t st = nimble_worker_create(&o, &g_worker);
  if (st) {
    fprintf(stderr, "nimble-worker: %s: %s\n", nimble_status_code_name(nimble_status_code(st)),
            nimble_status_message(st));
    nimble_status_free(st);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (nimble_worker_metrics_url(g_worker) && !o.quiet)
    fprintf(stderr, "nimble-worker: metrics at %s/metrics\n", nimble_worker_metrics_url(g_worker));
  st = nimble_worker_run(g_worker);
  nimble_worker *w = g_worker;
  g_worker = NULL;
  nimble_worker_destroy(w);
  if (st) {
    fprintf(stderr, "nimble-worker: %s\n", nimble_status_message(st));
    nimble_status_free(st);
    return 1;
  }
  return 0;
}
