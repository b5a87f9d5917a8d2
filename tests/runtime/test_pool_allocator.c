/* The pooling allocator keeps a VM's footprint bounded while shapes change
 * from call to call, and honours its cap. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/device_registry.h"
#include "memory/pool_allocator.h"
#include "rt_test_util.h"

enum { WIDTH = 64, MAX_SEQ = 512, CALLS = 10000 };

/* Emits: dst = a fresh f32 tensor shaped like `like`, via ShapeOf, the
 * nbytes shape function, AllocStorage and AllocTensorReg. Uses t..t+4. */
static void emit_alloc_like(nimble_executable_builder *b, uint32_t f, int64_t nbytes_k, int64_t dst,
                            int64_t like, int64_t t) {
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, t, like);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t + 1, 4);
  rt_emit_alloc(b, f, t + 2, t + 3, t + 4, RT_I64, 0, NULL);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, nbytes_k, 1, t, t + 1, t + 2);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, t + 3, t + 2, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t + 4, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR_REG, dst, t + 3, t + 4, t, kDLFloat, 32, 1);
}

/* main(x: f32[?seq, 64]) -> (x + x) + x, the intermediate killed early. */
static nimble_executable *build_model(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t vadd = rt_kernel(b, "vadd_f32"), nb = rt_kernel(b, "nbytes_i64");
  uint32_t f = rt_function(b, "main", 1, 20);
  emit_alloc_like(b, f, nb, 1, 0, 10);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 0, 1);
  emit_alloc_like(b, f, nb, 2, 0, 15);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 1, 0, 2);
  RT_EMIT(b, f, NIMBLE_OP_KILL_REGISTER, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  int64_t dims[2] = {-1, WIDTH};
  const char *sym[2] = {"seq", NULL};
  nimble_tensor_info_t in = rt_info("x", RT_F32, 2, dims, sym), out = rt_info("y", RT_F32, 2, dims, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, &in, 1, &out, 1));
  rt_info_free(&in);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

/* Runs CALLS calls with pseudo-random sequence lengths in [1, MAX_SEQ],
 * checking every output; returns the last status (NULL when all passed). */
static void run_random_calls(nimble_vm *vm, uint32_t seed) {
  float *x = malloc(MAX_SEQ * WIDTH * sizeof(float));
  for (int i = 0; i < MAX_SEQ * WIDTH; i++) x[i] = (float)(i % 97);
  uint32_t state = seed;
  for (int call = 0; call < CALLS; call++) {
    state = state * 1664525u + 1013904223u; /* Numerical Recipes LCG */
    int64_t seq = 1 + (int64_t)((state >> 8) % MAX_SEQ);
    int64_t shape[2] = {seq, WIDTH};
    DLTensor t = rt_tensor(x, RT_F32, 2, shape);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
    DLManagedTensor *y;
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
    ck_assert_int_eq(y->dl_tensor.shape[0], seq);
    const float *p = y->dl_tensor.data;
    int64_t last = seq * WIDTH - 1;
    ck_assert_float_eq(p[0], 0.0f);
    ck_assert_float_eq(p[last], 3.0f * (float)(last % 97));
    y->deleter(y);
  }
  free(x);
}

/* The kernel's transparent huge page mode: 'a'lways, 'm'advise, 'n'ever,
 * or 0 when it cannot be read. */
static char thp_mode(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return 0;
  char line[128] = {0};
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  if (!got) return 0;
  const char *at = strchr(line, '[');
  return at ? at[1] : 0;
}

/* THPeligible of the mapping holding p, from /proc/self/smaps; -1 when
 * not found. */
static int thp_eligible(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int in = 0, result = -1;
  uintptr_t a = (uintptr_t)p;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    int v;
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3) /* a mapping's first line */
      in = a >= lo && a < hi;
    else if (in && sscanf(line, "THPeligible: %d", &v) == 1) {
      result = v;
      break;
    }
  }
  fclose(f);
  return result;
}

/* The CPU device's blocks of 2 MiB and more start on a 2 MiB boundary and
 * are marked for transparent huge pages (docs/vm.md "Memory"): the first
 * invoke touches them page by page otherwise. Where the kernel gives huge
 * pages on request (THP "madvise"), the mapping must say it is eligible;
 * smaller blocks keep their alignment only. */
START_TEST(test_large_cpu_blocks_are_aligned_and_marked_for_huge_pages) {
  const nimble_device_t *cpu = nimble_cpu_device();
  void *big = NULL, *small = NULL;
  NIMBLE_ASSERT_OK(cpu->alloc(cpu, (3u << 20) + 100, 64, &big));
  NIMBLE_ASSERT_OK(cpu->alloc(cpu, 100000, 64, &small));
  ck_assert_uint_eq((uintptr_t)big % (2u << 20), 0);
  ck_assert_uint_eq((uintptr_t)small % 64, 0);
  memset(big, 1, (3u << 20) + 100); /* every byte is the caller's */
  /* A control: a mapping of our own, advised the same way, shows whether
   * this environment reports the advice at all (qemu-user, which runs the
   * aarch64 suites, accepts madvise and ignores it). */
  char mode = thp_mode();
  size_t csize = 4u << 20;
  void *control = mmap(NULL, csize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(control != MAP_FAILED);
  void *aligned = (void *)(((uintptr_t)control + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
  int reported = madvise(aligned, 2u << 20, MADV_HUGEPAGE) == 0 && thp_eligible(aligned) == 1;
  int eligible = thp_eligible(big);
  if ((mode == 'm' || mode == 'a') && reported) {
    ck_assert_msg(eligible == 1, "THP '%c': a 3 MiB block's mapping has THPeligible %d", mode, eligible);
  } else {
    fprintf(stderr, "THP mode '%c', advice %s here: the huge-page advice is not checked\n", mode ? mode : '?',
            reported ? "reported" : "not reported");
  }
  munmap(control, csize);
  cpu->free(cpu, big);
  cpu->free(cpu, small);
}
END_TEST

START_TEST(test_footprint_stays_bounded_over_ten_thousand_random_shapes) {
  nimble_executable *exe = build_model();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  run_random_calls(vm, 12345);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  /* A call holds at most two f32[512, 64] tensors (128 KiB each, a 2^17
   * class) plus a few scalars. Every size class keeps at most the blocks
   * that were live at once in it, so the pool can never hold more than
   * twice the classes up to 2^17, 2 * (2^18 - 64) bytes, plus scalars: well
   * under 4 * 256 KiB. Without pooling it would be 20,000 allocations of
   * up to 128 KiB. */
  ck_assert_uint_le(st.peak_bytes_reserved, 4u * 2u * 131072u);
  ck_assert_uint_ge(st.peak_bytes_reserved, 2u * 4u * WIDTH); /* it did allocate */
  ck_assert_uint_lt(st.system_allocations, 200);
  /* Two tensors and two scalars per call, nearly all from the pool. */
  ck_assert_uint_eq(st.pool_hits + st.system_allocations, 4u * CALLS);
  ck_assert_uint_eq(st.bytes_in_use, 0);
  /* Trimming hands the cached blocks back. */
  nimble_vm_trim_memory(vm);
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_eq(st.bytes_reserved, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_a_tight_cap_is_respected_by_trimming_the_pool) {
  nimble_executable *exe = build_model();
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  /* Enough for one call's two 128 KiB blocks and its scalars, not for a
   * cache of other size classes beside them. */
  opt.memory_cap_bytes = 2 * 131072 + 4096;
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &opt, &vm));
  run_random_calls(vm, 777);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_le(st.peak_bytes_reserved, opt.memory_cap_bytes);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_workspace_counts_against_the_cap) {
  /* matmul_f32 takes an n-float row from the workspace: with a cap below
   * that the kernel reports it could not get one. */
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "matmul_f32");
  uint32_t f = rt_function(b, "main", 2, 6);
  int64_t sa[2] = {1, 1}, sb[2] = {1, 8192}, sc[2] = {1, 8192};
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 2, sc);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in[2] = {rt_info("A", RT_F32, 2, sa, NULL), rt_info("B", RT_F32, 2, sb, NULL)};
  nimble_tensor_info_t out = rt_info("C", RT_F32, 2, sc, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.memory_cap_bytes = 40000; /* the 32 KiB output fits, a second 32 KiB row does not */
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &opt, &vm));
  float a = 2, *bb = calloc(8192, sizeof(float));
  DLTensor ta = rt_tensor(&a, RT_F32, 2, sa), tb = rt_tensor(bb, RT_F32, 2, sb);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "kernel 'matmul_f32' failed with code 3: matmul_f32: no workspace");
  nimble_vm_destroy(vm);
  free(bb);
  nimble_executable_release(exe);
}
END_TEST

/* ---- The owner's cache (pool_allocator.h "Owned") ----------------------- */

enum { HANDOFFS = 4000 };

/* A block the owner handed to the freeing thread, as outputs go to an
 * application that frees them on a thread of its own: its size is in its
 * first bytes. */
static void free_elsewhere(void *item, void *ctx) {
  nimble_pool *p = ctx;
  uint64_t size;
  memcpy(&size, item, sizeof size);
  nimble_pool_free(p, item, size);
  nimble_pool_release(p); /* the storage's reference */
}

/* The owning thread allocates, frees and takes references without the
 * lock while another thread frees half of its blocks and drops their
 * references: the counts add up once the owner gives the pool up, and
 * the last reference frees it exactly once (the asan stage's leak and
 * use-after-free checks, the tsan stage's race check). */
START_TEST(test_an_owner_and_a_freeing_thread_share_the_pool) {
  nimble_pool *p;
  NIMBLE_ASSERT_OK(nimble_pool_create(nimble_cpu_device(), 0, &p));
  rt_handoff h;
  rt_handoff_start(&h, free_elsewhere, p);
  nimble_pool_own(p, 1);
  for (int i = 0; i < HANDOFFS; i++) {
    void *b;
    uint64_t size;
    NIMBLE_ASSERT_OK(nimble_pool_alloc(p, 64u << (i % 5), 64, &b, &size));
    /* Its class, or a cached block up to four times larger. */
    ck_assert(size >= (64u << (i % 5)) && size <= (256u << (i % 5)));
    memset(b, i & 0xff, size); /* the whole block is the caller's */
    nimble_pool_retain(p);
    if (i % 2) {
      nimble_pool_free(p, b, size);
      nimble_pool_release(p);
      continue;
    }
    memcpy(b, &size, sizeof size);
    rt_handoff_push(&h, b);
  }
  rt_handoff_finish(&h);
  nimble_memory_stats_t mid, st;
  nimble_pool_stats(p, &mid);
  nimble_pool_own(p, 0);
  nimble_pool_stats(p, &st);
  /* Every block came back; each allocation was a hit or a new block, and
   * the owner's hits count once it gave the pool up. */
  ck_assert_uint_eq(st.bytes_in_use, 0);
  ck_assert_uint_eq(st.pool_hits + st.system_allocations, HANDOFFS);
  ck_assert_uint_gt(st.pool_hits, mid.pool_hits);
  /* At most RT_HANDOFF_RING + 2 blocks are in use at once, so no size
   * class ever needs more blocks than that: 4000 allocations, the rest
   * reused. */
  ck_assert_uint_le(st.system_allocations, 5 * (RT_HANDOFF_RING + 2));
  nimble_pool_trim(p);
  nimble_pool_stats(p, &st);
  ck_assert_uint_eq(st.bytes_reserved, 0);
  nimble_pool_release(p); /* the last reference: the pool goes */
}
END_TEST

/* Under a cap, a block in the owner's cache is given back to the device
 * when a request of another size would not fit beside it. */
START_TEST(test_an_owners_cached_blocks_yield_to_the_cap) {
  nimble_pool *p;
  NIMBLE_ASSERT_OK(nimble_pool_create(nimble_cpu_device(), 16384 + 4096, &p));
  nimble_pool_own(p, 1);
  void *a, *b;
  uint64_t sa, sb;
  NIMBLE_ASSERT_OK(nimble_pool_alloc(p, 4096, 64, &a, &sa));
  ck_assert_uint_eq(sa, 4096u);
  nimble_pool_free(p, a, sa); /* cached: 4 KiB reserved */
  NIMBLE_ASSERT_OK(nimble_pool_alloc(p, 8192, 64, &a, &sa)); /* beside it: 12 KiB */
  ck_assert_uint_eq(sa, 8192u);
  nimble_pool_free(p, a, sa);
  /* 16 KiB fits only once both cached blocks are gone. */
  NIMBLE_ASSERT_OK(nimble_pool_alloc(p, 8192 + 1, 64, &b, &sb));
  ck_assert_uint_eq(sb, 16384u);
  nimble_pool_free(p, b, sb);
  nimble_pool_own(p, 0);
  nimble_memory_stats_t st;
  nimble_pool_stats(p, &st);
  ck_assert_uint_eq(st.system_allocations, 3);
  ck_assert_uint_eq(st.bytes_reserved, 16384u); /* the two cached blocks went back */
  ck_assert_uint_le(st.peak_bytes_reserved, 16384u + 4096u);
  ck_assert_uint_eq(st.bytes_in_use, 0);
  nimble_pool_release(p);
}
END_TEST

Suite *pool_suite(void) {
  Suite *s = suite_create("pool_allocator");
  TCase *tc = tcase_create("pool");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_footprint_stays_bounded_over_ten_thousand_random_shapes);
  tcase_add_test(tc, test_a_tight_cap_is_respected_by_trimming_the_pool);
  tcase_add_test(tc, test_workspace_counts_against_the_cap);
  tcase_add_test(tc, test_large_cpu_blocks_are_aligned_and_marked_for_huge_pages);
  tcase_add_test(tc, test_an_owner_and_a_freeing_thread_share_the_pool);
  tcase_add_test(tc, test_an_owners_cached_blocks_yield_to_the_cap);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(pool_suite()); }
