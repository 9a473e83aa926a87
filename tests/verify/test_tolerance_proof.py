"""z3 judges the closer's composed contract (a bf16 tolerance with refinements): a round trip
through bf16 is proved within it for all inputs, a larger change is refuted with a witness
that replays, and the sufficient predicate z3 is given is inside what the contract allows."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from neuron_sim.hlo import parse_module
from neuron_sim.passes import weakest
from neuron_sim.passes.contracts import BF16_HALF_ULP, INFINITY_TO_FINITE
from neuron_sim.proofs.smt import rule_of
from neuron_sim.verify import Status, VerifyOptions, check_modules

SOURCE = """HloModule m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %y = f32[4] negate(%x)
}
"""
ROUND_TRIP = """HloModule m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %n = f32[4] negate(%x)
  %b = bf16[4] convert(%n)
  ROOT %y = f32[4] convert(%b)
}
"""
SCALED = """HloModule m
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %n = f32[4] negate(%x)
  %c = f32[] constant(1.01)
  %b = f32[4] broadcast(%c), dimensions={}
  ROOT %y = f32[4] multiply(%n, %b)
}
"""


def test_the_composed_rule_keeps_the_parts_z3_models():
    """bf16 tolerance composed with infinity-to-finite: exactness, the bf16 round trip and the
    refinement; an rng-support refinement adds nothing elementwise and is left out."""
    rule = rule_of(weakest([BF16_HALF_ULP, INFINITY_TO_FINITE]))
    assert rule.split(" | ") == ["exact", "bf16-rounding", "infinity-to-finite"]


def test_a_bf16_round_trip_is_proved_within_the_tolerance():
    result = check_modules(parse_module(SOURCE), parse_module(ROUND_TRIP), ["1x1"],
                           VerifyOptions(contract="tolerance", trials=2, minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    assert any("z3 proved" in n for n in result.notes)


def test_a_change_of_one_percent_is_refuted_with_a_witness():
    """x * 1.01 moves 1.0 by 0.01, more than half a bf16 ulp at 1 (2^-8 = 0.0039)."""
    result = check_modules(parse_module(SOURCE), parse_module(SCALED), ["1x1"],
                           VerifyOptions(contract="tolerance", trials=2, minimize=False))
    assert result.status is Status.UNSOUND


def test_the_round_trip_predicate_is_inside_the_tolerance():
    """Every f32 value rounded to bf16 and back (by ml_dtypes, not by z3) is allowed by the
    contract's own numpy check: random bit patterns plus the edges (zeros, subnormals, the
    largest values, the rounding boundary near bf16's largest, infinities, NaN)."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38,
                      3.3961776e38, 3.3961778e38, 3.39e38, np.inf, -np.inf, np.nan, 1.0,
                      1.00390625, 1.005859375], dtype=np.float32)
    source = np.concatenate([bits.view(np.float32), edges])
    with np.errstate(invalid="ignore"):
        target = source.astype(ml_dtypes.bfloat16).astype(np.float32)
        allowed = BF16_HALF_ULP.allowed(source, target)
    assert allowed.all(), source[~allowed][:5]


SELECT_F32 = """HloModule s
ENTRY %main (p: pred[4], x: f32[4], y: f32[4]) -> f32[4] {
  %p = pred[4] parameter(0)
  %x = f32[4] parameter(1)
  %y = f32[4] parameter(2)
  ROOT %s = f32[4] select(%p, %x, %y)
}
"""
SELECT_BF16 = """HloModule t
ENTRY %main (p: pred[4], x: f32[4], y: f32[4]) -> f32[4] {
  %p = pred[4] parameter(0)
  %x = f32[4] parameter(1)
  %y = f32[4] parameter(2)
  %a = bf16[4] convert(%x)
  %b = bf16[4] convert(%y)
  %s = bf16[4] select(%p, %a, %b)
  ROOT %r = f32[4] convert(%s)
}
"""


def test_a_select_computed_in_bf16_is_proved_within_the_tolerance():
    """Rounding each value to bf16 and then selecting is selecting and then rounding: z3 sees
    it once the convert is taken inside the select and the predicate inside both selects'
    branches (the same condition)."""
    result = check_modules(parse_module(SELECT_F32), parse_module(SELECT_BF16), ["1x1"],
                           VerifyOptions(contract="tolerance", trials=2, minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
