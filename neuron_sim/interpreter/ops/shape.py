"""Data movement: constant, iota, broadcast, reshape, transpose, slice, concatenate, pad,
reverse, copy, bitcast (layout-aware), tuple, get-tuple-element and the identity-like ops.

Every array op here receives batched arrays (leading row axis) and moves data in the other axes.
"""

from __future__ import annotations

import functools
import weakref
from typing import Callable

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Layout, TupleShape

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.ops.registry import implements
from neuron_sim.interpreter.values import TOKEN, Replicated, TupleValue


@implements(Opcode.CONSTANT, values=True)
def constant(ctx):
    inst = ctx.inst
    literal = inst.literal
    if literal is None:
        raise InterpreterError("constant has no literal")
    value = literal.value
    kept = _CONSTANTS.get(inst)
    if kept is not None and kept[0] is literal and kept[1] is inst.shape and kept[2] is value:
        return kept[3]
    result = _literal_value(inst.shape, value)
    if isinstance(result, Replicated) and isinstance(value, np.ndarray) \
            and value.dtype == result.array.dtype:
        # A view of the literal's own array (so it sees what the literal holds): kept for the
        # next execute while the instruction keeps this literal and shape.
        _CONSTANTS[inst] = (literal, inst.shape, value, result)
    return result


_CONSTANTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _literal_value(shape, value):
    if isinstance(shape, TupleShape):
        return TupleValue([_literal_value(s, v) for s, v in zip(shape.elements, value)])
    if shape.is_token:
        return TOKEN
    array = np.asarray(value, dtype=shape.element_type.numpy_dtype).reshape(shape.dims)
    array.flags.writeable = False
    return Replicated(array)


@implements(Opcode.IOTA)
def iota(ctx):
    shape = ctx.inst.shape
    return iota_array(tuple(shape.dims), int(ctx.attr("iota_dimension")), ctx.dtype)


def iota_array(dims: tuple[int, ...], dim: int, dtype: np.dtype) -> np.ndarray:
    """The batched iota of shape ``dims`` along ``dim``: a read-only broadcast view ``[1,
    *dims]`` of ``iota_line``, kept when the line is short (an iota is a constant of its
    shape; a kept view holds its line, so only short ones are)."""
    if dims[dim] <= _CACHED_IOTA_VIEW:
        return _cached_iota_array(dims, dim, np.dtype(dtype))
    return _iota_array(dims, dim, np.dtype(dtype))


def _iota_array(dims: tuple[int, ...], dim: int, dtype: np.dtype) -> np.ndarray:
    line = iota_line(dims[dim], dtype)
    if len(dims) == 1:
        return line[None]
    view = line.reshape([dims[dim] if i == dim else 1 for i in range(len(dims))])
    return np.broadcast_to(view, dims)[None]


_cached_iota_array = functools.lru_cache(maxsize=64)(_iota_array)


def iota_line(size: int, dtype: np.dtype) -> np.ndarray:
    """``0, 1, ..., size - 1`` in ``dtype`` (read-only), built directly in that type when it
    holds every value exactly (no int64 arange and copy), and kept for the next call: an iota
    is a constant of its shape, and a module run many times (a verification, a bench) would
    otherwise rebuild it on every execute."""
    size, dtype = int(size), np.dtype(dtype)
    return _cached_iota_line(size, dtype) if size <= _CACHED_IOTA else _build_iota_line(size, dtype)


_CACHED_IOTA = 1 << 22  # elements: at most 32 lines of up to 32 MB are kept
_CACHED_IOTA_VIEW = 1 << 16  # elements: at most 64 views of lines of up to 512 kB are kept


@functools.lru_cache(maxsize=32)
def _cached_iota_line(size: int, dtype: np.dtype) -> np.ndarray:
    return _build_iota_line(size, dtype)


def _build_iota_line(size: int, dtype: np.dtype) -> np.ndarray:
    direct = (dtype.kind in "iu" and size - 1 <= np.iinfo(dtype).max) or \
        (dtype in (np.dtype(np.float32), np.dtype(np.float64)) and size <= 1 << 24)
    line = np.arange(size, dtype=dtype) if direct else np.arange(size).astype(dtype)
    line.flags.writeable = False
    return line


@implements(Opcode.BROADCAST)
def broadcast(ctx, x):
    dims = tuple(ctx.inst.dimensions)
    out_dims = ctx.inst.shape.dims
    if list(dims) != sorted(dims):
        order = np.argsort(dims)
        x = x.transpose(0, *(1 + order))
        dims = tuple(sorted(dims))
    shaped = x.reshape(x.shape[0], *[out_dims[j] if j in dims else 1
                                      for j in range(len(out_dims))])
    return broadcast_rows(shaped, (x.shape[0], *out_dims))


def broadcast_rows(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` broadcast to ``shape``: a new array for a small result (numpy's ``broadcast_to``
    costs tens of times a small copy), a read-only view for a large one (no memory)."""
    count = 1
    for d in shape:
        count *= d
    if count > _SMALL_BROADCAST:
        return np.broadcast_to(x, shape)
    out = np.empty(shape, x.dtype)
    out[...] = x
    return out


_SMALL_BROADCAST = 1 << 14  # elements


@implements(Opcode.RESHAPE)
def reshape(ctx, x):
    return x.reshape(x.shape[0], *ctx.inst.shape.dims)


@implements(Opcode.DYNAMIC_RESHAPE)
def dynamic_reshape(ctx, x, *sizes):
    return x.reshape(x.shape[0], *ctx.inst.shape.dims)


@implements(Opcode.TRANSPOSE)
def transpose(ctx, x):
    return x.transpose(0, *(1 + d for d in ctx.inst.dimensions))


@implements(Opcode.SLICE)
def slice_(ctx, x):
    index = (slice(None),) + tuple(slice(d.start, d.limit, d.stride) for d in ctx.attr("slice"))
    return x[index]


@implements(Opcode.CONCATENATE)
def concatenate(ctx, *arrays):
    (dim,) = ctx.inst.dimensions
    return np.concatenate(ctx.unify(*arrays), axis=dim + 1)


@implements(Opcode.REVERSE)
def reverse(ctx, x):
    dims = tuple(1 + d for d in ctx.inst.dimensions)
    return np.flip(x, axis=dims) if dims else x


@implements(Opcode.PAD)
def pad(ctx, x, value):
    """Low/high padding (negative crops) and interior padding between elements."""
    config = ctx.attr("padding")
    out_dims = ctx.inst.shape.dims
    rows = max(x.shape[0], value.shape[0])
    out = np.empty((rows, *out_dims), x.dtype)
    out[...] = value.reshape(value.shape[0], *([1] * len(out_dims)))
    source = [slice(None)]
    target = [slice(None)]
    for size, out_size, dim in zip(x.shape[1:], out_dims, config):
        step = dim.interior + 1
        low = dim.low
        # Element i lands at low + i * step; keep those inside [0, out_size).
        first = -(low // step) if low < 0 else 0  # ceil(-low / step)
        last = min(size - 1, (out_size - 1 - low) // step) if size else -1
        if last < first:
            return out
        source.append(slice(first, last + 1))
        target.append(slice(low + first * step, low + last * step + 1, step))
    out[tuple(target)] = x[tuple(source)]
    return out


@implements(Opcode.COPY, Opcode.DOMAIN)
def copy(ctx, x):
    # A copy between layouts is a logical no-op (docs/semantics.md §5).
    return x


@implements(Opcode.BITCAST)
def bitcast(ctx, x):
    """Reinterpret the buffer: logical -> physical by the operand's layout, physical -> logical
    by the result's layout (docs/semantics.md §5)."""
    operand_shape = ctx.inst.operand(0).shape
    result_shape = ctx.inst.shape
    if not isinstance(operand_shape, ArrayShape) or not isinstance(result_shape, ArrayShape):
        raise InterpreterError("bitcast of a tuple")
    physical = to_physical(x, operand_shape)
    if x.dtype.itemsize != ctx.dtype.itemsize:
        raise InterpreterError("bitcast between element types of different widths")
    if x.dtype != ctx.dtype:
        physical = np.ascontiguousarray(physical).view(ctx.dtype)
    return from_physical(physical, result_shape)


def major_to_minor(shape: ArrayShape) -> tuple[int, ...]:
    layout = shape.layout if shape.layout is not None else Layout.default(shape.rank)
    m2m = tuple(reversed(layout.minor_to_major))
    if sorted(m2m) != list(range(shape.rank)):
        raise InterpreterError(f"layout {layout} does not fit rank {shape.rank}")
    return m2m


def to_physical(x: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """Batched logical array -> batched flat buffer in the layout's memory order."""
    order = major_to_minor(shape)
    return x.transpose(0, *(1 + d for d in order)).reshape(x.shape[0], -1)


def from_physical(buffer: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """Batched flat buffer in the layout's memory order -> batched logical array."""
    order = major_to_minor(shape)
    physical = buffer.reshape(buffer.shape[0], *(shape.dims[d] for d in order))
    inverse = np.argsort(order)
    return physical.transpose(0, *(1 + inverse))


@implements(Opcode.TUPLE, values=True)
def tuple_(ctx, *elements):
    return TupleValue(elements)


@implements(Opcode.GET_TUPLE_ELEMENT, values=True)
def get_tuple_element(ctx, operand):
    if not isinstance(operand, TupleValue):
        raise InterpreterError("get-tuple-element of a non-tuple value")
    return operand.elements[int(ctx.attr("index"))]


@implements(Opcode.OPTIMIZATION_BARRIER, values=True)
def optimization_barrier(ctx, operand):
    return operand


@implements(Opcode.ADD_DEPENDENCY, values=True)
def add_dependency(ctx, operand, token):
    return operand


@implements(Opcode.AFTER_ALL, values=True)
def after_all(ctx, *tokens):
    return TOKEN


@implements(Opcode.GET_DIMENSION_SIZE)
def get_dimension_size(ctx, x):
    (dim,) = ctx.inst.dimensions
    return np.full((1,), x.shape[1 + dim], ctx.dtype)


@implements(Opcode.SET_DIMENSION_SIZE)
def set_dimension_size(ctx, x, size):
    # Static shapes only: the value is unchanged (dynamic padding is not modelled).
    return x


# ---------------------------------------------------------------------------------------------
# Data movement bound once for a plan (``neuron_sim.interpreter.plan``).

def bound_movement(inst) -> tuple[Callable[[np.ndarray], np.ndarray],
                                  tuple[tuple[str, object], ...]] | None:
    """A one-operand data movement (reshape, transpose, slice, broadcast, bitcast) as a
    function of the batched operand array, with what the registered op reads per call read
    once: the same numpy operations in the same order (a transposition that is the identity
    left out). Returns it with the attributes it read, or None where the registered op must
    run (it then reports what is wrong: a tuple, layouts that do not fit, different widths)."""
    opcode = inst.opcode
    shape = inst.shape
    if len(inst.operands) != 1 or not isinstance(shape, ArrayShape) or not shape.is_array:
        return None
    operand = inst.operands[0].shape
    if not isinstance(operand, ArrayShape) or not operand.is_array:
        return None
    dims = tuple(shape.dims)
    attrs = inst.attrs
    if opcode is Opcode.RESHAPE:
        return (lambda x: x.reshape(x.shape[0], *dims)), ()
    if opcode is Opcode.TRANSPOSE:
        permutation = (0, *(1 + d for d in inst.dimensions))
        return (lambda x: x.transpose(permutation)), (("dimensions", attrs.get("dimensions")),)
    if opcode is Opcode.SLICE:
        index = (slice(None),) + tuple(slice(d.start, d.limit, d.stride)
                                       for d in attrs["slice"])
        return (lambda x: x[index]), (("slice", attrs.get("slice")),)
    if opcode is Opcode.BROADCAST:
        kept = tuple(inst.dimensions)
        order = None
        if list(kept) != sorted(kept):
            order = (0, *(1 + np.argsort(kept)))
            kept = tuple(sorted(kept))
        shaped = tuple(dims[j] if j in kept else 1 for j in range(len(dims)))

        def broadcast_bound(x: np.ndarray) -> np.ndarray:
            if order is not None:
                x = x.transpose(order)
            return broadcast_rows(x.reshape(x.shape[0], *shaped), (x.shape[0], *dims))

        return broadcast_bound, (("dimensions", attrs.get("dimensions")),)
    if opcode is Opcode.BITCAST:
        dtype = shape.element_type.numpy_dtype
        if operand.element_type.numpy_dtype.itemsize != dtype.itemsize:
            return None
        try:
            order_in, order_out = major_to_minor(operand), major_to_minor(shape)
        except InterpreterError:
            return None
        into = None if order_in == tuple(range(len(order_in))) else \
            (0, *(1 + d for d in order_in))
        physical = tuple(dims[d] for d in order_out)
        back = None if order_out == tuple(range(len(order_out))) else \
            (0, *(1 + np.argsort(order_out)))

        def bitcast_bound(x: np.ndarray) -> np.ndarray:
            buffer = (x if into is None else x.transpose(into)).reshape(x.shape[0], -1)
            if x.dtype != dtype:
                buffer = np.ascontiguousarray(buffer).view(dtype)
            buffer = buffer.reshape(buffer.shape[0], *physical)
            return buffer if back is None else buffer.transpose(back)

        return bitcast_bound, ()
    return None
