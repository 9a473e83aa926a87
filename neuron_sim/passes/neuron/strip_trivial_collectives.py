"""StripTrivialCollectives (key ``aws_neuron_strip_trivial_collectives``): collectives that are
the identity on every device of the topology replaced by their operand.

Seed: hlo-misc-cleanup-sweep.txt, Abstract ("strip trivial single-device collectives") and §1
(output / IO shaping). The seed names the step only; seed status "inferred".

Its relation to DeletePermute (allreduce-reducescatter-dynamicslice-rewrites.txt): DeletePermute
(``aws_neuron_delete_permute``) is the binary's unconditional deletion of every all-reduce and
collective-permute — its precondition, that the collective is the identity, is left to the
pipeline that schedules it, which is the seed's unsafety. This pass is the guarded step: it
strips a collective only where XLA's degenerate rules (docs/semantics.md §2, XLA's
``CollectiveConfig::IsDegenerate``) prove it the identity under the context's topology — the
decision ``delete_permute_guarded`` makes (``neuron_sim.passes.neuron.delete_permute``, reused, not
copied), extended from all-reduce and collective-permute to every single-operand collective with
replica groups:

* all-reduce, collective-permute: ``delete_permute.deletion_violation`` (every device alone in
  its participant group; every device sends to itself and is a target);
* all-gather, reduce-scatter, all-to-all (array form), collective-broadcast: every device alone
  in its participant group, in the op's group mode (the all-reduce rule), and the result shape
  equal to the operand's (a gather or scatter over one participant).

Declined: several operands (a tuple result), tuple-form all-to-all, async start/done pairs,
groups invalid for the topology. Contract: exact — a collective over a group of one returns its
operand (a reduction over one value is that value; a broadcast from position 0 to itself is it).
Known unsafety: none known; the decision is the topology's, so a module compiled for another
topology than the context's must not be stripped with this context.
"""

from __future__ import annotations

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.topology import Topology
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.delete_permute import (DELETED_OPCODES, deletion_violation,
                                                     describe_deletion)
from neuron_sim.semantics.collectives.identity import identity_violation

SEED = ("hlo-misc-cleanup-sweep.txt § Abstract (strip trivial single-device collectives), §1 "
        "(IO shaping)")
GROUPED_OPCODES = (Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER, Opcode.ALL_TO_ALL,
                   Opcode.COLLECTIVE_BROADCAST)


def trivial_collective_violation(inst: HloInstruction, topology: Topology) -> str | None:
    """Why ``inst`` is not a collective that returns its operand on every device of
    ``topology``; None if it is (XLA's degenerate rules, the one rule of
    ``neuron_sim.semantics.collectives.identity``)."""
    if inst.opcode in DELETED_OPCODES:
        return deletion_violation(inst, topology)
    if inst.opcode not in GROUPED_OPCODES:
        return f"{inst.opcode.spelling} is not a collective this pass strips"
    return identity_violation(inst, topology)


class StripTrivialCollectives(OpExpanderPass):
    """A collective over participant groups of one -> its operand (the guarded DeletePermute,
    for every single-operand collective)."""

    name = "aws_neuron_strip_trivial_collectives"
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = ("a collective that is the identity under the topology (every group a singleton, "
               "self-pairs) -> its operand; the guarded DeletePermute for every collective")
    pipelines = {"neuron-closer": 59}
    hazard = relies_on(Reliance.IDENTITY_COLLECTIVES, Reliance.LOGICAL_GROUPS,
                       identity_rule=trivial_collective_violation)
    seed_says = "\"strip trivial single-device collectives\" (abstract)"
    our_reading = ("the guarded DeletePermute for every single-operand collective: stripped only "
                   "where XLA's degenerate rules prove it the identity under the context topology")
    known_unsafety = "none known; decided for the context's topology"

    def matches(self, inst: HloInstruction) -> bool:
        if inst.opcode not in DELETED_OPCODES and inst.opcode not in GROUPED_OPCODES:
            return False
        module = inst.parent.parent if inst.parent is not None else None
        topology = (self.context.topology_for(module) if module is not None
                    else self.context.topology or Topology())
        return trivial_collective_violation(inst, topology) is None

    def expand(self, inst: HloInstruction) -> HloInstruction:
        return inst.operand(0)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return describe_deletion(old, new).replace("(deleted ", "(stripped ")
