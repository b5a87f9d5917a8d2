/* Bearer token checks in constant time.
 *
 * Tokens are kept only as SHA-256 digests; a presented token is hashed and
 * compared against every digest with nimble_digest_equal (constant time),
 * without stopping at the first match. */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nimble/digest.h"

struct nimble_store_auth {
  nimble_digest_t *tokens;
  size_t count;
};

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

nimble_status_t nimble_store_auth_parse(const char *text, size_t size,
                                        nimble_store_auth **out_auth) {
  nimble_store_auth *auth = calloc(1, sizeof *auth);
  if (!auth) return NIMBLE_OOM();
  size_t cap = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < size;) {
    size_t end = pos;
    while (end < size && text[end] != '\n') end++;
    line_no++;
    size_t a = pos, b = end;
    while (a < b && is_blank(text[a])) a++;
    while (b > a && is_blank(text[b - 1])) b--;
    pos = end + 1;
    if (a == b || text[a] == '#') continue;
    for (size_t i = a; i < b; i++) {
      unsigned char c = (unsigned char)text[i];
      if (c <= 0x20 || c >= 0x7f) {
        nimble_store_auth_destroy(auth);
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "token file line %zu: character %zu (0x%02x) is not allowed "
                                  "in a token",
                                  line_no, i - a, c);
      }
    }
    if (auth->count == cap) {
      cap = cap ? cap * 2 : 4;
      nimble_digest_t *n = realloc(auth->tokens, cap * sizeof *n);
      if (!n) {
        nimble_store_auth_destroy(auth);
        return NIMBLE_OOM();
      }
      auth->tokens = n;
    }
    nimble_digest_compute(text + a, b - a, &auth->tokens[auth->count++]);
  }
  if (auth->count == 0) {
    nimble_store_auth_destroy(auth);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "token file holds no token");
  }
  *out_auth = auth;
  return nimble_ok();
}

nimble_status_t nimble_store_auth_load(const char *path, nimble_store_auth **out_auth) {
  FILE *f = fopen(path, "rb");
  if (!f) return nimble_status_make(NIMBLE_NOT_FOUND, "cannot read token file %s", path);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  nimble_status_t s = nimble_ok();
  for (;;) {
    if (len == cap) {
      if (cap >= (1u << 20)) {
        s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "token file %s is larger than 1 MiB",
                               path);
        break;
      }
      cap = cap ? cap * 2 : 4096;
      char *n = realloc(buf, cap);
      if (!n) {
        s = NIMBLE_OOM();
        break;
      }
      buf = n;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) s = nimble_status_make(NIMBLE_IO_ERROR, "reading token file %s", path);
      break;
    }
  }
  fclose(f);
  if (!s) s = nimble_store_auth_parse(buf ? buf : "", len, out_auth);
  free(buf);
  if (s) return nimble_status_annotate(s, "%s", path);
  return nimble_ok();
}

void nimble_store_auth_destroy(nimble_store_auth *auth) {
  if (!auth) return;
  free(auth->tokens);
  free(auth);
}

size_t nimble_store_auth_count(const nimble_store_auth *auth) { return auth ? auth->count : 0; }

int nimble_store_auth_check(const nimble_store_auth *auth, const char *authorization) {
  if (!auth || !authorization) return 0;
  const char *p = authorization;
  while (*p == ' ') p++;
  if (strncasecmp(p, "Bearer", 6) != 0 || p[6] != ' ') return 0;
  p += 7;
  while (*p == ' ') p++;
  size_t n = strlen(p);
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  if (n == 0) return 0;
  nimble_digest_t presented;
  nimble_digest_compute(p, n, &presented);
  int match = 0;
  for (size_t i = 0; i < auth->count; i++)
    match |= nimble_digest_equal(&presented, &auth->tokens[i]);
  return match;
}
