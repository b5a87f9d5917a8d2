/* The build driver: target machine, emission, verification, the
 * optimisation pipeline, object or PTX output, and the link into a shared
 * object. CPU kernels are built one module each on a pool of threads (one
 * LLVM context and target machine per thread), looked up in and stored to
 * the kernel cache, and linked in the kernels' order. */
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <llvm/Config/llvm-config.h>

#include "cg_fingerprint.h"
#include "cg_internal.h"
#include "nimble/digest.h"

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void init_llvm(void) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeAArch64TargetInfo();
  LLVMInitializeAArch64Target();
  LLVMInitializeAArch64TargetMC();
  LLVMInitializeAArch64AsmPrinter();
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

nimble_codegen_options_t nimble_codegen_default_options(void) {
  nimble_codegen_options_t o = {0};
  o.triple = "x86_64-linux-gnu";
  o.opt_level = 3;
  return o;
}

void nimble_codegen_output_deinit(nimble_codegen_output_t *out) {
  if (!out) return;
  free(out->stats.kernels);
  free(out->shared_object);
  free(out->ptx);
  free(out->llvm_ir);
  memset(out, 0, sizeof *out);
}

static nimble_status_t from_llvm_error(LLVMErrorRef err, const char *what) {
  char *msg = LLVMGetErrorMessage(err);
  nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return s;
}


static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: the per-kernel phases are timed with it,
 * so a loaded machine (other processes on the same cores) does not inflate
 * them the way it inflates elapsed time. */
static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nimble_codegen_default_jobs(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

/* The target as codegen uses it: triple, CPU and features resolved (the
 * defaults, or this machine's for cpu=native), the LLVM target. */
typedef struct target_info {
  const char *triple, *cpu, *features;
  int is_x86, is_a64, is_ptx;
  char *host_cpu, *host_features, *native_features; /* owned, cpu=native only */
  LLVMTargetRef target;
} target_info;

static void target_info_deinit(target_info *t) {
  if (t->host_cpu) LLVMDisposeMessage(t->host_cpu);
  if (t->host_features) LLVMDisposeMessage(t->host_features);
  free(t->native_features);
  memset(t, 0, sizeof *t);
}

void nimble_codegen_host_cpu_key(char *buf, size_t size) {
  if (!size) return;
  char *name = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
  nimble_digest_t d;
  nimble_digest_compute(features ? features : "", features ? strlen(features) : 0, &d);
  snprintf(buf, size, "%s/%02x%02x%02x%02x", name && name[0] ? name : "unknown", d.bytes[0], d.bytes[1], d.bytes[2],
           d.bytes[3]);
  if (name) LLVMDisposeMessage(name);
  if (features) LLVMDisposeMessage(features);
}

static nimble_status_t target_info_init(const nimble_codegen_options_t *o, target_info *t) {
  memset(t, 0, sizeof *t);
  const char *triple = o->triple ? o->triple : "x86_64-linux-gnu";
  t->triple = triple;
  t->is_x86 = strncmp(triple, "x86_64", 6) == 0;
  t->is_a64 = strncmp(triple, "aarch64", 7) == 0;
  t->is_ptx = strncmp(triple, "nvptx64", 7) == 0;
  if (!t->is_x86 && !t->is_a64 && !t->is_ptx)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "codegen: target triple '%s' is not supported "
                              "(x86_64-linux-gnu, aarch64-linux-gnu, nvptx64-nvidia-cuda)", triple);
  if (o->opt_level < 0 || o->opt_level > 3)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: opt_level %d outside [0, 3]", o->opt_level);
  t->cpu = o->cpu ? o->cpu : t->is_x86 ? "x86-64-v3" : t->is_ptx ? "sm_80" : "generic";
  t->features = o->features ? o->features : t->is_a64 ? "+neon" : "";
  /* cpu=native (a local build, nimble_target_parse_local): this machine's
   * CPU and every feature it has, then the spec's own features. */
  if (!t->is_ptx && strcmp(t->cpu, "native") == 0) {
    t->host_cpu = LLVMGetHostCPUName();
    t->host_features = LLVMGetHostCPUFeatures();
    size_t n = strlen(t->host_features) + strlen(t->features) + 2;
    t->native_features = malloc(n);
    if (!t->native_features) {
      target_info_deinit(t);
      return NIMBLE_OOM_IN("codegen");
    }
    snprintf(t->native_features, n, "%s%s%s", t->host_features, t->features[0] ? "," : "", t->features);
    t->cpu = t->host_cpu;
    t->features = t->native_features;
  }
  char *err = NULL;
  if (LLVMGetTargetFromTriple(triple, &t->target, &err)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: target '%s': %s", triple, err);
    LLVMDisposeMessage(err);
    target_info_deinit(t);
    return s;
  }
  return nimble_ok();
}

static LLVMTargetMachineRef make_tm(const target_info *t, int opt_level) {
  static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                               LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive};
  return LLVMCreateTargetMachine(t->target, t->triple, t->cpu, t->features, levels[opt_level], LLVMRelocPIC,
                                 LLVMCodeModelDefault);
}

/* role: "" for a kernel built on its own; otherwise how its code is
 * shared (cpu_pool.share), which the object depends on. */
static nimble_status_t key_of(const nimble_ln_kernel *k, const target_info *t, int opt_level, const char *role,
                              char key[NIMBLE_KERNEL_KEY_LEN + 1]) {
  char *text = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_ln_kernel_print_canonical(k, &text));
  char head[1024];
  int n = snprintf(head, sizeof head, "nimble kernel v1\ncodegen %s\nllvm %s\ntriple %s\ncpu %s\nopt %d\nfeatures ",
                   NIMBLE_CG_FINGERPRINT, LLVM_VERSION_STRING, t->triple, t->cpu, opt_level);
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  nimble_digest_ctx_update(&ctx, head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
  /* Features may be long (cpu=native): hashed apart, with their length. */
  size_t fl = strlen(t->features);
  char len[32];
  int ln = snprintf(len, sizeof len, "%zu\n", fl);
  nimble_digest_ctx_update(&ctx, len, (size_t)ln);
  nimble_digest_ctx_update(&ctx, t->features, fl);
  nimble_digest_ctx_update(&ctx, "\n", 1);
  if (role[0]) {
    nimble_digest_ctx_update(&ctx, "shared ", 7);
    nimble_digest_ctx_update(&ctx, role, strlen(role) + 1);
  }
  nimble_digest_ctx_update(&ctx, text, strlen(text));
  free(text);
  nimble_digest_t d;
  nimble_digest_ctx_final(&ctx, &d);
  nimble_digest_format_hex(&d, key);
  return nimble_ok();
}

/* The options a kernel of `isa` is built with: the target's, or for an
 * x86-64-v4 clone the same triple with CPU x86-64-v4 and no other feature. */
static nimble_codegen_options_t isa_options(const nimble_codegen_options_t *o, int isa) {
  nimble_codegen_options_t io = *o;
  if (isa == NIMBLE_LN_ISA_X86_64_V4) {
    io.cpu = "x86-64-v4";
    io.features = "";
  }
  return io;
}

nimble_status_t nimble_codegen_kernel_key(const nimble_ln_kernel *k, const nimble_codegen_options_t *options,
                                          char key[NIMBLE_KERNEL_KEY_LEN + 1]) {
  key[0] = 0;
  nimble_codegen_options_t defaults = nimble_codegen_default_options();
  if (!options) options = &defaults;
  pthread_once(&llvm_once, init_llvm);
  nimble_codegen_options_t wo = isa_options(options, k->isa); /* as build_cpu builds it */
  target_info t;
  NIMBLE_RETURN_IF_ERROR(target_info_init(&wo, &t));
  nimble_status_t s = key_of(k, &t, options->opt_level, "", key);
  target_info_deinit(&t);
  return s;
}

/* One LLVM module (and context) being built. */
typedef struct build {
  char *diag_error; /* the first error-severity LLVM diagnostic (LLVM's message), or NULL */
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTargetDataRef layout;
  LLVMPassBuilderOptionsRef pass_opts;
  LLVMMemoryBufferRef obj;
} build;

static void build_dispose(build *b) {
  if (b->diag_error) LLVMDisposeMessage(b->diag_error);
  if (b->obj) LLVMDisposeMemoryBuffer(b->obj);
  if (b->pass_opts) LLVMDisposePassBuilderOptions(b->pass_opts);
  if (b->mod) LLVMDisposeModule(b->mod);
  if (b->layout) LLVMDisposeTargetData(b->layout);
  if (b->ctx) LLVMContextDispose(b->ctx);
  memset(b, 0, sizeof *b);
}

/* LLVM reports remarks ("loop not vectorized") and warnings through the
 * context; a library must not print them, so they are dropped, and the
 * first error is kept for the status. */
static void on_diagnostic(LLVMDiagnosticInfoRef info, void *user) {
  build *b = user;
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || b->diag_error) return;
  b->diag_error = LLVMGetDiagInfoDescription(info); /* kept whole; NULL: none given */
  if (!b->diag_error) b->diag_error = LLVMCreateMessage("(no description)");
}

/* The optimisation pipeline for CPU kernels at opt level 2 (the default),
 * in place of LLVM's default<O2>, which spent most of a compile: a kernel
 * module is a few loop nests with no calls to inline, and default<O2> ran
 * InstCombine eight times and a module pipeline made for whole programs.
 * This keeps what the loop nests need, in default<O2>'s order: SROA and
 * early CSE on the freshly built IR; rotation and LICM (the alias-scope
 * metadata lets loads and extents leave the loops); IndVarSimplify, loop
 * deletion and full unrolling of short constant loops (convolution
 * windows); GVN; the loop vectorizer (llvm.loop metadata says which loops
 * and how wide), loop-load elimination, the SLP vectorizer; partial
 * unrolling (llvm.loop.unroll.count); InstCombine three times and a last
 * LICM and CFG cleanup. Measured (docs/compile.md): about a third less
 * optimisation time, kernels as fast as default<O2>'s within the noise.
 * Levels 0, 1 and 3, and PTX (whose target adds passes to the default
 * pipelines), keep LLVM's default<ON>. */
static const char kLoopNestPipeline[] =
    "function(sroa,early-cse,simplifycfg,instcombine,loop-mssa(loop-rotate,licm),simplifycfg,"
    "loop(indvars,loop-deletion,loop-unroll-full),gvn,loop-vectorize,loop-load-elim,instcombine,simplifycfg,"
    "slp-vectorizer,instcombine,loop-unroll<O2>,instcombine,loop-mssa(licm),simplifycfg)";

/* Light kernels (cg_light.c: shape functions and the like, whose speed
 * cannot matter) get the cleanup that keeps their code small and nothing
 * more; their target machine selects instructions with FastISel. */
static const char kLightPipeline[] = "function(sroa,early-cse,instcombine,simplifycfg)";

/* Marks fn optnone (with the noinline LLVM requires): after the passes,
 * that only selects LLVM's fast instruction selection for it. */
static void set_optnone(LLVMContextRef ctx, LLVMValueRef fn) {
  static const char *const names[] = {"optnone", "noinline"};
  for (int i = 0; i < 2; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(names[i], strlen(names[i]));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, 0));
  }
}

/* Emits, verifies and optimises kernels into one module, then emits it as
 * an object (or PTX) into b->obj; *ir gets the optimised module's text
 * when ir is not NULL. Times go to *time when not NULL. */
static nimble_status_t build_module(build *b, LLVMTargetMachineRef tm, const target_info *t,
                                    const nimble_ln_kernel *const *kernels, size_t n_kernels, int opt_level,
                                    bool light, const char *impl, bool forwarder, char **ir,
                                    nimble_codegen_kernel_time_t *time) {
  double t0 = thread_cpu_s();
  b->ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(b->ctx, on_diagnostic, b);
  b->mod = LLVMModuleCreateWithNameInContext("nimble_kernels", b->ctx);
  LLVMSetTarget(b->mod, t->triple);
  b->layout = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(b->mod, b->layout);

  if (impl) {
    assert(n_kernels == 1 && !t->is_ptx);
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_cg_emit_shared_kernel(b->mod, kernels[0], impl, forwarder), "codegen");
  } else {
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_cg_emit_kernels(b->mod, kernels, n_kernels, t->is_ptx), "codegen");
  }
  char *err = NULL;
  if (LLVMVerifyModule(b->mod, LLVMReturnStatusAction, &err)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "codegen: the generated module is invalid: %s", err);
    LLVMDisposeMessage(err);
    return s;
  }
  LLVMDisposeMessage(err);
  err = NULL;
  double t1 = thread_cpu_s();

  b->pass_opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(b->pass_opts, opt_level >= 2);
  LLVMPassBuilderOptionsSetSLPVectorization(b->pass_opts, opt_level >= 2);
  LLVMPassBuilderOptionsSetLoopUnrolling(b->pass_opts, opt_level >= 2);
  LLVMPassBuilderOptionsSetLoopInterleaving(b->pass_opts, opt_level >= 2);
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level);
  const char *passes = light ? kLightPipeline : opt_level == 2 && !t->is_ptx ? kLoopNestPipeline : pipeline;
  LLVMErrorRef perr = LLVMRunPasses(b->mod, passes, tm, b->pass_opts);
  if (perr) return from_llvm_error(perr, "codegen: optimisation");
  if (b->diag_error)
    return nimble_status_make(NIMBLE_INTERNAL, "codegen: LLVM reported: %s", b->diag_error);
  double t2 = thread_cpu_s();
  if (ir) {
    char *text = LLVMPrintModuleToString(b->mod);
    *ir = strdup(text);
    LLVMDisposeMessage(text);
    if (!*ir) return NIMBLE_OOM_IN("codegen");
  }
  /* The entry points (the module's external definitions: argument checks
   * and the dispatch, about a sixth of a kernel's code, run once a call)
   * get fast instruction selection on their optimised IR; the variants and
   * parallel bodies, where the time goes, keep the full code generator. */
  if (!light && !t->is_ptx && opt_level >= 1)
    for (LLVMValueRef fn = LLVMGetFirstFunction(b->mod); fn; fn = LLVMGetNextFunction(fn))
      if (!LLVMIsDeclaration(fn) && LLVMGetLinkage(fn) == LLVMExternalLinkage) set_optnone(b->ctx, fn);
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, b->mod, t->is_ptx ? LLVMAssemblyFile : LLVMObjectFile, &err,
                                          &b->obj)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "codegen: emitting %s code: %s", t->triple, err);
    LLVMDisposeMessage(err);
    return s;
  }
  if (time) {
    time->emit_s = t1 - t0;
    time->opt_s = t2 - t1;
    time->obj_s = thread_cpu_s() - t2;
  }
  return nimble_ok();
}

/* The CPU kernels' shared work: worker threads take the next kernel index
 * until none is left. */
typedef struct cpu_pool {
  const nimble_ln_kernel *const *kernels;
  size_t n;
  const target_info *t;
  const target_info *wide; /* x86-64-v4, for the kernels with isa set; or NULL */
  int opt_level;
  int keep_ir;
  nimble_kernel_cache_t *cache;
  char (*keys)[NIMBLE_KERNEL_KEY_LEN + 1]; /* per kernel, with a cache */
  uint8_t **objs; /* per kernel, malloc'd */
  size_t *sizes;
  char **irs;     /* keep_ir */
  nimble_status_t *status; /* per kernel */
  nimble_codegen_kernel_time_t *times;
  /* Per kernel, NULL when built on its own: the name of the implementation
   * it shares with kernels of the same body (share_plan), which the first
   * of them (its leader, share_forwarder 0) defines and the others (1) call. */
  char **share;
  unsigned char *share_forwarder;
  atomic_size_t next;
  atomic_size_t first_failed; /* lowest failing index so far; n: none */
  atomic_size_t hits, misses, corrupt, put_errors;
  /* on_kernel_done: the kernels done and the cache hits among them. */
  void (*on_done)(void *user, size_t done, size_t total, size_t cached);
  void *on_done_user;
  pthread_mutex_t done_lock;
  size_t done, done_cached;
} cpu_pool;

static void note_failure(cpu_pool *p, size_t i) {
  size_t cur = atomic_load(&p->first_failed);
  while (i < cur && !atomic_compare_exchange_weak(&p->first_failed, &cur, i)) {
  }
}

/* tms[0]: the target machine at the options' level; tms[1]: at CodeGen
 * level None, for light kernels; tms[2] and [3] the same for x86-64-v4
 * (kernels with isa set). Each made on first use. */
static nimble_status_t cpu_one(cpu_pool *p, LLVMTargetMachineRef tms[4], size_t i) {
  const nimble_ln_kernel *k = p->kernels[i];
  const target_info *t = k->isa ? p->wide : p->t;
  nimble_codegen_kernel_time_t *time = &p->times[i];
  snprintf(time->name, sizeof time->name, "%s", k->name ? k->name : "");
  const char *impl = p->share ? p->share[i] : NULL;
  bool forwarder = impl && p->share_forwarder[i];
  time->light = p->opt_level >= 1 && nimble_cg_kernel_is_light(k);
  time->shared = impl ? forwarder ? 2 : 1 : 0;
  char key[NIMBLE_KERNEL_KEY_LEN + 1] = "";
  if (p->cache) {
    double c0 = thread_cpu_s();
    char role[400] = "";
    if (impl) snprintf(role, sizeof role, "%s %s", forwarder ? "forwarder" : "impl", impl);
    NIMBLE_RETURN_IF_ERROR(key_of(k, t, p->opt_level, role, key));
    memcpy(p->keys[i], key, sizeof key);
    memcpy(time->key, key, sizeof key);
    if (!p->keep_ir) {
      uint8_t *data = NULL;
      size_t size = 0;
      bool found = false, corrupt = false;
      nimble_status_t gs = p->cache->get(p->cache, key, &data, &size, &found, &corrupt);
      /* A cache is advisory: an error reading it is a miss. */
      nimble_status_free(gs);
      if (corrupt) atomic_fetch_add(&p->corrupt, 1);
      if (!gs && found) {
        p->objs[i] = data;
        p->sizes[i] = size;
        time->cached = 1;
        time->cache_s = thread_cpu_s() - c0;
        atomic_fetch_add(&p->hits, 1);
        return nimble_ok();
      }
      free(data);
    }
    time->cache_s = thread_cpu_s() - c0;
    atomic_fetch_add(&p->misses, 1);
  }
  /* A forwarder is one call: built like a light kernel. */
  bool light = time->light || forwarder;
  LLVMTargetMachineRef *tm = &tms[(k->isa ? 2 : 0) + light];
  if (!*tm) {
    *tm = make_tm(t, light ? 0 : p->opt_level);
    if (!*tm)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: no target machine for %s/%s", t->triple,
                                t->cpu);
  }
  build b = {0};
  nimble_status_t s = build_module(&b, *tm, t, &p->kernels[i], 1, p->opt_level, light, impl, forwarder,
                                   p->keep_ir ? &p->irs[i] : NULL, time);
  if (!s) {
    size_t size = LLVMGetBufferSize(b.obj);
    p->objs[i] = malloc(size ? size : 1);
    if (!p->objs[i]) s = NIMBLE_OOM_IN("codegen");
    else {
      memcpy(p->objs[i], LLVMGetBufferStart(b.obj), size);
      p->sizes[i] = size;
    }
  }
  build_dispose(&b);
  if (!s && p->cache) {
    double c0 = thread_cpu_s();
    nimble_status_t ps = p->cache->put(p->cache, key, p->objs[i], p->sizes[i]);
    if (ps) atomic_fetch_add(&p->put_errors, 1);
    else time->stored = 1;
    nimble_status_free(ps);
    time->cache_s += thread_cpu_s() - c0;
  }
  return s;
}

static void *cpu_worker(void *arg) {
  cpu_pool *p = arg;
  LLVMTargetMachineRef tms[4] = {NULL, NULL, NULL, NULL};
  for (;;) {
    size_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) break;
    /* Past a failure nothing is needed; before it, every kernel is built,
     * so the failure reported is the first in order whatever the timing. */
    if (i > atomic_load(&p->first_failed)) continue;
    p->status[i] = cpu_one(p, tms, i);
    if (p->status[i]) note_failure(p, i);
    else if (p->on_done) {
      pthread_mutex_lock(&p->done_lock);
      p->done++;
      if (p->times[i].cached) p->done_cached++;
      p->on_done(p->on_done_user, p->done, p->n, p->done_cached);
      pthread_mutex_unlock(&p->done_lock);
    }
  }
  for (int j = 0; j < 4; j++)
    if (tms[j]) LLVMDisposeTargetMachine(tms[j]);
  return NULL;
}

/* Builds every kernel on the pool's threads (o->jobs, at most one per
 * kernel): p's objects, sizes and IR texts filled in the kernels' order,
 * the stats' counts and sums; the first failing kernel's status in order. */
static nimble_status_t run_pool(cpu_pool *p, const nimble_codegen_options_t *o, nimble_codegen_stats_t *st) {
  size_t n = p->n;
  st->n_kernels = n;
  atomic_init(&p->next, 0);
  atomic_init(&p->first_failed, n);
  atomic_init(&p->hits, 0);
  atomic_init(&p->misses, 0);
  atomic_init(&p->corrupt, 0);
  atomic_init(&p->put_errors, 0);
  p->keys = calloc(n, sizeof *p->keys);
  p->objs = calloc(n, sizeof *p->objs);
  p->sizes = calloc(n, sizeof *p->sizes);
  p->irs = p->keep_ir ? calloc(n, sizeof *p->irs) : NULL;
  p->status = calloc(n, sizeof *p->status);
  st->kernels = calloc(n, sizeof *st->kernels);
  p->times = st->kernels;
  if (!p->keys || !p->objs || !p->sizes || !p->status || !st->kernels || (p->keep_ir && !p->irs))
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "codegen: out of memory for %zu kernels", n);

  p->on_done = o->on_kernel_done;
  p->on_done_user = o->on_kernel_done_user;
  pthread_mutex_init(&p->done_lock, NULL);
  int jobs = o->jobs > 0 ? o->jobs : nimble_codegen_default_jobs();
  if ((size_t)jobs > n) jobs = (int)n;
  if (jobs > 256) jobs = 256;
  double c0 = now_s();
  pthread_t threads[256];
  int started = 0;
  for (int j = 1; j < jobs; j++) {
    if (pthread_create(&threads[started], NULL, cpu_worker, p) != 0) break; /* fewer threads, same result */
    started++;
  }
  cpu_worker(p);
  for (int j = 0; j < started; j++) pthread_join(threads[j], NULL);
  pthread_mutex_destroy(&p->done_lock);
  st->jobs = started + 1;
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < n && !s; i++)
    if (p->status[i]) {
      s = p->status[i];
      p->status[i] = nimble_ok();
    }
  st->compile_s = now_s() - c0;
  st->hits = atomic_load(&p->hits);
  st->misses = atomic_load(&p->misses);
  st->corrupt = atomic_load(&p->corrupt);
  st->put_errors = atomic_load(&p->put_errors);
  for (size_t i = 0; i < n; i++) {
    st->emit_s += st->kernels[i].emit_s;
    st->n_light += (size_t)st->kernels[i].light;
    st->n_shared += (size_t)(st->kernels[i].shared == 2);
    st->opt_s += st->kernels[i].opt_s;
    st->obj_s += st->kernels[i].obj_s;
    st->cache_s += st->kernels[i].cache_s;
  }
  return s;
}

/* Which kernels share code (p->share, p->share_forwarder). A model's repeated
 * layers give kernels with the same body under different names (bert_tiny:
 * 71 kernels, 32 bodies); each such body is built once, by the first of
 * its kernels, as a hidden implementation the others call through a forwarder
 * of their own (nimble_cg_emit_shared_kernel), so every kernel keeps its
 * exported symbol. Light kernels share too: a forwarder is one declared
 * call, cheaper than a light kernel's build, and mobilenet_v2's shape
 * functions, most of them repeated, were 200 KB of its 560 KB kernel
 * library, which every load hashes. The plan depends on the kernels alone,
 * so the objects are the same whatever the threads. */
static nimble_status_t share_plan(cpu_pool *p) {
  size_t n = p->n;
  nimble_digest_t *body = calloc(n, sizeof *body);
  size_t *leader = calloc(n, sizeof *leader);
  size_t *members = calloc(n, sizeof *members);
  nimble_status_t s = nimble_ok();
  if (!body || !leader || !members) s = NIMBLE_OOM_IN("codegen");
  for (size_t i = 0; i < n && !s; i++) {
    leader[i] = n; /* n: not shared */
    const nimble_ln_kernel *k = p->kernels[i];
    char *text = NULL;
    s = nimble_ln_kernel_print_canonical(k, &text);
    if (s) break;
    /* "kernel NAME(params) {...": the body is all but the name. */
    const char *from = strchr(text, '(');
    nimble_digest_ctx_t ctx;
    nimble_digest_ctx_init(&ctx);
    if (k->isa) nimble_digest_ctx_update(&ctx, "x86-64-v4 ", 10); /* built for another CPU: not shared */
    if (from) nimble_digest_ctx_update(&ctx, from, strlen(from));
    nimble_digest_ctx_final(&ctx, &body[i]);
    free(text);
    if (!from) continue;
    leader[i] = i;
    for (size_t j = 0; j < i; j++)
      if (leader[j] == j && memcmp(&body[j], &body[i], sizeof body[i]) == 0) {
        leader[i] = j;
        break;
      }
    members[leader[i]]++;
  }
  if (!s) {
    p->share = calloc(n, sizeof *p->share);
    p->share_forwarder = calloc(n, sizeof *p->share_forwarder);
    if (!p->share || !p->share_forwarder) s = NIMBLE_OOM_IN("codegen");
  }
  for (size_t i = 0; i < n && !s; i++) {
    if (leader[i] == n || members[leader[i]] < 2) continue;
    if (leader[i] == i) {
      size_t len = strlen(p->kernels[i]->name) + sizeof ".impl";
      p->share[i] = malloc(len);
      if (!p->share[i]) {
        s = NIMBLE_OOM_IN("codegen");
        break;
      }
      snprintf(p->share[i], len, "%s.impl", p->kernels[i]->name);
    } else {
      p->share[i] = p->share[leader[i]]; /* owned by the leader's entry */
      p->share_forwarder[i] = 1;
    }
  }
  free(body);
  free(leader);
  free(members);
  return s;
}

/* The kernels' IR texts one after the other, into *out. */
static nimble_status_t join_irs(const cpu_pool *p, char **out) {
  size_t total = 1;
  for (size_t i = 0; i < p->n; i++) total += strlen(p->irs[i]);
  *out = malloc(total);
  if (!*out) return NIMBLE_OOM_IN("codegen");
  size_t at = 0;
  for (size_t i = 0; i < p->n; i++) {
    size_t l = strlen(p->irs[i]);
    memcpy(*out + at, p->irs[i], l);
    at += l;
  }
  (*out)[at] = 0;
  return nimble_ok();
}

static void pool_dispose(cpu_pool *p) {
  for (size_t i = 0; i < p->n; i++) {
    if (p->objs) free(p->objs[i]);
    if (p->irs) free(p->irs[i]);
    if (p->status) nimble_status_free(p->status[i]);
  }
  for (size_t i = 0; p->share && i < p->n; i++)
    if (!p->share_forwarder[i]) free(p->share[i]);
  free(p->share);
  free(p->share_forwarder);
  free(p->keys);
  free(p->objs);
  free(p->sizes);
  free(p->irs);
  free(p->status);
}

static nimble_status_t build_cpu(const target_info *t, const nimble_ln_kernel *const *kernels, size_t n,
                                 const nimble_codegen_options_t *o, nimble_codegen_output_t *out) {
  nimble_codegen_stats_t *st = &out->stats;
  cpu_pool p = {.kernels = kernels, .n = n, .t = t, .opt_level = o->opt_level, .keep_ir = o->keep_ir,
                .cache = o->cache};
  /* The AVX-512 clones' target (nimble_codegen_build let only x86-64-v4 through). */
  target_info wide = {0};
  bool any_wide = false;
  for (size_t i = 0; i < n; i++) any_wide |= kernels[i]->isa != NIMBLE_LN_ISA_TARGET;
  nimble_status_t s = nimble_ok();
  if (any_wide) {
    nimble_codegen_options_t wo = isa_options(o, NIMBLE_LN_ISA_X86_64_V4);
    s = target_info_init(&wo, &wide);
    p.wide = &wide;
  }
  if (!s) s = share_plan(&p);
  if (!s) s = run_pool(&p, o, st);
  if (!s && o->keep_ir) s = join_irs(&p, &out->llvm_ir);
  if (!s) {
    double l0 = now_s();
    /* The linked object is cached too, under a key over the linker and
     * every kernel's key in order: a warm compile then runs no linker. */
    char link_key[NIMBLE_KERNEL_KEY_LEN + 1] = "";
    const char *lld = o->lld ? o->lld : n ? nimble_codegen_default_linker(p.objs[0], p.sizes[0]) : NULL;
    if (p.cache && !o->keep_ir && lld) {
      nimble_digest_ctx_t ctx;
      nimble_digest_ctx_init(&ctx);
      char head[128];
      int hn = snprintf(head, sizeof head, "nimble link v1\ncodegen %s\nkernels %zu\nlld ", NIMBLE_CG_FINGERPRINT, n);
      nimble_digest_ctx_update(&ctx, head, (size_t)hn < sizeof head ? (size_t)hn : sizeof head - 1);
      nimble_digest_ctx_update(&ctx, lld, strlen(lld) + 1);
      for (size_t i = 0; i < n; i++) nimble_digest_ctx_update(&ctx, p.keys[i], NIMBLE_KERNEL_KEY_LEN);
      nimble_digest_t d;
      nimble_digest_ctx_final(&ctx, &d);
      nimble_digest_format_hex(&d, link_key);
      bool found = false, corrupt = false;
      nimble_status_t gs = p.cache->get(p.cache, link_key, &out->shared_object, &out->shared_object_size, &found,
                                        &corrupt);
      nimble_status_free(gs); /* advisory: an error is a miss */
      if (corrupt) st->corrupt++;
      if (gs || !found) {
        free(out->shared_object);
        out->shared_object = NULL;
        out->shared_object_size = 0;
      } else {
        st->link_cached = 1;
      }
    }
    if (!st->link_cached) {
      s = nimble_codegen_link_objects((const uint8_t *const *)p.objs, p.sizes, n, lld, &out->shared_object,
                                      &out->shared_object_size);
      if (!s && link_key[0]) {
        nimble_status_t ps = p.cache->put(p.cache, link_key, out->shared_object, out->shared_object_size);
        if (ps) st->put_errors++;
        nimble_status_free(ps);
      }
    }
    st->link_s = now_s() - l0;
  }
  pool_dispose(&p);
  if (any_wide) target_info_deinit(&wide);
  return s;
}

/* The length of a PTX module's header: through the `.address_size` line
 * (the `.version`, `.target` and `.address_size` directives and LLVM's
 * comment before them); 0 when there is none. */
static size_t ptx_header_len(const char *ptx, size_t n) {
  static const char dir[] = "\n.address_size";
  for (size_t i = 0; i + sizeof dir - 1 <= n; i++) {
    if (memcmp(ptx + i, dir, sizeof dir - 1) != 0) continue;
    const char *nl = memchr(ptx + i + 1, '\n', n - i - 1);
    return nl ? (size_t)(nl - ptx) + 1 : n;
  }
  return 0;
}

/* nvptx64: one module per kernel on the pool's threads, as for the CPU
 * (not cached), each emitted as PTX; the module is their texts in the
 * kernels' order under one header (every module's header is the same:
 * LLVM's comment, .version, .target, .address_size), so it is the same
 * text whatever the number of threads. GPU kernels are entry functions
 * only (no internal functions, no globals), so the bodies never clash. */
static nimble_status_t build_ptx(const target_info *t, const nimble_ln_kernel *const *kernels, size_t n,
                                 const nimble_codegen_options_t *o, nimble_codegen_output_t *out) {
  cpu_pool p = {.kernels = kernels, .n = n, .t = t, .opt_level = o->opt_level, .keep_ir = o->keep_ir};
  nimble_status_t s = run_pool(&p, o, &out->stats);
  if (!s && o->keep_ir) s = join_irs(&p, &out->llvm_ir);
  size_t head = 0, total = 1;
  /* Text only: a NUL the emitter may end its buffer with is dropped. */
  for (size_t i = 0; i < n && !s; i++)
    while (p.sizes[i] && p.objs[i][p.sizes[i] - 1] == 0) p.sizes[i]--;
  if (!s) {
    head = ptx_header_len((const char *)p.objs[0], p.sizes[0]);
    if (!head) s = nimble_status_make(NIMBLE_INTERNAL, "codegen: kernel '%s': PTX without an .address_size line",
                                      kernels[0]->name);
  }
  for (size_t i = 0; i < n && !s; i++) {
    if (p.sizes[i] < head || memcmp(p.objs[i], p.objs[0], head) != 0 ||
        ptx_header_len((const char *)p.objs[i], p.sizes[i]) != head)
      s = nimble_status_make(NIMBLE_INTERNAL, "codegen: kernel '%s': its PTX header differs from kernel '%s''s",
                             kernels[i]->name, kernels[0]->name);
    total += p.sizes[i] - (i ? head : 0);
  }
  if (!s) {
    out->ptx = malloc(total);
    if (!out->ptx) s = NIMBLE_OOM_IN("codegen");
  }
  if (!s) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
      size_t skip = i ? head : 0;
      memcpy(out->ptx + at, p.objs[i] + skip, p.sizes[i] - skip);
      at += p.sizes[i] - skip;
    }
    out->ptx[at] = 0;
  }
  pool_dispose(&p);
  return s;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The kernels become one shared object: their names must differ (the
 * second of two equal ones, in order, is named). */
static nimble_status_t check_names(const nimble_ln_kernel *const *kernels, size_t n) {
  const char **names = malloc(n * sizeof *names);
  if (!names) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "codegen: out of memory for %zu kernels", n);
  for (size_t i = 0; i < n; i++) names[i] = kernels[i]->name;
  qsort(names, n, sizeof *names, cmp_name);
  const char *dup = NULL;
  for (size_t i = 1; i < n && !dup; i++)
    if (strcmp(names[i - 1], names[i]) == 0) dup = names[i];
  free(names);
  if (!dup) return nimble_ok();
  return nimble_status_make(NIMBLE_ALREADY_EXISTS, "codegen: kernel '%s': a kernel with this name is already in the module",
                            dup);
}

nimble_status_t nimble_codegen_build(const nimble_ln_kernel *const *kernels, size_t n_kernels,
                                     const nimble_codegen_options_t *options, nimble_codegen_output_t *out) {
  memset(out, 0, sizeof *out);
  nimble_codegen_options_t defaults = nimble_codegen_default_options();
  if (!options) options = &defaults;
  pthread_once(&llvm_once, init_llvm);
  target_info t;
  NIMBLE_RETURN_IF_ERROR(target_info_init(options, &t));
  nimble_status_t s = nimble_ok();
  if (n_kernels == 0) s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: no kernels to build");
  for (size_t i = 0; i < n_kernels && !s; i++)
    s = nimble_status_annotate(nimble_ln_kernel_validate(kernels[i]), "codegen: kernel %zu", i);
  if (!s && !t.is_ptx) s = check_names(kernels, n_kernels);
  for (size_t i = 0; i < n_kernels && !s; i++)
    if (kernels[i]->isa != NIMBLE_LN_ISA_TARGET && (kernels[i]->isa != NIMBLE_LN_ISA_X86_64_V4 || !t.is_x86))
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: kernel '%s': isa %d on target %s", kernels[i]->name,
                             kernels[i]->isa, t.triple);
  if (!s) s = t.is_ptx ? build_ptx(&t, kernels, n_kernels, options, out) : build_cpu(&t, kernels, n_kernels, options, out);
  target_info_deinit(&t);
  if (s) nimble_codegen_output_deinit(out);
  return s;
}
