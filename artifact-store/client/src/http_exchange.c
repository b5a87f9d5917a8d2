/* One HTTP exchange over the client's reused curl handle: request headers,
 * request body from memory or a file, response headers we care about, and a
 * response body that goes to a sink (2xx) or a capped buffer. */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client_internal.h"

/* Error bodies are only for messages; keep at most this much. */
#define ERROR_BODY_CAP (64 * 1024)
/* Report upload progress at most once per this many bytes. */
#define PROGRESS_STEP (1u << 20)

typedef struct exchange_t {
  nimble_store_client *client;
  const store_request_t *req;
  store_response_t *resp;
  uint64_t next_progress;
  int out_of_memory;
} exchange_t;

void store_response_clear(store_response_t *r) {
  free(r->location);
  free(r->content_type);
  free(r->docker_digest);
  free(r->range);
  free(r->www_authenticate);
  free(r->retry_after);
  free(r->link);
  free(r->content_range);
  free(r->body);
  memset(r, 0, sizeof(*r));
  r->content_length = -1;
}

static void reset_headers(store_response_t *r) {
  char **fields[] = {&r->location, &r->content_type, &r->docker_digest, &r->range,
                     &r->www_authenticate, &r->retry_after, &r->link, &r->content_range};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    free(*fields[i]);
    *fields[i] = NULL;
  }
  r->content_length = -1;
  r->body_size = 0;
}

static int is_2xx(long status) { return status >= 200 && status < 300; }

static size_t on_header(char *buffer, size_t size, size_t nitems, void *user) {
  exchange_t *x = user;
  store_response_t *r = x->resp;
  size_t n = size * nitems;
  if (n >= 5 && memcmp(buffer, "HTTP/", 5) == 0) {
    /* A new status line (after 100 Continue or a redirect): start over. */
    reset_headers(r);
    const char *sp = memchr(buffer, ' ', n);
    r->status = 0;
    if (sp && (size_t)(sp - buffer) + 4 <= n) {
      long st = 0;
      for (int i = 1; i <= 3; i++) {
        char ch = sp[i];
        if (ch < '0' || ch > '9') { st = 0; break; }
        st = st * 10 + (ch - '0');
      }
      r->status = st;
    }
    return n;
  }
  const char *colon = memchr(buffer, ':', n);
  if (!colon) return n;
  size_t name_len = (size_t)(colon - buffer);
  const char *v = colon + 1;
  const char *end = buffer + n;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
  size_t vlen = (size_t)(end - v);
  static const struct { const char *name; size_t off; } wanted[] = {
      {"location", offsetof(store_response_t, location)},
      {"content-type", offsetof(store_response_t, content_type)},
      {"docker-content-digest", offsetof(store_response_t, docker_digest)},
      {"range", offsetof(store_response_t, range)},
      {"www-authenticate", offsetof(store_response_t, www_authenticate)},
      {"retry-after", offsetof(store_response_t, retry_after)},
      {"link", offsetof(store_response_t, link)},
      {"content-range", offsetof(store_response_t, content_range)},
  };
  for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
    if (strlen(wanted[i].name) == name_len && strncasecmp(buffer, wanted[i].name, name_len) == 0) {
      char **field = (char **)((char *)r + wanted[i].off);
      char *copy = strndup(v, vlen);
      if (!copy) { x->out_of_memory = 1; return 0; }
      free(*field);
      *field = copy;
      return n;
    }
  }
  if (name_len == 14 && strncasecmp(buffer, "content-length", 14) == 0) {
    /* Parse by hand: strtoll would accept signs and spaces. */
    uint64_t len = 0;
    int ok = vlen > 0;
    for (size_t i = 0; i < vlen && ok; i++) {
      if (v[i] < '0' || v[i] > '9' || len > (UINT64_C(1) << 62) / 10) ok = 0;
      else len = len * 10 + (uint64_t)(v[i] - '0');
    }
    r->content_length = ok ? (int64_t)len : -1;
    /* Refuse a 2xx body over its cap before a single byte is allocated. */
    if (ok && is_2xx(r->status) && !x->req->sink && x->req->body_cap &&
        len > (uint64_t)x->req->body_cap && strcmp(x->req->method, "HEAD") != 0) {
      r->over_cap = 1;
      return 0;
    }
  }
  return n;
}

static int append(exchange_t *x, const uint8_t *data, size_t n, size_t cap) {
  store_response_t *r = x->resp;
  /* Invariant: body_size <= cap. A 2xx body over its cap aborts; an error
   * body is only for the message, so it is cut silently. */
  if (n > cap - r->body_size) {
    if (is_2xx(r->status)) { r->over_cap = 1; return -1; }
    n = cap - r->body_size;
  }
  if (n == 0) return 0;
  if (r->body_size + n > r->body_alloc) {
    size_t want = r->body_alloc ? r->body_alloc : 4096;
    while (want < r->body_size + n) want = want > SIZE_MAX / 2 ? SIZE_MAX : want * 2;
    if (want > cap) want = cap;
    uint8_t *p = realloc(r->body, want);
    if (!p) { x->out_of_memory = 1; return -1; }
    r->body = p;
    r->body_alloc = want;
  }
  memcpy(r->body + r->body_size, data, n);
  r->body_size += n;
  return 0;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *user) {
  exchange_t *x = user;
  store_response_t *r = x->resp;
  size_t n = size * nmemb;
  if (is_2xx(r->status) && x->req->sink) {
    int err = x->req->sink(x->req->sink_user, (const uint8_t *)ptr, n);
    if (err) { r->sink_error = err; return 0; }
    r->sink_bytes += n;
    return n;
  }
  size_t cap = is_2xx(r->status) ? (x->req->body_cap ? x->req->body_cap : SIZE_MAX) : ERROR_BODY_CAP;
  if (append(x, (const uint8_t *)ptr, n, cap) != 0) return 0;
  return n;
}

static size_t on_read(char *buffer, size_t size, size_t nitems, void *user) {
  exchange_t *x = user;
  store_body_t *b = x->req->body;
  if (!b) return 0;
  size_t want = size * nitems;
  uint64_t left = b->length - b->pos;
  if (want > left) want = (size_t)left;
  if (want == 0) return 0;
  if (b->data) {
    memcpy(buffer, b->data + b->offset + b->pos, want);
  } else {
    ssize_t got;
    do {
      got = pread(b->fd, buffer, want, (off_t)(b->offset + b->pos));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      b->read_error = got < 0 ? errno : EIO;
      return CURL_READFUNC_ABORT;
    }
    want = (size_t)got;
  }
  b->pos += want;
  if (b->pos >= x->next_progress || b->pos == b->length) {
    x->next_progress = b->pos + PROGRESS_STEP;
    nimble_store_event_t ev = {.kind = NIMBLE_STORE_EVENT_PROGRESS,
                               .method = x->req->method, .url = x->req->url,
                               .attempt = x->req->attempt,
                               .bytes_done = b->offset + b->pos,
                               .bytes_total = 0};
    store_emit(x->client, &ev);
  }
  return want;
}

static int on_seek(void *user, curl_off_t offset, int origin) {
  exchange_t *x = user;
  store_body_t *b = x->req->body;
  if (!b || origin != SEEK_SET || offset < 0 || (uint64_t)offset > b->length)
    return CURL_SEEKFUNC_CANTSEEK;
  b->pos = (uint64_t)offset;
  return CURL_SEEKFUNC_OK;
}

static nimble_status_t exchange_once(nimble_store_client *c, const store_request_t *req,
                                     store_response_t *resp) {
  store_response_clear(resp);
  exchange_t x = {.client = c, .req = req, .resp = resp, .next_progress = PROGRESS_STEP};
  CURL *h = c->curl;
  /* reset keeps live connections, so consecutive requests reuse them. */
  curl_easy_reset(h);

  struct curl_slist *headers = NULL;
  char line[512];
  nimble_status_t status = nimble_ok();
#define ADD_HEADER(text)                                                   \
  do {                                                                     \
    struct curl_slist *n_ = curl_slist_append(headers, (text));            \
    if (!n_) { status = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,       \
                                           "out of memory building headers"); \
               goto done; }                                                \
    headers = n_;                                                          \
  } while (0)

  /* No "Expect: 100-continue": not every server answers it, and curl would
   * then wait a second before every upload. */
  ADD_HEADER("Expect:");
  if (c->auth_header) ADD_HEADER(c->auth_header);
  if (req->accept) {
    snprintf(line, sizeof(line), "Accept: %s", req->accept);
    ADD_HEADER(line);
  }
  if (req->content_type) {
    snprintf(line, sizeof(line), "Content-Type: %s", req->content_type);
    ADD_HEADER(line);
  }
  if (req->content_range) {
    snprintf(line, sizeof(line), "Content-Range: %s", req->content_range);
    ADD_HEADER(line);
  }
  if (req->range) {
    snprintf(line, sizeof(line), "Range: %s", req->range);
    ADD_HEADER(line);
  }

  curl_easy_setopt(h, CURLOPT_URL, req->url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, resp->curl_error);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (c->opts.stall_timeout_ms + 999) / 1000);
  if (c->opts.request_timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->opts.request_timeout_ms);
  /* Let curl decode nothing: digests are over the bytes as stored. */
  curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);

  if (strcmp(req->method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (strcmp(req->method, "GET") == 0) {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    /* Every other method sends a body (possibly empty) with a known length. */
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &x);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, &x);
    curl_off_t len = req->body ? (curl_off_t)(req->body->length) : 0;
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, len);
    if (req->body) req->body->pos = 0;
  }

  resp->curl_code = curl_easy_perform(h);
  if (x.out_of_memory) {
    status = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s %s: out of memory", req->method,
                                req->url);
    goto done;
  }
  if (req->body && req->body->read_error) {
    status = nimble_status_make(NIMBLE_IO_ERROR, "%s %s: reading the request body: %s",
                                req->method, req->url, strerror(req->body->read_error));
    goto done;
  }
  /* A transfer error (typically a body cut short) counts as a network
   * failure even when a status line arrived first: callers look at
   * curl_code before status. Make sure it has words. */
  if (resp->curl_code != CURLE_OK && !resp->curl_error[0])
    snprintf(resp->curl_error, sizeof(resp->curl_error), "%s", curl_easy_strerror(resp->curl_code));

done:;
  nimble_store_event_t ev = {.kind = NIMBLE_STORE_EVENT_RESPONSE, .method = req->method,
                             .url = req->url, .range = req->range,
                             .http_status = resp->curl_code == CURLE_OK ? resp->status : 0,
                             .error = resp->curl_code == CURLE_OK ? NULL : resp->curl_error,
                             .attempt = req->attempt};
  if (!status) store_emit(c, &ev);
  /* The handle outlives this call; leave it no pointer into our frame. */
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
  curl_slist_free_all(headers);
  return status;
#undef ADD_HEADER
}

/* Redirects a GET or HEAD may follow: registries in front of object stores
 * send blob reads elsewhere. We follow them only within the store's origin
 * (store_resolve_location refuses the rest), and only a few hops. */
#define MAX_REDIRECTS 5

static int is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

nimble_status_t store_http_exchange(nimble_store_client *c, const store_request_t *req,
                                    store_response_t *resp) {
  nimble_status_t s = exchange_once(c, req, resp);
  int reads = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
  char *url = NULL;
  for (int hop = 0; !s && reads && resp->curl_code == CURLE_OK && is_redirect(resp->status);
       hop++) {
    if (hop == MAX_REDIRECTS) {
      s = nimble_status_make(NIMBLE_INTERNAL, "%s %s: more than %d redirects", req->method,
                             req->url, MAX_REDIRECTS);
      break;
    }
    char *next = NULL;
    s = store_resolve_location(c, resp->location, &next);
    if (s) {
      s = nimble_status_annotate(s, "%s %s: HTTP %ld", req->method, url ? url : req->url,
                                 resp->status);
      break;
    }
    free(url);
    url = next;
    store_request_t hop_req = *req;
    hop_req.url = url;
    s = exchange_once(c, &hop_req, resp);
  }
  free(url);
  return s;
}

int store_response_retryable(const store_response_t *r) {
  if (r->over_cap || r->sink_error) return 0;
  if (r->curl_code != CURLE_OK) {
    switch (r->curl_code) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_PARTIAL_FILE:
      case CURLE_GOT_NOTHING:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        return 1;
      default:
        return 0;
    }
  }
  long s = r->status;
  if (s == 408 || s == 429) return 1;
  return s >= 500 && s <= 599 && s != 501 && s != 505;
}

nimble_status_t store_http_with_retry(nimble_store_client *c, store_request_t *req,
                                      store_response_t *resp, store_retry_t *retry) {
  for (;;) {
    retry->attempt++;
    req->attempt = retry->attempt;
    NIMBLE_RETURN_IF_ERROR(store_http_exchange(c, req, resp));
    if (!store_response_retryable(resp)) return nimble_ok();
    if (!store_retry_next(c, retry, req->method, req->url, resp))
      return store_response_error(req, resp, retry->attempt);
  }
}
