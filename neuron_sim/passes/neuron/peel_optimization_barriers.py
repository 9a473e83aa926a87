"""PeelOptimizationBarriers (key ``aws_neuron_peel_optimization_barriers``): every ``opt-barrier``
replaced by its operand.

Seed: hlo-misc-cleanup-sweep.txt, Abstract ("peel optimization barriers") and §1 (output / IO
shaping). The seed names the step and nothing more; seed status "inferred". XLA's relative is
``OptimizationBarrierExpander`` (xla/service/optimization_barrier_expander.cc): it forwards each
barrier's operand to the barrier's users and, in a scheduled module, adds control dependencies
so that what ran before the barrier still runs before what ran after it.

Our reading: an OpExpander — the matcher is the opcode ``opt-barrier``, the expansion its
operand (a tuple barrier is forwarded as the whole tuple, so ``get-tuple-element`` users keep
their indices). Contract: exact. ``opt-barrier`` is the identity on values (it only fences
reordering); removing it cannot change an output.

Known unsafety: what the barrier fenced (e.g. a rematerialization boundary, the order of two
collectives) is no longer fenced. XLA keeps the order with control dependencies; this IR's
schedule is the text order, which the rewrite does not change, but a later scheduling pass may
reorder freely. Values are unaffected, so the verifier cannot see it.
"""

from __future__ import annotations

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import OpExpanderPass, SeedStatus

SEED = "hlo-misc-cleanup-sweep.txt § Abstract (peel optimization barriers), §1 (IO shaping)"


class PeelOptimizationBarriers(OpExpanderPass):
    """opt-barrier(x) -> x."""

    name = "aws_neuron_peel_optimization_barriers"
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = "every opt-barrier -> its operand (XLA's OptimizationBarrierExpander, values only)"
    pipelines = {"neuron-closer": 54}
    seed_says = "\"peel optimization barriers\" (abstract)"
    our_reading = ("every `opt-barrier` replaced by its operand (XLA's "
                   "OptimizationBarrierExpander, without its control dependencies)")
    known_unsafety = ("the reordering fence is gone (values unaffected, so the verifier cannot "
                      "see it)")

    def matches(self, inst: HloInstruction) -> bool:
        return inst.opcode is Opcode.OPTIMIZATION_BARRIER

    def expand(self, inst: HloInstruction) -> HloInstruction:
        return inst.operand(0)
