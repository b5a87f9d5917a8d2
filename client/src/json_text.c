/* Text to JSON strings, replacing what is not UTF-8. */
#include "json_text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

json_t *nimble_cli_json_text(const char *s) {
  if (!s) return json_null();
  size_t n = strlen(s);
  /* Each bad byte grows to three; n * 3 + 1 cannot overflow for a string
   * that fits in memory on any platform we build for, but check anyway. */
  if (n > (SIZE_MAX - 1) / 3) return NULL;
  char *out = malloc(n * 3 + 1);
  if (!out) return NULL;
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    size_t len = utf8_sequence(p);
    if (len) {
      memcpy(out + o, p, len);
      o += len;
      p += len;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      p++;
    }
  }
  out[o] = '\0';
  json_t *j = json_stringn(out, o);
  free(out);
  return j;
}
