/* Every run-time error path gives a status with the right code and a
 * message naming the entry, function, input or kernel at fault, and leaves
 * the VM usable. */
#include <stdlib.h>
#include <string.h>

#include "rt_test_util.h"

static nimble_vm *make_vm(nimble_executable_builder *b, const nimble_vm_options_t *opt) {
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, opt, &vm));
  nimble_executable_release(exe);
  return vm;
}

START_TEST(test_fatal_stops_with_an_error_naming_the_function) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "unreachable_case", 0, 1);
  RT_EMIT0(b, f, NIMBLE_OP_FATAL);
  rt_add_scalar_entry(b, "main", f, 0);
  nimble_vm *vm = make_vm(b, NULL);
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "entry 'main': function 'unreachable_case' pc 0 (Fatal): the program reached a "
                      "Fatal instruction");
  ck_assert_uint_eq(nimble_vm_num_outputs(vm), 0);
  nimble_vm_destroy(vm);
}
END_TEST

/* main(x: f32[2, ?seq, 4], y: f32[?seq]) -> x */
static nimble_vm *make_shape_vm(void) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 2, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  int64_t dims[3] = {2, -1, 4};
  const char *sym[3] = {NULL, "seq", NULL};
  const char *sym1[1] = {"seq"};
  nimble_tensor_info_t in[2] = {rt_info("x", RT_F32, 3, dims, sym), rt_info("y", RT_F32, 1, NULL, sym1)};
  nimble_tensor_info_t out = rt_info("x_out", RT_F32, 3, dims, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  return make_vm(b, NULL);
}

START_TEST(test_a_bad_input_shape_names_the_entry_input_and_both_shapes) {
  nimble_vm *vm = make_shape_vm();
  float data[64] = {0};
  int64_t bad[2] = {2, 7};
  DLTensor t = rt_tensor(data, RT_F32, 2, bad);
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT,
                      "entry 'main': input 'x' has shape [2,7], expected [2,?seq,4]");
  int64_t bad3[3] = {3, 5, 4};
  t = rt_tensor(data, RT_F32, 3, bad3);
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT,
                      "entry 'main': input 'x' has shape [3,5,4], expected [2,?seq,4]");
  /* A symbolic dim must agree across inputs. */
  int64_t good[3] = {2, 5, 4}, ys[1] = {6};
  DLTensor tx = rt_tensor(data, RT_F32, 3, good), ty = rt_tensor(data, RT_F32, 1, ys);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &ty));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INVALID_ARGUMENT,
                      "entry 'main': input 'y' has shape [6], expected [?seq] with ?seq = 5 (from input 'x')");
  /* And the same VM then runs with agreeing shapes. */
  ys[0] = 5;
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &ty));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  ck_assert_uint_eq(nimble_vm_num_outputs(vm), 1);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_a_bad_input_dtype_device_or_layout_is_refused) {
  nimble_vm *vm = make_shape_vm();
  int64_t data[64] = {0};
  int64_t good[3] = {2, 5, 4};
  DLTensor t = rt_tensor(data, RT_I64, 3, good);
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT,
                      "input 'x' has dtype int64, expected float32");
  t = rt_tensor(data, RT_F32, 3, good);
  t.device.device_type = kDLCUDA;
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT,
                      "input 'x' is on cuda, expected cpu");
  t = rt_tensor(data, RT_F32, 3, good);
  int64_t strides[3] = {40, 8, 2};
  t.strides = strides;
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT, "is strided");
  t.strides = NULL;
  t.data = NULL;
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, &t), NIMBLE_INVALID_ARGUMENT, "has no data");
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 0, NULL), NIMBLE_INVALID_ARGUMENT, "is NULL");
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "main", 2, &t), NIMBLE_OUT_OF_RANGE, "has 2 inputs, no input 2");
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input(vm, "other", 0, &t), NIMBLE_NOT_FOUND, "no entry 'other'");
  NIMBLE_ASSERT_ERROR(nimble_vm_set_input_by_name(vm, "main", "z", &t), NIMBLE_NOT_FOUND,
                      "entry 'main' has no input 'z'");
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_FAILED_PRECONDITION,
                      "entry 'main': input 'x' (0) was not set");
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "nope"), NIMBLE_NOT_FOUND, "no entry 'nope'");
  DLManagedTensor *o;
  NIMBLE_ASSERT_ERROR(nimble_vm_take_output(vm, 0, &o), NIMBLE_OUT_OF_RANGE, "output 0 does not exist");
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_a_failing_kernel_reports_its_code_and_message) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "failing_kernel");
  uint32_t f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 0, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm *vm = make_vm(b, NULL);
  int64_t x = 1;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "entry 'main': function 'main' pc 0 (InvokePacked): kernel 'failing_kernel' "
                      "failed with code 7: the failing kernel failed on purpose");
  nimble_vm_destroy(vm);
}
END_TEST

/* A kernel output that is the caller's input memory (what a wrong
 * in-place update would produce) is refused before the kernel runs. */
START_TEST(test_an_entry_input_as_a_kernel_output_is_refused) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "add_i64");
  uint32_t f = rt_function(b, "main", 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 5);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm *vm = make_vm(b, NULL);
  int64_t x = 1;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INVALID_ARGUMENT,
                      "output 0 of kernel 'add_i64' is the caller's input memory");
  ck_assert_int_eq(x, 1);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_a_kernel_given_the_wrong_operands_fails_cleanly) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 0, 1); /* int64 operands */
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm *vm = make_vm(b, NULL);
  int64_t x = 1;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "kernel 'vadd_f32' failed with code 2: vadd_f32: operands must be float32");
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_going_over_the_memory_cap_names_the_request_and_the_cap) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 3);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 1, 0, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.memory_cap_bytes = 100 * 1024;
  nimble_vm *vm = make_vm(b, &opt);
  int64_t size = 64 * 1024;
  ck_assert_int_eq(rt_run_i64(vm, "main", &size, 1), 0);
  size = 1000000;
  DLTensor t = rt_tensor(&size, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_RESOURCE_EXHAUSTED,
                      "cpu pool: allocating 1000000 bytes (a 1048576-byte block) would exceed the "
                      "memory cap of 102400 bytes");
  /* A request that fits still works afterwards. */
  size = 1000;
  ck_assert_int_eq(rt_run_i64(vm, "main", &size, 1), 0);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  ck_assert_uint_le(st.peak_bytes_reserved, 100 * 1024);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_unbounded_recursion_hits_the_call_depth_limit) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "forever", 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 1, f, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.max_call_depth = 5000;
  nimble_vm *vm = make_vm(b, &opt);
  int64_t x = 1;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_RESOURCE_EXHAUSTED,
                      "calling 'forever' would exceed the call depth limit of 5000 frames");
  nimble_vm_destroy(vm);
}
END_TEST

/* One function per misuse of a register's contents. */
static void expect_runtime_error(void (*emit)(nimble_executable_builder *, uint32_t), nimble_status_code_t code,
                                 const char *fragment) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 6);
  emit(b, f);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm *vm = make_vm(b, NULL);
  int64_t x = 3;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), code, fragment);
  nimble_vm_destroy(vm);
}

static void emit_get_field_of_tensor(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_GET_FIELD, 1, 0, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
}
static void emit_field_out_of_range(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 1, 3, 0); /* one field: register 0 */
  RT_EMIT(b, f, NIMBLE_OP_GET_FIELD, 2, 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
}
static void emit_ret_of_empty_register(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_RET, 4);
}
static void emit_closure_arity_mismatch(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_CLOSURE, 1, f);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_CLOSURE, 2, 1, 0, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
}
static void emit_invoke_closure_on_tensor(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_CLOSURE, 2, 0, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
}
static void emit_tensor_past_its_storage(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 16);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 8);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 4, 2, 3, kDLFloat, 32, 1, 4);
  RT_EMIT(b, f, NIMBLE_OP_RET, 4);
}
static void emit_if_on_an_adt(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_IF, 1, 0, 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
}
static void emit_bad_reshape(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 1, 0);       /* [] of rank 0 -> shape tensor [0] */
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 2, 5);
  RT_EMIT(b, f, NIMBLE_OP_RESHAPE_TENSOR, 3, 0, 2); /* a scalar is no shape */
  RT_EMIT(b, f, NIMBLE_OP_RET, 3);
}
static void emit_negative_storage(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, -5);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
}
static void emit_cuda_storage(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 16);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCUDA, 1, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
}
static void emit_wrong_output_kind(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_ADT, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
}
static void emit_wrong_output_shape(nimble_executable_builder *b, uint32_t f) {
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 1, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
}

START_TEST(test_misused_registers_give_errors_naming_the_instruction) {
  expect_runtime_error(emit_get_field_of_tensor, NIMBLE_INVALID_ARGUMENT,
                       "function 'main' pc 0 (GetField): register 0 holds a tensor, expected an ADT");
  expect_runtime_error(emit_field_out_of_range, NIMBLE_OUT_OF_RANGE,
                       "pc 1 (GetField): field 1 of an ADT with tag 3 and 1 fields");
  expect_runtime_error(emit_ret_of_empty_register, NIMBLE_INVALID_ARGUMENT, "(Ret): register 4 is empty");
  expect_runtime_error(emit_closure_arity_mismatch, NIMBLE_INVALID_ARGUMENT,
                       "closure of 'main' takes 1 arguments after 0 captured, given 2");
  expect_runtime_error(emit_invoke_closure_on_tensor, NIMBLE_INVALID_ARGUMENT,
                       "register 0 holds a tensor, expected a closure");
  expect_runtime_error(emit_tensor_past_its_storage, NIMBLE_OUT_OF_RANGE,
                       "tensor of shape [4] (16 bytes) at offset 8 does not fit its 16-byte storage");
  expect_runtime_error(emit_if_on_an_adt, NIMBLE_INVALID_ARGUMENT, "(If): register 1 holds an ADT");
  expect_runtime_error(emit_bad_reshape, NIMBLE_INVALID_ARGUMENT,
                       "(ReshapeTensor): register 2 does not hold a shape");
  expect_runtime_error(emit_negative_storage, NIMBLE_INVALID_ARGUMENT, "negative storage size -5");
  expect_runtime_error(emit_cuda_storage, NIMBLE_UNIMPLEMENTED,
                       "(AllocStorage): cuda device 1: this runtime uses device 0 only");
  expect_runtime_error(emit_wrong_output_kind, NIMBLE_INTERNAL, "entry 'main': output 0 is an ADT");
  expect_runtime_error(emit_wrong_output_shape, NIMBLE_INTERNAL,
                       "entry 'main': output 'out' is int64 [0], declared int64 []");
}
END_TEST


/* An output declared NIMBLE_NDIM_ANY (an If whose branches give different
 * ranks) takes a tensor of any rank, its dtype still checked; inputs may
 * not be declared so. The executable goes through the serialized format. */
static nimble_executable_builder *shape_of_any_rank(DLDataType out_dtype) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 1, 0); /* of a scalar: int64 [0] */
  RT_EMIT(b, f, NIMBLE_OP_RET, 1);
  nimble_tensor_info_t in = rt_info("a0", RT_I64, 0, NULL, NULL);
  nimble_tensor_info_t out = {.name = "out", .dtype = out_dtype, .device = RT_CPU, .ndim = NIMBLE_NDIM_ANY};
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, &in, 1, &out, 1));
  rt_info_free(&in);
  return b;
}

START_TEST(test_an_output_of_any_rank_is_checked_for_its_dtype_only) {
  int64_t x = 5;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  nimble_vm *vm = make_vm(shape_of_any_rank(RT_I64), NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *o;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  ck_assert_int_eq(o->dl_tensor.ndim, 1);
  ck_assert_int_eq(o->dl_tensor.shape[0], 0);
  o->deleter(o);
  nimble_vm_destroy(vm);
  vm = make_vm(shape_of_any_rank(RT_F32), NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INTERNAL,
                      "entry 'main': output 'out' is int64 [0], declared float32 [*]");
  nimble_vm_destroy(vm);
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  nimble_tensor_info_t in = {.name = "a0", .dtype = RT_I64, .device = RT_CPU, .ndim = NIMBLE_NDIM_ANY};
  nimble_tensor_info_t out = rt_info("out", RT_I64, 0, NULL, NULL);
  NIMBLE_ASSERT_ERROR(nimble_builder_add_entry(b, "main", f, &in, 1, &out, 1), NIMBLE_INVALID_ARGUMENT,
                      "builder: tensor 'a0' has ndim -1");
  rt_info_free(&out);
  nimble_builder_destroy(b);
}
END_TEST

START_TEST(test_an_output_can_be_taken_only_once) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_vm *vm = make_vm(b, NULL);
  int64_t x = 9;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *o;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  NIMBLE_ASSERT_ERROR(nimble_vm_take_output(vm, 0, &o), NIMBLE_FAILED_PRECONDITION, "already taken");
  o->deleter(o);
  /* Inputs are consumed by invoke. */
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_FAILED_PRECONDITION, "was not set");
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_vm_options_are_checked) {
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm_options_t opt;
  nimble_vm_options_init(&opt);
  opt.num_threads = 5000;
  nimble_vm *vm;
  NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, &opt, &vm), NIMBLE_INVALID_ARGUMENT, "5000 threads is too many");
  opt.struct_size = 0;
  NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, &opt, &vm), NIMBLE_INVALID_ARGUMENT, "struct_size is 0");
  NIMBLE_ASSERT_ERROR(nimble_vm_create(NULL, NULL, &vm), NIMBLE_INVALID_ARGUMENT, "NULL");
  nimble_executable_release(exe);
}
END_TEST

Suite *vm_errors_suite(void) {
  Suite *s = suite_create("vm_errors");
  TCase *tc = tcase_create("errors");
  tcase_add_test(tc, test_fatal_stops_with_an_error_naming_the_function);
  tcase_add_test(tc, test_a_bad_input_shape_names_the_entry_input_and_both_shapes);
  tcase_add_test(tc, test_a_bad_input_dtype_device_or_layout_is_refused);
  tcase_add_test(tc, test_a_failing_kernel_reports_its_code_and_message);
  tcase_add_test(tc, test_a_kernel_given_the_wrong_operands_fails_cleanly);
  tcase_add_test(tc, test_an_entry_input_as_a_kernel_output_is_refused);
  tcase_add_test(tc, test_going_over_the_memory_cap_names_the_request_and_the_cap);
  tcase_add_test(tc, test_unbounded_recursion_hits_the_call_depth_limit);
  tcase_add_test(tc, test_misused_registers_give_errors_naming_the_instruction);
  tcase_add_test(tc, test_an_output_can_be_taken_only_once);
  tcase_add_test(tc, test_an_output_of_any_rank_is_checked_for_its_dtype_only);
  tcase_add_test(tc, test_vm_options_are_checked);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(vm_errors_suite()); }
