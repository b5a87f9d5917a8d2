/* nimble-run's JSON reader for ADT inputs (see adt_json.h). A small strict
 * recursive-descent parser that builds values as it goes: the runtime has
 * no JSON library, and its fetcher's reader stops at 32 levels, too few for
 * a deep tree. */
#include "adt_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FILE_SIZE (256u << 20)
#define MAX_NAME 256

typedef struct parser {
  const char *s;
  size_t n, pos;
  const char *what;
  const nimble_entry_info_t *entry;
  uint32_t input;
  nimble_status_t err;
} parser;

static int perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *p, const char *fmt, ...) {
  if (p->err) return 0;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  p->err = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s at offset %zu: %s", p->what, p->pos, msg);
  return 0;
}

static void skip_ws(parser *p) {
  while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                           p->s[p->pos] == '\r'))
    p->pos++;
}

static int peek(parser *p) {
  skip_ws(p);
  return p->pos < p->n ? (unsigned char)p->s[p->pos] : -1;
}

static int expect(parser *p, char c) {
  if (peek(p) != c) return perr(p, "expected '%c'", c);
  p->pos++;
  return 1;
}

/* A string of plain characters (constructor names need no escapes). */
static int parse_name(parser *p, char *buf, size_t size) {
  if (!expect(p, '"')) return 0;
  size_t start = p->pos, len = 0;
  while (p->pos < p->n && p->s[p->pos] != '"') {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '\\' || c < 0x20) return perr(p, "escapes and control characters are not accepted in names");
    p->pos++;
    len++;
  }
  if (p->pos >= p->n) return perr(p, "unterminated string");
  if (len + 1 > size) {
    p->pos = start;
    return perr(p, "a name longer than %zu bytes", size - 1);
  }
  memcpy(buf, p->s + start, len);
  buf[len] = '\0';
  p->pos++;
  return 1;
}

static int match_word(parser *p, const char *w) {
  size_t l = strlen(w);
  if (p->n - p->pos >= l && memcmp(p->s + p->pos, w, l) == 0) {
    p->pos += l;
    return 1;
  }
  return 0;
}

/* A JSON number's span (RFC 8259 grammar); sets *is_int when it has no
 * fraction or exponent. */
static int number_span(parser *p, size_t *len, int *is_int) {
  size_t i = p->pos;
  *is_int = 1;
  if (i < p->n && p->s[i] == '-') i++;
  if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, "expected a number");
  if (p->s[i] == '0') {
    i++;
  } else {
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
  }
  if (i < p->n && p->s[i] == '.') {
    *is_int = 0;
    i++;
    if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, "a digit must follow '.'");
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
  }
  if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
    *is_int = 0;
    i++;
    if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
    if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, "a digit must follow the exponent");
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
  }
  *len = i - p->pos;
  return 1;
}

/* ---- tensor fields ---- */

typedef struct tensor_buf {
  const nimble_adt_field_t *f;
  int64_t shape[32];
  int seen[32]; /* shape[d] known */
  unsigned char *data;
  size_t size, cap, elem;
} tensor_buf;

static int put_elem(parser *p, tensor_buf *t) {
  int c = peek(p);
  unsigned char bytes[8];
  DLDataType dt = t->f->dtype;
  if (dt.code == kDLUInt && dt.bits == 8 && (c == 't' || c == 'f')) {
    if (!match_word(p, c == 't' ? "true" : "false")) return perr(p, "expected true, false or a number");
    bytes[0] = c == 't';
  } else {
    size_t len = 0;
    int is_int = 0;
    if (!number_span(p, &len, &is_int)) return 0;
    char num[64];
    if (len >= sizeof num) return perr(p, "a number of %zu characters", len);
    memcpy(num, p->s + p->pos, len);
    num[len] = '\0';
    if (dt.code == kDLFloat) {
      double v = strtod(num, NULL);
      if (dt.bits == 32) {
        if (isfinite(v) && fabs(v) > 3.4028234663852886e38) return perr(p, "%s does not fit float32", num);
        float f = (float)v;
        memcpy(bytes, &f, 4);
      } else if (dt.bits == 64) {
        memcpy(bytes, &v, 8);
      } else {
        return perr(p, "float%u fields are not supported here", dt.bits);
      }
    } else {
      if (!is_int) return perr(p, "%s is not an integer (the field is %s%u)", num,
                               dt.code == kDLUInt ? "uint" : "int", dt.bits);
      errno = 0;
      char *end;
      long long v = strtoll(num, &end, 10);
      if (errno) return perr(p, "%s is out of range", num);
      long long lo = dt.code == kDLUInt ? 0 : dt.bits == 64 ? INT64_MIN : -(1LL << (dt.bits - 1));
      long long hi = dt.code == kDLUInt ? (dt.bits == 64 ? INT64_MAX : (1LL << dt.bits) - 1)
                                        : dt.bits == 64 ? INT64_MAX : (1LL << (dt.bits - 1)) - 1;
      if (v < lo || v > hi)
        return perr(p, "%s does not fit %s%u", num, dt.code == kDLUInt ? "uint" : "int", dt.bits);
      uint64_t u = (uint64_t)v;
      for (unsigned b = 0; b < dt.bits / 8; b++) bytes[b] = (unsigned char)(u >> (8 * b)); /* little-endian */
    }
    p->pos += len;
  }
  if (t->size + t->elem > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    if (cap > MAX_FILE_SIZE) return perr(p, "a tensor field over %u bytes", MAX_FILE_SIZE);
    unsigned char *d = realloc(t->data, cap);
    if (!d) return perr(p, "out of memory");
    t->data = d;
    t->cap = cap;
  }
  memcpy(t->data + t->size, bytes, t->elem);
  t->size += t->elem;
  return 1;
}

/* Level `level` of the nested arrays (level == rank: one element). */
static int parse_level(parser *p, tensor_buf *t, int level) {
  if (level == t->f->ndim) return put_elem(p, t);
  if (!expect(p, '[')) return perr(p, "the field has rank %d: expected an array at depth %d", t->f->ndim, level);
  int64_t count = 0;
  if (peek(p) != ']') {
    for (;;) {
      if (!parse_level(p, t, level + 1)) return 0;
      count++;
      if (peek(p) == ',') {
        p->pos++;
        continue;
      }
      break;
    }
  }
  if (!expect(p, ']')) return 0;
  if (!t->seen[level]) {
    t->seen[level] = 1;
    t->shape[level] = count;
    if (t->f->dims[level] >= 0 && count != t->f->dims[level])
      return perr(p, "dim %d has %lld elements, the field declares %lld", level, (long long)count,
                  (long long)t->f->dims[level]);
  } else if (t->shape[level] != count) {
    return perr(p, "ragged array: dim %d has %lld and %lld elements", level, (long long)t->shape[level],
                (long long)count);
  }
  return 1;
}

static int parse_tensor(parser *p, const nimble_adt_field_t *f, nimble_value **out) {
  tensor_buf t;
  memset(&t, 0, sizeof t);
  t.f = f;
  t.elem = f->dtype.bits / 8u;
  size_t at = p->pos;
  int ok = parse_level(p, &t, 0);
  if (ok) {
    /* An empty array leaves the dims below it unseen: they are 0 then. */
    for (int d = 0; d < f->ndim; d++)
      if (!t.seen[d]) t.shape[d] = f->dims[d] >= 0 ? f->dims[d] : 0;
    DLTensor dl;
    memset(&dl, 0, sizeof dl);
    dl.data = t.data;
    dl.device.device_type = kDLCPU;
    dl.ndim = f->ndim;
    dl.dtype = f->dtype;
    dl.shape = t.shape;
    nimble_status_t s = nimble_value_from_tensor(&dl, out);
    if (s) {
      p->pos = at;
      perr(p, "%s", nimble_status_message(s));
      nimble_status_free(s);
      ok = 0;
    }
  }
  free(t.data);
  return ok;
}

/* ---- ADT values ---- */

/* A value of ADT `type` (len bytes). */
static int parse_adt(parser *p, const char *type, size_t type_len, int depth, nimble_value **out) {
  if (depth > NIMBLE_RUN_ADT_MAX_DEPTH) return perr(p, "nested deeper than %d levels", NIMBLE_RUN_ADT_MAX_DEPTH);
  /* "Type.Name" on the heap: frames stay small however deep the tree. */
  char *qualified = malloc(type_len + 2 + MAX_NAME);
  if (!qualified) return perr(p, "out of memory");
  memcpy(qualified, type, type_len);
  qualified[type_len] = '.';
  char *name = qualified + type_len + 1;
  int bare = peek(p) == '"';
  size_t at = p->pos;
  int ok = 1;
  if (bare) {
    ok = parse_name(p, name, MAX_NAME);
  } else {
    ok = expect(p, '{') ? parse_name(p, name, MAX_NAME) && expect(p, ':')
                        : perr(p, "expected a constructor: {\"Name\": fields} or \"Name\"");
  }
  int32_t tag = 0;
  uint32_t nf = 0;
  if (ok) {
    nimble_status_t s = nimble_entry_find_constructor(p->entry, p->input, qualified, &tag, &nf);
    if (s) {
      nimble_status_free(s);
      p->pos = at;
      ok = perr(p, "'%s' is not a constructor of %.*s", name, (int)type_len, type);
    } else if (bare && nf != 0) {
      p->pos = at;
      ok = perr(p, "constructor %s has %u fields: write {\"%s\": ...}", name, nf, name);
    }
  }
  nimble_value **fields = ok ? calloc(nf ? nf : 1, sizeof *fields) : NULL;
  if (ok && !fields) ok = perr(p, "out of memory");
  if (!ok) {
    free(qualified);
    return 0;
  }
  nimble_status_t s;
  if (!bare) {
    int listed = nf != 1; /* one field is given as itself */
    if (nf == 0 && peek(p) == 'n') {
      ok = match_word(p, "null") ? 1 : perr(p, "expected null or []");
      listed = 0;
    } else if (listed) {
      ok = expect(p, '[');
    }
    for (uint32_t i = 0; ok && i < nf; i++) {
      if (i > 0 && !expect(p, ',')) {
        ok = perr(p, "constructor %s has %u fields, the value %u", name, nf, i);
        break;
      }
      nimble_adt_field_t fd;
      s = nimble_entry_constructor_field(p->entry, p->input, qualified, i, &fd);
      if (s) {
        ok = perr(p, "%s", nimble_status_message(s));
        nimble_status_free(s);
        break;
      }
      ok = fd.is_adt ? parse_adt(p, fd.adt_type, fd.adt_type_len, depth + 1, &fields[i])
                     : parse_tensor(p, &fd, &fields[i]);
    }
    if (ok && listed && peek(p) != ']') ok = perr(p, "constructor %s has %u fields, the value more", name, nf);
    if (ok && listed) ok = expect(p, ']');
    if (ok) ok = expect(p, '}');
  }
  if (ok) {
    s = nimble_value_adt(tag, fields, nf, out);
    if (s) {
      ok = perr(p, "%s", nimble_status_message(s));
      nimble_status_free(s);
    }
  }
  for (uint32_t i = 0; i < nf; i++) nimble_value_release(fields[i]);
  free(fields);
  free(qualified);
  return ok;
}

nimble_status_t nimble_run_parse_adt(const char *text, size_t size, const char *what,
                                     const nimble_entry_info_t *entry, uint32_t input, nimble_value **out) {
  if (!entry || input >= entry->num_inputs || !nimble_tensor_info_is_adt(&entry->inputs[input]))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: the input is not an ADT", what);
  const nimble_tensor_info_t *in = &entry->inputs[input];
  /* The input's own type names its first constructor: "Tree.Leaf(...)". */
  const char *first = in->ndim > 1 ? in->dims[1].symbol : NULL;
  const char *dot = first ? strchr(first, '.') : NULL;
  if (!dot)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' has no constructor description",
                              entry->name, in->name);
  parser p = {text, size, 0, what, entry, input, NULL};
  nimble_value *v = NULL;
  int ok = parse_adt(&p, first, (size_t)(dot - first), 0, &v);
  if (ok && peek(&p) != -1) ok = perr(&p, "trailing characters after the value");
  if (!ok) {
    nimble_value_release(v);
    return p.err;
  }
  *out = v;
  return nimble_ok();
}

nimble_status_t nimble_run_read_adt_file(const char *path, const nimble_entry_info_t *entry, uint32_t input,
                                         nimble_value **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > MAX_FILE_SIZE) {
    fclose(f);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: not a regular file of at most %u bytes", path,
                              MAX_FILE_SIZE);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n ? n : 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    free(buf);
    fclose(f);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot read %zu bytes", path, n);
  }
  fclose(f);
  nimble_status_t s = nimble_run_parse_adt(buf, n, path, entry, input, out);
  free(buf);
  return s;
}
