/* The VM's lifecycle through its public API: creation, inputs checked
 * against the entry's signature, invocation, outputs handed out as DLPack
 * managed tensors, memory statistics, destruction. ADT inputs are described
 * in adt_desc.c; values a caller builds are in vm_values.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "format/layout.h"
#include "nimble/bytecode.h"
#include "vm/blas_loader.h"
#include "vm/vm.h"
#include "vm/vm_inputs.h"

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
  /* A default load from a mapped file leaves the kernels' check and
   * mapping to the first VM. */
  NIMBLE_RETURN_IF_ERROR(nimble_executable_kernels_ready(exe));
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
  nimble_status_t s = nimble_sgemm_check();
  if (!s) s = nimble_device_get(kDLCPU, &cpu);
  if (!s) s = nimble_pool_create(cpu, vm->opts.memory_cap_bytes, &vm->cpu_pool);
  if (!s) s = nimble_thread_pool_create(vm->opts.num_threads, &vm->threads);
  if (!s) vm->env.num_threads = nimble_thread_pool_size(vm->threads);
  if (!s) s = nimble_vm_adapt_init(vm);
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
  if (vm->const_views)
    for (uint32_t i = 0; i < vm->exe->consts.num_constants; i++)
      if (vm->const_views[i]) nimble_object_release(&vm->const_views[i]->base);
  free(vm->const_views);
  free(vm->ktimes);
  free(vm->kpar);
  nimble_thread_pool_destroy(vm->threads);
  nimble_vm_device_deinit_all(vm);
  if (vm->cpu_pool) nimble_pool_release(vm->cpu_pool);
  free(vm->kernel_error);
  pthread_mutex_destroy(&vm->error_mu);
  nimble_executable_release(vm->exe);
  free(vm);
}

nimble_executable *nimble_vm_executable(const nimble_vm *vm) { return vm->exe; }

nimble_status_t nimble_vm_find_entry(const nimble_vm *vm, const char *entry, uint32_t *index) {
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
int nimble_vm_tensor_is_compact(const DLTensor *t) {
  if (!t->strides) return 1;
  int64_t expect = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != expect) return 0;
    expect *= t->shape[d];
  }
  return 1;
}

/* Checks a tensor for the tensor input `in` of `entry`. */
nimble_status_t nimble_vm_check_tensor_input(const char *entry, const nimble_tensor_info_t *in,
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
  if (!nimble_vm_tensor_is_compact(tensor))
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
nimble_status_t nimble_vm_store_input(nimble_vm *vm, uint32_t e, uint32_t index, nimble_object *obj) {
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
        return NIMBLE_OOM();
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
  NIMBLE_RETURN_IF_ERROR(nimble_vm_find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  if (index >= info->num_inputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s' has %u inputs, no input %u", entry,
                              info->num_inputs, index);
  if (nimble_tensor_info_is_adt(&info->inputs[index]))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "entry '%s': input '%s' is an ADT; set it with nimble_vm_set_input_value",
                              entry, info->inputs[index].name);
  NIMBLE_RETURN_IF_ERROR(nimble_vm_check_tensor_input(entry, &info->inputs[index], tensor));
  /* The declared dtype: a DLPack kDLBool input becomes the runtime's bool. */
  nimble_tensor_obj *t = nimble_tensor_obj_view(NULL, nimble_dl_data(tensor),
                                                tensor->ndim, tensor->shape, info->inputs[index].dtype,
                                                tensor->device);
  if (!t) return NIMBLE_OOM();
  return nimble_vm_store_input(vm, e, index, &t->base);
}

nimble_status_t nimble_vm_set_input_by_name(nimble_vm *vm, const char *entry, const char *input,
                                            const DLTensor *tensor) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(nimble_vm_find_entry(vm, entry, &e));
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
    if (!no) return NIMBLE_OOM();
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
  NIMBLE_RETURN_IF_ERROR(nimble_vm_find_entry(vm, entry, &e));
  const nimble_entry_info_t *info = &vm->exe->meta.entries[e];
  clear_outputs(vm);
  for (uint32_t i = 0; i < info->num_inputs; i++)
    if (vm->input_entry != (int64_t)e || !vm->inputs[i])
      return nimble_status_make(NIMBLE_FAILED_PRECONDITION, "entry '%s': input '%s' (%u) was not set",
                                entry, info->inputs[i].name, i);
  /* This thread owns the pool for the call (pool_allocator.h). */
  nimble_pool_own(vm->cpu_pool, 1);
  nimble_status_t s = check_symbols(vm, info);
  nimble_object *result = NULL;
  uint64_t t0 = s ? 0 : nimble_vm_adapt_begin(vm, e);
  if (!s)
    s = nimble_vm_run(vm, vm->exe->meta.entry_functions[e], vm->inputs, info->num_inputs, &result);
  /* Device work still queued finishes (and reports its errors) within the
   * invoke that queued it. */
  nimble_status_t device_status = nimble_vm_device_sync_all(vm);
  if (!s) s = device_status;
  else nimble_status_free(device_status);
  if (!s) s = collect_outputs(vm, info, result);
  nimble_object_release(result);
  if (!s) nimble_vm_adapt_end(vm, t0);
  /* Inputs are used once: the caller's buffers are not held past the call. */
  for (uint32_t i = 0; i < vm->inputs_cap; i++) {
    nimble_object_release(vm->inputs[i]);
    vm->inputs[i] = NULL;
  }
  vm->input_entry = -1;
  if (s) clear_outputs(vm);
  nimble_pool_own(vm->cpu_pool, 0);
  if (s) {
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
  if (!ctx) return NIMBLE_OOM();
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

nimble_status_t nimble_vm_kernel_times(nimble_vm *vm, int enable, nimble_kernel_time_t *out,
                                       uint32_t capacity, uint32_t *num_kernels) {
  if (!vm) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel_times: NULL vm");
  if (capacity && !out)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel_times: NULL out with capacity %u",
                              capacity);
  const nimble_bytecode_t *code = &vm->exe->code;
  if (num_kernels) *num_kernels = code->num_kernels;
  for (uint32_t i = 0; i < capacity && i < code->num_kernels; i++) {
    out[i].symbol = code->kernels[i].symbol;
    out[i].calls = vm->ktimes ? vm->ktimes[i].calls : 0;
    out[i].total_ns = vm->ktimes ? vm->ktimes[i].ns : 0;
    out[i].out_elements = vm->ktimes ? vm->ktimes[i].out_elements : 0;
  }
  if (!enable) {
    free(vm->ktimes);
    vm->ktimes = NULL;
    return nimble_ok();
  }
  if (vm->ktimes) {
    memset(vm->ktimes, 0, code->num_kernels * sizeof *vm->ktimes);
    return nimble_ok();
  }
  vm->ktimes = calloc(code->num_kernels ? code->num_kernels : 1, sizeof *vm->ktimes);
  if (!vm->ktimes)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "kernel_times: out of memory for %u kernels",
                              code->num_kernels);
  return nimble_ok();
}

void nimble_vm_trim_memory(nimble_vm *vm) {
  nimble_pool_trim(vm->cpu_pool);
  for (uint32_t i = 0; i < vm->num_devices; i++) nimble_pool_trim(vm->devices[i].pool);
}
