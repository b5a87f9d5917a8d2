/* Store references: http(s)://HOST[:PORT]/NAME(:TAG|@sha256:HEX).
 * NAME follows the OCI distribution grammar (lowercase components joined by
 * '/', separators '.', '_', '__' or runs of '-'); TAG is
 * [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. Both are checked strictly because they
 * become URL paths and cache file names. */
#include <stdlib.h>
#include <string.h>

#include "nimble/fetch.h"
#include "oci_manifest.h"

#define MAX_REFERENCE 2048
#define MAX_NAME 255

static nimble_status_t bad(const char *text, size_t at, const char *what) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reference '%.300s': at byte %zu: %s", text,
                            at, what);
}

static int is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
static int is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

/* Checks NAME in text[b, e): 1 when it is one, else 0 with *at the offset of
 * the first bad byte (e when the name ends where a component should start). */
static int check_name(const char *text, size_t b, size_t e, size_t *at, const char **why) {
  size_t i = b;
  for (;;) {
    /* a component: alnum+ (separator alnum+)* */
    if (i >= e || !is_lower_alnum(text[i])) {
      *why = "a name component must start with a lowercase letter or digit";
      *at = i;
      return 0;
    }
    while (i < e) {
      while (i < e && is_lower_alnum(text[i])) i++;
      if (i >= e || text[i] == '/') break;
      size_t s = i;
      if (text[i] == '.') i++;
      else if (text[i] == '_') i += (i + 1 < e && text[i + 1] == '_') ? 2 : 1;
      else if (text[i] == '-') while (i < e && text[i] == '-') i++;
      else {
        *why = "a name may hold only lowercase letters, digits, '.', '_', '-' and '/'";
        *at = i;
        return 0;
      }
      if (i >= e || !is_lower_alnum(text[i])) {
        *why = "a separator in a name must be followed by a lowercase letter or digit";
        *at = s;
        return 0;
      }
    }
    if (i >= e) return 1;
    i++; /* '/' */
  }
}

/* Checks TAG in text[tb, te). */
static nimble_status_t check_tag(const char *text, size_t tb, size_t te) {
  if (te == tb) return bad(text, tb, "empty tag");
  if (te - tb > 128) return bad(text, tb, "tag longer than 128 bytes");
  if (!(is_alnum(text[tb]) || text[tb] == '_'))
    return bad(text, tb, "a tag must start with a letter, digit or '_'");
  for (size_t i = tb; i < te; i++)
    if (!(is_alnum(text[i]) || text[i] == '_' || text[i] == '.' || text[i] == '-'))
      return bad(text, i, "a tag may hold only letters, digits, '_', '.' and '-'");
  return nimble_ok();
}

static char *dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

int nimble_fetch_looks_like_reference(const char *text) {
  return text && (strncmp(text, "http://", 7) == 0 || strncmp(text, "https://", 8) == 0);
}

nimble_status_t nimble_fetch_parse_reference(const char *text, nimble_fetch_reference_t *out) {
  memset(out, 0, sizeof *out);
  if (!text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reference: NULL");
  size_t len = strlen(text);
  if (len > MAX_REFERENCE) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reference: %zu bytes is over the %d-byte limit",
                              len, MAX_REFERENCE);
  }
  size_t p;
  if (strncmp(text, "http://", 7) == 0) p = 7;
  else if (strncmp(text, "https://", 8) == 0) p = 8;
  else return bad(text, 0, "expected http:// or https:// (a store reference)");

  /* HOST[:PORT] up to the first '/'. */
  size_t host_b = p;
  if (text[p] == '[') { /* IPv6 literal */
    while (p < len && text[p] != ']') {
      char c = text[p];
      if (p > host_b && !(is_alnum(c) || c == ':' || c == '.'))
        return bad(text, p, "invalid character in an IPv6 address");
      p++;
    }
    if (p >= len) return bad(text, host_b, "unterminated '[' in the host");
    if (p == host_b + 1) return bad(text, p, "empty IPv6 address in the host");
    p++;
  } else {
    while (p < len && (is_alnum(text[p]) || text[p] == '.' || text[p] == '-')) p++;
  }
  if (p == host_b) return bad(text, p, "missing host");
  if (text[p] == ':') {
    size_t port_b = ++p;
    long port = 0;
    while (p < len && text[p] >= '0' && text[p] <= '9' && p - port_b < 6) port = port * 10 + (text[p++] - '0');
    if (p == port_b) return bad(text, p, "missing port after ':'");
    if (port < 1 || port > 65535 || (p < len && text[p] >= '0' && text[p] <= '9'))
      return bad(text, port_b, "port must be 1 to 65535");
  }
  if (p >= len) return bad(text, p, "missing '/NAME:TAG' or '/NAME@sha256:...' after the host");
  if (text[p] != '/') return bad(text, p, "invalid character in the host");
  size_t base_e = p++;

  /* NAME ends at '@' (digest) or the last ':' after the last '/' (tag). */
  size_t name_b = p, name_e, at = len;
  const char *atp = strchr(text + p, '@');
  if (atp) at = (size_t)(atp - text);
  const char *tagp = NULL;
  if (!atp) {
    const char *slash = strrchr(text + p, '/');
    tagp = strchr(slash ? slash : text + p, ':');
    if (!tagp) return bad(text, len, "missing ':TAG' or '@sha256:...' after the name");
    name_e = (size_t)(tagp - text);
  } else {
    /* NAME:TAG@DIGEST (what `nimble submit` prints): the digest pins the
     * artifact; the tag says what its signature must be for. */
    name_e = at;
    const char *colon = memchr(text + p, ':', at - p);
    if (colon) {
      name_e = (size_t)(colon - text);
      if (memchr(colon + 1, '/', at - name_e - 1))
        return bad(text, name_e, "a ':' in the name must start its tag");
      /* The same grammar as a lone tag: it names the signature to check. */
      NIMBLE_RETURN_IF_ERROR(check_tag(text, name_e + 1, at));
    }
  }
  if (name_e == name_b) return bad(text, name_b, "empty name");
  if (name_e - name_b > MAX_NAME) return bad(text, name_b, "name longer than 255 bytes");
  const char *why = NULL;
  size_t badpos;
  if (!check_name(text, name_b, name_e, &badpos, &why)) return bad(text, badpos, why);

  if (tagp) {
    NIMBLE_RETURN_IF_ERROR(check_tag(text, name_e + 1, len));
  } else {
    const char *d = text + at + 1;
    if (!nimble_digest_valid(d, strlen(d)))
      return bad(text, at + 1, "expected a digest sha256:<64 lowercase hex digits>");
  }

  out->base_url = dup_range(text, base_e);
  out->name = dup_range(text + name_b, name_e - name_b);
  if (tagp) out->tag = dup_range(text + name_e + 1, len - name_e - 1);
  else out->digest = dup_range(text + at + 1, len - at - 1);
  /* NAME:TAG@DIGEST keeps its tag: the signature check needs it. */
  int tag_too = atp && name_e != at;
  if (tag_too) out->tag = dup_range(text + name_e + 1, at - name_e - 1);
  if (!out->base_url || !out->name || (!out->tag && !out->digest) || (tag_too && !out->tag)) {
    nimble_fetch_reference_deinit(out);
    return NIMBLE_OOM_IN("reference");
  }
  return nimble_ok();
}

void nimble_fetch_reference_deinit(nimble_fetch_reference_t *ref) {
  if (!ref) return;
  free(ref->base_url);
  free(ref->name);
  free(ref->tag);
  free(ref->digest);
  memset(ref, 0, sizeof *ref);
}
