/* The operator registry: the family tables, looked up by name. A new family
 * adds its table to kFamilies. */
#include <string.h>

#include "ops/op_internal.h"

typedef struct family {
  const nimble_op *ops;
  const size_t *count;
} family;

static const family kFamilies[] = {
    {nimble_ops_elementwise, &nimble_ops_elementwise_count},
    {nimble_ops_nn, &nimble_ops_nn_count},
    {nimble_ops_reduce, &nimble_ops_reduce_count},
    {nimble_ops_transform, &nimble_ops_transform_count},
    {nimble_ops_create, &nimble_ops_create_count},
    {nimble_ops_dynamic, &nimble_ops_dynamic_count},
    {nimble_ops_memory, &nimble_ops_memory_count},
    {nimble_ops_indexing, &nimble_ops_indexing_count},
    {nimble_ops_vision, &nimble_ops_vision_count},
    {nimble_ops_dyn_layout, &nimble_ops_dyn_layout_count},
    {nimble_ops_math_extra, &nimble_ops_math_extra_count},
    {nimble_ops_random, &nimble_ops_random_count},
    {nimble_ops_recurrent, &nimble_ops_recurrent_count},
};
#define NUM_FAMILIES (sizeof kFamilies / sizeof kFamilies[0])

size_t nimble_op_count(void) {
  size_t n = 0;
  for (size_t f = 0; f < NUM_FAMILIES; f++) n += *kFamilies[f].count;
  return n;
}

const nimble_op *nimble_op_at(size_t i) {
  for (size_t f = 0; f < NUM_FAMILIES; f++) {
    if (i < *kFamilies[f].count) return &kFamilies[f].ops[i];
    i -= *kFamilies[f].count;
  }
  return NULL;
}

const nimble_op *nimble_op_find_n(const char *name, size_t len) {
  for (size_t f = 0; f < NUM_FAMILIES; f++) {
    for (size_t i = 0; i < *kFamilies[f].count; i++) {
      const nimble_op *op = &kFamilies[f].ops[i];
      if (strlen(op->name) == len && memcmp(op->name, name, len) == 0) return op;
    }
  }
  return NULL;
}

const nimble_op *nimble_op_find(const char *name) { return nimble_op_find_n(name, strlen(name)); }

const char *nimble_shape_fn_kind_name(nimble_shape_fn_kind_t kind) {
  switch (kind) {
    case NIMBLE_SHAPE_DATA_INDEPENDENT: return "data-independent";
    case NIMBLE_SHAPE_DATA_DEPENDENT: return "data-dependent";
    case NIMBLE_SHAPE_UPPER_BOUND: return "upper-bound";
  }
  return "?";
}

const char *nimble_fusion_pattern_name(nimble_fusion_pattern_t p) {
  switch (p) {
    case NIMBLE_FUSE_ELEMWISE: return "elemwise";
    case NIMBLE_FUSE_BROADCAST: return "broadcast";
    case NIMBLE_FUSE_INJECTIVE: return "injective";
    case NIMBLE_FUSE_REDUCTION: return "reduction";
    case NIMBLE_FUSE_OUT_FUSABLE: return "out-fusable";
    case NIMBLE_FUSE_OPAQUE: return "opaque";
  }
  return "?";
}
