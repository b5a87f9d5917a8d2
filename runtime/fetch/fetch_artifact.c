/* nimble_fetch_artifact: reference → manifest → verified blobs → cache →
 * executable. Every blob is verified before anything is written to the cache
 * or loaded; the cache is written only once the whole artifact is verified,
 * so a bad artifact leaves nothing behind. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch_internal.h"
#include "nimble/digest.h"
#include "oci_manifest.h"

#define MANIFEST_ACCEPT NIMBLE_MEDIA_TYPE_OCI_MANIFEST
#define MAX_MANIFEST (4u << 20)

void nimble_fetch_options_init(nimble_fetch_options_t *o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->connect_timeout_ms = 5000;
  o->stall_timeout_ms = 30000;
  o->max_attempts = 3;
  o->max_blob_size = 4ull << 30;
}

nimble_status_t nimble_fetch_cache_dir(const nimble_fetch_options_t *o, char **out) {
  *out = NULL;
  const char *env;
  char *p = NULL;
  if (o && o->cache_dir && o->cache_dir[0]) p = strdup(o->cache_dir);
  else if ((env = getenv("NIMBLE_CACHE_DIR")) && env[0]) p = strdup(env);
  else if ((env = getenv("XDG_CACHE_HOME")) && env[0]) {
    if (asprintf(&p, "%s/nimble", env) < 0) p = NULL;
  } else if ((env = getenv("HOME")) && env[0]) {
    if (asprintf(&p, "%s/.cache/nimble", env) < 0) p = NULL;
  } else {
    return nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                              "fetch: no cache directory: set NIMBLE_CACHE_DIR, XDG_CACHE_HOME or HOME");
  }
  if (!p) return NIMBLE_OOM_IN("fetch");
  *out = p;
  return nimble_ok();
}

static void warn(const nimble_fetch_options_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn(const nimble_fetch_options_t *o, const char *fmt, ...) {
  if (!o->on_event) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  nimble_fetch_event_t e = {.kind = NIMBLE_FETCH_EVENT_WARNING, .message = msg};
  o->on_event(o->event_user, &e);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void nimble_fetch_digest_of(const void *data, size_t size, char out[72]) {
  nimble_digest_t d;
  nimble_digest_compute(data, size, &d);
  nimble_digest_format(&d, out);
}

/* The part a layer holds; 0 for a layer this host does not need (another
 * CPU's kernels); -1 for a media type this runtime does not know. The names
 * are the artifact manifest's (docs/artifacts.md), which the runtime's
 * nimble_part_kind_from_media_type reads. */
static int layer_part(const char *media_type) {
  nimble_part_kind_t k = nimble_part_kind_from_media_type(media_type);
  if (!k) return -1;
  if (k == NIMBLE_PART_KERNELS_CPU) {
    const char *host = nimble_part_media_type(NIMBLE_PART_KERNELS_CPU);
    if (!host || strcmp(host, media_type) != 0) return 0;
  }
  return (int)k;
}

/* CPU kernels were taken for this host: an executable whose metadata names
 * another CPU's triple is refused rather than run with the wrong ones.
 * Targets without a kernels media type (test builds) are not checked. */
static nimble_status_t check_kernels_target(const nimble_executable *exe, const char *mdigest,
                                            const char *where, const char *media_type) {
  const char *target = nimble_executable_target(exe);
  const char *want = nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, target);
  if (!want || strcmp(want, media_type) == 0) return nimble_ok();
  const char *triple;
  size_t n = nimble_part_kernels_triple(media_type, &triple);
  return nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                            "fetch: %s: %s holds %.*s kernels, but the metadata part says the "
                            "executable's target is '%s'",
                            mdigest, where, (int)n, triple ? triple : "", target);
}

/* One blob to have: a descriptor, its bytes once verified, and whether they
 * came from the network (and so must be cached). */
typedef struct want {
  const nimble_fetch_descriptor_t *desc;
  char where[32];
  int part; /* a nimble_part_kind_t, or 0 for the config blob */
  uint8_t *bytes;
  size_t size;
  int fetched;
} want;

typedef struct job {
  const nimble_fetch_options_t *o;
  nimble_fetch_reference_t ref;
  nimble_fetch_http_t http;
  char *cache;
  int offline;
  nimble_fetch_stats_t *stats;
  const char *text;              /* the reference as given, for messages */
  nimble_trusted_keys_t *keys;   /* NULL: publishers are not checked */
} job;

/* Gets the manifest bytes and digest, online or from the cache. */
static nimble_status_t get_manifest(job *j, uint8_t **bytes, size_t *size, char digest[72],
                                    int *fetched) {
  *fetched = 0;
  nimble_status_t net = NULL;
  /* A digest reference pins the bytes: a cached copy (verified on read)
   * needs no network, so warm and offline starts cost the same. */
  if (j->ref.digest) {
    int found = 0;
    nimble_status_t s = nimble_fetch_cache_read_blob(j->cache, j->ref.digest, MAX_MANIFEST, &found, bytes, size);
    if (s && nimble_status_code(s) == NIMBLE_DATA_LOSS) {
      /* Damaged in the cache: drop it and ask the store, as for blobs. */
      warn(j->o, "%s; removed from the cache", nimble_status_message(s));
      nimble_fetch_cache_remove_blob(j->cache, j->ref.digest);
      nimble_status_free(s);
    } else if (s) {
      return s;
    } else if (found) {
      memcpy(digest, j->ref.digest, 72);
      return nimble_ok();
    }
  }
  if (!j->offline) {
    char *url = NULL;
    if (asprintf(&url, "%s/v2/%s/manifests/%s", j->ref.base_url, j->ref.name,
                 j->ref.digest ? j->ref.digest : j->ref.tag) < 0)
      return NIMBLE_OOM_IN("fetch");
    char header[72];
    net = nimble_fetch_http_get(&j->http, url, MANIFEST_ACCEPT, MAX_MANIFEST, UINT64_MAX, 0, bytes,
                                size, header);
    free(url);
    if (!net) {
      nimble_fetch_digest_of(*bytes, *size, digest);
      const char *want_digest = j->ref.digest ? j->ref.digest : (header[0] ? header : NULL);
      if (want_digest && strcmp(want_digest, digest) != 0) {
        free(*bytes);
        *bytes = NULL;
        return nimble_status_make(NIMBLE_DATA_LOSS,
                                  "fetch: manifest %s: the store served bytes that hash to %s",
                                  want_digest, digest);
      }
      *fetched = 1;
      return nimble_ok();
    }
    if (nimble_status_code(net) != NIMBLE_UNAVAILABLE) return net;
    j->offline = 1;
    warn(j->o, "store unreachable (%s); starting from the cache", nimble_status_message(net));
  }
  /* Offline: the digest is the reference's own or the tag record's. */
  if (j->ref.digest) {
    memcpy(digest, j->ref.digest, 72);
  } else {
    int found;
    nimble_status_t s = nimble_fetch_cache_read_tag(j->cache, &j->ref, &found, digest);
    if (!s && !found) {
      s = nimble_status_make(NIMBLE_UNAVAILABLE,
                             "fetch: %s/%s:%s: %s, and the cache in '%s' has no record of this tag",
                             j->ref.base_url, j->ref.name, j->ref.tag,
                             net ? nimble_status_message(net) : "offline", j->cache);
    }
    if (s) {
      nimble_status_free(net);
      return s;
    }
  }
  int found;
  nimble_status_t s = nimble_fetch_cache_read_blob(j->cache, digest, MAX_MANIFEST, &found, bytes, size);
  if (!s && !found) {
    s = nimble_status_make(NIMBLE_UNAVAILABLE, "fetch: manifest %s: %s, and it is not in the cache '%s'",
                           digest, net ? nimble_status_message(net) : "offline", j->cache);
  }
  nimble_status_free(net);
  return s;
}

/* Gets one blob verified, from the cache or the store. */
static nimble_status_t get_blob(job *j, want *w) {
  const nimble_fetch_descriptor_t *d = w->desc;
  if (d->size > j->o->max_blob_size || d->size > SIZE_MAX - 1) {
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "fetch: %s (%s): %llu bytes is over the %llu-byte limit", w->where,
                              d->digest, (unsigned long long)d->size,
                              (unsigned long long)j->o->max_blob_size);
  }
  int found;
  nimble_status_t s =
      nimble_fetch_cache_read_blob(j->cache, d->digest, d->size, &found, &w->bytes, &w->size);
  if (!s && found && w->size == d->size) {
    j->stats->blobs_from_cache++;
    return nimble_ok();
  }
  if (!s && found) { /* the right hash but not the declared size: the manifest lies */
    return nimble_status_make(NIMBLE_DATA_LOSS, "fetch: %s (%s): %zu bytes, the manifest says %llu",
                              w->where, d->digest, w->size, (unsigned long long)d->size);
  }
  if (s) {
    if (nimble_status_code(s) != NIMBLE_DATA_LOSS) return s;
    if (j->offline) return nimble_status_annotate(s, "fetch: offline and %s is damaged", w->where);
    warn(j->o, "%s; fetching it again", nimble_status_message(s));
    nimble_status_free(s);
    nimble_fetch_cache_remove_blob(j->cache, d->digest);
  } else if (j->offline) {
    return nimble_status_make(NIMBLE_UNAVAILABLE,
                              "fetch: the store is unreachable and blob %s (%s) is not in the cache '%s'",
                              d->digest, w->where, j->cache);
  }
  char *url = NULL;
  if (asprintf(&url, "%s/v2/%s/blobs/%s", j->ref.base_url, j->ref.name, d->digest) < 0)
    return NIMBLE_OOM_IN("fetch");
  s = nimble_fetch_http_get(&j->http, url, NULL, d->size, d->size, 1, &w->bytes, &w->size, NULL);
  free(url);
  if (s) return nimble_status_annotate(s, "fetch: %s (%s)", w->where, d->digest);
  char got[72];
  nimble_fetch_digest_of(w->bytes, w->size, got);
  if (strcmp(got, d->digest) != 0) {
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "fetch: %s: blob %s: the store served bytes that hash to %s", w->where,
                              d->digest, got);
  }
  w->fetched = 1;
  j->stats->blobs_fetched++;
  j->stats->bytes_fetched += w->size;
  return nimble_ok();
}

static nimble_status_t run(job *j, nimble_executable **out) {
  uint8_t *mbytes = NULL;
  size_t msize = 0;
  char mdigest[72];
  int mfetched;
  NIMBLE_RETURN_IF_ERROR(get_manifest(j, &mbytes, &msize, mdigest, &mfetched));
  j->stats->offline = j->offline;
  memcpy(j->stats->manifest_digest, mdigest, 72);

  /* Who published it, before any blob is fetched or mapped. */
  nimble_fetch_signature_t sig = {0};
  if (j->keys) {
    nimble_status_t t =
        nimble_fetch_signature_check(&j->http, j->cache, j->offline, &j->ref, j->text, mdigest, j->keys, &sig);
    if (t) {
      free(mbytes);
      return t;
    }
  } else {
    warn(j->o, "%s: the publisher of this artifact is not verified (no trusted keys: set "
               "NIMBLE_TRUSTED_KEYS; see docs/fetch.md)", j->text);
  }

  nimble_fetch_manifest_t *m = malloc(sizeof *m);
  want *ws = calloc(NIMBLE_FETCH_MAX_LAYERS + 1, sizeof *ws);
  nimble_status_t s = nimble_ok();
  if (!m || !ws) s = NIMBLE_OOM_IN("fetch");
  if (!s) s = nimble_fetch_manifest_parse(mbytes, msize, m);
  if (s) s = nimble_status_annotate(s, "fetch: %s", mdigest);
  size_t n = 0;
  int have[NIMBLE_PART_KERNELS_CUDA + 1] = {0};
  if (!s) {
    ws[n].desc = &m->config;
    snprintf(ws[n].where, sizeof ws[n].where, "config");
    n++;
    for (size_t i = 0; i < m->layer_count && !s; i++) {
      int part = layer_part(m->layers[i].media_type);
      if (part < 0) {
        s = nimble_status_make(NIMBLE_UNIMPLEMENTED, "fetch: %s: layers[%zu]: unknown media type '%s'",
                               mdigest, i, m->layers[i].media_type);
      } else if (part > 0 && have[part]++) {
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                               "fetch: %s: layers[%zu]: a second %s layer", mdigest, i,
                               m->layers[i].media_type);
      } else if (part > 0) {
        ws[n].desc = &m->layers[i];
        ws[n].part = part;
        snprintf(ws[n].where, sizeof ws[n].where, "layers[%zu]", i);
        n++;
      }
    }
  }
  if (!s && !have[NIMBLE_PART_METADATA]) {
    s = nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                           "fetch: %s: the manifest has no '%s' layer, which the runtime needs to load "
                           "an executable (see docs/fetch.md)",
                           mdigest, nimble_part_media_type(NIMBLE_PART_METADATA));
  }
  for (size_t i = 0; i < n && !s; i++) s = get_blob(j, &ws[i]);

  /* Everything is verified: now, and only now, the cache is updated. A
   * cache that cannot be written costs the next start a download, nothing
   * more, so it is a warning. */
  if (!s) {
    nimble_status_t c = nimble_ok();
    for (size_t i = 0; i < n && !c; i++)
      if (ws[i].fetched)
        c = nimble_fetch_cache_write_blob(j->cache, ws[i].desc->digest, ws[i].bytes, ws[i].size);
    if (!c && mfetched) c = nimble_fetch_cache_write_blob(j->cache, mdigest, mbytes, msize);
    if (!c && mfetched && j->ref.tag && !j->ref.digest)
      c = nimble_fetch_cache_write_tag(j->cache, &j->ref, mdigest);
    if (!c && sig.fetched) c = nimble_fetch_cache_write_blob(j->cache, sig.digest, sig.bytes, sig.size);
    if (!c && sig.fetched) {
      nimble_fetch_reference_t sref = j->ref;
      char tag[160];
      snprintf(tag, sizeof tag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, j->ref.tag);
      sref.tag = tag;
      c = nimble_fetch_cache_write_tag(j->cache, &sref, sig.digest);
    }
    if (c) {
      warn(j->o, "the cache was not updated: %s", nimble_status_message(c));
      nimble_status_free(c);
    }
  }
  if (!s) {
    nimble_executable_part_t parts[NIMBLE_FETCH_MAX_LAYERS];
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
      if (ws[i].part) parts[np++] = (nimble_executable_part_t){(nimble_part_kind_t)ws[i].part,
                                                                ws[i].bytes, ws[i].size};
    /* The loader copies what it keeps: these buffers are freed below. */
    s = nimble_executable_load_parts(parts, np, j->o->load_flags & ~(uint32_t)NIMBLE_LOAD_BORROW, out);
    if (s) s = nimble_status_annotate(s, "fetch: loading %s", mdigest);
    for (size_t i = 0; i < n && !s; i++) {
      if (ws[i].part != NIMBLE_PART_KERNELS_CPU) continue;
      s = check_kernels_target(*out, mdigest, ws[i].where, ws[i].desc->media_type);
      if (s) {
        nimble_executable_release(*out);
        *out = NULL;
      }
    }
  }
  for (size_t i = 0; ws && i < n; i++) free(ws[i].bytes);
  free(ws);
  free(m);
  free(mbytes);
  free(sig.bytes);
  return s;
}

nimble_status_t nimble_fetch_artifact_stats(const nimble_fetch_options_t *options,
                                            const char *reference, nimble_executable **out,
                                            nimble_fetch_stats_t *stats) {
  *out = NULL;
  nimble_fetch_options_t defaults;
  nimble_fetch_options_init(&defaults);
  if (options && options->struct_size != sizeof *options) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "fetch: options.struct_size is %zu, expected %zu (call nimble_fetch_options_init)",
                              options->struct_size, sizeof *options);
  }
  nimble_fetch_stats_t local;
  job j = {.o = options ? options : &defaults, .stats = stats ? stats : &local, .text = reference};
  memset(j.stats, 0, sizeof *j.stats);
  double t0 = now_ms();
  NIMBLE_RETURN_IF_ERROR(nimble_fetch_parse_reference(reference, &j.ref));
  nimble_status_t s = nimble_fetch_cache_dir(j.o, &j.cache);
  if (!s) {
    /* A cache that cannot be created still lets an online start work; it
     * only costs the next start a download (and an offline start fails
     * for want of cached blobs). */
    nimble_status_t p = nimble_fetch_cache_prepare(j.cache);
    if (p) {
      warn(j.o, "the cache cannot be used: %s", nimble_status_message(p));
      nimble_status_free(p);
    }
  }
  const char *keys_path = j.o->trusted_keys ? j.o->trusted_keys : getenv("NIMBLE_TRUSTED_KEYS");
  nimble_trusted_keys_t keys = {0};
  if (!s && keys_path && keys_path[0]) {
    s = nimble_trusted_keys_load(keys_path, &keys);
    if (s) s = nimble_status_annotate(s, "fetch: %s", reference);
    else j.keys = &keys;
  }
  if (!s) {
    j.offline = j.o->offline;
    j.http.options = j.o;
    j.http.token = j.o->token ? j.o->token : getenv("NIMBLE_TOKEN");
    s = run(&j, out);
  }
  j.stats->elapsed_ms = now_ms() - t0;
  free(j.cache);
  nimble_trusted_keys_deinit(&keys);
  nimble_fetch_reference_deinit(&j.ref);
  return s;
}

nimble_status_t nimble_fetch_artifact(const nimble_fetch_options_t *options, const char *reference,
                                      nimble_executable **out) {
  return nimble_fetch_artifact_stats(options, reference, out, NULL);
}
