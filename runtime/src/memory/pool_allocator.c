/* Power-of-two size-class pool over a device. */
#include "memory/pool_allocator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CLASS 6   /* 64 bytes */
#define NUM_CLASSES 63
/* A request may take a cached block up to 2^REUSE_SPAN times its class. */
#define REUSE_SPAN 2

typedef struct free_list {
  void **blocks;
  uint32_t count, cap;
} free_list;

struct nimble_pool {
  atomic_uint_fast32_t refs;
  const nimble_device_t *dev;
  uint64_t cap;
  pthread_mutex_t mu;
  free_list classes[NUM_CLASSES + 1];
  nimble_memory_stats_t stats;
};

nimble_status_t nimble_pool_create(const nimble_device_t *dev, uint64_t cap, nimble_pool **out) {
  nimble_pool *p = calloc(1, sizeof *p);
  if (!p) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a pool");
  atomic_init(&p->refs, 1);
  p->dev = dev;
  p->cap = cap;
  pthread_mutex_init(&p->mu, NULL);
  *out = p;
  return nimble_ok();
}

void nimble_pool_retain(nimble_pool *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

static void trim_locked(nimble_pool *p) {
  for (int c = 0; c <= NUM_CLASSES; c++) {
    free_list *fl = &p->classes[c];
    for (uint32_t i = 0; i < fl->count; i++) {
      p->dev->free(p->dev, fl->blocks[i]);
      p->stats.bytes_reserved -= (uint64_t)1 << c;
    }
    fl->count = 0;
  }
}

void nimble_pool_release(nimble_pool *p) {
  if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  trim_locked(p);
  for (int c = 0; c <= NUM_CLASSES; c++) free(p->classes[c].blocks);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

static int class_of(uint64_t size) {
  int c = MIN_CLASS;
  while (c < NUM_CLASSES && ((uint64_t)1 << c) < size) c++;
  return c;
}

nimble_status_t nimble_pool_alloc(nimble_pool *p, uint64_t size, uint64_t alignment, void **out,
                                  uint64_t *block_size) {
  if (alignment == 0 || alignment > p->dev->max_alignment || (alignment & (alignment - 1)))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s pool: bad alignment %llu", p->dev->name,
                              (unsigned long long)alignment);
  if (size > ((uint64_t)1 << 62))
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s pool: request of %llu bytes is too large",
                              p->dev->name, (unsigned long long)size);
  uint64_t need = size < alignment ? alignment : size;
  int c = class_of(need);
  uint64_t bytes = (uint64_t)1 << c;
  /* Every block is aligned to its class size up to the device's largest
   * alignment (4096 on the CPU, 256 on CUDA), which covers any alignment a
   * request of that class may ask for. */
  uint64_t block_align = bytes < p->dev->max_alignment ? bytes : p->dev->max_alignment;

  pthread_mutex_lock(&p->mu);
  for (int k = c; k <= c + REUSE_SPAN && k <= NUM_CLASSES; k++) {
    free_list *fl = &p->classes[k];
    if (fl->count) {
      *out = fl->blocks[--fl->count];
      *block_size = (uint64_t)1 << k;
      p->stats.bytes_in_use += *block_size;
      p->stats.pool_hits++;
      pthread_mutex_unlock(&p->mu);
      return nimble_ok();
    }
  }
  if (p->cap && p->stats.bytes_reserved + bytes > p->cap) trim_locked(p);
  if (p->cap && p->stats.bytes_reserved + bytes > p->cap) {
    uint64_t in_use = p->stats.bytes_in_use;
    pthread_mutex_unlock(&p->mu);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%s pool: allocating %llu bytes (a %llu-byte block) would exceed the "
                              "memory cap of %llu bytes (%llu in use)",
                              p->dev->name, (unsigned long long)size, (unsigned long long)bytes,
                              (unsigned long long)p->cap, (unsigned long long)in_use);
  }
  void *ptr = NULL;
  nimble_status_t s = p->dev->alloc(p->dev, bytes, block_align, &ptr);
  if (s) {
    pthread_mutex_unlock(&p->mu);
    return s;
  }
  p->stats.system_allocations++;
  p->stats.bytes_in_use += bytes;
  p->stats.bytes_reserved += bytes;
  if (p->stats.bytes_reserved > p->stats.peak_bytes_reserved)
    p->stats.peak_bytes_reserved = p->stats.bytes_reserved;
  pthread_mutex_unlock(&p->mu);
  *out = ptr;
  *block_size = bytes;
  return nimble_ok();
}

void nimble_pool_free(nimble_pool *p, void *ptr, uint64_t block_size) {
  if (!ptr) return;
  int c = class_of(block_size);
  pthread_mutex_lock(&p->mu);
  p->stats.bytes_in_use -= block_size;
  free_list *fl = &p->classes[c];
  if (fl->count == fl->cap) {
    uint32_t ncap = fl->cap ? fl->cap * 2 : 8;
    void **nb = realloc(fl->blocks, ncap * sizeof *nb);
    if (!nb) {
      /* Cannot cache it: give it back to the device instead. */
      p->dev->free(p->dev, ptr);
      p->stats.bytes_reserved -= block_size;
      pthread_mutex_unlock(&p->mu);
      return;
    }
    fl->blocks = nb;
    fl->cap = ncap;
  }
  fl->blocks[fl->count++] = ptr;
  pthread_mutex_unlock(&p->mu);
}

void nimble_pool_stats(nimble_pool *p, nimble_memory_stats_t *out) {
  pthread_mutex_lock(&p->mu);
  *out = p->stats;
  pthread_mutex_unlock(&p->mu);
}

void nimble_pool_trim(nimble_pool *p) {
  pthread_mutex_lock(&p->mu);
  trim_locked(p);
  pthread_mutex_unlock(&p->mu);
}

const nimble_device_t *nimble_pool_device(const nimble_pool *p) { return p->dev; }
