"""Building blocks of the deterministic functions: error-free transformations (double-double
arithmetic), exact scaling by powers of two, and the block-wise vectorized driver.

Everything here uses only IEEE-754 basic operations on float64 (+, -, *, /, sqrt: correctly
rounded, so identical on every CPU) and exact operations (comparisons, where, rint, floor, integer
and bit operations). numpy never contracts ``a * b + c`` into a fused multiply-add across separate
ufunc calls, so Dekker's product below is exact on every machine.
"""

from __future__ import annotations

import functools

import numpy as np

from . import _tables as T

F64 = np.float64
I64 = np.int64

#: elements per block: the temporaries of one block stay in the CPU caches
BLOCK = 8192

_SPLITTER = 134217729.0  # 2**27 + 1


def hexf(s: str) -> float:
    return float.fromhex(s)


def hexarray(values) -> np.ndarray:
    return np.array([float.fromhex(v) for v in values], dtype=F64)


def dd_const(pair) -> tuple[float, float]:
    return float.fromhex(pair[0]), float.fromhex(pair[1])


PIO2_HI, PIO2_LO = dd_const(T.PIO2_DD)
PI_HI, PI_LO = dd_const(T.PI_DD)
PIO4_HI, PIO4_LO = dd_const(T.PIO4_DD)
LN2_HI_DD, LN2_LO_DD = dd_const(T.LN2_DD)


# --- error-free transformations ------------------------------------------------------------


def two_sum(a, b):
    """s + e == a + b exactly, s = RN(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fast_two_sum(a, b):
    """s + e == a + b exactly when |a| >= |b| or a == 0 (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


def split(a):
    """a == hi + lo with hi, lo of at most 26 bits (|a| < 2**995)."""
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


def two_prod(a, b):
    """p + e == a * b exactly, p = RN(a * b) (Dekker; no underflow, |a|, |b| < 2**995)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def two_square(a):
    p = a * a
    ah, al = split(a)
    e = ((ah * ah - p) + 2.0 * (ah * al)) + al * al
    return p, e


def dd_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl) in double-double (relative error ~2**-104 without cancellation)."""
    s, e = two_sum(ah, bh)
    e = e + (al + bl)
    return fast_two_sum(s, e)


def dd_add_d(ah, al, b):
    s, e = two_sum(ah, b)
    return fast_two_sum(s, e + al)


def dd_mul(ah, al, bh, bl):
    p, e = two_prod(ah, bh)
    e = e + (ah * bl + al * bh)
    return fast_two_sum(p, e)


def dd_mul_d(ah, al, b):
    p, e = two_prod(ah, b)
    return fast_two_sum(p, e + al * b)


def dd_div(ah, al, bh, bl):
    """(ah + al) / (bh + bl), relative error ~2**-100 (one correction step)."""
    q = ah / bh
    p, e = two_prod(q, bh)
    r = (((ah - p) - e) + al) - q * bl
    return fast_two_sum(q, r / bh)


def dd_sqrt(ah, al):
    """sqrt(ah + al) for ah > 0 as a double-double (one Newton correction)."""
    s = np.sqrt(ah)
    p, e = two_square(s)
    c = (((ah - p) - e) + al) / (2.0 * s)
    return fast_two_sum(s, c)


def horner(x, coeffs):
    """sum(coeffs[k] * x**k), coefficients as Python floats, lowest degree first."""
    acc = np.full_like(x, coeffs[-1]) if np.ndim(x) else coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = acc * x + c
    return acc


# --- powers of two ---------------------------------------------------------------------------


def pow2(k):
    """2.0**k for integer arrays k in [-1022, 1023] (built from the exponent bits)."""
    return ((np.asarray(k, dtype=I64) + 1023) << 52).view(F64)


def scale2(v, k):
    """v * 2**k correctly rounded (one rounding) for |v| in [2**-60, 2**60], k in [-2000, 2000].

    Two multiplications: the first by 2**(k//2) is exact (the intermediate stays normal), the
    second rounds once (gradual underflow into subnormals, or overflow to inf).
    """
    k = np.asarray(k, dtype=I64)
    k = np.clip(k, -2000, 2000)
    k1 = k >> 1
    return (v * pow2(np.clip(k1, -1022, 1023))) * pow2(np.clip(k - k1, -1022, 1023))


def exponent_of(x):
    """floor(log2|x|) for finite nonzero normal x (from the bits)."""
    return ((x.view(I64) >> 52) & 0x7FF) - 1023


# --- vectorized driver ------------------------------------------------------------------------


def _as_f64(x) -> np.ndarray:
    return np.asarray(x, dtype=F64)


def elementwise(fn):
    """Make ``fn`` (1-d float64 arrays in, one float64 array out) take any shape, run in blocks."""

    @functools.wraps(fn)
    def wrapper(*args):
        arrays = np.broadcast_arrays(*[_as_f64(a) for a in args])
        shape = arrays[0].shape
        flats = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
        n = flats[0].size
        out = np.empty(n, dtype=F64)
        with np.errstate(all="ignore"):
            for start in range(0, n, BLOCK):
                stop = min(n, start + BLOCK)
                v = fn(*[f[start:stop] for f in flats])
                # one NaN for every NaN result: payloads and signs of NaNs made by arithmetic
                # differ between CPU architectures
                out[start:stop] = np.where(v != v, np.nan, v)
        return out.reshape(shape)

    return wrapper
