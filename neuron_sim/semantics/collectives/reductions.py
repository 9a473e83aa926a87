"""The reductions: all-reduce, variadic all-reduce and reduce-scatter, as pure vectorized numpy.

Operands are stacked per device (``group_tables`` says how); every function here is pure (inputs
are never modified, outputs never alias inputs) and vectorized over groups with numpy fancy
indexing: the only Python loops run over group positions (the fold), over group sizes
(all-reduce accepts groups of different sizes) and, for large reductions, over cache-sized chunks
of the elements.

Conventions (docs/semantics.md §3 is the authority):

- **Reduction order**: a left fold over group positions 0..n-1,
  ``acc = x[g[0]]; acc = combine(acc, x[g[i]])`` for ``i = 1..n-1``. It lives in one function,
  :func:`fold_group`, shared by all-reduce and reduce-scatter (and the MPI backend's chunked
  folds), so that all-reduce followed by a slice of block ``position`` equals reduce-scatter
  bit for bit.
- A ``combine`` with a ``fold_positions(values)`` method (the symbolic evaluator's reducer,
  which folds a whole group into one canonical term) is handed all n positions at once instead
  of being folded pairwise: one gathered array ``(groups, n, *elements)``, the group position
  on axis 1, from which it returns ``(groups, *elements)``.
- ``combine`` must be elementwise: it receives two arrays of equal shape and dtype and returns
  one array of that shape. The shape it sees is an implementation detail (a group axis is
  prepended, and large operands are folded in flattened chunks), so it must not depend on it.
  Floating-point warnings (``inf + -inf``...) come from ``combine`` and are left to the
  caller's ``np.errstate``. The reductions return the dtype ``combine`` returns; HLO's
  ``to_apply`` keeps the operand type, so a combine that widens (ml_dtypes' int4 ``maximum``
  gives int8) must round back itself: the fold rounds at every step, not once at the end.
- Devices in no group (possible only when the caller passes a subset of the groups) get an
  all-zero output row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from neuron_sim.semantics.collectives.group_tables import (block_size, check_dim, check_stacked,
                                                           group_tables, fresh_output_rows,
                                                           uniform_table)

__all__ = ["Combine", "CombineMany", "all_reduce", "all_reduce_variadic", "fold_group",
           "reduce_group", "reduce_scatter"]

Combine = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A vectorized elementwise reduction, e.g. ``np.add``: (accumulator, next value) -> result."""

CombineMany = Callable[[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], Sequence[np.ndarray]]
"""A variadic elementwise reduction: (accumulators, next values) -> new accumulators."""

# Large reductions are folded chunk by chunk so that the accumulator and the gathered values of
# one step stay in cache; a chunk holds about this many elements summed over all groups.
_CHUNK_ELEMENTS = 1 << 16
# ...but never fewer than this many elements per group, to bound the Python overhead.
_MIN_CHUNK_PER_GROUP = 256


# --------------------------------------------------------------------------------------------
# The one reduction order.


def fold_group(values: np.ndarray | Iterable[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """Reduce the values of one group's positions 0..n-1 with a left fold.

    ``acc = values[0]``, then ``acc = combine(acc, values[i])`` for ``i = 1..n-1``. ``values``
    is an array whose axis 0 is the group position, or any iterable of per-position values (the
    collectives pass a lazy iterable so that only one position is gathered at a time). For a
    variadic reduction the values are tuples of arrays and ``combine`` maps (accumulators,
    values) to a tuple of new accumulators. The result never aliases ``values``.

    This is the only implementation of the reduction order: all-reduce, variadic all-reduce and
    reduce-scatter all fold through it.
    """
    items: Iterator[Any] = iter(values)
    try:
        acc = next(items)
    except StopIteration:
        raise ValueError("cannot reduce a group with no positions") from None
    owned = False  # True once acc is an array this function created and may overwrite.
    for item in items:
        if owned and _can_update_in_place(combine, acc, item):
            combine(acc, item, out=acc)  # type: ignore[call-arg]
        else:
            acc = combine(acc, item)
            owned = True
    if isinstance(acc, (tuple, list)):  # Variadic: keep each operand's own dtype and shape.
        return tuple(np.asarray(a) if owned else np.array(a, copy=True) for a in acc)
    return np.asarray(acc) if owned else np.array(acc, copy=True)


def _can_update_in_place(combine: Callable[..., Any], acc: Any, item: Any) -> bool:
    """Whether ``combine(acc, item, out=acc)`` computes exactly ``combine(acc, item)``.

    True for a binary numpy ufunc whose operands already have one shape and one dtype: the ufunc
    then selects the same inner loop either way, so the bits are the same and a temporary is
    saved.
    """
    return (
        isinstance(combine, np.ufunc)
        and combine.nin == 2
        and combine.nout == 1
        and isinstance(acc, np.ndarray)
        and isinstance(item, np.ndarray)
        and acc.dtype == item.dtype
        and acc.shape == item.shape
        and acc.flags.writeable
    )


def _accumulates_in_place(combine: Callable[..., Any], dtype: np.dtype) -> bool:
    """Whether ``combine`` is a binary ufunc whose ``accumulate`` folds values of ``dtype``
    exactly as :func:`fold_group` does: ``accumulate`` is the left fold by definition
    (``r[i] = combine(r[i - 1], a[i])``), so only the result type must stay ``dtype``."""
    if not (isinstance(combine, np.ufunc) and combine.nin == 2 and combine.nout == 1):
        return False
    try:
        sample = np.zeros(1, dtype)
        return combine(sample, sample).dtype == dtype
    except TypeError:
        return False


# Binary ufuncs that are associative and commutative on integers (wrapping) and predicates:
# there every order of the fold gives the same bits.
_ORDER_FREE_ON_INTEGERS = frozenset((np.add, np.multiply, np.maximum, np.minimum,
                                     np.bitwise_and, np.bitwise_or, np.bitwise_xor,
                                     np.logical_and, np.logical_or, np.logical_xor))


def _order_free(combine: Callable[..., Any], dtype: np.dtype) -> bool:
    """Whether folding values of ``dtype`` with ``combine`` gives the same bits in every
    order, so one ``combine.reduce`` computes the left fold: wrapping integer add and
    multiply are arithmetic modulo 2**bits (associative and commutative), and so are min,
    max and the bitwise and logical ops, on integers and predicates. Never for floats."""
    return (isinstance(combine, np.ufunc) and dtype.kind in "iub"
            and combine in _ORDER_FREE_ON_INTEGERS
            and _accumulates_in_place(combine, dtype))


def _fold_by_accumulate(x: np.ndarray, table: np.ndarray, combine: np.ufunc,
                        window: tuple[slice, ...]) -> np.ndarray:
    """The left fold of the positions of ``x[:, *window]`` for every group, a block of
    positions per ``combine.accumulate`` call (carrying the fold across blocks) instead of one
    Python step per position: an all-reduce over 4096 devices of a few elements is 4096 steps
    otherwise."""
    n = table.shape[1]
    first = x[(table[:, 0], *window)]
    block = max(1, _CHUNK_ELEMENTS // max(1, first.size))
    acc = np.array(first, copy=True)
    for start in range(1, n, block):
        stop = min(n, start + block)
        items = x[(table[:, start:stop], *window)]          # (groups, positions, ...)
        sequence = np.concatenate([acc[:, None], items], axis=1)
        acc = combine.accumulate(sequence, axis=1, dtype=x.dtype)[:, -1]
    return acc


# --------------------------------------------------------------------------------------------
# Reductions: all-reduce, variadic all-reduce, reduce-scatter.


def _reduce_table(
    xs: tuple[np.ndarray, ...], table: np.ndarray, combine: Callable[..., Any], variadic: bool
) -> tuple[np.ndarray, ...]:
    """Fold every group of ``table`` (shape (groups, n)); returns (groups, *shape) arrays.

    For a large operand the elements are folded in flattened chunks so that one step's working
    set stays in cache; every element still sees exactly the fold of :func:`fold_group`.
    """
    num_groups, n = table.shape
    shape = xs[0].shape[1:]
    size = math.prod(shape)
    flats = _flattened_views(xs)
    per_group = max(_MIN_CHUNK_PER_GROUP, _CHUNK_ELEMENTS // num_groups)
    if flats is None or size <= per_group:
        return _fold_columns(xs, table, combine, variadic, (), (num_groups, *shape))
    results: list[np.ndarray] | None = None
    for start in range(0, size, per_group):
        window = (slice(start, min(start + per_group, size)),)
        parts = _fold_columns(
            flats, table, combine, variadic, window, (num_groups, window[0].stop - start)
        )
        if results is None:
            results = [np.empty((num_groups, size), p.dtype) for p in parts]
        for result, part in zip(results, parts):
            result[:, window[0]] = part
    assert results is not None
    return tuple(r.reshape(num_groups, *shape) for r in results)


def _fold_columns(
    xs: tuple[np.ndarray, ...],
    table: np.ndarray,
    combine: Callable[..., Any],
    variadic: bool,
    window: tuple[slice, ...],
    expected_shape: tuple[int, ...],
) -> tuple[np.ndarray, ...]:
    """Fold the positions (columns of ``table``) of ``x[:, *window]`` for every group at once."""
    n = table.shape[1]
    if variadic:
        items: Iterable[Any] = (
            tuple(x[(table[:, i], *window)] for x in xs) for i in range(n)
        )
        parts = tuple(fold_group(items, combine))
        if len(parts) != len(xs):
            raise ValueError(
                f"the variadic combine returned {len(parts)} arrays for {len(xs)} operands"
            )
    elif hasattr(combine, "fold_positions"):
        (x,) = xs
        parts = (combine.fold_positions(x[(table, *window)]),)
    else:
        (x,) = xs
        if _order_free(combine, x.dtype):
            parts = (combine.reduce(x[(table, *window)], axis=1, dtype=x.dtype),)
        elif _accumulates_in_place(combine, x.dtype):
            parts = (_fold_by_accumulate(x, table, combine, window),)
        else:
            parts = (fold_group((x[(table[:, i], *window)] for i in range(n)), combine),)
    checked = []
    for part in parts:
        part = np.asarray(part)
        if part.shape != expected_shape:
            raise ValueError(
                f"combine must be elementwise: it returned shape {list(part.shape)} for inputs "
                f"of shape {list(expected_shape)}"
            )
        checked.append(part)
    return tuple(checked)


def _flattened_views(xs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...] | None:
    """Each ``x`` as a (D, elements) view without copying, or None if one cannot be viewed so."""
    views = []
    for x in xs:
        flat = (x.shape[0], math.prod(x.shape[1:]))
        try:
            view = np.reshape(x, flat, copy=False)  # Raises ValueError rather than copying.
        except ValueError:
            return None
        except TypeError:  # numpy < 2.1 has no ``copy`` argument; assigning a shape never copies.
            view = x.view()
            try:
                view.shape = flat
            except AttributeError:
                return None
        views.append(view)
    return tuple(views)


def _reduced_dtypes(
    tables: list[np.ndarray],
    reduced: Sequence[tuple[np.ndarray, ...]],
    xs: tuple[np.ndarray, ...],
) -> list[np.dtype]:
    """The output dtypes: what ``combine`` produced, or the operands' if it never ran.

    A group of one device is copied without calling ``combine``, so with groups of several
    sizes the dtypes come from a group that was actually combined.
    """
    for table, values in zip(tables, reduced):
        if table.shape[1] > 1:
            return [v.dtype for v in values]
    return [x.dtype for x in xs]


def all_reduce(x: np.ndarray, groups: Sequence[Sequence[int]], combine: Combine) -> np.ndarray:
    """Every participant receives the reduction of its group's values.

    The reduction is the left fold of :func:`fold_group` over group positions. Groups may have
    different sizes (XLA allows it for all-reduce). Returns a (D, *shape) array whose dtype is
    the one ``combine`` produces (the input dtype when no group has two devices).
    """
    x = check_stacked(x, "all-reduce operand")
    tables, covered = group_tables(groups, x.shape[0], "all-reduce")
    reduced = [_reduce_table((x,), table, combine, variadic=False)[0] for table in tables]
    (dtype,) = _reduced_dtypes(tables, [(r,) for r in reduced], (x,))
    out = fresh_output_rows(x.shape[0], x.shape[1:], dtype, covered)
    for table, value in zip(tables, reduced):
        out[table] = value[:, None]
    return out


def reduce_group(x: np.ndarray, group: Sequence[int], combine: Combine) -> np.ndarray:
    """What every member of one group receives from an all-reduce: the left fold of the rows
    ``group`` of ``x`` in position order, computed exactly as :func:`all_reduce` computes it.

    Lets a caller whose devices form one group, or hold one value, reduce once and share the
    result instead of writing it to every device's row."""
    x = check_stacked(x, "all-reduce operand")
    (table,), _ = group_tables([group], x.shape[0], "all-reduce")
    (reduced,) = _reduce_table((x,), table, combine, variadic=False)
    return reduced[0]


def all_reduce_variadic(
    xs: Sequence[np.ndarray], groups: Sequence[Sequence[int]], combine_many: CombineMany
) -> list[np.ndarray]:
    """All-reduce of several operands whose reduction mixes them (e.g. value-and-index argmax).

    ``combine_many(accs, values)`` takes and returns tuples with one array per operand; the fold
    order is that of :func:`fold_group`. The operands must share the device count and shape
    (their dtypes may differ). Returns one (D, *shape) array per operand.
    """
    xs = tuple(check_stacked(x, f"all-reduce operand {i}") for i, x in enumerate(xs))
    if not xs:
        raise ValueError("variadic all-reduce needs at least one operand")
    for i, x in enumerate(xs[1:], start=1):
        if x.shape != xs[0].shape:
            raise ValueError(
                f"variadic all-reduce operands must have one shape, but operand 0 is "
                f"{list(xs[0].shape)} and operand {i} is {list(x.shape)} (device axis first)"
            )
    num_devices = xs[0].shape[0]
    tables, covered = group_tables(groups, num_devices, "all-reduce")
    reduced = [_reduce_table(xs, table, combine_many, variadic=True) for table in tables]
    dtypes = _reduced_dtypes(tables, reduced, xs)
    outs = [fresh_output_rows(num_devices, xs[0].shape[1:], dtype, covered) for dtype in dtypes]
    for table, values in zip(tables, reduced):
        for out, value in zip(outs, values):
            out[table] = value[:, None]
    return outs


def reduce_scatter(
    x: np.ndarray, groups: Sequence[Sequence[int]], dim: int, combine: Combine
) -> np.ndarray:
    """All-reduce, then split dimension ``dim`` into n blocks; position i receives block i.

    ``dim`` counts operand dimensions (not the device axis). All groups must have one size n,
    and n must divide the operand's dimension ``dim``.
    """
    x = check_stacked(x, "reduce-scatter operand")
    shape = x.shape[1:]
    dim = check_dim(dim, shape, "reduce-scatter")
    table, covered = uniform_table(groups, x.shape[0], "reduce-scatter")
    if table is None:
        raise ValueError("reduce-scatter needs at least one group to know its shard count")
    num_groups, n = table.shape
    block = block_size(shape, dim, n, "reduce-scatter")
    (reduced,) = _reduce_table((x,), table, combine, variadic=False)
    # (groups, *before, n, block, *after) -> (groups, n, *before, block, *after)
    shards = np.moveaxis(
        reduced.reshape(num_groups, *shape[:dim], n, block, *shape[dim + 1 :]), 1 + dim, 1
    )
    out = fresh_output_rows(x.shape[0], (*shape[:dim], block, *shape[dim + 1 :]), reduced.dtype, covered)
    out[table] = shards
    return out
