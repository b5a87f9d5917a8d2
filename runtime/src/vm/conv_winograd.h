/* 3x3 convolutions with unit strides by Winograd's minimal filtering,
 * F(2x2, 3x3): each 2x2 block of output pixels from a 4x4 block of input
 * in 16 multiply-adds per pair of channels where the direct computation
 * takes 36, the rest being additions. The kernel ABI's env->conv3x3
 * (nimble/kernel_abi.h); docs/vm.md, "Winograd convolutions". */
#ifndef NIMBLE_RUNTIME_CONV_WINOGRAD_H
#define NIMBLE_RUNTIME_CONV_WINOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/kernel_abi.h"

/* One image: y[k][oh][ow] = sum over c and the 3x3 window of wt[k][c][u][v]
 * * x[c][i - pad_t + u][j - pad_l + v] (0 outside the image), then `epi`
 * (NULL: none) on each output as on C[k, i*ow + j] of a product with ldc
 * = oh*ow: + row_bias[k], + residual[k*ldr + i*ow + j], a clamp keeping
 * NaN; col_bias must be NULL. x is [c][h][w] and wt [k][c][3][3], both
 * contiguous; y's planes are oh*ow apart. Any sizes; it cannot fail (with
 * no memory for its buffers it computes directly, slowly). Weights inside
 * an executable's constants (nimble_sgemm_own_constants_add) are
 * transformed once and kept until their range is removed. The tiles run
 * over the calling VM's thread pool (vm/sgemm_threads.h). */
void nimble_conv3x3_winograd(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_t, int64_t pad_l, int64_t oh,
                             int64_t ow, const float *x, const float *wt, float *y, const nimble_sgemm_epilogue_t *epi);

/* Drops the transformed weights of every wt inside [base, base + bytes)
 * (sgemm_own.c calls it from nimble_sgemm_own_constants_remove). */
void nimble_conv_winograd_forget(const void *base, size_t bytes);

#endif
