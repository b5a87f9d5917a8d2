/* Per-thread scratch buffers. See thread_buffer.h. */
#include "vm/thread_buffer.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct thread_buffers {
  float *ptr[NIMBLE_THREAD_BUFFER_COUNT];
  size_t floats[NIMBLE_THREAD_BUFFER_COUNT];
} thread_buffers;

static _Thread_local thread_buffers bufs;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* Runs in the ending thread, whose thread-locals are still there. */
static void free_all(void *p) {
  thread_buffers *b = p;
  for (int i = 0; i < NIMBLE_THREAD_BUFFER_COUNT; i++) {
    free(b->ptr[i]);
    b->ptr[i] = NULL;
    b->floats[i] = 0;
  }
}

static void key_create(void) { (void)pthread_key_create(&key, free_all); }

float *nimble_thread_buffer(nimble_thread_buffer_id id, size_t floats) {
  if (floats <= bufs.floats[id]) return bufs.ptr[id];
  pthread_once(&key_once, key_create);
  size_t want = floats + floats / 4;
  float *p = aligned_alloc(64, (want * sizeof(float) + 63) / 64 * 64);
  if (!p) return NULL;
  free(bufs.ptr[id]);
  bufs.ptr[id] = p;
  bufs.floats[id] = want;
  (void)pthread_setspecific(key, &bufs);
  return p;
}
