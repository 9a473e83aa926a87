"""Correctly rounded reference values from mpmath, for the tests and the accuracy script.

Not used by the functions themselves: ``mpmath`` (a dev dependency) is imported on first use.
Each reference is the mathematical function evaluated by mpmath at ``PREC`` bits, then rounded
once, with integer arithmetic, to the nearest float32 or float64 (ties to even, gradual
underflow, overflow to inf). mpmath's value is within about 2**-PREC (relative) of the true one,
which decides the rounding unless the true value is that close to a rounding boundary: at float
inputs that happens only for exact results, which mpmath gets exactly here (integer and
half-integer powers, cube roots of cubes, log(1)...).
"""

from __future__ import annotations

import math

import numpy as np

PREC = 160

# (name, number of arguments, mpmath evaluator): the evaluators take mpf arguments
_FORMATS = {
    "f32": (24, -149, 128),  # precision, exponent of the smallest subnormal, overflow exponent
    "f64": (53, -1074, 1024),
}


def _mp():
    import mpmath

    return mpmath


def _functions():
    mp = _mp()

    def logistic(x):
        return 1 / (1 + mp.exp(-x))

    def power(x, y):
        return _mp_pow(mp, x, y)

    def atan2(y, x):
        return mp.atan2(y, x)

    return {
        "exp": mp.exp,
        "expm1": mp.expm1,
        "log": mp.log,
        "log1p": mp.log1p,
        "sin": mp.sin,
        "cos": mp.cos,
        "tan": mp.tan,
        "tanh": mp.tanh,
        "sinh": mp.sinh,
        "cosh": mp.cosh,
        "asin": mp.asin,
        "acos": mp.acos,
        "atan": mp.atan,
        "atan2": atan2,
        "asinh": mp.asinh,
        "acosh": mp.acosh,
        "atanh": mp.atanh,
        "cbrt": lambda x: mp.cbrt(x) if x >= 0 else -mp.cbrt(-x),
        "logistic": logistic,
        "erf": mp.erf,
        "power": power,
    }


def _mp_pow(mp, x, y):
    if x == 0 or y == 0:
        raise ValueError("zero arguments of pow are special cases, not references")
    if x < 0:
        if y != int(y):
            return mp.nan
        n = int(y)
        mag = _mp_pow(mp, -x, y)
        return -mag if n % 2 else mag
    if y == int(y) and abs(y) < 2**20:
        return x ** int(y)
    if 2 * y == int(2 * y) and abs(y) < 2**20:
        return mp.sqrt(x) ** int(2 * y)  # exact when x is a perfect square
    return mp.exp(y * mp.log(x))


def round_mpf(v, fmt: str) -> float:
    """Round the finite nonzero mpf ``v`` to the nearest value of ``fmt`` ('f32' or 'f64')."""
    prec, qmin, emax = _FORMATS[fmt]
    sign, man, exp, bc = v._mpf_
    if man == 0:
        return -0.0 if sign else 0.0
    top = exp + bc - 1  # floor(log2 |v|)
    if top <= qmin - 2:  # below half the smallest subnormal
        return -0.0 if sign else 0.0
    if top >= emax:
        return -math.inf if sign else math.inf
    q = max(top - (prec - 1), qmin)
    if exp >= q:
        n, qq = man << (exp - q), q
    else:
        shift = q - exp
        n = man >> shift
        rem = man - (n << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and n & 1):
            n += 1
        qq = q
    if n == 0:
        return -0.0 if sign else 0.0
    if n.bit_length() + qq > emax:
        return -math.inf if sign else math.inf
    out = math.ldexp(n, qq)
    return -out if sign else out


def ulp_mpf(v, fmt: str):
    """The spacing of ``fmt`` numbers at |v| (the quantum of v's binade, subnormal aware)."""
    mp = _mp()
    prec, qmin, _ = _FORMATS[fmt]
    if v == 0:
        return mp.ldexp(1, qmin)
    sign, man, exp, bc = v._mpf_
    top = exp + bc - 1
    return mp.ldexp(1, max(top - (prec - 1), qmin))


def exact(name: str, *args):
    """The mpmath value (mpf at PREC bits) of function ``name`` at float arguments, or a float
    for the special values (inf, nan, signed zeros) the caller must decide itself: returns None
    when some argument is not finite."""
    mp = _mp()
    if not all(math.isfinite(a) for a in args):
        return None
    with mp.workprec(PREC):
        return _functions()[name](*[mp.mpf(a) for a in args])


def correctly_rounded(name: str, args: list[np.ndarray], fmt: str) -> np.ndarray:
    """The correctly rounded ``fmt`` results of ``name`` at finite arguments (float64 array)."""
    mp = _mp()
    fns = _functions()
    f = fns[name]
    out = np.empty(len(args[0]), dtype=np.float64)
    with mp.workprec(PREC):
        for i, vals in enumerate(zip(*[a.tolist() for a in args])):
            v = f(*[mp.mpf(a) for a in vals])
            if not isinstance(v, mp.mpf):
                v = mp.mpf(v) if not isinstance(v, mp.mpc) else mp.mpf("nan")
            if mp.isnan(v):
                out[i] = math.nan
            elif mp.isinf(v):
                out[i] = math.inf if v > 0 else -math.inf
            else:
                out[i] = round_mpf(v, fmt)
    return out


def ulp_errors(name: str, args: list[np.ndarray], got: np.ndarray, fmt: str) -> np.ndarray:
    """|got - exact| in units of ``fmt``'s ulp at the exact value, for finite exact values.

    Entries where the exact value or ``got`` is not finite are 0 when both agree (same inf, both
    NaN) and inf otherwise.
    """
    mp = _mp()
    f = _functions()[name]
    out = np.empty(len(args[0]), dtype=np.float64)
    with mp.workprec(PREC):
        for i, vals in enumerate(zip(*[a.tolist() for a in args])):
            v = f(*[mp.mpf(a) for a in vals])
            g = float(got[i])
            if isinstance(v, mp.mpc) or mp.isnan(v):
                out[i] = 0.0 if math.isnan(g) else math.inf
                continue
            rounded = float(v) if mp.isinf(v) else round_mpf(v, fmt)
            if math.isinf(rounded) or not math.isfinite(g):
                out[i] = 0.0 if g == rounded else math.inf
                continue
            out[i] = float(abs(mp.mpf(g) - v) / ulp_mpf(v, fmt))
    return out
