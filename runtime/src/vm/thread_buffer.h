/* Per-thread scratch buffers that outlive the call: each thread has one
 * buffer per user, grown to the largest request it has seen (with a
 * quarter more, so a slightly larger one does not replace it again) and
 * freed when the thread ends (the main thread keeps its buffers until
 * exit). A warm caller allocates nothing: a fresh buffer per call cost its
 * pages' first touches on every run. */
#ifndef NIMBLE_RUNTIME_THREAD_BUFFER_H
#define NIMBLE_RUNTIME_THREAD_BUFFER_H

#include <stddef.h>

/* The users; a Winograd convolution's buffer must not be the sgemm
 * workspace its products use meanwhile. */
typedef enum nimble_thread_buffer_id {
  NIMBLE_THREAD_BUFFER_SGEMM = 0, /* the own sgemm's packing workspace */
  NIMBLE_THREAD_BUFFER_WINOGRAD,  /* a Winograd convolution's blocks */
  NIMBLE_THREAD_BUFFER_TRANSPOSED, /* the own sgemm's product computed as C^T */
  NIMBLE_THREAD_BUFFER_COUNT,
} nimble_thread_buffer_id;

/* The calling thread's buffer `id`, at least `floats` floats, 64-byte
 * aligned; its contents do not survive a call that grows it. NULL when
 * memory runs out (the buffer kept before stays). */
float *nimble_thread_buffer(nimble_thread_buffer_id id, size_t floats);

#endif
