"""Deterministic transcendental functions: the same bits on every x86-64 and aarch64 CPU.

Why: numpy picks SIMD loops by CPU at run time, and its float32 (and several float64)
transcendental loops give different bits with AVX-512, AVX2 or neither (f32 cbrt(-27) is
-2.9999998 on one machine and -3.0 on another). A simulator must not depend on the machine.

What: vectorized functions on float64 arrays (any shape and size, broadcasting for the
two-argument ones) built only from operations whose results IEEE 754 fixes: +, -, *, /, sqrt
(correctly rounded) and exact ones (comparisons, where, abs, floor, rint, bit and integer
operations). numpy never fuses a*b + c across ufunc calls, so double-double arithmetic (Knuth's
two_sum, Dekker's product) is exact on every machine. NaN results are one canonical NaN.

Accuracy: below about 1 float64 ulp (measured maxima 0.5 to 0.92 ulp against mpmath, see
``scripts/numerics_accuracy.py``), so a float32 input evaluated in float64 and rounded to float32
gives the correctly rounded float32 result except in rare double-rounding cases (none in the
samples measured). C99 Annex F special values throughout:
signed zeros, infinities, NaN, domain errors (NaN), poles (+-inf), overflow and gradual underflow.

Functions: exp, expm1, log, log1p, power, sin, cos, tan, asin, acos, atan, atan2, sinh, cosh,
tanh, asinh, acosh, atanh, logistic, cbrt, erf.
"""

from .transcendental import (
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cbrt,
    cos,
    cosh,
    erf,
    exp,
    expm1,
    log,
    log1p,
    logistic,
    power,
    sin,
    sinh,
    tan,
    tanh,
)

__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cos", "cosh", "erf",
    "exp", "expm1", "log", "log1p", "logistic", "power", "sin", "sinh", "tan", "tanh",
]
