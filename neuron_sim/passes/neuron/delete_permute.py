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
from neuron_sim.semantics.collectives.identity import identity_violation
from neuron_sim.topology import Topology
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
    # deletion_violation is defined below; the lambda looks it up when it is called
    hazard = relies_on(Reliance.IDENTITY_COLLECTIVES,
                       identity_rule=lambda inst, topology: deletion_violation(inst, topology))
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
    return deletion_violation(inst, topology) is None


def deletion_violation(inst: HloInstruction, topology: Topology) -> str | None:
    """Why deleting ``inst`` (an all-reduce or collective-permute) would change what some device
    of ``topology`` computes, in one clause naming the group and the devices; None if ``inst``
    is the identity there. The rule is XLA's degenerate rules (docs/semantics.md §2), written
    once in ``neuron_sim.semantics.collectives.identity``; this adds the two cases the
    deletion has words of its own for.

    e.g. ``group mode CrossReplicaAndPartition, replica group {0} spans partitions 0..3 -> 4
    participants`` or ``group mode CrossPartition, device 3 (replica 0, partition 3) is no
    target of source_target_pairs={{0,1},{1,0}} -> receives zeros``.
    """
    if inst.opcode not in DELETED_OPCODES:
        return f"{inst.opcode.spelling} is neither an all-reduce nor a collective-permute"
    if len(inst.operands) != 1:
        return (f"it has {len(inst.operands)} operands, so its tuple result is not operand 0 "
                "(DeletePermute fails on it and leaves the module unchanged)")
    return identity_violation(inst, topology)


class DeletePermuteGuarded(DeletePermute):
    """DeletePermute restricted to collectives that are the identity under the topology (its
    expansion and log lines are DeletePermute's)."""

    name = "delete_permute_guarded"
    seed_status = SeedStatus.INFERRED
    seed = SEED + " (Considerations: the scheduling precondition)"
    summary = ("DeletePermute only where the collective is the identity: singleton groups / "
               "self-pairs under the module's topology")
    hazard = relies_on(Reliance.IDENTITY_COLLECTIVES, Reliance.LOGICAL_GROUPS,
                       identity_rule=deletion_violation)
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
