"""The HLO builder: every op family it offers builds a module that prints as HLO the parser reads
back to an equal module and the checker accepts; inference errors name the op being built."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from neuron_sim.hlo import HloComputation, HloError, Opcode, parse_module
from neuron_sim.hlo.builder import ComputationBuilder, ModuleBuilder, make_instruction
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.topology import Topology


def scalar_sum(m: ModuleBuilder, element_type: str = "f32") -> HloComputation:
    b = m.computation(f"sum_{element_type}")
    return b.build(b.add(b.parameter(0, f"{element_type}[]", "a"),
                         b.parameter(1, f"{element_type}[]", "b")))


def elementwise(m: ModuleBuilder) -> None:
    b = m.computation("main")
    x, y = b.parameter(0, "f32[4,2]", "x"), b.parameter(1, "f32[4,2]", "y")
    total = b.add(b.multiply(x, y), b.subtract(x, b.divide(x, y)))
    biggest = b.maximum(total, b.unary(Opcode.NEGATE, x))
    less = b.compare(biggest, y, "LT")
    chosen = b.select(less, biggest, y)
    b.build(b.tuple([chosen, b.convert(chosen, "s32"), b.unary(Opcode.EXP, x)]))


def shape(m: ModuleBuilder) -> None:
    b = m.computation("main")
    x = b.parameter(0, "f32[2,3]", "x")
    flat = b.reshape(x, "f32[6]")
    wide = b.broadcast(flat, "f32[4,6]", [1])
    swapped = b.transpose(wide, [1, 0])
    part = b.slice(swapped, [0, 1], [6, 4], [2, 1])
    joined = b.concatenate([part, part], 0)
    padded = b.pad(joined, b.constant(0.0, "f32[]", "zero"), [(1, 0), (0, 2, 1)])
    pair = b.tuple([padded, b.iota("s32[5]", 0)])
    b.build(b.get_tuple_element(pair, 0))


def indexing(m: ModuleBuilder) -> None:
    b = m.computation("main")
    x = b.parameter(0, "s32[8,2]", "x")
    i, zero = b.parameter(1, "s32[]", "i"), b.constant(0, "s32[]", "zero")
    window = b.dynamic_slice(x, [i, zero], [2, 2])
    b.build(b.dynamic_update_slice(x, window, [zero, zero]))


def reduce(m: ModuleBuilder) -> None:
    total = scalar_sum(m)
    b = m.computation("main")
    x = b.parameter(0, "f32[4,3]", "x")
    b.build(b.reduce([x], [b.constant(0, "f32[]", "zero")], [1], total))


def linalg(m: ModuleBuilder) -> None:
    b = m.computation("main")
    lhs, rhs = b.parameter(0, "f32[2,4,3]", "lhs"), b.parameter(1, "f32[2,3,5]", "rhs")
    b.build(b.dot(lhs, rhs, lhs_batch_dims=[0], rhs_batch_dims=[0], lhs_contracting_dims=[2],
                  rhs_contracting_dims=[1]))


def control(m: ModuleBuilder) -> None:
    twice = m.computation("twice")
    p = twice.parameter(0, "s32[]", "p")
    twice_comp = twice.build(twice.add(p, p))
    cond = m.computation("cond")
    state = cond.parameter(0, "s32[]", "state")
    cond_comp = cond.build(cond.compare(state, cond.constant(10, "s32[]", "ten"), "LT"))
    b = m.computation("main")
    x = b.parameter(0, "s32[]", "x")
    called = b.call(twice_comp, [x])
    fused = b.fusion(twice_comp, [called])
    looped = b.while_loop(fused, cond_comp, twice_comp)
    b.build(b.conditional(b.compare(x, looped, "EQ"), x, looped, twice_comp, twice_comp))


def collective(m: ModuleBuilder) -> None:
    total = scalar_sum(m)
    b = m.computation("main")
    x = b.parameter(0, "f32[8,2]", "x")
    groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
    reduced = b.all_reduce(x, to_apply=total, replica_groups=groups, channel_id=1,
                           use_global_device_ids=True)
    scattered = b.reduce_scatter(reduced, dimension=0, to_apply=total, replica_groups=groups,
                                 channel_id=2, use_global_device_ids=True)
    gathered = b.all_gather(scattered, dimension=0, replica_groups=groups, channel_id=3,
                            use_global_device_ids=True)
    exchanged = b.all_to_all(gathered, dimension=0, replica_groups=[list(range(8))],
                             channel_id=4)
    shifted = b.collective_permute(exchanged, source_target_pairs=[(i, (i + 1) % 8)
                                                                   for i in range(8)],
                                   channel_id=5)
    b.build(b.tuple([shifted, b.partition_id(), b.replica_id()]))


def random(m: ModuleBuilder) -> None:
    b = m.computation("main")
    low, high = b.constant(0.0, "f32[]", "low"), b.constant(1.0, "f32[]", "high")
    b.build(b.rng(low, high, "f32[3,2]"))


FAMILIES: dict[str, Callable[[ModuleBuilder], None]] = {
    f.__name__: f for f in (elementwise, shape, indexing, reduce, linalg, control, collective,
                            random)
}


@pytest.mark.parametrize("family", FAMILIES)
def test_built_module_reparses_equal_and_passes_the_checker(family: str):
    m = ModuleBuilder(family, replica_count=1, num_partitions=8)
    FAMILIES[family](m)
    module = m.build()
    text = module.to_text()
    reparsed = parse_module(text)
    assert reparsed.structurally_equal(module), text
    assert reparsed.to_text() == text
    check_module(reparsed)


def test_inferred_shapes_follow_the_rules_and_get_the_default_layout():
    m = ModuleBuilder("m", num_partitions=4)
    total = scalar_sum(m)
    b = m.computation("main")
    x = b.parameter(0, "f32[8,4]", "x")
    assert str(b.reduce_scatter(x, dimension=0, to_apply=total, replica_groups=[[0, 1, 2, 3]],
                                channel_id=1, use_global_device_ids=True).shape) == "f32[2,4]{1,0}"
    assert str(b.compare(x, x, "GE").shape) == "pred[8,4]{1,0}"
    assert str(b.partition_id().shape) == "u32[]"
    assert str(b.parameter(1, "f32[2,3]{0,1}").shape) == "f32[2,3]{0,1}"


def test_attributes_print_in_xla_order_whatever_the_keyword_order():
    m = ModuleBuilder("m", num_partitions=2)
    total = scalar_sum(m)
    b = m.computation("main")
    x = b.parameter(0, "f32[2]", "x")
    ar = b.instruction(Opcode.ALL_REDUCE, [x], to_apply=total, use_global_device_ids=True,
                       replica_groups=[[0, 1]], channel_id=7)
    assert ar.to_text().endswith("channel_id=7, replica_groups={{0,1}}, "
                                 "use_global_device_ids=true, to_apply=%sum_f32")


def test_names_are_unique_in_the_module():
    m = ModuleBuilder("m")
    total = scalar_sum(m)
    b = m.computation("main")
    a = b.parameter(0, "f32[]", "a")
    added = b.add(a, a)
    assert (a.name, added.name) == ("a.1", "add.1")
    assert [i.name for i in total.instructions] == ["a", "b", "add"]


def test_a_given_shape_that_disagrees_with_inference_names_the_op():
    b = ComputationBuilder("main")
    x = b.parameter(0, "f32[8]", "x")
    with pytest.raises(HloCheckError, match=r"in computation main: building %neg = negate\(%x\): "
                                            r"the given shape f32\[4\] does not match the "
                                            r"inferred shape f32\[8\]"):
        b.instruction(Opcode.NEGATE, [x], shape="f32[4]", name="neg")


def test_operands_that_break_a_rule_name_the_op_and_the_rule():
    b = ComputationBuilder("main")
    x, y = b.parameter(0, "f32[8]", "x"), b.parameter(1, "s32[8]", "y")
    with pytest.raises(HloCheckError, match=r"building %add = add\(%x, %y\): add operands have "
                                            r"different element types"):
        b.add(x, y)
    assert [i.name for i in b.computation.instructions] == ["x", "y"]
    assert not x.users


def test_an_op_whose_result_only_it_can_tell_asks_for_its_shape():
    b = ComputationBuilder("main")
    x = b.parameter(0, "f32[8]", "x")
    with pytest.raises(HloCheckError, match=r"building %reshape = reshape\(%x\): reshape needs "
                                            r"its result shape given"):
        b.instruction(Opcode.RESHAPE, [x])


def test_collectives_and_operand_counts_are_checked_like_the_verifier_does():
    m = ModuleBuilder("m", replica_count=2)
    total = scalar_sum(m)
    b = m.computation("main")
    x = b.parameter(0, "f32[4]", "x")
    with pytest.raises(HloCheckError, match=r"building %all-reduce = all-reduce\(%x\): .*"
                                            r"2 replicas x 1 partitions"):
        b.all_reduce(x, to_apply=total, replica_groups=[[0, 1, 2, 3]])
    with pytest.raises(HloCheckError, match=r"building %plus = add\(%x\): add expects 2 operands "
                                            r"but has 1"):
        b.instruction(Opcode.ADD, [x], name="plus")


def test_an_operand_from_another_computation_is_refused():
    one, two = ComputationBuilder("one"), ComputationBuilder("two")
    x = one.parameter(0, "f32[]", "x")
    with pytest.raises(HloError, match="%x is not in computation two"):
        two.add(x, x)


def test_constants_hold_their_value():
    b = ComputationBuilder("main")
    c = b.constant(np.arange(4).reshape(2, 2), "s32[2,2]", "c")
    assert c.to_text() == "%c = s32[2,2]{1,0} constant({ { 0, 1 }, { 2, 3 } })"
    np.testing.assert_array_equal(c.literal.value, [[0, 1], [2, 3]])


def test_make_instruction_infers_the_shape_for_a_pass():
    module = parse_module("""HloModule m, replica_count=4

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8,2]) -> f32[8,2] {
  %x = f32[8,2]{1,0} parameter(0)
  ROOT %neg = f32[8,2]{1,0} negate(%x)
}
""")
    main = module.entry
    rs = make_instruction(main, Opcode.REDUCE_SCATTER, [main.instruction("x")],
                          replica_groups=[[0, 1, 2, 3]], dimensions=(0,),
                          to_apply=module.computation("sum"))
    assert rs.parent is None and str(rs.shape) == "f32[2,2]{1,0}"
    main.add_before(rs, main.root)
    check_module(module)
    with pytest.raises(HloCheckError, match="does not match the inferred shape"):
        make_instruction(main, Opcode.NEGATE, [main.instruction("x")], shape="f32[2,2]")
    unchecked = make_instruction(main, Opcode.NEGATE, [main.instruction("x")], shape="f32[2,2]",
                                 check=False)
    assert str(unchecked.shape) == "f32[2,2]"


def test_instructions_from_text_bind_the_names_they_do_not_define():
    b = ComputationBuilder("main", topology=Topology(1, 4))
    pid = b.partition_id("pid")
    added = b.instructions_from_text(["%s = u32[] constant(2)",
                                      "%offset = u32[] multiply(%pid, %s)"], {"pid": pid})
    assert list(added) == ["s", "offset"]
    assert added["offset"].operands == [pid, added["s"]]
    with pytest.raises(HloCheckError, match="multiply operands have different element types"):
        b.instructions_from_text(["%t = s32[] constant(2)", "%bad = s32[] multiply(%pid, %t)"],
                                 {"pid": pid})
