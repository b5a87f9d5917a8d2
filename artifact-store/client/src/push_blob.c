/* Blob uploads: HEAD first (skip what the store has), then either a
 * monolithic POST+PUT or a chunked upload (POST, PATCH per chunk, PUT with
 * the digest). A chunked upload interrupted by the network resumes from the
 * offset the server reports on GET of the upload URL. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_internal.h"

/* A blob's bytes: memory or a file, and their size. */
typedef struct blob_src_t {
  const uint8_t *data;
  int fd;
  uint64_t size;
} blob_src_t;


nimble_status_t nimble_store_blob_exists(nimble_store_client *c, const char *repo,
                                         const nimble_digest_t *digest, int *out_exists,
                                         uint64_t *out_size) {
  *out_exists = 0;
  if (out_size) *out_size = 0;
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  char ref[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(digest, ref);
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "blobs", ref, &url));
  store_request_t req = {.method = "HEAD", .url = url};
  store_response_t resp = {0};
  store_retry_t retry;
  store_retry_begin(&retry);
  nimble_status_t s = store_http_with_retry(c, &req, &resp, &retry);
  if (!s) {
    if (resp.status == 200) {
      *out_exists = 1;
      if (out_size) *out_size = resp.content_length >= 0 ? (uint64_t)resp.content_length : 0;
    } else if (resp.status != 404) {
      s = store_response_error(&req, &resp, retry.attempt);
    }
  }
  store_response_clear(&resp);
  free(url);
  return s;
}

/* Replaces *url with the resolved Location of a response. */
static nimble_status_t take_location(nimble_store_client *c, const store_request_t *req,
                                     const store_response_t *resp, char **url) {
  if (!resp->location)
    return nimble_status_make(NIMBLE_INTERNAL, "%s %s: HTTP %ld without a Location header",
                              req->method, req->url, resp->status);
  char *next = NULL;
  NIMBLE_RETURN_IF_ERROR_CTX(store_resolve_location(c, resp->location, &next), "%s %s",
                             req->method, req->url);
  free(*url);
  *url = next;
  return nimble_ok();
}

/* Checks the digest a server reports for what it stored. */
static nimble_status_t check_reported_digest(const store_request_t *req,
                                             const store_response_t *resp,
                                             const nimble_digest_t *want) {
  if (!resp->docker_digest) return nimble_ok();
  nimble_digest_t got;
  nimble_status_t s = nimble_digest_parse(resp->docker_digest, &got);
  if (s) return nimble_status_annotate(s, "%s %s: Docker-Content-Digest", req->method, req->url);
  if (!nimble_digest_equal(&got, want)) {
    char w[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(want, w);
    return nimble_status_make(NIMBLE_DATA_LOSS, "%s %s: the store reports digest %s, expected %s",
                              req->method, req->url, resp->docker_digest, w);
  }
  return nimble_ok();
}

/* POST to start an upload session; *out_url is its Location. */
static nimble_status_t start_upload(nimble_store_client *c, const char *repo, store_retry_t *retry,
                                    char **out_url) {
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "blobs/uploads/", NULL, &url));
  store_request_t req = {.method = "POST", .url = url};
  store_response_t resp = {0};
  nimble_status_t s = store_http_with_retry(c, &req, &resp, retry);
  if (!s && resp.status != 202) s = store_response_error(&req, &resp, retry->attempt);
  if (!s) {
    *out_url = NULL;
    s = take_location(c, &req, &resp, out_url);
  }
  store_response_clear(&resp);
  free(url);
  return s;
}

/* 409 on the final PUT: the store still runs the handler of an earlier
 * request on this session, typically our own PUT whose connection died (a
 * network cut, or curl resending it on a fresh connection) and which may be
 * committing the blob right now. Settled like a lost answer: back off, then
 * look whether the blob is there. */
static int commit_contended(const store_response_t *r) {
  return r->curl_code == CURLE_OK && r->status == 409;
}

/* 400 DIGEST_INVALID on a PUT that carried the blob: we hashed the bytes we
 * send, so the session got other bytes too. libcurl resends a request whose
 * reused connection died, and the store keeps what the dead request had
 * written into the session (a session file is append-only), so the session
 * holds a cut copy followed by the whole one. The store discarded it;
 * a new session carries the blob, once: a second mismatch is DATA_LOSS. */
static int session_spoiled(const store_response_t *r, const store_body_t *body) {
  return r->curl_code == CURLE_OK && r->status == 400 && body->length > 0 && r->body &&
         memmem(r->body, r->body_size, "DIGEST_INVALID", 14) != NULL;
}

/* 404 BLOB_UPLOAD_UNKNOWN on the final PUT of a session we just opened: the
 * session is gone, discarded by the store when an earlier request on it
 * (our own PUT, cut by the network and resent by libcurl on a fresh
 * connection) failed. Settled like a lost answer: back off, look whether
 * the blob is there, else start a new session. */
static int session_lost(const store_response_t *r) {
  return r->curl_code == CURLE_OK && r->status == 404 && r->body &&
         memmem(r->body, r->body_size, "BLOB_UPLOAD_UNKNOWN", 19) != NULL;
}

/* The final PUT ?digest=... with `body` (possibly empty). A retryable
 * failure, a contended commit (commit_contended) or a lost session
 * (session_lost) leaves the status ok and
 * the caller, seeing `resp`, looks for the blob and starts over. */
static nimble_status_t finish_upload(nimble_store_client *c, const char *upload_url,
                                     store_body_t *body, const nimble_digest_t *digest,
                                     store_retry_t *retry, store_response_t *resp,
                                     int tolerate_spoiled) {
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url_with_digest(upload_url, digest, &url));
  store_request_t req = {.method = "PUT", .url = url, .body = body,
                         .content_type = "application/octet-stream"};
  req.attempt = ++retry->attempt;
  nimble_status_t s = store_http_exchange(c, &req, resp);
  if (!s && !store_response_retryable(resp) && !commit_contended(resp) && !session_lost(resp) &&
      !(tolerate_spoiled && session_spoiled(resp, body))) {
    if (resp->status == 201 || resp->status == 204 || resp->status == 200)
      s = check_reported_digest(&req, resp, digest);
    else
      s = store_response_error(&req, resp, retry->attempt);
  }
  free(url);
  return s;
}

/* Parses "0-N" (or "bytes=0-N") and returns the next offset, N+1. A server
 * that has received nothing may answer "0-0" (CNCF distribution does), which
 * is ambiguous with one byte: we then return 0, and a 416 on the PATCH
 * sends us to offset 1. Returns -1 when absent or malformed. */
static int64_t parse_upload_range(const char *range) {
  if (!range) return -1;
  if (strncmp(range, "bytes=", 6) == 0) range += 6;
  if (range[0] != '0' || range[1] != '-') return -1;
  const char *p = range + 2;
  if (!*p) return -1;
  uint64_t end = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || end > (UINT64_C(1) << 60)) return -1;
    end = end * 10 + (uint64_t)(*p - '0');
  }
  return end == 0 ? 0 : (int64_t)end + 1;
}

static nimble_status_t upload_monolithic(nimble_store_client *c, const char *repo,
                                         const blob_src_t *src, const nimble_digest_t *digest,
                                         store_retry_t *retry) {
  int spoiled = 0; /* sessions spoiled so far: one is a cut, two is the store */
  for (;;) {
    char *upload_url = NULL;
    NIMBLE_RETURN_IF_ERROR(start_upload(c, repo, retry, &upload_url));
    store_body_t body = {.data = src->data, .fd = src->fd, .length = src->size};
    store_response_t resp = {0};
    nimble_status_t s = finish_upload(c, upload_url, &body, digest, retry, &resp, spoiled == 0);
    if (!s && session_spoiled(&resp, &body)) spoiled++;
    int again = !s && (store_response_retryable(&resp) || commit_contended(&resp) || session_lost(&resp) ||
                       session_spoiled(&resp, &body));
    if (again) {
      char *u = NULL;
      store_url_with_digest(upload_url, digest, &u);
      store_request_t req = {.method = "PUT", .url = u ? u : upload_url};
      if (!store_retry_next(c, retry, "PUT", req.url, &resp)) {
        s = store_response_error(&req, &resp, retry->attempt);
        again = 0;
      } else {
        /* The PUT whose answer we lost may have stored the blob. */
        int exists = 0;
        s = nimble_store_blob_exists(c, repo, digest, &exists, NULL);
        if (s || exists) again = 0;
      }
      free(u);
    }
    store_response_clear(&resp);
    free(upload_url);
    if (!again) return s;
  }
}

/* GET on the upload URL: the offset the server holds, and its new URL. */
static nimble_status_t query_upload(nimble_store_client *c, char **upload_url,
                                    store_retry_t *retry, int64_t *out_offset) {
  store_request_t req = {.method = "GET", .url = *upload_url};
  store_response_t resp = {0};
  nimble_status_t s = store_http_with_retry(c, &req, &resp, retry);
  if (!s && resp.status != 204 && resp.status != 200)
    s = store_response_error(&req, &resp, retry->attempt);
  if (!s) {
    *out_offset = parse_upload_range(resp.range);
    if (resp.location) s = take_location(c, &req, &resp, upload_url);
  }
  store_response_clear(&resp);
  return s;
}

static nimble_status_t upload_chunked(nimble_store_client *c, const char *repo,
                                      const blob_src_t *src, const nimble_digest_t *digest,
                                      store_retry_t *retry) {
  char *upload_url = NULL;
  NIMBLE_RETURN_IF_ERROR(start_upload(c, repo, retry, &upload_url));
  nimble_status_t s = nimble_ok();
  uint64_t offset = 0;
  int tried_offset_one = 0;
  int restarts = 0;
  store_response_t resp = {0};
from_the_start:
  while (!s && offset < src->size) {
    uint64_t len = src->size - offset;
    if (len > c->opts.chunk_size) len = c->opts.chunk_size;
    char crange[64];
    snprintf(crange, sizeof(crange), "%" PRIu64 "-%" PRIu64, offset, offset + len - 1);
    store_body_t body = {.data = src->data, .fd = src->fd, .offset = offset, .length = len};
    store_request_t req = {.method = "PATCH", .url = upload_url, .body = &body,
                           .content_type = "application/octet-stream", .content_range = crange,
                           .attempt = retry->attempt + 1};
    retry->attempt++;
    s = store_http_exchange(c, &req, &resp);
    if (s) break;
    if (resp.status == 202) {
      s = take_location(c, &req, &resp, &upload_url);
      if (s) break;
      int64_t next = parse_upload_range(resp.range);
      /* The server says how much it holds; trust it over our count. */
      uint64_t after = next > 0 ? (uint64_t)next : offset + len;
      if (after > src->size) {
        s = nimble_status_make(NIMBLE_INTERNAL, "PATCH %s: the store reports Range %s past the "
                               "blob's %" PRIu64 " bytes", req.url, resp.range, src->size);
        break;
      }
      if (after <= offset) {
        /* Accepted, yet nothing kept: retry within the budget, never loop. */
        if (!store_retry_next(c, retry, req.method, req.url, &resp)) {
          s = nimble_status_make(NIMBLE_INTERNAL, "PATCH %s: the store keeps %" PRIu64
                                 " bytes after %d attempts to send more", req.url, after,
                                 retry->attempt);
          break;
        }
        offset = after;
        continue;
      }
      offset = after;
      /* Progress made: attempts and time are budgeted per failure streak. */
      store_retry_begin(retry);
      continue;
    }
    int answered = resp.curl_code == CURLE_OK;
    if (answered && resp.status == 416 && offset == 0 && !tried_offset_one) {
      /* See parse_upload_range: "0-0" may have meant one byte. */
      tried_offset_one = 1;
      offset = 1;
      continue;
    }
    /* 404 mid-upload: the session is gone or no longer valid. CNCF
     * distribution answers so when a PATCH was cut after part of its body
     * was written (the _state it signed no longer matches). 416: we and the
     * server disagree on the offset, e.g. because curl resent a PATCH whose
     * reused connection died. 409: the server still runs the handler of
     * that dead request (nimble-store says the session is "in use"). All
     * are settled, after a backoff, by asking the server below, or by a
     * new session. */
    int resync = answered && (resp.status == 404 || resp.status == 416 || resp.status == 409);
    if (!resync && !store_response_retryable(&resp)) {
      s = store_response_error(&req, &resp, retry->attempt);
      break;
    }
    if (!store_retry_next(c, retry, req.method, req.url, &resp)) {
      s = store_response_error(&req, &resp, retry->attempt);
      break;
    }
    /* The chunk may have arrived in part: ask where to go on from. */
    int64_t held = -1;
    s = query_upload(c, &upload_url, retry, &held);
    if (s || held < 0 || (uint64_t)held > src->size) {
      nimble_status_free(s);
      s = nimble_ok();
      /* No usable answer (the session may be gone): start a new one. */
      char *fresh = NULL;
      s = start_upload(c, repo, retry, &fresh);
      if (s) break;
      free(upload_url);
      upload_url = fresh;
      held = 0;
    }
    offset = (uint64_t)held;
    tried_offset_one = 0;
  }
  if (!s) {
    store_body_t empty = {.fd = -1};
    for (;;) {
      s = finish_upload(c, upload_url, &empty, digest, retry, &resp, 0);
      int contended = !s && commit_contended(&resp);
      /* A lost session is settled like a lost answer (below). */
      if (s || (!store_response_retryable(&resp) && !contended && !session_lost(&resp))) break;
      store_request_t req = {.method = "PUT", .url = upload_url};
      /* A contended commit is still running: give it time first. */
      if (contended && !store_retry_next(c, retry, req.method, req.url, &resp)) {
        s = store_response_error(&req, &resp, retry->attempt);
        break;
      }
      /* The commit may have happened with the answer lost: look. */
      int exists = 0;
      s = nimble_store_blob_exists(c, repo, digest, &exists, NULL);
      if (s || exists) break;
      /* Not there: a contended session may be ours again. A lost answer
       * with no blob: the store may have restarted, which clears its
       * sessions (store.md, On disk), so upload again in a new session, at
       * most max_attempts times. */
      if (!contended) {
        if (restarts++ < c->opts.max_attempts &&
            store_retry_next(c, retry, req.method, req.url, &resp)) {
          char *fresh = NULL;
          s = start_upload(c, repo, retry, &fresh);
          if (s) break;
          free(upload_url);
          upload_url = fresh;
          offset = 0;
          tried_offset_one = 0;
          store_response_clear(&resp);
          goto from_the_start;
        }
        s = store_response_error(&req, &resp, retry->attempt);
        break;
      }
      store_response_clear(&resp);
    }
  }
  store_response_clear(&resp);
  free(upload_url);
  return s;
}

static nimble_status_t push_src(nimble_store_client *c, const char *repo, const blob_src_t *src,
                                const nimble_digest_t *digest) {
  int exists = 0;
  uint64_t have = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_store_blob_exists(c, repo, digest, &exists, &have));
  if (exists) return nimble_ok();
  store_retry_t retry;
  store_retry_begin(&retry);
  if (src->size <= c->opts.monolithic_max) return upload_monolithic(c, repo, src, digest, &retry);
  return upload_chunked(c, repo, src, digest, &retry);
}

nimble_status_t nimble_store_push_blob(nimble_store_client *c, const char *repo, const void *data,
                                       size_t size, nimble_digest_t *out_digest) {
  if (!data && size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "push_blob: NULL data with size %zu", size);
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  nimble_digest_t d;
  nimble_digest_compute(data, size, &d);
  static const uint8_t empty = 0;
  blob_src_t src = {.data = data ? data : &empty, .fd = -1, .size = size};
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, text);
  NIMBLE_RETURN_IF_ERROR_CTX(push_src(c, repo, &src, &d), "pushing blob %s to %s", text, repo);
  if (out_digest) *out_digest = d;
  return nimble_ok();
}

nimble_status_t nimble_store_push_blob_file(nimble_store_client *c, const char *repo,
                                            const char *path, nimble_digest_t *out_digest,
                                            uint64_t *out_size) {
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nimble_status_make(NIMBLE_IO_ERROR, "open %s: %s", path, strerror(errno));
  nimble_status_t s = nimble_ok();
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is not a regular file", path);
    goto out;
  }
  /* One streaming pass for the digest (the HEAD and the final PUT need it
   * before the upload starts), then the upload reads the file again. */
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  uint64_t total = 0;
  uint8_t *buf = malloc(1 << 20);
  if (!buf) { s = NIMBLE_OOM(); goto out; }
  for (;;) {
    ssize_t n = read(fd, buf, 1 << 20);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "read %s: %s", path, strerror(errno));
      break;
    }
    if (n == 0) break;
    nimble_digest_ctx_update(&ctx, buf, (size_t)n);
    total += (uint64_t)n;
  }
  free(buf);
  if (s) goto out;
  if (total != (uint64_t)st.st_size) {
    s = nimble_status_make(NIMBLE_FAILED_PRECONDITION, "%s changed size while being read", path);
    goto out;
  }
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  blob_src_t src = {.fd = fd, .size = total};
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, text);
  s = push_src(c, repo, &src, &d);
  if (s) {
    s = nimble_status_annotate(s, "pushing %s (%s) to %s", path, text, repo);
    goto out;
  }
  if (out_digest) *out_digest = d;
  if (out_size) *out_size = total;
out:
  close(fd);
  return s;
}
