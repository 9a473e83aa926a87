"""AllReduceSimplifier (key ``xla_all_reduce_simplifier``): XLA's pass that removes collectives
that do nothing and folds all-reduces of replicated values.

Seed (faithful to XLA): ``xla/hlo/transforms/collectives/all_reduce_simplifier.cc``
(``AllReduceSimplifier::RunImpl``), in its order:

1. every all-gather / reduce-scatter whose shape equals its operand's is replaced by the
   operand; one wrapped by an async-start / async-done pair (the computation's root) has the
   async-done replaced by the async-start's operand and the computation removed;
2. every array-shaped, synchronous all-reduce is a candidate when all its participant groups
   have one size n (``GetParticipantCountsForReplicaGroups`` in its group mode, on the
   topology) and either it has no channel_id (cross-replica), or it has one, n == 1 and the
   module is SPMD-partitioned (option ``use_spmd_partitioning``, XLA's
   ``HloModuleConfig::use_spmd_partitioning``, default false as there): the replication
   analysis is cross-replica only, so an MPMD or cross-partition all-reduce is left alone;
3. a candidate with n == 1 is replaced by its operand; one whose operand is replicated across
   replicas (``neuron_sim.passes.xla.hlo_replication_analysis``) and whose reduction is one binary
   instruction over two parameters is folded by that instruction's opcode: add ->
   ``operand * broadcast(convert(s32 n))`` (convert only if the type is not s32, broadcast only
   if the rank is > 0); minimum / maximum / or / and -> the operand; anything else is kept. The
   folded all-reduce loses its users but stays in the computation, as in XLA (``dce`` removes it).

Known unsafety: the add fold is exact only in exact arithmetic — for floats ``x * n`` (one
rounding) is not always bit-equal to the all-reduce's left fold of n copies of x (a rounding per
add; they agree up to n = 3 and differ for about 44% of random f32 values at n = 8); the
verifier's exact contract reports it as UNSOUND (the tests show it). Integer sums wrap the same
way as the multiply, so they are exact. Our replication analysis is conservative where XLA's
iterates loops (see its docstring), so we may fold less, never more.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, scalar
from neuron_sim.topology import Topology, group_mode, participant_groups
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.options import PassOption, boolean
from neuron_sim.passes.xla.hlo_replication_analysis import HloReplicationAnalysis

SEED = ("xla/hlo/transforms/collectives/all_reduce_simplifier.cc (AllReduceSimplifier::RunImpl); "
        "xla/hlo/analysis/hlo_replication_analysis.cc (cross-replica)")

SAME_SHAPE_OPCODES = (Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER)
IDEMPOTENT_ROOTS = frozenset({Opcode.MINIMUM, Opcode.MAXIMUM, Opcode.OR, Opcode.AND})


def participant_count(all_reduce: HloInstruction, topology: Topology) -> int:
    """The one size of the all-reduce's participant groups on ``topology``, or -1 if they
    differ (XLA's ``get_participant_counts_for_replica_group``)."""
    mode = group_mode(all_reduce.opcode.spelling, all_reduce.channel_id is not None,
                      all_reduce.use_global_device_ids)
    sizes = {len(group) for group in participant_groups(mode, all_reduce.replica_groups,
                                                        topology)}
    return sizes.pop() if len(sizes) == 1 else -1


class AllReduceSimplifier(HloPass):
    """XLA's AllReduceSimplifier: degenerate and same-shape collectives removed, all-reduces of
    replicated operands folded by their reduction."""

    name = "xla_all_reduce_simplifier"
    seed_status = SeedStatus.FAITHFUL
    seed = SEED
    summary = ("XLA's AllReduceSimplifier: drop same-shape all-gather / reduce-scatter and "
               "groups of one; fold all-reduce of a replicated operand (add -> x * n, "
               "min/max/and/or -> x)")
    options = (PassOption(
        "use_spmd_partitioning", boolean, False,
        "the module is SPMD-partitioned (XLA's HloModuleConfig::use_spmd_partitioning): only "
        "then is an all-reduce with a channel_id and groups of one removed"),)
    hazard = relies_on(Reliance.LOGICAL_GROUPS)
    seed_says = ("XLA's AllReduceSimplifier: same-shape all-gather / reduce-scatter (also "
                 "async-wrapped) -> operand; an array all-reduce whose participant groups all "
                 "have size n: n == 1 -> operand; operand replicated across replicas "
                 "(HloReplicationAnalysis, cross-replica) and a one-instruction reduction: add -> "
                 "`x * broadcast(convert(s32 n))`, min / max / and / or -> x; a channel "
                 "all-reduce only with n == 1 and `use_spmd_partitioning`")
    our_reading = ("the replication analysis is the part the simplifier needs (conservative on "
                   "while / conditional, where XLA iterates)")
    known_unsafety = ("the add fold is `x * n` for n equal copies: for floats not always "
                      "bit-equal to their sum")

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        topology = context.topology_for(module)
        changed = self._remove_same_shape(module)
        changed |= self._remove_async_same_shape(module)
        replication = HloReplicationAnalysis(module, topology)
        spmd = self.option("use_spmd_partitioning")
        candidates: list[tuple[HloInstruction, int]] = []
        for computation in module.computations:
            for inst in computation.post_order():
                if inst.opcode is not Opcode.ALL_REDUCE or not isinstance(inst.shape, ArrayShape):
                    continue
                n = participant_count(inst, topology)
                cross_module = inst.channel_id is not None
                if n == -1 or (cross_module and (n != 1 or not spmd)):
                    continue
                if n == 1 or replication.is_replicated(inst.operand(0)):
                    candidates.append((inst, n))
        for all_reduce, n in candidates:
            changed |= self._simplify(all_reduce, n)
        return changed

    def _remove_same_shape(self, module: HloModule) -> bool:
        changed = False
        async_bodies = {c for inst in module.instructions()
                        if inst.opcode in (Opcode.ASYNC_START, Opcode.ASYNC_DONE)
                        for c in inst.called_computations}
        for computation in list(module.computations):
            if computation in async_bodies:
                continue
            for inst in computation.post_order():
                if inst.opcode in SAME_SHAPE_OPCODES and inst.parent is computation and \
                        inst.shape.compatible(inst.operand(0).shape):
                    computation.replace_instruction(inst, inst.operand(0))
                    self.record(f"%{inst.name} removed ({inst.opcode.spelling} of the same "
                                "shape as its operand)")
                    changed = True
        return changed

    def _remove_async_same_shape(self, module: HloModule) -> bool:
        changed = False
        for start in [i for i in module.instructions() if i.opcode is Opcode.ASYNC_START]:
            body = start.called_computations[0]
            root = body.root
            if root.opcode not in SAME_SHAPE_OPCODES or \
                    not root.shape.compatible(root.operand(0).shape):
                continue
            done = next((u for u in start.users if u.opcode is Opcode.ASYNC_DONE), None)
            if done is None:
                raise ValueError(f"async-start %{start.name} has no async-done")
            done.parent.replace_instruction(done, start.operand(0))
            self.record(f"%{done.name} removed (async {root.opcode.spelling} of the same shape "
                        "as its operand)")
            changed = True
        if changed:
            module.remove_dead_computations()
        return changed

    def _simplify(self, all_reduce: HloInstruction, n: int) -> bool:
        computation = all_reduce.parent
        operand = all_reduce.operand(0)
        if n == 1:
            computation.replace_instruction(all_reduce, operand)
            self.record(f"%{all_reduce.name} removed (groups of one)")
            return True
        reduction = all_reduce.to_apply
        if len(reduction) != 3 or len(reduction.parameters) != 2:
            return False
        root = reduction.root.opcode
        if root is Opcode.ADD:
            replacement = self._times_group_size(all_reduce, n)
        elif root in IDEMPOTENT_ROOTS:
            replacement = operand
        else:
            return False
        all_reduce.replace_all_uses_with(replacement)
        self.record(f"%{all_reduce.name} -> %{replacement.name} (all-reduce of a replicated "
                    f"operand, {root.spelling} over {n})")
        return True

    @staticmethod
    def _times_group_size(all_reduce: HloInstruction, n: int) -> HloInstruction:
        """``operand * broadcast(convert(s32 n))``, added before the all-reduce."""
        computation = all_reduce.parent
        shape: ArrayShape = all_reduce.shape

        def add(opcode: Opcode, operands: list[HloInstruction], **kwargs: Any) -> HloInstruction:
            inst = make_instruction(computation, opcode, operands, **kwargs)
            return computation.add_before(inst, all_reduce)

        s32 = scalar(ElementType.S32)
        multiplier = add(Opcode.CONSTANT, [], shape=s32, name="constant",
                         literal=Literal.from_array(s32, n))
        if shape.element_type is not ElementType.S32:
            multiplier = add(Opcode.CONVERT, [multiplier], name="convert",
                             shape=scalar(shape.element_type))
        if shape.rank > 0:
            multiplier = add(Opcode.BROADCAST, [multiplier], name="broadcast",
                             shape=shape.with_element_type(shape.element_type), dimensions=())
        return add(Opcode.MULTIPLY, [all_reduce.operand(0), multiplier], name="multiply")
