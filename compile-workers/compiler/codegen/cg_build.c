/* The build driver: target machine, emission, verification, the O3
 * pipeline, object or PTX output, and the link into a shared object. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cg_internal.h"

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
  free(out->shared_object);
  free(out->ptx);
  free(out->llvm_ir);
  memset(out, 0, sizeof *out);
}

static char *dup_n(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = 0;
  }
  return p;
}

static nimble_status_t from_llvm_error(LLVMErrorRef err, const char *what) {
  char *msg = LLVMGetErrorMessage(err);
  nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return s;
}

typedef struct build {
  char *diag_error; /* the first error-severity LLVM diagnostic (LLVM's message), or NULL */
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
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
  if (b->tm) LLVMDisposeTargetMachine(b->tm);
  if (b->ctx) LLVMContextDispose(b->ctx);
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

static nimble_status_t build_run(build *b, const nimble_ln_kernel *const *kernels, size_t n_kernels,
                                 const nimble_codegen_options_t *o, nimble_codegen_output_t *out) {
  const char *triple = o->triple ? o->triple : "x86_64-linux-gnu";
  int is_x86 = strncmp(triple, "x86_64", 6) == 0, is_a64 = strncmp(triple, "aarch64", 7) == 0;
  int is_ptx = strncmp(triple, "nvptx64", 7) == 0;
  if (!is_x86 && !is_a64 && !is_ptx)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "codegen: target triple '%s' is not supported "
                              "(x86_64-linux-gnu, aarch64-linux-gnu, nvptx64-nvidia-cuda)", triple);
  if (o->opt_level < 0 || o->opt_level > 3)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: opt_level %d outside [0, 3]", o->opt_level);
  if (n_kernels == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: no kernels to build");
  for (size_t i = 0; i < n_kernels; i++)
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_kernel_validate(kernels[i]), "codegen: kernel %zu", i);
  const char *cpu = o->cpu ? o->cpu : is_x86 ? "x86-64-v3" : is_ptx ? "sm_80" : "generic";
  const char *features = o->features ? o->features : is_a64 ? "+neon" : "";
  /* cpu=native (a local build, nimble_target_parse_local): this machine's
   * CPU and every feature it has, then the spec's own features. */
  char *host_cpu = NULL, *host_features = NULL, *native_features = NULL;
  if (!is_ptx && strcmp(cpu, "native") == 0) {
    host_cpu = LLVMGetHostCPUName();
    host_features = LLVMGetHostCPUFeatures();
    size_t n = strlen(host_features) + strlen(features) + 2;
    native_features = malloc(n);
    if (!native_features) {
      LLVMDisposeMessage(host_cpu);
      LLVMDisposeMessage(host_features);
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "codegen: out of memory");
    }
    snprintf(native_features, n, "%s%s%s", host_features, features[0] ? "," : "", features);
    cpu = host_cpu;
    features = native_features;
  }

  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &err)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: target '%s': %s", triple, err);
    LLVMDisposeMessage(err);
    return s;
  }
  static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                               LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive};
  b->tm = LLVMCreateTargetMachine(target, triple, cpu, features, levels[o->opt_level], LLVMRelocPIC,
                                  LLVMCodeModelDefault);
  nimble_status_t tm_status =
      b->tm ? nimble_ok() : nimble_status_make(NIMBLE_INVALID_ARGUMENT, "codegen: no target machine for %s/%s", triple, cpu);
  if (host_cpu) LLVMDisposeMessage(host_cpu);
  if (host_features) LLVMDisposeMessage(host_features);
  free(native_features);
  NIMBLE_RETURN_IF_ERROR(tm_status);
  b->ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(b->ctx, on_diagnostic, b);
  b->mod = LLVMModuleCreateWithNameInContext("nimble_kernels", b->ctx);
  LLVMSetTarget(b->mod, triple);
  b->layout = LLVMCreateTargetDataLayout(b->tm);
  LLVMSetModuleDataLayout(b->mod, b->layout);

  NIMBLE_RETURN_IF_ERROR_CTX(nimble_cg_emit_kernels(b->mod, kernels, n_kernels, is_ptx), "codegen");
  if (LLVMVerifyModule(b->mod, LLVMReturnStatusAction, &err)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "codegen: the generated module is invalid: %s", err);
    LLVMDisposeMessage(err);
    return s;
  }
  LLVMDisposeMessage(err);
  err = NULL;

  b->pass_opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(b->pass_opts, o->opt_level >= 2);
  LLVMPassBuilderOptionsSetSLPVectorization(b->pass_opts, o->opt_level >= 2);
  LLVMPassBuilderOptionsSetLoopUnrolling(b->pass_opts, o->opt_level >= 2);
  LLVMPassBuilderOptionsSetLoopInterleaving(b->pass_opts, o->opt_level >= 2);
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", o->opt_level);
  LLVMErrorRef perr = LLVMRunPasses(b->mod, pipeline, b->tm, b->pass_opts);
  if (perr) return from_llvm_error(perr, "codegen: optimisation");
  if (b->diag_error)
    return nimble_status_make(NIMBLE_INTERNAL, "codegen: LLVM reported: %s", b->diag_error);

  if (o->keep_ir) {
    char *ir = LLVMPrintModuleToString(b->mod);
    out->llvm_ir = strdup(ir);
    LLVMDisposeMessage(ir);
    if (!out->llvm_ir) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "codegen: out of memory");
  }
  if (LLVMTargetMachineEmitToMemoryBuffer(b->tm, b->mod, is_ptx ? LLVMAssemblyFile : LLVMObjectFile, &err,
                                          &b->obj)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "codegen: emitting %s code: %s", triple, err);
    LLVMDisposeMessage(err);
    return s;
  }
  const char *bytes = LLVMGetBufferStart(b->obj);
  size_t size = LLVMGetBufferSize(b->obj);
  if (is_ptx) {
    out->ptx = dup_n(bytes, size);
    if (!out->ptx) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "codegen: out of memory");
    return nimble_ok();
  }
  return nimble_codegen_link_shared((const uint8_t *)bytes, size, o->lld, &out->shared_object,
                                    &out->shared_object_size);
}

nimble_status_t nimble_codegen_build(const nimble_ln_kernel *const *kernels, size_t n_kernels,
                                     const nimble_codegen_options_t *options, nimble_codegen_output_t *out) {
  memset(out, 0, sizeof *out);
  nimble_codegen_options_t defaults = nimble_codegen_default_options();
  if (!options) options = &defaults;
  pthread_once(&llvm_once, init_llvm);
  build b = {0};
  nimble_status_t s = build_run(&b, kernels, n_kernels, options, out);
  build_dispose(&b);
  if (s) nimble_codegen_output_deinit(out);
  return s;
}
