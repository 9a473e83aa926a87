"""Accuracy of the deterministic functions against mpmath (correctly rounded, 160-bit work).

float32: for float32 inputs x, ``f(float64(x))`` rounded to float32 must be the correctly rounded
float32 result (mpmath's value rounded once to float32 with integer arithmetic), bit for bit,
over a fixed sample per function: uniform over the function's core intervals, every binade with
random signs (subnormals included), and edge values (overflow/underflow thresholds, huge
arguments). float64: the error in float64 ulps stays below a bound over a fixed sample.
Zeros, infinities and NaN are left to test_numerics_special_values.py (mpmath has no signed zero).
Expected values never come from numpy's transcendental functions.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.numerics as N
from neuron_sim.numerics import reference as R
from neuron_sim.numerics import samples as S

N32 = 5000
N64 = 3000
F64_ULP_BOUND = 1.0  # measured maxima are 0.5-0.92 ulp (scripts/numerics_accuracy.py)


def _regular(name, args):
    keep = np.logical_and.reduce([np.isfinite(a) & (a != 0.0) for a in args])
    if name == "power":  # negative base, non-integer exponent: NaN, checked elsewhere
        keep &= ~((args[0] < 0) & (np.floor(args[1]) != args[1]))
    return [a[keep] for a in args]


def _same_bits(a, b):
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", S.FUNCTIONS)
def test_float32_inputs_round_correctly(name):
    args = _regular(name, S.sample_inputs(name, N32, "f32", seed=11))
    with np.errstate(over="ignore"):
        got = getattr(N, name)(*args).astype(np.float32)
    want = R.correctly_rounded(name, args, "f32").astype(np.float32)
    bad = ~_same_bits(got, want)
    assert not bad.any(), (
        f"{name}: {bad.sum()} of {got.size} not correctly rounded, e.g. at "
        f"{[a[bad][:4].tolist() for a in args]}: got {got[bad][:4]}, want {want[bad][:4]}"
    )


@pytest.mark.parametrize("name", S.FUNCTIONS)
def test_float64_error_below_bound(name):
    args = _regular(name, S.sample_inputs(name, N64, "f64", seed=12))
    got = getattr(N, name)(*args)
    err = R.ulp_errors(name, args, got, "f64")
    worst = int(np.argmax(err))
    assert err[worst] <= F64_ULP_BOUND, (
        f"{name}: {err[worst]:.3f} ulp at {[a[worst] for a in args]} (got {got[worst]!r})"
    )


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_huge_float32_trig_arguments(name):
    # every binade from 2**19 (where the Payne-Hanek reduction starts) up to FLT_MAX
    rng = np.random.default_rng(5)
    e = rng.integers(127 + 19, 255, size=1500)
    m = rng.integers(0, 2**23, size=1500)
    x = ((e << 23) | m).astype(np.uint32).view(np.float32).astype(np.float64)
    x = np.concatenate([x, -x[:200], [float(np.finfo(np.float32).max)]])
    got = getattr(N, name)(x).astype(np.float32)
    want = R.correctly_rounded(name, [x], "f32").astype(np.float32)
    assert _same_bits(got, want).all()


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_hard_float64_trig_arguments(name):
    # 6381956970095103 * 2**797 is the double closest to a multiple of pi/2 (|r| ~ 2**-61);
    # the others: near multiples of pi/2 in the Cody-Waite range, at its limit, and huge
    x = np.array(
        [6381956970095103.0 * 2.0**797, 1e300, 1.7976931348623157e308, 2.0**19, 2.0**19 - 0.25,
         np.nextafter(2.0**19, 0.0), 1e22, 5.0e15, 355.0, 103993.0 / 2, 2.0**1000, 3.0 * 2.0**-600]
    )
    x = np.concatenate([x, -x])
    err = R.ulp_errors(name, [x], getattr(N, name)(x), "f64")
    assert err.max() <= F64_ULP_BOUND, err


def test_log_exp_tiny_and_extreme():
    x = np.array([5e-324, 1e-320, 2.2250738585072014e-308, 1.7976931348623157e308, 1.0 - 2.0**-53, 1.0 + 2.0**-52])
    err = R.ulp_errors("log", [x], N.log(x), "f64")
    assert err.max() <= 0.6
    z = np.array([-745.0, -744.44, -740.5, -708.4, 709.78, 700.5, 1e-300, -1e-300, 2.0**-60])
    err = R.ulp_errors("exp", [z], N.exp(z), "f64")
    assert err.max() <= 1.0  # subnormal results round twice (53 bits, then the subnormal grid)
