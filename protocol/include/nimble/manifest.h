/* The artifact manifest: how a compiled executable is stored.
 *
 * An executable lives in the store as an OCI image manifest (schemaVersion 2,
 * mediaType application/vnd.oci.image.manifest.v1+json) whose artifactType
 * is application/vnd.nimble.executable.v1. Its config blob holds the
 * metadata (target, compiler, model digest, entry signatures; see
 * artifact_config.h) and each layer is one part of the executable: the
 * runtime's binary metadata, the bytecode, the constant pool, and one
 * kernel library per device. Parts are
 * content-addressed, so constants shared between targets are stored once.
 * docs/artifacts.md has the media types and an example.
 *
 * Encoding is canonical (compact JSON, sorted keys, integers only): the same
 * manifest always encodes to the same bytes, hence the same digest, and a
 * canonical document decodes and re-encodes to itself. Decoding is strict
 * about what Nimble needs and errors name the field ("layers[2].digest:
 * ..."); unknown members are ignored as the OCI spec asks, and so do not
 * survive a re-encode.
 *
 * Ownership: a nimble_manifest_t owns every string and array in it. Callers
 * init it, fill it through the functions below (which copy their string
 * arguments) or by decoding, and deinit it.
 */
#ifndef NIMBLE_MANIFEST_H
#define NIMBLE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/media_type.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The media types (NIMBLE_MEDIA_TYPE_*, NIMBLE_ARTIFACT_TYPE_EXECUTABLE)
 * are nimble_base's: nimble/media_type.h, included above. */
/* The OCI annotation that names a layer's file. */
#define NIMBLE_ANNOTATION_TITLE "org.opencontainers.image.title"

/* A manifest or config document larger than this is refused (the limit
 * distribution registries apply to manifests). */
#define NIMBLE_MANIFEST_MAX_SIZE ((size_t)4 << 20)
#define NIMBLE_MANIFEST_MAX_LAYERS 64
/* Largest blob size accepted: 2^53 - 1, the largest integer every JSON
 * reader represents exactly. */
#define NIMBLE_BLOB_MAX_SIZE ((int64_t)9007199254740991)

typedef struct nimble_annotation_t {
  char *key;   /* owned */
  char *value; /* owned */
} nimble_annotation_t;

typedef struct nimble_descriptor_t {
  char *media_type; /* owned */
  nimble_digest_t digest;
  int64_t size;
  nimble_annotation_t *annotations; /* owned, annotation_count items */
  size_t annotation_count;
} nimble_descriptor_t;

typedef struct nimble_manifest_t {
  nimble_descriptor_t config; /* media_type NULL until set */
  nimble_descriptor_t *layers; /* owned, layer_count items, in order */
  size_t layer_count;
  nimble_annotation_t *annotations; /* owned, manifest-level */
  size_t annotation_count;
} nimble_manifest_t;

void nimble_manifest_init(nimble_manifest_t *m);
/* Frees everything m owns and leaves it empty (as after init). */
void nimble_manifest_deinit(nimble_manifest_t *m);

/* Sets the config descriptor (media type NIMBLE_MEDIA_TYPE_CONFIG). */
nimble_status_t nimble_manifest_set_config(nimble_manifest_t *m, const nimble_digest_t *digest,
                                           int64_t size);

/* Appends a layer; `title` (may be NULL) becomes its
 * org.opencontainers.image.title annotation. Strings are copied. The layer
 * is checked as nimble_manifest_validate would. */
nimble_status_t nimble_manifest_add_layer(nimble_manifest_t *m, const char *media_type,
                                          const nimble_digest_t *digest, int64_t size,
                                          const char *title);

/* Sets (or replaces) an annotation on a descriptor / on the manifest.
 * Strings are copied; key must be non-empty. */
nimble_status_t nimble_descriptor_set_annotation(nimble_descriptor_t *d, const char *key,
                                                 const char *value);
nimble_status_t nimble_manifest_set_annotation(nimble_manifest_t *m, const char *key,
                                               const char *value);

/* A descriptor's annotation value, or NULL. Borrowed from d. */
const char *nimble_descriptor_annotation(const nimble_descriptor_t *d, const char *key);

/* Checks the rules docs/artifacts.md lists: config present with its media
 * type and at most NIMBLE_MANIFEST_MAX_SIZE bytes; 1..64 layers of known
 * media types (an unknown one is UNIMPLEMENTED); exactly one metadata and
 * one bytecode layer, at most one constants layer and one kernels layer per
 * device; sizes in
 * [0, NIMBLE_BLOB_MAX_SIZE]; a size-0 blob has the empty digest. */
nimble_status_t nimble_manifest_validate(const nimble_manifest_t *m);

/* Validates, then writes the canonical bytes. Caller frees *out with
 * free(); *out is also NUL-terminated. */
nimble_status_t nimble_manifest_encode(const nimble_manifest_t *m, char **out, size_t *out_size);

/* Parses and validates `size` bytes into *out, which is initialised here
 * (pass an uninitialised or empty struct: anything in it is not freed); the
 * caller deinits it after success; on error *out is left empty. Over NIMBLE_MANIFEST_MAX_SIZE is
 * RESOURCE_EXHAUSTED; anything malformed is INVALID_ARGUMENT naming the
 * field; an unknown schema or media type is UNIMPLEMENTED. */
nimble_status_t nimble_manifest_decode(const void *data, size_t size, nimble_manifest_t *out);

/* The first layer with this media type, or NULL. Borrowed from m. */
const nimble_descriptor_t *nimble_manifest_find_layer(const nimble_manifest_t *m,
                                                      const char *media_type);

/* Media type of the kernels layer for an LLVM triple ("x86_64-linux-gnu",
 * "aarch64-linux-gnu", "nvptx64-nvidia-cuda"), or NULL. Static string. */
const char *nimble_manifest_kernels_media_type(const char *triple);

/* Checks that every kernels layer is for a triple of `target_spec` (host or
 * device), so a manifest cannot claim cuda kernels for an x86 artifact. */
nimble_status_t nimble_manifest_check_target(const nimble_manifest_t *m, const char *target_spec);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_MANIFEST_H */
