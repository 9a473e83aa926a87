"""neuron_sim.interpreter.limits.call_depth (``HloModule.call_depth``, the walk every execute makes): by
hand on a chain, a diamond and cycles, and on every module of the JAX corpus (while loops,
conditionals, fusions, reducers, sorts) equal to a plain recursive walk written here over each
instruction's ``called_computations`` — a second algorithm, not the one under test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuron_sim.interpreter.limits import CallDepthExceeded, call_depth, require_call_depth
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


def recursive_depth(computation, memo=None) -> int:
    """The longest call chain below ``computation``, by recursion (the corpus has no cycles)."""
    memo = {} if memo is None else memo
    if computation not in memo:
        callees = [c for inst in computation.instructions for c in inst.called_computations]
        memo[computation] = max((recursive_depth(c, memo) + 1 for c in callees), default=0)
    return memo[computation]


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.hlo")), ids=lambda p: p.stem)
def test_equals_a_recursive_walk_on_the_corpus(path):
    module = parse_module_file(path)
    assert call_depth(module) == recursive_depth(module.entry)
