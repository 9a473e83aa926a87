"""How much arithmetic executing a module costs: the multiply-adds of its dots on every device.

Memory is not the only thing that makes a pair impractical to execute: a transformer layer at
real size fits in a few GiB but its dots need hundreds of billions of multiply-adds per run
(and the verifier runs source and target on several input sets, after drawing inputs of that
size). ``verify`` asks the proof on symbolic positions first for a pair above
``EXECUTION_MULTIPLY_ADDS`` and executes it only when that proof does not decide.
"""

from __future__ import annotations

import math

from neuron_sim.hlo import HloModule, Opcode
from neuron_sim.topology import Topology

__all__ = ["EXECUTION_MULTIPLY_ADDS", "POSITIONS_TIME_FACTOR", "multiply_adds", "positions_timeout"]

# About a minute of the interpreter's float matmuls on one core per run of one module; the
# corpora's and tests' modules are below it by orders of magnitude.
EXECUTION_MULTIPLY_ADDS = 1 << 34
# The proof on symbolic positions stands in for executions that would take far longer than
# one execution's ``--timeout``; it gets the target's allowance (20 times it, as verify gives
# a target run).
POSITIONS_TIME_FACTOR = 20


def positions_timeout(timeout: float | None) -> float | None:
    """The time the proof on symbolic positions may take for verify's ``--timeout``."""
    return None if timeout is None else timeout * POSITIONS_TIME_FACTOR


def multiply_adds(module: HloModule, topology: Topology) -> int:
    """The multiply-adds of every dot of ``module`` (each computation counted once, as if
    called once) on all devices of ``topology``."""
    total = 0
    for computation in module.computations:
        for inst in computation.instructions:
            if inst.opcode is not Opcode.DOT or not inst.shape.is_array:
                continue
            lhs = inst.operands[0]
            contracting = math.prod(lhs.shape.dims[d]
                                    for d in (inst.get("lhs_contracting_dims") or ()))
            total += inst.shape.element_count * contracting
    return total * topology.num_devices
