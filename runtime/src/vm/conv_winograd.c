/* Winograd F(2x2, 3x3) convolutions. See conv_winograd.h.
 *
 * With d a 4x4 block of one input channel, g a 3x3 filter and
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 * the 2x2 output block is A^T [(G g G^T) .* (B^T d B)] A. Summed over the
 * input channels, each of the 16 positions xi of the 4x4 products is a
 * matrix product: M[xi] (k x tiles) = U[xi] (k x c) * V[xi] (c x tiles),
 * U the transformed filters (made once per constant weight tensor, with
 * their sgemm panels), V the transformed input blocks. The own sgemm does
 * the 16 products per block of tiles; the transforms are additions.
 *
 * Tiles go by blocks of whole tile rows, a block's V and M (16 * (c + k)
 * floats a tile) about 1.5 MB: on the build machine (1 MB of L2 a core)
 * blocks of 0.4, 0.8, 1.3 and 2 MB took 407, 331, 260 and 250 us for
 * 64->256 channels on 13x13 and 1124, 1008, 869, 869 us on 27x27 (the
 * products' panels are wider). Blocks are cut into one band per thread of
 * the calling VM's pool. On one thread blocks go up to 3 MB, of a height
 * whose tiles fill the products' vectors (block_rows): squeezenet1_0's
 * 32->128 on 55x55 890 -> 785 us, 64->256 on 27x27 815 -> 705; at two
 * threads the same choice gained on those layers and lost as much on the
 * others in the model, and is not made. */
#include "vm/conv_winograd.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/sgemm_own.h"
#include "vm/sgemm_threads.h"
#include "vm/thread_buffer.h"
#include "vm/thread_pool.h"

enum { XI = 16 };                    /* positions of a 4x4 block */
enum { WINO_MAX_PARTS = 8 };         /* tasks by output channels, at most */
#define BLOCK_FLOATS ((int64_t)393216)     /* a block's V and M: 1.5 MB */
#define ONE_THREAD_FLOATS ((int64_t)786432) /* on one thread, at most 3 MB */

/* ---- Transformed weights ----------------------------------------------------- */

typedef struct wino_weights {
  const float *wt; /* the key: the weights, as the kernel passed them, and the parts */
  int64_t k, c;
  nimble_sgemm_isa isa;
  int64_t parts;                           /* output channels cut in parts */
  int64_t bounds[WINO_MAX_PARTS + 1];      /* part p: rows [bounds[p], bounds[p + 1]) */
  size_t poff[WINO_MAX_PARTS];             /* its panels from panels + xi * psize */
  float *u;      /* U[xi] at u + xi * k * c, k x c row-major */
  float *panels; /* U[xi]'s sgemm panels at panels + xi * psize, part by part */
  size_t psize;
} wino_weights;

/* U = G g G^T for every (output, input) channel pair. */
__attribute__((cold)) static void transform_weights(const float *wt, int64_t k, int64_t c, float *u) {
  size_t kc = (size_t)(k * c);
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t cc = 0; cc < c; cc++) {
      const float *g = wt + (kk * c + cc) * 9;
      float t[4][3];
      for (int j = 0; j < 3; j++) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
      }
      float *dst = u + kk * c + cc;
      for (int i = 0; i < 4; i++) {
        dst[(i * 4 + 0) * kc] = t[i][0];
        dst[(i * 4 + 1) * kc] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        dst[(i * 4 + 2) * kc] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        dst[(i * 4 + 3) * kc] = t[i][2];
      }
    }
}

static void weights_free(wino_weights *ww) {
  if (!ww) return;
  free(ww->u);
  free(ww->panels);
  free(ww);
}

/* The transform and its panels, each part's rows (cut evenly, at multiples
 * of 8 rows) packed as a product of their own; NULL when memory runs out. */
static wino_weights *weights_make(const float *wt, int64_t k, int64_t c, nimble_sgemm_isa isa, int64_t parts) {
  wino_weights *ww = calloc(1, sizeof *ww);
  if (!ww) return NULL;
  ww->wt = wt;
  ww->k = k;
  ww->c = c;
  ww->isa = isa;
  ww->parts = parts;
  for (int64_t p = 0; p < parts; p++) ww->bounds[p] = p ? (k * p / parts + 4) / 8 * 8 : 0;
  ww->bounds[parts] = k;
  for (int64_t p = 0; p < parts; p++) {
    ww->poff[p] = ww->psize;
    ww->psize += (nimble_sgemm_own_packed_a_size(isa, ww->bounds[p + 1] - ww->bounds[p], c) + 15) / 16 * 16;
  }
  size_t ubytes = (size_t)XI * (size_t)(k * c) * sizeof(float);
  ww->u = aligned_alloc(64, (ubytes + 63) / 64 * 64);
  ww->panels = aligned_alloc(64, (size_t)XI * ww->psize * sizeof(float));
  if (!ww->u || !ww->panels) {
    weights_free(ww);
    return NULL;
  }
  transform_weights(wt, k, c, ww->u);
  for (int xi = 0; xi < XI; xi++)
    for (int64_t p = 0; p < parts; p++)
      nimble_sgemm_own_pack_a(isa, ww->u + (size_t)xi * (size_t)(k * c) + (size_t)(ww->bounds[p] * c), c,
                              ww->bounds[p + 1] - ww->bounds[p], c, ww->panels + xi * ww->psize + ww->poff[p]);
  return ww;
}

/* Weights inside registered constants, transformed once: a process-wide
 * list (a few entries per model), dropped by nimble_conv_winograd_forget. */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static wino_weights **cache;
static size_t cache_len, cache_cap;

static wino_weights *cached_weights(const float *wt, int64_t k, int64_t c, nimble_sgemm_isa isa, int64_t parts) {
  wino_weights *ww = NULL;
  pthread_mutex_lock(&cache_mu);
  for (size_t i = 0; i < cache_len; i++)
    if (cache[i]->wt == wt && cache[i]->k == k && cache[i]->c == c && cache[i]->isa == isa &&
        cache[i]->parts == parts) {
      ww = cache[i];
      goto done;
    }
  if (cache_len == cache_cap) {
    size_t cap = cache_cap ? cache_cap * 2 : 16;
    wino_weights **r = realloc(cache, cap * sizeof *r);
    if (!r) goto done;
    cache = r;
    cache_cap = cap;
  }
  /* Made under the lock: once per weight tensor and process. */
  ww = weights_make(wt, k, c, isa, parts);
  if (ww) cache[cache_len++] = ww;
done:
  pthread_mutex_unlock(&cache_mu);
  return ww;
}

void nimble_conv_winograd_forget(const void *base, size_t bytes) {
  if (!base || !bytes) return;
  const char *lo = base, *hi = lo + bytes;
  pthread_mutex_lock(&cache_mu);
  for (size_t i = 0; i < cache_len;) {
    const char *p = (const char *)cache[i]->wt;
    if (p >= lo && p < hi) {
      weights_free(cache[i]);
      cache[i] = cache[--cache_len];
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&cache_mu);
}

/* ---- The direct computation (no memory for the buffers) ---------------------- */

static float epilogue_at(const nimble_sgemm_epilogue_t *epi, int64_t kk, int64_t p, float v) {
  if (!epi) return v;
  if (epi->row_bias) v += epi->row_bias[kk];
  if (epi->residual) v += epi->residual[kk * epi->ldr + p];
  /* NaN compares false both ways and stays. */
  if (v < epi->lo) v = epi->lo;
  if (v > epi->hi) v = epi->hi;
  return v;
}

__attribute__((cold)) static void direct_conv(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_t,
                                              int64_t pad_l, int64_t oh, int64_t ow, const float *x, const float *wt,
                                              float *y, const nimble_sgemm_epilogue_t *epi) {
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        float acc = 0.0f;
        for (int64_t cc = 0; cc < c; cc++)
          for (int u = 0; u < 3; u++) {
            int64_t r = i - pad_t + u;
            if (r < 0 || r >= h) continue;
            for (int v = 0; v < 3; v++) {
              int64_t q = j - pad_l + v;
              if (q >= 0 && q < w) acc += wt[((kk * c + cc) * 3 + u) * 3 + v] * x[(cc * h + r) * w + q];
            }
          }
        y[(kk * oh + i) * ow + j] = epilogue_at(epi, kk, i * ow + j, acc);
      }
}

/* ---- Blocks of tiles --------------------------------------------------------- */

typedef struct wino_call {
  int64_t c, h, w, k, pad_t, pad_l, oh, ow;
  const float *x;
  float *y;
  const nimble_sgemm_epilogue_t *epi;
  const wino_weights *ww;
  int64_t tw, th;     /* tiles across and down */
  int64_t rows;       /* tile rows per block */
  int64_t ldt;        /* a V or M row: rows * tw rounded up to 16 floats */
  int64_t vs, ms;     /* V[xi] and M[xi] apart: c * ldt, k * ldt and a line */
  int64_t blocks;     /* ceil(th / rows) */
  int64_t per_slot;   /* blocks per task */
  size_t slot_floats; /* one task's buffers */
  float *buf;         /* slot s at buf + s * slot_floats */
} wino_call;

/* The transforms' loops run along a tile row with unit strides; GCC
 * widens them for the best instruction set the CPU has (the runtime is
 * built for the baseline: SSE2 on x86_64). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
/* Not under ThreadSanitizer: the clones' ifunc resolvers run while the
 * dynamic linker relocates, before TSan's runtime is up, and every program
 * linking the runtime crashed at start. */
#define WINO_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WINO_CLONES
#endif

/* The transform B^T d B of every tile's 4x4 input block for one channel:
 * element (i, j) of tile t is d[((i & 1) * 4 + j) * ps + (i >> 1) * rs + t]
 * (input_transform's planes), so all 16 are unit-stride streams as long as
 * the block's tiles; the 16 rows of the transform go to v + xi * cs. One
 * loop over all the block's tiles: tile rows are short (7 to 28 tiles on
 * squeezenet's images, 8 on cnn's), and a loop per tile row ran mostly in
 * its scalar remainder. */
WINO_CLONES static void input_tiles(int64_t tiles, const float *d, int64_t ps, int64_t rs, float *v, int64_t cs) {
  const float *restrict d0 = d, *restrict d1 = d + ps, *restrict d2 = d + 2 * ps, *restrict d3 = d + 3 * ps;
  const float *restrict d4 = d0 + 4 * ps, *restrict d5 = d1 + 4 * ps, *restrict d6 = d2 + 4 * ps,
                    *restrict d7 = d3 + 4 * ps;
  const float *restrict d8 = d0 + rs, *restrict d9 = d1 + rs, *restrict d10 = d2 + rs, *restrict d11 = d3 + rs;
  const float *restrict d12 = d4 + rs, *restrict d13 = d5 + rs, *restrict d14 = d6 + rs, *restrict d15 = d7 + rs;
  float *restrict v0 = v, *restrict v1 = v + cs, *restrict v2 = v + 2 * cs, *restrict v3 = v + 3 * cs;
  float *restrict v4 = v + 4 * cs, *restrict v5 = v + 5 * cs, *restrict v6 = v + 6 * cs, *restrict v7 = v + 7 * cs;
  float *restrict v8 = v + 8 * cs, *restrict v9 = v + 9 * cs, *restrict v10 = v + 10 * cs, *restrict v11 = v + 11 * cs;
  float *restrict v12 = v + 12 * cs, *restrict v13 = v + 13 * cs, *restrict v14 = v + 14 * cs,
                  *restrict v15 = v + 15 * cs;
  /* The rows never overlap (restrict on locals does not tell GCC). */
#pragma GCC ivdep
  for (int64_t t = 0; t < tiles; t++) {
    /* d B on each row (columns 0-2, 1+2, 2-1, 1-3), then B^T on the rows. */
    float a0 = d0[t] - d2[t], a1 = d1[t] + d2[t], a2 = d2[t] - d1[t], a3 = d1[t] - d3[t];
    float b0 = d4[t] - d6[t], b1 = d5[t] + d6[t], b2 = d6[t] - d5[t], b3 = d5[t] - d7[t];
    float c0 = d8[t] - d10[t], c1 = d9[t] + d10[t], c2 = d10[t] - d9[t], c3 = d9[t] - d11[t];
    float e0 = d12[t] - d14[t], e1 = d13[t] + d14[t], e2 = d14[t] - d13[t], e3 = d13[t] - d15[t];
    v0[t] = a0 - c0, v1[t] = a1 - c1, v2[t] = a2 - c2, v3[t] = a3 - c3;
    v4[t] = b0 + c0, v5[t] = b1 + c1, v6[t] = b2 + c2, v7[t] = b3 + c3;
    v8[t] = c0 - b0, v9[t] = c1 - b1, v10[t] = c2 - b2, v11[t] = c3 - b3;
    v12[t] = b0 - e0, v13[t] = b1 - e1, v14[t] = b2 - e2, v15[t] = b3 - e3;
  }
}

/* Columns 2t + j (j < 4) of a padded input row xr into r0..r3 for the
 * tiles t < n. */
WINO_CLONES static void gather_row(int64_t n, const float *xr, float *r0, float *r1, float *r2, float *r3) {
#pragma GCC ivdep
  for (int64_t t = 0; t < n; t++) {
    r0[t] = xr[2 * t];
    r1[t] = xr[2 * t + 1];
    r2[t] = xr[2 * t + 2];
    r3[t] = xr[2 * t + 3];
  }
}

/* An output row from its tiles' outputs: columns 2t from ya[t], 2t + 1
 * from yb[t], then + the residual row (NULL: none) and the clamp (NaN
 * kept, comparing false both ways). */
WINO_CLONES static void finish_row(int64_t n, const float *ya, const float *yb, const float *res, float lo, float hi,
                                   float *dst) {
  int64_t half = n / 2;
#pragma GCC ivdep
  for (int64_t t = 0; t < half; t++) {
    float a = ya[t] + (res ? res[2 * t] : 0.0f), b = yb[t] + (res ? res[2 * t + 1] : 0.0f);
    a = a < lo ? lo : a;
    b = b < lo ? lo : b;
    dst[2 * t] = a > hi ? hi : a;
    dst[2 * t + 1] = b > hi ? hi : b;
  }
  if (n & 1) {
    float a = ya[half] + (res ? res[n - 1] : 0.0f);
    a = a < lo ? lo : a;
    dst[n - 1] = a > hi ? hi : a;
  }
}

/* V[xi][cc][t] for the block's tiles t (tile rows [ty0, ty1)). Per
 * channel, each padded image row the block reads (2 * rows + 2 of them)
 * is gathered once into 8 planes: padded row 2q + p's columns 2t + j (the
 * j-th column of tile t's block) at d[(p * 4 + j) * ps + q * tw + t], ps =
 * (rows + 1) * tw. Tile row ty's block row i is then padded row
 * 2 * ty + i: row ty + i / 2 of the planes of parity i % 2, so each of
 * the 16 block elements runs contiguously over all the block's tiles
 * (input_tiles). The gather per tile row and block row it replaced read
 * each padded row twice (cnn's 16x16 layer: 13 of its 43 us). d: room for
 * 16 * ldt floats, at least 8 * (rows + 1) * tw. A row goes through xp,
 * the 2 * tw + 2 columns of a padded row whose zeros (the columns outside
 * the image) are written once per call, so every tile gathers the same
 * way: the tiles at the image's edges, gathered a column at a time with
 * bounds tests, had taken more time than the rest (cnn's 8x8 layer, 2 of
 * 4 tiles a row). */
static void input_transform(const wino_call *q, int64_t ty0, int64_t ty1, float *V, float *d, float *xp) {
  const int64_t tw = q->tw, ldt = q->ldt, cs = q->vs, tiles = (ty1 - ty0) * tw;
  const int64_t ps = (ty1 - ty0 + 1) * tw, nrows = 2 * (ty1 - ty0) + 2;
  /* The image's columns [0, n_in) land at xp[pad_l, pad_l + n_in). */
  const int64_t wp = 2 * tw + 2, n_in = q->w < wp - q->pad_l ? q->w : wp - q->pad_l;
  memset(xp, 0, sizeof(float) * (size_t)wp);
  for (int64_t cc = 0; cc < q->c; cc++) {
    const float *xc = q->x + cc * q->h * q->w;
    for (int64_t pr = 0; pr < nrows; pr++) {
      float *r0 = d + ((pr & 1) * 4) * ps + (pr >> 1) * tw, *r1 = r0 + ps, *r2 = r1 + ps, *r3 = r2 + ps;
      int64_t r = 2 * ty0 + pr - q->pad_t; /* the image row */
      if (r < 0 || r >= q->h) {
        for (int64_t t = 0; t < tw; t++) r0[t] = r1[t] = r2[t] = r3[t] = 0.0f;
        continue;
      }
      if (n_in > 0) memcpy(xp + q->pad_l, xc + r * q->w, sizeof(float) * (size_t)n_in);
      gather_row(tw, xp, r0, r1, r2, r3);
    }
    input_tiles(tiles, d, ps, tw, V + cc * ldt, cs);
  }
}

/* Every tile's 2x2 outputs for one output channel: the 16 rows m + xi *
 * ks into y + (2i + j) * ld (output (i, j) of tile t at [t]), bias added. */
WINO_CLONES static void output_tiles(int64_t tiles, const float *m, int64_t ks, float bias, float *y, int64_t ld) {
  const float *restrict m0 = m, *restrict m1 = m + ks, *restrict m2 = m + 2 * ks, *restrict m3 = m + 3 * ks;
  const float *restrict m4 = m + 4 * ks, *restrict m5 = m + 5 * ks, *restrict m6 = m + 6 * ks, *restrict m7 = m + 7 * ks;
  const float *restrict m8 = m + 8 * ks, *restrict m9 = m + 9 * ks, *restrict m10 = m + 10 * ks,
                    *restrict m11 = m + 11 * ks;
  const float *restrict m12 = m + 12 * ks, *restrict m13 = m + 13 * ks, *restrict m14 = m + 14 * ks,
                    *restrict m15 = m + 15 * ks;
  float *restrict y00 = y, *restrict y01 = y + ld, *restrict y10 = y + 2 * ld, *restrict y11 = y + 3 * ld;
#pragma GCC ivdep
  for (int64_t t = 0; t < tiles; t++) {
    /* A^T M: rows 0 + 1 + 2 and 1 - 2 - 3; then the same on the columns. */
    float r00 = m0[t] + m4[t] + m8[t], r01 = m1[t] + m5[t] + m9[t], r02 = m2[t] + m6[t] + m10[t],
          r03 = m3[t] + m7[t] + m11[t];
    float r10 = m4[t] - m8[t] - m12[t], r11 = m5[t] - m9[t] - m13[t], r12 = m6[t] - m10[t] - m14[t],
          r13 = m7[t] - m11[t] - m15[t];
    y00[t] = r00 + r01 + r02 + bias;
    y01[t] = r01 - r02 - r03 + bias;
    y10[t] = r10 + r11 + r12 + bias;
    y11[t] = r11 - r12 - r13 + bias;
  }
}

/* y's rows [2*ty0, 2*ty1) of channels [k0, k1) from M, with the
 * epilogue. yt: room for 4 * ldt floats (output_tiles). */
static void output_transform(const wino_call *q, int64_t ty0, int64_t ty1, int64_t k0, int64_t k1, const float *M,
                             float *yt) {
  const int64_t tw = q->tw, ldt = q->ldt, ks = q->ms, plane = q->oh * q->ow, tiles = (ty1 - ty0) * tw;
  const nimble_sgemm_epilogue_t *epi = q->epi;
  float lo = epi ? epi->lo : -INFINITY, hi = epi ? epi->hi : INFINITY;
  for (int64_t kk = k0; kk < k1; kk++) {
    float bias = epi && epi->row_bias ? epi->row_bias[kk] : 0.0f;
    const float *res = epi && epi->residual ? epi->residual + kk * epi->ldr : NULL;
    output_tiles(tiles, M + kk * ldt, ks, bias, yt, ldt);
    for (int64_t ty = ty0; ty < ty1; ty++)
      for (int i = 0; i < 2; i++) {
        int64_t row = 2 * ty + i;
        if (row >= q->oh) break;
        const float *ya = yt + (2 * i) * ldt + (ty - ty0) * tw, *yb = ya + ldt;
        float *dst = q->y + kk * plane + row * q->ow;
        finish_row(q->ow, ya, yb, res ? res + row * q->ow : NULL, lo, hi, dst);
      }
  }
}

/* Part p's output channels of block b (ww->parts of them). */
static void run_block(const wino_call *q, int64_t b, int64_t p, float *slot) {
  int64_t ty0 = b * q->rows, ty1 = ty0 + q->rows < q->th ? ty0 + q->rows : q->th;
  int64_t tiles = (ty1 - ty0) * q->tw;
  const wino_weights *ww = q->ww;
  const int64_t k0 = ww->bounds[p], k1 = ww->bounds[p + 1];
  float *V = slot, *M = V + XI * q->vs, *scratch = M + XI * q->ms;
  input_transform(q, ty0, ty1, V, scratch, scratch + 16 * q->ldt);
  size_t kc = (size_t)(q->k * q->c), at = (size_t)(k0 * q->c);
  for (int xi = 0; xi < XI; xi++)
    (void)nimble_sgemm_own_isa_packed_a(ww->isa, k1 - k0, tiles, q->c, ww->u + xi * kc + at, q->c,
                                        ww->panels + xi * ww->psize + ww->poff[p], V + xi * q->vs, q->ldt, 0.0f,
                                        M + xi * q->ms + k0 * q->ldt, q->ldt);
  output_transform(q, ty0, ty1, k0, k1, M, scratch);
}

static int32_t band_task(int64_t s, int64_t n_tasks, void *closure) {
  (void)n_tasks;
  const wino_call *q = closure;
  float *slot = q->buf + s * q->slot_floats;
  if (q->ww->parts > 1) {
    for (int64_t b = 0; b < q->blocks; b++) run_block(q, b, s, slot);
    return 0;
  }
  for (int64_t b = s * q->per_slot; b < (s + 1) * q->per_slot && b < q->blocks; b++) run_block(q, b, 0, slot);
  return 0;
}

/* The most tile rows (1 to th) whose V and M fit in `floats`. */
static int64_t rows_within(int64_t floats, int64_t c, int64_t k, int64_t tw, int64_t th) {
  int64_t rows = floats / (XI * (c + k)) / tw;
  return rows < 1 ? 1 : rows > th ? th : rows;
}

/* Tile rows per block on one thread, at most max_rows: the least
 * estimated time, counting a block's tiles 5 each, 6 where they are not a
 * multiple of 16 (the products' vectors run along the tiles: blocks of
 * 140 tiles took 20 % longer than of 112 or 224 on squeezenet1_0's 55x55
 * layers), and 40 a block, over the fewest blocks max_rows allows and one
 * more; ties to the higher block. */
static int64_t block_cost(int64_t tiles) { return tiles * (tiles % 16 ? 6 : 5) + 40; }

static int64_t block_rows(int64_t th, int64_t tw, int64_t max_rows) {
  int64_t best = max_rows, best_cost = INT64_MAX, nb_min = (th + max_rows - 1) / max_rows;
  for (int64_t r = max_rows; r >= 1 && (th + r - 1) / r <= nb_min + 1; r--) {
    int64_t nb = (th + r - 1) / r;
    int64_t cost = (nb - 1) * block_cost(r * tw) + block_cost((th - (nb - 1) * r) * tw);
    if (cost < best_cost) best = r, best_cost = cost;
  }
  return best;
}

/* ---- The entry point ----------------------------------------------------------- */

void nimble_conv3x3_winograd(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_t, int64_t pad_l, int64_t oh,
                             int64_t ow, const float *x, const float *wt, float *y, const nimble_sgemm_epilogue_t *epi) {
  if (k <= 0 || oh <= 0 || ow <= 0) return;
  if (c <= 0 || h <= 0 || w <= 0) {
    direct_conv(c, h, w, k, pad_t, pad_l, oh, ow, x, wt, y, epi); /* the epilogue on zeros */
    return;
  }
  const int64_t tw = (ow + 1) / 2, th = (oh + 1) / 2;
  nimble_thread_pool *pool = nimble_sgemm_threads_pool();
  int64_t threads = pool && !nimble_thread_pool_in_task() ? (int64_t)nimble_thread_pool_size(pool) : 1;
  /* At least 64 tiles a thread: cnn's 16x16 layer (64 tiles) took 35 us
   * on one thread and 43 on two. */
  int64_t by_tiles = th * tw / 64 > 1 ? th * tw / 64 : 1, parts = 1;
  /* Too few tiles for two threads, but channels enough (128 a part):
   * tasks by output channels, each transforming the whole input (a few
   * microseconds) and computing its part's products from U's panels
   * packed part by part. squeezenet1_0's last expansion (64 -> 256
   * channels on 13x13, 49 tiles) had run on one thread. cnn's 64- and
   * 128-channel layers in halves: 32->64 on 16x16 alone 34.5 -> 24 us at
   * two threads, but in the model the next max pool read the half the
   * other core wrote (2.9 -> 13-17 us) and the model gained nothing. */
  if (by_tiles == 1 && threads > 1 && k >= 256) {
    parts = threads < WINO_MAX_PARTS ? threads : WINO_MAX_PARTS;
    if (parts > k / 128) parts = k / 128;
  }
  if (threads > by_tiles) threads = by_tiles;
  int64_t rows = rows_within(threads == 1 ? ONE_THREAD_FLOATS : BLOCK_FLOATS, c, k, tw, th);
  if (threads == 1) rows = block_rows(th, tw, rows);
  nimble_sgemm_isa isa = nimble_sgemm_own_best_isa();
  wino_weights *own = NULL, *ww = NULL;
  if (nimble_sgemm_own_is_constant(0, wt, c * 9, k, c * 9)) ww = cached_weights(wt, k, c, isa, parts);
  else ww = own = weights_make(wt, k, c, isa, parts);
  if (!ww) {
    direct_conv(c, h, w, k, pad_t, pad_l, oh, ow, x, wt, y, epi);
    return;
  }
  wino_call q = {c, h, w, k, pad_t, pad_l, oh, ow, x, y, epi, ww, tw, th, rows, 0, 0, 0, 0, 0};
  /* As many blocks as a multiple of the threads, of as even a height as
   * the tile rows allow: with 3 blocks for 2 threads, one thread had twice
   * the other's work and the second core waited most of the call. */
  if (threads > 1) {
    int64_t nb = (q.th + q.rows - 1) / q.rows;
    nb = (nb + threads - 1) / threads * threads;
    q.rows = (q.th + nb - 1) / nb;
  }
  q.ldt = (q.rows * q.tw + 15) / 16 * 16;
  q.blocks = (q.th + q.rows - 1) / q.rows;
  int64_t slots = threads < q.blocks ? threads : q.blocks;
  q.per_slot = (q.blocks + slots - 1) / slots;
  slots = (q.blocks + q.per_slot - 1) / q.per_slot;
  if (parts > 1) slots = parts;
  /* One cache line between the 16 planes of V and of M: at c * ldt
   * floats apart (a multiple of 4 KB on squeezenet's layers) a tile's 16
   * values fell into one L1 set, and the transforms took longer than the
   * products. */
  q.vs = c * q.ldt + 16;
  q.ms = k * q.ldt + 16;
  q.slot_floats = (size_t)(XI * (q.vs + q.ms) + 16 * q.ldt + 2 * q.tw + 2);
  q.slot_floats = (q.slot_floats + 15) / 16 * 16;
  q.buf = nimble_thread_buffer(NIMBLE_THREAD_BUFFER_WINOGRAD, q.slot_floats * (size_t)slots);
  if (!q.buf) {
    direct_conv(c, h, w, k, pad_t, pad_l, oh, ow, x, wt, y, epi);
  } else if (slots > 1) {
    (void)nimble_thread_pool_run(pool, slots, band_task, &q);
  } else {
    for (int64_t b = 0; b < q.blocks; b++) run_block(&q, b, 0, q.buf);
  }
  weights_free(own);
}
