/* The VM's public API: creation, inputs checked against the entry's
 * signature, invocation, and outputs handed out as DLPack managed tensors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "executable/format.h"
#include "nimble/bytecode.h"
#include "vm/vm.h"

void nimble_vm_options_init(nimble_vm_options_t *options) {
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->num_threads = 1;
}

nimble_status_t nimble_vm_create(nimble_executable *exe, const nimble_vm_options_t *options,
                                 nimble_vm **out) {
  if (!exe || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "vm_create: NULL argument");
  if (!exe->kernels_loaded && exe->code.num_kernels > 0)
    return nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                              "vm_create: the executable was loaded without its kernels "
                              "(NIMBLE_LOAD_NO_KERNELS) and cannot run");
  nimble_vm *vm = calloc(1, sizeof *vm);
  if (!vm) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a VM");
  nimble_vm_options_init(&vm->opts);
  if (options) {
    /* Copy only what the caller's (possibly older, smaller) struct has. */
    size_t n = options->struct_size < sizeof vm->opts ? options->struct_size : sizeof vm->opts;
    if (n < sizeof(size_t)) {
      free(vm);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "vm_create: options.struct_size is %zu (use nimble_vm_options_init)",
                                options->struct_size);
    }
    memcpy(&vm->opts, options, n);
    vm->opts.struct_size = sizeof vm->opts;
  }
  if (vm->opts.num_threads > 1024) {
    uint32_t n = vm->opts.num_threads;
    free(vm);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "vm_create: %u threads is too many (at most 1024)", n);
  }
  vm->exe = exe;
  nimble_executable_retain(exe);
  vm->input_entry = -1;
  pthread_mutex_init(&vm->error_mu, NULL);
  nimble_kernel_env_init(vm);
  const nimble_device_t *cpu;
  nimble_status_t s = nimble_device_get(kDLCPU, &cpu);
  if (!s) s = nimble_pool_create(cpu, vm->opts.memory_cap_bytes, &vm->cpu_pool);
  if (!s) s = nimble_thread_pool_create(vm->opts.num_threads, &vm->threads);
  if (!s && exe->device_kernels.module) {
    char why[64];
    nimble_vm_device *d;
    snprintf(why, sizeof why, "this executable has %s kernels", exe->device_kernels.dev->name);
    s = nimble_vm_device_open(vm, exe->device_kernels.dev->type, why, &d);
  }
  if (!s) {
    uint32_t n = exe->code.max_kernel_args ? exe->code.max_kernel_args : 1;
    vm->packed_args = calloc(n, sizeof *vm->packed_args);
    if (!vm->packed_args) s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a VM");
  }
  if (s) {
    nimble_vm_destroy(vm);
    return s;
  }
  *out = vm;
  return nimble_ok();
}

static void clear_outputs(nimble_vm *vm) {
  for (uint32_t i = 0; i < vm->num_outputs; i++) {
    if (vm->outputs[i]) nimble_object_release(&vm->outputs[i]->base);
    vm->outputs[i] = NULL;
  }
  vm->num_outputs = 0;
}

void nimble_vm_destroy(nimble_vm *vm) {
  if (!vm) return;
  for (uint32_t i = 0; i < vm->inputs_cap; i++) nimble_object_release(vm->inputs[i]);
  free(vm->inputs);
  clear_outputs(vm);
  free(vm->outputs);
  free(vm->regs);
  free(vm->frames);
  free(vm->packed_args);
  nimble_thread_pool_destroy(vm->threads);
  nimble_vm_device_deinit_all(vm);
  if (vm->cpu_pool) nimble_pool_release(vm->cpu_pool);
  free(vm->kernel_error);
  pthread_mutex_destroy(&vm->error_mu);
  nimble_executable_release(vm->exe);
  free(vm);
}

nimble_executable *nimble_vm_executable(const nimble_vm *vm) { return vm->exe; }

static nimble_status_t find_entry(const nimble_vm *vm, const char *entry, uint32_t *index) {
  if (!entry) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "NULL entry name");
  const nimble_metadata_t *m = &vm->exe->meta;
  for (uint32_t i = 0; i < m->num_entries; i++)
    if (strcmp(m->entries[i].name, entry) == 0) {
      *index = i;
      return nimble_ok();
    }
  return nimble_status_make(NIMBLE_NOT_FOUND, "the executable has no entry '%s'", entry);
}

static nimble_status_t shape_error(const char *entry, const nimble_tensor_info_t *info,
                                   const DLTensor *t, const char *extra) {
  char have[256], want[256];
  nimble_format_shape(t->ndim, t->shape, have, sizeof have);
  nimble_format_declared_shape(info, want, sizeof want);
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' has shape %s, expected %s%s",
                            entry, info->name, have, want, extra ? extra : "");
}

/* Compact row-major: no strides, or strides equal to the compact ones
 * (dims of size 1 may have any stride). */
static int is_compact(const DLTensor *t) {
  if (!t->strides) return 1;
  int64_t expect = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != expect) return 0;
    expect *= t->shape[d];
  }
  return 1;
}

/* Checks a tensor for the tensor input `in` of `entry`. */
static nimble_status_t check_tensor_input(const char *entry, const nimble_tensor_info_t *in,
                                          const DLTensor *tensor) {
  if (!tensor)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is NULL", entry, in->name);
  char a[32], b[32];
  int same_dtype = tensor->dtype.code == in->dtype.code && tensor->dtype.bits == in->dtype.bits &&
                   tensor->dtype.lanes == in->dtype.lanes;
  if (nimble_dtype_is_bool(in->dtype.code, in->dtype.bits, in->dtype.lanes))
    same_dtype = nimble_dtype_is_bool(tensor->dtype.code, tensor->dtype.bits, tensor->dtype.lanes);
  if (!same_dtype)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' has dtype %s, expected %s",
                              entry, in->name, nimble_format_dtype(tensor->dtype, a, sizeof a),
                              nimble_format_dtype(in->dtype, b, sizeof b));
  if (tensor->device.device_type != in->device.device_type)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is on %s, expected %s",
                              entry, in->name, nimble_device_name(tensor->device.device_type),
                              nimble_device_name(in->device.device_type));
  if (tensor->ndim < 0 || tensor->ndim > NIMBLE_MAX_NDIM || (tensor->ndim && !tensor->shape))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' has a bad rank %d", entry,
                              in->name, tensor->ndim);
  if (tensor->ndim != in->ndim) return shape_error(entry, in, tensor, NULL);
  for (int32_t d = 0; d < in->ndim; d++) {
    if (tensor->shape[d] < 0) return shape_error(entry, in, tensor, NULL);
    if (!in->dims[d].symbol && tensor->shape[d] != in->dims[d].value)
      return shape_error(entry, in, tensor, NULL);
  }
  if (!is_compact(tensor))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "entry '%s': input '%s' is strided; only compact row-major tensors are "
                              "accepted",
                              entry, in->name);
  uint64_t nbytes;
  if (!nimble_tensor_nbytes(tensor->ndim, tensor->shape, tensor->dtype, &nbytes))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is too large", entry, in->name);
  if (!tensor->data && nbytes)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' has no data", entry, in->name);
  return nimble_ok();
}

/* Stores `obj` (a reference the VM now owns) as input `index` of entry `e`. */
static nimble_status_t store_input(nimble_vm *vm, uint32_t e, uint32_t index, nimble_object *obj) {
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  if (vm->input_entry != (int64_t)e) {
    /* Inputs belong to one entry at a time: start over for another. */
    for (uint32_t i = 0; i < vm->inputs_cap; i++) {
      nimble_object_release(vm->inputs[i]);
      vm->inputs[i] = NULL;
    }
    if (vm->inputs_cap < info->num_inputs) {
      nimble_object **ni = realloc(vm->inputs, info->num_inputs * sizeof *ni);
      if (!ni) {
        nimble_object_release(obj);
        return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
      }
      for (uint32_t i = vm->inputs_cap; i < info->num_inputs; i++) ni[i] = NULL;
      vm->inputs = ni;
      vm->inputs_cap = info->num_inputs;
    }
    vm->input_entry = e;
  }
  nimble_object_release(vm->inputs[index]);
  vm->inputs[index] = obj;
  return nimble_ok();
}

nimble_status_t nimble_vm_set_input(nimble_vm *vm, const char *entry, uint32_t index,
                                    const DLTensor *tensor) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  if (index >= info->num_inputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s' has %u inputs, no input %u", entry,
                              info->num_inputs, index);
  if (nimble_tensor_info_is_adt(&info->inputs[index]))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "entry '%s': input '%s' is an ADT; set it with nimble_vm_set_input_value",
                              entry, info->inputs[index].name);
  NIMBLE_RETURN_IF_ERROR(check_tensor_input(entry, &info->inputs[index], tensor));
  /* The declared dtype: a DLPack kDLBool input becomes the runtime's bool. */
  nimble_tensor_obj *t = nimble_tensor_obj_view(NULL, nimble_dl_data(tensor),
                                                tensor->ndim, tensor->shape, info->inputs[index].dtype,
                                                tensor->device);
  if (!t) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  return store_input(vm, e, index, &t->base);
}

nimble_status_t nimble_vm_set_input_by_name(nimble_vm *vm, const char *entry, const char *input,
                                            const DLTensor *tensor) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  for (uint32_t i = 0; i < info->num_inputs; i++)
    if (input && strcmp(info->inputs[i].name, input) == 0) return nimble_vm_set_input(vm, entry, i, tensor);
  return nimble_status_make(NIMBLE_NOT_FOUND, "entry '%s' has no input '%s'", entry, input ? input : "(null)");
}

/* Symbolic dims with the same name must agree across an entry's inputs. */
static nimble_status_t check_symbols(const nimble_vm *vm, const nimble_entry_info_t *info) {
  for (uint32_t i = 0; i < info->num_inputs; i++) {
    const nimble_tensor_info_t *in = &info->inputs[i];
    if (nimble_tensor_info_is_adt(in)) continue; /* its dims describe constructors */
    for (int32_t d = 0; d < in->ndim; d++) {
      const char *sym = in->dims[d].symbol;
      if (!sym || !sym[0]) continue;
      /* Find the first binding of this symbol. */
      for (uint32_t j = 0; j <= i; j++) {
        const nimble_tensor_info_t *jn = &info->inputs[j];
        if (nimble_tensor_info_is_adt(jn)) continue;
        int found = 0;
        for (int32_t k = 0; k < jn->ndim && !(j == i && k >= d); k++) {
          if (!jn->dims[k].symbol || strcmp(jn->dims[k].symbol, sym) != 0) continue;
          const DLTensor *ti = &((const nimble_tensor_obj *)vm->inputs[i])->dl;
          int64_t bound = ((const nimble_tensor_obj *)vm->inputs[j])->dl.shape[k];
          if (bound != ti->shape[d]) {
            char extra[300];
            snprintf(extra, sizeof extra, " with ?%s = %lld (from input '%s')", sym, (long long)bound,
                     jn->name);
            return shape_error(info->name, in, ti, extra);
          }
          found = 1;
          break;
        }
        if (found) break;
      }
    }
  }
  return nimble_ok();
}

/* The outputs must match what the entry declares; a mismatch is a compiler
 * bug, reported rather than handed to the application. */
static nimble_status_t check_output(const nimble_entry_info_t *info, uint32_t i, const nimble_tensor_obj *t) {
  const nimble_tensor_info_t *out = &info->outputs[i];
  int ok = (t->dl.ndim == out->ndim || out->ndim == NIMBLE_NDIM_ANY) && t->dl.dtype.code == out->dtype.code &&
           t->dl.dtype.bits == out->dtype.bits && t->dl.dtype.lanes == out->dtype.lanes;
  for (int32_t d = 0; ok && d < out->ndim; d++)
    if (!out->dims[d].symbol && t->dl.shape[d] != out->dims[d].value) ok = 0;
  if (ok) return nimble_ok();
  char have[256], want[256], a[32], b[32];
  return nimble_status_make(NIMBLE_INTERNAL, "entry '%s': output '%s' is %s %s, declared %s %s", info->name,
                            out->name, nimble_format_dtype(t->dl.dtype, a, sizeof a),
                            nimble_format_shape(t->dl.ndim, t->dl.shape, have, sizeof have),
                            nimble_format_dtype(out->dtype, b, sizeof b),
                            nimble_format_declared_shape(out, want, sizeof want));
}

static nimble_status_t collect_outputs(nimble_vm *vm, const nimble_entry_info_t *info,
                                       nimble_object *result) {
  uint32_t n = info->num_outputs;
  nimble_object **items = &result;
  uint32_t count = 1;
  if (result->kind == NIMBLE_OBJ_ADT && n != 1) {
    nimble_adt_obj *a = (nimble_adt_obj *)result;
    items = a->fields;
    count = a->num_fields;
  }
  if (count != n)
    return nimble_status_make(NIMBLE_INTERNAL, "entry '%s' returned %u values, declared %u outputs",
                              info->name, count, n);
  for (uint32_t i = 0; i < n; i++) {
    if (!items[i] || items[i]->kind != NIMBLE_OBJ_TENSOR)
      return nimble_status_make(NIMBLE_INTERNAL, "entry '%s': output %u is %s, expected a tensor",
                                info->name, i, nimble_object_kind_name(items[i]));
    NIMBLE_RETURN_IF_ERROR(check_output(info, i, (const nimble_tensor_obj *)items[i]));
  }
  if (vm->outputs_cap < n) {
    nimble_tensor_obj **no = realloc(vm->outputs, n * sizeof *no);
    if (!no) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
    vm->outputs = no;
    vm->outputs_cap = n;
  }
  for (uint32_t i = 0; i < n; i++) {
    nimble_object_retain(items[i]);
    vm->outputs[i] = (nimble_tensor_obj *)items[i];
  }
  vm->num_outputs = n;
  return nimble_ok();
}

nimble_status_t nimble_vm_invoke(nimble_vm *vm, const char *entry) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  clear_outputs(vm);
  for (uint32_t i = 0; i < info->num_inputs; i++)
    if (vm->input_entry != (int64_t)e || !vm->inputs[i])
      return nimble_status_make(NIMBLE_FAILED_PRECONDITION, "entry '%s': input '%s' (%u) was not set",
                                entry, info->inputs[i].name, i);
  nimble_status_t s = check_symbols(vm, info);
  nimble_object *result = NULL;
  if (!s)
    s = nimble_vm_run(vm, vm->exe->meta.entry_functions[e], vm->inputs, info->num_inputs, &result);
  /* Device work still queued finishes (and reports its errors) within the
   * invoke that queued it. */
  nimble_status_t device_status = nimble_vm_device_sync_all(vm);
  if (!s) s = device_status;
  else nimble_status_free(device_status);
  if (!s) s = collect_outputs(vm, info, result);
  nimble_object_release(result);
  /* Inputs are used once: the caller's buffers are not held past the call. */
  for (uint32_t i = 0; i < vm->inputs_cap; i++) {
    nimble_object_release(vm->inputs[i]);
    vm->inputs[i] = NULL;
  }
  vm->input_entry = -1;
  if (s) {
    clear_outputs(vm);
    if (strncmp(nimble_status_message(s), "entry '", 7) == 0) return s;
    return nimble_status_annotate(s, "entry '%s'", entry);
  }
  return nimble_ok();
}

uint32_t nimble_vm_num_outputs(const nimble_vm *vm) { return vm->num_outputs; }

typedef struct managed_ctx {
  DLManagedTensor managed;
  nimble_tensor_obj *tensor;
  nimble_executable *exe; /* constants live in the executable */
} managed_ctx;

static void managed_deleter(DLManagedTensor *self) {
  managed_ctx *ctx = self->manager_ctx;
  nimble_object_release(&ctx->tensor->base);
  nimble_executable_release(ctx->exe);
  free(ctx);
}

nimble_status_t nimble_vm_take_output(nimble_vm *vm, uint32_t index, DLManagedTensor **out) {
  if (!out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "take_output: NULL out");
  if (index >= vm->num_outputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "output %u does not exist (the last invoke gave %u)",
                              index, vm->num_outputs);
  if (!vm->outputs[index])
    return nimble_status_make(NIMBLE_FAILED_PRECONDITION, "output %u was already taken", index);
  managed_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  ctx->tensor = vm->outputs[index];
  vm->outputs[index] = NULL;
  /* From here the application may release it on any thread. */
  nimble_object_share(&ctx->tensor->base);
  ctx->exe = vm->exe;
  nimble_executable_retain(vm->exe);
  ctx->managed.dl_tensor = ctx->tensor->dl;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = managed_deleter;
  *out = &ctx->managed;
  return nimble_ok();
}

nimble_status_t nimble_vm_memory_stats(const nimble_vm *vm, DLDeviceType device_type,
                                       nimble_memory_stats_t *out) {
  if (!out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "memory_stats: NULL out");
  nimble_vm_device *d = device_type == kDLCPU ? NULL : nimble_vm_device_find(vm, device_type);
  nimble_pool *pool = device_type == kDLCPU ? vm->cpu_pool : d ? d->pool : NULL;
  if (!pool)
    return nimble_status_make(NIMBLE_NOT_FOUND, "the VM has no %s pool", nimble_device_name(device_type));
  nimble_pool_stats(pool, out);
  return nimble_ok();
}

void nimble_vm_trim_memory(nimble_vm *vm) {
  nimble_pool_trim(vm->cpu_pool);
  for (uint32_t i = 0; i < vm->num_devices; i++) nimble_pool_trim(vm->devices[i].pool);
}

/* ---- ADT inputs ------------------------------------------------------------
 * An ADT input's dims describe it (docs/executable.md): dim 0 has its IR
 * type as text, each further dim a constructor, "Type.Ctor(field,...)"; a
 * field is a type name or a tensor, "<dtype>[<dims>]" with "?" for an Any
 * dim. A type's constructors are consecutive, in tag order; the input's own
 * type comes first. */

int nimble_tensor_info_is_adt(const nimble_tensor_info_t *info) {
  return info && info->dtype.code == kDLOpaqueHandle && info->dtype.bits == 64 && info->dtype.lanes == 1;
}

typedef struct ctor_desc {
  const char *type, *name, *fields; /* fields: between the parentheses */
  size_t type_len, name_len, fields_len;
  int32_t tag;
  uint32_t num_fields;
  uint32_t type_start, type_count; /* this type's constructors in the table */
} ctor_desc;

typedef struct adt_table {
  ctor_desc c[32];
  uint32_t n;
} adt_table;

static int is_name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

static int span_eq(const char *a, size_t alen, const char *b, size_t blen) {
  return alen == blen && memcmp(a, b, alen) == 0;
}

/* Splits the next field off *p (up to `end`): a field ends at a ',' outside
 * brackets. */
static void next_field(const char **p, const char *end, const char **field, size_t *len) {
  const char *q = *p;
  int depth = 0;
  while (q < end && (depth > 0 || *q != ',')) {
    if (*q == '[') depth++;
    if (*q == ']') depth--;
    q++;
  }
  *field = *p;
  *len = (size_t)(q - *p);
  *p = q < end ? q + 1 : q;
}

/* Constructor description i (dim i + 1) is malformed. */
static nimble_status_t bad_desc(const char *entry, const nimble_tensor_info_t *in, uint32_t i) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "entry '%s': input '%s': constructor description %u ('%s') is malformed", entry,
                            in->name, i, in->dims[i + 1].symbol ? in->dims[i + 1].symbol : "");
}

/* Parses a tensor field "<dtype>[<dims>]"; 0 when it is not one. */
static int parse_tensor_field(const char *f, size_t len, nimble_adt_field_t *out) {
  const char *end = f + len, *open = memchr(f, '[', len);
  if (!open || len < 2 || end[-1] != ']') return 0;
  static const struct { const char *name; uint8_t code; } bases[] = {
      {"float", kDLFloat}, {"bfloat", kDLBfloat}, {"uint", kDLUInt}, {"int", kDLInt}};
  int found = 0;
  for (size_t b = 0; b < sizeof bases / sizeof bases[0] && !found; b++) {
    size_t bl = strlen(bases[b].name);
    if ((size_t)(open - f) <= bl || memcmp(f, bases[b].name, bl) != 0) continue;
    unsigned bits = 0;
    for (const char *q = f + bl; q < open; q++) {
      if (*q < '0' || *q > '9' || bits > 1000) return 0;
      bits = bits * 10 + (unsigned)(*q - '0');
    }
    /* uint1 is the runtime's bool */
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64 && !(bits == 1 && bases[b].code == kDLUInt))
      return 0;
    out->dtype.code = bases[b].code;
    out->dtype.bits = (uint8_t)bits;
    out->dtype.lanes = 1;
    found = 1;
  }
  if (!found) return 0;
  out->is_adt = 0;
  out->adt_type = NULL;
  out->adt_type_len = 0;
  out->ndim = 0;
  const char *p = open + 1, *dims_end = end - 1;
  while (p < dims_end) {
    const char *d;
    size_t dl;
    next_field(&p, dims_end, &d, &dl);
    if (out->ndim == 32 || dl == 0) return 0;
    int64_t v = 0;
    if (dl == 1 && d[0] == '?') {
      v = -1;
    } else {
      for (size_t k = 0; k < dl; k++) {
        if (d[k] < '0' || d[k] > '9' || v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (d[k] - '0');
      }
    }
    out->dims[out->ndim++] = v;
  }
  return 1;
}

/* Parses one field into *out; 0 when malformed. ADT fields must name a type
 * of the table. */
static int parse_field(const adt_table *t, const char *f, size_t len, nimble_adt_field_t *out) {
  if (len && f[len - 1] == ']') return parse_tensor_field(f, len, out);
  if (len == 0) return 0;
  for (size_t k = 0; k < len; k++)
    if (!is_name_char(f[k])) return 0;
  for (uint32_t i = 0; i < t->n; i++)
    if (span_eq(t->c[i].type, t->c[i].type_len, f, len)) {
      memset(out, 0, sizeof *out);
      out->is_adt = 1;
      out->adt_type = t->c[i].type;
      out->adt_type_len = t->c[i].type_len;
      return 1;
    }
  return 0;
}

static nimble_status_t build_table(const char *entry, const nimble_tensor_info_t *in, adt_table *t) {
  if (!nimble_tensor_info_is_adt(in))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is a tensor, not an ADT", entry,
                              in->name);
  if (in->ndim < 2 || in->ndim > 32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' describes %d constructors",
                              entry, in->name, in->ndim - 1);
  t->n = (uint32_t)in->ndim - 1;
  for (uint32_t i = 0; i < t->n; i++) {
    const char *s = in->dims[i + 1].symbol;
    if (!s) return bad_desc(entry, in, i);
    size_t len = strlen(s);
    const char *dot = memchr(s, '.', len), *open = memchr(s, '(', len);
    if (!dot || !open || dot > open || dot == s || open == dot + 1 || s[len - 1] != ')')
      return bad_desc(entry, in, i);
    ctor_desc *c = &t->c[i];
    c->type = s;
    c->type_len = (size_t)(dot - s);
    c->name = dot + 1;
    c->name_len = (size_t)(open - dot - 1);
    c->fields = open + 1;
    c->fields_len = (size_t)(s + len - 1 - (open + 1));
    for (size_t k = 0; k < c->type_len; k++)
      if (!is_name_char(c->type[k])) return bad_desc(entry, in, i);
    for (size_t k = 0; k < c->name_len; k++)
      if (!is_name_char(c->name[k])) return bad_desc(entry, in, i);
    c->num_fields = 0;
    for (const char *p = c->fields, *end = c->fields + c->fields_len; p < end;) {
      const char *f;
      size_t fl;
      next_field(&p, end, &f, &fl);
      c->num_fields++;
    }
    /* A type's constructors are consecutive; a type appears in one run. */
    if (i > 0 && span_eq(t->c[i - 1].type, t->c[i - 1].type_len, c->type, c->type_len)) {
      c->tag = t->c[i - 1].tag + 1;
      c->type_start = t->c[i - 1].type_start;
    } else {
      for (uint32_t j = 0; j < i; j++)
        if (span_eq(t->c[j].type, t->c[j].type_len, c->type, c->type_len)) return bad_desc(entry, in, i);
      c->tag = 0;
      c->type_start = i;
    }
    for (uint32_t j = c->type_start; j < i; j++)
      if (span_eq(t->c[j].name, t->c[j].name_len, c->name, c->name_len)) return bad_desc(entry, in, i);
  }
  for (uint32_t i = 0; i < t->n; i++) {
    uint32_t end = i;
    while (end < t->n && t->c[end].type_start == t->c[i].type_start) end++;
    t->c[i].type_count = end - t->c[i].type_start;
  }
  /* Every field parses and names a type of the table. */
  for (uint32_t i = 0; i < t->n; i++) {
    const ctor_desc *c = &t->c[i];
    for (const char *p = c->fields, *end = c->fields + c->fields_len; p < end;) {
      const char *f;
      size_t fl;
      nimble_adt_field_t fd;
      next_field(&p, end, &f, &fl);
      if (!parse_field(t, f, fl, &fd)) return bad_desc(entry, in, i);
    }
  }
  return nimble_ok();
}

static nimble_status_t entry_table(const nimble_entry_info_t *entry, uint32_t input, adt_table *t) {
  if (!entry) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "NULL entry");
  if (input >= entry->num_inputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s' has %u inputs, no input %u", entry->name,
                              entry->num_inputs, input);
  return build_table(entry->name, &entry->inputs[input], t);
}

static nimble_status_t find_ctor(const nimble_entry_info_t *entry, uint32_t input, const adt_table *t,
                                 const char *name, const ctor_desc **out) {
  if (!name) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "NULL constructor name");
  const char *dot = strchr(name, '.');
  const char *cname = dot ? dot + 1 : name;
  for (uint32_t i = 0; i < t->n; i++) {
    const ctor_desc *c = &t->c[i];
    if (dot && !span_eq(c->type, c->type_len, name, (size_t)(dot - name))) continue;
    if (span_eq(c->name, c->name_len, cname, strlen(cname))) {
      *out = c;
      return nimble_ok();
    }
  }
  return nimble_status_make(NIMBLE_NOT_FOUND, "entry '%s': input '%s' has no constructor '%s'", entry->name,
                            entry->inputs[input].name, name);
}

nimble_status_t nimble_entry_find_constructor(const nimble_entry_info_t *entry, uint32_t input,
                                              const char *name, int32_t *tag, uint32_t *num_fields) {
  adt_table t;
  const ctor_desc *c;
  NIMBLE_RETURN_IF_ERROR(entry_table(entry, input, &t));
  NIMBLE_RETURN_IF_ERROR(find_ctor(entry, input, &t, name, &c));
  if (tag) *tag = c->tag;
  if (num_fields) *num_fields = c->num_fields;
  return nimble_ok();
}

nimble_status_t nimble_entry_constructor_field(const nimble_entry_info_t *entry, uint32_t input,
                                               const char *name, uint32_t field, nimble_adt_field_t *out) {
  adt_table t;
  const ctor_desc *c;
  if (!out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "constructor_field: NULL out");
  NIMBLE_RETURN_IF_ERROR(entry_table(entry, input, &t));
  NIMBLE_RETURN_IF_ERROR(find_ctor(entry, input, &t, name, &c));
  if (field >= c->num_fields)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s': constructor %.*s has %u fields, no field %u",
                              entry->name, (int)c->name_len, c->name, c->num_fields, field);
  const char *p = c->fields, *end = c->fields + c->fields_len, *f = NULL;
  size_t fl = 0;
  for (uint32_t k = 0; k <= field; k++) next_field(&p, end, &f, &fl);
  parse_field(&t, f, fl, out); /* build_table checked it */
  return nimble_ok();
}

/* ---- values ---- */

static nimble_object *as_object(nimble_value *v) { return (nimble_object *)(void *)v; }

nimble_status_t nimble_value_from_tensor(const DLTensor *tensor, nimble_value **out) {
  if (!tensor || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: NULL argument");
  char dt[32];
  if (tensor->device.device_type != kDLCPU)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: the tensor is on %s; values hold CPU "
                              "tensors", nimble_device_name(tensor->device.device_type));
  if (tensor->ndim < 0 || tensor->ndim > NIMBLE_MAX_NDIM || (tensor->ndim && !tensor->shape))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: bad rank %d", tensor->ndim);
  if (!nimble_dtype_valid(tensor->dtype.code, tensor->dtype.bits, tensor->dtype.lanes) &&
      !nimble_dtype_is_bool(tensor->dtype.code, tensor->dtype.bits, tensor->dtype.lanes))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: unsupported dtype %s",
                              nimble_format_dtype(tensor->dtype, dt, sizeof dt));
  uint64_t nbytes;
  if (!nimble_tensor_nbytes(tensor->ndim, tensor->shape, tensor->dtype, &nbytes) || nbytes > SIZE_MAX / 2)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: bad shape or too large");
  if (!is_compact(tensor))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: the tensor is strided; only compact "
                              "row-major tensors are accepted");
  if (!tensor->data && nbytes) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: no data");
  nimble_tensor_obj *t = nimble_tensor_obj_new(tensor->ndim, tensor->dtype, tensor->device,
                                               nbytes ? (size_t)nbytes : 1);
  if (!t) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  if (tensor->ndim) memcpy(t->shape, tensor->shape, (size_t)tensor->ndim * sizeof(int64_t));
  if (nbytes) memcpy(t->dl.data, nimble_dl_data(tensor), (size_t)nbytes);
  t->base.shared = 1; /* atomic counts: values may be used by several VMs */
  *out = (nimble_value *)(void *)t;
  return nimble_ok();
}

nimble_status_t nimble_value_adt(int32_t tag, nimble_value *const *fields, uint32_t num_fields,
                                 nimble_value **out) {
  if (!out || (num_fields && !fields))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_adt: NULL argument");
  if (tag < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_adt: tag %d is negative", tag);
  if (num_fields > 65536)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_adt: %u fields is too many", num_fields);
  for (uint32_t i = 0; i < num_fields; i++)
    if (!fields[i]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_adt: field %u is NULL", i);
  nimble_adt_obj *a = nimble_adt_obj_new(tag, num_fields);
  if (!a) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  for (uint32_t i = 0; i < num_fields; i++) {
    a->fields[i] = as_object(fields[i]);
    nimble_object_retain(a->fields[i]);
  }
  a->base.shared = 1;
  *out = (nimble_value *)(void *)a;
  return nimble_ok();
}

void nimble_value_retain(nimble_value *value) { nimble_object_retain(value ? as_object(value) : NULL); }
void nimble_value_release(nimble_value *value) { nimble_object_release(value ? as_object(value) : NULL); }

/* A set of (ADT object, type) pairs already checked: a value may share
 * subtrees. Keys are never 0. */
typedef struct ptr_set {
  uint64_t *slots;
  size_t cap, n;
} ptr_set;

/* 1 when added, 0 when present, -1 out of memory. */
static int ptr_set_add(ptr_set *s, uint64_t p) {
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      size_t h = (size_t)((s->slots[i] * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  size_t h = (size_t)((p * 0x9E3779B97F4A7C15ull) >> 20) & (s->cap - 1);
  while (s->slots[h]) {
    if (s->slots[h] == p) return 0;
    h = (h + 1) & (s->cap - 1);
  }
  s->slots[h] = p;
  s->n++;
  return 1;
}

typedef struct walk_frame {
  const nimble_adt_obj *adt;
  const ctor_desc *ctor;
  const char *next; /* the rest of the constructor's field list */
  uint32_t field;   /* index of the next field */
} walk_frame;

/* ".1.0": the field path from the root to the fault. */
static void format_path(const walk_frame *stack, size_t depth, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  if (depth == 0) {
    snprintf(buf, size, " (the root)");
    return;
  }
  used += (size_t)snprintf(buf, size, " at ");
  for (size_t i = 0; i < depth && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, ".%u", stack[i].field - 1);
  if (used >= size && size > 4) memcpy(buf + size - 4, "...", 4);
}

static nimble_status_t check_adt_value(const char *entry, const nimble_tensor_info_t *in, const adt_table *t,
                                       const nimble_object *root) {
  walk_frame *stack = NULL;
  size_t depth = 0, cap = 0;
  ptr_set seen = {0};
  nimble_status_t s = nimble_ok();
  char path[256], a[32], b[32], have[256], want[256];
  const nimble_object *obj = root;
  uint32_t type_start = 0;
  /* Each iteration checks `obj` (an ADT of the type starting at type_start)
   * then walks the fields of the frame on top. */
  for (;;) {
    if (obj) {
      if (obj->kind != NIMBLE_OBJ_ADT) {
        format_path(stack, depth, path, sizeof path);
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: %s where a %.*s was expected",
                               entry, in->name, path, nimble_object_kind_name(obj), (int)t->c[type_start].type_len,
                               t->c[type_start].type);
        break;
      }
      const nimble_adt_obj *adt = (const nimble_adt_obj *)obj;
      /* Pointers fit in 58 bits on every target the runtime supports. */
      int added = ptr_set_add(&seen, ((uint64_t)(uintptr_t)adt << 5) | type_start);
      if (added < 0) {
        s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory checking input '%s'", in->name);
        break;
      }
      if (added) {
        const ctor_desc *first = &t->c[type_start];
        if (adt->tag < 0 || (uint32_t)adt->tag >= first->type_count) {
          format_path(stack, depth, path, sizeof path);
          s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: tag %d is not a constructor "
                                 "of %.*s (it has %u)", entry, in->name, path, adt->tag, (int)first->type_len,
                                 first->type, first->type_count);
          break;
        }
        const ctor_desc *c = &t->c[type_start + (uint32_t)adt->tag];
        if (adt->num_fields != c->num_fields) {
          format_path(stack, depth, path, sizeof path);
          s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: constructor %.*s has %u "
                                 "fields, the value %u", entry, in->name, path, (int)c->name_len, c->name,
                                 c->num_fields, adt->num_fields);
          break;
        }
        if (depth == cap) {
          size_t ncap = cap ? 2 * cap : 64;
          walk_frame *ns = realloc(stack, ncap * sizeof *ns);
          if (!ns) {
            s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory checking input '%s'", in->name);
            break;
          }
          stack = ns;
          cap = ncap;
        }
        stack[depth].adt = adt;
        stack[depth].ctor = c;
        stack[depth].next = c->fields;
        stack[depth].field = 0;
        depth++;
      }
      obj = NULL;
    }
    if (depth == 0) break;
    walk_frame *top = &stack[depth - 1];
    const char *end = top->ctor->fields + top->ctor->fields_len;
    if (top->field == top->ctor->num_fields) {
      depth--;
      continue;
    }
    const char *f;
    size_t fl;
    nimble_adt_field_t fd;
    next_field(&top->next, end, &f, &fl);
    const nimble_object *child = top->adt->fields[top->field++];
    parse_field(t, f, fl, &fd); /* build_table checked it */
    if (fd.is_adt) {
      for (uint32_t i = 0; i < t->n; i++)
        if (span_eq(t->c[i].type, t->c[i].type_len, fd.adt_type, fd.adt_type_len)) {
          type_start = i;
          break;
        }
      obj = child;
      if (!obj) {
        format_path(stack, depth, path, sizeof path);
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: the field is empty", entry,
                               in->name, path);
        break;
      }
      continue;
    }
    /* A tensor field. */
    const nimble_tensor_obj *tt = child && child->kind == NIMBLE_OBJ_TENSOR ? (const nimble_tensor_obj *)child : NULL;
    int ok = tt && tt->dl.device.device_type == kDLCPU && tt->dl.dtype.code == fd.dtype.code &&
             tt->dl.dtype.bits == fd.dtype.bits && tt->dl.dtype.lanes == fd.dtype.lanes && tt->dl.ndim == fd.ndim;
    for (int32_t d = 0; ok && d < fd.ndim; d++)
      if (fd.dims[d] >= 0 && tt->dl.shape[d] != fd.dims[d]) ok = 0;
    if (!ok) {
      format_path(stack, depth, path, sizeof path);
      size_t w = 0;
      w += (size_t)snprintf(want, sizeof want, "[");
      for (int32_t d = 0; d < fd.ndim && w < sizeof want; d++)
        w += fd.dims[d] >= 0
                 ? (size_t)snprintf(want + w, sizeof want - w, "%s%lld", d ? "," : "", (long long)fd.dims[d])
                 : (size_t)snprintf(want + w, sizeof want - w, "%s?", d ? "," : "");
      if (w < sizeof want) snprintf(want + w, sizeof want - w, "]");
      if (tt)
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: field %u of %.*s is a %s "
                               "tensor of shape %s on %s, expected %s %s", entry, in->name, path, top->field - 1,
                               (int)top->ctor->name_len, top->ctor->name,
                               nimble_format_dtype(tt->dl.dtype, a, sizeof a),
                               nimble_format_shape(tt->dl.ndim, tt->dl.shape, have, sizeof have),
                               nimble_device_name(tt->dl.device.device_type),
                               nimble_format_dtype(fd.dtype, b, sizeof b), want);
      else
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s'%s: field %u of %.*s is %s, "
                               "expected a %s tensor of shape %s", entry, in->name, path, top->field - 1,
                               (int)top->ctor->name_len, top->ctor->name, nimble_object_kind_name(child),
                               nimble_format_dtype(fd.dtype, b, sizeof b), want);
      break;
    }
  }
  free(stack);
  free(seen.slots);
  return s;
}

nimble_status_t nimble_vm_set_input_value(nimble_vm *vm, const char *entry, uint32_t index,
                                          nimble_value *value) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  if (index >= info->num_inputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s' has %u inputs, no input %u", entry,
                              info->num_inputs, index);
  const nimble_tensor_info_t *in = &info->inputs[index];
  if (!value)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is NULL", entry, in->name);
  nimble_object *obj = as_object(value);
  if (nimble_tensor_info_is_adt(in)) {
    adt_table t;
    NIMBLE_RETURN_IF_ERROR(build_table(entry, in, &t));
    NIMBLE_RETURN_IF_ERROR(check_adt_value(entry, in, &t, obj));
  } else {
    if (obj->kind != NIMBLE_OBJ_TENSOR)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is a tensor, the value %s",
                                entry, in->name, nimble_object_kind_name(obj));
    NIMBLE_RETURN_IF_ERROR(check_tensor_input(entry, in, &((nimble_tensor_obj *)obj)->dl));
  }
  nimble_object_retain(obj);
  return store_input(vm, e, index, obj);
}
