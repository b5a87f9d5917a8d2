/* The instruction table (nimble/bytecode.h) against the layouts docs/vm.md
 * documents, written out here by hand; the loader's count checks that the
 * table drives; and the disassembly of a small program, compared with text
 * written by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test_util.h"

/* docs/vm.md's operand layouts: fixed operand count, and whether more may
 * follow. */
static const struct {
  int op;
  const char *name;
  uint32_t fixed;
  int tail;
} kLayouts[] = {
    {NIMBLE_OP_MOVE, "Move", 2, 0},
    {NIMBLE_OP_RET, "Ret", 1, 0},
    {NIMBLE_OP_INVOKE, "Invoke", 2, 1},
    {NIMBLE_OP_INVOKE_CLOSURE, "InvokeClosure", 2, 1},
    {NIMBLE_OP_INVOKE_PACKED, "InvokePacked", 2, 1},
    {NIMBLE_OP_ALLOC_STORAGE, "AllocStorage", 8, 0},
    {NIMBLE_OP_ALLOC_TENSOR, "AllocTensor", 6, 1},
    {NIMBLE_OP_ALLOC_TENSOR_REG, "AllocTensorReg", 7, 0},
    {NIMBLE_OP_ALLOC_ADT, "AllocADT", 2, 1},
    {NIMBLE_OP_ALLOC_CLOSURE, "AllocClosure", 2, 1},
    {NIMBLE_OP_GET_FIELD, "GetField", 3, 0},
    {NIMBLE_OP_GET_TAG, "GetTag", 2, 0},
    {NIMBLE_OP_IF, "If", 4, 0},
    {NIMBLE_OP_GOTO, "Goto", 1, 0},
    {NIMBLE_OP_LOAD_CONST, "LoadConst", 2, 0},
    {NIMBLE_OP_LOAD_CONSTI, "LoadConsti", 2, 0},
    {NIMBLE_OP_SHAPE_OF, "ShapeOf", 2, 0},
    {NIMBLE_OP_RESHAPE_TENSOR, "ReshapeTensor", 3, 0},
    {NIMBLE_OP_DEVICE_COPY, "DeviceCopy", 4, 0},
    {NIMBLE_OP_KILL_REGISTER, "KillRegister", 1, 0},
    {NIMBLE_OP_FATAL, "Fatal", 0, 0},
};

START_TEST(test_the_table_matches_the_documented_layouts) {
  ck_assert_int_eq(NIMBLE_OP_COUNT_, sizeof kLayouts / sizeof kLayouts[0]);
  for (size_t i = 0; i < sizeof kLayouts / sizeof kLayouts[0]; i++) {
    char tail = 0;
    const char *names = NULL;
    const char *schema = nimble_opcode_schema(kLayouts[i].op, &tail, &names);
    ck_assert_ptr_nonnull(schema);
    ck_assert_str_eq(nimble_opcode_name(kLayouts[i].op), kLayouts[i].name);
    ck_assert_msg(strlen(schema) == kLayouts[i].fixed, "%s: schema '%s'", kLayouts[i].name, schema);
    ck_assert_msg((tail != 0) == kLayouts[i].tail, "%s: tail '%c'", kLayouts[i].name, tail ? tail : '0');
    /* one name per fixed operand, and one for the tail */
    size_t words = 0;
    for (const char *p = names; *p;) {
      while (*p == ' ') p++;
      if (*p) words++;
      while (*p && *p != ' ') p++;
    }
    ck_assert_msg(words == kLayouts[i].fixed + (tail != 0), "%s: names '%s'", kLayouts[i].name, names);
    /* dtypes and devices are whole: C B L, D N */
    for (const char *p = schema; *p; p++) {
      if (*p == 'C') ck_assert_msg(p[1] == 'B' && p[2] == 'L', "%s: '%s'", kLayouts[i].name, schema);
      if (*p == 'D') ck_assert_msg(p[1] == 'N', "%s: '%s'", kLayouts[i].name, schema);
      ck_assert_msg(strchr("rfkcijaDNCBLgxoe", *p) != NULL, "%s: kind '%c'", kLayouts[i].name, *p);
    }
  }
  ck_assert_str_eq(nimble_opcode_name(NIMBLE_OP_COUNT_), "unknown");
  ck_assert_ptr_null(nimble_opcode_schema(-1, NULL, NULL));
}
END_TEST

/* The loader refuses one operand too few (and one too many where nothing
 * may follow) for every opcode, naming the count. */
START_TEST(test_the_loader_checks_every_opcodes_operand_count) {
  for (size_t i = 0; i < sizeof kLayouts / sizeof kLayouts[0]; i++) {
    for (int delta = -1; delta <= 1; delta += 2) {
      if (delta < 0 && kLayouts[i].fixed == 0) continue;
      if (delta > 0 && kLayouts[i].tail) continue;
      nimble_executable_builder *b = rt_builder();
      uint32_t f = rt_function(b, "main", 0, 4);
      uint32_t n = kLayouts[i].fixed + (uint32_t)delta;
      int64_t ops[16] = {0};
      NIMBLE_ASSERT_OK(nimble_builder_emit(b, f, kLayouts[i].op, ops, n));
      RT_EMIT0(b, f, NIMBLE_OP_FATAL);
      NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, NULL, 0, NULL, 0));
      nimble_executable *exe = NULL;
      nimble_status_t s = rt_try_load(b, &exe);
      nimble_builder_destroy(b);
      ck_assert_msg(s != NULL, "%s with %u operands loaded", kLayouts[i].name, n);
      char want[96];
      snprintf(want, sizeof want, "(%s): expects %s%u operands, has %u", kLayouts[i].name,
               kLayouts[i].tail ? "at least " : "", kLayouts[i].fixed, n);
      ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "'%s' lacks '%s'", nimble_status_message(s),
                    want);
      nimble_status_free(s);
    }
  }
}
END_TEST

START_TEST(test_the_disassembly_names_every_operand) {
  nimble_executable_builder *b = rt_builder();
  int64_t vadd = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 2, 8);
  uint32_t g = rt_function(b, "twice", 1, 3);
  RT_EMIT(b, f, NIMBLE_OP_SHAPE_OF, 2, 0);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 3, 16);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 4, 3, 64, kDLCPU, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 5, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 6, 4, 5, kDLFloat, 32, 1, 4);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, vadd, 1, 0, 1, 6);
  RT_EMIT(b, f, NIMBLE_OP_IF, 5, 5, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE, 7, g, 6);
  RT_EMIT(b, f, NIMBLE_OP_RET, 6);
  RT_EMIT(b, g, NIMBLE_OP_ALLOC_ADT, 1, 3, 0, 0);
  RT_EMIT(b, g, NIMBLE_OP_GET_FIELD, 2, 1, 1);
  RT_EMIT(b, g, NIMBLE_OP_RET, 2);
  const char *sym[1] = {"n"};
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, NULL, sym), rt_info("b", RT_F32, 1, NULL, sym)};
  nimble_tensor_info_t out = rt_info("c", RT_F32, 1, NULL, sym);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_executable_disassemble(exe, &text));
  const char *want =
      "target test, format version 2, 1 kernels, 0 constants, 2 functions\n"
      "entry main -> @main\n"
      "kernel #0 cpu vadd_f32\n"
      "function 0 @main (2 params, 8 registers, 9 instructions)\n"
      "     0  ShapeOf        dst=r2 tensor=r0\n"
      "     1  LoadConsti     dst=r3 value=16\n"
      "     2  AllocStorage   dst=r4 size=r3 alignment=64 device=cpu:0 hint=float32\n"
      "     3  LoadConsti     dst=r5 value=0\n"
      "     4  AllocTensor    dst=r6 storage=r4 offset=r5 dtype=float32 dims=[4]\n"
      "     5  InvokePacked   kernel=#0 vadd_f32 outputs=1 args=[r0 r1 r6]\n"
      "     6  If             test=r5 target=r5 true=+1 (pc 7) false=+2 (pc 8)\n"
      "     7  Invoke         dst=r7 func=@twice args=[r6]\n"
      "     8  Ret            src=r6\n"
      "function 1 @twice (1 params, 3 registers, 3 instructions)\n"
      "     0  AllocADT       dst=r1 tag=3 fields=[r0 r0]\n"
      "     1  GetField       dst=r2 object=r1 index=1\n"
      "     2  Ret            src=r2\n";
  ck_assert_str_eq(text, want);
  free(text);
  nimble_executable_release(exe);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bytecode_table");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, test_the_table_matches_the_documented_layouts);
  tcase_add_test(tc, test_the_loader_checks_every_opcodes_operand_count);
  tcase_add_test(tc, test_the_disassembly_names_every_operand);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
