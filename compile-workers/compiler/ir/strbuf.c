#include "ir/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nimble_strbuf_init(nimble_strbuf *b) { memset(b, 0, sizeof(*b)); }

void nimble_strbuf_deinit(nimble_strbuf *b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

static bool strbuf_reserve(nimble_strbuf *b, size_t extra) {
  if (b->failed) return false;
  if (extra > SIZE_MAX - b->len - 1) {
    b->failed = true;
    return false;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void nimble_strbuf_append(nimble_strbuf *b, const char *s, size_t n) {
  if (!strbuf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void nimble_strbuf_puts(nimble_strbuf *b, const char *s) { nimble_strbuf_append(b, s, strlen(s)); }

void nimble_strbuf_printf(nimble_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if (!strbuf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

nimble_status_t nimble_strbuf_finish(nimble_strbuf *b, char **out) {
  if (b->failed) {
    nimble_strbuf_deinit(b);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory while printing IR");
  }
  if (!b->data && !strbuf_reserve(b, 0)) return nimble_strbuf_finish(b, out);
  b->data[b->len] = '\0';
  *out = b->data;
  memset(b, 0, sizeof(*b));
  return nimble_ok();
}
