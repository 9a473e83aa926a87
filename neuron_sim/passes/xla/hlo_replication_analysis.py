"""Which values are the same on every replica: the part of XLA's HloReplicationAnalysis that
AllReduceSimplifier uses (``xla/hlo/analysis/hlo_replication_analysis.cc``, run with
``cross_partition_spmd=false`` and without partial replication).

A value is *replicated* when, on each partition, every replica holds the same value. The rules
(``DetermineHloInstructionIsReplicated``):

* entry parameters: as their ``parameter_replication`` says, leaf by leaf (absent: not; a single
  flag for every leaf of a tuple, as the verifier's inputs read it);
* constants, partition-id: replicated; replica-id and anything with a side effect: not;
* all-reduce / all-gather: replicated if their operands are; else, without a channel_id, when
  there is one group (or none, meaning all); with a channel_id and global device ids, when on
  every partition the groups put all replicas into one set; with a channel_id only, one group;
* elementwise ops and concatenate, convolution, dot, reduce, broadcast, transpose, reshape,
  bitcast, reverse, gather, scatter, iota, pad, slice, dynamic-slice, dynamic-update-slice,
  reduce-window, copy: replicated iff every operand is;
* tuple / get-tuple-element follow the elements; a call or fusion is its callee's root with
  the callee's parameters taking the operands' replication;
* anything else (while, conditional, custom-call, ...): not replicated. XLA iterates while
  loops and conditionals to a fixed point; ours is conservative there (a replicated value may
  be reported as not replicated, never the reverse).
"""

from __future__ import annotations

from typing import Union

from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replication import parameter_replication_flags
from neuron_sim.hlo.shapes import TupleShape
from neuron_sim.topology import Topology
from neuron_sim.passes.xla.dce import has_side_effect

Replication = Union[bool, tuple["Replication", ...]]

MERGING_OPCODES = frozenset({
    Opcode.CONCATENATE, Opcode.CONVOLUTION, Opcode.DOT, Opcode.REDUCE, Opcode.BROADCAST,
    Opcode.TRANSPOSE, Opcode.RESHAPE, Opcode.BITCAST, Opcode.REVERSE, Opcode.GATHER,
    Opcode.SCATTER, Opcode.IOTA, Opcode.PAD, Opcode.SLICE, Opcode.DYNAMIC_SLICE,
    Opcode.DYNAMIC_UPDATE_SLICE, Opcode.REDUCE_WINDOW, Opcode.COPY,
})


def fully(value: Replication) -> bool:
    """Whether every leaf of ``value`` is replicated."""
    if isinstance(value, tuple):
        return all(fully(v) for v in value)
    return value


def _uniform(shape, flag: bool) -> Replication:
    if isinstance(shape, TupleShape):
        return tuple(_uniform(s, flag) for s in shape.elements)
    return flag


def _parameter_replication(param: HloInstruction) -> Replication:
    """The parameter's ``parameter_replication`` leaf by leaf, read by the one reader the
    verifier's inputs use too (``neuron_sim.hlo.replication``), as the shape's tree."""
    flags = parameter_replication_flags(param)
    if flags is None:
        return _uniform(param.shape, False)
    it = iter(flags)

    def build(shape) -> Replication:
        if isinstance(shape, TupleShape):
            return tuple(build(s) for s in shape.elements)
        return next(it)

    return build(param.shape)


def _collective_replicated(inst: HloInstruction, topology: Topology) -> bool:
    """Replication of an all-reduce / all-gather whose operands are not all replicated."""
    groups = tuple(inst.replica_groups.groups) if inst.replica_groups is not None else ()
    if inst.channel_id is None or not inst.use_global_device_ids:
        return len(groups) <= 1
    partitions = topology.num_partitions
    sets_per_partition: list[list[list[int]]] = [[] for _ in range(partitions)]
    for group in groups:
        by_partition: dict[int, list[int]] = {}
        for device in group:
            by_partition.setdefault(device % partitions, []).append(device // partitions)
        for partition, replicas in by_partition.items():
            sets_per_partition[partition].append(replicas)
    return all(len(sets) == 1 and len(sets[0]) == topology.replica_count
               for sets in sets_per_partition)


class HloReplicationAnalysis:
    """Cross-replica replication of every instruction reachable from the entry (see the module
    docstring); ``is_replicated(inst)`` answers for the whole value."""

    def __init__(self, module: HloModule, topology: Topology) -> None:
        self.topology = topology
        self.values: dict[HloInstruction, Replication] = {}
        if module.entry is not None:
            entry = module.entry
            self._run(entry, [_parameter_replication(p) for p in entry.parameters])

    def is_replicated(self, inst: HloInstruction) -> bool:
        """True if every replica holds the same value of ``inst`` (on each partition)."""
        return fully(self.values.get(inst, False))

    def _run(self, computation: HloComputation, parameters: list[Replication]) -> Replication:
        for inst in computation.post_order():
            self.values[inst] = self._determine(inst, parameters)
        return self.values[computation.root]

    def _merged(self, inst: HloInstruction) -> bool:
        return all(fully(self.values.get(op, False)) for op in inst.operands)

    def _determine(self, inst: HloInstruction, parameters: list[Replication]) -> Replication:
        op = inst.opcode
        if op in (Opcode.ALL_REDUCE, Opcode.ALL_GATHER):
            flag = self._merged(inst) or _collective_replicated(inst, self.topology)
            return _uniform(inst.shape, flag)
        if has_side_effect(inst) or op is Opcode.REPLICA_ID:
            return _uniform(inst.shape, False)
        if op is Opcode.PARTITION_ID or op is Opcode.CONSTANT:
            return _uniform(inst.shape, True)
        if op is Opcode.PARAMETER:
            number = inst.parameter_number or 0
            return parameters[number] if number < len(parameters) else _uniform(inst.shape, False)
        if op is Opcode.TUPLE:
            return tuple(self.values.get(o, False) for o in inst.operands)
        if op is Opcode.GET_TUPLE_ELEMENT:
            whole = self.values.get(inst.operand(0), False)
            index = inst.get("index", 0)
            return whole[index] if isinstance(whole, tuple) else whole
        if op in (Opcode.CALL, Opcode.FUSION) and inst.called_computations:
            return self._run(inst.called_computations[0],
                             [self.values.get(o, False) for o in inst.operands])
        if op.is_elementwise or op in MERGING_OPCODES:
            return _uniform(inst.shape, self._merged(inst))
        return _uniform(inst.shape, False)
