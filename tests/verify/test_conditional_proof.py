"""The proof for all inputs through conditionals whose branch depends on the inputs (an
if-then-else term per element) or differs between devices (each device's branch)."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.proofs.all_inputs import prove
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules

OPTIONS = VerifyOptions(trials=2, minimize=False)

PRED_COND = """HloModule c
%neg (t: (f32[4])) -> f32[4] {
  %t = (f32[4]) parameter(0)
  %x = f32[4] get-tuple-element(%t), index=0
  ROOT %n = f32[4] negate(%x)
}
%same (t: (f32[4])) -> f32[4] {
  %t = (f32[4]) parameter(0)
  ROOT %x = f32[4] get-tuple-element(%t), index=0
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %first = f32[1] slice(%x), slice={[0:1]}
  %s = f32[] reshape(%first)
  %zero = f32[] constant(0)
  %p = pred[] compare(%s, %zero), direction=GT
  %t = (f32[4]) tuple(%x)
  ROOT %c = f32[4] conditional(%p, %t, %t), true_computation=%neg, false_computation=%same
}
"""
PRED_SELECT = """HloModule s
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %first = f32[1] slice(%x), slice={[0:1]}
  %s = f32[] reshape(%first)
  %zero = f32[] constant(0)
  %p = pred[] compare(%s, %zero), direction=GT
  %b = pred[4] broadcast(%p), dimensions={}
  %n = f32[4] negate(%x)
  ROOT %r = f32[4] select(%b, ON_TRUE, ON_FALSE)
}
"""


def test_a_conditional_on_data_equals_the_select_of_its_branches():
    """By hand: the conditional returns -x when x[0] > 0 and x otherwise; select(x[0] > 0,
    -x, x) returns the same bits on every input."""
    target = PRED_SELECT.replace("ON_TRUE", "%n").replace("ON_FALSE", "%x")
    result = check_modules(parse_module(PRED_COND), parse_module(target), ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes


def test_swapped_branches_are_refuted():
    """select(x[0] > 0, x, -x) differs from the conditional wherever x is not ±0 or NaN."""
    target = PRED_SELECT.replace("ON_TRUE", "%x").replace("ON_FALSE", "%n")
    result = check_modules(parse_module(PRED_COND), parse_module(target), ["1x1"], OPTIONS)
    assert result.status is Status.UNSOUND


INDEXED = """HloModule i
%b0 (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2] parameter(0)
}
%b1 (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%x)
}
%b2 (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %a = f32[2] abs(%x)
}
ENTRY %main (i: s32[], x: f32[2]) -> f32[2] {
  %i = s32[] parameter(0)
  %x = f32[2] parameter(1)
  ROOT %c = f32[2] conditional(%i, %x, %x, %x), branch_computations={%b0, %b1, %b2}
}
"""
INDEXED_SELECT = """HloModule j
ENTRY %main (i: s32[], x: f32[2]) -> f32[2] {
  %i = s32[] parameter(0)
  %x = f32[2] parameter(1)
  %zero = s32[] constant(0)
  %one = s32[] constant(1)
  %is0 = pred[] compare(%i, %zero), direction=EQ
  %is1 = pred[] compare(%i, %one), direction=EQ
  %p0 = pred[2] broadcast(%is0), dimensions={}
  %p1 = pred[2] broadcast(%is1), dimensions={}
  %n = f32[2] negate(%x)
  %a = f32[2] abs(%x)
  %inner = f32[2] select(%p1, %n, OUT_OF_RANGE)
  ROOT %r = f32[2] select(%p0, %x, %inner)
}
"""


def test_an_indexed_conditional_takes_the_last_branch_out_of_range():
    """XLA runs the last branch for an index below 0 or past the end: the nested select with
    abs as its default is equal for all inputs; one with the identity as default differs for
    i outside {0, 1} on any x < 0 — z3 finds such an i (the sampled indices may not)."""
    right = INDEXED_SELECT.replace("OUT_OF_RANGE", "%a")
    result = check_modules(parse_module(INDEXED), parse_module(right), ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    wrong = INDEXED_SELECT.replace("OUT_OF_RANGE", "%x")
    result = check_modules(parse_module(INDEXED), parse_module(wrong), ["1x1"], OPTIONS)
    assert result.status is Status.UNSOUND


PSUM_BRANCH = """HloModule p, replica_count=2
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%reduce_it (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %r = f32[2] all-reduce(%x), replica_groups={}, to_apply=%sum
}
%keep (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2] parameter(0)
}
ENTRY %main (p: pred[], x: f32[2]) -> f32[2] {
  %p = pred[] parameter(0), parameter_replication={true}
  %x = f32[2] parameter(1)
  ROOT %c = f32[2] conditional(%p, %x, %x), true_computation=%reduce_it, false_computation=%keep
}
"""


PSUM_SELECT = """HloModule q, replica_count=2
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (p: pred[], x: f32[2]) -> f32[2] {
  %p = pred[] parameter(0), parameter_replication={true}
  %x = f32[2] parameter(1)
  %r = f32[2] all-reduce(%x), replica_groups={}, to_apply=%sum
  %b = pred[2] broadcast(%p), dimensions={}
  ROOT %s = f32[2] select(%b, %r, %x)
}
"""


def test_a_branch_with_a_collective_runs_only_under_a_selector_the_same_everywhere():
    """With p declared replicated, both replicas take the same branch for every input, so
    the all-reduce branch meets its peers whenever it is taken: the conditional equals
    select(p, all-reduce(x), x) for all inputs. With p per device, replicas may disagree
    (the source is then undefined), and running the all-reduce where it is not taken would
    change what the devices meet at: the proof stops and names it; the verdict stays
    sampled."""
    module = parse_module(PSUM_BRANCH)
    result = check_modules(module, parse_module(PSUM_SELECT), None, OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    per_device = parse_module(PSUM_BRANCH.replace(", parameter_replication={true}", ""))
    proof = prove(per_device, per_device.clone(), Topology(2, 1))
    assert proof.outcome == "unsupported"
    assert "all-reduce" in proof.reason and "untaken" in proof.reason


DEVICE_COND = """HloModule d, num_partitions=4
%neg (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  ROOT %n = f32[3] negate(%x)
}
%same (x: f32[3]) -> f32[3] {
  ROOT %x = f32[3] parameter(0)
}
ENTRY %main (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  %p = pred[] compare(%pid, %two), direction=LT
  ROOT %c = f32[3] conditional(%p, %x, %x), true_computation=%neg, false_computation=%same
}
"""


def test_a_conditional_that_differs_between_devices_is_proved_per_device():
    """Partitions 0 and 1 negate, 2 and 3 keep x: against itself, equal on every device for
    all inputs; against a module that negates everywhere, wrong on partitions 2 and 3."""
    module = parse_module(DEVICE_COND)
    result = check_modules(module, module.clone(), None, OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    everywhere = parse_module(DEVICE_COND.replace("direction=LT", "direction=GE")
                              .replace("true_computation=%neg, false_computation=%same",
                                       "true_computation=%same, false_computation=%neg")
                              .replace("constant(2)", "constant(4)"))
    result = check_modules(module, everywhere, None, OPTIONS)
    assert result.status is Status.UNSOUND and result.counterexample.device in (2, 3)
