"""TransformVariadicReduce: JAX's argmax / argmin reduces rewritten, verified and run against
JAX's outputs; each gate; the known unsafety of the value leaf."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.verify import VerifyOptions, check_pass

from canonicalizer_fixtures import TOPOLOGIES, jax_module, run
from pass_fixtures import JAX_CORPUS

KEY = "aws_neuron_transform_variadic_reduce"
FIXTURES = ["lowered_argcond_argmax", "compiled_argcond_argmax", "spmd_argcond_argmax"]

COMPARATOR = """
cmp {{
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  ne = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, ne)
  value = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction={tie}
  tie = pred[] and(eq, lt)
  keep = pred[] or(pick, tie)
  index = s32[] select(keep, ai, bi)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}}
"""


def argmax_module(*, tie: str = "LT", index: str = "s32[4,6] iota(), iota_dimension=1",
                  init: str = "-inf", dims: str = "1", out: str = "4", root: int = 1) -> str:
    return (f"HloModule m\n{COMPARATOR.format(tie=tie)}\nENTRY e {{\n"
            "  x = f32[4,6] parameter(0)\n"
            f"  i = {index}\n"
            f"  low = f32[] constant({init})\n"
            "  zero = s32[] constant(0)\n"
            f"  r = (f32[{out}], s32[{out}]) reduce(x, i, low, zero), dimensions={{{dims}}}, "
            "to_apply=cmp\n"
            f"  ROOT g = get-tuple-element(r), index={root}\n}}\n")


@pytest.mark.parametrize("name", FIXTURES)
def test_jax_argmax_fixtures_are_rewritten_and_verify_correct(name):
    module = jax_module(name)
    changed, log = run(KEY, module)
    assert changed and log
    topologies = TOPOLOGIES if not name.startswith("spmd") else ["1x8", "2x4", "1x1"]
    result = check_pass(jax_module(name), KEY, topologies, VerifyOptions(minimize=False))
    assert [str(t.status) for t in result.topology_results] == ["CORRECT"] * 3


@pytest.mark.parametrize("name", FIXTURES)
def test_rewritten_module_matches_jax_outputs(name):
    module = jax_module(name)
    run(KEY, module)
    assert not any(r.opcode.spelling == "reduce" and len(r.operands) == 4
                   for r in module.instructions())
    data = np.load(JAX_CORPUS / f"{name}.npz")
    inputs = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
    outputs = interpreter.run(module, inputs)
    for j, got in enumerate(outputs):
        np.testing.assert_array_equal(got, data[f"out{j}"])


def test_the_tie_break_and_nan_come_from_the_comparator():
    """Hand derivation: row [3, 1, 3, nan, nan, 3] -> the first NaN (index 3); row [2, 5, 5, 0,
    5, 1] -> the lower of the tied 5s (index 1); with the rewritten chain the same."""
    module = parse_module(argmax_module())
    x = np.array([[3, 1, 3, np.nan, np.nan, 3], [2, 5, 5, 0, 5, 1], [-np.inf] * 6,
                  [0, -0.0, 0, 0, -0.0, 0]], np.float32)
    before = interpreter.run(module, [x])[0]
    changed, _ = run(KEY, module)
    assert changed
    after = interpreter.run(module, [x])[0]
    np.testing.assert_array_equal(before[0], [3, 1, 0, 0])
    np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("text", [
    argmax_module(tie="GT"),                                            # ties to the higher index
    argmax_module(index="s32[4,6] parameter(1)"),                       # indices not an iota
    argmax_module(index="s32[4,6] iota(), iota_dimension=0"),           # iota on the other dim
    argmax_module(init="0"),                                            # init not neutral
    argmax_module(dims="0,1", out="", index="s32[4,6] iota(), iota_dimension=1"),  # two dims
], ids=["tie_to_higher_index", "indices_parameter", "iota_other_dim", "init_not_neutral",
        "two_reduced_dims"])
def test_unrecognised_reduces_are_left_alone(text):
    changed, _ = run(KEY, parse_module(text))
    assert not changed


def test_a_non_tuple_reduce_is_left_alone():
    module = parse_module("HloModule m\nmx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
                          " ROOT m = f32[] maximum(a, b)\n}\nENTRY e {\n x = f32[4,6] parameter(0)"
                          "\n low = f32[] constant(-inf)\n ROOT r = f32[4] reduce(x, low), "
                          "dimensions={1}, to_apply=mx\n}\n")
    assert not run(KEY, module)[0]


def test_the_value_leaf_loses_the_sign_of_a_zero_maximum_and_the_verifier_shows_it():
    """Row [-0, +0, -0]: the comparator keeps the last zero equal to the max (-0); reduce-max
    gives +0. Used as the value leaf, the rewrite is UNSOUND on exactly that input."""
    text = argmax_module(root=0)
    x = np.zeros((4, 6), np.float32)
    x[0, ::2] = -0.0
    x[0, 5] = -0.0
    result = check_pass(parse_module(text), KEY, ["1x1"],
                        VerifyOptions(inputs=[[x]], minimize=False))
    assert str(result.topology_results[0].status) == "UNSOUND"
