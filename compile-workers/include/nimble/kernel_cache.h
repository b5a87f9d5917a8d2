/* The kernel cache: compiled kernel objects by content, so that a kernel
 * built once (same canonical loop nest, target, opt level and code
 * generator) skips LLVM the next time (docs/codegen.md "Kernel cache").
 *
 * A cache is an interface: get and put of byte strings under a key (64
 * lowercase hex digits, the SHA-256 codegen computes,
 * nimble_codegen_kernel_key). The local one keeps files in a folder; a
 * store-backed one (the farm's) plugs in by filling the same struct.
 *
 *   nimble_kernel_cache_t *c;
 *   NIMBLE_RETURN_IF_ERROR(nimble_kernel_cache_open_local(dir, &c));
 *   options.cache = c;   ... nimble_codegen_build ...
 *   nimble_kernel_cache_destroy(c);
 *
 * get and put are called from several threads at once. A cache is
 * advisory: codegen treats a failing get as a miss and a failing put as
 * nothing stored, so a broken cache never fails a compile.
 */
#ifndef NIMBLE_KERNEL_CACHE_H
#define NIMBLE_KERNEL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_KERNEL_KEY_LEN 64 /* hex digits, without the NUL */

typedef struct nimble_kernel_cache nimble_kernel_cache_t;
struct nimble_kernel_cache {
  /* On a hit *data (caller frees with free()) and *size hold the bytes put
   * under key and *found is true; on a miss *found is false. An entry that
   * fails its integrity check is a miss (and counted in *corrupt when
   * corrupt is not NULL). */
  nimble_status_t (*get)(nimble_kernel_cache_t *c, const char *key, uint8_t **data, size_t *size,
                         bool *found, bool *corrupt);
  /* Stores the bytes (borrowed) under key, atomically: a reader sees the
   * whole entry or none. */
  nimble_status_t (*put)(nimble_kernel_cache_t *c, const char *key, const uint8_t *data, size_t size);
  void (*destroy)(nimble_kernel_cache_t *c);
};

/* The local cache in folder `dir` (created, with its parents, when
 * absent): one file per entry, DIR/XX/KEY (XX the key's first two
 * digits), holding a header with the payload's size and SHA-256 before
 * the payload; written to a temporary file in the same folder and renamed
 * into place. An entry whose size or digest does not match is ignored. */
nimble_status_t nimble_kernel_cache_open_local(const char *dir, nimble_kernel_cache_t **out);

/* The default folder of the local cache, into out (size bytes):
 * $NIMBLE_KERNEL_CACHE when set and not empty, else
 * $XDG_CACHE_HOME/nimble/kernels, else $HOME/.cache/nimble/kernels.
 * NOT_FOUND when none of them is set. */
nimble_status_t nimble_kernel_cache_default_dir(char *out, size_t size);

/* Calls c->destroy (NULL is fine). */
void nimble_kernel_cache_destroy(nimble_kernel_cache_t *c);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_KERNEL_CACHE_H */
