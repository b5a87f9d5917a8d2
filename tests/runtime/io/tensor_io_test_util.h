/* Helpers shared by the tensor I/O suites: fixture paths (written at test
 * time by make_fixtures.py with real NumPy and ONNX), whole-file reads, and
 * the reference check by verify_tensor.py. */
#ifndef NIMBLE_TENSOR_IO_TEST_UTIL_H
#define NIMBLE_TENSOR_IO_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "nimble_test.h"

#include "nimble/tensor_io.h"

/* The fixture directory (env NIMBLE_RTIO_FIXTURES, set by CMake). */
static inline const char *fixture_dir(void) {
  const char *d = getenv("NIMBLE_RTIO_FIXTURES");
  ck_assert_msg(d && *d, "NIMBLE_RTIO_FIXTURES is not set");
  return d;
}

/* "<fixture dir>/<name>" in one of eight static buffers used in turn, so
 * that one call's arguments may hold several fixture paths. */
static inline const char *fixture(const char *name) {
  static char paths[8][4096];
  static unsigned next;
  char *path = paths[next++ % 8];
  snprintf(path, sizeof(paths[0]), "%s/%s", fixture_dir(), name);
  return path;
}

/* A scratch path for files the tests write: "<fixture dir>/out/<name>",
 * in one static buffer (copy it to keep it). */
static inline const char *scratch(const char *name) {
  static char path[8192];
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/out", fixture_dir());
  mkdir(dir, 0777);
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return path;
}

/* The whole file; caller frees. Fails the test when absent. */
static inline uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  ck_assert(buf != NULL);
  ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Runs verify_tensor.py on FILE with the expectation; returns its exit code
 * (0 when NumPy / ONNX read exactly the expected tensor). */
static inline int verify_with_reference(const char *file, const char *dtype, const char *shape,
                                        const char *values, const char *name) {
  const char *src = getenv("NIMBLE_RTIO_SOURCE");
  ck_assert_msg(src && *src, "NIMBLE_RTIO_SOURCE is not set");
  char cmd[16384];
  snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s/verify_tensor.py' '%s' '%s' '%s' '%s' '%s'",
           src, file, dtype, shape, values, name ? name : "");
  int rc = system(cmd);
  return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

#endif /* NIMBLE_TENSOR_IO_TEST_UTIL_H */
