/* Element types: names and sizes. */
#include <string.h>

#include "nimble/type.h"

static const struct {
  const char *name;
  size_t size;
} kDtypes[NIMBLE_DTYPE_COUNT_] = {
    [NIMBLE_DTYPE_FLOAT32] = {"float32", 4}, [NIMBLE_DTYPE_FLOAT64] = {"float64", 8},
    [NIMBLE_DTYPE_FLOAT16] = {"float16", 2}, [NIMBLE_DTYPE_INT8] = {"int8", 1},
    [NIMBLE_DTYPE_INT16] = {"int16", 2},     [NIMBLE_DTYPE_INT32] = {"int32", 4},
    [NIMBLE_DTYPE_INT64] = {"int64", 8},     [NIMBLE_DTYPE_UINT8] = {"uint8", 1},
    [NIMBLE_DTYPE_BOOL] = {"bool", 1},
};

const char *nimble_dtype_name(nimble_dtype_t dtype) {
  if ((unsigned)dtype >= NIMBLE_DTYPE_COUNT_) return "?";
  return kDtypes[dtype].name;
}

bool nimble_dtype_from_name(const char *name, size_t len, nimble_dtype_t *out) {
  for (int i = 0; i < NIMBLE_DTYPE_COUNT_; i++) {
    if (strlen(kDtypes[i].name) == len && memcmp(kDtypes[i].name, name, len) == 0) {
      *out = (nimble_dtype_t)i;
      return true;
    }
  }
  return false;
}

size_t nimble_dtype_size(nimble_dtype_t dtype) {
  if ((unsigned)dtype >= NIMBLE_DTYPE_COUNT_) return 0;
  return kDtypes[dtype].size;
}

bool nimble_dtype_is_float(nimble_dtype_t dtype) {
  return dtype == NIMBLE_DTYPE_FLOAT32 || dtype == NIMBLE_DTYPE_FLOAT64 ||
         dtype == NIMBLE_DTYPE_FLOAT16;
}

bool nimble_dtype_is_int(nimble_dtype_t dtype) {
  return dtype == NIMBLE_DTYPE_INT8 || dtype == NIMBLE_DTYPE_INT16 ||
         dtype == NIMBLE_DTYPE_INT32 || dtype == NIMBLE_DTYPE_INT64 ||
         dtype == NIMBLE_DTYPE_UINT8;
}
