#include "driver_test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/tensor_io.h"
#include "nimble_test.h"
#include "nimble_test_kernel_cache.h"

nimble_compile_options_t dt_compile_options(const char *target) {
  nimble_compile_options_t o;
  nimble_compile_options_init(&o);
  o.target = target;
  o.kernel_cache = nimble_test_kernel_cache();
  return o;
}

nimble_status_t dt_compile_and_load(const char *path, const char *target, nimble_executable **exe) {
  *exe = NULL;
  nimble_compile_options_t o = dt_compile_options(target);
  nimble_compile_result *r = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_compile_file(path, &o, &r));
  void *image = NULL;
  size_t size = 0;
  nimble_status_t s = nimble_compile_result_serialize(r, &image, &size);
  nimble_compile_result_destroy(r);
  if (!s) s = nimble_executable_load_memory(image, size, 0, exe);
  free(image);
  return s;
}

char *dt_models_path(const char *rel) {
  const char *dir = getenv("NIMBLE_MODELS_DIR");
  ck_assert_msg(dir && *dir, "NIMBLE_MODELS_DIR is not set (the reference_models fixture sets it)");
  char *p = NULL;
  ck_assert_int_ge(asprintf(&p, "%s/%s", dir, rel), 0);
  return p;
}

static bool is_float(DLDataType t) { return t.code == kDLFloat && t.bits == 32; }

/* A failing run prints the executable's bytecode (nimble inspect's
 * disassembly) before the assertion, so the failure shows what ran. */
static void dump_bytecode(const nimble_executable *exe, const char *model) {
  char *text = NULL;
  nimble_status_t s = nimble_executable_disassemble(exe, &text);
  if (s) {
    fprintf(stderr, "%s: no disassembly: %s\n", model, nimble_status_message(s));
    nimble_status_free(s);
    return;
  }
  fprintf(stderr, "---- %s: the executable that ran ----\n%s---- end of %s ----\n", model, text, model);
  free(text);
}

/* The first difference between got and want, as a message; "" when equal. */
static void compare_into(char *why, size_t size, const char *model, int case_id, const char *out_name,
                         const DLTensor *got, const DLTensor *want, double rtol, double atol) {
  why[0] = '\0';
  if (got->ndim != want->ndim) {
    snprintf(why, size, "%s case %d output %s: rank %d, expected %d", model, case_id, out_name, got->ndim,
             want->ndim);
    return;
  }
  size_t n = 1;
  for (int d = 0; d < got->ndim; d++) {
    if (got->shape[d] != want->shape[d]) {
      snprintf(why, size, "%s case %d output %s: dim %d is %lld, expected %lld", model, case_id, out_name, d,
               (long long)got->shape[d], (long long)want->shape[d]);
      return;
    }
    n *= (size_t)want->shape[d];
  }
  if (got->dtype.code != want->dtype.code || got->dtype.bits != want->dtype.bits) {
    snprintf(why, size, "%s case %d output %s: dtype code %d/%d bits, expected %d/%d", model, case_id, out_name,
             got->dtype.code, got->dtype.bits, want->dtype.code, want->dtype.bits);
    return;
  }
  const char *g = (const char *)got->data + got->byte_offset;
  const char *w = (const char *)want->data + want->byte_offset;
  if (is_float(want->dtype)) {
    const float *gf = (const float *)g, *wf = (const float *)w;
    for (size_t i = 0; i < n; i++) {
      double diff = fabs((double)gf[i] - (double)wf[i]);
      if (!(diff <= atol + rtol * fabs((double)wf[i]) && !isnan(gf[i]))) {
        snprintf(why, size, "%s case %d output %s[%zu]: got %.9g, expected %.9g (|diff| %.3g > atol %g + rtol %g * |want|)",
                 model, case_id, out_name, i, gf[i], wf[i], diff, atol, rtol);
        return;
      }
    }
  } else {
    size_t es = (size_t)(want->dtype.bits / 8) * want->dtype.lanes;
    for (size_t i = 0; i < n; i++) {
      if (memcmp(g + i * es, w + i * es, es) != 0) {
        snprintf(why, size, "%s case %d output %s[%zu] differs (integer dtype)", model, case_id, out_name, i);
        return;
      }
    }
  }
}

void dt_compare(const char *model, int case_id, const char *out_name, const DLTensor *got,
                const DLTensor *want, double rtol, double atol) {
  char why[512];
  compare_into(why, sizeof why, model, case_id, out_name, got, want, rtol, atol);
  ck_assert_msg(why[0] == '\0', "%s", why);
}

int dt_run_reference_cases(nimble_executable *exe, const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "%s.json", name);
  char *json_path = dt_models_path(rel);
  json_error_t err;
  json_t *root = json_load_file(json_path, 0, &err);
  ck_assert_msg(root != NULL, "%s: %s", json_path, err.text);
  free(json_path);
  double rtol = json_number_value(json_object_get(json_object_get(root, "tolerance"), "rtol"));
  double atol = json_number_value(json_object_get(json_object_get(root, "tolerance"), "atol"));
  ck_assert_msg(rtol > 0 && atol > 0, "%s.json: no tolerance", name);
  json_t *outputs = json_object_get(root, "outputs");
  json_t *cases = json_object_get(root, "cases");
  ck_assert(json_is_array(outputs) && json_is_array(cases) && json_array_size(cases) > 0);

  nimble_vm_options_t vo;
  nimble_vm_options_init(&vo);
  vo.num_threads = 2;
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &vo, &vm));
  size_t ci;
  json_t *c;
  int ran = 0;
  json_array_foreach(cases, ci, c) {
    int case_id = (int)json_integer_value(json_object_get(c, "id"));
    json_t *ins = json_object_get(c, "inputs");
    size_t n_in = json_object_size(ins);
    nimble_tensor_file_t *in_files = calloc(n_in + 1, sizeof *in_files);
    ck_assert_ptr_nonnull(in_files);
    const char *key;
    json_t *val;
    size_t k = 0;
    json_object_foreach(ins, key, val) {
      char *p = dt_models_path(json_string_value(json_object_get(val, "file")));
      NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(p, &in_files[k]));
      free(p);
      NIMBLE_ASSERT_OK(nimble_vm_set_input_by_name(vm, "main", key, &in_files[k].tensor));
      k++;
    }
    nimble_status_t s = nimble_vm_invoke(vm, "main");
    if (s) dump_bytecode(exe, name);
    ck_assert_msg(s == NULL, "%s case %d (%s): %s", name, case_id,
                  json_string_value(json_object_get(c, "note")), s ? nimble_status_message(s) : "");
    ck_assert_uint_eq(nimble_vm_num_outputs(vm), json_array_size(outputs));
    json_t *outs = json_object_get(c, "outputs");
    for (size_t o = 0; o < json_array_size(outputs); o++) {
      const char *oname = json_string_value(json_object_get(json_array_get(outputs, o), "name"));
      char *p = dt_models_path(json_string_value(json_object_get(json_object_get(outs, oname), "file")));
      nimble_tensor_file_t want;
      NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(p, &want));
      free(p);
      DLManagedTensor *got = NULL;
      NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, (uint32_t)o, &got));
      char why[512];
      compare_into(why, sizeof why, name, case_id, oname, &got->dl_tensor, &want.tensor, rtol, atol);
      if (why[0]) dump_bytecode(exe, name);
      ck_assert_msg(why[0] == '\0', "%s", why);
      got->deleter(got);
      nimble_tensor_file_deinit(&want);
    }
    for (size_t i = 0; i < n_in; i++) nimble_tensor_file_deinit(&in_files[i]);
    free(in_files);
    ran++;
  }
  nimble_vm_destroy(vm);
  json_decref(root);
  return ran;
}

void dt_ref_model_load(const char *name, dt_ref_model_t *m) {
  memset(m, 0, sizeof *m);
  char rel[256];
  snprintf(rel, sizeof rel, "%s.json", name);
  char *json_path = dt_models_path(rel);
  json_error_t err;
  json_t *root = json_load_file(json_path, 0, &err);
  ck_assert_msg(root != NULL, "%s: %s", json_path, err.text);
  free(json_path);
  m->json_ = root;
  m->rtol = json_number_value(json_object_get(json_object_get(root, "tolerance"), "rtol"));
  m->atol = json_number_value(json_object_get(json_object_get(root, "tolerance"), "atol"));
  ck_assert_msg(m->rtol > 0 && m->atol > 0, "%s.json: no tolerance", name);
  json_t *outputs = json_object_get(root, "outputs");
  json_t *cases = json_object_get(root, "cases");
  ck_assert_msg(json_is_array(outputs) && json_array_size(outputs) > 0 && json_is_array(cases) &&
                    json_array_size(cases) > 0,
                "%s.json: no outputs or no cases", name);
  m->num_cases = json_array_size(cases);
  m->cases = calloc(m->num_cases, sizeof *m->cases);
  ck_assert_ptr_nonnull(m->cases);
  for (size_t ci = 0; ci < m->num_cases; ci++) {
    json_t *c = json_array_get(cases, ci);
    dt_ref_case_t *rc = &m->cases[ci];
    rc->id = (int)json_integer_value(json_object_get(c, "id"));
    rc->note = json_string_value(json_object_get(c, "note"));
    json_t *ins = json_object_get(c, "inputs");
    rc->num_inputs = json_object_size(ins);
    rc->input_names = calloc(rc->num_inputs + 1, sizeof *rc->input_names);
    rc->input_paths = calloc(rc->num_inputs + 1, sizeof *rc->input_paths);
    ck_assert(rc->input_names && rc->input_paths);
    const char *key;
    json_t *val;
    size_t k = 0;
    json_object_foreach(ins, key, val) {
      const char *file = json_string_value(json_object_get(val, "file"));
      ck_assert_msg(file != NULL, "%s.json case %d: input %s has no file", name, rc->id, key);
      rc->input_names[k] = key;
      rc->input_paths[k] = dt_models_path(file);
      k++;
    }
    json_t *outs = json_object_get(c, "outputs");
    rc->num_outputs = json_array_size(outputs);
    rc->output_names = calloc(rc->num_outputs, sizeof *rc->output_names);
    rc->output_paths = calloc(rc->num_outputs, sizeof *rc->output_paths);
    ck_assert(rc->output_names && rc->output_paths);
    for (size_t o = 0; o < rc->num_outputs; o++) {
      const char *oname = json_string_value(json_object_get(json_array_get(outputs, o), "name"));
      ck_assert_msg(oname != NULL, "%s.json: output %zu has no name", name, o);
      const char *file = json_string_value(json_object_get(json_object_get(outs, oname), "file"));
      ck_assert_msg(file != NULL, "%s.json case %d: output %s has no file", name, rc->id, oname);
      rc->output_names[o] = oname;
      rc->output_paths[o] = dt_models_path(file);
    }
  }
}

void dt_ref_model_deinit(dt_ref_model_t *m) {
  for (size_t ci = 0; ci < m->num_cases; ci++) {
    dt_ref_case_t *rc = &m->cases[ci];
    for (size_t k = 0; k < rc->num_inputs; k++) free(rc->input_paths[k]);
    for (size_t o = 0; o < rc->num_outputs; o++) free(rc->output_paths[o]);
    free(rc->input_names);
    free(rc->input_paths);
    free(rc->output_names);
    free(rc->output_paths);
  }
  free(m->cases);
  json_decref((json_t *)m->json_);
  memset(m, 0, sizeof *m);
}
