"""Per-device values, held once when they are the same on every device.

The evaluator runs a computation for a *frame*: a set of rows, one per active device (or, when a
scalar computation is applied elementwise, one per element). A value is

- ``Replicated(array)``: the same ``array`` on every row. Constants, replicated parameters and
  everything computed only from them stay replicated, so most of a real program costs the same
  on 8 devices as on 1024.
- ``PerDevice(array)``: ``array[i]`` is the value on row ``i`` (a stacked ``[n, *shape]`` array).
- ``TupleValue(elements)`` for tuple shapes, and ``TOKEN`` for tokens.

Ops work on *batched* arrays: a replicated value is seen as ``array[None]`` (a leading axis of
size 1 that broadcasts), a per-device value as its stacked array, so one numpy call computes an
op for every device at once. Values are never modified in place once created, with one
exception: an elementwise op may write its result into an operand that nothing can reach any
more (its instruction has no later user and no other reference to its memory exists;
``neuron_sim.interpreter.evaluator.reusable_buffer``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterator, Sequence, Union

import numpy as np

from neuron_sim.hlo import ElementType


class Replicated:
    """The same array on every row of the frame."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        return f"Replicated({self.array.dtype}{list(self.array.shape)})"


class PerDevice:
    """One array per row of the frame, stacked: ``array.shape == (n, *shape)``."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        return f"PerDevice({self.array.dtype}{list(self.array.shape)})"


class TupleValue:
    """A tuple-shaped value."""

    __slots__ = ("elements",)

    def __init__(self, elements: Sequence["Value"]) -> None:
        self.elements = list(elements)

    def __repr__(self) -> str:
        return f"TupleValue({self.elements})"


class _Token:
    """The value of a token: no data, the same everywhere."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = _Token()

Value = Union[Replicated, PerDevice, TupleValue, _Token]
ArrayValue = Union[Replicated, PerDevice]


@lru_cache(maxsize=None)
def numpy_dtype(element_type: ElementType) -> np.dtype:
    """``element_type.numpy_dtype``, cached (it is asked for on every instruction)."""
    return element_type.numpy_dtype


def batched(value: Value) -> np.ndarray:
    """The array with a leading row axis: size 1 for a replicated value, n for a per-device one."""
    if isinstance(value, Replicated):
        return value.array[None]
    if isinstance(value, PerDevice):
        return value.array
    raise TypeError(f"expected an array value, got {value!r}")


def from_batched(array: np.ndarray, replicated: bool) -> ArrayValue:
    """Inverse of ``batched``: a replicated value if ``replicated`` (leading axis of size 1)."""
    if replicated:
        return Replicated(array[0])
    return PerDevice(array)


def stacked(value: ArrayValue, n: int) -> np.ndarray:
    """The value as an ``[n, *shape]`` array (a read-only broadcast view if replicated)."""
    if isinstance(value, Replicated):
        if n == 1:  # the same read-only view, without broadcast_to's cost
            view = value.array[None]
            view.flags.writeable = False
            return view
        return np.broadcast_to(value.array, (n, *value.array.shape))
    if value.array.shape[0] != n:
        raise ValueError(f"per-device value has {value.array.shape[0]} rows, expected {n}")
    return value.array


def output_rows(value: Value, n: int) -> np.ndarray:
    """A result leaf as ``[n, *shape]`` rows: a token as ``[n, 0]`` bools, a replicated value
    as a read-only broadcast view (copy it to write)."""
    if value is TOKEN:
        return np.zeros((n, 0), np.bool_)
    return stacked(value, n)


def is_replicated(value: Value) -> bool:
    """True if the value (every leaf of a tuple) is the same on every row."""
    if isinstance(value, TupleValue):
        return all(is_replicated(e) for e in value.elements)
    return not isinstance(value, PerDevice)


def restrict(value: Value, rows: np.ndarray) -> Value:
    """The value on a subset of the frame's rows (indices into the current rows)."""
    kind = type(value)
    if kind is PerDevice:
        return PerDevice(value.array[rows])
    if kind is not TupleValue:
        return value
    elements = []
    changed = False
    for element in value.elements:
        kind = type(element)
        if kind is PerDevice:
            element = PerDevice(element.array[rows])
            changed = True
        elif kind is TupleValue:
            part = restrict(element, rows)
            changed = changed or part is not element
            element = part
        elements.append(element)
    return TupleValue(elements) if changed else value  # unchanged: held once on every row


def merge(old: Value, rows: np.ndarray, new: Value, n: int) -> Value:
    """``old`` on all n rows, with the rows in ``rows`` replaced by ``new`` (given on those rows).

    Stays replicated when both are replicated and equal, so a device-dependent loop that leaves
    a value alone does not make it per-device.
    """
    if isinstance(old, TupleValue):
        assert isinstance(new, TupleValue)
        return TupleValue([merge(o, rows, v, n) for o, v in zip(old.elements, new.elements)])
    if old is TOKEN or new is TOKEN:
        return TOKEN
    if isinstance(old, Replicated) and isinstance(new, Replicated):
        if old.array.dtype == new.array.dtype and _same_bits(old.array, new.array):
            return old
    full = np.array(stacked(old, n), copy=True)
    full[rows] = batched(new)
    return PerDevice(full)


def merge_branches(parts: Sequence[tuple[np.ndarray, Value]], n: int) -> Value:
    """Assemble a value on n rows from disjoint row subsets that together cover all rows."""
    first = parts[0][1]
    kind = type(first)
    if kind is TupleValue:
        return TupleValue([
            merge_branches([(rows, value.elements[i]) for rows, value in parts], n)
            for i in range(len(first.elements))])
    if first is TOKEN:
        return TOKEN
    if all(type(v) is Replicated for _, v in parts):
        if all(v.array.dtype == first.array.dtype and _same_bits(v.array, first.array)
               for _, v in parts[1:]):
            return first
    array = first.array
    full = np.empty((n, *(array.shape if kind is Replicated else array.shape[1:])), array.dtype)
    for rows, value in parts:
        full[rows] = value.array  # a replicated value's one row broadcasts to its rows
    return PerDevice(full)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a is b:
        return True
    return a.tobytes() == b.tobytes()


def leaves(value: Value) -> Iterator[Value]:
    """Array and token leaves, depth first (the order of a flattened result tuple)."""
    if isinstance(value, TupleValue):
        for element in value.elements:
            yield from leaves(element)
    else:
        yield value


def compacted(value: Value) -> Value:
    """``value`` with every array leaf that is a view of memory at least twice its size (a
    slice of a large intermediate, say) replaced by a copy of it, so that a result does not
    keep the whole intermediate alive after the run (the copy is the leaf's size, at most half
    of what it frees). Other leaves are returned as they are."""
    if isinstance(value, TupleValue):
        elements = [compacted(e) for e in value.elements]
        if all(new is old for new, old in zip(elements, value.elements)):
            return value
        return TupleValue(elements)
    kind = type(value)
    if kind is not Replicated and kind is not PerDevice:
        return value
    array = value.array
    base = array.base if isinstance(array, np.ndarray) else None
    if not isinstance(base, np.ndarray) or base.nbytes < 2 * array.nbytes \
            or base.nbytes < _COMPACT_MIN_BYTES:
        return value
    copy = np.array(array, copy=True)
    return kind(copy)


_COMPACT_MIN_BYTES = 1 << 20  # smaller bases are not worth a copy


def collapse_if_uniform(array: np.ndarray) -> ArrayValue:
    """``Replicated`` if every row of a stacked array is identical, else ``PerDevice``."""
    if array.shape[0] == 0:
        return PerDevice(array)
    first = array[0]
    if array.shape[0] == 1 or array.strides[0] == 0:
        # The row is all the data there is: held as a read-only view, not copied (a broadcast
        # all-gather result can be gigabytes).
        view = array[0, ...]  # a 0-d view for a scalar row, not a numpy scalar
        view.flags.writeable = False
        return Replicated(view)
    if _rows_equal(array):
        return Replicated(np.array(first, copy=True))
    return PerDevice(array)


def _rows_equal(array: np.ndarray) -> bool:
    """Bitwise row equality (so NaN rows and -0.0 vs 0.0 are told apart correctly)."""
    if array.shape[0] > 1 and array[0].nbytes <= _SMALL_ROW \
            and array[0].tobytes() != array[1].tobytes():
        return False  # small rows that differ (per-device inputs): decided by two copies
    flat = np.ascontiguousarray(array).reshape(array.shape[0], -1)
    if flat.dtype.itemsize not in (1, 2, 4, 8):
        return all(row.tobytes() == flat[0].tobytes() for row in flat[1:])
    bits = flat.view(f"u{flat.dtype.itemsize}")
    # Blocks of rows, the first of one row: per-device data differs on row 1 almost always,
    # so that is decided after reading two rows, and no full-size temporary is made.
    block = max(1, _UNIFORMITY_BLOCK // max(1, bits.shape[1]))
    start, size = 1, 1
    while start < bits.shape[0]:
        if not (bits[start:start + size] == bits[:1]).all():
            return False
        start, size = start + size, block
    return True


_UNIFORMITY_BLOCK = 1 << 18  # elements compared at a time
_SMALL_ROW = 1 << 12  # bytes
