/* Media types: the one place Nimble spells them (docs/artifacts.md has the
 * table). Protocol's manifest encoder and validator, the runtime's part
 * names (nimble_part_media_type), its fetcher, the store and the worker all
 * use these; none writes the strings again.
 *
 * An executable is an OCI image manifest (NIMBLE_MEDIA_TYPE_OCI_MANIFEST)
 * with artifactType NIMBLE_ARTIFACT_TYPE_EXECUTABLE, a JSON config blob and
 * one layer per part of the executable. CPU kernels carry the LLVM triple of
 * their CPU: application/vnd.nimble.kernels.<triple>.v1+elf.
 */
#ifndef NIMBLE_MEDIA_TYPE_H
#define NIMBLE_MEDIA_TYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Manifests a registry holds (OCI image spec, Docker's registry API). */
#define NIMBLE_MEDIA_TYPE_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define NIMBLE_MEDIA_TYPE_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define NIMBLE_MEDIA_TYPE_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define NIMBLE_MEDIA_TYPE_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

/* A Nimble executable: its artifactType and config blob. */
#define NIMBLE_ARTIFACT_TYPE_EXECUTABLE "application/vnd.nimble.executable.v1"
#define NIMBLE_MEDIA_TYPE_CONFIG "application/vnd.nimble.executable.config.v1+json"

/* The parts of an executable, one layer each. The metadata part is the
 * runtime's binary metadata (docs/executable.md): what the loader reads;
 * the JSON config blob is for schedulers and clients, not a replacement. */
#define NIMBLE_MEDIA_TYPE_METADATA "application/vnd.nimble.executable.metadata.v1"
#define NIMBLE_MEDIA_TYPE_BYTECODE "application/vnd.nimble.bytecode.v1"
#define NIMBLE_MEDIA_TYPE_CONSTANTS "application/vnd.nimble.constants.v1"
/* Kernel libraries: "<prefix><triple><suffix>". */
#define NIMBLE_MEDIA_TYPE_KERNELS_PREFIX "application/vnd.nimble.kernels."
#define NIMBLE_MEDIA_TYPE_KERNELS_ELF_SUFFIX ".v1+elf"
#define NIMBLE_MEDIA_TYPE_KERNELS_PTX_SUFFIX ".v1+ptx"
#define NIMBLE_MEDIA_TYPE_KERNELS_X86_64 \
  NIMBLE_MEDIA_TYPE_KERNELS_PREFIX "x86_64-linux-gnu" NIMBLE_MEDIA_TYPE_KERNELS_ELF_SUFFIX
#define NIMBLE_MEDIA_TYPE_KERNELS_AARCH64 \
  NIMBLE_MEDIA_TYPE_KERNELS_PREFIX "aarch64-linux-gnu" NIMBLE_MEDIA_TYPE_KERNELS_ELF_SUFFIX
#define NIMBLE_MEDIA_TYPE_KERNELS_NVPTX \
  NIMBLE_MEDIA_TYPE_KERNELS_PREFIX "nvptx64-nvidia-cuda" NIMBLE_MEDIA_TYPE_KERNELS_PTX_SUFFIX

/* The kernels media type of the libraries Nimble builds for `triple`
 * ("x86_64-linux-gnu", "aarch64-linux-gnu": ELF; "nvptx64-nvidia-cuda":
 * PTX); NULL for any other triple or NULL. Static string. */
const char *nimble_media_type_kernels(const char *triple);

/* For a CPU kernels media type (<prefix><triple>.v1+elf, any triple of
 * letters, digits, '_' and '-'), points *triple (may be NULL) into
 * media_type at its triple and returns the triple's length (not
 * NUL-terminated there); 0 for any other media type or NULL. */
size_t nimble_media_type_kernels_elf_triple(const char *media_type, const char **triple);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_MEDIA_TYPE_H */
