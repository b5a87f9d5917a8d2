/* Private to the store client: the client object, one HTTP exchange over
 * libcurl, the retry policy, and URL helpers. */
#ifndef NIMBLE_STORE_CLIENT_INTERNAL_H
#define NIMBLE_STORE_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <stdint.h>
#include <time.h>

#include "nimble/store_client.h"

struct nimble_store_client {
  CURL *curl;             /* one handle, reused so connections stay alive */
  char *base_url;         /* "http://host:port", no trailing slash */
  size_t origin_len;      /* strlen of scheme://host[:port] within base_url */
  char *auth_header;      /* "Authorization: Bearer ..." or NULL */
  nimble_store_client_options_t opts; /* defaults filled; strings not used */
  unsigned int rng;       /* jitter state */
};

/* Where a request body comes from: memory or a file descriptor, a window
 * [offset, offset + length) of it. */
typedef struct store_body_t {
  const uint8_t *data;    /* borrowed; NULL when fd is used */
  int fd;                 /* -1 when data is used */
  uint64_t offset;
  uint64_t length;
  uint64_t pos;           /* bytes handed to curl so far */
  int read_error;         /* errno of a failed pread */
} store_body_t;

/* Receives a 2xx response body. Returns 0 to continue, or an errno-style
 * value to abort the transfer (the status is then built by the caller). */
typedef int (*store_sink_fn)(void *user, const uint8_t *data, size_t size);

typedef struct store_request_t {
  const char *method;
  const char *url;                 /* absolute */
  const char *range;               /* e.g. "bytes=100-" or NULL */
  const char *content_type;        /* request Content-Type or NULL */
  const char *content_range;       /* PATCH Content-Range or NULL */
  const char *accept;              /* Accept header or NULL */
  store_body_t *body;              /* NULL: no body */
  store_sink_fn sink;              /* NULL: 2xx bodies collect into response.body */
  void *sink_user;
  size_t body_cap;                 /* cap on a collected 2xx body */
  int attempt;                     /* for events */
} store_request_t;

typedef struct store_response_t {
  long status;                     /* 0: no response (transfer error) */
  CURLcode curl_code;
  char curl_error[CURL_ERROR_SIZE];
  int64_t content_length;          /* -1 when absent */
  char *location, *content_type, *docker_digest, *range, *www_authenticate, *retry_after, *link;
  char *content_range;
  uint8_t *body;                   /* 2xx body when collected, else error body (capped) */
  size_t body_size, body_alloc;
  int over_cap;                    /* the body exceeded its cap */
  int sink_error;                  /* the sink aborted with this value */
  uint64_t sink_bytes;             /* 2xx bytes handed to the sink */
} store_response_t;

/* Runs one exchange (a GET or HEAD follows redirects within the store's
 * origin; one to another origin is PERMISSION_DENIED). Returns OK whenever an HTTP response arrived (whatever
 * its status) or the transfer failed at the network level (response->status
 * is then 0 and curl_code says why); a status only for local failures (out of
 * memory, bad arguments). Caller calls store_response_clear(). */
nimble_status_t store_http_exchange(nimble_store_client *c, const store_request_t *req,
                                    store_response_t *response);
void store_response_clear(store_response_t *response);

/* True when the response (or the network failure) is worth another attempt:
 * 5xx other than 501/505, 429, 408, connection and transfer errors. */
int store_response_retryable(const store_response_t *response);

/* The error status for a finished exchange that did not succeed: maps the
 * HTTP status and the OCI error body to a code and names method and URL. */
nimble_status_t store_response_error(const store_request_t *req, const store_response_t *response,
                                     int attempts);

/* Retry bookkeeping for one operation. */
typedef struct store_retry_t {
  int attempt;                     /* attempts made so far */
  struct timespec start;
} store_retry_t;

void store_retry_begin(store_retry_t *retry);
/* Called after a failed attempt: returns 1 after sleeping the backoff (and
 * reporting a RETRY event) when another attempt is allowed, 0 when the
 * attempts or the time budget are spent. */
int store_retry_next(nimble_store_client *c, store_retry_t *retry, const char *method,
                     const char *url, const store_response_t *response);

/* Runs an idempotent exchange, retrying what store_response_retryable()
 * accepts. Returns OK with the final response (any non-retryable status,
 * which the caller inspects), or the error of the last attempt once the
 * retries are spent. A request with a sink must not use this (the sink
 * would see the body twice). */
nimble_status_t store_http_with_retry(nimble_store_client *c, store_request_t *req,
                                      store_response_t *resp, store_retry_t *retry);

/* Reports an event to the user's callback, if any. */
void store_emit(nimble_store_client *c, const nimble_store_event_t *event);

/* URL helpers. All results are heap strings the caller frees. */
nimble_status_t store_check_repo(const char *repo);
nimble_status_t store_check_tag(const char *tag);
/* base + "/v2/" + repo + "/" + kind + "/" + ref */
nimble_status_t store_url(nimble_store_client *c, const char *repo, const char *kind,
                          const char *ref, char **out_url);
/* Resolves a Location header against the base URL. Absolute URLs must have
 * the base URL's origin (scheme, host, port): a store must not redirect our
 * uploads or downloads to another host without the user saying so. */
nimble_status_t store_resolve_location(nimble_store_client *c, const char *location,
                                       char **out_url);
/* Appends "digest=<d>" to an upload URL with '?' or '&'. */
nimble_status_t store_url_with_digest(const char *url, const nimble_digest_t *digest,
                                      char **out_url);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
int64_t store_now_ms(void);

#endif /* NIMBLE_STORE_CLIENT_INTERNAL_H */
