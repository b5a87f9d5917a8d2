/* The client object: options with their defaults, the curl handle, events,
 * and the retry policy (exponential backoff with jitter, bounded attempts
 * and total time). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void init_curl(void) { curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT); }

int64_t store_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void store_emit(nimble_store_client *c, const nimble_store_event_t *event) {
  if (c->opts.on_event) c->opts.on_event(c->opts.event_user, event);
}

/* Checks the base URL and returns the length of its origin
 * (scheme://host[:port]). */
static nimble_status_t check_base_url(const char *url, size_t *out_origin_len) {
  size_t scheme_len;
  if (strncmp(url, "http://", 7) == 0) scheme_len = 7;
  else if (strncmp(url, "https://", 8) == 0) scheme_len = 8;
  else
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "store URL '%s' must start with http:// or https://", url);
  for (const char *p = url; *p; p++) {
    if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '?' || *p == '#')
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "store URL '%s': character %zu (0x%02x) is not allowed", url,
                                (size_t)(p - url), (unsigned char)*p);
  }
  const char *host = url + scheme_len;
  const char *slash = strchr(host, '/');
  size_t host_len = slash ? (size_t)(slash - host) : strlen(host);
  if (host_len == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "store URL '%s' has no host", url);
  if (memchr(host, '@', host_len))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "store URL '%s': credentials in the URL are not supported; use a token",
                              url);
  *out_origin_len = scheme_len + host_len;
  return nimble_ok();
}

nimble_status_t nimble_store_client_create(const nimble_store_client_options_t *opts,
                                           nimble_store_client **out_client) {
  *out_client = NULL;
  if (!opts || !opts->base_url)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "store client: base_url is required");
  size_t origin_len = 0;
  NIMBLE_RETURN_IF_ERROR(check_base_url(opts->base_url, &origin_len));
  if (opts->token) {
    for (const char *p = opts->token; *p; p++)
      if ((unsigned char)*p < 0x21 || *p == 0x7f)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "store token: character %zu is a space or control character",
                                  (size_t)(p - opts->token));
    if (strlen(opts->token) > 4096)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "store token is longer than 4096 bytes");
  }
  if (opts->connect_timeout_ms < 0 || opts->stall_timeout_ms < 0 || opts->request_timeout_ms < 0 ||
      opts->max_attempts < 0 || opts->backoff_base_ms < 0 || opts->backoff_max_ms < 0 ||
      opts->retry_budget_ms < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "store client: negative timeout or count");

  pthread_once(&curl_once, init_curl);
  if (curl_init_code != CURLE_OK)
    return nimble_status_make(NIMBLE_INTERNAL, "curl_global_init: %s",
                              curl_easy_strerror(curl_init_code));

  nimble_store_client *c = calloc(1, sizeof(*c));
  if (!c) return NIMBLE_OOM();
  c->opts = *opts;
  c->opts.base_url = NULL;
  c->opts.token = NULL;
  if (!c->opts.connect_timeout_ms) c->opts.connect_timeout_ms = 5000;
  if (!c->opts.stall_timeout_ms) c->opts.stall_timeout_ms = 30000;
  if (!c->opts.max_attempts) c->opts.max_attempts = 5;
  if (!c->opts.backoff_base_ms) c->opts.backoff_base_ms = 100;
  if (!c->opts.backoff_max_ms) c->opts.backoff_max_ms = 5000;
  if (!c->opts.retry_budget_ms) c->opts.retry_budget_ms = 60000;
  if (!c->opts.chunk_size) c->opts.chunk_size = 8u << 20;
  if (!c->opts.monolithic_max) c->opts.monolithic_max = c->opts.chunk_size;
  if (!c->opts.max_manifest_size) c->opts.max_manifest_size = 4u << 20;
  if (!c->opts.max_blob_size) c->opts.max_blob_size = (size_t)1 << 30;

  c->base_url = strdup(opts->base_url);
  if (c->base_url) {
    size_t n = strlen(c->base_url);
    while (n > origin_len && c->base_url[n - 1] == '/') c->base_url[--n] = '\0';
  }
  c->origin_len = origin_len;
  if (opts->token) {
    size_t n = strlen(opts->token) + sizeof("Authorization: Bearer ");
    c->auth_header = malloc(n);
    if (c->auth_header) snprintf(c->auth_header, n, "Authorization: Bearer %s", opts->token);
  }
  c->curl = curl_easy_init();
  c->rng = (unsigned int)store_now_ms() ^ (unsigned int)getpid() ^ (unsigned int)(uintptr_t)c;
  if (!c->base_url || !c->curl || (opts->token && !c->auth_header)) {
    nimble_store_client_destroy(c);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating store client");
  }
  *out_client = c;
  return nimble_ok();
}

void nimble_store_client_destroy(nimble_store_client *c) {
  if (!c) return;
  if (c->curl) curl_easy_cleanup(c->curl);
  free(c->base_url);
  free(c->auth_header);
  free(c);
}

void store_retry_begin(store_retry_t *retry) {
  retry->attempt = 0;
  clock_gettime(CLOCK_MONOTONIC, &retry->start);
}

/* Retry-After in seconds (the HTTP-date form is ignored), or -1. */
static long retry_after_ms(const store_response_t *r) {
  if (!r || !r->retry_after) return -1;
  long s = 0;
  const char *p = r->retry_after;
  if (!*p) return -1;
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || s > 86400) return -1;
    s = s * 10 + (*p - '0');
  }
  return s * 1000;
}

int store_retry_next(nimble_store_client *c, store_retry_t *retry, const char *method,
                     const char *url, const store_response_t *response) {
  if (retry->attempt >= c->opts.max_attempts) return 0;
  /* Exponential: base, 2*base, 4*base ... capped, then "equal jitter"
   * (half fixed, half random) so that many clients failing together do not
   * come back together, yet none retries immediately. */
  long delay = c->opts.backoff_base_ms;
  for (int i = 1; i < retry->attempt && delay < c->opts.backoff_max_ms; i++) delay *= 2;
  if (delay > c->opts.backoff_max_ms) delay = c->opts.backoff_max_ms;
  c->rng = c->rng * 1103515245u + 12345u;
  long half = delay / 2;
  delay = half + (half > 0 ? (long)((c->rng >> 8) % (unsigned long)(half + 1)) : 0);
  long ra = retry_after_ms(response);
  if (ra > delay) delay = ra < c->opts.backoff_max_ms ? ra : c->opts.backoff_max_ms;

  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t elapsed = (int64_t)(now.tv_sec - retry->start.tv_sec) * 1000 +
                    (now.tv_nsec - retry->start.tv_nsec) / 1000000;
  if (elapsed + delay > c->opts.retry_budget_ms) return 0;

  nimble_store_event_t ev = {.kind = NIMBLE_STORE_EVENT_RETRY, .method = method, .url = url,
                             .http_status = response && response->curl_code == CURLE_OK ? response->status : 0,
                             .attempt = retry->attempt, .delay_ms = delay};
  store_emit(c, &ev);
  struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return 1;
}
