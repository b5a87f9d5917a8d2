/* Hand-built ONNX models for tests, encoded with the loader suites'
 * protobuf writer (onnx_test_util.h): graphs with typed inputs and
 * outputs, initializers, nodes with int/ints/float/string attributes and
 * subgraphs (If branches, Loop bodies). Field numbers are those of
 * onnx.proto3 (ModelProto, GraphProto, NodeProto, AttributeProto,
 * ValueInfoProto, TensorProto). Header-only: static inline functions. */
#ifndef NIMBLE_ONNX_MODEL_BUILDER_H
#define NIMBLE_ONNX_MODEL_BUILDER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_test_util.h"

enum { OMB_FLOAT = 1, OMB_INT64 = 7, OMB_BOOL = 9 };

typedef struct omb_graph {
  onnx_test_buf buf;
} omb_graph;

/* A value's type: elem type, rank (-1: no shape at all) and dims, each a
 * number, a dim_param name, or "" (unknown). */
static inline void omb_value(omb_graph *g, unsigned field, const char *name, int elem, int rank, const char *const *dims) {
  onnx_test_buf shape = {0}, tensor = {0}, type = {0}, vi = {0};
  for (int i = 0; i < rank; i++) {
    onnx_test_buf dim = {0};
    char *end;
    long v = strtol(dims[i], &end, 10);
    if (dims[i][0] == 0) {
    } else if (*end == 0) {
      pb_int(&dim, 1, v);
    } else {
      pb_str(&dim, 2, dims[i]);
    }
    pb_msg(&shape, 1, &dim);
    pb_free(&dim);
  }
  pb_int(&tensor, 1, elem);
  if (rank >= 0) pb_msg(&tensor, 2, &shape);
  pb_msg(&type, 1, &tensor);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  pb_msg(&g->buf, field, &vi);
  pb_free(&shape);
  pb_free(&tensor);
  pb_free(&type);
  pb_free(&vi);
}
static inline void omb_input(omb_graph *g, const char *name, int elem, int rank, const char *const *dims) {
  omb_value(g, 11, name, elem, rank, dims);
}
static inline void omb_output(omb_graph *g, const char *name, int elem, int rank, const char *const *dims) {
  omb_value(g, 12, name, elem, rank, dims);
}

/* Initializers (raw little-endian data). */
static inline void omb_init(omb_graph *g, const char *name, int elem, int rank, const int64_t *dims, const void *data,
                     size_t bytes) {
  onnx_test_buf t = {0};
  for (int i = 0; i < rank; i++) pb_int(&t, 1, dims[i]);
  pb_int(&t, 2, elem);
  pb_str(&t, 8, name);
  pb_bytes(&t, 9, data, bytes);
  pb_msg(&g->buf, 5, &t);
  pb_free(&t);
}
static inline void omb_init_f32(omb_graph *g, const char *name, int rank, const int64_t *dims, const float *v, size_t n) {
  omb_init(g, name, OMB_FLOAT, rank, dims, v, n * sizeof(float));
}
static inline void omb_init_i64(omb_graph *g, const char *name, int rank, const int64_t *dims, const int64_t *v, size_t n) {
  omb_init(g, name, OMB_INT64, rank, dims, v, n * sizeof(int64_t));
}

/* One attribute: kind 1 float, 2 int, 3 string, 5 graph, 7 ints. A graph
 * attribute's buffer is consumed when the node is written. */
typedef struct omb_attr {
  const char *name;
  int kind;
  int64_t i;
  const int64_t *ints;
  size_t n;
  float f;
  const char *s;
  omb_graph *graph;
} omb_attr;

static inline omb_attr omb_a_int(const char *name, int64_t v) {
  omb_attr a = {name, 2, v, NULL, 0, 0, NULL, NULL};
  return a;
}
static inline omb_attr omb_a_ints(const char *name, const int64_t *v, size_t n) {
  omb_attr a = {name, 7, 0, v, n, 0, NULL, NULL};
  return a;
}
static inline omb_attr omb_a_graph(const char *name, omb_graph *g) {
  omb_attr a = {name, 5, 0, NULL, 0, 0, NULL, g};
  return a;
}

static inline void omb_node(omb_graph *g, const char *name, const char *op, const char *const *ins, size_t nin,
                     const char *const *outs, size_t nout, const omb_attr *attrs, size_t nattrs) {
  onnx_test_buf nd = {0};
  for (size_t i = 0; i < nin; i++) pb_str(&nd, 1, ins[i]);
  for (size_t i = 0; i < nout; i++) pb_str(&nd, 2, outs[i]);
  pb_str(&nd, 3, name);
  pb_str(&nd, 4, op);
  for (size_t i = 0; i < nattrs; i++) {
    onnx_test_buf a = {0};
    pb_str(&a, 1, attrs[i].name);
    switch (attrs[i].kind) {
      case 1:
        pb_tag(&a, 2, 5);
        pb_raw(&a, &attrs[i].f, 4);
        break;
      case 2: pb_int(&a, 3, attrs[i].i); break;
      case 3: pb_str(&a, 4, attrs[i].s); break;
      case 5:
        pb_str(&attrs[i].graph->buf, 2, attrs[i].name);
        pb_msg(&a, 6, &attrs[i].graph->buf);
        pb_free(&attrs[i].graph->buf);
        break;
      case 7:
        for (size_t k = 0; k < attrs[i].n; k++) pb_int(&a, 8, attrs[i].ints[k]);
        break;
    }
    pb_int(&a, 20, attrs[i].kind);
    pb_msg(&nd, 5, &a);
    pb_free(&a);
  }
  pb_msg(&g->buf, 1, &nd);
  pb_free(&nd);
}

/* The model around the main graph (consumed), opset `opset` of the default
 * domain; caller frees with pb_free. */
static inline onnx_test_buf omb_model(omb_graph *g, int64_t opset) {
  onnx_test_buf model = {0}, op = {0};
  pb_str(&g->buf, 2, "g");
  pb_int(&model, 1, 8);
  pb_str(&op, 1, "");
  pb_int(&op, 2, opset);
  pb_msg(&model, 8, &op);
  pb_msg(&model, 7, &g->buf);
  pb_free(&op);
  pb_free(&g->buf);
  return model;
}

/* Writes the model (consumed) to path; 0 on success. */
static inline int omb_write(omb_graph *g, int64_t opset, const char *path) {
  onnx_test_buf m = omb_model(g, opset);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(m.data, 1, m.size, f) == m.size;
  if (f && fclose(f) != 0) ok = 0;
  pb_free(&m);
  return ok ? 0 : -1;
}

#endif /* NIMBLE_ONNX_MODEL_BUILDER_H */
