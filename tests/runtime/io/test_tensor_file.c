/* The format-neutral parts: choosing the reader, element types, shapes,
 * and how files are written and refused. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor_io_test_util.h"

static void copy_file(const char *from, const char *to) {
  size_t len;
  uint8_t *b = slurp(from, &len);
  FILE *f = fopen(to, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fwrite(b, 1, len, f), len);
  fclose(f);
  free(b);
}

START_TEST(test_read_auto_picks_npy_by_magic_and_pb_by_name) {
  nimble_tensor_file_t t;
  /* .npy content under any name is found by its magic. */
  copy_file(fixture("i4_3.npy"), scratch("npy_named.bin"));
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_auto(scratch("npy_named.bin"), &t));
  ck_assert_str_eq(nimble_tensor_io_dtype_name(t.tensor.dtype), "int32");
  ck_assert_int_eq(((int32_t *)t.tensor.data)[2], 2147483647);
  nimble_tensor_file_deinit(&t);

  NIMBLE_ASSERT_OK(nimble_tensor_io_read_auto(fixture("i4_3.pb"), &t));
  ck_assert_str_eq(t.name, "t_i4_3");
  ck_assert_int_eq(((int32_t *)t.tensor.data)[0], INT32_MIN);
  nimble_tensor_file_deinit(&t);

  /* A TensorProto under another name is not guessed at. */
  copy_file(fixture("i4_3.pb"), scratch("proto.bin"));
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_auto(scratch("proto.bin"), &t),
                      NIMBLE_INVALID_ARGUMENT, "proto.bin: unknown tensor file format");
  copy_file(fixture("i4_3.pb"), scratch("proto.npy"));
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_auto(scratch("proto.npy"), &t),
                      NIMBLE_INVALID_ARGUMENT, "proto.npy: not a .npy file");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_auto(fixture("missing.pb"), &t), NIMBLE_NOT_FOUND,
                      "missing.pb: cannot open");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_read_auto(fixture_dir(), &t), NIMBLE_INVALID_ARGUMENT,
                      "not a regular file");
}
END_TEST

START_TEST(test_element_types_have_sizes_and_names) {
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLFloat, 32, 1}), 4);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLFloat, 16, 1}), 2);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLInt, 64, 1}), 8);
  ck_assert_int_eq(nimble_tensor_io_dtype_size(nimble_tensor_io_dtype_bool()), 1);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLFloat, 32, 4}), 0);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLInt, 1, 1}), 0);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLBfloat, 16, 1}), 2);
  ck_assert_int_eq(nimble_tensor_io_dtype_size((DLDataType){kDLBfloat, 32, 1}), 0);
  ck_assert_str_eq(nimble_tensor_io_dtype_name((DLDataType){kDLBfloat, 16, 1}), "bfloat16");
  ck_assert_str_eq(nimble_tensor_io_dtype_name((DLDataType){kDLUInt, 16, 1}), "uint16");
  ck_assert_str_eq(nimble_tensor_io_dtype_name((DLDataType){kDLFloat, 64, 1}), "float64");
  ck_assert_str_eq(nimble_tensor_io_dtype_name((DLDataType){kDLComplex, 64, 1}), "unsupported");
}
END_TEST

START_TEST(test_shapes_format_as_lists_and_truncate_safely) {
  int64_t shape[3] = {2, 0, 12345};
  DLTensor t = {0};
  t.shape = shape;
  t.ndim = 3;
  char buf[32];
  ck_assert_str_eq(nimble_tensor_io_format_shape(&t, buf, sizeof(buf)), "[2, 0, 12345]");
  t.ndim = 0;
  ck_assert_str_eq(nimble_tensor_io_format_shape(&t, buf, sizeof(buf)), "[]");
  t.ndim = 3;
  char small[6];
  ck_assert_str_eq(nimble_tensor_io_format_shape(&t, small, sizeof(small)), "[2, 0");
}
END_TEST

START_TEST(test_writes_leave_no_temporary_files_and_replace_old_ones) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/atomic", fixture_dir());
  mkdir(dir, 0777);
  char path[4400];
  /* Start from an empty directory whatever an earlier run left. */
  DIR *old = opendir(dir);
  ck_assert_ptr_nonnull(old);
  struct dirent *e;
  while ((e = readdir(old)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(old);
  snprintf(path, sizeof(path), "%s/y.npy", dir);
  int32_t v[2] = {5, 6};
  int64_t shape[1] = {2};
  DLTensor t = {0};
  t.device.device_type = kDLCPU;
  t.data = v;
  t.ndim = 1;
  t.shape = shape;
  t.dtype = (DLDataType){kDLInt, 32, 1};
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &t));
  v[1] = 7;
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &t)); /* replaces */
  nimble_tensor_file_t r;
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(path, &r));
  ck_assert_int_eq(((int32_t *)r.tensor.data)[1], 7);
  nimble_tensor_file_deinit(&r);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int entries = 0;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') {
      entries++;
      ck_assert_str_eq(e->d_name, "y.npy");
    }
  closedir(d);
  ck_assert_int_eq(entries, 1);
  /* The file is readable by others, as a plain file written by a tool. */
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(st.st_mode & S_IRUSR);
}
END_TEST

START_TEST(test_writing_into_a_missing_directory_names_the_path) {
  float f = 1;
  DLTensor t = {0};
  t.device.device_type = kDLCPU;
  t.data = &f;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_write_npy("/nonexistent-dir/x.npy", &t), NIMBLE_IO_ERROR,
                      "/nonexistent-dir/x.npy: cannot create");
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_write_pb("/nonexistent-dir/x.pb", "x", &t),
                      NIMBLE_IO_ERROR, "/nonexistent-dir/x.pb: cannot create");
  t.dtype.lanes = 2;
  NIMBLE_ASSERT_ERROR(nimble_tensor_io_write_pb(scratch("bad.pb"), "x", &t), NIMBLE_UNIMPLEMENTED,
                      "bad.pb: tensor element type");
  ck_assert_int_ne(access(scratch("bad.pb"), F_OK), 0);
}
END_TEST

START_TEST(test_deinit_of_a_zeroed_file_is_harmless) {
  nimble_tensor_file_t t;
  memset(&t, 0, sizeof(t));
  nimble_tensor_file_deinit(&t);
  nimble_tensor_file_deinit(NULL);
}
END_TEST

static Suite *file_suite(void) {
  Suite *s = suite_create("tensor_file");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_read_auto_picks_npy_by_magic_and_pb_by_name);
  tcase_add_test(tc, test_element_types_have_sizes_and_names);
  tcase_add_test(tc, test_shapes_format_as_lists_and_truncate_safely);
  tcase_add_test(tc, test_writes_leave_no_temporary_files_and_replace_old_ones);
  tcase_add_test(tc, test_writing_into_a_missing_directory_names_the_path);
  tcase_add_test(tc, test_deinit_of_a_zeroed_file_is_harmless);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(file_suite()); }
