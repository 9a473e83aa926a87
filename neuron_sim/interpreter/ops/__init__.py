"""Op semantics, one module per op family; importing this package fills the op table.

An opcode with no entry in ``REGISTRY`` raises ``Unimplemented`` naming it when executed.
"""

from __future__ import annotations

import importlib

from neuron_sim.interpreter.ops.registry import REGISTRY, OpImplementation, implements

# The op families, in one place. Each module registers its ops with @implements.
FAMILIES = ("elementwise", "shape", "indexing", "reduce", "linalg", "control", "random",
            "collective", "custom_call", "batch_norm", "send_recv")

for _family in FAMILIES:
    importlib.import_module(f"neuron_sim.interpreter.ops.{_family}")

__all__ = ["FAMILIES", "REGISTRY", "OpImplementation", "implements"]
