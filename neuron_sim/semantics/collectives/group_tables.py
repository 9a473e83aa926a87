"""Checking a collective's stacked operands and groups; the group tables its data functions use.

A per-device value is a stacked array ``x`` of shape ``(D, *shape)``: row ``f`` is the value on
flattened device ``f`` (or, inside a backend, on the device its row stands for). A *group* is an
ordered sequence of such ids; the *position* of a device is its index in its group. The data
functions (``reductions``, ``movement``, ``ragged``) turn groups into int64 tables whose rows
are groups and whose columns are positions, and index the stacked operands with them.

Inconsistent input (ids out of range or repeated, group sizes that differ where the op needs
one size, a dimension that the group size does not divide...) raises ``ValueError``. Devices in
no group get an all-zero output row (``fresh_output_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["as_id_array", "block_size", "check_dim", "check_ids", "check_stacked",
           "group_tables", "fresh_output_rows", "uniform_table"]


def check_stacked(x: np.ndarray, what: str) -> np.ndarray:
    """``x`` itself, if it is a numpy array with a leading device axis; ``what`` names it."""
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{what} must be a numpy array stacked per device, got {type(x).__name__}")
    if x.ndim < 1:
        raise ValueError(f"{what} must have a leading device axis, got a 0-d array")
    return x


def check_dim(dim: int, shape: tuple[int, ...], op: str) -> int:
    """``dim`` as an int, if it is a dimension of an operand of ``shape``."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ValueError(f"{op} dimension must be an integer, got {dim!r}")
    if not 0 <= dim < len(shape):
        raise ValueError(
            f"{op} dimension {dim} is out of range for an operand of rank {len(shape)} "
            f"(shape {list(shape)})"
        )
    return int(dim)


def group_tables(
    groups: Sequence[Sequence[int]], num_devices: int, op: str
) -> tuple[list[np.ndarray], bool]:
    """Check ``groups`` and return them as int64 matrices, one per group size, plus coverage.

    Each matrix has shape (number of groups of that size, size); its rows are groups in their
    original order and its columns are positions. The flag tells whether every device
    0..num_devices-1 appears in some group (so the output needs no zero rows).
    """
    rows = _groups_as_arrays(groups, op)
    sizes: dict[int, list[np.ndarray]] = {}
    for index, row in enumerate(rows):
        if row.size == 0:
            raise ValueError(f"{op} group {index} is empty; every group needs at least one device")
        sizes.setdefault(int(row.size), []).append(row)
    tables = [np.stack(same) for same in sizes.values()]
    covered = check_ids(tables, num_devices, op, "group")
    return tables, covered


def _groups_as_arrays(groups: Sequence[Sequence[int]], op: str) -> list[np.ndarray]:
    """One int64 array per group; the common case (all groups one size) converts in one call."""
    try:
        matrix = np.asarray(groups)
    except (ValueError, TypeError):
        matrix = None  # Ragged: groups of different sizes.
    if matrix is not None and matrix.ndim == 2:
        return list(as_id_array(matrix, op))
    if matrix is not None and matrix.ndim == 1 and matrix.size == 0:
        return []
    if matrix is not None and matrix.ndim != 1:
        raise ValueError(f"{op} groups must be a sequence of sequences of device ids")
    rows = []
    for group in groups:
        try:
            row = np.asarray(group)
        except (ValueError, TypeError):
            row = None  # A group that is itself ragged.
        if row is None or row.ndim != 1:
            raise ValueError(f"{op} groups must be a sequence of sequences of device ids")
        rows.append(as_id_array(row, op))
    return rows


def as_id_array(ids: np.ndarray, op: str) -> np.ndarray:
    """Device ids as int64 (integers only)."""
    if ids.size and ids.dtype.kind not in "iu":
        raise ValueError(f"{op} device ids must be integers, got values of dtype {ids.dtype}")
    return ids.astype(np.int64, copy=False)


def check_ids(tables: list[np.ndarray], num_devices: int, op: str, noun: str) -> bool:
    """Range and uniqueness check over all ids; returns whether they cover every device."""
    if not tables:
        return num_devices == 0
    ids = np.concatenate([t.ravel() for t in tables])
    bad = ids[(ids < 0) | (ids >= num_devices)]
    if bad.size:
        raise ValueError(
            f"{op} {noun} names device {int(bad[0])}, which is out of range for "
            f"{num_devices} devices (valid ids are 0..{num_devices - 1})"
        )
    counts = np.bincount(ids, minlength=num_devices)
    repeated = np.flatnonzero(counts > 1)
    if repeated.size:
        raise ValueError(
            f"{op} {noun}s name device {int(repeated[0])} more than once; each device may "
            "appear at most once"
        )
    return bool(ids.size == num_devices)


def uniform_table(
    groups: Sequence[Sequence[int]], num_devices: int, op: str
) -> tuple[np.ndarray | None, bool]:
    """The groups as one (groups, n) matrix; raises if their sizes differ. None if no groups."""
    tables, covered = group_tables(groups, num_devices, op)
    if len(tables) > 1:
        found = sorted(t.shape[1] for t in tables)
        raise ValueError(
            f"{op} needs all groups to have the same size, but found groups of sizes "
            f"{', '.join(map(str, found))}"
        )
    return (tables[0] if tables else None), covered


def fresh_output_rows(num_devices: int, shape: tuple[int, ...], dtype: Any,
                covered: bool) -> np.ndarray:
    """A fresh per-device output; rows of devices in no group start as zeros."""
    full = (num_devices, *shape)
    return np.empty(full, dtype) if covered else np.zeros(full, dtype)


def block_size(shape: tuple[int, ...], dim: int, n: int, op: str) -> int:
    """The size of each of the ``n`` blocks dimension ``dim`` of ``shape`` is cut into."""
    if shape[dim] % n:
        raise ValueError(
            f"{op} dimension {dim} has size {shape[dim]}, which the group size {n} does not divide"
        )
    return shape[dim] // n
