/* HTTP GET for the fetcher, over libcurl: bounded retries with backoff for
 * what may pass (connection errors, timeouts, 5xx, 429), sizes checked
 * before memory is allocated, and a body never allowed past its cap. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fetch_internal.h"
#include "oci_manifest.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;
static void curl_init_once(void) { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* The body of one GET across its attempts: after a transfer cut short, the
 * bytes already received are kept and the next attempt asks for the rest
 * with `Range: bytes=N-`. A 206 must start exactly at N; any other answer
 * replaces what was kept. */
typedef struct body {
  uint8_t *data;
  size_t size, cap;
  uint64_t max;
  int too_large;
  int bad_range;
  char digest[72];
  /* Per response: */
  long status;
  long long range_start; /* from Content-Range; -1 when absent */
  int started;           /* a body byte of this response has arrived */
  size_t resume_from;    /* bytes kept from earlier attempts */
} body;

static size_t on_header(char *line, size_t size, size_t n, void *user) {
  body *b = user;
  size_t len = size * n;
  static const char kDigest[] = "docker-content-digest:";
  static const char kRange[] = "content-range:";
  /* A new response (after a redirect or 100-continue) starts afresh. */
  if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
    char text[32];
    size_t k = len < sizeof text - 1 ? len : sizeof text - 1;
    memcpy(text, line, k);
    text[k] = '\0';
    b->status = 0;
    sscanf(text, "%*s %ld", &b->status);
    b->digest[0] = '\0';
    b->range_start = -1;
    b->started = 0;
  } else if (len > sizeof kDigest - 1 && strncasecmp(line, kDigest, sizeof kDigest - 1) == 0) {
    size_t i = sizeof kDigest - 1, e = len;
    while (i < e && (line[i] == ' ' || line[i] == '\t')) i++;
    while (e > i && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) e--;
    if (e - i == 71) {
      memcpy(b->digest, line + i, 71);
      b->digest[71] = '\0';
    }
  } else if (len > sizeof kRange - 1 && strncasecmp(line, kRange, sizeof kRange - 1) == 0) {
    char text[128];
    size_t k = len - (sizeof kRange - 1);
    if (k > sizeof text - 1) k = sizeof text - 1;
    memcpy(text, line + sizeof kRange - 1, k);
    text[k] = '\0';
    long long start;
    if (sscanf(text, " bytes %lld-", &start) == 1 && start >= 0) b->range_start = start;
  }
  return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *user) {
  body *b = user;
  size_t len = size * n;
  if (!b->started) {
    b->started = 1;
    if (b->status == 206) {
      if (b->range_start < 0 || (unsigned long long)b->range_start != b->resume_from) {
        b->bad_range = 1;
        return 0;
      }
    } else {
      b->size = 0; /* not a continuation: start over */
    }
  }
  if ((uint64_t)b->size + len > b->max) {
    b->too_large = 1;
    return 0; /* aborts the transfer */
  }
  if (b->size + len > b->cap) {
    size_t cap = b->cap ? b->cap : 16384;
    while (cap < b->size + len) cap = cap > SIZE_MAX / 2 ? b->size + len : cap * 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return 0;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->size, data, len);
  b->size += len;
  return len;
}

static void emit(const nimble_fetch_options_t *o, const char *url, long status, int is_blob,
                 const char *range) {
  if (!o->on_event) return;
  nimble_fetch_event_t e = {.kind = NIMBLE_FETCH_EVENT_REQUEST, .url = url, .http_status = status,
                            .is_blob = is_blob, .range = range};
  o->on_event(o->event_user, &e);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

nimble_status_t nimble_fetch_http_get(const nimble_fetch_http_t *http, const char *url,
                                      const char *accept, uint64_t max_size, uint64_t expect_size,
                                      int is_blob, uint8_t **out_body, size_t *out_size,
                                      char out_digest_header[72]) {
  const nimble_fetch_options_t *o = http->options;
  *out_body = NULL;
  *out_size = 0;
  if (out_digest_header) out_digest_header[0] = '\0';
  pthread_once(&g_curl_once, curl_init_once);
  if (g_curl_init != CURLE_OK)
    return nimble_status_make(NIMBLE_INTERNAL, "fetch: curl_global_init failed");

  struct curl_slist *headers = NULL;
  char *auth = NULL, *acc = NULL;
  if (accept && asprintf(&acc, "Accept: %s", accept) >= 0) headers = curl_slist_append(headers, acc);
  if (http->token && http->token[0] && asprintf(&auth, "Authorization: Bearer %s", http->token) >= 0)
    headers = curl_slist_append(headers, auth);

  int attempts = o->max_attempts > 0 ? o->max_attempts : 3;
  nimble_status_t s = NULL;
  long backoff = 100;
  body b = {.max = max_size};
  for (int attempt = 1; attempt <= attempts; attempt++) {
    nimble_status_free(s);
    s = NULL;
    /* Only a blob of known size resumes: a manifest is re-read whole. */
    b.resume_from = is_blob && expect_size != UINT64_MAX && b.size < expect_size ? b.size : 0;
    b.size = b.resume_from;
    b.too_large = b.bad_range = 0;
    b.status = 0;
    b.started = 0;
    b.range_start = -1;
    char range[48] = "";
    if (b.resume_from) snprintf(range, sizeof range, "%zu-", b.resume_from);
    CURL *c = curl_easy_init();
    if (!c) {
      s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "fetch: curl_easy_init failed");
      break;
    }
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000L);
    long stall = o->stall_timeout_ms > 0 ? o->stall_timeout_ms : 30000L;
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (stall + 999) / 1000);
    /* A declared size over the cap is refused before any body byte. */
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(max_size > INT64_MAX ? INT64_MAX : max_size));
    if (range[0]) curl_easy_setopt(c, CURLOPT_RANGE, range);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    /* A complete answer with an empty body replaces what was kept. */
    if (rc == CURLE_OK && !b.started && status != 206) b.size = 0;
    curl_easy_cleanup(c);
    char range_header[64] = "";
    if (range[0]) snprintf(range_header, sizeof range_header, "bytes=%s", range);
    emit(o, url, rc == CURLE_OK ? status : 0, is_blob, range[0] ? range_header : NULL);

    int retry = 0;
    if (rc == CURLE_FILESIZE_EXCEEDED || b.too_large) {
      s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                             "fetch: GET %s: the response is larger than the %llu bytes expected",
                             url, (unsigned long long)max_size);
    } else if (b.bad_range) {
      /* A 206 that does not continue where we stopped: start over. */
      s = nimble_status_make(NIMBLE_UNAVAILABLE, "fetch: GET %s: the store answered Range %s with "
                             "Content-Range starting at %lld", url, range, b.range_start);
      b.size = 0;
      retry = 1;
    } else if (rc != CURLE_OK) {
      s = nimble_status_make(NIMBLE_UNAVAILABLE, "fetch: GET %s: %s", url,
                             err[0] ? err : curl_easy_strerror(rc));
      retry = rc != CURLE_UNSUPPORTED_PROTOCOL && rc != CURLE_URL_MALFORMAT &&
              rc != CURLE_OUT_OF_MEMORY;
    } else if (status == 200 || (status == 206 && range[0])) {
      if (expect_size != UINT64_MAX && b.size != expect_size) {
        s = nimble_status_make(NIMBLE_DATA_LOSS, "fetch: GET %s: %zu bytes served, the manifest says %llu",
                               url, b.size, (unsigned long long)expect_size);
      } else {
        if (out_digest_header) memcpy(out_digest_header, b.digest, 72);
        *out_body = b.data ? b.data : malloc(1);
        *out_size = b.size;
        if (!*out_body) s = NIMBLE_OOM_IN("fetch");
        b.data = NULL;
      }
      b.size = 0;
    } else {
      nimble_status_code_t code = NIMBLE_UNAVAILABLE;
      if (status == 401) code = NIMBLE_UNAUTHENTICATED;
      else if (status == 403) code = NIMBLE_PERMISSION_DENIED;
      else if (status == 404) code = NIMBLE_NOT_FOUND;
      else if (status >= 500 || status == 429 || status == 408) retry = 1;
      else code = NIMBLE_FAILED_PRECONDITION;
      /* The OCI error body is short JSON; quote its start for the reader. */
      int shown = b.size > 200 ? 200 : (int)b.size;
      s = nimble_status_make(code, "fetch: GET %s: HTTP %ld%s%.*s", url, status,
                             shown ? ": " : "", shown, b.data ? (const char *)b.data : "");
      b.size = 0;
    }
    if (!s || !retry || attempt == attempts) break;
    sleep_ms(backoff);
    backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
  }
  free(b.data);
  curl_slist_free_all(headers);
  free(acc);
  free(auth);
  return s;
}
