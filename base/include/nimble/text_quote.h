/* Quoting untrusted text for error messages (base: protocol and target specs use it).
 *
 * Error messages name the offending value, but that value may be huge or hold
 * control bytes; a quoted excerpt keeps messages short and printable. */
#ifndef NIMBLE_TEXT_QUOTE_H
#define NIMBLE_TEXT_QUOTE_H

#include <stddef.h>

/* Copies up to cap-1 bytes of text[0..len) into out, replacing bytes outside
 * printable ASCII with '?' and ending with "..." when cut short. cap >= 8. */
static inline void nimble_text_quote(const char *text, size_t len, char *out, size_t cap) {
  size_t n = 0;
  int cut = 0;
  for (size_t i = 0; i < len; i++) {
    if (n + 1 >= cap - 3 && i + 1 < len) {
      cut = 1;
      break;
    }
    if (n + 1 >= cap) break;
    unsigned char c = (unsigned char)text[i];
    out[n++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  if (cut) {
    out[n++] = '.';
    out[n++] = '.';
    out[n++] = '.';
  }
  out[n] = '\0';
}

#endif /* NIMBLE_TEXT_QUOTE_H */
