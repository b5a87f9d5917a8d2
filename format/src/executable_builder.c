/* The executable builder: collects functions, constants, kernels and
 * entries, and writes them in the format the loader reads. */
#include "nimble/executable_builder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "format/layout.h"
#include "nimble/digest.h"

typedef struct buf_t {
  uint8_t *data;
  size_t size, cap;
  int failed; /* out of memory: the whole write fails at the end */
} buf_t;

static uint8_t *buf_grow(buf_t *b, size_t n) {
  if (b->failed) return NULL;
  if (b->cap - b->size < n) {
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap - b->size < n) ncap *= 2;
    uint8_t *nd = realloc(b->data, ncap);
    if (!nd) {
      b->failed = 1;
      return NULL;
    }
    b->data = nd;
    b->cap = ncap;
  }
  uint8_t *p = b->data + b->size;
  b->size += n;
  return p;
}
/* Room for n more bytes up front: a model's constants part is written in
 * one buffer, and growing it by doubling copied its megabytes again and
 * again. */
static void buf_reserve(buf_t *b, size_t n) {
  if (b->failed || b->cap - b->size >= n) return;
  uint8_t *nd = realloc(b->data, b->size + n);
  if (!nd) return; /* buf_grow tries again, and fails the write if it must */
  b->data = nd;
  b->cap = b->size + n;
}
static void put_bytes(buf_t *b, const void *d, size_t n) {
  uint8_t *p = buf_grow(b, n);
  if (p && n) memcpy(p, d, n);
}
static void put_u8(buf_t *b, uint8_t v) { put_bytes(b, &v, 1); }
static void put_u16(buf_t *b, uint16_t v) { uint8_t *p = buf_grow(b, 2); if (p) nimble_put_u16(p, v); }
static void put_u32(buf_t *b, uint32_t v) { uint8_t *p = buf_grow(b, 4); if (p) nimble_put_u32(p, v); }
static void put_u64(buf_t *b, uint64_t v) { uint8_t *p = buf_grow(b, 8); if (p) nimble_put_u64(p, v); }
static void put_i64(buf_t *b, int64_t v) { put_u64(b, (uint64_t)v); }
static void put_str(buf_t *b, const char *s) {
  size_t n = s ? strlen(s) : 0;
  put_u32(b, (uint32_t)n);
  put_bytes(b, s, n);
}
static void pad_to(buf_t *b, size_t align) {
  size_t pad = (align - b->size % align) % align;
  uint8_t *p = buf_grow(b, pad);
  if (p) memset(p, 0, pad);
}

typedef struct kernel_t {
  char *symbol;
  DLDeviceType device;
} kernel_t;

typedef struct constant_t {
  DLDataType dtype;
  int32_t device_type;
  int32_t ndim;
  int64_t shape[NIMBLE_MAX_NDIM];
  const void *data;
  void *own; /* data's copy, or NULL when borrowed */
  uint64_t nbytes;
} constant_t;

typedef struct function_t {
  char *name;
  uint32_t num_params, num_registers, num_instructions;
  buf_t code;
} function_t;

typedef struct entry_t {
  char *name;
  uint32_t func;
  nimble_tensor_info_t *inputs, *outputs;
  uint32_t num_inputs, num_outputs;
} entry_t;

struct nimble_executable_builder {
  char *target, *producer, *digest;
  uint32_t version;
  kernel_t *kernels;
  uint32_t num_kernels;
  constant_t *constants;
  uint32_t num_constants;
  function_t *functions;
  uint32_t num_functions;
  entry_t *entries;
  uint32_t num_entries;
  buf_t cpu_lib, cuda_lib;
  int has_cpu_lib, has_cuda_lib;
};

#define OOM() NIMBLE_OOM_IN("builder")

static char *dup_str(const char *s) { return strdup(s ? s : ""); }

/* Grows an array of `elem` bytes to hold n+1 elements. */
static int grow(void **arr, uint32_t n, size_t elem) {
  /* Capacities run 4, 8, 16, ...: reallocate only when n reaches one. */
  if (n != 0 && (n < 4 || (n & (n - 1)) != 0)) return 1;
  size_t cap = n ? (size_t)n * 2 : 4;
  void *na = realloc(*arr, cap * elem);
  if (!na) return 0;
  *arr = na;
  return 1;
}

nimble_status_t nimble_builder_create(const char *target, nimble_executable_builder **out) {
  if (!target || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: NULL argument");
  nimble_executable_builder *b = calloc(1, sizeof *b);
  if (!b) return OOM();
  b->target = dup_str(target);
  b->producer = dup_str(NIMBLE_PRODUCER_STRING);
  b->digest = dup_str("");
  b->version = NIMBLE_EXECUTABLE_FORMAT_VERSION;
  if (!b->target || !b->producer || !b->digest) {
    nimble_builder_destroy(b);
    return OOM();
  }
  *out = b;
  return nimble_ok();
}

static void free_infos(nimble_tensor_info_t *infos, uint32_t n) {
  for (uint32_t i = 0; infos && i < n; i++) {
    free((char *)infos[i].name);
    for (int32_t d = 0; infos[i].dims && d < infos[i].ndim; d++) free((char *)infos[i].dims[d].symbol);
    free((nimble_sig_dim_t *)infos[i].dims);
  }
  free(infos);
}

void nimble_builder_destroy(nimble_executable_builder *b) {
  if (!b) return;
  free(b->target);
  free(b->producer);
  free(b->digest);
  for (uint32_t i = 0; i < b->num_kernels; i++) free(b->kernels[i].symbol);
  free(b->kernels);
  for (uint32_t i = 0; i < b->num_constants; i++) free(b->constants[i].own);
  free(b->constants);
  for (uint32_t i = 0; i < b->num_functions; i++) {
    free(b->functions[i].name);
    free(b->functions[i].code.data);
  }
  free(b->functions);
  for (uint32_t i = 0; i < b->num_entries; i++) {
    free(b->entries[i].name);
    free_infos(b->entries[i].inputs, b->entries[i].num_inputs);
    free_infos(b->entries[i].outputs, b->entries[i].num_outputs);
  }
  free(b->entries);
  free(b->cpu_lib.data);
  free(b->cuda_lib.data);
  free(b);
}

nimble_status_t nimble_builder_set_producer(nimble_executable_builder *b, const char *producer) {
  char *p = dup_str(producer);
  if (!p) return OOM();
  free(b->producer);
  b->producer = p;
  return nimble_ok();
}

nimble_status_t nimble_builder_set_source_digest(nimble_executable_builder *b, const char *digest) {
  char *p = dup_str(digest);
  if (!p) return OOM();
  free(b->digest);
  b->digest = p;
  return nimble_ok();
}

void nimble_builder_set_format_version(nimble_executable_builder *b, uint32_t version) {
  b->version = version;
}

nimble_status_t nimble_builder_add_kernel(nimble_executable_builder *b, const char *symbol,
                                          DLDeviceType device, uint32_t *index_out) {
  if (!symbol) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: NULL kernel symbol");
  if (!grow((void **)&b->kernels, b->num_kernels, sizeof *b->kernels)) return OOM();
  kernel_t *k = &b->kernels[b->num_kernels];
  k->symbol = dup_str(symbol);
  if (!k->symbol) return OOM();
  k->device = device;
  if (index_out) *index_out = b->num_kernels;
  b->num_kernels++;
  return nimble_ok();
}

nimble_status_t nimble_builder_set_kernel_library(nimble_executable_builder *b,
                                                  nimble_part_kind_t kind, const void *data,
                                                  size_t size) {
  buf_t *lib;
  if (kind == NIMBLE_PART_KERNELS_CPU) {
    lib = &b->cpu_lib;
    b->has_cpu_lib = 1;
  } else if (kind == NIMBLE_PART_KERNELS_CUDA) {
    lib = &b->cuda_lib;
    b->has_cuda_lib = 1;
  } else {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: part kind %d is not a kernel library",
                              (int)kind);
  }
  lib->size = 0;
  put_bytes(lib, data, size);
  return lib->failed ? OOM() : nimble_ok();
}

static nimble_status_t add_constant(nimble_executable_builder *b, const DLTensor *t, int borrow,
                                    uint32_t *index_out) {
  if (!t) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: NULL constant");
  if (t->ndim < 0 || t->ndim > NIMBLE_MAX_NDIM)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: constant ndim %d", t->ndim);
  constant_t c;
  memset(&c, 0, sizeof c);
  c.dtype = t->dtype;
  c.device_type = (int32_t)t->device.device_type;
  c.ndim = t->ndim;
  if (t->ndim) memcpy(c.shape, t->shape, (size_t)t->ndim * sizeof(int64_t));
  if (!nimble_tensor_nbytes(c.ndim, c.shape, c.dtype, &c.nbytes))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: constant shape overflows");
  if (c.nbytes && !t->data) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: constant without data");
  const char *src = c.nbytes ? (const char *)t->data + t->byte_offset : NULL;
  if (borrow && src) {
    c.data = src;
  } else {
    c.own = malloc(c.nbytes ? (size_t)c.nbytes : 1);
    if (!c.own) return OOM();
    if (c.nbytes) memcpy(c.own, src, (size_t)c.nbytes);
    c.data = c.own;
  }
  if (!grow((void **)&b->constants, b->num_constants, sizeof *b->constants)) {
    free(c.own);
    return OOM();
  }
  b->constants[b->num_constants] = c;
  if (index_out) *index_out = b->num_constants;
  b->num_constants++;
  return nimble_ok();
}

nimble_status_t nimble_builder_add_constant(nimble_executable_builder *b, const DLTensor *t,
                                            uint32_t *index_out) {
  return add_constant(b, t, 0, index_out);
}

nimble_status_t nimble_builder_add_constant_borrowed(nimble_executable_builder *b, const DLTensor *t,
                                                     uint32_t *index_out) {
  return add_constant(b, t, 1, index_out);
}

nimble_status_t nimble_builder_add_function(nimble_executable_builder *b, const char *name,
                                            uint32_t num_params, uint32_t num_registers,
                                            uint32_t *index_out) {
  if (!grow((void **)&b->functions, b->num_functions, sizeof *b->functions)) return OOM();
  function_t *f = &b->functions[b->num_functions];
  memset(f, 0, sizeof *f);
  f->name = dup_str(name);
  if (!f->name) return OOM();
  f->num_params = num_params;
  f->num_registers = num_registers;
  if (index_out) *index_out = b->num_functions;
  b->num_functions++;
  return nimble_ok();
}

nimble_status_t nimble_builder_emit(nimble_executable_builder *b, uint32_t func, int opcode,
                                    const int64_t *operands, uint32_t num_operands) {
  if (func >= b->num_functions)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: no function %u", func);
  if (num_operands > NIMBLE_MAX_OPERANDS || opcode < 0 || opcode > 0xffff)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: bad instruction");
  function_t *f = &b->functions[func];
  put_u16(&f->code, (uint16_t)opcode);
  put_u16(&f->code, (uint16_t)num_operands);
  for (uint32_t i = 0; i < num_operands; i++) put_i64(&f->code, operands[i]);
  if (f->code.failed) return OOM();
  f->num_instructions++;
  return nimble_ok();
}

uint32_t nimble_builder_function_size(const nimble_executable_builder *b, uint32_t func) {
  return func < b->num_functions ? b->functions[func].num_instructions : 0;
}

static nimble_status_t copy_infos(const nimble_tensor_info_t *src, uint32_t n, bool outputs,
                                  nimble_tensor_info_t **out) {
  nimble_tensor_info_t *dst = calloc(n ? n : 1, sizeof *dst);
  if (!dst) return OOM();
  *out = dst;
  for (uint32_t i = 0; i < n; i++) {
    dst[i] = src[i];
    dst[i].name = NULL;
    dst[i].dims = NULL;
    dst[i].ndim = 0;
    bool any_rank = outputs && src[i].ndim == NIMBLE_NDIM_ANY;
    if ((src[i].ndim < 0 && !any_rank) || src[i].ndim > NIMBLE_MAX_NDIM)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: tensor '%s' has ndim %d",
                                src[i].name ? src[i].name : "", src[i].ndim);
    dst[i].name = dup_str(src[i].name);
    nimble_sig_dim_t *dims = calloc(src[i].ndim > 0 ? (size_t)src[i].ndim : 1, sizeof *dims);
    if (!dst[i].name || !dims) {
      free(dims);
      return OOM();
    }
    dst[i].dims = dims;
    dst[i].ndim = src[i].ndim;
    for (int32_t d = 0; d < src[i].ndim; d++) {
      dims[d].value = src[i].dims[d].value;
      if (src[i].dims[d].symbol) {
        dims[d].symbol = dup_str(src[i].dims[d].symbol);
        if (!dims[d].symbol) return OOM();
      }
    }
  }
  return nimble_ok();
}

nimble_status_t nimble_builder_add_entry(nimble_executable_builder *b, const char *name,
                                         uint32_t func, const nimble_tensor_info_t *inputs,
                                         uint32_t num_inputs, const nimble_tensor_info_t *outputs,
                                         uint32_t num_outputs) {
  if (!name || (!inputs && num_inputs) || (!outputs && num_outputs))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: NULL entry argument");
  if (!grow((void **)&b->entries, b->num_entries, sizeof *b->entries)) return OOM();
  entry_t *e = &b->entries[b->num_entries];
  memset(e, 0, sizeof *e);
  b->num_entries++; /* counted now so destroy frees a half-built entry */
  e->name = dup_str(name);
  if (!e->name) return OOM();
  e->func = func;
  nimble_status_t s = copy_infos(inputs, num_inputs, false, &e->inputs);
  e->num_inputs = num_inputs;
  if (s) return s;
  s = copy_infos(outputs, num_outputs, true, &e->outputs);
  e->num_outputs = num_outputs;
  return s;
}

/* ---- Writing ------------------------------------------------------------- */

static void put_part_header(buf_t *o, nimble_part_kind_t kind, uint32_t version) {
  put_bytes(o, NIMBLE_PART_MAGIC, 4);
  put_u32(o, (uint32_t)kind);
  put_u32(o, version);
  put_u32(o, 0);
}

static void put_tensor_info(buf_t *o, const nimble_tensor_info_t *t) {
  put_str(o, t->name);
  put_u8(o, t->dtype.code);
  put_u8(o, t->dtype.bits);
  put_u16(o, t->dtype.lanes);
  put_u32(o, (uint32_t)(t->device.device_type ? t->device.device_type : kDLCPU));
  put_u32(o, (uint32_t)t->device.device_id);
  put_u32(o, (uint32_t)t->ndim);
  for (int32_t d = 0; d < t->ndim; d++) {
    /* A dim with a symbol is symbolic (-1); "" is Any. */
    put_i64(o, t->dims[d].symbol ? -1 : t->dims[d].value);
    put_str(o, t->dims[d].symbol);
  }
}

static void write_metadata(const nimble_executable_builder *b, buf_t *o) {
  put_part_header(o, NIMBLE_PART_METADATA, b->version);
  put_str(o, b->producer);
  put_str(o, b->target);
  put_str(o, b->digest);
  put_u32(o, b->num_entries);
  for (uint32_t i = 0; i < b->num_entries; i++) {
    const entry_t *e = &b->entries[i];
    put_str(o, e->name);
    put_u32(o, e->func);
    put_u32(o, e->num_inputs);
    for (uint32_t j = 0; j < e->num_inputs; j++) put_tensor_info(o, &e->inputs[j]);
    put_u32(o, e->num_outputs);
    for (uint32_t j = 0; j < e->num_outputs; j++) put_tensor_info(o, &e->outputs[j]);
  }
}

static void write_bytecode(const nimble_executable_builder *b, buf_t *o) {
  put_part_header(o, NIMBLE_PART_BYTECODE, b->version);
  put_u32(o, b->num_kernels);
  for (uint32_t i = 0; i < b->num_kernels; i++) {
    put_str(o, b->kernels[i].symbol);
    put_u32(o, (uint32_t)b->kernels[i].device);
  }
  put_u32(o, b->num_functions);
  for (uint32_t i = 0; i < b->num_functions; i++) {
    const function_t *f = &b->functions[i];
    put_str(o, f->name);
    put_u32(o, f->num_params);
    put_u32(o, f->num_registers);
    put_u32(o, f->num_instructions);
    put_bytes(o, f->code.data, f->code.size);
  }
}

/* The constants part's data offset and data size (its size without the
 * digest is their sum). */
static void constants_layout(const nimble_executable_builder *b, size_t *data_offset, size_t *data_size) {
  size_t table = 0, data = 0;
  for (uint32_t i = 0; i < b->num_constants; i++) {
    table += 16 + 8 * (size_t)b->constants[i].ndim + 16;
    data += (size_t)(b->constants[i].nbytes + 63) / 64 * 64;
  }
  size_t table_start = NIMBLE_PART_HEADER_SIZE + 24;
  *data_offset = (table_start + table + 63) / 64 * 64;
  *data_size = data;
}

static void write_constants(const nimble_executable_builder *b, buf_t *o) {
  put_part_header(o, NIMBLE_PART_CONSTANTS, b->version);
  size_t table, data, data_offset;
  constants_layout(b, &data_offset, &data);
  table = data_offset - (NIMBLE_PART_HEADER_SIZE + 24);
  put_u32(o, b->num_constants);
  put_u32(o, 0);
  put_u64(o, data_offset);
  put_u64(o, data);
  buf_reserve(o, 24 + table + data + NIMBLE_PART_DIGEST_SIZE);
  size_t at = 0;
  for (uint32_t i = 0; i < b->num_constants; i++) {
    const constant_t *c = &b->constants[i];
    put_u8(o, c->dtype.code);
    put_u8(o, c->dtype.bits);
    put_u16(o, c->dtype.lanes);
    put_u32(o, (uint32_t)c->device_type);
    put_u32(o, (uint32_t)c->ndim);
    put_u32(o, 0);
    for (int32_t d = 0; d < c->ndim; d++) put_i64(o, c->shape[d]);
    put_u64(o, at);
    put_u64(o, c->nbytes);
    at += (size_t)(c->nbytes + 63) / 64 * 64;
  }
  pad_to(o, 64);
  for (uint32_t i = 0; i < b->num_constants; i++) {
    put_bytes(o, b->constants[i].data, (size_t)b->constants[i].nbytes);
    pad_to(o, 64);
  }
}

static void write_kernels(const nimble_executable_builder *b, nimble_part_kind_t kind, buf_t *o) {
  const buf_t *lib = kind == NIMBLE_PART_KERNELS_CPU ? &b->cpu_lib : &b->cuda_lib;
  put_part_header(o, kind, b->version);
  put_u32(o, kind == NIMBLE_PART_KERNELS_CPU ? kDLCPU : kDLCUDA);
  put_u32(o, 0);
  put_u64(o, lib->size);
  put_bytes(o, lib->data, lib->size);
}

static nimble_status_t write_part(const nimble_executable_builder *b, nimble_part_kind_t kind,
                                  buf_t *o) {
  size_t start = o->size;
  switch (kind) {
    case NIMBLE_PART_METADATA: write_metadata(b, o); break;
    case NIMBLE_PART_BYTECODE: write_bytecode(b, o); break;
    case NIMBLE_PART_CONSTANTS: write_constants(b, o); break;
    case NIMBLE_PART_KERNELS_CPU:
    case NIMBLE_PART_KERNELS_CUDA:
      if (!(kind == NIMBLE_PART_KERNELS_CPU ? b->has_cpu_lib : b->has_cuda_lib))
        return nimble_status_make(NIMBLE_NOT_FOUND, "builder: no %s library was set",
                                  nimble_part_name(kind));
      write_kernels(b, kind, o);
      break;
    default:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "builder: unknown part kind %d", (int)kind);
  }
  /* The part's digest, last (docs/executable.md, "Integrity"). */
  uint8_t *digest = buf_grow(o, NIMBLE_PART_DIGEST_SIZE);
  if (!digest) return OOM();
  nimble_part_seal(o->data + start, o->size - start);
  return nimble_ok();
}

nimble_status_t nimble_builder_serialize_part(const nimble_executable_builder *b,
                                              nimble_part_kind_t kind, void **data, size_t *size) {
  buf_t o = {0};
  nimble_status_t s = write_part(b, kind, &o);
  if (s) {
    free(o.data);
    return s;
  }
  *data = o.data ? o.data : malloc(1);
  *size = o.size;
  return nimble_ok();
}

/* The chunk digests part of the constants part already in `o` at `c_start`
 * (`c_size` bytes without its digest, its table ending at `c_table`). */
static nimble_status_t write_chunk_digests(const nimble_executable_builder *b, size_t c_start, size_t c_size,
                                           size_t c_table, size_t chunks, buf_t *o) {
  if (o->failed) return OOM();
  uint8_t *list = malloc(32 * chunks);
  if (!list) return OOM();
  nimble_part_chunk_digests(o->data + c_start, c_size, list);
  size_t start = o->size;
  put_part_header(o, NIMBLE_PART_CHUNK_DIGESTS, b->version);
  put_u32(o, NIMBLE_PART_CONSTANTS);
  put_u32(o, NIMBLE_CHUNK_DIGESTS_HAS_TABLE);
  put_u64(o, chunks);
  put_bytes(o, list, 32 * chunks);
  free(list);
  /* The table's own digest: a load hashes these few KB, not their 1 MiB
   * chunk (docs/executable.md, "Chunk digests"). */
  nimble_digest_t table;
  if (o->failed) return OOM();
  nimble_digest_compute(o->data + c_start, c_table, &table);
  put_u64(o, c_table);
  put_bytes(o, table.bytes, 32);
  uint8_t *digest = buf_grow(o, NIMBLE_PART_DIGEST_SIZE);
  if (!digest) return OOM();
  nimble_part_seal(o->data + start, o->size - start);
  return nimble_ok();
}

nimble_status_t nimble_builder_serialize(const nimble_executable_builder *b, void **data,
                                         size_t *size) {
  nimble_part_kind_t kinds[6];
  uint32_t n = 0;
  kinds[n++] = NIMBLE_PART_METADATA;
  kinds[n++] = NIMBLE_PART_BYTECODE;
  kinds[n++] = NIMBLE_PART_CONSTANTS;
  if (b->has_cpu_lib) kinds[n++] = NIMBLE_PART_KERNELS_CPU;
  if (b->has_cuda_lib) kinds[n++] = NIMBLE_PART_KERNELS_CUDA;
  /* Large constants get their chunk list, so that a load can verify the
   * weights on first use instead of all at once (docs/executable.md,
   * "Chunk digests"). */
  size_t c_offset, c_data, c_chunks;
  constants_layout(b, &c_offset, &c_data);
  c_chunks = nimble_part_chunk_count(c_offset + c_data);
  if (c_chunks >= NIMBLE_CHUNK_DIGESTS_MIN_CHUNKS) kinds[n++] = NIMBLE_PART_CHUNK_DIGESTS;
  size_t c_start = 0;
  buf_t o = {0};
  /* The big parts' sizes, so the file's buffer is allocated about once. */
  size_t hint = 64 * 1024 + b->cpu_lib.size + b->cuda_lib.size;
  for (uint32_t i = 0; i < b->num_constants; i++)
    hint += (size_t)(b->constants[i].nbytes + 63) / 64 * 64 + 16 + 8 * (size_t)b->constants[i].ndim + 16;
  buf_reserve(&o, hint);
  put_bytes(&o, NIMBLE_FILE_MAGIC, NIMBLE_FILE_MAGIC_LEN);
  put_u32(&o, b->version);
  put_u32(&o, n);
  put_u64(&o, 0); /* file size, patched below */
  for (int i = 0; i < 8; i++) put_u32(&o, 0); /* header digest, written last */
  size_t table = o.size;
  for (uint32_t i = 0; i < n * 6; i++) put_u32(&o, 0);
  for (uint32_t i = 0; i < n; i++) {
    pad_to(&o, NIMBLE_SECTION_ALIGN);
    size_t start = o.size;
    if (kinds[i] == NIMBLE_PART_CONSTANTS) c_start = start;
    nimble_status_t s = kinds[i] == NIMBLE_PART_CHUNK_DIGESTS
                            ? write_chunk_digests(b, c_start, c_offset + c_data, c_offset, c_chunks, &o)
                            : write_part(b, kinds[i], &o);
    if (s) {
      free(o.data);
      return s;
    }
    uint8_t *e = o.data + table + (size_t)i * NIMBLE_SECTION_ENTRY_SIZE;
    nimble_put_u32(e, (uint32_t)kinds[i]);
    nimble_put_u32(e + 4, 0);
    nimble_put_u64(e + 8, start);
    nimble_put_u64(e + 16, o.size - start);
  }
  if (o.failed) {
    free(o.data);
    return OOM();
  }
  nimble_put_u64(o.data + 16, o.size);
  nimble_image_header_digest(o.data, n, o.data + NIMBLE_FILE_DIGEST_OFFSET);
  *data = o.data;
  *size = o.size;
  return nimble_ok();
}
