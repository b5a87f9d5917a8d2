/* The publisher check: an artifact's signature object (`<tag>.sig` in its
 * repository, nimble/signature.h) must verify the statement (repository,
 * tag, the manifest digest the fetcher got) under one trusted key. It runs
 * after the manifest is fetched and before any blob is, so nothing the
 * check has not passed is ever mapped. The signature object is cached like
 * a blob, with a tag record `<tag>.sig` naming it, so an offline start from
 * the cache is checked the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch_internal.h"
#include "json_reader.h"
#include "nimble/digest.h"
#include "nimble/media_type.h"
#include "oci_manifest.h"

#define MAX_SIGNATURE_DOC (64u << 10)

static const char *str_field(const nimble_json_value *root, const char *key) {
  const nimble_json_value *v = nimble_json_get(root, key);
  if (!v || v->kind != NIMBLE_JSON_STRING || strlen(v->string) != v->length) return NULL;
  return v->string;
}

/* A copy of `ref` whose tag is "<tag>.sig"; free with deinit. */
static nimble_status_t sig_ref(const nimble_fetch_reference_t *ref, nimble_fetch_reference_t *out) {
  memset(out, 0, sizeof *out);
  out->base_url = strdup(ref->base_url);
  out->name = strdup(ref->name);
  if (asprintf(&out->tag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, ref->tag) < 0) out->tag = NULL;
  if (!out->base_url || !out->name || !out->tag) {
    nimble_fetch_reference_deinit(out);
    return NIMBLE_OOM_IN("fetch");
  }
  return nimble_ok();
}

/* GETs `<tag>.sig`, then its config blob (the signature object), verified
 * against the descriptor's digest. */
static nimble_status_t get_online(const nimble_fetch_http_t *http, const nimble_fetch_reference_t *ref,
                                  nimble_fetch_signature_t *out) {
  char *url = NULL;
  if (asprintf(&url, "%s/v2/%s/manifests/%s" NIMBLE_SIGNATURE_TAG_SUFFIX, ref->base_url, ref->name,
               ref->tag) < 0)
    return NIMBLE_OOM_IN("fetch");
  uint8_t *mb = NULL;
  size_t ms = 0;
  char header[72];
  nimble_status_t s = nimble_fetch_http_get(http, url, NIMBLE_MEDIA_TYPE_OCI_MANIFEST, MAX_SIGNATURE_DOC,
                                            UINT64_MAX, 0, &mb, &ms, header);
  free(url);
  if (s) return s;
  nimble_json_value *root = NULL;
  s = nimble_json_parse(mb, ms, &root);
  const nimble_json_value *cfg = s ? NULL : nimble_json_get(root, "config");
  const char *mt = cfg ? str_field(cfg, "mediaType") : NULL;
  const char *digest = cfg ? str_field(cfg, "digest") : NULL;
  const nimble_json_value *size = cfg ? nimble_json_get(cfg, "size") : NULL;
  if (!s && (!mt || strcmp(mt, NIMBLE_SIGNATURE_MEDIA_TYPE) != 0 || !digest ||
             !nimble_digest_valid(digest, strlen(digest)) || !size ||
             size->kind != NIMBLE_JSON_INT || size->integer <= 0 ||
             (uint64_t)size->integer > MAX_SIGNATURE_DOC)) {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "%s" NIMBLE_SIGNATURE_TAG_SUFFIX " is not a signature manifest (its config must "
                           "be a %s blob of at most %u bytes)",
                           ref->tag, NIMBLE_SIGNATURE_MEDIA_TYPE, MAX_SIGNATURE_DOC);
  }
  if (!s) {
    memcpy(out->digest, digest, strlen(digest) + 1);
    uint64_t want = (uint64_t)size->integer;
    if (asprintf(&url, "%s/v2/%s/blobs/%s", ref->base_url, ref->name, digest) < 0)
      s = NIMBLE_OOM_IN("fetch");
    if (!s) {
      s = nimble_fetch_http_get(http, url, NULL, want, want, 1, &out->bytes, &out->size, NULL);
      free(url);
    }
    char got[72];
    if (!s) nimble_fetch_digest_of(out->bytes, out->size, got);
    if (!s && strcmp(got, out->digest) != 0)
      s = nimble_status_make(NIMBLE_DATA_LOSS, "signature object %s: the store served bytes that hash to %s",
                             out->digest, got);
    if (!s) out->fetched = 1;
  }
  nimble_json_free(root);
  free(mb);
  return s;
}

static nimble_status_t get_cached(const char *cache, const nimble_fetch_reference_t *sref,
                                  int *found, nimble_fetch_signature_t *out) {
  *found = 0;
  if (!cache) return nimble_ok();
  NIMBLE_RETURN_IF_ERROR(nimble_fetch_cache_read_tag(cache, sref, found, out->digest));
  if (!*found) return nimble_ok();
  return nimble_fetch_cache_read_blob(cache, out->digest, MAX_SIGNATURE_DOC, found, &out->bytes,
                                      &out->size);
}

/* Verifies a signature object's bytes. */
static nimble_status_t verify(const nimble_trusted_keys_t *keys, const nimble_fetch_reference_t *ref,
                              const char *mdigest, const nimble_fetch_signature_t *sig) {
  nimble_json_value *root = NULL;
  nimble_status_t s = nimble_json_parse(sig->bytes, sig->size, &root);
  if (s) return nimble_status_annotate(s, "signature object %s", sig->digest);
  const char *format = str_field(root, "format");
  if (!format || strcmp(format, NIMBLE_SIGNATURE_FORMAT) != 0) {
    s = nimble_status_make(NIMBLE_PERMISSION_DENIED, "signature object %s: format is not '%s'", sig->digest,
                           NIMBLE_SIGNATURE_FORMAT);
  } else {
    s = nimble_signature_verify(keys, ref->name, ref->tag, mdigest, str_field(root, "repository"),
                                str_field(root, "tag"), str_field(root, "manifest"),
                                str_field(root, "key"), str_field(root, "signature"), NULL);
  }
  nimble_json_free(root);
  return s;
}

nimble_status_t nimble_fetch_signature_check(const nimble_fetch_http_t *http, const char *cache,
                                             int offline, const nimble_fetch_reference_t *ref,
                                             const char *ref_text, const char *mdigest,
                                             const nimble_trusted_keys_t *keys,
                                             nimble_fetch_signature_t *out) {
  memset(out, 0, sizeof *out);
  if (!ref->tag) {
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "fetch: %s: a digest reference names no tag, and signatures are made for "
                              "a tag (%s is set): use NAME:TAG@%s so the publisher can be checked",
                              ref_text, keys->source, ref->digest);
  }
  nimble_fetch_reference_t sref;
  NIMBLE_RETURN_IF_ERROR(sig_ref(ref, &sref));
  int found = 0;
  nimble_status_t s = nimble_ok();
  /* A pinned or offline start uses the cached signature object when it is
   * for this very manifest: no network, and still verified below. */
  if (ref->digest || offline) {
    nimble_status_t c = get_cached(cache, &sref, &found, out);
    if (!c && found && !offline) {
      /* Cached for another manifest (the tag has moved on): ask the store. */
      c = verify(keys, ref, mdigest, out);
    }
    if (c) {
      nimble_status_free(c);
      free(out->bytes);
      out->bytes = NULL;
      found = 0;
    }
  }
  nimble_status_t net = NULL;
  if (!found && !offline) {
    net = get_online(http, ref, out);
    if (net && nimble_status_code(net) == NIMBLE_UNAVAILABLE) {
      nimble_status_t c = get_cached(cache, &sref, &found, out);
      if (c) nimble_status_free(c), found = 0;
    } else {
      found = !net;
    }
  }
  if (!found && net && nimble_status_code(net) != NIMBLE_NOT_FOUND &&
      nimble_status_code(net) != NIMBLE_UNAVAILABLE) {
    /* There is something at <tag>.sig, but not a signature object. */
    s = nimble_status_make(NIMBLE_PERMISSION_DENIED,
                           "fetch: %s: not trusted: the signature %s cannot be used (%s); %s requires one",
                           ref_text, sref.tag, nimble_status_message(net), keys->source);
  } else if (!found) {
    s = nimble_status_make(NIMBLE_PERMISSION_DENIED,
                           "fetch: %s: unsigned: no signature %s%s (%s), and %s requires one",
                           ref_text, sref.tag, offline ? " in the cache" : "",
                           net ? nimble_status_message(net) : "not cached", keys->source);
  } else {
    s = verify(keys, ref, mdigest, out);
    if (s) s = nimble_status_annotate(s, "fetch: %s: not trusted", ref_text);
  }
  nimble_status_free(net);
  nimble_fetch_reference_deinit(&sref);
  if (s) {
    free(out->bytes);
    out->bytes = NULL;
  }
  return s;
}
