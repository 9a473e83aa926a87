"""The entry arguments of a run: drawn or given, fitted to the parameters, turned into values.

Every way of running a module prepares its arguments here: ``interpreter.execute`` (the local
backend, ``neuron-sim run``) and the MPI backend, whose ranks each keep only the rows of the
devices they host. Inputs are fitted by ``neuron_sim.io.fit_arguments`` (the npz format, tuple
parameters included); without inputs they are drawn by ``draw_inputs``.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.hlo import HloModule
from neuron_sim.io import Fitted, fit_arguments
from neuron_sim.topology import Topology

from neuron_sim.interpreter.errors import InputError
from neuron_sim.interpreter.values import TOKEN, Replicated, TupleValue, Value, collapse_if_uniform

__all__ = ["argument_values", "draw_inputs", "needs_inputs", "prepare_arguments"]


def needs_inputs(module: HloModule) -> bool:
    """Whether the entry computation has a parameter with an array leaf (tokens need none)."""
    return any(leaf.is_array for p in module.entry.parameters for leaf in p.shape.leaves())


def prepare_arguments(module: HloModule, topology: Topology,
                      inputs: Sequence[Any] | Mapping[str, Any] | None, seed: int | None,
                      devices: Sequence[int] | np.ndarray | None = None, *,
                      signature: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None
                      ) -> list[Value]:
    """The entry arguments for the rows ``devices`` (flattened ids; default every device).

    ``inputs`` is what ``fit_arguments`` takes; without them, inputs are drawn with
    ``draw_inputs(module, topology, seed)``, which a module that needs inputs must be given a
    ``seed`` for. Raises InputError (one sentence naming the parameter) for inputs that do not
    fit. ``signature``: each entry parameter's dtype and dimensions when all are arrays (the
    module's facts), for ``given_arrays``.
    """
    if signature is not None and devices is None:
        kind = type(inputs)
        if kind is dict and len(inputs) == len(signature):
            # An npz file's keys, one ``arg{i}`` per parameter (every parameter is an array):
            # by position, as ``fit_arguments`` reads them.
            inputs_in_order = list(map(inputs.get, _argument_keys(len(signature))))
            if not any(value is None for value in inputs_in_order):
                given = given_arrays(inputs_in_order, signature, topology.num_devices)
                if given is not None:
                    return given
        elif kind is list or kind is tuple:
            given = given_arrays(inputs, signature, topology.num_devices)
            if given is not None:
                return given
    shapes = [p.shape for p in module.entry.parameters]
    if inputs is None:
        if seed is None and needs_inputs(module):
            raise InputError(f"module {module.name} has {len(shapes)} parameters: give inputs "
                             "or a seed to draw them")
        inputs = draw_inputs(module, topology, seed or 0)
    try:
        fitted = fit_arguments(inputs, shapes, topology.num_devices)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return argument_values(fitted, shapes, devices)


@functools.lru_cache(maxsize=64)
def _argument_keys(count: int) -> tuple[str, ...]:
    """The npz keys of ``count`` array parameters: ``arg0`` .. ``arg{count - 1}``."""
    return tuple(f"arg{i}" for i in range(count))


def given_arrays(inputs: Sequence[Any], signature: Sequence[tuple[np.dtype, tuple[int, ...]]],
                 num_devices: int) -> list[Value] | None:
    """The entry arguments of the common call — one numpy array per array parameter, each of
    exactly the parameter's dtype and shaped as it (given once) or ``[num_devices, *shape]`` —
    as ``fit_arguments`` and ``argument_values`` make them, read without their general
    handling (mappings, conversions, tuples, messages). None for any other inputs: those take
    the general path, which fits or refuses them."""
    if len(inputs) != len(signature):
        return None
    values: list[Value] = []
    for array, (dtype, dims) in zip(inputs, signature):
        if type(array) is not np.ndarray or (array.dtype is not dtype and array.dtype != dtype):
            return None
        shape = array.shape
        if shape == dims:
            values.append(Replicated(_read_only(array)))
        elif len(shape) == len(dims) + 1 and shape[0] == num_devices and shape[1:] == dims:
            values.append(collapse_if_uniform(_read_only(array)))
        else:
            return None
    return values


def argument_values(fitted: Sequence[Fitted], shapes: Sequence[Any],
                    devices: Sequence[int] | np.ndarray | None = None) -> list[Value]:
    """The interpreter's values of fitted inputs, one per parameter, for the rows ``devices``.

    An input given once (shaped like its parameter) is held once, ``Replicated``; a per-device
    input ``[D, *shape]`` keeps the rows of ``devices`` (flattened ids, in that order; default
    all D), held once if those rows are all equal. Tuples become ``TupleValue``, tokens
    ``TOKEN``. The values are read-only views of the caller's arrays where that is possible
    (no copy of a large input): the interpreter never writes into an operand, and ``execute``
    copies an output that is such a view. A caller that changes an input array during a run
    changes the run.
    """
    rows = None if devices is None else np.asarray(devices, dtype=np.int64)
    return [_value(array, shape, rows) for array, shape in zip(fitted, shapes)]


def _value(fitted: Fitted, shape: Any, rows: np.ndarray | None) -> Value:
    if shape.is_tuple:
        return TupleValue([_value(part, element, rows)
                           for part, element in zip(fitted, shape.elements)])
    if fitted is None:
        return TOKEN
    if fitted.ndim == len(shape.dims):
        return Replicated(_read_only(fitted))
    return collapse_if_uniform(_read_only(fitted) if rows is None else fitted[rows])


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that cannot be written through (the caller's array stays writable)."""
    view = array.view()
    view.flags.writeable = False
    return view


def draw_inputs(module: HloModule, topology: Topology, seed: int) -> dict[str, np.ndarray]:
    """Inputs for every array leaf of the entry parameters, ``[D, *shape]``, distinct per device.

    Keys as in an npz file: ``arg{i}`` for an array parameter, ``arg{i}.{j}`` for leaf j of a
    tuple parameter. Floats are normal with standard deviation 4, integers uniform in
    [-100, 100) (unsigned: [0, 200)) clipped to the type, preds fair coins; deterministic given
    ``seed``.
    """
    generator = np.random.default_rng(seed)
    drawn = {}
    for i, parameter in enumerate(module.entry.parameters):
        shape = parameter.shape
        for j, leaf in enumerate(shape.leaves()):
            if leaf.is_array:
                key = f"arg{i}.{j}" if shape.is_tuple else f"arg{i}"
                drawn[key] = _draw(generator, leaf, topology.num_devices)
    return drawn


def _draw(generator: np.random.Generator, shape: Any, num_devices: int) -> np.ndarray:
    full = (num_devices, *shape.dims)
    et = shape.element_type
    dtype = et.numpy_dtype
    if et.is_float:
        return (generator.standard_normal(full) * 4).astype(np.float32).astype(dtype)
    if et.is_complex:
        values = generator.standard_normal(full) + 1j * generator.standard_normal(full)
        return values.astype(dtype)
    if et.is_integral:
        low = 0 if not et.is_signed else -100
        raw = generator.integers(low, low + 200, size=full)
        if et.bits < 8:
            raw = np.clip(raw, -(1 << (et.bits - 1)) if et.is_signed else 0,
                          (1 << (et.bits - (1 if et.is_signed else 0))) - 1)
        return raw.astype(dtype)
    return generator.random(full) < 0.5
