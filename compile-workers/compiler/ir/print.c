/* The printer of the text form (.nir); docs/ir.md describes the syntax and
 * the parser (frontend/text/parser.c) reads back exactly what this writes. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/ir.h"

typedef struct printer {
  nimble_strbuf *b;
  int indent;
} printer;

static void print_expr(printer *p, const nimble_expr *e);

/* %name, or %"name" with escapes when the name is not a plain identifier
 * (names imported from ONNX look like "input.1" or "onnx::Gemm_5"). */
static void print_name(nimble_strbuf *b, char sigil, const char *name) {
  bool plain = (isalpha((unsigned char)name[0]) || name[0] == '_');
  for (const char *c = name; *c && plain; c++) plain = isalnum((unsigned char)*c) || *c == '_';
  if (plain) {
    nimble_strbuf_printf(b, "%c%s", sigil, name);
    return;
  }
  nimble_strbuf_printf(b, "%c\"", sigil);
  for (const char *c = name; *c; c++) {
    if (*c == '"' || *c == '\\') nimble_strbuf_printf(b, "\\%c", *c);
    else if (*c == '\n') nimble_strbuf_puts(b, "\\n");
    else if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f) nimble_strbuf_printf(b, "\\x%02x", (unsigned char)*c);
    else nimble_strbuf_append(b, c, 1);
  }
  nimble_strbuf_puts(b, "\"");
}

static void newline(printer *p) {
  nimble_strbuf_puts(p->b, "\n");
  for (int i = 0; i < p->indent; i++) nimble_strbuf_puts(p->b, "  ");
}

/* Floats print with enough digits to read back the same bits, and always
 * with a '.' or an exponent so that they read back as floats. */
static void print_float(nimble_strbuf *b, double v, bool is_f32) {
  char tmp[64];
  /* The shortest of the usual precisions that reads back exactly. */
  static const int kDigits[] = {6, 9, 15, 17};
  for (size_t i = 0; i < sizeof kDigits / sizeof kDigits[0]; i++) {
    snprintf(tmp, sizeof tmp, "%.*g", kDigits[i], v);
    if (is_f32 ? (float)strtod(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
  }
  if (isnan(v)) snprintf(tmp, sizeof tmp, "nan");
  else if (isinf(v)) snprintf(tmp, sizeof tmp, v < 0 ? "-inf" : "inf");
  else if (!strpbrk(tmp, ".e")) strncat(tmp, ".0", sizeof tmp - strlen(tmp) - 1);
  nimble_strbuf_puts(b, tmp);
}

static void print_element(nimble_strbuf *b, nimble_dtype_t dt, const void *data, size_t i) {
  switch (dt) {
    case NIMBLE_DTYPE_FLOAT32: print_float(b, ((const float *)data)[i], true); break;
    case NIMBLE_DTYPE_FLOAT64: print_float(b, ((const double *)data)[i], false); break;
    case NIMBLE_DTYPE_FLOAT16:
      nimble_strbuf_printf(b, "0x%04x", (unsigned)((const uint16_t *)data)[i]);
      break;
    case NIMBLE_DTYPE_INT8: nimble_strbuf_printf(b, "%d", ((const int8_t *)data)[i]); break;
    case NIMBLE_DTYPE_INT16: nimble_strbuf_printf(b, "%d", ((const int16_t *)data)[i]); break;
    case NIMBLE_DTYPE_INT32: nimble_strbuf_printf(b, "%" PRId32, ((const int32_t *)data)[i]); break;
    case NIMBLE_DTYPE_INT64: nimble_strbuf_printf(b, "%" PRId64, ((const int64_t *)data)[i]); break;
    case NIMBLE_DTYPE_UINT8: nimble_strbuf_printf(b, "%u", ((const uint8_t *)data)[i]); break;
    case NIMBLE_DTYPE_UINT16: nimble_strbuf_printf(b, "%u", (unsigned)((const uint16_t *)data)[i]); break;
    case NIMBLE_DTYPE_UINT32: nimble_strbuf_printf(b, "%" PRIu32, ((const uint32_t *)data)[i]); break;
    case NIMBLE_DTYPE_UINT64: nimble_strbuf_printf(b, "%" PRIu64, ((const uint64_t *)data)[i]); break;
    case NIMBLE_DTYPE_BFLOAT16: /* bit patterns, like float16 */
      nimble_strbuf_printf(b, "0x%04x", (unsigned)((const uint16_t *)data)[i]);
      break;
    case NIMBLE_DTYPE_BOOL:
      nimble_strbuf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false");
      break;
    default: nimble_strbuf_puts(b, "0"); break;
  }
}

static void print_constant(nimble_strbuf *b, const nimble_const_tensor_t *c) {
  /* Scalars of the two default literal types and booleans print bare. */
  if (c->rank == 0) {
    if (c->dtype == NIMBLE_DTYPE_FLOAT32 && isfinite(((const float *)c->data)[0])) {
      print_float(b, ((const float *)c->data)[0], true);
      return;
    }
    if (c->dtype == NIMBLE_DTYPE_INT64 || c->dtype == NIMBLE_DTYPE_BOOL) {
      print_element(b, c->dtype, c->data, 0);
      return;
    }
  }
  nimble_strbuf_puts(b, "const[(");
  for (size_t i = 0; i < c->rank; i++)
    nimble_strbuf_printf(b, "%s%" PRId64, i ? ", " : "", c->dims[i]);
  nimble_strbuf_printf(b, "%s), %s]{", c->rank == 1 ? "," : "", nimble_dtype_name(c->dtype));
  for (size_t i = 0; i < c->num_elements; i++) {
    if (i) nimble_strbuf_puts(b, ", ");
    print_element(b, c->dtype, c->data, i);
  }
  nimble_strbuf_puts(b, "}");
}

static void print_string_literal(nimble_strbuf *b, const char *s) {
  nimble_strbuf_puts(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') nimble_strbuf_printf(b, "\\%c", *s);
    else if (*s == '\n') nimble_strbuf_puts(b, "\\n");
    else if ((unsigned char)*s < 0x20) nimble_strbuf_printf(b, "\\x%02x", (unsigned char)*s);
    else nimble_strbuf_append(b, s, 1);
  }
  nimble_strbuf_puts(b, "\"");
}

static void print_attr_value(nimble_strbuf *b, const nimble_attr_value_t *v) {
  switch (v->kind) {
    case NIMBLE_ATTR_INT: nimble_strbuf_printf(b, "%" PRId64, v->i); break;
    case NIMBLE_ATTR_FLOAT: print_float(b, v->f, false); break;
    case NIMBLE_ATTR_INTS:
      nimble_strbuf_puts(b, "[");
      for (size_t i = 0; i < v->n; i++)
        nimble_strbuf_printf(b, "%s%" PRId64, i ? ", " : "", v->ints[i]);
      nimble_strbuf_puts(b, "]");
      break;
    case NIMBLE_ATTR_STRING: print_string_literal(b, v->s ? v->s : ""); break;
  }
}

static void print_var_decl(printer *p, const nimble_expr *v) {
  print_name(p->b, '%', v->u.var.name);
  if (v->u.var.annotation) {
    nimble_strbuf_puts(p->b, ": ");
    nimble_print_type(p->b, v->u.var.annotation);
  }
}

static void print_pattern(printer *p, const nimble_pattern *pat) {
  switch (pat->kind) {
    case NIMBLE_PATTERN_WILDCARD: nimble_strbuf_puts(p->b, "_"); break;
    case NIMBLE_PATTERN_VAR: print_var_decl(p, pat->var); break;
    case NIMBLE_PATTERN_CTOR:
      nimble_strbuf_puts(p->b, pat->ctor->name);
      if (pat->num_subs) {
        nimble_strbuf_puts(p->b, "(");
        for (size_t i = 0; i < pat->num_subs; i++) {
          if (i) nimble_strbuf_puts(p->b, ", ");
          print_pattern(p, pat->subs[i]);
        }
        nimble_strbuf_puts(p->b, ")");
      }
      break;
    case NIMBLE_PATTERN_TUPLE:
      nimble_strbuf_puts(p->b, "(");
      for (size_t i = 0; i < pat->num_subs; i++) {
        if (i) nimble_strbuf_puts(p->b, ", ");
        print_pattern(p, pat->subs[i]);
      }
      nimble_strbuf_puts(p->b, pat->num_subs == 1 ? ",)" : ")");
      break;
  }
}

void nimble_print_pattern(nimble_strbuf *b, const nimble_pattern *pat) {
  printer p = {b, 0};
  print_pattern(&p, pat);
}

/* Expressions that can stand before "(" or "." without parentheses. */
static bool is_postfix_safe(const nimble_expr *e) {
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
    case NIMBLE_EXPR_GLOBAL:
    case NIMBLE_EXPR_OP:
    case NIMBLE_EXPR_CONSTRUCTOR:
    case NIMBLE_EXPR_CALL:
    case NIMBLE_EXPR_PROJ:
    case NIMBLE_EXPR_TUPLE: return true;
    default: return false;
  }
}

static void print_postfix_base(printer *p, const nimble_expr *e) {
  if (is_postfix_safe(e)) {
    print_expr(p, e);
  } else {
    nimble_strbuf_puts(p->b, "(");
    print_expr(p, e);
    nimble_strbuf_puts(p->b, ")");
  }
}

static void print_func_sig(printer *p, const nimble_expr *f) {
  if (f->u.func.num_type_params) {
    nimble_strbuf_puts(p->b, "[");
    for (size_t i = 0; i < f->u.func.num_type_params; i++) {
      if (i) nimble_strbuf_puts(p->b, ", ");
      nimble_print_type(p->b, f->u.func.type_params[i]);
    }
    nimble_strbuf_puts(p->b, "]");
  }
  nimble_strbuf_puts(p->b, "(");
  for (size_t i = 0; i < f->u.func.num_params; i++) {
    if (i) nimble_strbuf_puts(p->b, ", ");
    print_var_decl(p, f->u.func.params[i]);
  }
  nimble_strbuf_puts(p->b, ")");
  if (f->u.func.ret) {
    nimble_strbuf_puts(p->b, " -> ");
    nimble_print_type(p->b, f->u.func.ret);
  }
}

static void print_block(printer *p, const nimble_expr *body) {
  nimble_strbuf_puts(p->b, "{");
  p->indent++;
  newline(p);
  print_expr(p, body);
  p->indent--;
  newline(p);
  nimble_strbuf_puts(p->b, "}");
}

static void print_expr(printer *p, const nimble_expr *e) {
  nimble_strbuf *b = p->b;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: print_name(b, '%', e->u.var.name); break;
    case NIMBLE_EXPR_GLOBAL: print_name(b, '@', e->u.global.name); break;
    case NIMBLE_EXPR_CONSTANT: print_constant(b, &e->u.constant); break;
    case NIMBLE_EXPR_OP: nimble_strbuf_puts(b, e->u.op.op->name); break;
    case NIMBLE_EXPR_CONSTRUCTOR: nimble_strbuf_puts(b, e->u.ctor.ctor->name); break;
    case NIMBLE_EXPR_CALL: {
      print_postfix_base(p, e->u.call.callee);
      nimble_strbuf_puts(b, "(");
      for (size_t i = 0; i < e->u.call.num_args; i++) {
        if (i) nimble_strbuf_puts(b, ", ");
        print_expr(p, e->u.call.args[i]);
      }
      bool first = e->u.call.num_args == 0;
      if (e->u.call.callee->kind == NIMBLE_EXPR_OP) {
        const nimble_op *op = e->u.call.callee->u.op.op;
        for (size_t i = 0; i < e->u.call.attrs.count && i < op->num_attrs; i++) {
          const nimble_attr_value_t *v = &e->u.call.attrs.values[i];
          if (!op->attrs[i].required && nimble_attr_value_is_default(&op->attrs[i], v)) continue;
          nimble_strbuf_printf(b, "%s%s=", first ? "" : ", ", op->attrs[i].name);
          print_attr_value(b, v);
          first = false;
        }
      }
      nimble_strbuf_puts(b, ")");
      break;
    }
    case NIMBLE_EXPR_LET:
      /* A chain of lets prints as a flat sequence of lines. */
      for (;;) {
        nimble_strbuf_puts(b, "let ");
        print_var_decl(p, e->u.let.var);
        nimble_strbuf_puts(b, " = ");
        print_expr(p, e->u.let.value);
        nimble_strbuf_puts(b, ";");
        newline(p);
        if (e->u.let.body->kind != NIMBLE_EXPR_LET) break;
        e = e->u.let.body;
      }
      print_expr(p, e->u.let.body);
      break;
    case NIMBLE_EXPR_IF:
      nimble_strbuf_puts(b, "if (");
      print_expr(p, e->u.if_.cond);
      nimble_strbuf_puts(b, ") ");
      print_block(p, e->u.if_.then_branch);
      nimble_strbuf_puts(b, " else ");
      print_block(p, e->u.if_.else_branch);
      break;
    case NIMBLE_EXPR_TUPLE:
      nimble_strbuf_puts(b, "(");
      for (size_t i = 0; i < e->u.tuple.count; i++) {
        if (i) nimble_strbuf_puts(b, ", ");
        print_expr(p, e->u.tuple.fields[i]);
      }
      nimble_strbuf_puts(b, e->u.tuple.count == 1 ? ",)" : ")");
      break;
    case NIMBLE_EXPR_PROJ:
      print_postfix_base(p, e->u.proj.tuple);
      nimble_strbuf_printf(b, ".%zu", e->u.proj.index);
      break;
    case NIMBLE_EXPR_FUNC:
      nimble_strbuf_puts(b, "fn ");
      print_func_sig(p, e);
      nimble_strbuf_puts(b, " ");
      print_block(p, e->u.func.body);
      break;
    case NIMBLE_EXPR_MATCH:
      nimble_strbuf_puts(b, "match (");
      print_expr(p, e->u.match.scrutinee);
      nimble_strbuf_puts(b, ") {");
      p->indent++;
      for (size_t i = 0; i < e->u.match.num_clauses; i++) {
        newline(p);
        print_pattern(p, e->u.match.clauses[i].pattern);
        nimble_strbuf_puts(b, " => ");
        p->indent++;
        print_expr(p, e->u.match.clauses[i].body);
        p->indent--;
        nimble_strbuf_puts(b, ",");
      }
      p->indent--;
      newline(p);
      nimble_strbuf_puts(b, "}");
      break;
  }
}

static void print_typedef(printer *p, const nimble_typedef *td) {
  nimble_strbuf_printf(p->b, "type %s", td->name);
  if (td->num_params) {
    nimble_strbuf_puts(p->b, "[");
    for (size_t i = 0; i < td->num_params; i++) {
      if (i) nimble_strbuf_puts(p->b, ", ");
      nimble_print_type(p->b, td->params[i]);
    }
    nimble_strbuf_puts(p->b, "]");
  }
  nimble_strbuf_puts(p->b, " {");
  for (size_t i = 0; i < td->num_ctors; i++) {
    const nimble_constructor *c = td->ctors[i];
    nimble_strbuf_printf(p->b, "\n  %s", c->name);
    if (c->num_fields) {
      nimble_strbuf_puts(p->b, "(");
      for (size_t j = 0; j < c->num_fields; j++) {
        if (j) nimble_strbuf_puts(p->b, ", ");
        nimble_print_type(p->b, c->fields[j]);
      }
      nimble_strbuf_puts(p->b, ")");
    }
    nimble_strbuf_puts(p->b, ",");
  }
  nimble_strbuf_puts(p->b, "\n}\n");
}

nimble_status_t nimble_ir_print_module(const nimble_module *m, char **out) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  printer p = {&b, 0};
  for (size_t i = 0; i < nimble_module_num_typedefs(m); i++) {
    if (i) nimble_strbuf_puts(&b, "\n");
    print_typedef(&p, nimble_module_typedef_at(m, i));
  }
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (i || nimble_module_num_typedefs(m)) nimble_strbuf_puts(&b, "\n");
    nimble_strbuf_puts(&b, "def ");
    print_name(&b, '@', g->name);
    print_func_sig(&p, g->func);
    nimble_strbuf_puts(&b, " ");
    print_block(&p, g->func->u.func.body);
    nimble_strbuf_puts(&b, "\n");
  }
  return nimble_strbuf_finish(&b, out);
}

nimble_status_t nimble_ir_print_expr(const nimble_expr *e, char **out) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  printer p = {&b, 0};
  print_expr(&p, e);
  return nimble_strbuf_finish(&b, out);
}

/* One level deep: the head of the expression and its direct parts as
 * atoms, enough to find it in the source. */
static void print_brief_atom(nimble_strbuf *b, const nimble_expr *e) {
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: print_name(b, '%', e->u.var.name); break;
    case NIMBLE_EXPR_GLOBAL: print_name(b, '@', e->u.global.name); break;
    case NIMBLE_EXPR_OP: nimble_strbuf_puts(b, e->u.op.op->name); break;
    case NIMBLE_EXPR_CONSTRUCTOR: nimble_strbuf_puts(b, e->u.ctor.ctor->name); break;
    case NIMBLE_EXPR_CONSTANT:
      if (e->u.constant.num_elements <= 4) print_constant(b, &e->u.constant);
      else nimble_strbuf_puts(b, "const[...]");
      break;
    case NIMBLE_EXPR_CALL:
      print_brief_atom(b, e->u.call.callee);
      nimble_strbuf_puts(b, "(...)");
      break;
    default: nimble_strbuf_puts(b, "..."); break;
  }
}

char *nimble_ir_expr_brief(const nimble_expr *e, char *buf, size_t size) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  switch (e->kind) {
    case NIMBLE_EXPR_CALL:
      print_brief_atom(&b, e->u.call.callee);
      nimble_strbuf_puts(&b, "(");
      for (size_t i = 0; i < e->u.call.num_args; i++) {
        if (i) nimble_strbuf_puts(&b, ", ");
        print_brief_atom(&b, e->u.call.args[i]);
      }
      nimble_strbuf_puts(&b, ")");
      break;
    case NIMBLE_EXPR_LET: nimble_strbuf_printf(&b, "let %%%s = ...", e->u.let.var->u.var.name); break;
    case NIMBLE_EXPR_IF: nimble_strbuf_puts(&b, "if (...) {...} else {...}"); break;
    case NIMBLE_EXPR_MATCH:
      nimble_strbuf_puts(&b, "match (");
      print_brief_atom(&b, e->u.match.scrutinee);
      nimble_strbuf_puts(&b, ") {...}");
      break;
    case NIMBLE_EXPR_FUNC: nimble_strbuf_puts(&b, "fn (...) {...}"); break;
    case NIMBLE_EXPR_TUPLE: nimble_strbuf_puts(&b, "(...)"); break;
    case NIMBLE_EXPR_PROJ:
      print_brief_atom(&b, e->u.proj.tuple);
      nimble_strbuf_printf(&b, ".%zu", e->u.proj.index);
      break;
    default: print_brief_atom(&b, e); break;
  }
  nimble_strbuf_copy_truncated(&b, buf, size);
  nimble_strbuf_deinit(&b);
  return buf;
}
