"""DynamicSliceReshapeCanonicalizer: reshape(dynamic-slice(x)) that only drops or adds unit dims
-> dynamic-slice(reshape(x)).

Hand derivation of the soundness gate: dynamic-slice clamps each start to [0, dim - size]. A
dropped dimension with x's size 1 has window 1 and start clamped to 0 for every value, so it
can go; one where x is larger (f32[6,8] -> window [1,8]) picks row clamp(i, 0, 5) and cannot
be dropped from x. An added unit dimension reads x's only index 0.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode
from neuron_sim.passes.neuron.dynamic_slice_reshape_canonicalizer import ADD, DROP, KEEP, unit_dim_alignment

from canonicalizer_fixtures import jax_module, module_of, run, verdicts

KEY = "aws_neuron_dynamic_slice_reshape_canonicalizer"


@pytest.mark.parametrize("before,after,expected", [
    ((6, 1), (1, 6, 1), [(ADD, None), (KEEP, 0), (KEEP, 1)]),
    ((1, 8), (8,), [(DROP, 0), (KEEP, 1)]),
    ((2, 3), (3, 2), None),
    ((2, 3), (6,), None),
])
def test_alignment(before, after, expected):
    assert unit_dim_alignment(before, after) == expected


def test_added_unit_dims_get_a_constant_zero_start():
    module = module_of("x = f32[6,8] parameter(0)", "j = s32[] parameter(1)",
                       "z = s32[] constant(0)",
                       "ds = f32[6,1] dynamic-slice(x, z, j), dynamic_slice_sizes={6,1}",
                       "r = f32[1,6,1] reshape(ds)")
    assert run(KEY, module)[0]
    root = module.entry.root
    assert root.opcode is Opcode.DYNAMIC_SLICE and root.get("dynamic_slice_sizes") == (1, 6, 1)
    assert root.operand(0).opcode is Opcode.RESHAPE and root.operand(0).shape.dims == (1, 6, 8)
    assert int(root.operand(1).literal.value) == 0 and root.operand(3).name == "j"


def test_a_dim_of_size_one_in_x_too_is_dropped_with_its_start():
    module = module_of("x = f32[1,8] parameter(0)", "i = s32[] parameter(1)",
                       "j = s32[] parameter(2)",
                       "ds = f32[1,4] dynamic-slice(x, i, j), dynamic_slice_sizes={1,4}",
                       "r = f32[4] reshape(ds)")
    assert run(KEY, module)[0]
    root = module.entry.root
    assert [op.name for op in root.operands[1:]] == ["j"]
    assert verdicts(KEY, module_of("x = f32[1,8] parameter(0)", "i = s32[] parameter(1)",
                                   "j = s32[] parameter(2)",
                                   "ds = f32[1,4] dynamic-slice(x, i, j), "
                                   "dynamic_slice_sizes={1,4}",
                                   "r = f32[4] reshape(ds)")) == ["CORRECT"] * 3


def test_a_row_of_a_larger_dimension_is_not_dropped():
    module = module_of("x = f32[6,8] parameter(0)", "i = s32[] parameter(1)",
                       "z = s32[] constant(0)",
                       "ds = f32[1,8] dynamic-slice(x, i, z), dynamic_slice_sizes={1,8}",
                       "r = f32[8] reshape(ds)")
    assert run(KEY, module) == (False, [])


def test_a_reshape_that_regroups_dims_declines():
    module = module_of("x = f32[6,8] parameter(0)", "i = s32[] parameter(1)",
                       "ds = f32[2,4] dynamic-slice(x, i, i), dynamic_slice_sizes={2,4}",
                       "r = f32[8] reshape(ds)")
    assert run(KEY, module) == (False, [])


def test_a_reshape_of_something_else_declines():
    module = module_of("x = f32[6,1] parameter(0)", "r = f32[6] reshape(x)")
    assert run(KEY, module) == (False, [])


def test_fires_on_the_jax_dump_and_verifies():
    module = jax_module("lowered_canon_reshaped_dynamic_slice")
    changed, log = run(KEY, module.clone())
    assert changed and [line.split(" ")[0] for line in log] == ["%reshape.4"]
    assert verdicts(KEY, module) == ["CORRECT"] * 3
