/* Exhaustiveness of match: whether the arms cover every value, and if not,
 * an example of a value none matches. This is Maranget's usefulness check
 * ("Warnings for pattern matching", JFP 2007): a match is exhaustive when
 * the all-wildcard row is not useful after its arms. Rows are arrays of
 * patterns where NULL (or a variable) stands for a wildcard. */
#include <stdlib.h>
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/typing.h"

typedef struct matrix {
  const nimble_pattern ***rows; /* rows[i][0..ncols) */
  size_t nrows, ncols;
} matrix;

typedef struct ctx {
  nimble_arena *arena; /* witness patterns */
  bool oom;
  int budget; /* bounds the work on pathological matches */
} ctx;

static bool is_wild(const nimble_pattern *p) {
  return !p || p->kind == NIMBLE_PATTERN_WILDCARD || p->kind == NIMBLE_PATTERN_VAR;
}

static void matrix_free(matrix *m) {
  for (size_t i = 0; i < m->nrows; i++) free(m->rows[i]);
  free(m->rows);
}

/* Rows whose head matches `head` (a constructor, or a tuple of arity k when
 * ctor is NULL), with the head replaced by its sub-patterns. */
static bool specialize(const matrix *in, const nimble_constructor *ctor, size_t arity, matrix *out) {
  out->ncols = arity + in->ncols - 1;
  out->nrows = 0;
  out->rows = calloc(in->nrows ? in->nrows : 1, sizeof(*out->rows));
  if (!out->rows) return false;
  for (size_t i = 0; i < in->nrows; i++) {
    const nimble_pattern *h = in->rows[i][0];
    if (!is_wild(h) && ((ctor && (h->kind != NIMBLE_PATTERN_CTOR || h->ctor != ctor)) ||
                        (!ctor && h->kind != NIMBLE_PATTERN_TUPLE)))
      continue;
    const nimble_pattern **row = calloc(out->ncols ? out->ncols : 1, sizeof(*row));
    if (!row) return false;
    for (size_t k = 0; k < arity; k++) row[k] = is_wild(h) || k >= h->num_subs ? NULL : h->subs[k];
    memcpy(row + arity, in->rows[i] + 1, (in->ncols - 1) * sizeof(*row));
    out->rows[out->nrows++] = row;
  }
  return true;
}

/* Rows with a wildcard head, without it. */
static bool default_matrix(const matrix *in, matrix *out) {
  out->ncols = in->ncols - 1;
  out->nrows = 0;
  out->rows = calloc(in->nrows ? in->nrows : 1, sizeof(*out->rows));
  if (!out->rows) return false;
  for (size_t i = 0; i < in->nrows; i++) {
    if (!is_wild(in->rows[i][0])) continue;
    const nimble_pattern **row = calloc(out->ncols ? out->ncols : 1, sizeof(*row));
    if (!row) return false;
    memcpy(row, in->rows[i] + 1, out->ncols * sizeof(*row));
    out->rows[out->nrows++] = row;
  }
  return true;
}

/* Whether the wildcard row is useful for m; if so, w[0..ncols) gets a
 * witness (patterns nothing in m matches). */
static bool useful(ctx *c, const matrix *m, const nimble_pattern **w) {
  if (c->oom || --c->budget < 0) return false;
  if (m->ncols == 0) return m->nrows == 0;
  const nimble_pattern *head = NULL;
  for (size_t i = 0; i < m->nrows && !head; i++)
    if (!is_wild(m->rows[i][0])) head = m->rows[i][0];
  const nimble_pattern **sub = calloc(m->ncols + 64, sizeof(*sub));
  if (!sub) {
    c->oom = true;
    return false;
  }
  bool result = false;
  matrix s = {0};
  if (head && head->kind == NIMBLE_PATTERN_TUPLE) {
    size_t k = head->num_subs;
    if (!specialize(m, NULL, k, &s)) c->oom = true;
    else if (k <= 64 && useful(c, &s, sub)) {
      w[0] = nimble_ir_pattern_tuple(c->arena, k, sub, NULL);
      memcpy(w + 1, sub + k, (m->ncols - 1) * sizeof(*w));
      result = true;
    }
    matrix_free(&s);
  } else if (head) {
    const nimble_typedef *td = head->ctor->owner;
    bool all = true;
    for (size_t t = 0; t < td->num_ctors && all; t++) {
      bool seen = false;
      for (size_t i = 0; i < m->nrows && !seen; i++) {
        const nimble_pattern *h = m->rows[i][0];
        seen = !is_wild(h) && h->kind == NIMBLE_PATTERN_CTOR && h->ctor == td->ctors[t];
      }
      if (!seen) {
        all = false;
        /* A constructor no arm names: the default matrix decides. */
        matrix d = {0};
        if (!default_matrix(m, &d)) c->oom = true;
        else if (useful(c, &d, sub)) {
          const nimble_pattern *wild[64] = {NULL};
          size_t n = td->ctors[t]->num_fields < 64 ? td->ctors[t]->num_fields : 64;
          for (size_t k = 0; k < n; k++) wild[k] = nimble_ir_pattern_wildcard(c->arena, NULL);
          w[0] = nimble_ir_pattern_ctor(c->arena, td->ctors[t], n, wild, NULL);
          memcpy(w + 1, sub, (m->ncols - 1) * sizeof(*w));
          result = true;
        }
        matrix_free(&d);
      }
    }
    for (size_t t = 0; all && t < td->num_ctors && !result; t++) {
      const nimble_constructor *ctor = td->ctors[t];
      size_t k = ctor->num_fields;
      if (!specialize(m, ctor, k, &s)) c->oom = true;
      else if (k <= 64 && useful(c, &s, sub)) {
        w[0] = nimble_ir_pattern_ctor(c->arena, ctor, k, sub, NULL);
        memcpy(w + 1, sub + k, (m->ncols - 1) * sizeof(*w));
        result = true;
      }
      matrix_free(&s);
      memset(&s, 0, sizeof s);
    }
  } else {
    matrix d = {0};
    if (!default_matrix(m, &d)) c->oom = true;
    else if (useful(c, &d, sub)) {
      w[0] = nimble_ir_pattern_wildcard(c->arena, NULL);
      memcpy(w + 1, sub, (m->ncols - 1) * sizeof(*w));
      result = true;
    }
    matrix_free(&d);
  }
  free(sub);
  return result;
}

nimble_status_t nimble_typing_match_exhaustive(nimble_arena *arena, const nimble_expr *match,
                                               bool *exhaustive, const char **missing) {
  if (match->kind != NIMBLE_EXPR_MATCH)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "not a match expression");
  ctx c = {arena, false, 100000};
  matrix m = {0};
  m.ncols = 1;
  m.rows = calloc(match->u.match.num_clauses + 1, sizeof(*m.rows));
  if (!m.rows) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory checking a match");
  for (size_t i = 0; i < match->u.match.num_clauses; i++) {
    m.rows[i] = calloc(1, sizeof(*m.rows[i]));
    if (!m.rows[i]) {
      c.oom = true;
      break;
    }
    m.rows[i][0] = match->u.match.clauses[i].pattern;
    m.nrows++;
  }
  const nimble_pattern *w[1] = {NULL};
  bool is_useful = !c.oom && useful(&c, &m, w);
  matrix_free(&m);
  if (c.oom) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory checking a match");
  if (c.budget < 0)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "match too complex to check for exhaustiveness");
  *exhaustive = !is_useful;
  if (missing) {
    *missing = NULL;
    if (is_useful) {
      nimble_strbuf b;
      nimble_strbuf_init(&b);
      if (w[0]) nimble_print_pattern(&b, w[0]);
      else nimble_strbuf_puts(&b, "_");
      *missing = b.failed ? NULL : nimble_arena_strndup(arena, b.data ? b.data : "", b.len);
      nimble_strbuf_deinit(&b);
    }
  }
  return nimble_ok();
}

/* Walks every expression reachable from e; lets in a loop. */
static nimble_status_t check_expr(nimble_arena *arena, const nimble_expr *e, int depth) {
  if (!e) return nimble_ok();
  if (depth > 10000) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "expression nested too deeply");
  while (e->kind == NIMBLE_EXPR_LET) {
    NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.let.value, depth + 1));
    e = e->u.let.body;
  }
  switch (e->kind) {
    case NIMBLE_EXPR_CALL:
      NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.call.callee, depth + 1));
      for (size_t i = 0; i < e->u.call.num_args; i++)
        NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.call.args[i], depth + 1));
      return nimble_ok();
    case NIMBLE_EXPR_IF:
      NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.if_.cond, depth + 1));
      NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.if_.then_branch, depth + 1));
      return check_expr(arena, e->u.if_.else_branch, depth + 1);
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++)
        NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.tuple.fields[i], depth + 1));
      return nimble_ok();
    case NIMBLE_EXPR_PROJ: return check_expr(arena, e->u.proj.tuple, depth + 1);
    case NIMBLE_EXPR_FUNC: return check_expr(arena, e->u.func.body, depth + 1);
    case NIMBLE_EXPR_MATCH: {
      NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.match.scrutinee, depth + 1));
      for (size_t i = 0; i < e->u.match.num_clauses; i++)
        NIMBLE_RETURN_IF_ERROR(check_expr(arena, e->u.match.clauses[i].body, depth + 1));
      bool ok;
      const char *missing;
      NIMBLE_RETURN_IF_ERROR(nimble_typing_match_exhaustive(arena, e, &ok, &missing));
      if (!ok)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s:%u:%u: match is not exhaustive: no arm matches %s",
                                  e->loc.file ? e->loc.file : "<built IR>", e->loc.line, e->loc.col,
                                  missing ? missing : "some value");
      return nimble_ok();
    }
    default: return nimble_ok();
  }
}

nimble_status_t nimble_typing_check_matches(const nimble_module *m) {
  nimble_arena *arena = nimble_module_arena(m);
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    NIMBLE_RETURN_IF_ERROR_CTX(check_expr(arena, g->func, 0), "in @%s", g->name);
  }
  return nimble_ok();
}
