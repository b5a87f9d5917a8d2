/* The runtime side of the lowering suites (see lower_vm_util.h). */
#include "lower_vm_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/executable_builder.h"
#include "nimble/runtime.h"

const DLDataType LT_F32 = {kDLFloat, 32, 1};
const DLDataType LT_I64 = {kDLInt, 64, 1};

static void *kernels;
static size_t kernels_size;

static void free_kernels(void) { free(kernels); }

static const void *kernel_library(size_t *size) {
  if (!kernels) {
    FILE *f = fopen(NIMBLE_LOWER_TEST_KERNELS_PATH, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    kernels = n > 0 ? malloc((size_t)n) : NULL;
    if (kernels && fread(kernels, 1, (size_t)n, f) != (size_t)n) {
      free(kernels);
      kernels = NULL;
    }
    fclose(f);
    if (!kernels) return NULL;
    kernels_size = (size_t)n;
    atexit(free_kernels);
  }
  *size = kernels_size;
  return kernels;
}

nimble_executable_builder *lt_builder(void) {
  size_t n;
  const void *k = kernel_library(&n);
  nimble_executable_builder *b = NULL;
  if (!k) return NULL;
  nimble_status_t s = nimble_builder_create("test", &b);
  if (!s) s = nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, k, n);
  if (s) {
    nimble_status_free(s);
    nimble_builder_destroy(b);
    return NULL;
  }
  return b;
}

void lt_builder_destroy(nimble_executable_builder *b) { nimble_builder_destroy(b); }

static nimble_status_t load(nimble_executable_builder *b, uint32_t flags, nimble_executable **exe) {
  void *image;
  size_t size;
  NIMBLE_RETURN_IF_ERROR(nimble_builder_serialize(b, &image, &size));
  nimble_status_t s = nimble_executable_load_memory(image, size, flags, exe);
  free(image);
  return s;
}

void lt_values_free(lt_value *v, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    free(v[i].data);
    v[i].data = NULL;
  }
}

nimble_status_t lt_run(nimble_executable_builder *b, uint32_t max_call_depth, const lt_value *in,
                       uint32_t n_in, lt_value *out, uint32_t max_out, uint32_t *n_out) {
  nimble_executable *exe;
  NIMBLE_RETURN_IF_ERROR(load(b, 0, &exe));
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.max_call_depth = max_call_depth;
  nimble_vm *vm;
  nimble_status_t s = nimble_vm_create(exe, &o, &vm);
  nimble_executable_release(exe);
  if (s) return s;
  DLTensor *ts = calloc(n_in ? n_in : 1, sizeof *ts);
  if (!ts) s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  for (uint32_t i = 0; !s && i < n_in; i++) {
    ts[i].data = in[i].data;
    ts[i].device.device_type = kDLCPU;
    ts[i].ndim = in[i].ndim;
    ts[i].dtype = in[i].dtype;
    ts[i].shape = (int64_t *)in[i].shape;
    s = nimble_vm_set_input(vm, "main", i, &ts[i]);
  }
  if (!s) s = nimble_vm_invoke(vm, "main");
  uint32_t n = s ? 0 : nimble_vm_num_outputs(vm);
  if (!s && n > max_out) s = nimble_status_make(NIMBLE_OUT_OF_RANGE, "%u outputs, room for %u", n, max_out);
  for (uint32_t i = 0; !s && i < n; i++) {
    DLManagedTensor *m;
    s = nimble_vm_take_output(vm, i, &m);
    if (s) break;
    DLTensor *t = &m->dl_tensor;
    memset(&out[i], 0, sizeof out[i]);
    out[i].dtype = t->dtype;
    out[i].ndim = t->ndim;
    size_t bytes = (size_t)(t->dtype.bits / 8) * t->dtype.lanes;
    for (int32_t d = 0; d < t->ndim && d < 8; d++) {
      out[i].shape[d] = t->shape[d];
      bytes *= (size_t)t->shape[d];
    }
    out[i].data = malloc(bytes ? bytes : 1);
    if (out[i].data) memcpy(out[i].data, (const char *)t->data + t->byte_offset, bytes);
    m->deleter(m);
    *n_out = i + 1;
  }
  free(ts);
  nimble_vm_destroy(vm);
  return s;
}

nimble_status_t lt_validate(nimble_executable_builder *b) {
  nimble_executable *exe;
  NIMBLE_RETURN_IF_ERROR(load(b, NIMBLE_LOAD_NO_KERNELS, &exe));
  nimble_executable_release(exe);
  return nimble_ok();
}

nimble_status_t lt_entry_signature(nimble_executable_builder *b, const char *entry, char *buf,
                                   size_t size) {
  nimble_executable *exe;
  NIMBLE_RETURN_IF_ERROR(load(b, NIMBLE_LOAD_NO_KERNELS, &exe));
  const nimble_entry_info_t *e;
  nimble_status_t s = nimble_executable_find_entry(exe, entry, &e);
  if (!s) {
    size_t n = (size_t)snprintf(buf, size, "%s(", e->name);
    char shape[128];
    for (uint32_t i = 0; i < e->num_inputs && n < size; i++)
      n += (size_t)snprintf(buf + n, size - n, "%s%s%s", i ? " " : "", e->inputs[i].name,
                            nimble_format_declared_shape(&e->inputs[i], shape, sizeof shape));
    for (uint32_t i = 0; i < e->num_outputs && n < size; i++)
      n += (size_t)snprintf(buf + n, size - n, "%s%s%s", i ? " " : ") -> ", e->outputs[i].name,
                            nimble_format_declared_shape(&e->outputs[i], shape, sizeof shape));
  }
  nimble_executable_release(exe);
  return s;
}

/* ---- reading the bytecode part back (docs/executable.md) ------------------ */

typedef struct rd {
  const unsigned char *p;
  size_t n, pos;
  int bad;
} rd;

static uint64_t get(rd *r, int bytes) {
  uint64_t v = 0;
  if (r->pos + (size_t)bytes > r->n) {
    r->bad = 1;
    return 0;
  }
  for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
  r->pos += (size_t)bytes;
  return v;
}

static const char *get_str(rd *r, uint32_t *len) {
  *len = (uint32_t)get(r, 4);
  if (r->bad || r->pos + *len > r->n) {
    r->bad = 1;
    return "";
  }
  const char *s = (const char *)r->p + r->pos;
  r->pos += *len;
  return s;
}

nimble_status_t lt_function_stats(nimble_executable_builder *b, const char *name, lt_fn_stats *out) {
  void *data;
  size_t size;
  NIMBLE_RETURN_IF_ERROR(nimble_builder_serialize_part(b, NIMBLE_PART_BYTECODE, &data, &size));
  rd r = {data, size, 16, 0};
  uint32_t len, nk = (uint32_t)get(&r, 4);
  for (uint32_t k = 0; k < nk && !r.bad; k++) {
    get_str(&r, &len);
    get(&r, 4);
  }
  uint32_t nf = (uint32_t)get(&r, 4);
  int found = 0;
  for (uint32_t f = 0; f < nf && !r.bad && !found; f++) {
    const char *fname = get_str(&r, &len);
    int match = len == strlen(name) && memcmp(fname, name, len) == 0;
    lt_fn_stats st;
    memset(&st, 0, sizeof st);
    st.params = (uint32_t)get(&r, 4);
    st.registers = (uint32_t)get(&r, 4);
    st.instructions = (uint32_t)get(&r, 4);
    for (uint32_t i = 0; i < st.instructions && !r.bad; i++) {
      uint32_t op = (uint32_t)get(&r, 2), n = (uint32_t)get(&r, 2);
      int64_t o0 = 0, o1 = 0;
      for (uint32_t k = 0; k < n; k++) {
        int64_t v = (int64_t)get(&r, 8);
        if (k == 0) o0 = v;
        if (k == 1) o1 = v;
      }
      if (op < 32) st.count[op]++;
      if (op == NIMBLE_OP_GOTO && (int64_t)i + o0 == 0) st.gotos_to_start++;
      if (op == NIMBLE_OP_INVOKE && o1 == (int64_t)f) st.self_invokes++;
      if (op == NIMBLE_OP_ALLOC_ADT && o1 >= 0 && o1 < 64) st.adt_tags |= 1ull << o1;
    }
    if (match) {
      *out = st;
      found = 1;
    }
  }
  free(data);
  if (r.bad) return nimble_status_make(NIMBLE_DATA_LOSS, "bytecode part is truncated");
  if (!found) return nimble_status_make(NIMBLE_NOT_FOUND, "no function '%s' in the bytecode", name);
  return nimble_ok();
}
