/* SHA-256 throughput: nimble_base's compression functions (portable, and
 * the CPU's SHA instructions where it has them), nimble_digest_compute
 * (what the project calls: the fastest of them) and libsodium's
 * crypto_hash_sha256, each on the same random buffer, best of five runs.
 * Every result is checked against libsodium's digest.
 *
 *   build/bench/digest/bench_sha256 [MiB]     (default 64) */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nimble/digest.h"
#include "sha256_blocks.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whole blocks only, so the compression function alone is measured; the
 * buffer is a multiple of 64 bytes. */
static void hash_with(nimble_sha256_blocks_fn blocks, const uint8_t *data, size_t n, uint8_t out[32]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  blocks(h, data, n / 64);
  uint8_t tail[64] = {0x80};
  for (int i = 0; i < 8; i++) tail[63 - i] = (uint8_t)((uint64_t)n * 8 >> (8 * i));
  blocks(h, tail, 1);
  for (int i = 0; i < 32; i++) out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  if (mib == 0 || mib > 4096 || sodium_init() < 0) {
    fprintf(stderr, "usage: bench_sha256 [MiB, 1..4096]\n");
    return 2;
  }
  size_t n = mib << 20;
  uint8_t *buf = malloc(n);
  if (!buf) return 1;
  randombytes_buf(buf, n);
  uint8_t want[32], got[32];
  crypto_hash_sha256(want, buf, n);

  nimble_sha256_impl_t impls[2];
  size_t k = nimble_sha256_impls(impls);
  printf("SHA-256 of %zu MiB, best of 5, MB/s (10^6 bytes per second):\n", mib);
  for (size_t which = 0; which < k + 2; which++) {
    const char *name = which < k ? impls[which].name : which == k ? "nimble_digest_compute" : "libsodium";
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
      double t0 = now();
      if (which < k) {
        hash_with(impls[which].blocks, buf, n, got);
      } else if (which == k) {
        nimble_digest_t d;
        nimble_digest_compute(buf, n, &d);
        memcpy(got, d.bytes, 32);
      } else {
        crypto_hash_sha256(got, buf, n);
      }
      double t = now() - t0;
      if (t < best) best = t;
      if (memcmp(got, want, 32) != 0) {
        fprintf(stderr, "%s: digest differs from libsodium's\n", name);
        return 1;
      }
    }
    printf("  %-22s %8.1f\n", name, (double)n / best / 1e6);
  }
  free(buf);
  return 0;
}
