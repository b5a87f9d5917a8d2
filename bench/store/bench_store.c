/* bench_store: the store client against one or more OCI stores, side by
 * side in one process, repetitions interleaved so that a noisy machine hurts
 * every store alike. Reports medians and the ratio of the first store to the
 * second as a Markdown table.
 *
 *   bench_store --store NAME=URL[,TOKEN] --store NAME=URL [--reps N]
 *               [--head-ms MS] [--big-mib N]
 *
 * Measured per store and repetition: push and pull of a 1 MiB and a 64 MiB
 * blob (fresh content each time, so no push is skipped; pulls verify the
 * digest, as every client pull does), and HEAD requests per second on an
 * existing blob for --head-ms milliseconds. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nimble/store_client.h"

#define MAX_STORES 4
#define MAX_REPS 50

enum { PUSH_SMALL, PULL_SMALL, PUSH_BIG, PULL_BIG, HEAD_RATE, NMETRICS };

typedef struct store_t {
  const char *name;
  char url[256];
  const char *token;
  nimble_store_client *client;
  double samples[NMETRICS][MAX_REPS];
} store_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static void fill_random(uint8_t *p, size_t n) {
  uint64_t *w = (uint64_t *)p;
  for (size_t i = 0; i < n / 8; i++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    w[i] = rng;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double tmp[MAX_REPS];
  memcpy(tmp, v, sizeof(double) * (size_t)n);
  qsort(tmp, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static void die_status(const char *what, const store_t *s, nimble_status_t st) {
  fprintf(stderr, "bench_store: %s on %s: %s: %s\n", what, s->name,
          nimble_status_code_name(nimble_status_code(st)), nimble_status_message(st));
  nimble_status_free(st);
  exit(1);
}

/* Pushes `data`, then pulls it back; returns MiB/s of each. */
static void push_pull(store_t *s, const char *repo, uint8_t *data, size_t n, int rep, double *push,
                      double *pull) {
  /* Fresh content: stamp the repetition and the store into the first bytes. */
  fill_random(data, 64);
  data[0] = (uint8_t)rep;
  nimble_digest_t d;
  double t0 = now_s();
  nimble_status_t st = nimble_store_push_blob(s->client, repo, data, n, &d);
  double t1 = now_s();
  if (st) die_status("push", s, st);
  uint8_t *back = NULL;
  size_t back_n = 0;
  st = nimble_store_pull_blob(s->client, repo, &d, &back, &back_n);
  double t2 = now_s();
  if (st) die_status("pull", s, st);
  if (back_n != n || memcmp(back, data, n) != 0) {
    fprintf(stderr, "bench_store: %s returned different bytes\n", s->name);
    exit(1);
  }
  free(back);
  double mib = (double)n / (1024.0 * 1024.0);
  *push = mib / (t1 - t0);
  *pull = mib / (t2 - t1);
}

static double head_rate(store_t *s, const char *repo, const nimble_digest_t *d, int ms) {
  double t0 = now_s(), end = t0 + ms / 1000.0, t;
  long count = 0;
  do {
    int exists = 0;
    nimble_status_t st = nimble_store_blob_exists(s->client, repo, d, &exists, NULL);
    if (st) die_status("HEAD", s, st);
    if (!exists) {
      fprintf(stderr, "bench_store: %s lost a blob\n", s->name);
      exit(1);
    }
    count++;
    t = now_s();
  } while (t < end);
  return (double)count / (t - t0);
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_store --store NAME=URL[,TOKEN] [--store ...] [--reps N] [--head-ms MS] "
          "[--big-mib N]\n");
  exit(2);
}

int main(int argc, char **argv) {
  store_t stores[MAX_STORES];
  int nstores = 0, reps = 5, head_ms = 1000, big_mib = 64;
  memset(stores, 0, sizeof(stores));
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--store") && i + 1 < argc && nstores < MAX_STORES) {
      char *spec = argv[++i];
      char *eq = strchr(spec, '=');
      if (!eq) usage();
      *eq = '\0';
      store_t *s = &stores[nstores++];
      s->name = spec;
      char *comma = strchr(eq + 1, ',');
      if (comma) {
        *comma = '\0';
        s->token = comma + 1;
      }
      snprintf(s->url, sizeof(s->url), "%s", eq + 1);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--head-ms") && i + 1 < argc) {
      head_ms = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--big-mib") && i + 1 < argc) {
      big_mib = atoi(argv[++i]);
    } else {
      usage();
    }
  }
  if (nstores == 0 || reps < 1 || reps > MAX_REPS || head_ms < 1 || big_mib < 1 || big_mib > 1024)
    usage();
  rng ^= (uint64_t)time(NULL) * 0x100000001b3u ^ (uint64_t)getpid();

  size_t small_n = 1u << 20, big_n = (size_t)big_mib << 20;
  uint8_t *small = malloc(small_n), *big = malloc(big_n);
  if (!small || !big) return 1;
  fill_random(small, small_n);
  fill_random(big, big_n);

  const char *repo = "bench/store";
  nimble_digest_t head_digest;
  for (int k = 0; k < nstores; k++) {
    nimble_store_client_options_t o = {.base_url = stores[k].url, .token = stores[k].token};
    nimble_status_t st = nimble_store_client_create(&o, &stores[k].client);
    if (st) die_status("connect", &stores[k], st);
    /* The blob HEADs ask about, and a warm-up of the connection. */
    st = nimble_store_push_blob(stores[k].client, repo, "head-target", 11, &head_digest);
    if (st) die_status("push", &stores[k], st);
  }

  for (int r = 0; r < reps; r++) {
    /* Alternate which store goes first, so neither always runs warm. */
    for (int j = 0; j < nstores; j++) {
      store_t *s = &stores[(j + r) % nstores];
      push_pull(s, repo, small, small_n, r, &s->samples[PUSH_SMALL][r], &s->samples[PULL_SMALL][r]);
      push_pull(s, repo, big, big_n, r, &s->samples[PUSH_BIG][r], &s->samples[PULL_BIG][r]);
      s->samples[HEAD_RATE][r] = head_rate(s, repo, &head_digest, head_ms);
    }
  }

  char big_label[64];
  snprintf(big_label, sizeof(big_label), "%d MiB", big_mib);
  const char *labels[NMETRICS][2] = {{"push", "1 MiB"}, {"pull", "1 MiB"}, {"push", big_label},
                                     {"pull", big_label}, {"HEAD", "requests"}};
  printf("Median of %d interleaved repetitions; pulls include digest verification.\n\n", reps);
  printf("| operation |");
  for (int k = 0; k < nstores; k++) printf(" %s |", stores[k].name);
  if (nstores >= 2) printf(" %s / %s |", stores[0].name, stores[1].name);
  printf("\n|---|");
  for (int k = 0; k < nstores; k++) printf("---:|");
  if (nstores >= 2) printf("---:|");
  printf("\n");
  for (int m = 0; m < NMETRICS; m++) {
    printf("| %s %s (%s) |", labels[m][0], labels[m][1], m == HEAD_RATE ? "req/s" : "MiB/s");
    double med[MAX_STORES];
    for (int k = 0; k < nstores; k++) {
      med[k] = median(stores[k].samples[m], reps);
      printf(" %.0f |", med[k]);
    }
    if (nstores >= 2) printf(" %.2f |", med[1] > 0 ? med[0] / med[1] : 0.0);
    printf("\n");
  }
  for (int k = 0; k < nstores; k++) nimble_store_client_destroy(stores[k].client);
  free(small);
  free(big);
  return 0;
}
