/* The loaded executable, as the VM sees it. Immutable once loaded, so any
 * number of VMs may read it concurrently. */
#ifndef NIMBLE_RUNTIME_EXECUTABLE_H
#define NIMBLE_RUNTIME_EXECUTABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "format/layout.h"
#include "nimble/kernel_abi.h"
#include "nimble/runtime.h"
#include "vm/object.h"

typedef struct nimble_instr_t {
  uint16_t op;
  uint16_t num_operands;
  uint32_t first; /* index into the function's operands */
} nimble_instr_t;

typedef struct nimble_function_t {
  char *name;
  uint32_t num_params;
  uint32_t num_registers;
  uint32_t num_instructions;
  nimble_instr_t *instructions;
  int64_t *operands;
} nimble_function_t;

typedef struct nimble_kernel_ref_t {
  char *symbol;
  DLDeviceType device;
  nimble_kernel_fn fn; /* resolved at load (cpu kernels) */
  void *device_fn;     /* the device's handle (a CUfunction), resolved at load (other kernels) */
} nimble_kernel_ref_t;

/* Parsed metadata; strings and arrays owned by it. */
typedef struct nimble_metadata_t {
  char *producer;
  char *target;
  char *source_digest;
  uint32_t num_entries;
  nimble_entry_info_t *entries;
  uint32_t *entry_functions; /* bytecode function of each entry */
} nimble_metadata_t;

typedef struct nimble_bytecode_t {
  uint32_t num_kernels;
  nimble_kernel_ref_t *kernels;
  uint32_t num_functions;
  nimble_function_t *functions;
  uint32_t max_kernel_args;
} nimble_bytecode_t;

/* Verification on first use of a constants part whose chunk list
 * (NIMBLE_PART_CHUNK_DIGESTS) was checked against its digest at load: the
 * table was hashed then (alone, against the list's table digest; or, for a
 * list without one, its chunks), the chunks are hashed when a constant in
 * them is first loaded, after the chunks holding the table when those were
 * not (docs/executable.md, "Chunk digests").
 * The flags only ever go from 0 to 1, so VMs on several threads race
 * harmlessly: at worst two hash the same chunk. */
typedef struct nimble_constants_lazy_t {
  const uint8_t *part;     /* the borrowed part (mapping or caller's bytes) */
  size_t size;             /* its bytes before the digest */
  size_t section_size;     /* with the digest, for messages */
  size_t base;             /* offset in its file, for messages */
  int in_file;             /* "section" or "part" in messages */
  const uint8_t *digests;  /* num_chunks x 32, in the borrowed chunk digests part */
  size_t num_chunks;
  size_t table_chunks;     /* chunks [0, table_chunks) hold the table and are
                              verified before any constant is used */
  atomic_uchar *chunk_ok;  /* per chunk: 1 once its bytes matched */
  atomic_uchar *const_ok;  /* per constant: 1 once all its chunks did */
} nimble_constants_lazy_t;

typedef struct nimble_constants_t {
  uint32_t num_constants;
  nimble_tensor_obj **tensors; /* owned references; data in `backing` */
  nimble_storage_obj *backing; /* the pool's memory, not owned by any pool */
  void *owned_copy;            /* aligned copy of the part, freed at the end */
  nimble_constants_lazy_t *lazy; /* NULL: every byte was verified at load */
} nimble_constants_t;

typedef struct nimble_kernel_library_t {
  void *handle; /* dlopen handle; NULL when absent */
} nimble_kernel_library_t;

/* The CPU kernel part of a default load from bytes that stay put (a
 * mapped file, BORROW): its digest is checked and the library mapped when
 * the first VM is created, not at load (docs/executable.md, "Kernels on
 * first VM"). Until `ready` is set, under `mu`, no kernel pointer is
 * resolved; once it is, `part` is no longer read. */
typedef struct nimble_kernels_lazy_t {
  const uint8_t *part; /* the borrowed part, its digest included */
  size_t size;
  size_t base;         /* offset in its file, for messages */
  int in_file;         /* "section" or "part" in messages */
  pthread_mutex_t mu;
  atomic_int ready;    /* 1 once checked, mapped and resolved */
} nimble_kernels_lazy_t;

/* The kernels of a device other than the CPU, loaded by the device. */
typedef struct nimble_device_kernels_t {
  const struct nimble_device_t *dev; /* NULL when absent */
  void *module;                      /* dev->module_load's */
} nimble_device_kernels_t;

struct nimble_executable {
  atomic_uint_fast32_t refs;
  uint32_t format_version;
  uint8_t digest[32]; /* the executable digest (docs/executable.md, "Integrity") */
  nimble_metadata_t meta;
  nimble_bytecode_t code;
  nimble_constants_t consts;
  nimble_kernel_library_t cpu_kernels;
  nimble_kernels_lazy_t *lazy_kernels; /* NULL: mapped at load (or none) */
  nimble_device_kernels_t device_kernels; /* empty without kernels on another device */
  int kernels_loaded; /* 0 under NIMBLE_LOAD_NO_KERNELS */
  void *mapping; /* the mapped file, when loaded from one */
  size_t mapping_size;
};

/* Part parsers: each validates everything in its part and fills `out`
 * (freed with the matching _deinit, also after a failure). `base` is the
 * part's offset in its file, for messages. */
nimble_status_t nimble_metadata_parse(const uint8_t *data, size_t size, size_t base,
                                      nimble_metadata_t *out);
void nimble_metadata_deinit(nimble_metadata_t *m);

nimble_status_t nimble_bytecode_parse(const uint8_t *data, size_t size, size_t base,
                                      nimble_bytecode_t *out);
void nimble_bytecode_deinit(nimble_bytecode_t *c);

/* `borrow`: the bytes outlive the executable, so aligned data is used in
 * place. `lazy` (NULL: the part was verified whole) takes ownership of a
 * verification state whose table chunks are verified: the parse hashes the
 * other chunks only when it copies the data (then all of them, now), and
 * otherwise keeps it for nimble_constants_check. */
nimble_status_t nimble_constants_parse(const uint8_t *data, size_t size, size_t base,
                                       _Bool borrow, nimble_constants_lazy_t *lazy,
                                       nimble_constants_t *out);
void nimble_constants_deinit(nimble_constants_t *c);

/* Hashes the not yet verified chunks [first, end) of a lazily verified
 * part; NIMBLE_DATA_LOSS naming the section, its offset and the chunk's
 * bytes at the first mismatch. `what` says what needed them. */
nimble_status_t nimble_constants_verify_chunks(nimble_constants_lazy_t *l, size_t first, size_t end,
                                               const char *what);

/* nimble_constants_check's first use of constant i: verifies its chunks and
 * marks it. */
nimble_status_t nimble_constants_verify_slow(const nimble_constants_t *c, uint32_t i);
void nimble_constants_lazy_free(nimble_constants_lazy_t *l); /* NULL is fine */

/* Constant i's bytes are the compiler's: checked once per constant (the
 * fast path is one acquire load); every use of a constant's bytes comes
 * through LoadConst, which calls this. */
static inline nimble_status_t nimble_constants_check(const nimble_constants_t *c, uint32_t i) {
  if (!c->lazy || atomic_load_explicit(&c->lazy->const_ok[i], memory_order_acquire)) return nimble_ok();
  return nimble_constants_verify_slow(c, i);
}

/* Checks a kernel part (CPU or CUDA) and finds its blob inside `data`. */
nimble_status_t nimble_kernel_part_parse(const uint8_t *data, size_t size, size_t base,
                                         nimble_part_kind_t kind, const uint8_t **blob,
                                         size_t *blob_size);

/* Loads a CPU kernel part (ELF shared object) from memory and resolves every
 * CPU kernel of `code`. */
nimble_status_t nimble_kernel_library_load_cpu(const uint8_t *data, size_t size, size_t base,
                                               nimble_kernel_library_t *lib,
                                               nimble_bytecode_t *code);
void nimble_kernel_library_unload(nimble_kernel_library_t *lib);

/* The CPU kernels ready to run: for an executable whose kernels wait for
 * their first VM, checks the part's digest, maps the library and resolves
 * every kernel, once (the first caller does it under the lock; a failure
 * is returned to every caller until one succeeds). Otherwise nothing. */
nimble_status_t nimble_executable_kernels_ready(nimble_executable *exe);

/* Loads the kernel part of device `type` (a CUDA part: PTX, or a cubin)
 * through that device's table and resolves every kernel of `code` on it.
 * A device that is not available fails with its error, e.g. without a CUDA
 * driver `cuda: cannot load libcuda.so.1 (...): this executable has cuda
 * kernels`. */
nimble_status_t nimble_kernel_library_load_device(const uint8_t *data, size_t size, size_t base,
                                                  nimble_part_kind_t kind, DLDeviceType type,
                                                  nimble_device_kernels_t *out, nimble_bytecode_t *code);
void nimble_device_kernels_unload(nimble_device_kernels_t *k);

#endif
