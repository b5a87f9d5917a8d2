/* URLs of the OCI Distribution API: repository and tag names checked against
 * the spec's grammar before they go into a URL, and Location headers
 * resolved without ever leaving the store's origin. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client_internal.h"

static int is_lower_alnum(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); }

/* OCI: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)* */
nimble_status_t store_check_repo(const char *repo) {
  if (!repo || !*repo)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "repository name is empty");
  size_t n = strlen(repo);
  if (n > 255)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "repository name is %zu bytes, more than 255", n);
  /* Separators ('/' included) must each sit between two alphanumeric runs. */
  size_t i = 0;
  for (;;) {
    if (i >= n || !is_lower_alnum(repo[i])) break;
    while (i < n && is_lower_alnum(repo[i])) i++;
    if (i == n) return nimble_ok();
    if (repo[i] == '/' || repo[i] == '.') i++;
    else if (repo[i] == '_') { i++; if (i < n && repo[i] == '_') i++; }
    else if (repo[i] == '-') { while (i < n && repo[i] == '-') i++; }
    else break;
  }
  if (i >= n)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "repository name '%s' ends with a separator", repo);
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "repository name '%s': character %zu (0x%02x) breaks the OCI name "
                            "grammar (lowercase alphanumerics separated by '.', '_', '__', '-' "
                            "or '/')",
                            repo, i, (unsigned char)repo[i]);
}

/* OCI: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127} */
nimble_status_t store_check_tag(const char *tag) {
  if (!tag || !*tag) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tag is empty");
  size_t n = strlen(tag);
  if (n > 128)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tag is %zu bytes, more than 128", n);
  for (size_t i = 0; i < n; i++) {
    char ch = tag[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || (i > 0 && (ch == '.' || ch == '-'));
    if (!ok)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tag '%s': character %zu (0x%02x) is not allowed", tag, i,
                                (unsigned char)ch);
  }
  return nimble_ok();
}

static nimble_status_t printf_alloc(char **out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static nimble_status_t printf_alloc(char **out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(out, fmt, ap);
  va_end(ap);
  if (n < 0) {
    *out = NULL;
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory building a URL");
  }
  return nimble_ok();
}

nimble_status_t store_url(nimble_store_client *c, const char *repo, const char *kind,
                          const char *ref, char **out_url) {
  return printf_alloc(out_url, "%s/v2/%s/%s%s%s", c->base_url, repo, kind, ref ? "/" : "",
                      ref ? ref : "");
}

static int same_origin(const char *a, size_t a_len, const char *url) {
  /* url's origin ends at the first '/' after "://". */
  const char *p = strstr(url, "://");
  if (!p) return 0;
  const char *slash = strchr(p + 3, '/');
  size_t len = slash ? (size_t)(slash - url) : strlen(url);
  return len == a_len && strncasecmp(a, url, len) == 0;
}

nimble_status_t store_resolve_location(nimble_store_client *c, const char *loc, char **out_url) {
  *out_url = NULL;
  if (!loc || !*loc)
    return nimble_status_make(NIMBLE_INTERNAL, "the store sent no Location header");
  for (const char *p = loc; *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == 0x7f)
      return nimble_status_make(NIMBLE_INTERNAL,
                                "the store sent a Location with a space or control character");
  if (strncasecmp(loc, "http://", 7) == 0 || strncasecmp(loc, "https://", 8) == 0) {
    if (!same_origin(c->base_url, c->origin_len, loc))
      return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                                "refusing to follow Location '%s': it leaves the store's origin "
                                "'%.*s'",
                                loc, (int)c->origin_len, c->base_url);
    *out_url = strdup(loc);
  } else if (loc[0] == '/' && loc[1] != '/') {
    return printf_alloc(out_url, "%.*s%s", (int)c->origin_len, c->base_url, loc);
  } else {
    return nimble_status_make(NIMBLE_INTERNAL,
                              "unsupported Location '%s' (neither absolute nor rooted)", loc);
  }
  if (!*out_url) return NIMBLE_OOM();
  return nimble_ok();
}

nimble_status_t store_url_with_digest(const char *url, const nimble_digest_t *digest,
                                      char **out_url) {
  char d[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(digest, d);
  /* ':' is fine in a query, but percent-encode it as registries expect. */
  return printf_alloc(out_url, "%s%cdigest=sha256%%3A%s", url, strchr(url, '?') ? '&' : '?',
                      d + 7);
}
