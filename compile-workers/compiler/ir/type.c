/* Type constructors, structural equality and the text form of types. */
#include <stdio.h>
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/type.h"

bool nimble_dim_same(nimble_dim_t a, nimble_dim_t b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case NIMBLE_DIM_CONST: return a.value == b.value;
    case NIMBLE_DIM_VAR: return a.var_id == b.var_id;
    case NIMBLE_DIM_ANY: return true;
  }
  return false;
}

static nimble_type *type_new(nimble_arena *a, nimble_type_kind_t kind) {
  nimble_type *t = nimble_arena_alloc(a, sizeof(*t));
  if (t) t->kind = kind;
  return t;
}

static const nimble_type *const *copy_types(nimble_arena *a, size_t n,
                                            const nimble_type *const *src, bool *ok) {
  *ok = true;
  if (n == 0) return NULL;
  const nimble_type **dst = nimble_arena_calloc(a, n, sizeof(*dst));
  if (!dst) {
    *ok = false;
    return NULL;
  }
  memcpy(dst, src, n * sizeof(*dst));
  return dst;
}

const nimble_type *nimble_type_tensor(nimble_arena *a, nimble_dtype_t dtype, size_t rank,
                                      const nimble_dim_t *dims) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_TENSOR);
  if (!t) return NULL;
  t->u.tensor.dtype = dtype;
  t->u.tensor.rank = rank;
  if (rank) {
    nimble_dim_t *d = nimble_arena_calloc(a, rank, sizeof(*d));
    if (!d) return NULL;
    for (size_t i = 0; i < rank; i++) {
      d[i] = dims[i];
      if (d[i].kind == NIMBLE_DIM_VAR && d[i].name) {
        /* Names are borrowed from the caller; keep them in the arena. */
        d[i].name = nimble_arena_strdup(a, d[i].name);
        if (!d[i].name) return NULL;
      }
    }
    t->u.tensor.dims = d;
  }
  return t;
}

const nimble_type *nimble_type_scalar(nimble_arena *a, nimble_dtype_t dtype) {
  return nimble_type_tensor(a, dtype, 0, NULL);
}

const nimble_type *nimble_type_unranked_tensor(nimble_arena *a, nimble_dtype_t dtype) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_UNRANKED_TENSOR);
  if (!t) return NULL;
  t->u.tensor.dtype = dtype;
  t->u.tensor.rank = 0;
  t->u.tensor.dims = NULL;
  return t;
}

bool nimble_type_is_any_tensor(const nimble_type *t) {
  return t && (t->kind == NIMBLE_TYPE_TENSOR || t->kind == NIMBLE_TYPE_UNRANKED_TENSOR);
}

const nimble_type *nimble_type_tuple(nimble_arena *a, size_t count,
                                     const nimble_type *const *fields) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_TUPLE);
  bool ok;
  if (!t) return NULL;
  t->u.tuple.count = count;
  t->u.tuple.fields = copy_types(a, count, fields, &ok);
  return ok ? t : NULL;
}

const nimble_type *nimble_type_func(nimble_arena *a, size_t num_type_params,
                                    const nimble_type *const *type_params, size_t num_params,
                                    const nimble_type *const *params, const nimble_type *ret) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_FUNC);
  bool ok1, ok2;
  if (!t) return NULL;
  t->u.func.num_type_params = num_type_params;
  t->u.func.type_params = copy_types(a, num_type_params, type_params, &ok1);
  t->u.func.num_params = num_params;
  t->u.func.params = copy_types(a, num_params, params, &ok2);
  t->u.func.ret = ret;
  return ok1 && ok2 ? t : NULL;
}

const nimble_type *nimble_type_adt(nimble_arena *a, const char *name, size_t num_args,
                                   const nimble_type *const *args) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_ADT);
  bool ok;
  if (!t) return NULL;
  t->u.adt.name = nimble_arena_strdup(a, name);
  t->u.adt.num_args = num_args;
  t->u.adt.args = copy_types(a, num_args, args, &ok);
  return ok && t->u.adt.name ? t : NULL;
}

const nimble_type *nimble_type_var(nimble_arena *a, uint32_t id, const char *name) {
  nimble_type *t = type_new(a, NIMBLE_TYPE_VAR);
  if (!t) return NULL;
  t->u.var.id = id;
  t->u.var.name = nimble_arena_strdup(a, name ? name : "T");
  return t->u.var.name ? t : NULL;
}

/* Equality with a positional pairing of the type parameters bound by
 * function types (so fn[A](A) -> A equals fn[B](B) -> B). */
typedef struct bound_pair {
  uint32_t a, b;
  const struct bound_pair *next;
} bound_pair;

static bool type_equal_in(const nimble_type *a, const nimble_type *b, const bound_pair *env) {
  /* One node is equal to itself only where no binder renames its vars. */
  if (a == b && !env) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_TYPE_TENSOR:
      if (a->u.tensor.dtype != b->u.tensor.dtype || a->u.tensor.rank != b->u.tensor.rank)
        return false;
      for (size_t i = 0; i < a->u.tensor.rank; i++)
        if (!nimble_dim_same(a->u.tensor.dims[i], b->u.tensor.dims[i])) return false;
      return true;
    case NIMBLE_TYPE_UNRANKED_TENSOR: return a->u.tensor.dtype == b->u.tensor.dtype;
    case NIMBLE_TYPE_TUPLE:
      if (a->u.tuple.count != b->u.tuple.count) return false;
      for (size_t i = 0; i < a->u.tuple.count; i++)
        if (!type_equal_in(a->u.tuple.fields[i], b->u.tuple.fields[i], env)) return false;
      return true;
    case NIMBLE_TYPE_FUNC: {
      if (a->u.func.num_type_params != b->u.func.num_type_params ||
          a->u.func.num_params != b->u.func.num_params)
        return false;
      /* More type parameters than this is not a function anyone writes;
       * such types compare unequal rather than half-checked. */
      bound_pair pairs[64];
      size_t n = a->u.func.num_type_params;
      if (n > 64) return false;
      const bound_pair *e = env;
      for (size_t i = 0; i < n; i++) {
        pairs[i].a = a->u.func.type_params[i]->u.var.id;
        pairs[i].b = b->u.func.type_params[i]->u.var.id;
        pairs[i].next = e;
        e = &pairs[i];
      }
      for (size_t i = 0; i < a->u.func.num_params; i++)
        if (!type_equal_in(a->u.func.params[i], b->u.func.params[i], e)) return false;
      return type_equal_in(a->u.func.ret, b->u.func.ret, e);
    }
    case NIMBLE_TYPE_ADT:
      if (strcmp(a->u.adt.name, b->u.adt.name) != 0 || a->u.adt.num_args != b->u.adt.num_args)
        return false;
      for (size_t i = 0; i < a->u.adt.num_args; i++)
        if (!type_equal_in(a->u.adt.args[i], b->u.adt.args[i], env)) return false;
      return true;
    case NIMBLE_TYPE_VAR:
      for (const bound_pair *p = env; p; p = p->next) {
        if (p->a == a->u.var.id || p->b == b->u.var.id)
          return p->a == a->u.var.id && p->b == b->u.var.id;
      }
      return a->u.var.id == b->u.var.id;
  }
  return false;
}

bool nimble_type_equal(const nimble_type *a, const nimble_type *b) {
  return type_equal_in(a, b, NULL);
}

void nimble_print_dim(nimble_strbuf *b, nimble_dim_t d) {
  switch (d.kind) {
    case NIMBLE_DIM_CONST: nimble_strbuf_printf(b, "%lld", (long long)d.value); break;
    case NIMBLE_DIM_VAR: nimble_strbuf_puts(b, d.name ? d.name : "n"); break;
    case NIMBLE_DIM_ANY: nimble_strbuf_puts(b, "?"); break;
  }
}

void nimble_print_type(nimble_strbuf *b, const nimble_type *t) {
  if (!t) {
    nimble_strbuf_puts(b, "<null>");
    return;
  }
  switch (t->kind) {
    case NIMBLE_TYPE_TENSOR:
      nimble_strbuf_puts(b, "Tensor[(");
      for (size_t i = 0; i < t->u.tensor.rank; i++) {
        if (i) nimble_strbuf_puts(b, ", ");
        nimble_print_dim(b, t->u.tensor.dims[i]);
      }
      nimble_strbuf_printf(b, "%s), %s]", t->u.tensor.rank == 1 ? "," : "",
                           nimble_dtype_name(t->u.tensor.dtype));
      break;
    case NIMBLE_TYPE_UNRANKED_TENSOR:
      nimble_strbuf_printf(b, "Tensor[*, %s]", nimble_dtype_name(t->u.tensor.dtype));
      break;
    case NIMBLE_TYPE_TUPLE:
      nimble_strbuf_puts(b, "(");
      for (size_t i = 0; i < t->u.tuple.count; i++) {
        if (i) nimble_strbuf_puts(b, ", ");
        nimble_print_type(b, t->u.tuple.fields[i]);
      }
      nimble_strbuf_puts(b, t->u.tuple.count == 1 ? ",)" : ")");
      break;
    case NIMBLE_TYPE_FUNC:
      nimble_strbuf_puts(b, "fn");
      if (t->u.func.num_type_params) {
        nimble_strbuf_puts(b, "[");
        for (size_t i = 0; i < t->u.func.num_type_params; i++) {
          if (i) nimble_strbuf_puts(b, ", ");
          nimble_print_type(b, t->u.func.type_params[i]);
        }
        nimble_strbuf_puts(b, "]");
      }
      nimble_strbuf_puts(b, "(");
      for (size_t i = 0; i < t->u.func.num_params; i++) {
        if (i) nimble_strbuf_puts(b, ", ");
        nimble_print_type(b, t->u.func.params[i]);
      }
      nimble_strbuf_puts(b, ") -> ");
      nimble_print_type(b, t->u.func.ret);
      break;
    case NIMBLE_TYPE_ADT:
      nimble_strbuf_puts(b, t->u.adt.name);
      if (t->u.adt.num_args) {
        nimble_strbuf_puts(b, "[");
        for (size_t i = 0; i < t->u.adt.num_args; i++) {
          if (i) nimble_strbuf_puts(b, ", ");
          nimble_print_type(b, t->u.adt.args[i]);
        }
        nimble_strbuf_puts(b, "]");
      }
      break;
    case NIMBLE_TYPE_VAR: nimble_strbuf_puts(b, t->u.var.name); break;
  }
}

char *nimble_strbuf_copy_truncated(const nimble_strbuf *b, char *buf, size_t size) {
  if (size == 0) return buf;
  const char *src = b->data && !b->failed ? b->data : "";
  size_t n = b->failed ? 0 : b->len;
  if (n < size) {
    memcpy(buf, src, n);
    buf[n] = '\0';
  } else {
    memcpy(buf, src, size - 1);
    buf[size - 1] = '\0';
    if (size > 4) memcpy(buf + size - 4, "...", 4);
  }
  return buf;
}

char *nimble_type_format(const nimble_type *type, char *buf, size_t size) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  nimble_print_type(&b, type);
  nimble_strbuf_copy_truncated(&b, buf, size);
  nimble_strbuf_deinit(&b);
  return buf;
}

const char *nimble_type_to_string(nimble_arena *arena, const nimble_type *type) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  nimble_print_type(&b, type);
  const char *s = b.failed ? NULL : nimble_arena_strndup(arena, b.data ? b.data : "", b.len);
  nimble_strbuf_deinit(&b);
  return s;
}
