/* Reference-counted VM objects. */
#include "vm/object.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/pool_allocator.h"

/* ---- Small blocks, per thread ----------------------------------------------- */

/* Each thread keeps up to SMALL_CAP freed small blocks (all malloc'd at
 * NIMBLE_OBJECT_SMALL_BYTES) and hands them out again before asking
 * malloc. A thread's list is freed when the thread ends (a pthread key's
 * destructor; the main thread's stays until exit, reachable from its TLS).
 * Under AddressSanitizer every object goes to malloc and free, so a
 * use after free is still caught. */
#define SMALL_CAP 256

#if defined(__SANITIZE_ADDRESS__)
#define SMALL_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMALL_BLOCKS 0
#endif
#endif
#ifndef SMALL_BLOCKS
#define SMALL_BLOCKS 1
#endif

typedef struct small_block {
  struct small_block *next;
} small_block;

static _Thread_local small_block *small_head;
static _Thread_local uint32_t small_count;
/* 0: no destructor yet; 1: registered; 2: the thread is ending (its
 * destructor ran): blocks go to free. */
static _Thread_local uint8_t small_state;
static pthread_key_t small_key;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static int small_key_ok;

static void small_drain(void *unused) {
  (void)unused;
  small_state = 2;
  while (small_head) {
    small_block *b = small_head;
    small_head = b->next;
    free(b);
  }
  small_count = 0;
}

static void small_key_create(void) { small_key_ok = pthread_key_create(&small_key, small_drain) == 0; }

static void object_free(nimble_object *o) {
  if (SMALL_BLOCKS && o->small && small_count < SMALL_CAP) {
    if (small_state == 0) {
      pthread_once(&small_once, small_key_create);
      /* Without the key a thread's list would outlive it: blocks go to free. */
      small_state = small_key_ok && pthread_setspecific(small_key, &small_head) == 0 ? 1 : 2;
    }
    if (small_state == 1) {
      small_block *b = (small_block *)(void *)o;
      b->next = small_head;
      small_head = b;
      small_count++;
      return;
    }
  }
  free(o);
}

nimble_object *nimble_object_new(nimble_object_kind_t kind, size_t bytes) {
  nimble_object *o;
  int small = bytes <= NIMBLE_OBJECT_SMALL_BYTES;
  if (SMALL_BLOCKS && small && small_head) {
    small_block *b = small_head;
    small_head = b->next;
    small_count--;
    o = (nimble_object *)(void *)b;
  } else {
    o = malloc(small ? NIMBLE_OBJECT_SMALL_BYTES : bytes);
    if (!o) return NULL;
  }
  nimble_object_init(o, kind);
  o->small = (uint8_t)small;
  return o;
}

/* ---- Objects --------------------------------------------------------------- */

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
  object_free(o);
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
  nimble_tensor_obj *t =
      (nimble_tensor_obj *)nimble_object_new(NIMBLE_OBJ_TENSOR, sizeof *t + shape_bytes + inline_bytes);
  if (!t) return NULL;
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
