"""Reductions: reduce (variadic), reduce-window, select-and-scatter, sort.

Order of evaluation (ours, like XLA's HloEvaluator): a reduction is a left fold starting from
the init value over the reduced elements in row-major order of their indices. For integer and
pred reductions with an associative op the order cannot matter and numpy reduces directly; for
float add/multiply the fold is sequential (``ufunc.accumulate``), in the operand's own type — a
bf16 sum accumulates in bf16 (docs/semantics.md §4). Windows skip padding positions (they are not
folded at all). Sort is stable whatever ``is_stable`` says and calls the comparator computation
itself (vectorized merge sort), so custom and multi-operand comparators work.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import numpy as np

from neuron_sim.hlo import HloComputation, HloInstruction, Opcode
from neuron_sim.hlo.arg_reducers import ArgReducer, increases_along, recognise_arg_reducer

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.ops.cache import ComputationCache
from neuron_sim.interpreter.ops.elementwise import (_int_work_dtype, _wrap_int, element_type_of,
                                         float_maximum, float_minimum, is_complex, is_float,
                                         is_pred, total_order_key)
from neuron_sim.interpreter.ops.indexing import apply_in_order
from neuron_sim.interpreter.ops.registry import BoundOp, implements

_ASSOCIATIVE = (Opcode.ADD, Opcode.MULTIPLY, Opcode.MAXIMUM, Opcode.MINIMUM, Opcode.AND,
                Opcode.OR, Opcode.XOR)


def binary_reducer(computation: HloComputation) -> Opcode | None:
    """The opcode if ``computation`` is ``op(param0, param1)`` for a common reduction op."""
    root = computation.root
    if (len(computation.instructions) == 3 and root.opcode in _ASSOCIATIVE
            and len(root.operands) == 2
            and sorted(o.parameter_number for o in root.operands
                       if o.parameter_number is not None) == [0, 1]):
        return root.opcode
    return None


_INT_UFUNCS = {Opcode.ADD: np.add, Opcode.MULTIPLY: np.multiply, Opcode.MAXIMUM: np.maximum,
               Opcode.MINIMUM: np.minimum, Opcode.AND: np.bitwise_and,
               Opcode.OR: np.bitwise_or, Opcode.XOR: np.bitwise_xor}
_PRED_UFUNCS = {Opcode.ADD: np.logical_or, Opcode.MULTIPLY: np.logical_and,
                Opcode.MAXIMUM: np.logical_or, Opcode.MINIMUM: np.logical_and,
                Opcode.AND: np.logical_and, Opcode.OR: np.logical_or,
                Opcode.XOR: np.logical_xor}


def _identity(opcode: Opcode, dtype: np.dtype):
    """The identity of a reduction op in ``dtype`` (None if there is none we can use)."""
    if is_pred(dtype):
        return {Opcode.ADD: False, Opcode.OR: False, Opcode.XOR: False, Opcode.MAXIMUM: False,
                Opcode.MULTIPLY: True, Opcode.AND: True, Opcode.MINIMUM: True}[opcode]
    et = element_type_of(dtype)
    if et.is_integral and et.bits >= 8:
        info = np.iinfo(dtype)
        return {Opcode.ADD: 0, Opcode.OR: 0, Opcode.XOR: 0, Opcode.MULTIPLY: 1,
                Opcode.AND: -1 if et.is_signed else info.max, Opcode.MAXIMUM: info.min,
                Opcode.MINIMUM: info.max}[opcode]
    if et.is_float and et.has_inf:
        return {Opcode.ADD: -0.0, Opcode.MULTIPLY: 1.0, Opcode.MAXIMUM: -np.inf,
                Opcode.MINIMUM: np.inf}.get(opcode)
    return None


def fold_last_axis(xs: Sequence[np.ndarray], inits: Sequence[np.ndarray],
                   computation: HloComputation, ctx) -> list[np.ndarray]:
    """Left-fold the last axis of each ``xs`` (shape (..., K)) starting from ``inits`` (...)."""
    opcode = binary_reducer(computation)
    if len(xs) == 1 and opcode is not None:
        fast = _fold_binary(xs[0], inits[0], opcode)
        if fast is not None:
            return [fast]
    arg_reducer = _ARG_REDUCERS.get(computation) if len(xs) == 2 else None
    if arg_reducer is not None:
        return list(fold_arg_reduce(xs[0], xs[1], inits[0], inits[1], arg_reducer))
    combine = ctx.elementwise(computation)
    accs = [np.array(i, copy=True) for i in inits]
    for k in range(xs[0].shape[-1]):
        result = combine(*accs, *(x[..., k] for x in xs))
        accs = list(result) if isinstance(result, tuple) else [result]
    return accs


def _fold_binary(x: np.ndarray, init: np.ndarray, opcode: Opcode) -> np.ndarray | None:
    dtype = x.dtype
    init = np.broadcast_to(init, x.shape[:-1]).astype(dtype)
    with np.errstate(all="ignore"):
        if is_pred(dtype):
            ufunc = _PRED_UFUNCS[opcode]
            return ufunc(init, ufunc.reduce(x, axis=-1)) if x.shape[-1] else init.copy()
        et = element_type_of(dtype)
        if et.is_integral:
            ufunc = _INT_UFUNCS[opcode]
            work = _int_work_dtype(dtype)
            if not x.shape[-1]:
                return init.copy()
            reduced = ufunc.reduce(x.astype(work, copy=False), axis=-1)
            return _wrap_int(ufunc(init.astype(work, copy=False), reduced), dtype)
        if (et.is_float or is_complex(dtype)) and opcode in (Opcode.ADD, Opcode.MULTIPLY):
            ufunc = np.add if opcode is Opcode.ADD else np.multiply
            sequence = np.concatenate([init[..., None], x], axis=-1)
            return ufunc.accumulate(sequence, axis=-1)[..., -1]
        if et.is_float and opcode in (Opcode.MAXIMUM, Opcode.MINIMUM):
            fn = float_maximum if opcode is Opcode.MAXIMUM else float_minimum
            return fn(init, _tree_fold(x, fn)) if x.shape[-1] else init.copy()
    return None


def fold_arg_reduce(values: np.ndarray, indices: np.ndarray, init_value: np.ndarray,
                    init_index: np.ndarray, reducer: ArgReducer, *, axis: int = -1,
                    increasing: bool = False, positions: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The left fold of an argmax / argmin comparator (``neuron_sim.hlo.arg_reducers``) along
    ``axis``, computed with whole-array numpy operations and bit-identical to folding one element
    at a time from the init (``init_*`` shaped as the result): the first NaN in fold order wins
    (value and index); otherwise the value is the last element equal to the extreme (its bits:
    the sign of a zero) and the index the smallest index among the elements, the init included,
    equal to it. ``increasing`` says the indices increase along ``axis`` (an iota), so that
    the first equal element holds the smallest index; ``positions`` that they are exactly the
    positions ``0, 1, ...`` along ``axis`` (an iota that fits its type), so that the index is
    the position numpy's argmax / argmin returns, without reading ``indices``."""
    axis = axis % values.ndim
    size = values.shape[axis]
    if type(init_value) is not np.ndarray or init_value.dtype != values.dtype:
        init_value = np.asarray(init_value, values.dtype)
    if type(init_index) is not np.ndarray or init_index.dtype != indices.dtype:
        init_index = np.asarray(init_index, indices.dtype)
    if not size:
        shape = values.shape[:axis] + values.shape[axis + 1:]
        return (np.array(np.broadcast_to(init_value, shape)),
                np.array(np.broadcast_to(init_index, shape)))
    largest = reducer.direction == "max"
    if (increasing or positions) and (reducer.nan_first or values.dtype.kind in "iu"):
        return _fold_increasing(values, indices, init_value, init_index, largest, axis,
                                positions)
    with np.errstate(invalid="ignore"):
        extreme = (np.max if largest else np.min)(values, axis=axis)
        extreme = (np.maximum if largest else np.minimum)(extreme, init_value)
        equal = values == np.expand_dims(extreme, axis)
        init_equal = init_value == extreme

    if increasing:
        first_equal = np.argmax(equal, axis=axis)
        index = np.where(_take(equal, first_equal, axis), _take(indices, first_equal, axis),
                         np.iinfo(indices.dtype).max)
    else:
        index = np.where(equal, indices, np.iinfo(indices.dtype).max).min(axis=axis)
    index = np.where(init_equal, np.minimum(index, init_index), index)
    value = extreme.astype(values.dtype, copy=True)
    if reducer.nan_first and (extreme == 0).any():
        last = size - 1 - np.argmax(np.flip(equal, axis), axis=axis)
        value = np.where(_take(equal, last, axis) & (extreme == 0), _take(values, last, axis),
                         value)
    if reducer.nan_first:
        init_nan = np.isnan(init_value)
        row_nan = np.isnan(extreme) & ~init_nan
        if row_nan.any():
            first = np.argmax(np.isnan(values), axis=axis)
            value = np.where(row_nan, _take(values, first, axis), value)
            index = np.where(row_nan, _take(indices, first, axis), index)
        value = np.where(init_nan, init_value, value)
        index = np.where(init_nan, init_index, index)
    return value, index


def _take(array: np.ndarray, position: np.ndarray, axis: int) -> np.ndarray:
    """``array``'s element at ``position`` along ``axis`` (one per row), as a new array."""
    if array.flags.c_contiguous:
        # One index into the flat array: the element at ``position`` of row (o, i) of the
        # (outer, size, inner) view is at flat offset (o * size + position) * inner + i.
        shape = array.shape
        if len(shape) > 1 and axis == len(shape) - 1 and array.size == shape[axis]:
            return array.reshape(-1)[position]  # one row: the offset is the position
        inner = math.prod(shape[axis + 1:])
        flat = position * inner if inner != 1 else position
        return array.reshape(-1)[flat + _row_offsets(shape, axis)]
    return np.take_along_axis(array, np.expand_dims(position, axis), axis).squeeze(axis)


@functools.lru_cache(maxsize=64)
def _row_offsets(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """The flat offset of each row's first element along ``axis`` of a C-contiguous array of
    ``shape``, shaped as the rows (read-only), kept: the same rows are taken from on every
    execute."""
    inner = math.prod(shape[axis + 1:])
    outer = np.arange(math.prod(shape[:axis]), dtype=np.intp) * (shape[axis] * inner)
    offsets = (outer[:, None] + np.arange(inner, dtype=np.intp)).reshape(
        shape[:axis] + shape[axis + 1:])
    offsets.flags.writeable = False
    return offsets


def _fold_increasing(values: np.ndarray, indices: np.ndarray, init_value: np.ndarray,
                     init_index: np.ndarray, largest: bool, axis: int, positions: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``fold_arg_reduce`` for increasing indices and a NaN-first (or integer) comparator in
    one pass: numpy's argmax / argmin return the first extreme and the first NaN, which is the
    fold's winner among the elements (its smallest index); then the init, which comes first in
    fold order, wins a NaN of its own, a strictly better value, or a tie's smaller index; and
    where the extreme is a zero the value takes the bits of the last equal element (the fold
    keeps the later of two equal values)."""
    operand = _argmax_operand(values)
    position = operand.argmax(axis=axis) if largest else operand.argmin(axis=axis)
    value = _take(values, position, axis)
    index = position.astype(indices.dtype) if positions else _take(indices, position, axis)
    if init_value.size == 1 and init_index.size == 1 and init_value.ndim <= value.ndim:
        return _init_once(values, value, index, init_value, init_index, largest, axis)
    with np.errstate(invalid="ignore"):
        row_nan = np.isnan(value)
        better = (init_value > value) if largest else (init_value < value)
        init_wins = np.isnan(init_value) | (~row_nan & better)
        tie = ~row_nan & (init_value == value)
    if init_wins.any() or tie.any():
        index = np.where(init_wins, init_index,
                         np.where(tie, np.minimum(index, init_index), index))
    zero = ~init_wins & ~row_nan & (value == 0)
    if zero.any():
        value = np.where(zero, _last_zero(values, axis), value)
    if init_wins.any():
        value = np.where(init_wins, init_value, value)
    shape = np.broadcast_shapes(value.shape, np.shape(init_value))
    return (np.broadcast_to(value, shape).astype(values.dtype, copy=True),
            np.broadcast_to(index, shape).astype(indices.dtype, copy=True))


class _Alias:
    """Exposes an array's memory through ``__array_interface__`` marked writable."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, array: np.ndarray) -> None:
        interface = dict(array.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface
        self.base = array  # keeps the memory alive as long as the alias


def _argmax_operand(array: np.ndarray) -> np.ndarray:
    """``array`` as numpy's argmax / argmin read it without a copy. They copy any operand that
    is not writable (they ask for a C-contiguous, aligned, *writable* array), and the
    interpreter's values are read-only views (of the caller's inputs, of constants): that copy
    cost twice the search itself. The search only reads, so it is handed a writable alias of
    the same memory, which nothing else sees and nothing writes through."""
    flags = array.flags
    if flags.writeable or not flags.c_contiguous or array.dtype.hasobject \
            or not array.dtype.isnative:
        return array
    owner = array.base
    if type(owner) is np.ndarray and owner.size == array.size and owner.dtype == array.dtype:
        owner_flags = owner.flags
        if owner_flags.writeable and owner_flags.c_contiguous:
            # A read-only view of all of a writable array (an input held as a value): the
            # array itself, reshaped, is the alias.
            return owner.reshape(array.shape)
    alias = np.asarray(_Alias(array))
    return alias if alias.dtype == array.dtype else alias.view(array.dtype)  # ml_dtypes: |V2


def _init_once(values: np.ndarray, value: np.ndarray, index: np.ndarray, init_value: np.ndarray,
               init_index: np.ndarray, largest: bool, axis: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """The end of ``_fold_increasing`` for one init pair (JAX's: -inf / +inf or the type's
    lowest / highest, and 0; each an array of one element), given the elements' winner
    ``value`` / ``index`` per row (new arrays, modified here): the same rules, each checked
    with one comparison on the result instead of whole-row masks, so that an init that never
    wins costs nothing."""
    kind = values.dtype.kind
    native = kind in "fiu"  # numpy's own types: compared as exact Python numbers
    start = init_value.item() if native else init_value.reshape(())
    if start != start:  # a NaN init is kept whatever follows
        return (np.full(value.shape, init_value.reshape(())),
                np.full(index.shape, init_index.reshape(())))
    if native and value.size:
        # The common case in one reduction: every winner that is not a NaN is on the far side
        # of the init and of zero (argmax of data whose row maxima are positive, argmin of
        # negative minima): then neither rule below changes a row.
        nearest = value.item() if value.size == 1 else \
            (np.fmin if largest else np.fmax).reduce(value, axis=None).item()
        if (nearest > start if largest else nearest < start) and \
                (kind != "f" or (nearest > 0 if largest else nearest < 0)):
            return value, index
    init_value, init_index = init_value.reshape(()), init_index.reshape(())
    if kind not in "iu":  # signed zeros
        zero = value == 0
        if np.count_nonzero(zero):
            value[zero] = _last_zero(values, axis)[zero]
    # Rows the init wins or ties (a NaN winner compares false: it stays).
    reached = (value <= init_value) if largest else (value >= init_value)
    if np.count_nonzero(reached):
        better = (value < init_value) if largest else (value > init_value)
        tie = reached & ~better
        np.copyto(index, np.minimum(index, init_index), where=tie)
        np.copyto(index, init_index, where=better)
        np.copyto(value, init_value, where=better)
    return value, index


def _last_zero(values: np.ndarray, axis: int) -> np.ndarray:
    """Per row, the last zero along ``axis`` (its sign; rows without a zero: any element)."""
    last = values.shape[axis] - 1 - np.argmax(np.flip(values == 0, axis), axis=axis)
    return _take(values, last, axis)


def _tree_fold(x: np.ndarray, fn: Callable) -> np.ndarray:
    """Reduce the last axis pairwise (only for ops where order cannot change the result)."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        paired = fn(x[..., :half], x[..., half:2 * half])
        x = np.concatenate([paired, x[..., 2 * half:]], axis=-1) if x.shape[-1] % 2 else paired
    return x[..., 0]


# ---------------------------------------------------------------------------------------------
# reduce

_ARG_REDUCERS: ComputationCache[ArgReducer | None] = ComputationCache(recognise_arg_reducer,
                                                                      attributes=True)


def _arg_reduce(reducer: ArgReducer, dim: int, iota: bool, values: np.ndarray,
                indices: np.ndarray, init_value: np.ndarray, init_index: np.ndarray
                ) -> list[np.ndarray]:
    """A reduce whose reducer is an argmax / argmin comparator, over one dimension ``dim``, on
    batched operands: ``fold_arg_reduce`` along ``1 + dim`` (``iota``: the indices are the
    positions along ``dim``, ``increases_along``). The rows of the four operands are brought
    to one count (a replicated operand has one row); a batched init holds one value per row,
    shaped ``(rows, 1, ...)`` to broadcast against the result (a single value broadcasts as
    it is)."""
    rows = values.shape[0]
    if indices.shape[0] != rows or init_value.shape[0] != rows or init_index.shape[0] != rows:
        rows = max(rows, indices.shape[0], init_value.shape[0], init_index.shape[0])
        values = values if values.shape[0] == rows else \
            np.broadcast_to(values, (rows, *values.shape[1:]))
        indices = indices if indices.shape[0] == rows else \
            np.broadcast_to(indices, (rows, *indices.shape[1:]))
    rank = values.ndim - 1
    if init_value.size != 1:
        init_value = init_value.reshape(init_value.shape[0], *([1] * (rank - 1)))
    if init_index.size != 1:
        init_index = init_index.reshape(init_index.shape[0], *([1] * (rank - 1)))
    return list(fold_arg_reduce(values, indices, init_value, init_index, reducer, axis=1 + dim,
                                increasing=iota, positions=iota))


def _arg_reduce_of(inst: HloInstruction) -> tuple[ArgReducer, int] | None:
    """The recognised comparator and the one reduced dimension of an argmax / argmin reduce
    (four operands: values, indices and their inits), else None."""
    if len(inst.operands) != 4:
        return None
    to_apply = inst.attrs.get("to_apply")
    reducer = _ARG_REDUCERS.get(to_apply) if isinstance(to_apply, HloComputation) else None
    dims = inst.attrs.get("dimensions", ())
    return (reducer, dims[0]) if reducer is not None and len(dims) == 1 else None


def bound_reduce(inst: HloInstruction) -> BoundOp | None:
    """An argmax / argmin reduce bound once for an execution plan: the comparator recognised,
    the reduced dimension and whether the indices are its positions (``increases_along``)
    decided when the plan is built instead of on every execute. It reads the reduce's
    ``to_apply`` and ``dimensions``, the comparator's structure and the attributes the
    recogniser reads (each compare's direction and type), and the attributes of the index
    operand ``increases_along`` reads. Other reduces: None (the registered function)."""
    found = _arg_reduce_of(inst)
    if found is None:
        return None
    reducer, dim = found
    to_apply = inst.attrs["to_apply"]
    attributes = [(inst, "to_apply", to_apply), (inst, "dimensions", inst.attrs["dimensions"])]
    attributes += [(i, name, i.attrs.get(name)) for i in to_apply.instructions
                   if i.opcode is Opcode.COMPARE for name in ("direction", "type")]
    index = inst.operands[1]
    attributes += [(i, name, i.attrs.get(name))
                   for i in (index, *index.operands[:1]) for name in ("dimensions",
                                                                       "iota_dimension")]
    return BoundOp(functools.partial(_arg_reduce, reducer, dim, increases_along(index, dim)),
                   attributes, [to_apply])


@implements(Opcode.REDUCE, bind=bound_reduce)
def reduce(ctx, *arrays):
    inst = ctx.inst
    found = _arg_reduce_of(inst)
    if found is not None:
        reducer, dim = found
        return _arg_reduce(reducer, dim, increases_along(inst.operands[1], dim), *arrays)
    count = len(arrays) // 2
    rows = max(a.shape[0] for a in arrays)
    xs = [a if a.shape[0] == rows else np.broadcast_to(a, (rows, *a.shape[1:]))
          for a in arrays[:count]]
    inits = arrays[count:]
    dims = sorted(inst.dimensions)
    rank = xs[0].ndim - 1
    kept = [d for d in range(rank) if d not in dims]
    kept_sizes = [xs[0].shape[1 + d] for d in kept]
    reduced = int(np.prod([xs[0].shape[1 + d] for d in dims], dtype=np.int64))
    moved = [x.transpose(0, *(1 + d for d in kept), *(1 + d for d in dims))
             .reshape(rows, *kept_sizes, reduced) for x in xs]
    init_values = [np.broadcast_to(i.reshape(i.shape[0], *([1] * len(kept))),
                                   (rows, *kept_sizes)) for i in inits]
    results = fold_last_axis(moved, init_values, ctx.attr("to_apply"), ctx)
    # A reducer returning a 1-tuple makes the result a 1-tuple (the checker's reduce rule).
    return results if count > 1 or ctx.inst.shape.is_tuple else results[0]


# ---------------------------------------------------------------------------------------------
# Windows

def _window_geometry(window, in_dims: Sequence[int], *, dilations: bool = True):
    """Per dim: (output size, source index (O, K), valid mask (O, K)) of a window spec."""
    geometry = []
    for size, spec in zip(in_dims, window.dims):
        base = spec.lhs_dilation if dilations else 1
        dilation = spec.rhs_dilation if dilations else 1
        dilated = (size - 1) * base + 1 if size else 0
        padded = spec.pad_low + dilated + spec.pad_high
        extent = (spec.size - 1) * dilation + 1
        out = (padded - extent) // spec.stride + 1 if padded >= extent else 0
        o = np.arange(out)[:, None]
        k = np.arange(spec.size)[None, :]
        q = o * spec.stride + k * dilation - spec.pad_low
        valid = (q >= 0) & (q < dilated) & (q % base == 0)
        source = np.where(valid, q // base, 0)
        geometry.append((out, source, valid))
    return geometry


def _gather_windows(geometry, rank: int):
    """Fancy indices (one per dim) and validity, shaped (1, *O, *K), from window geometry."""
    indices, valid = [], None
    for d, (_, source, ok) in enumerate(geometry):
        shape = [1] * (1 + 2 * rank)
        shape[1 + d] = source.shape[0]
        shape[1 + rank + d] = source.shape[1]
        indices.append(source.reshape(shape))
        mask = ok.reshape(shape)
        valid = mask if valid is None else valid & mask
    if valid is None:
        valid = np.ones((1,), bool)
    return indices, valid


@implements(Opcode.REDUCE_WINDOW)
def reduce_window(ctx, *arrays):
    count = len(arrays) // 2
    rows = max(a.shape[0] for a in arrays)
    xs = [np.broadcast_to(a, (rows, *a.shape[1:])) for a in arrays[:count]]
    inits = arrays[count:]
    rank = xs[0].ndim - 1
    window = ctx.attr("window")
    if window is None or len(window.dims) != rank:
        raise InterpreterError("reduce-window needs a window with one entry per dimension")
    geometry = _window_geometry(window, xs[0].shape[1:])
    out_dims = [g[0] for g in geometry]
    indices, valid = _gather_windows(geometry, rank)
    row_index = np.arange(rows).reshape(rows, *([1] * (2 * rank)))
    window_size = int(np.prod([spec.size for spec in window.dims], dtype=np.int64))
    gathered = [x[(row_index, *indices)].reshape(rows, *out_dims, window_size) for x in xs]
    valid = np.broadcast_to(valid, (1, *out_dims, *[s.size for s in window.dims])) \
        .reshape(1, *out_dims, window_size)
    init_values = [np.broadcast_to(i.reshape(i.shape[0], *([1] * rank)), (rows, *out_dims))
                   for i in inits]
    computation = ctx.attr("to_apply")
    opcode = binary_reducer(computation)
    identity = _identity(opcode, xs[0].dtype) if opcode is not None and count == 1 else None
    if identity is not None:
        filled = np.where(valid, gathered[0], np.array(identity).astype(xs[0].dtype))
        folded = fold_last_axis([filled], init_values, computation, ctx)
        return folded if ctx.inst.shape.is_tuple else folded[0]
    combine = ctx.elementwise(computation)
    accs = [np.array(i, copy=True) for i in init_values]
    for k in range(window_size):
        result = combine(*accs, *(g[..., k] for g in gathered))
        result = list(result) if isinstance(result, tuple) else [result]
        accs = [np.where(valid[..., k], r, a) for r, a in zip(result, accs)]
    return accs if count > 1 or ctx.inst.shape.is_tuple else accs[0]


@implements(Opcode.SELECT_AND_SCATTER)
def select_and_scatter(ctx, operand, source, init):
    """For each window of ``operand`` pick one element with ``select`` (keep the current pick
    while select(current, candidate) holds), then combine the window's ``source`` value into
    that position with ``scatter``; windows are visited in row-major order of ``source``."""
    rows = max(operand.shape[0], source.shape[0], init.shape[0])
    operand = np.broadcast_to(operand, (rows, *operand.shape[1:]))
    source = np.broadcast_to(source, (rows, *source.shape[1:]))
    rank = operand.ndim - 1
    dims = operand.shape[1:]
    window = ctx.attr("window")
    geometry = _window_geometry(window, dims, dilations=False)
    out_dims = [g[0] for g in geometry]
    if list(out_dims) != list(source.shape[1:]):
        raise InterpreterError(f"select-and-scatter source has shape {list(source.shape[1:])}, "
                               f"the windows give {out_dims}")
    indices, valid = _gather_windows(geometry, rank)
    window_size = int(np.prod([spec.size for spec in window.dims], dtype=np.int64))
    row_index = np.arange(rows).reshape(rows, *([1] * (2 * rank)))
    values = operand[(row_index, *indices)].reshape(rows, *out_dims, window_size)
    flat_index = (np.ravel_multi_index(tuple(np.broadcast_arrays(*indices)), dims) if rank
                  else np.zeros((1,), np.int64))
    flat_index = np.broadcast_to(flat_index, (1, *out_dims, *[s.size for s in window.dims])) \
        .reshape(1, *out_dims, window_size)
    valid = np.broadcast_to(valid, (1, *out_dims, *[s.size for s in window.dims])) \
        .reshape(1, *out_dims, window_size)
    select = ctx.elementwise(ctx.attr("select"))
    have = np.zeros((rows, *out_dims), bool)
    chosen_value = np.zeros((rows, *out_dims), operand.dtype)
    chosen_index = np.zeros((rows, *out_dims), np.int64)
    for k in range(window_size):
        candidate = values[..., k]
        ok = np.broadcast_to(valid[..., k], have.shape)
        keep = np.asarray(select(chosen_value, candidate), bool)
        take = ok & (~have | ~keep)
        chosen_value = np.where(take, candidate, chosen_value)
        chosen_index = np.where(take, flat_index[..., k], chosen_index)
        have = have | ok
    size = int(np.prod(dims, dtype=np.int64))
    out = np.array(np.broadcast_to(init.reshape(init.shape[0], *([1] * rank)), (rows, *dims)),
                   copy=True).reshape(-1)
    targets = (chosen_index + (np.arange(rows) * size).reshape(rows, *([1] * rank)))[have]
    apply_in_order([out], targets, [source[have]], ctx.elementwise(ctx.attr("scatter")))
    return out.reshape(rows, *dims)


# ---------------------------------------------------------------------------------------------
# sort

@implements(Opcode.SORT)
def sort(ctx, *arrays):
    (dim,) = ctx.inst.dimensions
    rows = max(a.shape[0] for a in arrays)
    arrays = [np.broadcast_to(a, (rows, *a.shape[1:])) for a in arrays]
    shape = arrays[0].shape
    n = shape[1 + dim]
    keys = [np.moveaxis(a, 1 + dim, -1).reshape(-1, n) for a in arrays]
    comparator = ctx.attr("to_apply") or ctx.attr("comparator")
    permutation = sort_permutation(keys, comparator, ctx)
    results = []
    for a, k in zip(arrays, keys):
        moved_shape = np.moveaxis(a, 1 + dim, -1).shape
        sorted_keys = np.take_along_axis(k, permutation, axis=1).reshape(moved_shape)
        results.append(np.moveaxis(sorted_keys, -1, 1 + dim))
    return results if len(arrays) > 1 else results[0]


def sort_permutation(keys: Sequence[np.ndarray], comparator: HloComputation, ctx) -> np.ndarray:
    """For (M, n) key arrays, the (M, n) stable permutation sorting each row by ``comparator``.

    ``comparator`` takes (lhs_0, rhs_0, lhs_1, rhs_1, ...) and says whether lhs sorts strictly
    before rhs.
    """
    rows, n = keys[0].shape
    fast = _simple_sort_key(keys, comparator)
    if fast is not None:
        return np.argsort(fast, axis=1, kind="stable")
    less_fn = ctx.elementwise(comparator)

    def less(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> np.ndarray:
        args = []
        for x, y in zip(a, b):
            args.extend((x, y))
        return np.asarray(less_fn(*args), bool)

    return merge_sort_permutation(keys, less)


def _simple_sort_key(keys: Sequence[np.ndarray], comparator: HloComputation) -> np.ndarray | None:
    """An integer key whose ascending order is the comparator's, for the common comparators
    (one compare LT/GT of one operand's lhs and rhs, total order or integers); else None."""
    root = comparator.root
    if root.opcode is not Opcode.COMPARE or len(comparator.instructions) != len(
            comparator.parameters) + 1:
        return None
    a, b = root.operands
    if a.parameter_number is None or b.parameter_number is None:
        return None
    if a.parameter_number // 2 != b.parameter_number // 2 or \
            a.parameter_number == b.parameter_number:
        return None
    direction = str(root.attrs.get("direction"))
    if direction not in ("LT", "GT"):
        return None
    descending = (direction == "GT") == (a.parameter_number % 2 == 0)
    key = keys[a.parameter_number // 2]
    if is_float(key.dtype):
        if str(root.attrs.get("type", "")) != "TOTALORDER":
            return None
        key = total_order_key(key)
    elif is_pred(key.dtype):
        key = key.astype(np.int8)
    elif not element_type_of(key.dtype).is_integral or element_type_of(key.dtype).bits < 8:
        return None
    return np.invert(key) if descending else key


def merge_sort_permutation(keys: Sequence[np.ndarray],
                           less: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]],
                                          np.ndarray]) -> np.ndarray:
    """Stable bottom-up merge sort of every row at once, using only ``less`` on arrays.

    Each merge places an element of a left run after the right-run elements strictly less than
    it, and an element of a right run after the left-run elements not greater than it; both
    counts are found by a binary search evaluated for all elements in parallel, so a pass costs
    about log2(width) calls of ``less``.
    """
    rows, n = keys[0].shape
    permutation = np.broadcast_to(np.arange(n), (rows, n)).copy()
    position = np.arange(n)
    width = 1
    while width < n:
        values = [np.take_along_axis(k, permutation, axis=1) for k in keys]
        run = position // width
        is_left = run % 2 == 0
        left_start = (run // 2) * 2 * width
        right_start = left_start + width
        left_length = np.minimum(width, n - left_start)
        right_length = np.clip(n - right_start, 0, width)
        own_start = np.where(is_left, left_start, right_start)
        partner_start = np.where(is_left, right_start, left_start)
        partner_length = np.where(is_left, right_length, left_length)
        low = np.zeros(n, np.int64)
        high = partner_length.astype(np.int64)
        low = np.broadcast_to(low, (rows, n)).copy()
        high = np.broadcast_to(high, (rows, n)).copy()
        while True:
            active = low < high
            if not active.any():
                break
            middle = (low + high) // 2
            partner = np.clip(partner_start + middle, 0, n - 1)
            other = [np.take_along_axis(v, partner, axis=1) for v in values]
            first = [np.where(is_left, o, v) for o, v in zip(other, values)]
            second = [np.where(is_left, v, o) for o, v in zip(other, values)]
            before = less(first, second)
            goes_after = np.where(is_left, before, ~before)
            low = np.where(active & goes_after, middle + 1, low)
            high = np.where(active & ~goes_after, middle, high)
        # Final place: the pair's start + own offset in its run + partners placed before it.
        new_position = left_start + (position - own_start) + low
        merged = np.empty_like(permutation)
        np.put_along_axis(merged, new_position, permutation, axis=1)
        permutation = merged
        width *= 2
    return permutation


@implements(Opcode.TOPK)
def topk(ctx, x):
    """The k largest (or smallest) elements along the last dimension and their indices."""
    return list(top_k(x, int(ctx.attr("k")), bool(ctx.attr("largest", True))))


def top_k(x: np.ndarray, k: int, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (or smallest) elements of ``x`` along its last axis, sorted, and their
    s32 indices; equal elements in index order, floats in total order (-NaN < -inf < -0 < +0 <
    +inf < +NaN, so NaN above +inf). This is XLA:CPU's TopK runtime order too
    (``__xla_cpu_runtime_TopKF32``: descending total order, ties by the smaller index)."""
    if is_float(x.dtype):
        key = total_order_key(x)
    elif is_pred(x.dtype):
        key = x.astype(np.int8)
    else:
        key = x
    order = np.argsort(np.invert(key) if largest and key.dtype.kind in "iu" else key,
                       axis=-1, kind="stable")
    order = order[..., :k]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)
