"""argmax / argmin reduces on symbols: the closed form of the recognised comparator's fold.

A variadic reduce over ``(values, indices)`` whose ``to_apply`` is JAX's argmax / argmin
comparator (``neuron_sim.hlo.arg_reducers``) folds, left to right from its init, a step that
keeps the accumulator when it is strictly better (or a NaN, in the float form) and else takes
the element, the index breaking ties to the lower one. Folding that step term by term gives
terms nested n deep that z3 could not decide against TransformVariadicReduce's rewrite within
its budget. When the fold's shape is the one the rewrite itself requires — one reduced
dimension of size >= 1, the index input exactly the positions ``0, 1, ...`` along it (index
order is fold order), the neutral inits (value -inf / the type's minimum for argmax, +inf / the
maximum for argmin, index 0) — the fold has a closed form, written here as terms:

* with ``M`` the reduction of the values (and the init) by maximum / minimum — XLA's, where a
  NaN wins — and ``hit_k = (x_k == M)`` (IEEE: -0 equals +0),
* the index is the first k with ``x_k`` NaN if there is one, else the first k with ``hit_k``;
* the value is the first NaN if there is one, else the last ``x_k`` with ``hit_k`` (with zeros
  of both signs, the last zero's sign: the step takes the element whenever it is not strictly
  worse).

Why it is the fold (by induction over the elements, the accumulator ``(v, i)``): a NaN element
meets a non-NaN accumulator, which neither wins strictly nor ties, so it is taken, and from then
on the NaN accumulator is kept; without NaNs, ``v`` is always IEEE-equal to the running extreme
and ``i`` the smallest index reaching it — an element equal to it ties and keeps the smaller
index (every earlier index, and the init's 0, is smaller than k for k >= 1; at k = 0 the init's
index is 0 too), and the neutral init never beats an element. The test
``tests/proofs/test_arg_reduce_symbolic.py`` has z3 prove the closed form equal to the literal
fold of the comparator for every input (f32 and s32, n up to 5, both directions).

The terms use only compare, select and the maximum / minimum multiset, which z3 models
exactly; the rewritten chain (reduce-max, compare, select over the iota, reduce-min) shares
``M``'s handle, so z3 is left a small question per output element.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import ElementType, HloInstruction, Opcode
from neuron_sim.hlo.arg_reducers import recognise_arg_reducer
from neuron_sim.hlo.shapes import TupleShape
from neuron_sim.proofs.symbolic.terms import TermTable

__all__ = ["arg_reduce_terms"]


def _neutral(et: ElementType, direction: str) -> float | int:
    """The value init that never beats an element: argmax's lowest, argmin's highest."""
    if et.is_float:
        return -np.inf if direction == "max" else np.inf
    info = np.iinfo(et.numpy_dtype)
    return int(info.min) if direction == "max" else int(info.max)


def _scalar(value: object) -> np.ndarray | None:
    """A concrete init's single number (the same on every row), else None."""
    array = np.asarray(value)
    flat = array.reshape(-1)
    if flat.size == 0 or not (flat == flat[0]).all():
        return None
    return flat[:1]


def _positions_along(index: np.ndarray, dims: tuple[int, ...], dim: int) -> bool:
    """Whether the concrete ``index`` array (``dims``, or ``[rows, *dims]``) holds the positions
    ``0, 1, ...`` along ``dim`` at every other position."""
    rows = index.reshape(-1, *dims) if index.ndim > len(dims) else index[None]
    shape = [1] * (len(dims) + 1)
    shape[dim + 1] = dims[dim]
    expected = np.arange(dims[dim], dtype=np.int64).reshape(shape)
    return bool((rows.astype(np.int64) == expected).all())


class _Builder:
    """Compare / select / multiset terms of one element type in ``table``."""

    def __init__(self, table: TermTable) -> None:
        self.table = table

    def compare(self, et: ElementType, direction: str, a: np.ndarray, b: np.ndarray
                ) -> np.ndarray:
        op = self.table.operator(("apply", Opcode.COMPARE, ElementType.PRED, (et, et),
                                  (("direction", repr(direction)),)), commutative=False)
        return self.table.intern(op, *np.broadcast_arrays(a, b))

    def select(self, et: ElementType, test: np.ndarray, on_true: np.ndarray,
               on_false: np.ndarray) -> np.ndarray:
        op = self.table.operator(("apply", Opcode.SELECT, et, (ElementType.PRED, et, et), ()),
                                 commutative=False)
        pair = self.table.operator(("pair",))
        test, on_true, on_false = np.broadcast_arrays(test, on_true, on_false)
        return self.table.intern(op, test, self.table.intern(pair, on_true, on_false))


def arg_reduce_terms(table: TermTable, inst: HloInstruction, values: np.ndarray,
                     index: np.ndarray | None, inits: tuple[object, object]
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """The (value, index) results of the variadic reduce ``inst`` as handles
    ``[rows, *kept]``, from the batched value handles ``values`` (``[rows, *dims]``), the
    concrete ``index`` input (None if it depends on the inputs) and the concrete ``inits``
    (None where input-dependent); None when the fold is not one the closed form covers (the
    caller then compares the reduce only as a whole)."""
    if len(inst.operands) != 4 or not isinstance(inst.shape, TupleShape) or index is None \
            or any(i is None for i in inits):
        return None
    reducer = recognise_arg_reducer(inst.get("to_apply"))
    reduced = sorted(inst.dimensions)
    if reducer is None or len(reduced) != 1:
        return None
    dims = tuple(inst.operand(0).shape.dims)
    dim = reduced[0]
    n = dims[dim]
    value_type = inst.operand(0).shape.element_type
    index_type = inst.operand(1).shape.element_type
    init_value, init_index = (_scalar(i) for i in inits)
    if n < 1 or init_value is None or init_index is None or int(init_index[0]) != 0 or \
            n - 1 > np.iinfo(index_type.numpy_dtype).max or \
            not _positions_along(np.asarray(index), dims, dim):
        return None
    neutral = _neutral(value_type, reducer.direction)
    if init_value.astype(np.float64)[0] != neutral:
        return None
    build = _Builder(table)
    rows = values.shape[0]
    kept = [d for d in range(len(dims)) if d != dim]
    x = values.transpose(0, *(1 + d for d in kept), 1 + dim)        # [rows, *kept, n]
    init_handle = table.constants(init_value.astype(value_type.numpy_dtype))
    extreme_op = Opcode.MAXIMUM if reducer.direction == "max" else Opcode.MINIMUM
    leaves = np.concatenate([np.broadcast_to(init_handle, (*x.shape[:-1], 1)), x], axis=-1)
    extreme = table.multiset(table.multiset_operator((extreme_op, value_type)), leaves)
    hit = build.compare(value_type, "EQ", x, extreme[..., None])
    positions = table.constants(np.arange(n, dtype=index_type.numpy_dtype))
    zero = table.constants(np.zeros(1, index_type.numpy_dtype))[0]
    best_index = np.broadcast_to(np.asarray(zero), x.shape[:-1])
    best_value = np.broadcast_to(init_handle[0], x.shape[:-1])
    for k in reversed(range(n)):        # the first hit, outermost
        best_index = build.select(index_type, hit[..., k], positions[k], best_index)
    for k in range(n):                  # the last hit, outermost
        best_value = build.select(value_type, hit[..., k], x[..., k], best_value)
    if reducer.nan_first:
        for k in reversed(range(n)):    # the first NaN, outermost
            nan = build.compare(value_type, "NE", x[..., k], x[..., k])
            best_index = build.select(index_type, nan, positions[k], best_index)
            best_value = build.select(value_type, nan, x[..., k], best_value)
    shape = (rows, *(dims[d] for d in kept))
    return (np.broadcast_to(best_value, shape).copy(), np.broadcast_to(best_index, shape).copy())
