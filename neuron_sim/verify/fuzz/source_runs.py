"""The drawn module run once per input set for every pass fuzzed on it.

A campaign verifies each pass on the same drawn module with the same seed, so every pass that
changes it runs the module (the source) on the same generated inputs, the same exact replays
and often the same proof witnesses. ``SourceRuns`` is the verifier's runner for one drawn
module at a time: a run of that module on an input set, topology and seed it ran before
returns copies of the outputs it kept; every other run (targets, other modules) and every run
that fails goes to the plain runner. Outputs depend on nothing else (the interpreter is
deterministic; ``execution.run_outcome`` still applies its time limit to the runs made), and
the drawn module is never edited (passes and the minimizer work on clones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.verify.execution import Runner
from neuron_sim.verify.inputs import content_key


class SourceRuns:
    """A ``Runner`` (execution.py) keeping the outputs of the current drawn module's runs."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.module: HloModule | None = None
        self.kept: dict[tuple, list[np.ndarray]] = {}
        self.reused = 0  # runs answered from what was kept

    def drawn(self, module: HloModule) -> None:
        """From now on keep the runs of ``module`` (and forget the previous module's)."""
        self.module = module
        self.kept = {}

    def __call__(self, module: HloModule, inputs: list, topology: Topology,
                 seed: int) -> list[Any]:
        if module is not self.module:
            return self.runner(module, inputs, topology, seed)
        key = (topology, seed, content_key(inputs))
        outputs = self.kept.get(key)
        if outputs is None:
            outputs = [np.asarray(o) for o in self.runner(module, inputs, topology, seed)]
            self.kept[key] = outputs
        else:
            self.reused += 1
        return [o.copy() for o in outputs]
