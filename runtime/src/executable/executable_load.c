/* Loading an executable from a file, a memory image or separate parts, and
 * reading its signature. Everything is validated before anything is used;
 * a failure frees what was built and names the problem and its place. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "format/byte_reader.h"
#include "executable/executable.h"
#include "format/layout.h"
#include "nimble/bytecode.h"
#include "nimble/digest.h"

typedef struct part_view {
  const uint8_t *data;
  size_t size;
  size_t base; /* offset in the file, for messages */
  int present;
  int in_file; /* a section of a `.nimble` image (for messages: "section" or "part") */
} part_view;

#define NUM_KINDS 8 /* indexed by nimble_part_kind_t */

/* What a load checks beyond the format: the caller's verifier (a signature
 * policy), run once the digests have checked out. */
typedef struct load_check {
  nimble_executable_check_fn fn;
  void *user;
} load_check;

static void executable_free(nimble_executable *exe) {
  if (exe->lazy_kernels) {
    pthread_mutex_destroy(&exe->lazy_kernels->mu);
    free(exe->lazy_kernels);
  }
  nimble_constants_deinit(&exe->consts);
  nimble_bytecode_deinit(&exe->code);
  nimble_metadata_deinit(&exe->meta);
  nimble_kernel_library_unload(&exe->cpu_kernels);
  nimble_device_kernels_unload(&exe->device_kernels);
  if (exe->mapping) munmap(exe->mapping, exe->mapping_size);
  free(exe);
}

void nimble_executable_retain(nimble_executable *exe) {
  if (exe) atomic_fetch_add_explicit(&exe->refs, 1, memory_order_relaxed);
}

void nimble_executable_release(nimble_executable *exe) {
  if (exe && atomic_fetch_sub_explicit(&exe->refs, 1, memory_order_acq_rel) == 1)
    executable_free(exe);
}

/* Checks that hold across parts: entries name functions whose parameters
 * match their inputs, LoadConst names constants that exist, kernels have a
 * library for their device. */
static nimble_status_t cross_check(nimble_executable *exe, const part_view *parts) {
  const nimble_metadata_t *m = &exe->meta;
  const nimble_bytecode_t *c = &exe->code;
  for (uint32_t i = 0; i < m->num_entries; i++) {
    uint32_t f = m->entry_functions[i];
    if (f >= c->num_functions)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "metadata: entry '%s' names function %u, but the bytecode has %u",
                                m->entries[i].name, f, c->num_functions);
    if (c->functions[f].num_params != m->entries[i].num_inputs)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "entry '%s' declares %u inputs, but its function '%s' takes %u",
                                m->entries[i].name, m->entries[i].num_inputs, c->functions[f].name,
                                c->functions[f].num_params);
  }
  for (uint32_t i = 0; i < c->num_functions; i++) {
    const nimble_function_t *fn = &c->functions[i];
    for (uint32_t pc = 0; pc < fn->num_instructions; pc++) {
      if (fn->instructions[pc].op != NIMBLE_OP_LOAD_CONST) continue;
      int64_t k = fn->operands[fn->instructions[pc].first + 1];
      if (k >= (int64_t)exe->consts.num_constants)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "bytecode: function %u '%s' pc %u (LoadConst): constant %lld is out "
                                  "of range (the pool has %u)",
                                  i, fn->name, pc, (long long)k, exe->consts.num_constants);
    }
  }
  for (uint32_t i = 0; i < c->num_kernels; i++) {
    if (c->kernels[i].device == kDLCPU && !parts[NIMBLE_PART_KERNELS_CPU].present)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "kernel '%s' needs a cpu kernel library, and the executable has none",
                                c->kernels[i].symbol);
    if (c->kernels[i].device == kDLCUDA && !parts[NIMBLE_PART_KERNELS_CUDA].present)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "kernel '%s' needs a cuda kernel library, and the executable has none",
                                c->kernels[i].symbol);
  }
  return nimble_ok();
}

/* "constants section" (of a file) or "constants part" (alone), for messages. */
static void part_what(int in_file, nimble_part_kind_t k, char *what, size_t n) {
  snprintf(what, n, "%s %s", nimble_part_name(k), in_file ? "section" : "part");
}

/* Checks the chunk digests part (its own digest first) against the
 * constants part's digest: the SHA-256 of the list must be it, so a list
 * that loads is the compiler's. When `lazy` is given and the constants may
 * be verified on first use, fills *lazy (owned by the caller) after
 * hashing the constants' table: against the table digest the list carries
 * (its chunks are then hashed again before the first constant is used,
 * which ties the table to the constants' digest), or for a list without
 * one the chunks that hold the table. Otherwise the constants are left to
 * the whole-part check. */
static nimble_status_t check_chunk_digests(part_view *parts, int defer, nimble_constants_lazy_t **lazy) {
  part_view *p = &parts[NIMBLE_PART_CHUNK_DIGESTS], *c = &parts[NIMBLE_PART_CONSTANTS];
  char what[48];
  part_what(p->in_file, NIMBLE_PART_CHUNK_DIGESTS, what, sizeof what);
  NIMBLE_RETURN_IF_ERROR(nimble_part_digest_check(p->data, p->size, p->base, what));
  nimble_reader_t r;
  nimble_reader_init(&r, p->data, p->size - NIMBLE_PART_DIGEST_SIZE, "chunk digests");
  r.base = p->base;
  r.pos = NIMBLE_PART_HEADER_SIZE;
  uint32_t kind, flags;
  uint64_t count;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "covered part kind", &kind));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "flags", &flags));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "chunk count", &count));
  if (kind != NIMBLE_PART_CONSTANTS || (flags & ~NIMBLE_CHUNK_DIGESTS_HAS_TABLE) != 0) {
    r.pos -= 16;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT,
                               "covered part kind %u, flags %u: only the constants' chunks (kind 3), with or "
                               "without their table's digest (flags 0 or 1), are known",
                               kind, flags);
  }
  int has_table = (flags & NIMBLE_CHUNK_DIGESTS_HAS_TABLE) != 0;
  size_t extra = has_table ? NIMBLE_CHUNK_DIGESTS_TABLE_SIZE : 0;
  if (!c->present)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s (offset %zu): chunk digests of a constants part, and "
                              "the executable has none", what, p->base);
  if (c->size < NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE)
    return nimble_part_digest_check(c->data, c->size, c->base, "constants"); /* its "truncated" */
  size_t csize = c->size - NIMBLE_PART_DIGEST_SIZE, chunks = nimble_part_chunk_count(csize);
  if (count != chunks || r.size - r.pos != 32 * chunks + extra) {
    r.pos -= 8;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT,
                               "%llu chunk digests%s in %zu bytes, for a constants part of %zu chunks",
                               (unsigned long long)count, has_table ? " and the table's" : "",
                               r.size - r.pos - 8, chunks);
  }
  const uint8_t *list = p->data + r.pos;
  nimble_digest_t got, want;
  nimble_digest_compute(list, 32 * chunks, &got);
  memcpy(want.bytes, c->data + csize, 32);
  if (!nimble_digest_equal(&got, &want))
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s (offset %zu, %zu bytes): its chunk digests do not give the constants' digest "
                              "(corrupted or modified); refusing to load it",
                              what, p->base, p->size);
  uint64_t table_size = 0;
  if (has_table) {
    r.pos += 32 * chunks;
    size_t at = r.pos;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "table size", &table_size));
    /* At least the constants' header, whose data offset it must equal
     * (checked below, once those bytes are verified). */
    if (table_size < NIMBLE_PART_HEADER_SIZE + 24 || table_size > csize) {
      r.pos = at;
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT,
                                 "table size %llu is not within the %zu-byte constants part",
                                 (unsigned long long)table_size, csize);
    }
  }
  if (!defer || chunks < 2) return nimble_ok();
  nimble_constants_lazy_t *l = calloc(1, sizeof *l);
  if (!l || !(l->chunk_ok = calloc(chunks, sizeof *l->chunk_ok))) {
    free(l);
    return NIMBLE_OOM();
  }
  l->part = c->data;
  l->size = csize;
  l->section_size = c->size;
  l->base = c->base;
  l->in_file = c->in_file;
  l->digests = list;
  l->num_chunks = chunks;
  nimble_status_t s = nimble_ok();
  if (has_table) {
    /* The header and table, to the data area, are read (and trusted) by
     * the parser at load: hashed alone here. Their chunks wait for the
     * first constant used, like the weights, and are verified before it. */
    const char *where = c->in_file ? "section" : "part";
    nimble_digest_compute(c->data, (size_t)table_size, &got);
    memcpy(want.bytes, list + 32 * chunks + 8, 32);
    if (!nimble_digest_equal(&got, &want))
      s = nimble_status_make(NIMBLE_DATA_LOSS,
                             "constants %s (offset %zu, %zu bytes): its table, bytes [0, %llu) of the %s: digest "
                             "mismatch: the bytes are not the ones the compiler wrote (corrupted or modified); "
                             "refusing to load it",
                             where, c->base, c->size, (unsigned long long)table_size, where);
    else if (nimble_get_u64(c->data + 24) != table_size)
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "%s (offset %zu): table size %llu, but the constants' data area starts at %llu", what,
                             p->base, (unsigned long long)table_size,
                             (unsigned long long)nimble_get_u64(c->data + 24));
    l->table_chunks = ((size_t)table_size + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE;
  } else {
    /* A list without the table's digest: the chunks that hold the table.
     * The data offset is read before its chunk is checked, only to know
     * how far to check; chunk 0 holds it. */
    size_t table_end = csize >= 32 ? (size_t)nimble_get_u64(c->data + 24) : csize;
    if (table_end > csize) table_end = csize;
    size_t eager = (table_end + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE;
    s = nimble_constants_verify_chunks(l, 0, eager ? eager : 1, "the table, at load");
  }
  if (s) {
    nimble_constants_lazy_free(l);
    return s;
  }
  *lazy = l;
  return nimble_ok();
}

/* Checks every part's digest and strips it from the views (parsers see a
 * part without it), computes the executable digest, checks the signature
 * part's structure and runs the caller's verifier. Nothing of a part is
 * parsed before its digest has checked out, except the constants' data
 * area when `defer` and the chunk digests allow: *lazy (owned by the
 * caller) then verifies it on first use; and the CPU kernels when
 * `defer_kernels`: their part is left whole and unread for the first VM
 * (nimble_executable_kernels_ready). */
static nimble_status_t check_integrity(part_view *parts, const load_check *check, int defer,
                                       int defer_kernels, nimble_constants_lazy_t **lazy,
                                       uint8_t digest[32]) {
  nimble_part_kind_t kinds[NUM_KINDS];
  const uint8_t *datas[NUM_KINDS];
  size_t sizes[NUM_KINDS], n = 0;
  *lazy = NULL;
  if (parts[NIMBLE_PART_CHUNK_DIGESTS].present) {
    NIMBLE_RETURN_IF_ERROR(check_chunk_digests(parts, defer, lazy));
    parts[NIMBLE_PART_CHUNK_DIGESTS].size -= NIMBLE_PART_DIGEST_SIZE;
  }
  for (int k = 1; k < NUM_KINDS; k++) {
    part_view *p = &parts[k];
    if (!p->present || k == NIMBLE_PART_CHUNK_DIGESTS) continue;
    char what[48];
    part_what(p->in_file, (nimble_part_kind_t)k, what, sizeof what);
    if (k == NIMBLE_PART_KERNELS_CPU && defer_kernels) {
      /* Its digest still names it in the executable digest below; the
       * bytes are hashed before the library is mapped. */
      if (p->size < NIMBLE_PART_HEADER_SIZE + NIMBLE_PART_DIGEST_SIZE)
        return nimble_part_digest_check(p->data, p->size, p->base, what); /* its "truncated" */
      kinds[n] = (nimble_part_kind_t)k;
      datas[n] = p->data;
      sizes[n++] = p->size;
      continue;
    }
    if (!(k == NIMBLE_PART_CONSTANTS && *lazy)) {
      NIMBLE_RETURN_IF_ERROR(nimble_part_digest_check(p->data, p->size, p->base, what));
    }
    kinds[n] = (nimble_part_kind_t)k;
    datas[n] = p->data;
    sizes[n++] = p->size;
    p->size -= NIMBLE_PART_DIGEST_SIZE;
  }
  nimble_executable_digest_of(kinds, datas, sizes, n, digest);
  const uint8_t *sig = NULL;
  size_t sig_size = 0;
  if (parts[NIMBLE_PART_SIGNATURE].present) {
    const part_view *p = &parts[NIMBLE_PART_SIGNATURE];
    nimble_reader_t r;
    nimble_reader_init(&r, p->data, p->size, "signature");
    r.base = p->base;
    r.pos = NIMBLE_PART_HEADER_SIZE;
    uint32_t algorithm, reserved;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "algorithm", &algorithm));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "reserved", &reserved));
    if (algorithm != NIMBLE_SIGNATURE_ALGORITHM_ED25519 || reserved != 0) {
      r.pos -= 8;
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT,
                                 "algorithm %u, reserved %u: only Ed25519 (1) signatures are known", algorithm,
                                 reserved);
    }
    if (p->size != NIMBLE_PART_HEADER_SIZE + NIMBLE_SIGNATURE_BODY_SIZE)
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "an Ed25519 signature part has %d bytes, not %zu",
                                 NIMBLE_SIGNATURE_PART_SIZE, p->size + NIMBLE_PART_DIGEST_SIZE);
    sig = p->data + NIMBLE_PART_HEADER_SIZE;
    sig_size = NIMBLE_SIGNATURE_BODY_SIZE;
  }
  if (check && check->fn) return check->fn(check->user, digest, sig, sig_size);
  return nimble_ok();
}

static nimble_status_t load_from_views(part_view *parts, uint32_t flags, void *mapping,
                                       size_t mapping_size, uint32_t format_version,
                                       const load_check *check, nimble_executable **out) {
  static const nimble_part_kind_t required[] = {NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE,
                                                NIMBLE_PART_CONSTANTS};
  /* Headers first, so a part from a newer format says so before anything
   * else is reported about it. */
  for (int k = 1; k < NUM_KINDS; k++) {
    if (!parts[k].present) continue;
    nimble_status_t s = nimble_part_header_check(parts[k].data, parts[k].size, parts[k].base,
                                                 (nimble_part_kind_t)k,
                                                 nimble_part_name((nimble_part_kind_t)k), NULL);
    if (s) {
      if (mapping) munmap(mapping, mapping_size);
      return s;
    }
  }
  uint8_t digest[32];
  /* The constants' data area may wait for first use only where the bytes
   * stay put (a mapping, a borrowed buffer) and the caller allows it. */
  int defer = (flags & NIMBLE_LOAD_BORROW) && !(flags & NIMBLE_LOAD_VERIFY_ALL);
  /* So may the CPU kernels, to the first VM, when there will be one. */
  int defer_kernels = defer && !(flags & NIMBLE_LOAD_NO_KERNELS) && parts[NIMBLE_PART_KERNELS_CPU].present;
  nimble_constants_lazy_t *lazy = NULL;
  nimble_status_t is = check_integrity(parts, check, defer, defer_kernels, &lazy, digest);
  if (is) {
    nimble_constants_lazy_free(lazy);
    if (mapping) munmap(mapping, mapping_size);
    return is;
  }
  for (size_t i = 0; i < 3; i++)
    if (!parts[required[i]].present) {
      nimble_constants_lazy_free(lazy);
      if (mapping) munmap(mapping, mapping_size);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the executable has no %s part",
                                nimble_part_name(required[i]));
    }
  nimble_executable *exe = calloc(1, sizeof *exe);
  if (!exe) {
    nimble_constants_lazy_free(lazy);
    if (mapping) munmap(mapping, mapping_size);
    return NIMBLE_OOM();
  }
  atomic_init(&exe->refs, 1);
  exe->format_version = format_version;
  memcpy(exe->digest, digest, sizeof digest);
  exe->mapping = mapping;
  exe->mapping_size = mapping_size;
  const part_view *p;
  nimble_status_t s;
  p = &parts[NIMBLE_PART_METADATA];
  s = nimble_metadata_parse(p->data, p->size, p->base, &exe->meta);
  if (!s) {
    p = &parts[NIMBLE_PART_BYTECODE];
    s = nimble_bytecode_parse(p->data, p->size, p->base, &exe->code);
  }
  if (!s) {
    p = &parts[NIMBLE_PART_CONSTANTS];
    s = nimble_constants_parse(p->data, p->size, p->base, (flags & NIMBLE_LOAD_BORROW) != 0, lazy,
                               &exe->consts);
    lazy = NULL; /* the constants own it now */
  }
  nimble_constants_lazy_free(lazy);
  if (!s) s = cross_check(exe, parts);
  /* Kernel parts are checked even when not loaded (deferred CPU kernels
   * when the first VM maps them). */
  for (int k = NIMBLE_PART_KERNELS_CPU; !s && k <= NIMBLE_PART_KERNELS_CUDA; k++) {
    const uint8_t *blob;
    size_t blob_size;
    if (parts[k].present && !(k == NIMBLE_PART_KERNELS_CPU && defer_kernels))
      s = nimble_kernel_part_parse(parts[k].data, parts[k].size, parts[k].base, (nimble_part_kind_t)k,
                                   &blob, &blob_size);
  }
  exe->kernels_loaded = !(flags & NIMBLE_LOAD_NO_KERNELS);
  if (!s && defer_kernels) {
    nimble_kernels_lazy_t *l = calloc(1, sizeof *l);
    if (!l) {
      s = NIMBLE_OOM();
    } else {
      p = &parts[NIMBLE_PART_KERNELS_CPU];
      l->part = p->data;
      l->size = p->size;
      l->base = p->base;
      l->in_file = p->in_file;
      pthread_mutex_init(&l->mu, NULL);
      atomic_init(&l->ready, 0);
      exe->lazy_kernels = l;
    }
  } else if (!s && parts[NIMBLE_PART_KERNELS_CPU].present && exe->kernels_loaded) {
    p = &parts[NIMBLE_PART_KERNELS_CPU];
    s = nimble_kernel_library_load_cpu(p->data, p->size, p->base, &exe->cpu_kernels, &exe->code);
  }
  /* Another device's kernels are loaded here too, when some kernel runs
   * there (a kernel part no kernel uses is checked above and left alone):
   * the device is needed then and not before, an executable stays
   * immutable once loaded, and a missing driver is reported where the
   * executable is loaded rather than at its first instruction on the
   * device. The format has one such part, CUDA's. */
  DLDeviceType device_type = kDLCPU;
  for (uint32_t i = 0; i < exe->code.num_kernels; i++)
    if (exe->code.kernels[i].device != kDLCPU) device_type = exe->code.kernels[i].device;
  if (!s && device_type != kDLCPU && exe->kernels_loaded) {
    assert(device_type == kDLCUDA); /* the bytecode parser admits cpu and cuda kernels only */
    p = &parts[NIMBLE_PART_KERNELS_CUDA];
    s = nimble_kernel_library_load_device(p->data, p->size, p->base, NIMBLE_PART_KERNELS_CUDA, device_type,
                                          &exe->device_kernels, &exe->code);
  }
  if (s) {
    executable_free(exe);
    return s;
  }
  *out = exe;
  return nimble_ok();
}

nimble_status_t nimble_executable_kernels_ready(nimble_executable *exe) {
  nimble_kernels_lazy_t *l = exe->lazy_kernels;
  if (!l || atomic_load_explicit(&l->ready, memory_order_acquire)) return nimble_ok();
  pthread_mutex_lock(&l->mu);
  nimble_status_t s = nimble_ok();
  if (!atomic_load_explicit(&l->ready, memory_order_relaxed)) {
    char what[48];
    part_what(l->in_file, NIMBLE_PART_KERNELS_CPU, what, sizeof what);
    s = nimble_part_digest_check(l->part, l->size, l->base, what);
    if (!s)
      s = nimble_kernel_library_load_cpu(l->part, l->size - NIMBLE_PART_DIGEST_SIZE, l->base, &exe->cpu_kernels,
                                         &exe->code);
    if (s) {
      nimble_kernel_library_unload(&exe->cpu_kernels);
      s = nimble_status_annotate(s, "its kernels, checked for the first VM");
    } else {
      atomic_store_explicit(&l->ready, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&l->mu);
  return s;
}

/* Parses the container of a `.nimble` image into part views. */
static nimble_status_t split_image(const uint8_t *data, size_t size, part_view *parts,
                                   uint32_t *version) {
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, "executable");
  if (size < NIMBLE_FILE_MAGIC_LEN || memcmp(data, NIMBLE_FILE_MAGIC, NIMBLE_FILE_MAGIC_LEN) != 0) {
    if (size < NIMBLE_FILE_MAGIC_LEN && memcmp(data, NIMBLE_FILE_MAGIC, size) == 0)
      return nimble_reader_error(&r, NIMBLE_DATA_LOSS, "truncated: %zu bytes, not even a header", size);
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "bad magic: not a nimble executable");
  }
  r.pos = NIMBLE_FILE_MAGIC_LEN;
  uint32_t count;
  uint64_t file_size;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "format version", version));
  if (*version == NIMBLE_FORMAT_VERSION_UNSEALED) {
    r.pos -= 4;
    return nimble_reader_error(&r, NIMBLE_UNIMPLEMENTED,
                               "format version %u has no integrity digests and is no longer loaded: "
                               "recompile it (this runtime reads version %u)",
                               *version, NIMBLE_EXECUTABLE_FORMAT_VERSION);
  }
  if (*version != NIMBLE_EXECUTABLE_FORMAT_VERSION) {
    r.pos -= 4;
    return nimble_reader_error(&r, NIMBLE_UNIMPLEMENTED,
                               "format version %u is not supported (this runtime reads version %u)",
                               *version, NIMBLE_EXECUTABLE_FORMAT_VERSION);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "section count", &count));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "file size", &file_size));
  if (file_size != size) {
    r.pos -= 8;
    return nimble_reader_error(&r, file_size > size ? NIMBLE_DATA_LOSS : NIMBLE_INVALID_ARGUMENT,
                               "%s: the header says %llu bytes, %zu given",
                               file_size > size ? "truncated" : "size mismatch",
                               (unsigned long long)file_size, size);
  }
  if (count == 0 || count > NIMBLE_MAX_SECTIONS) {
    r.pos -= 12;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "section count %u (1 to %d allowed)", count,
                               NIMBLE_MAX_SECTIONS);
  }
  /* The header digest, before any table entry is believed. */
  size_t header_bytes = NIMBLE_FILE_HEADER_SIZE + (size_t)count * NIMBLE_SECTION_ENTRY_SIZE;
  if (size < header_bytes)
    return nimble_reader_error(&r, NIMBLE_DATA_LOSS, "truncated: a header and %u-section table need %zu bytes, %zu given",
                               count, header_bytes, size);
  uint8_t want[32];
  nimble_image_header_digest(data, count, want);
  r.pos = NIMBLE_FILE_DIGEST_OFFSET;
  if (memcmp(want, data + NIMBLE_FILE_DIGEST_OFFSET, sizeof want) != 0)
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "executable header and section table (offset 0, %zu bytes): digest mismatch: the "
                              "bytes are not the ones the compiler wrote (corrupted or modified); refusing to "
                              "load it",
                              header_bytes);
  r.pos = NIMBLE_FILE_HEADER_SIZE;
  uint64_t ends[NIMBLE_MAX_SECTIONS], starts[NIMBLE_MAX_SECTIONS];
  for (uint32_t i = 0; i < count; i++) {
    uint32_t kind, reserved;
    uint64_t off, len;
    size_t at = r.pos;
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "section kind", &kind));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "reserved", &reserved));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "section offset", &off));
    NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "section size", &len));
    r.pos = at;
    if (kind == 0 || kind >= NUM_KINDS)
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "section %u: unknown kind %u", i, kind);
    if (parts[kind].present)
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "section %u: a second %s section", i,
                                 nimble_part_name((nimble_part_kind_t)kind));
    if (reserved != 0)
      return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "section %u: reserved field is %u", i,
                                 reserved);
    uint64_t table_end = NIMBLE_FILE_HEADER_SIZE + (uint64_t)count * NIMBLE_SECTION_ENTRY_SIZE;
    if (off % NIMBLE_SECTION_ALIGN != 0 || off < table_end || off > size || len > size - off)
      return nimble_reader_error(&r, NIMBLE_OUT_OF_RANGE,
                                 "section %u (%s): bytes [%llu, +%llu) are outside the %zu-byte file "
                                 "or not 64-byte aligned after the section table",
                                 i, nimble_part_name((nimble_part_kind_t)kind), (unsigned long long)off,
                                 (unsigned long long)len, size);
    for (uint32_t j = 0; j < i; j++)
      if (off < ends[j] && starts[j] < off + len)
        return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "section %u overlaps section %u", i, j);
    starts[i] = off;
    ends[i] = off + len;
    parts[kind].data = data + off;
    parts[kind].size = (size_t)len;
    parts[kind].base = (size_t)off;
    parts[kind].present = 1;
    parts[kind].in_file = 1;
    r.pos = at + NIMBLE_SECTION_ENTRY_SIZE;
  }
  /* Bytes outside every section (alignment padding) are zero. */
  size_t table_end = header_bytes;
  for (size_t at = table_end; at < size;) {
    uint32_t next = count;
    for (uint32_t i = 0; i < count; i++)
      if (starts[i] <= at && at < ends[i]) next = i;
    if (next < count) {
      at = (size_t)ends[next];
      continue;
    }
    if (data[at] != 0) {
      r.pos = at;
      return nimble_reader_error(&r, NIMBLE_DATA_LOSS,
                                 "padding between sections: byte 0x%02x, expected 0 (corrupted or modified); "
                                 "refusing to load it",
                                 data[at]);
    }
    at++;
  }
  return nimble_ok();
}

static nimble_status_t load_image(const void *data, size_t size, uint32_t flags, void *mapping,
                                  size_t mapping_size, const load_check *check, nimble_executable **out) {
  part_view parts[NUM_KINDS];
  uint32_t version = 0;
  memset(parts, 0, sizeof parts);
  nimble_status_t s = split_image(data, size, parts, &version);
  if (s) {
    if (mapping) munmap(mapping, mapping_size);
    return s;
  }
  return load_from_views(parts, flags, mapping, mapping_size, version, check, out);
}

nimble_status_t nimble_executable_load_memory(const void *data, size_t size, uint32_t flags,
                                              nimble_executable **out) {
  return nimble_executable_load_memory_checked(data, size, flags, NULL, NULL, out);
}

nimble_status_t nimble_executable_load_memory_checked(const void *data, size_t size, uint32_t flags,
                                                      nimble_executable_check_fn check, void *user,
                                                      nimble_executable **out) {
  if (!out || (!data && size))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "load_memory: NULL argument");
  if (!data) data = "";
  load_check c = {check, user};
  return load_image(data, size, flags, NULL, 0, &c, out);
}

nimble_status_t nimble_executable_load_file(const char *path, nimble_executable **out) {
  return nimble_executable_load_file_checked(path, 0, NULL, NULL, out);
}

nimble_status_t nimble_executable_load_file_flags(const char *path, uint32_t flags,
                                                  nimble_executable **out) {
  return nimble_executable_load_file_checked(path, flags, NULL, NULL, out);
}

nimble_status_t nimble_executable_load_file_checked(const char *path, uint32_t flags,
                                                    nimble_executable_check_fn check, void *user,
                                                    nimble_executable **out) {
  if (!path || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "load_file: NULL argument");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(errno == ENOENT ? NIMBLE_NOT_FOUND : NIMBLE_IO_ERROR, "%s: %s", path,
                              strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: not a regular file", path);
  }
  size_t size = (size_t)st.st_size;
  void *map = NULL;
  if (size > 0) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return nimble_status_make(NIMBLE_IO_ERROR, "%s: mmap failed: %s", path, strerror(e));
    }
  }
  close(fd);
  load_check c = {check, user};
  nimble_status_t s =
      load_image(map ? map : (void *)"", size, flags | NIMBLE_LOAD_BORROW, map, size, &c, out);
  return s ? nimble_status_annotate(s, "%s", path) : s;
}

nimble_status_t nimble_executable_load_parts(const nimble_executable_part_t *parts, size_t num_parts,
                                             uint32_t flags, nimble_executable **out) {
  return nimble_executable_load_parts_checked(parts, num_parts, flags, NULL, NULL, out);
}

nimble_status_t nimble_executable_load_parts_checked(const nimble_executable_part_t *parts, size_t num_parts,
                                                     uint32_t flags, nimble_executable_check_fn check,
                                                     void *user, nimble_executable **out) {
  if (!out || (!parts && num_parts))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "load_parts: NULL argument");
  part_view views[NUM_KINDS];
  memset(views, 0, sizeof views);
  for (size_t i = 0; i < num_parts; i++) {
    int kind = (int)parts[i].kind;
    if (kind <= 0 || kind >= NUM_KINDS)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "part %zu: unknown kind %d", i, kind);
    if (views[kind].present)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "part %zu: a second %s part", i,
                                nimble_part_name((nimble_part_kind_t)kind));
    if (!parts[i].data && parts[i].size)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "part %zu: NULL data", i);
    views[kind].data = parts[i].data ? parts[i].data : (const uint8_t *)"";
    views[kind].size = parts[i].size;
    views[kind].base = 0;
    views[kind].present = 1;
  }
  load_check c = {check, user};
  return load_from_views(views, flags, NULL, 0, NIMBLE_EXECUTABLE_FORMAT_VERSION, &c, out);
}

void nimble_executable_digest(const nimble_executable *exe, char out[72]) {
  nimble_digest_t d;
  memcpy(d.bytes, exe->digest, sizeof d.bytes);
  nimble_digest_format(&d, out);
}

const char *nimble_executable_target(const nimble_executable *exe) { return exe->meta.target; }
const char *nimble_executable_producer(const nimble_executable *exe) { return exe->meta.producer; }
const char *nimble_executable_source_digest(const nimble_executable *exe) {
  return exe->meta.source_digest;
}
uint32_t nimble_executable_format_version(const nimble_executable *exe) { return exe->format_version; }
uint32_t nimble_executable_num_entries(const nimble_executable *exe) { return exe->meta.num_entries; }

const nimble_entry_info_t *nimble_executable_entry_at(const nimble_executable *exe, uint32_t i) {
  return i < exe->meta.num_entries ? &exe->meta.entries[i] : NULL;
}

nimble_status_t nimble_executable_find_entry(const nimble_executable *exe, const char *name,
                                             const nimble_entry_info_t **out) {
  if (!exe || !name || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "find_entry: NULL argument");
  for (uint32_t i = 0; i < exe->meta.num_entries; i++)
    if (strcmp(exe->meta.entries[i].name, name) == 0) {
      *out = &exe->meta.entries[i];
      return nimble_ok();
    }
  return nimble_status_make(NIMBLE_NOT_FOUND, "the executable has no entry '%s'", name);
}

char *nimble_format_declared_shape(const nimble_tensor_info_t *info, char *buf, size_t buf_size) {
  size_t used = 0;
  if (!buf_size) return buf;
  buf[0] = '\0';
  if (info->ndim == NIMBLE_NDIM_ANY) {
    snprintf(buf, buf_size, "[*]");
    return buf;
  }
  used += (size_t)snprintf(buf, buf_size, "[");
  for (int32_t d = 0; d < info->ndim && used < buf_size; d++) {
    const nimble_sig_dim_t *dim = &info->dims[d];
    const char *sep = d ? "," : "";
    if (dim->symbol)
      used += (size_t)snprintf(buf + used, buf_size - used, "%s?%s", sep, dim->symbol);
    else
      used += (size_t)snprintf(buf + used, buf_size - used, "%s%lld", sep, (long long)dim->value);
  }
  if (used < buf_size) snprintf(buf + used, buf_size - used, "]");
  return buf;
}

const char *nimble_runtime_version(void) { return NIMBLE_VERSION_STRING; }
