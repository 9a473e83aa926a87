"""The in-process backend: every simulated device is a row of the same numpy arrays.

The rendezvous check and the mapping from flattened device ids to the rows the evaluator holds
live here; the data semantics are the pure functions of ``neuron_sim.interpreter.collectives``. Operands
the same on every device arrive as broadcast views (row stride 0); all-reduce and all-gather of
such operands over groups of one size are computed once and returned as broadcast views too.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from neuron_sim.hlo import Opcode

from neuron_sim.interpreter import collectives
from neuron_sim.interpreter.errors import CollectiveMismatchError
from neuron_sim.interpreter.transport import CollectiveCall, Fingerprint, apply_collective


class LocalTransport:
    """Collectives among the rows of one process (all devices, or a subset under control flow).

    The ``neuron_sim.interpreter.transport.Transport`` of the local backend.
    """

    name = "local"
    uses_fingerprints = False

    def __init__(self, num_devices: int) -> None:
        self.num_devices = num_devices

    def collective(self, call: CollectiveCall, fingerprint: Fingerprint | None = None
                   ) -> list[np.ndarray]:
        """The outputs of ``call`` for ``call.active``; a partial group is a mismatch."""
        active = np.asarray(call.active, np.int64)
        row_of = np.full(self.num_devices, -1, np.int64)
        row_of[active] = np.arange(len(active))
        local = local_groups(call, row_of)
        kind = call.kind
        if kind is Opcode.COLLECTIVE_PERMUTE:
            pairs = [(int(row_of[s]), int(row_of[t])) for s, t in call.pairs
                     if row_of[t] >= 0]
            return apply_collective(call, call.operands, (), pairs)
        uniform = isinstance(local, np.ndarray) and local.size > 0
        if uniform and kind is Opcode.ALL_GATHER and not call.variadic and \
                local.shape == (1, len(active)):
            return [_gathered_once(x, local[0], call.dim) for x in call.operands]
        if uniform and kind in (Opcode.ALL_REDUCE, Opcode.ALL_GATHER) and not call.variadic and \
                all(_same_on_every_row(x) for x in call.operands):
            return [_replicated_collective(call, x, local.shape[1]) for x in call.operands]
        return apply_collective(call, call.operands, local)


def local_groups(call: CollectiveCall, row_of: np.ndarray) -> np.ndarray | list[tuple[int, ...]]:
    """The participant groups present in the frame, as row indices.

    A group is present when all of its devices reached the collective and absent when none
    did; a group reached by only some of its members raises CollectiveMismatchError.
    """
    groups = call.groups
    sizes = {len(g) for g in groups}
    if len(sizes) == 1:  # the common case, vectorized: one (groups, size) matrix
        matrix = np.asarray(groups, np.int64).reshape(len(groups), sizes.pop())
        rows = row_of[matrix]
        present = rows >= 0
        complete = present.all(axis=1)
        partial = present.any(axis=1) & ~complete
        if partial.any():
            _mismatch(call, matrix[int(np.flatnonzero(partial)[0])], row_of)
        return rows[complete]
    local = []
    for group in groups:
        rows = row_of[np.asarray(group, np.int64)]
        if (rows >= 0).all():
            local.append(tuple(int(r) for r in rows))
        elif (rows >= 0).any():
            _mismatch(call, group, row_of)
    return local


def _mismatch(call: CollectiveCall, group: Sequence[int], row_of: np.ndarray) -> None:
    group = [int(d) for d in group]
    arrived = [d for d in group if row_of[d] >= 0]
    raise CollectiveMismatchError(call.kind.spelling, group, arrived)


def _same_on_every_row(x: np.ndarray) -> bool:
    return x.shape[0] <= 1 or x.strides[0] == 0


def _replicated_collective(call: CollectiveCall, x: np.ndarray, size: int) -> np.ndarray:
    """All-reduce / all-gather of a value held by every row: computed once, broadcast back."""
    copies = np.broadcast_to(x[0], (size, *x.shape[1:]))
    group = [tuple(range(size))]
    if call.kind is Opcode.ALL_REDUCE:
        one = collectives.all_reduce(copies, group, call.combine)[0]
    else:
        one = collectives.all_gather(copies, group, call.dim)[0]
    return np.broadcast_to(one, (x.shape[0], *one.shape))


def _gathered_once(x: np.ndarray, group: np.ndarray, dim: int) -> np.ndarray:
    """All-gather over one group of every row: every row receives the same concatenation, so it
    is built once (as ``collectives.all_gather`` builds each group's) and returned as a
    broadcast view, not once per row (4096 rows of a 2 MB operand would be 32 GiB)."""
    shape = x.shape[1:]
    out_shape = (*shape[:dim], len(group) * shape[dim], *shape[dim + 1:])
    one = np.moveaxis(x[group], 0, dim).reshape(out_shape)
    return np.broadcast_to(one, (x.shape[0], *out_shape))
