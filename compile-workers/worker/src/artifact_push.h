/* Turns the compiler's parts directory into an artifact in the store
 * (private to the worker). */
#ifndef NIMBLE_WORKER_ARTIFACT_PUSH_H
#define NIMBLE_WORKER_ARTIFACT_PUSH_H

#include "nimble/digest.h"
#include "nimble/status.h"
#include "nimble/store_client.h"

/* What the parts must describe; all borrowed. */
typedef struct artifact_expect {
  const char *target;           /* canonical spec of the task */
  const nimble_digest_t *model; /* the model compiled */
  const char *compiler_version;
} artifact_expect;

/* Reads DIR/config.json and DIR/parts.json (docs/farm.md), checks them
 * against `expect`, pushes every blob to `repo` (the store skips blobs it
 * has, so parts equal across targets are stored once), then the manifest
 * under `tag` (NULL: by its digest, untagged). Errors name the file and the field at fault. */
nimble_status_t artifact_push_parts(nimble_store_client *store, const char *dir, const char *repo,
                                    const char *tag, const artifact_expect *expect,
                                    nimble_digest_t *out_manifest);

#endif
