"""exp, expm1, log, log1p and power, with double-double cores shared by the other functions.

exp: x = k ln2/128 + r (Cody-Waite with a 34-bit ln2/128, so k * L1 is exact), |r| <= ln2/256,
exp(r) by its Taylor polynomial of degree 6 (truncation < 2**-72), 2**(j/128) from a
double-double table, the result scaled by 2**(k >> 7) with a single rounding.

log: x = 2**e m, m in [1, 2); i = rint((m - 1) * 128) picks c ~ 1/m from a table, r = m c - 1 is
exact as a double-double (Dekker's product; |r| <= 2**-8), log1p(r) by its Taylor polynomial of
degree 9 with the r**2/2 term in double-double; log x = e ln2 + (-log c) + log1p(r). Values just
below 1 use c = 1 with e + 1 (no cancellation between e ln2 and the table), so the result keeps
its relative accuracy near 1. The absolute error of the double-double is about 2**-76.

power: exp(y * log|x|) with the logarithm and the product in double-double (the error of
y log|x| stays below 2**-60 absolute wherever the result is finite and nonzero), so exact
results (integer powers, perfect squares, ...) round to themselves.
"""

from __future__ import annotations

import numpy as np

from . import _tables as T
from ._core import (
    F64,
    I64,
    elementwise,
    fast_two_sum,
    hexarray,
    hexf,
    horner,
    pow2,
    scale2,
    two_prod,
    two_square,
    two_sum,
    dd_mul_d,
)

_EXP_INV_L = hexf(T.EXP_INV_L)
_EXP_L1 = hexf(T.EXP_L1)
_EXP_L2 = hexf(T.EXP_L2)
_EXP_L3 = hexf(T.EXP_L3)
_EXP_T_HI = hexarray(T.EXP_T_HI)
_EXP_T_LO = hexarray(T.EXP_T_LO)
_EXP_P = [1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720]  # exp(r) - 1 - r = r*r * P(r)

_LOG_C = hexarray(T.LOG_C)
_LOG_SHIFT = np.array(T.LOG_SHIFT, dtype=I64)
_LOG_T_HI = hexarray(T.LOG_T_HI)
_LOG_T_LO = hexarray(T.LOG_T_LO)
_LN2_HI = hexf(T.LN2_HI)
_LN2_LO = hexf(T.LN2_LO)
# log1p(r) - r + r*r/2 = r**3 * P(r)
_LOG_P = [1 / 3, -1 / 4, 1 / 5, -1 / 6, 1 / 7, -1 / 8, 1 / 9, -1 / 10]

_MANT = (1 << 52) - 1
_ONE_BITS = 1023 << 52
_TWO54 = 2.0**54

#: exp's argument bounds: beyond them the result is +inf (above) or +0 (below)
EXP_ARG_MAX = 710.0
EXP_ARG_MIN = -746.0


# --- exp core ---------------------------------------------------------------------------------


def exp_parts(zh, zl, exact=False):
    """exp(zh + zl) == (hi + lo) * 2**k for finite zh in [-750, 716], |zl| <= ulp(zh).

    hi + lo is in [0.99, 2.01]; its relative error is about 2**-61, or about 2**-70 with
    ``exact`` (Dekker's product for the leading term, as expm1 needs for its cancellation).
    """
    kf = np.rint(zh * _EXP_INV_L)
    r1 = zh - kf * _EXP_L1  # exact: k * L1 has <= 52 bits and r1 is small (Sterbenz)
    rh, rl = two_sum(r1, -(kf * _EXP_L2))
    rl = rl + (zl - kf * _EXP_L3)
    ki = kf.astype(I64)
    j = ki & (T.EXP_N - 1)
    k = ki >> 7
    th = _EXP_T_HI[j]
    tl = _EXP_T_LO[j]
    tail = rl * (1.0 + rh) + rh * rh * horner(rh, _EXP_P)  # p = exp(r) - 1 = rh + tail
    if exact:
        a, b = two_prod(th, rh)
    else:
        a = th * rh
        b = 0.0
    s = b + th * tail + tl * (1.0 + (rh + tail))
    hi, lo = fast_two_sum(th, a)
    hi, lo = fast_two_sum(hi, lo + s)
    return hi, lo, k


def exp_dd_scaled(zh, zl, shift=0):
    """exp(zh + zl) * 2**shift rounded to double: overflow, underflow and NaN handled."""
    bad = np.isnan(zh)
    z = np.clip(np.where(bad, 0.0, zh), EXP_ARG_MIN - 4, EXP_ARG_MAX + 4)
    zl = np.where(z == zh, zl, 0.0)
    hi, lo, k = exp_parts(z, zl)
    out = scale2(hi + lo, k + shift)
    return np.where(bad, zh, out)


@elementwise
def exp(x):
    """e**x."""
    return exp_dd_scaled(x, 0.0)


@elementwise
def expm1(x):
    """e**x - 1, accurate near 0; expm1(-0) = -0."""
    big = x > 700.0
    z = np.clip(np.where(np.isnan(x), 0.0, x), -60.0, 700.0)
    hi, lo, k = exp_parts(z, 0.0, exact=True)
    s = pow2(k)
    H = hi * s  # exact: k in [-87, 1010]
    L = lo * s
    a, b = two_sum(H, -1.0)
    out = a + (b + L)
    out = np.where(big, exp_dd_scaled(np.where(big, x, 0.0), 0.0), out)
    out = np.where(x == 0.0, x, out)
    return np.where(np.isnan(x), x, out)


# --- log core ---------------------------------------------------------------------------------


def log_dd(ah, al):
    """log(ah + al) as a double-double, for finite ah > 0 (subnormal allowed), |al| <= ulp(ah).

    Absolute error about 2**-76 plus a relative 2**-68: near 1 the result keeps its relative
    accuracy (log(1 + d) with d exact).
    """
    sub = ah < 2.2250738585072014e-308
    a = np.where(sub, ah * _TWO54, ah)
    d = np.where(sub, al * _TWO54, al) / a  # log(ah + al) = log(a) + log1p(d)
    bits = a.view(I64)
    e = ((bits >> 52) & 0x7FF) - np.where(sub, 1023 + 54, 1023)
    m = ((bits & _MANT) | _ONE_BITS).view(F64)
    i = np.rint((m - 1.0) * T.LOG_N).astype(I64)
    c = _LOG_C[i]
    ef = (e + _LOG_SHIFT[i]).astype(F64)
    ph, pl = two_prod(m, c)
    rh, rl = fast_two_sum(ph - 1.0, pl)  # ph - 1 exact (Sterbenz), a multiple of ulp(ph)
    rl = rl + d * (1.0 + rh)  # log1p(r) + log1p(d) = log1p(r + d + r d)
    rh, rl = fast_two_sum(rh, rl)
    rr = rh + rl
    sh, sl = two_square(rh)
    sl = sl + rl * (rh + rr)
    tail3 = rr * rr * rr * horner(rr, _LOG_P)
    h, l = fast_two_sum(rh, -0.5 * sh)
    l = l + ((rl - 0.5 * sl) + tail3)
    s1, e1 = two_sum(ef * _LN2_HI, _LOG_T_HI[i])
    s2, e2 = two_sum(s1, h)
    lo = ((e1 + e2) + (ef * _LN2_LO + _LOG_T_LO[i])) + l
    return fast_two_sum(s2, lo)


@elementwise
def log(x):
    """Natural logarithm: log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(1) = +0."""
    ok = (x > 0.0) & (x < np.inf)
    hi, lo = log_dd(np.where(ok, x, 1.0), 0.0)
    out = hi + lo
    out = np.where(x == 0.0, -np.inf, out)
    out = np.where(x < 0.0, np.nan, out)
    out = np.where(x == np.inf, np.inf, out)
    return np.where(np.isnan(x), x, out)


def log1p_dd(uh, ul):
    """log(1 + uh + ul) as a double-double, for uh > -1 finite."""
    ah, e = two_sum(1.0, uh)
    ah, al = fast_two_sum(ah, e + ul)
    return log_dd(ah, al)


@elementwise
def log1p(x):
    """log(1 + x), accurate near 0: log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(-0) = -0."""
    ok = (x > -1.0) & (x < np.inf)
    hi, lo = log1p_dd(np.where(ok, x, 0.0), 0.0)
    out = hi + lo
    out = np.where(x == -1.0, -np.inf, out)
    out = np.where(x < -1.0, np.nan, out)
    out = np.where(x == np.inf, np.inf, out)
    out = np.where(x == 0.0, x, out)
    return np.where(np.isnan(x), x, out)


# --- power ------------------------------------------------------------------------------------


def _integer_kind(y):
    """(is an integer, is an odd integer) for finite or infinite y."""
    fin = np.isfinite(y)
    is_int = fin & (np.floor(y) == y)
    half = 0.5 * y
    is_odd = is_int & (np.floor(half) != half)
    return is_int, is_odd


@elementwise
def power(x, y):
    """x**y with C99 pow semantics (IEEE 754 pow special cases)."""
    is_int, is_odd = _integer_kind(y)
    ax = np.abs(x)
    finite_nz = (ax > 0.0) & (ax < np.inf)
    yc = np.clip(np.where(np.isfinite(y), y, 0.0), -(2.0**64), 2.0**64)
    lh, ll = log_dd(np.where(finite_nz, ax, 2.0), 0.0)
    zh, zl = dd_mul_d(lh, ll, yc)
    mag = exp_dd_scaled(zh, zl)
    neg = x < 0.0
    out = np.where(neg & is_odd, -mag, mag)
    out = np.where(neg & ~is_int, np.nan, out)
    # zero base: +-inf for y < 0, +-0 for y > 0; the sign survives only for odd integer y
    zero_mag = np.where(y < 0.0, np.inf, 0.0)
    signed = np.where(is_odd & (np.copysign(1.0, x) < 0.0), -zero_mag, zero_mag)
    out = np.where(ax == 0.0, signed, out)
    # infinite base: +inf**y = inf (y > 0) or 0 (y < 0); -inf**y likewise with odd-y sign
    inf_mag = np.where(y > 0.0, np.inf, 0.0)
    out = np.where(ax == np.inf, np.where((x < 0.0) & is_odd, -inf_mag, inf_mag), out)
    # infinite exponent: |x| < 1 -> 0 / inf, |x| > 1 -> inf / 0, |x| == 1 -> 1
    yinf = np.isinf(y)
    big = ax > 1.0
    pos = y > 0.0
    inf_exp = np.where(ax == 1.0, 1.0, np.where(big == pos, np.inf, 0.0))
    out = np.where(yinf, inf_exp, out)
    out = np.where(np.isnan(x) | np.isnan(y), np.nan, out)
    out = np.where((x == 1.0) | (y == 0.0), 1.0, out)
    return out


def expm1_dd(z):
    """exp(z) - 1 as a double-double for finite z in [-60, 700] (relative error ~2**-60)."""
    hi, lo, k = exp_parts(z, 0.0, exact=True)
    s = pow2(k)
    a, b = two_sum(hi * s, -1.0)
    return fast_two_sum(a, b + lo * s)
