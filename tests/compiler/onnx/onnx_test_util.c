/* See onnx_test_util.h. */
#include "onnx_test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *onnx_test_path(const char *env, const char *rel) {
  const char *dir = getenv(env);
  ck_assert_msg(dir && dir[0], "%s is not set (run the suite through ctest)", env);
  size_t n = strlen(dir) + strlen(rel) + 2;
  char *p = malloc(n);
  ck_assert_ptr_nonnull(p);
  snprintf(p, n, "%s/%s", dir, rel);
  return p;
}

uint8_t *onnx_test_read_file(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *buf = NULL;
  size_t size = 0, cap = 0;
  for (;;) {
    if (size == cap) {
      cap = cap ? cap * 2 : 65536;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t r = fread(buf + size, 1, cap - size, f);
    size += r;
    if (r == 0) break;
  }
  fclose(f);
  *out_size = size;
  return buf;
}

/* Finds 'key': in the header dict and returns the text after it. */
static const char *npy_field(const char *hdr, const char *key) {
  const char *p = strstr(hdr, key);
  if (!p) return NULL;
  p = strchr(p + strlen(key), ':');
  if (!p) return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

int onnx_test_npy_load(const char *path, onnx_test_npy *out, char *err, size_t err_size) {
  memset(out, 0, sizeof(*out));
  size_t size;
  uint8_t *buf = onnx_test_read_file(path, &size);
  if (!buf) return snprintf(err, err_size, "%s: cannot read", path), -1;
  if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
    free(buf);
    return snprintf(err, err_size, "%s: not a .npy file", path), -1;
  }
  size_t hlen, hstart;
  if (buf[6] == 1) {
    hlen = buf[8] | (size_t)buf[9] << 8;
    hstart = 10;
  } else {
    hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    hstart = 12;
  }
  if (hstart + hlen > size) {
    free(buf);
    return snprintf(err, err_size, "%s: truncated header", path), -1;
  }
  char *hdr = malloc(hlen + 1);
  memcpy(hdr, buf + hstart, hlen);
  hdr[hlen] = '\0';
  const char *d = npy_field(hdr, "'descr'");
  const char *fo = npy_field(hdr, "'fortran_order'");
  const char *sh = npy_field(hdr, "'shape'");
  int ok = d && fo && sh && *d == '\'' && strncmp(fo, "False", 5) == 0 && *sh == '(';
  if (ok) {
    const char *end = strchr(d + 1, '\'');
    ok = end && (size_t)(end - d - 1) < sizeof(out->descr);
    if (ok) memcpy(out->descr, d + 1, (size_t)(end - d - 1));
    const char *p = sh + 1;
    while (ok && *p != ')') {
      while (*p == ' ' || *p == ',') p++;
      if (*p == ')') break;
      char *q;
      long long v = strtoll(p, &q, 10);
      if (q == p || out->rank >= 8)
        ok = 0;
      else
        out->dims[out->rank++] = v, p = q;
    }
  }
  free(hdr);
  if (!ok) {
    free(buf);
    return snprintf(err, err_size, "%s: unsupported header", path), -1;
  }
  out->size = size - hstart - hlen;
  out->data = malloc(out->size ? out->size : 1);
  memcpy(out->data, buf + hstart + hlen, out->size);
  free(buf);
  return 0;
}

void onnx_test_npy_free(onnx_test_npy *npy) {
  free(npy->data);
  npy->data = NULL;
}

void pb_raw(onnx_test_buf *b, const void *data, size_t n) {
  if (b->size + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->size + n) cap *= 2;
    b->data = realloc(b->data, cap);
    ck_assert_ptr_nonnull(b->data);
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->size, data, n);
  b->size += n;
}

void pb_varint(onnx_test_buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  pb_raw(b, tmp, n);
}

void pb_tag(onnx_test_buf *b, uint32_t field, unsigned wire_type) {
  pb_varint(b, (uint64_t)field << 3 | wire_type);
}

void pb_int(onnx_test_buf *b, uint32_t field, int64_t v) {
  pb_tag(b, field, 0);
  pb_varint(b, (uint64_t)v);
}

void pb_bytes(onnx_test_buf *b, uint32_t field, const void *data, size_t n) {
  pb_tag(b, field, 2);
  pb_varint(b, n);
  pb_raw(b, data, n);
}

void pb_str(onnx_test_buf *b, uint32_t field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

void pb_msg(onnx_test_buf *b, uint32_t field, const onnx_test_buf *sub) {
  pb_bytes(b, field, sub->data, sub->size);
}

void pb_free(onnx_test_buf *b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}
