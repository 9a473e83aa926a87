"""Op semantics, one module per op family, each registered in the op table as it is imported.

A family is imported on the first lookup of one of its opcodes in ``REGISTRY`` (``registry.py``
lists which family executes which opcodes), so that a run pays only for the families its module
uses. An opcode with no entry in ``REGISTRY`` raises ``Unimplemented`` naming it when executed.
"""

from __future__ import annotations

from neuron_sim.interpreter.ops.registry import REGISTRY, OpImplementation, implements
from neuron_sim.interpreter.ops.registry import FAMILIES as _FAMILY_OPCODES

# The op families, in one place (the modules of this package that register ops).
FAMILIES = tuple(_FAMILY_OPCODES)

__all__ = ["FAMILIES", "REGISTRY", "OpImplementation", "implements"]
