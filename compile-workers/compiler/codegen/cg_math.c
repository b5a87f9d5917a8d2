/* exp, tanh, sigmoid and erf as inline f32 IR.
 *
 * They are straight-line code (selects, no branches, no libm calls) so the
 * loop vectorizer widens them. Accuracy against libm is measured by
 * tests/codegen/test_codegen_math.c and written down in docs/codegen.md.
 *
 * exp: Cody-Waite reduction x = n*ln2 + r, |r| <= ln2/2, a degree-7 Taylor
 * polynomial for e^r, and 2^n applied as two factors 2^(n/2) * 2^(n-n/2) so
 * results in the subnormal range are rounded once instead of flushed.
 * sigmoid: e = exp(-|x|) never overflows; 1/(1+e) for x >= 0, e/(1+e)
 * below. tanh: a Taylor polynomial below |x| = 0.5 (where 1 - 2/(e^2x+1)
 * would cancel), that formula above. erf: x * P(x^2) below |x| = 1,
 * 1 - exp(Q(|x|)) above, both fitted (scripts/fit_erf.py): no division.
 */
#include <stdint.h>

#include "cg_internal.h"

LLVMValueRef nimble_cg_intrinsic(LLVMModuleRef m, LLVMBuilderRef b, const char *name, LLVMTypeRef ty,
                                 LLVMValueRef *args, unsigned n) {
  size_t len = 0;
  while (name[len]) len++;
  unsigned id = LLVMLookupIntrinsicID(name, len);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m, id, &ty, 1);
  LLVMTypeRef fty = LLVMIntrinsicGetType(LLVMGetModuleContext(m), id, &ty, 1);
  return LLVMBuildCall2(b, fty, fn, args, n, "");
}

static LLVMTypeRef f32t(LLVMModuleRef m) { return LLVMFloatTypeInContext(LLVMGetModuleContext(m)); }
static LLVMValueRef cf(LLVMModuleRef m, double v) { return LLVMConstReal(f32t(m), v); }

static LLVMValueRef fma3(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y,
                         LLVMValueRef z) {
  LLVMValueRef args[3] = {x, y, z};
  return nimble_cg_intrinsic(m, b, "llvm.fmuladd", f32t(m), args, 3);
}

/* c[0] + x*(c[1] + x*(c[2] + ...)) */
static LLVMValueRef horner(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef p = cf(m, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) p = fma3(m, b, p, x, cf(m, c[i]));
  return p;
}

static LLVMValueRef fabs1(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  return nimble_cg_intrinsic(m, b, "llvm.fabs", f32t(m), &x, 1);
}

static LLVMValueRef copysign1(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef mag, LLVMValueRef sign) {
  LLVMValueRef args[2] = {mag, sign};
  return nimble_cg_intrinsic(m, b, "llvm.copysign", f32t(m), args, 2);
}

/* 2^n for an i32 n in [-126, 127]: the exponent field built directly. */
static LLVMValueRef pow2i(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef n) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef biased = LLVMBuildAdd(b, n, LLVMConstInt(i32, 127, 0), "");
  LLVMValueRef bits = LLVMBuildShl(b, biased, LLVMConstInt(i32, 23, 0), "");
  return LLVMBuildBitCast(b, bits, f32t(m), "");
}

/* e^r for x = n*ln2 + r: *nf gets n (as a float), the result the
 * polynomial for e^r; x must not be NaN and |x| must keep n in i32. */
static LLVMValueRef exp_reduced(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef *nf) {
  /* n = round(x / ln2) by the 1.5*2^23 trick (round-to-nearest-even). */
  LLVMValueRef t = fma3(m, b, x, cf(m, 1.44269504088896341), cf(m, 12582912.0));
  *nf = LLVMBuildFSub(b, t, cf(m, 12582912.0), "");
  LLVMValueRef r = fma3(m, b, *nf, cf(m, -0.693359375), x);
  r = fma3(m, b, *nf, cf(m, 2.12194440e-4), r);
  static const double c[] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040};
  return horner(m, b, r, c, 8);
}

LLVMValueRef nimble_cg_exp(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef is_nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  /* NaN is replaced before the integer conversions (fptosi of NaN is
   * poison) and restored at the end. Clamping keeps n within [-150, 128]:
   * below -104 the result rounds to +0, above 89 to +inf. */
  LLVMValueRef xs = LLVMBuildSelect(b, is_nan, cf(m, 0.0), x, "");
  xs = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, xs, cf(m, -104.0), ""), cf(m, -104.0), xs, "");
  xs = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, xs, cf(m, 89.0), ""), cf(m, 89.0), xs, "");
  LLVMValueRef nf;
  LLVMValueRef p = exp_reduced(m, b, xs, &nf);
  LLVMValueRef n = LLVMBuildFPToSI(b, nf, i32, "");
  LLVMValueRef n1 = LLVMBuildAShr(b, n, LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef n2 = LLVMBuildSub(b, n, n1, "");
  LLVMValueRef y = LLVMBuildFMul(b, LLVMBuildFMul(b, p, pow2i(m, b, n1), ""), pow2i(m, b, n2), "");
  return LLVMBuildSelect(b, is_nan, x, y, "exp");
}

/* exp(x) for x known to lie in [-80, 80] (not NaN): no clamps and 2^n in
 * one factor (no subnormal result to round). For erf's exp(Q(|x|)), Q in
 * [-18, -1.8]: half of exp's work was the NaN and range handling. */
static LLVMValueRef exp_in_range(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef nf;
  LLVMValueRef p = exp_reduced(m, b, x, &nf);
  return LLVMBuildFMul(b, p, pow2i(m, b, LLVMBuildFPToSI(b, nf, i32, "")), "");
}

LLVMValueRef nimble_cg_sigmoid(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMValueRef e = nimble_cg_exp(m, b, LLVMBuildFNeg(b, fabs1(m, b, x), ""));
  LLVMValueRef d = LLVMBuildFAdd(b, cf(m, 1.0), e, "");
  LLVMValueRef neg = LLVMBuildFCmp(b, LLVMRealOLT, x, cf(m, 0.0), "");
  LLVMValueRef num = LLVMBuildSelect(b, neg, e, cf(m, 1.0), "");
  return LLVMBuildFDiv(b, num, d, "sigmoid");
}

LLVMValueRef nimble_cg_tanh(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMValueRef ax = fabs1(m, b, x);
  /* Taylor: |x| + |x|^3 * q(x^2), through x^17; the first omitted term is
   * below 1e-9 relative at |x| = 0.5. */
  static const double c[] = {-1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925,
                             21844.0 / 6081075, -929569.0 / 638512875, 6404582.0 / 10854718875.0};
  LLVMValueRef x2 = LLVMBuildFMul(b, x, x, "");
  LLVMValueRef q = horner(m, b, x2, c, 8);
  LLVMValueRef small = fma3(m, b, LLVMBuildFMul(b, ax, x2, ""), q, ax);
  LLVMValueRef e = nimble_cg_exp(m, b, LLVMBuildFAdd(b, ax, ax, ""));
  LLVMValueRef big = LLVMBuildFSub(
      b, cf(m, 1.0), LLVMBuildFDiv(b, cf(m, 2.0), LLVMBuildFAdd(b, e, cf(m, 1.0), ""), ""), "");
  LLVMValueRef is_small = LLVMBuildFCmp(b, LLVMRealOLT, ax, cf(m, 0.5), "");
  /* tanh is odd: both branches work on |x| and take x's sign (so -0 stays -0). */
  return copysign1(m, b, LLVMBuildSelect(b, is_small, small, big, ""), x);
}

LLVMValueRef nimble_cg_erf(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  /* Coefficients from scripts/fit_erf.py (fits that minimise the error of
   * this very evaluation in f32; it prints them and that error). */
  static const double p[] = {1.12837911, -0.37612325, 0.112801798, -0.0267113093, 0.00491754944, -0.000563141482};
  static const double q[] = {-0.000353696727, -1.12704015, -0.638225496,    -0.103037514,
                             0.0218053889,    -0.00293962541, 0.000185575918};
  LLVMValueRef ax = fabs1(m, b, x);
  /* |x| < 1: x * P(x^2). */
  LLVMValueRef small = LLVMBuildFMul(b, ax, horner(m, b, LLVMBuildFMul(b, ax, ax, ""), p, 6), "");
  /* Above: 1 - exp(Q(|x|)), Q ~ log(erfc); |x| held at 3.9375, where
   * erfc is below half an ulp of 1, so Q stays in [-18, -1.8]. A NaN x
   * gives a poison lane there (fptosi of NaN), which the last select
   * does not take. */
  LLVMValueRef xc = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, ax, cf(m, 3.9375), ""), ax, cf(m, 3.9375), "");
  LLVMValueRef big = LLVMBuildFSub(b, cf(m, 1.0), exp_in_range(m, b, horner(m, b, xc, q, 7)), "");
  LLVMValueRef is_small = LLVMBuildFCmp(b, LLVMRealOLT, ax, cf(m, 1.0), "");
  LLVMValueRef y = copysign1(m, b, LLVMBuildSelect(b, is_small, small, big, ""), x);
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, y, "erf");
}

/* ---- 16-bit floats, as integer IR (no F16C or libgcc helpers needed,
 * and the loop vectorizer widens it). ---- */

static LLVMTypeRef i32t(LLVMModuleRef m) { return LLVMInt32TypeInContext(LLVMGetModuleContext(m)); }
static LLVMValueRef ci(LLVMModuleRef m, unsigned long long v) { return LLVMConstInt(i32t(m), v, 0); }

LLVMValueRef nimble_cg_f16_bits_to_f32(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef h) {
  LLVMValueRef u = LLVMBuildZExt(b, h, i32t(m), "");
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildAnd(b, u, ci(m, 0x8000), ""), ci(m, 16), "");
  LLVMValueRef em = LLVMBuildAnd(b, u, ci(m, 0x7fff), "");
  LLVMValueRef shifted = LLVMBuildShl(b, em, ci(m, 13), "");
  /* Normal halves: the fields moved into place and the exponent rebiased
   * (+112). Subnormal ones: mantissa * 2^-24, exact in float (no
   * subnormal float arithmetic, so denormals-are-zero modes do not
   * matter). Infinity and NaN: the exponent field set to all ones. */
  LLVMValueRef normal = LLVMBuildAdd(b, shifted, ci(m, 112u << 23), "");
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, em, f32t(m), ""), cf(m, 0x1p-24), "");
  LLVMValueRef special = LLVMBuildOr(b, shifted, ci(m, 0x7f800000), "");
  LLVMValueRef is_special = LLVMBuildICmp(b, LLVMIntUGE, em, ci(m, 0x7c00), "");
  LLVMValueRef is_sub = LLVMBuildICmp(b, LLVMIntULT, em, ci(m, 0x400), "");
  LLVMValueRef mag = LLVMBuildSelect(b, is_special, special,
                                     LLVMBuildSelect(b, is_sub, LLVMBuildBitCast(b, sub, i32t(m), ""), normal, ""), "");
  return LLVMBuildBitCast(b, LLVMBuildOr(b, mag, sign, ""), f32t(m), "half");
}

LLVMValueRef nimble_cg_f32_to_f16_bits(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  /* F. Giesen's float_to_half_fast3_rtne, as selects. */
  LLVMValueRef u = LLVMBuildBitCast(b, x, i32t(m), "");
  LLVMValueRef sign = LLVMBuildAnd(b, u, ci(m, 0x80000000u), "");
  LLVMValueRef a = LLVMBuildXor(b, u, sign, "");
  /* |x| >= 65536 (or inf, NaN): inf, or a quiet NaN. */
  LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntUGT, a, ci(m, 0x7f800000), "");
  LLVMValueRef big_r = LLVMBuildSelect(b, nan, ci(m, 0x7e00), ci(m, 0x7c00), "");
  LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, a, ci(m, (127u + 16) << 23), "");
  /* |x| < 2^-14: adding 0.5 lines the half's subnormal units up with the
   * float's last mantissa bits, rounding to nearest even. */
  LLVMValueRef sub_f = LLVMBuildFAdd(b, LLVMBuildBitCast(b, a, f32t(m), ""), cf(m, 0.5), "");
  LLVMValueRef sub_r = LLVMBuildSub(b, LLVMBuildBitCast(b, sub_f, i32t(m), ""), ci(m, 126u << 23), "");
  LLVMValueRef sub = LLVMBuildICmp(b, LLVMIntULT, a, ci(m, 113u << 23), "");
  /* Normal: rebias the exponent and round the 13 dropped bits to even. */
  LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, a, ci(m, 13), ""), ci(m, 1), "");
  LLVMValueRef n = LLVMBuildAdd(b, a, ci(m, (unsigned)((uint32_t)(15 - 127) << 23) + 0xfffu), "");
  LLVMValueRef norm_r = LLVMBuildLShr(b, LLVMBuildAdd(b, n, odd, ""), ci(m, 13), "");
  LLVMValueRef r = LLVMBuildSelect(b, big, big_r, LLVMBuildSelect(b, sub, sub_r, norm_r, ""), "");
  r = LLVMBuildOr(b, r, LLVMBuildLShr(b, sign, ci(m, 16), ""), "");
  return LLVMBuildTrunc(b, r, LLVMInt16TypeInContext(LLVMGetModuleContext(m)), "to_half");
}

LLVMValueRef nimble_cg_bf16_bits_to_f32(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef h) {
  LLVMValueRef u = LLVMBuildShl(b, LLVMBuildZExt(b, h, i32t(m), ""), ci(m, 16), "");
  return LLVMBuildBitCast(b, u, f32t(m), "bfloat");
}

LLVMValueRef nimble_cg_f32_to_bf16_bits(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  LLVMValueRef u = LLVMBuildBitCast(b, x, i32t(m), "");
  LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, u, ci(m, 16), ""), ci(m, 1), "");
  LLVMValueRef r = LLVMBuildLShr(b, LLVMBuildAdd(b, LLVMBuildAdd(b, u, ci(m, 0x7fff), ""), odd, ""), ci(m, 16), "");
  /* NaN keeps its sign and becomes quiet (rounding could carry it into inf). */
  LLVMValueRef q = LLVMBuildOr(b, LLVMBuildLShr(b, u, ci(m, 16), ""), ci(m, 0x40), "");
  r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), q, r, "");
  return LLVMBuildTrunc(b, r, LLVMInt16TypeInContext(LLVMGetModuleContext(m)), "to_bfloat");
}

LLVMValueRef nimble_cg_f64_to_f32_odd(LLVMModuleRef m, LLVMBuilderRef b, LLVMValueRef x) {
  /* Round to nearest, step back toward zero when that went past x (the
   * float's bits are sign-magnitude, so one less is one ulp smaller in
   * magnitude), then set the last bit when inexact: round-to-odd, after
   * which one more rounding to a narrower format is correctly rounded. */
  LLVMTypeRef f64 = LLVMDoubleTypeInContext(LLVMGetModuleContext(m));
  LLVMValueRef r = LLVMBuildFPTrunc(b, x, f32t(m), "");
  LLVMValueRef back = LLVMBuildFPExt(b, r, f64, "");
  LLVMValueRef ab = nimble_cg_intrinsic(m, b, "llvm.fabs", f64, &back, 1);
  LLVMValueRef ax = nimble_cg_intrinsic(m, b, "llvm.fabs", f64, &x, 1);
  LLVMValueRef over = LLVMBuildZExt(b, LLVMBuildFCmp(b, LLVMRealOGT, ab, ax, ""), i32t(m), "");
  LLVMValueRef inexact = LLVMBuildZExt(b, LLVMBuildFCmp(b, LLVMRealONE, back, x, ""), i32t(m), "");
  LLVMValueRef u = LLVMBuildSub(b, LLVMBuildBitCast(b, r, i32t(m), ""), over, "");
  return LLVMBuildBitCast(b, LLVMBuildOr(b, u, inexact, ""), f32t(m), "odd");
}
