/* Tuning records: the schedule measured fastest for one kernel workload on
 * one kind of CPU, shared by the compiler (reads and writes them), the
 * worker (carries them between a job and its compile), the scheduler
 * (keeps them in Redis) and `nimble tune-records` (lists, exports,
 * imports). docs/tuning.md describes the search that makes them.
 *
 * A record is one JSON object:
 *
 *   {"signature": "<64 hex>",        the kernel's workload (sha256 of its
 *                                    canonical loop nest built with the
 *                                    default schedule; symbolic dims stay
 *                                    symbolic, so one record serves all
 *                                    sizes)
 *    "target": "x86",                the target kind it was measured for
 *    "cpu": "skylake-avx512/1a2b3c4d", the measuring CPU: LLVM's name for
 *                                    it and 8 hex digits of its features
 *    "schedule": {"parallel": true, "min_task_work": 16384,
 *                 "conv_block": 65536, "avx512_clone": "yes",
 *                 "vector_width": 16, "interleave": 2},
 *                                    (avx512_clone, vector_width and
 *                                    interleave: optional, the default
 *                                    when absent, written only when not)
 *    "buckets": [{"max_elements": 4096, "schedule": {...}}, ...],
 *                                    optional, at most 3, max_elements
 *                                    rising: a call whose first output
 *                                    has at most max_elements elements
 *                                    runs the first such bucket's
 *                                    schedule, a larger one 'schedule'
 *                                    (per-size variants, one kernel
 *                                    dispatching on its arguments' shapes)
 *    "default_us": 120.5, "tuned_us": 98.2,   medians, microseconds
 *                                    (with several tuning sizes, summed)
 *    "threads": 2,                   the VM threads they were measured at
 *    "kernel": "fused__conv2d_add_clip__3"}   informational
 *
 * A file or message holding records is {"format": "nimble.tune-records.v1",
 * "records": [...]}. Records never change a kernel's results, only its
 * speed: every knob here keeps each output element's arithmetic as it is.
 */
#ifndef NIMBLE_TUNE_RECORD_H
#define NIMBLE_TUNE_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_TUNE_RECORDS_FORMAT "nimble.tune-records.v1"
#define NIMBLE_TUNE_SIGNATURE_LEN 64
#define NIMBLE_TUNE_CPU_MAX 95
#define NIMBLE_TUNE_KERNEL_MAX 127
/* A records file or message holds at most this many records. */
#define NIMBLE_TUNE_MAX_RECORDS 65536

/* The knobs of a kernel's schedule. Each changes how the work is split,
 * never the arithmetic of one output element. */
typedef struct nimble_tune_schedule_t {
  bool parallel;         /* split the outer loops into tasks of the VM's pool */
  int64_t min_task_work; /* loop-body evaluations one task gets at least */
  int64_t conv_block;    /* floats per block of an sgemm-path convolution's im2col/product/epilogue */
  /* An x86 kernel's AVX-512 clone (docs/targets.md "x86"): NIMBLE_TUNE_CLONE_AUTO
   * builds one for kernels whose vector loops evaluate exp, tanh, sigmoid
   * or erf, _YES for any kernel with a vector loop, _NO for none. The
   * clone computes each element as the AVX2 kernel does. */
  int32_t avx512_clone;
  /* f32 lanes of the kernel's vectorized loops: 0 for the target's (8 on
   * x86, 4 on aarch64), else 4, 8 or 16 (16 on AVX2: two registers an
   * operation). Like the clone, only for kernels whose bits do not depend
   * on it (nimble_ln_kernel_lane_exact). */
  int32_t vector_width;
  /* LLVM's interleave count on the kernel's vectorized loops that carry
   * no reduction: 0 for LLVM's choice, else 1, 2 or 4. */
  int32_t interleave;
} nimble_tune_schedule_t;

enum { NIMBLE_TUNE_CLONE_AUTO = 0, NIMBLE_TUNE_CLONE_YES = 1, NIMBLE_TUNE_CLONE_NO = 2 };

/* The ranges a record's knobs must lie in. */
#define NIMBLE_TUNE_MIN_TASK_WORK_MIN 256
#define NIMBLE_TUNE_MIN_TASK_WORK_MAX (1 << 24)
#define NIMBLE_TUNE_CONV_BLOCK_MIN 1024
#define NIMBLE_TUNE_CONV_BLOCK_MAX (1 << 26)

/* The schedule kernels get without a record. */
nimble_tune_schedule_t nimble_tune_schedule_default(void);
bool nimble_tune_schedule_equal(const nimble_tune_schedule_t *a, const nimble_tune_schedule_t *b);
/* The record's name of an avx512_clone choice: "auto", "yes" or "no"
 * ("auto" for a value out of range). */
const char *nimble_tune_clone_name(int32_t clone);

/* A record holds at most this many size buckets (tuning measures at up to
 * four sizes: three boundaries). */
#define NIMBLE_TUNE_MAX_BUCKETS 3

/* The schedule for the calls of a kernel whose first output has at most
 * max_elements elements (and more than the bucket before it). */
typedef struct nimble_tune_bucket_t {
  int64_t max_elements;
  nimble_tune_schedule_t schedule;
} nimble_tune_bucket_t;

typedef struct nimble_tune_record_t {
  char signature[NIMBLE_TUNE_SIGNATURE_LEN + 1];
  char target[16];
  char cpu[NIMBLE_TUNE_CPU_MAX + 1];
  char kernel[NIMBLE_TUNE_KERNEL_MAX + 1]; /* may be empty */
  nimble_tune_schedule_t schedule; /* for calls larger than every bucket's max_elements */
  int32_t num_buckets;
  nimble_tune_bucket_t buckets[NIMBLE_TUNE_MAX_BUCKETS];
  double default_us, tuned_us;
  int32_t threads;
} nimble_tune_record_t;

/* Whether record r builds anything but the default schedule (its own
 * schedule differs, or it has size buckets). */
bool nimble_tune_record_rescheduled(const nimble_tune_record_t *r);

/* The schedule of record r for a call whose first output has `elements`
 * elements (the first bucket holding it, else r->schedule). */
const nimble_tune_schedule_t *nimble_tune_record_schedule_for(const nimble_tune_record_t *r, int64_t elements);

/* Reads one record object, checking every field ('target' must be a
 * target kind: x86, aarch64 or cuda); the error names the field (and
 * `where`, e.g. "record 3", when not NULL). */
nimble_status_t nimble_tune_record_from_json(const json_t *j, const char *where, nimble_tune_record_t *out);
/* The record as a new JSON object (caller decrefs); NULL when out of memory. */
json_t *nimble_tune_record_to_json(const nimble_tune_record_t *r);

/* One record as the farm's messages and Redis carry it: compact JSON with
 * sorted keys, reals to 17 digits, so what is read back is what was
 * written (caller frees; NULL when out of memory). */
char *nimble_tune_record_to_text(const nimble_tune_record_t *r);
/* Reads such a text (NULL or not JSON: an error naming `where`). */
nimble_status_t nimble_tune_record_from_text(const char *text, const char *where, nimble_tune_record_t *out);
/* A JSON array of the texts of r[0 .. n) (caller decrefs); NULL when out of memory. */
json_t *nimble_tune_records_to_texts(const nimble_tune_record_t *r, size_t n);

/* Whether a job's options ask for tuning: "tune" true, or the string
 * "true" (the compile sees `--option tune=true` for either). */
bool nimble_tune_wanted(const json_t *options);

/* Parses a records document (the object above). *out (caller frees with
 * free()) holds *count records. `what` names the source in errors. */
nimble_status_t nimble_tune_records_from_json(const json_t *doc, const char *what, nimble_tune_record_t **out,
                                              size_t *count);
/* The document for n records (caller decrefs); NULL when out of memory. */
json_t *nimble_tune_records_to_json(const nimble_tune_record_t *r, size_t n);

/* Reads / writes a records file (written whole to PATH.tmp, then renamed). */
nimble_status_t nimble_tune_records_read_file(const char *path, nimble_tune_record_t **out, size_t *count);
nimble_status_t nimble_tune_records_write_file(const char *path, const nimble_tune_record_t *r, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TUNE_RECORD_H */
