/* .npy: files NumPy wrote read back exactly; files we write read by NumPy;
 * every malformed header, truncation and hostile shape is an error. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fixture_table.h"
#include "tensor_io_test_util.h"

static void expect_matches_raw(const nimble_tensor_file_t *t, const fixture_case *c,
                               const char *what) {
  char raw_name[128];
  snprintf(raw_name, sizeof(raw_name), "%s.raw", c->name);
  size_t raw_len;
  uint8_t *raw = slurp(fixture(raw_name), &raw_len);
  ck_assert_msg(t->tensor.dtype.code == c->dtype.code && t->tensor.dtype.bits == c->dtype.bits &&
                    t->tensor.dtype.lanes == 1,
                "%s %s: dtype %u/%u", what, c->name, t->tensor.dtype.code, t->tensor.dtype.bits);
  ck_assert_int_eq(t->tensor.ndim, c->ndim);
  for (int i = 0; i < c->ndim; i++) ck_assert_int_eq(t->tensor.shape[i], c->shape[i]);
  ck_assert_int_eq(t->nbytes, raw_len);
  ck_assert_msg(raw_len == 0 || memcmp(t->tensor.data, raw, raw_len) == 0, "%s %s: data differs",
                what, c->name);
  ck_assert_ptr_nonnull(t->tensor.data);
  ck_assert_int_eq((uintptr_t)t->tensor.data % NIMBLE_TENSOR_IO_ALIGNMENT, 0);
  ck_assert_int_eq(t->tensor.device.device_type, kDLCPU);
  ck_assert_ptr_null(t->tensor.strides);
  ck_assert_int_eq(t->tensor.byte_offset, 0);
  free(raw);
}

START_TEST(test_numpy_files_of_every_dtype_read_back_exactly) {
  for (size_t i = 0; i < N_FIXTURES; i++) {
    char name[128];
    snprintf(name, sizeof(name), "%s.npy", FIXTURES[i].name);
    nimble_tensor_file_t t;
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture(name), &t));
    expect_matches_raw(&t, &FIXTURES[i], "npy");
    ck_assert_str_eq(t.name, "");
    nimble_tensor_file_deinit(&t);
  }
}
END_TEST

START_TEST(test_numpy_values_match_hand_computed_ones) {
  nimble_tensor_file_t t;
  /* np.arange(6).reshape(2, 3) * 0.5 - 1 */
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("f4_2x3.npy"), &t));
  const float *f = t.tensor.data;
  const float want[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  for (int i = 0; i < 6; i++) ck_assert_float_eq(f[i], want[i]);
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("i8_2x1x2.npy"), &t));
  const int64_t *l = t.tensor.data;
  ck_assert(l[0] == INT64_MIN && l[1] == -5 && l[2] == 6 && l[3] == INT64_MAX);
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("b1_2x2.npy"), &t));
  const uint8_t *b = t.tensor.data;
  ck_assert(b[0] == 1 && b[1] == 0 && b[2] == 0 && b[3] == 1);
  ck_assert_str_eq(nimble_tensor_io_dtype_name(t.tensor.dtype), "bool");
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("f4_scalar.npy"), &t));
  ck_assert_int_eq(t.tensor.ndim, 0);
  ck_assert_float_eq(*(const float *)t.tensor.data, 3.25f);
  nimble_tensor_file_deinit(&t);

  /* IEEE half: 1.0 = 0x3C00, -2.0 = 0xC000, 0.5 = 0x3800. */
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("f2_3.npy"), &t));
  const uint16_t *h = t.tensor.data;
  ck_assert(h[0] == 0x3C00 && h[1] == 0xC000 && h[2] == 0x3800);
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("f4_special.npy"), &t));
  f = t.tensor.data;
  ck_assert(isinf(f[0]) && f[0] > 0 && isinf(f[1]) && f[1] < 0 && isnan(f[2]));
  ck_assert_float_eq(f[3], 1e-45f); /* the smallest denormal */
  nimble_tensor_file_deinit(&t);
}
END_TEST

START_TEST(test_format_versions_2_and_3_read_like_version_1) {
  for (int v = 2; v <= 3; v++) {
    char name[64];
    snprintf(name, sizeof(name), "f4_2x3_v%d.npy", v);
    size_t len;
    uint8_t *bytes = slurp(fixture(name), &len);
    ck_assert_int_eq(bytes[6], v);
    free(bytes);
    nimble_tensor_file_t t;
    NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture(name), &t));
    expect_matches_raw(&t, &FIXTURES[0], name);
    nimble_tensor_file_deinit(&t);
  }
}
END_TEST

START_TEST(test_fortran_order_is_rejected_unless_the_layouts_coincide) {
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_npy(fixture("f4_2x3_fortran.npy"), &t),
                      NIMBLE_UNIMPLEMENTED, "f4_2x3_fortran.npy: Fortran-order arrays");
  ck_assert_ptr_null(t.data);
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(fixture("f4_3_fortran.npy"), &t));
  const float *f = t.tensor.data;
  ck_assert(f[0] == 1.0f && f[1] == 2.0f && f[2] == 3.0f);
  nimble_tensor_file_deinit(&t);
}
END_TEST

START_TEST(test_big_endian_object_and_complex_arrays_are_rejected) {
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_npy(fixture("f4_big_endian.npy"), &t),
                      NIMBLE_UNIMPLEMENTED, "f4_big_endian.npy: big-endian data (dtype '>f4')");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_npy(fixture("object.npy"), &t), NIMBLE_UNIMPLEMENTED,
                      "object.npy: object arrays (dtype '|O')");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_npy(fixture("complex.npy"), &t),
                      NIMBLE_UNIMPLEMENTED, "dtype '<c8' is not supported");
}
END_TEST

START_TEST(test_our_encoding_equals_numpy_save_byte_for_byte) {
  /* np.save output is the reference: reading then encoding must give the
   * very same bytes, header padding included. */
  for (size_t i = 0; i < N_FIXTURES; i++) {
    char name[128];
    snprintf(name, sizeof(name), "%s.npy", FIXTURES[i].name);
    size_t len;
    uint8_t *want = slurp(fixture(name), &len);
    nimble_tensor_file_t t;
    NIMBLE_ASSERT_OK(nimble_tensor_io_parse_npy(want, len, name, &t));
    void *got;
    size_t got_len;
    NIMBLE_ASSERT_OK(nimble_tensor_io_encode_npy(&t.tensor, &got, &got_len));
    ck_assert_msg(got_len == len && memcmp(got, want, len) == 0,
                  "%s: our encoding (%zu bytes) differs from np.save's (%zu)", name, got_len,
                  len);
    free(got);
    free(want);
    nimble_tensor_file_deinit(&t);
  }
}
END_TEST

/* A DLTensor over caller data, for the writers. */
static DLTensor view(void *data, DLDataType dtype, int ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

START_TEST(test_files_we_write_are_read_by_numpy) {
  float f[6] = {1.5f, -2.0f, 0.0f, INFINITY, -INFINITY, NAN};
  int64_t s23[2] = {2, 3};
  DLTensor t = view(f, (DLDataType){kDLFloat, 32, 1}, 2, s23);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_f4.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_f4.npy"), "float32", "2,3",
                                         "1.5,-2.0,0.0,inf,-inf,nan", NULL),
                   0);

  int64_t l[3] = {INT64_MIN, 0, INT64_MAX};
  int64_t s3[1] = {3};
  t = view(l, (DLDataType){kDLInt, 64, 1}, 1, s3);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_i8.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_i8.npy"), "int64", "3",
                                         "-9223372036854775808,0,9223372036854775807", NULL),
                   0);

  uint64_t u[1] = {UINT64_MAX};
  int64_t s1[1] = {1};
  t = view(u, (DLDataType){kDLUInt, 64, 1}, 1, s1);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_u8.npy"), &t));
  ck_assert_int_eq(
      verify_with_reference(scratch("w_u8.npy"), "uint64", "1", "18446744073709551615", NULL), 0);

  uint8_t b[3] = {1, 0, 7}; /* any nonzero byte is true, written as 1 */
  t = view(b, nimble_tensor_io_dtype_bool(), 1, s3);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_b1.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_b1.npy"), "bool", "3", "True,False,True", NULL),
                   0);

  uint16_t h[2] = {0x3C00, 0xC000}; /* 1.0, -2.0 in IEEE half */
  int64_t s2[1] = {2};
  t = view(h, (DLDataType){kDLFloat, 16, 1}, 1, s2);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_f2.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_f2.npy"), "float16", "2", "1.0,-2.0", NULL), 0);

  int8_t c[2] = {-128, 127};
  t = view(c, (DLDataType){kDLInt, 8, 1}, 1, s2);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_i1.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_i1.npy"), "int8", "2", "-128,127", NULL), 0);

  double d = 0.1;
  t = view(&d, (DLDataType){kDLFloat, 64, 1}, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_scalar.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_scalar.npy"), "float64", "", "0.1", NULL), 0);

  int64_t s03[2] = {0, 3};
  t = view(NULL, (DLDataType){kDLInt, 32, 1}, 2, s03);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_empty.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_empty.npy"), "int32", "0,3", "", NULL), 0);

  /* And the reference notices a wrong value, so the checks above mean
   * something. */
  ck_assert_int_ne(verify_with_reference(scratch("w_i1.npy"), "int8", "2", "-128,126", NULL), 0);
}
END_TEST

START_TEST(test_byte_offset_and_compact_strides_are_honoured_when_writing) {
  int32_t v[4] = {99, 1, 2, 3};
  int64_t shape[2] = {3, 1};
  int64_t strides[2] = {1, 7}; /* a stride on a size-1 dim does not matter */
  DLTensor t = view(v, (DLDataType){kDLInt, 32, 1}, 2, shape);
  t.byte_offset = 4;
  t.strides = strides;
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(scratch("w_offset.npy"), &t));
  ck_assert_int_eq(verify_with_reference(scratch("w_offset.npy"), "int32", "3,1", "1,2,3", NULL), 0);
}
END_TEST

START_TEST(test_unwritable_tensors_are_rejected) {
  float f[4] = {0};
  int64_t shape[2] = {2, 2};
  int64_t strides[2] = {1, 2}; /* column-major */
  DLTensor t = view(f, (DLDataType){kDLFloat, 32, 1}, 2, shape);
  void *bytes;
  size_t len;
  t.strides = strides;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_INVALID_ARGUMENT,
                      "not compact in C order: stride 1 is 2");
  t.strides = NULL;
  t.dtype.lanes = 4;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_UNIMPLEMENTED,
                      "lanes 4) is not supported");
  t.dtype = (DLDataType){kDLBfloat, 16, 1};
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_UNIMPLEMENTED,
                      "NumPy has no bfloat16");
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  t.device.device_type = kDLCUDA;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_INVALID_ARGUMENT,
                      "only CPU memory");
  t.device.device_type = kDLCPU;
  t.data = NULL;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_INVALID_ARGUMENT,
                      "no data pointer");
  int64_t huge[3] = {INT64_MAX / 2, 4, 1};
  t.data = f;
  t.shape = huge;
  t.ndim = 3;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_INVALID_ARGUMENT,
                      "shape overflows");
  int64_t neg[1] = {-2};
  t.shape = neg;
  t.ndim = 1;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_encode_npy(&t, &bytes, &len), NIMBLE_INVALID_ARGUMENT,
                      "dimension 0 is negative (-2)");
}
END_TEST

START_TEST(test_truncation_at_every_byte_offset_is_an_error) {
  for (size_t i = 0; i < N_FIXTURES + 2; i++) {
    char name[128];
    if (i < N_FIXTURES)
      snprintf(name, sizeof(name), "%s.npy", FIXTURES[i].name);
    else /* the format 2.0 and 3.0 files, whose header length is 4 bytes */
      snprintf(name, sizeof(name), "f4_2x3_v%zu.npy", i - N_FIXTURES + 2);
    size_t len;
    uint8_t *full = slurp(fixture(name), &len);
    for (size_t cut = 0; cut < len; cut++) {
      /* A fresh allocation of exactly `cut` bytes lets ASan see any read
       * past the end. */
      uint8_t *part = malloc(cut ? cut : 1);
      memcpy(part, full, cut);
      nimble_tensor_file_t t;
      nimble_status_t s = nimble_tensor_io_parse_npy(part, cut, name, &t);
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

/* Builds a version 1.0 file around a header dict and `ndata` bytes of data
 * (zeros); caller frees. */
static uint8_t *npy_with_header(const char *dict, size_t ndata, size_t *len) {
  size_t n = strlen(dict) + 1;
  size_t pad = (64 - (10 + n) % 64) % 64;
  size_t hlen = n + pad;
  *len = 10 + hlen + ndata;
  uint8_t *buf = calloc(1, *len);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (uint8_t)(hlen & 0xff);
  buf[9] = (uint8_t)(hlen >> 8);
  memcpy(buf + 10, dict, n - 1);
  memset(buf + 10 + n - 1, ' ', pad);
  buf[10 + hlen - 1] = '\n';
  return buf;
}

static void expect_header_error(const char *dict, size_t ndata, nimble_status_code_t code,
                                const char *fragment) {
  size_t len;
  uint8_t *buf = npy_with_header(dict, ndata, &len);
  nimble_tensor_file_t t;
  nimble_status_t s = nimble_tensor_io_parse_npy(buf, len, "bad.npy", &t);
  ck_assert_msg(s != NULL, "header %s was accepted", dict);
  ck_assert_msg(nimble_status_code(s) == code, "header %s: got %s (%s)", dict,
                nimble_status_code_name(nimble_status_code(s)), nimble_status_message(s));
  ck_assert_msg(strstr(nimble_status_message(s), fragment) != NULL,
                "header %s: message '%s' lacks '%s'", dict, nimble_status_message(s), fragment);
  ck_assert_msg(strncmp(nimble_status_message(s), "bad.npy: ", 9) == 0, "'%s' lacks the name",
                nimble_status_message(s));
  ck_assert_ptr_null(t.data);
  nimble_status_free(s);
  free(buf);
}

START_TEST(test_malformed_headers_are_rejected_naming_the_problem) {
  const nimble_status_code_t BAD = NIMBLE_INVALID_ARGUMENT;
  expect_header_error("{'descr': '<f4', 'fortran_order': False}", 0, BAD,
                      "lacks the key 'shape'");
  expect_header_error("{'fortran_order': False, 'shape': (1,)}", 4, BAD, "lacks the key 'descr'");
  expect_header_error("{'descr': '<f4', 'shape': (1,)}", 4, BAD, "lacks the key 'fortran_order'");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, BAD,
                      "unknown key 'x'");
  expect_header_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4,
                      BAD, "key 'descr' appears twice");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, BAD,
                      "a one-element tuple needs a trailing comma");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': 3}", 12, BAD,
                      "'shape' must be a tuple");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 0, BAD,
                      "a dimension is negative");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", 4, BAD,
                      "leading zero");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}",
                      0, BAD, "does not fit in 64 bits");
  expect_header_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                      "structured dtypes");
  expect_header_error("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                      "expected ',' or '}' in the header dict");
  expect_header_error("{'descr': '<f4", 4, BAD, "unterminated string");
  expect_header_error("{'descr' '<f4'}", 4, BAD, "expected ':' after a key");
  expect_header_error("{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                      "escape sequences");
  expect_header_error("{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", 4, BAD,
                      "must be True or False");
  expect_header_error("{'descr': '<f4', 'fortran_order': Falsehood, 'shape': (1,)}", 4, BAD,
                      "must be True or False");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4, BAD,
                      "unexpected text after the header dict");
  expect_header_error("['descr', '<f4']", 4, BAD, "expected '{'");
  expect_header_error("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                      "expected ',' or '}'");
  expect_header_error("{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", 4, BAD,
                      "invalid byte-order character '|'");
  expect_header_error("{'descr': '<f3', 'fortran_order': False, 'shape': (1,)}", 4,
                      NIMBLE_UNIMPLEMENTED, "dtype '<f3' is not supported");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 3,
                      NIMBLE_DATA_LOSS, "need 4 bytes, the file has 3");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 5, BAD,
                      "1 bytes follow the 4 bytes of data");
}
END_TEST

START_TEST(test_the_error_names_the_byte_offset_of_the_fault) {
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }";
  size_t len;
  uint8_t *buf = npy_with_header(dict, 24, &len);
  char want[64];
  snprintf(want, sizeof(want), "at byte %zu: expected ',' or ')'",
           (size_t)(10 + (strstr(dict, "3)") - dict)));
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "pos.npy", &t),
                      NIMBLE_INVALID_ARGUMENT, want);
  free(buf);
}
END_TEST

START_TEST(test_hostile_shapes_are_rejected_before_allocating) {
  /* 2^32 * 2^32 elements overflow 64 bits; 2^62 floats overflow the byte
   * count; a zero dim makes any other dim harmless. */
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                      0, NIMBLE_INVALID_ARGUMENT, "shape overflows");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
                      0, NIMBLE_INVALID_ARGUMENT, "shape overflows");
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", 16,
                      NIMBLE_DATA_LOSS, "need 4000000000000 bytes, the file has 16");
  char dict[1024] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; i++) strcat(dict, "1, ");
  strcat(dict, "), }");
  expect_header_error(dict, 4, NIMBLE_INVALID_ARGUMENT, "more than 64 dimensions");

  size_t len;
  uint8_t *buf = npy_with_header(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 9223372036854775807), }", 0, &len);
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_npy(buf, len, "zero.npy", &t));
  ck_assert_int_eq(t.nbytes, 0);
  ck_assert_int_eq(t.tensor.shape[1], INT64_MAX);
  nimble_tensor_file_deinit(&t);
  free(buf);
}
END_TEST

START_TEST(test_header_variants_numpy_accepts_are_read) {
  /* Double quotes, Python 2's 'L' suffix, no trailing comma, keys in any
   * order, a '|' byte order on a one-byte type. */
  size_t len;
  uint8_t *buf = npy_with_header("{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"|u1\"}",
                                 2, &len);
  buf[len - 2] = 7;
  buf[len - 1] = 9;
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_npy(buf, len, "v.npy", &t));
  ck_assert_int_eq(t.tensor.ndim, 2);
  ck_assert_int_eq(t.tensor.shape[0], 2);
  ck_assert_int_eq(t.tensor.shape[1], 1);
  ck_assert_str_eq(nimble_tensor_io_dtype_name(t.tensor.dtype), "uint8");
  ck_assert_int_eq(((uint8_t *)t.tensor.data)[1], 9);
  nimble_tensor_file_deinit(&t);
  free(buf);
}
END_TEST

START_TEST(test_bad_magic_version_and_bool_bytes_are_rejected) {
  size_t len;
  uint8_t *buf = npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", 2,
                                 &len);
  nimble_tensor_file_t t;
  buf[len - 1] = 2;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t), NIMBLE_INVALID_ARGUMENT,
                      "bool element 1 has the byte value 2");
  buf[len - 1] = 1;
  NIMBLE_ASSERT_OK(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t));
  nimble_tensor_file_deinit(&t);
  buf[6] = 4;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t), NIMBLE_UNIMPLEMENTED,
                      "format version 4.0 is not supported");
  buf[6] = 1;
  buf[7] = 1;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t), NIMBLE_UNIMPLEMENTED,
                      "version 1.1");
  buf[7] = 0;
  buf[1] = 'n';
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t), NIMBLE_INVALID_ARGUMENT,
                      "b.npy: not a .npy file");
  buf[1] = 'N';
  buf[10 + buf[8] - 1] = ' '; /* the header's final newline */
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_parse_npy(buf, len, "b.npy", &t), NIMBLE_INVALID_ARGUMENT,
                      "does not end with a newline");
  free(buf);
}
END_TEST

START_TEST(test_random_mutations_never_crash) {
  /* A small deterministic fuzz: flip bytes of a real file's header and
   * data; every outcome must be a clean success or a clean error (ASan and
   * UBSan watch the rest). */
  size_t len;
  uint8_t *orig = slurp(fixture("f4_2x3.npy"), &len);
  uint8_t *buf = malloc(len);
  uint32_t seed = 12345;
  int ok = 0, err = 0;
  for (int iter = 0; iter < 4000; iter++) {
    memcpy(buf, orig, len);
    int flips = 1 + iter % 3;
    for (int k = 0; k < flips; k++) {
      seed = seed * 1103515245u + 12345u;
      size_t pos = (seed >> 8) % (iter % 2 ? 128 : len);
      seed = seed * 1103515245u + 12345u;
      buf[pos] = (uint8_t)(seed >> 16);
    }
    nimble_tensor_file_t t;
    nimble_status_t s = nimble_tensor_io_parse_npy(buf, len, "fuzz.npy", &t);
    if (s) {
      err++;
      ck_assert_ptr_null(t.data);
      nimble_status_free(s);
    } else {
      ok++;
      ck_assert_ptr_nonnull(t.data);
      nimble_tensor_file_deinit(&t);
    }
  }
  ck_assert_int_gt(err, 0);
  ck_assert_int_gt(ok, 0); /* flips in the data keep the file valid */
  free(buf);
  free(orig);
}
END_TEST

START_TEST(test_missing_file_is_not_found_and_named) {
  nimble_tensor_file_t t;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_npy(fixture("no_such_file.npy"), &t),
                      NIMBLE_NOT_FOUND, "no_such_file.npy: cannot open");
}
END_TEST

static Suite *npy_suite(void) {
  Suite *s = suite_create("npy_format");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_numpy_files_of_every_dtype_read_back_exactly);
  tcase_add_test(tc, test_numpy_values_match_hand_computed_ones);
  tcase_add_test(tc, test_format_versions_2_and_3_read_like_version_1);
  tcase_add_test(tc, test_fortran_order_is_rejected_unless_the_layouts_coincide);
  tcase_add_test(tc, test_big_endian_object_and_complex_arrays_are_rejected);
  tcase_add_test(tc, test_our_encoding_equals_numpy_save_byte_for_byte);
  tcase_add_test(tc, test_files_we_write_are_read_by_numpy);
  tcase_add_test(tc, test_byte_offset_and_compact_strides_are_honoured_when_writing);
  tcase_add_test(tc, test_unwritable_tensors_are_rejected);
  tcase_add_test(tc, test_truncation_at_every_byte_offset_is_an_error);
  tcase_add_test(tc, test_malformed_headers_are_rejected_naming_the_problem);
  tcase_add_test(tc, test_the_error_names_the_byte_offset_of_the_fault);
  tcase_add_test(tc, test_hostile_shapes_are_rejected_before_allocating);
  tcase_add_test(tc, test_header_variants_numpy_accepts_are_read);
  tcase_add_test(tc, test_bad_magic_version_and_bool_bytes_are_rejected);
  tcase_add_test(tc, test_random_mutations_never_crash);
  tcase_add_test(tc, test_missing_file_is_not_found_and_named);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(npy_suite()); }
