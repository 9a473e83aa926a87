"""Symbolic execution of a module on every device: term handles instead of numbers.

``run_symbolic(module, topology)`` returns each output leaf as ``[D, *shape]`` int64 handles
into a ``TermTable``; two modules run on one table compute the same function of their inputs
on an element (up to the reassociation of reductions) exactly when their handles there are
equal. See ``neuron_sim.proofs.symbolic.evaluator`` for what is modelled and where it stops
(``SymbolicUnsupported``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from neuron_sim.hlo import HloModule
from neuron_sim.topology import Topology

from neuron_sim.proofs.symbolic.evaluator import (Symbolic, SymbolicEvaluator, SymbolicReduction,
                                            SymbolicUnsupported)
from neuron_sim.proofs.symbolic.terms import TermTable
from neuron_sim.interpreter.values import Replicated, leaves

__all__ = ["Symbolic", "SymbolicEvaluator", "SymbolicReduction", "SymbolicUnsupported",
           "TermTable", "run_symbolic"]


def run_symbolic(module: HloModule, topology: Topology, table: TermTable,
                 replicated: Sequence[Sequence[bool]], tag: str = "p",
                 fixed: Mapping[int, np.ndarray] | None = None,
                 loop_bounds: list | None = None) -> list[np.ndarray]:
    """The output leaves of ``module`` on every device of ``topology`` as ``[D, *shape]``
    handles into ``table``; parameter leaf j of parameter i is one variable per element where
    ``replicated[i][j]``, else one per (device, element); a parameter number in ``fixed`` is
    that concrete array on every device instead. The loops on data truncated at their bound
    (``loops.LoopBound``) are appended to ``loop_bounds`` if given. Raises
    ``SymbolicUnsupported``."""
    evaluator = SymbolicEvaluator(module, topology, table)
    arguments = evaluator.arguments(tag, replicated)
    for number, value in (fixed or {}).items():
        arguments[number] = Replicated(np.asarray(value))
    with np.errstate(all="ignore"):
        result = evaluator.run_entry(arguments)
    if loop_bounds is not None:
        loop_bounds.extend(evaluator.loop_bounds)
    outputs = []
    devices = topology.num_devices
    for leaf in leaves(result):
        if not hasattr(leaf, "array") and not isinstance(leaf, Symbolic):
            outputs.append(np.zeros((devices, 0), np.int64))
            continue
        handles = evaluator.handles_of(leaf, np.dtype(np.int64))
        outputs.append(np.broadcast_to(handles, (devices, *handles.shape[1:])))
    return outputs
