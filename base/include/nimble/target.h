/* Target specs: what a model is compiled for, in one canonical spelling.
 *
 * A spec names a target kind and, optionally, options after a colon:
 *
 *   x86                               x86_64-linux-gnu, cpu x86-64-v3
 *   x86:cpu=skylake-avx512,features=-prefer-256-bit
 *   aarch64:cpu=neoverse-n1           aarch64-linux-gnu
 *   cuda:arch=sm_90                   host x86_64-linux-gnu + nvptx64-nvidia-cuda
 *
 * Options are `key=value`, separated by commas. The keys are `cpu` and
 * `features` for every kind, and `arch` for cuda (for cuda, `cpu` and
 * `features` describe the host code: shape functions and control flow).
 * `features` lists LLVM feature names joined by '+', a leading '-' disables
 * one: `features=avx512f+-prefer-256-bit`.
 *
 * The canonical spelling, used in compile keys, store tags and messages,
 * sorts options by key, sorts and de-duplicates feature names, and OMITS
 * every option equal to its default, so `x86:cpu=x86-64-v3` is written `x86`.
 * Defaults give portable artifacts: x86 cpu `x86-64-v3`, aarch64 cpu
 * `generic` (ARMv8-A with NEON), cuda arch `sm_80` (PTX that newer drivers
 * JIT for newer GPUs).
 *
 * A list of targets (`--targets=x86:cpu=znver4,features=-avx512f,aarch64`)
 * is split at commas too: a piece whose first '=' comes before any ':' is an
 * option of the target before it; any other piece starts a new target.
 * See docs/protocol.md.
 *
 * nimble_target_t is a plain value: copy it freely, nothing to free. This
 * module is part of nimble_base (libc only), so the runtime can use it.
 */
#ifndef NIMBLE_TARGET_H
#define NIMBLE_TARGET_H

#include <stddef.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nimble_target_kind {
  NIMBLE_TARGET_X86 = 0,
  NIMBLE_TARGET_AARCH64 = 1,
  NIMBLE_TARGET_CUDA = 2,
} nimble_target_kind_t;

/* Longest accepted spec text (and canonical spelling), without the NUL. */
#define NIMBLE_TARGET_SPEC_MAX 255
/* Most targets in one list. */
#define NIMBLE_TARGET_LIST_MAX 16

typedef struct nimble_target_t {
  nimble_target_kind_t kind;
  char cpu[32];       /* resolved host CPU (LLVM name), never empty */
  char features[160]; /* canonical `features` value; "" when none */
  char arch[16];      /* cuda: resolved GPU arch ("sm_80"); "" otherwise */
} nimble_target_t;

/* Parses one spec. Errors (INVALID_ARGUMENT) quote the spec and name the
 * unknown target, unknown or repeated option, or bad value. */
nimble_status_t nimble_target_parse(const char *spec, nimble_target_t *out_target);

/* As nimble_target_parse, and also accepts `cpu=native` (x86 and cuda on
 * an x86_64 machine, aarch64 on an aarch64 one): host code for the CPU of
 * the machine that compiles, with all its features. For a local `nimble
 * compile` only: such an artifact may not run elsewhere, so the farm
 * (which parses with nimble_target_parse) refuses it. The canonical
 * spelling keeps `cpu=native`. */
nimble_status_t nimble_target_parse_local(const char *spec, nimble_target_t *out_target);

/* 1 when target's cpu is `native` (nimble_target_parse_local). */
int nimble_target_is_native(const nimble_target_t *target);

/* Same for `len` bytes that need not be NUL-terminated. */
nimble_status_t nimble_target_parse_n(const char *spec, size_t len, nimble_target_t *out_target);

/* Writes the canonical spelling into out (NIMBLE_TARGET_SPEC_MAX + 1 bytes). */
void nimble_target_format(const nimble_target_t *target, char out[NIMBLE_TARGET_SPEC_MAX + 1]);

/* Parses a comma-separated list (see above) into out[0..cap). The list must
 * be non-empty and name no target twice (after canonicalisation). */
nimble_status_t nimble_target_list_parse(const char *text, nimble_target_t *out, size_t cap,
                                         size_t *out_count);

/* Writes the canonical spec of `text` into out; an error if it does not
 * parse. Handy for checking that a spec already is canonical. */
nimble_status_t nimble_target_canonicalize(const char *text, char out[NIMBLE_TARGET_SPEC_MAX + 1]);

/* 1 when both name the same target (same canonical spelling). */
int nimble_target_equal(const nimble_target_t *a, const nimble_target_t *b);

/* Number of target kinds (they are 0 .. NIMBLE_TARGET_KIND_COUNT - 1). */
#define NIMBLE_TARGET_KIND_COUNT 3

/* "x86", "aarch64", "cuda". Static strings. */
const char *nimble_target_kind_name(nimble_target_kind_t kind);

/* The kind named exactly `name` ("x86", "aarch64", "cuda": no options) into
 * *out (may be NULL); returns 0 when name is no kind. */
int nimble_target_kind_from_name(const char *name, nimble_target_kind_t *out);

/* LLVM triple of the host code: "x86_64-linux-gnu" or "aarch64-linux-gnu".
 * Static string. */
const char *nimble_target_host_triple(const nimble_target_t *target);

/* LLVM triple of the device code ("nvptx64-nvidia-cuda"), or NULL when the
 * target has no device (x86, aarch64). Static string. */
const char *nimble_target_device_triple(const nimble_target_t *target);

/* Host CPU for LLVM's target machine. Borrowed from target. */
const char *nimble_target_cpu(const nimble_target_t *target);

/* GPU arch ("sm_80") for cuda, NULL otherwise. Borrowed from target. */
const char *nimble_target_cuda_arch(const nimble_target_t *target);

/* Host feature string for LLVM ("+neon,+avx2,-prefer-256-bit"): the
 * features the kind always has (aarch64: +neon) then the spec's own.
 * Written into out (NIMBLE_TARGET_SPEC_MAX + 1 bytes; always fits). */
void nimble_target_llvm_features(const nimble_target_t *target,
                                 char out[NIMBLE_TARGET_SPEC_MAX + 1]);

/* Longest store tag nimble_target_tag writes, without the NUL. */
#define NIMBLE_TARGET_TAG_MAX 32

/* A store tag for the target, valid in OCI tag syntax: the kind alone when
 * the spec has no options ("x86", "cuda"), otherwise the kind, '-', and the
 * first 16 hex digits of sha256(canonical spec), e.g. "x86-1f0c...". Tags
 * cannot hold ':', '=', ',' or '+', hence the hash; the config blob keeps
 * the full spec. Defined in nimble_protocol (it needs SHA-256), not in
 * nimble_base. */
void nimble_target_tag(const nimble_target_t *target, char out[NIMBLE_TARGET_TAG_MAX + 1]);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TARGET_H */
