"""The index sub-language: device coordinates, tables, fusion boundaries, and the exact
instruction named when an offset leaves it."""

from __future__ import annotations

import pytest
import z3

from neuron_sim.hlo import parse_module
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.topology import Topology
from neuron_sim.proofs.index import int_semantics as sem
from neuron_sim.proofs.index.index_encoding import DeviceCoordinates, IndexEncoder, OutsideSubLanguage


def values_per_device(text: str, topology: Topology, name: str | None = None) -> list[int]:
    """The encoded value of the entry root (or %name) on each device, by substitution."""
    module = parse_module(text)
    inst = module.entry.root if name is None else module.entry.instruction(name)
    encoder = IndexEncoder(DeviceCoordinates.of_topology(topology))
    value = encoder.encode(inst)
    out = []
    for f in range(topology.num_devices):
        r, p = topology.replica_partition(f)
        concrete = z3.substitute(value.term, (encoder.device.replica, z3.BitVecVal(r, 32)),
                                 (encoder.device.partition, z3.BitVecVal(p, 32)))
        out.append(sem.to_python_int(z3.simplify(concrete), value.etype))
    return out


def test_replica_and_partition_ids_are_the_device_coordinates():
    text = """
HloModule m, replica_count=2, num_partitions=3
ENTRY %e () -> u32[] {
  %r = u32[] replica-id()
  %p = u32[] partition-id()
  %ten = u32[] constant(10)
  %r10 = u32[] multiply(%r, %ten)
  ROOT %sum = u32[] add(%r10, %p)
}"""
    assert values_per_device(text, Topology(2, 3)) == [0, 1, 2, 10, 11, 12]


def test_table_lookup_clamps_its_index_and_reads_signed_entries():
    text = """
HloModule m, num_partitions=8
ENTRY %e () -> s32[] {
  %p = u32[] partition-id()
  %p32 = s32[] convert(%p)
  %two = s32[] constant(2)
  %shifted = s32[] subtract(%p32, %two)
  %table = s32[4]{0} constant({-7, 5, 9, -1})
  %entry = s32[1]{0} dynamic-slice(%table, %shifted), dynamic_slice_sizes={1}
  ROOT %scalar = s32[] reshape(%entry)
}"""
    # index p-2 clamped to [0, 3]: devices 0..2 read entry 0, 3 -> 1, 4 -> 2, 5..7 -> 3.
    assert values_per_device(text, Topology(1, 8)) == [-7, -7, -7, 5, 9, -1, -1, -1]


def test_two_dimensional_table_reads_one_element():
    text = """
HloModule m, replica_count=2, num_partitions=2
ENTRY %e () -> s32[] {
  %r = u32[] replica-id()
  %p = u32[] partition-id()
  %table = s32[2,2]{1,0} constant({{3, 1}, {0, 2}})
  %entry = s32[1,1]{1,0} dynamic-slice(%table, %r, %p), dynamic_slice_sizes={1,1}
  ROOT %scalar = s32[] bitcast(%entry)
}"""
    assert values_per_device(text, Topology(2, 2)) == [3, 1, 0, 2]


def test_select_compare_min_max_clamp_and_bit_ops():
    text = """
HloModule m, num_partitions=8
ENTRY %e () -> s32[] {
  %p = u32[] partition-id()
  %q = s32[] convert(%p)
  %three = s32[] constant(3)
  %big = pred[] compare(%q, %three), direction=GT
  %neg = s32[] negate(%q)
  %chosen = s32[] select(%big, %neg, %q)
  %lo = s32[] constant(-5)
  %hi = s32[] constant(2)
  %clamped = s32[] clamp(%lo, %chosen, %hi)
  %one = s32[] constant(1)
  %x = s32[] xor(%clamped, %one)
  %m = s32[] maximum(%x, %lo)
  ROOT %abs = s32[] abs(%m)
}"""
    expected = []
    for p in range(8):
        chosen = -p if p > 3 else p
        clamped = min(max(chosen, -5), 2)
        expected.append(abs(max(clamped ^ 1, -5)))
    assert values_per_device(text, Topology(1, 8)) == expected


def test_fusion_parameters_stand_for_the_callers_operands():
    text = """
HloModule m, num_partitions=4
%offset_computation (a: u32[], b: s32[]) -> s32[] {
  %a = u32[] parameter(0)
  %b = s32[] parameter(1)
  %a32 = s32[] convert(%a)
  ROOT %mul = s32[] multiply(%a32, %b)
}
ENTRY %e () -> s32[] {
  %p = u32[] partition-id()
  %five = s32[] constant(5)
  ROOT %f = s32[] fusion(%p, %five), kind=kLoop, calls=%offset_computation
}"""
    assert values_per_device(text, Topology(1, 4)) == [0, 5, 10, 15]


def test_multi_output_fusion_element_is_followed():
    text = """
HloModule m, num_partitions=2
%two_values (a: u32[]) -> (u32[], u32[]) {
  %a = u32[] parameter(0)
  %seven = u32[] constant(7)
  %plus = u32[] add(%a, %seven)
  ROOT %t = (u32[], u32[]) tuple(%a, %plus)
}
ENTRY %e () -> u32[] {
  %p = u32[] partition-id()
  %f = (u32[], u32[]) fusion(%p), kind=kLoop, calls=%two_values
  ROOT %g = u32[] get-tuple-element(%f), index=1
}"""
    assert values_per_device(text, Topology(1, 2)) == [7, 8]


@pytest.mark.parametrize("body, culprit, reason", [
    ("%x = f32[] parameter(0)\n  %c = f32[] constant(2)\n  ROOT %o = f32[] multiply(%x, %c)",
     "o", "f32 is not an integer or pred type"),
    ("%x = s32[] parameter(0)\n  %c = s32[] constant(2)\n  ROOT %o = s32[] multiply(%x, %c)",
     "x", "parameter 0 of e is an input"),
    ("%x = s32[] parameter(0)\n  %v = s32[4]{0} broadcast(%x), dimensions={}\n"
     "  ROOT %o = s32[] reshape(%v)", "v", "has 4 elements"),
    ("%x = s32[] parameter(0)\n  ROOT %o = s32[] popcnt(%x)", "o", "popcnt is not an index"),
])
def test_outside_the_sub_language_names_the_instruction(body, culprit, reason):
    result = body.split("ROOT %o = ")[1].split()[0]
    module = parse_module(f"HloModule m\nENTRY %e (x: {body.split()[2][:3]}[]) -> {result} {{\n  "
                          f"{body}\n}}")
    encoder = IndexEncoder(DeviceCoordinates.of_topology(Topology()))
    with pytest.raises(OutsideSubLanguage) as info:
        encoder.encode(module.entry.root)
    assert info.value.instruction.name == culprit
    assert reason in str(info.value)
    assert f"%{culprit} = " in str(info.value)


def test_elided_table_is_outside_the_sub_language():
    module = parse_module("""
HloModule m, num_partitions=2
ENTRY %e () -> s32[1] {
  %p = u32[] partition-id()
  %table = s32[2]{0} constant({...})
  ROOT %entry = s32[1]{0} dynamic-slice(%table, %p), dynamic_slice_sizes={1}
}""")
    with pytest.raises(OutsideSubLanguage, match="elided"):
        IndexEncoder(DeviceCoordinates.of_topology(Topology(1, 2))).encode(module.entry.root)


def test_device_lookup_table_of_4096_devices_in_structured_groups_is_small():
    """Positions of 512 contiguous groups of 8 depend on three bits only: the table shares
    subtrees and has a handful of nodes, not 4096."""
    topology = Topology(1, 4096)
    device = DeviceCoordinates.of_topology(topology)
    table = device.lookup(topology, [f % 8 for f in range(4096)], 16)
    assert len(str(z3.simplify(table)).split("If")) - 1 <= 8
    solver = z3.Solver()
    solver.add(*device.constraints, table != z3.Extract(15, 0, device.partition) & 7)
    assert solver.check() == z3.unsat


def test_element_types_of_results_are_kept():
    module = parse_module("""
HloModule m, num_partitions=2
ENTRY %e () -> s8[] {
  %p = u32[] partition-id()
  ROOT %n = s8[] convert(%p)
}""")
    value = IndexEncoder(DeviceCoordinates.of_topology(Topology(1, 2))).encode(module.entry.root)
    assert value.etype is ElementType.S8 and value.term.size() == 8
