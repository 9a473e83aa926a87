"""Running a module on every device for the verifier, and what its failures mean.

The verifier never lets an execution raise: ``run_outcome`` returns an ``Outcome`` with the
outputs, or the failure classified (``FailureKind``) — a collective mismatch (undefined
behaviour: the devices would hang), our own limitation (an op the interpreter does not
implement), running past the time limit, or any other execution error — because the checks
treat each differently, and differently for the source and the target.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import neuron_sim.interpreter as interpreter
from neuron_sim.interpreter.errors import CollectiveMismatchError, ExecutionTimeout, Unimplemented
from neuron_sim.interpreter.memory import MemoryLimitExceeded
from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.literals import ElidedLiteralError
from neuron_sim.topology import Topology
from neuron_sim.verify.inputs import input_arrays

DEFAULT_TIMEOUT = 30.0      # seconds one execution of the source may take
TARGET_SLOWDOWN = 20.0      # the target may take this many times the source's time

Runner = Callable[..., list]
"""``runner(module, inputs, topology, seed) -> per-leaf [D, *shape] arrays``. A runner whose
``takes_devices`` attribute is true also takes ``devices=`` (flattened ids): it then executes
only those devices and returns one row per device given (``interpreter.execute``'s
``devices``); ``subset_runner`` builds on it."""

# Our limitations, not the module's fault: an op the interpreter lacks, a constant whose values
# the dump elided (``{...}``), an operation numpy or ml_dtypes lacks for a dtype, a run that
# would need more memory than the limit.
UNSUPPORTED_ERRORS = (Unimplemented, ElidedLiteralError, NotImplementedError,
                      MemoryLimitExceeded)


def default_runner(backend: str = "local", max_memory: int | None = None) -> Runner:
    """``interpreter.run`` on ``backend`` ("local" or "mpi"), refusing a run whose estimated
    memory exceeds ``max_memory`` bytes (None: no limit). The local runner also has
    ``run_trials(module, input_sets, topology, seed)``: the runs of several input sets from one
    execute (``interpreter.trials``)."""
    def runner(module: HloModule, inputs: list, topology: Topology, seed: int, *,
               devices: np.ndarray | None = None) -> list:
        if devices is None:
            return list(interpreter.run(module, input_arrays(inputs), topology=topology,
                                        backend=backend, seed=seed, max_memory=max_memory))
        return interpreter.execute(module, input_arrays(inputs), topology=topology,
                                   backend=backend, seed=seed, max_memory=max_memory,
                                   devices=devices).outputs

    def run_trials(module: HloModule, input_sets: list, topology: Topology, seed: int
                   ) -> list[list]:
        """Per input set, what ``runner`` gives on it, from one execute of all of them."""
        from neuron_sim.interpreter.trials import execute_trials

        return execute_trials(module, [input_arrays(inputs) for inputs in input_sets],
                              topology, seed, max_memory=max_memory)

    runner.takes_devices = backend == "local"  # type: ignore[attr-defined]
    if backend == "local":  # several input sets in one execute (verify/trial_batches.py)
        runner.run_trials = run_trials  # type: ignore[attr-defined]
    return runner


def subset_runner(runner: Runner, devices: np.ndarray) -> Runner:
    """``runner`` (one that ``takes_devices``) executing only ``devices`` (flattened ids closed
    under every collective of what it runs: ``neuron_sim.verify.device_subsets``), returning
    outputs for every device as the checks read them: those devices' rows as computed, zeros
    for the others (the same in source and target, so they never differ; the report says
    which devices ran)."""
    rows = np.asarray(devices, dtype=np.int64)

    def subset(module: HloModule, inputs: list, topology: Topology, seed: int) -> list:
        outputs = []
        for part in runner(module, inputs, topology, seed, devices=rows):
            whole = np.zeros((topology.num_devices, *part.shape[1:]), dtype=part.dtype)
            whole[rows] = part
            outputs.append(whole)
        return outputs

    return subset


class FailureKind(enum.Enum):
    """How an execution failed, as the checks distinguish it."""

    COLLECTIVE_MISMATCH = "collective mismatch"
    UNSUPPORTED = "unsupported"
    TIMEOUT = "timeout"
    EXECUTION = "execution"


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def classify_failure(exc: BaseException) -> FailureKind:
    """What an exception raised while executing a module means to the verifier; looks through
    wrapped causes (the interpreter wraps an op's error in ``ExecutionError``)."""
    chain = _exception_chain(exc)
    for failure, classes in ((FailureKind.TIMEOUT, ExecutionTimeout),
                             (FailureKind.COLLECTIVE_MISMATCH, CollectiveMismatchError),
                             (FailureKind.UNSUPPORTED, UNSUPPORTED_ERRORS)):
        if any(isinstance(e, classes) for e in chain):
            return failure
    return FailureKind.EXECUTION


def describe_exception(exc: BaseException) -> str:
    """The message of ``exc`` (the interpreter's includes ``While executing %x = ...``)."""
    return str(exc) or type(exc).__name__


@dataclass
class Outcome:
    """One execution: outputs, or how it failed."""

    outputs: list[np.ndarray] | None = None
    failure: FailureKind | None = None
    error: BaseException | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def message(self) -> str:
        return describe_exception(self.error) if self.error is not None else ""


def run_outcome(runner: Runner, module: HloModule, inputs: list, topology: Topology,
            seed: int, limit: float | None = None) -> Outcome:
    """Run ``module``; a failure (or running past ``limit`` seconds) is classified, not raised.

    The limit reaches every interpreter run the runner makes (``interpreter.time_limit``: the
    evaluator stops between instructions, in any thread); a runner that returns late by other
    means is judged by the clock.
    """
    started = time.perf_counter()
    with np.errstate(all="ignore"):
        try:
            with interpreter.time_limit(limit):
                outputs = runner(module, inputs, topology, seed)
            seconds = time.perf_counter() - started
            if limit is not None and seconds > limit:
                raise ExecutionTimeout(f"did not finish within {limit:g} s")
        except Exception as exc:  # noqa: BLE001 - every failure is classified and reported
            return Outcome(failure=classify_failure(exc), error=exc,
                           seconds=time.perf_counter() - started)
    return Outcome(outputs=[np.asarray(o) for o in outputs], seconds=seconds)


def target_limit(timeout: float | None, source: Outcome) -> float | None:
    """The target's time limit: ``TARGET_SLOWDOWN`` times the source's time, at least
    ``timeout`` (None: no limit)."""
    return None if timeout is None else max(timeout, TARGET_SLOWDOWN * source.seconds)
