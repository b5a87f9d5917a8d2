/* Loading a model (file or memory), its accessors, and typed attribute
 * access for the importer. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"
#include "onnx_wire.h"

static const char *const attr_type_names[] = {
    "UNDEFINED",      "FLOAT",      "INT",        "STRING",  "TENSOR", "GRAPH",
    "FLOATS",         "INTS",       "STRINGS",    "TENSORS", "GRAPHS", "SPARSE_TENSOR",
    "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};

const char *nimble_onnx_attr_type_name(int type) {
  if (type < 0 || type > NIMBLE_ONNX_ATTR_TYPE_PROTOS) return "UNDEFINED";
  return attr_type_names[type];
}

static int compare_opsets(const void *a, const void *b) {
  return strcmp(((const nimble_onnx_opset_t *)a)->domain, ((const nimble_onnx_opset_t *)b)->domain);
}

static nimble_status_t check_opsets(nimble_onnx_model *m) {
  const Onnx__ModelProto *p = m->proto;
  m->opsets = nimble_arena_calloc(m->arena, p->n_opset_import, sizeof(*m->opsets));
  if (!m->opsets)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for opset imports");
  onnx_name_set seen = {0}; /* a set: files may list many imports */
  for (size_t i = 0; i < p->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = p->opset_import[i];
    const char *domain = onnx_str(o->domain);
    if (strcmp(domain, "ai.onnx") == 0) domain = "";
    if (!o->has_version || o->version < 1) {
      free(seen.slots);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "opset import for domain '%s' has no valid version",
                                domain[0] ? domain : "ai.onnx");
    }
    int added = nimble_onnx_name_set_add(&seen, domain);
    if (added <= 0) {
      free(seen.slots);
      if (added < 0)
        return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for opset imports");
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "domain '%s' is imported twice",
                                domain[0] ? domain : "ai.onnx");
    }
    m->opsets[m->n_opsets].domain = domain;
    m->opsets[m->n_opsets].version = o->version;
    m->n_opsets++;
  }
  free(seen.slots);
  /* Sorted by domain, so every node finds its domain's version quickly. */
  if (m->n_opsets > 1) qsort(m->opsets, m->n_opsets, sizeof(*m->opsets), compare_opsets);
  /* A model whose nodes are all in other domains (the training operators)
   * need not import the default one; a node that uses it does, which the
   * graph checks name. An empty list is always wrong. */
  if (m->n_opsets == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "the model has no opset_import; it must name the version of "
                              "the default domain (ai.onnx)");
  return nimble_ok();
}

static nimble_status_t load(const uint8_t *bytes, size_t size, nimble_onnx_model **out) {
  if ((uint64_t)size > NIMBLE_ONNX_MAX_FILE_SIZE)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%zu bytes is over the %" PRIu64 " byte limit for a model", size,
                              (uint64_t)NIMBLE_ONNX_MAX_FILE_SIZE);
  if (size == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the file is empty");
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_wire_check(bytes, size));
  nimble_onnx_model *m = calloc(1, sizeof(*m));
  if (!m) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for a model");
  nimble_status_t s = nimble_arena_create(&m->arena);
  if (s) goto fail;
  m->proto = onnx__model_proto__unpack(NULL, size, bytes);
  if (!m->proto) {
    /* The wire check passed, so protobuf-c objected to something it
     * checks beyond the wire format, or ran out of memory. */
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "protobuf-c could not decode the ModelProto (or ran out of memory)");
    goto fail;
  }
  m->ir_version = m->proto->has_ir_version ? m->proto->ir_version : 0;
  m->producer = onnx_str(m->proto->producer_name);
  if ((s = check_opsets(m))) goto fail;
  if (!m->proto->graph) {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the model has no graph");
    goto fail;
  }
  onnx_loader ld = {m};
  if ((s = nimble_onnx_build_graph(&ld, m->proto->graph, NULL, NULL, NULL, 0, &m->main))) goto fail;
  *out = m;
  return nimble_ok();
fail:
  nimble_onnx_model_destroy(m);
  return s;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  size_t len;
  if (p[0] < 0x80) return 1;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    len = 2;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    len = 3;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    len = 4;
  else
    return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  /* overlong 3/4-byte forms, surrogates, and code points past U+10FFFF */
  if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
  if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
  return len;
}

/* Names in messages come from the file. Messages travel on (JSON to the
 * client, terminals), so control characters and bytes that are not UTF-8
 * are written as \xNN. Takes ownership of s. */
static nimble_status_t clean_message(nimble_status_t s) {
  const unsigned char *msg = (const unsigned char *)nimble_status_message(s);
  size_t n = strlen((const char *)msg), bad = 0;
  for (size_t i = 0; i < n;) {
    size_t len = msg[i] < 0x20 || msg[i] == 0x7f ? 0 : utf8_len(msg + i, n - i);
    if (!len) bad++, len = 1;
    i += len;
  }
  if (!bad) return s;
  char *out = malloc(n + 3 * bad + 1);
  if (!out) return s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = msg[i] < 0x20 || msg[i] == 0x7f ? 0 : utf8_len(msg + i, n - i);
    if (len) {
      memcpy(out + o, msg + i, len);
      o += len;
      i += len;
    } else {
      o += (size_t)snprintf(out + o, 5, "\\x%02x", msg[i]);
      i++;
    }
  }
  out[o] = '\0';
  /* The cleaned copy keeps what the original knew: its subject and where
   * it was made. */
  int line = 0;
  const char *file = nimble_status_source(s, &line);
  nimble_status_t clean = nimble_status_make_at(file, line, nimble_status_code(s), "%s", out);
  free(out);
  clean = nimble_status_set_subject(clean, nimble_status_subject(s));
  nimble_status_free(s);
  return clean;
}

nimble_status_t nimble_onnx_model_load_memory(const void *bytes, size_t size,
                                              const char *name_for_errors,
                                              nimble_onnx_model **out_model) {
  *out_model = NULL;
  const char *name = name_for_errors ? name_for_errors : "model";
  if (!bytes && size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: no bytes given", name);
  nimble_status_t s = load(bytes, size, out_model);
  return s ? clean_message(nimble_status_annotate(s, "%s", name)) : s;
}

nimble_status_t nimble_onnx_model_load_file(const char *path, nimble_onnx_model **out_model) {
  *out_model = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(errno == ENOENT ? NIMBLE_NOT_FOUND : NIMBLE_IO_ERROR,
                              "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path,
                              S_ISREG(st.st_mode) ? strerror(err) : "not a regular file");
  }
  if ((uint64_t)st.st_size > NIMBLE_ONNX_MAX_FILE_SIZE) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%s: %" PRId64 " bytes is over the %" PRIu64
                              " byte limit for a model",
                              path, (int64_t)st.st_size, (uint64_t)NIMBLE_ONNX_MAX_FILE_SIZE);
  }
  size_t size = (size_t)st.st_size;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes", path,
                              size);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = errno;
      free(buf);
      close(fd);
      return nimble_status_make(NIMBLE_IO_ERROR, "%s: read failed at byte %zu: %s", path, got,
                                r == 0 ? "file shrank while reading" : strerror(err));
    }
    got += (size_t)r;
  }
  close(fd);
  nimble_status_t s = load(buf, size, out_model);
  free(buf);
  return s ? clean_message(nimble_status_annotate(s, "%s", path)) : s;
}

void nimble_onnx_model_destroy(nimble_onnx_model *model) {
  if (!model) return;
  if (model->proto) onnx__model_proto__free_unpacked(model->proto, NULL);
  nimble_arena_destroy(model->arena);
  free(model);
}

const nimble_onnx_graph *nimble_onnx_model_graph(const nimble_onnx_model *model) {
  return &model->main->pub;
}

int64_t nimble_onnx_model_ir_version(const nimble_onnx_model *model) { return model->ir_version; }

const char *nimble_onnx_model_producer(const nimble_onnx_model *model) { return model->producer; }

size_t nimble_onnx_model_opset_count(const nimble_onnx_model *model) { return model->n_opsets; }

const nimble_onnx_opset_t *nimble_onnx_model_opset_at(const nimble_onnx_model *model, size_t i) {
  return i < model->n_opsets ? &model->opsets[i] : NULL;
}

int64_t nimble_onnx_model_opset(const nimble_onnx_model *model, const char *domain) {
  if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
  nimble_onnx_opset_t key = {domain, 0};
  const nimble_onnx_opset_t *found =
      model->n_opsets ? bsearch(&key, model->opsets, model->n_opsets, sizeof(key), compare_opsets)
                      : NULL;
  return found ? found->version : 0;
}

const nimble_onnx_value_t *nimble_onnx_graph_find_value(const nimble_onnx_graph *graph,
                                                        const char *name) {
  if (!name || !name[0]) return NULL;
  for (const nimble_onnx_graph *g = graph; g; g = g->parent) {
    const nimble_onnx_value_t *v =
        nimble_onnx_table_find(&((const onnx_graph_impl *)g)->values, name);
    if (v) return v;
  }
  return NULL;
}

const nimble_onnx_node *nimble_onnx_graph_producer(const nimble_onnx_graph *graph,
                                                   const char *name) {
  const nimble_onnx_value_t *v = nimble_onnx_graph_find_value(graph, name);
  return v && v->kind == NIMBLE_ONNX_VALUE_NODE_OUTPUT ? v->producer : NULL;
}

const nimble_onnx_tensor_t *nimble_onnx_graph_constant(const nimble_onnx_graph *graph,
                                                       const char *name) {
  const nimble_onnx_value_t *v = nimble_onnx_graph_find_value(graph, name);
  if (!v) return NULL;
  if (v->kind == NIMBLE_ONNX_VALUE_INITIALIZER) return v->initializer;
  if (v->kind == NIMBLE_ONNX_VALUE_NODE_OUTPUT) return v->producer->constant;
  return NULL;
}

const nimble_onnx_attr_t *nimble_onnx_node_attr(const nimble_onnx_node *node, const char *name) {
  for (size_t i = 0; i < node->n_attrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
  return NULL;
}

/* The attribute if present with type `want`; *out NULL when absent. */
static nimble_status_t typed_attr(const nimble_onnx_node *node, const char *name,
                                  nimble_onnx_attr_type_t want, const nimble_onnx_attr_t **out) {
  const nimble_onnx_attr_t *a = nimble_onnx_node_attr(node, name);
  *out = NULL;
  if (!a) return nimble_ok();
  if (a->type != want) {
    return clean_message(nimble_onnx_node_annotate(
        node, nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' must be %s, got %s", name,
                                 nimble_onnx_attr_type_name(want), nimble_onnx_attr_type_name(a->type))));
  }
  *out = a;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_int(const nimble_onnx_node *node, const char *name,
                                         int64_t default_value, int64_t *out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_INT, &a));
  *out = a ? a->i : default_value;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_require_int(const nimble_onnx_node *node, const char *name,
                                             int64_t *out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_INT, &a));
  if (!a) {
    return clean_message(nimble_onnx_node_annotate(
        node, nimble_status_make(NIMBLE_NOT_FOUND, "required attribute '%s' is missing", name)));
  }
  *out = a->i;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_float(const nimble_onnx_node *node, const char *name,
                                           float default_value, float *out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_FLOAT, &a));
  *out = a ? a->f : default_value;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_string(const nimble_onnx_node *node, const char *name,
                                            const char *default_value, const char **out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_STRING, &a));
  if (!a) {
    *out = default_value;
    return nimble_ok();
  }
  /* s is followed by a NUL (the loader copies it so), but it may hold one
   * inside too, which a C string would silently cut. */
  if (a->s.size && memchr(a->s.data, 0, a->s.size)) {
    return clean_message(nimble_onnx_node_annotate(
        node, nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' contains a NUL byte", name)));
  }
  *out = (const char *)a->s.data;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_ints(const nimble_onnx_node *node, const char *name,
                                          const int64_t **out, size_t *out_count) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_INTS, &a));
  *out = a && a->n_ints ? a->ints : NULL;
  *out_count = a ? a->n_ints : 0;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_floats(const nimble_onnx_node *node, const char *name,
                                            const float **out, size_t *out_count) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_FLOATS, &a));
  *out = a && a->n_floats ? a->floats : NULL;
  *out_count = a ? a->n_floats : 0;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_tensor(const nimble_onnx_node *node, const char *name,
                                            const nimble_onnx_tensor_t **out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_TENSOR, &a));
  *out = a ? a->t : NULL;
  return nimble_ok();
}

nimble_status_t nimble_onnx_node_get_graph(const nimble_onnx_node *node, const char *name,
                                           const nimble_onnx_graph **out) {
  const nimble_onnx_attr_t *a;
  NIMBLE_RETURN_IF_ERROR(typed_attr(node, name, NIMBLE_ONNX_ATTR_GRAPH, &a));
  *out = a ? a->g : NULL;
  return nimble_ok();
}
