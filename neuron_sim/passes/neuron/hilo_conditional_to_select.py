"""HiloConditionalToSelect (key ``aws_neuron_hilo_conditional_to_select``).

Seed: hlo-misc-cleanup-sweep.txt §3.3. ``DoConditionalToSelect`` (@0x1eb1160) returns if any
branch ``HasSideEffect()`` ("Not transforming conditional; branches have side effects:"), else
inlines both branches (``CallInliner::Inline``), converts the predicate to PRED and builds one
``MakeSelectHlo(pred, true_value, false_value)`` per leaf of the result, re-tupled with
``CreateTuple`` when the result is a tuple, and replaces the conditional.

Our reading (seed status "our reading"):

* JAX's ``lax.cond`` gives an s32-indexed two-branch conditional (``branch_computations={b0,
  b1}``), not a pred one. XLA's Conditional semantics run branch N-1 for an index out of
  [0, N), so with N = 2 the predicate is ``index == 0`` selecting branch 0 and every other
  value (1, negative, past the end) selects branch 1. A pred conditional selects
  ``true_computation`` where the pred is true.
* More than two branches (``lax.switch``) are left alone, as the seed's pass is for two.
* Side effects are XLA's ``HasSideEffect`` (recursively through called computations): send,
  recv, infeed, outfeed, rng, the async collective start/done ops, collective-broadcast,
  custom-calls with ``custom_call_has_side_effect=true``, collectives with
  ``constrain_layout=true``, and collectives with a ``channel_id`` — XLA counts these only in a
  module that is not SPMD-partitioned, which the text does not say; we take the conservative
  side (``neuron_sim.passes.xla.dce.has_side_effect`` with channel collectives kept).
* A collective without channel_id (cross-replica) in a branch is no side effect in XLA and the
  conditional is converted. Executing both branches makes every device reach every collective
  of both branches: where the source ran a collective only on the devices that took its
  branch, every group's members now all join it, so no rendezvous that the source completed
  breaks, and the devices that did not take the branch discard the result through the select.
  A source in which a group's members took different branches hangs (the interpreter reports
  a collective mismatch); the converted module then runs — a refinement of a failing source,
  which the verifier reports as the source failing (tests show both).

Known unsafety: both branches are always computed, so a branch that is expensive, or whose
value is undefined (an out-of-range divide, a NaN) where it is not taken, now runs everywhere;
the select discards the value, so results are unchanged.
"""

from __future__ import annotations

import logging

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.neuron.pattern_helpers import MatchResult, MATCHED, reject
from neuron_sim.passes.xla.dce import has_side_effect

LOG = logging.getLogger(__name__)
SEED = "hlo-misc-cleanup-sweep.txt §3.3 HiloConditionalToSelect (DoConditionalToSelect)"
SIDE_EFFECTS = "Not transforming conditional; branches have side effects: "


def branches_of(cond: HloInstruction) -> list[HloComputation]:
    """The branch computations in branch order (a pred conditional: true, then false)."""
    if cond.has("branch_computations"):
        return list(cond.get("branch_computations"))
    return [cond.get("true_computation"), cond.get("false_computation")]


def side_effecting_instruction(computation: HloComputation) -> HloInstruction | None:
    """The first instruction of ``computation`` (or of a computation it calls) that has a side
    effect in XLA's sense, read as described in the module docstring; None if there is none."""
    stack, seen = [computation], set()
    while stack:
        comp = stack.pop()
        if comp in seen:
            continue
        seen.add(comp)
        for inst in comp.instructions:
            if inst.opcode is Opcode.COLLECTIVE_BROADCAST \
                    or has_side_effect(inst, keep_channel_collectives=True):
                return inst
            stack.extend(inst.called_computations)
    return None


def inline(computation: HloComputation, argument: HloInstruction,
           into: HloComputation, before: HloInstruction) -> HloInstruction:
    """Copy ``computation`` (one parameter) into ``into`` before ``before``, its parameter
    replaced by ``argument``; returns the copy of its root."""
    copies: dict[HloInstruction, HloInstruction] = {}
    for inst in computation.post_order():
        if inst.opcode is Opcode.PARAMETER:
            copies[inst] = argument
            continue
        clone = HloInstruction(inst.name, inst.opcode, inst.shape,
                               [copies[o] for o in inst.operands], dict(inst.attrs),
                               literal=inst.literal, parameter_number=inst.parameter_number)
        copies[inst] = into.add_before(clone, before)
    return copies[computation.root]


class HiloConditionalToSelect(OpExpanderPass):
    """A two-branch conditional without side effects -> both branches inlined + per-leaf select."""

    name = "aws_neuron_hilo_conditional_to_select"
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("two-branch conditional (pred, or s32 index: 0 -> branch 0, anything else -> "
               "branch 1) without side effects -> both branches inlined + select per leaf")
    pipelines = {"neuron-closer": 70}
    seed_says = ("a predicated 2-branch conditional whose branches have no `HasSideEffect`: both "
                 "branches inlined (`CallInliner`), the pred converted to PRED, one "
                 "`MakeSelectHlo` per leaf, `CreateTuple`")
    our_reading = ("JAX's s32-indexed two-branch form: index 0 -> branch 0, every other value -> "
                   "branch 1 (XLA runs branch N-1 for an out-of-range index); three or more "
                   "branches left alone; side effects = XLA's `HasSideEffect`, channel "
                   "collectives counted (not-SPMD reading)")
    known_unsafety = ("both branches always run (cost; a collective without channel_id now joined "
                      "by every device: never breaks a rendezvous the source completed, turns a "
                      "hanging source into a running one)")

    def check(self, cond: HloInstruction) -> MatchResult:
        """Why ``cond`` is or is not converted (the checks in order)."""
        if cond.opcode is not Opcode.CONDITIONAL:
            return MatchResult(1, "not a conditional")
        branches = branches_of(cond)
        if len(branches) != 2 or len(cond.operands) != 3:
            return reject(LOG, cond, 2, f"{len(branches)} branches, not two")
        for branch in branches:
            culprit = side_effecting_instruction(branch)
            if culprit is not None:
                return reject(LOG, cond, 3, f"{SIDE_EFFECTS}%{culprit.name} in {branch.name}")
        return MATCHED

    def matches(self, inst: HloInstruction) -> bool:
        return inst.opcode is Opcode.CONDITIONAL and bool(self.check(inst))

    def expand(self, cond: HloInstruction) -> HloInstruction:
        comp = cond.parent
        selector, first_operand, second_operand = cond.operands
        first, second = branches_of(cond)

        def add(opcode: Opcode, operands, **attributes) -> HloInstruction:
            return comp.add_before(make_instruction(comp, opcode, operands, **attributes), cond)

        if selector.shape.element_type.is_integral:
            zero_shape = ArrayShape(selector.shape.element_type, ())
            zero = add(Opcode.CONSTANT, (), shape=zero_shape,
                       literal=Literal.from_array(zero_shape, 0))
            predicate = add(Opcode.COMPARE, (selector, zero), direction="EQ")
        else:
            predicate = selector
        on_first = inline(first, first_operand, comp, cond)
        on_second = inline(second, second_operand, comp, cond)

        def select(shape: Shape, a: HloInstruction, b: HloInstruction) -> HloInstruction:
            if isinstance(shape, TupleShape):
                leaves = [select(element, self._element(a, i, add), self._element(b, i, add))
                          for i, element in enumerate(shape.elements)]
                return add(Opcode.TUPLE, leaves)
            pred = predicate if not shape.rank else add(
                Opcode.BROADCAST, (predicate,),
                shape=ArrayShape(predicate.shape.element_type, shape.dims, shape.layout),
                dimensions=())
            return add(Opcode.SELECT, (pred, a, b))

        result = select(cond.shape, on_first, on_second)
        self.record(f"%{cond.name}: branches %{first.name} (selector == 0 or pred true) and "
                    f"%{second.name} inlined, {_leaf_count(cond.shape)} select(s)")
        return result

    @staticmethod
    def _element(tuple_value: HloInstruction, index: int, add) -> HloInstruction:
        if tuple_value.opcode is Opcode.TUPLE:
            return tuple_value.operand(index)
        return add(Opcode.GET_TUPLE_ELEMENT, (tuple_value,), index=index)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return f"%{old.name} -> %{new.name} (conditional to select)"


def _leaf_count(shape: Shape) -> int:
    if isinstance(shape, TupleShape):
        return sum(_leaf_count(element) for element in shape.elements)
    return 1
