"""Facts derived from a computation, kept while the computation is unchanged.

An execute walks the same computations as the previous one (a verification runs a module once
per trial and topology, a bench a thousand times), so what is derived from their structure —
the evaluator's plan, a reducer recognised as an argmax — is built once. Modules are mutable
(passes rewrite them), so each use checks the cached entry against the computation's
instruction list and every instruction's operands, opcode and shape (and attributes, for facts
that read them): list comparisons that compare by identity first and stop at the first
difference, far cheaper than rebuilding.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Generic, TypeVar

from neuron_sim.hlo import HloComputation

T = TypeVar("T")

_STRUCTURE = attrgetter("opcode", "shape", "operands")
_WITH_ATTRIBUTES = attrgetter("opcode", "shape", "operands", "attrs")


class ComputationCache(Generic[T]):
    """``get(computation)`` is ``build(computation)``, rebuilt only when the computation's
    structure (with ``attributes``: also its instructions' attributes) has changed since it was
    built; entries are kept in the computation's own ``derived`` caches and go with it."""

    def __init__(self, build: Callable[[HloComputation], T], *, attributes: bool = False
                 ) -> None:
        self._build = build
        self._read = _WITH_ATTRIBUTES if attributes else _STRUCTURE

    def get(self, computation: HloComputation) -> T:
        order = computation.instructions
        cached = computation.derived.get(self)
        # One pass reading each instruction's (opcode, shape, operands[, attributes]) against
        # the snapshot taken when the entry was built; tuple and list comparisons compare by
        # identity first and stop at the first difference.
        if cached is not None and cached[0] == order and \
                list(map(self._read, order)) == cached[1]:
            return cached[2]
        value = self._build(computation)
        snapshot = [(opcode, shape, list(operands), *(dict(rest[0]) for _ in rest[:1]))
                    for opcode, shape, operands, *rest in map(self._read, order)]
        computation.derived[self] = (list(order), snapshot, value)
        return value
