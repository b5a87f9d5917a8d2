/* Private to the ONNX loader: the arena everything of a model lives in, the
 * model and graph structs behind the public views, and the steps of loading
 * (convert protobuf-c messages, build and validate graphs). */
#ifndef NIMBLE_ONNX_INTERNAL_H
#define NIMBLE_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/onnx_model.h"
#include "onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX loader stores tensor data in host order, which must be little-endian"
#endif

/* Everything of a model lives in its arena (nimble/arena.h: zeroed memory
 * aligned to 16; NULL when out of memory or when a size overflows). */

/* ---- name -> value table (open addressing, FNV-1a; onnx_value_table.c) ---- */
typedef struct onnx_value_table {
  nimble_onnx_value_t **slots;
  size_t cap; /* power of two, or 0 */
  size_t count;
} onnx_value_table;

nimble_status_t nimble_onnx_table_init(nimble_arena *arena, onnx_value_table *t, size_t expected);
nimble_onnx_value_t *nimble_onnx_table_find(const onnx_value_table *t, const char *name);
/* Inserts v (name must be absent); the table was sized for it. */
void nimble_onnx_table_insert(onnx_value_table *t, nimble_onnx_value_t *v);

/* A set of borrowed strings; zero-initialise, free(slots) when done. */
typedef struct onnx_name_set {
  const char **slots;
  size_t cap, count;
} onnx_name_set;
/* 1 when added, 0 when already there, -1 when out of memory. */
int nimble_onnx_name_set_add(onnx_name_set *set, const char *name);

typedef struct onnx_graph_impl {
  nimble_onnx_graph pub; /* first: the public view is a cast away */
  onnx_value_table values;
} onnx_graph_impl;

struct nimble_onnx_model {
  nimble_arena *arena;
  Onnx__ModelProto *proto; /* strings and raw data are borrowed from it */
  int64_t ir_version;
  const char *producer;
  size_t n_opsets;
  nimble_onnx_opset_t *opsets;
  onnx_graph_impl *main;
};

/* A loading session: the model being filled in and the limits in force. */
typedef struct onnx_loader {
  nimble_onnx_model *model;
} onnx_loader;

/* ---- conversion of messages (onnx_convert.c) ---- */
/* `what` names the tensor in errors ("initializer 'w'"). */
nimble_status_t nimble_onnx_convert_tensor(onnx_loader *ld, const Onnx__TensorProto *tp,
                                           nimble_onnx_tensor_t **out);
nimble_status_t nimble_onnx_convert_sparse(onnx_loader *ld, const Onnx__SparseTensorProto *sp,
                                           nimble_onnx_sparse_tensor_t **out);
/* *out is NULL when the TypeProto sets no type. */
nimble_status_t nimble_onnx_convert_type(onnx_loader *ld, const Onnx__TypeProto *tp,
                                         nimble_onnx_type_t **out);
/* The static type of an initializer: its dtype and constant dims. */
nimble_status_t nimble_onnx_tensor_type(onnx_loader *ld, const nimble_onnx_tensor_t *t,
                                        nimble_onnx_type_t **out);

/* ---- graphs (onnx_graph.c) ---- */
nimble_status_t nimble_onnx_build_graph(onnx_loader *ld, const Onnx__GraphProto *gp,
                                        onnx_graph_impl *parent, const nimble_onnx_node *owner,
                                        const char *owner_attr, size_t depth,
                                        onnx_graph_impl **out);

/* NULL-safe view of an optional protobuf-c string. */
static inline const char *onnx_str(const char *s) { return s ? s : ""; }

#endif /* NIMBLE_ONNX_INTERNAL_H */
