"""What z3 is told about ``exponential`` (``neuron_sim.proofs.smt.exp_facts``): an uninterpreted
function with a few facts. Each fact is held to the interpreter's exp here (every f16 value, the
edges and samples of f32 / f64), a rewrite the facts make provable is proved, and a wrong one
is refuted with a witness the interpreter confirms."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.dtypes import finfo
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules

EXP = """HloModule e
ENTRY %main (x: T[N]) -> T[N] {
  %x = T[N] parameter(0)
  ROOT %e = T[N] exponential(%x)
}
"""


def interpreter_exp(values: np.ndarray, spelling: str) -> np.ndarray:
    module = parse_module(EXP.replace("T[", f"{spelling}[").replace("N]", f"{values.size}]"))
    return interpreter.run(module, [values], Topology(1, 1))[0][0]


@pytest.mark.parametrize("spelling, dtype, sample", [
    ("f16", np.float16, None), ("bf16", ml_dtypes.bfloat16, None),
    ("f32", np.float32, 200_000), ("f64", np.float64, 200_000)])
def test_every_fact_holds_for_the_interpreters_exp(spelling, dtype, sample):
    """NaN -> NaN; not NaN -> not NaN and not negative (no -0 either); x <= lowest -> +0
    (-inf included); +inf -> +inf; +-0 -> 1. f16 and bf16: all 65,536 bit patterns; wider
    types: the edges and random bit patterns."""
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    if sample is None:
        x = np.arange(1 << 16, dtype=np.uint32).astype(bits).view(dtype)
    else:
        rng = np.random.default_rng(0)
        info = np.iinfo(bits)
        x = rng.integers(0, int(info.max), sample, dtype=np.uint64, endpoint=True
                         ).astype(bits).view(dtype)
    info = finfo(dtype)
    lowest = info.min
    edges = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, lowest, -info.tiny], dtype)
    x = np.concatenate([edges, x])
    e = interpreter_exp(x, spelling)
    with np.errstate(invalid="ignore"):  # NaN payloads widen to NaN
        x, e = x.astype(np.float64), e.astype(np.float64)
    lowest = float(lowest)
    nan = np.isnan(x)
    assert np.isnan(e[nan]).all()
    assert not np.isnan(e[~nan]).any() and not np.signbit(e[~nan]).any()
    assert (e[x <= lowest] == 0).all() and not np.signbit(e[x <= lowest]).any()
    assert (e[x == np.inf] == np.inf).all()
    assert (e[x == 0] == 1).all()


SELECT = """HloModule s
ENTRY %main (p: pred[4], x: f32[4]) -> f32[4] {
  %p = pred[4] parameter(0)
  %x = f32[4] parameter(1)
  %fill = f32[] constant(FILL)
  %fills = f32[4] broadcast(%fill), dimensions={}
  %s = f32[4] select(%p, %x, %fills)
  ROOT %e = f32[4] exponential(%s)
}
"""


def test_a_masked_exp_of_the_lowest_value_instead_of_minus_infinity_is_proved_exact():
    """exp(where(p, x, -inf)) against exp(where(p, x, lowest)): where p holds both are exp(x)
    (the same term), else exp(-inf) = +0 and exp(lowest) = +0 — exactly equal for all inputs,
    which only the facts show (the terms differ)."""
    source = parse_module(SELECT.replace("FILL", "-inf"))
    target = parse_module(SELECT.replace("FILL", "-3.40282347e+38"))
    result = check_modules(source, target, ["1x1"], VerifyOptions(trials=2, minimize=False,
                                                                   proof="symbolic"))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes


def test_a_masked_exp_filled_with_zero_is_refuted():
    """exp(where(p, x, -inf)) against exp(where(p, x, 0)): where p is false the source is
    exp(-inf) = 0 and the target exp(0) = 1 (by hand), so every input with a false p is a
    witness; z3's model gives one and the interpreter confirms it."""
    source = parse_module(SELECT.replace("FILL", "-inf"))
    target = parse_module(SELECT.replace("FILL", "0"))
    result = check_modules(source, target, ["1x1"], VerifyOptions(trials=1, minimize=False,
                                                                   proof="symbolic"))
    assert result.status is Status.UNSOUND, result.detail


def test_exp_times_one_is_proved():
    """exp(x) * 1 is exp(x) for every x (x * 1 is x in IEEE, NaN included): the same
    uninterpreted exp on both sides, and z3's IEEE multiply, prove it."""
    source = parse_module(EXP.replace("T[", "f32[").replace("N]", "4]"))
    target = parse_module(EXP.replace("T[", "f32[").replace("N]", "4]").replace(
        "ROOT %e = f32[4] exponential(%x)",
        "%e = f32[4] exponential(%x)\n  %one = f32[] constant(1)\n"
        "  %ones = f32[4] broadcast(%one), dimensions={}\n"
        "  ROOT %r = f32[4] multiply(%e, %ones)"))
    result = check_modules(source, target, ["1x1"], VerifyOptions(trials=1, minimize=False,
                                                                   proof="symbolic"))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
