/* Repository names and tags, checked against the OCI distribution grammar.
 *
 * Names become directory paths under the store root, so this check is also
 * what keeps a request inside the root: the grammar has no '..', no empty
 * component, no leading '/', and no characters outside [a-z0-9._/-]. */
#include <string.h>

#include "nimble/store_fs.h"

static int is_alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

static nimble_status_t name_error(const char *name, size_t pos, const char *why) {
  unsigned char c = (unsigned char)name[pos];
  if (c >= 0x20 && c < 0x7f)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invalid repository name '%s': character %zu ('%c') %s", name, pos, c,
                              why);
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "invalid repository name: character %zu (0x%02x) %s", pos, c, why);
}

nimble_status_t nimble_store_name_check(const char *name) {
  if (!name || !*name)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invalid repository name: it is empty");
  size_t len = strlen(name);
  if (len > NIMBLE_STORE_NAME_MAX)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invalid repository name: %zu characters, at most %d allowed", len,
                              NIMBLE_STORE_NAME_MAX);
  /* Each '/'-separated component is alnum runs joined by one separator:
   * '.', '_', '__' or one or more '-'. */
  size_t i = 0;
  for (;;) {
    if (!is_alnum_lower(name[i]))
      return name_error(name, i,
                        name[i] ? "cannot start a path component (expected [a-z0-9])"
                                : "ends a path component (expected [a-z0-9])");
    while (is_alnum_lower(name[i])) i++;
    if (name[i] == '\0') return nimble_ok();
    if (name[i] == '/') {
      i++;
      continue;
    }
    size_t sep = i;
    if (name[i] == '.') {
      i++;
    } else if (name[i] == '_') {
      i++;
      if (name[i] == '_') i++;
    } else if (name[i] == '-') {
      while (name[i] == '-') i++;
    } else {
      return name_error(name, i, "is not allowed (expected [a-z0-9], '.', '_', '-' or '/')");
    }
    if (!is_alnum_lower(name[i]))
      return name_error(name, name[i] ? i : sep,
                        name[i] ? "cannot follow a separator (expected [a-z0-9])"
                                : "is a separator that ends the name");
  }
}

static int is_tag_char(char c) {
  return is_alnum_lower(c) || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '-';
}

nimble_status_t nimble_store_tag_check(const char *tag) {
  if (!tag || !*tag) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invalid tag: it is empty");
  size_t len = strlen(tag);
  if (len > NIMBLE_STORE_TAG_MAX)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invalid tag: %zu characters, at most %d allowed", len,
                              NIMBLE_STORE_TAG_MAX);
  if (tag[0] == '.' || tag[0] == '-')
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invalid tag '%s': it cannot start with '%c'", tag, tag[0]);
  for (size_t i = 0; i < len; i++) {
    if (!is_tag_char(tag[i])) {
      unsigned char c = (unsigned char)tag[i];
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "invalid tag: character %zu (0x%02x) is not in [A-Za-z0-9._-]", i,
                                c);
    }
  }
  return nimble_ok();
}
