/* libFuzzer target: any bytes through nimble_onnx_model_load_memory, then a
 * walk of everything a loaded model exposes, reading every byte of tensor
 * data, so that the sanitizers see any out-of-bounds or dangling pointer.
 * Built by scripts/fuzz-onnx.sh; the crash-regression corpus in
 * tests/compiler/onnx/corpus/ is replayed through the same function by the
 * test_onnx_corpus suite. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/onnx_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) acc += b[i];
  sink += acc;
}

static void walk_type(const nimble_onnx_type_t *t) {
  for (int guard = 0; t && guard < 200; guard++, t = t->elem) {
    sink += (uint64_t)t->kind + (uint64_t)t->elem_type;
    for (size_t i = 0; t->has_shape && i < t->rank; i++) {
      sink += (uint64_t)t->dims[i].value;
      if (t->dims[i].param) sink += strlen(t->dims[i].param);
    }
  }
}

static void walk_tensor(const nimble_onnx_tensor_t *t) {
  if (!t) return;
  sink += strlen(t->name);
  touch(t->dims, t->rank * sizeof(int64_t));
  if (t->dtype == NIMBLE_ONNX_STRING) {
    for (uint64_t i = 0; i < t->count; i++) touch(t->strings[i].data, t->strings[i].size);
  } else {
    if (t->size != t->count * nimble_onnx_dtype_size(t->dtype)) abort();
    touch(t->data, t->size);
  }
}

static void walk_graph(const nimble_onnx_graph *g);

static void walk_node(const nimble_onnx_node *n) {
  char buf[256];
  sink += strlen(nimble_onnx_node_describe(n, buf, sizeof(buf)));
  for (size_t i = 0; i < n->n_inputs; i++) {
    const nimble_onnx_value_t *v = nimble_onnx_graph_find_value(n->graph, n->inputs[i]);
    if (n->inputs[i][0] && !v) abort(); /* the loader promised every input resolves */
    if (v) walk_type(v->type);
    const nimble_onnx_tensor_t *c = nimble_onnx_graph_constant(n->graph, n->inputs[i]);
    walk_tensor(c);
    const nimble_onnx_node *p = nimble_onnx_graph_producer(n->graph, n->inputs[i]);
    if (p) sink += p->index;
  }
  for (size_t i = 0; i < n->n_outputs; i++) {
    if (!n->outputs[i][0]) continue;
    if (nimble_onnx_graph_producer(n->graph, n->outputs[i]) != n) abort();
  }
  walk_tensor(n->constant);
  for (size_t i = 0; i < n->n_attrs; i++) {
    const nimble_onnx_attr_t *a = &n->attrs[i];
    int64_t iv;
    float fv;
    const char *sv;
    const int64_t *ints;
    const float *floats;
    size_t count;
    const nimble_onnx_tensor_t *t;
    const nimble_onnx_graph *g;
    /* Every accessor either succeeds or gives an error; none may crash. */
    nimble_status_free(nimble_onnx_node_get_int(n, a->name, 0, &iv));
    nimble_status_free(nimble_onnx_node_get_float(n, a->name, 0, &fv));
    nimble_status_free(nimble_onnx_node_get_string(n, a->name, "", &sv));
    nimble_status_free(nimble_onnx_node_get_ints(n, a->name, &ints, &count));
    nimble_status_free(nimble_onnx_node_get_floats(n, a->name, &floats, &count));
    nimble_status_free(nimble_onnx_node_get_tensor(n, a->name, &t));
    nimble_status_free(nimble_onnx_node_get_graph(n, a->name, &g));
    touch(a->s.data, a->s.size + 1);
    touch(a->ints, a->n_ints * sizeof(int64_t));
    touch(a->floats, a->n_floats * sizeof(float));
    for (size_t k = 0; k < a->n_strings; k++) touch(a->strings[k].data, a->strings[k].size);
    walk_tensor(a->t);
    for (size_t k = 0; k < a->n_tensors; k++) walk_tensor(a->tensors[k]);
    if (a->sparse_tensor) {
      walk_tensor(a->sparse_tensor->values);
      walk_tensor(a->sparse_tensor->indices);
    }
    walk_type(a->tp);
    if (a->g) walk_graph(a->g);
    for (size_t k = 0; k < a->n_graphs; k++) walk_graph(a->graphs[k]);
  }
}

static void walk_graph(const nimble_onnx_graph *g) {
  for (size_t i = 0; i < g->n_inputs; i++) {
    walk_type(g->inputs[i]->type);
    walk_tensor(g->inputs[i]->initializer);
  }
  for (size_t i = 0; i < g->n_initializers; i++) walk_tensor(g->initializers[i]);
  for (size_t i = 0; i < g->n_outputs; i++) walk_type(g->outputs[i]->type);
  for (size_t i = 0; i < g->n_outer_refs; i++)
    if (!nimble_onnx_graph_find_value(g, g->outer_refs[i])) abort();
  for (size_t i = 0; i < g->n_nodes; i++) walk_node(g->nodes[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_onnx_model *m = NULL;
  nimble_status_t s = nimble_onnx_model_load_memory(data, size, "fuzz.onnx", &m);
  if (s) {
    /* An error must say something and leave no model behind. */
    if (m || !nimble_status_message(s)[0]) abort();
    nimble_status_free(s);
    return 0;
  }
  walk_graph(nimble_onnx_model_graph(m));
  for (size_t i = 0; i < nimble_onnx_model_opset_count(m); i++)
    sink += (uint64_t)nimble_onnx_model_opset_at(m, i)->version;
  nimble_onnx_model_destroy(m);
  return 0;
}
