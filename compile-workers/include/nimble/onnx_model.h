/* ONNX models: load a .onnx file into a validated, easy-to-walk model.
 *
 * The loader is the first stage of the ONNX frontend. It checks the protobuf
 * wire format (errors name the byte offset and the field), decodes it with
 * protobuf-c, and validates the graph: opset imports, typed graph inputs and
 * outputs, initializers (sizes checked, data decoded to little-endian bytes),
 * Constant nodes, attribute types of the operators ONNX defines, names
 * defined before use (with outer scopes for If/Loop/Scan bodies), a
 * topological order (unsorted graphs are sorted; a cycle is an error) and
 * unique output names. An importer therefore never sees a bad graph.
 *
 *   nimble_onnx_model *m;
 *   NIMBLE_RETURN_IF_ERROR(nimble_onnx_model_load_file("model.onnx", &m));
 *   const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
 *   for (size_t i = 0; i < g->n_nodes; i++) {
 *     const nimble_onnx_node *n = g->nodes[i];   // topological order
 *     ...
 *   }
 *   nimble_onnx_model_destroy(m);
 *
 * Everything reachable from a model (graphs, nodes, values, tensors, strings)
 * is owned by the model and lives until nimble_onnx_model_destroy(); the
 * structs are read-only for callers. Errors read
 *   "model.onnx: byte 1234: truncated length-delimited field 1 (graph.node)"
 *   "model.onnx: graph 'main': node 'Conv_3' (Conv): input 'w' is not defined"
 */
#ifndef NIMBLE_ONNX_MODEL_H
#define NIMBLE_ONNX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits the loader enforces; inputs beyond them get RESOURCE_EXHAUSTED. */
#define NIMBLE_ONNX_MAX_FILE_SIZE ((uint64_t)2 << 30) /* 2 GiB, protobuf's own cap */
#define NIMBLE_ONNX_MAX_GRAPH_DEPTH 32    /* subgraphs nested inside subgraphs */
#define NIMBLE_ONNX_MAX_MESSAGE_DEPTH 100 /* protobuf messages nested (TypeProto recurses) */
#define NIMBLE_ONNX_MAX_RANK 64           /* dims of one tensor or type */
#define NIMBLE_ONNX_MAX_MESSAGES (1u << 24)       /* protobuf messages in one file */
#define NIMBLE_ONNX_MAX_SCALARS ((uint64_t)1 << 28) /* repeated numbers and strings in one file */

/* TensorProto.DataType, same numbers. */
typedef enum nimble_onnx_dtype {
  NIMBLE_ONNX_UNDEFINED = 0,
  NIMBLE_ONNX_FLOAT = 1,
  NIMBLE_ONNX_UINT8 = 2,
  NIMBLE_ONNX_INT8 = 3,
  NIMBLE_ONNX_UINT16 = 4,
  NIMBLE_ONNX_INT16 = 5,
  NIMBLE_ONNX_INT32 = 6,
  NIMBLE_ONNX_INT64 = 7,
  NIMBLE_ONNX_STRING = 8,
  NIMBLE_ONNX_BOOL = 9,
  NIMBLE_ONNX_FLOAT16 = 10,
  NIMBLE_ONNX_DOUBLE = 11,
  NIMBLE_ONNX_UINT32 = 12,
  NIMBLE_ONNX_UINT64 = 13,
  NIMBLE_ONNX_COMPLEX64 = 14,
  NIMBLE_ONNX_COMPLEX128 = 15,
  NIMBLE_ONNX_BFLOAT16 = 16,
} nimble_onnx_dtype_t;

/* AttributeProto.AttributeType, same numbers. */
typedef enum nimble_onnx_attr_type {
  NIMBLE_ONNX_ATTR_UNDEFINED = 0,
  NIMBLE_ONNX_ATTR_FLOAT = 1,
  NIMBLE_ONNX_ATTR_INT = 2,
  NIMBLE_ONNX_ATTR_STRING = 3,
  NIMBLE_ONNX_ATTR_TENSOR = 4,
  NIMBLE_ONNX_ATTR_GRAPH = 5,
  NIMBLE_ONNX_ATTR_FLOATS = 6,
  NIMBLE_ONNX_ATTR_INTS = 7,
  NIMBLE_ONNX_ATTR_STRINGS = 8,
  NIMBLE_ONNX_ATTR_TENSORS = 9,
  NIMBLE_ONNX_ATTR_GRAPHS = 10,
  NIMBLE_ONNX_ATTR_SPARSE_TENSOR = 11,
  NIMBLE_ONNX_ATTR_SPARSE_TENSORS = 12,
  NIMBLE_ONNX_ATTR_TYPE_PROTO = 13,
  NIMBLE_ONNX_ATTR_TYPE_PROTOS = 14,
} nimble_onnx_attr_type_t;

typedef struct nimble_onnx_graph nimble_onnx_graph;
typedef struct nimble_onnx_node nimble_onnx_node;
typedef struct nimble_onnx_model nimble_onnx_model;

/* Bytes that need not be NUL-terminated (STRING tensor elements, 's'). */
typedef struct nimble_onnx_bytes_t {
  const uint8_t *data;
  size_t size;
} nimble_onnx_bytes_t;

/* One dimension of a value's static type. */
typedef enum nimble_onnx_dim_kind {
  NIMBLE_ONNX_DIM_UNKNOWN = 0, /* neither dim_value nor dim_param */
  NIMBLE_ONNX_DIM_VALUE = 1,   /* a constant >= 0 */
  NIMBLE_ONNX_DIM_PARAM = 2,   /* a symbolic name, e.g. "batch" */
} nimble_onnx_dim_kind_t;

typedef struct nimble_onnx_dim_t {
  nimble_onnx_dim_kind_t kind;
  int64_t value;     /* for DIM_VALUE */
  const char *param; /* for DIM_PARAM; NULL otherwise */
} nimble_onnx_dim_t;

typedef enum nimble_onnx_type_kind {
  NIMBLE_ONNX_TYPE_TENSOR = 1,
  NIMBLE_ONNX_TYPE_SEQUENCE = 4,
  NIMBLE_ONNX_TYPE_MAP = 5,
  NIMBLE_ONNX_TYPE_SPARSE_TENSOR = 8,
  NIMBLE_ONNX_TYPE_OPTIONAL = 9,
} nimble_onnx_type_kind_t;

/* A static type. For tensors: elem_type and, when has_shape, rank dims
 * (has_shape 0 means the rank is unknown). Sequence and optional wrap
 * `elem`; a map has key_type and `elem` as its value type. */
typedef struct nimble_onnx_type_t {
  nimble_onnx_type_kind_t kind;
  nimble_onnx_dtype_t elem_type;
  int has_shape;
  size_t rank;
  const nimble_onnx_dim_t *dims;
  nimble_onnx_dtype_t key_type;
  const struct nimble_onnx_type_t *elem;
} nimble_onnx_type_t;

/* A tensor with its data decoded: `data` holds `count` elements of `dtype`
 * as fixed-width little-endian bytes (`size` bytes; BOOL one byte each,
 * FLOAT16/BFLOAT16 two, COMPLEX64 two floats), whichever field of the
 * TensorProto they came from. STRING tensors use `strings` instead. data is
 * NULL when count is 0. */
typedef struct nimble_onnx_tensor_t {
  const char *name; /* "" when the tensor is unnamed (attribute values) */
  nimble_onnx_dtype_t dtype;
  size_t rank;
  const int64_t *dims;
  uint64_t count;
  const void *data;
  size_t size;
  const nimble_onnx_bytes_t *strings; /* count entries, for STRING */
} nimble_onnx_tensor_t;

/* A sparse tensor: `values` (1-D, NNZ) at `indices` ([NNZ] linear or
 * [NNZ, rank] coordinates, INT64) of a dense tensor with `dims`. */
typedef struct nimble_onnx_sparse_tensor_t {
  const nimble_onnx_tensor_t *values;
  const nimble_onnx_tensor_t *indices;
  size_t rank;
  const int64_t *dims;
} nimble_onnx_sparse_tensor_t;

typedef struct nimble_onnx_attr_t {
  const char *name;
  nimble_onnx_attr_type_t type;
  float f;
  int64_t i;
  nimble_onnx_bytes_t s;       /* s.data[s.size] is a NUL byte */
  const nimble_onnx_tensor_t *t;
  const nimble_onnx_graph *g;
  const nimble_onnx_sparse_tensor_t *sparse_tensor;
  const nimble_onnx_type_t *tp;
  size_t n_floats;
  const float *floats;
  size_t n_ints;
  const int64_t *ints;
  size_t n_strings;
  const nimble_onnx_bytes_t *strings;
  size_t n_tensors;
  const nimble_onnx_tensor_t *const *tensors;
  size_t n_graphs;
  const nimble_onnx_graph *const *graphs;
  size_t n_sparse_tensors;
  const nimble_onnx_sparse_tensor_t *const *sparse_tensors;
  size_t n_type_protos;
  const nimble_onnx_type_t *const *type_protos;
} nimble_onnx_attr_t;

struct nimble_onnx_node {
  const char *name;    /* "" when unnamed; errors then say "node #index" */
  const char *op_type;
  const char *domain;  /* "" for the default domain (also for "ai.onnx") */
  int64_t opset;       /* the imported version of `domain` */
  size_t index;        /* position in the file's node list */
  size_t n_inputs;
  const char *const *inputs;   /* "" marks an omitted optional input */
  size_t n_outputs;
  const char *const *outputs;  /* "" marks an omitted optional output */
  size_t n_attrs;
  const nimble_onnx_attr_t *attrs;
  const nimble_onnx_graph *graph; /* the graph holding this node */
  /* For a Constant node of the default domain: its value as a tensor,
   * whichever attribute gave it (value, value_float(s), value_int(s),
   * value_string(s)); NULL otherwise (and for sparse_value). */
  const nimble_onnx_tensor_t *constant;
};

/* Where a value comes from. */
typedef enum nimble_onnx_value_kind {
  NIMBLE_ONNX_VALUE_GRAPH_INPUT = 1,  /* may also have an initializer as default */
  NIMBLE_ONNX_VALUE_INITIALIZER = 2,
  NIMBLE_ONNX_VALUE_SPARSE_INITIALIZER = 3,
  NIMBLE_ONNX_VALUE_NODE_OUTPUT = 4,
} nimble_onnx_value_kind_t;

typedef struct nimble_onnx_value_t {
  const char *name;
  nimble_onnx_value_kind_t kind;
  const nimble_onnx_graph *graph;       /* the graph that defines it */
  const nimble_onnx_node *producer;     /* for NODE_OUTPUT */
  size_t output_index;                  /* for NODE_OUTPUT */
  const nimble_onnx_tensor_t *initializer; /* INITIALIZER, or an input's default */
  const nimble_onnx_sparse_tensor_t *sparse_initializer;
  /* The static type when known (graph input/output, value_info, or an
   * initializer's dtype and dims); NULL when the file does not say. */
  const nimble_onnx_type_t *type;
} nimble_onnx_value_t;

struct nimble_onnx_graph {
  const char *name;
  const nimble_onnx_graph *parent;      /* NULL for the main graph */
  const nimble_onnx_node *owner;        /* the If/Loop/Scan node holding it */
  const char *owner_attr;               /* e.g. "then_branch"; NULL for main */
  size_t depth;                         /* 0 for the main graph */
  size_t n_nodes;
  const nimble_onnx_node *const *nodes; /* topological order */
  size_t n_inputs;
  const nimble_onnx_value_t *const *inputs;
  size_t n_outputs;
  const nimble_onnx_value_t *const *outputs; /* values may live in outer scopes */
  size_t n_initializers;
  const nimble_onnx_tensor_t *const *initializers;
  /* Names this graph uses from outer scopes (for subgraphs), in first-use
   * order: the implicit inputs of the owner node. */
  size_t n_outer_refs;
  const char *const *outer_refs;
};

typedef struct nimble_onnx_opset_t {
  const char *domain; /* "" for the default domain */
  int64_t version;
} nimble_onnx_opset_t;

/* Reads and validates the file at `path`. On success *out_model is a new
 * model the caller frees with nimble_onnx_model_destroy(); on failure it is
 * NULL and the status names the file, then the place and the problem. */
nimble_status_t nimble_onnx_model_load_file(const char *path, nimble_onnx_model **out_model);

/* Same for `size` bytes at `bytes` (borrowed; copied where needed, so the
 * caller may free them once this returns). `name_for_errors` prefixes
 * messages (e.g. the upload's file name); NULL gives "model". */
nimble_status_t nimble_onnx_model_load_memory(const void *bytes, size_t size,
                                              const char *name_for_errors,
                                              nimble_onnx_model **out_model);

/* Frees the model and everything reachable from it; NULL is fine. */
void nimble_onnx_model_destroy(nimble_onnx_model *model);

/* Model facts; strings are "" when absent. All borrowed from the model.
 * The opset imports are listed sorted by domain. */
const nimble_onnx_graph *nimble_onnx_model_graph(const nimble_onnx_model *model);
int64_t nimble_onnx_model_ir_version(const nimble_onnx_model *model);
const char *nimble_onnx_model_producer(const nimble_onnx_model *model);
size_t nimble_onnx_model_opset_count(const nimble_onnx_model *model);
const nimble_onnx_opset_t *nimble_onnx_model_opset_at(const nimble_onnx_model *model, size_t i);
/* The imported version of `domain` ("" or "ai.onnx" for the default); 0
 * when the model does not import it. */
int64_t nimble_onnx_model_opset(const nimble_onnx_model *model, const char *domain);

/* The value named `name` as seen from `graph`: this graph first, then its
 * outer scopes. NULL when no scope defines it (or name is ""). */
const nimble_onnx_value_t *nimble_onnx_graph_find_value(const nimble_onnx_graph *graph,
                                                        const char *name);

/* The producing node of `name` seen from `graph`, NULL for graph inputs,
 * initializers and unknown names. */
const nimble_onnx_node *nimble_onnx_graph_producer(const nimble_onnx_graph *graph,
                                                   const char *name);

/* The initializer (or a Constant node's value) named `name` seen from
 * `graph`; NULL when the value is not a constant known at load time. A
 * graph input with a default initializer is not constant (the caller may
 * override it), so it gives NULL. */
const nimble_onnx_tensor_t *nimble_onnx_graph_constant(const nimble_onnx_graph *graph,
                                                       const char *name);

/* "node 'Conv_3' (Conv)" or, for an unnamed node, "node #3 (Conv)", into
 * buf (always NUL-terminated); returns buf. For error messages. */
const char *nimble_onnx_node_describe(const nimble_onnx_node *node, char *buf, size_t size);

/* Prefixes `s` (taken) with the node, "node 'Conv_3' (Conv): ...", once:
 * a status that names the node already (its subject is the node,
 * nimble/status.h) is returned as it is, so layers that each add the node
 * add it once. Returns the status marked with the node; OK stays OK. */
nimble_status_t nimble_onnx_node_annotate(const nimble_onnx_node *node, nimble_status_t s);

/* The attribute named `name`, or NULL. Borrowed from the model. */
const nimble_onnx_attr_t *nimble_onnx_node_attr(const nimble_onnx_node *node, const char *name);

/* Typed attribute access. When the attribute is absent the default is
 * returned (or, for the *_required forms, NOT_FOUND naming the node); when
 * it has another type the error reads
 *   "node 'Conv_3' (Conv): attribute 'strides' must be INTS, got FLOAT".
 * Arrays and strings are borrowed from the model. */
nimble_status_t nimble_onnx_node_get_int(const nimble_onnx_node *node, const char *name,
                                         int64_t default_value, int64_t *out);
nimble_status_t nimble_onnx_node_get_float(const nimble_onnx_node *node, const char *name,
                                           float default_value, float *out);
/* The string attribute as a NUL-free C string; an embedded NUL is an error.
 * default_value is returned (borrowed from the caller) when absent. */
nimble_status_t nimble_onnx_node_get_string(const nimble_onnx_node *node, const char *name,
                                            const char *default_value, const char **out);
/* Absent gives *out_count 0 and *out NULL. */
nimble_status_t nimble_onnx_node_get_ints(const nimble_onnx_node *node, const char *name,
                                          const int64_t **out, size_t *out_count);
nimble_status_t nimble_onnx_node_get_floats(const nimble_onnx_node *node, const char *name,
                                            const float **out, size_t *out_count);
nimble_status_t nimble_onnx_node_get_tensor(const nimble_onnx_node *node, const char *name,
                                            const nimble_onnx_tensor_t **out);
nimble_status_t nimble_onnx_node_get_graph(const nimble_onnx_node *node, const char *name,
                                           const nimble_onnx_graph **out);
/* NOT_FOUND when absent, otherwise as above. */
nimble_status_t nimble_onnx_node_require_int(const nimble_onnx_node *node, const char *name,
                                             int64_t *out);

/* Names: "FLOAT", "INT64", ...; "UNDEFINED" for unknown numbers. */
const char *nimble_onnx_dtype_name(int dtype);
const char *nimble_onnx_attr_type_name(int type);
/* Bytes per element for fixed-width dtypes; 0 for STRING and UNDEFINED. */
size_t nimble_onnx_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_ONNX_MODEL_H */
