/* The importer on the ONNX loader's own inputs: its fixture models (made by
 * scripts/gen_fixture_models.py, described in fixtures.json) import with
 * the declared output types, the bad ones fail with the loader's error
 * naming the node, and every file of the loader's fuzz corpus is either
 * rejected or imported and type-checked without a crash or a leak (the
 * sanitizer build checks that). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble_test.h"

START_TEST(test_loader_fixtures_import_with_their_declared_output_types) {
  char path[1024];
  ck_assert_ptr_nonnull(import_test_path("NIMBLE_ONNX_FIXTURES", "fixtures.json", path, sizeof path));
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  ck_assert_msg(j != NULL, "%s: %s", path, jerr.text);
  json_t *good = json_object_get(j, "good");
  ck_assert_uint_gt(json_array_size(good), 0);
  for (size_t i = 0; i < json_array_size(good); i++) {
    json_t *g = json_array_get(good, i);
    char rel[256];
    snprintf(rel, sizeof rel, "%s.onnx", json_string_value(json_object_get(g, "name")));
    import_test_path("NIMBLE_ONNX_FIXTURES", rel, path, sizeof path);
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m;
    nimble_typing *t;
    nimble_status_t s = import_test_check_file(arena, path, &m, &t);
    ck_assert_msg(s == NULL, "%s: %s", rel, nimble_status_message(s));
    json_t *outs = json_object_get(g, "outputs");
    for (size_t k = 0; k < json_array_size(outs); k++) {
      json_t *dims = json_object_get(json_array_get(outs, k), "dims");
      const nimble_type *ty = import_test_main_output(t, k);
      char buf[256];
      ck_assert_ptr_nonnull(ty);
      nimble_type_format(ty, buf, sizeof buf);
      ck_assert_msg(ty->kind == NIMBLE_TYPE_TENSOR && ty->u.tensor.rank == json_array_size(dims), "%s: %s", rel, buf);
      for (size_t d = 0; d < json_array_size(dims); d++) {
        json_t *jd = json_array_get(dims, d);
        nimble_dim_t dim = ty->u.tensor.dims[d];
        if (json_is_integer(jd))
          ck_assert_msg(dim.kind == NIMBLE_DIM_CONST && dim.value == json_integer_value(jd), "%s: output %zu is %s",
                        rel, k, buf);
        else /* a dim_param survives as the variable of that name */
          ck_assert_msg(dim.kind == NIMBLE_DIM_VAR && strcmp(dim.name, json_string_value(jd)) == 0,
                        "%s: output %zu is %s", rel, k, buf);
      }
    }
    nimble_arena_destroy(arena);
  }
  json_t *bad = json_object_get(j, "bad");
  for (size_t i = 0; i < json_array_size(bad); i++) {
    json_t *b = json_array_get(bad, i);
    char rel[256];
    snprintf(rel, sizeof rel, "%s.onnx", json_string_value(json_object_get(b, "name")));
    import_test_path("NIMBLE_ONNX_FIXTURES", rel, path, sizeof path);
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m;
    nimble_status_t s = nimble_onnx_import_file(path, arena, NULL, &m);
    ck_assert_msg(s != NULL, "%s imported", rel);
    const char *want = json_string_value(json_object_get(b, "error"));
    ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "%s: '%s' lacks '%s'", rel,
                  nimble_status_message(s), want);
    nimble_status_free(s);
    nimble_arena_destroy(arena);
  }
  json_decref(j);
}
END_TEST

START_TEST(test_fuzz_corpus_never_crashes_the_importer) {
  const char *dir = getenv("NIMBLE_ONNX_CORPUS");
  ck_assert_msg(dir && dir[0], "NIMBLE_ONNX_CORPUS is not set");
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  size_t files = 0, loaded = 0, imported = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    files++;
    nimble_onnx_model *model;
    nimble_status_t s = nimble_onnx_model_load_file(path, &model);
    if (s) {
      nimble_status_free(s);
      continue;
    }
    loaded++;
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m;
    s = nimble_onnx_import_model(arena, model, NULL, &m);
    if (!s) {
      nimble_typing *t;
      imported++;
      s = nimble_typing_infer_module(m, &t);
    }
    if (s) {
      ck_assert_msg(nimble_status_message(s)[0] != 0, "%s: an error without a message", e->d_name);
      nimble_status_free(s);
    }
    nimble_arena_destroy(arena);
    nimble_onnx_model_destroy(model);
  }
  closedir(d);
  printf("fuzz corpus: %zu files, %zu load, %zu import\n", files, loaded, imported);
  ck_assert_uint_gt(files, 0);
}
END_TEST

/* Byte mutations of the fixture models: whatever the loader accepts must
 * import or fail cleanly. Deterministic (a fixed xorshift seed). */
START_TEST(test_mutated_fixture_models_import_or_fail_cleanly) {
  static const char *const names[] = {"control_flow.onnx", "cnn.onnx", "dim_param.onnx", "mlp.onnx"};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  size_t loaded = 0, imported = 0;
  for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
    char path[1024];
    import_test_path("NIMBLE_ONNX_FIXTURES", names[f], path, sizeof path);
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    ck_assert_int_gt(len, 0);
    unsigned char *orig = malloc((size_t)len), *buf = malloc((size_t)len);
    ck_assert_uint_eq(fread(orig, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    for (int k = 0; k < 400; k++) {
      memcpy(buf, orig, (size_t)len);
      for (int m = 0; m < 1 + k % 3; m++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[x % (uint64_t)len] = (unsigned char)(x >> 32);
      }
      nimble_onnx_model *model;
      nimble_status_t s = nimble_onnx_model_load_memory(buf, (size_t)len, names[f], &model);
      if (s) {
        nimble_status_free(s);
        continue;
      }
      loaded++;
      nimble_arena *arena;
      NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
      nimble_module *mod;
      s = nimble_onnx_import_model(arena, model, NULL, &mod);
      if (!s) {
        nimble_typing *t;
        imported++;
        s = nimble_typing_infer_module(mod, &t);
      }
      if (s) {
        ck_assert_msg(nimble_status_message(s)[0] != 0, "an error without a message");
        nimble_status_free(s);
      }
      nimble_arena_destroy(arena);
      nimble_onnx_model_destroy(model);
    }
    free(orig);
    free(buf);
  }
  printf("mutations: %zu load, %zu import\n", loaded, imported);
  ck_assert_uint_gt(loaded, 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_robust");
  TCase *tc = tcase_create("robust");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_loader_fixtures_import_with_their_declared_output_types);
  tcase_add_test(tc, test_fuzz_corpus_never_crashes_the_importer);
  tcase_add_test(tc, test_mutated_fixture_models_import_or_fail_cleanly);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
