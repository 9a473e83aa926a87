"""dce: dead instructions go (not parameters, roots or side effects), then dead computations."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.passes import PassPipeline, get_pass

from pass_fixtures import load

MODULE = """HloModule dead, num_partitions=2

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4], unused: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %unused = f32[4]{0} parameter(1)
  %dead.ar = f32[4]{0} all-reduce(%x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%sum
  %dead.negate = f32[4]{0} negate(%dead.ar)
  %kept.layout = f32[4]{0} all-reduce(%x), channel_id=2, replica_groups={{0,1}}, constrain_layout=true, use_global_device_ids=true, to_apply=%sum
  %token = token[] after-all()
  %kept.outfeed = token[] outfeed(%x, %token), outfeed_shape=f32[4]{0}
  %kept.custom = f32[4]{0} custom-call(%x), custom_call_target="effect", custom_call_has_side_effect=true
  %dead.custom = f32[4]{0} custom-call(%x), custom_call_target="pure"
  ROOT %abs = f32[4]{0} abs(%x)
}
"""


def test_removes_dead_values_but_not_parameters_roots_or_side_effects():
    module = parse_module(MODULE)
    dce = get_pass("dce")
    assert dce.run(module) is True
    names = [i.name for i in module.entry.instructions]
    assert names == ["x", "unused", "kept.layout", "token", "kept.outfeed", "kept.custom", "abs"]
    assert dce.rewrites == ["%dead.custom removed (dead custom-call)",
                            "%dead.negate removed (dead negate)",
                            "%dead.ar removed (dead all-reduce)"]
    assert [c.name for c in module.computations] == ["sum", "main"]  # still called


def test_nothing_dead_is_no_change():
    module = parse_module(MODULE)
    get_pass("dce").run(module)
    assert get_pass("dce").run(module) is False


def test_after_the_fold_there_is_nothing_left_for_dce():
    # replace_instruction already removed the all-reduce and the offset sub-tree.
    module = load("ar_ds_multiple_groups/match_repeated.hlo")
    pipeline = PassPipeline(["aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups", "dce"])
    pipeline.run(module)
    assert [changed for _, changed in pipeline.results] == [True, False]
    assert [i.name for i in module.entry.instructions] == ["x", "y", "reduce-scatter", "other",
                                                           "tuple"]
