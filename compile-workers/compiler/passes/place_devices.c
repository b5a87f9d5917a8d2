/* Device placement for the cuda target, on the explicit-memory form
 * (after manifest_memory, before plan_memory).
 *
 * Each `invoke` of a primitive runs on the GPU or the CPU, decided per
 * primitive (so one kernel has one device):
 *   - CPU: the storage-size primitives (host arithmetic feeding
 *     alloc_storage), scalar and shape arithmetic (every parameter and the
 *     result are scalars, or integer vectors of at most 8 elements: loop
 *     counters, conditions computed from scalars, shape values), primitives
 *     with a data-dependent or upper-bound shape function (their results
 *     size allocations on the host), and primitives using an operator the
 *     PTX code generator refuses (log, power, log_softmax: no libm on the
 *     device; det: a scratch buffer, no workspace on the device);
 *   - GPU: every other compute primitive.
 * Shape functions (invoke_shape_func) always run on the CPU.
 *
 * The outputs of a GPU invoke are allocated on the GPU (their
 * alloc_storage gets device="cuda"); the invoke gets device="cuda". Then
 * copies (device_copy) are inserted where a value produced on one device is
 * read on the other:
 *   - a GPU invoke's inputs that live on the CPU (parameters, constants,
 *     CPU results) get a GPU copy;
 *   - the CPU reads GPU values: CPU invokes' inputs, the tensors given to
 *     a data-dependent or upper-bound shape function (its primitive runs on
 *     the host and reads them all, so its invoke reuses that copy: nothing
 *     moves that the host does not read), `if` conditions, and values that cross a
 *     boundary — function results, call and constructor arguments, tuple
 *     fields, closures' captures — which are always on the CPU (so entry
 *     inputs and outputs stay on the host, and a loop, a self-recursive
 *     function, takes and returns CPU tensors).
 * A copy is made once per value and device and reused by every later read
 * in its block and the blocks nested in it. Shapes never travel: shape_of
 * reads the host-side tensor header of a GPU tensor without a copy, and
 * shape functions and storage sizes take host shapes. reshape_tensor views
 * stay on their tensor's device. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

enum { DEV_CPU = 0, DEV_GPU = 1 };

typedef struct memo_entry {
  const nimble_expr *orig; /* a variable or a constant */
  int dev;
  const nimble_expr *copy; /* its copy on dev */
} memo_entry;

typedef struct place_ctx {
  nimble_module *m;
  nimble_arena *arena;
  pass_namer names;
  pass_map dev;        /* variable -> (void *)(device + 1) */
  pass_map prim_dev;   /* primitive name (interned pointer of the global) -> device + 1 */
  memo_entry *memo;    /* scoped: a stack, truncated when a block ends */
  size_t num_memo, cap_memo;
  nimble_device_placement_stats_t stats;
} place_ctx;

/* ---- which primitives run where ------------------------------------------------ */

static bool small_host_value(const nimble_type *t) {
  if (!t) return false;
  if (t->kind == NIMBLE_TYPE_TUPLE) {
    for (size_t i = 0; i < t->u.tuple.count; i++)
      if (!small_host_value(t->u.tuple.fields[i])) return false;
    return true;
  }
  if (t->kind != NIMBLE_TYPE_TENSOR) return false;
  if (t->u.tensor.rank == 0) return true;
  if (t->u.tensor.rank != 1 || !nimble_dtype_is_int(t->u.tensor.dtype)) return false;
  return t->u.tensor.dims[0].kind == NIMBLE_DIM_CONST && t->u.tensor.dims[0].value <= 8;
}

/* Whether the primitive's body uses an operator that keeps it on the host. */
static bool host_only_body(const nimble_expr *e) {
  /* det's kernel works in a scratch buffer, which nvptx64 has none of;
   * check_rank reads a shape (a host tensor) and reports errors. */
  static const char *const kRefusedByPtx[] = {"log", "power", "log_softmax", "det", "check_rank"};
  if (!e) return false;
  switch (e->kind) {
    case NIMBLE_EXPR_CALL: {
      const nimble_op *op = pass_called_op(e);
      if (op) {
        if (op->shape_kind != NIMBLE_SHAPE_DATA_INDEPENDENT) return true;
        for (size_t i = 0; i < sizeof kRefusedByPtx / sizeof *kRefusedByPtx; i++)
          if (strcmp(op->name, kRefusedByPtx[i]) == 0) return true;
      }
      for (size_t i = 0; i < e->u.call.num_args; i++)
        if (host_only_body(e->u.call.args[i])) return true;
      return false;
    }
    case NIMBLE_EXPR_LET:
      return host_only_body(e->u.let.value) || host_only_body(e->u.let.body);
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++)
        if (host_only_body(e->u.tuple.fields[i])) return true;
      return false;
    case NIMBLE_EXPR_PROJ:
      return host_only_body(e->u.proj.tuple);
    default:
      return false;
  }
}

static int primitive_device(place_ctx *c, const char *name) {
  const nimble_expr *f = nimble_module_find_func(c->m, name);
  if (!f || f->kind != NIMBLE_EXPR_FUNC) return DEV_CPU;
  uintptr_t known = (uintptr_t)pass_map_get(&c->prim_dev, f);
  if (known) return (int)known - 1;
  int dev = DEV_GPU;
  if (strncmp(name, NIMBLE_PRIMITIVE_PREFIX "storage_size_", strlen(NIMBLE_PRIMITIVE_PREFIX "storage_size_")) == 0) {
    dev = DEV_CPU;
  } else if (host_only_body(f->u.func.body)) {
    dev = DEV_CPU;
  } else {
    bool small = small_host_value(f->u.func.ret);
    for (size_t i = 0; small && i < f->u.func.num_params; i++)
      small = small_host_value(f->u.func.params[i]->u.var.annotation);
    if (small) dev = DEV_CPU;
  }
  pass_map_put(&c->prim_dev, f, (void *)(uintptr_t)(dev + 1));
  return dev;
}

/* ---- devices of values and the copies ------------------------------------------ */

static int dev_of(const place_ctx *c, const nimble_expr *e) {
  if (!e || e->kind != NIMBLE_EXPR_VAR) return DEV_CPU;
  uintptr_t d = (uintptr_t)pass_map_get(&c->dev, e);
  return d ? (int)d - 1 : DEV_CPU;
}

static nimble_status_t set_dev(place_ctx *c, const nimble_expr *var, int dev) {
  return pass_map_put(&c->dev, var, (void *)(uintptr_t)(dev + 1)) ? nimble_ok() : NIMBLE_OOM();
}

static const char *dev_name(int dev) { return dev == DEV_GPU ? "cuda" : "cpu"; }

/* `e` (an atom) readable on `dev`: e itself, or its copy there, made once
 * (bound in `out` just before its first reader) and reused in scope. */
static nimble_status_t need(place_ctx *c, pass_chain *out, const nimble_expr *e, int dev,
                            const nimble_expr **res) {
  *res = e;
  bool movable = e->kind == NIMBLE_EXPR_VAR || e->kind == NIMBLE_EXPR_CONSTANT;
  if (!movable || dev_of(c, e) == dev) return nimble_ok();
  for (size_t i = c->num_memo; i-- > 0;) {
    if (c->memo[i].orig == e && c->memo[i].dev == dev) {
      *res = c->memo[i].copy;
      return nimble_ok();
    }
  }
  const nimble_type *ty = e->kind == NIMBLE_EXPR_VAR ? e->u.var.annotation : NULL;
  const char *base = e->kind == NIMBLE_EXPR_VAR ? e->u.var.name : "const";
  char *name = nimble_arena_sprintf(c->arena, "%s_%s", base, dev == DEV_GPU ? "gpu" : "host");
  if (!name) return NIMBLE_OOM();
  const nimble_expr *var = pass_namer_var(&c->names, name, ty);
  if (!var) return NIMBLE_OOM();
  nimble_named_attr_t attr = {.name = "device", .value = {.kind = NIMBLE_ATTR_STRING, .s = dev_name(dev)}};
  const nimble_expr *copy;
  NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "device_copy", 1, &e, &attr, 1, &copy));
  NIMBLE_RETURN_IF_ERROR(pass_chain_push(out, var, copy));
  NIMBLE_RETURN_IF_ERROR(set_dev(c, var, dev));
  if (c->num_memo == c->cap_memo) {
    size_t cap = c->cap_memo ? 2 * c->cap_memo : 32;
    memo_entry *mm = realloc(c->memo, cap * sizeof *mm);
    if (!mm) return NIMBLE_OOM();
    c->memo = mm;
    c->cap_memo = cap;
  }
  c->memo[c->num_memo++] = (memo_entry){e, dev, var};
  if (dev == DEV_GPU) c->stats.copies_to_gpu++;
  else c->stats.copies_to_cpu++;
  *res = var;
  return nimble_ok();
}

/* Every argument of call `e` from `from` on, on `dev`; a new call when one
 * changed. */
static nimble_status_t args_on(place_ctx *c, pass_chain *out, const nimble_expr *e, size_t from, size_t to,
                               int dev, const nimble_expr **res) {
  size_t n = e->u.call.num_args;
  const nimble_expr **args = nimble_arena_alloc(c->arena, (n ? n : 1) * sizeof *args);
  if (!args) return NIMBLE_OOM();
  bool changed = false;
  for (size_t i = 0; i < n; i++) {
    args[i] = e->u.call.args[i];
    if (i >= from && i < to) NIMBLE_RETURN_IF_ERROR(need(c, out, e->u.call.args[i], dev, &args[i]));
    changed |= args[i] != e->u.call.args[i];
  }
  *res = changed ? pass_call_with_args(c->arena, e, e->u.call.callee, args) : e;
  return *res ? nimble_ok() : NIMBLE_OOM();
}

/* The call with its string attribute `name` set to `value`. */
static nimble_status_t with_attr(place_ctx *c, const nimble_expr *e, const char *name, const char *value,
                                 const nimble_expr **res) {
  const nimble_op *op = pass_called_op(e);
  int k = nimble_op_attr_index(op, name);
  if (k < 0 || (size_t)k >= e->u.call.attrs.count)
    return nimble_status_make(NIMBLE_INTERNAL, "'%s' has no attribute '%s'", op->name, name);
  size_t na = e->u.call.attrs.count;
  nimble_attr_value_t *vals = nimble_arena_alloc(c->arena, na * sizeof *vals);
  if (!vals) return NIMBLE_OOM();
  memcpy(vals, e->u.call.attrs.values, na * sizeof *vals);
  vals[k].s = value;
  nimble_attrs_t attrs = {.count = na, .values = vals};
  *res = nimble_ir_call(c->arena, e->u.call.callee, e->u.call.num_args, e->u.call.args, &attrs, &e->loc);
  return *res ? nimble_ok() : NIMBLE_OOM();
}

static nimble_status_t place_block(place_ctx *c, const nimble_expr *e, const nimble_expr **res);

/* A block whose result the host reads (branches, arms, function bodies). */
static nimble_status_t place_host_block(place_ctx *c, const nimble_expr *e, const nimble_expr **res);

static nimble_status_t place_function(place_ctx *c, const nimble_expr *f, const nimble_expr **res) {
  /* Parameters (and captured values) are on the CPU; copies made outside
   * are not reused inside (a closure body runs later, maybe elsewhere). */
  size_t mark = c->num_memo;
  c->num_memo = 0;
  memo_entry *saved = c->memo;
  size_t saved_cap = c->cap_memo;
  c->memo = NULL;
  c->cap_memo = 0;
  const nimble_expr *body;
  nimble_status_t s = place_host_block(c, f->u.func.body, &body);
  free(c->memo);
  c->memo = saved;
  c->cap_memo = saved_cap;
  c->num_memo = mark;
  NIMBLE_RETURN_IF_ERROR(s);
  if (body == f->u.func.body) {
    *res = f;
    return nimble_ok();
  }
  *res = nimble_ir_func(c->arena, f->u.func.num_type_params, f->u.func.type_params, f->u.func.num_params,
                        f->u.func.params, f->u.func.ret, body, &f->loc);
  return *res ? nimble_ok() : NIMBLE_OOM();
}

/* One bound value (or a block's tail): rewritten with its inputs on the
 * right device; copies go into `out` before it. *dev gets the device of
 * its result. */
static nimble_status_t place_value(place_ctx *c, pass_chain *out, const nimble_expr *v, const bool *gpu_invoke,
                                   const nimble_expr **res, int *dev) {
  *res = v;
  *dev = DEV_CPU;
  switch (v->kind) {
    case NIMBLE_EXPR_VAR:
      *dev = dev_of(c, v);
      return nimble_ok();
    case NIMBLE_EXPR_CALL: {
      const nimble_op *op = pass_called_op(v);
      size_t n = v->u.call.num_args;
      if (!op) /* globals, closures, constructors: arguments on the host */
        return args_on(c, out, v, 0, n, DEV_CPU, res);
      const char *name = op->name;
      if (!strcmp(name, "alloc_storage") || !strcmp(name, "alloc_tensor") || !strcmp(name, "shape_of") ||
          !strcmp(name, "kill"))
        return nimble_ok(); /* devices of allocations are set by the caller */
      if (!strcmp(name, "reshape_tensor")) {
        *dev = dev_of(c, v->u.call.args[0]);
        return nimble_ok();
      }
      if (!strcmp(name, "device_copy")) {
        const char *d = nimble_attrs_string(op, &v->u.call.attrs, "device");
        *dev = strcmp(d, "cuda") == 0 ? DEV_GPU : DEV_CPU;
        return nimble_ok();
      }
      if (!strcmp(name, "invoke")) {
        size_t nout = (size_t)nimble_attrs_int(op, &v->u.call.attrs, "num_outputs");
        if (nout > n) nout = n;
        bool gpu = gpu_invoke && *gpu_invoke;
        const nimble_expr *call;
        NIMBLE_RETURN_IF_ERROR(args_on(c, out, v, 0, n - nout, gpu ? DEV_GPU : DEV_CPU, &call));
        if (gpu) {
          NIMBLE_RETURN_IF_ERROR(with_attr(c, call, "device", "cuda", &call));
          c->stats.gpu_invokes++;
        } else {
          c->stats.cpu_invokes++;
        }
        *res = call;
        return nimble_ok();
      }
      if (!strcmp(name, "invoke_shape_func")) {
        const char *mode = nimble_attrs_string(op, &v->u.call.attrs, "mode");
        if (strcmp(mode, "data_independent") == 0) return nimble_ok(); /* host shapes */
        /* The shape function is a host kernel, and the runtime hands a
         * host kernel host memory only, so each tensor it gets is on the
         * host. That moves nothing the host would not read anyway: a
         * primitive with a data-dependent or upper-bound shape stays on
         * the host (primitive_device), so its own invoke reads every one
         * of these inputs there, and it reuses the copy made here. */
        const nimble_expr **args = nimble_arena_alloc(c->arena, (n ? n : 1) * sizeof *args);
        nimble_status_t s = args ? nimble_ok() : NIMBLE_OOM();
        bool changed = false;
        for (size_t i = 0; !s && i < n; i++) {
          args[i] = v->u.call.args[i];
          s = need(c, out, args[i], DEV_CPU, &args[i]);
          changed |= args[i] != v->u.call.args[i];
        }
        NIMBLE_RETURN_IF_ERROR(s);
        if (changed) *res = pass_call_with_args(c->arena, v, v->u.call.callee, args);
        return *res ? nimble_ok() : NIMBLE_OOM();
      }
      /* Any other operator outside a primitive runs on the host. */
      return args_on(c, out, v, 0, n, DEV_CPU, res);
    }
    case NIMBLE_EXPR_TUPLE: {
      size_t n = v->u.tuple.count;
      const nimble_expr **fields = nimble_arena_alloc(c->arena, (n ? n : 1) * sizeof *fields);
      if (!fields) return NIMBLE_OOM();
      bool changed = false;
      for (size_t i = 0; i < n; i++) {
        NIMBLE_RETURN_IF_ERROR(need(c, out, v->u.tuple.fields[i], DEV_CPU, &fields[i]));
        changed |= fields[i] != v->u.tuple.fields[i];
      }
      if (changed) *res = nimble_ir_tuple(c->arena, n, fields, &v->loc);
      return *res ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_IF: {
      const nimble_expr *cond, *t, *e;
      NIMBLE_RETURN_IF_ERROR(need(c, out, v->u.if_.cond, DEV_CPU, &cond));
      NIMBLE_RETURN_IF_ERROR(place_host_block(c, v->u.if_.then_branch, &t));
      NIMBLE_RETURN_IF_ERROR(place_host_block(c, v->u.if_.else_branch, &e));
      if (cond != v->u.if_.cond || t != v->u.if_.then_branch || e != v->u.if_.else_branch)
        *res = nimble_ir_if(c->arena, cond, t, e, &v->loc);
      return *res ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_MATCH: {
      const nimble_expr *scrut;
      NIMBLE_RETURN_IF_ERROR(need(c, out, v->u.match.scrutinee, DEV_CPU, &scrut));
      size_t n = v->u.match.num_clauses;
      nimble_match_clause_t *cl = nimble_arena_alloc(c->arena, (n ? n : 1) * sizeof *cl);
      if (!cl) return NIMBLE_OOM();
      bool changed = scrut != v->u.match.scrutinee;
      for (size_t i = 0; i < n; i++) {
        cl[i] = v->u.match.clauses[i];
        NIMBLE_RETURN_IF_ERROR(place_host_block(c, v->u.match.clauses[i].body, &cl[i].body));
        changed |= cl[i].body != v->u.match.clauses[i].body;
      }
      if (changed) *res = nimble_ir_match(c->arena, scrut, n, cl, &v->loc);
      return *res ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_FUNC:
      return place_function(c, v, res);
    case NIMBLE_EXPR_PROJ:
    case NIMBLE_EXPR_LET:
    default:
      /* Projections read host containers; nested lets do not occur in ANF
       * (a let value is placed as a block of its own then). */
      if (v->kind == NIMBLE_EXPR_LET) return place_block(c, v, res);
      return nimble_ok();
  }
}

/* A let chain: the allocations of GPU invokes go to the GPU first (they
 * precede their invoke), then every binding in order. */
static nimble_status_t place_chain(place_ctx *c, const nimble_expr *e, bool host_result,
                                   const nimble_expr **res) {
  pass_chain chain = {0}, out = {0};
  nimble_status_t s = pass_chain_collect(e, &chain);
  size_t n = chain.n;
  bool *gpu = calloc(n ? n : 1, sizeof *gpu);
  pass_map alloc_at = {0};     /* tensor var -> index + 1 of its alloc_tensor */
  pass_map storage_uses = {0}; /* storage var -> alloc_tensors placing a tensor in it */
  pass_map gpu_vars = {0};     /* tensors and storages to allocate on the GPU */
  if (!s && !gpu) s = NIMBLE_OOM();
  for (size_t i = 0; !s && i < n; i++) {
    const nimble_expr *v = chain.values[i];
    if (pass_is_op_call(v, "alloc_tensor")) {
      uintptr_t u = (uintptr_t)pass_map_get(&storage_uses, v->u.call.args[0]);
      if (!pass_map_put(&alloc_at, chain.vars[i], (void *)(uintptr_t)(i + 1)) ||
          !pass_map_put(&storage_uses, v->u.call.args[0], (void *)(u + 1)))
        s = NIMBLE_OOM();
    }
  }
  /* GPU invokes: the primitive goes to the GPU and every output is a
   * tensor allocated in this chain in a storage of its own (which can then
   * live on the GPU). */
  for (size_t i = 0; !s && i < n; i++) {
    const nimble_expr *v = chain.values[i];
    if (!pass_is_op_call(v, "invoke")) continue;
    const nimble_op *op = pass_called_op(v);
    const char *kernel = nimble_attrs_string(op, &v->u.call.attrs, "kernel");
    size_t nargs = v->u.call.num_args, nout = (size_t)nimble_attrs_int(op, &v->u.call.attrs, "num_outputs");
    if (nout > nargs || primitive_device(c, kernel) != DEV_GPU) continue;
    bool ok = nout > 0;
    for (size_t k = nargs - nout; ok && k < nargs; k++) {
      uintptr_t at = (uintptr_t)pass_map_get(&alloc_at, v->u.call.args[k]);
      ok = at && (uintptr_t)pass_map_get(&storage_uses, chain.values[at - 1]->u.call.args[0]) == 1;
    }
    if (!ok) continue;
    gpu[i] = true;
    for (size_t k = nargs - nout; !s && k < nargs; k++) {
      const nimble_expr *t = v->u.call.args[k];
      uintptr_t at = (uintptr_t)pass_map_get(&alloc_at, t);
      if (!pass_map_put(&gpu_vars, t, (void *)1) ||
          !pass_map_put(&gpu_vars, chain.values[at - 1]->u.call.args[0], (void *)1))
        s = NIMBLE_OOM();
    }
  }
  size_t mark = c->num_memo;
  for (size_t i = 0; !s && i < n; i++) {
    const nimble_expr *v = chain.values[i], *var = chain.vars[i], *nv = v;
    int dev = DEV_CPU;
    if (pass_is_op_call(v, "alloc_storage") && pass_map_has(&gpu_vars, var)) {
      s = with_attr(c, v, "device", "cuda", &nv);
      dev = DEV_GPU;
    } else if (pass_is_op_call(v, "alloc_tensor")) {
      dev = pass_map_has(&gpu_vars, var) ? DEV_GPU : DEV_CPU;
    } else {
      s = place_value(c, &out, v, &gpu[i], &nv, &dev);
    }
    if (!s) s = set_dev(c, var, dev);
    if (!s) s = pass_chain_push(&out, var, nv);
  }
  const nimble_expr *tail = chain.tail;
  int tail_dev = DEV_CPU;
  if (!s) s = place_value(c, &out, chain.tail, NULL, &tail, &tail_dev);
  if (!s && host_result && tail_dev == DEV_GPU) {
    if (tail->kind == NIMBLE_EXPR_VAR) {
      s = need(c, &out, tail, DEV_CPU, &tail);
    } else {
      /* A GPU value that is not an atom: bind it, then copy. */
      const nimble_expr *t = pass_namer_var(&c->names, "result", NULL);
      if (!t) s = NIMBLE_OOM();
      if (!s) s = set_dev(c, t, DEV_GPU);
      if (!s) s = pass_chain_push(&out, t, tail);
      if (!s) s = need(c, &out, t, DEV_CPU, &tail);
    }
  }
  c->num_memo = mark;
  if (!s) {
    *res = pass_chain_build(c->arena, &out, tail);
    if (!*res) s = NIMBLE_OOM();
  }
  pass_map_free(&alloc_at);
  pass_map_free(&storage_uses);
  pass_map_free(&gpu_vars);
  free(gpu);
  pass_chain_free(&chain);
  pass_chain_free(&out);
  return s;
}

static nimble_status_t place_block(place_ctx *c, const nimble_expr *e, const nimble_expr **res) {
  return place_chain(c, e, false, res);
}

static nimble_status_t place_host_block(place_ctx *c, const nimble_expr *e, const nimble_expr **res) {
  return place_chain(c, e, true, res);
}

nimble_status_t nimble_passes_place_devices_stats(nimble_module *m, nimble_device_placement_stats_t *stats) {
  if (!m) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "no module");
  place_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; !s && i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    const nimble_expr *f = g->func, *nf = NULL;
    s = pass_namer_init(&c.names, c.arena, f);
    if (!s) s = place_function(&c, f, &nf);
    pass_namer_deinit(&c.names);
    if (!s && nf != f) s = nimble_module_replace_func(m, g->name, nf);
    if (s) s = nimble_status_annotate(s, "in @%s", g->name);
  }
  pass_map_free(&c.dev);
  pass_map_free(&c.prim_dev);
  free(c.memo);
  if (!s && stats) *stats = c.stats;
  return s;
}

nimble_status_t nimble_passes_place_devices(nimble_module *m) { return nimble_passes_place_devices_stats(m, NULL); }
