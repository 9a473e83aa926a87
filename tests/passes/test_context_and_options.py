"""PassContext (the topology a pass runs for) and pass options: declared, given as NAME=VALUE
or PASSKEY.NAME=VALUE, resolved with the constructor's values winning, and refused when no
pass of the list declares them."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import (PassContext, PassPipeline, UnknownPassOptionError, get_pass,
                    parse_pass_option_args, resolve_pass_options)

SUM = """
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}
"""

IDENTITY_ON_ONE_REPLICA = """HloModule one_replica, replica_count=1
""" + SUM + """
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %all-reduce = f32[4]{0} all-reduce(%x), replica_groups={}, to_apply=%sum
}
"""

DEAD_CHANNEL_ALL_REDUCE = """HloModule dead_channel, num_partitions=2
""" + SUM + """
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %dead = f32[4]{0} all-reduce(%x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%sum
  ROOT %negate = f32[4]{0} negate(%x)
}
"""


def test_topology_for_is_the_contexts_or_the_module_headers():
    module = parse_module(DEAD_CHANNEL_ALL_REDUCE)
    assert PassContext().topology_for(module) == Topology(1, 2)
    assert PassContext(Topology(2, 4)).topology_for(module) == Topology(2, 4)


def test_the_guarded_delete_permute_reads_the_topology_from_the_context():
    # replica_groups={} is every replica: the identity on one replica, not on two.
    module = parse_module(IDENTITY_ON_ONE_REPLICA)
    assert get_pass("delete_permute_guarded").run(module.clone()) is True
    assert get_pass("delete_permute_guarded").run(module.clone(),
                                                  PassContext(Topology(2, 1))) is False
    # A topology given to the constructor overrides the context's.
    guarded = get_pass("delete_permute_guarded", topology=Topology(1, 1))
    assert guarded.run(module.clone(), PassContext(Topology(2, 1))) is True


def dead_all_reduce_kept(*, context: PassContext | None = None, **options) -> bool:
    module = parse_module(DEAD_CHANNEL_ALL_REDUCE)
    get_pass("dce", **options).run(module, context)
    return any(inst.name == "dead" for inst in module.entry.instructions)


def test_dce_keeps_dead_channel_collectives_only_when_asked():
    assert not dead_all_reduce_kept()
    assert dead_all_reduce_kept(keep_channel_collectives=True)
    assert dead_all_reduce_kept(context=PassContext(options={"keep_channel_collectives": "1"}))
    assert dead_all_reduce_kept(
        context=PassContext(options={"dce.keep_channel_collectives": "true"}))
    assert dead_all_reduce_kept(
        context=PassContext(options={"DeadCodeElimination.keep_channel_collectives": "yes"}))


def test_the_constructor_overrides_the_context_and_qualified_overrides_plain():
    assert not dead_all_reduce_kept(
        keep_channel_collectives=False,
        context=PassContext(options={"keep_channel_collectives": "true"}))
    assert not dead_all_reduce_kept(
        context=PassContext(options={"keep_channel_collectives": "true",
                                     "dce.keep_channel_collectives": "false"}))


def test_option_values_are_typed_and_readable_outside_a_run():
    dce = get_pass("dce")
    assert dce.option("keep_channel_collectives") is False
    assert get_pass("dce", keep_channel_collectives="on").option("keep_channel_collectives")
    with pytest.raises(KeyError, match="pass dce declares no option 'nope'"):
        dce.option("nope")


def test_the_constructor_refuses_an_option_the_pass_does_not_declare():
    with pytest.raises(UnknownPassOptionError,
                       match=r"pass dce declares no option 'keep' \(its options: "
                             r"keep_channel_collectives\)"):
        get_pass("dce", keep=True)


PIPELINE = ("aws_neuron_delete_permute", "dce")


@pytest.mark.parametrize("given,message", [
    ({"keep": "1"}, "unknown pass option 'keep': no pass of aws_neuron_delete_permute, dce "
                    "declares it (declared options: dce.keep_channel_collectives)"),
    ({"dce_guarded.keep_channel_collectives": "1"},
     "pass option 'dce_guarded.keep_channel_collectives' names pass 'dce_guarded', which is "
     "not among the passes run (aws_neuron_delete_permute, dce)"),
    ({"aws_neuron_delete_permute.keep_channel_collectives": "1"},
     "pass aws_neuron_delete_permute declares no option 'keep_channel_collectives' "
     "(its options: none)"),
    ({"keep_channel_collectives": "maybe"},
     "pass option dce.keep_channel_collectives=maybe is not a valid boolean: expected true or "
     "false"),
])
def test_resolve_pass_options_refuses_in_one_sentence(given, message):
    passes = [get_pass(name) for name in PIPELINE]
    with pytest.raises(UnknownPassOptionError) as error:
        resolve_pass_options(passes, given)
    assert str(error.value) == message
    assert isinstance(error.value, ValueError)


def test_resolve_pass_options_accepts_what_some_pass_declares_through_nested_pipelines():
    inner = PassPipeline(["dce"])
    resolve_pass_options([get_pass("aws_neuron_delete_permute"), inner],
                         {"dce.keep_channel_collectives": "true"})
    # ... and looks inside them: an option the nested dce does not declare is refused.
    with pytest.raises(UnknownPassOptionError, match="declares no option 'colour'"):
        resolve_pass_options([get_pass("aws_neuron_delete_permute"), PassPipeline(["dce"])],
                             {"dce.colour": "red"})


def test_a_pipeline_refuses_unknown_options_before_running_and_hands_known_ones_down():
    module = parse_module(DEAD_CHANNEL_ALL_REDUCE)
    before = module.to_text()
    with pytest.raises(UnknownPassOptionError):
        PassPipeline(["dce"]).run(module, PassContext(options={"typo": "1"}))
    assert module.to_text() == before
    # The first inner pipeline declares no option: it must not refuse the second's.
    outer = PassPipeline([PassPipeline(["delete_permute_guarded"]), PassPipeline(["dce"])])
    assert outer.run(module, PassContext(options={"keep_channel_collectives": "true"})) is False
    assert "dead" in [inst.name for inst in module.entry.instructions]


def test_parse_pass_option_args():
    assert parse_pass_option_args(["a=1", "dce.keep_channel_collectives=true", "a=2", "b="]) == \
        {"a": "2", "dce.keep_channel_collectives": "true", "b": ""}
    for bad in ("keep", "=1", "dce.=1", ".keep=1"):
        with pytest.raises(UnknownPassOptionError, match="is not NAME=VALUE or "
                                                         "PASSKEY.NAME=VALUE"):
            parse_pass_option_args([bad])
