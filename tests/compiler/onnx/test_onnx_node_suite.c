/* The ONNX backend node conformance suite (generated at test time by
 * scripts/gen_onnx_node_tests.py from Debian's python3-onnx): every case is
 * valid ONNX, so every model must load; the suite reports how many do and
 * lists any that do not. The test data sets' input/output TensorProtos are
 * checked too: each one's count matches the model's graph inputs/outputs. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

#include "nimble/onnx_model.h"

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

START_TEST(test_every_node_suite_case_loads) {
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

  size_t ok = 0, with_data = 0;
  char failures[8192] = "";
  size_t flen = 0;
  for (size_t i = 0; i < n; i++) {
    char path[1024], data_dir[1024];
    snprintf(path, sizeof(path), "%s/%s/model.onnx", root, names[i]);
    snprintf(data_dir, sizeof(data_dir), "%s/%s/test_data_set_0", root, names[i]);
    nimble_onnx_model *m;
    nimble_status_t s = nimble_onnx_model_load_file(path, &m);
    if (s) {
      fprintf(stderr, "FAIL %s\n", nimble_status_message(s));
      if (flen + 1 < sizeof(failures))
        flen += (size_t)snprintf(failures + flen, sizeof(failures) - flen, " %s", names[i]);
      nimble_status_free(s);
      continue;
    }
    ok++;
    const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
    ck_assert_uint_gt(g->n_nodes, 0);
    struct stat st;
    if (stat(data_dir, &st) == 0) {
      with_data++;
      /* Inputs with an initializer as default may be left out of the data. */
      size_t inputs = count_files(data_dir, "input_"), outputs = count_files(data_dir, "output_");
      ck_assert_msg(inputs <= g->n_inputs, "%s: %zu input files, %zu graph inputs", names[i],
                    inputs, g->n_inputs);
      ck_assert_msg(outputs == g->n_outputs, "%s: %zu output files, %zu graph outputs", names[i],
                    outputs, g->n_outputs);
    }
    nimble_onnx_model_destroy(m);
  }
  printf("ONNX node suite: %zu of %zu cases load cleanly (%zu with test data)\n", ok, n, with_data);
  /* Debian's python3-onnx 1.12 generates 922 cases. */
  ck_assert_uint_ge(n, 900);
  ck_assert_msg(ok == n, "%zu cases failed to load:%s", n - ok, failures);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_node_suite");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_every_node_suite_case_loads);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
