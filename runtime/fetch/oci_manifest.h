/* Reads the descriptors out of an OCI image manifest holding a Nimble
 * executable (docs/artifacts.md): config and layers, each with mediaType,
 * digest and size. Private to runtime/fetch. */
#ifndef NIMBLE_FETCH_OCI_MANIFEST_H
#define NIMBLE_FETCH_OCI_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/media_type.h"
#include "nimble/status.h"

#define NIMBLE_FETCH_MAX_LAYERS 64

typedef struct nimble_fetch_descriptor_t {
  char media_type[256];
  char digest[72]; /* "sha256:" + 64 lowercase hex */
  uint64_t size;
} nimble_fetch_descriptor_t;

typedef struct nimble_fetch_manifest_t {
  nimble_fetch_descriptor_t config;
  size_t layer_count;
  nimble_fetch_descriptor_t layers[NIMBLE_FETCH_MAX_LAYERS];
} nimble_fetch_manifest_t;

/* Parses and checks `size` bytes (borrowed) into *out. Errors name the field:
 * "manifest: layers[1].digest: ...". A mediaType or artifactType other than
 * Nimble's is UNIMPLEMENTED; anything malformed INVALID_ARGUMENT. */
nimble_status_t nimble_fetch_manifest_parse(const void *data, size_t size,
                                            nimble_fetch_manifest_t *out);

#endif
