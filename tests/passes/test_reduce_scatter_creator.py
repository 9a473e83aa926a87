"""ReduceScatterCreator (``xla_reduce_scatter_creator``) against XLA's own unit tests.

Every TEST_F of ``reduce_scatter_creator_test.cc`` is a fixture with its assertions transcribed
(``tests/data/xla_passes/reduce_scatter_creator_test/expectations.json``, see xla_fixtures.py);
the rewrites are also verified on the fixture's topology. The cases where XLA would crash are
hand-written below, each docstring saying why XLA fails and what ours does instead.
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.passes.xla.collective_opt_utils import dimensions_unmodified_by_reshape
from neuron_sim.verify import Status, VerifyOptions, check_pass

from xla_fixtures import check_result, load_cases

KEY = "xla_reduce_scatter_creator"
CASES = load_cases("reduce_scatter_creator_test")
VERIFIED = [c for c in CASES if c.expect["changed"]]


def test_every_test_of_the_xla_file_is_a_fixture():
    assert len(CASES) == 25


@pytest.mark.parametrize("case", CASES, ids=str)
def test_agrees_with_xla_test(case):
    module = parse_module(case.path.read_text(encoding="utf-8"), case.path.name)
    assert (module.replica_count, module.num_partitions) == \
        (case.expect["replica_count"], case.expect["num_partitions"])
    hlo_pass = get_pass(KEY)
    changed = hlo_pass.run(module)
    check_result(case, module, changed)


@pytest.mark.parametrize("case", VERIFIED, ids=str)
def test_rewrite_verifies_on_the_fixture_topology(case):
    module = parse_module(case.path.read_text(encoding="utf-8"), case.path.name)
    # A fixed memory limit: a fixture too large to run (ReproClampOnGroupLocalIndex, 26 GiB on
    # 128 devices) is then proved on symbolic positions instead of executed.
    result = check_pass(module, KEY, options=VerifyOptions(trials=1, minimize=False,
                                                           max_memory=4 << 30))
    assert result.status is Status.CORRECT, result.status
    assert result.proof == "all-inputs" or case.name != "ReproClampOnGroupLocalIndex"


AR_4 = """HloModule crash_{name}, replica_count=4

%sum {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}}

ENTRY %main {{
  %p = f32[8,4] parameter(0)
  %lo = s32[] parameter(1)
  %ar = f32[8,4] all-reduce(%p), replica_groups={{}}, to_apply=%sum
  %rid = u32[] replica-id()
  %id = s32[] convert(%rid)
  %two = s32[] constant(2)
  %zero = s32[] constant(0)
  {offset}
  ROOT %ds = {slice_shape} dynamic-slice(%ar, %offset, %zero), dynamic_slice_sizes={sizes}
}}
"""


def crash_module(name: str, offset: str, slice_shape: str = "f32[2,4]",
                 sizes: str = "{2,4}"):
    return parse_module(AR_4.format(name=name, offset=offset, slice_shape=slice_shape,
                                    sizes=sizes))


def test_multiplier_constant_zero_declines():
    """``offset = 0 * id``: XLA's IsPerIdOffset computes ``shard_size % 0`` (a crash); ours
    declines. (The offset is 0 on every device, so no fold would be right anyway.)"""
    module = crash_module("mul0", "%c0 = s32[] constant(0)\n  %offset = s32[] multiply(%id, %c0)")
    assert not get_pass(KEY).run(module)


def test_non_constant_clamp_bounds_decline():
    """``clamp(%lo, id * 2, 6)`` with a parameter bound: XLA's BacktrackToBase calls
    GetScalarInt64Value on %lo and CHECK-fails; ours neither sees through the clamp nor accepts
    it as an offset clamp, and declines."""
    module = crash_module("clamp", "%m = s32[] multiply(%id, %two)\n  %six = s32[] constant(6)\n"
                                   "  %offset = s32[] clamp(%lo, %m, %six)")
    assert not get_pass(KEY).run(module)


def test_second_cut_dimension_with_constant_zero_offset_declines():
    """The slice cuts dims 0 (offset id * 2) and 1 (offset constant 0) of f32[8,4] to [2,2]:
    XLA's ExtractSplitDimSpec skips dim 1 (constant-0 offset), matches dim 0 and builds a
    reduce-scatter f32[2,4] — not the slice's f32[2,2], so ReplaceAllUsesWith fails. Ours
    declines and says why."""
    module = crash_module("twodims", "%offset = s32[] multiply(%id, %two)", "f32[2,2]", "{2,2}")
    hlo_pass = get_pass(KEY)
    assert not hlo_pass.run(module)
    assert len(hlo_pass.skipped) == 1 and "ReplaceAllUsesWith" in hlo_pass.skipped[0]


def test_the_same_module_folds_when_only_one_dimension_is_cut():
    """Control for the three cases above: ``id * 2`` on 4 replicas, [8,4] -> [2,4], is the
    reduce-scatter (replica r reads rows 2r..2r+1, its block)."""
    module = crash_module("ok", "%offset = s32[] multiply(%id, %two)")
    assert get_pass(KEY).run(module)
    assert module.entry.root.opcode.spelling == "reduce-scatter"


def test_the_context_topology_decides():
    """A CrossReplica group of 4 replicas sliced by ``id * 2``: on 2 replicas (the caller's
    topology) the group size is 2, and 8 / 2 != 4, so there is no match."""
    module = crash_module("topology", "%offset = s32[] multiply(%id, %two)")
    assert not get_pass(KEY, topology=Topology(2, 1)).run(module)


@pytest.mark.parametrize("source, target, unmodified", [
    ((32, 8, 128), (32, 16, 64), [(0, 0)]),        # 8*128 == 16*64: only dim 0 kept
    ((336, 1024), (4, 84, 1024), [(1, 2)]),        # 336 = 4*84: dim 1 becomes dim 2
    ((2, 1, 3), (2, 3), [(0, 0), (2, 1)]),         # the 1 is dropped, both others kept
    ((6,), (2, 3), []),
])
def test_dimensions_unmodified_by_reshape(source, target, unmodified):
    assert dimensions_unmodified_by_reshape(source, target) == unmodified
