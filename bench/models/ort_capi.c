/* ONNX Runtime through its C API, for the model benchmark.
 *
 * bench/models/bench.py measures ONNX Runtime twice: through node's
 * onnxruntime-node (ort_worker.js) and through this program, which calls
 * the same libonnxruntime.so.1 (the one inside the npm package) directly,
 * so that a small model's time is not the node binding's call overhead.
 *
 *   ort_capi [--lib PATH | --ort-dir NODE_MODULES] --threads N --serve
 *       A worker for bench.py, speaking ort_worker.js's protocol: one JSON
 *       command per line on stdin, one JSON answer per line on stdout:
 *         {"cmd":"load","id":ID,"model":M.onnx,"inputs":{NAME:F.npy},
 *          "out":F.npy,"outdir":DIR}
 *             creates the session, runs 3 warm-up runs, writes the first
 *             output to "out" and (optional) every output to DIR/NAME.npy
 *         {"cmd":"time","id":ID,"warmup":W,"runs":K,"max_s":S}
 *             W untimed runs, then K timed runs (fewer if S seconds pass,
 *             at least 3): {"ok":true,"times_ms":[...]}
 *         {"cmd":"info"}  {"ok":true,"version":"1.30.0","api":30,...}
 *       Errors answer {"ok":false,"error":"..."} and the worker carries on.
 *
 *   ort_capi [--lib PATH | --ort-dir DIR] --threads N --model M.onnx
 *            --input NAME=F.npy ... [--warmup W] [--repeat K]
 *            [--output-dir DIR]
 *       One shot: loads the model, W warm-up runs (default 3), K timed runs
 *       (default 10), prints every run's time and "median X ms, min Y ms",
 *       and writes every output to DIR/NAME.npy.
 *
 *   ort_capi [--lib PATH | --ort-dir DIR] --version
 *
 * Sessions: CPU execution provider (ORT's default MLAS kernels), all graph
 * optimizations (ORT_ENABLE_ALL), N intra-op threads, 1 inter-op thread,
 * sequential execution: the options ort_worker.js gives onnxruntime-node.
 *
 * The library: --lib, else $NIMBLE_ORT_LIB, else the first match of
 * DIR/onnxruntime-node/bin/napi-v* /linux/ARCH/libonnxruntime.so.1 under
 * --ort-dir DIR (default bench/models/.cache/ort/node_modules, relative to
 * the working directory). It is opened with dlopen: this program needs no
 * ONNX Runtime header or library to build, only libdl.
 *
 * A standalone program (built by bench/models/CMakeLists.txt, or by bench.py
 * with cc), so it reports errors as heap strings rather than through
 * Nimble's status type, which would tie it to the build.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf, getline, realpath; the build defines it too */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- The part of ONNX Runtime's C API this program uses ------------------
 *
 * Written from the public documentation of onnxruntime_c_api.h (MIT). The
 * API is one table of function pointers, struct OrtApi, which ONNX Runtime
 * only ever appends to: an entry's index is fixed from the version that
 * introduced it. Every entry used here dates from API version 1, and its
 * index is checked below (static_assert on the offsets); the entries in
 * between are opaque slots. OrtGetApiBase() is the library's one exported
 * entry point; GetApi(version) returns the table, or NULL when the library
 * is older than the version asked for. */

/* The npm package onnxruntime-node 1.30.0 ships ONNX Runtime 1.30, whose
 * header defines ORT_API_VERSION 30. */
#define ORTC_API_VERSION 30

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtValue OrtValue;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtAllocator OrtAllocator;

/* Enumerators, with the values the header gives them (C enums are ints). */
enum { ORT_LOGGING_LEVEL_WARNING = 2 };
enum { ORT_INVALID_ARGUMENT = 2 };                    /* OrtErrorCode */
enum { ORT_ENABLE_ALL = 99 };                         /* GraphOptimizationLevel */
enum { ORT_SEQUENTIAL = 0 };                          /* ExecutionMode */
enum { ORT_ARENA_ALLOCATOR = 1 };                     /* OrtAllocatorType */
enum { ORT_MEM_TYPE_DEFAULT = 0 };                    /* OrtMemType */
enum {                                                /* ONNXTensorElementDataType */
  ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT16 = 5,
  ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_STRING = 8, ONNX_BOOL = 9, ONNX_FLOAT16 = 10,
  ONNX_DOUBLE = 11, ONNX_UINT32 = 12, ONNX_UINT64 = 13
};

typedef struct ort_api {
  OrtStatus *(*CreateStatus)(int code, const char *msg);                              /* 0 */
  int (*GetErrorCode)(const OrtStatus *status);                                       /* 1 */
  const char *(*GetErrorMessage)(const OrtStatus *status);                            /* 2 */
  OrtStatus *(*CreateEnv)(int log_severity_level, const char *logid, OrtEnv **out);   /* 3 */
  void *slots_4_6[3];
  OrtStatus *(*CreateSession)(const OrtEnv *env, const char *model_path,
                              const OrtSessionOptions *options, OrtSession **out);    /* 7 */
  void *slot_8;
  OrtStatus *(*Run)(OrtSession *session, const void *run_options,
                    const char *const *input_names, const OrtValue *const *inputs,
                    size_t input_len, const char *const *output_names,
                    size_t output_names_len, OrtValue **outputs);                     /* 9 */
  OrtStatus *(*CreateSessionOptions)(OrtSessionOptions **options);                    /* 10 */
  void *slots_11_12[2];
  OrtStatus *(*SetSessionExecutionMode)(OrtSessionOptions *options, int mode);        /* 13 */
  void *slots_14_22[9];
  OrtStatus *(*SetSessionGraphOptimizationLevel)(OrtSessionOptions *options,
                                                 int level);                          /* 23 */
  OrtStatus *(*SetIntraOpNumThreads)(OrtSessionOptions *options, int n);              /* 24 */
  OrtStatus *(*SetInterOpNumThreads)(OrtSessionOptions *options, int n);              /* 25 */
  void *slots_26_29[4];
  OrtStatus *(*SessionGetInputCount)(const OrtSession *session, size_t *out);         /* 30 */
  OrtStatus *(*SessionGetOutputCount)(const OrtSession *session, size_t *out);        /* 31 */
  void *slots_32_35[4];
  OrtStatus *(*SessionGetInputName)(const OrtSession *session, size_t index,
                                    OrtAllocator *allocator, char **value);           /* 36 */
  OrtStatus *(*SessionGetOutputName)(const OrtSession *session, size_t index,
                                     OrtAllocator *allocator, char **value);          /* 37 */
  void *slots_38_48[11];
  OrtStatus *(*CreateTensorWithDataAsOrtValue)(const OrtMemoryInfo *info, void *data,
                                               size_t data_len, const int64_t *shape,
                                               size_t shape_len, int type,
                                               OrtValue **out);                       /* 49 */
  OrtStatus *(*IsTensor)(const OrtValue *value, int *out);                            /* 50 */
  OrtStatus *(*GetTensorMutableData)(OrtValue *value, void **out);                    /* 51 */
  void *slots_52_59[8];
  OrtStatus *(*GetTensorElementType)(const OrtTensorTypeAndShapeInfo *info,
                                     int *out);                                       /* 60 */
  OrtStatus *(*GetDimensionsCount)(const OrtTensorTypeAndShapeInfo *info,
                                   size_t *out);                                      /* 61 */
  OrtStatus *(*GetDimensions)(const OrtTensorTypeAndShapeInfo *info, int64_t *dims,
                              size_t dims_len);                                       /* 62 */
  void *slots_63_64[2];
  OrtStatus *(*GetTensorTypeAndShape)(const OrtValue *value,
                                      OrtTensorTypeAndShapeInfo **out);               /* 65 */
  void *slots_66_68[3];
  OrtStatus *(*CreateCpuMemoryInfo)(int allocator_type, int mem_type,
                                    OrtMemoryInfo **out);                             /* 69 */
  void *slots_70_75[6];
  OrtStatus *(*AllocatorFree)(OrtAllocator *allocator, void *p);                      /* 76 */
  void *slot_77;
  OrtStatus *(*GetAllocatorWithDefaultOptions)(OrtAllocator **out);                   /* 78 */
  void *slots_79_91[13];
  void (*ReleaseEnv)(OrtEnv *p);                                                      /* 92 */
  void (*ReleaseStatus)(OrtStatus *p);                                                /* 93 */
  void (*ReleaseMemoryInfo)(OrtMemoryInfo *p);                                        /* 94 */
  void (*ReleaseSession)(OrtSession *p);                                              /* 95 */
  void (*ReleaseValue)(OrtValue *p);                                                  /* 96 */
  void *slots_97_98[2];
  void (*ReleaseTensorTypeAndShapeInfo)(OrtTensorTypeAndShapeInfo *p);                /* 99 */
  void (*ReleaseSessionOptions)(OrtSessionOptions *p);                                /* 100 */
} ort_api;

typedef struct ort_api_base {
  const ort_api *(*GetApi)(uint32_t version);
  const char *(*GetVersionString)(void);
} ort_api_base;

#define ORTC_SLOT(field, index)                                          \
  _Static_assert(offsetof(ort_api, field) == (index) * sizeof(void *), \
                 "OrtApi::" #field " is entry " #index)
ORTC_SLOT(CreateStatus, 0);
ORTC_SLOT(GetErrorCode, 1);
ORTC_SLOT(GetErrorMessage, 2);
ORTC_SLOT(CreateEnv, 3);
ORTC_SLOT(CreateSession, 7);
ORTC_SLOT(Run, 9);
ORTC_SLOT(CreateSessionOptions, 10);
ORTC_SLOT(SetSessionExecutionMode, 13);
ORTC_SLOT(SetSessionGraphOptimizationLevel, 23);
ORTC_SLOT(SetIntraOpNumThreads, 24);
ORTC_SLOT(SetInterOpNumThreads, 25);
ORTC_SLOT(SessionGetInputCount, 30);
ORTC_SLOT(SessionGetOutputCount, 31);
ORTC_SLOT(SessionGetInputName, 36);
ORTC_SLOT(SessionGetOutputName, 37);
ORTC_SLOT(CreateTensorWithDataAsOrtValue, 49);
ORTC_SLOT(IsTensor, 50);
ORTC_SLOT(GetTensorMutableData, 51);
ORTC_SLOT(GetTensorElementType, 60);
ORTC_SLOT(GetDimensionsCount, 61);
ORTC_SLOT(GetDimensions, 62);
ORTC_SLOT(GetTensorTypeAndShape, 65);
ORTC_SLOT(CreateCpuMemoryInfo, 69);
ORTC_SLOT(AllocatorFree, 76);
ORTC_SLOT(GetAllocatorWithDefaultOptions, 78);
ORTC_SLOT(ReleaseEnv, 92);
ORTC_SLOT(ReleaseStatus, 93);
ORTC_SLOT(ReleaseMemoryInfo, 94);
ORTC_SLOT(ReleaseSession, 95);
ORTC_SLOT(ReleaseValue, 96);
ORTC_SLOT(ReleaseTensorTypeAndShapeInfo, 99);
ORTC_SLOT(ReleaseSessionOptions, 100);

/* ---- Errors: a heap string naming what failed, NULL for success --------- */

typedef char *ortc_err;

static ortc_err errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static ortc_err errf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  if (!s) {
    fputs("ort_capi: out of memory\n", stderr);
    exit(1);
  }
  return s;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) {
    fputs("ort_capi: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

static char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (!p) {
    fputs("ort_capi: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

static const ort_api *g_ort;
static OrtEnv *g_env;
static OrtMemoryInfo *g_cpu;
static const char *g_version = "?";
static char g_lib[4096];
static int g_threads = 1;

/* An ORT status as an error (takes ownership of `st`), or NULL for success. */
static ortc_err ort_err(OrtStatus *st, const char *what) {
  if (!st) return NULL;
  ortc_err e = errf("%s: %s", what, g_ort->GetErrorMessage(st));
  g_ort->ReleaseStatus(st);
  return e;
}

/* Formats only on failure: ORT_TRY also wraps calls on the timed path. */
#define ORT_TRY(call, ...)                                   \
  do {                                                       \
    OrtStatus *st_ = (call);                                 \
    if (st_) return ort_err(st_, errf_tmp(__VA_ARGS__));     \
  } while (0)

/* A short-lived message for ORT_TRY (one at a time, not reentrant). */
static const char *errf_tmp(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *errf_tmp(const char *fmt, ...) {
  static char buf[1024];  /* a call's name and at most a path: cut if longer */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

/* "CONTEXT: err" (takes ownership of err). */
static ortc_err errf_wrap(ortc_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ortc_err errf_wrap(ortc_err err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *ctx = NULL;
  if (vasprintf(&ctx, fmt, ap) < 0) ctx = NULL;
  va_end(ap);
  if (!ctx) {
    fputs("ort_capi: out of memory\n", stderr);
    exit(1);
  }
  ortc_err e = errf("%s: %s", ctx, err);
  free(ctx);
  free(err);
  return e;
}

/* ---- Loading the library ----------------------------------------------- */

static ortc_err find_lib(const char *ort_dir, char *out, size_t out_len) {
#if defined(__x86_64__)
  const char *arch = "x64";
#elif defined(__aarch64__)
  const char *arch = "arm64";
#else
  const char *arch = "unknown-arch";
#endif
  char pattern[4096];
  int n = snprintf(pattern, sizeof pattern, "%s/onnxruntime-node/bin/napi-v*/linux/%s/libonnxruntime.so.1",
                   ort_dir, arch);
  if (n < 0 || (size_t)n >= sizeof pattern) return errf("--ort-dir: path too long");
  glob_t g;
  int rc = glob(pattern, 0, NULL, &g);
  if (rc != 0 || g.gl_pathc == 0) {
    if (rc == 0) globfree(&g);
    return errf("no libonnxruntime.so.1 matches %s (give --lib, $NIMBLE_ORT_LIB or --ort-dir; "
                "bench/models/run.sh installs onnxruntime-node there)", pattern);
  }
  /* glob sorts: the last is the newest napi-vN. */
  const char *p = g.gl_pathv[g.gl_pathc - 1];
  if (strlen(p) >= out_len) {
    globfree(&g);
    return errf("library path too long: %s", p);
  }
  strcpy(out, p);
  globfree(&g);
  return NULL;
}

static ortc_err open_ort(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) return errf("dlopen %s: %s", lib, dlerror());
  const ort_api_base *(*get_base)(void);
  *(void **)&get_base = dlsym(h, "OrtGetApiBase");
  if (!get_base) return errf("%s has no OrtGetApiBase: %s", lib, dlerror());
  const ort_api_base *base = get_base();
  if (!base || !base->GetApi || !base->GetVersionString) return errf("%s: OrtGetApiBase() returned no table", lib);
  g_version = base->GetVersionString();
  g_ort = base->GetApi(ORTC_API_VERSION);
  if (!g_ort)
    return errf("%s is ONNX Runtime %s, which does not serve API version %d (ONNX Runtime 1.%d or newer does)",
                lib, g_version ? g_version : "?", ORTC_API_VERSION, ORTC_API_VERSION);
  /* A cheap check that the table is laid out as declared: entries 0, 1, 2
   * and 93 must round-trip a status. */
  OrtStatus *probe = g_ort->CreateStatus(ORT_INVALID_ARGUMENT, "ort_capi probe");
  if (!probe) return errf("%s: CreateStatus returned NULL", lib);
  int code = g_ort->GetErrorCode(probe);
  const char *msg = g_ort->GetErrorMessage(probe);
  int msg_ok = msg && strcmp(msg, "ort_capi probe") == 0;
  g_ort->ReleaseStatus(probe);
  if (code != ORT_INVALID_ARGUMENT || !msg_ok)
    return errf("%s (ONNX Runtime %s): the API table does not behave as this program declares it "
                "(status round trip gave code %d)", lib, g_version, code);
  ORT_TRY(g_ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_capi", &g_env), "CreateEnv");
  ORT_TRY(g_ort->CreateCpuMemoryInfo(ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &g_cpu), "CreateCpuMemoryInfo");
  return NULL;
}

/* ---- .npy files (format 1.0-3.0, little-endian, C order) ---------------- */

typedef struct npy_type {
  const char *descr;
  int onnx;
  size_t size;
} npy_type;

static const npy_type NPY_TYPES[] = {
    {"<f4", ONNX_FLOAT, 4},  {"<f8", ONNX_DOUBLE, 8}, {"<i8", ONNX_INT64, 8}, {"<i4", ONNX_INT32, 4},
    {"<i2", ONNX_INT16, 2},  {"|i1", ONNX_INT8, 1},   {"|u1", ONNX_UINT8, 1}, {"<u2", ONNX_UINT16, 2},
    {"<u4", ONNX_UINT32, 4}, {"<u8", ONNX_UINT64, 8}, {"|b1", ONNX_BOOL, 1},  {"<f2", ONNX_FLOAT16, 2},
};

static const npy_type *npy_by_onnx(int onnx) {
  for (size_t i = 0; i < sizeof NPY_TYPES / sizeof NPY_TYPES[0]; i++)
    if (NPY_TYPES[i].onnx == onnx) return &NPY_TYPES[i];
  return NULL;
}

#define MAX_RANK 16

typedef struct tensor {
  char *name;
  const npy_type *type;
  int64_t dims[MAX_RANK];
  size_t rank;
  void *data;   /* owned, 64-byte aligned */
  size_t bytes;
} tensor;

/* Reads `path` into `t` (t->name is left alone). */
static ortc_err npy_read(const char *path, tensor *t) {
  FILE *f = fopen(path, "rb");
  if (!f) return errf("%s: %s", path, strerror(errno));
  ortc_err err = NULL;
  char *header = NULL;
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    err = errf("%s: not a .npy file (bad magic)", path);
    goto done;
  }
  size_t hlen;
  if (pre[6] == 1) {
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) {
      err = errf("%s: truncated header", path);
      goto done;
    }
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  } else {
    err = errf("%s: unsupported .npy version %d", path, pre[6]);
    goto done;
  }
  if (hlen > (1u << 20)) {
    err = errf("%s: header of %zu bytes is implausible", path, hlen);
    goto done;
  }
  header = xcalloc(hlen + 1, 1);
  if (fread(header, 1, hlen, f) != hlen) {
    err = errf("%s: truncated header", path);
    goto done;
  }
  const char *d = strstr(header, "'descr':");
  const char *o = strstr(header, "'fortran_order':");
  const char *s = strstr(header, "'shape':");
  if (!d || !o || !s) {
    err = errf("%s: malformed header %s", path, header);
    goto done;
  }
  d = strchr(d + 8, '\'');
  t->type = NULL;
  for (size_t i = 0; d && i < sizeof NPY_TYPES / sizeof NPY_TYPES[0]; i++) {
    size_t n = strlen(NPY_TYPES[i].descr);
    if (strncmp(d + 1, NPY_TYPES[i].descr, n) == 0 && d[1 + n] == '\'') t->type = &NPY_TYPES[i];
  }
  if (!t->type) {
    err = errf("%s: dtype in %s is not supported (little-endian numbers and bool only)", path, header);
    goto done;
  }
  o += 16;
  while (*o == ' ') o++;
  if (strncmp(o, "False", 5) != 0) {
    err = errf("%s: Fortran order is not supported", path);
    goto done;
  }
  s = strchr(s, '(');
  if (!s) {
    err = errf("%s: malformed shape in %s", path, header);
    goto done;
  }
  s++;
  t->rank = 0;
  size_t count = 1;
  for (;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    if (*s < '0' || *s > '9') {
      err = errf("%s: malformed shape in %s", path, header);
      goto done;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v > (unsigned long long)INT64_MAX || t->rank == MAX_RANK) {
      err = errf("%s: shape in %s is out of range (rank at most %d)", path, header, MAX_RANK);
      goto done;
    }
    if (v != 0 && count > SIZE_MAX / v) {
      err = errf("%s: shape in %s overflows", path, header);
      goto done;
    }
    count *= (size_t)v;
    t->dims[t->rank++] = (int64_t)v;
    s = end;
  }
  if (count > SIZE_MAX / t->type->size) {
    err = errf("%s: shape in %s overflows", path, header);
    goto done;
  }
  t->bytes = count * t->type->size;
  size_t alloc = (t->bytes + 63) / 64 * 64;
  t->data = aligned_alloc(64, alloc ? alloc : 64);
  if (!t->data) {
    err = errf("%s: out of memory for %zu bytes", path, t->bytes);
    goto done;
  }
  if (fread(t->data, 1, t->bytes, f) != t->bytes || fgetc(f) != EOF) {
    err = errf("%s: data size does not match shape %s (%zu bytes expected)", path, header, t->bytes);
    free(t->data);
    t->data = NULL;
    goto done;
  }
done:
  free(header);
  fclose(f);
  return err;
}

static ortc_err npy_write(const char *path, const npy_type *type, const int64_t *dims, size_t rank,
                          const void *data, size_t bytes) {
  char shape[MAX_RANK * 24 + 8];
  size_t n = 0;
  n += (size_t)snprintf(shape + n, sizeof shape - n, "(");
  for (size_t i = 0; i < rank; i++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
  snprintf(shape + n, sizeof shape - n, "%s)", rank == 1 ? "," : "");
  char header[sizeof shape + 128];
  int h = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", type->descr,
                   shape);
  /* Pad with spaces and a newline so the data starts at a multiple of 64. */
  size_t total = 10 + (size_t)h + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(header + h, ' ', pad);
  header[h + pad] = '\n';
  size_t hlen = (size_t)h + pad + 1;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  FILE *f = fopen(path, "wb");
  if (!f) return errf("%s: %s", path, strerror(errno));
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen &&
           (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
  if (fclose(f) != 0) ok = 0;
  if (!ok) return errf("%s: write failed: %s", path, strerror(errno));
  return NULL;
}

/* ---- Sessions ------------------------------------------------------------ */

typedef struct model {
  char *id;
  OrtSession *session;
  size_t n_in, n_out;
  tensor *in;            /* in session order */
  OrtValue **in_values;  /* views of in[i].data */
  const char **in_names;
  char **out_names;      /* owned copies */
  OrtValue **outs;       /* the last run's outputs, or NULL each */
  struct model *next;
} model;

static model *g_models;

static void model_free(model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_in; i++) {
    if (m->in_values && m->in_values[i]) g_ort->ReleaseValue(m->in_values[i]);
    if (m->in) {
      free(m->in[i].name);
      free(m->in[i].data);
    }
  }
  for (size_t i = 0; m->out_names && i < m->n_out; i++) free(m->out_names[i]);
  for (size_t i = 0; m->outs && i < m->n_out; i++)
    if (m->outs[i]) g_ort->ReleaseValue(m->outs[i]);
  free(m->outs);
  if (m->session) g_ort->ReleaseSession(m->session);
  free(m->in);
  free(m->in_values);
  free(m->in_names);
  free(m->out_names);
  free(m->id);
  free(m);
}

/* (name, path) pairs for a model's inputs. */
typedef struct input_file {
  const char *name, *path;
} input_file;

static ortc_err session_names(OrtSession *s, int outputs, size_t n, char **names) {
  OrtAllocator *alloc;
  ORT_TRY(g_ort->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions");
  for (size_t i = 0; i < n; i++) {
    char *v = NULL;
    if (outputs)
      ORT_TRY(g_ort->SessionGetOutputName(s, i, alloc, &v), "SessionGetOutputName(%zu)", i);
    else
      ORT_TRY(g_ort->SessionGetInputName(s, i, alloc, &v), "SessionGetInputName(%zu)", i);
    names[i] = xstrdup(v);
    ORT_TRY(g_ort->AllocatorFree(alloc, v), "AllocatorFree");
  }
  return NULL;
}

static ortc_err model_create(const char *id, const char *path, const input_file *files, size_t n_files,
                             model **out) {
  model *m = xcalloc(1, sizeof *m);
  m->id = xstrdup(id);
  *out = m;
  OrtSessionOptions *opt = NULL;
  ORT_TRY(g_ort->CreateSessionOptions(&opt), "CreateSessionOptions");
  OrtStatus *st = g_ort->SetIntraOpNumThreads(opt, g_threads);
  if (!st) st = g_ort->SetInterOpNumThreads(opt, 1);
  if (!st) st = g_ort->SetSessionExecutionMode(opt, ORT_SEQUENTIAL);
  if (!st) st = g_ort->SetSessionGraphOptimizationLevel(opt, ORT_ENABLE_ALL);
  if (!st) st = g_ort->CreateSession(g_env, path, opt, &m->session);
  g_ort->ReleaseSessionOptions(opt);
  if (st) return ort_err(st, errf_tmp("loading %s", path));

  ORT_TRY(g_ort->SessionGetInputCount(m->session, &m->n_in), "SessionGetInputCount");
  ORT_TRY(g_ort->SessionGetOutputCount(m->session, &m->n_out), "SessionGetOutputCount");
  m->in = xcalloc(m->n_in, sizeof *m->in);
  m->in_values = xcalloc(m->n_in, sizeof *m->in_values);
  m->in_names = xcalloc(m->n_in, sizeof *m->in_names);
  m->out_names = xcalloc(m->n_out, sizeof *m->out_names);
  m->outs = xcalloc(m->n_out, sizeof *m->outs);
  char **in_names = xcalloc(m->n_in, sizeof *in_names);
  ortc_err err = session_names(m->session, 0, m->n_in, in_names);
  for (size_t i = 0; i < m->n_in; i++) m->in[i].name = in_names[i];
  free(in_names);
  if (err) return err;
  if ((err = session_names(m->session, 1, m->n_out, m->out_names))) return err;

  /* Every model input needs exactly one file, and every file an input. */
  for (size_t j = 0; j < n_files; j++) {
    size_t i = 0;
    while (i < m->n_in && strcmp(m->in[i].name, files[j].name) != 0) i++;
    if (i == m->n_in) {
      char *list = xstrdup("");
      for (size_t k = 0; k < m->n_in; k++) {
        char *next = errf("%s%s'%s'", list, k ? ", " : "", m->in[k].name);
        free(list);
        list = next;
      }
      err = errf("%s has no input '%s' (its inputs: %s)", path, files[j].name, list);
      free(list);
      return err;
    }
    if (m->in[i].data) return errf("input '%s' is given twice", files[j].name);
    if ((err = npy_read(files[j].path, &m->in[i]))) return errf_wrap(err, "input '%s'", files[j].name);
  }
  for (size_t i = 0; i < m->n_in; i++) {
    tensor *t = &m->in[i];
    if (!t->data) return errf("%s: no file for input '%s'", path, t->name);
    ORT_TRY(g_ort->CreateTensorWithDataAsOrtValue(g_cpu, t->data, t->bytes, t->dims, t->rank, t->type->onnx,
                                                  &m->in_values[i]),
            "input '%s': CreateTensorWithDataAsOrtValue", t->name);
    m->in_names[i] = t->name;
  }
  return NULL;
}

/* One run; its outputs stay in m->outs until the next. */
static ortc_err model_run(model *m) {
  for (size_t i = 0; i < m->n_out; i++) {
    if (m->outs[i]) g_ort->ReleaseValue(m->outs[i]);
    m->outs[i] = NULL;
  }
  ORT_TRY(g_ort->Run(m->session, NULL, m->in_names, (const OrtValue *const *)m->in_values, m->n_in,
                     (const char *const *)m->out_names, m->n_out, m->outs),
          "Run (%s)", m->id);
  return NULL;
}

/* Writes output `i` of the last run to `path`. */
static ortc_err model_write_output(model *m, size_t i, const char *path) {
  OrtValue *v = m->outs[i];
  const char *name = m->out_names[i];
  if (!v) return errf("output '%s': no value (the model has not run)", name);
  int is_tensor = 0;
  ORT_TRY(g_ort->IsTensor(v, &is_tensor), "output '%s': IsTensor", name);
  if (!is_tensor) return errf("output '%s' is not a tensor and cannot be written as .npy", name);
  OrtTensorTypeAndShapeInfo *info;
  ORT_TRY(g_ort->GetTensorTypeAndShape(v, &info), "output '%s': GetTensorTypeAndShape", name);
  int type = 0;
  size_t rank = 0;
  int64_t dims[MAX_RANK];
  OrtStatus *st = g_ort->GetTensorElementType(info, &type);
  if (!st) st = g_ort->GetDimensionsCount(info, &rank);
  if (!st && rank > MAX_RANK) {
    g_ort->ReleaseTensorTypeAndShapeInfo(info);
    return errf("output '%s' has rank %zu (at most %d)", name, rank, MAX_RANK);
  }
  if (!st) st = g_ort->GetDimensions(info, dims, rank);
  g_ort->ReleaseTensorTypeAndShapeInfo(info);
  if (st) return ort_err(st, errf_tmp("output '%s': type and shape", name));
  const npy_type *nt = npy_by_onnx(type);
  if (!nt) return errf("output '%s' has ONNX element type %d, which cannot be written as .npy", name, type);
  size_t count = 1;
  for (size_t d = 0; d < rank; d++) {
    if (dims[d] < 0 || (dims[d] != 0 && count > SIZE_MAX / (uint64_t)dims[d]))
      return errf("output '%s': dimension %zu is %lld", name, d, (long long)dims[d]);
    count *= (size_t)dims[d];
  }
  if (count > SIZE_MAX / nt->size) return errf("output '%s': size overflows", name);
  void *data = NULL;
  if (count) ORT_TRY(g_ort->GetTensorMutableData(v, &data), "output '%s': GetTensorMutableData", name);
  return npy_write(path, nt, dims, rank, data, count * nt->size);
}

static ortc_err model_write_outputs(model *m, const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) return errf("%s: %s", dir, strerror(errno));
  for (size_t i = 0; i < m->n_out; i++) {
    /* An output's name becomes a file name: keep it to one path component. */
    if (!m->out_names[i][0] || strchr(m->out_names[i], '/') || strcmp(m->out_names[i], ".") == 0 ||
        strcmp(m->out_names[i], "..") == 0)
      return errf("output name '%s' cannot be a file name", m->out_names[i]);
    char *path = errf("%s/%s.npy", dir, m->out_names[i]);
    ortc_err err = model_write_output(m, i, path);
    free(path);
    if (err) return err;
  }
  return NULL;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* `warmup` untimed runs, then `runs` timed runs, stopping early once
 * `max_s` seconds have passed and at least 3 runs are in. `times` (caller
 * frees) gets one entry per timed run. */
static ortc_err model_time(model *m, long warmup, long runs, double max_s, double **times, size_t *n) {
  *times = xcalloc((size_t)(runs > 0 ? runs : 1), sizeof **times);
  *n = 0;
  ortc_err err;
  for (long i = 0; i < warmup; i++)
    if ((err = model_run(m))) return err;
  double t0 = now_ms();
  while ((long)*n < runs && (*n < 3 || now_ms() - t0 < max_s * 1e3)) {
    double s = now_ms();
    if ((err = model_run(m))) return err;
    (*times)[(*n)++] = now_ms() - s;
  }
  return NULL;
}

static model *model_find(const char *id) {
  for (model *m = g_models; m; m = m->next)
    if (strcmp(m->id, id) == 0) return m;
  return NULL;
}

static void model_forget(const char *id) {
  for (model **pp = &g_models; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->id, id) == 0) {
      model *m = *pp;
      *pp = m->next;
      model_free(m);
      return;
    }
  }
}

/* ---- A small JSON reader and writer, enough for the worker protocol ------ */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct json {
  jtype type;
  double num;          /* J_NUM, J_BOOL */
  char *str;           /* J_STR */
  size_t n;            /* J_ARR, J_OBJ: item count */
  char **keys;         /* J_OBJ */
  struct json *items;  /* J_ARR, J_OBJ */
} json;

static void json_free(json *j) {
  free(j->str);
  for (size_t i = 0; i < j->n; i++) {
    if (j->keys) free(j->keys[i]);
    json_free(&j->items[i]);
  }
  free(j->keys);
  free(j->items);
  memset(j, 0, sizeof *j);
}

static void skip_ws(const char **p) {
  while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}

static void utf8_put(char *buf, size_t *len, unsigned cp) {
  if (cp < 0x80) {
    buf[(*len)++] = (char)cp;
  } else if (cp < 0x800) {
    buf[(*len)++] = (char)(0xc0 | cp >> 6);
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    buf[(*len)++] = (char)(0xe0 | cp >> 12);
    buf[(*len)++] = (char)(0x80 | (cp >> 6 & 0x3f));
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    buf[(*len)++] = (char)(0xf0 | cp >> 18);
    buf[(*len)++] = (char)(0x80 | (cp >> 12 & 0x3f));
    buf[(*len)++] = (char)(0x80 | (cp >> 6 & 0x3f));
    buf[(*len)++] = (char)(0x80 | (cp & 0x3f));
  }
}

static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  *out = v;
  return 1;
}

static ortc_err json_string(const char **p, char **out) {
  const char *s = *p + 1;  /* past the quote */
  /* The decoded text is never longer than the escaped one (\uXXXX is 6
   * bytes for at most 3, a surrogate pair 12 for 4). */
  size_t cap = strlen(s) + 1, len = 0;
  char *buf = xcalloc(cap, 1);
  for (;;) {
    unsigned char c = (unsigned char)*s;
    if (c == '"') break;
    if (c == 0 || c < 0x20) {
      free(buf);
      return errf("unterminated or raw control character in string");
    }
    if (c != '\\') {
      buf[len++] = (char)c;
      s++;
      continue;
    }
    s++;
    switch (*s) {
      case '"': buf[len++] = '"'; break;
      case '\\': buf[len++] = '\\'; break;
      case '/': buf[len++] = '/'; break;
      case 'b': buf[len++] = '\b'; break;
      case 'f': buf[len++] = '\f'; break;
      case 'n': buf[len++] = '\n'; break;
      case 'r': buf[len++] = '\r'; break;
      case 't': buf[len++] = '\t'; break;
      case 'u': {
        unsigned cp, lo;
        if (!hex4(s + 1, &cp)) {
          free(buf);
          return errf("bad \\u escape");
        }
        s += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && s[1] == '\\' && s[2] == 'u' && hex4(s + 3, &lo) && lo >= 0xdc00 &&
            lo < 0xe000) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          s += 6;
        }
        utf8_put(buf, &len, cp);
        break;
      }
      default:
        free(buf);
        return errf("bad escape in string");
    }
    s++;
  }
  buf[len] = 0;
  *out = buf;
  *p = s + 1;
  return NULL;
}

static ortc_err json_value(const char **p, json *out, int depth) {
  memset(out, 0, sizeof *out);
  if (depth > 32) return errf("JSON nested too deeply");
  skip_ws(p);
  const char *s = *p;
  if (*s == '"') {
    out->type = J_STR;
    return json_string(p, &out->str);
  }
  if (*s == '{' || *s == '[') {
    int obj = *s == '{';
    out->type = obj ? J_OBJ : J_ARR;
    (*p)++;
    skip_ws(p);
    char close = obj ? '}' : ']';
    if (**p == close) {
      (*p)++;
      return NULL;
    }
    for (;;) {
      char *key = NULL;
      ortc_err err;
      if (obj) {
        skip_ws(p);
        if (**p != '"') return errf("expected a key in object");
        if ((err = json_string(p, &key))) return err;
        skip_ws(p);
        if (**p != ':') {
          err = errf("expected ':' after key '%s'", key);
          free(key);
          return err;
        }
        (*p)++;
      }
      json *items = realloc(out->items, (out->n + 1) * sizeof *items);
      char **keys = obj ? realloc(out->keys, (out->n + 1) * sizeof *keys) : NULL;
      if (!items || (obj && !keys)) {
        fputs("ort_capi: out of memory\n", stderr);
        exit(1);
      }
      out->items = items;
      if (obj) {
        out->keys = keys;
        out->keys[out->n] = key;
      }
      err = json_value(p, &out->items[out->n], depth + 1);
      out->n++;
      if (err) return err;
      skip_ws(p);
      if (**p == ',') {
        (*p)++;
        continue;
      }
      if (**p == close) {
        (*p)++;
        return NULL;
      }
      return errf("expected ',' or '%c'", close);
    }
  }
  if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0) {
    out->type = J_BOOL;
    out->num = *s == 't';
    *p += *s == 't' ? 4 : 5;
    return NULL;
  }
  if (strncmp(s, "null", 4) == 0) {
    out->type = J_NULL;
    *p += 4;
    return NULL;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno) return errf("bad JSON value at '%.20s'", s);
  out->type = J_NUM;
  out->num = v;
  *p = end;
  return NULL;
}

static const json *json_get(const json *obj, const char *key) {
  if (obj->type != J_OBJ) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
  return NULL;
}

static ortc_err json_str_field(const json *obj, const char *key, int required, const char **out) {
  const json *v = json_get(obj, key);
  *out = NULL;
  if (!v) return required ? errf("missing \"%s\"", key) : NULL;
  if (v->type != J_STR) return errf("\"%s\" must be a string", key);
  *out = v->str;
  return NULL;
}

static ortc_err json_num_field(const json *obj, const char *key, double lo, double hi, double dflt, double *out) {
  const json *v = json_get(obj, key);
  *out = dflt;
  if (!v) return NULL;
  if (v->type != J_NUM || !(v->num >= lo && v->num <= hi))
    return errf("\"%s\" must be a number from %g to %g", key, lo, hi);
  *out = v->num;
  return NULL;
}

static void json_put_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* ---- The worker -------------------------------------------------------- */

static ortc_err cmd_load(const json *c) {
  const char *id, *path, *out, *outdir;
  ortc_err err;
  if ((err = json_str_field(c, "id", 1, &id)) || (err = json_str_field(c, "model", 1, &path)) ||
      (err = json_str_field(c, "out", 0, &out)) || (err = json_str_field(c, "outdir", 0, &outdir)))
    return err;
  const json *inputs = json_get(c, "inputs");
  if (!inputs || inputs->type != J_OBJ) return errf("\"inputs\" must be an object of name: path.npy");
  input_file *files = xcalloc(inputs->n, sizeof *files);
  for (size_t i = 0; i < inputs->n; i++) {
    if (inputs->items[i].type != J_STR) {
      free(files);
      return errf("input '%s': the path must be a string", inputs->keys[i]);
    }
    files[i].name = inputs->keys[i];
    files[i].path = inputs->items[i].str;
  }
  model_forget(id);
  model *m = NULL;
  err = model_create(id, path, files, inputs->n, &m);
  free(files);
  for (int i = 0; !err && i < 3; i++) err = model_run(m);
  if (!err && out) {
    if (m->n_out == 0) err = errf("%s has no outputs", path);
    else err = model_write_output(m, 0, out);
  }
  if (!err && outdir) err = model_write_outputs(m, outdir);
  if (err) {
    model_free(m);
    return err;
  }
  m->next = g_models;
  g_models = m;
  return NULL;
}

static ortc_err cmd_time(const json *c, FILE *reply) {
  const char *id;
  double warmup, runs, max_s;
  ortc_err err;
  if ((err = json_str_field(c, "id", 1, &id)) || (err = json_num_field(c, "warmup", 0, 1e6, 1, &warmup)) ||
      (err = json_num_field(c, "runs", 1, 1e7, 10, &runs)) || (err = json_num_field(c, "max_s", 0, 1e6, 1e6, &max_s)))
    return err;
  model *m = model_find(id);
  if (!m) return errf("config '%s' is not loaded", id);
  double *times;
  size_t n;
  err = model_time(m, (long)warmup, (long)runs, max_s, &times, &n);
  if (!err) {
    fputs("{\"ok\":true,\"times_ms\":[", reply);
    for (size_t i = 0; i < n; i++) fprintf(reply, "%s%.6f", i ? "," : "", times[i]);
    fputs("]}\n", reply);
  }
  free(times);
  return err;
}

static int serve(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, stdin)) >= 0) {
    const char *p = line;
    skip_ws(&p);
    if (!*p) continue;
    json c;
    ortc_err err = json_value(&p, &c, 0);
    if (!err) {
      skip_ws(&p);
      if (*p) err = errf("trailing text after the command");
    }
    const char *cmd = NULL;
    if (!err && c.type != J_OBJ) err = errf("a command is a JSON object");
    if (!err) err = json_str_field(&c, "cmd", 1, &cmd);
    if (!err) {
      if (strcmp(cmd, "load") == 0) {
        err = cmd_load(&c);
        if (!err) fputs("{\"ok\":true}\n", stdout);
      } else if (strcmp(cmd, "time") == 0) {
        err = cmd_time(&c, stdout);
      } else if (strcmp(cmd, "info") == 0) {
        fputs("{\"ok\":true,\"version\":", stdout);
        json_put_str(stdout, g_version);
        fprintf(stdout, ",\"api\":%d,\"threads\":%d,\"lib\":", ORTC_API_VERSION, g_threads);
        json_put_str(stdout, g_lib);
        fputs("}\n", stdout);
      } else {
        err = errf("unknown command '%s'", cmd);
      }
    }
    json_free(&c);
    if (err) {
      fputs("{\"ok\":false,\"error\":", stdout);
      json_put_str(stdout, err);
      fputs("}\n", stdout);
      free(err);
    }
    fflush(stdout);
  }
  free(line);
  return 0;
}

/* ---- One shot and main --------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(FILE *f) {
  fputs("usage: ort_capi [--lib PATH | --ort-dir NODE_MODULES] [--threads N] --serve\n"
        "       ort_capi [--lib PATH | --ort-dir NODE_MODULES] [--threads N] --model M.onnx\n"
        "                --input NAME=FILE.npy ... [--warmup W] [--repeat K] [--output-dir DIR]\n"
        "       ort_capi [--lib PATH | --ort-dir NODE_MODULES] --version\n",
        f);
}

static int fail(ortc_err err) {
  fprintf(stderr, "ort_capi: %s\n", err);
  free(err);
  return 1;
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "ort_capi: %s must be an integer from %ld to %ld, not '%s'\n", opt, lo, hi, s);
    return 0;
  }
  *out = v;
  return 1;
}

int main(int argc, char **argv) {
  const char *lib = NULL, *ort_dir = "bench/models/.cache/ort/node_modules", *model_path = NULL, *outdir = NULL;
  long warmup = 3, repeat = 10, threads = 1;
  int do_serve = 0, do_version = 0;
  input_file *files = xcalloc((size_t)argc, sizeof *files);
  size_t n_files = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (strcmp(a, "--serve") == 0) {
      do_serve = 1;
      takes = 0;
    } else if (strcmp(a, "--version") == 0) {
      do_version = 1;
      takes = 0;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      free(files);
      return 0;
    } else if (!v) {
      fprintf(stderr, "ort_capi: %s needs a value (or is unknown)\n", a);
      usage(stderr);
      free(files);
      return 2;
    } else if (strcmp(a, "--lib") == 0) {
      lib = v;
    } else if (strcmp(a, "--ort-dir") == 0) {
      ort_dir = v;
    } else if (strcmp(a, "--model") == 0) {
      model_path = v;
    } else if (strcmp(a, "--output-dir") == 0) {
      outdir = v;
    } else if (strcmp(a, "--input") == 0) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "ort_capi: --input takes NAME=FILE.npy, not '%s'\n", v);
        free(files);
        return 2;
      }
      argv[i + 1][eq - v] = 0;  /* split in place: argv outlives the run */
      files[n_files].name = v;
      files[n_files++].path = eq + 1;
    } else if (strcmp(a, "--threads") == 0) {
      if (!parse_long(a, v, 1, 1024, &threads)) return free(files), 2;
    } else if (strcmp(a, "--warmup") == 0) {
      if (!parse_long(a, v, 0, 1000000, &warmup)) return free(files), 2;
    } else if (strcmp(a, "--repeat") == 0) {
      if (!parse_long(a, v, 1, 10000000, &repeat)) return free(files), 2;
    } else {
      fprintf(stderr, "ort_capi: unknown option %s\n", a);
      usage(stderr);
      free(files);
      return 2;
    }
    i += takes;
  }
  if (do_serve + do_version + (model_path != NULL) != 1) {
    fputs("ort_capi: give exactly one of --serve, --version, --model\n", stderr);
    usage(stderr);
    free(files);
    return 2;
  }
  g_threads = (int)threads;
  if (!lib) lib = getenv("NIMBLE_ORT_LIB");
  ortc_err err = NULL;
  if (lib && *lib) {
    if (strlen(lib) >= sizeof g_lib) err = errf("--lib: path too long");
    else strcpy(g_lib, lib);
  } else {
    err = find_lib(ort_dir, g_lib, sizeof g_lib);
  }
  if (!err) {
    /* The absolute path, for the report; dlopen then needs no search. */
    char *abs = realpath(g_lib, NULL);
    if (!abs) {
      err = errf("%s: %s", g_lib, strerror(errno));
    } else {
      if (strlen(abs) < sizeof g_lib) strcpy(g_lib, abs);
      free(abs);
    }
  }
  if (!err) err = open_ort(g_lib);
  if (err) {
    free(files);
    return fail(err);
  }
  int rc = 0;
  if (do_version) {
    printf("ONNX Runtime %s (API %d) from %s\n", g_version, ORTC_API_VERSION, g_lib);
  } else if (do_serve) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    rc = serve();
  } else {
    model *m = NULL;
    double *times = NULL;
    size_t n = 0;
    err = model_create("cli", model_path, files, n_files, &m);
    if (!err) err = model_time(m, warmup, repeat, 1e9, &times, &n);
    if (!err && outdir) err = model_write_outputs(m, outdir);
    if (!err) {
      for (size_t i = 0; i < n; i++) printf("run %zu: %.4f ms\n", i + 1, times[i]);
      qsort(times, n, sizeof *times, cmp_double);
      double med = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
      printf("ONNX Runtime %s, %d thread%s: %zu runs, median %.4f ms, min %.4f ms\n", g_version, g_threads,
             g_threads == 1 ? "" : "s", n, med, times[0]);
    }
    free(times);
    model_free(m);
    if (err) rc = fail(err);
  }
  while (g_models) {
    model *m = g_models;
    g_models = m->next;
    model_free(m);
  }
  g_ort->ReleaseMemoryInfo(g_cpu);
  g_ort->ReleaseEnv(g_env);
  free(files);
  return rc;
}
