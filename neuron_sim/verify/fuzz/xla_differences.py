"""Documented XLA:CPU runtime differences, each recognized by a classifier.

Each classifier looks at a module whose outputs differ (``oracle_compare.Comparison``) and
says whether every mismatch is explained by one difference written in docs/semantics.md
(section "XLA:CPU runtime differences", with a minimal module each). ``explain`` returns the
first class whose classifier accepts, or None: an unexplained disagreement.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.verify.fuzz.oracle_compare import Comparison

Classifier = Callable[[HloModule, Topology, Comparison, list, list], bool]

CLASSIFIERS: dict[str, Classifier] = {}


def explain(module: HloModule, topology: Topology, comparison: Comparison,
            ours: list[np.ndarray], xla: list[np.ndarray]) -> str | None:
    """The documented difference that explains every mismatch, or None."""
    for name, classifier in CLASSIFIERS.items():
        if classifier(module, topology, comparison, ours, xla):
            return name
    return None
