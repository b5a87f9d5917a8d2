/* The own sgemm's variants (sgemm_own_kernel.inc, once per instruction
 * set), the run-time choice between them, and the per-thread packing
 * buffers. See sgemm_own.h. */
#include "vm/sgemm_own.h"

#include "vm/conv_winograd.h"
#include "vm/thread_buffer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define SG_HAVE_X86 1
#else
#define SG_HAVE_X86 0
#endif

#if SG_HAVE_X86
#include <immintrin.h> /* pack_a's 8x8 transposes (AVX) in the x86 variants */
#endif

/* ---- The epilogue as a pass --------------------------------------------------- */


/* ---- The variants ---------------------------------------------------------- */

/* Portable: 16-byte vectors (SSE2 on x86_64, NEON on aarch64). aarch64 has
 * 32 vector registers, SSE2 16: the tile is sized to fit. */
#define SG_NAME(x) x##_portable
#define SG_TARGET
#define SG_VF 4
#if defined(__aarch64__)
#define SG_MR 8
#define SG_NV 3
#else
#define SG_MR 4
#define SG_NV 2
#endif
#define SG_KC 256
#define SG_MC 128
#define SG_NC 3072
#if defined(__aarch64__)
#define SG_GB 16
#else
#define SG_GB 8
#endif
#include "vm/sgemm_own_kernel.inc" /* which #undefs the SG_ parameters */

#if SG_HAVE_X86
/* AVX2 + FMA: 16 ymm registers, a 6 x 16 tile in 12 of them. */
#define SG_NAME(x) x##_avx2
#define SG_TARGET __attribute__((target("avx2,fma")))
#define SG_VF 8
#define SG_MR 6
#define SG_NV 2
#define SG_KC 256
#define SG_MC 120
#define SG_NC 3072
#define SG_GB 8
#include "vm/sgemm_own_kernel.inc" /* which #undefs the SG_ parameters */

/* AVX-512: 32 zmm registers, a 14 x 32 tile in 28 of them (two more hold
 * B's row, one A's broadcast); the B panel's 192 rows (24 KB) stay in L1
 * while A's panels stream from L2. Against 8 x 32 tiles 256 deep this ran
 * squeezenet's products 5-25% faster (docs/benchmarks.md). Products of
 * few rows (16, 24, 32: mobilenet_v2's narrow layers) go by 8 x 32 tiles. */
#define SG_NAME(x) x##_avx512
#define SG_TARGET __attribute__((target("avx512f,avx2,fma")))
#define SG_VF 16
#define SG_MR 14
#define SG_NV 2
#define SG_MR_EDGE 8
#define SG_KC 192
#define SG_MC 112
#define SG_NC 3072
#define SG_GB 16
#include "vm/sgemm_own_kernel.inc" /* which #undefs the SG_ parameters */
#endif

/* The epilogue as a pass, on the widest variant this CPU runs (the
 * runtime itself is built for the baseline instruction set). */
void nimble_sgemm_apply_epi(int64_t m, int64_t n, float *c, int64_t ldc, const nimble_sgemm_epi *epi) {
  switch (nimble_sgemm_own_best_isa()) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: apply_epi_avx512(m, n, c, ldc, epi); return;
  case NIMBLE_SGEMM_ISA_AVX2: apply_epi_avx2(m, n, c, ldc, epi); return;
#endif
  default: apply_epi_portable(m, n, c, ldc, epi); return;
  }
}

/* ---- Choosing one ---------------------------------------------------------- */

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static int isa_mask = 1 << NIMBLE_SGEMM_ISA_PORTABLE;
static nimble_sgemm_isa best_isa = NIMBLE_SGEMM_ISA_PORTABLE;

static void probe_cpu(void) {
#if SG_HAVE_X86
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char *v = getenv("NIMBLE_AVX512"); /* "0": AVX2 at most, as on a CPU without AVX-512 */
  if (avx2) isa_mask |= 1 << NIMBLE_SGEMM_ISA_AVX2;
  if (avx2 && __builtin_cpu_supports("avx512f") && !(v && strcmp(v, "0") == 0))
    isa_mask |= 1 << NIMBLE_SGEMM_ISA_AVX512;
#endif
  for (int i = NIMBLE_SGEMM_ISA_PORTABLE; i <= NIMBLE_SGEMM_ISA_AVX512; i++)
    if (isa_mask & (1 << i)) best_isa = (nimble_sgemm_isa)i;
}

int nimble_sgemm_isa_available(nimble_sgemm_isa isa) {
  pthread_once(&cpu_once, probe_cpu);
  return isa >= NIMBLE_SGEMM_ISA_PORTABLE && isa <= NIMBLE_SGEMM_ISA_AVX512 && (isa_mask & (1 << isa));
}

nimble_sgemm_isa nimble_sgemm_own_best_isa(void) {
  pthread_once(&cpu_once, probe_cpu);
  return best_isa;
}

const char *nimble_sgemm_isa_name(nimble_sgemm_isa isa) {
  switch (isa) {
  case NIMBLE_SGEMM_ISA_AVX512: return "avx512";
  case NIMBLE_SGEMM_ISA_AVX2: return "avx2";
  default: return "portable";
  }
}

/* ---- Constant operands, packed once ---------------------------------------- */

/* A transposed B (a dense layer's weights stored [n, k], as ONNX's Gemm
 * with transB has them) has to be repacked on every call, and for mlp's
 * 64x512x784 that copy took a third of the product. When B lies in memory
 * the runtime knows never changes (an executable's constants), it is
 * packed once, kept here, and every later call with the same operand uses
 * the panels. The cache is process-wide, keyed by the operand's address
 * and layout and the variant; an executable's entries go when its
 * constants are freed. */
typedef struct const_range {
  const char *base;
  size_t bytes;
} const_range;

typedef struct packed_entry {
  int side; /* 'A', 'B' or 'V' (a matrix-vector product's B) */
  const float *b;
  int64_t ldb, k, n; /* for A: lda, k, m */
  int32_t tb;        /* for A: trans_a */
  nimble_sgemm_isa isa;
  float *panels;
  size_t floats;
} packed_entry;

/* At most this much memory for packed copies; beyond it products pack per
 * call as before. */
#define PACKED_CAP_BYTES ((size_t)512 << 20)

static pthread_mutex_t const_mu = PTHREAD_MUTEX_INITIALIZER;
/* Bumped (under const_mu) by every change to the ranges: answers a thread
 * remembered (seen below) hold while it is unchanged. */
static atomic_uint const_gen = 1;
static const_range *ranges;
static size_t num_ranges, cap_ranges;
static packed_entry *entries;
static size_t num_entries, cap_entries, packed_bytes;

void nimble_sgemm_own_constants_add(const void *base, size_t bytes) {
  if (!base || !bytes) return;
  pthread_mutex_lock(&const_mu);
  if (num_ranges == cap_ranges) {
    size_t cap = cap_ranges ? cap_ranges * 2 : 8;
    const_range *r = realloc(ranges, cap * sizeof *r);
    if (!r) { /* without the range its operands are simply packed per call */
      pthread_mutex_unlock(&const_mu);
      return;
    }
    ranges = r;
    cap_ranges = cap;
  }
  ranges[num_ranges++] = (const_range){base, bytes};
  atomic_fetch_add_explicit(&const_gen, 1, memory_order_release);
  pthread_mutex_unlock(&const_mu);
}

void nimble_sgemm_own_constants_remove(const void *base, size_t bytes) {
  if (!base || !bytes) return;
  nimble_conv_winograd_forget(base, bytes); /* its transformed weights go with the range */
  const char *lo = base, *hi = lo + bytes;
  pthread_mutex_lock(&const_mu);
  for (size_t i = 0; i < num_ranges; i++)
    if (ranges[i].base == lo && ranges[i].bytes == bytes) {
      ranges[i] = ranges[--num_ranges];
      break;
    }
  for (size_t i = 0; i < num_entries;) {
    const char *b = (const char *)entries[i].b;
    if (b >= lo && b < hi) {
      free(entries[i].panels);
      packed_bytes -= entries[i].floats * sizeof(float);
      entries[i] = entries[--num_entries];
    } else {
      i++;
    }
  }
  atomic_fetch_add_explicit(&const_gen, 1, memory_order_release);
  pthread_mutex_unlock(&const_mu);
}

/* A thread's last answers of packed_constant and is_constant: a small
 * model in a loop asks the same few every iteration, and the lock (an
 * atomic instruction pair once the VM has workers) and the scans cost
 * more than its products. */
typedef struct seen_entry {
  unsigned gen; /* const_gen when answered; 0: empty */
  int side;     /* packed_constant's, or 'C' for is_constant */
  int32_t t;
  nimble_sgemm_isa isa;
  const float *x, *out;
  int64_t ld, k, n;
} seen_entry;
enum { SEEN = 4 };
static _Thread_local seen_entry seen[SEEN];
static _Thread_local unsigned seen_next;

static const seen_entry *seen_find(const seen_entry *key) {
  for (int i = 0; i < SEEN; i++) {
    const seen_entry *e = &seen[i];
    if (e->gen == key->gen && e->x == key->x && e->side == key->side && e->t == key->t && e->ld == key->ld &&
        e->k == key->k && e->n == key->n && e->isa == key->isa)
      return e;
  }
  return NULL;
}

/* key->gen was read before the answer: a change since leaves it unused. */
static void seen_note(const seen_entry *key, const float *out) {
  seen_entry *e = &seen[seen_next++ % SEEN];
  *e = *key;
  e->out = out;
}

static unsigned gen_now(void) { return atomic_load_explicit(&const_gen, memory_order_acquire); }

/* Whether op(B) (k x n, stored transposed or not) lies wholly inside one
 * registered range. Caller holds const_mu. */
static int in_constants(int32_t tb, const float *b, int64_t ldb, int64_t k, int64_t n) {
  int64_t rows = tb ? n : k, cols = tb ? k : n;
  const char *lo = (const char *)b, *hi = (const char *)(b + (rows - 1) * ldb + cols);
  for (size_t i = 0; i < num_ranges; i++)
    if (lo >= ranges[i].base && hi <= ranges[i].base + ranges[i].bytes) return 1;
  return 0;
}

int nimble_sgemm_own_is_constant(int32_t trans_b, const float *b, int64_t ldb, int64_t k, int64_t n) {
  seen_entry key = {gen_now(), 'C', trans_b, NIMBLE_SGEMM_ISA_PORTABLE, b, NULL, ldb, k, n};
  const seen_entry *e = seen_find(&key);
  if (e) return e->out != NULL;
  pthread_mutex_lock(&const_mu);
  int r = num_ranges && in_constants(trans_b, b, ldb, k, n);
  pthread_mutex_unlock(&const_mu);
  seen_note(&key, r ? b : NULL);
  return r;
}

/* The packed panels of a constant operand for `isa`, packing them on first
 * use; NULL when it is not a registered constant or memory is short.
 * side 'B': op(B), k x n, stored transposed when t. side 'A': op(A), m x
 * k, passed as (t = trans_a, x = a, ld = lda, k, n = m); op(A)^T lies in
 * memory as a B of the same transposition would, so one range test serves.
 * side 'V': op(B) as side 'B', for products of one row (pack_gemv).
 * With const_mu held; packed_constant below asks the thread's answers
 * first, so this runs a few times per operand and thread: for size. */
static __attribute__((optimize("Os"))) const float *packed_constant_locked(nimble_sgemm_isa isa, int side,
                                                                          int32_t t, const float *x, int64_t ld,
                                                                          int64_t k, int64_t n) {
  const float *out = NULL;
  if (!num_ranges || !in_constants(side == 'A' ? !t : t, x, ld, k, n)) goto done;
  for (size_t i = 0; i < num_entries; i++) {
    packed_entry *e = &entries[i];
    if (e->side == side && e->b == x && e->ldb == ld && e->k == k && e->n == n && e->tb == t && e->isa == isa) {
      out = e->panels;
      goto done;
    }
  }
  size_t floats;
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: floats = side == 'A' ? packed_size_a_avx512(n, k) : packed_size_avx512(n, k); break;
  case NIMBLE_SGEMM_ISA_AVX2: floats = side == 'A' ? packed_size_a_avx2(n, k) : packed_size_avx2(n, k); break;
#endif
  default: floats = side == 'A' ? packed_size_a_portable(n, k) : packed_size_portable(n, k); break;
  }
  if (side == 'V') floats = (size_t)(k * n);
  if (floats > PACKED_CAP_BYTES / sizeof(float) || packed_bytes + floats * sizeof(float) > PACKED_CAP_BYTES)
    goto done;
  if (num_entries == cap_entries) {
    size_t cap = cap_entries ? cap_entries * 2 : 16;
    packed_entry *r = realloc(entries, cap * sizeof *r);
    if (!r) goto done;
    entries = r;
    cap_entries = cap;
  }
  float *panels = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
  if (!panels) goto done;
  /* Packed under the lock: once per operand and process. */
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512:
    if (side == 'A') pack_all_a_avx512(t, x, ld, n, k, panels);
    else if (side == 'V') pack_gemv_avx512(t, x, ld, k, n, panels);
    else pack_all_b_avx512(t, x, ld, k, n, panels);
    break;
  case NIMBLE_SGEMM_ISA_AVX2:
    if (side == 'A') pack_all_a_avx2(t, x, ld, n, k, panels);
    else if (side == 'V') pack_gemv_avx2(t, x, ld, k, n, panels);
    else pack_all_b_avx2(t, x, ld, k, n, panels);
    break;
#endif
  default:
    if (side == 'A') pack_all_a_portable(t, x, ld, n, k, panels);
    else if (side == 'V') pack_gemv_portable(t, x, ld, k, n, panels);
    else pack_all_b_portable(t, x, ld, k, n, panels);
    break;
  }
  entries[num_entries++] = (packed_entry){side, x, ld, k, n, t, isa, panels, floats};
  packed_bytes += floats * sizeof(float);
  out = panels;
done:
  return out;
}

static const float *packed_constant(nimble_sgemm_isa isa, int side, int32_t t, const float *x, int64_t ld,
                                    int64_t k, int64_t n) {
  seen_entry key = {gen_now(), side, t, isa, x, NULL, ld, k, n};
  const seen_entry *e = seen_find(&key);
  if (e) return e->out;
  pthread_mutex_lock(&const_mu);
  const float *out = packed_constant_locked(isa, side, t, x, ld, k, n);
  pthread_mutex_unlock(&const_mu);
  seen_note(&key, out);
  return out;
}

/* ---- The entry points ------------------------------------------------------ */

/* C = beta * C over m x n, beta == 0 clearing. */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
  if (beta == 1.0f) return;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/* The definition, for when no workspace can be had. */
static void plain_sgemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                        int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float acc = 0;
      for (int64_t p = 0; p < k; p++) acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      float *cij = &c[i * ldc + j];
      *cij = alpha * acc + (beta == 0.0f ? 0.0f : beta * *cij);
    }
}

int nimble_sgemm_own_isa(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc) {
  return nimble_sgemm_own_isa_epi(isa, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

/* Every own product: `given_a` is op(A)'s panels made by the caller
 * (nimble_sgemm_own_pack_a), or NULL. One function calls the variants'
 * gemm, with nothing constant to propagate: a second caller passing
 * constants had GCC clone the micro-kernels (the runtime library 318 ->
 * 404 KB, past its limit, test_runtime_library_size). */
static __attribute__((noinline, noclone)) void direct_product(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b,
                                                              int64_t m, int64_t n, int64_t k, float alpha,
                                                              const float *a, int64_t lda, const float *b, int64_t ldb,
                                                              float beta, float *c, int64_t ldc,
                                                              const nimble_sgemm_epi *epi, const float *given_a) {
  size_t need;
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: need = workspace_avx512(m, n, k); break;
  case NIMBLE_SGEMM_ISA_AVX2: need = workspace_avx2(m, n, k); break;
#endif
  default: need = workspace_portable(m, n, k); break;
  }
  /* Only a transposed B is worth keeping packed: one stored [k, n] is read
   * in place. Matrix-vector shapes and narrow products never pack it. */
  const float *bpk = NULL, *apk = NULL;
  if (trans_b && m > 1 && n >= 16) bpk = packed_constant(isa, 'B', trans_b, b, ldb, k, n);
  /* A matrix-vector product's constant matrix is, in its own layout
   * (pack_gemv): read in place, either way it is stored, the product walks
   * it in pieces a row apart. */
  if (m == 1 && n >= 16) bpk = packed_constant(isa, 'V', trans_b, b, ldb, k, n);
  /* A constant A (a convolution's weights) is worth keeping packed too:
   * it is repacked for every block of columns, and its first read misses
   * the cache (on mobilenet_v2 that copy was a quarter of the sgemm time). */
  if (given_a) apk = given_a;
  else if (m > 1 && n > 1 && !(trans_b && !trans_a && n < 16)) apk = packed_constant(isa, 'A', trans_a, a, lda, k, m);
  float *ws = nimble_thread_buffer(NIMBLE_THREAD_BUFFER_SGEMM, need);
  if (!ws) {
    plain_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (epi) nimble_sgemm_apply_epi(m, n, c, ldc, epi);
    return;
  }
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512:
    gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws, apk, bpk, epi);
    break;
  case NIMBLE_SGEMM_ISA_AVX2:
    gemm_avx2(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws, apk, bpk, epi);
    break;
#endif
  default: gemm_portable(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ws, apk, bpk, epi); break;
  }
}

/* Whether C^T = op(B)^T op(A)^T computes clearly less padding than C
 * (10 %): few columns that leave the last column panel half empty (a 7x7
 * image's 49 pixels: 64 computed by 32-column tiles, 50 by 14-row ones)
 * against many rows (the output channels). Columns up to 96, so the
 * transposed result stays small; x86 only, where the 8x8 transposes that
 * write C back are (mobilenet_v2's 960->320 product on 7x7: 190 -> 152
 * us before the transpose). */
#define TRANSPOSED_MAX_FLOATS ((int64_t)1 << 20) /* C^T's buffer: 4 MB a thread at most */

static int transposed_pays(nimble_sgemm_isa isa, int64_t m, int64_t n) {
  if (n < 8 || n > 96 || m < 16) return 0;
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: return tile_share_avx512(n, m) > 1.1 * tile_share_avx512(m, n);
  case NIMBLE_SGEMM_ISA_AVX2: return tile_share_avx2(n, m) > 1.1 * tile_share_avx2(m, n);
#endif
  default: return 0;
  }
}

/* Whether the variant's gemm computes the product by dots_rows (a
 * transposed B of fewer rows than its vector lanes). That reads A in
 * place, where C^T packed A transposed on every call (mlp's 64x10x512: 14
 * us against 5; 256x12x1024 116 against 51). */
static int few_dots(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t n) {
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: return dots_take_avx512(trans_a, trans_b, n);
  case NIMBLE_SGEMM_ISA_AVX2: return dots_take_avx2(trans_a, trans_b, n);
#endif
  default: return dots_take_portable(trans_a, trans_b, n);
  }
}

static int own_product(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                       int64_t ldc, const nimble_sgemm_epi *epi, const float *given_a) {
  if (!nimble_sgemm_isa_available(isa)) return 0;
  if (m <= 0 || n <= 0) return 1;
  if (k <= 0 || alpha == 0.0f) {
    scale_c(m, n, beta, c, ldc);
    if (epi) nimble_sgemm_apply_epi(m, n, c, ldc, epi);
    return 1;
  }
  /* C^T into a per-thread buffer (op(B)^T is op(B) read the other way,
   * op(A)^T a constant A packed once as a transposed B), then written
   * back transposed and the epilogue as a pass over C, now in cache. */
  float *t = NULL;
  int64_t ldt = (m + 15) / 16 * 16;
  if (!given_a && beta == 0.0f && n * ldt <= TRANSPOSED_MAX_FLOATS && !few_dots(isa, trans_a, trans_b, n) &&
      transposed_pays(isa, m, n))
    t = nimble_thread_buffer(NIMBLE_THREAD_BUFFER_TRANSPOSED, (size_t)(n * ldt));
  if (!t) {
    direct_product(isa, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi, given_a);
    return 1;
  }
  direct_product(isa, !trans_b, !trans_a, n, m, k, alpha, b, ldb, a, lda, 0.0f, t, ldt, NULL, NULL);
#if SG_HAVE_X86
  store_transposed_avx2(m, n, t, ldt, c, ldc); /* transposed_pays is 0 on other CPUs */
#endif
  if (epi) nimble_sgemm_apply_epi(m, n, c, ldc, epi);
  return 1;
}

size_t nimble_sgemm_own_packed_a_size(nimble_sgemm_isa isa, int64_t m, int64_t k) {
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: return packed_size_a_avx512(m, k);
  case NIMBLE_SGEMM_ISA_AVX2: return packed_size_a_avx2(m, k);
#endif
  default: return packed_size_a_portable(m, k);
  }
}

void nimble_sgemm_own_pack_a(nimble_sgemm_isa isa, const float *a, int64_t lda, int64_t m, int64_t k, float *dst) {
  switch (isa) {
#if SG_HAVE_X86
  case NIMBLE_SGEMM_ISA_AVX512: pack_all_a_avx512(0, a, lda, m, k, dst); return;
  case NIMBLE_SGEMM_ISA_AVX2: pack_all_a_avx2(0, a, lda, m, k, dst); return;
#endif
  default: pack_all_a_portable(0, a, lda, m, k, dst); return;
  }
}

int nimble_sgemm_own_isa_epi(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc, const nimble_sgemm_epi *epi) {
  return own_product(isa, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi, NULL);
}

int nimble_sgemm_own_isa_packed_a(nimble_sgemm_isa isa, int64_t m, int64_t n, int64_t k, const float *a,
                                  int64_t lda, const float *apk, const float *b, int64_t ldb, float beta, float *c,
                                  int64_t ldc) {
  return own_product(isa, 0, 0, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, NULL, apk);
}

void nimble_sgemm_own_epi(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc, const nimble_sgemm_epi *epi) {
  (void)nimble_sgemm_own_isa_epi(nimble_sgemm_own_best_isa(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                                 beta, c, ldc, epi);
}

void nimble_sgemm_own(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                      int64_t ldc) {
  (void)nimble_sgemm_own_isa(nimble_sgemm_own_best_isa(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                             beta, c, ldc);
}
