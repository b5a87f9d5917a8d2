/* The executable builder calls of the lowering (see lower_builder.h). */
#include "lower/lower_builder.h"

#include <stdlib.h>

#include "nimble/executable_builder.h"

nimble_status_t lw_b_add_kernel(nimble_executable_builder *b, const char *symbol, int device,
                                uint32_t *index) {
  return nimble_builder_add_kernel(b, symbol, (DLDeviceType)device, index);
}

nimble_status_t lw_b_add_constant(nimble_executable_builder *b, const DLTensor *t, bool borrow,
                                  uint32_t *index) {
  return borrow ? nimble_builder_add_constant_borrowed(b, t, index) : nimble_builder_add_constant(b, t, index);
}

nimble_status_t lw_b_add_function(nimble_executable_builder *b, const char *name, uint32_t params,
                                  uint32_t registers, uint32_t *index) {
  return nimble_builder_add_function(b, name, params, registers, index);
}

nimble_status_t lw_b_emit(nimble_executable_builder *b, uint32_t func, int op, const int64_t *ops,
                          uint32_t n) {
  return nimble_builder_emit(b, func, op, ops, n);
}

static nimble_tensor_info_t *infos(const lw_sig *s, uint32_t n) {
  nimble_tensor_info_t *t = calloc(n ? n : 1, sizeof *t);
  if (!t) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    nimble_sig_dim_t *d = calloc(s[i].ndim > 0 ? (size_t)s[i].ndim : 1, sizeof *d); /* -1: any rank */
    if (!d) {
      for (uint32_t k = 0; k < i; k++) free((void *)t[k].dims);
      free(t);
      return NULL;
    }
    for (int32_t k = 0; k < s[i].ndim; k++) {
      d[k].value = s[i].dims[k];
      d[k].symbol = s[i].dims[k] >= 0 ? NULL : s[i].symbols[k];
    }
    t[i].name = s[i].name;
    t[i].dtype = s[i].dtype;
    t[i].device.device_type = kDLCPU;
    t[i].device.device_id = 0;
    t[i].ndim = s[i].ndim;
    t[i].dims = d;
  }
  return t;
}

static void free_infos(nimble_tensor_info_t *t, uint32_t n) {
  for (uint32_t i = 0; t && i < n; i++) free((void *)t[i].dims);
  free(t);
}

nimble_status_t lw_b_add_entry(nimble_executable_builder *b, const char *name, uint32_t func,
                               const lw_sig *in, uint32_t num_in, const lw_sig *out,
                               uint32_t num_out) {
  nimble_tensor_info_t *ti = infos(in, num_in), *to = infos(out, num_out);
  nimble_status_t s = ti && to ? nimble_builder_add_entry(b, name, func, ti, num_in, to, num_out)
                               : NIMBLE_OOM_IN("lowering");
  free_infos(ti, num_in);
  free_infos(to, num_out);
  return s;
}
