"""ConstantSliceClampSimplifier: constant-start DS -> slice, out-of-range constant-start DUS ->
clamped starts, both with XLA's clamp ``start = min(max(c, 0), dim - size)``.

Hand derivations (x: f32[6,8], window 3x4): starts (1, 2) -> [1:4], [2:6]; (5, 6) -> (3, 4);
(-2, 100) -> (0, 4). DUS of u: f32[2,3] into x: (6, 7) -> (4, 5); (-1, 50) -> (0, 5); (2, 3) is
in range and is left alone.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.attributes import SliceDim

from canonicalizer_fixtures import jax_module, module_of, run, verdicts

KEY = "aws_neuron_constant_slice_clamp_simplifier"


def ds_module(s0: str, s1: str, kind: str = "s32") -> object:
    return module_of("x = f32[6,8] parameter(0)", f"a = {kind}[] constant({s0})",
                     f"b = {kind}[] constant({s1})",
                     "ds = f32[3,4] dynamic-slice(x, a, b), dynamic_slice_sizes={3,4}")


def dus_module(s0: int, s1: int) -> object:
    return module_of("x = f32[6,8] parameter(0)", "u = f32[2,3] parameter(1)",
                     f"a = s32[] constant({s0})", f"b = s32[] constant({s1})",
                     "dus = f32[6,8] dynamic-update-slice(x, u, a, b)")


@pytest.mark.parametrize("starts,expected", [(("1", "2"), (1, 2)), (("5", "6"), (3, 4)),
                                             (("-2", "100"), (0, 4))])
def test_constant_start_dynamic_slice_becomes_a_clamped_slice(starts, expected):
    module = ds_module(*starts)
    assert run(KEY, module)[0]
    root = module.entry.root
    assert root.opcode is Opcode.SLICE
    assert root.get("slice") == tuple(SliceDim(s, s + n, 1) for s, n in zip(expected, (3, 4)))
    assert verdicts(KEY, ds_module(*starts)) == ["CORRECT"] * 3


def test_unsigned_starts_are_read_unsigned():
    module = ds_module("4294967295", "0", "u32")
    assert run(KEY, module)[0]
    assert module.entry.root.get("slice")[0] == SliceDim(3, 6, 1)


@pytest.mark.parametrize("starts,expected", [((6, 7), (4, 5)), ((-1, 50), (0, 5))])
def test_out_of_range_dus_starts_are_clamped(starts, expected):
    module = dus_module(*starts)
    assert run(KEY, module)[0]
    root = module.entry.root
    assert root.opcode is Opcode.DYNAMIC_UPDATE_SLICE
    assert tuple(int(op.literal.value) for op in root.operands[2:]) == expected
    assert verdicts(KEY, dus_module(*starts)) == ["CORRECT"] * 3


def test_in_range_dus_is_left_alone():
    assert run(KEY, dus_module(2, 3)) == (False, [])


def test_a_start_that_is_not_a_constant_declines():
    module = module_of("x = f32[6,8] parameter(0)", "a = s32[] parameter(1)",
                       "b = s32[] constant(0)",
                       "ds = f32[3,4] dynamic-slice(x, a, b), dynamic_slice_sizes={3,4}")
    assert run(KEY, module) == (False, [])


def test_an_elided_constant_start_declines():
    module = module_of("x = f32[6,8] parameter(0)", "a = s32[] constant({...})",
                       "b = s32[] constant(0)",
                       "ds = f32[3,4] dynamic-slice(x, a, b), dynamic_slice_sizes={3,4}")
    assert run(KEY, module) == (False, [])


def test_fires_on_the_jax_dump_and_verifies():
    module = jax_module("lowered_canon_dynamic_slice_constant_starts")
    changed, log = run(KEY, module.clone())
    assert changed and [line.split(" ")[0] for line in log] == \
        ["%dynamic_update_slice.4", "%dynamic_update_slice.5"]
    assert verdicts(KEY, module) == ["CORRECT"] * 3
