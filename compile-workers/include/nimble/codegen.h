/* Kernel code generation: loop-nest kernels -> LLVM 16 -> a shared object
 * (x86_64, aarch64) or PTX text (nvptx64), plus the operator builders that
 * produce loop nests with a default schedule.
 *
 * On nvptx64 each kernel is an entry point
 * `void name(DLTensor *const *args, int32_t num_args)` whose argument array,
 * DLTensors, shape arrays and data are device-visible; the outermost
 * parallel loop becomes a grid-stride loop over all threads of the launch.
 * There is no env there: sgemm is never taken, log/pow are refused, and a
 * failed check makes the kernel return without writing (the host validates
 * before launching).
 *
 *   nimble_codegen_options_t o = nimble_codegen_default_options();
 *   nimble_codegen_output_t out;
 *   NIMBLE_RETURN_IF_ERROR(nimble_codegen_build(kernels, n, &o, &out));
 *   ... out.shared_object / out.shared_object_size ...
 *   nimble_codegen_output_deinit(&out);
 *
 * Every kernel follows the executable format's kernel ABI
 * (nimble/kernel_abi.h): int32_t name(DLTensor *const *args, int32_t
 * num_args, const nimble_kernel_env_t *env). The generated code checks the argument count,
 * each tensor's rank and dtype, that strides are NULL or compact, and the
 * kernel's own run-time checks, and reports failures through
 * env->set_error with a nonzero return. It calls nothing but env's members
 * (and, for log and pow, libm's logf/powf). The math functions exp, tanh,
 * sigmoid and erf are inline polynomial approximations (see
 * docs/codegen.md for their accuracy), so they vectorize.
 *
 * CPU kernels are compiled one LLVM module each, on `jobs` threads (each
 * with its own LLVM context and target machine), each into an object file,
 * and the objects are linked in the kernels' order: the shared object is
 * the same bytes whatever the number of threads. With a kernel cache
 * (nimble/kernel_cache.h) an object is looked up by the kernel's key
 * first and LLVM skipped on a hit. PTX (nvptx64) stays one module, built
 * on the calling thread, uncached.
 *
 * Safe to call from several threads at once (each call uses its own LLVM
 * contexts).
 */
#ifndef NIMBLE_CODEGEN_H
#define NIMBLE_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/kernel_cache.h"
#include "nimble/loopnest.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_codegen_options {
  const char *triple;   /* "x86_64-linux-gnu" (default), "aarch64-linux-gnu", "nvptx64-nvidia-cuda" */
  const char *cpu;      /* NULL: x86-64-v3, generic (aarch64), sm_80 (nvptx64) */
  const char *features; /* NULL: "" (aarch64: "+neon") */
  int opt_level;        /* 0..3 */
  const char *lld;      /* linker program; NULL: nimble_codegen_default_linker's */
  int keep_ir;          /* also return the optimised modules as text (no cache lookups then) */
  int jobs;             /* CPU kernels: threads; 0: the CPUs this process may run on */
  nimble_kernel_cache_t *cache; /* CPU kernels: borrowed; NULL: none */
  /* When set, called as each kernel is done (built or found in the cache),
   * from the thread that did it, one call at a time (under a lock):
   * `done` of `total` kernels so far, `cached` of them cache hits. */
  void (*on_kernel_done)(void *user, size_t done, size_t total, size_t cached);
  void *on_kernel_done_user;
} nimble_codegen_options_t;

/* Where one kernel's code generation went (CPU seconds of the thread
 * that built it, CLOCK_THREAD_CPUTIME_ID). */
typedef struct nimble_codegen_kernel_time {
  char name[96];  /* the kernel's name, truncated */
  double emit_s;  /* IR build and verification */
  double opt_s;   /* the optimisation pipeline */
  double obj_s;   /* instruction selection and object emission */
  double cache_s; /* key, lookup and store */
  int cached;     /* 1: the object came from the cache */
  int light;      /* 1: a light kernel (a short pipeline, fast instruction selection) */
  int stored;     /* 1: built and put into the cache (a new entry) */
  int shared;     /* 0: its own code; 1: code that kernels of the same body share; 2: calls another's (a forwarder) */
  char key[NIMBLE_KERNEL_KEY_LEN + 1]; /* its cache key; "" without a cache */
} nimble_codegen_kernel_time_t;

typedef struct nimble_codegen_stats {
  size_t n_kernels;
  size_t n_light;      /* light kernels among them (docs/compile.md) */
  size_t n_shared;     /* kernels calling another kernel's code (same body, docs/compile.md) */
  size_t hits, misses; /* kernel cache lookups (misses: compiled) */
  size_t corrupt;      /* entries that failed their integrity check (ignored, rebuilt) */
  size_t put_errors;   /* objects the cache could not store (the compile goes on) */
  int jobs;            /* threads used */
  double emit_s, opt_s, obj_s, cache_s; /* sums of the kernels' times */
  double compile_s;    /* elapsed: keys, lookups and compiling, all threads */
  double link_s;       /* elapsed: ld.lld, or the cache lookup */
  int link_cached;     /* 1: the linked shared object came from the kernel cache */
  nimble_codegen_kernel_time_t *kernels; /* n_kernels, in order; owned by the output */
} nimble_codegen_stats_t;

typedef struct nimble_codegen_output {
  uint8_t *shared_object; /* CPU targets: the linked .so; caller frees with _deinit */
  size_t shared_object_size;
  char *ptx;     /* nvptx64: PTX text */
  char *llvm_ir; /* keep_ir: the optimised modules, one after the other */
  nimble_codegen_stats_t stats;
} nimble_codegen_output_t;

nimble_codegen_options_t nimble_codegen_default_options(void);

/* Generates, optimises and links every kernel (one module each for CPU
 * targets, one module for all on nvptx64). Kernels are borrowed; on success
 * *out holds caller-owned buffers (free with nimble_codegen_output_deinit),
 * on failure it is zeroed. A failure names the first failing kernel in
 * the kernels' order, whatever the number of threads. */
nimble_status_t nimble_codegen_build(const nimble_ln_kernel *const *kernels, size_t n_kernels,
                                     const nimble_codegen_options_t *options,
                                     nimble_codegen_output_t *out);
void nimble_codegen_output_deinit(nimble_codegen_output_t *out);

/* This machine's CPU as LLVM names it, '/', and 8 hex digits of the
 * sha256 of its feature string: the CPU key of tuning records (two
 * machines with the same key run the same code alike). Into buf (size
 * bytes, NUL-terminated, truncated to fit). */
void nimble_codegen_host_cpu_key(char *buf, size_t size);

/* The linker for an ELF relocatable object's machine: the target's GNU ld
 * (x86_64-linux-gnu-ld.bfd, aarch64-linux-gnu-ld.bfd) when it is on $PATH,
 * else "ld.lld-16" (which links both). */
const char *nimble_codegen_default_linker(const uint8_t *object, size_t size);

/* Links an ELF relocatable object into a shared object by running the
 * linker `lld` (NULL: nimble_codegen_default_linker) with -shared in a
 * private temporary directory, removed on every path. The bytes are
 * borrowed; *so_out is caller-owned (free()). */
nimble_status_t nimble_codegen_link_shared(const uint8_t *object, size_t object_size,
                                           const char *lld, uint8_t **so_out, size_t *so_size);
/* The same for n objects, linked in that order (all of one machine). */
nimble_status_t nimble_codegen_link_objects(const uint8_t *const *objects, const size_t *sizes, size_t n,
                                            const char *lld, uint8_t **so_out, size_t *so_size);

/* The kernel cache key of k for the given options (triple, cpu and
 * features as codegen resolves them, opt level): SHA-256, as 64 hex digits
 * and a NUL, of the code generator's fingerprint (its sources and LLVM's
 * version), the target, the opt level and the kernel's canonical text
 * (nimble_ln_kernel_print_canonical). */
nimble_status_t nimble_codegen_kernel_key(const nimble_ln_kernel *k, const nimble_codegen_options_t *options,
                                          char key[NIMBLE_KERNEL_KEY_LEN + 1]);

/* The number of CPUs this process may run on (sched_getaffinity), at least 1. */
int nimble_codegen_default_jobs(void);

/* --- GPU thread mappings (nvptx64; cg_ptx_map.c, docs/targets.md). ---
 * A kernel built without parallel chunks (compute's parallel = false,
 * vector width 1) has one top-level loop nest over its output. The mapping
 * rewrites that nest into one PARALLEL loop, which the nvptx64 emitter
 * turns into a grid-stride loop over all threads of the launch. */
typedef enum nimble_codegen_thread_mapping {
  /* The perfect nest of output loops flattened: one thread per output
   * element; what is inside the nest (a reduction's accumulator loop, a
   * conv window, a softmax row) runs in that thread. */
  NIMBLE_CODEGEN_MAP_PER_OUTPUT = 0,
  /* Matrix products: the last two output axes in 16x16 tiles, one tile
   * per 256 consecutive threads (a block of 256 threads computes one tile,
   * so neighbouring threads share rows of A and columns of B); leading
   * axes (batch) outermost. Falls back to PER_OUTPUT below two axes. */
  NIMBLE_CODEGEN_MAP_TILED_2D,
} nimble_codegen_thread_mapping_t;

/* Applies `mapping` to k in place (new nodes in `arena`). A kernel whose
 * body has no single top-level loop, or whose top loop is already
 * parallel, is left as it is (every thread then runs it and thread 0
 * stores, which is correct but serial). */
nimble_status_t nimble_codegen_map_threads(nimble_ln_arena *arena, nimble_ln_kernel *k,
                                           nimble_codegen_thread_mapping_t mapping);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_CODEGEN_H */
