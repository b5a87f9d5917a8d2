#include "import_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nimble_status_t import_test_check_file(nimble_arena *arena, const char *path, nimble_module **m,
                                       nimble_typing **t) {
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_import_file(path, arena, NULL, m));
  return nimble_typing_infer_module(*m, t);
}

const char *import_test_main_result(const nimble_typing *t, char *buf, size_t size) {
  const nimble_type *ft = nimble_typing_global_type(t, "main");
  if (!ft || ft->kind != NIMBLE_TYPE_FUNC) {
    snprintf(buf, size, "(none)");
    return buf;
  }
  return nimble_type_format(ft->u.func.ret, buf, size);
}

const nimble_type *import_test_main_output(const nimble_typing *t, size_t i) {
  const nimble_type *ft = nimble_typing_global_type(t, "main");
  if (!ft || ft->kind != NIMBLE_TYPE_FUNC) return NULL;
  const nimble_type *r = ft->u.func.ret;
  if (r->kind == NIMBLE_TYPE_TUPLE) return i < r->u.tuple.count ? r->u.tuple.fields[i] : NULL;
  return i == 0 ? r : NULL;
}

static int read_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= n) return -1;
    uint8_t b = p[(*pos)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

int import_test_tensor_dims(const char *path, int64_t *dims, size_t cap, size_t *rank, int *dtype) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (len < 0) {
    fclose(f);
    return -1;
  }
  uint8_t *p = malloc((size_t)len + 1);
  if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) {
    free(p);
    fclose(f);
    return -1;
  }
  fclose(f);
  size_t n = (size_t)len, pos = 0;
  *rank = 0;
  *dtype = 0;
  int rc = 0;
  while (pos < n && rc == 0) {
    uint64_t key, v;
    if (read_varint(p, n, &pos, &key)) { rc = -1; break; }
    unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
    if (wt == 0) {
      if (read_varint(p, n, &pos, &v)) { rc = -1; break; }
      if (field == 1) {
        if (*rank >= cap) { rc = -1; break; }
        dims[(*rank)++] = (int64_t)v;
      } else if (field == 2) {
        *dtype = (int)v;
      }
    } else if (wt == 2) {
      if (read_varint(p, n, &pos, &v) || v > n - pos) { rc = -1; break; }
      if (field == 1) { /* packed dims */
        size_t end = pos + (size_t)v;
        while (pos < end) {
          uint64_t d;
          if (read_varint(p, end, &pos, &d) || *rank >= cap) { rc = -1; break; }
          dims[(*rank)++] = (int64_t)d;
        }
      } else {
        pos += (size_t)v;
      }
    } else if (wt == 5) {
      pos += 4;
    } else if (wt == 1) {
      pos += 8;
    } else {
      rc = -1;
    }
    if (pos > n) rc = -1;
  }
  free(p);
  return rc;
}

const char *import_test_path(const char *env, const char *rel, char *buf, size_t size) {
  const char *root = getenv(env);
  if (!root || !root[0]) return NULL;
  snprintf(buf, size, "%s/%s", root, rel);
  return buf;
}
