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

import weakref
from typing import Callable, Generic, TypeVar

from neuron_sim.hlo import HloComputation

T = TypeVar("T")


class ComputationCache(Generic[T]):
    """``get(computation)`` is ``build(computation)``, rebuilt only when the computation's
    structure (with ``attributes``: also its instructions' attributes) has changed since it was
    built; entries go with their computations."""

    def __init__(self, build: Callable[[HloComputation], T], *, attributes: bool = False
                 ) -> None:
        self._build = build
        self._attributes = attributes
        self._entries: weakref.WeakKeyDictionary[HloComputation, tuple] = \
            weakref.WeakKeyDictionary()

    def get(self, computation: HloComputation) -> T:
        order = computation.instructions
        cached = self._entries.get(computation)
        if cached is not None:
            instructions, opcodes, shapes, operands, attrs, value = cached
            # Cheapest first; each comparison stops at the first difference.
            if instructions == order and opcodes == [i.opcode for i in order] \
                    and shapes == [i.shape for i in order] \
                    and operands == [i.operands for i in order] \
                    and (attrs is None or attrs == [i.attrs for i in order]):
                return value
        value = self._build(computation)
        self._entries[computation] = (
            list(order), [i.opcode for i in order], [i.shape for i in order],
            [list(i.operands) for i in order],
            [dict(i.attrs) for i in order] if self._attributes else None, value)
        return value
