"""The collectives that move data: all-gather, all-to-all, collective-permute, collective-broadcast.

Pure vectorized numpy over operands stacked per device (``group_tables`` says how): inputs are
never modified, outputs never alias inputs. A device that receives nothing (in no group, or no
target of a collective-permute) gets an all-zero row. docs/semantics.md §3 is the authority.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neuron_sim.semantics.collectives.group_tables import (as_id_array, block_size, check_dim,
                                                           check_ids, check_stacked,
                                                           group_tables, fresh_output_rows,
                                                           uniform_table)

__all__ = ["all_gather", "all_to_all", "all_to_all_tuple", "collective_broadcast",
           "collective_permute", "gather_group"]


def all_gather(x: np.ndarray, groups: Sequence[Sequence[int]], dim: int) -> np.ndarray:
    """Concatenate the group's operands along ``dim``, in position order, on every participant.

    Output dimension ``dim`` is n times the operand's; block i is the operand of position i.
    All groups must have one size.
    """
    x = check_stacked(x, "all-gather operand")
    shape = x.shape[1:]
    dim = check_dim(dim, shape, "all-gather")
    table, covered = uniform_table(groups, x.shape[0], "all-gather")
    if table is None:
        raise ValueError("all-gather needs at least one group to know its output shape")
    num_groups, n = table.shape
    out_shape = (*shape[:dim], n * shape[dim], *shape[dim + 1 :])
    # (groups, n, *shape) -> (groups, *before, n, shape[dim], *after) -> merge n into dim.
    gathered = np.moveaxis(x[table], 1, 1 + dim).reshape(num_groups, *out_shape)
    out = fresh_output_rows(x.shape[0], out_shape, x.dtype, covered)
    out[table] = gathered[:, None]
    return out


def gather_group(x: np.ndarray, group: Sequence[int], dim: int) -> np.ndarray:
    """What every member of one group receives from an all-gather: the rows ``group`` of ``x``
    concatenated along ``dim`` in position order, built once (as :func:`all_gather` builds each
    group's) rather than once per member."""
    x = check_stacked(x, "all-gather operand")
    shape = x.shape[1:]
    dim = check_dim(dim, shape, "all-gather")
    table, _ = uniform_table([group], x.shape[0], "all-gather")
    out_shape = (*shape[:dim], table.size * shape[dim], *shape[dim + 1:])
    return np.moveaxis(x[table[0]], 0, dim).reshape(out_shape)


def all_to_all(x: np.ndarray, groups: Sequence[Sequence[int]], dim: int) -> np.ndarray:
    """Array all-to-all: block j of every operand (split along ``dim``) goes to position j.

    Each participant concatenates the blocks it receives along ``dim`` in source-position order,
    so the output shape equals the input shape. All groups must have one size n dividing the
    operand's dimension ``dim``.
    """
    x = check_stacked(x, "all-to-all operand")
    shape = x.shape[1:]
    dim = check_dim(dim, shape, "all-to-all")
    table, covered = uniform_table(groups, x.shape[0], "all-to-all")
    out = fresh_output_rows(x.shape[0], shape, x.dtype, covered)
    if table is None:
        return out
    num_groups, n = table.shape
    block = block_size(shape, dim, n, "all-to-all")
    # sent[g, i, *before, j, b, *after] is block j of source position i; the receiver j wants
    # it at [g, j, *before, i, b, *after]: swap the source and destination axes.
    sent = x[table].reshape(num_groups, n, *shape[:dim], n, block, *shape[dim + 1 :])
    out[table] = np.swapaxes(sent, 1, 2 + dim).reshape(num_groups, n, *shape)
    return out


def all_to_all_tuple(xs: Sequence[np.ndarray], groups: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Tuple all-to-all: output element j on position i is operand i of position j.

    The operand count must equal the group size n, and the operands must share one shape and
    dtype (every output element receives operands of several indices).
    """
    xs = [check_stacked(x, f"all-to-all operand {i}") for i, x in enumerate(xs)]
    if not xs:
        raise ValueError("tuple all-to-all needs at least one operand")
    for i, x in enumerate(xs[1:], start=1):
        if x.shape != xs[0].shape or x.dtype != xs[0].dtype:
            raise ValueError(
                "tuple all-to-all operands must share one shape and dtype, but operand 0 is "
                f"{xs[0].dtype}{list(xs[0].shape)} and operand {i} is {x.dtype}{list(x.shape)}"
            )
    num_devices, shape = xs[0].shape[0], xs[0].shape[1:]
    table, covered = uniform_table(groups, num_devices, "all-to-all")
    outs = [fresh_output_rows(num_devices, shape, xs[0].dtype, covered) for _ in xs]
    if table is None:
        return outs
    n = table.shape[1]
    if n != len(xs):
        raise ValueError(
            f"tuple all-to-all has {len(xs)} operands but groups of size {n}; they must be equal"
        )
    stacked = np.stack(xs, axis=1)  # stacked[f, i] is operand i of device f.
    positions = np.arange(n)[None, :]
    for j, out in enumerate(outs):
        # Row table[g, i] receives operand i of device table[g, j].
        out[table] = stacked[table[:, j][:, None], positions]
    return outs


def collective_permute(x: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """The operand on each source goes to its target; a device that is no target gets zeros.

    ``pairs`` are (source, target) flattened ids; each id may be a source at most once and a
    target at most once (a device may be both, and may send to itself).
    """
    x = check_stacked(x, "collective-permute operand")
    num_devices = x.shape[0]
    try:
        table = np.asarray(pairs)
    except (ValueError, TypeError):
        table = None  # Ragged: some pair does not have two ids.
    if table is not None and table.size == 0:
        return np.zeros(x.shape, x.dtype)
    if table is None or table.ndim != 2 or table.shape[1] != 2:
        raise ValueError("collective-permute pairs must be a sequence of (source, target) pairs")
    table = as_id_array(table, "collective-permute")
    sources, targets = table[:, 0], table[:, 1]
    check_ids([sources], num_devices, "collective-permute", "source")
    covered = check_ids([targets], num_devices, "collective-permute", "target")
    out = fresh_output_rows(num_devices, x.shape[1:], x.dtype, covered)
    out[targets] = x[sources]
    return out


def collective_broadcast(x: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Position 0 of each group sends its operand to the whole group; others get zeros."""
    x = check_stacked(x, "collective-broadcast operand")
    tables, covered = group_tables(groups, x.shape[0], "collective-broadcast")
    out = fresh_output_rows(x.shape[0], x.shape[1:], x.dtype, covered)
    for table in tables:
        out[table] = x[table[:, 0]][:, None]
    return out
