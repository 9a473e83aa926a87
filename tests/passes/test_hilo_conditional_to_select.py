"""HiloConditionalToSelect: JAX's cond fixtures converted and verified, switch left alone, the
s32 index mapping (out of range -> the last branch), the side-effect gate, and collectives in a
branch under a device-dependent predicate on 4 devices."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.verify import VerifyOptions, check_pass

from canonicalizer_fixtures import TOPOLOGIES, jax_module, run
from pass_fixtures import JAX_CORPUS

KEY = "aws_neuron_hilo_conditional_to_select"


@pytest.mark.parametrize("name,topologies", [
    ("lowered_argcond_cond", TOPOLOGIES), ("compiled_argcond_cond", TOPOLOGIES),
    ("spmd_cond_axis_index", ["1x8", "2x8", "1x1"])])
def test_cond_fixtures_are_converted_and_verify_correct(name, topologies):
    module = jax_module(name)
    assert run(KEY, module)[0]
    assert all(i.opcode.spelling != "conditional" for i in module.instructions())
    data = np.load(JAX_CORPUS / f"{name}.npz")
    outputs = interpreter.run(module, [data[f"arg{i}"] for i in range(len(module.entry.parameters))])
    for j, got in enumerate(outputs):
        np.testing.assert_array_equal(got, data[f"out{j}"])
    result = check_pass(jax_module(name), KEY, topologies, VerifyOptions(minimize=False))
    assert [str(t.status) for t in result.topology_results] == ["CORRECT"] * 3


@pytest.mark.parametrize("name", ["lowered_argcond_switch", "compiled_argcond_switch",
                                  "spmd_switch_axis_index"])
def test_three_branch_switches_are_left_alone(name):
    assert not run(KEY, jax_module(name))[0]


def test_a_psum_with_a_channel_in_a_branch_is_a_side_effect():
    assert not run(KEY, jax_module("spmd_argcond_cond_psum"))[0]


INDEXED = """HloModule m
b0 {
  p = f32[3] parameter(0)
  ROOT n = f32[3] negate(p)
}
b1 {
  p = f32[3] parameter(0)
  ROOT e = f32[3] exponential(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[3] parameter(1)
  ROOT c = f32[3] conditional(k, x, x), branch_computations={b0, b1}
}
"""


@pytest.mark.parametrize("index,branch", [(0, 0), (1, 1), (5, 1), (-3, 1)])
def test_an_index_out_of_range_selects_the_last_branch(index, branch):
    """XLA's Conditional: an index outside [0, N) runs branch N-1 (here b1 = exp)."""
    x = np.array([0.5, -1.0, 2.0], np.float32)
    module = parse_module(INDEXED)
    assert run(KEY, module)[0]
    got = interpreter.run(module, [np.int32(index), x])[0][0]
    expected = -x if branch == 0 else np.exp(x)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_side_effecting_branch_is_left_alone():
    text = INDEXED.replace("ROOT e = f32[3] exponential(p)",
                           'ROOT e = f32[3] custom-call(p), custom_call_target="log", '
                           "custom_call_has_side_effect=true")
    assert not run(KEY, parse_module(text))[0]


def collective_branch(groups: str) -> str:
    return f"""HloModule m, replica_count=4
sum {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
b0 {{
  p = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(p), replica_groups={groups}, to_apply=sum
}}
b1 {{
  p = f32[3] parameter(0)
  ROOT n = f32[3] negate(p)
}}
ENTRY e {{
  x = f32[3] parameter(0)
  id = u32[] replica-id()
  two = u32[] constant(2)
  upper = pred[] compare(id, two), direction=GE
  k = s32[] convert(upper)
  ROOT c = f32[3] conditional(k, x, x), branch_computations={{b0, b1}}
}}
"""


def test_a_collective_whose_groups_follow_the_predicate_verifies_correct_on_4_devices():
    """Replicas 0, 1 take b0 and all-reduce within {0,1}; 2, 3 take b1. Converted, 2 and 3 also
    all-reduce (within {2,3}) and discard it: the results are the source's."""
    result = check_pass(parse_module(collective_branch("{{0,1},{2,3}}")), KEY, ["4x1", "4x2"],
                        VerifyOptions(minimize=False))
    assert [str(t.status) for t in result.topology_results] == ["CORRECT", "CORRECT"]


def test_a_collective_split_across_the_branches_makes_the_source_fail_not_the_target():
    """Groups {0,2},{1,3}: replica 0 reaches the all-reduce, its partner 2 does not — the source
    hangs (a collective mismatch); the converted module runs every collective everywhere."""
    module = parse_module(collective_branch("{{0,2},{1,3}}"))
    with pytest.raises(Exception, match="(?i)collective"):
        interpreter.run(module.clone(), [np.ones(3, np.float32)])
    assert run(KEY, module)[0]
    interpreter.run(module, [np.ones(3, np.float32)])
    result = check_pass(parse_module(collective_branch("{{0,2},{1,3}}")), KEY, ["4x1"],
                        VerifyOptions(minimize=False))
    verdict = result.topology_results[0]
    assert str(verdict.status) == "FAILED_TO_PROVE"
