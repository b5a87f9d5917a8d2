/* The loop-nest IR's text form: one statement a line, two spaces of
 * indentation a level; meant for people and for tests, not for parsing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ln_internal.h"

typedef struct buf {
  char *data;
  size_t len, cap;
  int failed;
  /* The canonical form (the kernel cache's key): every variable numbered
   * in order of first appearance with its type, every expression's type,
   * floats as exact hex, every sgemm field; nothing that depends on the
   * arena (variable ids) or on how names happen to shadow. */
  int canonical;
  const nimble_ln_var **vars;
  size_t n_vars, cap_vars;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  if (b->failed) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
      b->failed = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* A variable: its name, or in the canonical form its number, mutability
 * and type. */
static void put_var(buf *b, const nimble_ln_var *v) {
  if (!b->canonical) {
    put(b, "%s", v->name);
    return;
  }
  size_t i = 0;
  while (i < b->n_vars && b->vars[i] != v) i++;
  if (i == b->n_vars) {
    if (b->n_vars == b->cap_vars) {
      size_t cap = b->cap_vars ? 2 * b->cap_vars : 32;
      const nimble_ln_var **nv = realloc(b->vars, cap * sizeof *nv);
      if (!nv) {
        b->failed = 1;
        return;
      }
      b->vars = nv;
      b->cap_vars = cap;
    }
    b->vars[b->n_vars++] = v;
  }
  put(b, "v%zu%s:%s", i, v->mutable_ ? "!" : "", nimble_ln_type_name(v->type));
}

static void print_expr(buf *b, const nimble_ln_expr *e) {
  if (!e) {
    put(b, "<null>");
    return;
  }
  if (b->canonical) {
    /* Every node's kind, type and fields, in full. */
    put(b, "(%d:%s", (int)e->kind, nimble_ln_type_name(e->type));
    switch (e->kind) {
    case NIMBLE_LN_E_CONST_F: put(b, " %a", e->f); break;
    case NIMBLE_LN_E_CONST_I: put(b, " %lld", (long long)e->i); break;
    case NIMBLE_LN_E_VAR: put(b, " "); put_var(b, e->var); break;
    case NIMBLE_LN_E_SHAPE: put(b, " p%d %d", e->param->index, e->axis); break;
    case NIMBLE_LN_E_LOAD: put(b, " p%d ", e->param->index); print_expr(b, e->a); break;
    case NIMBLE_LN_E_UNARY:
    case NIMBLE_LN_E_CAST: put(b, " %d ", (int)e->op); print_expr(b, e->a); break;
    case NIMBLE_LN_E_BINARY:
      put(b, " %d ", (int)e->op);
      print_expr(b, e->a);
      print_expr(b, e->b);
      break;
    case NIMBLE_LN_E_SELECT:
    case NIMBLE_LN_E_FMA:
      print_expr(b, e->a);
      print_expr(b, e->b);
      print_expr(b, e->c);
      break;
    case NIMBLE_LN_E_HAS_SGEMM:
    case NIMBLE_LN_E_HAS_SGEMM_EPILOGUE:
    case NIMBLE_LN_E_HAS_CONV3X3:
    case NIMBLE_LN_E_NUM_THREADS: break;
    }
    put(b, ")");
    return;
  }
  switch (e->kind) {
  case NIMBLE_LN_E_CONST_F:
    if (e->type == NIMBLE_LN_F32) put(b, "%.9gf", e->f);
    else put(b, "%s(%.17g)", nimble_ln_type_name(e->type), e->f);
    break;
  case NIMBLE_LN_E_CONST_I:
    if (e->type == NIMBLE_LN_I64) put(b, "%lld", (long long)e->i);
    else if (e->type == NIMBLE_LN_U64) put(b, "u64(%llu)", (unsigned long long)e->i);
    else put(b, "%s(%lld)", nimble_ln_type_name(e->type), (long long)e->i);
    break;
  case NIMBLE_LN_E_VAR: put_var(b, e->var); break;
  case NIMBLE_LN_E_SHAPE: put(b, "shape(%s, %d)", e->param->name, e->axis); break;
  case NIMBLE_LN_E_LOAD:
    put(b, "%s[", e->param->name);
    print_expr(b, e->a);
    put(b, "]");
    break;
  case NIMBLE_LN_E_UNARY:
    if (e->op == NIMBLE_LN_NEG) put(b, "-(");
    else if (e->op == NIMBLE_LN_NOT) put(b, "!(");
    else put(b, "%s(", nimble_ln_op_name(e->op));
    print_expr(b, e->a);
    put(b, ")");
    break;
  case NIMBLE_LN_E_BINARY:
    if (e->op == NIMBLE_LN_MIN || e->op == NIMBLE_LN_MAX || e->op == NIMBLE_LN_POW || e->op == NIMBLE_LN_MAXNUM) {
      put(b, "%s(", nimble_ln_op_name(e->op));
      print_expr(b, e->a);
      put(b, ", ");
      print_expr(b, e->b);
      put(b, ")");
    } else {
      put(b, "(");
      print_expr(b, e->a);
      put(b, " %s ", nimble_ln_op_name(e->op));
      print_expr(b, e->b);
      put(b, ")");
    }
    break;
  case NIMBLE_LN_E_FMA:
  case NIMBLE_LN_E_SELECT:
    put(b, "%s(", e->kind == NIMBLE_LN_E_FMA ? "fma" : "select");
    print_expr(b, e->a);
    put(b, ", ");
    print_expr(b, e->b);
    put(b, ", ");
    print_expr(b, e->c);
    put(b, ")");
    break;
  case NIMBLE_LN_E_CAST:
    put(b, "%s(", nimble_ln_type_name(e->type));
    print_expr(b, e->a);
    put(b, ")");
    break;
  case NIMBLE_LN_E_HAS_SGEMM: put(b, "has_sgemm()"); break;
  case NIMBLE_LN_E_HAS_SGEMM_EPILOGUE: put(b, "has_sgemm_epilogue()"); break;
  case NIMBLE_LN_E_NUM_THREADS: put(b, "num_threads()"); break;
  case NIMBLE_LN_E_HAS_CONV3X3: put(b, "has_conv3x3()"); break;
  }
}

static void indent(buf *b, int level) { put(b, "%*s", level * 2, ""); }

static void print_stmt(buf *b, const nimble_ln_stmt *s, int level) {
  if (!s) {
    indent(b, level);
    put(b, "<null>\n");
    return;
  }
  switch (s->kind) {
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < s->n_stmts; i++) print_stmt(b, s->stmts[i], level);
    break;
  case NIMBLE_LN_S_FOR:
    indent(b, level);
    switch (s->loop_kind) {
    case NIMBLE_LN_SERIAL: break;
    case NIMBLE_LN_PARALLEL: put(b, "parallel "); break;
    case NIMBLE_LN_VECTORIZED: put(b, "vectorized(%d) ", s->factor); break;
    case NIMBLE_LN_UNROLLED: put(b, "unrolled(%d) ", s->factor); break;
    }
    if (s->no_unroll) put(b, "nounroll ");
    if (s->masked_tail) put(b, "masked ");
    if (s->interleave) put(b, "interleave(%d) ", s->interleave);
    put(b, "for ");
    put_var(b, s->var);
    put(b, " in [");
    print_expr(b, s->begin);
    put(b, ", ");
    print_expr(b, s->end);
    put(b, ") {");
    if (s->tail_param)
      put(b, "  # tail: empty when shape(%s, %d) %% %lld == 0", s->tail_param->name, s->tail_axis,
          (long long)s->tail_factor);
    if (s->tail_param && b->canonical) put(b, " p%d", s->tail_param->index);
    put(b, "\n");
    print_stmt(b, s->body, level + 1);
    indent(b, level);
    put(b, "}\n");
    break;
  case NIMBLE_LN_S_LET:
    indent(b, level);
    put(b, "let ");
    put_var(b, s->var);
    put(b, " = ");
    print_expr(b, s->value);
    put(b, "\n");
    print_stmt(b, s->body, level);
    break;
  case NIMBLE_LN_S_DECL:
    indent(b, level);
    put(b, "var ");
    put_var(b, s->var);
    put(b, ": %s = ", nimble_ln_type_name(s->var->type));
    print_expr(b, s->value);
    put(b, " {\n");
    print_stmt(b, s->body, level + 1);
    indent(b, level);
    put(b, "}\n");
    break;
  case NIMBLE_LN_S_ASSIGN:
    indent(b, level);
    put_var(b, s->var);
    put(b, " = ");
    print_expr(b, s->value);
    put(b, "\n");
    break;
  case NIMBLE_LN_S_STORE:
    indent(b, level);
    put(b, "%s[", s->param->name);
    if (b->canonical) put(b, "p%d ", s->param->index);
    print_expr(b, s->index);
    put(b, "] = ");
    print_expr(b, s->value);
    put(b, "\n");
    break;
  case NIMBLE_LN_S_IF:
    indent(b, level);
    put(b, "if ");
    print_expr(b, s->value);
    put(b, " {\n");
    print_stmt(b, s->body, level + 1);
    if (s->else_) {
      indent(b, level);
      put(b, "} else {\n");
      print_stmt(b, s->else_, level + 1);
    }
    indent(b, level);
    put(b, "}\n");
    break;
  case NIMBLE_LN_S_CHECK:
    indent(b, level);
    put(b, "check ");
    print_expr(b, s->value);
    if (b->canonical) put(b, " else %zu:%s\n", strlen(s->message), s->message);
    else put(b, " else \"%s\"\n", s->message);
    break;
  case NIMBLE_LN_S_SGEMM: {
    const nimble_ln_sgemm_desc_t *d = &s->sgemm;
    indent(b, level);
    put(b, "sgemm(%s%s, %s%s, m=", d->trans_a ? "T " : "", d->a->name, d->trans_b ? "T " : "",
        d->b->name);
    print_expr(b, d->m);
    put(b, ", n=");
    print_expr(b, d->n);
    put(b, ", k=");
    print_expr(b, d->k);
    put(b, ", alpha=%g, beta=%g -> %s", d->alpha, d->beta, d->c->name);
    if (d->epilogue) {
      if (d->row_bias) {
        put(b, ", + %s[", d->row_bias->name);
        print_expr(b, d->row_bias_offset);
        put(b, " + row]");
      }
      if (d->col_bias) {
        put(b, ", + %s[", d->col_bias->name);
        print_expr(b, d->col_bias_offset);
        put(b, " + col]");
      }
      if (d->residual) {
        put(b, ", + %s[", d->residual->name);
        print_expr(b, d->residual_offset);
        put(b, " + row * ");
        print_expr(b, d->ldr);
        put(b, " + col]");
      }
      put(b, ", clamp [%a, %a]", (double)d->lo, (double)d->hi);
    }
    put(b, ")\n");
    if (b->canonical) {
      nimble_ln_expr *const rest[6] = {d->a_offset, d->b_offset, d->c_offset, d->lda, d->ldb, d->ldc};
      indent(b, level);
      put(b, "# sgemm p%d p%d p%d %a %a", d->a->index, d->b->index, d->c->index, (double)d->alpha,
          (double)d->beta);
      if (d->epilogue)
        put(b, " epi p%d p%d p%d", d->row_bias ? d->row_bias->index : -1, d->col_bias ? d->col_bias->index : -1,
            d->residual ? d->residual->index : -1);
      for (int i = 0; i < 6; i++) {
        put(b, " ");
        print_expr(b, rest[i]);
      }
      put(b, "\n");
    }
    break;
  }
  case NIMBLE_LN_S_CONV3X3: {
    /* Every field, in both forms: the canonical text keys the kernel cache. */
    const nimble_ln_conv3x3_desc_t *d = &s->conv3x3;
    static const char *const names[] = {"x_at", "w_at", "y_at", "c", "h", "w", "k", "pad_t", "pad_l", "oh", "ow"};
    nimble_ln_expr *const es[] = {d->x_offset, d->w_offset, d->y_offset, d->c,  d->h, d->width,
                                  d->k,        d->pad_t,    d->pad_l,    d->oh, d->ow};
    indent(b, level);
    put(b, "conv3x3(p%d %s, p%d %s -> p%d %s", d->x->index, d->x->name, d->w->index, d->w->name, d->y->index,
        d->y->name);
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
      put(b, ", %s=", names[i]);
      print_expr(b, es[i]);
    }
    if (d->row_bias) {
      put(b, ", + p%d %s[", d->row_bias->index, d->row_bias->name);
      print_expr(b, d->row_bias_offset);
      put(b, " + channel]");
    }
    if (d->residual) {
      put(b, ", + p%d %s[", d->residual->index, d->residual->name);
      print_expr(b, d->residual_offset);
      put(b, " + channel * ");
      print_expr(b, d->ldr);
      put(b, " + pixel]");
    }
    put(b, ", clamp [%a, %a])\n", (double)d->lo, (double)d->hi);
    break;
  }
  }
}

static nimble_status_t print_kernel(const nimble_ln_kernel *k, int canonical, char **out) {
  *out = NULL;
  buf b = {0};
  b.canonical = canonical;
  put(&b, "kernel %s(", k->name);
  for (int i = 0; i < k->n_params; i++) {
    const nimble_ln_param *p = k->params[i];
    put(&b, "%s%s %s: %s[%d]", i ? ", " : "", p->scratch ? "scratch" : p->is_output ? "out" : "in", p->name,
        nimble_ln_type_name(p->dtype), p->rank);
  }
  put(&b, ") {\n");
  for (int i = 0; i < k->n_specs; i++)
    put(&b, "  # variant when shape(%s, %d) %% %lld == 0\n", k->specs[i].param->name,
        k->specs[i].axis, (long long)k->specs[i].factor);
  for (int i = 0; canonical && i < k->n_specs; i++) put(&b, "  # p%d\n", k->specs[i].param->index);
  if (k->in_place) put(&b, "  # called in place\n");
  for (int i = 0; i < k->n_params; i++)
    if (k->params[i]->scratch) {
      put(&b, "  # scratch %s: ", k->params[i]->name);
      print_expr(&b, k->params[i]->scratch);
      put(&b, " elements from env->workspace_alloc\n");
    }
  print_stmt(&b, k->body, 1);
  put(&b, "}\n");
  free(b.vars);
  if (b.failed) {
    free(b.data);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory printing kernel '%s'", k->name);
  }
  *out = b.data;
  return nimble_ok();
}

nimble_status_t nimble_ln_kernel_print(const nimble_ln_kernel *k, char **out) { return print_kernel(k, 0, out); }

nimble_status_t nimble_ln_kernel_print_canonical(const nimble_ln_kernel *k, char **out) {
  return print_kernel(k, 1, out);
}
