"""interpreter.limits.call_depth, the walk every execute makes, gives HloModule.call_depth's
answer: by hand on a chain, a diamond and cycles, and equal to it on every module of the JAX
corpus (while loops, conditionals, fusions, reducers, sorts)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from interpreter.limits import CallDepthExceeded, call_depth, require_call_depth
from neuron_sim.hlo import parse_module, parse_module_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"

CALLS = """HloModule calls
leaf {{
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
}}
mid {{
  p = f32[2] parameter(0)
  ROOT c = f32[2] call(p), to_apply=leaf
}}
ENTRY main {{
  x = f32[2] parameter(0)
  a = f32[2] call(x), to_apply=mid
  b = f32[2] call(x), to_apply={second}
  ROOT s = f32[2] add(a, b)
}}
"""


@pytest.mark.parametrize("second,depth", [("leaf", 2), ("mid", 2)])
def test_the_longest_chain_counts(second, depth):
    """By hand: main -> mid -> leaf is 2 deep; a second call of leaf (or of mid again, a
    diamond) from main does not lengthen it."""
    module = parse_module(CALLS.format(second=second))
    assert call_depth(module) == module.call_depth() == depth


def test_a_cycle_is_unbounded_and_refused():
    module = parse_module(CALLS.format(second="leaf"))
    mid = module.computation("mid")
    mid.root.attrs["to_apply"] = mid  # mid now calls itself
    assert call_depth(module) == module.call_depth() == sys.maxsize
    with pytest.raises(CallDepthExceeded, match="call each other in a cycle"):
        require_call_depth(module)
    leaf = module.computation("leaf")
    mid.root.attrs["to_apply"] = leaf
    leaf.root.attrs["to_apply"] = mid  # not a call instruction: the attribute still calls
    assert call_depth(module) == module.call_depth() == sys.maxsize


def test_a_module_edited_between_walks_is_walked_again():
    """Nothing is kept between calls: a call added after the first walk counts."""
    module = parse_module(CALLS.format(second="leaf"))
    assert call_depth(module) == 2
    module.computation("leaf").root.attrs["to_apply"] = module.computation("mid")
    assert call_depth(module) == sys.maxsize


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.hlo")), ids=lambda p: p.stem)
def test_equals_the_modules_own_depth_on_the_corpus(path):
    module = parse_module_file(path)
    assert call_depth(module) == module.call_depth()
