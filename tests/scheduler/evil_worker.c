/* farm_evil_worker: a TEST-ONLY worker that misbehaves, for the verified
 * build suite (test_farm_verify, docs/farm.md "Verified builds"). It is the
 * worker library (nimble_worker, the same loop as nimble-worker) with its
 * parts hook set: after the compiler succeeded and before anything is
 * pushed, it flips one bit of the middle byte of the artifact's `bytecode`
 * part, as a compromised or broken worker would. Everything else (the
 * config, the manifest it builds, the RESULT it reports) is honest about
 * the bytes it pushes: only a second worker's build can tell.
 *
 * It takes nimble-worker's options that the farm harness passes (and
 * --compile-jobs); nimble-worker itself has no such hook or option. */
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

/* Flips the low bit of the byte in the middle of DIR/bytecode. */
static void tamper(const char *parts_dir, void *user) {
  (void)user;
  char path[4096];
  snprintf(path, sizeof path, "%s/bytecode", parts_dir);
  FILE *f = fopen(path, "r+b");
  if (!f || fseek(f, 0, SEEK_END) != 0) {
    fprintf(stderr, "farm_evil_worker: cannot open %s\n", path);
    if (f) fclose(f);
    return;
  }
  long size = ftell(f);
  if (size <= 0 || fseek(f, size / 2, SEEK_SET) != 0) {
    fclose(f);
    return;
  }
  int c = fgetc(f);
  if (c != EOF && fseek(f, size / 2, SEEK_SET) == 0) {
    fputc(c ^ 1, f);
    fprintf(stderr, "farm_evil_worker: flipped byte %ld of %s (%02x -> %02x)\n", size / 2, path,
            c, c ^ 1);
  }
  fclose(f);
}

int main(int argc, char **argv) {
  nimble_worker_options_t o = {0};
  static char token[1024];
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--scheduler")) o.scheduler_endpoint = v;
    else if (!strcmp(a, "--store")) o.store_url = v;
    else if (!strcmp(a, "--targets")) o.targets = v;
    else if (!strcmp(a, "--id")) o.worker_id = v;
    else if (!strcmp(a, "--compiler")) o.compiler_path = v;
    else if (!strcmp(a, "--work-dir")) o.work_dir = v;
    else if (!strcmp(a, "--heartbeat-ms")) o.heartbeat_ms = atol(v);
    else if (!strcmp(a, "--compile-jobs")) o.compile_jobs = atol(v);
    else if (!strcmp(a, "--store-token-file")) {
      nimble_status_t st = nimble_store_read_token_file(v, token, sizeof token);
      if (st) {
        fprintf(stderr, "farm_evil_worker: %s\n", nimble_status_message(st));
        nimble_status_free(st);
        return 2;
      }
      o.store_token = token;
    } else {
      fprintf(stderr, "farm_evil_worker: unknown option '%s'\n", a);
      return 2;
    }
  }
  o.parts_hook = tamper;
  nimble_status_t st = nimble_worker_create(&o, &g_worker);
  if (st) {
    fprintf(stderr, "farm_evil_worker: %s\n", nimble_status_message(st));
    nimble_status_free(st);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  st = nimble_worker_run(g_worker);
  nimble_worker *w = g_worker;
  g_worker = NULL;
  nimble_worker_destroy(w);
  if (st) {
    fprintf(stderr, "farm_evil_worker: %s\n", nimble_status_message(st));
    nimble_status_free(st);
    return 1;
  }
  return 0;
}
