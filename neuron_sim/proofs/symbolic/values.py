"""The symbolic evaluator's value kinds: ``Symbolic`` (term handles for an input-dependent
array) and ``SymbolicUnsupported`` (where symbolic execution stops).

They live apart from ``evaluator`` so that the modules it delegates to (``collectives``) can
build and recognise them without importing the evaluator back.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.values import TupleValue, Value

__all__ = ["Symbolic", "SymbolicUnsupported", "has_symbolic"]


class SymbolicUnsupported(InterpreterError):
    """Symbolic execution cannot continue: an input-dependent value decides indexing or control
    flow there, or the op has no symbolic model. ``reason`` says which."""


class Symbolic:
    """An input-dependent array value: int64 term handles, ``[n, *shape]`` per row or ``shape``
    when the same on every row."""

    __slots__ = ("handles", "replicated")

    def __init__(self, handles: np.ndarray, replicated: bool) -> None:
        self.handles = handles
        self.replicated = replicated

    @property
    def batched(self) -> np.ndarray:
        return self.handles[None] if self.replicated else self.handles

    def __repr__(self) -> str:
        return f"Symbolic({list(self.handles.shape)}, replicated={self.replicated})"


def has_symbolic(value: Value) -> bool:
    """True if ``value`` (any leaf of a tuple) is input-dependent."""
    if isinstance(value, TupleValue):
        return any(has_symbolic(e) for e in value.elements)
    return isinstance(value, Symbolic)
