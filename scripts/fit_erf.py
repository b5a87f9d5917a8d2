#!/usr/bin/env python3
"""Fits the coefficients of the inline f32 erf (compile-workers/compiler/
codegen/cg_math.c) and prints them with the error of evaluating them in
f32 the way the generated code does (fused multiply-adds, f32 constants).

  |x| < 1:          erf(x) = x * P(x^2),       P of degree 5
  1 <= |x| < 3.9375: erf(x) = 1 - exp(Q(|x|)),  Q of degree 6 fitted to
                     log(erfc(x)); past 3.9375 erfc(x) is below half an
                     ulp of 1 and Q(3.9375) gives erf = 1.

No division (the Abramowitz & Stegun form it replaces had one per value)
and 11 multiply-adds where it had 18. The fits are least squares on
Chebyshev nodes, reweighted toward the minimax error (relative for P; for
Q, the error in erf's ulps, which is erfc(x) times Q's error).

Usage: python3 scripts/fit_erf.py   (needs NumPy; prints C initializers)
"""
import math

import numpy as np

F32 = np.float32
SMALL_END, BIG_END = 1.0, 3.9375
SMALL_DEG, BIG_DEG = 5, 6


def fma32(a, b, c):
    """f32 fused multiply-add: exact product and sum, one rounding."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(F32)


def horner32(coef, t):
    p = np.full_like(t, F32(coef[-1]))
    for c in reversed(coef[:-1]):
        p = fma32(p, t, np.full_like(t, F32(c)))
    return p


def ulps(got, want):
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(F32)).astype(np.float64)


def minimax(v, y, weight, rounds=40):
    """Least squares on v @ c ~ y with weights, reweighted toward the
    largest weighted residuals (a few rounds of Lawson's algorithm)."""
    w = np.ones_like(y)
    c = None
    for _ in range(rounds):
        c, *_ = np.linalg.lstsq(v * (weight * w)[:, None], y * weight * w, rcond=None)
        r = np.abs((v @ c - y) * weight)
        w = w * np.sqrt(r / r.max() + 1e-3)
        w /= w.max()
    return c


def nodes(lo, hi, n=6000):
    k = np.arange(n)
    return lo + (hi - lo) * (0.5 - 0.5 * np.cos(np.pi * (k + 0.5) / n))


def fit_small():
    t = nodes(0.0, SMALL_END**2)
    x = np.sqrt(t)
    y = np.array([math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi) for v in x])
    return minimax(np.vander(t, SMALL_DEG + 1, increasing=True), y, 1 / y)


def fit_big():
    x = nodes(SMALL_END, BIG_END)
    y = np.array([math.log(math.erfc(v)) for v in x])
    ulp = np.spacing(np.array([math.erf(v) for v in x]).astype(F32)).astype(np.float64)
    weight = np.array([math.erfc(v) for v in x]) / ulp
    return minimax(np.vander(x, BIG_DEG + 1, increasing=True), y, weight)


def erf32(p, q, x):
    ax = np.abs(x)
    small = (ax * horner32(p, (ax * ax).astype(F32))).astype(F32)
    e = np.exp(horner32(q, np.minimum(ax, F32(BIG_END))).astype(np.float64)).astype(F32)
    big = (F32(1) - e).astype(F32)
    return np.copysign(np.where(ax < F32(SMALL_END), small, big), x)


def main():
    p, q = fit_small(), fit_big()
    x = np.linspace(0, 6, 600001).astype(F32)
    want = np.array([math.erf(float(v)) for v in x])
    err = ulps(erf32(p, q, x), want)
    print("/* P (|x| < %g), in x^2: */ {%s}" % (SMALL_END, ", ".join("%.9g" % F32(c) for c in p)))
    print("/* Q (%g <= |x| < %g), in |x|: */ {%s}" % (SMALL_END, BIG_END, ", ".join("%.9g" % F32(c) for c in q)))
    print("max error over [0, 6] (exp exact): %.2f ulp at %.5f" % (err.max(), x[err.argmax()]))


if __name__ == "__main__":
    main()
