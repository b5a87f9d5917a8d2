/* The compile cache is served only while the store still has the artifact:
 * the manifest (pulled by digest, so its bytes are verified) and every blob
 * it references (HEAD). A store that lost a blob turns a hit into a miss. */
#include <stdlib.h>

#include "broker.h"
#include "nimble/manifest.h"

void sched_cache_verify(nimble_scheduler *s, const char *name, const char *manifest, int *out_ok) {
  *out_ok = 0;
  uint8_t *bytes = NULL;
  size_t size = 0;
  nimble_status_t st = nimble_store_pull_manifest(s->store, name, manifest, &bytes, &size, NULL, NULL);
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  if (!st) st = nimble_manifest_decode(bytes, size, &m);
  free(bytes);
  int exists = 1;
  if (!st) st = nimble_store_blob_exists(s->store, name, &m.config.digest, &exists, NULL);
  for (size_t i = 0; !st && exists && i < m.layer_count; i++)
    st = nimble_store_blob_exists(s->store, name, &m.layers[i].digest, &exists, NULL);
  if (st) {
    sched_log(s, "cache check of %s in %s: %s", manifest, name, nimble_status_message(st));
    nimble_status_free(st);
  } else {
    *out_ok = exists;
  }
  nimble_manifest_deinit(&m);
}
