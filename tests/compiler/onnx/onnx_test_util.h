/* Helpers for the ONNX loader suites: fixture paths, whole files, NumPy
 * .npy arrays (the fixtures' reference data), and a small protobuf writer
 * for hand-built messages whose byte offsets the tests compute by hand. */
#ifndef NIMBLE_ONNX_TEST_UTIL_H
#define NIMBLE_ONNX_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* "$ENV/rel"; caller frees. Aborts the test when ENV is unset. */
char *onnx_test_path(const char *env, const char *rel);

/* The whole file; caller frees. NULL when it cannot be read. */
uint8_t *onnx_test_read_file(const char *path, size_t *out_size);

/* A C-order .npy array (format 1.0/2.0). */
typedef struct onnx_test_npy {
  char descr[16]; /* e.g. "<f4", "|i1", "|b1", "<i8" */
  size_t rank;
  int64_t dims[8];
  uint8_t *data; /* owned; free with onnx_test_npy_free */
  size_t size;
} onnx_test_npy;

/* 0 on success; -1 with a message in `err` otherwise. */
int onnx_test_npy_load(const char *path, onnx_test_npy *out, char *err, size_t err_size);
void onnx_test_npy_free(onnx_test_npy *npy);

/* A growing byte buffer; the protobuf writers append to it. */
typedef struct onnx_test_buf {
  uint8_t *data;
  size_t size, cap;
} onnx_test_buf;

void pb_raw(onnx_test_buf *b, const void *data, size_t n);
void pb_varint(onnx_test_buf *b, uint64_t v);
void pb_tag(onnx_test_buf *b, uint32_t field, unsigned wire_type);
void pb_int(onnx_test_buf *b, uint32_t field, int64_t v); /* varint field */
void pb_bytes(onnx_test_buf *b, uint32_t field, const void *data, size_t n);
void pb_str(onnx_test_buf *b, uint32_t field, const char *s);
void pb_msg(onnx_test_buf *b, uint32_t field, const onnx_test_buf *sub); /* sub unchanged */
void pb_free(onnx_test_buf *b);

#endif /* NIMBLE_ONNX_TEST_UTIL_H */
