"""Deterministic sample inputs for the transcendental functions (tests, accuracy script).

Built from integer random bits only (numpy's PCG64 integers, then exact bit or integer-to-float
conversions), so the same seed gives the same inputs on every CPU. Each function has a core
interval where its values change, sampled uniformly, plus samples spread over every binade of
the format with random signs, plus edge values (zeros, subnormals, infinities, NaN, overflow and
underflow thresholds, huge trigonometric arguments).
"""

from __future__ import annotations

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)
F32_DENORM_MIN = 2.0**-149
F64_MAX = float(np.finfo(np.float64).max)
F64_TINY = float(np.finfo(np.float64).tiny)
F64_DENORM_MIN = 5e-324

#: function -> (number of arguments, core intervals)
DOMAINS: dict[str, tuple[int, list[tuple[float, float]]]] = {
    "exp": (1, [(-104.0, 89.0), (-746.0, 710.0), (-1.0, 1.0)]),
    "expm1": (1, [(-20.0, 89.0), (-1.0, 1.0), (-746.0, 710.0)]),
    "log": (1, [(0.0, 4.0), (0.5, 2.0)]),
    "log1p": (1, [(-1.0, 4.0), (-0.5, 0.5)]),
    "sin": (1, [(-10.0, 10.0), (-1e6, 1e6)]),
    "cos": (1, [(-10.0, 10.0), (-1e6, 1e6)]),
    "tan": (1, [(-10.0, 10.0), (-1e6, 1e6)]),
    "tanh": (1, [(-10.0, 10.0), (-1.0, 1.0)]),
    "sinh": (1, [(-90.0, 90.0), (-711.0, 711.0), (-1.0, 1.0)]),
    "cosh": (1, [(-90.0, 90.0), (-711.0, 711.0), (-1.0, 1.0)]),
    "asin": (1, [(-1.0, 1.0)]),
    "acos": (1, [(-1.0, 1.0)]),
    "atan": (1, [(-10.0, 10.0)]),
    "atan2": (2, [(-10.0, 10.0)]),
    "asinh": (1, [(-10.0, 10.0)]),
    "acosh": (1, [(1.0, 10.0), (1.0, 1.01)]),
    "atanh": (1, [(-1.0, 1.0), (0.99, 1.0)]),
    "cbrt": (1, [(-100.0, 100.0)]),
    "logistic": (1, [(-110.0, 90.0), (-750.0, 750.0), (-10.0, 10.0)]),
    "erf": (1, [(-6.0, 6.0), (-1.0, 1.0)]),
    "power": (2, [(0.0, 10.0)]),
}

FUNCTIONS = tuple(DOMAINS)


def _edges(fmt: str) -> list[float]:
    f32 = fmt == "f32"
    mx = F32_MAX if f32 else F64_MAX
    tiny = F32_TINY if f32 else F64_TINY
    dmin = F32_DENORM_MIN if f32 else F64_DENORM_MIN
    base = [0.0, 1.0, 2.0, 0.5, 3.0, 27.0, 1e-10, 1e-30, 0.1, 10.0, 100.0, 1e10, 1e22, 1e30]
    base += [dmin, 2 * dmin, tiny, tiny * 0.75, mx, mx * 0.5, np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0)]
    base += [88.72283935546875, 88.72284, 89.41598629223294, -103.97208, -87.33654, 709.782712893384,
             710.4758600739439, -745.1332191019411, -708.3964185322641, 19.06, 22.0, 0.8862269254527580,
             np.pi, np.pi / 2, np.pi / 4, 6381956970095103.0 * 2.0**797, 1.0e300, 2.0**19, 2.0**19 - 0.5,
             4.0 * 2.0**20, 3.4e38, 1.4e-45, 0.5 - 2.0**-54, 5.9, 6.0, 0.25]
    vals = []
    for v in base:
        if f32:
            if abs(v) > F32_MAX:
                continue
            v = float(np.float32(v))
        vals += [v, -v]
    vals += [np.inf, -np.inf, np.nan]
    return vals


def _uniform(rng, n: int, lo: float, hi: float) -> np.ndarray:
    u = rng.integers(0, 2**53, size=n, dtype=np.int64).astype(np.float64) * 2.0**-53
    return lo + (hi - lo) * u


def _binades(rng, n: int, fmt: str) -> np.ndarray:
    """Random sign, exponent uniform over all finite binades (subnormals included), random bits."""
    if fmt == "f32":
        e = rng.integers(0, 255, size=n, dtype=np.int64)
        m = rng.integers(0, 2**23, size=n, dtype=np.int64)
        s = rng.integers(0, 2, size=n, dtype=np.int64)
        bits = (s << 31) | (e << 23) | m
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    e = rng.integers(0, 2047, size=n, dtype=np.int64)
    m = rng.integers(0, 2**52, size=n, dtype=np.int64)
    s = rng.integers(0, 2, size=n, dtype=np.uint64)
    bits = (s << np.uint64(63)) | ((e << 52) | m).astype(np.uint64)
    return bits.view(np.float64)


def sample_inputs(name: str, n: int, fmt: str = "f64", seed: int = 0) -> list[np.ndarray]:
    """About ``n`` inputs of function ``name`` (a list of argument arrays), values of ``fmt``.

    Half uniform in the function's core intervals, the rest over all binades, then the edge
    values (for two-argument functions, every edge pair too).
    """
    nargs, intervals = DOMAINS[name]
    rng = np.random.default_rng([seed, FUNCTIONS.index(name), 32 if fmt == "f32" else 64])
    edges = np.array(_edges(fmt))
    if nargs == 2:
        few = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan]
        few += [edges[2 * 14], edges[2 * 18]]  # smallest subnormal, largest finite
        pair_base = edges if len(edges) ** 2 <= n // 2 else np.array(few)
        n_edges = len(pair_base) ** 2
    else:
        n_edges = len(edges)
    args = []
    for a in range(nargs):
        parts = []
        n_core = n // 2 // len(intervals)
        for lo, hi in intervals:
            if name == "power" and a == 1:
                lo, hi = -30.0, 30.0
            parts.append(_uniform(rng, n_core, lo, hi))
        parts.append(_binades(rng, max(0, n - n_core * len(intervals) - n_edges), fmt))
        args.append(np.concatenate(parts))
    if name == "power":
        # exponents that are integers or halves, where results can be exact
        k = len(args[1]) // 8
        args[1][:k] = np.floor(args[1][:k] * 2.0) * 0.5
        args[0][len(args[0]) // 2 :] = np.abs(args[0][len(args[0]) // 2 :])
    if nargs == 1:
        args[0] = np.concatenate([args[0], edges])
    else:
        ex, ey = np.meshgrid(pair_base, pair_base)
        args[0] = np.concatenate([args[0], ex.ravel()])
        args[1] = np.concatenate([args[1], ey.ravel()])
    if fmt == "f32":
        args = [a.astype(np.float32).astype(np.float64) for a in args]
    return args
