"""sin, cos, tan with argument reduction that is right over the whole double range.

Reduction x = n pi/2 + r, |r| <= pi/4, r as a double-double:
  * |x| < 2**19: Cody-Waite with pi/2 in three 33-bit pieces and a fourth double (n * piece is
    exact), the differences kept exactly with two_sum: about 150 bits of pi/2, enough for the
    worst cancellation of any double (about 2**-61 relative to x).
  * |x| >= 2**19: Payne-Hanek. x = M 2**E with M a 53-bit integer; only the bits of 2/pi that
    can contribute to x*2/pi mod 4 are used (24-bit limbs, a generated table of exact bits):
    M (three 24-bit limbs) times 10 limbs of 2/pi is summed exactly in int64 with carries,
    which gives x*2/pi mod 4 to about 2**-140 absolute.
Kernels: Taylor polynomials on |r| <= pi/4 (sin to r**17, cos to r**18), with the leading terms
and the low part of r in double-double; tan = sin / cos (or -cos / sin) as a double-double
quotient.
"""

from __future__ import annotations

import numpy as np

from . import _tables as T
from ._core import (
    F64,
    I64,
    PIO2_HI,
    PIO2_LO,
    dd_div,
    elementwise,
    fast_two_sum,
    hexarray,
    hexf,
    horner,
    pow2,
    two_prod,
    two_square,
    two_sum,
)

_C1, _C2, _C3, _C4 = (float.fromhex(v) for v in T.PIO2_CW)
_TWO_OVER_PI = hexf(T.TWO_OVER_PI)
_CW_LIMIT = 2.0**19

# 2/pi limbs, with two zero limbs in front so that the table index is never negative
_G = np.array([0, 0] + list(T.TWO_OVER_PI_LIMBS), dtype=I64)
_NJ = 10  # limbs of 2/pi used per element
_NT = 8  # limbs of the product kept (the weight of the last one is 2**(s - 168))
_MASK24 = (1 << 24) - 1

_FACT = [1.0]
for _k in range(1, 30):
    _FACT.append(_FACT[-1] * _k)
# sin(r) = r + r**3 S(r**2); cos(r) = 1 - r**2/2 + r**4 C(r**2)
_SIN = [(-1.0) ** k / _FACT[2 * k + 1] for k in range(1, 9)]
_COS = [(-1.0) ** k / _FACT[2 * k] for k in range(2, 10)]


def _reduce_small(ax):
    n = np.rint(ax * _TWO_OVER_PI)
    t1 = ax - n * _C1  # exact
    s, e = two_sum(t1, -(n * _C2))
    s, e2 = two_sum(s, -(n * _C3))
    e = (e + e2) - n * _C4
    rh, rl = fast_two_sum(s, e)
    return rh, rl, n.astype(I64)


def _reduce_large(ax):
    """Payne-Hanek for ax >= 2**7 (finite): (rh, rl, n) with ax = n pi/2 + rh + rl."""
    bits = ax.view(I64)
    e = ((bits >> 52) & 0x7FF) - 1075 + 48  # ax = M 2**(e - 48); +48: the two zero limbs
    m = (bits & ((1 << 52) - 1)) | (1 << 52)
    k0 = (e - 2) // 24
    s = e - 24 * k0 - 24  # weight of limb 0 of the product is 2**s, s in [-22, 1]
    g = _G[k0[:, None] + np.arange(_NJ)]
    m0 = (m & _MASK24)[:, None]
    m1 = ((m >> 24) & _MASK24)[:, None]
    m2 = (m >> 48)[:, None]
    c = m0 * g[:, 0:_NT] + m1 * g[:, 1 : _NT + 1] + m2 * g[:, 2 : _NT + 2]
    limbs = [None] * _NT
    carry = np.zeros(len(ax), dtype=I64)
    for t in range(_NT - 1, 0, -1):
        v = c[:, t] + carry
        limbs[t] = v & _MASK24
        carry = v >> 24
    limbs[0] = (c[:, 0] + carry) & ((np.int64(1) << (2 - s)) - 1)  # mod 4
    f = lambda hi, lo, w: (hi * (1 << 24) + lo).astype(F64) * pow2(s + w)  # noqa: E731
    fa = f(limbs[0], limbs[1], -24)
    fb = f(limbs[2], limbs[3], -72)
    fc = f(limbs[4], limbs[5], -120)
    fd = f(limbs[6], limbs[7], -168)
    n = np.floor(fa + 0.5)
    t0 = fa - n  # exact
    h, l1 = two_sum(t0, fb)
    h, l2 = two_sum(h, fc)
    rh, rl = fast_two_sum(h, (l1 + l2) + fd)
    # times pi/2
    p, pe = two_prod(rh, PIO2_HI)
    pe = pe + (rh * PIO2_LO + rl * PIO2_HI)
    rh, rl = fast_two_sum(p, pe)
    return rh, rl, n.astype(I64)


def reduce_pio2(ax):
    """|x| = n pi/2 + rh + rl with |rh + rl| <= pi/4 (about), for finite ax >= 0."""
    big = ax >= _CW_LIMIT
    rh, rl, n = _reduce_small(np.where(big, 0.0, ax))
    if big.any():
        idx = np.nonzero(big)[0]
        bh, bl, bn = _reduce_large(ax[idx])
        rh[idx] = bh
        rl[idx] = bl
        n[idx] = bn
    return rh, rl, n & 3


def sin_kernel(rh, rl):
    z = rh * rh
    tail = rh * z * horner(z, _SIN) + rl * (1.0 - 0.5 * z)
    return fast_two_sum(rh, tail)


def cos_kernel(rh, rl):
    zh, zl = two_square(rh)
    hz = 0.5 * zh
    w, we = fast_two_sum(1.0, -hz)
    tail = we + ((zh * zh * horner(zh, _COS) - 0.5 * zl) - rh * rl)
    return fast_two_sum(w, tail)


def _prepare(x):
    ax = np.abs(x)
    fin = ax < np.inf
    rh, rl, q = reduce_pio2(np.where(fin, ax, 0.0))
    return ax, fin, rh, rl, q


@elementwise
def sin(x):
    """sin x; sin(+-0) = +-0, sin(+-inf) = NaN."""
    ax, fin, rh, rl, q = _prepare(x)
    sh, sl = sin_kernel(rh, rl)
    ch, cl = cos_kernel(rh, rl)
    v = np.where((q & 1) == 1, ch + cl, sh + sl)
    v = np.where(q >= 2, -v, v)
    v = np.where(np.signbit(x), -v, v)
    return np.where(fin, v, np.nan + x * 0.0)


@elementwise
def cos(x):
    """cos x; cos(+-inf) = NaN."""
    ax, fin, rh, rl, q = _prepare(x)
    sh, sl = sin_kernel(rh, rl)
    ch, cl = cos_kernel(rh, rl)
    v = np.where((q & 1) == 1, sh + sl, ch + cl)
    v = np.where((q == 1) | (q == 2), -v, v)
    return np.where(fin, v, np.nan + x * 0.0)


@elementwise
def tan(x):
    """tan x; tan(+-0) = +-0, tan(+-inf) = NaN."""
    ax, fin, rh, rl, q = _prepare(x)
    sh, sl = sin_kernel(rh, rl)
    ch, cl = cos_kernel(rh, rl)
    odd = (q & 1) == 1
    nh = np.where(odd, ch, sh)
    nl = np.where(odd, cl, sl)
    dh = np.where(odd, sh, ch)
    dl = np.where(odd, sl, cl)
    th, tl = dd_div(nh, nl, dh, dl)
    v = th + tl
    v = np.where(odd, -v, v)
    v = np.where(np.signbit(x), -v, v)
    return np.where(fin, v, np.nan + x * 0.0)
