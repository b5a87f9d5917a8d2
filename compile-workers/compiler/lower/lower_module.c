/* The lowering driver: which globals become VM functions, the kernel table
 * (primitives and their shape functions, with mangled symbols), the
 * constant pool, and the entry's signature from the inferred types. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lower_internal.h"

struct nimble_lower_result {
  const nimble_lower_primitive_t *prims;
  size_t num_prims;
  const nimble_lower_function_t *funcs;
  size_t num_funcs;
};

/* ---- names ---------------------------------------------------------------- */

void nimble_lower_options_init(nimble_lower_options_t *o) {
  memset(o, 0, sizeof *o);
  o->entry = "main";
  o->kernel_device = kDLCPU;
  o->symbol_prefix = "nimble_k_";
}

bool nimble_lower_mangle(const char *prefix, const char *name, char *buf, size_t size) {
  if (!prefix) prefix = "nimble_k_";
  size_t n = 0;
#define PUT(ch)                    \
  do {                             \
    if (n + 1 >= size) goto small; \
    buf[n++] = (ch);               \
  } while (0)
  for (const char *p = prefix; *p; p++) PUT(*p);
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    unsigned char ch = *p;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_') {
      PUT((char)ch);
    } else if (ch == '.') {
      PUT('_');
    } else {
      static const char hex[] = "0123456789abcdef";
      PUT('_');
      PUT('x');
      PUT(hex[ch >> 4]);
      PUT(hex[ch & 15]);
    }
  }
#undef PUT
  buf[n] = '\0';
  return true;
small:
  if (size) buf[size - 1] = '\0';
  return false;
}

int64_t lw_find_func(const lower_ctx *c, const char *name) {
  for (size_t i = 0; i < c->num_funcs; i++)
    if (strcmp(c->funcs[i].name, name) == 0) return (int64_t)i;
  return -1;
}

static bool symbol_taken(const lower_ctx *c, const char *sym) {
  for (size_t i = 0; i < c->num_prims; i++)
    if (strcmp(c->prims[i].symbol, sym) == 0) return true;
  return false;
}

nimble_status_t lw_kernel(lower_ctx *c, const char *name, nimble_lower_kernel_kind_t kind,
                          uint32_t num_outputs, const char *mode, int64_t *index) {
  return lw_kernel_on(c, name, kind, num_outputs, mode, false, index);
}

nimble_status_t lw_kernel_on(lower_ctx *c, const char *name, nimble_lower_kernel_kind_t kind,
                             uint32_t num_outputs, const char *mode, bool on_cuda, int64_t *index) {
  for (size_t i = 0; i < c->num_prims; i++) {
    nimble_lower_primitive_t *p = &c->prims[i];
    if (p->kind != kind || strcmp(p->name, name) != 0) continue;
    /* One primitive invoked on two devices is two kernels. */
    if (kind == NIMBLE_LOWER_KERNEL_COMPUTE && (p->device == kDLCUDA) != on_cuda) continue;
    if (p->num_outputs != num_outputs || (mode && strcmp(p->shape_mode, mode) != 0))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "primitive '%s' is invoked with %" PRIu32 " outputs%s%s here and "
                                "%" PRIu32 "%s%s before",
                                name, num_outputs, mode ? " in mode " : "", mode ? mode : "",
                                p->num_outputs, mode ? " in mode " : "", mode ? p->shape_mode : "");
    *index = p->kernel_index;
    return nimble_ok();
  }
  if (!nimble_passes_is_primitive(name))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s' is not a primitive (\"%s*\")",
                              name, NIMBLE_PRIMITIVE_PREFIX);
  const nimble_expr *func = nimble_module_find_func(c->m, name);
  if (!func)
    return nimble_status_make(NIMBLE_NOT_FOUND, "primitive '%s' is not defined in the module", name);
  char base[512];
  if (!nimble_lower_mangle(c->opts.symbol_prefix, name, base, sizeof base - 32))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "primitive name '%.64s...' is too long", name);
  if (kind == NIMBLE_LOWER_KERNEL_SHAPE_FUNC) strcat(base, "_shape");
  char sym[512];
  snprintf(sym, sizeof sym, "%s", base);
  for (unsigned k = 2; symbol_taken(c, sym); k++) snprintf(sym, sizeof sym, "%s_%u", base, k);
  if (c->num_prims == c->cap_prims) {
    size_t cap = c->cap_prims ? c->cap_prims * 2 : 16;
    nimble_lower_primitive_t *np = realloc(c->prims, cap * sizeof *np);
    if (!np) return NIMBLE_OOM_IN("lowering");
    c->prims = np;
    c->cap_prims = cap;
  }
  DLDeviceType dev = kind == NIMBLE_LOWER_KERNEL_COMPUTE ? c->opts.kernel_device : kDLCPU;
  /* Storage sizes are host arithmetic feeding AllocStorage. */
  if (strncmp(name, NIMBLE_PRIMITIVE_PREFIX "storage_size_", strlen(NIMBLE_PRIMITIVE_PREFIX) + 13) == 0)
    dev = kDLCPU;
  /* place_devices put this invoke on the GPU (invoke device="cuda"). */
  if (kind == NIMBLE_LOWER_KERNEL_COMPUTE && on_cuda) dev = kDLCUDA;
  uint32_t k;
  NIMBLE_RETURN_IF_ERROR_CTX(lw_b_add_kernel(c->b, sym, dev, &k), "kernel '%s'", sym);
  nimble_lower_primitive_t *p = &c->prims[c->num_prims];
  p->name = nimble_arena_strdup(c->arena, name);
  p->symbol = nimble_arena_strdup(c->arena, sym);
  p->shape_mode = mode ? nimble_arena_strdup(c->arena, mode) : NULL;
  if (!p->name || !p->symbol || (mode && !p->shape_mode)) return NIMBLE_OOM_IN("lowering");
  p->func = func;
  p->kind = kind;
  p->device = dev;
  p->num_outputs = num_outputs;
  p->kernel_index = k;
  c->num_prims++;
  *index = k;
  return nimble_ok();
}

DLDataType lw_dl_dtype(nimble_dtype_t dt) {
  DLDataType r = {kDLFloat, 32, 1};
  switch (dt) {
    case NIMBLE_DTYPE_FLOAT32: r.code = kDLFloat; r.bits = 32; break;
    case NIMBLE_DTYPE_FLOAT64: r.code = kDLFloat; r.bits = 64; break;
    case NIMBLE_DTYPE_FLOAT16: r.code = kDLFloat; r.bits = 16; break;
    case NIMBLE_DTYPE_INT8: r.code = kDLInt; r.bits = 8; break;
    case NIMBLE_DTYPE_INT16: r.code = kDLInt; r.bits = 16; break;
    case NIMBLE_DTYPE_INT32: r.code = kDLInt; r.bits = 32; break;
    case NIMBLE_DTYPE_INT64: r.code = kDLInt; r.bits = 64; break;
    case NIMBLE_DTYPE_UINT8: r.code = kDLUInt; r.bits = 8; break;
    /* Bool is {kDLUInt, 1, 1}, one byte per element (TVM's bool, what the
     * tensor files read and write), so that it stays apart from uint8 in
     * signatures and outputs (docs/executable.md, "Element types"). */
    case NIMBLE_DTYPE_BOOL: r.code = kDLUInt; r.bits = 1; break;
    case NIMBLE_DTYPE_UINT16: r.code = kDLUInt; r.bits = 16; break;
    case NIMBLE_DTYPE_UINT32: r.code = kDLUInt; r.bits = 32; break;
    case NIMBLE_DTYPE_UINT64: r.code = kDLUInt; r.bits = 64; break;
    case NIMBLE_DTYPE_BFLOAT16: r.code = kDLBfloat; r.bits = 16; break;
    default: break;
  }
  return r;
}

nimble_status_t lw_constant(lower_ctx *c, const nimble_expr *e, int64_t *index) {
  if (lw_map_get(&c->consts, e, index)) return nimble_ok();
  const nimble_const_tensor_t *k = &e->u.constant;
  if (k->rank > NIMBLE_MAX_NDIM)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "a constant of rank %zu (at most %d)", k->rank,
                              NIMBLE_MAX_NDIM);
  static int64_t no_dims[1];
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = (void *)(uintptr_t)k->data;
  t.device.device_type = kDLCPU;
  t.ndim = (int32_t)k->rank;
  t.dtype = lw_dl_dtype(k->dtype);
  t.shape = k->rank ? (int64_t *)(uintptr_t)k->dims : no_dims;
  uint32_t idx;
  NIMBLE_RETURN_IF_ERROR_CTX(lw_b_add_constant(c->b, &t, c->opts.borrow_constants, &idx), "constant pool");
  if (!lw_map_put(&c->consts, e, idx)) return NIMBLE_OOM_IN("lowering");
  *index = idx;
  return nimble_ok();
}

/* ---- the entry's signature ------------------------------------------------ */

/* An ADT-typed entry input (docs/executable.md, "ADT inputs"): dtype
 * kDLOpaqueHandle and pseudo-dims (value -1) whose symbols describe it:
 * first the IR type as text ("Tree[Tensor[(), int64]]"), then one per
 * constructor: "Tree.Leaf(int64[])", "Tree.Node(Tree,Tree)". The input's
 * own type comes first, its constructors in tag order; the constructors of
 * every other ADT type its fields reach follow, type by type. Field tensors
 * are spelled "<DLPack dtype>[<dims>]" with "?" for an Any dim. */
#define ADT_MAX_CTORS (NIMBLE_MAX_NDIM - 1)
typedef struct adt_desc {
  const nimble_type *types[ADT_MAX_CTORS]; /* instantiated ADT types, in order */
  size_t num_types;
  const char *ctors[ADT_MAX_CTORS];
  size_t num_ctors;
} adt_desc;

/* Substitutes the typedef's parameters by the instance's arguments. */
static const nimble_type *instantiate(lower_ctx *c, const nimble_typedef *td, const nimble_type *inst,
                                      const nimble_type *field) {
  if (field->kind == NIMBLE_TYPE_VAR) {
    for (size_t i = 0; i < td->num_params && i < inst->u.adt.num_args; i++)
      if (td->params[i]->kind == NIMBLE_TYPE_VAR && td->params[i]->u.var.id == field->u.var.id)
        return inst->u.adt.args[i];
    return field;
  }
  if (field->kind != NIMBLE_TYPE_ADT || field->u.adt.num_args == 0) return field;
  const nimble_type **args = nimble_arena_calloc(c->arena, field->u.adt.num_args, sizeof *args);
  if (!args) return NULL;
  for (size_t i = 0; i < field->u.adt.num_args; i++) {
    args[i] = instantiate(c, td, inst, field->u.adt.args[i]);
    if (!args[i]) return NULL;
  }
  return nimble_type_adt(c->arena, field->u.adt.name, field->u.adt.num_args, args);
}

/* Index of ADT type `t` in d->types, adding it (and checking that another
 * instance of the same type definition is not there) when new. */
static nimble_status_t adt_type_index(lower_ctx *c, const char *input, adt_desc *d, const nimble_type *t,
                                      size_t *index) {
  char a[160], b[160];
  for (size_t i = 0; i < d->num_types; i++) {
    if (strcmp(d->types[i]->u.adt.name, t->u.adt.name) != 0) continue;
    if (!nimble_type_equal(d->types[i], t))
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "entry '%s': input '%s' reaches both %s and %s; an ADT input may use "
                                "one instance of each type definition",
                                c->opts.entry, input, nimble_type_format(d->types[i], a, sizeof a),
                                nimble_type_format(t, b, sizeof b));
    *index = i;
    return nimble_ok();
  }
  if (d->num_types == ADT_MAX_CTORS)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s': input '%s' reaches more than %d ADT types",
                              c->opts.entry, input, ADT_MAX_CTORS);
  d->types[d->num_types] = t;
  *index = d->num_types++;
  return nimble_ok();
}

static nimble_status_t describe_adt(lower_ctx *c, const char *input, const nimble_type *root, adt_desc *d) {
  char buf[160];
  size_t ignored;
  memset(d, 0, sizeof *d);
  NIMBLE_RETURN_IF_ERROR(adt_type_index(c, input, d, root, &ignored));
  for (size_t ti = 0; ti < d->num_types; ti++) {
    const nimble_type *t = d->types[ti];
    const nimble_typedef *td = nimble_module_find_typedef(c->m, t->u.adt.name);
    if (!td)
      return nimble_status_make(NIMBLE_NOT_FOUND, "entry '%s': input '%s': type '%s' is not defined",
                                c->opts.entry, input, t->u.adt.name);
    if (td->num_ctors == 0 || d->num_ctors + td->num_ctors > ADT_MAX_CTORS)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "entry '%s': input '%s': type '%s' gives %zu constructors (an ADT input "
                                "may reach 1 to %d)",
                                c->opts.entry, input, td->name, d->num_ctors + td->num_ctors, ADT_MAX_CTORS);
    for (size_t k = 0; k < td->num_ctors; k++) {
      const nimble_constructor *ctor = td->ctors[k];
      char text[1024];
      size_t used = (size_t)snprintf(text, sizeof text, "%s.%s(", td->name, ctor->name);
      for (size_t f = 0; f < ctor->num_fields && used < sizeof text; f++) {
        const nimble_type *ft = instantiate(c, td, t, ctor->fields[f]);
        if (!ft) return NIMBLE_OOM_IN("lowering");
        const char *sep = f ? "," : "";
        if (ft->kind == NIMBLE_TYPE_ADT) {
          size_t fi;
          NIMBLE_RETURN_IF_ERROR(adt_type_index(c, input, d, ft, &fi));
          used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", sep, ft->u.adt.name);
          continue;
        }
        if (ft->kind != NIMBLE_TYPE_TENSOR || ft->u.tensor.rank > NIMBLE_MAX_NDIM)
          return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                    "entry '%s': input '%s': field %zu of constructor %s is %s; fields of "
                                    "an ADT input are tensors or ADTs",
                                    c->opts.entry, input, f, ctor->name,
                                    nimble_type_format(ft, buf, sizeof buf));
        DLDataType dt = lw_dl_dtype(ft->u.tensor.dtype);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s%u[", sep,
                                 dt.code == kDLFloat ? "float" : dt.code == kDLUInt ? "uint" : "int", dt.bits);
        for (size_t i = 0; i < ft->u.tensor.rank && used < sizeof text; i++) {
          nimble_dim_t dim = ft->u.tensor.dims[i];
          if (dim.kind == NIMBLE_DIM_VAR)
            return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                      "entry '%s': input '%s': field %zu of constructor %s is %s; a field of "
                                      "an ADT input may have constant and Any dims, not named ones",
                                      c->opts.entry, input, f, ctor->name,
                                      nimble_type_format(ft, buf, sizeof buf));
          if (dim.kind == NIMBLE_DIM_CONST)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%" PRId64, i ? "," : "", dim.value);
          else
            used += (size_t)snprintf(text + used, sizeof text - used, "%s?", i ? "," : "");
        }
        if (used < sizeof text) used += (size_t)snprintf(text + used, sizeof text - used, "]");
      }
      if (used < sizeof text) used += (size_t)snprintf(text + used, sizeof text - used, ")");
      if (used >= sizeof text)
        return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s': input '%s': constructor %s has too "
                                  "long a description", c->opts.entry, input, ctor->name);
      d->ctors[d->num_ctors] = nimble_arena_strdup(c->arena, text);
      if (!d->ctors[d->num_ctors]) return NIMBLE_OOM_IN("lowering");
      d->num_ctors++;
    }
  }
  return nimble_ok();
}

static nimble_status_t adt_info(lower_ctx *c, const char *name, const nimble_type *t, lw_sig *out) {
  adt_desc d;
  NIMBLE_RETURN_IF_ERROR(describe_adt(c, name, t, &d));
  size_t n = d.num_ctors + 1;
  int64_t *dims = nimble_arena_calloc(c->arena, n, sizeof *dims);
  const char **syms = nimble_arena_calloc(c->arena, n, sizeof *syms);
  const char *text = nimble_type_to_string(c->arena, t);
  if (!dims || !syms || !text) return NIMBLE_OOM_IN("lowering");
  if (strlen(text) > 4096)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s': input '%s': its type's text is over 4096 bytes",
                              c->opts.entry, name);
  for (size_t i = 0; i < n; i++) {
    dims[i] = -1;
    syms[i] = i ? d.ctors[i - 1] : text;
  }
  memset(out, 0, sizeof *out);
  out->name = name;
  out->dtype.code = kDLOpaqueHandle;
  out->dtype.bits = 64;
  out->dtype.lanes = 1;
  out->ndim = (int32_t)n;
  out->dims = dims;
  out->symbols = syms;
  return nimble_ok();
}

static nimble_status_t tensor_info(lower_ctx *c, const char *what, const char *name,
                                   const nimble_type *t, lw_sig *out) {
  char buf[160];
  if (t && t->kind == NIMBLE_TYPE_ADT && strcmp(what, "input") == 0) return adt_info(c, name, t, out);
  if (t && t->kind == NIMBLE_TYPE_UNRANKED_TENSOR) {
    /* An output may have any rank (the runtime then checks its dtype only,
     * NIMBLE_NDIM_ANY); an input must say what the caller gives. */
    if (strcmp(what, "output") == 0) {
      memset(out, 0, sizeof *out);
      out->name = name;
      out->dtype = lw_dl_dtype(t->u.tensor.dtype);
      out->ndim = -1;
      return nimble_ok();
    }
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "entry '%s': %s '%s' has type %s: an entry's inputs have a known rank",
                              c->opts.entry, what, name, nimble_type_format(t, buf, sizeof buf));
  }
  if (!t || t->kind != NIMBLE_TYPE_TENSOR)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "entry '%s': %s '%s' has type %s; entries take tensors and ADTs and "
                              "return tensors (or a tuple of two or more tensors)",
                              c->opts.entry, what, name, t ? nimble_type_format(t, buf, sizeof buf) : "?");
  size_t rank = t->u.tensor.rank;
  if (rank > NIMBLE_MAX_NDIM)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s': %s '%s' has rank %zu", c->opts.entry,
                              what, name, rank);
  int64_t *dims = nimble_arena_calloc(c->arena, rank ? rank : 1, sizeof *dims);
  const char **syms = nimble_arena_calloc(c->arena, rank ? rank : 1, sizeof *syms);
  if (!dims || !syms) return NIMBLE_OOM_IN("lowering");
  for (size_t i = 0; i < rank; i++) {
    nimble_dim_t d = t->u.tensor.dims[i];
    dims[i] = d.kind == NIMBLE_DIM_CONST ? d.value : -1;
    syms[i] = d.kind == NIMBLE_DIM_VAR && d.name ? d.name : "";
  }
  memset(out, 0, sizeof *out);
  out->name = name;
  out->dtype = lw_dl_dtype(t->u.tensor.dtype);
  out->ndim = (int32_t)rank;
  out->dims = dims;
  out->symbols = syms;
  return nimble_ok();
}

static nimble_status_t add_entry(lower_ctx *c, const nimble_typing *types, const lw_func *f) {
  if (f->closure)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s' returns a closure", c->opts.entry);
  const nimble_expr *fn = f->global;
  size_t np = fn->u.func.num_params;
  lw_sig *in = nimble_arena_calloc(c->arena, np ? np : 1, sizeof *in);
  if (!in) return NIMBLE_OOM_IN("lowering");
  for (size_t i = 0; i < np; i++) {
    const nimble_expr *p = fn->u.func.params[i];
    const nimble_type *t = p->u.var.annotation ? p->u.var.annotation : nimble_typing_type_of(types, p);
    NIMBLE_RETURN_IF_ERROR(tensor_info(c, "input", p->u.var.name, t, &in[i]));
  }
  const nimble_type *gt = nimble_typing_global_type(types, f->name);
  const nimble_type *ret = gt && gt->kind == NIMBLE_TYPE_FUNC ? gt->u.func.ret : NULL;
  if (fn->u.func.ret) ret = fn->u.func.ret;
  size_t no = ret && ret->kind == NIMBLE_TYPE_TUPLE ? ret->u.tuple.count : 1;
  if (ret && ret->kind == NIMBLE_TYPE_TUPLE && no < 2)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "entry '%s' returns a tuple of %zu; return a tensor or a tuple of two "
                              "or more tensors",
                              c->opts.entry, no);
  if (c->opts.output_names && c->opts.num_output_names != no)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s' has %zu outputs, but %zu output names were given",
                              c->opts.entry, no, c->opts.num_output_names);
  lw_sig *outs = nimble_arena_calloc(c->arena, no, sizeof *outs);
  if (!outs) return NIMBLE_OOM_IN("lowering");
  for (size_t i = 0; i < no; i++) {
    const char *given = c->opts.output_names ? c->opts.output_names[i] : NULL;
    const char *name = given && given[0] ? given : nimble_arena_sprintf(c->arena, "output%zu", i);
    if (!name) return NIMBLE_OOM_IN("lowering");
    const nimble_type *t = ret && ret->kind == NIMBLE_TYPE_TUPLE ? ret->u.tuple.fields[i] : ret;
    NIMBLE_RETURN_IF_ERROR(tensor_info(c, "output", name, t, &outs[i]));
  }
  return lw_b_add_entry(c->b, c->opts.entry, f->vm_index, in, (uint32_t)np, outs,
                                  (uint32_t)no);
}

/* ---- the driver ----------------------------------------------------------- */

static nimble_status_t emit_function(lower_ctx *c, lw_func *f) {
  for (size_t i = 0; i < f->n; i++) {
    lw_ins *ins = &f->ins[i];
    int64_t *ops = lw_ins_ops(ins);
    if (ins->func_operand >= 0) {
      int64_t pos = ops[ins->func_operand];
      ops[ins->func_operand] = c->funcs[pos].vm_index;
    }
    NIMBLE_RETURN_IF_ERROR(lw_b_emit(c->b, f->vm_index, ins->op, ops, ins->n));
  }
  return nimble_ok();
}

static void free_ctx(lower_ctx *c) {
  for (size_t i = 0; i < c->num_funcs; i++) {
    for (size_t k = 0; k < c->funcs[i].n; k++) free(c->funcs[i].ins[k].big);
    free(c->funcs[i].ins);
  }
  free(c->funcs);
  free(c->prims);
  lw_map_free(&c->consts);
}

static nimble_status_t lower(lower_ctx *c, const nimble_lower_result **out) {
  const nimble_module *m = c->m;
  size_t total = nimble_module_num_funcs(m);
  c->funcs = calloc(total ? total : 1, sizeof *c->funcs);
  if (!c->funcs) return NIMBLE_OOM_IN("lowering");
  for (size_t i = 0; i < total; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    lw_func *f = &c->funcs[c->num_funcs++];
    f->name = g->name;
    f->global = g->func;
    f->code = g->func;
    const nimble_expr *body = g->func->u.func.body;
    if (body->kind == NIMBLE_EXPR_FUNC) {
      f->closure = true;
      f->code = body;
    }
    size_t np = g->func->u.func.num_params + (f->closure ? body->u.func.num_params : 0);
    if (np > NIMBLE_MAX_REGISTERS)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "@%s has %zu parameters", g->name, np);
    f->num_params = (uint32_t)np;
  }
  int64_t entry = lw_find_func(c, c->opts.entry);
  if (entry < 0)
    return nimble_status_make(NIMBLE_NOT_FOUND, "the module has no global @%s for the entry",
                              c->opts.entry);
  nimble_typing *types;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, &types), "lowering: typing the module");
  for (size_t i = 0; i < c->num_funcs; i++)
    NIMBLE_RETURN_IF_ERROR_CTX(lw_compile_function(c, &c->funcs[i]), "lowering @%s", c->funcs[i].name);
  for (size_t i = 0; i < c->num_funcs; i++) {
    lw_func *f = &c->funcs[i];
    NIMBLE_RETURN_IF_ERROR(
        lw_b_add_function(c->b, f->name, f->num_params, f->num_registers, &f->vm_index));
  }
  for (size_t i = 0; i < c->num_funcs; i++) NIMBLE_RETURN_IF_ERROR(emit_function(c, &c->funcs[i]));
  NIMBLE_RETURN_IF_ERROR(add_entry(c, types, &c->funcs[entry]));

  nimble_lower_result *r = nimble_arena_calloc(c->arena, 1, sizeof *r);
  nimble_lower_primitive_t *prims = nimble_arena_calloc(c->arena, c->num_prims ? c->num_prims : 1,
                                                        sizeof *prims);
  nimble_lower_function_t *fs = nimble_arena_calloc(c->arena, c->num_funcs, sizeof *fs);
  if (!r || !prims || !fs) return NIMBLE_OOM_IN("lowering");
  if (c->num_prims) memcpy(prims, c->prims, c->num_prims * sizeof *prims);
  for (size_t i = 0; i < c->num_funcs; i++) {
    fs[i].name = c->funcs[i].name;
    fs[i].index = c->funcs[i].vm_index;
    fs[i].num_params = c->funcs[i].num_params;
    fs[i].num_registers = c->funcs[i].num_registers;
    fs[i].num_instructions = (uint32_t)c->funcs[i].n;
  }
  r->prims = prims;
  r->num_prims = c->num_prims;
  r->funcs = fs;
  r->num_funcs = c->num_funcs;
  if (out) *out = r;
  return nimble_ok();
}

nimble_status_t nimble_lower_module(const nimble_module *m, const nimble_lower_options_t *options,
                                    nimble_executable_builder *builder,
                                    const nimble_lower_result **out) {
  if (!m || !builder)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_lower_module: NULL module or builder");
  lower_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  c.b = builder;
  nimble_lower_options_init(&c.opts);
  if (options) {
    if (options->entry) c.opts.entry = options->entry;
    if (options->kernel_device) c.opts.kernel_device = options->kernel_device;
    if (options->symbol_prefix) c.opts.symbol_prefix = options->symbol_prefix;
    c.opts.output_names = options->output_names;
    c.opts.num_output_names = options->output_names ? options->num_output_names : 0;
  }
  size_t plen = strlen(c.opts.symbol_prefix);
  bool ok = plen <= 64;
  for (size_t i = 0; ok && i < plen; i++) {
    char ch = c.opts.symbol_prefix[i];
    ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
  }
  if (!ok)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "symbol prefix '%.80s' (at most 64 bytes of [A-Za-z0-9_])",
                              c.opts.symbol_prefix);
  if (c.opts.kernel_device != kDLCPU && c.opts.kernel_device != kDLCUDA) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel device type %d (cpu 1 or cuda 2)",
                              (int)c.opts.kernel_device);
  }
  nimble_status_t s = lower(&c, out);
  free_ctx(&c);
  return s;
}

size_t nimble_lower_num_primitives(const nimble_lower_result *r) { return r ? r->num_prims : 0; }

const nimble_lower_primitive_t *nimble_lower_primitive_at(const nimble_lower_result *r, size_t i) {
  return r && i < r->num_prims ? &r->prims[i] : NULL;
}

size_t nimble_lower_num_functions(const nimble_lower_result *r) { return r ? r->num_funcs : 0; }

const nimble_lower_function_t *nimble_lower_function_at(const nimble_lower_result *r, size_t i) {
  return r && i < r->num_funcs ? &r->funcs[i] : NULL;
}

const nimble_lower_function_t *nimble_lower_find_function(const nimble_lower_result *r,
                                                          const char *name) {
  for (size_t i = 0; r && i < r->num_funcs; i++)
    if (strcmp(r->funcs[i].name, name) == 0) return &r->funcs[i];
  return NULL;
}
