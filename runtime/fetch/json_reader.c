/* The strict JSON reader (RFC 8259, integers only). Recursive descent with a
 * depth cap, so hostile input cannot exhaust the stack, and a value-count
 * cap, so it cannot exhaust memory with tiny values. */
#include "json_reader.h"

#include <stdlib.h>
#include <string.h>

typedef struct reader {
  const uint8_t *p;
  size_t size, pos, values;
} reader;

static nimble_status_t fail(const reader *r, size_t at, const char *what) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "json: at byte %zu: %s", at, what);
}

static void skip_ws(reader *r) {
  while (r->pos < r->size) {
    uint8_t c = r->p[r->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    r->pos++;
  }
}

static void value_deinit(nimble_json_value *v) {
  if (v->kind == NIMBLE_JSON_STRING) free(v->string);
  if (v->kind == NIMBLE_JSON_ARRAY || v->kind == NIMBLE_JSON_OBJECT) {
    for (size_t i = 0; i < v->length; i++) {
      value_deinit(&v->items[i]);
      if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
  }
}

void nimble_json_free(nimble_json_value *v) {
  if (!v) return;
  value_deinit(v);
  free(v);
}

const char *nimble_json_kind_name(nimble_json_kind_t kind) {
  switch (kind) {
    case NIMBLE_JSON_NULL: return "null";
    case NIMBLE_JSON_BOOL: return "a boolean";
    case NIMBLE_JSON_INT: return "an integer";
    case NIMBLE_JSON_STRING: return "a string";
    case NIMBLE_JSON_ARRAY: return "an array";
    case NIMBLE_JSON_OBJECT: return "an object";
  }
  return "?";
}

static int hex4(const uint8_t *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    uint8_t c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

static size_t put_utf8(uint8_t *o, uint32_t cp) {
  if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
  if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (uint8_t)(0xE0 | cp >> 12); o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (uint8_t)(0xF0 | cp >> 18); o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const uint8_t *p, size_t avail) {
  uint8_t c = p[0];
  size_t n;
  uint32_t cp, min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; min = 0x10000; }
  else return 0;
  if (avail < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

/* r->pos is at the opening quote. The decoded string is never longer than
 * its source, so one allocation of the source length suffices. */
static nimble_status_t parse_string(reader *r, char **out, size_t *out_len) {
  size_t start = r->pos++;
  size_t end = r->pos;
  while (end < r->size && r->p[end] != '"') end += (r->p[end] == '\\' && end + 1 < r->size) ? 2 : 1;
  if (end >= r->size) return fail(r, start, "unterminated string");
  uint8_t *s = malloc(end - r->pos + 1);
  if (!s) return NIMBLE_OOM_IN("json");
  size_t n = 0;
  while (r->pos < end) {
    uint8_t c = r->p[r->pos];
    if (c < 0x20) {
      free(s);
      return fail(r, r->pos, "control character in a string (escape it)");
    }
    if (c != '\\') {
      size_t k = utf8_len(r->p + r->pos, end - r->pos);
      if (!k) {
        free(s);
        return fail(r, r->pos, "invalid UTF-8 in a string");
      }
      memcpy(s + n, r->p + r->pos, k);
      n += k;
      r->pos += k;
      continue;
    }
    size_t at = r->pos;
    uint8_t e = r->p[r->pos + 1];
    r->pos += 2;
    switch (e) {
      case '"': s[n++] = '"'; break;
      case '\\': s[n++] = '\\'; break;
      case '/': s[n++] = '/'; break;
      case 'b': s[n++] = '\b'; break;
      case 'f': s[n++] = '\f'; break;
      case 'n': s[n++] = '\n'; break;
      case 'r': s[n++] = '\r'; break;
      case 't': s[n++] = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (end - r->pos < 4 || !hex4(r->p + r->pos, &cp)) {
          free(s);
          return fail(r, at, "\\u needs 4 hex digits");
        }
        r->pos += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          free(s);
          return fail(r, at, "lone low surrogate in \\u escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (end - r->pos < 6 || r->p[r->pos] != '\\' || r->p[r->pos + 1] != 'u' ||
              !hex4(r->p + r->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
            free(s);
            return fail(r, at, "high surrogate not followed by a low surrogate");
          }
          r->pos += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        n += put_utf8(s + n, cp);
        break;
      }
      default:
        free(s);
        return fail(r, at, "unknown escape");
    }
  }
  r->pos = end + 1;
  s[n] = '\0';
  *out = (char *)s;
  *out_len = n;
  return nimble_ok();
}

static nimble_status_t parse_int(reader *r, nimble_json_value *v) {
  size_t start = r->pos;
  int neg = 0;
  if (r->p[r->pos] == '-') { neg = 1; r->pos++; }
  if (r->pos >= r->size || r->p[r->pos] < '0' || r->p[r->pos] > '9')
    return fail(r, start, "a number needs digits");
  if (r->p[r->pos] == '0' && r->pos + 1 < r->size && r->p[r->pos + 1] >= '0' && r->p[r->pos + 1] <= '9')
    return fail(r, start, "leading zeros are not allowed");
  /* Accumulate as a negative number: its range is one larger. */
  int64_t acc = 0;
  while (r->pos < r->size && r->p[r->pos] >= '0' && r->p[r->pos] <= '9') {
    int d = r->p[r->pos] - '0';
    if (acc < (INT64_MIN + d) / 10) return fail(r, start, "integer out of the int64 range");
    acc = acc * 10 - d;
    r->pos++;
  }
  if (r->pos < r->size && (r->p[r->pos] == '.' || r->p[r->pos] == 'e' || r->p[r->pos] == 'E'))
    return fail(r, start, "real numbers are not supported (integers only)");
  if (!neg) {
    if (acc == INT64_MIN) return fail(r, start, "integer out of the int64 range");
    acc = -acc;
  }
  v->kind = NIMBLE_JSON_INT;
  v->integer = acc;
  return nimble_ok();
}

static nimble_status_t parse_value(reader *r, nimble_json_value *v, int depth);

/* Parses the items of an array or object into v; r->pos is past the opener. */
static nimble_status_t parse_container(reader *r, nimble_json_value *v, int depth, int object) {
  size_t cap = 0;
  uint8_t close = object ? '}' : ']';
  skip_ws(r);
  if (r->pos < r->size && r->p[r->pos] == close) {
    r->pos++;
    return nimble_ok();
  }
  for (;;) {
    if (v->length == cap) {
      size_t ncap = cap ? cap * 2 : 4;
      nimble_json_value *items = realloc(v->items, ncap * sizeof *items);
      if (!items) return NIMBLE_OOM_IN("json");
      v->items = items;
      if (object) {
        char **keys = realloc(v->keys, ncap * sizeof *keys);
        if (!keys) return NIMBLE_OOM_IN("json");
        v->keys = keys;
      }
      cap = ncap;
    }
    skip_ws(r);
    char *key = NULL;
    if (object) {
      if (r->pos >= r->size || r->p[r->pos] != '"') return fail(r, r->pos, "expected a string key");
      size_t at = r->pos, klen;
      NIMBLE_RETURN_IF_ERROR(parse_string(r, &key, &klen));
      if (strlen(key) != klen) {
        free(key);
        return fail(r, at, "NUL in an object key");
      }
      for (size_t i = 0; i < v->length; i++)
        if (strcmp(v->keys[i], key) == 0) {
          nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                                 "json: at byte %zu: duplicate key '%s'", at, key);
          free(key);
          return s;
        }
      skip_ws(r);
      if (r->pos >= r->size || r->p[r->pos] != ':') {
        free(key);
        return fail(r, r->pos, "expected ':' after a key");
      }
      r->pos++;
    }
    nimble_json_value *item = &v->items[v->length];
    memset(item, 0, sizeof *item);
    if (object) v->keys[v->length] = key;
    v->length++; /* counted now so that a failure below frees it */
    NIMBLE_RETURN_IF_ERROR(parse_value(r, item, depth + 1));
    skip_ws(r);
    if (r->pos >= r->size) return fail(r, r->pos, object ? "unterminated object" : "unterminated array");
    if (r->p[r->pos] == ',') {
      r->pos++;
      continue;
    }
    if (r->p[r->pos] == close) {
      r->pos++;
      return nimble_ok();
    }
    return fail(r, r->pos, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static nimble_status_t parse_value(reader *r, nimble_json_value *v, int depth) {
  skip_ws(r);
  v->offset = r->pos;
  if (r->pos >= r->size) return fail(r, r->pos, "expected a value, got the end of the document");
  if (depth > NIMBLE_JSON_MAX_DEPTH) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "json: at byte %zu: nesting deeper than %d",
                              r->pos, NIMBLE_JSON_MAX_DEPTH);
  }
  if (++r->values > NIMBLE_JSON_MAX_VALUES) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "json: at byte %zu: more than %u values",
                              r->pos, NIMBLE_JSON_MAX_VALUES);
  }
  uint8_t c = r->p[r->pos];
  static const struct { const char *word; nimble_json_kind_t kind; int64_t value; } kWords[] = {
      {"true", NIMBLE_JSON_BOOL, 1}, {"false", NIMBLE_JSON_BOOL, 0}, {"null", NIMBLE_JSON_NULL, 0}};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(kWords[i].word);
    if (c == (uint8_t)kWords[i].word[0]) {
      if (r->size - r->pos < n || memcmp(r->p + r->pos, kWords[i].word, n) != 0)
        return fail(r, r->pos, "invalid literal");
      r->pos += n;
      v->kind = kWords[i].kind;
      v->integer = kWords[i].value;
      return nimble_ok();
    }
  }
  if (c == '"') {
    v->kind = NIMBLE_JSON_STRING;
    return parse_string(r, &v->string, &v->length);
  }
  if (c == '-' || (c >= '0' && c <= '9')) return parse_int(r, v);
  if (c == '[' || c == '{') {
    r->pos++;
    v->kind = c == '[' ? NIMBLE_JSON_ARRAY : NIMBLE_JSON_OBJECT;
    return parse_container(r, v, depth, c == '{');
  }
  return fail(r, r->pos, "unexpected character");
}

nimble_status_t nimble_json_parse(const void *data, size_t size, nimble_json_value **out) {
  *out = NULL;
  if (size > NIMBLE_JSON_MAX_SIZE) {
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "json: document of %zu bytes is over the %u-byte limit", size,
                              NIMBLE_JSON_MAX_SIZE);
  }
  reader r = {data, size, 0, 0};
  nimble_json_value *v = calloc(1, sizeof *v);
  if (!v) return NIMBLE_OOM_IN("json");
  nimble_status_t s = parse_value(&r, v, 1);
  if (!s) {
    skip_ws(&r);
    if (r.pos != r.size) s = fail(&r, r.pos, "trailing bytes after the document");
  }
  if (s) {
    nimble_json_free(v);
    return s;
  }
  *out = v;
  return nimble_ok();
}

const nimble_json_value *nimble_json_get(const nimble_json_value *v, const char *key) {
  if (!v || v->kind != NIMBLE_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < v->length; i++)
    if (strcmp(v->keys[i], key) == 0) return &v->items[i];
  return NULL;
}
