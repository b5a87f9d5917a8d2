/* The constant pool: a table of tensors and a data area whose tensors start
 * at 64-byte multiples. When the bytes stay alive (a mapped file, or a
 * borrowed buffer) and are aligned, the tensors point into them directly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/byte_reader.h"
#include "executable/executable.h"
#include "format/layout.h"
#include "nimble/bytecode.h"
#include "nimble/digest.h"
#include "vm/sgemm_own.h"

void nimble_constants_lazy_free(nimble_constants_lazy_t *l) {
  if (!l) return;
  free(l->chunk_ok);
  free(l->const_ok);
  free(l);
}

nimble_status_t nimble_constants_verify_chunks(nimble_constants_lazy_t *l, size_t first, size_t end,
                                               const char *what) {
  for (size_t i = first; i < end && i < l->num_chunks; i++) {
    if (atomic_load_explicit(&l->chunk_ok[i], memory_order_acquire)) continue;
    size_t off = i * NIMBLE_PART_CHUNK_SIZE;
    size_t len = l->size - off < NIMBLE_PART_CHUNK_SIZE ? l->size - off : NIMBLE_PART_CHUNK_SIZE;
    nimble_digest_t got, want;
    nimble_digest_compute(l->part + off, len, &got);
    memcpy(want.bytes, l->digests + 32 * i, 32);
    if (!nimble_digest_equal(&got, &want))
      return nimble_status_make(NIMBLE_DATA_LOSS,
                                "constants %s (offset %zu, %zu bytes): chunk %zu of %zu, bytes [%zu, %zu) of the "
                                "%s: digest mismatch: the bytes are not the ones the compiler wrote (corrupted "
                                "or modified); refusing to use them (%s)",
                                l->in_file ? "section" : "part", l->base, l->section_size, i, l->num_chunks, off,
                                off + len, l->in_file ? "section" : "part", what);
    atomic_store_explicit(&l->chunk_ok[i], 1, memory_order_release);
  }
  return nimble_ok();
}

nimble_status_t nimble_constants_verify_slow(const nimble_constants_t *c, uint32_t i) {
  nimble_constants_lazy_t *l = c->lazy;
  const nimble_tensor_obj *t = c->tensors[i];
  uint64_t nbytes = 0;
  (void)nimble_tensor_nbytes(t->dl.ndim, t->dl.shape, t->dl.dtype, &nbytes); /* checked at parse */
  size_t at = (size_t)((const uint8_t *)t->dl.data - l->part);
  char what[64];
  /* The table this constant's place and shape came from: it matched its
   * own digest at load, and its chunks, which the constants' digest
   * covers, must match before any constant is used. */
  snprintf(what, sizeof what, "the table, before constant %u is used", i);
  NIMBLE_RETURN_IF_ERROR(nimble_constants_verify_chunks(l, 0, l->table_chunks, what));
  if (nbytes) {
    snprintf(what, sizeof what, "constant %u", i);
    size_t first = at / NIMBLE_PART_CHUNK_SIZE;
    size_t end = (at + (size_t)nbytes + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE;
    NIMBLE_RETURN_IF_ERROR(nimble_constants_verify_chunks(l, first, end, what));
  }
  atomic_store_explicit(&l->const_ok[i], 1, memory_order_release);
  return nimble_ok();
}

nimble_status_t nimble_constants_parse(const uint8_t *data, size_t size, size_t base, _Bool borrow,
                                       nimble_constants_lazy_t *lazy, nimble_constants_t *c) {
  memset(c, 0, sizeof *c);
  c->lazy = lazy; /* freed by nimble_constants_deinit from here on */
  NIMBLE_RETURN_IF_ERROR(
      nimble_part_header_check(data, size, base, NIMBLE_PART_CONSTANTS, "constants", NULL));
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, "constants");
  r.base = base;
  r.pos = NIMBLE_PART_HEADER_SIZE;
  uint32_t n, reserved;
  uint64_t data_offset, data_size;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "constant count", &n));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "reserved", &reserved));
  size_t at = r.pos;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "data offset", &data_offset));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "data size", &data_size));
  if (data_offset % NIMBLE_SECTION_ALIGN != 0 || data_offset > size ||
      data_size != size - data_offset || data_offset < r.pos) {
    r.pos = at;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT,
                               "data area [%llu, +%llu) does not end the %zu-byte part at a "
                               "64-byte aligned offset after the table",
                               (unsigned long long)data_offset, (unsigned long long)data_size, size);
  }
  /* The table lies between here and the data area. */
  nimble_reader_t table = r;
  table.size = (size_t)data_offset;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_check_count(&table, "constant count", n, 28));

  const uint8_t *area = data + data_offset;
  if (!borrow || ((uintptr_t)area % NIMBLE_SECTION_ALIGN) != 0) {
    /* A copy reads every byte anyway: verify them all now, and the copy
     * needs no more checks. */
    if (c->lazy) {
      NIMBLE_RETURN_IF_ERROR(nimble_constants_verify_chunks(c->lazy, 0, c->lazy->num_chunks, "at load"));
      nimble_constants_lazy_free(c->lazy);
      c->lazy = NULL;
    }
    size_t alloc = (size_t)((data_size + NIMBLE_SECTION_ALIGN - 1) / NIMBLE_SECTION_ALIGN *
                            NIMBLE_SECTION_ALIGN);
    c->owned_copy = aligned_alloc(NIMBLE_SECTION_ALIGN, alloc ? alloc : NIMBLE_SECTION_ALIGN);
    if (!c->owned_copy)
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory copying %llu bytes of constants",
                                (unsigned long long)data_size);
    memcpy(c->owned_copy, area, (size_t)data_size);
    area = c->owned_copy;
  }
  c->backing = calloc(1, sizeof *c->backing);
  c->tensors = calloc(n ? n : 1, sizeof *c->tensors);
  if (!c->backing || !c->tensors) return NIMBLE_OOM();
  if (c->lazy && !(c->lazy->const_ok = calloc(n ? n : 1, sizeof *c->lazy->const_ok))) return NIMBLE_OOM();
  nimble_object_init(&c->backing->base, NIMBLE_OBJ_STORAGE);
  c->backing->data = (void *)area;
  c->backing->size = data_size;
  /* Constants never change while loaded: the own sgemm may keep packed
   * copies of weights found here (vm/sgemm_own.h). */
  nimble_sgemm_own_constants_add(area, data_size);
  c->backing->device.device_type = kDLCPU;
  c->backing->device.device_id = 0;

  for (uint32_t i = 0; i < n; i++) {
    uint8_t code, bits;
    uint16_t lanes;
    int32_t dev;
    uint32_t ndim, res;
    int64_t shape[NIMBLE_MAX_NDIM];
    uint64_t off, nbytes, want;
    at = table.pos;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u8(&table, "dtype code", &code));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u8(&table, "dtype bits", &bits));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u16(&table, "dtype lanes", &lanes));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_i32(&table, "device type", &dev));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&table, "ndim", &ndim));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&table, "reserved", &res));
    if (!nimble_dtype_valid(code, bits, lanes)) {
      table.pos = at;
      return nimble_reader_error(&table, NIMBLE_INVALID_ARGUMENT,
                                 "constant %u: unsupported dtype (code %u, bits %u, lanes %u)", i,
                                 code, bits, lanes);
    }
    if (dev != kDLCPU) {
      table.pos = at + 4;
      return nimble_reader_error(&table, NIMBLE_UNIMPLEMENTED,
                                 "constant %u: device type %d (constants live on the CPU)", i, dev);
    }
    if (ndim > NIMBLE_MAX_NDIM) {
      table.pos = at + 8;
      return nimble_reader_error(&table, NIMBLE_INVALID_ARGUMENT, "constant %u: ndim %u exceeds %d", i,
                                 ndim, NIMBLE_MAX_NDIM);
    }
    for (uint32_t d = 0; d < ndim; d++)
      NIMBLE_RETURN_IF_ERROR(nimble_reader_i64(&table, "dim", &shape[d]));
    at = table.pos;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&table, "data offset", &off));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&table, "byte count", &nbytes));
    DLDataType dt = {code, bits, lanes};
    if (!nimble_tensor_nbytes((int32_t)ndim, shape, dt, &want) || want != nbytes) {
      table.pos = at;
      return nimble_reader_error(&table, NIMBLE_INVALID_ARGUMENT,
                                 "constant %u: %llu bytes do not match its shape and dtype", i,
                                 (unsigned long long)nbytes);
    }
    if (off % NIMBLE_SECTION_ALIGN != 0 || off > data_size || nbytes > data_size - off) {
      table.pos = at;
      return nimble_reader_error(&table, NIMBLE_OUT_OF_RANGE,
                                 "constant %u: bytes [%llu, +%llu) lie outside the %llu-byte data "
                                 "area or are not 64-byte aligned",
                                 i, (unsigned long long)off, (unsigned long long)nbytes,
                                 (unsigned long long)data_size);
    }
    DLDevice cpu = {kDLCPU, 0};
    c->tensors[i] = nimble_tensor_obj_view(&c->backing->base, (void *)(area + off), (int32_t)ndim,
                                           shape, dt, cpu);
    if (!c->tensors[i]) return NIMBLE_OOM();
    nimble_object_share(&c->tensors[i]->base); /* every VM over the executable uses it */
    c->num_constants = i + 1;
  }
  c->num_constants = n;
  /* Only the zero padding up to the aligned data area may follow. */
  size_t pad = table.size - table.pos;
  for (size_t k = 0; k < pad; k++)
    if (pad >= NIMBLE_SECTION_ALIGN || data[table.pos + k] != 0)
      return nimble_reader_error(&table, NIMBLE_INVALID_ARGUMENT,
                                 "%zu unexpected bytes between the table and the data area", pad);
  return nimble_ok();
}

void nimble_constants_deinit(nimble_constants_t *c) {
  for (uint32_t i = 0; i < c->num_constants; i++) nimble_object_release(&c->tensors[i]->base);
  free(c->tensors);
  if (c->backing) {
    nimble_sgemm_own_constants_remove(c->backing->data, c->backing->size);
    nimble_object_release(&c->backing->base);
  }
  free(c->owned_copy);
  nimble_constants_lazy_free(c->lazy);
  memset(c, 0, sizeof *c);
}
