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

/* The owner's cache: classes up to 2^OWN_MAX_CLASS bytes, OWN_DEPTH
 * blocks each (an LSTM step's few tensors, a CNN's larger ones go the
 * locked way, where a lock costs nothing next to their kernels). */
#define OWN_MAX_CLASS 22 /* 4 MB */
#define OWN_DEPTH 8
/* Pool references the owner takes from the shared count at a time. */
#define OWN_CREDIT 64

typedef struct free_list {
  void **blocks;
  uint32_t count, cap;
} free_list;

typedef struct own_list {
  void *blocks[OWN_DEPTH];
  uint32_t count;
} own_list;

struct nimble_pool {
  atomic_uint_fast32_t refs;
  const nimble_device_t *dev;
  uint64_t cap;
  pthread_mutex_t mu;
  free_list classes[NUM_CLASSES + 1];
  nimble_memory_stats_t stats;
  /* The owning thread (nimble_pool_own), or 0. Only that thread reads or
   * writes the fields below it while it owns the pool; another thread
   * may only compare `owner` with itself, which is never equal. */
  atomic_uintptr_t owner;
  own_list own[OWN_MAX_CLASS + 1];
  int64_t own_in_use; /* bytes_in_use's change by the owner's cache */
  uint64_t own_hits;  /* pool_hits by the owner's cache */
  uint32_t credit;    /* references of `refs` the owner holds, unassigned */
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

/* pthread_t as a word to compare: glibc's is the thread's address. */
static uintptr_t self_id(void) { return (uintptr_t)pthread_self(); }

static int owned_here(const nimble_pool *p) {
  return atomic_load_explicit(&p->owner, memory_order_relaxed) == self_id();
}

void nimble_pool_retain(nimble_pool *p) {
  if (owned_here(p)) {
    if (!p->credit) {
      atomic_fetch_add_explicit(&p->refs, OWN_CREDIT, memory_order_relaxed);
      p->credit = OWN_CREDIT;
    }
    p->credit--;
    return;
  }
  atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

/* Gives `*count` cached blocks of class c back to the device. With the
 * lock held. */
static void give_back(nimble_pool *p, void **blocks, uint32_t *count, int c) {
  for (uint32_t i = 0; i < *count; i++) {
    p->dev->free(p->dev, blocks[i]);
    p->stats.bytes_reserved -= (uint64_t)1 << c;
  }
  *count = 0;
}

static void trim_locked(nimble_pool *p) {
  for (int c = 0; c <= NUM_CLASSES; c++) give_back(p, p->classes[c].blocks, &p->classes[c].count, c);
}

/* The owner's cached blocks too: by the owner, or by any thread while
 * none owns the pool. With the lock held. */
static void trim_own_locked(nimble_pool *p) {
  for (int c = 0; c <= OWN_MAX_CLASS; c++) give_back(p, p->own[c].blocks, &p->own[c].count, c);
}

static void drop_refs(nimble_pool *p, uint32_t n) {
  if (atomic_fetch_sub_explicit(&p->refs, n, memory_order_acq_rel) != n) return;
  trim_locked(p);
  trim_own_locked(p);
  for (int c = 0; c <= NUM_CLASSES; c++) free(p->classes[c].blocks);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

void nimble_pool_release(nimble_pool *p) {
  if (!p) return;
  if (owned_here(p)) {
    /* Kept as credit; a large surplus goes back in one step. */
    if (++p->credit < 2 * OWN_CREDIT) return;
    p->credit -= OWN_CREDIT;
    drop_refs(p, OWN_CREDIT);
    return;
  }
  drop_refs(p, 1);
}

void nimble_pool_own(nimble_pool *p, int own) {
  if (own) {
    atomic_store_explicit(&p->owner, self_id(), memory_order_relaxed);
    return;
  }
  if (!owned_here(p)) return;
  atomic_store_explicit(&p->owner, 0, memory_order_relaxed);
  /* The cache's blocks stay for the next owner; its counts join the
   * stats, and the credit goes back (the caller still holds a reference). */
  pthread_mutex_lock(&p->mu);
  p->stats.bytes_in_use = (uint64_t)((int64_t)p->stats.bytes_in_use + p->own_in_use);
  p->stats.pool_hits += p->own_hits;
  p->own_in_use = 0;
  p->own_hits = 0;
  pthread_mutex_unlock(&p->mu);
  uint32_t c = p->credit;
  p->credit = 0;
  if (c) drop_refs(p, c);
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

  int own = owned_here(p);
  if (own && c <= OWN_MAX_CLASS) {
    for (int k = c; k <= c + REUSE_SPAN && k <= OWN_MAX_CLASS; k++) {
      own_list *ol = &p->own[k];
      if (ol->count) {
        *out = ol->blocks[--ol->count];
        *block_size = (uint64_t)1 << k;
        p->own_in_use += (int64_t)*block_size;
        p->own_hits++;
        return nimble_ok();
      }
    }
  }
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
  if (p->cap && p->stats.bytes_reserved + bytes > p->cap) {
    trim_locked(p);
    if (own) trim_own_locked(p);
  }
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
  if (c <= OWN_MAX_CLASS && owned_here(p) && p->own[c].count < OWN_DEPTH) {
    own_list *ol = &p->own[c];
    ol->blocks[ol->count++] = ptr;
    p->own_in_use -= (int64_t)block_size;
    return;
  }
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
  /* The owner's cache only from the owner or while none owns it. */
  uintptr_t o = atomic_load_explicit(&p->owner, memory_order_relaxed);
  if (!o || o == self_id()) trim_own_locked(p);
  pthread_mutex_unlock(&p->mu);
}

const nimble_device_t *nimble_pool_device(const nimble_pool *p) { return p->dev; }
