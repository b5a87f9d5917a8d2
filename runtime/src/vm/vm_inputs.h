/* What the VM's input paths share: the tensor-input checks of
 * vm_lifecycle.c, the ADT input descriptions of adt_desc.c, and the values of
 * vm_values.c that are checked against both. Private to the runtime. */
#ifndef NIMBLE_RUNTIME_VM_INPUTS_H
#define NIMBLE_RUNTIME_VM_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

/* ---- tensor inputs (vm_lifecycle.c) ---- */

/* The index of entry `entry`; NOT_FOUND names it. */
nimble_status_t nimble_vm_find_entry(const nimble_vm *vm, const char *entry, uint32_t *index);
/* Compact row-major: no strides, or strides equal to the compact ones
 * (dims of size 1 may have any stride). */
int nimble_vm_tensor_is_compact(const DLTensor *t);
/* Checks a tensor for the tensor input `in` of `entry`. */
nimble_status_t nimble_vm_check_tensor_input(const char *entry, const nimble_tensor_info_t *in,
                                             const DLTensor *tensor);
/* Stores `obj` (a reference the VM now owns) as input `index` of entry `e`. */
nimble_status_t nimble_vm_store_input(nimble_vm *vm, uint32_t e, uint32_t index, nimble_object *obj);

/* ---- ADT input descriptions (adt_desc.c) ---- */

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

/* The constructor table of ADT input `in` of `entry`, parsed from its
 * dims; INVALID_ARGUMENT names a malformed description. */
nimble_status_t nimble_adt_desc_table(const char *entry, const nimble_tensor_info_t *in, adt_table *t);
/* Splits the next field off *p (up to `end`): a field ends at a ',' outside
 * brackets. */
void nimble_adt_desc_next_field(const char **p, const char *end, const char **field, size_t *len);
/* Parses one field into *out; 0 when malformed. ADT fields must name a type
 * of the table. */
int nimble_adt_desc_parse_field(const adt_table *t, const char *f, size_t len, nimble_adt_field_t *out);
/* Whether two spans hold the same bytes. */
int nimble_adt_desc_span_eq(const char *a, size_t alen, const char *b, size_t blen);

#endif
