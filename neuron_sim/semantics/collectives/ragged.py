"""ragged-all-to-all's data function: every member sends a slice of its input to every member.

Operands (XLA's order), each stacked per device: ``input``, ``output`` (the buffer the result
starts from), ``input_offsets``, ``send_sizes``, ``output_offsets``, ``recv_sizes``; the last
four are integer arrays of one shape holding ``n * k`` entries for a group of n (rank 1, or
rank 2 read row-major): k updates per peer, entry ``j * k + u`` for update u of peer j. For a
group with members ``m_0..m_{n-1}``, member ``m_i`` sends rows
``input_offsets[e] : input_offsets[e] + send_sizes[e]`` (``e = j * k + u``) of its input, along
dimension 0 (the ragged one), to member ``m_j``, which receives them at rows
``output_offsets[e] ...`` of its output: the output offsets are the *sender's* (where its slice
lands in the receiver). ``recv_sizes[i * k + u]`` of ``m_j`` is what ``m_j`` expects from update
u of ``m_i``; it must equal the size sent. Rows nobody writes keep the output operand's values
(docs/semantics.md §3).

What XLA leaves undefined is refused with ``ValueError`` instead of made up: a slice out of its
buffer, a negative offset or size, sizes the receiver does not expect, two slices landing on
the same output row, input and output of different element types or row shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neuron_sim.semantics.collectives.group_tables import (check_stacked, fresh_output_rows,
                                                           uniform_table)

__all__ = ["RAGGED_OPERANDS", "ragged_all_to_all"]

RAGGED_OPERANDS = ("input", "output", "input_offsets", "send_sizes", "output_offsets",
                   "recv_sizes")
_OP = "ragged-all-to-all"


def ragged_all_to_all(operands: Sequence[np.ndarray],
                      groups: Sequence[Sequence[int]]) -> np.ndarray:
    """The output of every device (stacked like the operands), from the six stacked operands.

    ``groups`` are the ordered participant groups (row indices, all one size n); a device in no
    group gets an all-zero row.
    """
    if len(operands) != len(RAGGED_OPERANDS):
        raise ValueError(f"{_OP} takes {len(RAGGED_OPERANDS)} operands "
                         f"({', '.join(RAGGED_OPERANDS)}), not {len(operands)}")
    stacks = [check_stacked(x, f"{_OP} {name}") for x, name in zip(operands, RAGGED_OPERANDS)]
    data, buffer, in_offsets, send_sizes, out_offsets, recv_sizes = stacks
    _check_buffers(data, buffer)
    table, covered = uniform_table(groups, buffer.shape[0], _OP)
    out = fresh_output_rows(buffer.shape[0], buffer.shape[1:], buffer.dtype, covered)
    if table is None:
        return out
    groups_count, n = table.shape
    k = _updates_per_peer(stacks[2:], n)
    out[table] = buffer[table]

    def per_transfer(x: np.ndarray) -> np.ndarray:
        # [g, i, j, u]: update u that position i of group g sends to position j.
        return x[table].reshape(groups_count, n, n, k).astype(np.int64)

    transfer = (groups_count, n, n, k)
    senders = np.broadcast_to(table[:, :, None, None], transfer)
    receivers = np.broadcast_to(table[:, None, :, None], transfer)
    sizes = per_transfer(send_sizes)
    expected = np.swapaxes(per_transfer(recv_sizes), 1, 2)
    _check_sizes(sizes, expected, senders, receivers)
    starts = per_transfer(in_offsets)
    lands = per_transfer(out_offsets)
    _check_bounds("input", starts, sizes, data.shape[1], senders)
    _check_bounds("output", lands, sizes, buffer.shape[1], receivers)

    sizes, senders, receivers = sizes.ravel(), senders.ravel(), receivers.ravel()
    starts, lands = starts.ravel(), lands.ravel()
    total = int(sizes.sum())
    if total == 0:
        return out
    # One entry per row moved: row ``within`` of the slice of transfer t.
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)
    within = np.arange(total, dtype=np.int64) - first
    source_rows = np.repeat(starts, sizes) + within
    target_rows = np.repeat(lands, sizes) + within
    target_devices = np.repeat(receivers, sizes)
    _check_no_overlap(target_devices, target_rows, buffer.shape[1])
    out[target_devices, target_rows] = data[np.repeat(senders, sizes), source_rows]
    return out


def _check_buffers(data: np.ndarray, buffer: np.ndarray) -> None:
    if data.ndim < 2 or buffer.ndim < 2:
        raise ValueError(f"{_OP} input and output need a ragged dimension 0, but have shapes "
                         f"{list(data.shape[1:])} and {list(buffer.shape[1:])}")
    if data.dtype != buffer.dtype or data.shape[2:] != buffer.shape[2:]:
        raise ValueError(f"{_OP} input {data.dtype}{list(data.shape[1:])} and output "
                         f"{buffer.dtype}{list(buffer.shape[1:])} must share the element type "
                         f"and every dimension but 0")
    if data.shape[0] != buffer.shape[0]:
        raise ValueError(f"{_OP} input is stacked over {data.shape[0]} devices but the output "
                         f"over {buffer.shape[0]}")


def _updates_per_peer(counts: Sequence[np.ndarray], n: int) -> int:
    """k, the updates each member sends each peer: the offsets and sizes hold n * k integers."""
    first = counts[0]
    for name, x in zip(RAGGED_OPERANDS[2:], counts):
        if x.dtype.kind not in "iu":
            raise ValueError(f"{_OP} {name} must be integers, not {x.dtype}")
        if x.ndim not in (2, 3) or x.shape != first.shape:
            raise ValueError(f"{_OP} offsets and sizes must share one shape of rank 1 or 2, "
                             f"but {RAGGED_OPERANDS[2]} is {list(first.shape[1:])} and {name} "
                             f"is {list(x.shape[1:])}")
    entries = int(np.prod(first.shape[1:], dtype=np.int64))
    if entries == 0 or entries % n:
        raise ValueError(f"{_OP} offsets and sizes hold {entries} entries, not a positive "
                         f"multiple of the group size {n}")
    return entries // n


def _check_sizes(sizes: np.ndarray, expected: np.ndarray, senders: np.ndarray,
                 receivers: np.ndarray) -> None:
    bad = np.argwhere((sizes < 0) | (sizes != expected))
    if bad.size:
        at = tuple(bad[0])
        raise ValueError(f"{_OP}: device {int(senders[at])} sends {int(sizes[at])} rows "
                         f"(update {int(at[3])}) to device {int(receivers[at])}, whose "
                         f"recv_sizes expect {int(expected[at])}")


def _check_bounds(role: str, offsets: np.ndarray, sizes: np.ndarray, rows: int,
                  devices: np.ndarray) -> None:
    bad = np.argwhere((offsets < 0) | (offsets + sizes > rows))
    if bad.size:
        at = tuple(bad[0])
        raise ValueError(f"{_OP}: a slice of {int(sizes[at])} rows at {role} offset "
                         f"{int(offsets[at])} on device {int(devices[at])} does not fit the "
                         f"{rows} rows of the {role}")


def _check_no_overlap(devices: np.ndarray, rows: np.ndarray, size: int) -> None:
    keys = devices * size + rows
    unique, counts = np.unique(keys, return_counts=True)
    if (counts > 1).any():
        key = int(unique[counts > 1][0])
        raise ValueError(f"{_OP}: two slices land on row {key % size} of device "
                         f"{key // size}'s output")
