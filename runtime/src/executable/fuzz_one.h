/* One fuzzing step for the executable loader, shared by the libFuzzer
 * target and the ctest replay: the input is a whole `.nimble` image, or a
 * single part when it starts with the part magic. Kernels are never
 * loaded (NIMBLE_LOAD_NO_KERNELS): the system's dynamic loader is not ours
 * to fuzz, and executable code is only loaded after its digest checks out.
 *
 * Each input is loaded as it is (a mutated one must be refused by the
 * digests) and then resealed (nimble_image_reseal: its digests recomputed),
 * so that mutations reach the parsers behind the digests; the status of
 * the resealed load is returned. */
#ifndef NIMBLE_FUZZ_ONE_H
#define NIMBLE_FUZZ_ONE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/layout.h"
#include "nimble/runtime.h"

static inline nimble_status_code_t nimble_fuzz_load(const uint8_t *data, size_t size) {
  nimble_executable *exe = NULL;
  nimble_status_t s;
  if (size >= 8 && memcmp(data, "NMBP", 4) == 0) {
    nimble_executable_part_t part = {(nimble_part_kind_t)data[4], data, size};
    s = nimble_executable_load_parts(&part, 1, NIMBLE_LOAD_NO_KERNELS, &exe);
  } else {
    s = nimble_executable_load_memory(data, size, NIMBLE_LOAD_NO_KERNELS, &exe);
  }
  if (!s) {
    /* Whatever loads must be readable end to end. */
    for (uint32_t i = 0; i < nimble_executable_num_entries(exe); i++) {
      const nimble_entry_info_t *e = nimble_executable_entry_at(exe, i);
      char buf[128];
      for (uint32_t j = 0; j < e->num_inputs; j++)
        nimble_format_declared_shape(&e->inputs[j], buf, sizeof buf);
    }
    nimble_executable_release(exe);
  }
  return nimble_status_consume(s);
}

static inline nimble_status_code_t nimble_fuzz_one(const uint8_t *data, size_t size) {
  nimble_fuzz_load(data, size);
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return NIMBLE_RESOURCE_EXHAUSTED;
  if (size) memcpy(copy, data, size);
  if (size >= 8 && memcmp(copy, "NMBP", 4) == 0) {
    if (size >= NIMBLE_PART_DIGEST_SIZE) nimble_part_seal(copy, size);
  } else {
    nimble_image_reseal(copy, size);
  }
  nimble_status_code_t code = nimble_fuzz_load(copy, size);
  free(copy);
  return code;
}

#endif
