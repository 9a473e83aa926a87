"""cbrt and erf.

cbrt: |x| = m 2**(3q + j), a = m 2**j in [1, 8); a linear first guess, three Halley steps (cubic
convergence, 8% -> 1e-4 -> 1e-12 -> full precision), then one Newton correction whose residual
a - y**3 is computed exactly in double-double: the result is correctly rounded except within
~2**-100 of a midpoint, and exact cubes give their exact root (cbrt(-27) = -3).

erf: |x| < 1/2: erf(x) = x G(x*x) with G a Chebyshev-interpolation fit (near-minimax) of degree
10 whose constant term is a double-double; 1/2 <= |x| < 6: 22 intervals of width 1/4, on each a
degree-12 fit of erf(c + h), |h| <= 1/8, with its constant term in double-double (fit errors
below 5e-20); |x| >= 6: +-1. The fits are made by ``_generate`` with mpmath.
"""

from __future__ import annotations

import numpy as np

from . import _tables as T
from ._core import (
    dd_const,
    elementwise,
    exponent_of,
    fast_two_sum,
    hexarray,
    horner,
    pow2,
    two_prod,
    two_square,
)

_TWO54 = 2.0**54


@elementwise
def cbrt(x):
    """Real cube root; cbrt(+-0) = +-0, cbrt(+-inf) = +-inf."""
    ax = np.abs(x)
    ok = (ax > 0.0) & (ax < np.inf)
    a = np.where(ok, ax, 1.0)
    sub = a < 2.2250738585072014e-308
    a = np.where(sub, a * _TWO54, a)  # cbrt(2**54) = 2**18
    e = exponent_of(a)
    q = e // 3
    j = e - 3 * q
    m1 = ((a.view(np.int64) & ((1 << 52) - 1)) | (1023 << 52)).view(np.float64)  # [1, 2)
    m = m1 * pow2(j)  # in [1, 8), exact
    y = 0.75 + 0.25 * m  # within 9% of cbrt(m) on [1, 8)
    for _ in range(3):
        y3 = y * y * y
        y = y * ((y3 + 2.0 * m) / (2.0 * y3 + m))
    y2h, y2l = two_square(y)
    y3h, y3l = two_prod(y, y2h)
    y3l = y3l + y * y2l
    r = (m - y3h) - y3l  # m - y3h exact (Sterbenz)
    y = y + r / (3.0 * y2h)
    v = y * pow2(q - np.where(sub, 18, 0))
    v = np.where(ok, v, ax)
    v = np.where(np.signbit(x), -v, v)
    return np.where(np.isnan(x), x, v)


_G0H, _G0L = dd_const(T.ERF_G0_DD)
_ERF_G = [float.fromhex(v) for v in T.ERF_G]
_ERF_A0_HI = hexarray(T.ERF_A0_HI)
_ERF_A0_LO = hexarray(T.ERF_A0_LO)
_ERF_A = [hexarray(col) for col in zip(*T.ERF_A)]  # _ERF_A[k][i]: coefficient of h**(k+1)
_ERF_N = len(T.ERF_A)


@elementwise
def erf(x):
    """The error function; erf(+-0) = +-0, erf(+-inf) = +-1."""
    ax = np.abs(x)
    small = ax < 0.5
    a = np.where(small, ax, 0.0)
    s = a * a
    up = a < 2.0**-900  # Dekker's product must not underflow: work on a * 2**600
    au = np.where(up, a * 2.0**600, a)
    ph, pl = two_prod(au, _G0H)
    v_small = ph + (pl + au * (_G0L + s * horner(s, _ERF_G)))
    v_small = np.where(up, v_small * 2.0**-600, v_small)
    mid = ~small & (ax < T.ERF_START + _ERF_N * T.ERF_WIDTH)
    b = np.where(mid, ax, T.ERF_START)
    i = np.floor((b - T.ERF_START) * (1.0 / T.ERF_WIDTH)).astype(np.int64)
    i = np.minimum(i, _ERF_N - 1)
    h = b - (T.ERF_START + T.ERF_WIDTH * (i + 0.5))  # exact
    acc = _ERF_A[-1][i]
    for col in reversed(_ERF_A[:-1]):
        acc = acc * h + col[i]
    hi, lo = fast_two_sum(_ERF_A0_HI[i], h * acc)
    v_mid = hi + (lo + _ERF_A0_LO[i])
    v = np.where(small, v_small, np.where(mid, v_mid, 1.0))
    v = np.where(np.signbit(x), -v, v)
    return np.where(np.isnan(x), x, v)
