"""Every collective kind's descriptor, listed once; ``descriptor_of`` finds one by opcode.

Adding a collective means adding its descriptor here (with its data function and shape rule);
the interpreter, its backends, the symbolic evaluator, the checker and the group-mode table
read it from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import TupleShape
from neuron_sim.semantics.collectives import movement, reductions
from neuron_sim.semantics.collectives.descriptor import (CollectiveArgs, CollectiveDescriptor,
                                                         Dependence, GroupModeRow, GroupReading,
                                                         MpiPattern, ShardDirection, StartForm,
                                                         SymbolicForm)
from neuron_sim.semantics.collectives.ragged import RAGGED_OPERANDS, ragged_all_to_all
from neuron_sim.semantics.collectives.shape_rules import (all_to_all_shape, gathered_shape,
                                                          output_buffer_shape, same_as_operands,
                                                          scattered_shape)

__all__ = ["ALL_GATHER", "ALL_REDUCE", "ALL_TO_ALL", "COLLECTIVE_BROADCAST",
           "COLLECTIVE_PERMUTE", "DESCRIPTORS", "RAGGED_ALL_TO_ALL", "REDUCE_SCATTER",
           "descriptor_of"]


# -- data functions: (stacked operands, args) -> stacked results ------------------------------

def _all_reduce(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    if args.variadic:
        return list(reductions.all_reduce_variadic(stacks, args.groups, args.combine))
    return [reductions.all_reduce(x, args.groups, args.combine) for x in stacks]


def _reduce_scatter(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    return [reductions.reduce_scatter(x, args.groups, args.dim, args.combine) for x in stacks]


def _all_gather(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    return [movement.all_gather(x, args.groups, args.dim) for x in stacks]


def _all_to_all(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    if args.dim is None:
        return list(movement.all_to_all_tuple(stacks, args.groups))
    return [movement.all_to_all(x, args.groups, args.dim) for x in stacks]


def _permute(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    return [movement.collective_permute(x, args.pairs) for x in stacks]


def _broadcast(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    return [movement.collective_broadcast(x, args.groups) for x in stacks]


def _inplace_permute(inst: Any) -> str | None:
    """The in-place collective-permute (buffers and slice offsets, an array result) is not
    computed."""
    if len(inst.operands) == 4 and not isinstance(inst.shape, TupleShape):
        return "the in-place form with slice offsets"
    return None


def _ragged(stacks: Sequence[np.ndarray], args: CollectiveArgs) -> list[np.ndarray]:
    return [ragged_all_to_all(stacks, args.groups)]


# -- one group's shared result: (stacked operand, the group's rows in position order, args) ->
# -- the value every member receives --------------------------------------------------------------

def _reduced_once(x: np.ndarray, group: Sequence[int], args: CollectiveArgs) -> np.ndarray:
    return reductions.reduce_group(x, group, args.combine)


def _gathered_once(x: np.ndarray, group: Sequence[int], args: CollectiveArgs) -> np.ndarray:
    return movement.gather_group(x, group, args.dim)


def _root_once(x: np.ndarray, group: Sequence[int], args: CollectiveArgs) -> np.ndarray:
    return np.array(x[group[0]], copy=True)


# -- the kinds -----------------------------------------------------------------------------------

ALL_REDUCE = CollectiveDescriptor(
    name="all-reduce", sync=Opcode.ALL_REDUCE, start=Opcode.ALL_REDUCE_START,
    done=Opcode.ALL_REDUCE_DONE, start_form=StartForm.RESULT,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.GLOBAL_DEVICE_IDS,
    uniform_groups=False, reduces=True, shape_rule=same_as_operands, results=_all_reduce,
    group_result=_reduced_once, dependence=Dependence.WHOLE_GROUP,
    symbolic=SymbolicForm.FOLD_MULTISET, mpi_pattern=MpiPattern.ALLREDUCE, legalized=True)

ALL_GATHER = CollectiveDescriptor(
    name="all-gather", sync=Opcode.ALL_GATHER, start=Opcode.ALL_GATHER_START,
    done=Opcode.ALL_GATHER_DONE, start_form=StartForm.WRAPPED,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.GLOBAL_DEVICE_IDS,
    dimension_attribute="dimensions", shard_direction=ShardDirection.GATHER,
    shape_rule=gathered_shape, results=_all_gather, group_result=_gathered_once,
    dependence=Dependence.WHOLE_GROUP, symbolic=SymbolicForm.MOVE_HANDLES,
    mpi_pattern=MpiPattern.ALLGATHERV, legalized=True)

REDUCE_SCATTER = CollectiveDescriptor(
    name="reduce-scatter", sync=Opcode.REDUCE_SCATTER,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.GLOBAL_DEVICE_IDS,
    reduces=True, scatters=True, dimension_attribute="dimensions",
    shard_direction=ShardDirection.SCATTER, shape_rule=scattered_shape,
    results=_reduce_scatter, dependence=Dependence.WHOLE_GROUP,
    symbolic=SymbolicForm.FOLD_MULTISET, mpi_pattern=MpiPattern.REDUCE_SCATTER, legalized=True)

ALL_TO_ALL = CollectiveDescriptor(
    name="all-to-all", sync=Opcode.ALL_TO_ALL,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.CHANNEL_ONLY,
    dimension_attribute="dimensions", tuple_form=True, shape_rule=all_to_all_shape,
    results=_all_to_all, dependence=Dependence.WHOLE_GROUP,
    symbolic=SymbolicForm.MOVE_HANDLES, mpi_pattern=MpiPattern.ALLTOALLV, legalized=True)

RAGGED_ALL_TO_ALL = CollectiveDescriptor(
    name="ragged-all-to-all", sync=Opcode.RAGGED_ALL_TO_ALL,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.CHANNEL_ONLY,
    shape_rule=output_buffer_shape, results=_ragged, array_operands=(1,),
    operand_roles=("the input", "the output buffer", "the input offsets", "the send sizes",
                   "the output offsets", "the receive sizes"),
    dependence=Dependence.WHOLE_GROUP, symbolic=SymbolicForm.MOVE_HANDLES,
    index_operands=tuple(range(2, len(RAGGED_OPERANDS))), mpi_pattern=None)

COLLECTIVE_PERMUTE = CollectiveDescriptor(
    name="collective-permute", sync=Opcode.COLLECTIVE_PERMUTE,
    start=Opcode.COLLECTIVE_PERMUTE_START, done=Opcode.COLLECTIVE_PERMUTE_DONE,
    start_form=StartForm.WRAPPED, group_reading=GroupReading.SOURCE_TARGET_PAIRS,
    group_mode_row=GroupModeRow.CHANNEL_ONLY, shape_rule=same_as_operands, results=_permute,
    dependence=Dependence.PAIR_SOURCE, symbolic=SymbolicForm.MOVE_HANDLES,
    mpi_pattern=MpiPattern.SEND_RECV, unexecuted=_inplace_permute, legalized=True)

COLLECTIVE_BROADCAST = CollectiveDescriptor(
    name="collective-broadcast", sync=Opcode.COLLECTIVE_BROADCAST,
    group_reading=GroupReading.REPLICA_GROUPS, group_mode_row=GroupModeRow.CHANNEL_ONLY,
    shape_rule=same_as_operands, results=_broadcast, group_result=_root_once,
    dependence=Dependence.GROUP_ROOT, symbolic=SymbolicForm.MOVE_HANDLES,
    mpi_pattern=MpiPattern.BCAST)

DESCRIPTORS: tuple[CollectiveDescriptor, ...] = (
    ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, RAGGED_ALL_TO_ALL, COLLECTIVE_PERMUTE,
    COLLECTIVE_BROADCAST)
"""Every collective kind, in one place."""

_BY_OPCODE: dict[Opcode, CollectiveDescriptor] = {
    opcode: descriptor for descriptor in DESCRIPTORS for opcode in descriptor.all_opcodes}


def descriptor_of(opcode: Opcode) -> CollectiveDescriptor | None:
    """The descriptor of the kind ``opcode`` belongs to (its sync op, async start or done), or
    None for an opcode that is no collective."""
    return _BY_OPCODE.get(opcode)
