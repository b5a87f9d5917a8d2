/* Internals of the compute definitions: the expression graph of one
 * primitive (cp_node), the per-operator definitions (cp_def) and the
 * helpers they share (folding arithmetic on extents, broadcasting,
 * run-time checks). */
#ifndef NIMBLE_COMPUTE_INTERNAL_H
#define NIMBLE_COMPUTE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "nimble/compute.h"
#include "nimble/ir.h"
#include "nimble/loopnest.h"
#include "nimble/op.h"

#define CP_MAX_IN 16
#define CP_MAX_RANK 8
#define CP_MAX_CHECKS 512
#define CP_MAX_DIMVARS 64
/* The default schedule (nimble_tune_schedule_default says the same): a
 * parallel task gets at least this much work (loop-body evaluations); an
 * sgemm-path convolution works in blocks of about this many output floats. */
#define CP_MIN_TASK_WORK 16384
#define CP_CONV_BLOCK 65536
#define CP_MAX_TASKS 64

typedef struct cp_ctx cp_ctx;
typedef struct cp_node cp_node;

typedef enum cp_node_kind { CP_PARAM = 0, CP_CONST, CP_CALL } cp_node_kind_t;

/* How an operator is computed inside a kernel. */
typedef enum cp_class {
  CP_INJECTIVE = 0, /* a value at any output index, from input values: inlined */
  CP_ANCHOR_POINT,  /* one output element by loops over inputs (reduce, dense, conv, pool) */
  CP_ANCHOR_ROW,    /* a whole kernel by rows (softmax, layer norm): must be the root */
} cp_class_t;

/* The outputs of an operator whose kernel writes several tensors (a tuple
 * result) or reports its real shape (upper bound): each output's element
 * type, rank and extents (the bound, for an upper-bound output). */
#define CP_MAX_OUTPUTS 8
typedef struct cp_outputs {
  int n;
  bool upper; /* the kernel also writes each output's real shape (int64 [rank]) */
  nimble_ln_type_t type[CP_MAX_OUTPUTS];
  int rank[CP_MAX_OUTPUTS];
  nimble_ln_expr *ext[CP_MAX_OUTPUTS][CP_MAX_RANK];
} cp_outputs;

typedef struct cp_def {
  const char *op;
  cp_class_t cls;
  /* Sets n->rank, n->ext, n->type (and is_bool); adds shape checks. */
  nimble_status_t (*shape)(cp_ctx *c, cp_node *n);
  /* CP_INJECTIVE: the value at output index idx[0..rank). */
  nimble_ln_expr *(*value)(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx);
  /* CP_ANCHOR_POINT: computes the value at idx, binds it to `result` and
   * runs body in its scope. */
  nimble_ln_stmt *(*emit)(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                          nimble_ln_stmt *body);
  /* CP_ANCHOR_ROW: the kernel body storing into `out`. */
  nimble_ln_stmt *(*emit_root)(cp_ctx *c, cp_node *n, nimble_ln_param *out);
  /* Whole kernels with several outputs or a real shape (class
   * CP_ANCHOR_ROW, the primitive's result): `outputs` describes them (false
   * after recording an error), `emit_outputs` stores into outs[0..n) and,
   * when upper, each real shape into shapes[0..n). */
  bool (*outputs)(cp_ctx *c, cp_node *n, cp_outputs *o);
  nimble_ln_stmt *(*emit_outputs)(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                  nimble_ln_param *const *shapes);
} cp_def;

struct cp_node {
  cp_node_kind_t kind;
  const nimble_expr *expr;
  const nimble_op *op;          /* CP_CALL */
  const nimble_attrs_t *attrs;  /* CP_CALL */
  const cp_def *def;            /* CP_CALL */
  cp_node *in[CP_MAX_IN];
  int n_in;
  int rank;
  nimble_ln_expr *ext[CP_MAX_RANK]; /* i64 extents (constants when static) */
  nimble_ln_type_t type;            /* element type; NIMBLE_LN_BOOL for bool tensors */
  nimble_dtype_t dtype;             /* the IR's element type */
  nimble_ln_param *param;           /* CP_PARAM, kernel mode */
  int param_index;                  /* CP_PARAM */
  nimble_ln_expr *cval;             /* CP_CONST: the scalar value */
  int uses;                         /* references from other nodes */
  nimble_ln_expr *aux[2 * CP_MAX_RANK]; /* per-op values derived with the shape (dyn slice bounds) */
  int part_axis;                    /* split parts: the axis and the part's start */
  nimble_ln_expr *part_offset;
};

/* nonzero's kernel body: indices into out [rank, count] (allocated at
 * [rank, numel]), the real shape into out_shape [2]. */
nimble_ln_stmt *cp_emit_nonzero(cp_ctx *c, cp_node *n, nimble_ln_param *out, nimble_ln_param *out_shape);

/* topk's kernel body: values and int64 indices of the k largest (or
 * smallest) along the axis, in order, ties by the smaller index. */
nimble_ln_stmt *cp_emit_topk(cp_ctx *c, cp_node *n, nimble_ln_param *values, nimble_ln_param *indices);

/* split (a tuple of parts): the parts as nodes reading n's input with an
 * offset along the axis; *count parts (at most CP_MAX_OUTPUTS). */
bool cp_split_parts(cp_ctx *c, cp_node *n, cp_node **parts, int *count);

struct cp_ctx {
  nimble_ln_arena *A;
  nimble_ln_kernel *k;
  nimble_compute_options_t opt;
  const char *prim;   /* primitive name, for messages */
  bool shape_mode;    /* building the shape function */
  bool shape_values;  /* ... of a data-dependent primitive: it takes the input tensors */
  nimble_ln_param *shape_params[NIMBLE_LN_MAX_PARAMS]; /* shape mode: int64 [rank] per param */
  nimble_ln_stmt *checks[CP_MAX_CHECKS];
  int n_checks;
  nimble_status_t err; /* the first error (owned) */
  cp_node *anchor;     /* the one anchor of the primitive (or of the part in hand), or NULL */
  /* Every anchor: more than one only in a concatenation of convolutions
   * (one per part, see nimble_compute_primitive). */
  cp_node *anchors[CP_MAX_IN];
  int n_anchors;
  /* The part's channels in the output: o's axis 1 index of its channel 0
   * and o's axis-1 extent, while one part of such a concatenation is
   * written; NULL otherwise. */
  nimble_ln_expr *win_off, *win_total;
  /* A tuple body (fuse_ops' side outputs): each field's node, in order;
   * n_fields 0 otherwise. */
  cp_node *fields[CP_MAX_OUTPUTS];
  int n_fields;
  nimble_ln_var *anchor_var;
  nimble_ln_expr *anchor_idx[CP_MAX_RANK];
  int anchor_used;
  int n_vars;
  uint32_t dimvar_id[CP_MAX_DIMVARS];
  nimble_ln_expr *dimvar_ext[CP_MAX_DIMVARS];
  int n_dimvars;
};

/* Errors: the first one wins; later calls are ignored. Returns NULL so
 * value builders can `return cp_fail(...)`. */
void *cp_fail(cp_ctx *c, nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A run-time check (cond an i64/bool expression) with a message. */
void cp_check(cp_ctx *c, nimble_ln_expr *cond, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fresh i64 (or typed) variable with a unique name. */
nimble_ln_var *cp_var(cp_ctx *c, const char *prefix, nimble_ln_type_t type);

/* i64 arithmetic folding constants. */
bool cp_const_i(const nimble_ln_expr *e, int64_t *v);
bool cp_same(const nimble_ln_expr *a, const nimble_ln_expr *b);
nimble_ln_expr *cp_i(cp_ctx *c, int64_t v);
nimble_ln_expr *cp_add(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_sub(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_mul(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_div(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b); /* floor for >= 0 */
nimble_ln_expr *cp_rem(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_min(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_max(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
/* min(max(v, lo), hi). */
nimble_ln_expr *cp_clamp(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo, nimble_ln_expr *hi);
nimble_ln_expr *cp_eq(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_and(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b);
nimble_ln_expr *cp_product(cp_ctx *c, nimble_ln_expr *const *ext, int from, int to);

/* The broadcast extent of a and b (NumPy), with a run-time check that they
 * are compatible; `what` names the operator in the message. */
nimble_ln_expr *cp_broadcast_ext(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b, const char *what);
/* Sets n's shape to the broadcast of inputs [from, to) of n. */
nimble_status_t cp_broadcast_shape(cp_ctx *c, cp_node *n, int from, int to);
/* Input `in`'s index for output index idx of node `out` under NumPy
 * broadcasting (in aligned to out's trailing axes). */
void cp_broadcast_index(cp_ctx *c, const cp_node *in, const cp_node *out,
                        nimble_ln_expr *const *idx, nimble_ln_expr **in_idx);

/* The value of node n at index idx (rank n->rank): a load, a constant, an
 * inlined injective computation or the anchor's result variable. */
nimble_ln_expr *cp_value(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx);
/* The value at a row-major flat index of n's shape (reshape uses it). */
nimble_ln_expr *cp_value_flat(cp_ctx *c, cp_node *n, nimble_ln_expr *flat);
/* Casts an expression to f32/i64/i32 when its type differs. */
nimble_ln_expr *cp_convert(cp_ctx *c, nimble_ln_expr *e, nimble_ln_type_t to);
/* A constant of type t (rounded to a float type, clamped into an integer
 * one's range). */
nimble_ln_expr *cp_const_of(cp_ctx *c, nimble_ln_type_t t, double v);
/* The least and greatest values of t (floats: -inf and +inf): the
 * starting values of max and min reductions. */
nimble_ln_expr *cp_type_lowest(cp_ctx *c, nimble_ln_type_t t);
nimble_ln_expr *cp_type_highest(cp_ctx *c, nimble_ln_type_t t);
/* The type sums and products of t accumulate in: f32 for f16/bf16 (as
 * NumPy's reductions of half floats do), t itself otherwise. */
nimble_ln_type_t cp_acc_type(nimble_ln_type_t t);

/* Normalizes an axis for rank, recording an error on failure. */
bool cp_axis(cp_ctx *c, cp_node *n, int64_t axis, int rank, int *out);
/* Attribute accessors for n's operator. */
int64_t cp_attr_int(const cp_node *n, const char *name);
double cp_attr_float(const cp_node *n, const char *name);
const char *cp_attr_string(const cp_node *n, const char *name);
const int64_t *cp_attr_ints(const cp_node *n, const char *name, size_t *count);
bool cp_has_attr(const cp_node *n, const char *name);

/* The element type of a kernel parameter holding values of type t: bool
 * tensors are bytes (NIMBLE_LN_U8, 0 or 1); others are themselves. */
nimble_ln_type_t cp_tensor_type(nimble_ln_type_t t);
/* A load of param at a flat index as a value of the node type t: a u8
 * byte of a bool tensor becomes bool (nonzero is true). */
nimble_ln_expr *cp_load(cp_ctx *c, nimble_ln_param *param, nimble_ln_expr *flat, nimble_ln_type_t t);
/* A concatenate root of parameter inputs as one contiguous copy per input
 * and run (transform.c); NULL where the generic nest stays. */
nimble_ln_stmt *cp_concat_copy(cp_ctx *c, cp_node *n, nimble_ln_param *o);

/* Maps an IR dtype to the loop-nest type; false when there is none. */
bool cp_ln_type(nimble_dtype_t dt, nimble_ln_type_t *out, bool *is_bool);

/* Shared by the element-wise families (elementwise.c). */
/* Shape and type of the first input. */
nimble_status_t cp_shape_same(cp_ctx *c, cp_node *n);
/* floor(x) for f32 or f64 without libm. */
nimble_ln_expr *cp_f32_floor(cp_ctx *c, nimble_ln_expr *x);
/* Input i of n at the output index idx, through NumPy broadcasting. */
nimble_ln_expr *cp_in_value(cp_ctx *c, cp_node *n, int i, nimble_ln_expr *const *idx);

/* The definition tables, one per family. */
extern const cp_def cp_defs_elementwise[];
extern const int cp_defs_elementwise_count;
extern const cp_def cp_defs_indexing[]; /* indexing.c */
extern const int cp_defs_indexing_count;
extern const cp_def cp_defs_scatter[]; /* scatter.c */
extern const int cp_defs_scatter_count;
extern const cp_def cp_defs_transform[];
extern const int cp_defs_transform_count;
extern const cp_def cp_defs_reduce[];
extern const int cp_defs_reduce_count;
extern const cp_def cp_defs_nn[];
extern const int cp_defs_nn_count;
extern const cp_def cp_defs_create[];
extern const int cp_defs_create_count;
extern const cp_def cp_defs_dyn_layout[]; /* dyn_layout.c */
extern const int cp_defs_dyn_layout_count;
extern const cp_def cp_defs_resize[]; /* resize.c */
extern const int cp_defs_resize_count;
extern const cp_def cp_defs_detection[]; /* detection.c */
extern const int cp_defs_detection_count;
extern const cp_def cp_defs_unique[]; /* unique.c */
extern const int cp_defs_unique_count;
extern const cp_def cp_defs_one_hot[]; /* one_hot.c */
extern const int cp_defs_one_hot_count;
extern const cp_def cp_defs_signal[]; /* signal.c */
extern const int cp_defs_signal_count;
extern const cp_def cp_defs_linalg[]; /* linalg.c */
extern const int cp_defs_linalg_count;
extern const cp_def cp_defs_pool_indices[]; /* pool_indices.c */
extern const int cp_defs_pool_indices_count;
extern const cp_def cp_defs_dropout[]; /* dropout.c */
extern const int cp_defs_dropout_count;
extern const cp_def cp_defs_recurrent[]; /* recurrent.c */
extern const int cp_defs_recurrent_count;

const cp_def *cp_find_def(const char *op);

/* Loops for a point anchor's reduction: for v in [0, ext) around body, with
 * the innermost one vectorized when `vectorize`. */
nimble_ln_stmt *cp_for(cp_ctx *c, nimble_ln_var *v, nimble_ln_expr *ext, nimble_ln_loop_kind_t kind,
                       int factor, nimble_ln_stmt *body);
/* Rows per parallel task for `rows` rows of `row_work` work each. */
nimble_ln_expr *cp_rows_per_task(cp_ctx *c, nimble_ln_expr *rows, nimble_ln_expr *row_work);

/* Serial loops d[a] in [0, ext[a]) for a in [0, n), outermost first,
 * around body (whose work per run is body_work), the outermost in parallel
 * chunks (cp_rows_per_task) when the options allow. With two or more
 * axes the first two are one loop over their product (d[0] and d[1] from
 * its index by division), since the first is mostly a batch of 1 that
 * leaves nothing to split; a constant extent of 1 is simply skipped. */
nimble_ln_stmt *cp_parallel_outer(cp_ctx *c, nimble_ln_var *const *d, nimble_ln_expr *const *ext, int n,
                                  nimble_ln_expr *body_work, nimble_ln_stmt *body);

/* Epilogues folded into env->sgemm_epilogue (conv.c, nn.c). The operand
 * of a Relu or Clip on f32 at root, its bounds in *lo and *hi (Relu: 0 and
 * infinity); root itself with -infinity and infinity when it is neither;
 * NULL when a Clip's bound is NaN (nothing to fold). */
cp_node *cp_clamp_operand(cp_node *root, float *lo, float *hi);
/* Whether x is an f32 parameter of o's rank other than o: a residual
 * added to the product, laid out as the output when cp_same_shape holds. */
bool cp_is_residual(const cp_node *x, const nimble_ln_param *o);
/* cond && every axis of a equals b's (both of `rank` axes), at run time. */
nimble_ln_expr *cp_same_shape(cp_ctx *c, nimble_ln_expr *cond, nimble_ln_param *a, nimble_ln_param *b, int rank);

/* nest.c: serial loops v[a] in [0, ext[a]) around body, the outermost
 * chunked into parallel tasks (`work`: loop-body cost per element). */
nimble_ln_stmt *cp_loops(cp_ctx *c, nimble_ln_var *const *v, nimble_ln_expr *const *ext, int rank, int64_t work,
                         nimble_ln_stmt *body);
/* The nest storing cp_value(value_of, idx) into out at every index of
 * value_of's extents. */
nimble_ln_stmt *cp_store_nest(cp_ctx *c, cp_node *value_of, nimble_ln_param *out, int64_t work);
/* Run-time checks that extents computed from input values are
 * non-negative and hold at most CP_MAX_DYN_ELEMENTS elements together;
 * `op` names the operator in the messages. */
#define CP_MAX_DYN_ELEMENTS (INT64_C(1) << 40)
void cp_check_numel(cp_ctx *c, nimble_ln_expr *const *ext, int rank, const char *op);

/* conv2d, max_pool2d and avg_pool2d computed into the output by their own
 * loop nests (conv.c): the raw result (conv: plus its bias input), before
 * any epilogue, which the caller applies in place (epi: root's epilogue
 * over the whole output, reading n's value from o; NULL when root is n),
 * unless *fused comes back true: then the nest applies root's epilogue
 * itself, to each part of the output while it is in cache (depthwise rows,
 * sgemm column blocks; epi where it has no such place). NULL when n is not
 * one of them or its attributes are not handled there. */
bool cp_window_op(const cp_node *n);
nimble_ln_stmt *cp_window_into_out(cp_ctx *c, cp_node *n, nimble_ln_param *o, cp_node *root, nimble_ln_stmt *epi,
                                   bool *fused);
/* The epilogue of the primitive rooted at root at the output index idx
 * (rank of o), as one statement that reads the anchor's value from o at
 * idx (plus addend, unless NULL) and stores root's value there; NULL when
 * the epilogue reads the anchor at another index (or cannot be computed:
 * c->err then says why). */
/* The flat index of o at idx, the part's channel offset added to idx[1]
 * while a part of a concatenation is written (c->win_off). */
nimble_ln_expr *cp_out_flat(cp_ctx *c, nimble_ln_param *o, nimble_ln_expr *const *idx);
nimble_ln_stmt *cp_epilogue_at(cp_ctx *c, cp_node *root, nimble_ln_param *o, nimble_ln_expr *const *idx,
                               nimble_ln_expr *addend);

/* Dense and matmul through env->sgemm (nn.c): the statement that computes
 * the anchor n into the output o (one sgemm call, or a loop of calls over
 * batch matrices), NULL when not applicable; cp_gemm_desc gives the call's
 * description inside it (m, n and k are the same for every batch). */
nimble_ln_stmt *cp_gemm_sgemm(cp_ctx *c, cp_node *n, nimble_ln_param *o);
/* The own row-by-row loops for the same products when B is stored [k, n]
 * (the else branch of the sgemm call on CPU targets); NULL when not
 * applicable. Dense's C input included. */
nimble_ln_stmt *cp_gemm_rows(cp_ctx *c, cp_node *n, nimble_ln_param *o);
const nimble_ln_sgemm_desc_t *cp_gemm_desc(const nimble_ln_stmt *s);

#endif
