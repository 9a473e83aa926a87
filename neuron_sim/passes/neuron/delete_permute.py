"""DeletePermute (key ``aws_neuron_delete_permute``) and a guarded variant for comparison.

Seed: allreduce-reducescatter-dynamicslice-rewrites.txt, "DeletePermute — Degenerate-Collective
Stripper". Despite its name the pass has nothing to do with transposes: its 19-byte matcher
(@0x1f79470) accepts every all-reduce and every collective-permute, and its 45-byte expander
(@0x1f79490) replaces the op with its operand 0. Faithful, unguarded, as in the binary: it
deletes real, data-moving collectives too. The seed says the precondition (the collective is
the identity: one replica, singleton groups, self-pairs) is enforced by *when* the pass is
scheduled, outside the binary.

An all-reduce or collective-permute with several operands has a tuple result that operand 0
cannot replace; ``replace_instruction`` refuses the shape change, so the pass raises and leaves
the module unchanged (XLA's ReplaceInstruction fails the same way).

``DeletePermuteGuarded`` (key ``delete_permute_guarded``, seed status "inferred" from the
scheduling rationale) fires only where the collective is provably the identity under the
topology the pass is run for (``PassContext.topology_for``: the context's, or the module
header's ``replica_count`` x ``num_partitions``; a ``topology=`` given to the constructor wins):
one operand, and
  * all-reduce: in its group mode every device is in a participant group of one;
  * collective-permute: every device sends to itself (each pair is (f, f) and every device is a
    target; a device that is no target would receive zeros).
Groups that are invalid for the topology make it decline.
"""

from __future__ import annotations

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs
from neuron_sim.topology import (GroupMode, Topology, group_mode, participant_groups,
                                 permute_pairs_flattened)
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.context_hazards import Reliance, relies_on

SEED = "allreduce-reducescatter-dynamicslice-rewrites.txt § DeletePermute"
DELETED_OPCODES = (Opcode.ALL_REDUCE, Opcode.COLLECTIVE_PERMUTE)


def describe_deletion(old: HloInstruction, new: HloInstruction) -> str:
    """``%all-reduce -> %x (deleted all-reduce, replica_groups={{0,1}})``."""
    if old.opcode is Opcode.COLLECTIVE_PERMUTE:
        pairs = old.get("source_target_pairs", SourceTargetPairs())
        detail = f"source_target_pairs={pairs.to_text()}"
    else:
        groups = old.get("replica_groups", ReplicaGroups())
        detail = f"replica_groups={groups.to_text()}"
    return f"%{old.name} -> %{new.name} (deleted {old.opcode.spelling}, {detail})"


class DeletePermute(OpExpanderPass):
    """all-reduce(x) -> x and collective-permute(x) -> x, unconditionally (as in the binary)."""

    name = "aws_neuron_delete_permute"
    seed_status = SeedStatus.FAITHFUL
    seed = SEED
    summary = ("every all-reduce and collective-permute -> its operand 0; no guard, deletes "
               "data-moving collectives too")
    # identity_violation is defined below; the lambda looks it up when it is called
    hazard = relies_on(Reliance.IDENTITY_COLLECTIVES,
                       identity_rule=lambda inst, topology: identity_violation(inst, topology))
    seed_says = ("19-byte matcher: opcode all-reduce or collective-permute, nothing else; "
                 "expander returns operand 0. Correct only when scheduled where those collectives "
                 "are the identity (enforced outside the binary)")
    known_unsafety = ("deletes **every** all-reduce and collective-permute, including real "
                      "data-moving ones (`{{0,1},{2,3}}`, a ring permute); raises (module "
                      "unchanged) on a multi-operand (tuple) collective")

    def matches(self, inst: HloInstruction) -> bool:
        return inst.opcode in DELETED_OPCODES

    def expand(self, inst: HloInstruction) -> HloInstruction:
        return inst.operand(0)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return describe_deletion(old, new)


def is_identity_collective(inst: HloInstruction, topology: Topology) -> bool:
    """True if ``inst`` (all-reduce or collective-permute) provably returns its operand on every
    device of ``topology``."""
    return identity_violation(inst, topology) is None


def identity_violation(inst: HloInstruction, topology: Topology) -> str | None:
    """Why ``inst`` is not the identity on every device of ``topology`` under XLA's degenerate
    rules (SEMANTICS.md §2), in one clause naming the group and the devices; None if it is.

    e.g. ``group mode CrossReplicaAndPartition, replica group {0} spans partitions 0..3 -> 4
    participants`` or ``group mode CrossPartition, device 3 (replica 0, partition 3) is no
    target of source_target_pairs={{0,1},{1,0}} -> receives zeros``.
    """
    if inst.opcode not in DELETED_OPCODES:
        return f"{inst.opcode.spelling} is neither an all-reduce nor a collective-permute"
    if len(inst.operands) != 1:
        return (f"it has {len(inst.operands)} operands, so its tuple result is not operand 0 "
                "(DeletePermute fails on it and leaves the module unchanged)")
    if not inst.operand(0).shape.compatible(inst.shape):
        return f"its result shape {inst.shape} differs from its operand's {inst.operand(0).shape}"
    try:
        mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                          inst.use_global_device_ids)
        if inst.opcode is Opcode.ALL_REDUCE:
            groups = inst.get("replica_groups", ReplicaGroups())
            return all_reduce_violation(mode, groups,
                                        participant_groups(mode, groups, topology), topology)
        pairs = inst.get("source_target_pairs", SourceTargetPairs())
        return _permute_violation(mode, pairs,
                                  permute_pairs_flattened(mode, pairs, topology), topology)
    except ValueError as exc:  # invalid groups or pairs for this topology: not provable
        return f"its groups are not valid on {topology}: {exc}"


def _ids(values: list[int]) -> str:
    """``0..3`` for a contiguous run, else ``0,2,5``."""
    values = sorted(set(values))
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}"
    return ",".join(map(str, values))


def all_reduce_violation(mode: GroupMode, groups: ReplicaGroups,
                         participants: list[tuple[int, ...]], topology: Topology) -> str | None:
    """Why a grouped collective (``replica_groups`` read in ``mode``, giving ``participants``
    on ``topology``) is not the identity: a device in no group, or the first group with more
    than one participant, in the words of ``identity_violation``; None if every device is alone
    in its group (the collective returns its operand everywhere).

    Shared by DeletePermute (all-reduce) and StripTrivialCollectives (every grouped collective),
    so both judge a group of one by the same rule."""
    covered = {f for group in participants for f in group}
    missing = [f for f in range(topology.num_devices) if f not in covered]
    if missing:
        return f"group mode {mode}, device {missing[0]} is in no group"
    big = next((group for group in participants if len(group) > 1), None)
    if big is None:
        return None
    if mode is GroupMode.FLATTENED_ID:
        return f"group mode {mode}, group {{{','.join(map(str, big))}}} -> {len(big)} participants"
    coordinates = [topology.replica_partition(f) for f in big]
    replicas = [r for r, _ in coordinates]
    group = ("replica_groups={}" if not groups.to_text().strip("{}")
             else f"replica group {{{_ids(replicas)}}}")
    partitions = _ids([p for _, p in coordinates])
    if mode is GroupMode.CROSS_REPLICA_AND_PARTITION:
        span = "spans" if len(set(replicas)) == 1 else "x"
        return f"group mode {mode}, {group} {span} partitions {partitions} -> {len(big)} participants"
    return f"group mode {mode}, {group} (partition {partitions}) -> {len(big)} participants"


def _permute_violation(mode: GroupMode, pairs: SourceTargetPairs,
                       flattened: list[tuple[int, int]], topology: Topology) -> str | None:
    targets = {t for _, t in flattened}
    for f in range(topology.num_devices):
        if f not in targets:
            r, p = topology.replica_partition(f)
            return (f"group mode {mode}, device {f} (replica {r}, partition {p}) is no target "
                    f"of source_target_pairs={pairs.to_text()} -> receives zeros")
    for s, t in flattened:
        if s != t:
            (rs, ps), (rt, pt) = topology.replica_partition(s), topology.replica_partition(t)
            return (f"group mode {mode}, source_target_pairs={pairs.to_text()} send device "
                    f"{s} (replica {rs}, partition {ps}) to device {t} (replica {rt}, "
                    f"partition {pt})")
    return None


class DeletePermuteGuarded(DeletePermute):
    """DeletePermute restricted to collectives that are the identity under the topology (its
    expansion and log lines are DeletePermute's)."""

    name = "delete_permute_guarded"
    seed_status = SeedStatus.INFERRED
    seed = SEED + " (Considerations: the scheduling precondition)"
    summary = ("DeletePermute only where the collective is the identity: singleton groups / "
               "self-pairs under the module's topology")
    hazard = relies_on(Reliance.IDENTITY_COLLECTIVES, Reliance.LOGICAL_GROUPS,
                       identity_rule=identity_violation)
    seed_says = "(the scheduling precondition of DeletePermute)"
    our_reading = ("fires only where the collective is provably the identity under the topology: "
                   "one operand; all-reduce: every device in a participant group of one (in its "
                   "group mode); collective-permute: every device sends to itself and is a target")
    known_unsafety = ("none known; uses the context's topology (the module header's "
                      "`replica_count` x `num_partitions` unless given one)")

    def matches(self, inst: HloInstruction) -> bool:
        module = inst.parent.parent if inst.parent is not None else None
        topology = (self.context.topology_for(module) if module is not None
                    else self.context.topology or Topology())
        return is_identity_collective(inst, topology)
