"""PeelOptimizationBarriers: opt-barrier(x) -> x (XLA's OptimizationBarrierExpander forwards
the operand); values unchanged."""

from __future__ import annotations

from neuron_sim.hlo import Opcode
from neuron_sim.passes import get_pass
from neuron_sim.verify import VerifyOptions, check_pass

from pass_fixtures import load


def test_the_barrier_is_replaced_by_its_operand():
    module = load("cleanup_io/movement.hlo")
    peel = get_pass("aws_neuron_peel_optimization_barriers")
    assert peel.run(module) is True
    assert Opcode.OPTIMIZATION_BARRIER not in {i.opcode for i in module.entry.instructions}
    assert module.entry.instruction("bm").operand(0).name == "bt"
    assert peel.rewrites == ["%b -> %bt (tuple)"]


def test_peeling_verifies_exact_and_a_module_without_barriers_is_unchanged():
    module = load("cleanup_io/movement.hlo")
    assert str(check_pass(module, "aws_neuron_peel_optimization_barriers", ["1x1"],
                          VerifyOptions(trials=2)).status) == "CORRECT"
    peel = get_pass("aws_neuron_peel_optimization_barriers")
    peel.run(module)
    assert peel.run(module) is False
