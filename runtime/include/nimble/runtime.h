/* The Nimble runtime: load a compiled executable and run it on a register VM.
 *
 * An executable (docs/executable.md) holds bytecode, a constant pool, kernel
 * libraries per device and a metadata block describing its entry functions.
 * It comes as one `.nimble` file or as separate parts (the artifact store's
 * layout). A loaded executable is immutable and reference counted: any number
 * of VMs, on any number of threads, may share it. A VM is single-threaded:
 * one thread at a time calls into a given VM.
 *
 *   nimble_executable *exe;
 *   nimble_vm *vm;
 *   NIMBLE_RETURN_IF_ERROR(nimble_executable_load_file("m.nimble", &exe));
 *   NIMBLE_RETURN_IF_ERROR(nimble_vm_create(exe, NULL, &vm));
 *   nimble_executable_release(exe);            // the VM holds its own reference
 *   NIMBLE_RETURN_IF_ERROR(nimble_vm_set_input(vm, "main", 0, &x));
 *   NIMBLE_RETURN_IF_ERROR(nimble_vm_invoke(vm, "main"));
 *   DLManagedTensor *y;
 *   NIMBLE_RETURN_IF_ERROR(nimble_vm_take_output(vm, 0, &y));
 *   ...; y->deleter(y); nimble_vm_destroy(vm);
 *
 * Every function that can fail returns a nimble_status_t (nimble/status.h):
 * NULL on success, else a code and a message naming what is at fault. The
 * caller owns a returned status. Pointers are borrowed unless a comment says
 * otherwise.
 *
 * Dependencies: libc, libm, libdl, pthreads, nimble_base and nimble_format
 * (the executable format: nimble/executable_format.h, nimble/bytecode.h).
 */
#ifndef NIMBLE_RUNTIME_H
#define NIMBLE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/executable_format.h"
#include "nimble/export.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_executable nimble_executable;
typedef struct nimble_vm nimble_vm;

/* ---- Executable parts ----------------------------------------------------
 * The part kinds and their media types are the format's
 * (nimble/executable_format.h, included above). */

/* One part: `data` is borrowed for the duration of the load call unless
 * NIMBLE_LOAD_BORROW is given (see below). */
typedef struct nimble_executable_part_t {
  nimble_part_kind_t kind;
  const void *data;
  size_t size;
} nimble_executable_part_t;

/* ---- Loading ------------------------------------------------------------- */

/* Load flags. */
enum {
  /* The caller keeps the bytes alive and unchanged until the executable is
   * released; constants that are suitably aligned are then used in place
   * instead of copied. Without it the loader copies what it keeps. */
  NIMBLE_LOAD_BORROW = 1u << 0,
  /* Validate everything but load no kernel library: the executable can be
   * inspected (signature, metadata) but not run; nimble_vm_create refuses
   * it. For tools that only read, and for fuzzing the loader. */
  NIMBLE_LOAD_NO_KERNELS = 1u << 1,
  /* Verify every byte and map the kernels at load. Without it, an
   * executable whose bytes stay in place (a mapped file, or BORROW) has
   * its weights, when they come with their chunk digests (the compiler
   * writes them for constants of 1 MiB and more), verified on first use,
   * 1 MiB chunk by chunk: a corrupted weight then fails the invoke that
   * first loads it with NIMBLE_DATA_LOSS instead of the load; and its CPU
   * kernel library verified and mapped by the first nimble_vm_create, which
   * then fails with NIMBLE_DATA_LOSS for a corrupted one. Everything else
   * (headers, metadata, bytecode, the constants' table, the signature) is
   * verified at load either way (docs/executable.md, "Chunk digests" and
   * "Kernels on first VM"). */
  NIMBLE_LOAD_VERIFY_ALL = 1u << 2,
};

/* Loads a `.nimble` file. The file is mapped read-only; constants are used
 * in place in the mapping. Caller releases *out. Everything is validated
 * before use: first every byte against the executable's digests (a
 * corrupted or modified file is NIMBLE_DATA_LOSS naming the section, its
 * offset and size: docs/executable.md "Integrity"), then field by field; a
 * bad file gives an error naming the problem and its offset. The loads
 * below check the same, parts included. The exceptions, unless
 * NIMBLE_LOAD_VERIFY_ALL is given (above): the weights of a file with
 * chunk digests, verified on their first use (a corrupted weight loads,
 * and the first invoke that uses it fails with NIMBLE_DATA_LOSS), and the
 * CPU kernels, verified and mapped by the first nimble_vm_create (which
 * fails for a corrupted library). Nothing runs on an unverified byte. */
NIMBLE_API nimble_status_t nimble_executable_load_file(const char *path, nimble_executable **out);

/* The same with load flags (NIMBLE_LOAD_NO_KERNELS, NIMBLE_LOAD_VERIFY_ALL;
 * BORROW is implied). */
NIMBLE_API nimble_status_t nimble_executable_load_file_flags(const char *path, uint32_t flags,
                                                             nimble_executable **out);

/* Loads a `.nimble` image held in memory (see NIMBLE_LOAD_BORROW). Caller
 * releases *out. */
NIMBLE_API nimble_status_t nimble_executable_load_memory(const void *data, size_t size, uint32_t flags,
                                                         nimble_executable **out);

/* Loads an executable from its parts, in any order. METADATA, BYTECODE and
 * CONSTANTS are required; kernel parts for the devices the bytecode uses.
 * Caller releases *out. */
NIMBLE_API nimble_status_t nimble_executable_load_parts(const nimble_executable_part_t *parts, size_t num_parts,
                                                        uint32_t flags, nimble_executable **out);

/* A caller's check of an executable (a signature policy: nimble_fetch's
 * nimble_executable_signature_check, docs/executable.md "Signatures"). The
 * loader calls it once every part's digest has checked out and before any
 * part is parsed or a kernel mapped, with the executable digest and the
 * signature part's body (algorithm, key, signature: NULL and 0 when the
 * executable is unsigned). A non-OK status refuses the load with it. */
typedef nimble_status_t (*nimble_executable_check_fn)(void *user, const uint8_t digest[32],
                                                      const void *signature, size_t signature_size);

/* The loads above with a check (NULL: none, as above). */
NIMBLE_API nimble_status_t nimble_executable_load_file_checked(const char *path, uint32_t flags,
                                                               nimble_executable_check_fn check, void *user,
                                                               nimble_executable **out);
NIMBLE_API nimble_status_t nimble_executable_load_memory_checked(const void *data, size_t size, uint32_t flags,
                                                                 nimble_executable_check_fn check, void *user,
                                                                 nimble_executable **out);
NIMBLE_API nimble_status_t nimble_executable_load_parts_checked(const nimble_executable_part_t *parts,
                                                                size_t num_parts, uint32_t flags,
                                                                nimble_executable_check_fn check, void *user,
                                                                nimble_executable **out);

/* Lays parts (as the store keeps them, each with its part header) out as
 * one `.nimble` file image, sections in the order given: what
 * nimble_executable_load_memory and _load_file read. Checks each part's
 * header (magic, kind matching parts[i].kind, one format version for all)
 * and refuses two parts of one kind; the parts' contents are validated
 * when the image is loaded. *data is malloc'ed (caller frees). */
NIMBLE_API nimble_status_t nimble_executable_join_parts(const nimble_executable_part_t *parts, size_t num_parts,
                                                        void **data, size_t *size);

/* Reads the part files of directory `dir`, as `nimble fetch -o DIR` writes
 * them: every regular file that starts with a part header; other files
 * (manifest.json, config.json) are skipped. The parts come sorted by kind,
 * the order the compiler writes sections in. Fails when the directory or
 * a part file cannot be read, when it holds more parts than a file has
 * sections, or none. *parts and each parts[i].data are malloc'ed: free
 * them with nimble_executable_parts_free. */
NIMBLE_API nimble_status_t nimble_executable_read_part_dir(const char *dir, nimble_executable_part_t **parts,
                                                           size_t *num_parts);
NIMBLE_API void nimble_executable_parts_free(nimble_executable_part_t *parts, size_t num_parts);

/* Reference counting; thread-safe. Release frees at zero. NULL is fine. */
NIMBLE_API void nimble_executable_retain(nimble_executable *exe);
NIMBLE_API void nimble_executable_release(nimble_executable *exe);

/* ---- Signature ----------------------------------------------------------- */

/* The signature types (nimble_sig_dim_t, nimble_tensor_info_t,
 * nimble_entry_info_t) are the format's: nimble/executable_format.h. */

/* All strings and arrays below are borrowed from the executable and live as
 * long as it does. */
NIMBLE_API const char *nimble_executable_target(const nimble_executable *exe);          /* "x86_64-linux-gnu" */
NIMBLE_API const char *nimble_executable_producer(const nimble_executable *exe);        /* "nimble 0.1.0" */
NIMBLE_API const char *nimble_executable_source_digest(const nimble_executable *exe);   /* "sha256:..." or "" */
NIMBLE_API uint32_t nimble_executable_format_version(const nimble_executable *exe);
/* The executable digest, "sha256:<64 hex>" (docs/executable.md,
 * "Integrity"): over the digests of its parts, the same for a file and its
 * parts; what `nimble compile --sign` signs. Writes 72 bytes with the NUL. */
NIMBLE_API void nimble_executable_digest(const nimble_executable *exe, char out[72]);
NIMBLE_API uint32_t nimble_executable_num_entries(const nimble_executable *exe);
/* The i-th entry; NULL when i is out of range. */
NIMBLE_API const nimble_entry_info_t *nimble_executable_entry_at(const nimble_executable *exe, uint32_t i);
/* The entry named `name`; NIMBLE_NOT_FOUND names it when absent. */
NIMBLE_API nimble_status_t nimble_executable_find_entry(const nimble_executable *exe, const char *name,
                                                        const nimble_entry_info_t **out);

/* The executable as text: target, entries, kernels, then every function's
 * bytecode, one instruction a line with its operands named and formatted
 * by the instruction table (nimble/bytecode.h): registers r3, functions
 * @name, kernels #2 symbol, jumps +3 (pc 9), dtypes float32, devices
 * cpu:0. *out is NUL-terminated; the caller frees it with free(). */
NIMBLE_API nimble_status_t nimble_executable_disassemble(const nimble_executable *exe, char **out);

/* Formats a declared shape as "[2,?seq,4]" ("?" alone for Any) into buf
 * (always NUL-terminated, truncated to buf_size). Returns buf. */
NIMBLE_API char *nimble_format_declared_shape(const nimble_tensor_info_t *info, char *buf, size_t buf_size);

/* ---- VM ------------------------------------------------------------------ */

typedef struct nimble_vm_options_t {
  size_t struct_size;          /* sizeof(nimble_vm_options_t); set by _init */
  uint64_t memory_cap_bytes;   /* per device pool; 0 = no cap */
  uint32_t num_threads;        /* kernel parallel_for threads; 0 or 1 = caller only */
  uint32_t max_call_depth;     /* frames; 0 = default (100000) */
  /* Nonzero: every kernel on all num_threads, never measured. 0 (the
   * default): with num_threads > 1 the VM's first invokes measure whether
   * its kernels gain from the threads (docs/vm.md, "Threads by
   * measurement"). */
  uint32_t fixed_threads;
} nimble_vm_options_t;

/* Fills the defaults. */
NIMBLE_API void nimble_vm_options_init(nimble_vm_options_t *options);

/* Creates a VM over `exe` (retained by the VM). `options` may be NULL for
 * defaults. Caller destroys *out. The first VM of an executable loaded in
 * place without NIMBLE_LOAD_VERIFY_ALL verifies and maps its CPU kernels
 * (once; concurrent creations wait for it): a corrupted kernel library
 * fails every creation with NIMBLE_DATA_LOSS naming the section. */
NIMBLE_API nimble_status_t nimble_vm_create(nimble_executable *exe, const nimble_vm_options_t *options,
                                            nimble_vm **out);

/* Destroys the VM. Outputs already taken stay valid. NULL is fine. */
NIMBLE_API void nimble_vm_destroy(nimble_vm *vm);

/* The executable this VM runs (borrowed). */
NIMBLE_API nimble_executable *nimble_vm_executable(const nimble_vm *vm);

/* Sets input `index` of `entry` to a view of `tensor`, without copying. The
 * DLTensor is read now (shape and strides are copied); its data must stay
 * alive and unchanged until the next nimble_vm_invoke returns and, because
 * an entry may return an input as an output, as long as such an output is
 * used. Only compact row-major tensors are accepted. Dtype, rank and
 * constant dimensions are checked now; symbolic dimensions at invoke. */
NIMBLE_API nimble_status_t nimble_vm_set_input(nimble_vm *vm, const char *entry, uint32_t index,
                                               const DLTensor *tensor);

/* The same, naming the input. */
NIMBLE_API nimble_status_t nimble_vm_set_input_by_name(nimble_vm *vm, const char *entry, const char *input,
                                                       const DLTensor *tensor);

/* Runs `entry` on the inputs set since the last invoke (all are required).
 * On success the outputs are ready for nimble_vm_take_output; inputs are
 * cleared. */
NIMBLE_API nimble_status_t nimble_vm_invoke(nimble_vm *vm, const char *entry);

/* The number of outputs the last successful invoke produced. */
NIMBLE_API uint32_t nimble_vm_num_outputs(const nimble_vm *vm);
/* 1 when the VM runs its kernels the way it keeps (one thread,
 * fixed_threads, or its probe of the threads over at the last invoke's
 * shapes: docs/vm.md, "Threads by measurement"); 0 while it still
 * measures. A benchmark warms up until it is 1. */
NIMBLE_API int nimble_vm_threads_settled(const nimble_vm *vm);

/* Hands output `index` of the last invoke to the caller as a DLPack managed
 * tensor, without copying: the caller calls (*out)->deleter(*out) when done,
 * from any thread, before or after nimble_vm_destroy. Each output can be
 * taken once. */
NIMBLE_API nimble_status_t nimble_vm_take_output(nimble_vm *vm, uint32_t index, DLManagedTensor **out);

/* ---- ADT inputs ---------------------------------------------------------- */

/* An entry input may be a value of an algebraic data type, e.g. the parse
 * tree of a Tree-LSTM (`type Tree[T] { Leaf(T), Node(Tree[T], Tree[T]) }`).
 * Its nimble_tensor_info_t has dtype kDLOpaqueHandle (64 bits, 1 lane), and
 * its `dims` are not dims: each describes one constructor (docs/vm.md,
 * "ADT inputs"). The input is set with nimble_vm_set_input_value from a
 * value built here: constructor tags and field counts come from the entry's
 * description (nimble_entry_find_constructor), and the whole value is checked
 * against it when set (constructors, field counts, field dtypes and dims).
 *
 *   int32_t leaf, node; uint32_t nf;
 *   nimble_entry_find_constructor(info, 0, "Leaf", &leaf, &nf);
 *   nimble_entry_find_constructor(info, 0, "Node", &node, &nf);
 *   nimble_value *w, *l, *r, *t;
 *   nimble_value_from_tensor(&word3, &w);            // copies the tensor
 *   nimble_value_adt(leaf, &w, 1, &l);               // Leaf(3)
 *   ...
 *   nimble_value *kids[2] = {l, r};
 *   nimble_value_adt(node, kids, 2, &t);             // Node(l, r)
 *   nimble_value_release(w); ...                     // t keeps what it needs
 *   nimble_vm_set_input_value(vm, "main", 0, t);
 *   nimble_value_release(t);
 *
 * Values are immutable and reference counted with atomic counts: any number
 * of VMs on any threads may use one value at the same time. */
typedef struct nimble_value nimble_value;

/* Whether `info` describes an ADT input (dtype kDLOpaqueHandle). */
NIMBLE_API int nimble_tensor_info_is_adt(const nimble_tensor_info_t *info);

/* A field of a constructor. */
typedef struct nimble_adt_field_t {
  int32_t is_adt;         /* 1: a value of ADT type `adt_type`; 0: a tensor */
  const char *adt_type;   /* is_adt: the type's name, adt_type_len bytes, not
                           * NUL-terminated (borrowed from the executable) */
  size_t adt_type_len;
  DLDataType dtype;       /* a tensor: its dtype, rank and dims (-1: Any) */
  int32_t ndim;
  int64_t dims[32];
} nimble_adt_field_t;

/* Finds constructor `name` of ADT input `input` of `entry`: "Leaf", or
 * qualified by its type, "Tree.Leaf" (a bare name matches the first type
 * that has it, the input's own type first). Gives its tag and its field
 * count (either pointer may be NULL). NIMBLE_NOT_FOUND names it when absent;
 * NIMBLE_INVALID_ARGUMENT when the input is not an ADT. */
NIMBLE_API nimble_status_t nimble_entry_find_constructor(const nimble_entry_info_t *entry, uint32_t input,
                                                         const char *name, int32_t *tag, uint32_t *num_fields);

/* Describes field `field` of constructor `name` (as above) into *out. */
NIMBLE_API nimble_status_t nimble_entry_constructor_field(const nimble_entry_info_t *entry, uint32_t input,
                                                          const char *name, uint32_t field, nimble_adt_field_t *out);

/* A value holding a copy of a compact row-major CPU tensor (shape and data
 * are copied: the caller's buffer may go at once). Caller releases *out. */
NIMBLE_API nimble_status_t nimble_value_from_tensor(const DLTensor *tensor, nimble_value **out);

/* An ADT value: constructor `tag` with `num_fields` fields (each retained;
 * the caller keeps its own references). Caller releases *out. */
NIMBLE_API nimble_status_t nimble_value_adt(int32_t tag, nimble_value *const *fields, uint32_t num_fields,
                                            nimble_value **out);

/* Reference counting; thread-safe. NULL is fine. */
NIMBLE_API void nimble_value_retain(nimble_value *value);
NIMBLE_API void nimble_value_release(nimble_value *value);

/* Sets input `index` of `entry` to `value` (retained until the next invoke
 * returns). For an ADT input the value is checked now against the input's
 * description, whatever its size: an error names the path to the fault,
 * e.g. "entry 'main': input 'tree' at .1.0: constructor Node has 2 fields,
 * the value 1". A tensor input takes a tensor value, checked as by
 * nimble_vm_set_input. */
NIMBLE_API nimble_status_t nimble_vm_set_input_value(nimble_vm *vm, const char *entry, uint32_t index,
                                                     nimble_value *value);

/* ---- Memory statistics --------------------------------------------------- */

typedef struct nimble_memory_stats_t {
  uint64_t bytes_in_use;      /* held by live storage */
  uint64_t bytes_reserved;    /* in use plus cached in the pool */
  uint64_t peak_bytes_reserved;
  uint64_t system_allocations;/* times the pool asked the system for memory */
  uint64_t pool_hits;         /* allocations served from the pool */
} nimble_memory_stats_t;

/* Statistics of the VM's CPU pool (device_type kDLCPU). */
NIMBLE_API nimble_status_t nimble_vm_memory_stats(const nimble_vm *vm, DLDeviceType device_type,
                                                  nimble_memory_stats_t *out);

/* ---- Kernel timing (profiling) -------------------------------------------- */

typedef struct nimble_kernel_time_t {
  const char *symbol; /* the kernel's symbol, borrowed from the executable */
  uint64_t calls;     /* InvokePacked instructions that ran it */
  uint64_t total_ns;  /* their wall-clock time, summed (CUDA: waited for) */
  uint64_t out_elements; /* its first output's elements at the last timed call */
} nimble_kernel_time_t;

/* Per-kernel timing of InvokePacked, off by default (and then free: the
 * interpreter tests one pointer). Copies what was timed since timing was
 * last turned on or read into out[0 .. min(capacity, kernels)) (one entry
 * per kernel of the bytecode, in its order; zeros while off), resets the
 * counts, then turns timing on (enable != 0) or off for later invokes.
 * *num_kernels (may be NULL) receives the number of kernels. `out` may be
 * NULL with capacity 0 to only switch. A timed CUDA kernel is waited for,
 * so timing changes how much GPU work overlaps the host. */
NIMBLE_API nimble_status_t nimble_vm_kernel_times(nimble_vm *vm, int enable, nimble_kernel_time_t *out,
                                                  uint32_t capacity, uint32_t *num_kernels);

/* Returns cached, unused memory of every pool to the system. */
NIMBLE_API void nimble_vm_trim_memory(nimble_vm *vm);

/* The runtime library's version ("0.1.0"); static string. */
NIMBLE_API const char *nimble_runtime_version(void);

/* The BLAS that kernels' env->sgemm goes to (docs/vm.md): found at run time,
 * once per process, e.g. "OpenBLAS 0.3.21 ... (libopenblas.so.0, 1 thread)",
 * or "none (why)" when kernels use their own loops. The environment variable
 * NIMBLE_BLAS, read on the first call or VM creation, names a library or
 * "none". Static string; loads the BLAS if no VM has yet. */
NIMBLE_API const char *nimble_runtime_blas_name(void);

/* What kernels' env->sgemm computes with (docs/vm.md, "Own sgemm"): the
 * runtime's own packed, register-blocked kernels (AVX-512, AVX2 or
 * portable, by CPU), the BLAS above, or per call whichever of the two is
 * faster for the product, as the environment variable NIMBLE_SGEMM (auto,
 * own, blas, none) asks; e.g. "own (avx512), wider than the BLAS's kernels;
 * BLAS: OpenBLAS ...". When NIMBLE_SGEMM cannot be honoured it says why,
 * and creating a VM fails with that message. Static string. */
NIMBLE_API const char *nimble_runtime_sgemm_name(void);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_RUNTIME_H */
