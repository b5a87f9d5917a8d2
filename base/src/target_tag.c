/* Store tags for target specs: readable for bare kinds, hashed otherwise. */
#include <stdio.h>
#include <string.h>

#include "nimble/digest.h"
#include "nimble/target.h"

void nimble_target_tag(const nimble_target_t *target, char out[NIMBLE_TARGET_TAG_MAX + 1]) {
  char spec[NIMBLE_TARGET_SPEC_MAX + 1];
  const char *kind = nimble_target_kind_name(target->kind);
  nimble_target_format(target, spec);
  if (strcmp(spec, kind) == 0) {
    snprintf(out, NIMBLE_TARGET_TAG_MAX + 1, "%s", kind);
    return;
  }
  nimble_digest_t d;
  char hex[65];
  nimble_digest_compute(spec, strlen(spec), &d);
  nimble_digest_format_hex(&d, hex);
  snprintf(out, NIMBLE_TARGET_TAG_MAX + 1, "%s-%.16s", kind, hex);
}
