/* One loaded executable shared by VMs on eight threads: every result stays
 * exact, and outputs released on another thread go back to their own
 * VM's pool. Also run under ThreadSanitizer (ctest label `tsan`). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test_util.h"

enum { THREADS = 8, ROUNDS = 150, N = 8192 };

static float weights[N];

/* b serialized into 64-byte aligned memory (*size bytes, the caller frees
 * it), so that a borrowed load uses its constants in place. */
static void *serialize_aligned(nimble_executable_builder *b, size_t *size) {
  void *data;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, size));
  void *aligned = aligned_alloc(64, (*size + 63) / 64 * 64);
  memcpy(aligned, data, *size);
  free(data);
  return aligned;
}

/* Entries: fact(n) (recursion) and addw(x: f32[8192]) = x + w, w a constant
 * shared by all VMs, added by a kernel that uses parallel_for. With `image`
 * the executable is loaded borrowed from *image (64-byte aligned, freed by
 * the caller after the executable): its kernels are then checked and
 * mapped by whichever VM is created first (docs/executable.md, "Kernels on
 * first VM"); without, copied and mapped at load. */
static nimble_executable *build_shared_from(void **image) {
  nimble_executable_builder *b = rt_builder();
  int64_t sub = rt_kernel(b, "sub_i64"), mul = rt_kernel(b, "mul_i64"), vadd = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "fact", 1, 10);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_IF, 0, 1, 1, 3);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 1);
  rt_emit_alloc(b, f, 3, 5, 6, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, sub, 1, 0, 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 4, f, 3);
  rt_emit_alloc(b, f, 7, 5, 6, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, mul, 1, 0, 4, 7);
  RT_EMIT(b, f, NIMBLE_OP_RET, 7);
  rt_add_scalar_entry(b, "fact", f, 1);

  for (int i = 0; i < N; i++) weights[i] = (float)i * 0.25f;
  int64_t sn[1] = {N};
  DLTensor cw = rt_tensor(weights, RT_F32, 1, sn);
  uint32_t kw;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &cw, &kw));
  uint32_t g = rt_function(b, "addw", 1, 5);
  RT_EMIT(b, g, NIMBLE_OP_LOAD_CONST, 1, kw);
  rt_emit_alloc(b, g, 2, 3, 4, RT_F32, 1, sn);
  RT_EMIT(b, g, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 1, 2);
  RT_EMIT(b, g, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in = rt_info("x", RT_F32, 1, sn, NULL), out = rt_info("y", RT_F32, 1, sn, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "addw", g, &in, 1, &out, 1));
  rt_info_free(&in);
  rt_info_free(&out);
  nimble_executable *exe = NULL;
  if (image) {
    size_t size;
    *image = serialize_aligned(b, &size);
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(*image, size, NIMBLE_LOAD_BORROW, &exe));
  } else {
    exe = rt_load(b);
  }
  nimble_builder_destroy(b);
  return exe;
}

static nimble_executable *build_shared(void) { return build_shared_from(NULL); }

typedef struct worker {
  nimble_executable *exe;
  pthread_barrier_t *start; /* all VMs created at once */
  int id;
  int failures;
  DLManagedTensor *kept; /* an output handed to the main thread */
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.num_threads = 2;
  nimble_vm *vm;
  pthread_barrier_wait(w->start);
  nimble_status_t s = nimble_vm_create(w->exe, &opt, &vm);
  if (s) {
    nimble_status_free(s);
    w->failures++;
    return NULL;
  }
  float *x = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(w->id * 1000 + i);
  int64_t sn[1] = {N};
  for (int r = 0; r < ROUNDS; r++) {
    int64_t n = (w->id + r) % 15, expect = 1;
    for (int64_t k = 2; k <= n; k++) expect *= k;
    DLTensor tn = rt_tensor(&n, RT_I64, 0, NULL);
    DLManagedTensor *o = NULL;
    s = nimble_vm_set_input(vm, "fact", 0, &tn);
    if (!s) s = nimble_vm_invoke(vm, "fact");
    if (!s) s = nimble_vm_take_output(vm, 0, &o);
    if (s || *(int64_t *)o->dl_tensor.data != expect) w->failures++;
    nimble_status_free(s);
    if (o) o->deleter(o);

    DLTensor tx = rt_tensor(x, RT_F32, 1, sn);
    o = NULL;
    s = nimble_vm_set_input(vm, "addw", 0, &tx);
    if (!s) s = nimble_vm_invoke(vm, "addw");
    if (!s) s = nimble_vm_take_output(vm, 0, &o);
    if (s) {
      w->failures++;
      nimble_status_free(s);
      continue;
    }
    const float *y = o->dl_tensor.data;
    for (int i = 0; i < N; i += 511)
      if (y[i] != x[i] + weights[i]) w->failures++;
    if (r == ROUNDS - 1)
      w->kept = o; /* released by the main thread after the VM is gone */
    else
      o->deleter(o);
  }
  free(x);
  nimble_vm_destroy(vm);
  return NULL;
}

START_TEST(test_eight_threads_share_one_executable) {
  /* _i 0: copied, kernels mapped at load; 1: borrowed, mapped by the
   * first of the eight VMs created at once. */
  void *image = NULL;
  nimble_executable *exe = build_shared_from(_i ? &image : NULL);
  worker w[THREADS];
  pthread_t t[THREADS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){exe, &start, i, 0, NULL};
    ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
  pthread_barrier_destroy(&start);
  nimble_executable_release(exe); /* the kept outputs still hold it */
  for (int i = 0; i < THREADS; i++) {
    ck_assert_msg(w[i].failures == 0, "thread %d saw %d wrong results", i, w[i].failures);
    ck_assert_ptr_nonnull(w[i].kept);
    const float *y = w[i].kept->dl_tensor.data;
    ck_assert_float_eq(y[N - 1], (float)(i * 1000 + N - 1) + weights[N - 1]);
    w[i].kept->deleter(w[i].kept);
  }
  free(image);
}
END_TEST

/* Outputs released on another thread while their VM keeps running: the
 * releaser frees storage into the pool that the VM's next call allocates
 * from. The outputs are taken in order: the r-th is call r's, y[N-1] =
 * (r + N - 1) + weights[N-1]. */
typedef struct released {
  int taken, wrong;
} released;

static void release_output(void *item, void *ctx) {
  DLManagedTensor *o = item;
  released *r = ctx;
  if (((const float *)o->dl_tensor.data)[N - 1] != (float)(r->taken + N - 1) + weights[N - 1]) r->wrong++;
  r->taken++;
  o->deleter(o);
}

START_TEST(test_outputs_released_on_another_thread_while_the_vm_runs) {
  nimble_executable *exe = build_shared();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  released rel = {0, 0};
  rt_handoff h;
  rt_handoff_start(&h, release_output, &rel);
  float *x = malloc(N * sizeof(float));
  int64_t sn[1] = {N};
  for (int r = 0; r < 400; r++) {
    for (int i = 0; i < N; i++) x[i] = (float)(r + i);
    DLTensor tx = rt_tensor(x, RT_F32, 1, sn);
    DLManagedTensor *o;
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "addw", 0, &tx));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "addw"));
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
    rt_handoff_push(&h, o);
  }
  rt_handoff_finish(&h);
  ck_assert_int_eq(rel.taken, 400);
  ck_assert_int_eq(rel.wrong, 0);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_eq(st.bytes_in_use, 0);
  /* At most 64 outputs in flight plus one being built: the pool reuses. */
  ck_assert_uint_le(st.system_allocations, 2 * 66);
  free(x);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

/* Weights verified on first use (docs/executable.md, "Chunk digests"): a
 * 3 MiB constant, returned as the output, loaded borrowed so that its 4
 * chunks are hashed by whichever VMs first load it, concurrently. */
enum { BIG = 3 << 18 }; /* floats: 3 MiB */

static void *big_image(size_t *size) {
  static float big[BIG];
  for (int i = 0; i < BIG; i++) big[i] = (float)(i % 4099) - 2000.0f;
  nimble_executable_builder *b = rt_builder();
  int64_t sn[1] = {BIG};
  DLTensor c = rt_tensor(big, RT_F32, 1, sn);
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &c, &k));
  uint32_t g = rt_function(b, "big", 0, 1);
  RT_EMIT(b, g, NIMBLE_OP_LOAD_CONST, 0, k);
  RT_EMIT(b, g, NIMBLE_OP_RET, 0);
  nimble_tensor_info_t out = rt_info("y", RT_F32, 1, sn, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "big", g, NULL, 0, &out, 1));
  rt_info_free(&out);
  void *aligned = serialize_aligned(b, size); /* used in place */
  nimble_builder_destroy(b);
  return aligned;
}

typedef struct big_worker {
  nimble_executable *exe;
  nimble_status_t status;
  int wrong;
} big_worker;

static void *big_main(void *arg) {
  big_worker *w = arg;
  nimble_vm *vm;
  w->status = nimble_vm_create(w->exe, NULL, &vm);
  if (w->status) return NULL;
  DLManagedTensor *o = NULL;
  w->status = nimble_vm_invoke(vm, "big");
  if (!w->status) w->status = nimble_vm_take_output(vm, 0, &o);
  if (o) {
    const float *y = o->dl_tensor.data;
    for (int i = 0; i < BIG; i += 997)
      if (y[i] != (float)(i % 4099) - 2000.0f) w->wrong++;
    o->deleter(o);
  }
  nimble_vm_destroy(vm);
  return NULL;
}

START_TEST(test_threads_verify_the_same_weight_chunks_on_first_use) {
  size_t size;
  uint8_t *img = big_image(&size);
  for (int bad = 0; bad < 2; bad++) {
    /* The last section is the chunk list; a byte 2.5 MiB into the file is
     * inside the constant's third chunk. */
    if (bad) img[(5u << 19)] ^= 0x01;
    nimble_executable *exe = NULL;
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
    big_worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
      w[i] = (big_worker){exe, NULL, 0};
      ck_assert_int_eq(pthread_create(&t[i], NULL, big_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
      if (bad)
        NIMBLE_ASSERT_ERROR(w[i].status, NIMBLE_DATA_LOSS, "chunk 2 of 4");
      else
        NIMBLE_ASSERT_OK(w[i].status);
      ck_assert_int_eq(w[i].wrong, 0);
    }
    nimble_executable_release(exe);
  }
  free(img);
}
END_TEST

Suite *threads_suite(void) {
  Suite *s = suite_create("vm_threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 240);
  tcase_add_loop_test(tc, test_eight_threads_share_one_executable, 0, 2);
  tcase_add_test(tc, test_outputs_released_on_another_thread_while_the_vm_runs);
  tcase_add_test(tc, test_threads_verify_the_same_weight_chunks_on_first_use);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(threads_suite()); }
