/* Packaging a compiled result: the `.nimble` image, or the artifact's parts
 * with config.json and parts.json for the compile worker (docs/farm.md §4). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "compile_internal.h"
#include "nimble/artifact_config.h"
#include "nimble/runtime.h" /* the written image is loaded back for its signatures */

nimble_status_t nimble_compile_result_serialize(const nimble_compile_result *r, void **data, size_t *size) {
  if (!r || !data || !size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compile_result_serialize: NULL argument");
  return nimble_builder_serialize(r->builder, data, size);
}

/* Writes `size` bytes to `path` through PATH.tmp-PID renamed into place. */
static nimble_status_t write_atomically(const char *path, const void *data, size_t size) {
  char tmp[4096];
  int len = snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "output path is too long: %.64s...", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return nimble_status_make(NIMBLE_IO_ERROR, "cannot create %s: %s", tmp, strerror(errno));
  const char *p = data;
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, p + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : EIO;
      close(fd);
      unlink(tmp);
      return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s: %s", path, strerror(err));
    }
    done += (size_t)w;
  }
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s: %s", path, strerror(err));
  }
  if (rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot rename %s to %s: %s", tmp, path, strerror(err));
  }
  return nimble_ok();
}

nimble_status_t nimble_compile_result_write_file(const nimble_compile_result *r, const char *path) {
  if (!r || !path) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compile_result_write_file: NULL argument");
  void *data = NULL;
  size_t size = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_builder_serialize(r->builder, &data, &size));
  nimble_status_t s = write_atomically(path, data, size);
  free(data);
  return s;
}

static nimble_status_t dtype_of(DLDataType t, const char *name, nimble_config_dtype_t *out) {
  bool ok = t.lanes == 1;
  if (ok && t.code == kDLFloat && t.bits == 16) *out = NIMBLE_CONFIG_DTYPE_FLOAT16;
  else if (ok && t.code == kDLFloat && t.bits == 32) *out = NIMBLE_CONFIG_DTYPE_FLOAT32;
  else if (ok && t.code == kDLFloat && t.bits == 64) *out = NIMBLE_CONFIG_DTYPE_FLOAT64;
  else if (ok && t.code == kDLBfloat && t.bits == 16) *out = NIMBLE_CONFIG_DTYPE_BFLOAT16;
  else if (ok && t.code == kDLInt && t.bits == 8) *out = NIMBLE_CONFIG_DTYPE_INT8;
  else if (ok && t.code == kDLInt && t.bits == 16) *out = NIMBLE_CONFIG_DTYPE_INT16;
  else if (ok && t.code == kDLInt && t.bits == 32) *out = NIMBLE_CONFIG_DTYPE_INT32;
  else if (ok && t.code == kDLInt && t.bits == 64) *out = NIMBLE_CONFIG_DTYPE_INT64;
  else if (ok && t.code == kDLUInt && t.bits == 1) *out = NIMBLE_CONFIG_DTYPE_BOOL;
  else if (ok && t.code == kDLUInt && t.bits == 8) *out = NIMBLE_CONFIG_DTYPE_UINT8;
  else if (ok && t.code == kDLUInt && t.bits == 16) *out = NIMBLE_CONFIG_DTYPE_UINT16;
  else if (ok && t.code == kDLUInt && t.bits == 32) *out = NIMBLE_CONFIG_DTYPE_UINT32;
  else if (ok && t.code == kDLUInt && t.bits == 64) *out = NIMBLE_CONFIG_DTYPE_UINT64;
  else
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "value '%s': dtype (code %d, %d bits, %d lanes) has no artifact config name", name,
                              t.code, t.bits, t.lanes);
  return nimble_ok();
}

static nimble_status_t add_values(nimble_entry_sig_t *e, int is_output, const nimble_tensor_info_t *vals,
                                  uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const nimble_tensor_info_t *v = &vals[i];
    if (nimble_tensor_info_is_adt(v)) {
      /* An ADT input: its first pseudo-dim holds the IR type as text
       * (docs/executable.md, "ADT inputs"). */
      if (v->ndim < 1 || !v->dims[0].symbol)
        return nimble_status_make(NIMBLE_INTERNAL, "value '%s': an ADT without its type", v->name);
      NIMBLE_RETURN_IF_ERROR(nimble_entry_sig_add_value(e, is_output, v->name, v->dims[0].symbol));
      continue;
    }
    nimble_config_dtype_t dt = NIMBLE_CONFIG_DTYPE_FLOAT32;
    NIMBLE_RETURN_IF_ERROR(dtype_of(v->dtype, v->name, &dt));
    if (v->ndim < 0 || v->ndim > NIMBLE_CONFIG_MAX_RANK)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "value '%s': rank %d is over the config's %d", v->name,
                                v->ndim, NIMBLE_CONFIG_MAX_RANK);
    nimble_config_dim_t dims[NIMBLE_CONFIG_MAX_RANK];
    for (int32_t d = 0; d < v->ndim; d++) {
      const nimble_sig_dim_t *sd = &v->dims[d];
      dims[d].value = sd->symbol ? 0 : sd->value;
      /* The runtime spells Any as ""; the config as "?". Borrowed: add
       * copies them. */
      dims[d].symbol = sd->symbol ? (char *)(sd->symbol[0] ? sd->symbol : "?") : NULL;
    }
    NIMBLE_RETURN_IF_ERROR(nimble_entry_sig_add_tensor(e, is_output, v->name, dt, dims, (size_t)v->ndim));
  }
  return nimble_ok();
}

/* The config blob (protocol's nimble/artifact_config.h). The entry
 * signatures come from the executable itself (loaded without kernels), so
 * they are exactly what a runtime will see. */
static nimble_status_t build_config(const nimble_compile_result *r, const void *image, size_t size,
                                    char **json, size_t *json_size) {
  nimble_executable *exe = NULL;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_executable_load_memory(image, size, NIMBLE_LOAD_NO_KERNELS, &exe),
                             "checking the executable");
  nimble_artifact_config_t c;
  nimble_artifact_config_init(&c);
  nimble_status_t s = nimble_artifact_config_set_build(&c, r->target_spec, r->compiler_version, &r->model_digest, NULL);
  for (uint32_t i = 0; !s && i < nimble_executable_num_entries(exe); i++) {
    const nimble_entry_info_t *info = nimble_executable_entry_at(exe, i);
    nimble_entry_sig_t *e = NULL;
    s = nimble_artifact_config_add_entry(&c, info->name, &e);
    if (!s) s = add_values(e, 0, info->inputs, info->num_inputs);
    if (!s) s = add_values(e, 1, info->outputs, info->num_outputs);
    if (s) s = nimble_status_annotate(s, "artifact config: entry '%s'", info->name);
  }
  if (!s) s = nimble_artifact_config_encode(&c, json, json_size);
  nimble_artifact_config_deinit(&c);
  nimble_executable_release(exe);
  return s;
}

static nimble_status_t write_in(const char *dir, const char *name, const void *data, size_t size) {
  char path[4096];
  int len = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (len < 0 || (size_t)len >= sizeof path)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--emit-parts folder name is too long");
  return write_atomically(path, data, size);
}

nimble_status_t nimble_compile_result_emit_parts(const nimble_compile_result *r, const char *dir) {
  if (!r || !dir) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compile_result_emit_parts: NULL argument");
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot create %s: %s", dir, strerror(errno));
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is not a folder", dir);

  static const struct {
    nimble_part_kind_t kind;
    const char *file;
  } kParts[] = {
      {NIMBLE_PART_METADATA, "metadata"},
      {NIMBLE_PART_BYTECODE, "bytecode"},
      {NIMBLE_PART_CONSTANTS, "constants"},
      {NIMBLE_PART_KERNELS_CPU, "kernels"},
      {NIMBLE_PART_KERNELS_CUDA, "kernels-cuda"},
  };
  const char *triple = nimble_target_host_triple(&r->target);
  json_t *layers = json_array();
  json_t *index = json_object();
  if (!layers || !index || json_object_set(index, "layers", layers) != 0) {
    json_decref(layers);
    json_decref(index);
    return NIMBLE_OOM();
  }
  json_decref(layers); /* index holds it */
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < sizeof kParts / sizeof kParts[0] && !s; i++) {
    if (kParts[i].kind == NIMBLE_PART_KERNELS_CPU && !r->has_kernels) continue;
    if (kParts[i].kind == NIMBLE_PART_KERNELS_CUDA && !r->has_cuda_kernels) continue;
    const char *media = nimble_part_media_type_for_target(kParts[i].kind, triple);
    if (!media) {
      s = nimble_status_make(NIMBLE_UNIMPLEMENTED, "part '%s': no media type for target %s", kParts[i].file, triple);
      break;
    }
    void *data = NULL;
    size_t size = 0;
    s = nimble_builder_serialize_part(r->builder, kParts[i].kind, &data, &size);
    if (!s) s = write_in(dir, kParts[i].file, data, size);
    free(data);
    if (!s && json_array_append_new(layers, json_pack("{s:s,s:s}", "file", kParts[i].file, "mediaType", media)) != 0)
      s = NIMBLE_OOM();
  }
  if (!s) {
    void *image = NULL;
    size_t size = 0;
    char *config = NULL;
    size_t config_size = 0;
    s = nimble_builder_serialize(r->builder, &image, &size);
    if (!s) s = build_config(r, image, size, &config, &config_size);
    free(image);
    if (!s) s = write_in(dir, "config.json", config, config_size);
    free(config);
  }
  if (!s) {
    char *text = json_dumps(index, JSON_COMPACT);
    if (!text) s = NIMBLE_OOM();
    else s = write_in(dir, "parts.json", text, strlen(text));
    free(text);
  }
  json_decref(index);
  return s;
}
