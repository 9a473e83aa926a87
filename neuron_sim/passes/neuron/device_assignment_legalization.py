"""DeviceAssignmentLegalization (key ``aws_neuron_device_assignment_legalization``).

Seed: hlo-misc-cleanup-sweep.txt §3.8 (Run @0x1f7c570). For every collective (``IsCollective``):

* collective-permute: ``GetParticipatingDevicesGroupsForSourceTargetPairs`` — every
  (source, target) pair of its mode, for every replica (CrossPartition) or partition
  (CrossReplica), as physical device ids;
* all-gather / all-reduce / reduce-scatter / all-to-all: ``CHECK(operands().size() == 1)``,
  then ``GetGlobalDeviceReplicaGroups`` — the participant groups as physical ids;
* any other collective: ``FATAL("Unhandled Collective instruction:")``.

The new instruction keeps the shape, operand, channel_id and reduction and gets a
``CollectiveDeviceList`` of the physical groups.

Our reading (seed status "our reading"):

* The groups are XLA's GetParticipatingDevicesGroups (``xla/service/collective_ops_utils.cc``):
  per group mode, the participant groups in XLA's order, each id ``device_assignment(r, p)``
  (``neuron_sim.topology.physical_groups``). The device assignment is the topology's
  (``PassContext.topology_for``; the CLI's ``--device-assignment``).
* HLO text has no physical device list: the rewritten collective keeps its spelling and gets
  ``frontend_attributes={neuron.groups="physical"}`` (``neuron_sim.physical_groups``), which the
  checker and the interpreter read through the inverse assignment. The instruction is edited in
  place (the seed builds a new one with the same operand and replaces it: the same result).
* "Unhandled": the async starts, collective-broadcast and ragged-all-to-all (collectives by
  XLA's IsCollective the seed's switch lists no case for) — a PassError naming the instruction.
  A variadic all-gather / all-reduce / reduce-scatter / all-to-all (tuple all-to-all included)
  fails the CHECK: also a PassError naming it, as the binary aborts. The seed's permute case
  passes ``operand(0)`` only, which cannot type a several-operand or in-place permute: refused
  the same way.

Known unsafety (the seed keeps no guard): the pass does not know groups that are already
physical. Run again, it reads them as logical flattened ids (what GetParticipatingDevicesGroups
does with a FlattenedID group) and maps them through the assignment a second time; the result
equals the first only when the assignment maps every flattened id to itself. Any pass that reads
groups as logical after this one (the folds, DeletePermuteGuarded) is wrong in the same way
unless the assignment is the identity. ``groups_are_physical`` is how a scheduler can tell.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import COLLECTIVE_OPCODES, Opcode
from neuron_sim.hlo.replica_groups import (IntGroups, ReplicaGroupError, ReplicaGroups,
                                           SourceTargetPairs)
from neuron_sim.physical_groups import groups_are_physical, mark_physical
from neuron_sim.topology import Topology, group_mode, permute_pairs_flattened, physical_groups
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import Reliance, relies_on

__all__ = ["DeviceAssignmentLegalization", "groups_are_physical", "legalized_groups"]

GROUP_OPCODES = (Opcode.ALL_GATHER, Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER, Opcode.ALL_TO_ALL)


def _physical_of_flattened(groups: IntGroups, topology: Topology) -> IntGroups:
    """Each flattened id of ``groups`` replaced by its physical id; ReplicaGroupError for an id
    that is no flattened id of the topology."""
    ids = np.fromiter((f for group in groups for f in group), dtype=np.int64)
    bad = (ids < 0) | (ids >= topology.num_devices)
    if bad.any():
        raise ReplicaGroupError(f"id {int(ids[bad][0])} read as a flattened device id is out "
                                f"of range for {topology.num_devices} devices")
    mapped = topology.device_ids.ravel()[ids].tolist()
    bounds = np.cumsum([0] + [len(group) for group in groups]).tolist()
    return tuple(tuple(mapped[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))


def legalized_groups(inst: HloInstruction, topology: Topology) -> IntGroups:
    """The physical device groups DeviceAssignmentLegalization gives ``inst`` on ``topology``:
    groups of physical ids for the group collectives, (source, target) physical pairs for
    collective-permute. Groups already physical are read as flattened ids, as the seed's
    unguarded second run does. Raises ValueError (ReplicaGroupError, TopologyError) for groups
    or pairs invalid on the topology."""
    mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                      inst.use_global_device_ids)
    physical = groups_are_physical(inst)
    if inst.opcode is Opcode.COLLECTIVE_PERMUTE:
        pairs = inst.get("source_target_pairs") or SourceTargetPairs()
        flat = pairs.pairs if physical else permute_pairs_flattened(mode, pairs, topology)
        return _physical_of_flattened(flat, topology)
    groups = inst.get("replica_groups") or ReplicaGroups()
    if physical:
        return _physical_of_flattened(groups.groups, topology)
    return physical_groups(mode, groups, topology)


class DeviceAssignmentLegalization(HloPass):
    """Every collective's logical groups (and permute pairs) -> physical device ids."""

    name = "aws_neuron_device_assignment_legalization"
    seed_status = SeedStatus.OUR_READING
    seed = "hlo-misc-cleanup-sweep.txt §3.8 DeviceAssignmentLegalization"
    summary = ("collective groups and permute pairs -> physical device ids of the device "
               "assignment (marked neuron.groups=\"physical\"); unguarded against a second run")
    pipelines = {"neuron-closer": 69}
    hazard = relies_on(Reliance.SINGLE_RUN)
    seed_says = ("every collective (`IsCollective`): collective-permute -> "
                 "`GetParticipatingDevicesGroupsForSourceTargetPairs`; AG/AR/RS/all-to-all: "
                 "`CHECK(operands().size() == 1)`, `GetGlobalDeviceReplicaGroups`; rebuilt with a "
                 "`CollectiveDeviceList`; else FATAL `Unhandled Collective instruction:`")
    our_reading = ("groups = XLA's `GetParticipatingDevicesGroups` per group mode on the "
                   "topology's device assignment; written as explicit groups / pairs of physical "
                   "ids plus `frontend_attributes={neuron.groups=\"physical\"}` "
                   "(docs/semantics.md, \"Physical groups\"); async starts, collective-broadcast, "
                   "ragged-all-to-all: the FATAL as an error naming the instruction; variadic "
                   "(incl. tuple all-to-all) and multi-operand permutes: an error naming it")
    known_unsafety = ("no guard against a second run: already-physical ids are read as flattened "
                      "ids and mapped again (wrong unless the assignment is the identity); a "
                      "later pass that reads groups as logical is wrong the same way")

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        topology = context.topology_for(module)
        collectives = [inst for comp in module.computations for inst in comp.instructions
                       if inst.opcode in COLLECTIVE_OPCODES]
        for inst in collectives:
            self._refuse_unhandled(inst)
        rewrites = [(inst, legalized_groups(inst, topology)) for inst in collectives]
        for inst, groups in rewrites:
            if inst.opcode is Opcode.COLLECTIVE_PERMUTE:
                inst.set_attr("source_target_pairs", SourceTargetPairs(groups))
                detail = f"source_target_pairs={SourceTargetPairs(groups).to_text()}"
            else:
                inst.set_attr("replica_groups", ReplicaGroups(groups))
                detail = f"replica_groups={ReplicaGroups(groups).to_text()}"
            mark_physical(inst)
            self.record(f"%{inst.name} ({inst.opcode.spelling}): physical {detail} on "
                        f"{topology}")
        return bool(rewrites)

    @staticmethod
    def _refuse_unhandled(inst: HloInstruction) -> None:
        where = f"%{inst.name} in %{inst.parent.name}" if inst.parent else f"%{inst.name}"
        if inst.opcode not in GROUP_OPCODES and inst.opcode is not Opcode.COLLECTIVE_PERMUTE:
            raise ValueError(f"Unhandled Collective instruction: {where} "
                             f"({inst.opcode.spelling})")
        if len(inst.operands) != 1:
            raise ValueError(f"{inst.opcode.spelling} {where} has {len(inst.operands)} "
                             "operands; the seed handles single-operand collectives only "
                             "(CHECK operands().size() == 1)")

