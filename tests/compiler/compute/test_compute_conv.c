/* conv2d and pooling kernels (compute/conv.c: their own loop nests into
 * the output, the epilogue in place; 1x1 convolutions through env->sgemm)
 * against plain C loops written here, over strides, asymmetric padding,
 * dilation, groups (depthwise), 1x1, kernels wider than the unrolled
 * limit, images smaller than the window, batches > 1 and symbolic
 * spatial extents, each with and without the runtime's sgemm and with
 * tasks on two threads. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/codegen.h"
#include "nimble/passes.h"
#include "nimble_test.h"

typedef struct conv_case {
  int64_t N, C, H, W, O, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw, g;
  int bias;     /* 0 none, 1 conv2d's third input, 2 add of an (O,1,1) tensor */
  int epilogue; /* 0 none, 1 relu, 2 clip [0, 6] */
  int symbolic; /* x annotated (?, C, h, w) */
  int residual; /* 1: a tensor of the output's shape added after the bias (before relu/clip) */
} conv_case;

static const conv_case kConv[] = {
    /* cnn-like 3x3 pad 1 with bias + relu */
    {1, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1},
    /* 1x1 pointwise (sgemm path), with bias input, batch 2, clip epilogue */
    {2, 16, 5, 7, 12, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 2, 0},
    /* 1x1 without bias, symbolic spatial extents */
    {1, 5, 3, 3, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1},
    /* 1x1 stride 2 (not one row; no sgemm) */
    {1, 6, 7, 9, 4, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0},
    /* depthwise 3x3 stride 2 pad 1 (mobilenet) with bias and clip */
    {1, 8, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8, 1, 2, 0},
    /* depthwise 3x3 stride 1, batch 2 */
    {2, 6, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 1, 1, 1},
    /* 7x7 stride 2 pad 3 (squeezenet's first layer shape class) */
    {1, 3, 13, 15, 8, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, 0},
    /* dilation 2, asymmetric pads, strides (2, 1), 3x5 kernel, 2 groups of 3 outputs */
    {1, 4, 11, 12, 6, 3, 5, 2, 1, 0, 1, 2, 0, 2, 2, 2, 1, 0, 0},
    /* 3x3, unit strides, one group, 8+ inputs and 16+ outputs on 64+
     * pixels: the runtime's conv3x3 (Winograd), the epilogue with it:
     * odd sizes with bias and relu; batch 2 without padding, clip and a
     * residual; batch 2 symbolic, clip; asymmetric pads, nothing after
     * it; 36 pixels (the product instead) */
    {1, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    {2, 12, 10, 10, 24, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 2, 0, 1},
    {2, 12, 12, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 0},
    {1, 16, 7, 13, 32, 3, 3, 1, 1, 2, 1, 0, 1, 1, 1, 1, 0, 0, 0},
    {1, 8, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    /* a tall kernel on a one-column image (all border columns) */
    {1, 2, 4, 1, 3, 5, 1, 1, 1, 2, 0, 2, 0, 1, 1, 1, 0, 1, 0},
    /* 3x3 pad 1 on a 1x1 image */
    {1, 4, 1, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    /* a kernel 17 columns wide (past the unrolled limit) */
    {1, 2, 3, 20, 4, 1, 17, 1, 1, 0, 8, 0, 8, 1, 1, 1, 1, 0, 0},
    /* 6 and 5 output channels (blocks of 2 and 1) */
    {1, 3, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    {1, 3, 6, 7, 5, 3, 3, 1, 2, 1, 0, 1, 2, 1, 1, 1, 1, 0, 1},
    /* wide image: many vector blocks and a tail */
    {1, 4, 5, 67, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 0},
    /* depthwise, unit strides, OW == W (the flattened plane), an add and a
     * clip fused per plane; 40x37, 14x14 symbolic batch 2, 7x7 */
    {1, 16, 40, 37, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16, 2, 2, 0},
    {2, 8, 14, 14, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 8, 1, 2, 1},
    {1, 4, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 0},
    /* ... 14x14 and 7x7 above and 5x5 / 4x4 here through the padded plane
     * (rows shorter than a vector: no whole-vector rows); 40x37 above and
     * 22x16 here past its limit (dw_rows_s1); 6x70, rows past
     * dw_rows_s1's (the flattened plane and border loops) */
    {1, 2, 22, 16, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 0},
    {1, 2, 6, 70, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 0},
    {1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 0},
    {2, 3, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 1},
    /* ... many planes a task (each task's padded copy in its own slot, on
     * its own cache lines): 256 of 7x7, and 64 of 14x14 at stride 2 */
    {1, 256, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 256, 1, 2, 0},
    {1, 64, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 64, 1, 2, 0},
    /* ... and the clip as one pass over the plane (14x14 batch 2, 6x6,
     * 9x9), no epilogue (15x15) */
    {2, 4, 14, 14, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 2, 0},
    {1, 5, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 5, 1, 2, 0},
    {1, 3, 15, 15, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 0, 1, 0},
    {1, 3, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    /* depthwise, unit strides without padding (OW != W: by rows) */
    {1, 4, 9, 20, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 4, 1, 0, 0},
    /* depthwise 5x5 dilated 2, pads 4 (OW == W) */
    {1, 3, 12, 19, 3, 5, 5, 1, 1, 4, 4, 4, 4, 2, 2, 3, 0, 1, 0},
    /* depthwise asymmetric pads (top 0, left 2, bottom 2, right 0), OW == W */
    {1, 3, 10, 18, 3, 3, 3, 1, 1, 0, 2, 2, 0, 1, 1, 3, 1, 1, 0},
    /* depthwise stride 2, symbolic, add and clip */
    {1, 4, 20, 33, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 2, 2, 1},
    /* depthwise stride 2 on an even width: the vector loop starts left of
     * the interior, the border loop rewrites column 0 */
    {1, 3, 16, 48, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    /* depthwise on 2x2 and 1x1 images (no interior row or column) */
    {1, 3, 2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    {2, 2, 1, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 0, 0},
    /* sgemm in blocks of whole output rows (256 channels: 18 rows of 30,
     * then 12), the epilogue per block: 1x1 batch 2 with add and clip,
     * im2col 3x3 symbolic, 2 groups of 128 */
    {2, 4, 30, 30, 256, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 2, 2, 0},
    {1, 3, 25, 27, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* blocks on cache lines (28-pixel rows: multiples of 4 rows): 16 + 12
     * on 2 threads, 12 + 12 + 4 on 3, with a residual and clip */
    {1, 4, 28, 28, 192, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 2, 0, 1},
    /* three blocks of 19 rows: four of 12 on 2 threads, three of 15 on 3 */
    {1, 3, 45, 27, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    {1, 4, 20, 26, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 0},
    /* im2col at stride 2 in columns from the deinterleaved image: batch 2,
     * 2 groups of 8, an even width, asymmetric pads, columns dilated 2;
     * a 1x5 kernel at strides (1, 2), symbolic, clip; squeezenet's first
     * layer on a 37x41 image in blocks of rows (96 channels) */
    {2, 4, 9, 16, 16, 3, 3, 2, 2, 1, 0, 1, 2, 1, 2, 2, 1, 1, 0},
    {1, 3, 10, 23, 8, 1, 5, 1, 2, 0, 2, 0, 2, 1, 1, 1, 0, 2, 1},
    {1, 3, 37, 41, 96, 7, 7, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0},
    /* im2col at unit strides as one copy over the flattened rows (OW == W):
     * rows dilated 2 with asymmetric pads, columns dilated 2 with pads 4
     * symbolic, a 2-row image; 3x3 without padding (OW != W: by rows) */
    {1, 5, 12, 10, 16, 3, 3, 1, 1, 0, 2, 2, 0, 2, 1, 1, 1, 1, 0},
    {1, 4, 6, 9, 8, 5, 5, 1, 1, 2, 4, 2, 4, 1, 2, 1, 1, 2, 1},
    {1, 3, 2, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0},
    {1, 3, 7, 12, 8, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0},
    /* depthwise stride 2 on small planes (dw_padded_s2: the padded plane's
     * even and odd columns apart): mobilenet_v2's 14x14 -> 7x7 with bias
     * and clip; odd sizes, batch 2 symbolic, relu; a 5x5 kernel with pads
     * 2 and nothing after it; asymmetric pads (top 0, left 1); even left
     * pads; and with a residual or an added bias (the pass after the plane) */
    {1, 8, 14, 14, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8, 1, 2, 0},
    {2, 4, 13, 11, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1},
    {1, 3, 12, 12, 3, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 3, 0, 0, 0},
    {1, 3, 10, 9, 3, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 3, 1, 2, 0},
    {1, 2, 9, 9, 2, 3, 3, 2, 2, 2, 2, 0, 0, 1, 1, 2, 1, 2, 0},
    {1, 4, 14, 14, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 1, 2, 0, 1},
    {1, 4, 14, 14, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 2, 2, 0},
    /* depthwise stride 2 on larger planes (dw_rows_s2: each band's input
     * rows, columns apart, in the task's slot): 30x30 with clip; batch 2,
     * odd height, relu; asymmetric pads; 5x5 with pads 2, nothing after;
     * a residual; 9 output columns (one vector and a tail) */
    {1, 3, 30, 30, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    {2, 4, 33, 40, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 1, 1, 0},
    {1, 3, 25, 34, 3, 3, 3, 2, 2, 0, 1, 1, 0, 1, 1, 3, 1, 2, 0},
    {1, 2, 24, 24, 2, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 2, 0, 0, 0},
    {1, 4, 28, 28, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 4, 1, 2, 0, 1},
    {1, 3, 40, 17, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    /* ... 5 output rows: whole planes per task on 3 threads (5 < 2 * 3),
     * each task in its own slot */
    {1, 7, 10, 41, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 7, 1, 2, 0},
    /* ... 38 output rows in sub-bands of 21 on one thread (the copy of a
     * sub-band's input rows in L1) */
    {1, 2, 75, 90, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 2, 1, 2, 0},
    /* depthwise, unit strides, rows of at most 64 padded pixels on planes
     * past 400 (dw_rows_s1: each band's input rows, zero-padded, in the
     * task's slot): 100 rows in sub-bands of 62 on one thread, relu, a
     * residual; asymmetric pads, nothing after it; a 5x5 kernel, batch 2 */
    {1, 2, 100, 62, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 0, 1},
    {1, 3, 21, 30, 3, 3, 3, 1, 1, 0, 2, 2, 0, 1, 1, 3, 0, 0, 0},
    {2, 3, 26, 23, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 3, 1, 2, 0},
    /* depthwise bands start on a cache line (28- and 68-pixel rows:
     * multiples of 4 rows), which on 3 threads leaves the last band empty:
     * 15 rows as 8 + 7 + 0 from the copy, 7 rows of 68 as 4 + 3 + 0
     * flattened */
    {1, 3, 15, 28, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
    {1, 2, 7, 68, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 2, 0},
    /* A residual of the output's shape (mobilenet_v2's projections: 1x1,
     * bias, add), with relu over a 3x3 im2col, batch 2 */
    {1, 24, 14, 14, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1},
    {2, 5, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},
};

static void conv_ref(const conv_case *c, const float *x, const float *w, const float *b, const float *r, float *y,
                     int64_t OH, int64_t OW) {
  int64_t cg = c->C / c->g, og = c->O / c->g;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = b ? b[o] : 0.0;
          int64_t grp = o / og;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t kh = 0; kh < c->KH; kh++)
              for (int64_t kw = 0; kw < c->KW; kw++) {
                int64_t ih = oh * c->sh - c->pt + kh * c->dh, iw = ow * c->sw - c->pl + kw * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                acc += (double)x[((n * c->C + grp * cg + ci) * c->H + ih) * c->W + iw] *
                       w[((o * cg + ci) * c->KH + kh) * c->KW + kw];
              }
          if (r) acc += r[((n * c->O + o) * OH + oh) * OW + ow];
          if (c->epilogue == 1) acc = acc < 0 ? 0 : acc;
          if (c->epilogue == 2) acc = acc < 0 ? 0 : acc > 6 ? 6 : acc;
          y[((n * c->O + o) * OH + oh) * OW + ow] = (float)acc;
        }
}

/* Whether conv.c takes a depthwise path on the whole padded plane: unit
 * strides (dw_padded) or strides 2 (dw_padded_s2), dilations 1, at most
 * 400 padded pixels. */
static bool dw_on_padded_plane(const conv_case *c) {
  bool s1 = c->sh == 1 && c->sw == 1, s2 = c->sh == 2 && c->sw == 2;
  return c->g == c->C && c->O == c->C && c->dh == 1 && c->dw == 1 && (s1 || s2) &&
         (c->H + c->pt + c->pb) * (c->W + c->pl + c->pr) <= 400;
}

/* Whether conv.c builds the band-row path (dw_rows_copied) for stride 2
 * (s = 2: scratch dw_rows_s2) or unit strides (s = 1: dw_rows_s1, rows of
 * at most 64 padded pixels): depthwise, dilations 1, a plane known past
 * 400 padded pixels. It runs when the output rows are a vector or more
 * (bands or whole planes per task), every pixel then summed in order. */
static bool dw_rows_built(const conv_case *c, int64_t s) {
  return c->g == c->C && c->O == c->C && c->dh == 1 && c->dw == 1 && c->sh == s && c->sw == s && !c->symbolic &&
         (c->H + c->pt + c->pb) * (c->W + c->pl + c->pr) > 400 && (s == 2 || c->W + c->pl + c->pr <= 64);
}

static bool dw_rows_runs(const conv_case *c, int64_t OW) {
  return (dw_rows_built(c, 1) || dw_rows_built(c, 2)) && OW >= 8;
}

/* A depthwise conv on the padded plane (dw_on_padded_plane) or through
 * dw_rows_copied (dw_rows_runs), in float in
 * its order: the conv's bias, then each tap fused, acc = fma(w, x, acc),
 * by kernel row and column (x = 0 in the padding), then an added bias, a
 * residual, Relu/Clip. Every pixel, border or not, is summed this way, so
 * the bits must agree. */
static bool dw_float_ref(const conv_case *c, const float *x, const float *w, const float *b, const float *r, float *y,
                         int64_t OH, int64_t OW) {
  if (!dw_on_padded_plane(c) && !dw_rows_runs(c, OW)) return false;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          volatile float acc = c->bias == 1 ? b[o] : 0.0f;
          for (int64_t kh = 0; kh < c->KH; kh++)
            for (int64_t kw = 0; kw < c->KW; kw++) {
              int64_t ih = oh * c->sh - c->pt + kh, iw = ow * c->sw - c->pl + kw;
              float xv = ih < 0 || ih >= c->H || iw < 0 || iw >= c->W ? 0.0f : x[((n * c->C + o) * c->H + ih) * c->W + iw];
              acc = fmaf(w[(o * c->KH + kh) * c->KW + kw], xv, acc);
            }
          float v = acc;
          if (c->bias == 2) v = v + b[o];
          if (c->residual) v = v + r[((n * c->O + o) * OH + oh) * OW + ow];
          if (c->epilogue == 1) v = v < 0 ? 0 : v;
          if (c->epilogue == 2) v = v < 0 ? 0 : v > 6 ? 6 : v;
          y[((n * c->O + o) * OH + oh) * OW + ow] = v;
        }
  return true;
}

static void program(const conv_case *c, char *buf, size_t size) {
  char x[96], call[512], bdecl[200] = "";
  if (c->symbolic) snprintf(x, sizeof x, "Tensor[(?, %lld, h, w), float32]", (long long)c->C);
  else snprintf(x, sizeof x, "Tensor[(%lld, %lld, %lld, %lld), float32]", (long long)c->N, (long long)c->C,
                (long long)c->H, (long long)c->W);
  if (c->bias == 1) snprintf(bdecl, sizeof bdecl, ", %%b: Tensor[(%lld,), float32]", (long long)c->O);
  if (c->bias == 2) snprintf(bdecl, sizeof bdecl, ", %%b: Tensor[(%lld, 1, 1), float32]", (long long)c->O);
  snprintf(call, sizeof call,
           "conv2d(%%x, %%k%s, strides=[%lld, %lld], pads=[%lld, %lld, %lld, %lld], dilations=[%lld, %lld], "
           "groups=%lld)",
           c->bias == 1 ? ", %b" : "", (long long)c->sh, (long long)c->sw, (long long)c->pt, (long long)c->pl,
           (long long)c->pb, (long long)c->pr, (long long)c->dh, (long long)c->dw, (long long)c->g);
  char e0[600], e1[700], e2[800];
  if (c->bias == 2) snprintf(e0, sizeof e0, "add(%s, %%b)", call);
  else snprintf(e0, sizeof e0, "%s", call);
  if (c->residual) snprintf(e1, sizeof e1, "add(%s, %%r)", e0);
  else snprintf(e1, sizeof e1, "%s", e0);
  if (c->residual) {
    int64_t OH = (c->H + c->pt + c->pb - c->dh * (c->KH - 1) - 1) / c->sh + 1;
    int64_t OW = (c->W + c->pl + c->pr - c->dw * (c->KW - 1) - 1) / c->sw + 1;
    size_t len = strlen(bdecl);
    if (c->symbolic)
      snprintf(bdecl + len, sizeof bdecl - len, ", %%r: Tensor[(?, %lld, %lld, %lld), float32]", (long long)c->O,
               (long long)OH, (long long)OW);
    else
      snprintf(bdecl + len, sizeof bdecl - len, ", %%r: Tensor[(%lld, %lld, %lld, %lld), float32]", (long long)c->N,
               (long long)c->O, (long long)OH, (long long)OW);
  }
  if (c->epilogue == 1) snprintf(e2, sizeof e2, "relu(%s)", e1);
  else if (c->epilogue == 2) snprintf(e2, sizeof e2, "clip(%s, min=0.0, max=6.0)", e1);
  else snprintf(e2, sizeof e2, "%s", e1);
  snprintf(buf, size, "def @main(%%x: %s, %%k: Tensor[(%lld, %lld, %lld, %lld), float32]%s) {\n  %s\n}\n", x,
           (long long)c->O, (long long)(c->C / c->g), (long long)c->KH, (long long)c->KW, bdecl, e2);
}

START_TEST(test_conv2d_cases_match_direct_loops_with_and_without_sgemm) {
  unsigned seed = 5;
  for (size_t ci = 0; ci < sizeof kConv / sizeof kConv[0]; ci++) {
    const conv_case *c = &kConv[ci];
    char text[1200];
    program(c, text, sizeof text);
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m = ch_compile_module(arena, text);
    const char *prim = ch_find_primitive(m, "fused.conv2d");
    ch_kernel k;
    ch_kernel_build(m, prim, false, NULL, &k);
    /* The convolution is computed into the output by its own nest: no
     * per-element window loop with clamped, selected reads remains for the
     * interior (the kernel has an ow loop starting past the left border). */
    char *pr = NULL;
    NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k.kernel, &pr));
    ck_assert_msg(strstr(pr, "vectorized(8)") != NULL, "case %zu: %s", ci, pr);
    int64_t one1 = c->KH == 1 && c->KW == 1 && c->sh == 1 && c->sw == 1 && !c->pt && !c->pl && !c->pb && !c->pr &&
                   c->g == 1;
    /* sgemm for a plain 1x1 (on the input itself) and for 8 or more
     * output channels per group (on an im2col scratch buffer). */
    bool want_sg = one1 || c->O / c->g >= 8, want_col = want_sg && !one1;
    ck_assert_msg((strstr(pr, "sgemm(") != NULL) == want_sg, "case %zu: sgemm %s expected:\n%s", ci,
                  want_sg ? "" : "not", pr);
    ck_assert_msg((strstr(pr, "scratch col") != NULL) == want_col, "case %zu: scratch %s expected:\n%s", ci,
                  want_col ? "" : "not", pr);
    /* Stride 2 on a small padded plane: the plane's columns apart in a
     * scratch buffer of its own (a 7-pixel row's tail: one masked step). */
    bool want_s2 = dw_on_padded_plane(c) && c->sh == 2, has_s2 = strstr(pr, "scratch dw_s2") != NULL;
    if (!c->symbolic) /* symbolic planes: under a run-time condition */
      ck_assert_msg(has_s2 == want_s2, "case %zu: scratch dw_s2 %s expected", ci, want_s2 ? "" : "not");
    for (int s = 1; s <= 2; s++)
      ck_assert_msg((strstr(pr, s == 1 ? "scratch dw_rows_s1" : "scratch dw_rows_s2") != NULL) == dw_rows_built(c, s),
                    "case %zu: scratch dw_rows_s%d %s expected", ci, s, dw_rows_built(c, s) ? "" : "not");
    if (c->g == c->C && c->O == c->C && c->H == 7 && c->W == 7 && c->sh == 1)
      ck_assert_msg(strstr(pr, "masked") != NULL, "case %zu: a 7-pixel row without a masked tail", ci);
    free(pr);
    int64_t OH = (c->H + c->pt + c->pb - c->dh * (c->KH - 1) - 1) / c->sh + 1;
    int64_t OW = (c->W + c->pl + c->pr - c->dw * (c->KW - 1) - 1) / c->sw + 1;
    size_t ny = (size_t)(c->N * c->O * OH * OW);
    /* Variants: no sgemm (the direct nest), sgemm (the product, then the
     * epilogue over the block), the same on 2 threads (blocks as two tasks
     * with a buffer each), sgemm_epilogue (bias and Relu/Clip inside the
     * product) on 3 threads, and that member and num_threads present but
     * past an older runtime's struct_size (one task per block's parts);
     * last, 3 threads' tasks run last first (a task writing into a later
     * one's rows, say a depthwise band's vector loop running on, shows). */
    /* Variant 6: the runtime's conv3x3 beside sgemm_epilogue on 2
     * threads, taken exactly where winograd() in conv.c applies. */
    int64_t oh_w = c->H + c->pt + c->pb - 2, ow_w = c->W + c->pl + c->pr - 2;
    bool want_wino = c->KH == 3 && c->KW == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 &&
                     c->g == 1 && c->C >= 8 && c->O >= 16 && c->bias != 2 && (c->symbolic || oh_w * ow_w >= 64);
    for (int variant = 0; variant < 7; variant++) {
      ch_env env;
      ch_env_init(&env, variant != 0);
      if (variant == 6) {
        ch_env_threads(&env, 2);
        ch_env_epilogue(&env);
        ch_env_conv3x3(&env);
      }
      long wino_before = ch_conv3x3_calls;
      if (variant >= 2 && variant < 5) ch_env_threads(&env, variant == 3 ? 3 : 2);
      if (variant == 5) ch_env_threads_reversed(&env, 3);
      if (variant >= 3) ch_env_epilogue(&env);
      /* An older runtime's environment ends before sgemm_epilogue: the
       * member must not be read, the block's own epilogue runs instead. */
      if (variant == 4) env.env.struct_size = (uint32_t)offsetof(nimble_kernel_env_t, sgemm_epilogue);
      long epi_before = ch_epilogue_calls;
      ch_tensor x, w, b, r, y;
      ch_tensor_f32(&x, 4, (int64_t[]){c->N, c->C, c->H, c->W}, &seed, -1, 1);
      ch_tensor_f32(&w, 4, (int64_t[]){c->O, c->C / c->g, c->KH, c->KW}, &seed, -1, 1);
      if (c->bias == 2) ch_tensor_f32(&b, 3, (int64_t[]){c->O, 1, 1}, &seed, -1, 1);
      else ch_tensor_f32(&b, 1, (int64_t[]){c->O}, &seed, -1, 1);
      ch_tensor_f32(&r, 4, (int64_t[]){c->N, c->O, OH, OW}, &seed, -1, 1);
      ch_tensor_f32(&y, 4, (int64_t[]){c->N, c->O, OH, OW}, &seed, 50, 60);
      ch_tensor *args[5];
      int nargs = 0;
      args[nargs++] = &x;
      args[nargs++] = &w;
      if (c->bias) args[nargs++] = &b;
      if (c->residual) args[nargs++] = &r;
      args[nargs++] = &y;
      int32_t rc = ch_call(&k, &env, args, nargs);
      ck_assert_msg(rc == 0, "case %zu variant %d: %s", ci, variant, env.error);
      /* The conv's own bias (or none), a residual of the output's shape and
       * Relu/Clip go into sgemm_epilogue; an added (O, 1, 1) tensor does not. */
      if (variant == 3 && ny)
        ck_assert_msg((ch_epilogue_calls > epi_before) == (want_sg && c->bias != 2),
                      "case %zu: sgemm_epilogue %s expected", ci, want_sg && c->bias != 2 ? "" : "not");
      if (variant == 4)
        ck_assert_msg(ch_epilogue_calls == epi_before, "case %zu: sgemm_epilogue read past struct_size", ci);
      if (variant == 6 && ny)
        ck_assert_msg((ch_conv3x3_calls - wino_before == c->N) == want_wino && (want_wino || ch_conv3x3_calls == wino_before),
                      "case %zu: %lld conv3x3 calls, %s expected", ci, (long long)(ch_conv3x3_calls - wino_before),
                      want_wino ? "one per image" : "none");
      float *want = malloc((ny ? ny : 1) * sizeof(float));
      conv_ref(c, ch_f(&x), ch_f(&w), c->bias ? ch_f(&b) : NULL, c->residual ? ch_f(&r) : NULL, want, OH, OW);
      char what[64];
      snprintf(what, sizeof what, "conv case %zu variant %d", ci, variant);
      ch_assert_close(what, ch_f(&y), want, ny, 1e-5f, 1e-5f);
      if (dw_float_ref(c, ch_f(&x), ch_f(&w), c->bias ? ch_f(&b) : NULL, c->residual ? ch_f(&r) : NULL, want, OH, OW))
        for (size_t i = 0; i < ny; i++)
          ck_assert_msg(memcmp(&ch_f(&y)[i], &want[i], sizeof(float)) == 0,
                        "%s: element %zu is %.9g, the float sum in order %.9g", what, i, ch_f(&y)[i], want[i]);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&b), ch_tensor_free(&r), ch_tensor_free(&y);
    }
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
  }
}
END_TEST

/* Depthwise with a Relu or Clip in the stores (conv.c: padded planes
 * whose output rows are shorter than a vector, rows from a band's copy)
 * keeps a NaN as NaN, as clip and relu do: inputs with a NaN in some
 * windows, every output NaN exactly where its window reaches one, the
 * others the loops' value. 7x7 (a masked row tail), 14x14 at stride 2
 * (7x7 out) and 20x20 (dw_rows_copied), relu and clip, on 1 and 2
 * threads. */
START_TEST(test_depthwise_clamp_in_the_stores_keeps_nan) {
  static const conv_case kNan[] = {
      {1, 3, 7, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
      {1, 3, 14, 14, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, 1, 1, 0},
      {1, 3, 20, 20, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2, 0},
  };
  unsigned seed = 11;
  for (size_t ci = 0; ci < sizeof kNan / sizeof kNan[0]; ci++) {
    const conv_case *c = &kNan[ci];
    char text[1200];
    program(c, text, sizeof text);
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m = ch_compile_module(arena, text);
    ch_kernel k;
    ch_kernel_build(m, ch_find_primitive(m, "fused.conv2d"), false, NULL, &k);
    int64_t OH = (c->H + c->pt + c->pb - c->KH) / c->sh + 1, OW = (c->W + c->pl + c->pr - c->KW) / c->sw + 1;
    size_t ny = (size_t)(c->N * c->O * OH * OW);
    for (int threads = 1; threads <= 2; threads++) {
      ch_env env;
      ch_env_init(&env, true);
      if (threads > 1) ch_env_threads(&env, threads);
      ch_tensor x, w, b, y;
      ch_tensor_f32(&x, 4, (int64_t[]){c->N, c->C, c->H, c->W}, &seed, -1, 1);
      ch_tensor_f32(&w, 4, (int64_t[]){c->O, 1, c->KH, c->KW}, &seed, -1, 1);
      ch_tensor_f32(&b, 1, (int64_t[]){c->O}, &seed, -1, 1);
      ch_tensor_f32(&y, 4, (int64_t[]){c->N, c->O, OH, OW}, &seed, 50, 60);
      /* A NaN in a corner, on an edge and inside, in different planes. */
      int64_t at[3][3] = {{0, 0, 0}, {1, 0, c->W / 2}, {2, c->H / 2, c->W / 2 + 1}};
      for (int i = 0; i < 3; i++) ch_f(&x)[(at[i][0] * c->H + at[i][1]) * c->W + at[i][2]] = NAN;
      ch_tensor *args[4] = {&x, &w, &b, &y};
      int32_t rc = ch_call(&k, &env, args, 4);
      ck_assert_msg(rc == 0, "case %zu: %s", ci, env.error);
      float *want = malloc(ny * sizeof(float));
      conv_ref(c, ch_f(&x), ch_f(&w), ch_f(&b), NULL, want, OH, OW);
      size_t nans = 0;
      for (size_t i = 0; i < ny; i++) {
        float got = ch_f(&y)[i];
        nans += isnan(want[i]);
        if (isnan(want[i])) ck_assert_msg(isnan(got), "case %zu threads %d: element %zu is %.9g, want NaN", ci, threads, i, got);
        else ck_assert_msg(fabsf(got - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]),
                           "case %zu threads %d: element %zu is %.9g, want %.9g", ci, threads, i, got, want[i]);
      }
      ck_assert_msg(nans >= 3, "case %zu: the NaNs reached %zu outputs", ci, nans);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&b), ch_tensor_free(&y);
    }
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
  }
}
END_TEST

/* The batch, height and width of an image's type written as numbers
 * (sizes known at compile time) in place of "?", "h", "w". */
static void image_dims(char dims[3][24], int64_t n, int64_t h, int64_t w) {
  snprintf(dims[0], 24, "%lld", (long long)n);
  snprintf(dims[1], 24, "%lld", (long long)h);
  snprintf(dims[2], 24, "%lld", (long long)w);
}

typedef struct pool_case {
  int kind; /* 0 max, 1 avg, 2 avg counting the padding */
  int64_t N, C, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw;
  int ceil_mode;
  int fixed; /* the image's size known at compile time (else symbolic) */
} pool_case;

static const pool_case kPool[] = {
    {0, 1, 4, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0},   /* cnn's 2x2 stride 2 */
    {0, 1, 3, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1}, /* squeezenet's 3x3 stride 2 ceil_mode */
    {0, 2, 2, 12, 10, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1}, /* ceil_mode with a window past the edge */
    {0, 1, 3, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* padded max */
    {0, 1, 2, 9, 11, 3, 2, 1, 2, 2, 1, 0, 1, 2, 2, 0},  /* dilated max, asymmetric pads */
    {1, 2, 3, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* avg excluding the padding */
    {2, 2, 3, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* avg including the padding */
    {1, 1, 2, 12, 10, 3, 3, 2, 2, 1, 0, 1, 0, 1, 1, 1}, /* avg, ceil_mode: the extra window counts what is inside */
    {2, 1, 2, 12, 10, 3, 3, 2, 2, 1, 0, 1, 0, 1, 1, 1}, /* avg incl. pad, ceil_mode: not what ceil adds */
    {1, 1, 3, 5, 40, 2, 3, 1, 1, 0, 1, 1, 1, 2, 1, 0},  /* wide avg, dilated rows */
    {0, 1, 2, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},   /* a 1x1 image */
    {0, 1, 3, 29, 45, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1}, /* wide 3x3/2 ceil_mode max: vector rows */
    {0, 2, 2, 20, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0}, /* wide padded 3x3 max, unit strides */
    /* 3 columns at stride 2 (max_pool_3s2: whole rows through a scratch row) */
    {0, 1, 4, 109, 109, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1}, /* squeezenet's first pool */
    {0, 2, 3, 16, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},   /* resnet's 3x3/2 pad 1 */
    {0, 1, 2, 11, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* pad 1, ceil_mode, even width */
    {0, 1, 2, 9, 26, 2, 3, 1, 2, 0, 2, 1, 0, 1, 1, 1},    /* asymmetric pads, 2 rows at stride 1 */
    {0, 1, 2, 13, 21, 3, 3, 3, 2, 2, 0, 2, 1, 2, 1, 0},   /* dilated rows at stride 3 */
    {0, 1, 2, 9, 16, 3, 3, 2, 2, 1, 2, 1, 2, 1, 1, 0},    /* left pad 2 (an even pad: te, to, te) */
    {0, 2, 1, 20, 15, 9, 3, 1, 2, 4, 1, 4, 1, 1, 1, 0},   /* 9 kernel rows (row by row), odd width */
    {0, 1, 3, 5, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},     /* narrow: border columns only */
    {0, 1, 2, 4, 2, 5, 3, 2, 2, 2, 1, 2, 1, 1, 1, 1},     /* window taller than the image, 2 columns */
    {0, 1, 2, 6, 1, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 0},     /* one column */
    {0, 1, 2, 6, 9, 2, 3, 2, 2, 0, 2, 0, 0, 1, 1, 0},     /* left pad 2 */
    {0, 1, 2, 12, 15, 9, 3, 1, 2, 4, 1, 4, 1, 1, 1, 0},   /* 9 rows: the max taken row by row */
    /* No left pad: the row maxima read from x, whole vectors only (the
     * last overlapping), at sizes known at compile time and not. */
    {0, 1, 3, 13, 27, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1}, /* squeezenet's last pool */
    {0, 1, 2, 11, 54, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1}, /* rows of 54, ceil_mode */
    {0, 1, 2, 7, 17, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, 0, 1},  /* right and bottom pads, 16 pairs per row */
    {0, 1, 2, 9, 25, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 0, 1},  /* 24 pairs: no overlap */
    {0, 1, 2, 9, 8, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0},   /* 7 pairs: under one vector */
    {0, 2, 2, 9, 27, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0},  /* rows of 27, sizes at run time */
};

START_TEST(test_pooling_cases_match_direct_loops) {
  unsigned seed = 9;
  for (size_t pi = 0; pi < sizeof kPool / sizeof kPool[0]; pi++) {
    const pool_case *p = &kPool[pi];
    char text[600], dims[3][24] = {"?", "h", "w"};
    if (p->fixed) image_dims(dims, p->N, p->H, p->W);
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(%s, %lld, %s, %s), float32]) { %s(%%x, kernel_shape=[%lld, %lld], "
             "strides=[%lld, %lld], pads=[%lld, %lld, %lld, %lld], dilations=[%lld, %lld], ceil_mode=%d%s) }\n",
             dims[0], (long long)p->C, dims[1], dims[2], p->kind == 0 ? "max_pool2d" : "avg_pool2d", (long long)p->KH, (long long)p->KW,
             (long long)p->sh, (long long)p->sw, (long long)p->pt, (long long)p->pl, (long long)p->pb,
             (long long)p->pr, (long long)p->dh, (long long)p->dw, p->ceil_mode,
             p->kind == 2 ? ", count_include_pad=1" : "");
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m = ch_compile_module(arena, text);
    ch_kernel k;
    ch_kernel_build(m, ch_find_primitive(m, "fused."), false, NULL, &k);
    int64_t sp[2][6] = {{p->H, p->KH, p->sh, p->pt, p->pb, p->dh}, {p->W, p->KW, p->sw, p->pl, p->pr, p->dw}};
    int64_t O[2];
    for (int i = 0; i < 2; i++) {
      int64_t span = sp[i][0] + sp[i][3] + sp[i][4] - sp[i][5] * (sp[i][1] - 1) - 1;
      O[i] = (p->ceil_mode ? (span + sp[i][2] - 1) / sp[i][2] : span / sp[i][2]) + 1;
    }
    /* Variants: without and with the runtime's sgemm (the 3-column,
     * stride-2 max pooling goes by whole rows only on runtimes with it),
     * each on one and two threads. */
    for (int variant = 0; variant < 4; variant++) {
      ch_env env;
      ch_env_init(&env, variant >= 2);
      if (variant & 1) ch_env_threads(&env, 2);
      ch_tensor x, y;
      ch_tensor_f32(&x, 4, (int64_t[]){p->N, p->C, p->H, p->W}, &seed, -1, 1);
      ch_tensor_f32(&y, 4, (int64_t[]){p->N, p->C, O[0], O[1]}, &seed, 50, 60);
      ch_tensor *args[2] = {&x, &y};
      int32_t rc = ch_call(&k, &env, args, 2);
      ck_assert_msg(rc == 0, "pool case %zu: %s", pi, env.error);
      size_t ny = (size_t)(p->N * p->C * O[0] * O[1]);
      float *want = malloc(ny * sizeof(float));
      for (int64_t nc = 0; nc < p->N * p->C; nc++)
        for (int64_t oh = 0; oh < O[0]; oh++)
          for (int64_t ow = 0; ow < O[1]; ow++) {
            float best = -INFINITY;
            double sum = 0;
            int cnt = 0, padded = 0;
            for (int64_t kh = 0; kh < p->KH; kh++)
              for (int64_t kw = 0; kw < p->KW; kw++) {
                int64_t ih = oh * p->sh - p->pt + kh * p->dh, iw = ow * p->sw - p->pl + kw * p->dw;
                if (ih >= -p->pt && ih < p->H + p->pb && iw >= -p->pl && iw < p->W + p->pr) padded++;
                if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                float v = ch_f(&x)[(nc * p->H + ih) * p->W + iw];
                best = fmaxf(best, v);
                sum += v;
                cnt++;
              }
            int den = p->kind == 2 ? padded : cnt;
            want[(nc * O[0] + oh) * O[1] + ow] = p->kind == 0 ? best : (float)(sum / (den > 0 ? den : 1));
          }
      char what[64];
      snprintf(what, sizeof what, "pool case %zu variant %d", pi, variant);
      ch_assert_close(what, ch_f(&y), want, ny, 1e-6f, 1e-5f);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&y);
    }
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
  }
}
END_TEST

/* A concatenation along the channels of convolutions, each a part of
 * one primitive (fuse_ops' conv_parts) written straight into its
 * channels of the output: squeezenet's expand pair (a 1x1 and a 3x3 pad 1
 * of the same input, Relu), three parts with a Clip and none, the 3x3
 * first, at batch 2 (each image's parts are apart in the output) and at
 * sizes known or not; with and without sgemm (and its epilogue), on 1 and 2
 * threads, and with a thread pool that runs tasks last first. Against a
 * direct conv per part, concatenated here; the output starts as garbage, so
 * a channel a part does not write fails. */
typedef struct concat_part {
  int64_t O, K, s, p;
  int epilogue; /* 0 none, 1 relu, 2 clip [0, 6] */
} concat_part;

typedef struct concat_case {
  int64_t N, C, H, W;
  int fixed;
  int n;
  concat_part part[3];
} concat_case;

static const concat_case kConcat[] = {
    {2, 16, 9, 11, 0, 2, {{24, 1, 1, 0, 1}, {16, 3, 1, 1, 1}}},              /* squeezenet's fire module */
    {1, 16, 13, 13, 1, 2, {{64, 1, 1, 0, 1}, {64, 3, 1, 1, 1}}},             /* its 13x13 one, sizes known */
    {2, 8, 7, 10, 0, 3, {{8, 1, 1, 0, 2}, {12, 1, 1, 0, 0}, {16, 3, 1, 1, 1}}}, /* three parts, Clip and none */
    {2, 6, 11, 9, 1, 2, {{10, 3, 1, 1, 1}, {7, 1, 1, 0, 1}}},                /* the 3x3 first, 7 channels */
    {2, 1, 6, 7, 0, 2, {{1, 3, 1, 1, 1}, {3, 1, 1, 0, 0}}},                  /* one channel in and out: not depthwise here */
};

START_TEST(test_a_concatenation_of_convolutions_writes_each_part_in_place) {
  unsigned seed = 21;
  for (size_t ci = 0; ci < sizeof kConcat / sizeof kConcat[0]; ci++) {
    const concat_case *q = &kConcat[ci];
    char text[2048], dims[3][24] = {"?", "h", "w"};
    if (q->fixed) image_dims(dims, q->N, q->H, q->W);
    int len = snprintf(text, sizeof text, "def @main(%%x: Tensor[(%s, %lld, %s, %s), float32]", dims[0],
                       (long long)q->C, dims[1], dims[2]);
    for (int k = 0; k < q->n; k++)
      len += snprintf(text + len, sizeof text - (size_t)len,
                      ", %%w%d: Tensor[(%lld, %lld, %lld, %lld), float32], %%b%d: Tensor[(%lld,), float32]", k,
                      (long long)q->part[k].O, (long long)q->C, (long long)q->part[k].K, (long long)q->part[k].K, k,
                      (long long)q->part[k].O);
    len += snprintf(text + len, sizeof text - (size_t)len, ") {\n  concatenate(");
    for (int k = 0; k < q->n; k++) {
      const concat_part *pt = &q->part[k];
      char conv[256];
      snprintf(conv, sizeof conv, "conv2d(%%x, %%w%d, %%b%d, strides=[%lld, %lld], pads=[%lld, %lld, %lld, %lld])", k, k,
               (long long)pt->s, (long long)pt->s, (long long)pt->p, (long long)pt->p, (long long)pt->p,
               (long long)pt->p);
      len += snprintf(text + len, sizeof text - (size_t)len, "%s%s%s%s", k ? ", " : "",
                      pt->epilogue == 1 ? "relu(" : pt->epilogue == 2 ? "clip(" : "", conv,
                      pt->epilogue == 1 ? ")" : pt->epilogue == 2 ? ", min=0.0, max=6.0)" : "");
    }
    snprintf(text + len, sizeof text - (size_t)len, ", axis=1)\n}\n");
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m = ch_compile_module(arena, text);
    /* One primitive: the parts are in it. */
    const char *name = ch_find_primitive(m, "fused.");
    ck_assert_msg(strstr(name, "concatenate") && strstr(name, "conv2d"), "case %zu: %s", ci, name);
    for (size_t f = 0; f < nimble_module_num_funcs(m); f++) {
      const char *other = nimble_module_func_at(m, f)->name;
      ck_assert_msg(!nimble_passes_is_primitive(other) || !strcmp(other, name) || strstr(other, "storage_size"),
                    "case %zu: %s beside %s", ci, other, name);
    }
    ch_kernel k;
    ch_kernel_build(m, name, false, NULL, &k);
    int64_t OH = (q->H + 2 * q->part[0].p - q->part[0].K) / q->part[0].s + 1;
    int64_t OW = (q->W + 2 * q->part[0].p - q->part[0].K) / q->part[0].s + 1;
    int64_t Ct = 0;
    for (int p = 0; p < q->n; p++) Ct += q->part[p].O;
    for (int variant = 0; variant < 6; variant++) {
      ch_env env;
      ch_env_init(&env, variant >= 2);
      if (variant >= 4) ch_env_epilogue(&env);
      if (variant == 1 || variant == 3) ch_env_threads(&env, 2);
      if (variant == 5) ch_env_threads_reversed(&env, 2);
      ch_tensor x, y, w[3], b[3];
      ch_tensor_f32(&x, 4, (int64_t[]){q->N, q->C, q->H, q->W}, &seed, -1, 1);
      ch_tensor *args[8];
      int na = 0;
      args[na++] = &x;
      for (int p = 0; p < q->n; p++) {
        ch_tensor_f32(&w[p], 4, (int64_t[]){q->part[p].O, q->C, q->part[p].K, q->part[p].K}, &seed, -0.5f, 0.5f);
        ch_tensor_f32(&b[p], 1, (int64_t[]){q->part[p].O}, &seed, -1, 1);
        args[na++] = &w[p];
        args[na++] = &b[p];
      }
      ch_tensor_f32(&y, 4, (int64_t[]){q->N, Ct, OH, OW}, &seed, 50, 60);
      args[na++] = &y;
      int32_t rc = ch_call(&k, &env, args, na);
      ck_assert_msg(rc == 0, "concat case %zu: %s", ci, env.error);
      size_t ny = (size_t)(q->N * Ct * OH * OW);
      float *want = malloc(ny * sizeof(float));
      int64_t c0 = 0;
      for (int p = 0; p < q->n; p++) {
        const concat_part *pt = &q->part[p];
        conv_case cc = {q->N, q->C, q->H, q->W, pt->O, pt->K, pt->K, pt->s, pt->s, pt->p, pt->p, pt->p, pt->p,
                        1, 1, 1, 1, pt->epilogue, 0, 0};
        float *part = malloc((size_t)(q->N * pt->O * OH * OW) * sizeof(float));
        conv_ref(&cc, ch_f(&x), ch_f(&w[p]), ch_f(&b[p]), NULL, part, OH, OW);
        for (int64_t n = 0; n < q->N; n++)
          memcpy(want + ((n * Ct + c0) * OH * OW), part + n * pt->O * OH * OW, (size_t)(pt->O * OH * OW) * sizeof(float));
        free(part);
        c0 += pt->O;
      }
      char what[64];
      snprintf(what, sizeof what, "concat case %zu variant %d", ci, variant);
      ch_assert_close(what, ch_f(&y), want, ny, 1e-4f, 1e-4f);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&y);
      for (int p = 0; p < q->n; p++) ch_tensor_free(&w[p]), ch_tensor_free(&b[p]);
    }
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_conv");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_conv2d_cases_match_direct_loops_with_and_without_sgemm);
  tcase_add_test(tc, test_pooling_cases_match_direct_loops);
  tcase_add_test(tc, test_depthwise_clamp_in_the_stores_keeps_nan);
  tcase_add_test(tc, test_a_concatenation_of_convolutions_writes_each_part_in_place);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
