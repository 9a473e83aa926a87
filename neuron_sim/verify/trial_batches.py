"""A topology's input sets run together (``interpreter.trials``) and handed to the checks one
by one, as if each had run alone.

``verify_topology`` runs the source and the target on 7 input sets per topology and checks
each pair of runs in order. For a small module an execute is mostly its fixed cost, so once
the first set has run alone (the usual way) and taken under ``BATCH_BELOW_SECONDS``, the
other sets (at most ``BATCH_MAX_ROWS`` devices in all) run as one execute of the source and
one of the target over all of them, and the runner answers each set's runs from those (a
20-op x 200-step loop at 8 devices: a verification in 0.41x the time). The outputs are the separate runs' outputs bit for
bit, so every check, finding and verdict is what running the sets one by one gives. A batch
that fails in any way (a collective mismatch on one set, an error, the time limit, a runner
or module that cannot batch) answers nothing: every set then runs alone, which says which
set failed and how, exactly as before.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.verify.execution import TARGET_SLOWDOWN, Runner

__all__ = ["BATCH_BELOW_SECONDS", "BATCH_MAX_ROWS", "TrialBatches"]

# The other input sets run together when the first set's source run took less than this,
# and they hold at most BATCH_MAX_ROWS devices in all: on more, what an execute costs per
# device outweighs what it costs once (4096 devices x 6 sets: 37-41 ms per verification
# batched against 28-30 ms one by one, a group of every device no longer computed once).
BATCH_BELOW_SECONDS = 0.05
BATCH_MAX_ROWS = 2048
# A batch may take this many times what the first set's source run took per set, and at
# least MIN_BATCH_LIMIT seconds, before the sets run alone instead (a loop that does not end
# on a later set costs that long once more).
BATCH_SLOWDOWN = 20.0
MIN_BATCH_LIMIT = 1.0


class TrialBatches:
    """The runner of one topology's trials: ``first()`` for the first set, ``rest(sets)`` for
    the others (``runner.run_trials`` when it has one)."""

    def __init__(self, runner: Runner, source: HloModule, target: HloModule,
                 topology: Topology, seed: int) -> None:
        self.runner = runner
        self.source, self.target = source, target
        self.topology, self.seed = topology, seed
        self.first_source_seconds: float | None = None

    def first(self) -> Runner:
        """``runner``, timing the source's first run."""
        def timed(module: HloModule, inputs: list, topology: Topology, seed: int,
                  **devices: Any) -> list:
            started = time.perf_counter()
            outputs = self.runner(module, inputs, topology, seed, **devices)
            if module is self.source and self.first_source_seconds is None and not devices:
                self.first_source_seconds = time.perf_counter() - started
            return outputs

        timed.takes_devices = getattr(self.runner, "takes_devices", False)  # type: ignore
        return timed

    def rest(self, sets: Sequence[list]) -> Runner:
        """A runner answering the source's and the target's run on each of ``sets`` (the same
        objects) from one batched run of each, when the first set's source run was fast and
        the batches succeed; every other run goes to ``runner``."""
        run_trials = getattr(self.runner, "run_trials", None)
        seconds = self.first_source_seconds
        if run_trials is None or len(sets) < 2 or seconds is None or \
                seconds >= BATCH_BELOW_SECONDS or \
                self.topology.num_devices * len(sets) > BATCH_MAX_ROWS:
            return self.runner
        kept: dict[tuple[int, int], list] = {}
        limit = max(MIN_BATCH_LIMIT, BATCH_SLOWDOWN * seconds * len(sets))
        for module in (self.source, self.target):
            started = time.perf_counter()
            try:
                with np.errstate(all="ignore"), interpreter.time_limit(limit):
                    outputs = run_trials(module, sets, self.topology, self.seed)
            except Exception:  # noqa: BLE001 - the sets then run alone and say what failed
                break
            kept.update(((id(module), id(values)), out) for values, out in zip(sets, outputs))
            limit = max(limit, TARGET_SLOWDOWN * (time.perf_counter() - started))
        if not kept:
            return self.runner
        runner, topology, seed = self.runner, self.topology, self.seed

        def answering(module: HloModule, inputs: list, topology_: Topology, seed_: int,
                      **devices: Any) -> list:
            if not devices and topology_ == topology and seed_ == seed:
                found = kept.pop((id(module), id(inputs)), None)
                if found is not None:
                    return found
            return runner(module, inputs, topology_, seed_, **devices)

        answering.takes_devices = getattr(runner, "takes_devices", False)  # type: ignore
        return answering
