/* The metadata part: producer, target, source-model digest and the entry
 * functions with their signatures. */
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "executable/executable.h"
#include "format/layout.h"
#include "nimble/bytecode.h"

static void tensor_info_deinit(nimble_tensor_info_t *t) {
  free((char *)t->name);
  if (t->dims)
    for (int32_t d = 0; d < t->ndim; d++) free((char *)t->dims[d].symbol);
  free((nimble_sig_dim_t *)t->dims);
}

static nimble_status_t parse_tensor_info(nimble_reader_t *r, const char *role, uint32_t index,
                                         nimble_tensor_info_t *t) {
  uint8_t code, bits;
  uint16_t lanes;
  int32_t dev_type, dev_id;
  uint32_t ndim;
  char *name = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_string(r, "tensor name", &name));
  t->name = name;
  size_t at = r->pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u8(r, "dtype code", &code));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u8(r, "dtype bits", &bits));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u16(r, "dtype lanes", &lanes));
  /* kDLOpaqueHandle/64/1 marks an ADT input (docs/executable.md). */
  int adt = code == kDLOpaqueHandle && bits == 64 && lanes == 1 && strcmp(role, "input") == 0;
  if (!adt && !nimble_dtype_valid(code, bits, lanes)) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT,
                               "%s %u '%s': unsupported dtype (code %u, bits %u, lanes %u)", role,
                               index, name, code, bits, lanes);
  }
  t->dtype.code = code;
  t->dtype.bits = bits;
  t->dtype.lanes = lanes;
  at = r->pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_i32(r, "device type", &dev_type));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_i32(r, "device id", &dev_id));
  if ((dev_type != kDLCPU && dev_type != kDLCUDA) || dev_id < 0) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%s %u '%s': unsupported device %d:%d",
                               role, index, name, dev_type, dev_id);
  }
  t->device.device_type = (DLDeviceType)dev_type;
  t->device.device_id = dev_id;
  at = r->pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, "ndim", &ndim));
  if (ndim == UINT32_MAX && strcmp(role, "output") == 0) { /* NIMBLE_NDIM_ANY */
    t->dims = calloc(1, sizeof *t->dims);
    if (!t->dims) return NIMBLE_OOM();
    t->ndim = NIMBLE_NDIM_ANY;
    return nimble_ok();
  }
  if (ndim > NIMBLE_MAX_NDIM) {
    r->pos = at;
    return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%s %u '%s': ndim %u exceeds %d", role,
                               index, name, ndim, NIMBLE_MAX_NDIM);
  }
  nimble_sig_dim_t *dims = calloc(ndim ? ndim : 1, sizeof *dims);
  if (!dims) return NIMBLE_OOM();
  t->dims = dims;
  for (uint32_t d = 0; d < ndim; d++) {
    int64_t value;
    char *sym = NULL;
    at = r->pos;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_i64(r, "dim", &value));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_string(r, "dim symbol", &sym));
    t->ndim = (int32_t)d + 1; /* so deinit frees what is there */
    if (value >= 0) {
      dims[d].value = value;
      int has_symbol = sym && sym[0];
      free(sym);
      if (has_symbol) {
        r->pos = at;
        return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT,
                                   "%s %u '%s' dim %u: a constant dim with a symbol", role, index,
                                   name, d);
      }
      dims[d].symbol = NULL;
    } else if (value == -1) {
      dims[d].value = -1;
      dims[d].symbol = sym; /* "" means Any */
    } else {
      free(sym);
      r->pos = at;
      return nimble_reader_error(r, NIMBLE_INVALID_ARGUMENT, "%s %u '%s' dim %u: bad value %lld",
                                 role, index, name, d, (long long)value);
    }
  }
  t->ndim = (int32_t)ndim;
  return nimble_ok();
}

static nimble_status_t parse_tensor_list(nimble_reader_t *r, const char *role,
                                         nimble_tensor_info_t **out, uint32_t *count) {
  uint32_t n;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(r, role, &n));
  /* name length + dtype + device + ndim: at least 16 bytes each */
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(r, role, n, 16));
  nimble_tensor_info_t *list = calloc(n ? n : 1, sizeof *list);
  if (!list) return NIMBLE_OOM();
  *out = list;
  for (uint32_t i = 0; i < n; i++) {
    *count = i + 1;
    NIMBLE_RETURN_IF_ERROR(parse_tensor_info(r, role, i, &list[i]));
  }
  *count = n;
  return nimble_ok();
}

nimble_status_t nimble_metadata_parse(const uint8_t *data, size_t size, size_t base,
                                      nimble_metadata_t *m) {
  memset(m, 0, sizeof *m);
  NIMBLE_RETURN_IF_ERROR(
      nimble_part_header_check(data, size, base, NIMBLE_PART_METADATA, "metadata", NULL));
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, "metadata");
  r.base = base;
  r.pos = NIMBLE_PART_HEADER_SIZE;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_string(&r, "producer", &m->producer));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_string(&r, "target", &m->target));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_string(&r, "source digest", &m->source_digest));
  uint32_t n;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "entry count", &n));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(&r, "entry count", n, 16));
  m->entries = calloc(n ? n : 1, sizeof *m->entries);
  m->entry_functions = calloc(n ? n : 1, sizeof *m->entry_functions);
  if (!m->entries || !m->entry_functions)
    return NIMBLE_OOM();
  for (uint32_t i = 0; i < n; i++) {
    nimble_entry_info_t *e = &m->entries[i];
    char *name = NULL;
    m->num_entries = i + 1;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_string(&r, "entry name", &name));
    e->name = name;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(m->entries[j].name, name) == 0)
        return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "entry '%s' appears twice", name);
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "entry function", &m->entry_functions[i]));
    nimble_tensor_info_t *list = NULL;
    uint32_t count = 0;
    nimble_status_t s = parse_tensor_list(&r, "input", &list, &count);
    e->inputs = list;
    e->num_inputs = count;
    if (s) return nimble_status_annotate(s, "entry '%s'", name);
    list = NULL;
    count = 0;
    s = parse_tensor_list(&r, "output", &list, &count);
    e->outputs = list;
    e->num_outputs = count;
    if (s) return nimble_status_annotate(s, "entry '%s'", name);
  }
  m->num_entries = n;
  return nimble_reader_expect_end(&r);
}

void nimble_metadata_deinit(nimble_metadata_t *m) {
  free(m->producer);
  free(m->target);
  free(m->source_digest);
  for (uint32_t i = 0; i < m->num_entries && m->entries; i++) {
    nimble_entry_info_t *e = &m->entries[i];
    free((char *)e->name);
    for (uint32_t j = 0; j < e->num_inputs; j++) tensor_info_deinit((nimble_tensor_info_t *)&e->inputs[j]);
    for (uint32_t j = 0; j < e->num_outputs; j++) tensor_info_deinit((nimble_tensor_info_t *)&e->outputs[j]);
    free((nimble_tensor_info_t *)e->inputs);
    free((nimble_tensor_info_t *)e->outputs);
  }
  free(m->entries);
  free(m->entry_functions);
  memset(m, 0, sizeof *m);
}
