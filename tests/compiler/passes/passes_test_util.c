#include "passes_test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

nimble_module *pt_parse(nimble_arena *a, const char *text) {
  nimble_module *m = NULL;
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "test.nir", text, strlen(text), &m));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  return m;
}

char *pt_load(const char *name) {
  const char *root = getenv("NIMBLE_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/compiler/passes/programs/%s", root ? root : ".", name);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = 0;
  fclose(f);
  return text;
}

static char *print(const nimble_module *m) {
  char *s = NULL;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &s));
  return s;
}

nimble_module *pt_run(nimble_arena *a, const char *input, const pt_pass_fn *passes, size_t n) {
  nimble_module *m = pt_parse(a, input);
  for (size_t i = 0; i < n; i++) {
    NIMBLE_ASSERT_OK(passes[i](m));
    nimble_typing *t;
    nimble_status_t st = nimble_typing_infer_module(m, &t);
    if (st) {
      char *s = print(m);
      ck_abort_msg("pass %zu left an ill-typed module: %s\n%s", i, nimble_status_message(st), s);
    }
    /* The printed form parses back to the same module. */
    char *s = print(m);
    nimble_module *back = NULL;
    nimble_status_t ps = nimble_nir_parse(a, "printed.nir", s, strlen(s), &back);
    ck_assert_msg(ps == NULL, "printed module does not parse: %s\n%s",
                  ps ? nimble_status_message(ps) : "", s);
    ck_assert_msg(nimble_ir_module_equal(m, back), "printed module reads back differently:\n%s", s);
    free(s);
  }
  return m;
}

void pt_assert_equal(const nimble_module *m, const char *expected) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *want = pt_parse(a, expected);
  if (!nimble_ir_module_equal(m, want)) {
    char *got = print(m), *exp = print(want);
    fprintf(stderr, "---- got ----\n%s---- expected ----\n%s", got, exp);
    free(got);
    free(exp);
    nimble_arena_destroy(a);
    ck_abort_msg("the pass's output differs from the expected program (both printed above)");
  }
  nimble_arena_destroy(a);
}

void pt_expect(pt_pass_fn pass, const char *input, const char *expected) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_run(a, input, &pass, 1);
  pt_assert_equal(m, expected);
  nimble_arena_destroy(a);
}

typedef struct counter {
  const char *op;
  const char *prefix;
  size_t n;
  bool kernels; /* count operator calls that are not VM instructions */
} counter;

static bool vm_level(const char *op) {
  static const char *const ok[] = {"shape_of", "alloc_storage", "alloc_tensor", "invoke",
                                   "invoke_shape_func", "reshape_tensor", "kill"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp(op, ok[i]) == 0) return true;
  return false;
}

static void count(counter *c, const nimble_expr *e) {
  while (e) {
    switch (e->kind) {
      case NIMBLE_EXPR_CALL: {
        const nimble_expr *f = e->u.call.callee;
        if (c->op && f->kind == NIMBLE_EXPR_OP && strcmp(f->u.op.op->name, c->op) == 0) c->n++;
        if (c->kernels && f->kind == NIMBLE_EXPR_OP && !vm_level(f->u.op.op->name)) c->n++;
        if (c->prefix && f->kind == NIMBLE_EXPR_GLOBAL &&
            strncmp(f->u.global.name, c->prefix, strlen(c->prefix)) == 0)
          c->n++;
        for (size_t i = 0; i < e->u.call.num_args; i++) count(c, e->u.call.args[i]);
        e = f;
        continue;
      }
      case NIMBLE_EXPR_LET: count(c, e->u.let.value); e = e->u.let.body; continue;
      case NIMBLE_EXPR_IF:
        count(c, e->u.if_.cond);
        count(c, e->u.if_.then_branch);
        e = e->u.if_.else_branch;
        continue;
      case NIMBLE_EXPR_TUPLE:
        for (size_t i = 0; i < e->u.tuple.count; i++) count(c, e->u.tuple.fields[i]);
        return;
      case NIMBLE_EXPR_PROJ: e = e->u.proj.tuple; continue;
      case NIMBLE_EXPR_FUNC: e = e->u.func.body; continue;
      case NIMBLE_EXPR_MATCH:
        count(c, e->u.match.scrutinee);
        for (size_t i = 0; i < e->u.match.num_clauses; i++) count(c, e->u.match.clauses[i].body);
        return;
      default: return;
    }
  }
}

static size_t count_module(const nimble_module *m, counter *c) {
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) count(c, nimble_module_func_at(m, i)->func);
  return c->n;
}

size_t pt_count_kernel_ops_outside_primitives(const nimble_module *m) {
  counter c = {NULL, NULL, 0, true};
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (!nimble_passes_is_primitive(g->name)) count(&c, g->func);
  }
  return c.n;
}

size_t pt_count_op(const nimble_module *m, const char *op) {
  counter c = {op, NULL, 0, false};
  return count_module(m, &c);
}

size_t pt_count_global_calls(const nimble_module *m, const char *prefix) {
  counter c = {NULL, prefix, 0, false};
  return count_module(m, &c);
}
