"""What an op sees while it executes: the frame of rows, its context, and the checked wrapping
of an array op's result into a value. Shared by the evaluator and the plans it compiles
(``neuron_sim.interpreter.plan``); ``neuron_sim.interpreter.evaluator`` re-exports them."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.hlo import ElementType, HloComputation, HloInstruction
from neuron_sim.hlo.shapes import Shape, TupleShape

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, Value,
                                           numpy_dtype)

class Frame:
    """The rows a computation is evaluated for.

    ``devices``: flattened device ids of the rows (ascending), or None when the rows are the
    elements of an elementwise application of a scalar computation.
    """

    __slots__ = ("devices", "n")

    def __init__(self, devices: np.ndarray | None, n: int | None = None) -> None:
        self.devices = devices
        self.n = len(devices) if devices is not None else int(n or 0)

    @property
    def is_device_frame(self) -> bool:
        return self.devices is not None

    def subset(self, rows: np.ndarray) -> "Frame":
        """The frame of the rows ``rows`` (indices into this frame's rows)."""
        if self.devices is None:
            return Frame(None, len(rows))
        return Frame(self.devices[rows])

    def __repr__(self) -> str:
        if self.devices is None:
            return f"Frame({self.n} elements)"
        return f"Frame(devices={self.devices.tolist()})"


class OpContext:
    """What an op implementation may use: the instruction, the frame and the evaluator."""

    __slots__ = ("evaluator", "inst", "frame")

    def __init__(self, evaluator: Any, inst: HloInstruction, frame: Frame) -> None:
        self.evaluator = evaluator
        self.inst = inst
        self.frame = frame

    @property
    def shape(self) -> Shape:
        return self.inst.shape

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the (array) result."""
        return numpy_dtype(self.inst.shape.element_type)

    @property
    def n(self) -> int:
        return self.frame.n

    def attr(self, name: str, default=None):
        return self.inst.attrs.get(name, default)

    def call(self, computation: HloComputation, args: Sequence[Value],
             frame: Frame | None = None) -> Value:
        """Evaluate ``computation`` on ``args`` for this frame (or ``frame``)."""
        return self.evaluator.evaluate(computation, args, frame or self.frame)

    def elementwise(self, computation: HloComputation) -> Callable[..., object]:
        """``computation`` (scalar parameters) as a function applied elementwise to arrays."""
        return self.evaluator.elementwise(computation)

    @staticmethod
    def unify(*arrays: np.ndarray) -> list[np.ndarray]:
        """Broadcast the row axes of batched arrays to their common size (views, no copies)."""
        n = max(a.shape[0] for a in arrays)
        return [a if a.shape[0] == n else np.broadcast_to(a, (n, *a.shape[1:])) for a in arrays]


def wrap_result(shape: Shape, result, replicated: bool, n: int) -> Value:
    """Turn an array op's batched result into a Value, checking it against the HLO shape."""
    if isinstance(shape, TupleShape):
        if not isinstance(result, (list, tuple)) or len(result) != len(shape.elements):
            raise InterpreterError(f"internal error: op returned {type(result).__name__} for "
                                   f"tuple shape {shape}")
        return TupleValue([wrap_result(s, r, replicated, n)
                           for s, r in zip(shape.elements, result)])
    element_type = shape.element_type
    if element_type is ElementType.TOKEN:
        return TOKEN
    return wrap_array(result, replicated, n, numpy_dtype(element_type), shape.dims)


def wrap_array(result: Any, replicated: bool, n: int, dtype: np.dtype,
               dims: tuple[int, ...]) -> Replicated | PerDevice:
    """An array op's batched result (rows first) as a value of ``dtype`` and per-row ``dims``:
    one row for replicated operands, else ``n`` rows (a single row broadcast to them). The
    plans call it with the dtype and dims they bound; ``wrap_result`` with the HLO shape's."""
    array = result if type(result) is np.ndarray else np.asarray(result)
    if array.dtype is not dtype and array.dtype != dtype:  # numpy's own dtypes are singletons
        array = array.astype(dtype)
    rows_shape = array.shape
    if rows_shape[1:] != tuple(dims) or len(rows_shape) != len(dims) + 1:
        raise InterpreterError(f"internal error: op produced shape {list(rows_shape[1:])}, "
                               f"the instruction's shape is {list(dims)}")
    rows = rows_shape[0]
    if replicated:
        if rows != 1:
            raise InterpreterError(f"internal error: replicated operands gave {rows} rows")
        return Replicated(array[0])
    if rows != n:
        if rows != 1:
            raise InterpreterError(f"internal error: op produced {rows} rows for {n} devices")
        array = np.broadcast_to(array, (n, *rows_shape[1:]))
    return PerDevice(array)


__all__ = ["Frame", "OpContext", "wrap_array", "wrap_result"]
