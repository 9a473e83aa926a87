"""The in-process backend: every simulated device is a row of the same numpy arrays.

The rendezvous check and the mapping from flattened device ids to the rows the evaluator holds
live here; the data semantics are each kind's data function (its descriptor in
``neuron_sim.semantics.collectives``). Operands the same on every device arrive as broadcast
views (row stride 0). A kind whose group members all receive one value (the descriptor's
``group_result``: all-reduce, all-gather, collective-broadcast) computes it once per call when
every row holds the same operand or the rows form one group, and returns a broadcast view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from neuron_sim.interpreter.errors import CollectiveMismatchError

if TYPE_CHECKING:
    from neuron_sim.interpreter.collective_calls import CollectiveCall, Fingerprint


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
        """The outputs of ``call`` for ``call.active``; a partial group is a mismatch. (The
        collectives' semantics are imported here, by a program's first collective: every run
        makes a transport, few of them call it.)"""
        from neuron_sim.interpreter.collective_calls import apply_collective
        from neuron_sim.semantics.collectives.descriptor import GroupReading

        active = np.asarray(call.active, np.int64)
        row_of = np.full(self.num_devices, -1, np.int64)
        row_of[active] = np.arange(len(active))
        local = local_groups(call, row_of)
        descriptor = call.descriptor
        if descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
            pairs = [(int(row_of[s]), int(row_of[t])) for s, t in call.pairs
                     if row_of[t] >= 0]
            return apply_collective(call, call.operands, (), pairs)
        uniform = isinstance(local, np.ndarray) and local.size > 0
        if uniform and descriptor.group_result is not None and not call.variadic:
            if all(_same_on_every_row(x) for x in call.operands):
                size = local.shape[1]
                return [_once(call, np.broadcast_to(x[0], (size, *x.shape[1:])), range(size),
                              x.shape[0]) for x in call.operands]
            if local.shape == (1, len(active)):
                return [_once(call, x, local[0], x.shape[0]) for x in call.operands]
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


def _once(call: CollectiveCall, x: np.ndarray, group: Sequence[int], count: int) -> np.ndarray:
    """What every member receives, computed once from the rows ``group`` of ``x`` (position
    order) and returned as a broadcast view over ``count`` rows: 4096 rows of a 2 MB all-gather
    result would be 32 GiB otherwise."""
    one = call.descriptor.group_result(x, group, call.args_in(()))
    return np.broadcast_to(one, (count, *one.shape))
