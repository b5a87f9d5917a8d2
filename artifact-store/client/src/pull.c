/* Pulls: manifests (by tag or digest) and blobs (into memory or a file),
 * every byte checked against its digest before it is handed out. Blob
 * downloads hash as they go and resume with "Range: bytes=N-" after a
 * transfer cut short; a server that answers 200 instead of 206 restarts the
 * hash from zero. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "nimble/media_type.h"

/* What we accept for manifests: OCI and Docker manifests and indexes, and
 * anything else a store holds (Nimble's artifact manifests). */
static const char kManifestAccept[] =
    NIMBLE_MEDIA_TYPE_OCI_MANIFEST ", " NIMBLE_MEDIA_TYPE_OCI_INDEX ", "
    NIMBLE_MEDIA_TYPE_DOCKER_MANIFEST ", " NIMBLE_MEDIA_TYPE_DOCKER_LIST ", */*";

static nimble_status_t check_reference(const char *reference, int *out_is_digest,
                                       nimble_digest_t *out_digest) {
  if (reference && strncmp(reference, "sha256:", 7) == 0) {
    *out_is_digest = 1;
    return nimble_digest_parse(reference, out_digest);
  }
  *out_is_digest = 0;
  return store_check_tag(reference);
}

static nimble_status_t digest_mismatch(const char *what, const char *url,
                                       const nimble_digest_t *want, const nimble_digest_t *got) {
  char w[NIMBLE_DIGEST_STRING_LEN + 1], g[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(want, w);
  nimble_digest_format(got, g);
  return nimble_status_make(NIMBLE_DATA_LOSS, "%s from %s: content has digest %s, expected %s",
                            what, url, g, w);
}

nimble_status_t nimble_store_pull_manifest(nimble_store_client *c, const char *repo,
                                           const char *reference, uint8_t **out_bytes,
                                           size_t *out_size, char **out_media_type,
                                           nimble_digest_t *out_digest) {
  *out_bytes = NULL;
  *out_size = 0;
  if (out_media_type) *out_media_type = NULL;
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  int by_digest = 0;
  nimble_digest_t want;
  NIMBLE_RETURN_IF_ERROR_CTX(check_reference(reference, &by_digest, &want), "manifest reference");
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "manifests", reference, &url));
  store_request_t req = {.method = "GET", .url = url, .accept = kManifestAccept,
                         .body_cap = c->opts.max_manifest_size};
  store_response_t resp = {0};
  store_retry_t retry;
  store_retry_begin(&retry);
  nimble_status_t s = store_http_with_retry(c, &req, &resp, &retry);
  if (s) goto out;
  if (resp.over_cap) {
    s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                           "GET %s: manifest is larger than the %zu-byte cap", url,
                           c->opts.max_manifest_size);
    goto out;
  }
  if (resp.status != 200 || resp.curl_code != CURLE_OK) {
    s = store_response_error(&req, &resp, retry.attempt);
    goto out;
  }
  if (resp.content_length >= 0 && (uint64_t)resp.content_length != resp.body_size) {
    s = nimble_status_make(NIMBLE_DATA_LOSS, "GET %s: got %zu bytes, Content-Length said %" PRId64,
                           url, resp.body_size, resp.content_length);
    goto out;
  }
  nimble_digest_t got;
  nimble_digest_compute(resp.body, resp.body_size, &got);
  if (by_digest && !nimble_digest_equal(&got, &want)) {
    s = digest_mismatch("manifest", url, &want, &got);
    goto out;
  }
  if (!by_digest && resp.docker_digest) {
    nimble_digest_t said;
    s = nimble_digest_parse(resp.docker_digest, &said);
    if (s) {
      s = nimble_status_annotate(s, "GET %s: Docker-Content-Digest", url);
      goto out;
    }
    if (!nimble_digest_equal(&got, &said)) {
      s = digest_mismatch("manifest", url, &said, &got);
      goto out;
    }
  }
  if (out_media_type) {
    *out_media_type = strdup(resp.content_type ? resp.content_type : "");
    if (!*out_media_type) {
      s = NIMBLE_OOM();
      goto out;
    }
  }
  if (out_digest) *out_digest = got;
  /* Hand over the buffer; an empty manifest still gets a non-NULL pointer. */
  *out_bytes = resp.body ? resp.body : malloc(1);
  *out_size = resp.body_size;
  resp.body = NULL;
  if (!*out_bytes) s = NIMBLE_OOM();
out:
  store_response_clear(&resp);
  free(url);
  return s;
}

/* Most interrupted transfers one download resumes from. */
#define MAX_RESUMES 100

/* A blob download in progress: where the bytes go, and their hash so far. */
typedef struct download_t {
  nimble_store_client *client;
  const store_response_t *resp;  /* the exchange in flight: status, headers */
  const char *url;
  int started;                   /* this exchange already wrote a byte */
  nimble_digest_ctx_t ctx;
  uint64_t have;                 /* bytes received and hashed */
  uint64_t total;                /* expected size; UINT64_MAX while unknown */
  uint64_t cap;
  uint64_t next_progress;
  /* Destination: memory (fd < 0) or a file. */
  uint8_t *buf;
  size_t alloc;
  int fd;
  char problem[256];             /* why the sink stopped the transfer */
  nimble_status_code_t problem_code;
} download_t;

/* Parses "bytes START-END/TOTAL" (TOTAL may be "*"). */
static int parse_content_range(const char *v, uint64_t *start, uint64_t *total) {
  if (!v || strncmp(v, "bytes ", 6) != 0) return 0;
  const char *p = v + 6;
  uint64_t nums[3] = {0, 0, UINT64_MAX};
  for (int i = 0; i < 3; i++) {
    if (i == 2 && *p == '*') { p++; break; }
    if (*p < '0' || *p > '9') return 0;
    uint64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
      if (x > (UINT64_C(1) << 60)) return 0;
      x = x * 10 + (uint64_t)(*p - '0');
    }
    nums[i] = x;
    if (i == 0 && *p++ != '-') return 0;
    if (i == 1 && *p++ != '/') return 0;
  }
  if (*p) return 0;
  *start = nums[0];
  *total = nums[2];
  return 1;
}

static int download_fail(download_t *d, nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int download_fail(download_t *d, nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->problem, sizeof(d->problem), fmt, ap);
  va_end(ap);
  d->problem_code = code;
  return EPROTO;
}

/* First bytes of an exchange: decide whether they continue what we have
 * (206 at our offset) or start over (200), and check the size early. */
static int download_begin_exchange(download_t *d) {
  const store_response_t *r = d->resp;
  if (r->status == 206) {
    uint64_t start = 0, total = UINT64_MAX;
    if (!parse_content_range(r->content_range, &start, &total))
      return download_fail(d, NIMBLE_INTERNAL, "206 with a malformed Content-Range '%s'",
                           r->content_range ? r->content_range : "(none)");
    if (start != d->have)
      return download_fail(d, NIMBLE_INTERNAL,
                           "asked for bytes from %" PRIu64 ", got a range starting at %" PRIu64,
                           d->have, start);
    if (total != UINT64_MAX) {
      if (d->total != UINT64_MAX && d->total != total)
        return download_fail(d, NIMBLE_DATA_LOSS,
                             "the blob's size changed from %" PRIu64 " to %" PRIu64 " bytes",
                             d->total, total);
      d->total = total;
    }
  } else {
    /* A full body: whatever we had is replaced. */
    d->have = 0;
    nimble_digest_ctx_init(&d->ctx);
    if (d->fd >= 0 && (ftruncate(d->fd, 0) != 0 || lseek(d->fd, 0, SEEK_SET) != 0))
      return download_fail(d, NIMBLE_IO_ERROR, "truncating the temporary file: %s",
                           strerror(errno));
    if (r->content_length >= 0) d->total = (uint64_t)r->content_length;
  }
  if (d->total != UINT64_MAX && d->total > d->cap)
    return download_fail(d, NIMBLE_RESOURCE_EXHAUSTED,
                         "the blob is %" PRIu64 " bytes, over the %" PRIu64 "-byte cap", d->total,
                         d->cap);
  if (d->fd < 0 && d->total != UINT64_MAX && d->total > d->alloc) {
    /* Size known and under the cap: allocate once. */
    uint8_t *p = realloc(d->buf, d->total ? (size_t)d->total : 1);
    if (!p) return download_fail(d, NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
    d->buf = p;
    d->alloc = (size_t)d->total;
  }
  return 0;
}

static int download_sink(void *user, const uint8_t *data, size_t n) {
  download_t *d = user;
  if (!d->started) {
    d->started = 1;
    int err = download_begin_exchange(d);
    if (err) return err;
  }
  if (n > d->cap - d->have || (d->total != UINT64_MAX && n > d->total - d->have))
    return download_fail(d, d->total != UINT64_MAX && d->have + n > d->total ? NIMBLE_DATA_LOSS
                                                                              : NIMBLE_RESOURCE_EXHAUSTED,
                         "the body runs past %" PRIu64 " bytes",
                         d->total != UINT64_MAX ? d->total : d->cap);
  if (d->fd >= 0) {
    size_t done = 0;
    while (done < n) {
      ssize_t w = write(d->fd, data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return download_fail(d, NIMBLE_IO_ERROR, "writing: %s", strerror(errno));
      done += (size_t)w;
    }
  } else {
    if (d->have + n > d->alloc) {
      size_t want = d->alloc ? d->alloc : 65536;
      while (want < d->have + n) want = want > SIZE_MAX / 2 ? SIZE_MAX : want * 2;
      if (want > d->cap) want = (size_t)d->cap;
      uint8_t *p = realloc(d->buf, want);
      if (!p) return download_fail(d, NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
      d->buf = p;
      d->alloc = want;
    }
    memcpy(d->buf + d->have, data, n);
  }
  nimble_digest_ctx_update(&d->ctx, data, n);
  d->have += n;
  if (d->have >= d->next_progress || d->have == d->total) {
    d->next_progress = d->have + (1u << 20);
    nimble_store_event_t ev = {.kind = NIMBLE_STORE_EVENT_PROGRESS, .method = "GET", .url = d->url,
                               .bytes_done = d->have,
                               .bytes_total = d->total == UINT64_MAX ? 0 : d->total};
    store_emit(d->client, &ev);
  }
  return 0;
}

/* Downloads the blob into d (memory or d->fd) and verifies its digest. */
static nimble_status_t download_blob(nimble_store_client *c, const char *repo,
                                     const nimble_digest_t *digest, download_t *d) {
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  char ref[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(digest, ref);
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "blobs", ref, &url));
  d->client = c;
  d->url = url;
  d->total = UINT64_MAX;
  d->next_progress = 1u << 20;
  nimble_digest_ctx_init(&d->ctx);
  store_retry_t retry;
  store_retry_begin(&retry);
  store_response_t resp = {0};
  nimble_status_t s = nimble_ok();
  char range[48];
  int resumes = 0;
  for (;;) {
    int resuming = d->have > 0;
    if (resuming) snprintf(range, sizeof(range), "bytes=%" PRIu64 "-", d->have);
    store_request_t req = {.method = "GET", .url = url, .range = resuming ? range : NULL,
                           .sink = download_sink, .sink_user = d};
    req.attempt = ++retry.attempt;
    d->resp = &resp;
    d->started = 0;
    uint64_t had = d->have;
    s = store_http_exchange(c, &req, &resp);
    if (s) break;
    if (resp.sink_error) {
      s = nimble_status_make(d->problem_code, "GET %s: %s", url, d->problem);
      break;
    }
    if (resp.curl_code == CURLE_OK && (resp.status == 200 || resp.status == 206)) break;
    if (resp.curl_code == CURLE_OK && resp.status == 416 && resuming && d->total == d->have) {
      /* We had every byte; the cut came after the last one. */
      break;
    }
    if (!store_response_retryable(&resp)) {
      s = store_response_error(&req, &resp, retry.attempt);
      break;
    }
    /* Bytes arrived before the cut: the next attempt goes on from them, and
     * the failure streak starts again; but a peer that trickles a few bytes
     * per connection must not keep us forever. */
    if (d->have > had) {
      if (++resumes > MAX_RESUMES) {
        s = nimble_status_make(NIMBLE_DATA_LOSS,
                               "GET %s: gave up after %d interrupted transfers (%" PRIu64
                               " bytes received)", url, MAX_RESUMES, d->have);
        break;
      }
      store_retry_begin(&retry);
    }
    if (!store_retry_next(c, &retry, req.method, url, &resp)) {
      s = store_response_error(&req, &resp, retry.attempt);
      break;
    }
  }
  if (!s && d->total != UINT64_MAX && d->have != d->total)
    s = nimble_status_make(NIMBLE_DATA_LOSS, "GET %s: got %" PRIu64 " of %" PRIu64 " bytes", url,
                           d->have, d->total);
  if (!s) {
    nimble_digest_t got;
    nimble_digest_ctx_final(&d->ctx, &got);
    if (!nimble_digest_equal(&got, digest)) s = digest_mismatch("blob", url, digest, &got);
  }
  store_response_clear(&resp);
  free(url);
  return s;
}

nimble_status_t nimble_store_pull_blob(nimble_store_client *c, const char *repo,
                                       const nimble_digest_t *digest, uint8_t **out_bytes,
                                       size_t *out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  download_t d = {.fd = -1, .cap = c->opts.max_blob_size};
  nimble_status_t s = download_blob(c, repo, digest, &d);
  if (s) {
    free(d.buf);
    return s;
  }
  if (!d.buf) d.buf = malloc(1);
  if (!d.buf) return NIMBLE_OOM();
  *out_bytes = d.buf;
  *out_size = (size_t)d.have;
  return nimble_ok();
}

nimble_status_t nimble_store_pull_blob_to_file(nimble_store_client *c, const char *repo,
                                               const nimble_digest_t *digest, const char *path) {
  size_t n = strlen(path);
  char *tmp = malloc(n + sizeof(".partXXXXXX"));
  if (!tmp) return NIMBLE_OOM();
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".partXXXXXX", sizeof(".partXXXXXX"));
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "creating %s: %s", tmp, strerror(errno));
    free(tmp);
    return s;
  }
  download_t d = {.fd = fd, .cap = UINT64_MAX};
  nimble_status_t s = download_blob(c, repo, digest, &d);
  if (!s && fsync(fd) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "fsync %s: %s", tmp, strerror(errno));
  if (close(fd) != 0 && !s)
    s = nimble_status_make(NIMBLE_IO_ERROR, "close %s: %s", tmp, strerror(errno));
  if (!s && rename(tmp, path) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "rename %s to %s: %s", tmp, path, strerror(errno));
  if (s) {
    unlink(tmp);
    free(tmp);
    return nimble_status_annotate(s, "pulling into %s", path);
  }
  /* Make the rename itself durable. */
  char *dir_copy = strdup(path);
  if (dir_copy) {
    int dfd = open(dirname(dir_copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
    free(dir_copy);
  }
  free(tmp);
  return nimble_ok();
}
