/* libFuzzer target for the .npy and TensorProto decoders, built by clang-16
 * when it is installed (see runtime/io/CMakeLists.txt):
 *   cmake --build BUILD --target fuzz_tensor_io
 *   BUILD/runtime/io/fuzz_tensor_io -max_total_time=300 CORPUS_DIR
 * (a corpus: the fixtures tests/runtime/io/make_fixtures.py writes).
 *
 * Besides "no crash, no leak", it checks a property: whatever decodes
 * re-encodes to bytes that decode to the same tensor. */
#include <stdlib.h>
#include <string.h>

#include "nimble/tensor_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_tensor(const nimble_tensor_file_t *a, const nimble_tensor_file_t *b) {
  if (a->tensor.ndim != b->tensor.ndim || a->nbytes != b->nbytes ||
      a->tensor.dtype.code != b->tensor.dtype.code || a->tensor.dtype.bits != b->tensor.dtype.bits ||
      memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->tensor.ndim) != 0 ||
      memcmp(a->data, b->data, a->nbytes) != 0)
    abort();
}

typedef nimble_status_t (*parse_fn)(const void *, size_t, const char *, nimble_tensor_file_t *);

static void round_trip(const uint8_t *data, size_t size, parse_fn parse, int pb) {
  nimble_tensor_file_t t;
  nimble_status_t s = parse(data, size, "fuzz", &t);
  if (s) {
    nimble_status_free(s);
    return;
  }
  void *bytes;
  size_t len;
  s = pb ? nimble_tensor_io_encode_pb(&t.tensor, t.name, &bytes, &len)
         : nimble_tensor_io_encode_npy(&t.tensor, &bytes, &len);
  if (s) abort(); /* everything we decode must be encodable */
  nimble_tensor_file_t u;
  s = parse(bytes, len, "fuzz-again", &u);
  if (s) abort();
  same_tensor(&t, &u);
  /* A name is a C string: an embedded NUL ends it on both sides. */
  if (pb && strcmp(t.name, u.name) != 0) abort();
  nimble_tensor_file_deinit(&u);
  free(bytes);
  nimble_tensor_file_deinit(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  round_trip(data, size, nimble_tensor_io_parse_npy, 0);
  round_trip(data, size, nimble_tensor_io_parse_pb, 1);
  return 0;
}
