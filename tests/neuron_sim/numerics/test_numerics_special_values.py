"""Hand-derived values: C99 Annex F special cases (signed zeros, infinities, NaN, poles, domain
errors, overflow, underflow) and exact results (cube roots of cubes, exact powers...)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import neuron_sim.numerics as N

INF = math.inf
NAN = math.nan
PIO2 = float.fromhex("0x1.921fb54442d18p+0")  # pi/2 rounded to nearest (its digits are known)
PI = float.fromhex("0x1.921fb54442d18p+1")
PIO4 = float.fromhex("0x1.921fb54442d18p-1")
THREE_PIO4 = float.fromhex("0x1.2d97c7f3321d2p+1")


def same(got, want):
    """Equal bits for floats, signed zeros told apart, NaN equal to NaN."""
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


def check(fn, cases):
    args = [np.array([c[i] for c in cases], dtype=np.float64) for i in range(len(cases[0]) - 1)]
    got = fn(*args)
    bad = [(c, float(g)) for c, g in zip(cases, got) if not same(float(g), c[-1])]
    assert not bad, bad


ONE_ARG = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, 0.0), (NAN, NAN), (709.8, INF), (1e308, INF),
            (-746.0, 0.0), (-1e308, 0.0), (5e-324, 1.0), (-5e-324, 1.0)],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -1.0), (NAN, NAN), (-40.0, -1.0), (709.8, INF),
              (5e-324, 5e-324), (-5e-324, -5e-324), (1e-300, 1e-300)],
    "log": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN)],
    "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -INF), (-2.0, NAN), (INF, INF), (-INF, NAN), (NAN, NAN),
              (5e-324, 5e-324), (1e-300, 1e-300)],
    "sin": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (5e-324, 5e-324), (-1e-300, -1e-300)],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (1e-300, 1.0)],
    "tan": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (-5e-324, -5e-324)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN), (30.0, 1.0), (-30.0, -1.0),
             (1e-300, 1e-300)],
    "sinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (711.0, INF), (-711.0, -INF),
             (5e-324, 5e-324)],
    "cosh": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, INF), (NAN, NAN), (711.0, INF), (-711.0, INF)],
    "asin": [(0.0, 0.0), (-0.0, -0.0), (1.0, PIO2), (-1.0, -PIO2), (1.5, NAN), (-INF, NAN), (NAN, NAN),
             (5e-324, 5e-324)],
    "acos": [(1.0, 0.0), (-1.0, PI), (0.0, PIO2), (-0.0, PIO2), (2.0, NAN), (INF, NAN), (NAN, NAN)],
    "atan": [(0.0, 0.0), (-0.0, -0.0), (INF, PIO2), (-INF, -PIO2), (1.0, PIO4), (-1.0, -PIO4), (NAN, NAN),
             (1e300, PIO2), (5e-324, 5e-324)],
    "asinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (5e-324, 5e-324)],
    "acosh": [(1.0, 0.0), (INF, INF), (0.5, NAN), (-INF, NAN), (NAN, NAN), (0.0, NAN)],
    "atanh": [(0.0, 0.0), (-0.0, -0.0), (1.0, INF), (-1.0, -INF), (2.0, NAN), (-INF, NAN), (NAN, NAN),
              (5e-324, 5e-324)],
    "cbrt": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (-27.0, -3.0), (0.125, 0.5),
             (-0.001953125, -0.125), (2.0**-1071, 2.0**-357), (2.0**-1074 * 8, 2.0**-357),
             (2.0**1020, 2.0**340)],
    "logistic": [(0.0, 0.5), (-0.0, 0.5), (INF, 1.0), (-INF, 0.0), (NAN, NAN), (40.0, 1.0), (-800.0, 0.0)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN), (6.0, 1.0), (-6.0, -1.0),
            (30.0, 1.0)],
}


@pytest.mark.parametrize("name", sorted(ONE_ARG))
def test_one_argument_special_values(name):
    check(getattr(N, name), ONE_ARG[name])


def test_exact_cubes():
    k = np.arange(-2000, 2001, dtype=np.float64)
    assert (N.cbrt(k * k * k) == k).all()
    # scaled by powers of 8 across the range, subnormals included
    kk = np.arange(1, 50, dtype=np.float64)
    for e in (-1068, -900, -300, 0, 300, 960):  # multiples of 3; 49**3 < 2**17 keeps them exact
        x = kk * kk * kk * 2.0**e
        assert (N.cbrt(x) == kk * 2.0 ** (e // 3)).all()
        assert (N.cbrt(-x) == -kk * 2.0 ** (e // 3)).all()


def test_float32_cube_root_of_minus_27_is_minus_3():
    x = np.array([-27.0, 27.0, 64.0, -1000.0, 0.125], dtype=np.float32)
    got = N.cbrt(x.astype(np.float64)).astype(np.float32)
    assert got.tolist() == [-3.0, 3.0, 4.0, -10.0, 0.5]


ATAN2 = [
    (0.0, 0.0, 0.0), (-0.0, 0.0, -0.0), (0.0, -0.0, PI), (-0.0, -0.0, -PI),
    (0.0, -1.0, PI), (-0.0, -1.0, -PI), (0.0, 1.0, 0.0), (-0.0, 1.0, -0.0),
    (1.0, 0.0, PIO2), (1.0, -0.0, PIO2), (-1.0, 0.0, -PIO2), (-1.0, -0.0, -PIO2),
    (1.0, -INF, PI), (-1.0, -INF, -PI), (1.0, INF, 0.0), (-1.0, INF, -0.0),
    (INF, 1.0, PIO2), (-INF, 1.0, -PIO2), (INF, -1.0, PIO2), (INF, -INF, THREE_PIO4),
    (-INF, -INF, -THREE_PIO4), (INF, INF, PIO4), (-INF, INF, -PIO4),
    (NAN, 1.0, NAN), (1.0, NAN, NAN), (NAN, NAN, NAN), (INF, NAN, NAN),
    (1.0, 1.0, PIO4), (-1.0, 1.0, -PIO4), (1.0, -1.0, THREE_PIO4), (-1.0, -1.0, -THREE_PIO4),
    (5e-324, 1.0, 5e-324), (5e-324, 0.0, PIO2), (1e308, 1e-308, PIO2), (1e-308, -1e308, PI),
    (1.7976931348623157e308, 1.7976931348623157e308, PIO4), (5e-324, 5e-324, PIO4),
]


def test_atan2_quadrants_zeros_and_infinities():
    check(N.atan2, ATAN2)


POW = [
    # pow(x, +-0) = 1 for any x, even NaN; pow(1, y) = 1 for any y, even NaN
    (NAN, 0.0, 1.0), (NAN, -0.0, 1.0), (INF, 0.0, 1.0), (-3.0, -0.0, 1.0), (0.0, 0.0, 1.0),
    (1.0, NAN, 1.0), (1.0, INF, 1.0), (1.0, -INF, 1.0), (1.0, 1e300, 1.0),
    (NAN, 1.0, NAN), (2.0, NAN, NAN), (-1.0, NAN, NAN),
    # zero base
    (0.0, -3.0, INF), (-0.0, -3.0, -INF), (0.0, -2.0, INF), (-0.0, -2.0, INF), (-0.0, -0.5, INF),
    (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, 0.5, 0.0), (0.0, -INF, INF),
    (-0.0, INF, 0.0), (0.0, 1e300, 0.0), (-0.0, -1e300, INF),
    # infinite exponent
    (-1.0, INF, 1.0), (-1.0, -INF, 1.0), (0.5, INF, 0.0), (-0.5, INF, 0.0), (2.0, INF, INF),
    (-2.0, INF, INF), (0.5, -INF, INF), (-0.5, -INF, INF), (2.0, -INF, 0.0), (-2.0, -INF, 0.0),
    # infinite base
    (INF, 2.0, INF), (INF, -2.0, 0.0), (INF, 0.5, INF), (-INF, 3.0, -INF), (-INF, 2.0, INF),
    (-INF, 0.5, INF), (-INF, -3.0, -0.0), (-INF, -2.0, 0.0), (-INF, -0.5, 0.0),
    # negative base: integer exponents keep or flip the sign, others are NaN
    (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (-2.0, -1.0, -0.5), (-2.0, 0.5, NAN), (-8.0, 1.0 / 3.0, NAN),
    (-1.0, 2.0**60, 1.0), (-1.0, 2.0**53 + 2, 1.0), (-1.0, 2.0**52 + 1, -1.0), (-3.0, 1e300, INF),
    # exact results
    (2.0, 10.0, 1024.0), (3.0, 2.0, 9.0), (4.0, 0.5, 2.0), (9.0, 1.5, 27.0), (10.0, 22.0, 1e22),
    (2.0, -1074.0, 5e-324), (2.0, -1075.0, 0.0), (2.0, 1023.0, 2.0**1023), (2.0, 1024.0, INF),
    (0.25, -0.5, 2.0), (1024.0, 0.1, 2.0), (2.0, -1.0, 0.5), (7.0, 1.0, 7.0), (-7.0, 1.0, -7.0),
    (2.0**-1074, 0.5, 2.0**-537), (2.0**1000, -1.0, 2.0**-1000), (16.0, 0.25, 2.0), (16.0, 0.75, 8.0),
    # overflow and underflow
    (10.0, 400.0, INF), (10.0, -400.0, 0.0), (-10.0, 401.0, -INF), (-10.0, -401.0, -0.0),
    (1.0 + 2.0**-52, 2.0**62, INF), (1.0 - 2.0**-53, 2.0**63, 0.0),
]


def test_pow_special_and_exact_cases():
    check(N.power, POW)


def test_pow_float32_midpoint_rounds_to_even():
    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 is exactly halfway between two float32 values
    x = np.array([1.0 + 2.0**-12], dtype=np.float64)
    got = N.power(x, np.array([2.0])).astype(np.float32)
    assert got[0] == np.float32(1.0 + 2.0**-11)


def test_shapes_and_sizes():
    for shape in [(0,), (3, 0), (), (5,), (2, 3, 4), (20000,)]:
        x = np.full(shape, 0.5)
        for name in ("exp", "sin", "cbrt", "erf"):
            out = getattr(N, name)(x)
            assert out.shape == x.shape and out.dtype == np.float64
        assert N.power(x, 2.0).shape == x.shape
        assert N.atan2(x, np.ones(shape)).shape == x.shape
    # broadcasting of the two-argument functions
    assert N.power(np.ones((3, 1)), np.ones(4)).shape == (3, 4)
    # python scalars and lists are taken
    assert N.exp(0.0) == 1.0 and N.log([1.0]).tolist() == [0.0]


def test_large_arrays_are_processed_in_blocks_consistently():
    x = np.linspace(-20.0, 20.0, 50001)
    whole = N.tanh(x)
    parts = np.concatenate([N.tanh(x[:777]), N.tanh(x[777:])])
    assert whole.tobytes() == parts.tobytes()
