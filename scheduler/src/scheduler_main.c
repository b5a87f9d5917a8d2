/* nimble-scheduler: the command line around the broker. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/signature.h"
#include "nimble/store_client.h"
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "nimble/scheduler.h"

static nimble_scheduler *g_sched;

static void on_signal(int sig) {
  (void)sig;
  if (g_sched) nimble_scheduler_stop(g_sched);
}

static void usage(FILE *f) {
  fputs("usage: nimble-scheduler --clients EP --workers EP --events EP --redis HOST:PORT\n"
        "                        --store URL [options]\n"
        "       nimble-scheduler --keygen PREFIX   (writes PREFIX.secret and PREFIX.public)\n"
        "       nimble-scheduler --signing-keygen FILE   (a new Ed25519 signing key, mode 0600;\n"
        "                        prints the public line applications put in their trusted keys)\n"
        "\n"
        "  --clients EP           ROUTER endpoint for clients, e.g. tcp://127.0.0.1:5555 (* = any port)\n"
        "  --workers EP           ROUTER endpoint for workers\n"
        "  --events EP            PUB endpoint for progress events\n"
        "  --redis HOST:PORT      Redis holding the farm's state\n"
        "  --store URL            artifact store, e.g. http://127.0.0.1:5000 (cache checks)\n"
        "  --store-token-file F   bearer token for the store (first line)\n"
        "  --token-file F         client bearer tokens, one a line; without it anyone may submit\n"
        "  --curve-secret F       scheduler's Z85 CURVE secret key: workers must use CURVE\n"
        "  --worker-keys F        Z85 public keys of the workers allowed in (with --curve-secret)\n"
        "  --lease-ms N           task lease (default 30000)\n"
        "  --worker-timeout-ms N  drop a worker silent this long (default 10000)\n"
        "  --max-deliveries N     fail a task delivered this often without finishing (default 3)\n"
        "  --max-retries N        fail a task after N retryable failures (the store or the\n"
        "                         network at fault; they back off, default 10)\n"
        "  --verify N             build every compile on N distinct workers and publish only\n"
        "                         identical artifacts (default 1; jobs may ask for more)\n"
        "  --kcache-cap N         farm kernel cache: entries kept per target, the oldest\n"
        "                         evicted first (default 65536)\n"
        "  --no-kcache            no farm kernel cache: tasks carry no entries and the\n"
        "                         kernels workers report are not recorded\n"
        "  --compiler-version V   compiler version workers must run (default " NIMBLE_VERSION_STRING ")\n"
        "  --salt S               compile-key salt (bump to disown old results)\n"
        "  --signing-key F        Ed25519 secret key: sign every artifact published or tagged\n"
        "                         (a `<tag>.sig` object beside it; docs/farm.md, \"Signing\")\n"
        "  --metrics HOST:PORT    serve /metrics, the dashboard (/) and /api/state over HTTP\n"
        "                         (no authentication: loopback or a private network; port 0: any)\n"
        "  --ready-file F         once bound, write clients=EP, workers=EP, events=EP (and\n"
        "                         metrics=URL) lines to F\n"
        "  --quiet                no log lines\n"
        "  --help                 this text\n",
        f);
}

static int write_file_atomic(const char *path, const char *text, mode_t mode) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) return -1;
  size_t n = strlen(text);
  int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

static int keygen(const char *prefix) {
  char pub[41], sec[41], path[4096], text[64];
  if (zmq_curve_keypair(pub, sec) != 0) {
    fprintf(stderr, "nimble-scheduler: --keygen: %s\n", zmq_strerror(errno));
    return 1;
  }
  snprintf(path, sizeof path, "%s.secret", prefix);
  snprintf(text, sizeof text, "%s\n", sec);
  if (write_file_atomic(path, text, 0600) != 0) goto fail;
  snprintf(path, sizeof path, "%s.public", prefix);
  snprintf(text, sizeof text, "%s\n", pub);
  if (write_file_atomic(path, text, 0644) != 0) goto fail;
  printf("%s\n", pub);
  return 0;
fail:
  fprintf(stderr, "nimble-scheduler: --keygen: cannot write '%s': %s\n", path, strerror(errno));
  return 1;
}

static int parse_long(const char *opt, const char *v, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x <= 0) {
    fprintf(stderr, "nimble-scheduler: %s: '%s' is not a positive integer\n", opt, v);
    return -1;
  }
  *out = x;
  return 0;
}

/* --signing-keygen FILE: the secret key to FILE (0600, never overwritten),
 * the trusted keys line on stdout. */
static int signing_keygen(const char *path) {
  uint8_t pub[NIMBLE_SIGN_KEY_BYTES];
  char *line = NULL;
  nimble_status_t s = nimble_sign_keygen(path, pub);
  if (!s) s = nimble_sign_public_line(pub, path, &line);
  if (s) {
    fprintf(stderr, "nimble-scheduler: --signing-keygen: %s\n", nimble_status_message(s));
    nimble_status_free(s);
    return 1;
  }
  fputs(line, stdout);
  free(line);
  return 0;
}

int main(int argc, char **argv) {
  nimble_scheduler_options_t o = {0};
  const char *ready = NULL, *redis = NULL, *store_token_file = NULL;
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
      fprintf(stderr, "nimble-scheduler: %s: missing value (or unknown option)\n", a);
      usage(stderr);
      return 2;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--keygen")) return keygen(v);
    else if (!strcmp(a, "--signing-keygen")) return signing_keygen(v);
    else if (!strcmp(a, "--signing-key")) o.signing_key_file = v;
    else if (!strcmp(a, "--clients")) o.clients_endpoint = v;
    else if (!strcmp(a, "--workers")) o.workers_endpoint = v;
    else if (!strcmp(a, "--events")) o.events_endpoint = v;
    else if (!strcmp(a, "--redis")) redis = v;
    else if (!strcmp(a, "--store")) o.store_url = v;
    else if (!strcmp(a, "--store-token-file")) store_token_file = v;
    else if (!strcmp(a, "--token-file")) o.token_file = v;
    else if (!strcmp(a, "--curve-secret")) o.curve_secret_file = v;
    else if (!strcmp(a, "--worker-keys")) o.worker_keys_file = v;
    else if (!strcmp(a, "--compiler-version")) o.compiler_version = v;
    else if (!strcmp(a, "--salt")) o.salt = v;
    else if (!strcmp(a, "--ready-file")) ready = v;
    else if (!strcmp(a, "--metrics")) o.metrics_address = v;
    else if (!strcmp(a, "--lease-ms")) {
      if (parse_long(a, v, &o.lease_ms)) return 2;
    } else if (!strcmp(a, "--max-deliveries")) {
      long n;
      if (parse_long(a, v, &n) || n > 1000) {
        fprintf(stderr, "nimble-scheduler: --max-deliveries: 1 to 1000\n");
        return 2;
      }
      o.max_deliveries = (int)n;
    } else if (!strcmp(a, "--max-retries")) {
      long n;
      if (parse_long(a, v, &n) || n > 1000) {
        fprintf(stderr, "nimble-scheduler: --max-retries: 1 to 1000\n");
        return 2;
      }
      o.max_retries = (int)n;
    } else if (!strcmp(a, "--verify")) {
      long n;
      if (parse_long(a, v, &n) || n > NIMBLE_SCHED_MAX_VERIFY) {
        fprintf(stderr, "nimble-scheduler: --verify: 1 to %d\n", NIMBLE_SCHED_MAX_VERIFY);
        return 2;
      }
      o.verify = (int)n;
    } else if (!strcmp(a, "--kcache-cap")) {
      if (parse_long(a, v, &o.kcache_cap) || o.kcache_cap > 100000000) {
        fprintf(stderr, "nimble-scheduler: --kcache-cap: 1 to 100000000 entries\n");
        return 2;
      }
    } else if (!strcmp(a, "--worker-timeout-ms")) {
      if (parse_long(a, v, &o.worker_timeout_ms)) return 2;
    } else {
      fprintf(stderr, "nimble-scheduler: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!o.clients_endpoint || !o.workers_endpoint || !o.events_endpoint || !redis || !o.store_url) {
    fprintf(stderr, "nimble-scheduler: --clients, --workers, --events, --redis and --store are required\n");
    usage(stderr);
    return 2;
  }
  char host[256];
  const char *colon = strrchr(redis, ':');
  long port = 0;
  if (!colon || colon == redis || (size_t)(colon - redis) >= sizeof host ||
      parse_long("--redis", colon + 1, &port) || port > 65535) {
    fprintf(stderr, "nimble-scheduler: --redis '%s': expected HOST:PORT\n", redis);
    return 2;
  }
  memcpy(host, redis, (size_t)(colon - redis));
  host[colon - redis] = '\0';
  o.redis_host = host;
  o.redis_port = (int)port;
  char store_token[1024] = "";
  if (store_token_file) {
    nimble_status_t ts = nimble_store_read_token_file(store_token_file, store_token, sizeof store_token);
    if (ts) {
      fprintf(stderr, "nimble-scheduler: --store-token-file: %s\n", nimble_status_message(ts));
      nimble_status_free(ts);
      return 2;
    }
    o.store_token = store_token;
  }
  if (!o.token_file && !o.quiet)
    fprintf(stderr, "nimble-scheduler: warning: no --token-file; any client may submit\n");

  nimble_status_t st = nimble_scheduler_create(&o, &g_sched);
  if (st) {
    fprintf(stderr, "nimble-scheduler: %s: %s\n", nimble_status_code_name(nimble_status_code(st)),
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
  if (ready) {
    char text[1400];
    const char *metrics = nimble_scheduler_endpoint(g_sched, "metrics");
    snprintf(text, sizeof text, "clients=%s\nworkers=%s\nevents=%s\n%s%s%s",
             nimble_scheduler_endpoint(g_sched, "clients"),
             nimble_scheduler_endpoint(g_sched, "workers"),
             nimble_scheduler_endpoint(g_sched, "events"), metrics ? "metrics=" : "",
             metrics ? metrics : "", metrics ? "\n" : "");
    if (write_file_atomic(ready, text, 0644) != 0) {
      fprintf(stderr, "nimble-scheduler: --ready-file '%s': %s\n", ready, strerror(errno));
      nimble_scheduler_destroy(g_sched);
      return 1;
    }
  }
  if (!o.quiet)
    fprintf(stderr, "nimble-scheduler: clients %s, workers %s, events %s%s%s\n",
            nimble_scheduler_endpoint(g_sched, "clients"),
            nimble_scheduler_endpoint(g_sched, "workers"),
            nimble_scheduler_endpoint(g_sched, "events"),
            nimble_scheduler_endpoint(g_sched, "metrics") ? ", dashboard and metrics " : "",
            nimble_scheduler_endpoint(g_sched, "metrics") ? nimble_scheduler_endpoint(g_sched, "metrics") : "");
  st = nimble_scheduler_run(g_sched);
  nimble_scheduler *s = g_sched;
  g_sched = NULL;
  nimble_scheduler_destroy(s);
  if (st) {
    fprintf(stderr, "nimble-scheduler: %s\n", nimble_status_message(st));
    nimble_status_free(st);
    return 1;
  }
  return 0;
}
