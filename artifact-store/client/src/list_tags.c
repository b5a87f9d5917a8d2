/* Tag listing: GET /v2/<repo>/tags/list, following Link rel="next" pages. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* Caps: a tag list is metadata, never megabytes per page or endless pages. */
#define TAGS_PAGE_CAP (4u << 20)
#define TAGS_MAX_PAGES 1000

void nimble_store_tags_free(char **tags, size_t count) {
  if (!tags) return;
  for (size_t i = 0; i < count; i++) free(tags[i]);
  free(tags);
}

/* The URL in a Link header `<...>; rel="next"`, or NULL. */
static char *next_link(const char *link) {
  if (!link || link[0] != '<') return NULL;
  const char *end = strchr(link, '>');
  if (!end || !strstr(end, "rel=\"next\"")) return NULL;
  return strndup(link + 1, (size_t)(end - link - 1));
}

nimble_status_t nimble_store_list_tags(nimble_store_client *c, const char *repo, char ***out_tags,
                                       size_t *out_count) {
  *out_tags = NULL;
  *out_count = 0;
  NIMBLE_RETURN_IF_ERROR(store_check_repo(repo));
  char *url = NULL;
  NIMBLE_RETURN_IF_ERROR(store_url(c, repo, "tags/list", NULL, &url));
  char **tags = NULL;
  size_t count = 0, alloc = 0;
  nimble_status_t s = nimble_ok();
  for (int page = 0; url && !s; page++) {
    if (page >= TAGS_MAX_PAGES) {
      s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "tag list of %s: more than %d pages", repo,
                             TAGS_MAX_PAGES);
      break;
    }
    store_request_t req = {.method = "GET", .url = url, .body_cap = TAGS_PAGE_CAP};
    store_response_t resp = {0};
    store_retry_t retry;
    store_retry_begin(&retry);
    s = store_http_with_retry(c, &req, &resp, &retry);
    if (!s && resp.over_cap)
      s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "GET %s: tag list page over %u bytes", url,
                             TAGS_PAGE_CAP);
    if (!s && resp.status != 200) s = store_response_error(&req, &resp, retry.attempt);
    json_t *root = NULL;
    if (!s) {
      json_error_t jerr;
      root = json_loadb((const char *)resp.body, resp.body_size, 0, &jerr);
      json_t *list = root ? json_object_get(root, "tags") : NULL;
      if (!root)
        s = nimble_status_make(NIMBLE_INTERNAL, "GET %s: tag list is not JSON: %s at byte %d", url,
                               jerr.text, jerr.position);
      else if (list && !json_is_null(list) && !json_is_array(list))
        s = nimble_status_make(NIMBLE_INTERNAL, "GET %s: \"tags\" is not an array", url);
      for (size_t i = 0; !s && json_is_array(list) && i < json_array_size(list); i++) {
        const char *t = json_string_value(json_array_get(list, i));
        if (!t) {
          s = nimble_status_make(NIMBLE_INTERNAL, "GET %s: tags[%zu] is not a string", url, i);
          break;
        }
        if (count == alloc) {
          size_t na = alloc ? alloc * 2 : 16;
          char **p = realloc(tags, na * sizeof(*p));
          if (!p) { s = NIMBLE_OOM(); break; }
          tags = p;
          alloc = na;
        }
        tags[count] = strdup(t);
        if (!tags[count]) { s = NIMBLE_OOM(); break; }
        count++;
      }
    }
    json_decref(root);
    char *next = NULL;
    if (!s) {
      char *link = next_link(resp.link);
      if (link) {
        s = store_resolve_location(c, link, &next);
        free(link);
      }
    }
    store_response_clear(&resp);
    free(url);
    url = next;
  }
  free(url);
  if (s) {
    nimble_store_tags_free(tags, count);
    return nimble_status_annotate(s, "listing tags of %s", repo);
  }
  *out_tags = tags;
  *out_count = count;
  return nimble_ok();
}
