"""atan, atan2, asin, acos.

Core: atan(t) for t in [0, 1] given as a double-double: c = i/16 nearest to t, then
atan(t) = atan(c) + atan(u) with u = (t - c) / (1 + t c) in double-double (|u| <= 1/32; t - c is
exact by Sterbenz's lemma) and atan(u) by its Taylor polynomial to u**13 (truncation below
2**-70 relative); atan(c) comes from a double-double table. Everything else is a ratio of two
non-negative numbers in [0, 1] fed to that core and the octant's pi/2 or pi added in
double-double: atan2(y, x) from |y| and |x| (scaled by a power of two, exactly), asin and acos
from x and sqrt(1 - x*x) with 1 - x*x and the square root in double-double.
"""

from __future__ import annotations

import numpy as np

from . import _tables as T
from ._core import (
    PI_HI,
    PI_LO,
    PIO2_HI,
    PIO2_LO,
    dd_div,
    dd_sqrt,
    elementwise,
    exponent_of,
    fast_two_sum,
    hexarray,
    horner,
    pow2,
    two_prod,
    two_square,
    two_sum,
)

_ATAN_T_HI = hexarray(T.ATAN_T_HI)
_ATAN_T_LO = hexarray(T.ATAN_T_LO)
_ATAN_P = [(-1.0) ** k / (2 * k + 1) for k in range(1, 7)]  # atan(u) = u + u**3 P(u*u)


def atan_dd(th, tl):
    """atan(th + tl) as a double-double, for 0 <= th <= 1."""
    i = np.rint(th * T.ATAN_N)
    c = i / T.ATAN_N
    nh, nl = two_sum(th - c, tl)  # th - c exact
    p, pe = two_prod(th, c)
    pe = pe + tl * c
    dh, de = fast_two_sum(1.0, p)
    dh, dl = fast_two_sum(dh, de + pe)
    uh, ul = dd_div(nh, nl, dh, dl)
    z = uh * uh
    tail = uh * z * horner(z, _ATAN_P) + ul * (1.0 - z)
    ah, al = fast_two_sum(uh, tail)
    k = i.astype(np.int64)
    s, e = two_sum(_ATAN_T_HI[k], ah)
    return fast_two_sum(s, e + (al + _ATAN_T_LO[k]))


def _sub_from(ch, cl, ah, al):
    """(ch + cl) - (ah + al) in double-double."""
    s, e = two_sum(ch, -ah)
    return fast_two_sum(s, e + (cl - al))


def angle_of(nh, nl, dh, dl):
    """atan((nh + nl) / (dh + dl)) in [0, pi/2] as a double-double, for non-negative finite
    arguments of magnitude in [2**-500, 2**500] or zero, not both zero."""
    swap = nh > dh
    th = np.where(swap, dh, nh)
    tl = np.where(swap, dl, nl)
    bh = np.where(swap, nh, dh)
    bl = np.where(swap, nl, dl)
    zero = th == 0.0
    qh, ql = dd_div(th, tl, np.where(zero, 1.0, bh), np.where(zero, 0.0, bl))
    qh = np.where(zero, 0.0, qh)
    ql = np.where(zero, 0.0, ql)
    ah, al = atan_dd(qh, ql)
    sh, sl = _sub_from(PIO2_HI, PIO2_LO, ah, al)
    return np.where(swap, sh, ah), np.where(swap, sl, al)


@elementwise
def atan(x):
    """atan x; atan(+-0) = +-0, atan(+-inf) = +-pi/2."""
    ax = np.abs(x)
    inv = ax > 1.0
    axc = np.clip(ax, 1.0, 2.0**500)
    q = 1.0 / axc
    p, e = two_prod(q, axc)
    ql = ((1.0 - p) - e) / axc
    th = np.where(inv, np.where(ax == np.inf, 0.0, q), ax)
    tl = np.where(inv & (ax < 2.0**500), ql, 0.0)
    ah, al = atan_dd(np.where(np.isnan(x), 0.0, th), tl)
    sh, sl = _sub_from(PIO2_HI, PIO2_LO, ah, al)
    v = np.where(inv, sh + sl, ah + al)
    v = np.where(np.signbit(x), -v, v)
    return np.where(np.isnan(x), x, v)


@elementwise
def atan2(y, x):
    """The angle of the point (x, y): C99 atan2, all signed-zero and infinite cases included."""
    ay = np.abs(y)
    ax = np.abs(x)
    both_inf = (ay == np.inf) & (ax == np.inf)
    big = np.maximum(ay, ax)
    # scale both by one power of two (exactly) so that the larger is in [1, 2)
    fin = (big > 0.0) & (big < np.inf)
    bs = np.where(fin, big, 1.0)
    pre = np.where(bs < 2.0**-1000, 2.0**54, 1.0)  # subnormal: make the larger normal first
    k = -exponent_of(bs * pre)
    s1 = pre * pow2(k >> 1)
    s2 = pow2(k - (k >> 1))
    ny = np.where(ay == np.inf, np.where(both_inf, 1.0, 2.0), np.where(ax == np.inf, 0.0, (ay * s1) * s2))
    nx = np.where(ax == np.inf, np.where(both_inf, 1.0, 2.0), np.where(ay == np.inf, 0.0, (ax * s1) * s2))
    nan = np.isnan(x) | np.isnan(y)
    ny = np.where(nan, 0.0, ny)
    nx = np.where(nan, 1.0, nx)
    zero = (ny == 0.0) & (nx == 0.0)
    ah, al = angle_of(ny, 0.0, np.where(zero, 1.0, nx), 0.0)
    sh, sl = _sub_from(PI_HI, PI_LO, ah, al)
    neg_x = np.signbit(x)
    v = np.where(neg_x, sh + sl, ah + al)
    # |y/x| < 2**-500 with x > 0: atan2 = y/x to far below an ulp, and IEEE division rounds it
    # once (the scaled numerator could have lost bits as a subnormal)
    q = ay / np.where(ax > 0.0, ax, 1.0)
    tiny = (q < 2.0**-500) & (ax > 0.0) & (ax < np.inf) & (ay < np.inf) & ~neg_x
    v = np.where(tiny, q, v)
    v = np.where(np.signbit(y), -v, v)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, v)


def _cos_side(x):
    """sqrt(1 - x*x) as a double-double for |x| <= 1 (0 at |x| == 1)."""
    sh, sl = two_square(x)
    dh, de = fast_two_sum(1.0, -sh)
    dh, dl = fast_two_sum(dh, de - sl)
    pos = dh > 0.0
    rh, rl = dd_sqrt(np.where(pos, dh, 1.0), np.where(pos, dl, 0.0))
    return np.where(pos, rh, 0.0), np.where(pos, rl, 0.0)


@elementwise
def asin(x):
    """asin x; asin(+-0) = +-0, NaN outside [-1, 1]."""
    ax = np.abs(x)
    ok = ax <= 1.0
    a = np.where(ok, ax, 0.0)
    ch, cl = _cos_side(a)
    ah, al = angle_of(a, 0.0, ch, cl)
    v = ah + al
    v = np.where(np.signbit(x), -v, v)
    return np.where(ok, v, np.nan)


@elementwise
def acos(x):
    """acos x; acos(1) = +0, NaN outside [-1, 1]."""
    ax = np.abs(x)
    ok = ax <= 1.0
    a = np.where(ok, ax, 0.0)
    ch, cl = _cos_side(a)
    ah, al = angle_of(ch, cl, a, 0.0)
    sh, sl = _sub_from(PI_HI, PI_LO, ah, al)
    v = np.where(x < 0.0, sh + sl, ah + al)
    return np.where(ok, v, np.nan)
