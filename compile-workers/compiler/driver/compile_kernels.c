/* The kernels of a lowered module: one loop-nest kernel per primitive the
 * lowering listed (nimble/compute.h), compiled and linked together by the
 * code generator into the builder's kernel libraries: the CPU kernels (the
 * host triple's shared object, part kind 4) and, for the cuda target, the
 * GPU kernels as PTX (part kind 5) with a thread mapping per operator
 * class (docs/targets.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_kernels.h"
#include "nimble/codegen.h"
#include "nimble/compute.h"
#include "nimble/digest.h"
#include "nimble/kernel_abi.h"
#include "nimble/loopnest.h"

/* The thread mapping of a GPU primitive: a 2-D tiled mapping when its
 * anchor is a matrix product, otherwise one thread per output element
 * (element-wise, injective, conv, pooling) or per output (reductions,
 * softmax, normalisation: the reduction runs inside the thread). */
static bool has_matmul(const nimble_expr *e) {
  if (!e) return false;
  switch (e->kind) {
    case NIMBLE_EXPR_CALL: {
      if (e->u.call.callee->kind == NIMBLE_EXPR_OP) {
        const char *op = e->u.call.callee->u.op.op->name;
        if (!strcmp(op, "dense") || !strcmp(op, "matmul") || !strcmp(op, "batch_matmul")) return true;
      }
      for (size_t i = 0; i < e->u.call.num_args; i++)
        if (has_matmul(e->u.call.args[i])) return true;
      return false;
    }
    case NIMBLE_EXPR_LET: return has_matmul(e->u.let.value) || has_matmul(e->u.let.body);
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++)
        if (has_matmul(e->u.tuple.fields[i])) return true;
      return false;
    case NIMBLE_EXPR_PROJ: return has_matmul(e->u.proj.tuple);
    default: return false;
  }
}

/* The kernels of one device: built in phase "compute", compiled in
 * phase "codegen". */
typedef struct kernel_set {
  DLDeviceType device;
  nimble_ln_arena *arena;
  nimble_ln_arena *clone_arena; /* the AVX-512 clones', apart: one that fails cannot fail the others */
  const nimble_ln_kernel **kernels;
  size_t n;
} kernel_set;

static void kernel_set_deinit(kernel_set *ks) {
  free(ks->kernels);
  nimble_ln_arena_destroy(ks->arena);
  if (ks->clone_arena) nimble_ln_arena_destroy(ks->clone_arena);
  memset(ks, 0, sizeof *ks);
}

/* The digest of a kernel's canonical print (nimble_ln_kernel_print_canonical),
 * all but its name, after `prefix`, as 64 hex digits. */
static void nest_digest(const char *text, const char *prefix, char out[NIMBLE_TUNE_SIGNATURE_LEN + 1]) {
  const char *from = strchr(text, '(');
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  nimble_digest_ctx_update(&ctx, prefix, strlen(prefix));
  if (from) nimble_digest_ctx_update(&ctx, from, strlen(from));
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  char hex[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&d, hex);
  memcpy(out, hex + 7, NIMBLE_TUNE_SIGNATURE_LEN + 1); /* after "sha256:" */
}


/* Whether a kernel gets an AVX-512 clone under the schedule's choice
 * (nimble/tune_record.h): by default the kernels whose vector loops
 * evaluate exp, tanh, sigmoid or erf (see avx512_clone). A choice of
 * tuning's applies only where the clone gives the AVX2 kernel's bits
 * (records never change results): a sum's 16 lanes would add in another
 * order than its 8. */
static bool wants_clone(const nimble_ln_kernel *k, int32_t choice) {
  if (!nimble_ln_kernel_lane_exact(k)) choice = NIMBLE_TUNE_CLONE_AUTO;
  switch (choice) {
  case NIMBLE_TUNE_CLONE_YES: return nimble_ln_kernel_vectorized(k);
  case NIMBLE_TUNE_CLONE_NO: return false;
  default: return nimble_ln_kernel_vector_transcendental(k);
  }
}

/* How a kernel was scheduled: the options and interleave count of each
 * of its schedules by size (one without size buckets), the bounds between
 * them, and whether it gets an AVX-512 clone; the clone is built the same
 * way (avx512_clone). */
typedef struct scheduled {
  int n;
  nimble_compute_options_t co[NIMBLE_LN_MAX_SIZE_SCHEDULES];
  int interleave[NIMBLE_LN_MAX_SIZE_SCHEDULES];
  int64_t bounds[NIMBLE_LN_MAX_SIZE_SCHEDULES - 1];
  bool clone;
} scheduled;

/* The primitive's nest under schedule `pick` into *out, its options into
 * *used and interleave count into *interleave; *out is left alone (and
 * *rebuilt false) when the nest would be the default one already there.
 * Another vector width applies only where the bits do not depend on it
 * (`lane_exact`: no vectorized reduction in the default nest). */
static nimble_status_t build_schedule(const nimble_module *m, const nimble_lower_primitive_t *prim,
                                      const nimble_compute_options_t *base, const nimble_tune_schedule_t *pick,
                                      bool lane_exact, nimble_ln_arena *arena, nimble_ln_kernel **out,
                                      nimble_compute_options_t *used, int *interleave, bool *rebuilt) {
  nimble_tune_schedule_t def = nimble_tune_schedule_default();
  nimble_compute_options_t co = *base;
  co.parallel = pick->parallel && base->parallel;
  co.min_task_work = pick->min_task_work;
  co.conv_block = pick->conv_block;
  co.vector_width = pick->vector_width && lane_exact ? pick->vector_width : base->vector_width;
  *rebuilt = false;
  if (!*out || pick->parallel != def.parallel || pick->min_task_work != def.min_task_work ||
      pick->conv_block != def.conv_block || co.vector_width != base->vector_width) {
    NIMBLE_RETURN_IF_ERROR(nimble_compute_primitive(m, prim->name, &co, arena, out));
    *rebuilt = true;
  }
  *used = co;
  *interleave = pick->interleave;
  if (*interleave && nimble_ln_kernel_set_interleave(*out, *interleave)) *rebuilt = true;
  return nimble_ok();
}

/* A CPU compute kernel under tuning (docs/tuning.md): built with the
 * default schedule for its workload signature (the loop nest says
 * everything the kernel computes, with symbolic dims left symbolic), then
 * again with the record's schedule for (target kind, this CPU, signature)
 * or the override, when that differs; a record with size buckets builds
 * each bucket's schedule and joins them into one kernel that picks by its
 * output's size (nimble_ln_kernel_by_size). Lists the workload in r; `sc`
 * says how the kernel was scheduled and whether it gets an AVX-512 clone
 * (`clones`: the target allows them), which its variant includes. */
static nimble_status_t compute_scheduled(const nimble_module *m, const nimble_lower_primitive_t *prim,
                                         const nimble_compute_options_t *base, const nimble_compile_options_t *o,
                                         nimble_compile_result *r, const char *cpu_key, bool clones,
                                         nimble_ln_arena *arena, nimble_ln_kernel **out, scheduled *sc) {
  nimble_compute_options_t co = *base;
  nimble_tune_schedule_t def = nimble_tune_schedule_default();
  co.parallel = def.parallel && base->parallel;
  co.min_task_work = def.min_task_work;
  co.conv_block = def.conv_block;
  NIMBLE_RETURN_IF_ERROR(nimble_compute_primitive(m, prim->name, &co, arena, out));
  nimble_compile_workload_t *w = &r->workloads[r->num_workloads];
  w->symbol = prim->symbol;
  /* The default nest's print gives the signature and, when no other
   * schedule applies, the variant too. */
  char *text = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_ln_kernel_print_canonical(*out, &text));
  nest_digest(text, "nimble workload v1\n", w->signature);
  const char *kind = nimble_target_kind_name(r->target.kind);
  const nimble_tune_record_t *rec = NULL;
  for (size_t j = 0; j < o->num_tune_records && !rec; j++) {
    const nimble_tune_record_t *c = &o->tune_records[j];
    if (!strcmp(c->signature, w->signature) && !strcmp(c->target, kind) && !strcmp(c->cpu, cpu_key)) rec = c;
  }
  w->from_record = rec != NULL;
  /* The schedules by size: the record's buckets', then its own (or the
   * override, or the default) for larger calls; one without buckets. */
  const nimble_tune_schedule_t *scheds[NIMBLE_LN_MAX_SIZE_SCHEDULES];
  int n = rec && rec->num_buckets > 0 ? rec->num_buckets + 1 : 1;
  if (n > NIMBLE_LN_MAX_SIZE_SCHEDULES) n = NIMBLE_LN_MAX_SIZE_SCHEDULES;
  for (int j = 0; j < n - 1; j++) {
    scheds[j] = &rec->buckets[j].schedule;
    sc->bounds[j] = rec->buckets[j].max_elements;
  }
  scheds[n - 1] = rec ? &rec->schedule : o->schedule_override ? o->schedule_override : &def;
  w->schedule = *scheds[n - 1];
  bool lane_exact = nimble_ln_kernel_lane_exact(*out);
  bool changed = n > 1; /* the nest differs from the default one printed above */
  nimble_ln_kernel *ks[NIMBLE_LN_MAX_SIZE_SCHEDULES] = {*out};
  nimble_status_t s = nimble_ok();
  for (int j = 0; j < n && !s; j++) {
    bool rebuilt;
    s = build_schedule(m, prim, base, scheds[j], lane_exact, arena, &ks[j], &sc->co[j], &sc->interleave[j],
                       &rebuilt);
    changed |= rebuilt;
  }
  /* One clone serves every size: the largest size's schedule decides. */
  if (!s) sc->clone = clones && wants_clone(ks[n - 1], scheds[n - 1]->avx512_clone);
  if (!s && n > 1 && !nimble_ln_kernel_by_size(ks, sc->bounds, n)) {
    s = nimble_ln_arena_status(arena);
    if (!s) s = NIMBLE_OOM();
  }
  *out = ks[0];
  sc->n = n;
  if (!s && changed) { /* the nest's print is its variant (and its cache key) */
    free(text);
    text = NULL;
    s = nimble_ln_kernel_print_canonical(*out, &text);
  }
  if (s) {
    free(text);
    return s;
  }
  w->clone = sc->clone;
  nest_digest(text, sc->clone ? "with an x86-64-v4 clone\n" : "", w->variant);
  free(text);
  r->num_workloads++;
  return nimble_ok();
}

/* Whether CPU kernels get AVX-512 clones: x86 with the default CPU and no
 * features (a spec naming its CPU gets code for that CPU alone). */
static bool wants_avx512_clones(const nimble_target_t *t) {
  return t->kind == NIMBLE_TARGET_X86 && strcmp(nimble_target_cpu(t), "x86-64-v3") == 0 && !t->features[0];
}

/* The primitive's kernel again, as `sc` built it but 16 lanes wide,
 * named sym + NIMBLE_KERNEL_AVX512_SUFFIX and built for x86-64-v4. By
 * default only for the kernels whose vector loops evaluate exp, tanh,
 * sigmoid or erf (tuning may choose otherwise per kernel, wants_clone):
 * against the AVX2 kernel, bert_tiny's GELU 55 -> 27 us and its softmax
 * 21.5 -> 17, an LSTM step's gates 0.47 -> 0.29 us (the same nest for
 * x86-64-v4 at 8 lanes: 29, 21.5 and 0.30); max pools on 8- and 16-pixel
 * rows were slower (cnn's 3.0 -> 6.4 us), products and convolutions are
 * the runtime's and unchanged. A kernel with size buckets gets a clone
 * with the same buckets. */
static nimble_status_t avx512_clone(const nimble_module *m, const nimble_lower_primitive_t *prim,
                                    const scheduled *sc, nimble_ln_arena *arena, const nimble_ln_kernel **out) {
  nimble_ln_kernel *ks[NIMBLE_LN_MAX_SIZE_SCHEDULES] = {NULL};
  for (int j = 0; j < sc->n; j++) {
    nimble_compute_options_t co = sc->co[j];
    co.vector_width = 16;
    NIMBLE_RETURN_IF_ERROR(nimble_compute_primitive(m, prim->name, &co, arena, &ks[j]));
    if (sc->interleave[j]) nimble_ln_kernel_set_interleave(ks[j], sc->interleave[j]);
  }
  nimble_ln_kernel *w = sc->n > 1 ? nimble_ln_kernel_by_size(ks, sc->bounds, sc->n) : ks[0];
  size_t len = strlen(prim->symbol) + sizeof NIMBLE_KERNEL_AVX512_SUFFIX;
  char *name = w ? nimble_ln_arena_alloc(arena, len) : NULL;
  if (!name) {
    nimble_status_t s = nimble_ln_arena_status(arena);
    return s ? s : NIMBLE_OOM();
  }
  snprintf(name, len, "%s%s", prim->symbol, NIMBLE_KERNEL_AVX512_SUFFIX);
  w->name = name;
  w->isa = NIMBLE_LN_ISA_X86_64_V4;
  *out = w;
  return nimble_ok();
}

/* Builds the loop nest of every primitive on ks->device. */
static nimble_status_t compute_set(const nimble_module *m, const nimble_lower_result *lr, kernel_set *ks,
                                   nimble_compile_phase_clock *clock, size_t *done, size_t total) {
  nimble_compile_result *r = clock->r;
  size_t n_all = nimble_lower_num_primitives(lr), n = 0;
  for (size_t i = 0; i < n_all; i++) n += nimble_lower_primitive_at(lr, i)->device == ks->device;
  if (n == 0) return nimble_ok();
  bool gpu = ks->device == kDLCUDA;
  bool clones = !gpu && wants_avx512_clones(&r->target);
  NIMBLE_RETURN_IF_ERROR(nimble_ln_arena_create(&ks->arena));
  if (clones) NIMBLE_RETURN_IF_ERROR(nimble_ln_arena_create(&ks->clone_arena));
  ks->kernels = calloc(clones ? 2 * n : n, sizeof *ks->kernels);
  if (!ks->kernels) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory for %zu kernels", n);
  nimble_compute_options_t co = nimble_compute_default_options();
  /* NEON holds 4 float32 lanes, AVX2 8. On the GPU the loops stay plain:
   * the thread mapping spreads them over threads. */
  co.vector_width = r->target.kind == NIMBLE_TARGET_AARCH64 ? 4 : 8;
  if (gpu) {
    co.vector_width = 1;
    co.parallel = false;
    co.use_sgemm = false;
  }
  const nimble_compile_options_t *o = clock->o;
  bool tuned = !gpu && (o->workloads || o->tune_records || o->schedule_override);
  char cpu_key[NIMBLE_TUNE_CPU_MAX + 1] = "";
  if (tuned) {
    nimble_compile_host_cpu_key(cpu_key, sizeof cpu_key);
    free(r->workloads);
    r->num_workloads = 0;
    if (!(r->workloads = calloc(n, sizeof *r->workloads))) return NIMBLE_OOM_IN("compute");
  }
  for (size_t i = 0; i < n_all; i++) {
    const nimble_lower_primitive_t *prim = nimble_lower_primitive_at(lr, i);
    if (prim->device != ks->device) continue;
    nimble_ln_kernel *k = NULL;
    co.kernel_name = prim->symbol;
    scheduled sc = {.n = 1, .co = {co}};
    if (prim->kind == NIMBLE_LOWER_KERNEL_COMPUTE && tuned) {
      NIMBLE_RETURN_IF_ERROR(compute_scheduled(m, prim, &co, o, r, cpu_key, clones, ks->arena, &k, &sc));
    } else if (prim->kind == NIMBLE_LOWER_KERNEL_COMPUTE) {
      NIMBLE_RETURN_IF_ERROR(nimble_compute_primitive(m, prim->name, &co, ks->arena, &k));
      sc.clone = clones && wants_clone(k, NIMBLE_TUNE_CLONE_AUTO);
    } else if (gpu) {
      return nimble_status_make(NIMBLE_INTERNAL, "the shape function of '%s' was placed on the GPU", prim->name);
    } else if (prim->shape_mode &&
               (strcmp(prim->shape_mode, "data_independent") == 0 || strcmp(prim->shape_mode, "data_dependent") == 0 ||
                strcmp(prim->shape_mode, "upper_bound") == 0)) {
      /* compute picks the shape function's arguments from the primitive's
       * operators: data-independent ones take input shapes, the others the
       * input tensors (docs/compute.md). */
      NIMBLE_RETURN_IF_ERROR(nimble_compute_shape_func(m, prim->name, &co, ks->arena, &k));
    } else {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the shape function of '%s' has an unknown mode '%s'",
                                prim->name, prim->shape_mode ? prim->shape_mode : "(none)");
    }
    /* compute names shape functions "<name>__shape_func"; the bytecode
     * calls the symbol the lowering chose, so that is the one exported. */
    char *sym = nimble_ln_arena_strdup(ks->arena, prim->symbol);
    if (!sym) {
      nimble_status_t s = nimble_ln_arena_status(ks->arena);
      return s ? s : NIMBLE_OOM();
    }
    k->name = sym;
    if (gpu) {
      nimble_codegen_thread_mapping_t map =
          has_matmul(prim->func ? prim->func->u.func.body : NULL) ? NIMBLE_CODEGEN_MAP_TILED_2D
                                                                  : NIMBLE_CODEGEN_MAP_PER_OUTPUT;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_codegen_map_threads(ks->arena, k, map), "thread mapping of '%s'",
                                 prim->name);
    }
    ks->kernels[ks->n++] = k;
    if (clones && sc.clone) {
      /* A clone is only speed: one that does not build leaves its kernel
       * and the rest without one (the runtime then calls the AVX2 kernels;
       * its arena may hold the failure). */
      nimble_status_t cs = avx512_clone(m, prim, &sc, ks->clone_arena, &ks->kernels[ks->n]);
      if (!cs) ks->n++;
      else clones = false;
      nimble_status_free(cs);
    }
    ++*done;
    nimble_compile_phase_progress(clock, (int)(*done * 100 / total));
  }
  return nimble_ok();
}

/* Code generation's progress over both kernel sets: the kernels of earlier
 * sets (base, cached_base) plus the current set's, of all of them. */
typedef struct codegen_progress {
  nimble_compile_phase_clock *clock;
  size_t base, cached_base, total;
} codegen_progress;

static void on_kernel_done(void *user, size_t done, size_t total, size_t cached) {
  (void)total;
  codegen_progress *cp = user;
  size_t d = cp->base + done, c = cp->cached_base + cached;
  const nimble_compile_options_t *o = cp->clock->o;
  /* 100 is the phase's end (after the link). */
  int percent = (int)(d * 100 / (cp->total ? cp->total : 1));
  if (percent > 99) percent = 99;
  nimble_compile_phase_progress(cp->clock, percent);
  if (o->codegen_progress) o->codegen_progress(o->progress_user, d, cp->total, c);
}

/* Compiles ks into the builder's library for its device. */
static nimble_status_t codegen_set(const kernel_set *ks, nimble_compile_phase_clock *clock, codegen_progress *cp) {
  if (ks->n == 0) return nimble_ok();
  nimble_compile_result *r = clock->r;
  const nimble_compile_options_t *o = clock->o;
  bool gpu = ks->device == kDLCUDA;
  char features[NIMBLE_TARGET_SPEC_MAX + 1];
  nimble_target_llvm_features(&r->target, features);
  nimble_codegen_options_t cg = nimble_codegen_default_options();
  cg.triple = gpu ? "nvptx64-nvidia-cuda" : nimble_target_host_triple(&r->target);
  cg.cpu = gpu ? nimble_target_cuda_arch(&r->target) : nimble_target_cpu(&r->target);
  /* The target's features are the host CPU's; the GPU takes none. */
  cg.features = gpu ? NULL : features;
  cg.opt_level = o->opt_level;
  if (o->lld) cg.lld = o->lld;
  cg.jobs = o->jobs;
  cg.cache = o->kernel_cache;
  if (o->progress || o->codegen_progress) {
    cg.on_kernel_done = on_kernel_done;
    cg.on_kernel_done_user = cp;
  }
  nimble_codegen_output_t out;
  memset(&out, 0, sizeof out);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_codegen_build(ks->kernels, ks->n, &cg, &out), "%s kernels",
                             gpu ? "cuda" : "cpu");
  nimble_status_t s;
  /* PTX is stored as text, without a terminating NUL (docs/executable.md). */
  if (gpu) s = nimble_builder_set_kernel_library(r->builder, NIMBLE_PART_KERNELS_CUDA, out.ptx, strlen(out.ptx));
  else s = nimble_builder_set_kernel_library(r->builder, NIMBLE_PART_KERNELS_CPU, out.shared_object,
                                             out.shared_object_size);
  cp->base += ks->n;
  cp->cached_base += out.stats.hits;
  if (!gpu) {
    /* The result keeps the CPU kernels' numbers (nimble compile -v). */
    free(r->codegen_stats.kernels);
    r->codegen_stats = out.stats;
    r->has_codegen_stats = true;
    out.stats.kernels = NULL;
  }
  nimble_codegen_output_deinit(&out);
  NIMBLE_RETURN_IF_ERROR(s);
  if (gpu) r->has_cuda_kernels = true;
  else r->has_kernels = true;
  return nimble_ok();
}

nimble_status_t nimble_compile_kernels(const nimble_module *m, const nimble_lower_result *lr,
                                       nimble_compile_phase_clock *clock) {
  nimble_compile_result *r = clock->r;
  size_t n = nimble_lower_num_primitives(lr);
  for (size_t i = 0; i < n; i++) {
    const nimble_lower_primitive_t *prim = nimble_lower_primitive_at(lr, i);
    if (prim->device != kDLCPU && (prim->device != kDLCUDA || r->target.kind != NIMBLE_TARGET_CUDA))
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "kernel '%s' of '%s': device %d is not supported for target %s", prim->symbol,
                                prim->name, (int)prim->device, r->target_spec);
  }
  /* A program without kernels (pure control flow, or identity) needs no
   * library: the loader asks only for the devices the bytecode uses. */
  kernel_set sets[2] = {{.device = kDLCPU}, {.device = kDLCUDA}};
  nimble_compile_phase_begin(clock, "compute");
  size_t done = 0;
  nimble_status_t s = nimble_ok();
  for (int i = 0; i < 2 && !s; i++) s = compute_set(m, lr, &sets[i], clock, &done, n ? n : 1);
  if (!s) {
    nimble_compile_phase_end(clock);
    if (n) nimble_compile_phase_begin(clock, "codegen");
    codegen_progress cp = {.clock = clock, .total = sets[0].n + sets[1].n};
    for (int i = 0; i < 2 && !s; i++) s = codegen_set(&sets[i], clock, &cp);
    if (!s && n) nimble_compile_phase_end(clock);
  }
  for (int i = 0; i < 2; i++) kernel_set_deinit(&sets[i]);
  NIMBLE_RETURN_IF_ERROR(s);
  r->num_kernels = n;
  return nimble_ok();
}
