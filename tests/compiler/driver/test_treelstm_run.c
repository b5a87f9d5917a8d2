/* The Tree-LSTM program (examples/treelstm.nir) end to end: compiled for
 * x86, its entry fed ADT trees through the runtime's value API
 * (nimble/runtime.h, "ADT inputs") and through nimble-run's JSON tree
 * files, and the root h and c compared with PyTorch's for the 20 reference
 * trees (treelstm.json and the .npy files of treelstm/ in the models folder, written by
 * scripts/gen_reference_models.py). Also: malformed values are refused
 * with errors that name the place. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver_test_util.h"
#include "nimble/tensor_io.h"
#include "nimble_test.h"

#define NUM_WEIGHTS 5
static const char *const kInputs[NUM_WEIGHTS] = {"emb", "leaf_w", "leaf_b", "node_w", "node_b"};
static const char *const kFiles[NUM_WEIGHTS] = {"emb.weight", "leaf.weight", "leaf.bias", "node.weight", "node.bias"};

typedef struct fixture {
  nimble_executable *exe;
  const nimble_entry_info_t *entry;
  nimble_tensor_file_t weights[NUM_WEIGHTS];
  nimble_tensor_file_t root_h, root_c;
  json_t *meta;
  double rtol, atol;
  int32_t leaf, node;
} fixture;

static fixture F;

static char *source_path(const char *rel) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_msg(src && *src, "NIMBLE_SOURCE_DIR is not set");
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", src, rel), 0);
  return p;
}

static void read_npy(const char *rel, nimble_tensor_file_t *out) {
  char *path = dt_models_path(rel);
  nimble_status_t s = nimble_tensor_io_read_npy(path, out);
  ck_assert_msg(s == NULL, "%s: %s", path, s ? nimble_status_message(s) : "");
  free(path);
}

static void setup(void) {
  memset(&F, 0, sizeof F);
  char *nir = source_path("examples/treelstm.nir");
  nimble_status_t s = dt_compile_and_load(nir, "x86", &F.exe);
  ck_assert_msg(s == NULL, "compiling %s: %s", nir, s ? nimble_status_message(s) : "");
  free(nir);
  s = nimble_executable_find_entry(F.exe, "main", &F.entry);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  for (int i = 0; i < NUM_WEIGHTS; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "treelstm/%s.npy", kFiles[i]);
    read_npy(rel, &F.weights[i]);
  }
  read_npy("treelstm/root_h.npy", &F.root_h);
  read_npy("treelstm/root_c.npy", &F.root_c);
  char *path = dt_models_path("treelstm.json");
  json_error_t err;
  F.meta = json_load_file(path, 0, &err);
  ck_assert_msg(F.meta, "%s: %s", path, err.text);
  free(path);
  F.rtol = json_real_value(json_object_get(json_object_get(F.meta, "tolerance"), "rtol"));
  F.atol = json_real_value(json_object_get(json_object_get(F.meta, "tolerance"), "atol"));
  ck_assert_msg(F.rtol > 0 && F.atol > 0, "treelstm.json has no tolerance");
  uint32_t nf = 0;
  s = nimble_entry_find_constructor(F.entry, 0, "Leaf", &F.leaf, &nf);
  ck_assert_msg(s == NULL && nf == 1, "Leaf: %s", s ? nimble_status_message(s) : "field count");
  s = nimble_entry_find_constructor(F.entry, 0, "Tree.Node", &F.node, &nf);
  ck_assert_msg(s == NULL && nf == 2, "Node: %s", s ? nimble_status_message(s) : "field count");
}

static void teardown(void) {
  for (int i = 0; i < NUM_WEIGHTS; i++) nimble_tensor_file_deinit(&F.weights[i]);
  nimble_tensor_file_deinit(&F.root_h);
  nimble_tensor_file_deinit(&F.root_c);
  json_decref(F.meta);
  nimble_executable_release(F.exe);
}

static nimble_value *word_leaf(int64_t word) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = &word;
  t.device.device_type = kDLCPU;
  t.dtype = (DLDataType){kDLInt, 64, 1};
  nimble_value *w = NULL, *leaf = NULL;
  nimble_status_t s = nimble_value_from_tensor(&t, &w);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  s = nimble_value_adt(F.leaf, &w, 1, &leaf);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  nimble_value_release(w);
  return leaf;
}

static nimble_value *node_of(nimble_value *l, nimble_value *r) {
  nimble_value *kids[2] = {l, r}, *n = NULL;
  nimble_status_t s = nimble_value_adt(F.node, kids, 2, &n);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  return n;
}

/* The reference's nested lists: a word id is a leaf, [left, right] a node. */
static nimble_value *build_tree(const json_t *t) {
  if (json_is_integer(t)) return word_leaf(json_integer_value(t));
  ck_assert_msg(json_is_array(t) && json_array_size(t) == 2, "treelstm.json: a tree node is not [left, right]");
  nimble_value *l = build_tree(json_array_get(t, 0)), *r = build_tree(json_array_get(t, 1));
  nimble_value *n = node_of(l, r);
  nimble_value_release(l);
  nimble_value_release(r);
  return n;
}

static void set_weights(nimble_vm *vm) {
  for (int i = 0; i < NUM_WEIGHTS; i++) {
    nimble_status_t s = nimble_vm_set_input_by_name(vm, "main", kInputs[i], &F.weights[i].tensor);
    ck_assert_msg(s == NULL, "%s: %s", kInputs[i], s ? nimble_status_message(s) : "");
  }
}

/* Row `i` of a [20, 128] reference as a [128] tensor. */
static DLTensor ref_row(const nimble_tensor_file_t *f, int64_t i, int64_t *shape) {
  DLTensor t = f->tensor;
  shape[0] = t.shape[1];
  t.ndim = 1;
  t.shape = shape;
  t.byte_offset += (uint64_t)(i * shape[0]) * sizeof(float);
  return t;
}

/* Runs `tree` and compares the root (h, c) with reference row `row`. */
static void run_and_check(nimble_vm *vm, nimble_value *tree, int row, const char *what) {
  set_weights(vm);
  nimble_status_t s = nimble_vm_set_input_value(vm, "main", 0, tree);
  ck_assert_msg(s == NULL, "%s: %s", what, s ? nimble_status_message(s) : "");
  s = nimble_vm_invoke(vm, "main");
  ck_assert_msg(s == NULL, "%s: %s", what, s ? nimble_status_message(s) : "");
  ck_assert_uint_eq(nimble_vm_num_outputs(vm), 2);
  const nimble_tensor_file_t *refs[2] = {&F.root_h, &F.root_c};
  for (uint32_t o = 0; o < 2; o++) {
    DLManagedTensor *got = NULL;
    s = nimble_vm_take_output(vm, o, &got);
    ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
    int64_t shape[1];
    DLTensor want = ref_row(refs[o], row, shape);
    dt_compare("treelstm", row, o ? "root_c" : "root_h", &got->dl_tensor, &want, F.rtol, F.atol);
    got->deleter(got);
  }
}

START_TEST(test_every_reference_tree_gives_pytorchs_root_h_and_c) {
  const json_t *trees = json_object_get(F.meta, "trees");
  ck_assert_msg(json_array_size(trees) == 20, "treelstm.json has %zu trees, expected 20", json_array_size(trees));
  ck_assert_int_eq(F.root_h.tensor.shape[0], 20);
  nimble_vm *vm = NULL;
  nimble_status_t s = nimble_vm_create(F.exe, NULL, &vm);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  for (int i = 0; i < 20; i++) {
    nimble_value *tree = build_tree(json_array_get(trees, (size_t)i));
    char what[32];
    snprintf(what, sizeof what, "tree %d", i);
    run_and_check(vm, tree, i, what);
    /* The same value again: inputs are used once, values are not consumed. */
    run_and_check(vm, tree, i, what);
    nimble_value_release(tree);
  }
  nimble_vm_destroy(vm);
}
END_TEST

/* A value may share a subtree: Node(x, x) is the tree [w, w]. */
START_TEST(test_a_shared_subtree_is_the_same_as_two_copies) {
  nimble_vm *vm = NULL;
  ck_assert_ptr_null(nimble_vm_create(F.exe, NULL, &vm));
  nimble_value *x = word_leaf(42), *y = word_leaf(42);
  nimble_value *shared = node_of(x, x), *copies = node_of(x, y);
  nimble_value *trees[2] = {shared, copies};
  DLManagedTensor *got[2][2];
  for (int t = 0; t < 2; t++) {
    set_weights(vm);
    ck_assert_ptr_null(nimble_vm_set_input_value(vm, "main", 0, trees[t]));
    nimble_status_t s = nimble_vm_invoke(vm, "main");
    ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
    for (uint32_t o = 0; o < 2; o++) ck_assert_ptr_null(nimble_vm_take_output(vm, o, &got[t][o]));
  }
  for (uint32_t o = 0; o < 2; o++)
    ck_assert_int_eq(memcmp(got[0][o]->dl_tensor.data, got[1][o]->dl_tensor.data, 128 * sizeof(float)), 0);
  for (int t = 0; t < 2; t++)
    for (uint32_t o = 0; o < 2; o++) got[t][o]->deleter(got[t][o]);
  nimble_value_release(shared);
  nimble_value_release(copies);
  nimble_value_release(x);
  nimble_value_release(y);
  nimble_vm_destroy(vm);
}
END_TEST

static void expect_set_error(nimble_vm *vm, nimble_value *v, const char *needle) {
  nimble_status_t s = nimble_vm_set_input_value(vm, "main", 0, v);
  ck_assert_msg(s != NULL, "a bad value was accepted (expected: %s)", needle);
  ck_assert_msg(nimble_status_code(s) == NIMBLE_INVALID_ARGUMENT, "code %d: %s", nimble_status_code(s),
                nimble_status_message(s));
  ck_assert_msg(strstr(nimble_status_message(s), needle), "message '%s' lacks '%s'", nimble_status_message(s),
                needle);
  nimble_status_free(s);
}


START_TEST(test_malformed_trees_are_refused_with_the_place_named) {
  nimble_vm *vm = NULL;
  ck_assert_ptr_null(nimble_vm_create(F.exe, NULL, &vm));
  nimble_value *good = word_leaf(1);
  /* A tensor where the tree is expected. */
  int64_t word = 3;
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = &word;
  t.device.device_type = kDLCPU;
  t.dtype = (DLDataType){kDLInt, 64, 1};
  nimble_value *scalar = NULL;
  ck_assert_ptr_null(nimble_value_from_tensor(&t, &scalar));
  expect_set_error(vm, scalar, "input 'tree' (the root): a tensor where a Tree was expected");
  /* Node with one field, deep inside: the path names it. */
  nimble_value *one = NULL, *bad = NULL;
  ck_assert_ptr_null(nimble_value_adt(F.node, &good, 1, &one));
  nimble_value *inner = node_of(good, one), *root = node_of(good, inner);
  expect_set_error(vm, root, "at .1.1: constructor Node has 2 fields, the value 1");
  nimble_value_release(inner);
  nimble_value_release(root);
  /* A tag the type does not have. */
  ck_assert_ptr_null(nimble_value_adt(7, &good, 1, &bad));
  expect_set_error(vm, bad, "tag 7 is not a constructor of Tree (it has 2)");
  nimble_value_release(bad);
  /* A float word, and a word of rank 1. */
  float fword = 3.0f;
  DLTensor ft = t;
  ft.data = &fword;
  ft.dtype = (DLDataType){kDLFloat, 32, 1};
  nimble_value *fv = NULL;
  ck_assert_ptr_null(nimble_value_from_tensor(&ft, &fv));
  ck_assert_ptr_null(nimble_value_adt(F.leaf, &fv, 1, &bad));
  expect_set_error(vm, bad, "field 0 of Leaf is a float32 tensor of shape [] on cpu, expected int64 []");
  nimble_value_release(bad);
  nimble_value_release(fv);
  int64_t shape1[1] = {1};
  DLTensor vt = t;
  vt.ndim = 1;
  vt.shape = shape1;
  nimble_value *vv = NULL;
  ck_assert_ptr_null(nimble_value_from_tensor(&vt, &vv));
  ck_assert_ptr_null(nimble_value_adt(F.leaf, &vv, 1, &bad));
  expect_set_error(vm, bad, "shape [1]");
  nimble_value_release(bad);
  nimble_value_release(vv);
  /* A tree where the word is expected. */
  ck_assert_ptr_null(nimble_value_adt(F.leaf, &good, 1, &bad));
  expect_set_error(vm, bad, "field 0 of Leaf is an ADT, expected a int64 tensor");
  nimble_value_release(bad);
  /* The tensor API on the ADT input, and a tree on a tensor input. */
  nimble_status_t s = nimble_vm_set_input(vm, "main", 0, &t);
  ck_assert_msg(s && strstr(nimble_status_message(s), "input 'tree' is an ADT; set it with nimble_vm_set_input_value"),
                "%s", s ? nimble_status_message(s) : "accepted");
  nimble_status_free(s);
  s = nimble_vm_set_input_value(vm, "main", 1, good);
  ck_assert_msg(s && strstr(nimble_status_message(s), "input 'emb' is a tensor, the value an ADT"), "%s",
                s ? nimble_status_message(s) : "accepted");
  nimble_status_free(s);
  /* Constructor lookups. */
  s = nimble_entry_find_constructor(F.entry, 0, "Branch", NULL, NULL);
  ck_assert_msg(s && nimble_status_code(s) == NIMBLE_NOT_FOUND &&
                    strstr(nimble_status_message(s), "input 'tree' has no constructor 'Branch'"),
                "%s", s ? nimble_status_message(s) : "found");
  nimble_status_free(s);
  s = nimble_entry_find_constructor(F.entry, 1, "Leaf", NULL, NULL);
  ck_assert_msg(s && strstr(nimble_status_message(s), "input 'emb' is a tensor, not an ADT"), "%s",
                s ? nimble_status_message(s) : "found");
  nimble_status_free(s);
  nimble_adt_field_t fd;
  ck_assert_ptr_null(nimble_entry_constructor_field(F.entry, 0, "Leaf", 0, &fd));
  ck_assert_int_eq(fd.is_adt, 0);
  ck_assert_int_eq(fd.dtype.code, kDLInt);
  ck_assert_int_eq(fd.dtype.bits, 64);
  ck_assert_int_eq(fd.ndim, 0);
  ck_assert_ptr_null(nimble_entry_constructor_field(F.entry, 0, "Node", 1, &fd));
  ck_assert_int_eq(fd.is_adt, 1);
  ck_assert_int_eq((int)fd.adt_type_len, 4);
  ck_assert_int_eq(memcmp(fd.adt_type, "Tree", 4), 0);
  /* After all that, a reference tree still runs. */
  nimble_value *tree0 = build_tree(json_array_get(json_object_get(F.meta, "trees"), 0));
  run_and_check(vm, tree0, 0, "tree 0 after the errors");
  nimble_value_release(tree0);
  nimble_value_release(good);
  nimble_value_release(scalar);
  nimble_value_release(one);
  nimble_vm_destroy(vm);
}
END_TEST

/* ---- nimble-run on JSON trees ---- */

/* {"Node": [..., ...]} / {"Leaf": w} from the reference's nested lists. */
static void write_tree_json(FILE *f, const json_t *t) {
  if (json_is_integer(t)) {
    fprintf(f, "{\"Leaf\": %lld}", (long long)json_integer_value(t));
    return;
  }
  fputs("{\"Node\": [", f);
  write_tree_json(f, json_array_get(t, 0));
  fputs(", ", f);
  write_tree_json(f, json_array_get(t, 1));
  fputs("]}", f);
}

static int run_cmd(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_nimble_run_reads_trees_from_json_files) {
  char tmp[] = "/tmp/nimble-treelstm-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  /* Compile to a file with the nimble command, as a user would. */
  const char *build = getenv("NIMBLE_BUILD_DIR");
  ck_assert_ptr_nonnull(build);
  char *nir = source_path("examples/treelstm.nir");
  char *models = dt_models_path("treelstm");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s/client/nimble' compile '%s' --target=x86 -o '%s/t.nimble' 2>'%s/err'", build, nir,
           tmp, tmp);
  ck_assert_msg(run_cmd(cmd) == 0, "%s failed", cmd);
  const json_t *trees = json_object_get(F.meta, "trees");
  /* A few trees of the reference set, the smallest and the largest. */
  const int picks[3] = {0, 1, 19};
  for (int k = 0; k < 3; k++) {
    int i = picks[k];
    char path[512];
    snprintf(path, sizeof path, "%s/tree%d.json", tmp, i);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    write_tree_json(f, json_array_get(trees, (size_t)i));
    fputc('\n', f);
    fclose(f);
    int n = snprintf(cmd, sizeof cmd,
                     "'%s/runtime/tools/nimble-run' '%s/t.nimble' --input tree='%s' --output-dir '%s' >'%s/out' "
                     "2>'%s/err'",
                     build, tmp, path, tmp, tmp, tmp);
    for (int w = 0; w < NUM_WEIGHTS; w++)
      n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --input %s='%s/%s.npy'", kInputs[w], models, kFiles[w]);
    ck_assert_msg(run_cmd(cmd) == 0, "tree %d: %s failed (see %s/err)", i, cmd, tmp);
    /* A .nir program's outputs have no names: the compiler calls them
     * output0, output1. */
    const nimble_tensor_file_t *refs[2] = {&F.root_h, &F.root_c};
    for (int o = 0; o < 2; o++) {
      char out[600];
      snprintf(out, sizeof out, "%s/output%d.npy", tmp, o);
      nimble_tensor_file_t got;
      nimble_status_t s = nimble_tensor_io_read_npy(out, &got);
      ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
      int64_t shape[1];
      DLTensor want = ref_row(refs[o], i, shape);
      dt_compare("treelstm (nimble-run)", i, o ? "root_c" : "root_h", &got.tensor, &want, F.rtol, F.atol);
      nimble_tensor_file_deinit(&got);
    }
  }
  /* A bad tree: exit status 1 and the place named. */
  char bad[512];
  snprintf(bad, sizeof bad, "%s/bad.json", tmp);
  FILE *f = fopen(bad, "w");
  ck_assert_ptr_nonnull(f);
  fputs("{\"Node\": [{\"Leaf\": 3}, {\"Twig\": 4}]}", f);
  fclose(f);
  int n = snprintf(cmd, sizeof cmd, "'%s/runtime/tools/nimble-run' '%s/t.nimble' --input tree='%s' --output-dir '%s' "
                   ">/dev/null 2>'%s/err'", build, tmp, bad, tmp, tmp);
  for (int w = 0; w < NUM_WEIGHTS; w++)
    n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --input %s='%s/%s.npy'", kInputs[w], models, kFiles[w]);
  ck_assert_int_eq(run_cmd(cmd), 1);
  char errpath[600], msg[1024] = "";
  snprintf(errpath, sizeof errpath, "%s/err", tmp);
  f = fopen(errpath, "r");
  ck_assert_ptr_nonnull(f);
  size_t got = fread(msg, 1, sizeof msg - 1, f);
  msg[got] = '\0';
  fclose(f);
  ck_assert_msg(strstr(msg, "bad.json at offset 23: 'Twig' is not a constructor of Tree"), "stderr: %s", msg);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  ck_assert_int_eq(run_cmd(cmd), 0);
  free(nir);
  free(models);
}
END_TEST

/* ---- an entry over two ADT types ---- */

static nimble_value *vec2(float a, float b) {
  float data[2] = {a, b};
  int64_t shape[1] = {2};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.shape = shape;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  nimble_value *v = NULL;
  ck_assert_ptr_null(nimble_value_from_tensor(&t, &v));
  return v;
}

static int32_t tag_of(const nimble_entry_info_t *e, const char *name, uint32_t want_fields) {
  int32_t tag = -1;
  uint32_t nf = 0;
  nimble_status_t s = nimble_entry_find_constructor(e, 0, name, &tag, &nf);
  ck_assert_msg(s == NULL, "%s: %s", name, s ? nimble_status_message(s) : "");
  ck_assert_uint_eq(nf, want_fields);
  return tag;
}

static nimble_value *adt(int32_t tag, nimble_value *a, nimble_value *b) {
  nimble_value *fields[2] = {a, b}, *v = NULL;
  uint32_t n = b ? 2 : a ? 1 : 0;
  ck_assert_ptr_null(nimble_value_adt(tag, fields, n, &v));
  nimble_value_release(a);
  nimble_value_release(b);
  return v;
}

/* forest_sum.nir: (sum of every leaf of every tree) * scale, by hand:
 * More(Node(Leaf(1, 2), Leaf(3, 4.5)), More(Leaf(-1, 0.25), Done)), scale 2
 * gives (6, 13.5), exactly in float32. */
START_TEST(test_an_entry_over_two_adt_types_runs_from_values_and_json) {
  char *nir = source_path("tests/compiler/driver/programs/forest_sum.nir");
  nimble_executable *exe = NULL;
  nimble_status_t s = dt_compile_and_load(nir, "x86", &exe);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  const nimble_entry_info_t *e = NULL;
  ck_assert_ptr_null(nimble_executable_find_entry(exe, "main", &e));
  ck_assert(nimble_tensor_info_is_adt(&e->inputs[0]));
  ck_assert_str_eq(e->inputs[0].dims[0].symbol, "Forest");
  int32_t more = tag_of(e, "More", 2), done = tag_of(e, "Forest.Done", 0);
  int32_t leaf = tag_of(e, "Tree.Leaf", 1), node = tag_of(e, "Node", 2);
  ck_assert_int_eq(more, 0);
  ck_assert_int_eq(done, 1);
  ck_assert_int_eq(leaf, 0);
  ck_assert_int_eq(node, 1);
  nimble_value *tree = adt(node, adt(leaf, vec2(1, 2), NULL), adt(leaf, vec2(3, 4.5f), NULL));
  nimble_value *forest = adt(more, tree, adt(more, adt(leaf, vec2(-1, 0.25f), NULL), adt(done, NULL, NULL)));
  float scale = 2;
  DLTensor st;
  memset(&st, 0, sizeof st);
  st.data = &scale;
  st.device.device_type = kDLCPU;
  st.dtype = (DLDataType){kDLFloat, 32, 1};
  nimble_vm *vm = NULL;
  ck_assert_ptr_null(nimble_vm_create(exe, NULL, &vm));
  ck_assert_ptr_null(nimble_vm_set_input_value(vm, "main", 0, forest));
  ck_assert_ptr_null(nimble_vm_set_input(vm, "main", 1, &st));
  s = nimble_vm_invoke(vm, "main");
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  DLManagedTensor *out = NULL;
  ck_assert_ptr_null(nimble_vm_take_output(vm, 0, &out));
  const float *y = out->dl_tensor.data;
  ck_assert_msg(y[0] == 6.0f && y[1] == 13.5f, "got (%g, %g), expected (6, 13.5)", y[0], y[1]);
  out->deleter(out);
  /* A tree where the forest is expected: Leaf has tag 0 like More, one field. */
  nimble_value *lone = adt(leaf, vec2(1, 1), NULL);
  expect_set_error(vm, lone, "(the root): constructor More has 2 fields, the value 1");
  nimble_value_release(lone);
  /* A leaf of 3 floats, at forest .1 -> tree .0. */
  float three[3] = {1, 2, 3};
  int64_t shape3[1] = {3};
  DLTensor t3 = st;
  t3.data = three;
  t3.ndim = 1;
  t3.shape = shape3;
  nimble_value *v3 = NULL;
  ck_assert_ptr_null(nimble_value_from_tensor(&t3, &v3));
  nimble_value *bad = adt(more, adt(leaf, vec2(0, 0), NULL), adt(more, adt(leaf, v3, NULL), adt(done, NULL, NULL)));
  expect_set_error(vm, bad, "at .1.0.0: field 0 of Leaf is a float32 tensor of shape [3] on cpu, expected float32 [2]");
  nimble_value_release(bad);
  nimble_value_release(forest);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);

  /* The same forest through nimble-run. */
  char tmp[] = "/tmp/nimble-forest-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmp));
  const char *build = getenv("NIMBLE_BUILD_DIR");
  ck_assert_ptr_nonnull(build);
  char cmd[4096], path[600];
  snprintf(cmd, sizeof cmd, "'%s/client/nimble' compile '%s' --target=x86 -o '%s/f.nimble'", build, nir, tmp);
  ck_assert_msg(run_cmd(cmd) == 0, "%s failed", cmd);
  snprintf(path, sizeof path, "%s/forest.json", tmp);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("{\"More\": [{\"Node\": [{\"Leaf\": [1, 2]}, {\"Leaf\": [3, 4.5]}]},\n"
        "           {\"More\": [{\"Leaf\": [-1, 0.25]}, \"Done\"]}]}\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/scale.npy", tmp);
  int64_t no_dims[1] = {0};
  st.shape = no_dims;
  ck_assert_ptr_null(nimble_tensor_io_write_npy(path, &st));
  snprintf(cmd, sizeof cmd,
           "'%s/runtime/tools/nimble-run' '%s/f.nimble' --input forest='%s/forest.json' --input scale='%s' "
           "--output-dir '%s' >/dev/null",
           build, tmp, tmp, path, tmp);
  ck_assert_msg(run_cmd(cmd) == 0, "%s failed", cmd);
  snprintf(path, sizeof path, "%s/output0.npy", tmp);
  nimble_tensor_file_t got;
  s = nimble_tensor_io_read_npy(path, &got);
  ck_assert_msg(s == NULL, "%s", s ? nimble_status_message(s) : "");
  y = got.tensor.data;
  ck_assert_msg(y[0] == 6.0f && y[1] == 13.5f, "nimble-run: got (%g, %g), expected (6, 13.5)", y[0], y[1]);
  nimble_tensor_file_deinit(&got);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  ck_assert_int_eq(run_cmd(cmd), 0);
  free(nir);
}
END_TEST

/* What the executable cannot describe is refused at compile time. */
static void expect_compile_error(const char *text, const char *needle) {
  char path[] = "/tmp/nimble-adt-XXXXXX.nir";
  int fd = mkstemps(path, 4);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  nimble_executable *exe = NULL;
  nimble_status_t s = dt_compile_and_load(path, "x86", &exe);
  unlink(path);
  ck_assert_msg(s != NULL, "compiled; expected: %s", needle);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_UNIMPLEMENTED);
  ck_assert_msg(strstr(nimble_status_message(s), needle), "'%s' lacks '%s'", nimble_status_message(s), needle);
  nimble_status_free(s);
}

START_TEST(test_adt_inputs_the_executable_cannot_describe_are_refused) {
  expect_compile_error("type P { Pair((Tensor[(), float32], Tensor[(), float32])) }\n"
                       "def @main(%p: P, %y: Tensor[(), float32]) -> Tensor[(), float32] { %y }\n",
                       "input 'p': field 0 of constructor Pair is (Tensor[(), float32], Tensor[(), float32]); "
                       "fields of an ADT input are tensors or ADTs");
  expect_compile_error("type V { Vec(Tensor[(n,), float32]) }\n"
                       "def @main(%v: V, %y: Tensor[(), float32]) -> Tensor[(), float32] { %y }\n",
                       "a field of an ADT input may have constant and Any dims, not named ones");
}
END_TEST

int main(void) {
  Suite *s = suite_create("treelstm_run");
  TCase *tc = tcase_create("x86");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, setup, teardown); /* one compile for all */
  tcase_add_test(tc, test_every_reference_tree_gives_pytorchs_root_h_and_c);
  tcase_add_test(tc, test_a_shared_subtree_is_the_same_as_two_copies);
  tcase_add_test(tc, test_malformed_trees_are_refused_with_the_place_named);
  tcase_add_test(tc, test_nimble_run_reads_trees_from_json_files);
  tcase_add_test(tc, test_an_entry_over_two_adt_types_runs_from_values_and_json);
  tcase_add_test(tc, test_adt_inputs_the_executable_cannot_describe_are_refused);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
