"""sinh, cosh, tanh, asinh, acosh, atanh and the logistic function.

All are written on the double-double cores of ``exp_log`` (exp, expm1, log of a double-double)
so that cancellations happen in double-double and the final rounding is the only large error:
  sinh |x| = (E + E/(E + 1)) / 2 with E = expm1|x| (|x| < 22), else exp|x| / 2;
  cosh |x| = (e + 1/e) / 2 with e = exp|x| (|x| < 22), else exp|x| / 2;
  tanh |x| = E / (E + 2) with E = expm1(2|x|) (|x| < 22), else 1;
  asinh |x| = log1p(|x| + x*x / (1 + sqrt(1 + x*x))) (|x| < 2**28), else log|x| + ln 2;
  acosh x = log(x + sqrt(x*x - 1)) (x < 2**28), else log x + ln 2;
  atanh |x| = log1p(2|x| / (1 - |x|)) / 2;
  logistic x = e / (1 + e) (x < 0) or 1 / (1 + e) (x >= 0) with e = exp(-|x|).
"""

from __future__ import annotations

import numpy as np

from ._core import (
    LN2_HI_DD,
    LN2_LO_DD,
    dd_add,
    dd_add_d,
    dd_div,
    dd_sqrt,
    elementwise,
    fast_two_sum,
    pow2,
    scale2,
    two_square,
    two_sum,
)
from .exp_log import exp_dd_scaled, exp_parts, expm1_dd, log1p_dd, log_dd

_BIG = 22.0
_LOG_BIG = 2.0**28


def _signed(x, v):
    v = np.where(np.signbit(x), -v, v)
    return np.where(np.isnan(x), x, v)


@elementwise
def sinh(x):
    """sinh x; sinh(+-0) = +-0, overflow to +-inf."""
    ax = np.abs(x)
    small = ax < _BIG
    eh, el = expm1_dd(np.where(small, ax, 0.0))
    dh, dl = dd_add_d(eh, el, 1.0)
    qh, ql = dd_div(eh, el, dh, dl)
    sh, sl = dd_add(eh, el, qh, ql)
    v_small = 0.5 * (sh + sl)
    v_big = exp_dd_scaled(np.where(small, _BIG, ax), 0.0, shift=-1)
    return _signed(x, np.where(small, v_small, v_big))


@elementwise
def cosh(x):
    """cosh x; cosh(+-inf) = +inf."""
    ax = np.abs(x)
    small = ax < _BIG
    hi, lo, k = exp_parts(np.where(small, ax, 0.0), 0.0)
    s = pow2(k)
    eh, el = hi * s, lo * s
    ih, il = dd_div(np.ones_like(eh), 0.0, eh, el)
    sh, sl = dd_add(eh, el, ih, il)
    v_small = 0.5 * (sh + sl)
    v_big = exp_dd_scaled(np.where(small, _BIG, ax), 0.0, shift=-1)
    v = np.where(small, v_small, v_big)
    return np.where(np.isnan(x), x, v)


@elementwise
def tanh(x):
    """tanh x; tanh(+-0) = +-0, tanh(+-inf) = +-1."""
    ax = np.abs(x)
    small = ax < _BIG
    eh, el = expm1_dd(np.where(small, 2.0 * ax, 0.0))
    dh, dl = dd_add_d(eh, el, 2.0)
    qh, ql = dd_div(eh, el, dh, dl)
    return _signed(x, np.where(small, qh + ql, 1.0))


@elementwise
def logistic(x):
    """1 / (1 + exp(-x)), the mathematical value correctly rounded up to ~1 ulp; logistic(-inf)
    = +0, logistic(+inf) = 1, gradual underflow for x < -708."""
    z = -np.abs(np.where(np.isnan(x), 0.0, x))
    z = np.maximum(z, -760.0)
    hi, lo, k = exp_parts(z, 0.0)  # exp(z) = (hi + lo) 2**k, k <= 0
    s = pow2(np.maximum(k, -1022))
    s = np.where(k < -1022, 0.0, s)
    dh, dl = two_sum(1.0, hi * s)
    dh, dl = fast_two_sum(dh, dl + lo * s)  # 1 + exp(z)
    neg = x < 0.0
    nh = np.where(neg, hi, 1.0)
    nl = np.where(neg, lo, 0.0)
    qh, ql = dd_div(nh, nl, dh, dl)
    v = scale2(qh + ql, np.where(neg, k, 0))
    return np.where(np.isnan(x), x, v)


def _log_2x(ax):
    """log(2 ax) for large finite ax, as a double."""
    h, l = log_dd(ax, 0.0)
    s, e = two_sum(h, LN2_HI_DD)
    return s + (e + (l + LN2_LO_DD))


@elementwise
def asinh(x):
    """asinh x; asinh(+-0) = +-0, asinh(+-inf) = +-inf."""
    ax = np.abs(x)
    small = ax < _LOG_BIG
    a = np.where(small, ax, 0.0)
    sh, sl = two_square(a)
    th, tl = dd_add_d(sh, sl, 1.0)
    rh, rl = dd_sqrt(th, tl)
    dh, dl = dd_add_d(rh, rl, 1.0)
    qh, ql = dd_div(sh, sl, dh, dl)
    uh, ul = dd_add_d(qh, ql, a)
    lh, ll = log1p_dd(uh, ul)
    fin = ax < np.inf
    v_big = np.where(fin, _log_2x(np.where(small | ~fin, 2.0, ax)), np.inf)
    return _signed(x, np.where(small, lh + ll, v_big))


@elementwise
def acosh(x):
    """acosh x; acosh(1) = +0, acosh(+inf) = +inf, NaN below 1."""
    small = x < _LOG_BIG
    ok = x >= 1.0
    a = np.where(small & ok, x, 1.0)
    sh, sl = two_square(a)
    dh, dl = dd_add_d(sh, sl, -1.0)
    pos = dh > 0.0
    rh, rl = dd_sqrt(np.where(pos, dh, 1.0), np.where(pos, dl, 0.0))
    rh = np.where(pos, rh, 0.0)
    rl = np.where(pos, rl, 0.0)
    ah, al = dd_add_d(rh, rl, a)
    lh, ll = log_dd(ah, al)
    fin = x < np.inf
    v_big = np.where(fin, _log_2x(np.where(small | ~fin, 2.0, x)), np.inf)
    v = np.where(small, lh + ll, v_big)
    v = np.where(ok, v, np.nan)
    return np.where(np.isnan(x), x, v)


@elementwise
def atanh(x):
    """atanh x; atanh(+-0) = +-0, atanh(+-1) = +-inf, NaN outside [-1, 1]."""
    ax = np.abs(x)
    ok = ax < 1.0
    a = np.where(ok, ax, 0.0)
    dh, dl = two_sum(1.0, -a)
    vh, vl = dd_div(2.0 * a, 0.0, dh, dl)
    lh, ll = log1p_dd(vh, vl)
    v = 0.5 * (lh + ll)
    v = np.where(ax == 1.0, np.inf, np.where(ok, v, np.nan))
    return _signed(x, v)
