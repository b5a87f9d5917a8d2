/* One kernel from several schedules of the same computation, chosen per
 * call by the size of its output (nimble_ln_kernel_by_size): tuning's
 * per-size variants (docs/tuning.md "Size buckets"). The kernels were
 * built apart, each with its own parameter objects; the later ones'
 * bodies move into the first, their parameter references rewritten to
 * its parameters in place. */
#include <stdio.h>
#include <string.h>

#include "ln_internal.h"
#include "nimble/ptr_map.h"

/* The parameters of the kernel being moved, and what each becomes; the
 * nodes already rewritten (expressions and statements may be shared, and
 * a tree walk of a shared graph could take exponential time). */
typedef struct remap {
  const nimble_ln_param *from[NIMBLE_LN_MAX_PARAMS];
  nimble_ln_param *to[NIMBLE_LN_MAX_PARAMS];
  int n;
  nimble_ptr_map seen; /* a set */
  int oom;
} remap;

static nimble_ln_param *map_param(const remap *r, nimble_ln_param *p) {
  for (int i = 0; i < r->n; i++)
    if (r->from[i] == p) return r->to[i];
  return p;
}

/* Whether node was seen before (then nothing to do); records it if not. */
static int seen_before(remap *r, const void *node) {
  int added = r->oom ? 0 : nimble_ptr_map_add(&r->seen, node, NULL);
  if (added < 0) r->oom = 1;
  return added != 1;
}

static void remap_expr(remap *r, nimble_ln_expr *e) {
  if (!e || seen_before(r, e)) return;
  if (e->param) e->param = map_param(r, e->param);
  remap_expr(r, e->a);
  remap_expr(r, e->b);
  remap_expr(r, e->c);
}

static void remap_stmt(remap *r, nimble_ln_stmt *s) {
  if (!s || seen_before(r, s)) return;
  remap_expr(r, s->begin);
  remap_expr(r, s->end);
  remap_expr(r, s->value);
  remap_expr(r, s->index);
  if (s->param) s->param = map_param(r, s->param);
  if (s->tail_param) s->tail_param = map_param(r, s->tail_param);
  remap_stmt(r, s->body);
  remap_stmt(r, s->else_);
  for (size_t i = 0; i < s->n_stmts; i++) remap_stmt(r, s->stmts[i]);
  if (s->kind == NIMBLE_LN_S_SGEMM) {
    nimble_ln_sgemm_desc_t *d = &s->sgemm;
    nimble_ln_param **ps[] = {&d->a, &d->b, &d->c, &d->row_bias, &d->col_bias, &d->residual};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
      if (*ps[i]) *ps[i] = map_param(r, *ps[i]);
    nimble_ln_expr *es[] = {d->m,        d->n,        d->k,   d->a_offset,      d->b_offset,      d->c_offset,
                            d->lda,      d->ldb,      d->ldc, d->row_bias_offset, d->col_bias_offset,
                            d->residual_offset, d->ldr};
    for (size_t i = 0; i < sizeof es / sizeof *es; i++) remap_expr(r, es[i]);
  } else if (s->kind == NIMBLE_LN_S_CONV3X3) {
    nimble_ln_conv3x3_desc_t *d = &s->conv3x3;
    nimble_ln_param **ps[] = {&d->x, &d->w, &d->y, &d->row_bias, &d->residual};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
      if (*ps[i]) *ps[i] = map_param(r, *ps[i]);
    nimble_ln_expr *es[] = {d->x_offset, d->w_offset, d->y_offset, d->c,  d->h,   d->width, d->k,
                            d->pad_t,    d->pad_l,    d->oh,       d->ow, d->row_bias_offset,
                            d->residual_offset, d->ldr};
    for (size_t i = 0; i < sizeof es / sizeof *es; i++) remap_expr(r, es[i]);
  }
}

static int num_args(const nimble_ln_kernel *k) {
  int n = k->n_params;
  while (n > 0 && k->params[n - 1]->scratch) n--;
  return n;
}

/* Moves b's parameters onto k's: the arguments one for one, each scratch
 * buffer onto k's at the same place when of the same type (its size then
 * the larger of the two), else after k's. Returns 0 when they do not fit. */
static int map_params(nimble_ln_kernel *k, const nimble_ln_kernel *b, int idx, remap *r) {
  nimble_ln_arena *a = k->arena;
  int na = num_args(k), k_n = k->n_params;
  for (int i = 0; i < na; i++) {
    r->from[r->n] = b->params[i];
    r->to[r->n++] = k->params[i];
  }
  int first_scratch = r->n;
  for (int i = na; i < b->n_params; i++) {
    nimble_ln_param *p = b->params[i];
    r->from[r->n] = p;
    if (i < k_n && k->params[i]->dtype == p->dtype) {
      r->to[r->n++] = k->params[i];
      continue;
    }
    if (k->n_params >= NIMBLE_LN_MAX_PARAMS) return 0;
    size_t len = strlen(p->name) + 16;
    char *name = nimble_ln_arena_alloc(a, len);
    nimble_ln_param *q = nimble_ln_arena_alloc(a, sizeof *q);
    if (!name || !q) return 0;
    snprintf(name, len, "%s_s%d", p->name, idx);
    *q = *p;
    q->name = name;
    q->index = k->n_params;
    k->params[k->n_params++] = q;
    r->to[r->n++] = q;
  }
  /* The sizes once every parameter is mapped (b's counts read b's
   * arguments): a buffer both use gets the larger. */
  for (int i = na; i < b->n_params; i++) {
    nimble_ln_param *q = r->to[first_scratch + i - na];
    nimble_ln_expr *size = b->params[i]->scratch;
    remap_expr(r, size);
    q->scratch = q->index < k_n ? nimble_ln_binary(a, NIMBLE_LN_MAX, q->scratch, size) : size;
    if (!q->scratch) return 0;
  }
  return 1;
}

nimble_ln_kernel *nimble_ln_kernel_by_size(nimble_ln_kernel *const *ks, const int64_t *bounds, int n) {
  if (n < 1 || !ks || !ks[0]) return NULL;
  nimble_ln_kernel *k = ks[0];
  nimble_ln_arena *a = k->arena;
  int na = num_args(k);
  const nimble_ln_param *out = NULL;
  for (int i = 0; i < na && !out; i++)
    if (k->params[i]->is_output) out = k->params[i];
  if (!out) {
    nimble_ln_arena_fail(a, "kernel '%s': no output to choose a schedule by", k->name);
    return NULL;
  }
  nimble_ln_stmt *bodies[NIMBLE_LN_MAX_SIZE_SCHEDULES];
  if (n > (int)(sizeof bodies / sizeof *bodies)) {
    nimble_ln_arena_fail(a, "kernel '%s': %d schedules by size, at most %d", k->name, n,
                         (int)(sizeof bodies / sizeof *bodies));
    return NULL;
  }
  bodies[0] = k->body;
  for (int j = 1; j < n; j++) {
    nimble_ln_kernel *b = ks[j];
    int same = b && b->arena == a && num_args(b) == na && bounds[j - 1] > (j > 1 ? bounds[j - 2] : 0);
    for (int i = 0; same && i < na; i++) {
      const nimble_ln_param *p = k->params[i], *q = b->params[i];
      same = !strcmp(p->name, q->name) && p->dtype == q->dtype && p->rank == q->rank && p->is_output == q->is_output;
    }
    if (!same) {
      nimble_ln_arena_fail(a, "kernel '%s': schedule %d by size is not of the same arguments or bounds", k->name, j);
      return NULL;
    }
    remap r;
    memset(&r, 0, sizeof r);
    /* (An arena allocation that fails has recorded its own error first.) */
    if (!map_params(k, b, j, &r)) {
      nimble_ptr_map_deinit(&r.seen);
      nimble_ln_arena_fail(a, "kernel '%s': the scratch buffers of %d schedules by size do not fit %d parameters",
                           k->name, n, NIMBLE_LN_MAX_PARAMS);
      return NULL;
    }
    remap_stmt(&r, b->body);
    nimble_ptr_map_deinit(&r.seen);
    if (r.oom) {
      nimble_ln_arena_fail(a, "kernel '%s': out of memory joining schedule %d by size", k->name, j);
      return NULL;
    }
    /* Specialisations: the union, as far as room allows (one left out only
     * keeps its tail loops in the specialised variant). */
    for (int s = 0; s < b->n_specs; s++) {
      nimble_ln_specialization_t sp = b->specs[s];
      sp.param = map_param(&r, sp.param);
      int dup = 0;
      for (int t = 0; t < k->n_specs; t++)
        dup |= k->specs[t].param == sp.param && k->specs[t].axis == sp.axis && k->specs[t].factor == sp.factor;
      if (!dup && k->n_specs < NIMBLE_LN_MAX_SPECIALIZATIONS) k->specs[k->n_specs++] = sp;
    }
    bodies[j] = b->body;
  }
  /* if (elements(out) <= bounds[0]) body 0 else if (... <= bounds[1]) body 1 ... else body n-1 */
  nimble_ln_stmt *body = bodies[n - 1];
  for (int j = n - 2; j >= 0; j--) {
    nimble_ln_expr *elems = nimble_ln_extent_product(a, (nimble_ln_param *)out, 0, out->rank);
    nimble_ln_expr *cond = nimble_ln_binary(a, NIMBLE_LN_LE, elems, nimble_ln_i64(a, bounds[j]));
    body = nimble_ln_if(a, cond, bodies[j], body);
  }
  if (!body) return NULL;
  k->body = body;
  return k;
}
