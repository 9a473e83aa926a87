"""``run`` and ``execute``: a module on every device, in this process or under MPI (the
package's docstring says what they take and return; ``interpreter`` re-exports them)."""


from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.hlo import HloModule, parse_module
from neuron_sim.topology import Topology

from neuron_sim.interpreter.arguments import prepare_arguments
from neuron_sim.interpreter.backends import make_transport
from neuron_sim.interpreter.evaluator import Deadline, Evaluator
from neuron_sim.interpreter.errors import Unimplemented
from neuron_sim.interpreter.memory import require_memory
from neuron_sim.interpreter.module_facts import ModuleFacts, facts_of
from neuron_sim.interpreter.values import Replicated, TupleValue, Value, leaves, output_rows

__all__ = ["RunResult", "execute", "run"]


@dataclass
class RunResult:
    """The outcome of executing a module on every device."""

    outputs: list[np.ndarray]  # one [D, *shape] array per result leaf
    values: list[Value]  # the same leaves, replicated ones held once
    topology: Topology
    instructions_executed: int
    device_instructions: int  # instructions x the devices they ran for


def run(module: HloModule | str, inputs: Sequence[Any] | Mapping[str, Any] | None = None,
        topology: Topology | None = None, backend: str = "local", seed: int | None = None,
        *, time_limit: float | None = None, max_memory: int | None = None
        ) -> list[np.ndarray]:
    """Execute ``module`` on every device; one ``[D, *shape]`` array per result leaf.

    ``backend="mpi"`` must be called on every rank under mpiexec (``docs/mpi.md``); every rank
    then returns the full outputs (gathered on rank 0, broadcast to the others). A run that
    ends early raises the backend's agreed ``MpiRunError`` (an InterpreterError) on every rank;
    there ``time_limit`` is the watchdog's (default ``DEFAULT_TIMEOUT``).
    """
    if backend == "mpi":
        from mpi4py import MPI

        from neuron_sim.interpreter.backends.mpi import DEFAULT_TIMEOUT, run_mpi

        module = parse_module(module) if isinstance(module, str) else module
        if max_memory is not None:
            require_memory(module, topology or Topology(module.replica_count,
                                                        module.num_partitions), max_memory)
        result = run_mpi(module, inputs, topology, seed=seed,
                         timeout=DEFAULT_TIMEOUT if time_limit is None else time_limit)
        return MPI.COMM_WORLD.bcast(result.outputs, root=0)
    return execute(module, inputs, topology, backend, seed, time_limit=time_limit,
                   max_memory=max_memory).outputs


def _owned_outputs(values: list[Value], n: int) -> list[np.ndarray]:
    """The result leaves as ``[n, *shape]`` arrays, each one the caller may write to without
    touching anything else: an array the run computed (owning its data, writable) is handed
    over as it is; a view (of an input, of a value held once, of another output), a repeated
    array and a value held once are copied (a value held once straight into its rows). The
    leaves in ``RunResult.values`` may share data with the outputs."""
    outputs: list[np.ndarray] = []
    seen: set[int] = set()
    for value in values:
        if type(value) is Replicated:
            array = value.array
            outputs.append(array[None].copy() if n == 1 else
                           np.array(np.broadcast_to(array, (n, *array.shape))))
            continue
        array = output_rows(value, n)
        owned = array.flags.owndata and array.flags.writeable and id(array) not in seen
        seen.add(id(array))
        outputs.append(array if owned else np.array(array, copy=True))
    return outputs


@functools.lru_cache(maxsize=64)
def _header_topology(replica_count: int, num_partitions: int) -> Topology:
    """The default topology of a module header, built once per shape (Topology is immutable,
    and checking its fields costs more than some small modules take to run)."""
    return Topology(replica_count, num_partitions)


def _require_static_sizes(facts: ModuleFacts) -> None:
    """Refuse, naming the instruction, a module with an unbounded dynamic dimension
    (``f32[<=?,4]``, ``f32[?,4]``): XLA's verifier accepts such shapes (StableHLO emits them
    before shape refinement), but a value of one has no size to execute with. (The module's
    facts name the first such instruction; they are kept while the module is unchanged.)"""
    inst = facts.unbounded
    if inst is not None:
        raise Unimplemented(
            "unbounded dynamic dimensions",
            f"{inst.shape} has no size until the dimension is bounded or refined", inst)


def parsed_with_topology(module: HloModule | str, topology: Topology | None
                        ) -> tuple[HloModule, Topology]:
    """The module (parsed from text) and the topology to run it on (default: its header's)."""
    if isinstance(module, str):
        module = parse_module(module)
    if topology is None:
        topology = _header_topology(module.replica_count, module.num_partitions)
    return module, topology


def ready_to_run(module: HloModule, topology: Topology, max_memory: int | None,
                 executed: int | None, time_limit: float | None
                 ) -> tuple[ModuleFacts, Deadline | None]:
    """What an execute checks before its arguments: the module's facts (no unbounded
    dimension), its memory estimate for ``executed`` devices (default: all of ``topology``)
    within ``max_memory``, and the deadline of ``time_limit`` seconds."""
    facts = facts_of(module)
    _require_static_sizes(facts)
    if max_memory is not None:
        require_memory(module, topology, max_memory, executed=executed)
    return facts, None if time_limit is None else Deadline(time_limit)


def execute(module: HloModule | str, inputs: Sequence[Any] | Mapping[str, Any] | None = None,
            topology: Topology | None = None, backend: str = "local", seed: int | None = None,
            *, time_limit: float | None = None, max_memory: int | None = None,
            devices: Sequence[int] | np.ndarray | None = None) -> RunResult:
    """Like ``run``, also returning the values and execution counts.

    Without ``inputs``, a module with parameters needs ``seed``: inputs are then drawn with
    ``draw_inputs`` (distinct per device). ``seed`` also seeds the ``rng`` ops.

    ``devices`` (flattened ids, local backend): execute only these devices; the outputs then
    have one row per device given, in that order, and ``max_memory`` is checked for them. The
    caller vouches that no collective groups one of them with a device outside (a group
    reached by only some of its members raises ``CollectiveMismatchError``, as under
    device-divergent control flow); ``neuron_sim.verify.device_subsets`` finds such sets.
    """
    module, topology = parsed_with_topology(module, topology)
    rows = None if devices is None else np.asarray(devices, dtype=np.int64)
    if rows is not None and (rows.ndim != 1 or len(rows) == 0 or rows.min() < 0 or
                             rows.max() >= topology.num_devices or
                             len(np.unique(rows)) != len(rows)):
        raise ValueError(f"devices must be distinct flattened ids of topology {topology}")
    num_devices = topology.num_devices if rows is None else len(rows)
    facts, deadline = ready_to_run(module, topology, max_memory,
                                   None if rows is None else num_devices, time_limit)
    args = prepare_arguments(module, topology, inputs, seed, rows, signature=facts.signature)
    evaluator = Evaluator(module, topology, make_transport(backend, topology.num_devices), seed,
                          deadline, facts=facts)
    result = evaluator.run_entry(args, rows)
    values = list(leaves(result)) if type(result) is TupleValue else [result]
    outputs = _owned_outputs(values, num_devices)
    return RunResult(outputs, values, topology, evaluator.instructions_executed,
                     evaluator.device_instructions)
