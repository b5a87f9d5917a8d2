/* The device interface (runtime/src/device/device.h) exercised without a
 * GPU: "hostdev", a device on host memory defined here, is registered in
 * place of CUDA (the executable format has kernel parts for cpu and cuda
 * only) and runs programs with DeviceCopy and kernel launches, so the
 * loader's and the VM's device code runs under test on any machine.
 *
 * hostdev behaves like an asynchronous device: uploads, copies within the
 * device and launches are queued on the stream and run only when the
 * stream is waited for (a copy to the host waits first), so the VM's
 * ordering rules are observable: an upload reads its source when the
 * stream runs, so a source the VM let go of too early would show up as
 * wrong data (or a use after free under ASan). Every pointer the VM hands
 * it for device memory is checked against the live allocations, and
 * everything it does is counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "rt_test_util.h"

/* ---- hostdev ---- */

typedef int32_t (*hd_kernel_fn)(DLTensor *const *args, int32_t num_args);

static struct {
  int allocs, frees, live;
  int streams_created, streams_destroyed, syncs;
  int modules_loaded, modules_unloaded;
  int uploads, downloads, device_copies, launches, kernels_run;
} g;

#define MAX_LIVE 256
static struct {
  char *p;
  uint64_t size;
} g_live[MAX_LIVE];

static int in_device(const void *p, uint64_t size) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (g_live[i].p && (const char *)p >= g_live[i].p && size <= g_live[i].size &&
        (uint64_t)((const char *)p - g_live[i].p) <= g_live[i].size - size)
      return 1;
  return 0;
}

static nimble_status_t hd_alloc(const nimble_device_t *dev, uint64_t size, uint64_t alignment, void **out) {
  void *p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : (size_t)alignment,
                     size ? (size_t)size : 1) != 0)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "hostdev: out of memory");
  for (int i = 0; i < MAX_LIVE; i++)
    if (!g_live[i].p) {
      g_live[i].p = p;
      g_live[i].size = size;
      g.allocs++;
      g.live++;
      *out = p;
      return nimble_ok();
    }
  free(p);
  return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "hostdev: too many blocks");
}

static void hd_free(const nimble_device_t *dev, void *ptr) {
  for (int i = 0; i < MAX_LIVE; i++)
    if (g_live[i].p == ptr) {
      g_live[i].p = NULL;
      g.frees++;
      g.live--;
      free(ptr);
      return;
    }
  ck_abort_msg("hostdev: free of %p, which it did not allocate", ptr);
}

typedef struct hd_op {
  int launch;
  /* a copy */
  void *dst;
  const void *src;
  uint64_t size;
  /* a launch: the arguments as they were at the call (structs and shapes
   * copied, as a real device stages them) */
  hd_kernel_fn fn;
  const char *name;
  int32_t num_args;
  DLTensor args[8];
  int64_t shapes[8][8];
} hd_op;

typedef struct hd_stream {
  hd_op *ops;
  size_t n, cap;
} hd_stream;

/* Runs what is queued, in order; a kernel that fails fails the stream
 * (what is queued after it is dropped, as on a real device). */
static nimble_status_t hd_run(hd_stream *s) {
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; i < s->n && !st; i++) {
    hd_op *op = &s->ops[i];
    if (!op->launch) {
      if (op->size) memmove(op->dst, op->src, (size_t)op->size);
      continue;
    }
    DLTensor *argv[8];
    for (int32_t a = 0; a < op->num_args; a++) argv[a] = &op->args[a];
    g.kernels_run++;
    int32_t rc = op->fn(argv, op->num_args);
    if (rc != 0)
      st = nimble_status_make(NIMBLE_INTERNAL, "hostdev: kernel '%s' failed with code %d", op->name, rc);
  }
  s->n = 0;
  return st;
}

static nimble_status_t hd_queue(hd_stream *s, hd_op **out) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    hd_op *ops = realloc(s->ops, cap * sizeof *ops);
    if (!ops) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "hostdev: out of memory");
    s->ops = ops;
    s->cap = cap;
  }
  *out = &s->ops[s->n++];
  memset(*out, 0, sizeof **out);
  return nimble_ok();
}

static nimble_status_t hd_copy(const nimble_device_t *dev, void *dst, DLDeviceType dst_type, const void *src,
                               DLDeviceType src_type, uint64_t size, void *stream) {
  ck_assert_msg(dst_type == dev->type || src_type == dev->type, "hostdev asked for a copy it is not part of");
  if (dst_type == dev->type && !in_device(dst, size))
    return nimble_status_make(NIMBLE_INTERNAL, "hostdev: copy into %p, not device memory", dst);
  if (src_type == dev->type && !in_device(src, size))
    return nimble_status_make(NIMBLE_INTERNAL, "hostdev: copy from %p, not device memory", src);
  hd_stream *s = stream;
  if (dst_type == kDLCPU) {
    g.downloads++;
    /* The host reads it when this returns: run what is queued first. */
    if (s) NIMBLE_RETURN_IF_ERROR(hd_run(s));
    if (size) memmove(dst, src, (size_t)size);
    return nimble_ok();
  }
  if (src_type == kDLCPU) g.uploads++;
  else g.device_copies++;
  if (!s) {
    if (size) memmove(dst, src, (size_t)size);
    return nimble_ok();
  }
  hd_op *op;
  NIMBLE_RETURN_IF_ERROR(hd_queue(s, &op));
  op->dst = dst;
  op->src = src;
  op->size = size;
  return nimble_ok();
}

static nimble_status_t hd_stream_create(const nimble_device_t *dev, void **out) {
  hd_stream *s = calloc(1, sizeof *s);
  if (!s) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "hostdev: out of memory");
  g.streams_created++;
  *out = s;
  return nimble_ok();
}

static nimble_status_t hd_stream_sync(const nimble_device_t *dev, void *stream) {
  g.syncs++;
  return hd_run(stream);
}

static void hd_stream_destroy(const nimble_device_t *dev, void *stream) {
  hd_stream *s = stream;
  nimble_status_free(hd_run(s));
  free(s->ops);
  free(s);
  g.streams_destroyed++;
}

/* The kernels a module may name. */
static int32_t hd_vadd_f32(DLTensor *const *args, int32_t num_args) {
  if (num_args != 3) return 1;
  int64_t n = args[2]->ndim ? args[2]->shape[0] : 1;
  const float *a = args[0]->data, *b = args[1]->data;
  float *c = args[2]->data;
  for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
  return 0;
}

static int32_t hd_fail(DLTensor *const *args, int32_t num_args) { return 3; }

static const struct {
  const char *name;
  hd_kernel_fn fn;
} kKernels[] = {{"hd_vadd_f32", hd_vadd_f32}, {"hd_fail", hd_fail}};

/* A module image is the names of its kernels, one a line. */
typedef struct hd_module {
  hd_kernel_fn fns[8];
  char names[8][32];
  int n;
} hd_module;

static nimble_status_t hd_module_load(const nimble_device_t *dev, const uint8_t *image, size_t size,
                                      void **out) {
  hd_module *m = calloc(1, sizeof *m);
  if (!m) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "hostdev: out of memory");
  size_t at = 0;
  while (at < size) {
    size_t end = at;
    while (end < size && image[end] != '\n') end++;
    size_t len = end - at;
    int found = 0;
    for (size_t k = 0; k < sizeof kKernels / sizeof kKernels[0] && len; k++)
      if (strlen(kKernels[k].name) == len && !memcmp(kKernels[k].name, image + at, len) && m->n < 8) {
        m->fns[m->n] = kKernels[k].fn;
        memcpy(m->names[m->n], image + at, len);
        m->n++;
        found = 1;
      }
    if (len && !found) {
      free(m);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "hostdev: the module names an unknown kernel '%.*s'",
                                (int)len, (const char *)image + at);
    }
    at = end + 1;
  }
  g.modules_loaded++;
  *out = m;
  return nimble_ok();
}

static nimble_status_t hd_module_function(const nimble_device_t *dev, void *module, const char *name,
                                          void **out) {
  hd_module *m = module;
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->names[i], name)) {
      memcpy(out, &m->fns[i], sizeof m->fns[i]);
      return nimble_ok();
    }
  return nimble_status_make(NIMBLE_NOT_FOUND, "the hostdev kernel module has no entry '%s'", name);
}

static void hd_module_unload(const nimble_device_t *dev, void *module) {
  g.modules_unloaded++;
  free(module);
}

static nimble_status_t hd_launch(const nimble_device_t *dev, void *stream, void *fn, const char *name,
                                 DLTensor *const *args, int32_t num_args) {
  ck_assert_int_le(num_args, 8);
  hd_stream *s = stream;
  ck_assert_ptr_nonnull(s);
  hd_op *op;
  NIMBLE_RETURN_IF_ERROR(hd_queue(s, &op));
  op->launch = 1;
  memcpy(&op->fn, &fn, sizeof op->fn);
  op->name = name; /* the executable's symbol, alive while it is loaded */
  op->num_args = num_args;
  for (int32_t i = 0; i < num_args; i++) {
    const DLTensor *a = args[i];
    ck_assert_int_le(a->ndim, 8);
    uint64_t nbytes = (uint64_t)(a->dtype.bits / 8) * a->dtype.lanes;
    for (int32_t d = 0; d < a->ndim; d++) nbytes *= (uint64_t)a->shape[d];
    char *data = a->data ? (char *)a->data + a->byte_offset : NULL;
    if (nbytes && !in_device(data, nbytes)) {
      s->n--;
      return nimble_status_make(NIMBLE_INTERNAL, "hostdev: argument %d of '%s' is not device memory", i,
                                name);
    }
    op->args[i] = *a;
    op->args[i].data = data;
    op->args[i].byte_offset = 0;
    op->args[i].strides = NULL;
    if (a->ndim) memcpy(op->shapes[i], a->shape, (size_t)a->ndim * sizeof(int64_t));
    op->args[i].shape = op->shapes[i];
  }
  g.launches++;
  return nimble_ok();
}

static const nimble_device_t kHostDev = {
    .name = "hostdev",
    .type = kDLCUDA,
    .max_alignment = 256,
    .alloc = hd_alloc,
    .free = hd_free,
    .copy = hd_copy,
    .stream_create = hd_stream_create,
    .stream_destroy = hd_stream_destroy,
    .stream_sync = hd_stream_sync,
    .module_load = hd_module_load,
    .module_function = hd_module_function,
    .module_unload = hd_module_unload,
    .launch = hd_launch,
};

static void setup(void) {
  memset(&g, 0, sizeof g);
  NIMBLE_ASSERT_OK(nimble_device_register(&kHostDev));
}

static void teardown(void) { nimble_device_unregister(kDLCUDA); }

/* ---- programs ---- */

static const char kModule[] = "hd_vadd_f32\nhd_fail\n";

static void fill(float *a, float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    a[i] = (float)((i * 7919) % 1000) * 0.25f - 100.0f;
    b[i] = (float)((i * 104729) % 997) * 0.5f + 0.125f;
  }
}

static void add_vadd_entry(nimble_executable_builder *b, const char *name, uint32_t f, int64_t n) {
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, &n, NULL), rt_info("b", RT_F32, 1, &n, NULL)};
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, name, f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
}

/* main(a, b) -> a + b on the device: both inputs uploaded, the sum into
 * device storage by `kernel`, copied within the device, then back. */
static nimble_executable_builder *device_vadd_builder(const char *kernel, int64_t n) {
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, kModule, strlen(kModule)));
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, kernel, kDLCUDA, &k));
  uint32_t f = rt_function(b, "main", 2, 10);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 2, 0, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 1, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 4, n * 4);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 7, 5, 6, kDLFloat, 32, 1, n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 2, 3, 7);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 8, 7, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 9, 8, kDLCPU, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 9);
  add_vadd_entry(b, "main", f, n);
  return b;
}

/* Sets a and b, invokes main and returns its output (caller deletes). */
static DLManagedTensor *run_vadd(nimble_vm *vm, float *a, float *b, int64_t n) {
  int64_t shape[1] = {n};
  DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(b, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *out;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &out));
  ck_assert_int_eq(out->dl_tensor.device.device_type, kDLCPU);
  ck_assert_int_eq(out->dl_tensor.ndim, 1);
  ck_assert_int_eq(out->dl_tensor.shape[0], n);
  return out;
}

static void check_sum(const DLManagedTensor *out, const float *a, const float *b, int64_t n) {
  const float *c = out->dl_tensor.data;
  for (int64_t i = 0; i < n; i++) {
    float want = a[i] + b[i];
    ck_assert_msg(memcmp(&c[i], &want, sizeof want) == 0, "element %lld: %g, want %g", (long long)i, c[i],
                  want);
  }
}

START_TEST(test_copies_and_a_launch_run_through_the_device_table) {
  const int64_t n = 1000;
  nimble_executable_builder *b = device_vadd_builder("hd_vadd_f32", n);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  ck_assert_int_eq(g.modules_loaded, 1);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  /* Opened with the VM, since the executable has kernels there. */
  ck_assert_int_eq(g.streams_created, 1);
  float a[1000], bb[1000];
  fill(a, bb, n);
  for (int round = 0; round < 3; round++) {
    DLManagedTensor *out = run_vadd(vm, a, bb, n);
    check_sum(out, a, bb, n);
    out->deleter(out);
    /* Per invoke: two uploads, one launch, one copy within the device,
     * one download; the pool reuses its blocks from the second on. */
    ck_assert_int_eq(g.uploads, 2 * (round + 1));
    ck_assert_int_eq(g.launches, round + 1);
    ck_assert_int_eq(g.kernels_run, round + 1);
    ck_assert_int_eq(g.device_copies, round + 1);
    ck_assert_int_eq(g.downloads, round + 1);
    ck_assert_int_eq(g.allocs, 4);
  }
  ck_assert_int_eq(g.streams_created, 1);
  ck_assert_int_ge(g.syncs, 3); /* at least once per invoke */
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
  ck_assert_uint_eq(st.bytes_in_use, 0);
  ck_assert_uint_ge(st.bytes_reserved, 4 * 4000);
  nimble_vm_trim_memory(vm);
  ck_assert_int_eq(g.live, 0);
  nimble_vm_destroy(vm);
  ck_assert_int_eq(g.streams_destroyed, 1);
  ck_assert_int_eq(g.modules_unloaded, 0);
  nimble_executable_release(exe);
  ck_assert_int_eq(g.modules_unloaded, 1);
  ck_assert_int_eq(g.frees, g.allocs);
}
END_TEST

START_TEST(test_an_upload_keeps_its_source_until_the_stream_has_run) {
  /* t1 = a + b on the host, uploaded, then dropped; t2 = a + a on the host
   * takes the block t1 gave back to the pool, unless the VM still holds t1
   * for its queued upload. The result must be a + b. */
  const int64_t n = 64;
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, kModule, strlen(kModule)));
  int64_t vadd = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 2, 12);
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, &n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 5, 2, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_KILL_REGISTER, 2);
  RT_EMIT(b, f, NIMBLE_OP_KILL_REGISTER, 3);
  rt_emit_alloc(b, f, 6, 7, 8, RT_F32, 1, &n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 0, 6);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 9, 5, kDLCPU, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 9);
  add_vadd_entry(b, "main", f, n);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  /* No kernel runs on the device: it is opened at the first upload. */
  ck_assert_int_eq(g.modules_loaded, 0);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  ck_assert_int_eq(g.streams_created, 0);
  float a[64], bb[64];
  fill(a, bb, n);
  DLManagedTensor *out = run_vadd(vm, a, bb, n);
  check_sum(out, a, bb, n);
  out->deleter(out);
  ck_assert_int_eq(g.streams_created, 1);
  ck_assert_int_eq(g.uploads, 1);
  ck_assert_int_eq(g.downloads, 1);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  ck_assert_int_eq(g.live, 0);
}
END_TEST

/* main(a) -> a + c on the device, c a constant; "bad" hands the device
 * copy of c to the kernel as its output. */
static nimble_executable *constant_program(const float *c, int64_t n) {
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, kModule, strlen(kModule)));
  uint32_t k, kc;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "hd_vadd_f32", kDLCUDA, &k));
  int64_t shape[1] = {n};
  DLTensor ct = rt_tensor((void *)c, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &ct, &kc));
  nimble_tensor_info_t in = rt_info("a", RT_F32, 1, &n, NULL);
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  for (int bad = 0; bad < 2; bad++) {
    uint32_t f = rt_function(b, bad ? "bad" : "main", 1, 9);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 1, 0, kDLCUDA, 0);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 2, kc);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 2, kDLCUDA, 0);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 4, n * 4);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 7, 5, 6, kDLFloat, 32, 1, n);
    if (bad)
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 1, 1, 3);
    else
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 1, 3, 7);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 8, 7, kDLCPU, 0);
    RT_EMIT(b, f, NIMBLE_OP_RET, 8);
    NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, bad ? "bad" : "main", f, &in, 1, &out, 1));
  }
  rt_info_free(&in);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

START_TEST(test_a_constant_goes_to_the_device_once_per_vm) {
  const int64_t n = 100;
  float c[100], x[100];
  fill(x, c, n);
  nimble_executable *exe = constant_program(c, n);
  int64_t shape[1] = {n};
  for (int vms = 0; vms < 2; vms++) {
    nimble_vm *vm;
    NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
    int uploads_before = g.uploads;
    for (int round = 0; round < 3; round++) {
      DLTensor tx = rt_tensor(x, RT_F32, 1, shape);
      NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
      NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
      DLManagedTensor *o;
      NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
      check_sum(o, x, c, n);
      o->deleter(o);
      /* The input every time, the constant the first time only. */
      ck_assert_int_eq(g.uploads - uploads_before, round + 2);
    }
    /* The device copy stays in the VM's pool, in use, until the VM goes. */
    nimble_memory_stats_t st;
    NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
    ck_assert_uint_ge(st.bytes_in_use, (uint64_t)n * 4);
    nimble_vm_destroy(vm);
  }
  nimble_executable_release(exe);
  ck_assert_int_eq(g.live, 0);
}
END_TEST

START_TEST(test_a_kernel_may_not_write_the_device_copy_of_a_constant) {
  const int64_t n = 16;
  float c[16], x[16];
  fill(x, c, n);
  nimble_executable *exe = constant_program(c, n);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t shape[1] = {n};
  DLTensor tx = rt_tensor(x, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "bad", 0, &tx));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "bad"), NIMBLE_INVALID_ARGUMENT,
                      "entry 'bad': function 'bad' pc 7 (InvokePacked): output 0 of kernel 'hd_vadd_f32' is "
                      "the device copy of a constant");
  ck_assert_int_eq(g.launches, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_a_kernel_that_fails_on_the_device_fails_the_invoke_that_queued_it) {
  const int64_t n = 8;
  nimble_executable_builder *b = device_vadd_builder("hd_fail", n);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float a[8], bb[8];
  fill(a, bb, n);
  int64_t shape[1] = {n};
  DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(bb, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  /* The launch is queued; the failure surfaces at the download, which
   * waits for it. */
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "entry 'main': function 'main' pc 8 (DeviceCopy): hostdev: kernel 'hd_fail' failed "
                      "with code 3");
  ck_assert_int_eq(nimble_vm_num_outputs(vm), 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  ck_assert_int_eq(g.live, 0);
}
END_TEST

START_TEST(test_a_kernel_missing_from_the_device_module_is_refused_at_load) {
  nimble_executable_builder *b = device_vadd_builder("hd_nope", 8);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_NOT_FOUND,
                      "kernel 'hd_nope' (kernel 0): the hostdev kernel module has no entry 'hd_nope'");
  nimble_builder_destroy(b);
  /* The module was loaded, then unloaded with the failed executable. */
  ck_assert_int_eq(g.modules_loaded, 1);
  ck_assert_int_eq(g.modules_unloaded, 1);
}
END_TEST

START_TEST(test_a_module_the_device_refuses_fails_the_load_with_its_message) {
  nimble_executable_builder *b = rt_builder();
  static const char bad[] = "hd_vadd_f32\nsomething_else\n";
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, bad, strlen(bad)));
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "hd_vadd_f32", kDLCUDA, &k));
  uint32_t f = rt_function(b, "main", 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  add_vadd_entry(b, "main", f, 4);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_INVALID_ARGUMENT,
                      "hostdev: the module names an unknown kernel 'something_else'");
  nimble_builder_destroy(b);
  ck_assert_int_eq(g.modules_loaded, 0);
}
END_TEST

START_TEST(test_a_device_kernel_refuses_a_host_tensor) {
  const int64_t n = 4;
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, kModule, strlen(kModule)));
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "hd_vadd_f32", kDLCUDA, &k));
  uint32_t f = rt_function(b, "main", 2, 5);
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, &n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  add_vadd_entry(b, "main", f, n);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float a[4] = {1, 2, 3, 4}, bb[4] = {5, 6, 7, 8};
  int64_t shape[1] = {n};
  DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(bb, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INVALID_ARGUMENT,
                      "pc 4 (InvokePacked): argument 0 of hostdev kernel 'hd_vadd_f32' is on cpu");
  ck_assert_int_eq(g.launches, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_device_memory_other_than_device_0_is_refused) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 3);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 16);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCUDA, 1, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t x = 3;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_UNIMPLEMENTED,
                      "function 'main' pc 1 (AllocStorage): hostdev device 1: this runtime uses device 0 only");
  ck_assert_int_eq(g.streams_created, 0);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_registration_checks_the_table_and_unregistering_restores_the_built_in_device) {
  ck_assert_str_eq(nimble_device_name(kDLCUDA), "hostdev");
  nimble_device_t partial = kHostDev;
  partial.name = "partial";
  partial.launch = NULL;
  NIMBLE_ASSERT_ERROR(nimble_device_register(&partial), NIMBLE_INVALID_ARGUMENT,
                      "device_register: device 'partial' has no launch");
  partial = kHostDev;
  partial.max_alignment = 48;
  NIMBLE_ASSERT_ERROR(nimble_device_register(&partial), NIMBLE_INVALID_ARGUMENT,
                      "has no max_alignment (a power of two)");
  nimble_device_t cpu = kHostDev;
  cpu.type = kDLCPU;
  NIMBLE_ASSERT_ERROR(nimble_device_register(&cpu), NIMBLE_INVALID_ARGUMENT,
                      "device_register: the cpu cannot be replaced");
  const nimble_device_t *dev;
  NIMBLE_ASSERT_OK(nimble_device_get(kDLCUDA, &dev));
  ck_assert_ptr_eq(dev, &kHostDev);
  nimble_device_unregister(kDLCUDA);
  ck_assert_str_eq(nimble_device_name(kDLCUDA), "cuda");
  NIMBLE_ASSERT_OK(nimble_device_get(kDLCPU, &dev));
  ck_assert_str_eq(dev->name, "cpu");
  ck_assert_ptr_null(dev->launch);
}
END_TEST

int main(void) {
  Suite *s = suite_create("vm_device");
  TCase *tc = tcase_create("hostdev");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_copies_and_a_launch_run_through_the_device_table);
  tcase_add_test(tc, test_an_upload_keeps_its_source_until_the_stream_has_run);
  tcase_add_test(tc, test_a_constant_goes_to_the_device_once_per_vm);
  tcase_add_test(tc, test_a_kernel_may_not_write_the_device_copy_of_a_constant);
  tcase_add_test(tc, test_a_kernel_that_fails_on_the_device_fails_the_invoke_that_queued_it);
  tcase_add_test(tc, test_a_kernel_missing_from_the_device_module_is_refused_at_load);
  tcase_add_test(tc, test_a_module_the_device_refuses_fails_the_load_with_its_message);
  tcase_add_test(tc, test_a_device_kernel_refuses_a_host_tensor);
  tcase_add_test(tc, test_device_memory_other_than_device_0_is_refused);
  tcase_add_test(tc, test_registration_checks_the_table_and_unregistering_restores_the_built_in_device);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
