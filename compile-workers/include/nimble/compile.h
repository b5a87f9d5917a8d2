/* The compiler driver: one model file to one executable, end to end.
 *
 *   nimble_compile_options_t o;
 *   nimble_compile_options_init(&o);
 *   o.target = "x86";
 *   nimble_compile_result *r;
 *   NIMBLE_RETURN_IF_ERROR(nimble_compile_file("mlp.onnx", &o, &r));
 *   NIMBLE_RETURN_IF_ERROR(nimble_compile_result_write_file(r, "mlp.nimble"));
 *   nimble_compile_result_destroy(r);
 *
 * The pipeline: import (.onnx through the ONNX importer, .nir through the
 * text frontend) -> type inference -> the default pass pipeline at
 * options->opt_level -> lowering to bytecode in an executable builder ->
 * one loop-nest kernel per primitive the lowering lists (compute kernels
 * and data-independent shape functions, nimble/compute.h) -> code
 * generation and linking into one shared object for the target -> the
 * builder's kernel library. The result serialises to one `.nimble` image or
 * to the artifact's parts plus `config.json` and `parts.json`, the files
 * the compile worker expects (docs/farm.md §4). docs/compile.md has the
 * details and the status per reference model.
 *
 * Targets are protocol's specs (nimble/target.h): x86 (default cpu
 * x86-64-v3) and aarch64 compile; cuda is UNIMPLEMENTED for now. Every
 * error names the phase and the model file.
 */
#ifndef NIMBLE_COMPILE_H
#define NIMBLE_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/kernel_cache.h"
#include "nimble/status.h"
#include "nimble/target.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called at the start of every phase (percent 0) and at its end (100);
 * code generation also reports its progress over the kernels. `phase` is
 * one of "import", "typing", "passes", "lower", "compute", "codegen",
 * "package" (a static string). */
typedef void (*nimble_compile_progress_fn)(void *user, const char *phase, int percent);

/* Called during "codegen" as each kernel is done (compiled, or found in the
 * kernel cache): `done` of `total` kernels (CPU and GPU), `cached` of them
 * cache hits. Called from code generation's threads, one call at a time;
 * the "codegen" percent reported through the progress function follows
 * done / total (99 at most before the phase ends). */
typedef void (*nimble_compile_codegen_progress_fn)(void *user, size_t done, size_t total, size_t cached);

typedef struct nimble_compile_options {
  const char *target;      /* a target spec; NULL: "x86" */
  const char *format;      /* "onnx" or "nir"; NULL: from the file's extension */
  int opt_level;           /* 0..3 (default 2): passes and LLVM */
  const char *dump_ir_dir; /* when set, the IR after import and after every pass
                              is written there as NN-NAME.nir (the folder must exist) */
  const char *lld;         /* the linker; NULL: codegen's default (ld.lld-16) */
  const char *compiler_version; /* for config.json; NULL: this build's version */
  nimble_compile_progress_fn progress; /* may be NULL */
  void *progress_user;
  nimble_compile_codegen_progress_fn codegen_progress; /* may be NULL; gets progress_user */
  int jobs; /* threads compiling CPU kernels; 0 (default): the CPUs available */
  nimble_kernel_cache_t *kernel_cache; /* borrowed; NULL (default): no kernel cache */
} nimble_compile_options_t;

/* Fills the defaults above. */
void nimble_compile_options_init(nimble_compile_options_t *options);

/* Time spent per phase, for `nimble compile -v`. */
#define NIMBLE_COMPILE_MAX_PHASES 8
typedef struct nimble_compile_phase_time {
  const char *phase; /* static */
  double seconds;
} nimble_compile_phase_time_t;

typedef struct nimble_compile_result nimble_compile_result;

/* Compiles the model at `path` (options may be NULL for the defaults).
 * On success the caller destroys *out. Errors: INVALID_ARGUMENT for a bad
 * option, target spec or input; IO_ERROR / NOT_FOUND for an unreadable
 * file; UNIMPLEMENTED for an operator, shape mode or target the compiler
 * does not cover yet (named); each error is annotated with the phase. */
nimble_status_t nimble_compile_file(const char *path, const nimble_compile_options_t *options,
                                    nimble_compile_result **out);
void nimble_compile_result_destroy(nimble_compile_result *r);

/* What was compiled (borrowed from the result). */
const nimble_target_t *nimble_compile_result_target(const nimble_compile_result *r);
const nimble_digest_t *nimble_compile_result_model_digest(const nimble_compile_result *r);
size_t nimble_compile_result_num_kernels(const nimble_compile_result *r);
size_t nimble_compile_result_num_phases(const nimble_compile_result *r);
const nimble_compile_phase_time_t *nimble_compile_result_phase_at(const nimble_compile_result *r,
                                                                  size_t i);

/* Code generation's numbers for the CPU kernels (kernel cache hits and
 * misses, threads, seconds per LLVM phase and per kernel:
 * nimble/codegen.h's nimble_codegen_stats_t), borrowed from the result;
 * NULL when there were no CPU kernels. */
struct nimble_codegen_stats;
const struct nimble_codegen_stats *nimble_compile_result_codegen_stats(const nimble_compile_result *r);

/* The whole `.nimble` image; caller frees *data with free(). */
nimble_status_t nimble_compile_result_serialize(const nimble_compile_result *r, void **data,
                                                size_t *size);

/* Writes the `.nimble` image to `path` (through a temporary file renamed
 * into place, so a failed write leaves no partial file). */
nimble_status_t nimble_compile_result_write_file(const nimble_compile_result *r, const char *path);

/* Writes the artifact into folder `dir` (created if absent): one file per
 * part ("metadata", "bytecode", "constants", "kernels"), `config.json` (the
 * artifact config: target, compiler version, model digest, entry
 * signatures) and `parts.json` ({"layers":[{"file","mediaType"}...]}, the
 * parts in that order with the runtime's media types). */
nimble_status_t nimble_compile_result_emit_parts(const nimble_compile_result *r, const char *dir);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_COMPILE_H */
