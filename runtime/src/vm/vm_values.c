/* Values a caller builds (tensors copied in, ADTs of values) and the VM
 * input that takes one, checked against the entry's description
 * (adt_desc.c) before the VM holds it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "format/layout.h"
#include "nimble/bytecode.h"
#include "nimble/ptr_map.h"
#include "vm/vm.h"
#include "vm/vm_inputs.h"

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
  if (!nimble_vm_tensor_is_compact(tensor))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: the tensor is strided; only compact "
                              "row-major tensors are accepted");
  if (!tensor->data && nbytes) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "value_from_tensor: no data");
  nimble_tensor_obj *t = nimble_tensor_obj_new(tensor->ndim, tensor->dtype, tensor->device,
                                               nbytes ? (size_t)nbytes : 1);
  if (!t) return NIMBLE_OOM();
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
  if (!a) return NIMBLE_OOM();
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

/* The (ADT object, type) pairs already checked, since a value may share
 * subtrees: a set in nimble_base's pointer map, each pair packed into one
 * key (object address << 5 | the type's first constructor; never 0).
 * Pointers fit in 58 bits on every target the runtime supports. */
_Static_assert(sizeof(uintptr_t) == 8, "the checked-pairs set packs a pointer and an index");
static const void *checked_pair(const nimble_adt_obj *adt, uint32_t type_start) {
  return (const void *)(((uintptr_t)adt << 5) | type_start);
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
  nimble_ptr_map seen = {0};
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
      int added = nimble_ptr_map_add(&seen, checked_pair(adt, type_start), NULL);
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
    nimble_adt_desc_next_field(&top->next, end, &f, &fl);
    const nimble_object *child = top->adt->fields[top->field++];
    nimble_adt_desc_parse_field(t, f, fl, &fd); /* build_table checked it */
    if (fd.is_adt) {
      for (uint32_t i = 0; i < t->n; i++)
        if (nimble_adt_desc_span_eq(t->c[i].type, t->c[i].type_len, fd.adt_type, fd.adt_type_len)) {
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
  nimble_ptr_map_deinit(&seen);
  return s;
}

nimble_status_t nimble_vm_set_input_value(nimble_vm *vm, const char *entry, uint32_t index,
                                          nimble_value *value) {
  uint32_t e;
  NIMBLE_RETURN_IF_ERROR(nimble_vm_find_entry(vm, entry, &e));
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
    NIMBLE_RETURN_IF_ERROR(nimble_adt_desc_table(entry, in, &t));
    NIMBLE_RETURN_IF_ERROR(check_adt_value(entry, in, &t, obj));
  } else {
    if (obj->kind != NIMBLE_OBJ_TENSOR)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is a tensor, the value %s",
                                entry, in->name, nimble_object_kind_name(obj));
    NIMBLE_RETURN_IF_ERROR(nimble_vm_check_tensor_input(entry, in, &((nimble_tensor_obj *)obj)->dl));
  }
  nimble_object_retain(obj);
  return nimble_vm_store_input(vm, e, index, obj);
}
