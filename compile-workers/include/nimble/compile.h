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
#include "nimble/tune_record.h"
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
  const char *dump_ir_passes; /* with dump_ir_dir: the names to write, comma-separated
                                 ("import", "fuse_ops", ...; NN as in a full dump); a
                                 name no pass has is an error; NULL or "": every one */
  const char *lld;         /* the linker; NULL: codegen's default (ld.lld-16) */
  const char *compiler_version; /* for config.json; NULL: this build's version */
  nimble_compile_progress_fn progress; /* may be NULL */
  void *progress_user;
  nimble_compile_codegen_progress_fn codegen_progress; /* may be NULL; gets progress_user */
  int jobs; /* threads compiling CPU kernels; 0 (default): the CPUs available */
  nimble_kernel_cache_t *kernel_cache; /* borrowed; NULL (default): no kernel cache */
  /* Tuning (docs/tuning.md). A CPU kernel whose workload signature has a
   * record here for this compile's target kind and this machine's CPU key
   * takes the record's schedule; the others take *schedule_override when
   * set (the tuner's trial points), else the default. Both borrowed. */
  const nimble_tune_record_t *tune_records;
  size_t num_tune_records;
  const nimble_tune_schedule_t *schedule_override;
  bool workloads; /* list the CPU kernels' workloads in the result (implied by the two above) */
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

/* The CPU kernels' workloads, in the bytecode's kernel order: the
 * exported symbol, the workload signature (what tuning records are keyed
 * by) and the schedule the kernel was built with (with size buckets, the
 * one for outputs past them). Borrowed from the
 * result. Shape functions are not listed (they are not tuned). */
typedef struct nimble_compile_workload {
  const char *symbol;
  char signature[NIMBLE_TUNE_SIGNATURE_LEN + 1];
  nimble_tune_schedule_t schedule;
  char variant[NIMBLE_TUNE_SIGNATURE_LEN + 1]; /* digest of the loop nest as built: two
                                                 compiles' kernels with equal variants are the same code */
  bool from_record; /* the schedule came from options->tune_records */
  bool clone;       /* it has an AVX-512 clone */
} nimble_compile_workload_t;
size_t nimble_compile_result_num_workloads(const nimble_compile_result *r);
const nimble_compile_workload_t *nimble_compile_result_workload_at(const nimble_compile_result *r, size_t i);
/* This machine's CPU key for tuning records ("llvm-cpu-name/8 hex digits
 * of its features"), into buf (at least NIMBLE_TUNE_CPU_MAX + 1 bytes). */
void nimble_compile_host_cpu_key(char *buf, size_t size);

/* ---- Tuning (docs/tuning.md) ---------------------------------------------
 * nimble_compile_tune compiles the model as nimble_compile_file does, and
 * for each CPU kernel without a record in options->tune_records measures
 * the points of the schedule space on this machine (every point compiled
 * once, the kernels whose code a point changes timed in interleaved runs
 * of all points on random inputs), keeps each signature's fastest point
 * (its kernels' times summed) as a new record, and compiles the model once more with all records. The
 * target must run on this machine (x86 here on x86_64; aarch64 on
 * aarch64); otherwise, or for an entry taking ADT values, nothing is
 * measured and the report says why. */
typedef struct nimble_tune_options {
  double budget_s;  /* wall-clock seconds the search may take (compiles and runs); 0: 60 */
  uint32_t threads; /* VM threads the kernels run on; 0: the CPUs this process may use */
  /* Input shapes, "x=1x3x224x224;mask=1x128": every symbolic dim of an
   * input not listed is measured at 1. NULL: none listed. Up to 4 sizes
   * separated by '|' ("x=1x16x128|x=1x128x128"): every point runs at each,
   * and a kernel's schedule is the one whose speed-ups over the default,
   * geometric mean over the sizes, is best; where another beats it at
   * some output size, the record holds one per range of output sizes
   * (size buckets, docs/tuning.md). */
  const char *inputs;
  /* Progress 0..100 of the search; may be NULL. Gets options->progress_user. */
  void (*progress)(void *user, int percent);
} nimble_tune_options_t;

typedef struct nimble_tune_report {
  /* New records, one per workload signature of the CPU kernels without a
   * record given (caller frees with free()): its fastest point for all of
   * its kernels together, or the default schedule where no point changes
   * its code or they did not run (then timed 0). */
  nimble_tune_record_t *records;
  size_t num_records;
  size_t kernels;          /* CPU kernels listed */
  size_t kernels_recorded; /* of them, with a record given */
  size_t points;           /* schedule points compiled (the default included) */
  size_t measured;         /* (kernel, point) pairs timed against the default */
  size_t rounds;           /* interleaved measurement rounds run (each runs every input size) */
  size_t sizes;            /* input sizes measured at (tune_inputs' '|'-separated sets) */
  size_t bucketed;         /* new records with a schedule per size bucket */
  double seconds;          /* the whole search */
  char skipped[256];       /* why nothing, or not every kernel, was measured, or "" */
} nimble_tune_report_t;

nimble_status_t nimble_compile_tune(const char *path, const nimble_compile_options_t *options,
                                    const nimble_tune_options_t *tune, nimble_tune_report_t *report,
                                    nimble_compile_result **out);

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
