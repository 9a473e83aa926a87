"""Dead code elimination (key ``dce``), after XLA's HloDCE.

Removes every instruction whose value nobody uses — except parameters, roots and instructions
with side effects — then every computation no longer reachable from the entry. The seed passes
rely on it ("the all-reduce and the partition-id offset sub-tree go dead → DCE'd"); in this IR
OpExpanderPass's ``replace_instruction`` already removes the operands a rewrite leaves dead,
exactly like XLA's ``ReplaceInstruction`` (``RemoveInstructionAndUnusedOperands``), so ``dce``
after a seed pass mostly removes what that cannot: computations left uncalled (e.g. the
reduction of a deleted all-reduce) and values that were dead before the pass ran.

Side effects (kept even when dead), our conservative reading of XLA's ``HasSideEffect``: send,
recv and their -done ops, infeed, outfeed, rng, rng-get-and-update-state, the async collective
start/done ops, custom-calls marked ``custom_call_has_side_effect=true``, and collectives with
``constrain_layout=true``. XLA additionally treats collectives that carry a channel_id as
side-effecting in modules that are not SPMD-partitioned (a compilation option, not in the
text), and its ``HloDCE(remove_cross_partition_collective_ops=true)`` removes them anyway. By
default ``dce`` removes a dead channel collective (XLA with that flag, or an SPMD module); the
option ``keep_channel_collectives=true`` keeps it, as XLA's default HloDCE on a module that is
not SPMD-partitioned does.
"""

from __future__ import annotations

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.options import PassOption, boolean

SIDE_EFFECT_OPCODES = frozenset({
    Opcode.SEND, Opcode.SEND_DONE, Opcode.RECV, Opcode.RECV_DONE, Opcode.INFEED, Opcode.OUTFEED,
    Opcode.RNG, Opcode.RNG_GET_AND_UPDATE_STATE,
    Opcode.ALL_REDUCE_START, Opcode.ALL_REDUCE_DONE, Opcode.ALL_GATHER_START,
    Opcode.ALL_GATHER_DONE, Opcode.COLLECTIVE_PERMUTE_START, Opcode.COLLECTIVE_PERMUTE_DONE,
})


def has_side_effect(inst: HloInstruction, keep_channel_collectives: bool = False) -> bool:
    """Whether removing ``inst`` could change behaviour even when its value is unused; with
    ``keep_channel_collectives`` a collective carrying a channel_id counts too."""
    if inst.opcode in SIDE_EFFECT_OPCODES:
        return True
    if inst.opcode is Opcode.CUSTOM_CALL:
        flag = inst.get("custom_call_has_side_effect")
        return flag is True or (isinstance(flag, Raw) and flag.text.strip() == "true")
    if not inst.opcode.is_collective:
        return False
    return bool(inst.get("constrain_layout", False)) or \
        (keep_channel_collectives and inst.channel_id is not None)


def is_removable_when_dead(inst: HloInstruction, keep_channel_collectives: bool = False) -> bool:
    """Unused, not a parameter or root, and without side effects (see ``has_side_effect``)."""
    return (not inst.users and not inst.is_root and inst.opcode is not Opcode.PARAMETER
            and not has_side_effect(inst, keep_channel_collectives))


class DeadCodeElimination(HloPass):
    """Remove dead instructions (not parameters, roots or side effects), then dead computations."""

    name = "dce"
    options = (PassOption(
        "keep_channel_collectives", boolean, False,
        "keep dead collectives that carry a channel_id (XLA's HloDCE default on a module that "
        "is not SPMD-partitioned); false removes them, as HloDCE("
        "remove_cross_partition_collective_ops=true) does"),)

    seed_status = SeedStatus.INFERRED
    seed = ("XLA's HloDCE; the seed (allreduce-reducescatter-dynamicslice-rewrites.txt § Shared "
            "Emitter) says the dead all-reduce and offset sub-tree are DCE'd")
    summary = "remove unused instructions (not parameters, roots, side effects) and computations"
    seed_says = ("\"the all-reduce and the partition-id offset sub-tree go dead → DCE'd\" (XLA's "
                 "HloDCE)")
    our_reading = ("removes unused instructions except parameters, roots and side effects, then "
                   "computations no longer called")
    known_unsafety = ("side effects are our conservative list (below), not XLA's full "
                      "`HasSideEffect`")

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        keep_channel = self.option("keep_channel_collectives")
        changed = False
        for comp in module.computations:
            # Users before operands, so a chain of dead values goes in one sweep.
            for inst in reversed(comp.post_order()):
                if inst.parent is comp and is_removable_when_dead(inst, keep_channel):
                    comp.remove(inst)
                    self.record(f"%{inst.name} removed (dead {inst.opcode.spelling})")
                    changed = True
        before = list(module.computations)
        module.remove_dead_computations()
        for comp in before:
            if comp not in module.computations:
                self.record(f"computation %{comp.name} removed (no longer called)")
                changed = True
        return changed
