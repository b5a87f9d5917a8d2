/* nimble-store: the artifact store server.
 *
 * Parses the command line, starts the server, writes the ready file once
 * the socket accepts, and waits for SIGTERM or SIGINT to shut down cleanly
 * (exit 0). Signals are taken with sigwait() in the main thread, having been
 * blocked before any other thread started, so no handler runs inside
 * libmicrohttpd's threads. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_server.h"

static const char usage[] =
    "usage: nimble-store --listen HOST:PORT --root DIR [options]\n"
    "\n"
    "Serves the OCI distribution API subset Nimble artifacts need (blobs with\n"
    "Range, monolithic and chunked uploads, manifests by tag or digest, tag\n"
    "lists) from a filesystem store under DIR.\n"
    "\n"
    "  --listen HOST:PORT     address to listen on; port 0 picks a free port\n"
    "  --root DIR             store directory (created if missing)\n"
    "  --token-file FILE      bearer tokens, one per line, '#' comments; writes\n"
    "                         need 'Authorization: Bearer <token>'. Without it,\n"
    "                         anyone may write (a warning is printed)\n"
    "  --auth-reads           reads need a token too (requires --token-file)\n"
    "  --max-blob-size N      largest blob in bytes, suffixes K M G allowed\n"
    "                         (default 4G)\n"
    "  --max-connections N    open connections served at once; more get 429\n"
    "                         (default 64)\n"
    "  --upload-timeout S     seconds before an idle upload is removed\n"
    "                         (default 3600); uploads of an earlier run are\n"
    "                         removed at start-up\n"
    "  --ready-file F         once accepting, write \"HOST:PORT\\n\" to F (atomically)\n"
    "  --quiet                no request log (default: one line per request on\n"
    "                         stderr: method, path, status, bytes in/out, ms)\n"
    "  --help                 this text\n"
    "  --version              print the version\n"
    "\n"
    "SIGTERM or SIGINT stop accepting, let requests in flight finish for up to\n"
    "2 seconds, and exit 0.\n";

static int parse_size(const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  if (!text || !*text || text[0] == '-') return 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text) return 0;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024ull, end++;
  else if (*end == 'M' || *end == 'm')
    mult = 1024ull * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    mult = 1024ull * 1024 * 1024, end++;
  if (*end) return 0;
  if (v > UINT64_MAX / mult) return 0;
  *out = (uint64_t)v * mult;
  return 1;
}

static int write_ready_file(const char *path, const char *address) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return -1;
  snprintf(tmp, n, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  int ok = f && fprintf(f, "%s\n", address) > 0;
  if (f && fflush(f) != 0) ok = 0;
  if (f && fsync(fileno(f)) != 0) ok = 0;
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) unlink(tmp);
  free(tmp);
  return ok ? 0 : -1;
}

int main(int argc, char **argv) {
  nimble_store_server_config config = {0};
  const char *ready_file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                   \
  do {                                                                 \
    if (!v) {                                                          \
      fprintf(stderr, "nimble-store: %s needs a value\n%s", a, usage); \
      return 2;                                                        \
    }                                                                  \
    i++;                                                               \
  } while (0)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--version")) {
      printf("nimble-store %s\n", NIMBLE_VERSION_STRING);
      return 0;
    } else if (!strcmp(a, "--listen")) {
      NEED_VALUE();
      config.listen = v;
    } else if (!strcmp(a, "--root")) {
      NEED_VALUE();
      config.root = v;
    } else if (!strcmp(a, "--token-file")) {
      NEED_VALUE();
      config.token_file = v;
    } else if (!strcmp(a, "--auth-reads")) {
      config.auth_reads = 1;
    } else if (!strcmp(a, "--quiet")) {
      config.quiet = 1;
    } else if (!strcmp(a, "--ready-file")) {
      NEED_VALUE();
      ready_file = v;
    } else if (!strcmp(a, "--max-blob-size")) {
      NEED_VALUE();
      if (!parse_size(v, &config.max_blob_size) || config.max_blob_size == 0) {
        fprintf(stderr, "nimble-store: --max-blob-size '%s' is not a positive size\n", v);
        return 2;
      }
    } else if (!strcmp(a, "--max-connections") || !strcmp(a, "--upload-timeout")) {
      NEED_VALUE();
      uint64_t n = 0;
      if (!parse_size(v, &n) || n == 0 || n > 1000000) {
        fprintf(stderr, "nimble-store: %s '%s' is not a number between 1 and 1000000\n", a, v);
        return 2;
      }
      if (!strcmp(a, "--max-connections"))
        config.max_connections = (unsigned)n;
      else
        config.upload_timeout_s = (unsigned)n;
    } else {
      fprintf(stderr, "nimble-store: unknown option '%s'\n%s", a, usage);
      return 2;
    }
#undef NEED_VALUE
  }
  if (!config.listen || !config.root) {
    fprintf(stderr, "nimble-store: --listen and --root are required\n%s", usage);
    return 2;
  }

  /* Block the shutdown signals in every thread (threads inherit the mask);
   * main() takes them with sigwait. A client hanging up mid-response must
   * not kill the process: ignore SIGPIPE. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  nimble_store_server *server = NULL;
  nimble_status_t s = nimble_store_server_start(&config, &server);
  if (s) {
    fprintf(stderr, "nimble-store: %s\n", nimble_status_message(s));
    nimble_status_free(s);
    return 1;
  }
  if (!config.token_file)
    fprintf(stderr, "nimble-store: warning: no --token-file, anyone can write to this store\n");
  if (ready_file && write_ready_file(ready_file, nimble_store_server_address(server)) != 0) {
    fprintf(stderr, "nimble-store: cannot write ready file %s: %s\n", ready_file, strerror(errno));
    nimble_store_server_stop(server, 0);
    return 1;
  }
  if (!config.quiet)
    fprintf(stderr, "nimble-store: serving %s on %s\n", config.root,
            nimble_store_server_address(server));
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  if (!config.quiet) fprintf(stderr, "nimble-store: %s, shutting down\n", strsignal(sig));
  nimble_store_server_stop(server, 2000);
  return 0;
}
