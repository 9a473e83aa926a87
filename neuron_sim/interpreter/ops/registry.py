"""The op table: ``@implements(Opcode.X, ...)`` registers the function that executes an opcode.

Two calling conventions, chosen per registration:

- array ops (the default): ``fn(ctx, *operands)`` receives each operand as a *batched* numpy
  array (leading row axis of size 1 for a replicated value, n for a per-device one) and returns a
  batched array (a list of them for a tuple-shaped result). The evaluator decides whether the
  result is replicated (all operands were) and checks its shape and dtype against the HLO shape.
- value ops (``values=True``): ``fn(ctx, *operands)`` receives and returns ``Value`` objects;
  for control flow, tuples, collectives and the device-identity ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from neuron_sim.hlo import Opcode


@dataclass(frozen=True)
class OpImplementation:
    opcode: Opcode
    fn: Callable
    values: bool


REGISTRY: dict[Opcode, OpImplementation] = {}


def implements(*opcodes: Opcode, values: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated function as the implementation of ``opcodes``."""

    def register(fn: Callable) -> Callable:
        for opcode in opcodes:
            if opcode in REGISTRY:
                raise RuntimeError(f"{opcode.spelling} is implemented twice: "
                                   f"{REGISTRY[opcode].fn.__module__} and {fn.__module__}")
            REGISTRY[opcode] = OpImplementation(opcode, fn, values)
        return fn

    return register
