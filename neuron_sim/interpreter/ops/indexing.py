"""Indexed data movement: dynamic-slice, dynamic-update-slice, gather, scatter.

Index semantics (docs/semantics.md §4; XLA's elemental emitter and ScatterExpander):

- Start indices are read in their own type — an unsigned index is never negative (a u32
  4000000000 clamps to the last window, as XLA:CPU does in the JAX corpus case
  ``dynamic_slice_oob``; docs/semantics.md §4's "read as signed" holds for signed types only) — and
  clamped so the whole window fits: ``start = min(max(start, 0), dim - size)``. dynamic-slice,
  dynamic-update-slice and gather never fail on an out-of-range index.
- scatter does *not* clamp: an update whose window does not fit entirely inside the operand is
  skipped (XLA's ScatterExpander and HloEvaluator; docs/semantics.md's "clamped the same way" holds
  for gather only). Updates are applied in the row-major order of the updates array, so
  repeated indices combine in index order.

Indices may differ per device: every op is vectorized over rows with fancy indexing.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from neuron_sim.hlo import Opcode

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.ops.registry import implements


def signed_indices(x: np.ndarray) -> np.ndarray:
    """Index values as int64 (u64 values beyond the int64 range saturate; they clamp anyway)."""
    if x.dtype == np.uint64:
        return np.minimum(x, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
    return x.astype(np.int64)


def _start_matrix(ctx, indices: Sequence[np.ndarray], rank: int) -> np.ndarray:
    """Start indices as a (rows, rank) int64 matrix (scalar operands, or one R1 operand)."""
    operands = ctx.inst.operands
    if len(indices) == 1 and rank != 0 and operands[-1].shape.rank == 1:
        return signed_indices(indices[0])
    if len(indices) != rank:
        raise InterpreterError(f"expected {rank} start indices, got {len(indices)}")
    if rank == 0:
        return np.zeros((1, 0), np.int64)
    rows = max(i.shape[0] for i in indices)
    matrix = np.empty((rows, len(indices)), np.int64)
    for column, index in enumerate(indices):
        matrix[:, column] = signed_indices(index)  # a one-row index broadcasts to every row
    return matrix


def _clamped(starts: np.ndarray, dims: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    high = np.asarray(dims, np.int64) - np.asarray(sizes, np.int64)
    return np.clip(starts, 0, np.maximum(high, 0))


def _window_indices(starts: np.ndarray, sizes: Sequence[int], data_rows: int
                    ) -> tuple[np.ndarray, ...]:
    """Fancy indices selecting window ``starts[r] + [0, sizes)`` of row r of a batched array."""
    rows, rank = starts.shape[0], len(sizes)
    row_index = (np.arange(rows) if data_rows == rows else np.zeros(rows, np.int64))
    index = [row_index.reshape(rows, *([1] * rank))]
    for d, size in enumerate(sizes):
        offsets = np.arange(size).reshape([1] + [size if i == d else 1 for i in range(rank)])
        index.append(starts[:, d].reshape(rows, *([1] * rank)) + offsets)
    return tuple(index)


@implements(Opcode.DYNAMIC_SLICE)
def dynamic_slice(ctx, x, *indices):
    sizes = tuple(ctx.attr("dynamic_slice_sizes"))
    rank = x.ndim - 1
    starts = _clamped(_start_matrix(ctx, indices, rank), x.shape[1:], sizes)
    if starts.shape[0] == 1:
        return x[(slice(None),) + tuple(slice(s, s + z) for s, z in zip(starts[0], sizes))]
    return x[_window_indices(starts, sizes, x.shape[0])]


@implements(Opcode.DYNAMIC_UPDATE_SLICE)
def dynamic_update_slice(ctx, x, update, *indices):
    rank = x.ndim - 1
    sizes = update.shape[1:]
    starts = _clamped(_start_matrix(ctx, indices, rank), x.shape[1:], sizes)
    rows = max(x.shape[0], update.shape[0], starts.shape[0])
    if x.shape[0] == rows:
        out = x.copy()
    else:
        out = np.empty((rows, *x.shape[1:]), x.dtype)
        out[...] = x
    if starts.shape[0] == 1:
        out[(slice(None),) + tuple(slice(s, s + z) for s, z in zip(starts[0], sizes))] = update
    else:
        if starts.shape[0] != rows:
            starts = np.broadcast_to(starts, (rows, rank))
        out[_window_indices(starts, sizes, rows)] = update  # a one-row update broadcasts
    return out


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Batched indices -> (rows, *batch_shape, K): the index vector moved last."""
    idx = signed_indices(indices)
    if index_vector_dim == idx.ndim - 1:
        return idx[..., None]
    return np.moveaxis(idx, index_vector_dim + 1, -1)


def _batch_position(indices_dim: int, index_vector_dim: int) -> int:
    """Position among the batch dims of an indices dimension (the index vector dim removed)."""
    return indices_dim if indices_dim < index_vector_dim else indices_dim - 1


def _full_starts(vectors: np.ndarray, rank: int, index_map: Sequence[int],
                 operand_batching: Sequence[int], indices_batching: Sequence[int],
                 index_vector_dim: int) -> np.ndarray:
    """(rows, *G, rank) start of every window in operand coordinates (unclamped)."""
    batch_shape = vectors.shape[1:-1]
    starts = np.zeros((*vectors.shape[:-1], rank), np.int64)
    for k, dim in enumerate(index_map):
        starts[..., dim] = vectors[..., k]
    for operand_dim, indices_dim in zip(operand_batching, indices_batching):
        position = _batch_position(indices_dim, index_vector_dim)
        line = np.arange(batch_shape[position]).reshape(
            [1] + [batch_shape[position] if i == position else 1
                   for i in range(len(batch_shape))])
        starts[..., operand_dim] = line
    return starts


def _element_indices(starts: np.ndarray, window_dims: Sequence[int],
                     window_sizes: Sequence[int]) -> list[np.ndarray]:
    """Per operand dim, the (rows, *G, *W) index of every element of every window."""
    n_window = len(window_dims)
    full = []
    for dim in range(starts.shape[-1]):
        base = starts[..., dim].reshape(*starts.shape[:-1], *([1] * n_window))
        if dim in window_dims:
            j = window_dims.index(dim)
            offsets = np.arange(window_sizes[j]).reshape(
                [1] * (starts.ndim - 1) + [window_sizes[j] if i == j else 1
                                           for i in range(n_window)])
            base = base + offsets
        full.append(base)
    return full


@implements(Opcode.GATHER)
def gather(ctx, operand, indices):
    attrs = ctx.inst.attrs
    offset_dims = tuple(attrs.get("offset_dims", ()))
    collapsed = tuple(attrs.get("collapsed_slice_dims", ()))
    index_map = tuple(attrs["start_index_map"])
    index_vector_dim = int(attrs["index_vector_dim"])
    slice_sizes = tuple(attrs["slice_sizes"])
    operand_batching = tuple(attrs.get("operand_batching_dims", ()))
    indices_batching = tuple(attrs.get("start_indices_batching_dims", ()))
    rank = operand.ndim - 1
    vectors = _index_vectors(indices, index_vector_dim)
    batch_rank = vectors.ndim - 2
    # Batching coordinates are in range by construction, so clamping leaves them alone.
    starts = _full_starts(vectors, rank, index_map, operand_batching, indices_batching,
                          index_vector_dim)
    starts = _clamped(starts, operand.shape[1:], slice_sizes)
    window_dims = [d for d in range(rank) if d not in collapsed and d not in operand_batching]
    window_sizes = [slice_sizes[d] for d in window_dims]
    full = _element_indices(starts, window_dims, window_sizes)
    rows = max(operand.shape[0], vectors.shape[0])
    row_index = (np.arange(rows) if operand.shape[0] == rows else np.zeros(rows, np.int64))
    row_index = row_index.reshape(rows, *([1] * (batch_rank + len(window_dims))))
    result = operand[(row_index, *full)]
    # result axes: rows, batch dims (G), window dims (W); output puts W at offset_dims.
    order, g, w = [], 0, 0
    for position in range(batch_rank + len(window_dims)):
        if position in offset_dims:
            order.append(1 + batch_rank + w)
            w += 1
        else:
            order.append(1 + g)
            g += 1
    return result.transpose(0, *order)


@implements(Opcode.SCATTER)
def scatter(ctx, *arrays):
    count = (len(arrays) - 1) // 2
    operands, indices, updates = arrays[:count], arrays[count], arrays[count + 1:]
    attrs = ctx.inst.attrs
    update_window_dims = tuple(attrs.get("update_window_dims", ()))
    inserted = tuple(attrs.get("inserted_window_dims", ()))
    index_map = tuple(attrs["scatter_dims_to_operand_dims"])
    index_vector_dim = int(attrs["index_vector_dim"])
    operand_batching = tuple(attrs.get("input_batching_dims", ()))
    indices_batching = tuple(attrs.get("scatter_indices_batching_dims", ()))
    rank = operands[0].ndim - 1
    operand_dims = operands[0].shape[1:]
    vectors = _index_vectors(indices, index_vector_dim)
    batch_rank = vectors.ndim - 2
    starts = _full_starts(vectors, rank, index_map, operand_batching, indices_batching,
                          index_vector_dim)
    update_rank = updates[0].ndim - 1
    scatter_dims = [d for d in range(update_rank) if d not in update_window_dims]
    window_dims = [d for d in range(rank) if d not in inserted and d not in operand_batching]
    window_sizes = [updates[0].shape[1 + d] for d in update_window_dims]
    if len(window_dims) != len(window_sizes):
        raise InterpreterError("scatter's update window dims do not match the operand")
    sizes = np.ones(rank, np.int64)
    for dim, size in zip(window_dims, window_sizes):
        sizes[dim] = size
    fits = ((starts >= 0) & (starts <= np.asarray(operand_dims, np.int64) - sizes)).all(axis=-1)
    full = _element_indices(starts, window_dims, window_sizes)
    flat = np.ravel_multi_index(tuple(np.clip(i, 0, max(d - 1, 0))
                                      for i, d in zip(full, operand_dims)),
                                operand_dims) if rank else np.zeros_like(fits, np.int64)
    valid = np.broadcast_to(fits.reshape(*fits.shape, *([1] * len(window_dims))), flat.shape)
    rows = max([a.shape[0] for a in arrays])
    size = int(np.prod(operand_dims, dtype=np.int64))
    flat = np.broadcast_to(flat, (rows, *flat.shape[1:])) + \
        (np.arange(rows) * size).reshape(rows, *([1] * (flat.ndim - 1)))
    valid = np.broadcast_to(valid, (rows, *valid.shape[1:]))
    # Back to the updates' own axis order, so that flattening gives the update order.
    to_update_axes = np.argsort([*scatter_dims, *update_window_dims])
    flat = flat.transpose(0, *(1 + to_update_axes))
    valid = valid.transpose(0, *(1 + to_update_axes))
    values = [np.broadcast_to(u, (rows, *u.shape[1:])) for u in updates]
    if flat.shape[1:] != values[0].shape[1:]:
        raise InterpreterError(f"scatter updates have shape {list(values[0].shape[1:])}, "
                               f"the indices and window imply {list(flat.shape[1:])}")
    mask = valid.reshape(-1)
    targets = flat.reshape(-1)[mask]
    outs = [np.array(np.broadcast_to(o, (rows, *operand_dims)), copy=True).reshape(-1)
            for o in operands]
    combine = ctx.elementwise(ctx.attr("to_apply"))
    apply_in_order(outs, targets, [v.reshape(-1)[mask] for v in values], combine)
    results = [o.reshape(rows, *operand_dims) for o in outs]
    return results if count > 1 else results[0]


def apply_in_order(outs: list[np.ndarray], targets: np.ndarray, values: list[np.ndarray],
                   combine: Callable[..., object]) -> None:
    """``outs[k][t] = combine(outs..[t], values..[i])`` for every i in order (in place).

    Updates to distinct positions are independent, so they are applied in rounds: round r
    holds the r-th update of every position, which keeps the order at each position.
    """
    if targets.size == 0:
        return
    count = targets.size
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    new_group = np.empty(count, bool)
    new_group[0] = True
    new_group[1:] = sorted_targets[1:] != sorted_targets[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(count), 0))
    occurrence = np.empty(count, np.int64)
    occurrence[order] = np.arange(count) - group_start
    by_round = np.argsort(occurrence, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(occurrence))])
    for r in range(len(bounds) - 1):
        chosen = by_round[bounds[r]:bounds[r + 1]]
        positions = targets[chosen]
        current = [o[positions] for o in outs]
        new = combine(*current, *[v[chosen] for v in values])
        if not isinstance(new, tuple):
            new = (new,)
        for out, value in zip(outs, new):
            out[positions] = value
