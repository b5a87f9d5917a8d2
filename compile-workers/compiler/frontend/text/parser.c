/* The .nir parser: tokens to a module, names resolved as it goes.
 *
 * Three passes over the tokens let a program use a type, constructor or
 * global before its definition: pass 0 collects the names of types (with
 * their arity) and of global functions, pass 1 parses type definitions,
 * pass 2 parses function definitions. docs/ir.md has the grammar. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/text/lexer.h"
#include "nimble/nir.h"

#define MAX_DEPTH 500

typedef struct name_entry {
  const char *name; /* arena */
  const nimble_expr *var;   /* locals */
  const nimble_type *type;  /* type parameters */
  nimble_dim_t dim;         /* symbolic dims */
  size_t arity;             /* type names */
} name_entry;

typedef struct name_stack {
  name_entry *items;
  size_t n, cap;
} name_stack;

typedef struct parser {
  nimble_arena *arena;
  nimble_module *m;
  const char *file;
  nir_token *toks;
  size_t ntoks, pos;
  int depth;
  name_stack locals;
  name_stack tparams;
  name_stack dims;
  name_stack typenames; /* pass 0: type names and arity */
  name_stack globals;   /* pass 0: global names */
} parser;

/* ---- helpers ---------------------------------------------------------------- */

static const nir_token *peek(parser *p) { return &p->toks[p->pos]; }
static const nir_token *peek_at(parser *p, size_t k) {
  size_t i = p->pos + k;
  return &p->toks[i < p->ntoks ? i : p->ntoks - 1];
}
static const nir_token *next(parser *p) {
  const nir_token *t = &p->toks[p->pos];
  if (t->kind != NIR_EOF) p->pos++;
  return t;
}
static bool is(parser *p, nir_tok_kind k) { return peek(p)->kind == k; }
static bool is_word(const nir_token *t, const char *w) {
  return t->kind == NIR_IDENT && strlen(w) == t->len && memcmp(t->text, w, t->len) == 0;
}

static nimble_src_loc_t loc_of(parser *p, const nir_token *t) {
  nimble_src_loc_t l = {p->file, t->line, t->col};
  return l;
}

static nimble_status_t err_at(parser *p, const nir_token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static nimble_status_t err_at(parser *p, const nir_token *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(NIMBLE_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return nimble_status_annotate(s, "%s:%u:%u", p->file, t->line, t->col);
}

static nimble_status_t expected(parser *p, const char *what) {
  char found[96];
  nir_token_describe(peek(p), found, sizeof found);
  return err_at(p, peek(p), "expected %s, found %s", what, found);
}

static nimble_status_t expect(parser *p, nir_tok_kind k, const char *what) {
  if (!is(p, k)) return expected(p, what);
  next(p);
  return nimble_ok();
}

#define CHECK_ALLOC(x) \
  do {                 \
    if (!(x)) return NIMBLE_OOM_IN("parsing IR"); \
  } while (0)

static char *tok_str(parser *p, const nir_token *t) { return nimble_arena_strndup(p->arena, t->text, t->len); }

static bool stack_push(name_stack *s, name_entry e) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    name_entry *it = realloc(s->items, cap * sizeof(*it));
    if (!it) return false;
    s->items = it;
    s->cap = cap;
  }
  s->items[s->n++] = e;
  return true;
}

static const name_entry *stack_find(const name_stack *s, const char *text, size_t len) {
  for (size_t i = s->n; i-- > 0;)
    if (strlen(s->items[i].name) == len && memcmp(s->items[i].name, text, len) == 0) return &s->items[i];
  return NULL;
}

/* Dynamic arrays of pointers built while parsing, copied to the arena by
 * the IR builders and freed here. */
typedef struct ptr_vec {
  const void **items;
  size_t n, cap;
} ptr_vec;

static bool vec_push(ptr_vec *v, const void *x) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    const void **it = realloc(v->items, cap * sizeof(*it));
    if (!it) return false;
    v->items = it;
    v->cap = cap;
  }
  v->items[v->n++] = x;
  return true;
}

static nimble_status_t enter(parser *p) {
  if (++p->depth > MAX_DEPTH) return err_at(p, peek(p), "nesting deeper than %d levels", MAX_DEPTH);
  return nimble_ok();
}

/* ---- numbers ------------------------------------------------------------------ */

static nimble_status_t tok_int(parser *p, const nir_token *t, int64_t *out) {
  char buf[64];
  if (t->kind != NIR_INT || t->len >= sizeof buf) return err_at(p, t, "expected an integer");
  memcpy(buf, t->text, t->len);
  buf[t->len] = '\0';
  errno = 0;
  char *end;
  long long v = strtoll(buf, &end, 0);
  if (errno == ERANGE || *end) return err_at(p, t, "integer %s is out of range", buf);
  *out = v;
  return nimble_ok();
}

/* A float from INT, FLOAT or the words inf / nan. */
static nimble_status_t tok_double(parser *p, const nir_token *t, double *out) {
  char buf[128];
  if (is_word(t, "inf")) return *out = INFINITY, nimble_ok();
  if (is_word(t, "nan")) return *out = NAN, nimble_ok();
  if ((t->kind != NIR_INT && t->kind != NIR_FLOAT) || t->len >= sizeof buf)
    return err_at(p, t, "expected a number");
  if (t->kind == NIR_INT) {
    int64_t i;
    NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &i));
    *out = (double)i;
    return nimble_ok();
  }
  memcpy(buf, t->text, t->len);
  buf[t->len] = '\0';
  *out = strtod(buf, NULL);
  return nimble_ok();
}

/* ---- types ------------------------------------------------------------------- */

static nimble_status_t parse_type(parser *p, const nimble_type **out);

static nimble_status_t parse_dim(parser *p, nimble_dim_t *out) {
  const nir_token *t = peek(p);
  if (t->kind == NIR_QUESTION) {
    next(p);
    *out = nimble_dim_any();
    return nimble_ok();
  }
  if (t->kind == NIR_INT) {
    int64_t v;
    NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &v));
    if (v < 0) return err_at(p, t, "a dimension cannot be negative");
    next(p);
    *out = nimble_dim_const(v);
    return nimble_ok();
  }
  if (t->kind == NIR_IDENT) {
    next(p);
    const name_entry *e = stack_find(&p->dims, t->text, t->len);
    if (e) {
      *out = e->dim;
      return nimble_ok();
    }
    /* A new symbolic dim, scoped to the enclosing definition. */
    name_entry ne = {0};
    CHECK_ALLOC(ne.name = tok_str(p, t));
    ne.dim = nimble_dim_var(nimble_module_fresh_var_id(p->m), ne.name);
    CHECK_ALLOC(stack_push(&p->dims, ne));
    *out = ne.dim;
    return nimble_ok();
  }
  return expected(p, "a dimension (an integer, '?' or a name)");
}

static nimble_status_t parse_type_list(parser *p, nir_tok_kind close, const char *close_what, ptr_vec *v) {
  nimble_status_t st = nimble_ok();
  if (is(p, close)) {
    next(p);
    return nimble_ok();
  }
  for (;;) {
    const nimble_type *t;
    if ((st = parse_type(p, &t))) return st;
    if (!vec_push(v, t)) return NIMBLE_OOM_IN("parsing IR");
    if (is(p, NIR_COMMA)) {
      next(p);
      if (is(p, close)) {
        next(p);
        return nimble_ok();
      }
      continue;
    }
    return expect(p, close, close_what);
  }
}

static nimble_status_t parse_tensor_type(parser *p, const nimble_type **out) {
  nimble_dim_t dims[NIMBLE_MAX_RANK * 8];
  size_t rank = 0;
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LBRACKET, "'[' after Tensor"));
  if (is(p, NIR_STAR)) { /* Tensor[*, dtype]: the rank is not known */
    next(p);
    NIMBLE_RETURN_IF_ERROR(expect(p, NIR_COMMA, "',' before the dtype"));
    const nir_token *dt = peek(p);
    nimble_dtype_t dtype;
    if (dt->kind != NIR_IDENT || !nimble_dtype_from_name(dt->text, dt->len, &dtype))
      return expected(p, "a dtype (float32, int64, bool, ...)");
    next(p);
    NIMBLE_RETURN_IF_ERROR(expect(p, NIR_RBRACKET, "']' closing the tensor type"));
    CHECK_ALLOC(*out = nimble_type_unranked_tensor(p->arena, dtype));
    return nimble_ok();
  }
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LPAREN, "'(' starting the shape (or '*' for an unknown rank)"));
  while (!is(p, NIR_RPAREN)) {
    if (rank == sizeof dims / sizeof dims[0]) return err_at(p, peek(p), "too many dimensions");
    NIMBLE_RETURN_IF_ERROR(parse_dim(p, &dims[rank++]));
    if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RPAREN)) return expected(p, "',' or ')' in the shape");
  }
  next(p);
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_COMMA, "',' before the dtype"));
  const nir_token *dt = peek(p);
  nimble_dtype_t dtype;
  if (dt->kind != NIR_IDENT || !nimble_dtype_from_name(dt->text, dt->len, &dtype))
    return expected(p, "a dtype (float32, int64, bool, ...)");
  next(p);
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_RBRACKET, "']' closing the tensor type"));
  CHECK_ALLOC(*out = nimble_type_tensor(p->arena, dtype, rank, dims));
  return nimble_ok();
}

static nimble_status_t parse_type(parser *p, const nimble_type **out) {
  const nir_token *t = peek(p);
  nimble_status_t st = enter(p);
  if (st) return st;
  ptr_vec v = {0}, w = {0};
  if (is_word(t, "Tensor")) {
    next(p);
    st = parse_tensor_type(p, out);
  } else if (t->kind == NIR_LPAREN) {
    next(p);
    /* (), (T,), (T, U): a trailing comma marks a 1-tuple. */
    st = parse_type_list(p, NIR_RPAREN, "',' or ')' in the tuple type", &v);
    if (!st && !(*out = nimble_type_tuple(p->arena, v.n, (const nimble_type *const *)v.items))) st = NIMBLE_OOM_IN("parsing IR");
  } else if (is_word(t, "fn")) {
    next(p);
    const nimble_type *ret;
    if (!(st = expect(p, NIR_LPAREN, "'(' after fn")) &&
        !(st = parse_type_list(p, NIR_RPAREN, "',' or ')' in the parameter types", &v)) &&
        !(st = expect(p, NIR_ARROW, "'->' and the result type")) && !(st = parse_type(p, &ret))) {
      if (!(*out = nimble_type_func(p->arena, 0, NULL, v.n, (const nimble_type *const *)v.items, ret)))
        st = NIMBLE_OOM_IN("parsing IR");
    }
  } else if (t->kind == NIR_IDENT) {
    nimble_dtype_t dtype;
    const name_entry *e;
    next(p);
    if (nimble_dtype_from_name(t->text, t->len, &dtype)) {
      /* float32 alone is the scalar Tensor[(), float32]. */
      if (!(*out = nimble_type_scalar(p->arena, dtype))) st = NIMBLE_OOM_IN("parsing IR");
    } else if ((e = stack_find(&p->tparams, t->text, t->len))) {
      *out = e->type;
    } else if ((e = stack_find(&p->typenames, t->text, t->len))) {
      if (is(p, NIR_LBRACKET)) {
        next(p);
        st = parse_type_list(p, NIR_RBRACKET, "',' or ']' in the type arguments", &w);
      }
      if (!st && w.n != e->arity)
        st = err_at(p, t, "type '%s' takes %zu type arguments, got %zu", e->name, e->arity, w.n);
      if (!st && !(*out = nimble_type_adt(p->arena, e->name, w.n, (const nimble_type *const *)w.items)))
        st = NIMBLE_OOM_IN("parsing IR");
    } else {
      st = err_at(p, t, "unknown type '%.*s'", (int)t->len, t->text);
    }
  } else {
    st = expected(p, "a type");
  }
  free(v.items);
  free(w.items);
  p->depth--;
  return st;
}

/* [A, B]: type parameters, each a fresh variable in scope. */
static nimble_status_t parse_type_params(parser *p, ptr_vec *v) {
  if (!is(p, NIR_LBRACKET)) return nimble_ok();
  next(p);
  for (;;) {
    const nir_token *t = peek(p);
    if (t->kind != NIR_IDENT) return expected(p, "a type parameter name");
    next(p);
    name_entry e = {0};
    CHECK_ALLOC(e.name = tok_str(p, t));
    CHECK_ALLOC(e.type = nimble_type_var(p->arena, nimble_module_fresh_var_id(p->m), e.name));
    CHECK_ALLOC(stack_push(&p->tparams, e));
    CHECK_ALLOC(vec_push(v, e.type));
    if (is(p, NIR_COMMA)) {
      next(p);
      continue;
    }
    return expect(p, NIR_RBRACKET, "',' or ']' after the type parameters");
  }
}

/* ---- expressions ------------------------------------------------------------- */

static nimble_status_t parse_expr(parser *p, const nimble_expr **out);

/* %x or %x: T, bound as a new variable (pushed on the local scope). */
static nimble_status_t parse_binder(parser *p, const nimble_expr **out) {
  const nir_token *t = peek(p);
  if (t->kind != NIR_LOCAL) return expected(p, "a variable (%name)");
  next(p);
  const nimble_type *ann = NULL;
  if (is(p, NIR_COLON)) {
    next(p);
    NIMBLE_RETURN_IF_ERROR(parse_type(p, &ann));
  }
  nimble_src_loc_t loc = loc_of(p, t);
  name_entry e = {0};
  CHECK_ALLOC(e.name = tok_str(p, t));
  CHECK_ALLOC(e.var = nimble_ir_var(p->arena, e.name, ann, &loc));
  CHECK_ALLOC(stack_push(&p->locals, e));
  *out = e.var;
  return nimble_ok();
}

static nimble_status_t parse_attr_value(parser *p, nimble_attr_value_t *v) {
  const nir_token *t = peek(p);
  memset(v, 0, sizeof *v);
  if (t->kind == NIR_INT) {
    v->kind = NIMBLE_ATTR_INT;
    NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &v->i));
    next(p);
    return nimble_ok();
  }
  if (t->kind == NIR_FLOAT || is_word(t, "inf") || is_word(t, "nan")) {
    v->kind = NIMBLE_ATTR_FLOAT;
    NIMBLE_RETURN_IF_ERROR(tok_double(p, t, &v->f));
    next(p);
    return nimble_ok();
  }
  if (t->kind == NIR_STRING) {
    char *s = nimble_arena_alloc(p->arena, t->len + 1);
    CHECK_ALLOC(s);
    size_t k = 0;
    for (size_t i = 0; i < t->len; i++) {
      char c = t->text[i];
      if (c == '\\' && i + 1 < t->len) {
        char e = t->text[++i];
        if (e == 'n') c = '\n';
        else if (e == 'x' && i + 2 < t->len) {
          char hex[3] = {t->text[i + 1], t->text[i + 2], 0};
          c = (char)strtol(hex, NULL, 16);
          i += 2;
        } else c = e;
      }
      s[k++] = c;
    }
    s[k] = '\0';
    v->kind = NIMBLE_ATTR_STRING;
    v->s = s;
    next(p);
    return nimble_ok();
  }
  if (t->kind == NIR_LBRACKET) {
    next(p);
    size_t n = 0, cap = 0;
    int64_t *ints = NULL;
    while (!is(p, NIR_RBRACKET)) {
      if (n == cap) {
        cap = cap ? cap * 2 : 8;
        int64_t *ni = nimble_arena_calloc(p->arena, cap, sizeof(int64_t));
        CHECK_ALLOC(ni);
        if (n) memcpy(ni, ints, n * sizeof(int64_t));
        ints = ni;
      }
      if (!is(p, NIR_INT)) return expected(p, "an integer in the list");
      NIMBLE_RETURN_IF_ERROR(tok_int(p, peek(p), &ints[n++]));
      next(p);
      if (is(p, NIR_COMMA)) next(p);
      else if (!is(p, NIR_RBRACKET)) return expected(p, "',' or ']' in the list");
    }
    next(p);
    v->kind = NIMBLE_ATTR_INTS;
    v->n = n;
    v->ints = ints;
    return nimble_ok();
  }
  return expected(p, "an attribute value (integer, float, string or [integers])");
}

static nimble_status_t store_element(parser *p, const nir_token *t, nimble_dtype_t dt, void *data, size_t i) {
  int64_t iv = 0;
  double dv = 0;
  bool is_bool_word = is_word(t, "true") || is_word(t, "false");
  if (dt == NIMBLE_DTYPE_FLOAT32 || dt == NIMBLE_DTYPE_FLOAT64) {
    NIMBLE_RETURN_IF_ERROR(tok_double(p, t, &dv));
    if (dt == NIMBLE_DTYPE_FLOAT32) ((float *)data)[i] = (float)dv;
    else ((double *)data)[i] = dv;
    return nimble_ok();
  }
  if (dt == NIMBLE_DTYPE_BOOL && is_bool_word) {
    ((uint8_t *)data)[i] = is_word(t, "true");
    return nimble_ok();
  }
  if (dt == NIMBLE_DTYPE_UINT64) {
    /* The one type whose values pass INT64_MAX. */
    char buf[64];
    if (t->kind != NIR_INT || t->len >= sizeof buf || t->text[0] == '-')
      return err_at(p, t, "expected an unsigned integer");
    memcpy(buf, t->text, t->len);
    buf[t->len] = '\0';
    errno = 0;
    char *end;
    unsigned long long u = strtoull(buf, &end, 0);
    if (errno == ERANGE || *end) return err_at(p, t, "integer %s does not fit uint64", buf);
    uint64_t v = u;
    memcpy((char *)data + 8 * i, &v, 8);
    return nimble_ok();
  }
  NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &iv));
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (dt) {
    case NIMBLE_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case NIMBLE_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case NIMBLE_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case NIMBLE_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
    case NIMBLE_DTYPE_FLOAT16:
    case NIMBLE_DTYPE_BFLOAT16:
    case NIMBLE_DTYPE_UINT16: lo = 0, hi = UINT16_MAX; break;
    case NIMBLE_DTYPE_UINT32: lo = 0, hi = UINT32_MAX; break;
    case NIMBLE_DTYPE_BOOL: lo = 0, hi = 1; break;
    default: break;
  }
  if (iv < lo || iv > hi) return err_at(p, t, "%" PRId64 " does not fit %s", iv, nimble_dtype_name(dt));
  switch (dt) {
    case NIMBLE_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)iv; break;
    case NIMBLE_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)iv; break;
    case NIMBLE_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)iv; break;
    case NIMBLE_DTYPE_INT64: ((int64_t *)data)[i] = iv; break;
    case NIMBLE_DTYPE_UINT8:
    case NIMBLE_DTYPE_BOOL: ((uint8_t *)data)[i] = (uint8_t)iv; break;
    case NIMBLE_DTYPE_FLOAT16:
    case NIMBLE_DTYPE_BFLOAT16:
    case NIMBLE_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)iv; break;
    case NIMBLE_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)iv; break;
    default: break;
  }
  return nimble_ok();
}

/* const[(2, 2), float32]{1, 2, 3, 4} */
static nimble_status_t parse_const(parser *p, const nir_token *start, const nimble_expr **out) {
  int64_t dims[64];
  size_t rank = 0, count = 1;
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LBRACKET, "'[' after const"));
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LPAREN, "'(' starting the constant's shape"));
  while (!is(p, NIR_RPAREN)) {
    if (rank == 64) return err_at(p, peek(p), "constant of too high a rank");
    const nir_token *t = peek(p);
    if (t->kind != NIR_INT) return expected(p, "an integer dimension");
    NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &dims[rank]));
    if (dims[rank] < 0) return err_at(p, t, "a dimension cannot be negative");
    if (dims[rank] && count > (SIZE_MAX / 16) / (size_t)dims[rank]) return err_at(p, t, "constant too large");
    count *= (size_t)dims[rank++];
    next(p);
    if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RPAREN)) return expected(p, "',' or ')' in the shape");
  }
  next(p);
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_COMMA, "',' before the dtype"));
  const nir_token *dt = peek(p);
  nimble_dtype_t dtype;
  if (dt->kind != NIR_IDENT || !nimble_dtype_from_name(dt->text, dt->len, &dtype))
    return expected(p, "a dtype");
  next(p);
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_RBRACKET, "']' after the dtype"));
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LBRACE, "'{' starting the elements"));
  void *data = nimble_arena_calloc(p->arena, count ? count : 1, nimble_dtype_size(dtype));
  CHECK_ALLOC(data);
  size_t i = 0;
  while (!is(p, NIR_RBRACE)) {
    const nir_token *t = peek(p);
    if (i >= count) return err_at(p, t, "more than the %zu elements the shape holds", count);
    NIMBLE_RETURN_IF_ERROR(store_element(p, t, dtype, data, i++));
    next(p);
    if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RBRACE)) return expected(p, "',' or '}' between elements");
  }
  if (i != count) return err_at(p, peek(p), "%zu elements for a shape of %zu", i, count);
  next(p);
  nimble_src_loc_t loc = loc_of(p, start);
  CHECK_ALLOC(*out = nimble_ir_constant(p->arena, dtype, rank, dims, data, &loc));
  return nimble_ok();
}

static nimble_status_t parse_call_args(parser *p, const nir_token *open, const nimble_expr *callee,
                                       const nimble_expr **out) {
  ptr_vec args = {0};
  nimble_named_attr_t attrs[32];
  size_t nattrs = 0;
  nimble_status_t st = nimble_ok();
  bool is_op = callee->kind == NIMBLE_EXPR_OP;
  while (!st && !is(p, NIR_RPAREN)) {
    if (peek(p)->kind == NIR_IDENT && peek_at(p, 1)->kind == NIR_EQUAL) {
      const nir_token *name = next(p);
      next(p);
      if (!is_op) {
        st = err_at(p, name, "only operator calls take attributes");
        break;
      }
      if (nattrs == 32) {
        st = err_at(p, name, "too many attributes");
        break;
      }
      if (!(attrs[nattrs].name = tok_str(p, name))) {
        st = NIMBLE_OOM_IN("parsing IR");
        break;
      }
      if ((st = parse_attr_value(p, &attrs[nattrs].value))) break;
      nattrs++;
    } else {
      if (nattrs) {
        st = expected(p, "an attribute (name=value): arguments come first");
        break;
      }
      const nimble_expr *a;
      if ((st = parse_expr(p, &a))) break;
      if (!vec_push(&args, a)) {
        st = NIMBLE_OOM_IN("parsing IR");
        break;
      }
    }
    if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RPAREN)) st = expected(p, "',' or ')' in the arguments");
  }
  if (!st) next(p);
  nimble_src_loc_t loc = loc_of(p, open);
  if (!st && is_op) {
    st = nimble_ir_call_op(p->arena, callee->u.op.op, args.n, (const nimble_expr *const *)args.items,
                           attrs, nattrs, &loc, out);
    if (st) st = nimble_status_annotate(st, "%s:%u:%u", p->file, open->line, open->col);
  } else if (!st) {
    if (!(*out = nimble_ir_call(p->arena, callee, args.n, (const nimble_expr *const *)args.items, NULL, &loc)))
      st = NIMBLE_OOM_IN("parsing IR");
  }
  free(args.items);
  return st;
}

static nimble_status_t parse_primary(parser *p, const nimble_expr **out) {
  const nir_token *t = peek(p);
  nimble_src_loc_t loc = loc_of(p, t);
  switch (t->kind) {
    case NIR_LOCAL: {
      const name_entry *e = stack_find(&p->locals, t->text, t->len);
      if (!e) return err_at(p, t, "unknown variable %%%.*s", (int)t->len, t->text);
      next(p);
      *out = e->var;
      return nimble_ok();
    }
    case NIR_GLOBAL: {
      const name_entry *e = stack_find(&p->globals, t->text, t->len);
      if (!e) return err_at(p, t, "unknown global function @%.*s", (int)t->len, t->text);
      next(p);
      CHECK_ALLOC(*out = nimble_ir_global(p->arena, e->name, &loc));
      return nimble_ok();
    }
    case NIR_INT: {
      int64_t v;
      NIMBLE_RETURN_IF_ERROR(tok_int(p, t, &v));
      next(p);
      CHECK_ALLOC(*out = nimble_ir_scalar_i64(p->arena, v, &loc));
      return nimble_ok();
    }
    case NIR_FLOAT: {
      double v;
      NIMBLE_RETURN_IF_ERROR(tok_double(p, t, &v));
      next(p);
      CHECK_ALLOC(*out = nimble_ir_scalar_f32(p->arena, (float)v, &loc));
      return nimble_ok();
    }
    case NIR_LPAREN: {
      next(p);
      if (is(p, NIR_RPAREN)) {
        next(p);
        CHECK_ALLOC(*out = nimble_ir_tuple(p->arena, 0, NULL, &loc));
        return nimble_ok();
      }
      const nimble_expr *first;
      NIMBLE_RETURN_IF_ERROR(parse_expr(p, &first));
      if (is(p, NIR_RPAREN)) {
        next(p);
        *out = first;
        return nimble_ok();
      }
      ptr_vec v = {0};
      nimble_status_t st = vec_push(&v, first) ? nimble_ok() : NIMBLE_OOM_IN("parsing IR");
      while (!st && is(p, NIR_COMMA)) {
        next(p);
        if (is(p, NIR_RPAREN)) break;
        const nimble_expr *f;
        if (!(st = parse_expr(p, &f)) && !vec_push(&v, f)) st = NIMBLE_OOM_IN("parsing IR");
      }
      if (!st) st = expect(p, NIR_RPAREN, "',' or ')' in the tuple");
      if (!st && !(*out = nimble_ir_tuple(p->arena, v.n, (const nimble_expr *const *)v.items, &loc))) st = NIMBLE_OOM_IN("parsing IR");
      free(v.items);
      return st;
    }
    case NIR_IDENT: {
      if (is_word(t, "true") || is_word(t, "false")) {
        uint8_t b = is_word(t, "true");
        next(p);
        CHECK_ALLOC(*out = nimble_ir_constant(p->arena, NIMBLE_DTYPE_BOOL, 0, NULL, &b, &loc));
        return nimble_ok();
      }
      if (is_word(t, "const") && peek_at(p, 1)->kind == NIR_LBRACKET) {
        next(p);
        return parse_const(p, t, out);
      }
      char *name = tok_str(p, t);
      CHECK_ALLOC(name);
      const nimble_constructor *ctor = nimble_module_find_ctor(p->m, name);
      if (ctor) {
        next(p);
        CHECK_ALLOC(*out = nimble_ir_ctor(p->arena, ctor, &loc));
        return nimble_ok();
      }
      const nimble_op *op = nimble_op_find(name);
      if (op) {
        next(p);
        if (!is(p, NIR_LPAREN)) return expected(p, "'(' calling the operator");
        CHECK_ALLOC(*out = nimble_ir_op(p->arena, op, &loc));
        return nimble_ok();
      }
      return err_at(p, t, "unknown operator or constructor '%s'", name);
    }
    default: return expected(p, "an expression");
  }
}

static nimble_status_t parse_postfix(parser *p, const nimble_expr **out) {
  const nimble_expr *e;
  NIMBLE_RETURN_IF_ERROR(parse_primary(p, &e));
  for (;;) {
    const nir_token *t = peek(p);
    if (t->kind == NIR_LPAREN) {
      next(p);
      NIMBLE_RETURN_IF_ERROR(parse_call_args(p, t, e, &e));
    } else if (t->kind == NIR_DOT) {
      next(p);
      const nir_token *it = peek(p);
      int64_t idx;
      if (it->kind != NIR_INT) return expected(p, "a tuple index after '.'");
      NIMBLE_RETURN_IF_ERROR(tok_int(p, it, &idx));
      if (idx < 0) return err_at(p, it, "a tuple index cannot be negative");
      next(p);
      nimble_src_loc_t loc = loc_of(p, t);
      CHECK_ALLOC(e = nimble_ir_proj(p->arena, e, (size_t)idx, &loc));
    } else {
      break;
    }
  }
  *out = e;
  return nimble_ok();
}

static nimble_status_t parse_block(parser *p, const nimble_expr **out) {
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LBRACE, "'{'"));
  NIMBLE_RETURN_IF_ERROR(parse_expr(p, out));
  return expect(p, NIR_RBRACE, "'}'");
}

static nimble_status_t parse_pattern(parser *p, const nimble_pattern **out) {
  const nir_token *t = peek(p);
  nimble_src_loc_t loc = loc_of(p, t);
  NIMBLE_RETURN_IF_ERROR(enter(p));
  nimble_status_t st = nimble_ok();
  ptr_vec subs = {0};
  if (is_word(t, "_")) {
    next(p);
    if (!(*out = nimble_ir_pattern_wildcard(p->arena, &loc))) st = NIMBLE_OOM_IN("parsing IR");
  } else if (t->kind == NIR_LOCAL) {
    const nimble_expr *v;
    if (!(st = parse_binder(p, &v)) && !(*out = nimble_ir_pattern_var(p->arena, v, &loc))) st = NIMBLE_OOM_IN("parsing IR");
  } else if (t->kind == NIR_LPAREN || t->kind == NIR_IDENT) {
    const nimble_constructor *ctor = NULL;
    if (t->kind == NIR_IDENT) {
      char *name = tok_str(p, t);
      if (!name) st = NIMBLE_OOM_IN("parsing IR");
      else if (!(ctor = nimble_module_find_ctor(p->m, name))) st = err_at(p, t, "unknown constructor '%s'", name);
      else next(p);
    }
    if (!st && (t->kind == NIR_LPAREN || is(p, NIR_LPAREN))) {
      next(p);
      while (!st && !is(p, NIR_RPAREN)) {
        const nimble_pattern *sp;
        if ((st = parse_pattern(p, &sp))) break;
        if (!vec_push(&subs, sp)) st = NIMBLE_OOM_IN("parsing IR");
        else if (is(p, NIR_COMMA)) next(p);
        else if (!is(p, NIR_RPAREN)) st = expected(p, "',' or ')' in the pattern");
      }
      if (!st) next(p);
    }
    if (!st && ctor && subs.n != ctor->num_fields)
      st = err_at(p, t, "constructor %s has %zu fields, the pattern %zu", ctor->name, ctor->num_fields, subs.n);
    if (!st) {
      *out = ctor ? nimble_ir_pattern_ctor(p->arena, ctor, subs.n, (const nimble_pattern *const *)subs.items, &loc)
                  : nimble_ir_pattern_tuple(p->arena, subs.n, (const nimble_pattern *const *)subs.items, &loc);
      if (!*out) st = NIMBLE_OOM_IN("parsing IR");
    }
  } else {
    st = expected(p, "a pattern (_, %x, a constructor or a tuple)");
  }
  free(subs.items);
  p->depth--;
  return st;
}

static nimble_status_t parse_match(parser *p, const nir_token *start, const nimble_expr **out) {
  const nimble_expr *scrut;
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LPAREN, "'(' after match"));
  NIMBLE_RETURN_IF_ERROR(parse_expr(p, &scrut));
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_RPAREN, "')' after the matched expression"));
  NIMBLE_RETURN_IF_ERROR(expect(p, NIR_LBRACE, "'{' starting the match arms"));
  nimble_match_clause_t *cl = NULL;
  size_t n = 0, cap = 0;
  nimble_status_t st = nimble_ok();
  while (!st && !is(p, NIR_RBRACE)) {
    size_t mark = p->locals.n;
    nimble_match_clause_t c;
    if ((st = parse_pattern(p, &c.pattern))) break;
    if ((st = expect(p, NIR_FATARROW, "'=>' after the pattern"))) break;
    if ((st = parse_expr(p, &c.body))) break;
    p->locals.n = mark;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      nimble_match_clause_t *nc = realloc(cl, cap * sizeof(*nc));
      if (!nc) {
        st = NIMBLE_OOM_IN("parsing IR");
        break;
      }
      cl = nc;
    }
    cl[n++] = c;
    if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RBRACE)) st = expected(p, "',' or '}' after a match arm");
  }
  if (!st && n == 0) st = err_at(p, peek(p), "a match needs at least one arm");
  if (!st) next(p);
  nimble_src_loc_t loc = loc_of(p, start);
  if (!st && !(*out = nimble_ir_match(p->arena, scrut, n, cl, &loc))) st = NIMBLE_OOM_IN("parsing IR");
  free(cl);
  return st;
}

/* fn [T](%x: A, ...) -> R { body }, after the 'fn' (or the def's name). */
static nimble_status_t parse_func_rest(parser *p, const nir_token *start, const nimble_expr **out) {
  size_t mark_locals = p->locals.n, mark_tparams = p->tparams.n;
  ptr_vec tps = {0}, params = {0};
  const nimble_type *ret = NULL;
  const nimble_expr *body = NULL;
  nimble_status_t st = parse_type_params(p, &tps);
  if (!st) st = expect(p, NIR_LPAREN, "'(' starting the parameters");
  while (!st && !is(p, NIR_RPAREN)) {
    const nimble_expr *v;
    if ((st = parse_binder(p, &v))) break;
    if (!vec_push(&params, v)) st = NIMBLE_OOM_IN("parsing IR");
    else if (is(p, NIR_COMMA)) next(p);
    else if (!is(p, NIR_RPAREN)) st = expected(p, "',' or ')' in the parameters");
  }
  if (!st) next(p);
  if (!st && is(p, NIR_ARROW)) {
    next(p);
    st = parse_type(p, &ret);
  }
  if (!st) st = parse_block(p, &body);
  nimble_src_loc_t loc = loc_of(p, start);
  if (!st && !(*out = nimble_ir_func(p->arena, tps.n, (const nimble_type *const *)tps.items, params.n,
                                     (const nimble_expr *const *)params.items, ret, body, &loc)))
    st = NIMBLE_OOM_IN("parsing IR");
  free(tps.items);
  free(params.items);
  p->locals.n = mark_locals;
  p->tparams.n = mark_tparams;
  return st;
}

typedef struct pending_let {
  const nimble_expr *var, *value;
  nimble_src_loc_t loc;
} pending_let;

static nimble_status_t parse_expr(parser *p, const nimble_expr **out) {
  NIMBLE_RETURN_IF_ERROR(enter(p));
  const nir_token *t = peek(p);
  nimble_status_t st = nimble_ok();
  if (is_word(t, "let")) {
    /* A let chain is parsed in a loop, not by recursion: imported models
     * produce thousands of lets in a row. */
    size_t mark = p->locals.n, n = 0, cap = 0;
    pending_let *lets = NULL;
    while (!st && is_word(peek(p), "let")) {
      const nir_token *lt = next(p);
      pending_let l;
      const nimble_type *ann = NULL;
      const nir_token *vt = peek(p);
      l.loc = loc_of(p, lt);
      if (vt->kind != NIR_LOCAL) {
        st = expected(p, "a variable (%name) after let");
        break;
      }
      next(p);
      if (is(p, NIR_COLON)) {
        next(p);
        if ((st = parse_type(p, &ann))) break;
      }
      if ((st = expect(p, NIR_EQUAL, "'=' in the let"))) break;
      /* The value is parsed before the variable is in scope. */
      if ((st = parse_expr(p, &l.value))) break;
      if ((st = expect(p, NIR_SEMI, "';' after the let's value"))) break;
      name_entry e = {0};
      nimble_src_loc_t vloc = loc_of(p, vt);
      if (!(e.name = tok_str(p, vt)) || !(e.var = nimble_ir_var(p->arena, e.name, ann, &vloc)) ||
          !stack_push(&p->locals, e)) {
        st = NIMBLE_OOM_IN("parsing IR");
        break;
      }
      l.var = e.var;
      if (n == cap) {
        cap = cap ? cap * 2 : 16;
        pending_let *nl = realloc(lets, cap * sizeof(*nl));
        if (!nl) {
          st = NIMBLE_OOM_IN("parsing IR");
          break;
        }
        lets = nl;
      }
      lets[n++] = l;
    }
    const nimble_expr *body = NULL;
    if (!st) st = parse_expr(p, &body);
    for (size_t i = n; !st && i-- > 0;)
      if (!(body = nimble_ir_let(p->arena, lets[i].var, lets[i].value, body, &lets[i].loc))) st = NIMBLE_OOM_IN("parsing IR");
    if (!st) *out = body;
    free(lets);
    p->locals.n = mark;
  } else if (is_word(t, "if")) {
    const nimble_expr *c, *a, *b;
    next(p);
    nimble_src_loc_t loc = loc_of(p, t);
    if (!(st = expect(p, NIR_LPAREN, "'(' after if")) && !(st = parse_expr(p, &c)) &&
        !(st = expect(p, NIR_RPAREN, "')' after the condition")) && !(st = parse_block(p, &a))) {
      if (!is_word(peek(p), "else")) st = expected(p, "'else'");
      else {
        next(p);
        if (is_word(peek(p), "if")) st = parse_expr(p, &b); /* else if */
        else st = parse_block(p, &b);
      }
      if (!st && !(*out = nimble_ir_if(p->arena, c, a, b, &loc))) st = NIMBLE_OOM_IN("parsing IR");
    }
  } else if (is_word(t, "match")) {
    next(p);
    st = parse_match(p, t, out);
  } else if (is_word(t, "fn")) {
    next(p);
    st = parse_func_rest(p, t, out);
  } else {
    st = parse_postfix(p, out);
  }
  p->depth--;
  return st;
}

/* ---- top level ------------------------------------------------------------------- */

/* Skips a definition: to the first '{' at bracket depth 0, then to its '}'. */
static nimble_status_t skip_item(parser *p) {
  const nir_token *start = peek(p);
  int depth = 0;
  while (!is(p, NIR_LBRACE)) {
    if (is(p, NIR_EOF)) return err_at(p, start, "definition without a body");
    next(p);
  }
  for (;;) {
    const nir_token *t = next(p);
    if (t->kind == NIR_LBRACE) depth++;
    else if (t->kind == NIR_RBRACE && --depth == 0) return nimble_ok();
    else if (t->kind == NIR_EOF) return err_at(p, start, "unbalanced '{' in this definition");
  }
}

/* Words with a meaning of their own cannot name types or constructors. */
static bool is_reserved(const nir_token *t) {
  static const char *const kWords[] = {"let", "if", "else", "match", "fn", "type", "def", "true",
                                       "false", "const", "_", "Tensor", "inf", "nan"};
  nimble_dtype_t dt;
  for (size_t i = 0; i < sizeof kWords / sizeof kWords[0]; i++)
    if (is_word(t, kWords[i])) return true;
  return nimble_dtype_from_name(t->text, t->len, &dt);
}

static nimble_status_t pass0_names(parser *p) {
  while (!is(p, NIR_EOF)) {
    const nir_token *t = peek(p);
    if (is_word(t, "type")) {
      next(p);
      const nir_token *name = peek(p);
      if (name->kind != NIR_IDENT) return expected(p, "a type name after 'type'");
      next(p);
      if (is_reserved(name))
        return err_at(p, name, "'%.*s' is a reserved word", (int)name->len, name->text);
      if (stack_find(&p->typenames, name->text, name->len))
        return err_at(p, name, "type '%.*s' is defined twice", (int)name->len, name->text);
      name_entry e = {0};
      CHECK_ALLOC(e.name = tok_str(p, name));
      if (is(p, NIR_LBRACKET)) {
        next(p);
        while (!is(p, NIR_RBRACKET)) {
          if (!is(p, NIR_IDENT)) return expected(p, "a type parameter name");
          next(p);
          e.arity++;
          if (is(p, NIR_COMMA)) next(p);
          else if (!is(p, NIR_RBRACKET)) return expected(p, "',' or ']' after the type parameters");
        }
      }
      CHECK_ALLOC(stack_push(&p->typenames, e));
      NIMBLE_RETURN_IF_ERROR(skip_item(p));
    } else if (is_word(t, "def")) {
      next(p);
      const nir_token *name = peek(p);
      if (name->kind != NIR_GLOBAL) return expected(p, "a global name (@name) after 'def'");
      if (stack_find(&p->globals, name->text, name->len))
        return err_at(p, name, "global function '@%.*s' is defined twice", (int)name->len, name->text);
      name_entry e = {0};
      CHECK_ALLOC(e.name = tok_str(p, name));
      CHECK_ALLOC(stack_push(&p->globals, e));
      NIMBLE_RETURN_IF_ERROR(skip_item(p));
    } else {
      return expected(p, "'type' or 'def'");
    }
  }
  return nimble_ok();
}

static nimble_status_t parse_typedef(parser *p) {
  const nir_token *start = next(p); /* type */
  const nir_token *name = next(p);
  ptr_vec tps = {0}, names = {0}, fields = {0};
  size_t nfields[1024];
  size_t mark_tp = p->tparams.n, mark_dims = p->dims.n;
  nimble_status_t st = parse_type_params(p, &tps);
  if (!st) st = expect(p, NIR_LBRACE, "'{' starting the constructors");
  while (!st && !is(p, NIR_RBRACE)) {
    const nir_token *ct = peek(p);
    if (ct->kind != NIR_IDENT) {
      st = expected(p, "a constructor name");
      break;
    }
    if (is_reserved(ct)) {
      st = err_at(p, ct, "'%.*s' is a reserved word", (int)ct->len, ct->text);
      break;
    }
    if (names.n == 1024) {
      st = err_at(p, ct, "too many constructors");
      break;
    }
    next(p);
    char *cname = tok_str(p, ct);
    if (!cname || !vec_push(&names, cname)) {
      st = NIMBLE_OOM_IN("parsing IR");
      break;
    }
    ptr_vec fs = {0};
    if (is(p, NIR_LPAREN)) {
      next(p);
      st = parse_type_list(p, NIR_RPAREN, "',' or ')' in the constructor's fields", &fs);
    }
    nfields[names.n - 1] = fs.n;
    const nimble_type **copy = fs.n ? nimble_arena_calloc(p->arena, fs.n, sizeof(*copy)) : NULL;
    if (!st && fs.n && !copy) st = NIMBLE_OOM_IN("parsing IR");
    if (!st && fs.n) memcpy(copy, fs.items, fs.n * sizeof(*copy));
    free(fs.items);
    if (!st && !vec_push(&fields, copy)) st = NIMBLE_OOM_IN("parsing IR");
    if (!st) {
      if (is(p, NIR_COMMA)) next(p);
      else if (!is(p, NIR_RBRACE)) st = expected(p, "',' or '}' after a constructor");
    }
  }
  if (!st) next(p);
  if (!st) {
    char *tname = tok_str(p, name);
    nimble_src_loc_t loc = loc_of(p, start);
    if (!tname) st = NIMBLE_OOM_IN("parsing IR");
    else st = nimble_module_add_typedef(p->m, tname, tps.n, (const nimble_type *const *)tps.items, names.n,
                                        (const char *const *)names.items, nfields,
                                        (const nimble_type *const *const *)fields.items, &loc, NULL);
    if (st) st = nimble_status_annotate(st, "%s:%u:%u", p->file, start->line, start->col);
  }
  free(tps.items);
  free(names.items);
  free(fields.items);
  p->tparams.n = mark_tp;
  p->dims.n = mark_dims;
  return st;
}

static nimble_status_t parse_def(parser *p) {
  const nir_token *start = next(p); /* def */
  const nir_token *name = next(p);
  size_t mark_dims = p->dims.n;
  const nimble_expr *f;
  nimble_status_t st = parse_func_rest(p, start, &f);
  p->dims.n = mark_dims;
  if (st) return st;
  char *gname = tok_str(p, name);
  CHECK_ALLOC(gname);
  return nimble_module_add_func(p->m, gname, f);
}

nimble_status_t nimble_nir_parse(nimble_arena *arena, const char *filename, const char *text, size_t len,
                                 nimble_module **out) {
  parser p;
  memset(&p, 0, sizeof p);
  p.arena = arena;
  p.file = nimble_arena_strdup(arena, filename ? filename : "<input>");
  if (!p.file) return NIMBLE_OOM_IN("parsing IR");
  if (memchr(text, '\0', len))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: the text contains a NUL byte", p.file);
  NIMBLE_RETURN_IF_ERROR(nir_lex(arena, p.file, text, len, &p.toks, &p.ntoks));
  nimble_status_t st = nimble_module_create(arena, &p.m);
  if (!st) st = pass0_names(&p);
  /* Pass 1: type definitions. */
  p.pos = 0;
  while (!st && !is(&p, NIR_EOF)) {
    if (is_word(peek(&p), "type")) st = parse_typedef(&p);
    else st = skip_item(&p);
  }
  /* Pass 2: functions. */
  p.pos = 0;
  while (!st && !is(&p, NIR_EOF)) {
    if (is_word(peek(&p), "def")) st = parse_def(&p);
    else st = skip_item(&p);
  }
  free(p.toks);
  free(p.locals.items);
  free(p.tparams.items);
  free(p.dims.items);
  free(p.typenames.items);
  free(p.globals.items);
  if (st) return st;
  *out = p.m;
  return nimble_ok();
}

nimble_status_t nimble_nir_parse_file(nimble_arena *arena, const char *path, nimble_module **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "cannot open %s: %s", path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      if (cap > (size_t)1 << 30) {
        free(buf);
        fclose(f);
        return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s is larger than 1 GiB", path);
      }
      cap = cap ? cap * 2 : 65536;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NIMBLE_OOM_IN("parsing IR");
      }
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  bool failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot read %s", path);
  }
  nimble_status_t st = nimble_nir_parse(arena, path, buf ? buf : "", len, out);
  free(buf);
  return st;
}
