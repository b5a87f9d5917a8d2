/* Reproducible random tensor values (nimble/tensor_io.h): the inputs
 * `nimble profile` and the compiler's tuning run models on. */
#include <stdint.h>

#include "nimble/tensor_io.h"

/* xorshift64*. */
static uint64_t next_random(uint64_t *state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 0x2545F4914F6CDD1DULL;
}

nimble_status_t nimble_tensor_io_fill_random(void *data, uint64_t n, DLDataType dt, uint64_t *seed,
                                             const char *what) {
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = next_random(seed);
    double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    uint64_t k = r >> 60;
    if (dt.code == kDLFloat && dt.bits == 32) ((float *)data)[i] = (float)u;
    else if (dt.code == kDLFloat && dt.bits == 64) ((double *)data)[i] = u;
    else if (dt.code == kDLInt && dt.bits == 64) ((int64_t *)data)[i] = (int64_t)k;
    else if (dt.code == kDLInt && dt.bits == 32) ((int32_t *)data)[i] = (int32_t)k;
    else if (dt.code == kDLInt && dt.bits == 16) ((int16_t *)data)[i] = (int16_t)k;
    else if ((dt.code == kDLInt || dt.code == kDLUInt) && dt.bits == 8) ((uint8_t *)data)[i] = (uint8_t)k;
    else if (dt.code == 6 /* kDLBool */ || (dt.code == kDLUInt && dt.bits == 1))
      ((uint8_t *)data)[i] = (uint8_t)(k & 1);
    else
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "%s: no random values of dtype code %u, %u bits "
                                "(float32/64, int8/16/32/64, uint8, bool)",
                                what ? what : "tensor", dt.code, dt.bits);
  }
  return nimble_ok();
}
