"""RewriteScatterPartition (key ``aws_neuron_rewrite_scatter_partition``), an OpExpander.

Seed: hlo-misc-cleanup-sweep.txt §3.9 (matcher @0x2009240, Expand @0x20093c0). The matcher
tries ``pattern_one`` / ``pattern_two``, which walk an operand chain testing opcodes only —
all-gather, all-reduce, collective-permute, get-tuple-element, reshape, while — for "a
scatter-style partition built from collectives + reshapes around a loop"; the expansion builds
``CreateAllGather(target_shape, operand(0), recomputed groups, channel_id)`` and a
``CreateReshape(final_shape, all-gather)`` and replaces the operand with it. The seed gives no
shapes, no offsets and no group rule.

Our reading (seed status "inferred"): the one idiom we accept is the all-reduce form of
assembling a partition, what ``psum`` of a zero buffer holding the local shard in its slot
lowers to (``scripts/jax_programs/scatter_partition.py``)::

    %z   = broadcast(constant(0))                                  zero buffer [n, ...]
    %buf = dynamic-update-slice(%z, %u, slot, 0, ..., 0)           %u is [1, ...]
    %ar  = all-reduce(%buf), to_apply = add                         one operand
    %r   = reshape(%ar)  (or bitcast)                               the matched instruction
  ->
    %r   = reshape(all-gather(%u), dimensions={0}, the all-reduce's channel_id, groups and
                   use_global_device_ids)

accepted only when every group of the all-reduce on the topology the pass runs for has n
devices and, on every device d, ``clamp(slot(d), 0, n-1) == position(d)``, where slot is
partition-id or replica-id behind at most one convert. Then block j of the sum is the shard of
the device at position j, exactly what the all-gather places there. The other start indices
must be constant 0 and the broadcast scalar a zero. Groups already physical are declined.

Not implemented: the loop forms (a collective-permute ring or an all-gather inside a while
loop whose get-tuple-element is reshaped, pattern_one); XLA:CPU fuses the JAX ring into a
while body with a fused dynamic-update-slice, and proving that loop assembles an all-gather is
not a seed check. Those modules are left unchanged.

Known unsafety / contract: the sum adds zeros, so a ``-0`` shard comes out ``+0`` in the source
(``+0 + -0 = +0``) and ``-0`` after the rewrite: the contract is exact except that a ``+0`` may
become ``-0``. The check of the slot against the position is ours; the seed's matcher tests
opcodes only.
"""

from __future__ import annotations

import logging

import numpy as np

from neuron_sim.arrays import equal_mask
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.physical_groups import groups_are_physical
from neuron_sim.topology import Topology, group_mode, participant_groups
from passes.base import OpExpanderPass, SeedStatus
from passes.contracts import Refinement
from passes.neuron.pattern_helpers import is_effective_scalar_constant, peel_convert

_LOG = logging.getLogger(__name__)


def positive_zero_to_negative_zero(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Elementwise: the source is ``+0`` and the target ``-0`` (floats only)."""
    source, target = np.asarray(source), np.asarray(target)
    if source.dtype.kind not in "fV" or source.dtype != target.dtype:
        return np.zeros(np.broadcast_shapes(source.shape, target.shape), dtype=bool)
    wide_s, wide_t = source.astype(np.float64), target.astype(np.float64)
    return ((wide_s == 0) & ~np.signbit(wide_s) & (wide_t == 0) & np.signbit(wide_t)
            & ~equal_mask(source, target))


ZERO_SIGN = Refinement("zero-sign", positive_zero_to_negative_zero,
                       "a +0 may become -0 (a sum with zeros turned -0 shards into +0)")

_DEVICE_IDS = (Opcode.PARTITION_ID, Opcode.REPLICA_ID)


def _is_add(computation) -> bool:
    root = computation.root
    return (root.opcode is Opcode.ADD and len(computation.parameters) == 2
            and {o.opcode for o in root.operands} == {Opcode.PARAMETER})


def _is_zero_constant(inst: HloInstruction) -> bool:
    return is_effective_scalar_constant(inst, 0, _LOG)


def _slots(slot: HloInstruction, topology: Topology, n: int) -> np.ndarray:
    """Per flattened device, the clamped slot a partition-id / replica-id start writes."""
    devices = np.arange(topology.num_devices)
    ids = devices % topology.num_partitions if slot.opcode is Opcode.PARTITION_ID \
        else devices // topology.num_partitions
    return np.clip(ids, 0, n - 1)


class RewriteScatterPartition(OpExpanderPass):
    """reshape(all-reduce(add) of a zero buffer with each device's shard in its slot)
    -> reshape(all-gather(shard)), when every slot is the device's position."""

    name = "aws_neuron_rewrite_scatter_partition"
    contract = ZERO_SIGN
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §3.9 RewriteScatterPartition"
    summary = ("reshape(psum of a zero buffer with the shard at slot = partition/replica id) "
               "-> reshape(all-gather(shard)), slots checked against group positions")

    def _topology(self, inst: HloInstruction) -> Topology:
        return self.context.topology_for(inst.parent.parent)

    def _pattern(self, inst: HloInstruction) -> tuple[HloInstruction, HloInstruction] | None:
        """(all-reduce, shard) if ``inst`` is the accepted idiom on the pass's topology."""
        if inst.opcode not in (Opcode.RESHAPE, Opcode.BITCAST) or inst.parent is None:
            return None
        ar = inst.operand(0)
        if (ar.opcode is not Opcode.ALL_REDUCE or len(ar.operands) != 1
                or not _is_add(ar.to_apply) or groups_are_physical(ar)):
            return None
        dus = ar.operand(0)
        if dus.opcode is not Opcode.DYNAMIC_UPDATE_SLICE:
            return None
        zeros, shard, *starts = dus.operands
        n = dus.shape.dims[0] if dus.shape.rank else 0
        if (zeros.opcode is not Opcode.BROADCAST or not _is_zero_constant(zeros.operand(0))
                or shard.shape.rank != dus.shape.rank or shard.shape.dims[0] != 1
                or shard.shape.dims[1:] != dus.shape.dims[1:] or n < 1):
            return None
        slot = peel_convert(starts[0])
        if slot.opcode not in _DEVICE_IDS or not all(_is_zero_constant(s) for s in starts[1:]):
            return None
        topology = self._topology(inst)
        try:
            mode = group_mode("all-reduce", ar.channel_id is not None, ar.use_global_device_ids)
            groups = participant_groups(mode, ar.get("replica_groups") or ReplicaGroups(),
                                        topology)
        except ValueError:
            return None
        if any(len(g) != n for g in groups):
            return None
        position = np.full(topology.num_devices, -1)
        for group in groups:
            position[list(group)] = np.arange(n)
        if not np.array_equal(_slots(slot, topology, n), position):
            return None
        return ar, shard

    def matches(self, inst: HloInstruction) -> bool:
        return self._pattern(inst) is not None

    def expand(self, inst: HloInstruction) -> HloInstruction | None:
        found = self._pattern(inst)
        if found is None:
            return None
        ar, shard = found
        comp = inst.parent
        attributes = {} if ar.channel_id is None else {"channel_id": ar.channel_id}
        attributes["replica_groups"] = ar.get("replica_groups") or ReplicaGroups()
        attributes["dimensions"] = (0,)
        if ar.use_global_device_ids:
            attributes["use_global_device_ids"] = True
        gather = make_instruction(comp, Opcode.ALL_GATHER, (shard,), shape=ar.shape,
                                  check=False, name=f"{ar.name}.all-gather", **attributes)
        comp.add_before(gather, inst)
        reshape = make_instruction(comp, Opcode.RESHAPE, (gather,), shape=inst.shape,
                                   name=f"{inst.name}.reshape")
        comp.add_before(reshape, inst)
        return reshape
