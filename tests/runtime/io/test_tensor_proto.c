/* ONNX TensorProto .pb: files onnx.numpy_helper.from_array and
 * onnx.helper.make_tensor wrote read back exactly; files we write are
 * byte-identical to from_array's; every malformed message is an error. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fixture_table.h"
#include "tensor_io_test_util.h"

START_TEST(test_from_array_files_of_every_dtype_read_back_exactly) {
  for (size_t i = 0; i < N_FIXTURES; i++) {
    const fixture_case *c = &FIXTURES[i];
    char name[128], raw_name[128], tname[128];
    snprintf(name, sizeof(name), "%s.pb", c->name);
    snprintf(raw_name, sizeof(raw_name), "%s.raw", c->name);
    snprintf(tname, sizeof(tname), "t_%s", c->name);
    nimble_tensor_file_t t;
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_pb(fixture(name), &t));
    size_t raw_len;
    uint8_t *raw = slurp(fixture(raw_name), &raw_len);
    ck_assert_msg(t.tensor.dtype.code == c->dtype.code && t.tensor.dtype.bits == c->dtype.bits,
                  "%s: dtype %u/%u", name, t.tensor.dtype.code, t.tensor.dtype.bits);
    ck_assert_int_eq(t.tensor.ndim, c->ndim);
    for (int d = 0; d < c->ndim; d++) ck_assert_int_eq(t.tensor.shape[d], c->shape[d]);
    ck_assert_int_eq(t.nbytes, raw_len);
    ck_assert_msg(raw_len == 0 || memcmp(t.tensor.data, raw, raw_len) == 0, "%s: data", name);
    ck_assert_str_eq(t.name, tname);
    ck_assert_int_eq((uintptr_t)t.tensor.data % NIMBLE_TENSOR_IO_ALIGNMENT, 0);
    free(raw);
    nimble_tensor_file_deinit(&t);
  }
}
END_TEST

/* Reads a typed-field fixture and checks name, type and shape. */
static void read_typed(const char *file, const char *name, const char *type, int64_t n,
                       nimble_tensor_file_t *t) {
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_pb(fixture(file), t));
  ck_assert_str_eq(t->name, name);
  ck_assert_str_eq(nimble_tensor_io_dtype_name(t->tensor.dtype), type);
  ck_assert_int_eq(t->tensor.shape[t->tensor.ndim - 1], n);
}

START_TEST(test_typed_field_files_read_back_with_hand_computed_values) {
  nimble_tensor_file_t t;
  read_typed("typed_float.pb", "tf", "float32", 3, &t);
  ck_assert_int_eq(t.tensor.ndim, 2);
  const float want[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  for (int i = 0; i < 6; i++) ck_assert_float_eq(((float *)t.tensor.data)[i], want[i]);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_double.pb", "td", "float64", 2, &t);
  ck_assert(((double *)t.tensor.data)[0] == 0.125 && ((double *)t.tensor.data)[1] == -3.0);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_int32.pb", "ti", "int32", 3, &t);
  int32_t *i4 = t.tensor.data;
  ck_assert(i4[0] == -7 && i4[1] == 0 && i4[2] == INT32_MAX);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_int8.pb", "ti8", "int8", 3, &t);
  int8_t *i1 = t.tensor.data;
  ck_assert(i1[0] == -128 && i1[1] == 5 && i1[2] == 127);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_uint16.pb", "tu16", "uint16", 2, &t);
  ck_assert(((uint16_t *)t.tensor.data)[0] == 0 && ((uint16_t *)t.tensor.data)[1] == 65535);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_int64.pb", "tl", "int64", 2, &t);
  ck_assert(((int64_t *)t.tensor.data)[0] == INT64_MIN && ((int64_t *)t.tensor.data)[1] == 42);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_uint32.pb", "tu32", "uint32", 2, &t);
  ck_assert(((uint32_t *)t.tensor.data)[0] == UINT32_MAX && ((uint32_t *)t.tensor.data)[1] == 3);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_uint64.pb", "tu64", "uint64", 1, &t);
  ck_assert(((uint64_t *)t.tensor.data)[0] == UINT64_MAX);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_bool.pb", "tb", "bool", 3, &t);
  uint8_t *b = t.tensor.data;
  ck_assert(b[0] == 1 && b[1] == 0 && b[2] == 1);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_float16.pb", "th", "float16", 3, &t);
  uint16_t *h = t.tensor.data; /* 1.0, -2.0, 0.5 as IEEE half bits */
  ck_assert(h[0] == 0x3C00 && h[1] == 0xC000 && h[2] == 0x3800);
  nimble_tensor_file_deinit(&t);

  read_typed("typed_bfloat16.pb", "tbf", "bfloat16", 3, &t);
  uint16_t *bf = t.tensor.data; /* 1.0, -2.5, 0.15625: the top 16 bits of their float32 */
  ck_assert(bf[0] == 0x3F80 && bf[1] == 0xC020 && bf[2] == 0x3E20);
  /* and back: what it encodes reads back the same */
  void *enc;
  size_t enc_len;
  NIMBLE_ASSERT_OK(nimble_tensor_io_encode_pb(&t.tensor, "tbf", &enc, &enc_len));
  nimble_tensor_file_t back;
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(enc, enc_len, "back.pb", &back));
  ck_assert(back.tensor.dtype.code == kDLBfloat && back.tensor.dtype.bits == 16);
  ck_assert(memcmp(back.tensor.data, bf, 6) == 0);
  nimble_tensor_file_deinit(&back);
  free(enc);
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_pb(fixture("typed_string.pb"), &t),
                      NIMBLE_UNIMPLEMENTED, "typed_string.pb: bad TensorProto at byte");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_pb(fixture("typed_string.pb"), &t),
                      NIMBLE_UNIMPLEMENTED, "string tensors (field 6, string_data)");
}
END_TEST

START_TEST(test_our_encoding_equals_from_array_byte_for_byte) {
  for (size_t i = 0; i < N_FIXTURES; i++) {
    char name[128];
    snprintf(name, sizeof(name), "%s.pb", FIXTURES[i].name);
    size_t len;
    uint8_t *want = slurp(fixture(name), &len);
    nimble_tensor_file_t t;
    NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(want, len, name, &t));
    void *got;
    size_t got_len;
    NIMBLE_ASSERT_OK(nimble_tensor_io_encode_pb(&t.tensor, t.name, &got, &got_len));
    ck_assert_msg(got_len == len && memcmp(got, want, len) == 0,
                  "%s: our encoding (%zu bytes) differs from from_array's (%zu)", name, got_len,
                  len);
    free(got);
    free(want);
    nimble_tensor_file_deinit(&t);
  }
}
END_TEST

START_TEST(test_files_we_write_are_read_by_onnx) {
  float f[6] = {1.5f, -2.0f, 0.0f, INFINITY, -INFINITY, 0.25f};
  int64_t s23[2] = {2, 3};
  DLTensor t = {0};
  t.device.device_type = kDLCPU;
  t.data = f;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  t.ndim = 2;
  t.shape = s23;
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_pb(scratch("w_f4.pb"), "output_0", &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_f4.pb"), "float32", "2,3",
                                         "1.5,-2.0,0.0,inf,-inf,0.25", "output_0"),
                   0);

  int64_t l[2] = {INT64_MIN, 7};
  int64_t s2[1] = {2};
  t.data = l;
  t.dtype = (DLDataType){kDLInt, 64, 1};
  t.ndim = 1;
  t.shape = s2;
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_pb(scratch("w_i8.pb"), NULL, &t));
  ck_assert_int_eq(
      verify_with_reference(scratch("w_i8.pb"), "int64", "2", "-9223372036854775808,7", ""), 0);

  uint8_t b[2] = {0, 255}; /* any nonzero byte is true, written as 1 */
  t.data = b;
  t.dtype = nimble_tensor_io_dtype_bool();
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_pb(scratch("w_b.pb"), "mask", &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_b.pb"), "bool", "2", "False,True", "mask"), 0);

  double d = -0.5;
  t.data = &d;
  t.dtype = (DLDataType){kDLFloat, 64, 1};
  t.ndim = 0;
  t.shape = NULL;
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_pb(scratch("w_scalar.pb"), "s", &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_scalar.pb"), "float64", "", "-0.5", "s"), 0);
  /* A wrong name is noticed by the reference check. */
  ck_assert_int_ne(verify_with_reference(scratch("w_scalar.pb"), "float64", "", "-0.5", "t"), 0);
}
END_TEST

START_TEST(test_truncation_at_every_byte_offset_is_an_error) {
  /* from_array writes raw_data last, so every proper prefix of a tensor
   * with elements lacks (part of) its data. */
  for (size_t i = 0; i < N_FIXTURES; i++) {
    if (FIXTURES[i].ndim == 2 && FIXTURES[i].shape[0] == 0) continue; /* no elements */
    char name[128];
    snprintf(name, sizeof(name), "%s.pb", FIXTURES[i].name);
    size_t len;
    uint8_t *full = slurp(fixture(name), &len);
    for (size_t cut = 0; cut < len; cut++) {
      uint8_t *part = malloc(cut ? cut : 1);
      memcpy(part, full, cut);
      nimble_tensor_file_t t;
      nimble_status_t s = nimble_tensor_io_parse_pb(part, cut, name, &t);
      ck_assert_msg(s != NULL, "%s cut at %zu of %zu was accepted", name, cut, len);
      ck_assert_msg(strstr(nimble_status_message(s), name) != NULL, "'%s' lacks the file name",
                    nimble_status_message(s));
      ck_assert_ptr_null(t.data);
      nimble_status_free(s);
      free(part);
    }
    free(full);
  }
}
END_TEST

/* A tiny protobuf writer for hand-made messages. */
typedef struct pbw {
  uint8_t b[2048];
  size_t n;
} pbw;

static void put_varint(pbw *w, uint64_t v) {
  while (v >= 0x80) {
    w->b[w->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  w->b[w->n++] = (uint8_t)v;
}
static void put_tag(pbw *w, int field, int wt) { put_varint(w, (uint64_t)field << 3 | (uint64_t)wt); }
static void put_bytes(pbw *w, int field, const void *p, size_t n) {
  put_tag(w, field, 2);
  put_varint(w, n);
  memcpy(w->b + w->n, p, n);
  w->n += n;
}
static void put_field_varint(pbw *w, int field, uint64_t v) {
  put_tag(w, field, 0);
  put_varint(w, v);
}

static void expect_pb_error(const pbw *w, nimble_status_code_t code, const char *fragment) {
  uint8_t *copy = malloc(w->n ? w->n : 1);
  memcpy(copy, w->b, w->n);
  nimble_tensor_file_t t;
  nimble_status_t s = nimble_tensor_io_parse_pb(copy, w->n, "m.pb", &t);
  ck_assert_msg(s != NULL, "message accepted, expected '%s'", fragment);
  ck_assert_msg(nimble_status_code(s) == code, "got %s (%s), expected '%s'",
                nimble_status_code_name(nimble_status_code(s)), nimble_status_message(s), fragment);
  ck_assert_msg(strstr(nimble_status_message(s), fragment) != NULL, "message '%s' lacks '%s'",
                nimble_status_message(s), fragment);
  ck_assert_msg(strncmp(nimble_status_message(s), "m.pb: ", 6) == 0, "'%s' lacks the name",
                nimble_status_message(s));
  ck_assert_ptr_null(t.data);
  nimble_status_free(s);
  free(copy);
}

START_TEST(test_broken_wire_format_is_rejected_with_the_place) {
  const nimble_status_code_t BAD = NIMBLE_INVALID_ARGUMENT;
  pbw w = {.n = 0};
  expect_pb_error(&w, BAD, "empty TensorProto");

  w.n = 0;
  put_tag(&w, 1, 0);
  w.b[w.n++] = 0x80; /* a continuation byte and then nothing */
  expect_pb_error(&w, NIMBLE_DATA_LOSS, "at byte 1: truncated varint");

  w.n = 0;
  put_tag(&w, 1, 0);
  for (int i = 0; i < 9; i++) w.b[w.n++] = 0xff;
  w.b[w.n++] = 0x02; /* bit 64 */
  expect_pb_error(&w, BAD, "varint overflows 64 bits");

  w.n = 0;
  put_tag(&w, 1, 0);
  for (int i = 0; i < 10; i++) w.b[w.n++] = 0x80;
  w.b[w.n++] = 0x00;
  expect_pb_error(&w, BAD, "at byte 1: varint");

  w.n = 0;
  put_field_varint(&w, 2, 1);
  put_tag(&w, 9, 2);
  put_varint(&w, 5);
  w.b[w.n++] = 1;
  w.b[w.n++] = 2;
  expect_pb_error(&w, NIMBLE_DATA_LOSS, "at byte 2: field 9 (raw_data) claims 5 bytes but only 2 remain");

  w.n = 0;
  put_tag(&w, 2, 2);
  put_varint(&w, 0);
  expect_pb_error(&w, BAD, "field 2 (data_type) has the wrong wire type 2");

  w.n = 0;
  put_tag(&w, 4, 0);
  put_varint(&w, 1);
  expect_pb_error(&w, BAD, "field 4 (float_data) has the wrong wire type 0");

  w.n = 0;
  put_tag(&w, 20, 3);
  expect_pb_error(&w, BAD, "field 20 uses the group wire type 3");

  w.n = 0;
  put_tag(&w, 20, 7);
  expect_pb_error(&w, BAD, "field 20 has the invalid wire type 7");

  w.n = 0;
  put_tag(&w, 0, 0);
  put_varint(&w, 1);
  expect_pb_error(&w, BAD, "at byte 0: invalid field number");

  w.n = 0;
  put_tag(&w, 21, 1);
  w.b[w.n++] = 1;
  expect_pb_error(&w, NIMBLE_DATA_LOSS, "field 21: truncated 8-byte value");

  w.n = 0;
  put_field_varint(&w, 2, 1);
  put_tag(&w, 4, 2);
  put_varint(&w, 6);
  memset(w.b + w.n, 0, 6);
  w.n += 6;
  expect_pb_error(&w, BAD, "packed field 4 (float_data) is 6 bytes, not a multiple of 4");
}
END_TEST

START_TEST(test_inconsistent_tensors_are_rejected) {
  const nimble_status_code_t BAD = NIMBLE_INVALID_ARGUMENT;
  float f[3] = {1, 2, 3};
  pbw w = {.n = 0};
  put_field_varint(&w, 1, 3);
  expect_pb_error(&w, BAD, "no data_type");

  w.n = 0;
  put_field_varint(&w, 2, 0);
  expect_pb_error(&w, BAD, "no data_type (or UNDEFINED)");

  w.n = 0;
  put_field_varint(&w, 2, 99);
  expect_pb_error(&w, NIMBLE_UNIMPLEMENTED, "unknown TensorProto data_type 99");

  w.n = 0;
  put_field_varint(&w, 2, 14);
  expect_pb_error(&w, NIMBLE_UNIMPLEMENTED, "data_type COMPLEX64 is not supported");

  w.n = 0;
  put_field_varint(&w, 1, 1ull << 32);
  put_field_varint(&w, 1, 1ull << 32);
  put_field_varint(&w, 2, 1);
  expect_pb_error(&w, BAD, "shape overflows");

  w.n = 0;
  put_field_varint(&w, 1, 1ull << 62);
  put_field_varint(&w, 2, 1);
  expect_pb_error(&w, BAD, "shape overflows");

  w.n = 0;
  put_field_varint(&w, 1, (uint64_t)-1);
  put_field_varint(&w, 2, 1);
  expect_pb_error(&w, BAD, "dims[0] is negative (-1)");

  w.n = 0;
  for (int i = 0; i < 65; i++) put_field_varint(&w, 1, 1);
  expect_pb_error(&w, BAD, "more than 64 dims");

  w.n = 0;
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 1);
  put_bytes(&w, 9, f, 7);
  expect_pb_error(&w, NIMBLE_DATA_LOSS, "raw_data is 7 bytes; dims and type FLOAT need 8");

  w.n = 0;
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 1);
  put_bytes(&w, 9, f, 12);
  expect_pb_error(&w, BAD, "raw_data is 12 bytes; dims and type FLOAT need 8");

  w.n = 0;
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 1);
  put_bytes(&w, 4, f, 8);
  put_bytes(&w, 9, f, 8);
  expect_pb_error(&w, BAD, "has both raw_data and float_data");

  w.n = 0;
  put_field_varint(&w, 1, 3);
  put_field_varint(&w, 2, 1);
  put_bytes(&w, 4, f, 8);
  expect_pb_error(&w, BAD, "has 2 values in float_data; dims say 3");

  w.n = 0;
  put_field_varint(&w, 1, 1);
  put_field_varint(&w, 2, 1);
  put_field_varint(&w, 7, 5);
  expect_pb_error(&w, BAD, "of type FLOAT has values in int64_data (expected float_data)");

  w.n = 0;
  put_field_varint(&w, 1, 1);
  put_field_varint(&w, 2, 3);
  put_field_varint(&w, 5, 300);
  expect_pb_error(&w, BAD, "int32_data[0] = 300 is out of range for INT8");

  w.n = 0;
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 9);
  put_field_varint(&w, 5, 1);
  put_field_varint(&w, 5, 2);
  expect_pb_error(&w, BAD, "int32_data[1] = 2 is out of range for BOOL");

  w.n = 0;
  put_field_varint(&w, 1, 1);
  put_field_varint(&w, 2, 12);
  put_field_varint(&w, 11, 1ull << 32);
  expect_pb_error(&w, BAD, "uint64_data[0] = 4294967296 is out of range for UINT32");

  w.n = 0;
  uint8_t bools[2] = {1, 2};
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 9);
  put_bytes(&w, 9, bools, 2);
  expect_pb_error(&w, BAD, "BOOL raw_data element 1 has the byte value 2");

  w.n = 0;
  put_field_varint(&w, 2, 1);
  put_field_varint(&w, 14, 1);
  expect_pb_error(&w, NIMBLE_UNIMPLEMENTED, "stored externally");

  w.n = 0;
  put_field_varint(&w, 2, 1);
  put_bytes(&w, 3, "\x08\x00", 2);
  expect_pb_error(&w, NIMBLE_UNIMPLEMENTED, "segmented tensors");
}
END_TEST

START_TEST(test_unknown_fields_are_skipped_and_encodings_accepted) {
  /* Packed dims, unknown fields of every wire type, unpacked float_data
   * (one fixed32 per tag), a doc_string: all valid protobuf. */
  pbw w = {.n = 0};
  uint8_t dims[2] = {2, 1};
  put_bytes(&w, 1, dims, 2);                 /* dims, packed: [2, 1] */
  put_bytes(&w, 12, "some doc", 8);          /* doc_string */
  put_field_varint(&w, 20, 123456789);       /* unknown varint */
  put_tag(&w, 21, 1);                        /* unknown fixed64 */
  memset(w.b + w.n, 0xAB, 8);
  w.n += 8;
  put_tag(&w, 22, 5);                        /* unknown fixed32 */
  memset(w.b + w.n, 0xCD, 4);
  w.n += 4;
  put_field_varint(&w, 2, 1);                /* FLOAT */
  float v[2] = {2.5f, -4.0f};
  for (int i = 0; i < 2; i++) {
    put_tag(&w, 4, 5);
    memcpy(w.b + w.n, &v[i], 4);
    w.n += 4;
  }
  put_bytes(&w, 8, "x", 1);
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(w.b, w.n, "ok.pb", &t));
  ck_assert_int_eq(t.tensor.ndim, 2);
  ck_assert_int_eq(t.tensor.shape[0], 2);
  ck_assert_int_eq(t.tensor.shape[1], 1);
  ck_assert_float_eq(((float *)t.tensor.data)[0], 2.5f);
  ck_assert_float_eq(((float *)t.tensor.data)[1], -4.0f);
  ck_assert_str_eq(t.name, "x");
  nimble_tensor_file_deinit(&t);

  /* int64_data unpacked, negative values as 10-byte varints. */
  w.n = 0;
  put_field_varint(&w, 1, 2);
  put_field_varint(&w, 2, 7);
  put_field_varint(&w, 7, (uint64_t)(int64_t)-3);
  put_field_varint(&w, 7, 9);
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(w.b, w.n, "ok.pb", &t));
  ck_assert(((int64_t *)t.tensor.data)[0] == -3 && ((int64_t *)t.tensor.data)[1] == 9);
  ck_assert_str_eq(t.name, "");
  nimble_tensor_file_deinit(&t);

  /* A scalar (no dims) and an empty tensor with no data at all. */
  w.n = 0;
  put_field_varint(&w, 2, 11);
  double d = 6.5;
  put_bytes(&w, 10, &d, 8);
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(w.b, w.n, "ok.pb", &t));
  ck_assert_int_eq(t.tensor.ndim, 0);
  ck_assert(*(double *)t.tensor.data == 6.5);
  nimble_tensor_file_deinit(&t);
  w.n = 0;
  put_field_varint(&w, 1, 0);
  put_field_varint(&w, 2, 6);
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(w.b, w.n, "ok.pb", &t));
  ck_assert_int_eq(t.nbytes, 0);
  ck_assert_ptr_nonnull(t.tensor.data);
  nimble_tensor_file_deinit(&t);
}
END_TEST

static void fuzz_file(const char *name, int iters) {
  size_t len;
  uint8_t *orig = slurp(fixture(name), &len);
  uint8_t *buf = malloc(len);
  uint32_t seed = 777;
  int ok = 0, err = 0;
  for (int iter = 0; iter < iters; iter++) {
    memcpy(buf, orig, len);
    int flips = 1 + iter % 3;
    for (int k = 0; k < flips; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t pos = (seed >> 8) % len;
      seed = seed * 1103515245u + 12345u;
      buf[pos] = (uint8_t)(seed >> 16);
    }
    size_t n = iter % 5 == 0 ? (seed >> 4) % (len + 1) : len; /* sometimes truncate too */
    nimble_tensor_file_t t;
    nimble_status_t s = nimble_tensor_io_parse_pb(buf, n, name, &t);
    if (s) {
      err++;
      ck_assert_ptr_null(t.data);
      nimble_status_free(s);
    } else {
      ok++;
      nimble_tensor_file_deinit(&t);
    }
  }
  ck_assert_int_gt(err, 0);
  ck_assert_int_gt(ok, 0);
  free(buf);
  free(orig);
}

START_TEST(test_truncated_typed_field_files_error_or_decode_a_prefix_cleanly) {
  /* make_tensor writes the name after the values, so a cut may leave a
   * valid tensor without its name; every other cut must be an error. */
  static const char *const files[] = {"typed_float.pb", "typed_int8.pb", "typed_int64.pb",
                                      "typed_double.pb", "typed_bool.pb", "typed_uint64.pb"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    size_t len;
    uint8_t *full = slurp(fixture(files[i]), &len);
    nimble_tensor_file_t whole;
    NIMBLE_ASSERT_OK(nimble_tensor_io_parse_pb(full, len, files[i], &whole));
    for (size_t cut = 0; cut < len; cut++) {
      uint8_t *part = malloc(cut ? cut : 1);
      memcpy(part, full, cut);
      nimble_tensor_file_t t;
      nimble_status_t s = nimble_tensor_io_parse_pb(part, cut, files[i], &t);
      if (s) {
        ck_assert_ptr_null(t.data);
        nimble_status_free(s);
      } else {
        ck_assert_msg(t.nbytes == whole.nbytes && memcmp(t.data, whole.data, t.nbytes) == 0,
                      "%s cut at %zu decoded other values", files[i], cut);
        ck_assert_str_eq(t.name, "");
        nimble_tensor_file_deinit(&t);
      }
      free(part);
    }
    nimble_tensor_file_deinit(&whole);
    free(full);
  }
}
END_TEST

START_TEST(test_random_mutations_never_crash) {
  fuzz_file("f4_2x3.pb", 3000);
  fuzz_file("typed_int8.pb", 3000);
  fuzz_file("typed_float.pb", 3000);
}
END_TEST

static Suite *pb_suite(void) {
  Suite *s = suite_create("tensor_proto");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_from_array_files_of_every_dtype_read_back_exactly);
  tcase_add_test(tc, test_typed_field_files_read_back_with_hand_computed_values);
  tcase_add_test(tc, test_our_encoding_equals_from_array_byte_for_byte);
  tcase_add_test(tc, test_files_we_write_are_read_by_onnx);
  tcase_add_test(tc, test_truncation_at_every_byte_offset_is_an_error);
  tcase_add_test(tc, test_broken_wire_format_is_rejected_with_the_place);
  tcase_add_test(tc, test_inconsistent_tensors_are_rejected);
  tcase_add_test(tc, test_unknown_fields_are_skipped_and_encodings_accepted);
  tcase_add_test(tc, test_truncated_typed_field_files_error_or_decode_a_prefix_cleanly);
  tcase_add_test(tc, test_random_mutations_never_crash);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(pb_suite()); }
