/* The artifact config blob: target, compiler, model and entry signatures. */
#include "nimble/artifact_config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_codec.h"
#include "nimble/manifest.h"
#include "nimble/text_quote.h"

static const char *const kDtypeNames[NIMBLE_CONFIG_DTYPE_COUNT_] = {
    "bool",   "int8",   "int16",   "int32",    "int64",   "uint8",   "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
};

const char *nimble_config_dtype_name(nimble_config_dtype_t dtype) {
  return (unsigned)dtype < NIMBLE_CONFIG_DTYPE_COUNT_ ? kDtypeNames[dtype] : "unknown";
}

nimble_status_t nimble_config_dtype_parse(const char *name, nimble_config_dtype_t *out) {
  for (int i = 0; i < NIMBLE_CONFIG_DTYPE_COUNT_; i++) {
    if (strcmp(kDtypeNames[i], name) == 0) {
      *out = (nimble_config_dtype_t)i;
      return nimble_ok();
    }
  }
  char q[48];
  nimble_text_quote(name, strlen(name), q, sizeof(q));
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "unknown dtype '%s' (known: bool, int8, int16, int32, int64, uint8, "
                            "uint16, uint32, uint64, float16, bfloat16, float32, float64)",
                            q);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static void value_deinit(nimble_value_sig_t *v) {
  free(v->name);
  free(v->type);
  for (size_t i = 0; i < v->rank; i++) free(v->dims[i].symbol);
  free(v->dims);
  memset(v, 0, sizeof(*v));
}

static void entry_deinit(nimble_entry_sig_t *e) {
  free(e->name);
  for (size_t i = 0; i < e->input_count; i++) value_deinit(&e->inputs[i]);
  for (size_t i = 0; i < e->output_count; i++) value_deinit(&e->outputs[i]);
  free(e->inputs);
  free(e->outputs);
  memset(e, 0, sizeof(*e));
}

void nimble_artifact_config_init(nimble_artifact_config_t *c) { memset(c, 0, sizeof(*c)); }

void nimble_artifact_config_deinit(nimble_artifact_config_t *c) {
  free(c->compiler_version);
  for (size_t i = 0; i < c->entry_count; i++) entry_deinit(&c->entries[i]);
  free(c->entries);
  memset(c, 0, sizeof(*c));
}

/* ---- rules ---- */

static nimble_status_t check_name(const char *name, size_t max, const char *path) {
  if (!name || !name[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty", path);
  size_t n = strlen(name);
  if (n > max) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %zu bytes is longer than %zu", path, n,
                              max);
  }
  return nimble_ok();
}

static int is_ident_char(char c, int first) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return 1;
  return !first && c >= '0' && c <= '9';
}

static nimble_status_t check_symbol(const char *s, const char *path) {
  size_t n = strlen(s);
  if (n == 1 && s[0] == '?') return nimble_ok();
  if (n == 0 || n > NIMBLE_CONFIG_MAX_SYMBOL) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: a symbolic dimension has 1 to %d bytes, got %zu", path,
                              NIMBLE_CONFIG_MAX_SYMBOL, n);
  }
  for (size_t i = 0; i < n; i++) {
    if (!is_ident_char(s[i], i == 0)) {
      char q[80];
      nimble_text_quote(s, n, q, sizeof(q));
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: '%s' is neither \"?\" nor a name like \"batch\"", path, q);
    }
  }
  return nimble_ok();
}

static nimble_status_t check_value(const nimble_value_sig_t *v, const char *path) {
  char p[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(p, path, "name");
  NIMBLE_RETURN_IF_ERROR(check_name(v->name, NIMBLE_CONFIG_MAX_NAME, p));
  if (v->type) {
    nimble_json_path_key(p, path, "type");
    NIMBLE_RETURN_IF_ERROR(check_name(v->type, NIMBLE_CONFIG_MAX_TYPE_TEXT, p));
    return nimble_ok();
  }
  if ((unsigned)v->dtype >= NIMBLE_CONFIG_DTYPE_COUNT_) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.dtype: %d is not a dtype", path,
                              (int)v->dtype);
  }
  if (v->rank > NIMBLE_CONFIG_MAX_RANK) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s.shape: rank %zu is more than %d", path,
                              v->rank, NIMBLE_CONFIG_MAX_RANK);
  }
  char shape[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(shape, path, "shape");
  for (size_t i = 0; i < v->rank; i++) {
    nimble_json_path_index(p, shape, i);
    if (v->dims[i].symbol) {
      NIMBLE_RETURN_IF_ERROR(check_symbol(v->dims[i].symbol, p));
    } else if (v->dims[i].value < 0) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %lld is negative", p,
                                (long long)v->dims[i].value);
    }
  }
  return nimble_ok();
}

static nimble_status_t check_values(const nimble_value_sig_t *vals, size_t n, const char *path) {
  if (n > NIMBLE_CONFIG_MAX_VALUES) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %zu items is more than %d", path, n,
                              NIMBLE_CONFIG_MAX_VALUES);
  }
  char p[NIMBLE_JSON_PATH_MAX];
  for (size_t i = 0; i < n; i++) {
    nimble_json_path_index(p, path, i);
    NIMBLE_RETURN_IF_ERROR(check_value(&vals[i], p));
    for (size_t k = 0; k < i; k++) {
      if (strcmp(vals[k].name, vals[i].name) == 0) {
        char q[80];
        nimble_text_quote(vals[i].name, strlen(vals[i].name), q, sizeof(q));
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "%s.name: '%s' is used twice (also %s[%zu])", p, q, path, k);
      }
    }
  }
  return nimble_ok();
}

static nimble_status_t check_entry(const nimble_artifact_config_t *c, size_t index) {
  char path[NIMBLE_JSON_PATH_MAX], p[NIMBLE_JSON_PATH_MAX];
  const nimble_entry_sig_t *e = &c->entries[index];
  nimble_json_path_index(path, "entries", index);
  nimble_json_path_key(p, path, "name");
  NIMBLE_RETURN_IF_ERROR(check_name(e->name, NIMBLE_CONFIG_MAX_NAME, p));
  for (size_t k = 0; k < index; k++) {
    if (strcmp(c->entries[k].name, e->name) == 0) {
      char q[80];
      nimble_text_quote(e->name, strlen(e->name), q, sizeof(q));
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: entry '%s' is defined twice (also entries[%zu])", p, q, k);
    }
  }
  nimble_json_path_key(p, path, "inputs");
  NIMBLE_RETURN_IF_ERROR(check_values(e->inputs, e->input_count, p));
  nimble_json_path_key(p, path, "outputs");
  return check_values(e->outputs, e->output_count, p);
}

nimble_status_t nimble_artifact_config_validate(const nimble_artifact_config_t *c) {
  if (!c->target[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "target: missing");
  char canon[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_canonicalize(c->target, canon), "target");
  if (strcmp(canon, c->target) != 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "target: '%s' is not canonical (write '%s')", c->target, canon);
  }
  NIMBLE_RETURN_IF_ERROR(check_name(c->compiler_version, NIMBLE_CONFIG_MAX_NAME, "compilerVersion"));
  if (c->entry_count == 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entries: needs at least 1 item, got 0");
  }
  if (c->entry_count > NIMBLE_CONFIG_MAX_ENTRIES) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entries: %zu items is more than %d",
                              c->entry_count, NIMBLE_CONFIG_MAX_ENTRIES);
  }
  for (size_t i = 0; i < c->entry_count; i++) NIMBLE_RETURN_IF_ERROR(check_entry(c, i));
  return nimble_ok();
}

/* ---- building ---- */

nimble_status_t nimble_artifact_config_set_build(nimble_artifact_config_t *c, const char *target,
                                                 const char *compiler_version,
                                                 const nimble_digest_t *model,
                                                 const nimble_digest_t *compiler_build) {
  char canon[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_canonicalize(target, canon), "target");
  NIMBLE_RETURN_IF_ERROR(check_name(compiler_version, NIMBLE_CONFIG_MAX_NAME, "compilerVersion"));
  if (!model) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "model: missing");
  char *version = dup_str(compiler_version);
  if (!version) return NIMBLE_OOM_IN("compilerVersion");
  free(c->compiler_version);
  c->compiler_version = version;
  strcpy(c->target, canon);
  c->model = *model;
  c->has_compiler_build = compiler_build != NULL;
  if (compiler_build) c->compiler_build = *compiler_build;
  return nimble_ok();
}

nimble_status_t nimble_artifact_config_add_entry(nimble_artifact_config_t *c, const char *name,
                                                 nimble_entry_sig_t **out_entry) {
  if (c->entry_count >= NIMBLE_CONFIG_MAX_ENTRIES) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entries: more than %d",
                              NIMBLE_CONFIG_MAX_ENTRIES);
  }
  char *copy = name ? dup_str(name) : NULL;
  if (name && !copy) return NIMBLE_OOM_IN("entries");
  nimble_entry_sig_t *grown = realloc(c->entries, (c->entry_count + 1) * sizeof(*grown));
  if (!grown) {
    free(copy);
    return NIMBLE_OOM_IN("entries");
  }
  c->entries = grown;
  nimble_entry_sig_t *e = &c->entries[c->entry_count++];
  memset(e, 0, sizeof(*e));
  e->name = copy;
  nimble_status_t s = check_entry(c, c->entry_count - 1);
  if (s) {
    entry_deinit(e);
    c->entry_count--;
    return s;
  }
  if (out_entry) *out_entry = e;
  return nimble_ok();
}

/* Appends an empty value to the entry's inputs or outputs. */
static nimble_status_t push_value(nimble_entry_sig_t *e, int is_output, nimble_value_sig_t **out) {
  nimble_value_sig_t **items = is_output ? &e->outputs : &e->inputs;
  size_t *count = is_output ? &e->output_count : &e->input_count;
  if (*count >= NIMBLE_CONFIG_MAX_VALUES) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: more than %d",
                              is_output ? "outputs" : "inputs", NIMBLE_CONFIG_MAX_VALUES);
  }
  nimble_value_sig_t *grown = realloc(*items, (*count + 1) * sizeof(*grown));
  if (!grown) return NIMBLE_OOM_IN(is_output ? "outputs" : "inputs");
  *items = grown;
  *out = &grown[(*count)++];
  memset(*out, 0, sizeof(**out));
  return nimble_ok();
}

/* Checks the newest value of a list; on error removes it. */
static nimble_status_t finish_value(nimble_entry_sig_t *e, int is_output, nimble_status_t s) {
  nimble_value_sig_t *items = is_output ? e->outputs : e->inputs;
  size_t *count = is_output ? &e->output_count : &e->input_count;
  const char *what = is_output ? "outputs" : "inputs";
  if (!s) s = check_values(items, *count, what);
  if (s) {
    value_deinit(&items[*count - 1]);
    (*count)--;
  }
  return s;
}

nimble_status_t nimble_entry_sig_add_tensor(nimble_entry_sig_t *e, int is_output, const char *name,
                                            nimble_config_dtype_t dtype, const nimble_config_dim_t *dims,
                                            size_t rank) {
  nimble_value_sig_t *v;
  if (rank > NIMBLE_CONFIG_MAX_RANK) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "shape: rank %zu is more than %d", rank,
                              NIMBLE_CONFIG_MAX_RANK);
  }
  NIMBLE_RETURN_IF_ERROR(push_value(e, is_output, &v));
  nimble_status_t s = nimble_ok();
  v->name = name ? dup_str(name) : NULL;
  v->dtype = dtype;
  if (name && !v->name) s = NIMBLE_OOM_IN("name");
  if (!s && rank) {
    v->dims = calloc(rank, sizeof(*v->dims));
    if (!v->dims) s = NIMBLE_OOM_IN("shape");
  }
  for (size_t i = 0; !s && i < rank; i++) {
    v->rank = i + 1;
    v->dims[i].value = dims[i].symbol ? 0 : dims[i].value;
    if (dims[i].symbol) {
      v->dims[i].symbol = dup_str(dims[i].symbol);
      if (!v->dims[i].symbol) s = NIMBLE_OOM_IN("shape");
    }
  }
  return finish_value(e, is_output, s);
}

nimble_status_t nimble_entry_sig_add_value(nimble_entry_sig_t *e, int is_output, const char *name,
                                           const char *type_text) {
  nimble_value_sig_t *v;
  if (!type_text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "type: missing");
  NIMBLE_RETURN_IF_ERROR(push_value(e, is_output, &v));
  nimble_status_t s = nimble_ok();
  v->name = name ? dup_str(name) : NULL;
  v->type = dup_str(type_text);
  if ((name && !v->name) || !v->type) s = NIMBLE_OOM_IN("value");
  return finish_value(e, is_output, s);
}

const nimble_entry_sig_t *nimble_artifact_config_find_entry(const nimble_artifact_config_t *c,
                                                            const char *name) {
  for (size_t i = 0; i < c->entry_count; i++)
    if (c->entries[i].name && strcmp(c->entries[i].name, name) == 0) return &c->entries[i];
  return NULL;
}

/* ---- encoding ---- */

static json_t *value_to_json(const nimble_value_sig_t *v) {
  json_t *obj = json_object();
  if (!obj) return NULL;
  int ok = json_object_set_new(obj, "name", json_string(v->name)) == 0;
  if (v->type) {
    ok = ok && json_object_set_new(obj, "type", json_string(v->type)) == 0;
  } else {
    json_t *shape = json_array();
    ok = ok && json_object_set_new(obj, "dtype", json_string(nimble_config_dtype_name(v->dtype))) == 0 &&
         json_object_set_new(obj, "shape", shape) == 0;
    for (size_t i = 0; ok && i < v->rank; i++) {
      json_t *d = v->dims[i].symbol ? json_string(v->dims[i].symbol)
                                    : json_integer(v->dims[i].value);
      ok = json_array_append_new(shape, d) == 0;
    }
  }
  if (!ok) {
    json_decref(obj);
    return NULL;
  }
  return obj;
}

static json_t *values_to_json(const nimble_value_sig_t *vals, size_t n) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < n; i++) {
    if (json_array_append_new(arr, value_to_json(&vals[i])) != 0) {
      json_decref(arr);
      return NULL;
    }
  }
  return arr;
}

nimble_status_t nimble_artifact_config_encode(const nimble_artifact_config_t *c, char **out,
                                              size_t *out_size) {
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_artifact_config_validate(c), "artifact config");
  char model[NIMBLE_DIGEST_STRING_LEN + 1], build[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&c->model, model);
  json_t *root = json_object(), *entries = json_array();
  int ok = root && entries &&
           json_object_set_new(root, "schemaVersion",
                               json_integer(NIMBLE_ARTIFACT_CONFIG_SCHEMA_VERSION)) == 0 &&
           json_object_set_new(root, "target", json_string(c->target)) == 0 &&
           json_object_set_new(root, "compilerVersion", json_string(c->compiler_version)) == 0 &&
           json_object_set_new(root, "model", json_string(model)) == 0;
  if (ok && c->has_compiler_build) {
    nimble_digest_format(&c->compiler_build, build);
    ok = json_object_set_new(root, "compilerBuild", json_string(build)) == 0;
  }
  for (size_t i = 0; ok && i < c->entry_count; i++) {
    const nimble_entry_sig_t *e = &c->entries[i];
    json_t *obj = json_object();
    ok = obj && json_object_set_new(obj, "name", json_string(e->name)) == 0 &&
         json_object_set_new(obj, "inputs", values_to_json(e->inputs, e->input_count)) == 0 &&
         json_object_set_new(obj, "outputs", values_to_json(e->outputs, e->output_count)) == 0;
    if (json_array_append_new(entries, obj) != 0) ok = 0;
  }
  ok = ok && json_object_set(root, "entries", entries) == 0;
  json_decref(entries);
  if (!ok) {
    json_decref(root);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "artifact config: a name or type is not valid UTF-8");
  }
  nimble_status_t s = nimble_json_dump_canonical(root, out, out_size);
  json_decref(root);
  return s;
}

/* ---- decoding ---- */

static nimble_status_t value_from_json(const json_t *obj, const char *path,
                                       nimble_value_sig_t *v) {
  if (!json_is_object(obj)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", path,
                              nimble_json_type_name(obj));
  }
  const char *name = NULL, *type = NULL, *dtype = NULL;
  json_t *shape = NULL;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_string(obj, path, "name", 1, NIMBLE_CONFIG_MAX_NAME, &name));
  v->name = dup_str(name);
  if (!v->name) return NIMBLE_OOM_IN(path);
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_string(obj, path, "type", 0, NIMBLE_CONFIG_MAX_TYPE_TEXT, &type));
  if (type) {
    if (json_object_get(obj, "dtype") || json_object_get(obj, "shape")) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: has 'type' and also 'dtype' or 'shape' (a value is either "
                                "a tensor or a typed value)",
                                path);
    }
    v->type = dup_str(type);
    return v->type ? nimble_ok() : NIMBLE_OOM_IN(path);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, "dtype", 1, 32, &dtype));
  nimble_status_t s = nimble_config_dtype_parse(dtype, &v->dtype);
  if (s) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, "dtype");
    return nimble_status_annotate(s, "%s", p);
  }
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_array(obj, path, "shape", 1, 0, NIMBLE_CONFIG_MAX_RANK, &shape));
  size_t rank = json_array_size(shape);
  if (rank) {
    v->dims = calloc(rank, sizeof(*v->dims));
    if (!v->dims) return NIMBLE_OOM_IN(path);
  }
  char sp[NIMBLE_JSON_PATH_MAX], p[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(sp, path, "shape");
  for (size_t i = 0; i < rank; i++) {
    json_t *d = json_array_get(shape, i);
    v->rank = i + 1;
    nimble_json_path_index(p, sp, i);
    if (json_is_integer(d)) {
      v->dims[i].value = (int64_t)json_integer_value(d);
    } else if (json_is_string(d)) {
      if (strlen(json_string_value(d)) != json_string_length(d)) {
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: contains a NUL byte", p);
      }
      v->dims[i].symbol = dup_str(json_string_value(d));
      if (!v->dims[i].symbol) return NIMBLE_OOM_IN(p);
    } else {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: expected an integer or a symbol string, got %s", p,
                                nimble_json_type_name(d));
    }
  }
  return nimble_ok();
}

static nimble_status_t values_from_json(const json_t *entry, const char *path, const char *key,
                                        nimble_value_sig_t **items, size_t *count) {
  json_t *arr;
  char p[NIMBLE_JSON_PATH_MAX], ip[NIMBLE_JSON_PATH_MAX];
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_array(entry, path, key, 1, 0, NIMBLE_CONFIG_MAX_VALUES, &arr));
  size_t n = json_array_size(arr);
  if (n == 0) return nimble_ok();
  *items = calloc(n, sizeof(**items));
  if (!*items) return NIMBLE_OOM_IN(path);
  nimble_json_path_key(p, path, key);
  for (size_t i = 0; i < n; i++) {
    nimble_json_path_index(ip, p, i);
    *count = i + 1;
    NIMBLE_RETURN_IF_ERROR(value_from_json(json_array_get(arr, i), ip, &(*items)[i]));
  }
  return nimble_ok();
}

static nimble_status_t config_from_json(const json_t *root, nimble_artifact_config_t *c) {
  int64_t version;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_int(root, "", "schemaVersion", 1, INT64_MIN, INT64_MAX, &version, NULL));
  if (version != NIMBLE_ARTIFACT_CONFIG_SCHEMA_VERSION) {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "schemaVersion: %lld is not supported (only %d)",
                              (long long)version, NIMBLE_ARTIFACT_CONFIG_SCHEMA_VERSION);
  }
  const char *target, *version_text;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_string(root, "", "target", 1, NIMBLE_TARGET_SPEC_MAX, &target));
  strcpy(c->target, target); /* validate() checks that it parses and is canonical */
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(root, "", "compilerVersion", 1,
                                                NIMBLE_CONFIG_MAX_NAME, &version_text));
  c->compiler_version = dup_str(version_text);
  if (!c->compiler_version) return NIMBLE_OOM_IN("compilerVersion");
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_digest(root, "", "model", 1, &c->model, NULL));
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_digest(root, "", "compilerBuild", 0, &c->compiler_build,
                                                &c->has_compiler_build));
  json_t *entries;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_get_array(root, "", "entries", 1, 1, NIMBLE_CONFIG_MAX_ENTRIES, &entries));
  size_t n = json_array_size(entries);
  c->entries = calloc(n, sizeof(*c->entries));
  if (!c->entries) return NIMBLE_OOM_IN("entries");
  for (size_t i = 0; i < n; i++) {
    char path[NIMBLE_JSON_PATH_MAX];
    const char *name;
    json_t *e = json_array_get(entries, i);
    nimble_entry_sig_t *entry = &c->entries[i];
    c->entry_count = i + 1;
    nimble_json_path_index(path, "entries", i);
    if (!json_is_object(e)) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", path,
                                nimble_json_type_name(e));
    }
    NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(e, path, "name", 1, NIMBLE_CONFIG_MAX_NAME, &name));
    entry->name = dup_str(name);
    if (!entry->name) return NIMBLE_OOM_IN(path);
    NIMBLE_RETURN_IF_ERROR(
        values_from_json(e, path, "inputs", &entry->inputs, &entry->input_count));
    NIMBLE_RETURN_IF_ERROR(
        values_from_json(e, path, "outputs", &entry->outputs, &entry->output_count));
  }
  return nimble_artifact_config_validate(c);
}

nimble_status_t nimble_artifact_config_decode(const void *data, size_t size,
                                              nimble_artifact_config_t *out) {
  json_t *root;
  nimble_artifact_config_init(out);
  NIMBLE_RETURN_IF_ERROR(nimble_json_load_object(data, size, NIMBLE_MANIFEST_MAX_SIZE,
                                                 "artifact config", &root));
  nimble_status_t s = config_from_json(root, out);
  json_decref(root);
  if (s) {
    nimble_artifact_config_deinit(out);
    return nimble_status_annotate(s, "artifact config");
  }
  return nimble_ok();
}
