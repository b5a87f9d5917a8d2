/* libFuzzer target for what nimble-store parses out of a request before it
 * touches the disk: the path (nimble_oci_route_parse, then the repository
 * name, digest, tag or upload id it names), the Range, Content-Range,
 * Content-Length and Authorization headers, the digest/mount query
 * parameters, and a manifest PUT's body (nimble_store_manifest_references).
 * Built with clang-16 by artifact-store/server/CMakeLists.txt (`cmake
 * --build BUILD --target fuzz_store_request`) and run by bench/fuzz/run.sh;
 * tests/fuzz replays the corpus (tests/fuzz/store_request/corpus) through
 * this same function in every build. docs/reliability.md, "Fuzzing".
 *
 * An input reads like an HTTP/1.1 request, so real requests are seeds:
 *
 *   GET /v2/team/bert/blobs/sha256:...?digest=... HTTP/1.1
 *   Range: bytes=0-99
 *   X-Blob-Size: 1000          (fuzzing only: the blob the Range is for)
 *
 *   {"schemaVersion":2,...}    (the body, after the empty line)
 *
 * The harness splits it naively (this is libmicrohttpd's job in the
 * server); what the store's own parsers make of the pieces is checked
 * against independent oracles, and any disagreement aborts:
 *  - a route's parts put back together give the path;
 *  - a name the store accepts matches the OCI grammar (a POSIX regex) and
 *    has no empty, "." or ".." component (it becomes a directory path),
 *    and every name the grammar allows is accepted;
 *  - tags and upload ids likewise, against their grammars;
 *  - a PARTIAL range lies inside the blob and is not empty; UNSATISFIABLE
 *    only for a well-formed header;
 *  - an accepted Content-Range has start <= end and reads the same when
 *    written back; Content-Length agrees with strtoull on digit strings;
 *  - the bearer check agrees with a hand-written matcher.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "http_range.h"
#include "nimble/store_fs.h"
#include "oci_routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text) {
  fprintf(stderr, "fuzz_store_request: %s: '%s'\n", what, text ? text : "(null)");
  abort();
}

static int matches(const char *pattern, const char *text) {
  /* Compiled once per pattern (the patterns are the static strings below). */
  static const char *patterns[4];
  static regex_t res[4];
  int i = 0;
  while (i < 4 && patterns[i] && patterns[i] != pattern) i++;
  if (i == 4) fail("too many patterns", pattern);
  if (!patterns[i]) {
    if (regcomp(&res[i], pattern, REG_EXTENDED | REG_NOSUB) != 0) fail("regcomp", pattern);
    patterns[i] = pattern;
  }
  return regexec(&res[i], text, 0, NULL, 0) == 0;
}

#define COMPONENT "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*"
static const char kName[] = "^" COMPONENT "(/" COMPONENT ")*$";
static const char kTag[] = "^[A-Za-z0-9_][A-Za-z0-9._-]*$";
static const char kUploadId[] = "^[0-9a-f]{32}$";

static void check_name(const char *name) {
  nimble_status_t s = nimble_store_name_check(name);
  int grammatical = strlen(name) <= NIMBLE_STORE_NAME_MAX && matches(kName, name);
  if (!s && !grammatical) fail("accepted a name outside the OCI grammar", name);
  if (s && grammatical) fail("refused a name the OCI grammar allows", name);
  if (!s) {
    /* It becomes a directory under the root: no way out. */
    if (name[0] == '/' || strstr(name, "//") || name[strlen(name) - 1] == '/')
      fail("accepted a name with an empty component", name);
    for (const char *c = name;; c++) {
      size_t len = strcspn(c, "/");
      if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
        fail("accepted a name with a '.' or '..' component", name);
      c += len;
      if (!*c) break;
    }
  }
  nimble_status_free(s);
}

static void check_tag(const char *tag) {
  nimble_status_t s = nimble_store_tag_check(tag);
  int grammatical = strlen(tag) <= NIMBLE_STORE_TAG_MAX && matches(kTag, tag);
  if ((s == NULL) != grammatical) fail(s ? "refused a tag the grammar allows" : "accepted a bad tag", tag);
  nimble_status_free(s);
}

static void check_digest(const char *text) {
  nimble_digest_t d;
  nimble_status_t s = nimble_digest_parse(text, &d);
  if ((s == NULL) != nimble_digest_valid(text, strlen(text))) fail("digest parse and valid disagree", text);
  if (!s) {
    char back[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(&d, back);
    if (strcmp(back, text) != 0) fail("a digest does not format back to its text", text);
  }
  nimble_status_free(s);
}

/* The route, and what its handler parses out of it (oci_blobs.c,
 * oci_manifests.c, manifest_store.c). */
static void check_route(const char *path, const char *method, const char *content_type,
                        const char *body, size_t body_len) {
  nimble_oci_route r;
  if (!nimble_oci_route_parse(path, &r)) return; /* out of memory */
  const char *infix = NULL;
  switch (r.kind) {
    case NIMBLE_ROUTE_NONE:
    case NIMBLE_ROUTE_BASE:
    case NIMBLE_ROUTE_METRICS:
      if (r.name || r.arg) fail("a route without a name has one", path);
      if (r.kind == NIMBLE_ROUTE_BASE && strcmp(path, "/v2/") && strcmp(path, "/v2"))
        fail("not the base path", path);
      if (r.kind == NIMBLE_ROUTE_METRICS && strcmp(path, "/metrics")) fail("not /metrics", path);
      return;
    case NIMBLE_ROUTE_BLOB: infix = "/blobs/"; break;
    case NIMBLE_ROUTE_UPLOAD_NEW:
    case NIMBLE_ROUTE_UPLOAD: infix = "/blobs/uploads/"; break;
    case NIMBLE_ROUTE_MANIFEST: infix = "/manifests/"; break;
    case NIMBLE_ROUTE_TAGS: infix = "/tags/list"; break;
  }
  if (!infix || !r.name || !r.arg) fail("route parts missing", path);
  size_t n = strlen(r.name) + strlen(r.arg) + 32;
  char *back = malloc(n);
  if (!back) fail("out of memory", path);
  snprintf(back, n, "/v2/%s%s%s", r.name, infix, r.arg);
  if (strcmp(back, path) != 0) fail("the route does not put back together as the path", path);
  free(back);
  if ((r.kind == NIMBLE_ROUTE_UPLOAD_NEW || r.kind == NIMBLE_ROUTE_TAGS) != (r.arg[0] == '\0'))
    fail("argument presence does not fit the route", path);

  check_name(r.name);
  if (r.kind == NIMBLE_ROUTE_BLOB) check_digest(r.arg);
  if (r.kind == NIMBLE_ROUTE_UPLOAD) {
    nimble_status_t s = nimble_store_fs_upload_id_check(r.arg);
    if ((s == NULL) != matches(kUploadId, r.arg)) fail("upload id check disagrees with its grammar", r.arg);
    nimble_status_free(s);
  }
  if (r.kind == NIMBLE_ROUTE_MANIFEST) {
    if (strchr(r.arg, ':'))
      check_digest(r.arg);
    else
      check_tag(r.arg);
    if (body && !strcmp(method, "PUT")) {
      /* The media type is the Content-Type up to its parameters. */
      char *media = content_type ? strndup(content_type, strcspn(content_type, "; \t")) : NULL;
      nimble_digest_t *refs = NULL;
      int64_t *sizes = NULL;
      size_t count = 0;
      nimble_status_t s =
          nimble_store_manifest_references(body, body_len, media, &refs, &sizes, &count);
      if (!s) {
        for (size_t i = 0; i < count; i++)
          if (sizes[i] < 0) fail("a referenced size is negative", path);
        free(refs);
        free(sizes);
      } else if (refs || sizes) {
        fail("refused but returned references", path);
      }
      nimble_status_free(s);
      free(media);
    }
  }
  nimble_oci_route_deinit(&r);
}

/* "bytes=a-b" / "bytes=a-" / "bytes=-n" with blanks where RFC 9110 allows. */
static void check_range(const char *header, uint64_t size) {
  uint64_t start = 7, length = 7;
  nimble_http_range_result rr = nimble_http_range_parse(header, size, &start, &length);
  if (rr == NIMBLE_RANGE_PARTIAL) {
    if (length == 0 || start >= size || length > size - start) fail("range outside the blob", header);
  } else if (start != 7 || length != 7) {
    fail("a range that is not PARTIAL wrote its outputs", header);
  }
  if (rr == NIMBLE_RANGE_UNSATISFIABLE && !header) fail("no header, yet unsatisfiable", header);
  if (rr != NIMBLE_RANGE_WHOLE && rr != NIMBLE_RANGE_PARTIAL && rr != NIMBLE_RANGE_UNSATISFIABLE)
    fail("unknown range result", header);
  if (header && rr != NIMBLE_RANGE_WHOLE && !strstr(header, "bytes"))
    fail("a range without the bytes unit was used", header);
}

static void check_content_range(const char *header) {
  uint64_t start = 0, end = 0;
  nimble_status_t s = nimble_http_content_range_parse(header, &start, &end);
  if (!s) {
    if (end < start) fail("Content-Range end before start", header);
    char back[64];
    uint64_t s2 = 0, e2 = 0;
    snprintf(back, sizeof back, "%llu-%llu", (unsigned long long)start, (unsigned long long)end);
    nimble_status_t again = nimble_http_content_range_parse(back, &s2, &e2);
    if (again || s2 != start || e2 != end) fail("Content-Range does not read back", header);
  } else if (nimble_status_code(s) != NIMBLE_INVALID_ARGUMENT) {
    fail("Content-Range refused with an unexpected code", header);
  }
  nimble_status_free(s);
}

static void check_content_length(const char *value) {
  uint64_t n = 7;
  int r = nimble_http_content_length_parse(value, &n);
  size_t digits = strspn(value, "0123456789");
  int all_digits = value[0] && digits == strlen(value);
  if (r == 1) {
    if (!all_digits) fail("Content-Length accepted a non-digit", value);
    if (n != strtoull(value, NULL, 10)) fail("Content-Length value differs from strtoull", value);
  } else if (r == -1) {
    if (n != 0) fail("a refused Content-Length left a value", value);
    /* Refused digit strings are only those too large to hold. */
    if (all_digits && strlen(value + strspn(value, "0")) <= 19) fail("refused a small Content-Length", value);
  } else {
    fail("Content-Length parse returned neither 1 nor -1", value);
  }
}

/* The tokens of the harness's token file. */
static const char kTokens[] = "# tokens\n  s3cret-token\t\nother.token_2\n";

static int expected_auth(const char *h) {
  while (*h == ' ') h++;
  if (strncasecmp(h, "bearer ", 7) != 0) return 0;
  h += 7;
  while (*h == ' ') h++;
  size_t n = strlen(h);
  while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
  return (n == 12 && !memcmp(h, "s3cret-token", 12)) || (n == 13 && !memcmp(h, "other.token_2", 13));
}

static void check_auth(const char *header) {
  static nimble_store_auth *auth;
  if (!auth) {
    nimble_status_t s = nimble_store_auth_parse(kTokens, strlen(kTokens), &auth);
    if (s || nimble_store_auth_count(auth) != 2) fail("the harness's token file", kTokens);
  }
  if (nimble_store_auth_check(auth, header) != (header && expected_auth(header)))
    fail("the bearer check disagrees", header);
}

/* The value of query parameter `key` in `query` (a copy), or NULL. */
static char *query_value(const char *query, const char *key) {
  size_t k = strlen(key);
  for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
    if (!strncmp(p, key, k) && p[k] == '=') return strndup(p + k + 1, strcspn(p + k + 1, "&"));
  }
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The head is text up to the first empty line; the body, bytes after it. */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  size_t head_len = strnlen(text, size);
  char *blank = strstr(text, "\n\n");
  const char *body = NULL;
  size_t body_len = 0;
  if (blank && (size_t)(blank - text) < head_len) {
    *blank = '\0';
    body = (const char *)data + (blank - text) + 2;
    body_len = size - (size_t)(blank - text) - 2;
  }
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  if (!line) {
    free(text);
    return 0;
  }
  /* Request line: METHOD SP TARGET [SP VERSION]. */
  char *method = line, *target = strchr(line, ' ');
  if (!target) {
    free(text);
    return 0;
  }
  *target++ = '\0';
  char *version = strchr(target, ' ');
  if (version) *version = '\0';
  char *query = strchr(target, '?');
  if (query) *query++ = '\0';

  const char *range = NULL, *content_range = NULL, *content_length = NULL, *authorization = NULL,
             *content_type = NULL;
  uint64_t blob_size = 1000;
  while ((line = strtok_r(NULL, "\n", &save))) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[n - 1] = '\0';
    char *colon = strchr(line, ':');
    if (!colon) continue;
    *colon = '\0';
    const char *value = colon + 1;
    while (*value == ' ' || *value == '\t') value++;
    if (!strcasecmp(line, "Range")) range = value;
    else if (!strcasecmp(line, "Content-Range")) content_range = value;
    else if (!strcasecmp(line, "Content-Length")) content_length = value;
    else if (!strcasecmp(line, "Authorization")) authorization = value;
    else if (!strcasecmp(line, "Content-Type")) content_type = value;
    else if (!strcasecmp(line, "X-Blob-Size")) blob_size = strtoull(value, NULL, 10);
  }

  check_route(target, method, content_type, body, body_len);
  check_range(range, blob_size);
  if (content_range) check_content_range(content_range);
  if (content_length) check_content_length(content_length);
  check_auth(authorization);
  char *digest = query ? query_value(query, "digest") : NULL;
  char *mount = query ? query_value(query, "mount") : NULL;
  if (digest) check_digest(digest);
  if (mount) check_digest(mount);
  free(digest);
  free(mount);
  free(text);
  return 0;
}
