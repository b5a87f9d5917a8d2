/* The executable format and its loader: what the builder writes reads back
 * the same through every way of loading, and every kind of damage is
 * refused with an error naming the problem, never a crash. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/layout.h"
#include "rt_test_util.h"

/* A small but complete executable: vadd over f32[2, ?n], a constant, two
 * entries, a source digest. */
static nimble_executable_builder *sample_builder(void) {
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_source_digest(
      b, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  int64_t k = rt_kernel(b, "vadd_f32");
  float w[4] = {1, 2, 3, 4};
  int64_t s4[1] = {4};
  DLTensor cw = rt_tensor(w, RT_F32, 1, s4);
  uint32_t kw;
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &cw, &kw));
  uint32_t f = rt_function(b, "add_w", 1, 6);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 1, kw);
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, s4);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in = rt_info("x", RT_F32, 1, s4, NULL), out = rt_info("y", RT_F32, 1, s4, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "add_w", f, &in, 1, &out, 1));
  rt_info_free(&in);
  rt_info_free(&out);
  uint32_t g = rt_function(b, "ident", 1, 1);
  RT_EMIT(b, g, NIMBLE_OP_RET, 0);
  int64_t dims[2] = {2, -1};
  const char *sym[2] = {NULL, "n"};
  in = rt_info("t", RT_F32, 2, dims, sym);
  out = rt_info("u", RT_F32, 2, dims, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "ident", g, &in, 1, &out, 1));
  rt_info_free(&in);
  rt_info_free(&out);
  return b;
}

static void *sample_image(size_t *size) {
  nimble_executable_builder *b = sample_builder();
  void *data;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, size));
  nimble_builder_destroy(b);
  return data;
}

/* Runs add_w on [10, 20, 30, 40] and checks [11, 22, 33, 44]. */
static void check_runs(nimble_executable *exe, float extra) {
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float x[4] = {10, 20, 30, 40};
  int64_t s4[1] = {4};
  DLTensor t = rt_tensor(x, RT_F32, 1, s4);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "add_w", 0, &t));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "add_w"));
  DLManagedTensor *y;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
  const float *p = y->dl_tensor.data;
  for (int i = 0; i < 4; i++) ck_assert_float_eq(p[i], 11.0f * (float)(i + 1) + extra);
  y->deleter(y);
  nimble_vm_destroy(vm);
}

START_TEST(test_signature_reads_back_what_the_builder_wrote) {
  size_t size;
  void *img = sample_image(&size);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, 0, &exe));
  free(img); /* without BORROW the executable keeps nothing of the buffer */
  ck_assert_str_eq(nimble_executable_target(exe), "test");
  ck_assert_str_eq(nimble_executable_producer(exe), "nimble " NIMBLE_VERSION_STRING);
  ck_assert_str_eq(nimble_executable_source_digest(exe),
                   "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ck_assert_uint_eq(nimble_executable_format_version(exe), NIMBLE_EXECUTABLE_FORMAT_VERSION);
  ck_assert_uint_eq(nimble_executable_num_entries(exe), 2);
  const nimble_entry_info_t *e = nimble_executable_entry_at(exe, 1);
  ck_assert_str_eq(e->name, "ident");
  ck_assert_uint_eq(e->num_inputs, 1);
  ck_assert_str_eq(e->inputs[0].name, "t");
  ck_assert_int_eq(e->inputs[0].dtype.code, kDLFloat);
  ck_assert_int_eq(e->inputs[0].dtype.bits, 32);
  ck_assert_int_eq(e->inputs[0].ndim, 2);
  ck_assert_int_eq(e->inputs[0].dims[0].value, 2);
  ck_assert_ptr_null(e->inputs[0].dims[0].symbol);
  ck_assert_int_eq(e->inputs[0].dims[1].value, -1);
  ck_assert_str_eq(e->inputs[0].dims[1].symbol, "n");
  ck_assert_str_eq(e->outputs[0].name, "u");
  ck_assert_ptr_null(nimble_executable_entry_at(exe, 2));
  char buf[32];
  ck_assert_str_eq(nimble_format_declared_shape(&e->inputs[0], buf, sizeof buf), "[2,?n]");
  NIMBLE_ASSERT_ERROR(nimble_executable_find_entry(exe, "nope", &e), NIMBLE_NOT_FOUND, "no entry 'nope'");
  check_runs(exe, 0);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_any_dims_print_as_a_bare_question_mark) {
  nimble_sig_dim_t dims[3] = {{3, NULL}, {-1, ""}, {-1, "batch"}};
  nimble_tensor_info_t info = {"x", {kDLFloat, 32, 1}, {kDLCPU, 0}, 3, dims};
  char buf[64];
  ck_assert_str_eq(nimble_format_declared_shape(&info, buf, sizeof buf), "[3,?,?batch]");
  ck_assert_str_eq(nimble_format_declared_shape(&info, buf, 5), "[3,?");
}
END_TEST

static char *temp_path(const char *name) {
  const char *dir = getenv("NIMBLE_BUILD_DIR");
  char *p = malloc(4096);
  snprintf(p, 4096, "%s/%s.%d", dir ? dir : "/tmp", name, (int)getpid());
  return p;
}

START_TEST(test_file_memory_borrowed_and_parts_all_load_and_run) {
  size_t size;
  void *img = sample_image(&size);
  char *path = temp_path("sample.nimble");
  FILE *f = fopen(path, "wb");
  ck_assert(f != NULL);
  ck_assert(fwrite(img, 1, size, f) == size);
  fclose(f);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_file(path, &exe));
  unlink(path); /* the mapping stays valid */
  check_runs(exe, 0);
  nimble_executable_release(exe);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_file(path, &exe), NIMBLE_NOT_FOUND, path);
  free(path);

  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_BORROW, &exe));
  check_runs(exe, 0);
  nimble_executable_release(exe);
  free(img);

  /* The store's layout: one blob per part, in any order. */
  nimble_executable_builder *b = sample_builder();
  static const nimble_part_kind_t kinds[4] = {NIMBLE_PART_KERNELS_CPU, NIMBLE_PART_CONSTANTS,
                                              NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE};
  nimble_executable_part_t parts[4];
  void *blobs[4];
  for (int i = 0; i < 4; i++) {
    size_t n;
    NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, kinds[i], &blobs[i], &n));
    parts[i].kind = kinds[i];
    parts[i].data = blobs[i];
    parts[i].size = n;
  }
  void *none;
  size_t none_size;
  NIMBLE_ASSERT_ERROR(nimble_builder_serialize_part(b, NIMBLE_PART_KERNELS_CUDA, &none, &none_size),
                      NIMBLE_NOT_FOUND, "no cuda kernels library");
  nimble_builder_destroy(b);
  NIMBLE_ASSERT_OK(nimble_executable_load_parts(parts, 4, 0, &exe));
  check_runs(exe, 0);
  nimble_executable_release(exe);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts, 3, 0, &exe), NIMBLE_INVALID_ARGUMENT,
                      "the executable has no bytecode part");
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts + 1, 3, 0, &exe), NIMBLE_INVALID_ARGUMENT,
                      "kernel 'vadd_f32' needs a cpu kernel library, and the executable has none");
  parts[3].kind = NIMBLE_PART_METADATA;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts, 4, 0, &exe), NIMBLE_INVALID_ARGUMENT,
                      "part 3: a second metadata part");
  parts[3].kind = NIMBLE_PART_CONSTANTS + 10;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts, 4, 0, &exe), NIMBLE_INVALID_ARGUMENT,
                      "part 3: unknown kind 13");
  /* A part under the wrong kind is caught by its own header. */
  parts[3].kind = NIMBLE_PART_BYTECODE;
  parts[2].kind = NIMBLE_PART_BYTECODE;
  parts[3].kind = NIMBLE_PART_METADATA;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts, 4, 0, &exe), NIMBLE_INVALID_ARGUMENT,
                      "metadata at offset 4: part kind 2 (bytecode), expected 1 (metadata)");
  for (int i = 0; i < 4; i++) free(blobs[i]);
}
END_TEST

/* The builder's four parts, in kind order, as the store keeps them
 * (blobs[i] malloc'ed; parts[i].data points at it). Destroys b. */
static void serialize_parts(nimble_executable_builder *b, nimble_executable_part_t parts[4], void *blobs[4]) {
  static const nimble_part_kind_t kinds[4] = {NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE, NIMBLE_PART_CONSTANTS,
                                              NIMBLE_PART_KERNELS_CPU};
  for (int i = 0; i < 4; i++) {
    NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, kinds[i], &blobs[i], &parts[i].size));
    parts[i].kind = kinds[i];
    parts[i].data = blobs[i];
  }
  nimble_builder_destroy(b);
}

/* Parts joined into one file image are, byte for byte, the file the
 * builder writes (same sections in the same order), and it runs; bad part
 * lists are refused naming the part. */
START_TEST(test_joined_parts_are_the_builders_file_byte_for_byte) {
  size_t size;
  void *img = sample_image(&size);
  nimble_executable_part_t parts[4];
  void *blobs[4];
  serialize_parts(sample_builder(), parts, blobs);
  void *joined;
  size_t joined_size;
  NIMBLE_ASSERT_OK(nimble_executable_join_parts(parts, 4, &joined, &joined_size));
  ck_assert_uint_eq(joined_size, size);
  ck_assert(memcmp(joined, img, size) == 0);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(joined, joined_size, 0, &exe));
  check_runs(exe, 0);
  nimble_executable_release(exe);
  free(joined);
  void *none = NULL;
  size_t none_size = 0;
  NIMBLE_ASSERT_ERROR(nimble_executable_join_parts(parts, 0, &none, &none_size), NIMBLE_INVALID_ARGUMENT,
                      "0 parts");
  parts[1].kind = NIMBLE_PART_CONSTANTS;
  NIMBLE_ASSERT_ERROR(nimble_executable_join_parts(parts, 4, &none, &none_size), NIMBLE_INVALID_ARGUMENT,
                      "part 1 is of kind 3, its header says 2");
  parts[1] = parts[2];
  NIMBLE_ASSERT_ERROR(nimble_executable_join_parts(parts, 4, &none, &none_size), NIMBLE_INVALID_ARGUMENT,
                      "two parts of kind 3");
  uint8_t junk[32] = "not a part at all";
  parts[1].kind = NIMBLE_PART_BYTECODE;
  parts[1].data = junk;
  parts[1].size = sizeof junk;
  NIMBLE_ASSERT_ERROR(nimble_executable_join_parts(parts, 4, &none, &none_size), NIMBLE_INVALID_ARGUMENT,
                      "part 1 does not start with a part header");
  ck_assert_ptr_null(none);
  for (int i = 0; i < 4; i++) free(blobs[i]);
  free(img);
}
END_TEST

static void write_bytes(const char *dir, const char *name, const void *data, size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, size, f), size);
  fclose(f);
}

/* A directory as `nimble fetch -o DIR` leaves it: the part files (named
 * so that readdir has no reason to list them in kind order) come back in
 * kind order with their bytes; other files are skipped; a directory
 * without parts, or none at all, is an error naming it. */
START_TEST(test_a_directory_of_parts_reads_back_in_kind_order) {
  nimble_executable_part_t want[4];
  void *blobs[4];
  serialize_parts(sample_builder(), want, blobs);
  char dir[] = "/tmp/nimble-part-dir-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  static const char *names[4] = {"zz-metadata", "b-bytecode", "y-constants", "a-kernels"};
  for (int i = 0; i < 4; i++) write_bytes(dir, names[i], want[i].data, want[i].size);
  static const char manifest[] = "{\"schemaVersion\": 2, \"padding\": \"past 16 bytes\"}";
  write_bytes(dir, "manifest.json", manifest, strlen(manifest));
  write_bytes(dir, "tiny", "NMBP", 4);
  nimble_executable_part_t *got;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_executable_read_part_dir(dir, &got, &n));
  ck_assert_uint_eq(n, 4);
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(got[i].kind, want[i].kind);
    ck_assert_uint_eq(got[i].size, want[i].size);
    ck_assert(memcmp(got[i].data, want[i].data, want[i].size) == 0);
  }
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_parts(got, n, 0, &exe));
  check_runs(exe, 0);
  nimble_executable_release(exe);
  nimble_executable_parts_free(got, n);

  char path[512];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    ck_assert_int_eq(remove(path), 0);
  }
  NIMBLE_ASSERT_ERROR(nimble_executable_read_part_dir(dir, &got, &n), NIMBLE_INVALID_ARGUMENT, "no part files");
  ck_assert_ptr_null(got);
  ck_assert_uint_eq(n, 0);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/tiny", dir);
  remove(path);
  ck_assert_int_eq(rmdir(dir), 0);
  NIMBLE_ASSERT_ERROR(nimble_executable_read_part_dir(dir, &got, &n), NIMBLE_IO_ERROR, dir);
  for (int i = 0; i < 4; i++) free(blobs[i]);
}
END_TEST

START_TEST(test_part_media_types_round_trip) {
  /* docs/artifacts.md's table, written out: the one set protocol's manifest
   * encoder admits. */
  static const struct {
    nimble_part_kind_t kind;
    const char *media_type;
  } kTable[] = {
      {NIMBLE_PART_METADATA, "application/vnd.nimble.executable.metadata.v1"},
      {NIMBLE_PART_BYTECODE, "application/vnd.nimble.bytecode.v1"},
      {NIMBLE_PART_CONSTANTS, "application/vnd.nimble.constants.v1"},
      {NIMBLE_PART_KERNELS_CUDA, "application/vnd.nimble.kernels.nvptx64-nvidia-cuda.v1+ptx"},
  };
  for (size_t i = 0; i < sizeof kTable / sizeof kTable[0]; i++) {
    ck_assert_str_eq(nimble_part_media_type(kTable[i].kind), kTable[i].media_type);
    ck_assert_str_eq(nimble_part_media_type_for_target(kTable[i].kind, "aarch64-linux-gnu"),
                     kTable[i].media_type);
    ck_assert_int_eq(nimble_part_kind_from_media_type(kTable[i].media_type), kTable[i].kind);
  }
  for (int k = NIMBLE_PART_METADATA; k <= NIMBLE_PART_KERNELS_CUDA; k++) {
    const char *mt = nimble_part_media_type((nimble_part_kind_t)k);
    ck_assert_ptr_nonnull(mt);
    ck_assert_int_eq(nimble_part_kind_from_media_type(mt), k);
  }
  ck_assert_ptr_null(nimble_part_media_type((nimble_part_kind_t)99));
  ck_assert_ptr_null(nimble_part_media_type_for_target((nimble_part_kind_t)0, "x86_64-linux-gnu"));
  ck_assert_int_eq(nimble_part_kind_from_media_type("application/octet-stream"), 0);
  ck_assert_int_eq(nimble_part_kind_from_media_type(NULL), 0);
  /* The names the runtime used before the contract was unified are gone. */
  ck_assert_int_eq(nimble_part_kind_from_media_type("application/vnd.nimble.executable.bytecode.v1"), 0);
  ck_assert_int_eq(nimble_part_kind_from_media_type("application/vnd.nimble.executable.kernels.elf.v1"), 0);
  ck_assert_int_eq(nimble_part_kind_from_media_type("application/vnd.nimble.config.v1+json"), 0);
}
END_TEST

START_TEST(test_cpu_kernel_media_types_carry_the_triple) {
#if defined(__x86_64__)
  ck_assert_str_eq(nimble_part_media_type(NIMBLE_PART_KERNELS_CPU),
                   "application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf");
#elif defined(__aarch64__)
  ck_assert_str_eq(nimble_part_media_type(NIMBLE_PART_KERNELS_CPU),
                   "application/vnd.nimble.kernels.aarch64-linux-gnu.v1+elf");
#endif
  ck_assert_str_eq(nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, "x86_64-linux-gnu"),
                   "application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf");
  ck_assert_str_eq(nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, "aarch64-linux-gnu"),
                   "application/vnd.nimble.kernels.aarch64-linux-gnu.v1+elf");
  ck_assert_ptr_null(nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, "riscv64-linux-gnu"));
  ck_assert_ptr_null(nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, "test"));
  ck_assert_ptr_null(nimble_part_media_type_for_target(NIMBLE_PART_KERNELS_CPU, NULL));

  /* Any triple's ELF kernels are CPU kernels; the triple is read back. */
  const char *t = NULL;
  const char *mt = "application/vnd.nimble.kernels.riscv64-linux-gnu.v1+elf";
  ck_assert_int_eq(nimble_part_kind_from_media_type(mt), NIMBLE_PART_KERNELS_CPU);
  ck_assert_uint_eq(nimble_part_kernels_triple(mt, &t), strlen("riscv64-linux-gnu"));
  ck_assert(t == mt + strlen("application/vnd.nimble.kernels."));
  ck_assert(strncmp(t, "riscv64-linux-gnu", 17) == 0);
  ck_assert_uint_eq(nimble_part_kernels_triple("application/vnd.nimble.kernels.aarch64-linux-gnu.v1+elf", NULL), 17);

  /* Not CPU kernels: PTX, an empty triple, a triple with odd characters,
   * another version, another suffix, NULL. */
  static const char *const kNot[] = {
      "application/vnd.nimble.kernels.nvptx64-nvidia-cuda.v1+ptx",
      "application/vnd.nimble.kernels..v1+elf",
      "application/vnd.nimble.kernels.v1+elf",
      "application/vnd.nimble.kernels.x86_64/linux.v1+elf",
      "application/vnd.nimble.kernels.a.b.v1+elf",
      "application/vnd.nimble.kernels.x86_64-linux-gnu.v2+elf",
      "application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf ",
      "application/vnd.nimble.kernels.x86_64-linux-gnu",
  };
  for (size_t i = 0; i < sizeof kNot / sizeof kNot[0]; i++) {
    t = "unchanged";
    ck_assert_msg(nimble_part_kernels_triple(kNot[i], &t) == 0, "%s", kNot[i]);
    ck_assert_ptr_null(t);
    ck_assert_msg(nimble_part_kind_from_media_type(kNot[i]) !=
                      NIMBLE_PART_KERNELS_CPU, "%s", kNot[i]);
  }
  ck_assert_uint_eq(nimble_part_kernels_triple(NULL, &t), 0);
}
END_TEST

/* The sample with a 64-byte stand-in for the kernel library, loaded with
 * NIMBLE_LOAD_NO_KERNELS: every part is still parsed and checked, and the
 * image stays small enough to cut at every offset. */
static nimble_executable_builder *small_builder(void) {
  nimble_executable_builder *b = sample_builder();
  uint8_t elf[64] = {0x7f, 'E', 'L', 'F'};
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, elf, sizeof elf));
  return b;
}

START_TEST(test_truncation_at_every_byte_offset_is_an_error) {
  nimble_executable_builder *b = small_builder();
  uint8_t *img;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, (void **)&img, &size));
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_NO_KERNELS, &exe));
  nimble_executable_release(exe);
  /* Each cut is placed at the very end of a heap block, so ASan sees any
   * read past the bytes given. */
  uint8_t *buf = malloc(size);
  for (size_t cut = 0; cut < size; cut++) {
    uint8_t *part = buf + size - cut;
    memcpy(part, img, cut);
    nimble_status_t s = nimble_executable_load_memory(part, cut, NIMBLE_LOAD_NO_KERNELS, &exe);
    ck_assert_msg(s != NULL, "a file cut at %zu of %zu bytes loaded", cut, size);
    ck_assert_msg(nimble_status_code(s) == NIMBLE_DATA_LOSS, "cut at %zu: %s", cut, nimble_status_message(s));
    nimble_status_free(s);
  }
  free(buf);
  free(img);
  /* The same for each part loaded on its own. */
  nimble_executable_part_t parts[4];
  void *blobs[4];
  serialize_parts(b, parts, blobs);
  for (int i = 0; i < 4; i++) {
    size_t full = parts[i].size;
    buf = malloc(full);
    for (size_t cut = 0; cut < full; cut++) {
      uint8_t *p = buf + full - cut;
      memcpy(p, blobs[i], cut);
      parts[i].data = p;
      parts[i].size = cut;
      nimble_status_t s = nimble_executable_load_parts(parts, 4, NIMBLE_LOAD_NO_KERNELS, &exe);
      ck_assert_msg(s != NULL, "part %d cut at %zu of %zu loaded", i, cut, full);
      nimble_status_free(s);
    }
    free(buf);
    parts[i].data = blobs[i];
    parts[i].size = full;
  }
  for (int i = 0; i < 4; i++) free(blobs[i]);
}
END_TEST

/* Loads the builder's image and expects an error. */
static void expect_load_error(nimble_executable_builder *b, nimble_status_code_t code, const char *fragment) {
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), code, fragment);
  ck_assert_ptr_null(exe);
  nimble_builder_destroy(b);
}

/* A builder with one function `main` (2 params, 3 registers) whose body the
 * caller emits, and an entry for it. */
static nimble_executable_builder *one_function(uint32_t *f) {
  nimble_executable_builder *b = rt_builder();
  *f = rt_function(b, "main", 2, 3);
  rt_add_scalar_entry(b, "main", *f, 2);
  return b;
}

START_TEST(test_bad_bytecode_is_refused_with_the_function_and_pc) {
  nimble_executable_builder *b;
  uint32_t f;

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 0, 1);
  RT_EMIT(b, f, 99, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 0 'main' pc 1: unknown opcode 99");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 5, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT,
                    "function 0 'main' pc 0 (Move): operand 0: register 5 is out of range");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_RET, -1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "register -1 is out of range");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 2, 7, 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (Invoke): function index 7 is out of range");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 2, f, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 'main' takes 2 arguments, given 1");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 2, 3);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (LoadConst): constant 3 is out of range (the pool has 0)");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, 4, 1, 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (InvokePacked): kernel index 4 is out of range");

  b = one_function(&f);
  rt_kernel(b, "vadd_f32");
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, 0, 3, 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "output count 3 exceeds the argument count");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_GOTO, 5);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (Goto): jump offset 5 leaves the function");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_IF, 0, 1, 0, -1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (If): jump offset -1 leaves the function");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 0, 1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 0 'main' does not end in Ret, Goto, If or Fatal");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_MOVE, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "pc 0 (Move): expects 2 operands, has 1");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 0, 3, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "alignment 3 is not a power of two");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 0, 64, kDLCPU, 0, kDLFloat, 7, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "dtype (code 2) is not supported");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 2, 0, 1, kDLFloat, 32, 1, 4, -2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "(AllocTensor): dim -2 is negative");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_CLOSURE, 2, f, 0, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 'main' takes 2 arguments, 3 captured");

  b = one_function(&f);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 2, 0, 42, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "(DeviceCopy): device type 42 is not supported");

  /* A function with no instructions, and one with fewer registers than
   * parameters. */
  b = rt_builder();
  rt_function(b, "empty", 0, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 0 'empty': 0 instructions");
  b = rt_builder();
  f = rt_function(b, "tight", 3, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function 0 'tight': 3 parameters and 2 registers");
  b = rt_builder();
  f = rt_function(b, "huge", 0, 70000);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "0 parameters and 70000 registers");
}
END_TEST

START_TEST(test_bad_metadata_is_refused) {
  nimble_executable_builder *b;
  uint32_t f;
  /* An entry naming a function that does not exist. */
  b = rt_builder();
  f = rt_function(b, "main", 0, 1);
  RT_EMIT(b, f, NIMBLE_OP_FATAL);
  rt_add_scalar_entry(b, "main", 3, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "metadata: entry 'main' names function 3, but the bytecode has 1");
  /* An entry whose inputs do not match its function's parameters. */
  b = rt_builder();
  f = rt_function(b, "main", 2, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "entry 'main' declares 1 inputs, but its function 'main' takes 2");
  /* Two entries of one name. */
  b = rt_builder();
  f = rt_function(b, "main", 0, 1);
  RT_EMIT0(b, f, NIMBLE_OP_FATAL);
  rt_add_scalar_entry(b, "main", f, 0);
  rt_add_scalar_entry(b, "main", f, 0);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "entry 'main' appears twice");
  /* An unsupported dtype in a signature. */
  b = rt_builder();
  f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  DLDataType odd = {kDLFloat, 12, 1};
  nimble_tensor_info_t in = rt_info("x", odd, 0, NULL, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, &in, 1, &in, 1));
  rt_info_free(&in);
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "input 0 'x': unsupported dtype (code 2, bits 12, lanes 1)");
  /* A bytecode with no functions at all. */
  b = rt_builder();
  expect_load_error(b, NIMBLE_INVALID_ARGUMENT, "function count 0");
}
END_TEST

START_TEST(test_an_unknown_format_version_is_refused) {
  nimble_executable_builder *b = sample_builder();
  nimble_builder_set_format_version(b, 3);
  expect_load_error(b, NIMBLE_UNIMPLEMENTED,
                    "executable at offset 8: format version 3 is not supported (this runtime reads version 2)");
  /* Version 1 had no digests: refused with a word to recompile. */
  b = sample_builder();
  nimble_builder_set_format_version(b, 1);
  expect_load_error(b, NIMBLE_UNIMPLEMENTED,
                    "executable at offset 8: format version 1 has no integrity digests and is no longer "
                    "loaded: recompile it (this runtime reads version 2)");
  b = sample_builder();
  nimble_builder_set_format_version(b, 3);
  void *blob;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, NIMBLE_PART_METADATA, &blob, &n));
  nimble_builder_destroy(b);
  nimble_executable_part_t p = {NIMBLE_PART_METADATA, blob, n};
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(&p, 1, 0, &exe), NIMBLE_UNIMPLEMENTED,
                      "metadata at offset 8: format version 3 is not supported");
  free(blob);
}
END_TEST

/* Reads the section table of an image: offset and size of `kind`. */
static void find_section(const uint8_t *img, uint32_t kind, size_t *off, size_t *size, size_t *entry) {
  uint32_t count;
  memcpy(&count, img + 12, 4);
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = img + 56 + 24 * i;
    uint32_t k;
    uint64_t o, s;
    memcpy(&k, e, 4);
    memcpy(&o, e + 8, 8);
    memcpy(&s, e + 16, 8);
    if (k == kind) {
      *off = (size_t)o;
      *size = (size_t)s;
      *entry = 56 + 24 * (size_t)i;
      return;
    }
  }
  ck_abort_msg("no section %u", kind);
}

/* A damaged image is refused as it is (by its digests, or before them by
 * the header fields they rely on); resealed (its digests recomputed, as a
 * forger would), the parsers behind the digests refuse it with `fragment`. */
static void expect_image_error(const uint8_t *img, size_t size, nimble_status_code_t code, const char *fragment) {
  nimble_executable *exe = NULL;
  nimble_status_t raw = nimble_executable_load_memory(img, size, 0, &exe);
  ck_assert_msg(raw != NULL, "a damaged image loaded without its digests recomputed");
  nimble_status_free(raw);
  uint8_t *copy = malloc(size ? size : 1);
  memcpy(copy, img, size);
  nimble_image_reseal(copy, size);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(copy, size, 0, &exe), code, fragment);
  free(copy);
}

START_TEST(test_damaged_containers_are_refused_with_the_offset) {
  size_t size, off, len, entry;
  uint8_t *img = sample_image(&size);
  uint8_t *bad = malloc(size + 64);
  uint64_t v64;
  uint32_t v32;

  memcpy(bad, img, size);
  bad[1] = 'X';
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "bad magic: not a nimble executable");

  memcpy(bad, img, size);
  memset(bad + size, 0, 64);
  expect_image_error(bad, size + 64, NIMBLE_INVALID_ARGUMENT, "size mismatch: the header says");

  memcpy(bad, img, size);
  v32 = 0;
  memcpy(bad + 12, &v32, 4);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "section count 0");

  memcpy(bad, img, size);
  find_section(img, NIMBLE_PART_BYTECODE, &off, &len, &entry);
  v64 = off + 8; /* misaligned */
  memcpy(bad + entry + 8, &v64, 8);
  expect_image_error(bad, size, NIMBLE_OUT_OF_RANGE, "section 1 (bytecode): bytes");

  memcpy(bad, img, size);
  v64 = size; /* runs past the end */
  memcpy(bad + entry + 16, &v64, 8);
  expect_image_error(bad, size, NIMBLE_OUT_OF_RANGE, "are outside the");

  memcpy(bad, img, size);
  size_t moff, mlen, mentry;
  find_section(img, NIMBLE_PART_METADATA, &moff, &mlen, &mentry);
  v64 = moff; /* bytecode section placed over the metadata */
  memcpy(bad + entry + 8, &v64, 8);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "section 1 overlaps section 0");

  memcpy(bad, img, size);
  v32 = NIMBLE_PART_METADATA; /* two metadata sections */
  memcpy(bad + entry, &v32, 4);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "section 1: a second metadata section");

  memcpy(bad, img, size);
  v32 = 77;
  memcpy(bad + entry, &v32, 4);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "section 1: unknown kind 77");

  /* Inside the bytecode: an opcode the runtime does not know. The first
   * instruction follows the kernel table and the first function header. */
  memcpy(bad, img, size);
  memcpy(bad + off, "XXXX", 4);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "bad part magic");

  /* Inside the constants: a byte count that does not match the shape. */
  size_t coff, clen, centry;
  find_section(img, NIMBLE_PART_CONSTANTS, &coff, &clen, &centry);
  memcpy(bad, img, size);
  /* header 16 + count/reserved 8 + offsets 16, then dtype/dev/ndim/res 16,
   * one dim 8, offset 8, nbytes 8 */
  v64 = 12;
  memcpy(bad + coff + 16 + 8 + 16 + 16 + 8 + 8, &v64, 8);
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "constant 0: 12 bytes do not match its shape and dtype");
  memcpy(bad, img, size);
  v64 = 64; /* data offset past the 64-byte data area */
  memcpy(bad + coff + 16 + 8 + 16 + 16 + 8, &v64, 8);
  expect_image_error(bad, size, NIMBLE_OUT_OF_RANGE, "constant 0: bytes [64, +16) lie outside the 64-byte data area");

  /* A kernel blob that is not an ELF object. */
  size_t koff, klen, kentry;
  find_section(img, NIMBLE_PART_KERNELS_CPU, &koff, &klen, &kentry);
  memcpy(bad, img, size);
  bad[koff + 32] = 0;
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "the kernel blob is not an ELF shared object");
  memcpy(bad, img, size);
  memset(bad + koff + 32 + 16, 0xEE, 64); /* ELF magic intact, header garbage */
  expect_image_error(bad, size, NIMBLE_INVALID_ARGUMENT, "cpu kernels: the shared object does not load");

  free(bad);
  free(img);
  expect_image_error((const uint8_t *)"\x89NMB", 4, NIMBLE_DATA_LOSS, "not even a header");
  expect_image_error((const uint8_t *)"", 0, NIMBLE_DATA_LOSS, "not even a header");
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(nimble_executable_load_memory(NULL, 5, 0, &exe), NIMBLE_INVALID_ARGUMENT, "NULL");
}
END_TEST

START_TEST(test_a_missing_kernel_symbol_is_named) {
  nimble_executable_builder *b = rt_builder();
  rt_kernel(b, "vadd_f32");
  rt_kernel(b, "no_such_kernel");
  uint32_t f = rt_function(b, "main", 0, 1);
  RT_EMIT0(b, f, NIMBLE_OP_FATAL);
  rt_add_scalar_entry(b, "main", f, 0);
  expect_load_error(b, NIMBLE_NOT_FOUND,
                    "kernel 'no_such_kernel' (kernel 1) is not exported by the cpu kernel library");
}
END_TEST

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  ck_assert(d != NULL);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

START_TEST(test_kernels_load_from_memory_without_leaving_descriptors) {
  int before = count_fds();
  size_t size;
  void *img = sample_image(&size);
  for (int i = 0; i < 20; i++) {
    nimble_executable *exe;
    NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, 0, &exe));
    ck_assert_int_eq(count_fds(), before);
    nimble_executable_release(exe);
  }
  free(img);
  ck_assert_int_eq(count_fds(), before);
}
END_TEST

START_TEST(test_two_live_executables_keep_their_own_kernels) {
  /* The second library is loaded after the first's descriptor was closed,
   * so it gets the same /proc/self/fd/N name: the loader must not hand
   * back the first library for it. */
  size_t size, alt_size;
  void *img = sample_image(&size);
  nimble_executable_builder *b = sample_builder();
  const void *alt = rt_kernels_alt(&alt_size);
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, alt, alt_size));
  nimble_executable *first, *second;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, 0, &first));
  NIMBLE_ASSERT_OK(rt_try_load(b, &second));
  nimble_builder_destroy(b);
  check_runs(first, 0);
  check_runs(second, 1000);
  nimble_executable_release(first);
  nimble_executable_release(second);
  free(img);
}
END_TEST

START_TEST(test_loading_without_kernels_allows_inspection_only) {
  size_t size;
  void *img = sample_image(&size);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(img, size, NIMBLE_LOAD_NO_KERNELS, &exe));
  ck_assert_uint_eq(nimble_executable_num_entries(exe), 2);
  nimble_vm *vm;
  NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, NULL, &vm), NIMBLE_FAILED_PRECONDITION,
                      "loaded without its kernels");
  nimble_executable_release(exe);
  free(img);
}
END_TEST

START_TEST(test_files_that_are_not_executables_are_refused) {
  nimble_executable *exe = NULL;
  const char *dir = getenv("NIMBLE_BUILD_DIR");
  NIMBLE_ASSERT_ERROR(nimble_executable_load_file(dir ? dir : "/tmp", &exe), NIMBLE_INVALID_ARGUMENT,
                      "not a regular file");
  char *path = temp_path("empty.nimble");
  FILE *f = fopen(path, "wb");
  ck_assert(f != NULL);
  fclose(f);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_file(path, &exe), NIMBLE_DATA_LOSS, "not even a header");
  f = fopen(path, "wb");
  fputs("#!/bin/sh\necho not a model\n", f);
  fclose(f);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_file(path, &exe), NIMBLE_INVALID_ARGUMENT, "bad magic");
  unlink(path);
  free(path);
  ck_assert_ptr_null(exe);
  NIMBLE_ASSERT_ERROR(nimble_executable_load_file(NULL, &exe), NIMBLE_INVALID_ARGUMENT, "NULL");
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(NULL, 1, 0, &exe), NIMBLE_INVALID_ARGUMENT, "NULL");
}
END_TEST

START_TEST(test_the_builder_refuses_misuse) {
  nimble_executable_builder *b;
  NIMBLE_ASSERT_ERROR(nimble_builder_create(NULL, &b), NIMBLE_INVALID_ARGUMENT, "NULL");
  NIMBLE_ASSERT_OK(nimble_builder_create("t", &b));
  NIMBLE_ASSERT_ERROR(NIMBLE_BUILDER_EMIT(b, 3, NIMBLE_OP_RET, 0), NIMBLE_INVALID_ARGUMENT, "no function 3");
  NIMBLE_ASSERT_ERROR(nimble_builder_set_kernel_library(b, NIMBLE_PART_METADATA, "x", 1),
                      NIMBLE_INVALID_ARGUMENT, "is not a kernel library");
  NIMBLE_ASSERT_ERROR(nimble_builder_add_kernel(b, NULL, kDLCPU, NULL), NIMBLE_INVALID_ARGUMENT, "NULL");
  NIMBLE_ASSERT_ERROR(nimble_builder_add_entry(b, NULL, 0, NULL, 0, NULL, 0), NIMBLE_INVALID_ARGUMENT, "NULL");
  ck_assert_uint_eq(nimble_builder_function_size(b, 9), 0);
  nimble_builder_destroy(b);
  nimble_builder_destroy(NULL);
}
END_TEST

Suite *loader_suite(void) {
  Suite *s = suite_create("executable_loader");
  TCase *tc = tcase_create("loader");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_signature_reads_back_what_the_builder_wrote);
  tcase_add_test(tc, test_any_dims_print_as_a_bare_question_mark);
  tcase_add_test(tc, test_file_memory_borrowed_and_parts_all_load_and_run);
  tcase_add_test(tc, test_part_media_types_round_trip);
  tcase_add_test(tc, test_joined_parts_are_the_builders_file_byte_for_byte);
  tcase_add_test(tc, test_a_directory_of_parts_reads_back_in_kind_order);
  tcase_add_test(tc, test_cpu_kernel_media_types_carry_the_triple);
  tcase_add_test(tc, test_truncation_at_every_byte_offset_is_an_error);
  tcase_add_test(tc, test_bad_bytecode_is_refused_with_the_function_and_pc);
  tcase_add_test(tc, test_bad_metadata_is_refused);
  tcase_add_test(tc, test_an_unknown_format_version_is_refused);
  tcase_add_test(tc, test_damaged_containers_are_refused_with_the_offset);
  tcase_add_test(tc, test_a_missing_kernel_symbol_is_named);
  tcase_add_test(tc, test_kernels_load_from_memory_without_leaving_descriptors);
  tcase_add_test(tc, test_two_live_executables_keep_their_own_kernels);
  tcase_add_test(tc, test_loading_without_kernels_allows_inspection_only);
  tcase_add_test(tc, test_files_that_are_not_executables_are_refused);
  tcase_add_test(tc, test_the_builder_refuses_misuse);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(loader_suite()); }
