/* Element types: names, sizes, half-precision conversions and reading an
 * element of any type as a double or an int64. */
#include <math.h>
#include <string.h>

#include "nimble/type.h"

static const struct {
  const char *name;
  size_t size;
} kDtypes[NIMBLE_DTYPE_COUNT_] = {
    [NIMBLE_DTYPE_FLOAT32] = {"float32", 4},   [NIMBLE_DTYPE_FLOAT64] = {"float64", 8},
    [NIMBLE_DTYPE_FLOAT16] = {"float16", 2},   [NIMBLE_DTYPE_INT8] = {"int8", 1},
    [NIMBLE_DTYPE_INT16] = {"int16", 2},       [NIMBLE_DTYPE_INT32] = {"int32", 4},
    [NIMBLE_DTYPE_INT64] = {"int64", 8},       [NIMBLE_DTYPE_UINT8] = {"uint8", 1},
    [NIMBLE_DTYPE_BOOL] = {"bool", 1},         [NIMBLE_DTYPE_UINT16] = {"uint16", 2},
    [NIMBLE_DTYPE_UINT32] = {"uint32", 4},     [NIMBLE_DTYPE_UINT64] = {"uint64", 8},
    [NIMBLE_DTYPE_BFLOAT16] = {"bfloat16", 2},
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
         dtype == NIMBLE_DTYPE_FLOAT16 || dtype == NIMBLE_DTYPE_BFLOAT16;
}

bool nimble_dtype_is_unsigned(nimble_dtype_t dtype) {
  return dtype == NIMBLE_DTYPE_UINT8 || dtype == NIMBLE_DTYPE_UINT16 ||
         dtype == NIMBLE_DTYPE_UINT32 || dtype == NIMBLE_DTYPE_UINT64;
}

bool nimble_dtype_is_int(nimble_dtype_t dtype) {
  return dtype == NIMBLE_DTYPE_INT8 || dtype == NIMBLE_DTYPE_INT16 ||
         dtype == NIMBLE_DTYPE_INT32 || dtype == NIMBLE_DTYPE_INT64 ||
         nimble_dtype_is_unsigned(dtype);
}

float nimble_f16_to_f32(uint16_t h) {
  int ex = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = ex == 0    ? ldexpf((float)mant, -24)
            : ex == 31 ? (mant ? NAN : INFINITY)
                       : ldexpf((float)(mant + 1024), ex - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t nimble_f64_to_f16(double d) {
  uint16_t sign = signbit(d) ? 0x8000 : 0;
  if (isnan(d)) return (uint16_t)(sign | 0x7e00);
  double a = fabs(d);
  /* 65504 is the largest half; from halfway to the next binade up, 65520,
   * ties-to-even rounds to 65536, which overflows. */
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);
  if (a < 0x1p-14) /* subnormal (or zero): units of 2^-24; 1024 carries into the smallest normal */
    return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24));
  int e;
  double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  double r = nearbyint(m * 2048.0); /* 11 significant bits, ties to even */
  if (r == 2048.0) r = 1024.0, e++;
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((int)r - 1024));
}

uint16_t nimble_f32_to_f16(float f) { return nimble_f64_to_f16((double)f); /* exact widening */ }

float nimble_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t nimble_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40); /* quiet, keeps the sign */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

double nimble_dtype_get_double(nimble_dtype_t dtype, const void *data, size_t k) {
  const char *p = data;
  switch (dtype) {
    case NIMBLE_DTYPE_FLOAT32: { float v; memcpy(&v, p + 4 * k, 4); return v; }
    case NIMBLE_DTYPE_FLOAT64: { double v; memcpy(&v, p + 8 * k, 8); return v; }
    case NIMBLE_DTYPE_FLOAT16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return nimble_f16_to_f32(v); }
    case NIMBLE_DTYPE_BFLOAT16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return nimble_bf16_to_f32(v); }
    case NIMBLE_DTYPE_INT8: return ((const int8_t *)data)[k];
    case NIMBLE_DTYPE_INT16: { int16_t v; memcpy(&v, p + 2 * k, 2); return v; }
    case NIMBLE_DTYPE_INT32: { int32_t v; memcpy(&v, p + 4 * k, 4); return v; }
    case NIMBLE_DTYPE_INT64: { int64_t v; memcpy(&v, p + 8 * k, 8); return (double)v; }
    case NIMBLE_DTYPE_UINT8: return ((const uint8_t *)data)[k];
    case NIMBLE_DTYPE_UINT16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return v; }
    case NIMBLE_DTYPE_UINT32: { uint32_t v; memcpy(&v, p + 4 * k, 4); return v; }
    case NIMBLE_DTYPE_UINT64: { uint64_t v; memcpy(&v, p + 8 * k, 8); return (double)v; }
    case NIMBLE_DTYPE_BOOL: return ((const uint8_t *)data)[k] != 0;
    default: return 0;
  }
}

int64_t nimble_dtype_get_int(nimble_dtype_t dtype, const void *data, size_t k) {
  const char *p = data;
  switch (dtype) {
    case NIMBLE_DTYPE_INT8: return ((const int8_t *)data)[k];
    case NIMBLE_DTYPE_INT16: { int16_t v; memcpy(&v, p + 2 * k, 2); return v; }
    case NIMBLE_DTYPE_INT32: { int32_t v; memcpy(&v, p + 4 * k, 4); return v; }
    case NIMBLE_DTYPE_INT64: { int64_t v; memcpy(&v, p + 8 * k, 8); return v; }
    case NIMBLE_DTYPE_UINT8: return ((const uint8_t *)data)[k];
    case NIMBLE_DTYPE_UINT16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return v; }
    case NIMBLE_DTYPE_UINT32: { uint32_t v; memcpy(&v, p + 4 * k, 4); return v; }
    case NIMBLE_DTYPE_UINT64: {
      uint64_t v;
      memcpy(&v, p + 8 * k, 8);
      return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    case NIMBLE_DTYPE_BOOL: return ((const uint8_t *)data)[k] != 0;
    default: {
      double d = nimble_dtype_get_double(dtype, data, k);
      if (isnan(d)) return 0;
      if (d >= 9223372036854775807.0) return INT64_MAX;
      if (d <= -9223372036854775808.0) return INT64_MIN;
      return (int64_t)d;
    }
  }
}
