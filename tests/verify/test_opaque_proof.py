"""The proof for all inputs through ops it has no term model of (sort, argmax reduces,
gather on data, loops on data...): each is one opaque term of all its operands, so an
untouched op proves equal, and a changed one stops the proof instead of deciding it."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.proofs.all_inputs import prove
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions, check_modules

OPTIONS = VerifyOptions(trials=3, minimize=False)

SORT = """HloModule s
%less (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(%a, %b), direction=DIRECTION
}
ENTRY %main (x: f32[6]) -> f32[6] {
  %x = f32[6] parameter(0)
  %n = f32[6] negate(%x)
  %m = f32[6] negate(%n)
  ROOT %s = f32[6] sort(SORTED), dimensions={0}, to_apply=%less
}
"""


def test_an_untouched_sort_is_proved_and_a_changed_operand_stops_the_proof():
    """The same sort of the same operand is equal for all inputs. Sorting x instead of
    negate(negate(x)) is the same too (by hand), but the operand terms differ and z3 cannot
    see through a sort: the proof stops there, naming the sort, rather than decide."""
    source = parse_module(SORT.replace("DIRECTION", "LT").replace("SORTED", "%m"))
    result = check_modules(source, source.clone(), ["1x1"], OPTIONS)
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.notes
    proof = prove(source, parse_module(SORT.replace("DIRECTION", "LT").replace("SORTED", "%x")),
                  Topology(1, 1))
    assert proof.outcome == "unsupported" and "sort" in proof.reason


def test_a_changed_comparator_is_not_proved_and_sampling_refutes_it():
    """A descending sort differs from an ascending one on any input with two distinct
    values: the opaque terms differ (their comparators), so the proof stops, and the sampled
    inputs show the difference."""
    source = parse_module(SORT.replace("DIRECTION", "LT").replace("SORTED", "%m"))
    target = parse_module(SORT.replace("DIRECTION", "GT").replace("SORTED", "%m"))
    proof = prove(source, target, Topology(1, 1))
    assert proof.outcome == "unsupported"
    result = check_modules(source, target, ["1x1"], OPTIONS)
    assert result.status is Status.UNSOUND


LOOP = """HloModule w
%cond (s: (f32[], f32[3])) -> pred[] {
  %s = (f32[], f32[3]) parameter(0)
  %v = f32[] get-tuple-element(%s), index=0
  %limit = f32[] constant(100)
  ROOT %lt = pred[] compare(%v, %limit), direction=LT
}
%body (s: (f32[], f32[3])) -> (f32[], f32[3]) {
  %s = (f32[], f32[3]) parameter(0)
  %v = f32[] get-tuple-element(%s), index=0
  %two = f32[] constant(2)
  %w = f32[] multiply(%v, %two)
  %x = f32[3] get-tuple-element(%s), index=1
  %r = f32[3] reverse(%x), dimensions={0}
  ROOT %t = (f32[], f32[3]) tuple(%w, %r)
}
ENTRY %main (v: f32[], x: f32[3]) -> f32[3] {
  %v = f32[] parameter(0)
  %x = f32[3] parameter(1)
  %t = (f32[], f32[3]) tuple(%v, %x)
  %l = (f32[], f32[3]) while(%t), condition=%cond, body=%body
  ROOT %o = f32[3] get-tuple-element(%l), index=1
}
"""


def test_a_loop_on_data_is_one_term_of_its_state():
    """A loop doubling v until it reaches 100 (the trip count depends on v) is the same loop
    in source and target: proved equal for all inputs on which it ends."""
    module = parse_module(LOOP)
    proof = prove(module, module.clone(), Topology(1, 1))
    assert proof.outcome == "equal", proof.reason


DEVICE_SORT = """HloModule d, num_partitions=2
%less (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %p = u32[] partition-id()
  %z = u32[] constant(0)
  %first = pred[] compare(%p, %z), direction=EQ
  %lt = pred[] compare(%a, %b), direction=LT
  %gt = pred[] compare(%a, %b), direction=GT
  ROOT %c = pred[] select(%first, %lt, %gt)
}
ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0), parameter_replication={true}
  ROOT %s = f32[4] sort(%x), dimensions={0}, to_apply=%less
}
"""


def test_an_op_that_reads_the_device_id_inside_is_not_opaque():
    """The comparator depends on the partition: the sort is not a function of its operands
    alone, so it is not compared as a whole (the proof stops and says why)."""
    module = parse_module(DEVICE_SORT)
    proof = prove(module, module.clone(), Topology(1, 2))
    assert proof.outcome == "unsupported" and "partition-id" in proof.reason


BITS = """HloModule b
ENTRY %main (state: u64[2]) -> (u64[2], u32[4]) {
  %state = u64[2] parameter(0)
  ROOT %g = (u64[2], u32[4]) rng-bit-generator(%state), algorithm=ALGORITHM
}
"""


def test_an_rng_bit_generator_is_a_function_of_its_state():
    """rng-bit-generator draws nothing: its bits are a fixed function of the state operand
    (XLA's definition), so the same generator on the same input state is equal for all
    inputs, and a changed algorithm (philox instead of three-fry: different bits for almost
    every state) stops the proof instead of being proved."""
    module = parse_module(BITS.replace("ALGORITHM", "rng_three_fry"))
    assert prove(module, module.clone(), Topology(1, 1)).outcome == "equal"
    other = parse_module(BITS.replace("ALGORITHM", "rng_philox"))
    proof = prove(module, other, Topology(1, 1))
    assert proof.outcome == "unsupported" and "rng-bit-generator" in proof.reason
