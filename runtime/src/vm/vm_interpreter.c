/* The interpreter loop. Frames are windows into one register array, so
 * recursion depth is bounded by memory and max_call_depth, not the C stack.
 * Operands were validated by the loader (counts, register and table
 * indices, jump targets); what remains to check here is what only the run
 * time knows: the kinds and values of objects in registers. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device.h"
#include "nimble/bytecode.h"
#include "vm/sgemm_threads.h"
#include "vm/vm.h"

#define DEFAULT_MAX_DEPTH 100000u

static nimble_status_t rt_error(const nimble_vm *vm, nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static nimble_status_t rt_wrap(const nimble_vm *vm, nimble_status_t s);

static nimble_status_t rt_error(const nimble_vm *vm, nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  return rt_wrap(vm, s);
}

/* Adds the current function and pc to a status from elsewhere. */
static nimble_status_t rt_wrap(const nimble_vm *vm, nimble_status_t s) {
  if (!s || vm->depth == 0) return s;
  const nimble_frame_t *f = &vm->frames[vm->depth - 1];
  const nimble_function_t *fn = &vm->exe->code.functions[f->func];
  return nimble_status_annotate(s, "function '%s' pc %u (%s)", fn->name, f->pc,
                                nimble_opcode_name(fn->instructions[f->pc].op));
}

#define OOM(vm) rt_error((vm), NIMBLE_RESOURCE_EXHAUSTED, "out of memory")

/* Stores `obj` (owned) into register r, dropping what was there. The
 * loader checked r against the frame's register count (bytecode_parse.c). */
static inline void set_reg(nimble_object **R, int64_t r, nimble_object *obj) {
  assert(r >= 0);
  nimble_object *old = R[r];
  R[r] = obj;
  nimble_object_release(old);
}

static nimble_status_t get_tensor(const nimble_vm *vm, nimble_object **R, int64_t r,
                                  nimble_tensor_obj **out) {
  nimble_object *o = R[r];
  if (!o || o->kind != NIMBLE_OBJ_TENSOR)
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds %s, expected a tensor",
                    (long long)r, nimble_object_kind_name(o));
  *out = (nimble_tensor_obj *)o;
  return nimble_ok();
}

/* The value of an integer scalar (one element, on the CPU). */
static nimble_status_t get_scalar(const nimble_vm *vm, nimble_object **R, int64_t r, int64_t *out) {
  nimble_tensor_obj *t = NULL;
  NIMBLE_RETURN_IF_ERROR(get_tensor(vm, R, r, &t));
  int one_element = 1;
  for (int32_t d = 0; d < t->dl.ndim; d++) one_element &= t->dl.shape[d] == 1;
  if (!one_element || t->dl.device.device_type != kDLCPU || t->dl.dtype.lanes != 1 ||
      (t->dl.dtype.code != kDLInt && t->dl.dtype.code != kDLUInt)) {
    char dt[32];
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT,
                    "register %lld holds a %s tensor of rank %d on %s, expected an integer scalar",
                    (long long)r, nimble_format_dtype(t->dl.dtype, dt, sizeof dt), t->dl.ndim,
                    nimble_device_name(t->dl.device.device_type));
  }
  const char *p = (const char *)nimble_dl_data(&t->dl);
  int is_signed = t->dl.dtype.code == kDLInt;
  switch (t->dl.dtype.bits) {
    case 1: /* bool, one byte per element */
    case 8: *out = is_signed ? (int64_t)*(const int8_t *)p : (int64_t)*(const uint8_t *)p; break;
    case 16: { int16_t v; uint16_t u; memcpy(&v, p, 2); memcpy(&u, p, 2); *out = is_signed ? v : u; break; }
    case 32: { int32_t v; uint32_t u; memcpy(&v, p, 4); memcpy(&u, p, 4); *out = is_signed ? v : (int64_t)u; break; }
    case 64: { int64_t v; memcpy(&v, p, 8); *out = v; break; }
    default:
      return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds a %u-bit integer scalar",
                      (long long)r, t->dl.dtype.bits);
  }
  return nimble_ok();
}

/* A shape from a 1-D int64 CPU tensor. */
static nimble_status_t get_shape(const nimble_vm *vm, nimble_object **R, int64_t r, int32_t *ndim,
                                 int64_t *shape) {
  nimble_tensor_obj *t = NULL;
  NIMBLE_RETURN_IF_ERROR(get_tensor(vm, R, r, &t));
  if (t->dl.ndim != 1 || t->dl.dtype.code != kDLInt || t->dl.dtype.bits != 64 ||
      t->dl.dtype.lanes != 1 || t->dl.device.device_type != kDLCPU)
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT,
                    "register %lld does not hold a shape (a 1-D int64 cpu tensor)", (long long)r);
  if (t->dl.shape[0] > NIMBLE_MAX_NDIM)
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "shape in register %lld has %lld dims (at most %d)",
                    (long long)r, (long long)t->dl.shape[0], NIMBLE_MAX_NDIM);
  *ndim = (int32_t)t->dl.shape[0];
  if (*ndim) memcpy(shape, (const char *)nimble_dl_data(&t->dl), (size_t)*ndim * sizeof(int64_t));
  for (int32_t d = 0; d < *ndim; d++)
    if (shape[d] < 0)
      return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "shape in register %lld has negative dim %lld",
                      (long long)r, (long long)shape[d]);
  return nimble_ok();
}

static nimble_status_t pool_for(nimble_vm *vm, int64_t device_type, int64_t device_id,
                                nimble_pool **out) {
  if (device_type == kDLCPU) {
    *out = vm->cpu_pool;
    return nimble_ok();
  }
  DLDeviceType type = (DLDeviceType)device_type;
  if (device_id != 0)
    return rt_error(vm, NIMBLE_UNIMPLEMENTED, "%s device %lld: this runtime uses device 0 only",
                    nimble_device_name(type), (long long)device_id);
  /* An executable with kernels on the device has its pool from
   * vm_create; one without gets it here, at its first memory there. */
  nimble_vm_device *d = nimble_vm_device_find(vm, type);
  if (!d) {
    char why[64];
    snprintf(why, sizeof why, "this executable uses %s memory", nimble_device_name(type));
    nimble_status_t s = nimble_vm_device_open(vm, type, why, &d);
    if (s) return rt_wrap(vm, s);
  }
  *out = d->pool;
  return nimble_ok();
}

static nimble_status_t new_storage(const nimble_vm *vm, nimble_pool *pool, uint64_t size,
                                   uint64_t alignment, nimble_storage_obj **out) {
  nimble_storage_obj *s = (nimble_storage_obj *)nimble_object_new(NIMBLE_OBJ_STORAGE, sizeof *s);
  if (!s) return OOM(vm);
  memset((char *)s + sizeof s->base, 0, sizeof *s - sizeof s->base);
  nimble_status_t st = nimble_pool_alloc(pool, size, alignment, &s->data, &s->block_size);
  if (st) {
    nimble_object_release(&s->base); /* no pool yet: only the object goes */
    return rt_wrap(vm, st);
  }
  s->size = size;
  s->device.device_type = nimble_pool_device(pool)->type;
  s->device.device_id = 0;
  s->pool = pool;
  nimble_pool_retain(pool);
  *out = s;
  return nimble_ok();
}

/* A new reference to constant i for a register: this VM's view of it
 * (vm.h const_views), or the shared constant itself when memory for the
 * view is short. */
static nimble_tensor_obj *const_view(nimble_vm *vm, uint32_t i) {
  const nimble_constants_t *cs = &vm->exe->consts;
  nimble_tensor_obj *c = cs->tensors[i];
  if (!vm->const_views) vm->const_views = calloc(cs->num_constants, sizeof *vm->const_views);
  nimble_tensor_obj *v = vm->const_views ? vm->const_views[i] : NULL;
  if (!v && vm->const_views)
    v = vm->const_views[i] = nimble_tensor_obj_view(c->owner, c->dl.data, c->dl.ndim, c->shape, c->dl.dtype,
                                                    c->dl.device);
  if (!v) v = c;
  nimble_object_retain(&v->base);
  return v;
}

/* Pushes a frame for `func`; the caller then fills its parameters. */
static nimble_status_t push_frame(nimble_vm *vm, uint32_t func, uint32_t ret_dst) {
  const nimble_function_t *fn = &vm->exe->code.functions[func];
  uint32_t max_depth = vm->opts.max_call_depth ? vm->opts.max_call_depth : DEFAULT_MAX_DEPTH;
  if (vm->depth >= max_depth)
    return rt_error(vm, NIMBLE_RESOURCE_EXHAUSTED,
                    "calling '%s' would exceed the call depth limit of %u frames", fn->name,
                    max_depth);
  if (vm->depth == vm->frames_cap) {
    uint32_t ncap = vm->frames_cap ? vm->frames_cap * 2 : 16;
    nimble_frame_t *nf = realloc(vm->frames, ncap * sizeof *nf);
    if (!nf) return OOM(vm);
    vm->frames = nf;
    vm->frames_cap = ncap;
  }
  if (vm->regs_cap - vm->sp < fn->num_registers) {
    size_t ncap = vm->regs_cap ? vm->regs_cap : 64;
    while (ncap - vm->sp < fn->num_registers) ncap *= 2;
    nimble_object **nr = realloc(vm->regs, ncap * sizeof *nr);
    if (!nr) return OOM(vm);
    vm->regs = nr;
    vm->regs_cap = ncap;
  }
  memset(vm->regs + vm->sp, 0, fn->num_registers * sizeof *vm->regs);
  nimble_frame_t *f = &vm->frames[vm->depth++];
  f->func = func;
  f->pc = 0;
  f->base = vm->sp;
  f->ret_dst = ret_dst;
  vm->sp += fn->num_registers;
  return nimble_ok();
}

/* Releases the top frame's registers and pops it. */
static void pop_frame(nimble_vm *vm) {
  nimble_frame_t *f = &vm->frames[vm->depth - 1];
  for (size_t i = f->base; i < vm->sp; i++) {
    nimble_object_release(vm->regs[i]);
    vm->regs[i] = NULL;
  }
  vm->sp = f->base;
  vm->depth--;
}

static inline __attribute__((always_inline)) nimble_status_t invoke_packed(nimble_vm *vm, nimble_object **R,
                                                                          const int64_t *o, uint32_t n) {
  const nimble_kernel_ref_t *k = &vm->exe->code.kernels[o[0]];
  int32_t arity = (int32_t)(n - 2);
  int32_t first_output = arity - (int32_t)o[1];
  for (int32_t i = 0; i < arity; i++) {
    nimble_tensor_obj *t = NULL;
    nimble_status_t s = get_tensor(vm, R, o[2 + i], &t);
    if (s) return nimble_status_annotate(s, "argument %d of kernel '%s'", i, k->symbol);
    if (i >= first_output && t->owner == &vm->exe->consts.backing->base)
      return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "output %d of kernel '%s' is a constant",
                      i - first_output, k->symbol);
    /* Kernels never write the caller's memory: an entry input is a view
     * with no owner (immediates and shapes hold their data inline), even
     * where an in-place update names its data tensor as the output. */
    if (i >= first_output && !t->owner && !nimble_tensor_obj_data_inline(t))
      return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "output %d of kernel '%s' is the caller's input memory",
                      i - first_output, k->symbol);
    /* A kernel reads its own device's memory only: a host pointer handed
     * to a GPU kernel (or the reverse) would fault or read garbage. */
    if (t->dl.device.device_type != k->device)
      return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "argument %d of %s kernel '%s' is on %s", i,
                      nimble_device_name(k->device), k->symbol,
                      nimble_device_name(t->dl.device.device_type));
    vm->packed_args[i] = &t->dl;
  }
  if (k->device != kDLCPU) {
    /* The device copy of a constant is shared by every later invoke. */
    for (int32_t i = first_output; i < arity; i++)
      if (nimble_vm_device_is_constant_copy(vm, ((nimble_tensor_obj *)R[o[2 + i]])->owner))
        return rt_error(vm, NIMBLE_INVALID_ARGUMENT,
                        "output %d of kernel '%s' is the device copy of a constant",
                        i - first_output, k->symbol);
    /* The VM opened the device when it was made for this executable. */
    nimble_vm_device *d = nimble_vm_device_find(vm, k->device);
    if (!d)
      return rt_error(vm, NIMBLE_INTERNAL, "%s kernel '%s': the VM has not opened its device",
                      nimble_device_name(k->device), k->symbol);
    /* Queued on the VM's stream; the host waits where it reads results. */
    nimble_status_t s = d->dev->launch(d->dev, d->stream, k->device_fn, k->symbol, vm->packed_args, arity);
    return rt_wrap(vm, s);
  }
  vm->has_kernel_error = 0;
  int32_t rc = nimble_vm_call_kernel(vm, k, o[0], arity, first_output);
  if (rc != 0) {
    pthread_mutex_lock(&vm->error_mu);
    nimble_status_t s = rt_error(vm, NIMBLE_INTERNAL, "kernel '%s' failed with code %d%s%s",
                                 k->symbol, rc, vm->has_kernel_error ? ": " : "",
                                 !vm->has_kernel_error ? ""
                                 : vm->kernel_error ? vm->kernel_error
                                                    : "(out of memory copying its message)");
    free(vm->kernel_error);
    vm->kernel_error = NULL;
    pthread_mutex_unlock(&vm->error_mu);
    return s;
  }
  return nimble_ok();
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* invoke_packed, timed into vm->ktimes (nimble_vm_kernel_times). A device
 * (CUDA) kernel is waited for, so its time is its run, not its launch. Out of
 * line, so that the interpreter's own (inlined) invoke_packed pays only the
 * one test of vm->ktimes while timing is off. */
static __attribute__((noinline)) nimble_status_t invoke_packed_timed(nimble_vm *vm, nimble_object **R,
                                                                     const int64_t *o, uint32_t n) {
  uint64_t t0 = now_ns();
  nimble_status_t s = invoke_packed(vm, R, o, n);
  DLDeviceType dev = (DLDeviceType)vm->exe->code.kernels[o[0]].device;
  if (!s && dev != kDLCPU) {
    nimble_vm_device *d = nimble_vm_device_find(vm, dev);
    if (d) s = nimble_vm_device_sync(d);
  }
  struct nimble_vm_kernel_time *kt = &vm->ktimes[o[0]];
  kt->calls++;
  kt->ns += now_ns() - t0;
  /* The first output's elements: tuning buckets a kernel's schedules by
   * them (docs/tuning.md). */
  if (!s && o[1] > 0) kt->out_elements = nimble_dl_elements(vm->packed_args[n - 2 - o[1]]);
  return s;
}

static nimble_status_t alloc_tensor(nimble_vm *vm, nimble_object **R, int64_t dst, int64_t storage_reg,
                                    int64_t offset_reg, const int64_t *dtype_ops, int32_t ndim,
                                    const int64_t *shape) {
  nimble_object *so = R[storage_reg];
  if (!so || so->kind != NIMBLE_OBJ_STORAGE)
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds %s, expected a storage",
                    (long long)storage_reg, nimble_object_kind_name(so));
  nimble_storage_obj *st = (nimble_storage_obj *)so;
  int64_t offset;
  NIMBLE_RETURN_IF_ERROR(get_scalar(vm, R, offset_reg, &offset));
  DLDataType dt = {(uint8_t)dtype_ops[0], (uint8_t)dtype_ops[1], (uint16_t)dtype_ops[2]};
  uint64_t nbytes;
  char sh[256];
  if (!nimble_tensor_nbytes(ndim, shape, dt, &nbytes))
    return rt_error(vm, NIMBLE_INVALID_ARGUMENT, "tensor of shape %s is too large",
                    nimble_format_shape(ndim, shape, sh, sizeof sh));
  if (offset < 0 || (uint64_t)offset > st->size || nbytes > st->size - (uint64_t)offset)
    return rt_error(vm, NIMBLE_OUT_OF_RANGE,
                    "tensor of shape %s (%llu bytes) at offset %lld does not fit its %llu-byte storage",
                    nimble_format_shape(ndim, shape, sh, sizeof sh), (unsigned long long)nbytes,
                    (long long)offset, (unsigned long long)st->size);
  /* A loop's step allocates its tensors again each time: when the register
   * still holds a tensor nothing else does (last step's view, a scalar),
   * that object becomes the new view instead of being freed and made. */
  nimble_object *old = R[dst];
  size_t need = sizeof(nimble_tensor_obj) + (((size_t)ndim * sizeof(int64_t) + 15) & ~(size_t)15);
  if (old && old->kind == NIMBLE_OBJ_TENSOR && old->refs == 1 && !old->shared && old->small &&
      need <= NIMBLE_OBJECT_SMALL_BYTES) {
    nimble_tensor_obj *t = (nimble_tensor_obj *)old;
    nimble_object *prev = t->owner;
    nimble_object_retain(so);
    t->owner = so;
    t->dl.data = (char *)st->data + offset;
    t->dl.device = st->device;
    t->dl.ndim = ndim;
    t->dl.dtype = dt;
    t->dl.shape = t->shape;
    t->dl.strides = NULL;
    t->dl.byte_offset = 0;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    nimble_object_release(prev);
    return nimble_ok();
  }
  nimble_tensor_obj *t = nimble_tensor_obj_view(so, (char *)st->data + offset, ndim, shape, dt, st->device);
  if (!t) return OOM(vm);
  set_reg(R, dst, &t->base);
  return nimble_ok();
}

nimble_status_t nimble_vm_run(nimble_vm *vm, uint32_t func, nimble_object *const *args,
                              uint32_t num_args, nimble_object **result) {
  const nimble_bytecode_t *code = &vm->exe->code;
  uint32_t base_depth = vm->depth;
  if (code->functions[func].num_params != num_args)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "function '%s' takes %u arguments, given %u",
                              code->functions[func].name, code->functions[func].num_params, num_args);
  nimble_status_t s = push_frame(vm, func, 0);
  if (s) return s;
  for (uint32_t i = 0; i < num_args; i++) {
    nimble_object_retain(args[i]);
    vm->regs[vm->frames[vm->depth - 1].base + i] = args[i];
  }

  for (;;) {
    nimble_frame_t *f = &vm->frames[vm->depth - 1];
    const nimble_function_t *fn = &code->functions[f->func];
    nimble_object **R = vm->regs + f->base;
    /* The loader admitted only code whose jumps stay in the function and
     * whose operands stay in its operand table; the frame is the top one,
     * so its registers end where the stack does. */
    assert(f->pc < fn->num_instructions);
    assert(f->base + fn->num_registers == vm->sp && vm->sp <= vm->regs_cap);
    const nimble_instr_t *ins = &fn->instructions[f->pc];
    const int64_t *o = fn->operands + ins->first;
    uint32_t n = ins->num_operands;
    switch ((nimble_opcode_t)ins->op) {
      case NIMBLE_OP_MOVE: {
        nimble_object_retain(R[o[1]]);
        set_reg(R, o[0], R[o[1]]);
        f->pc++;
        break;
      }
      case NIMBLE_OP_RET: {
        nimble_object *ret = R[o[0]];
        if (!ret) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld is empty", (long long)o[0]);
          goto fail;
        }
        nimble_object_retain(ret);
        uint32_t dst = f->ret_dst;
        pop_frame(vm);
        if (vm->depth == base_depth) {
          *result = ret;
          return nimble_ok();
        }
        nimble_frame_t *caller = &vm->frames[vm->depth - 1];
        set_reg(vm->regs + caller->base, dst, ret);
        caller->pc++;
        break;
      }
      case NIMBLE_OP_INVOKE: {
        uint32_t callee = (uint32_t)o[1];
        size_t caller_base = f->base;
        s = push_frame(vm, callee, (uint32_t)o[0]);
        if (s) goto fail;
        /* push_frame may move the register array: index afresh. */
        nimble_object **CR = vm->regs + caller_base;
        nimble_object **NR = vm->regs + vm->frames[vm->depth - 1].base;
        for (uint32_t i = 2; i < n; i++) {
          nimble_object_retain(CR[o[i]]);
          NR[i - 2] = CR[o[i]];
        }
        break;
      }
      case NIMBLE_OP_INVOKE_CLOSURE: {
        nimble_object *co = R[o[1]];
        if (!co || co->kind != NIMBLE_OBJ_CLOSURE) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds %s, expected a closure",
                       (long long)o[1], nimble_object_kind_name(co));
          goto fail;
        }
        nimble_closure_obj *c = (nimble_closure_obj *)co;
        const nimble_function_t *callee = &code->functions[c->func];
        if ((uint64_t)c->num_captured + (n - 2) != callee->num_params) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT,
                       "closure of '%s' takes %u arguments after %u captured, given %u",
                       callee->name, callee->num_params - c->num_captured, c->num_captured, n - 2);
          goto fail;
        }
        size_t caller_base = f->base;
        nimble_object_retain(co); /* the closure register may be overwritten */
        s = push_frame(vm, c->func, (uint32_t)o[0]);
        if (s) {
          nimble_object_release(co);
          goto fail;
        }
        nimble_object **CR = vm->regs + caller_base;
        nimble_object **NR = vm->regs + vm->frames[vm->depth - 1].base;
        for (uint32_t i = 0; i < c->num_captured; i++) {
          nimble_object_retain(c->captured[i]);
          NR[i] = c->captured[i];
        }
        for (uint32_t i = 2; i < n; i++) {
          nimble_object_retain(CR[o[i]]);
          NR[c->num_captured + i - 2] = CR[o[i]];
        }
        nimble_object_release(co);
        break;
      }
      case NIMBLE_OP_INVOKE_PACKED:
        if (__builtin_expect(vm->ktimes != NULL, 0))
          s = invoke_packed_timed(vm, R, o, n);
        else
          s = invoke_packed(vm, R, o, n);
        if (s) goto fail;
        f->pc++;
        break;
      case NIMBLE_OP_ALLOC_STORAGE: {
        int64_t size;
        nimble_pool *pool = NULL;
        nimble_storage_obj *st = NULL;
        s = get_scalar(vm, R, o[1], &size);
        if (!s && size < 0)
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "negative storage size %lld", (long long)size);
        if (!s) s = pool_for(vm, o[3], o[4], &pool);
        if (!s) s = new_storage(vm, pool, (uint64_t)size, (uint64_t)o[2], &st);
        if (s) goto fail;
        set_reg(R, o[0], &st->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_ALLOC_TENSOR:
        s = alloc_tensor(vm, R, o[0], o[1], o[2], o + 3, (int32_t)(n - 6), o + 6);
        if (s) goto fail;
        f->pc++;
        break;
      case NIMBLE_OP_ALLOC_TENSOR_REG: {
        int32_t ndim;
        int64_t shape[NIMBLE_MAX_NDIM];
        s = get_shape(vm, R, o[3], &ndim, shape);
        if (!s) s = alloc_tensor(vm, R, o[0], o[1], o[2], o + 4, ndim, shape);
        if (s) goto fail;
        f->pc++;
        break;
      }
      case NIMBLE_OP_ALLOC_ADT: {
        nimble_adt_obj *a = nimble_adt_obj_new((int32_t)o[1], n - 2);
        if (!a) {
          s = OOM(vm);
          goto fail;
        }
        for (uint32_t i = 2; i < n; i++) {
          nimble_object_retain(R[o[i]]);
          a->fields[i - 2] = R[o[i]];
        }
        set_reg(R, o[0], &a->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_ALLOC_CLOSURE: {
        nimble_closure_obj *c = nimble_closure_obj_new((uint32_t)o[1], n - 2);
        if (!c) {
          s = OOM(vm);
          goto fail;
        }
        for (uint32_t i = 2; i < n; i++) {
          nimble_object_retain(R[o[i]]);
          c->captured[i - 2] = R[o[i]];
        }
        set_reg(R, o[0], &c->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_GET_FIELD: {
        nimble_object *ao = R[o[1]];
        if (!ao || ao->kind != NIMBLE_OBJ_ADT) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds %s, expected an ADT",
                       (long long)o[1], nimble_object_kind_name(ao));
          goto fail;
        }
        nimble_adt_obj *a = (nimble_adt_obj *)ao;
        if ((uint64_t)o[2] >= a->num_fields) {
          s = rt_error(vm, NIMBLE_OUT_OF_RANGE, "field %lld of an ADT with tag %d and %u fields",
                       (long long)o[2], a->tag, a->num_fields);
          goto fail;
        }
        nimble_object *field = a->fields[o[2]];
        nimble_object_retain(field);
        set_reg(R, o[0], field);
        f->pc++;
        break;
      }
      case NIMBLE_OP_GET_TAG: {
        nimble_object *ao = R[o[1]];
        if (!ao || ao->kind != NIMBLE_OBJ_ADT) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "register %lld holds %s, expected an ADT",
                       (long long)o[1], nimble_object_kind_name(ao));
          goto fail;
        }
        nimble_tensor_obj *t = nimble_tensor_obj_scalar_i64(((nimble_adt_obj *)ao)->tag);
        if (!t) {
          s = OOM(vm);
          goto fail;
        }
        set_reg(R, o[0], &t->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_IF: {
        int64_t a, b;
        s = get_scalar(vm, R, o[0], &a);
        if (!s) s = get_scalar(vm, R, o[1], &b);
        if (s) goto fail;
        f->pc = (uint32_t)((int64_t)f->pc + (a == b ? o[2] : o[3]));
        break;
      }
      case NIMBLE_OP_GOTO:
        f->pc = (uint32_t)((int64_t)f->pc + o[0]);
        break;
      case NIMBLE_OP_LOAD_CONST: {
        /* The only way a constant's bytes reach a register, hence a kernel,
         * the own sgemm's packing, a device upload or an output: the
         * weights verified on first use are checked here. */
        s = nimble_constants_check(&vm->exe->consts, (uint32_t)o[1]);
        if (s) {
          s = rt_wrap(vm, s);
          goto fail;
        }
        set_reg(R, o[0], &const_view(vm, (uint32_t)o[1])->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_LOAD_CONSTI: {
        /* A loop's step loads its sizes and offsets again each time, often
         * into a register whose last scalar nothing else holds: that
         * object takes the new value instead of being freed and made. */
        nimble_object *old = R[o[0]];
        if (old && old->kind == NIMBLE_OBJ_TENSOR && old->refs == 1 && !old->shared) {
          nimble_tensor_obj *ot = (nimble_tensor_obj *)old;
          if (!ot->owner && ot->dl.ndim == 0 && ot->dl.dtype.code == kDLInt && ot->dl.dtype.bits == 64 &&
              ot->dl.dtype.lanes == 1 && ot->dl.device.device_type == kDLCPU && ot->dl.byte_offset == 0 &&
              nimble_tensor_obj_data_inline(ot)) {
            memcpy(ot->dl.data, &o[1], sizeof(int64_t));
            f->pc++;
            break;
          }
        }
        nimble_tensor_obj *t = nimble_tensor_obj_scalar_i64(o[1]);
        if (!t) {
          s = OOM(vm);
          goto fail;
        }
        set_reg(R, o[0], &t->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_SHAPE_OF: {
        nimble_tensor_obj *src = NULL;
        s = get_tensor(vm, R, o[1], &src);
        if (s) goto fail;
        DLDataType i64 = {kDLInt, 64, 1};
        DLDevice cpu = {kDLCPU, 0};
        int32_t nd = src->dl.ndim;
        nimble_tensor_obj *t = nimble_tensor_obj_new(1, i64, cpu, (size_t)nd * sizeof(int64_t));
        if (!t) {
          s = OOM(vm);
          goto fail;
        }
        t->shape[0] = nd;
        if (nd) memcpy(t->dl.data, src->dl.shape, (size_t)nd * sizeof(int64_t));
        set_reg(R, o[0], &t->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_RESHAPE_TENSOR: {
        nimble_tensor_obj *src = NULL;
        int32_t ndim;
        int64_t shape[NIMBLE_MAX_NDIM];
        uint64_t have, want;
        char a[256], b[256];
        s = get_tensor(vm, R, o[1], &src);
        if (!s) s = get_shape(vm, R, o[2], &ndim, shape);
        if (s) goto fail;
        /* A view may be smaller than its source: an upper-bound operator
         * (unique, nonzero, NMS) writes into storage sized for the bound and
         * the program then views the real-size prefix (docs/passes.md). A
         * view larger than its source would read past it, so it stays an
         * error. */
        if (!nimble_tensor_nbytes(src->dl.ndim, src->dl.shape, src->dl.dtype, &have) ||
            !nimble_tensor_nbytes(ndim, shape, src->dl.dtype, &want) || want > have) {
          s = rt_error(vm, NIMBLE_INVALID_ARGUMENT, "cannot reshape a tensor of shape %s to %s",
                       nimble_format_shape(src->dl.ndim, src->dl.shape, a, sizeof a),
                       nimble_format_shape(ndim, shape, b, sizeof b));
          goto fail;
        }
        /* The view keeps alive whatever keeps the source's data alive; a
         * source with inline data (or borrowed data) is itself the owner. */
        nimble_object *owner = src->owner ? src->owner : &src->base;
        nimble_tensor_obj *t = nimble_tensor_obj_view(owner, nimble_dl_data(&src->dl),
                                                      ndim, shape, src->dl.dtype, src->dl.device);
        if (!t) {
          s = OOM(vm);
          goto fail;
        }
        set_reg(R, o[0], &t->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_DEVICE_COPY: {
        nimble_tensor_obj *src = NULL;
        nimble_pool *pool = NULL;
        nimble_storage_obj *st = NULL;
        uint64_t nbytes;
        s = get_tensor(vm, R, o[1], &src);
        if (!s) s = pool_for(vm, o[2], o[3], &pool);
        if (s) goto fail;
        nimble_tensor_nbytes(src->dl.ndim, src->dl.shape, src->dl.dtype, &nbytes);
        /* The copy is the non-CPU side's (a cpu-to-cpu copy the CPU's),
         * queued on the VM's stream of that device. */
        DLDeviceType src_type = src->dl.device.device_type;
        DLDeviceType dst_type = nimble_pool_device(pool)->type;
        nimble_vm_device *d = NULL;
        if (dst_type != kDLCPU) {
          d = nimble_vm_device_find(vm, dst_type);
        } else if (src_type != kDLCPU) {
          nimble_pool *src_pool = NULL;
          s = pool_for(vm, src_type, src->dl.device.device_id, &src_pool);
          if (s) goto fail;
          d = nimble_vm_device_find(vm, src_type);
        }
        /* A constant goes to the device once per VM (it never changes, and
         * no kernel may write its device copy: see invoke_packed). */
        int constant_upload = dst_type != kDLCPU && src_type == kDLCPU && vm->exe->consts.backing &&
                              src->owner == &vm->exe->consts.backing->base;
        nimble_storage_obj *cached =
            constant_upload ? nimble_vm_device_constant(d, nimble_dl_data(&src->dl), nbytes) : NULL;
        if (cached) {
          nimble_tensor_obj *t = nimble_tensor_obj_view(&cached->base, cached->data, src->dl.ndim,
                                                        src->dl.shape, src->dl.dtype, cached->device);
          if (!t) {
            s = OOM(vm);
            goto fail;
          }
          set_reg(R, o[0], &t->base);
          f->pc++;
          break;
        }
        s = new_storage(vm, pool, nbytes, 64, &st);
        if (s) goto fail;
        assert(d || (dst_type == kDLCPU && src_type == kDLCPU)); /* pool_for opened it */
        const nimble_device_t *dev = d ? d->dev : nimble_pool_device(pool);
        s = dev->copy(dev, st->data, dst_type, nimble_dl_data(&src->dl), src_type, nbytes,
                      d ? d->stream : NULL);
        /* A copy to the host has waited for the stream; an upload from the
         * host keeps its source alive until the stream is waited for. */
        if (!s && dst_type == kDLCPU && d) nimble_vm_device_host_waited(d);
        if (!s && constant_upload)
          nimble_vm_device_remember_constant(d, nimble_dl_data(&src->dl), nbytes, st);
        else if (!s && dst_type != kDLCPU && src_type == kDLCPU)
          s = nimble_vm_device_keep(d, &src->base);
        if (s) {
          nimble_object_release(&st->base);
          s = rt_wrap(vm, s);
          goto fail;
        }
        nimble_tensor_obj *t = nimble_tensor_obj_view(&st->base, st->data, src->dl.ndim,
                                                      src->dl.shape, src->dl.dtype, st->device);
        nimble_object_release(&st->base);
        if (!t) {
          s = OOM(vm);
          goto fail;
        }
        set_reg(R, o[0], &t->base);
        f->pc++;
        break;
      }
      case NIMBLE_OP_KILL_REGISTER:
        set_reg(R, o[0], NULL);
        f->pc++;
        break;
      case NIMBLE_OP_FATAL:
        s = rt_error(vm, NIMBLE_INTERNAL, "the program reached a Fatal instruction");
        goto fail;
      default:
        s = rt_error(vm, NIMBLE_INTERNAL, "unknown opcode %u", ins->op);
        goto fail;
    }
  }
fail:
  while (vm->depth > base_depth) pop_frame(vm);
  return s;
}
