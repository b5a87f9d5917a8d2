/* The kernels media types by triple (nimble/media_type.h). */
#include "nimble/media_type.h"

#include <string.h>

static const struct {
  const char *triple;
  const char *media_type;
} kKernels[] = {
    {"x86_64-linux-gnu", NIMBLE_MEDIA_TYPE_KERNELS_X86_64},
    {"aarch64-linux-gnu", NIMBLE_MEDIA_TYPE_KERNELS_AARCH64},
    {"nvptx64-nvidia-cuda", NIMBLE_MEDIA_TYPE_KERNELS_NVPTX},
};

const char *nimble_media_type_kernels(const char *triple) {
  if (!triple) return NULL;
  for (size_t i = 0; i < sizeof kKernels / sizeof kKernels[0]; i++)
    if (strcmp(kKernels[i].triple, triple) == 0) return kKernels[i].media_type;
  return NULL;
}

/* A triple as it may appear in a media type: LLVM's arch-vendor-os[-env]
 * spelling, letters, digits, '_' and '-' only, so that "<prefix>.v1+elf"
 * cannot be read two ways. */
static int triple_chars_ok(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

size_t nimble_media_type_kernels_elf_triple(const char *media_type, const char **triple) {
  static const char kPrefix[] = NIMBLE_MEDIA_TYPE_KERNELS_PREFIX;
  static const char kSuffix[] = NIMBLE_MEDIA_TYPE_KERNELS_ELF_SUFFIX;
  if (triple) *triple = NULL;
  if (!media_type) return 0;
  size_t pn = sizeof kPrefix - 1, sn = sizeof kSuffix - 1, n = strlen(media_type);
  if (n <= pn + sn || strncmp(media_type, kPrefix, pn) != 0 ||
      strcmp(media_type + n - sn, kSuffix) != 0)
    return 0;
  if (!triple_chars_ok(media_type + pn, n - pn - sn)) return 0;
  if (triple) *triple = media_type + pn;
  return n - pn - sn;
}
