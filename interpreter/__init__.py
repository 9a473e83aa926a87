"""The reference interpreter: executes an HLO module on every simulated device.

``run(module, inputs, topology, backend="local", seed=None)`` returns one ``[D, *shape]`` array
per leaf of the entry computation's (flattened) result, where D = replica_count x
num_partitions and row f is device f = replica * num_partitions + partition. ``execute`` returns
the same plus the per-device values (replicated values held once) and execution counts.

Inputs: a list (one per entry parameter) or a dict keyed ``arg{i}``; each array is shaped
``[D, *param_shape]`` (per device) or ``param_shape`` (the same everywhere). Token parameters
take no input. Token leaves of the result come out as ``[D, 0]`` bool arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.hlo import HloModule, parse_module
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.io import fit_arguments
from neuron_sim.topology import Topology

from interpreter.backends import BACKENDS, make_transport
from interpreter.errors import (CollectiveMismatchError, ExecutionError, InputError,
                                InterpreterError, Unimplemented)
from interpreter.evaluator import Evaluator, Frame
from interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, Value,
                                collapse_if_uniform, leaves)

__all__ = [
    "BACKENDS", "CollectiveMismatchError", "Evaluator", "ExecutionError", "Frame", "InputError",
    "InterpreterError", "PerDevice", "Replicated", "RunResult", "TupleValue", "Unimplemented",
    "draw_inputs", "execute", "run",
]


@dataclass
class RunResult:
    """The outcome of executing a module on every device."""

    outputs: list[np.ndarray]  # one [D, *shape] array per result leaf
    values: list[Value]  # the same leaves, replicated ones held once
    topology: Topology
    instructions_executed: int
    device_instructions: int  # instructions x the devices they ran for


def run(module: HloModule | str, inputs: Sequence[Any] | Mapping[str, Any] | None = None,
        topology: Topology | None = None, backend: str = "local", seed: int | None = None
        ) -> list[np.ndarray]:
    """Execute ``module`` on every device; one ``[D, *shape]`` array per result leaf.

    ``backend="mpi"`` must be called on every rank under mpiexec (``docs/mpi.md``); every rank
    then returns the full outputs (gathered on rank 0, broadcast to the others). A run that
    ends early raises the backend's agreed ``MpiRunError`` (an InterpreterError) on every rank.
    """
    if backend == "mpi":
        from mpi4py import MPI

        from interpreter.backends.mpi import run_mpi

        result = run_mpi(module, inputs, topology, seed=seed)
        return MPI.COMM_WORLD.bcast(result.outputs, root=0)
    return execute(module, inputs, topology, backend, seed).outputs


def execute(module: HloModule | str, inputs: Sequence[Any] | Mapping[str, Any] | None = None,
            topology: Topology | None = None, backend: str = "local", seed: int | None = None
            ) -> RunResult:
    """Like ``run``, also returning the values and execution counts.

    Without ``inputs``, a module with parameters needs ``seed``: inputs are then drawn with
    ``draw_inputs`` (distinct per device). ``seed`` also seeds the ``rng`` ops.
    """
    if isinstance(module, str):
        module = parse_module(module)
    if topology is None:
        topology = Topology(module.replica_count, module.num_partitions)
    num_devices = topology.num_devices
    shapes = [p.shape for p in module.entry.parameters]
    if inputs is None:
        if any(isinstance(s, ArrayShape) and s.is_array for s in shapes) and seed is None:
            raise InputError(f"module {module.name} has {len(shapes)} parameters: give inputs "
                             "or a seed to draw them")
        inputs = draw_inputs(module, topology, seed or 0)
    try:
        arrays = fit_arguments(inputs, shapes, num_devices)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    args = [_argument_value(a, s) for a, s in zip(arrays, shapes)]
    evaluator = Evaluator(module, topology, make_transport(backend, num_devices), seed)
    result = evaluator.run_entry(args)
    values = list(leaves(result))
    outputs = [_materialize(v, num_devices) for v in values]
    return RunResult(outputs, values, topology, evaluator.instructions_executed,
                     evaluator.device_instructions)


def _argument_value(array: np.ndarray | None, shape) -> Value:
    if array is None:
        return TOKEN
    if array.ndim == len(shape.dims):
        value = np.array(array, copy=True)
        value.flags.writeable = False
        return Replicated(value)
    return collapse_if_uniform(np.array(array, copy=True))


def _materialize(value: Value, num_devices: int) -> np.ndarray:
    if value is TOKEN:
        return np.zeros((num_devices, 0), np.bool_)
    if isinstance(value, Replicated):
        return np.array(np.broadcast_to(value.array, (num_devices, *value.array.shape)))
    return np.array(value.array, copy=True)


def draw_inputs(module: HloModule, topology: Topology, seed: int) -> dict[str, np.ndarray]:
    """Inputs for every array parameter, ``[D, *shape]`` and distinct per device.

    Floats are normal with standard deviation 4, integers uniform in [-100, 100) (unsigned:
    [0, 200)) clipped to the type, preds fair coins; deterministic given ``seed``.
    """
    generator = np.random.default_rng(seed)
    drawn = {}
    for i, parameter in enumerate(module.entry.parameters):
        shape = parameter.shape
        if not isinstance(shape, ArrayShape) or not shape.is_array:
            continue
        full = (topology.num_devices, *shape.dims)
        et = shape.element_type
        dtype = et.numpy_dtype
        if et.is_float:
            values = (generator.standard_normal(full) * 4).astype(np.float32).astype(dtype)
        elif et.is_complex:
            values = (generator.standard_normal(full) + 1j * generator.standard_normal(full))
            values = values.astype(dtype)
        elif et.is_integral:
            low = 0 if not et.is_signed else -100
            raw = generator.integers(low, low + 200, size=full)
            if et.bits < 8:
                raw = np.clip(raw, -(1 << (et.bits - 1)) if et.is_signed else 0,
                              (1 << (et.bits - (1 if et.is_signed else 0))) - 1)
            values = raw.astype(dtype)
        else:
            values = generator.random(full) < 0.5
        drawn[f"arg{i}"] = values
    return drawn
