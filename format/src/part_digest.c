/* A part's digest (docs/executable.md, "Integrity"): the SHA-256 of the
 * concatenated SHA-256s of its 1 MiB chunks, in order. One SHA-256 over a
 * 15 MB constants part is a serial chain of 15 ms or more at load; chunks
 * are independent, so the loader hashes them on as many cores as the
 * process may use (at most NIMBLE_PART_DIGEST_THREADS) and the result is
 * the same 32 bytes whatever the count. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "format/layout.h"
#include "nimble/digest.h"

#define NIMBLE_PART_DIGEST_THREADS 8
/* Chunks per thread at least: starting and joining a thread costs little
 * on an idle machine but a scheduler time slice on a busy one (a 2.2 MB
 * part took 8 ms on two threads against 1.3 ms on one, measured with
 * bench_load_check on a loaded 2-core machine), so small parts stay on the
 * calling thread. */
#define NIMBLE_PART_CHUNKS_PER_THREAD 4

typedef struct chunk_job {
  const uint8_t *data;
  size_t size, count;
  uint8_t *digests; /* count x 32 bytes */
  atomic_size_t next;
} chunk_job;

static void hash_chunks(chunk_job *j) {
  for (;;) {
    size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (i >= j->count) return;
    size_t off = i * NIMBLE_PART_CHUNK_SIZE;
    size_t len = j->size - off < NIMBLE_PART_CHUNK_SIZE ? j->size - off : NIMBLE_PART_CHUNK_SIZE;
    nimble_digest_compute(j->data + off, len, (nimble_digest_t *)(j->digests + 32 * i));
  }
}

static void *chunk_worker(void *arg) {
  hash_chunks(arg);
  return NULL;
}

/* The cores this process may run on (a container's or taskset's share,
 * not the machine's). */
static size_t usable_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (size_t)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (size_t)n : 1;
}

/* The threads worth starting for `count` chunks (1: the calling thread). */
static size_t threads_for(size_t count) {
  size_t threads = usable_cpus();
  if (threads > NIMBLE_PART_DIGEST_THREADS) threads = NIMBLE_PART_DIGEST_THREADS;
  if (threads > count / NIMBLE_PART_CHUNKS_PER_THREAD) threads = count / NIMBLE_PART_CHUNKS_PER_THREAD;
  return threads ? threads : 1;
}

static void run_job(chunk_job *job, size_t threads) {
  pthread_t tid[NIMBLE_PART_DIGEST_THREADS];
  size_t started = 0;
  atomic_init(&job->next, 0);
  /* A thread that cannot be started leaves its chunks to the others. */
  while (started + 1 < threads && pthread_create(&tid[started], NULL, chunk_worker, job) == 0) started++;
  hash_chunks(job);
  for (size_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
}

void nimble_part_chunk_digests(const uint8_t *data, size_t size, uint8_t *out) {
  chunk_job job = {.data = data, .size = size, .count = nimble_part_chunk_count(size), .digests = out};
  run_job(&job, threads_for(job.count));
}

void nimble_part_digest(const uint8_t *data, size_t size, uint8_t out[32]) {
  size_t count = nimble_part_chunk_count(size);
  size_t threads = threads_for(count);
  chunk_job job = {.data = data, .size = size, .count = count};
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  if (threads > 1) job.digests = malloc(32 * count);
  if (job.digests) {
    run_job(&job, threads);
    nimble_digest_ctx_update(&ctx, job.digests, 32 * count);
    free(job.digests);
  } else {
    /* One core, a small part (or no memory for the list): chunk by chunk,
     * nothing kept. */
    for (size_t i = 0; i < count; i++) {
      size_t off = i * NIMBLE_PART_CHUNK_SIZE;
      size_t len = size - off < NIMBLE_PART_CHUNK_SIZE ? size - off : NIMBLE_PART_CHUNK_SIZE;
      nimble_digest_t d;
      nimble_digest_compute(data + off, len, &d);
      nimble_digest_ctx_update(&ctx, d.bytes, 32);
    }
  }
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  for (int i = 0; i < 32; i++) out[i] = d.bytes[i];
}
