"""The proof for all inputs through dynamic-slice and dynamic-update-slice whose start
depends on the inputs: a case split over the clamped start."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.verify import Status, VerifyOptions, check_modules

OPTIONS = VerifyOptions(trials=2, minimize=False)

SLICE = """HloModule s
ENTRY %main (x: f32[8], s: s32[]) -> f32[3] {
  %x = f32[8] parameter(0)
  %s = s32[] parameter(1)
  START
  ROOT %d = f32[3] dynamic-slice(%x, %t), dynamic_slice_sizes={3}
}
"""
AS_GIVEN = "%t = s32[] copy(%s)"
CLAMPED = """%lo = s32[] constant(0)
  %hi = s32[] constant(5)
  %t = s32[] clamp(%lo, %s, %hi)"""
ABS = "%t = s32[] abs(%s)"


def test_a_clamped_start_is_proved_equal():
    """dynamic-slice clamps its start to [0, 8 - 3]: clamping it first changes nothing."""
    source = parse_module(SLICE.replace("START", AS_GIVEN))
    target = parse_module(SLICE.replace("START", CLAMPED))
    result = check_modules(source, target, ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes


def test_a_start_wrong_only_for_negative_values_is_refuted():
    """abs(s) differs from s's clamp only for s < 0 (s = -2: the source reads from 0, the
    target from 2), so a negative start separates them — z3's model gives one."""
    source = parse_module(SLICE.replace("START", AS_GIVEN))
    target = parse_module(SLICE.replace("START", ABS))
    result = check_modules(source, target, ["1x1"], OPTIONS)
    assert result.status is Status.UNSOUND


UPDATE = """HloModule u
ENTRY %main (x: f32[6], u: f32[2], s: s32[]) -> f32[6] {
  %x = f32[6] parameter(0)
  %u = f32[2] parameter(1)
  %s = s32[] parameter(2)
  START
  ROOT %d = f32[6] dynamic-update-slice(%x, %u, %t)
}
"""


def test_a_dynamic_update_slice_on_data_is_proved_and_refuted():
    """dynamic-update-slice clamps its start to [0, 4]: clamping first is equal for all
    inputs; a start of s + 1 places the update one further for every s < 4."""
    source = parse_module(UPDATE.replace("START", AS_GIVEN))
    clamped = parse_module(UPDATE.replace("START", CLAMPED.replace("constant(5)",
                                                                   "constant(4)")))
    result = check_modules(source, clamped, ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    shifted = parse_module(UPDATE.replace("START", "%one = s32[] constant(1)\n"
                                                   "  %t = s32[] add(%s, %one)"))
    result = check_modules(source, shifted, ["1x1"], OPTIONS)
    assert result.status is Status.UNSOUND
