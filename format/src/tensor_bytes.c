/* The size of a compact tensor, as the format stores constants and the VM
 * allocates tensors (format/layout.h). */
#include "format/layout.h"

_Bool nimble_tensor_nbytes(int32_t ndim, const int64_t *shape, DLDataType dtype, uint64_t *out) {
  uint64_t n = ((uint64_t)dtype.bits * dtype.lanes + 7) / 8;
  for (int32_t d = 0; d < ndim; d++) {
    if (shape[d] < 0) return 0;
    uint64_t dim = (uint64_t)shape[d];
    if (dim != 0 && n > UINT64_MAX / dim) return 0;
    n *= dim;
  }
  /* Keep sizes well inside what size_t and int64 arithmetic can hold. */
  if (n > ((uint64_t)1 << 62)) return 0;
  *out = n;
  return 1;
}
