/* Reference-counted VM objects. */
#include "vm/object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/pool_allocator.h"

void nimble_object_release(nimble_object *o) {
  if (!o) return;
  if (o->shared) {
    if (__atomic_fetch_sub(&o->refs, 1, __ATOMIC_ACQ_REL) != 1) return;
  } else if (--o->refs != 0) {
    return;
  }
  switch (o->kind) {
    case NIMBLE_OBJ_TENSOR: {
      nimble_tensor_obj *t = (nimble_tensor_obj *)o;
      nimble_object_release(t->owner);
      break;
    }
    case NIMBLE_OBJ_STORAGE: {
      nimble_storage_obj *s = (nimble_storage_obj *)o;
      if (s->pool) {
        nimble_pool_free(s->pool, s->data, s->block_size);
        nimble_pool_release(s->pool);
      }
      break;
    }
    case NIMBLE_OBJ_ADT: {
      nimble_adt_obj *a = (nimble_adt_obj *)o;
      for (uint32_t i = 0; i < a->num_fields; i++) nimble_object_release(a->fields[i]);
      break;
    }
    case NIMBLE_OBJ_CLOSURE: {
      nimble_closure_obj *c = (nimble_closure_obj *)o;
      for (uint32_t i = 0; i < c->num_captured; i++) nimble_object_release(c->captured[i]);
      break;
    }
  }
  free(o);
}

void nimble_object_share(nimble_object *o) {
  while (o && !o->shared) {
    o->shared = 1;
    o = o->kind == NIMBLE_OBJ_TENSOR ? ((nimble_tensor_obj *)o)->owner : NULL;
  }
}

nimble_tensor_obj *nimble_tensor_obj_new(int32_t ndim, DLDataType dtype, DLDevice device,
                                         size_t inline_bytes) {
  /* Inline data starts at a 16-byte boundary after the shape. */
  size_t shape_bytes = ((size_t)ndim * sizeof(int64_t) + 15) & ~(size_t)15;
  nimble_tensor_obj *t = malloc(sizeof *t + shape_bytes + inline_bytes);
  if (!t) return NULL;
  nimble_object_init(&t->base, NIMBLE_OBJ_TENSOR);
  t->owner = NULL;
  memset(t->shape, 0, shape_bytes);
  t->dl.data = inline_bytes ? (void *)((char *)t->shape + shape_bytes) : NULL;
  t->dl.device = device;
  t->dl.ndim = ndim;
  t->dl.dtype = dtype;
  t->dl.shape = t->shape;
  t->dl.strides = NULL;
  t->dl.byte_offset = 0;
  return t;
}

nimble_tensor_obj *nimble_tensor_obj_scalar_i64(int64_t value) {
  DLDataType i64 = {kDLInt, 64, 1};
  DLDevice cpu = {kDLCPU, 0};
  nimble_tensor_obj *t = nimble_tensor_obj_new(0, i64, cpu, sizeof(int64_t));
  if (t) memcpy(t->dl.data, &value, sizeof value);
  return t;
}

nimble_tensor_obj *nimble_tensor_obj_view(nimble_object *owner, void *data, int32_t ndim,
                                          const int64_t *shape, DLDataType dtype, DLDevice device) {
  nimble_tensor_obj *t = nimble_tensor_obj_new(ndim, dtype, device, 0);
  if (!t) return NULL;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
  t->dl.data = data;
  t->owner = owner;
  nimble_object_retain(owner);
  return t;
}

nimble_adt_obj *nimble_adt_obj_new(int32_t tag, uint32_t num_fields) {
  nimble_adt_obj *a = calloc(1, sizeof *a + (size_t)num_fields * sizeof(nimble_object *));
  if (!a) return NULL;
  nimble_object_init(&a->base, NIMBLE_OBJ_ADT);
  a->tag = tag;
  a->num_fields = num_fields;
  return a;
}

nimble_closure_obj *nimble_closure_obj_new(uint32_t func, uint32_t num_captured) {
  nimble_closure_obj *c = calloc(1, sizeof *c + (size_t)num_captured * sizeof(nimble_object *));
  if (!c) return NULL;
  nimble_object_init(&c->base, NIMBLE_OBJ_CLOSURE);
  c->func = func;
  c->num_captured = num_captured;
  return c;
}

char *nimble_format_shape(int32_t ndim, const int64_t *shape, char *buf, size_t size) {
  size_t used = 0;
  if (size == 0) return buf;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < ndim && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)shape[d]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

char *nimble_format_dtype(DLDataType dtype, char *buf, size_t size) {
  const char *base = "unknown";
  switch (dtype.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLComplex: base = "complex"; break;
    default: break;
  }
  if ((dtype.code == kDLUInt && dtype.bits == 1 && dtype.lanes == 1) || (dtype.code == 6 && dtype.bits == 8 && dtype.lanes == 1))
    snprintf(buf, size, "bool");
  else if (dtype.lanes > 1)
    snprintf(buf, size, "%s%ux%u", base, dtype.bits, dtype.lanes);
  else
    snprintf(buf, size, "%s%u", base, dtype.bits);
  return buf;
}

const char *nimble_object_kind_name(const nimble_object *o) {
  if (!o) return "nothing";
  switch (o->kind) {
    case NIMBLE_OBJ_TENSOR: return "a tensor";
    case NIMBLE_OBJ_STORAGE: return "a storage";
    case NIMBLE_OBJ_ADT: return "an ADT";
    case NIMBLE_OBJ_CLOSURE: return "a closure";
    default: return "an unknown object";
  }
}
