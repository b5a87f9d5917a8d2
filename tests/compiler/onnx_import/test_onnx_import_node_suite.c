/* Coverage of the ONNX backend node suite (generated at test time from
 * Debian's python3-onnx): every case is imported and type-checked; where
 * all of a case's inputs have static shapes, the inferred output shapes
 * are checked against the dims of the case's expected output TensorProtos
 * (test_data_set_0/output_<k>.pb, read with an independent protobuf
 * reader). A case passes when all of that holds.
 *
 * The per-case results go to $NIMBLE_ONNX_COVERAGE_OUT (TSV: case, result,
 * ops, message), from which scripts/onnx_coverage.py writes
 * docs/onnx-coverage.md. The suite fails when the pass count drops below
 * the committed floor in $NIMBLE_ONNX_COVERAGE_FLOOR. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble_test.h"

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct op types of the main graph, comma-separated. */
static void op_list(const nimble_onnx_graph *g, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const char *op = g->nodes[i]->op_type;
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++) seen = strcmp(g->nodes[k]->op_type, op) == 0;
    if (seen) continue;
    int n = snprintf(buf + len, size - len, "%s%s", len ? "," : "", op);
    if (n < 0 || (size_t)n >= size - len) break;
    len += (size_t)n;
  }
}

/* Checks inferred output shapes against the expected outputs; returns a
 * message on mismatch (static buffer) or NULL. *checked tells whether the
 * case had static inputs and data to compare with. */
static const char *check_shapes(const char *case_dir, const nimble_module *m, const nimble_typing *t,
                                size_t n_outputs, bool *checked) {
  static char msg[512];
  *checked = false;
  const nimble_expr *fn = nimble_module_find_func(m, "main");
  for (size_t i = 0; i < fn->u.func.num_params; i++) {
    const nimble_type *pt = fn->u.func.params[i]->u.var.annotation;
    if (!pt || pt->kind != NIMBLE_TYPE_TENSOR) return NULL;
    for (size_t d = 0; d < pt->u.tensor.rank; d++)
      if (pt->u.tensor.dims[d].kind != NIMBLE_DIM_CONST) return NULL;
  }
  for (size_t k = 0; k < n_outputs; k++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/test_data_set_0/output_%zu.pb", case_dir, k);
    int64_t dims[64];
    size_t rank;
    int dtype;
    if (import_test_tensor_dims(path, dims, 64, &rank, &dtype) != 0) return NULL;
    const nimble_type *ty = import_test_main_output(t, k);
    if (n_outputs == 1) ty = import_test_main_output(t, 0);
    if (!ty || ty->kind != NIMBLE_TYPE_TENSOR) {
      snprintf(msg, sizeof msg, "output %zu: not a tensor type", k);
      return msg;
    }
    char buf[256];
    nimble_type_format(ty, buf, sizeof buf);
    if (ty->u.tensor.rank != rank) {
      snprintf(msg, sizeof msg, "output %zu: inferred %s, expected rank %zu", k, buf, rank);
      return msg;
    }
    for (size_t d = 0; d < rank; d++) {
      nimble_dim_t dim = ty->u.tensor.dims[d];
      if (dim.kind == NIMBLE_DIM_CONST && dim.value != dims[d]) {
        snprintf(msg, sizeof msg, "output %zu: inferred %s, expected dim %zu = %lld", k, buf, d, (long long)dims[d]);
        return msg;
      }
    }
  }
  *checked = true;
  return NULL;
}

static void clean(char *s) {
  for (; *s; s++)
    if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

START_TEST(test_node_suite_coverage_stays_above_the_committed_floor) {
  const char *root = getenv("NIMBLE_ONNX_NODE_TESTS");
  ck_assert_msg(root && root[0], "NIMBLE_ONNX_NODE_TESTS is not set");
  DIR *d = opendir(root);
  ck_assert_msg(d != NULL, "cannot open %s", root);
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5) != 0) continue;
    if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 1024) * sizeof(*names));
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(*names), compare_names);
  const char *out_path = getenv("NIMBLE_ONNX_COVERAGE_OUT");
  FILE *out = out_path ? fopen(out_path, "w") : NULL;
  if (out) {
    fprintf(out, "#supported\t");
    for (size_t k = 0; nimble_onnx_import_supported_op(k); k++)
      fprintf(out, "%s%s", k ? "," : "", nimble_onnx_import_supported_op(k));
    fprintf(out, "\n");
  }
  size_t pass = 0, shape_checked = 0, shape_failed = 0;
  for (size_t i = 0; i < n; i++) {
    char dir[1024], path[1100], ops[512] = "", msg[600] = "";
    snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    nimble_onnx_model *model;
    nimble_status_t s = nimble_onnx_model_load_file(path, &model);
    bool ok = false;
    if (!s) {
      op_list(nimble_onnx_model_graph(model), ops, sizeof ops);
      nimble_arena *arena;
      NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
      nimble_module *m;
      nimble_typing *t;
      s = nimble_onnx_import_model(arena, model, NULL, &m);
      if (!s) s = nimble_typing_infer_module(m, &t);
      if (!s) {
        bool checked;
        const char *bad = check_shapes(dir, m, t, nimble_onnx_model_graph(model)->n_outputs, &checked);
        if (checked) shape_checked++;
        if (bad) {
          shape_failed++;
          snprintf(msg, sizeof msg, "shape check: %s", bad);
        } else {
          ok = true;
        }
      }
      nimble_arena_destroy(arena);
      nimble_onnx_model_destroy(model);
    }
    if (s) {
      snprintf(msg, sizeof msg, "%s", nimble_status_message(s));
      nimble_status_free(s);
    }
    if (ok) pass++;
    clean(msg);
    if (out) fprintf(out, "%s\t%s\t%s\t%s\n", names[i], ok ? "pass" : "fail", ops, msg);
    free(names[i]);
  }
  free(names);
  if (out) fclose(out);
  long floor_count = 0;
  const char *floor_path = getenv("NIMBLE_ONNX_COVERAGE_FLOOR");
  FILE *ff = floor_path ? fopen(floor_path, "r") : NULL;
  ck_assert_msg(ff != NULL, "cannot read the coverage floor (NIMBLE_ONNX_COVERAGE_FLOOR)");
  ck_assert_int_eq(fscanf(ff, "%ld", &floor_count), 1);
  fclose(ff);
  printf("ONNX node suite: %zu of %zu cases import and type-check (%zu shape-checked against expected outputs, "
         "%zu shape mismatches); floor %ld\n",
         pass, n, shape_checked, shape_failed, floor_count);
  ck_assert_msg(n > 0, "no cases under %s", root);
  ck_assert_msg((long)pass >= floor_count, "coverage dropped: %zu cases pass, the floor is %ld", pass, floor_count);
  ck_assert_msg(shape_failed == 0, "%zu cases infer output shapes that differ from the expected outputs", shape_failed);
}
END_TEST

START_TEST(test_tensor_dims_reader_reads_a_hand_encoded_tensor_proto) {
  /* dims: 2, 3 (unpacked), data_type 1, name "x", raw_data 4 bytes. */
  static const unsigned char bytes[] = {0x08, 0x02, 0x08, 0x03, 0x10, 0x01, 0x42, 0x01, 'x', 0x4a, 0x04, 1, 2, 3, 4};
  char path[1024];
  const char *tmp = getenv("NIMBLE_BUILD_DIR");
  snprintf(path, sizeof path, "%s/import_test_tensor.pb", tmp ? tmp : ".");
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fwrite(bytes, 1, sizeof bytes, f);
  fclose(f);
  int64_t dims[8];
  size_t rank;
  int dtype;
  ck_assert_int_eq(import_test_tensor_dims(path, dims, 8, &rank, &dtype), 0);
  ck_assert_uint_eq(rank, 2);
  ck_assert_int_eq(dims[0], 2);
  ck_assert_int_eq(dims[1], 3);
  ck_assert_int_eq(dtype, 1);
  /* Packed dims [4, 5] and a truncated length. */
  static const unsigned char packed[] = {0x0a, 0x02, 0x04, 0x05, 0x10, 0x07};
  f = fopen(path, "wb");
  fwrite(packed, 1, sizeof packed, f);
  fclose(f);
  ck_assert_int_eq(import_test_tensor_dims(path, dims, 8, &rank, &dtype), 0);
  ck_assert_uint_eq(rank, 2);
  ck_assert_int_eq(dims[1], 5);
  ck_assert_int_eq(dtype, 7);
  static const unsigned char bad[] = {0x0a, 0x09, 0x04};
  f = fopen(path, "wb");
  fwrite(bad, 1, sizeof bad, f);
  fclose(f);
  ck_assert_int_eq(import_test_tensor_dims(path, dims, 8, &rank, &dtype), -1);
  remove(path);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_node_suite");
  TCase *tc = tcase_create("coverage");
  tcase_set_timeout(tc, 500);
  tcase_add_test(tc, test_tensor_dims_reader_reads_a_hand_encoded_tensor_proto);
  tcase_add_test(tc, test_node_suite_coverage_stays_above_the_committed_floor);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
