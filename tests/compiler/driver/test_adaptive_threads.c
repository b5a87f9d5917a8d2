/* Threads by measurement (docs/vm.md, "Threads by measurement") never change a result:
 * reference models compiled for x86, run by a VM of two threads for 30
 * invokes once its pool has settled (the probe's pool, alone and mixed
 * blocks and the mode it keeps), every output element equal to what a VM
 * of one thread gives, and that within the model's tolerance of PyTorch. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "driver_test_util.h"
#include "nimble_test.h"
#include "nimble/tensor_io.h"

static nimble_vm *vm_of(nimble_executable *exe, uint32_t threads) {
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.num_threads = threads;
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &o, &vm));
  return vm;
}

/* Invokes main on the case's inputs; output 0, taken. */
static DLManagedTensor *run_case(nimble_vm *vm, const dt_ref_case_t *c, nimble_tensor_file_t *ins) {
  for (size_t i = 0; i < c->num_inputs; i++)
    NIMBLE_ASSERT_OK(nimble_vm_set_input_by_name(vm, "main", c->input_names[i], &ins[i].tensor));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *o = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  return o;
}

static void check_model(const char *name) {
  char rel[64];
  snprintf(rel, sizeof rel, "%s.onnx", name);
  char *path = dt_models_path(rel);
  nimble_executable *exe = NULL;
  nimble_status_t s = dt_compile_and_load(path, "x86", &exe);
  free(path);
  ck_assert_msg(s == NULL, "%s: %s", name, s ? nimble_status_message(s) : "");
  dt_ref_model_t m;
  dt_ref_model_load(name, &m);
  const dt_ref_case_t *c = &m.cases[m.num_cases - 1]; /* the largest case */
  nimble_tensor_file_t *ins = calloc(c->num_inputs, sizeof *ins);
  for (size_t i = 0; i < c->num_inputs; i++) NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(c->input_paths[i], &ins[i]));
  nimble_tensor_file_t want;
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(c->output_paths[0], &want));

  nimble_vm *one = vm_of(exe, 1);
  DLManagedTensor *ref = run_case(one, c, ins);
  dt_compare(name, c->id, c->output_names[0], &ref->dl_tensor, &want.tensor, m.rtol, m.atol);
  nimble_vm_destroy(one);

  nimble_vm *two = vm_of(exe, 2);
  struct timespec settle = {0, 60 * 1000000L};
  nanosleep(&settle, NULL);
  for (int r = 0; r < 30; r++) {
    DLManagedTensor *got = run_case(two, c, ins);
    /* Tolerance 0: every element equal to the 1-thread run's. */
    char what[96];
    snprintf(what, sizeof what, "%s at 2 threads (invoke %d) against 1 thread", name, r);
    dt_compare(what, c->id, c->output_names[0], &got->dl_tensor, &ref->dl_tensor, 0.0, 0.0);
    got->deleter(got);
  }
  ck_assert_msg(nimble_vm_threads_settled(two), "%s: the probe had not ended after 30 invokes", name);
  nimble_vm_destroy(two);
  ref->deleter(ref);
  nimble_tensor_file_deinit(&want);
  for (size_t i = 0; i < c->num_inputs; i++) nimble_tensor_file_deinit(&ins[i]);
  free(ins);
  dt_ref_model_deinit(&m);
  nimble_executable_release(exe);
}

START_TEST(test_cnn_gives_the_same_bits_in_every_mode) { check_model("cnn"); }
END_TEST

START_TEST(test_bert_tiny_gives_the_same_bits_in_every_mode) { check_model("bert_tiny"); }
END_TEST

START_TEST(test_lstm_gives_the_same_bits_in_every_mode) { check_model("lstm"); }
END_TEST

int main(void) {
  Suite *s = suite_create("adaptive_threads");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_cnn_gives_the_same_bits_in_every_mode);
  tcase_add_test(tc, test_bert_tiny_gives_the_same_bits_in_every_mode);
  tcase_add_test(tc, test_lstm_gives_the_same_bits_in_every_mode);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
