"""Native mode: MPI's own collectives on sub-communicators, one per set of ranks a group spans.

Faster than exact mode for large tensors, but a reduction runs in MPI's order (this rank's
devices are folded first, then MPI combines the ranks as it likes), so floating-point sums and
products may differ from the local backend in the last bits. Data movement (all-gather,
all-to-all, collective-permute, collective-broadcast) is exact in both modes; it travels as raw
bytes, so every dtype works.

A reduction runs natively only when MPI has both the operation and the datatype and computes
what HLO means: add and multiply on integers, floats and complex; maximum, minimum, and, or, xor
on integers; and, or, xor on predicates. Everything else (variadic all-reduce, bf16 and float8,
a float maximum whose NaN and signed-zero rules MPI does not share, a reduction computation
that is not a single elementwise op) falls back to exact mode for that collective.

Which MPI operation moves a kind's data is its descriptor's ``mpi_pattern``; a kind without one
(ragged-all-to-all) always runs in exact mode. Every operation is nonblocking and completed by
the control plane's ``wait``, which keeps watching for aborts. Sub-communicators are created
when the transport starts, from the groups of every collective in the module, in one global
order, before control flow can diverge.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.hlo import Opcode

from neuron_sim.interpreter.backends.mpi.exchange import as_bytes
from neuron_sim.interpreter.backends.mpi.layout import RankLayout
from neuron_sim.interpreter.collective_calls import CollectiveCall, apply_collective
from neuron_sim.semantics.collectives.descriptor import GroupReading, MpiPattern
from neuron_sim.semantics.collectives.reductions import fold_group

__all__ = ["NativeCollectives"]

_TAG_PERMUTE = 301
# MPI counts and displacements are C ints.
_MAX_BYTES = (1 << 31) - 1


def _mpi_op(reduction: Opcode | None, dtype: np.dtype):
    """The MPI operation computing ``reduction`` exactly as HLO does on ``dtype``, or None."""
    from mpi4py import MPI

    kind = np.dtype(dtype).kind
    if kind == "b":
        return {Opcode.AND: MPI.LAND, Opcode.OR: MPI.LOR, Opcode.XOR: MPI.LXOR}.get(reduction)
    if kind in "iu":
        return {Opcode.ADD: MPI.SUM, Opcode.MULTIPLY: MPI.PROD, Opcode.MAXIMUM: MPI.MAX,
                Opcode.MINIMUM: MPI.MIN, Opcode.AND: MPI.BAND, Opcode.OR: MPI.BOR,
                Opcode.XOR: MPI.BXOR}.get(reduction)
    if kind in "fc" and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64),
                                              np.dtype(np.complex64), np.dtype(np.complex128)):
        return {Opcode.ADD: MPI.SUM, Opcode.MULTIPLY: MPI.PROD}.get(reduction)
    return None


def _blocks(x: np.ndarray, n: int, dim: int) -> np.ndarray:
    """``x`` split into ``n`` blocks along ``dim``, as an array ``[n, *block_shape]``."""
    shape = x.shape
    block = shape[dim] // n
    return np.moveaxis(x.reshape(*shape[:dim], n, block, *shape[dim + 1:]), dim, 0)


class NativeCollectives:
    """MPI collectives for the groups of one rank, over cached sub-communicators."""

    def __init__(self, comm: Any, layout: RankLayout, wait: Callable[[list[Any], str], None],
                 collective_groups: Sequence[Sequence[Sequence[int]]]) -> None:
        from mpi4py import MPI

        self.mpi = MPI
        self.comm = comm
        self.layout = layout
        self.rank = comm.Get_rank()
        self._wait = wait
        self._comms: dict[tuple[int, ...], Any] = {}
        rank_sets = sorted({tuple(layout.ranks_of(group))
                            for groups in collective_groups for group in groups})
        world_group = comm.Get_group()
        for ranks in rank_sets:
            if len(ranks) > 1 and self.rank in ranks:
                self._comms[ranks] = comm.Create_group(world_group.Incl(list(ranks)))
        world_group.Free()

    def communicators(self) -> list[Any]:
        """The sub-communicators this rank belongs to."""
        return list(self._comms.values())

    # -- dispatch ------------------------------------------------------------------------------
    def supports(self, call: CollectiveCall) -> bool:
        """Whether ``call`` runs natively (otherwise the transport uses exact mode)."""
        if call.descriptor.mpi_pattern is None:
            return False
        if call.is_reduction:
            if call.variadic or call.reduction is None:
                return False
            if not all(_mpi_op(call.reduction, op.dtype) for op in call.operands):
                return False
        if any(op[:1].nbytes * max(len(g) for g in call.groups or ((),)) * 2 > _MAX_BYTES
               for op in call.operands):
            return False
        return all(self._comm_for(ranks) is not None for ranks in self._rank_sets(call))

    def run(self, call: CollectiveCall, peer_active: dict[int, tuple[int, ...]]) -> list[np.ndarray]:
        """The outputs of ``call`` (which ``supports``), by its descriptor's MPI pattern."""
        return _RUNNERS[call.descriptor.mpi_pattern](self, call)

    # -- helpers -------------------------------------------------------------------------------
    def _rank_sets(self, call: CollectiveCall) -> set[tuple[int, ...]]:
        if call.descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
            return set()
        return {tuple(self.layout.ranks_of(g)) for g in call.touching_groups(call.active)}

    def _comm_for(self, ranks: tuple[int, ...]) -> Any:
        if len(ranks) == 1:
            return "local"
        return self._comms.get(ranks)

    def _by_rank_set(self, call: CollectiveCall) -> list[tuple[tuple[int, ...], list[tuple[int, ...]]]]:
        """Groups touching this rank's devices, bucketed by the ranks they span, in one order."""
        buckets: dict[tuple[int, ...], list[tuple[int, ...]]] = defaultdict(list)
        for group in call.touching_groups(call.active):
            buckets[tuple(self.layout.ranks_of(group))].append(group)
        return sorted(buckets.items())

    def _local_fold(self, call: CollectiveCall, x: np.ndarray, group: Sequence[int],
                    row_of: dict[int, int]) -> np.ndarray:
        rows = [x[row_of[d]] for d in group if d in row_of]
        # For the reductions MPI runs natively, ``combine`` is the numpy ufunc MPI's op matches.
        return fold_group(rows, call.combine)

    # -- reductions ----------------------------------------------------------------------------
    def _reduced(self, call: CollectiveCall) -> tuple[list[dict[tuple[int, ...], np.ndarray]], list]:
        """Per operand: group -> its reduction over the whole group (started, not finished)."""
        row_of = {d: k for k, d in enumerate(call.active)}
        results: list[dict[tuple[int, ...], np.ndarray]] = []
        requests = []
        for x in call.operands:
            op = _mpi_op(call.reduction, x.dtype)
            by_group: dict[tuple[int, ...], np.ndarray] = {}
            for ranks, groups in self._by_rank_set(call):
                folds = [self._local_fold(call, x, g, row_of) for g in groups]
                buffer = folds[0][None] if len(folds) == 1 else np.stack(folds)
                if len(ranks) > 1:
                    requests.append(self._comms[ranks].Iallreduce(self.mpi.IN_PLACE, buffer, op))
                for index, group in enumerate(groups):
                    by_group[group] = buffer[index]
            results.append(by_group)
        return results, requests

    def _all_reduce(self, call: CollectiveCall) -> list[np.ndarray]:
        reduced, requests = self._reduced(call)
        self._wait(requests, f"in MPI all-reduce at {call.label}")
        outputs = []
        for x, by_group in zip(call.operands, reduced):
            if len(by_group) == 1:  # every device here holds the same result: a view
                (value,) = by_group.values()
                outputs.append(np.broadcast_to(value, x.shape))
                continue
            out = np.empty_like(x)
            for group, value in by_group.items():
                for k, d in enumerate(call.active):
                    if d in group:
                        out[k] = value
            outputs.append(out)
        return outputs

    def _reduce_scatter(self, call: CollectiveCall) -> list[np.ndarray]:
        """Local fold, then MPI Reduce_scatter delivering each rank the blocks of its positions."""
        row_of = {d: k for k, d in enumerate(call.active)}
        rank_of = self.layout.rank_of
        outputs, pending, requests = [], [], []
        for x in call.operands:
            n = len(call.groups[0])
            block_shape = (*x.shape[1:][:call.dim], x.shape[1 + call.dim] // n,
                           *x.shape[2 + call.dim:])
            out = np.empty((len(call.active), *block_shape), dtype=x.dtype)
            outputs.append(out)
            op = _mpi_op(call.reduction, x.dtype)
            for ranks, groups in self._by_rank_set(call):
                folded = [_blocks(self._local_fold(call, x, g, row_of), n, call.dim)
                          for g in groups]
                # Send order: by destination rank, then group, then position.
                order = [(gi, p) for r in ranks for gi, g in enumerate(groups)
                         for p in range(n) if rank_of(g[p]) == r]
                send = np.stack([folded[gi][p] for gi, p in order])
                mine = [(gi, p) for gi, p in order if rank_of(groups[gi][p]) == self.rank]
                if len(ranks) == 1:
                    receive = send
                else:
                    block_elements = int(np.prod(block_shape, dtype=np.int64))
                    counts = [sum(1 for gi, p in order if rank_of(groups[gi][p]) == r)
                              * block_elements for r in ranks]
                    receive = np.empty((len(mine), *block_shape), dtype=x.dtype)
                    requests.append(self._comms[ranks].Ireduce_scatter(send, receive, counts, op))
                pending.append((out, groups, mine, receive))
        self._wait(requests, f"in MPI reduce-scatter at {call.label}")
        for out, groups, mine, receive in pending:
            for k, (gi, p) in enumerate(mine):
                out[row_of[groups[gi][p]]] = receive[k]
        return outputs

    # -- data movement -------------------------------------------------------------------------
    def _all_gather(self, call: CollectiveCall) -> list[np.ndarray]:
        """MPI Allgatherv of every member's operand, then the shared all-gather semantics."""
        row_of = {d: k for k, d in enumerate(call.active)}
        rank_of = self.layout.rank_of
        gathered: list[dict[int, np.ndarray]] = []
        requests, pending = [], []
        for x in call.operands:
            rows: dict[int, np.ndarray] = {}
            gathered.append(rows)
            row_bytes = x[:1].nbytes
            for ranks, groups in self._by_rank_set(call):
                order = [d for r in ranks for g in groups for d in g if rank_of(d) == r]
                if len(ranks) == 1:
                    rows.update({d: x[row_of[d]] for d in order})
                    continue
                send = np.concatenate([as_bytes(x[row_of[d]]) for d in order
                                       if rank_of(d) == self.rank])
                counts = [sum(1 for d in order if rank_of(d) == r) * row_bytes for r in ranks]
                displacements = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
                receive = np.empty(sum(counts), dtype=np.uint8)
                requests.append(self._comms[ranks].Iallgatherv(
                    [send, self.mpi.BYTE], [receive, counts, displacements, self.mpi.BYTE]))
                pending.append((rows, order, receive, x))
        self._wait(requests, f"in MPI all-gather at {call.label}")
        for rows, order, receive, x in pending:
            values = receive.view(x.dtype).reshape(len(order), *x.shape[1:])
            rows.update({d: values[k] for k, d in enumerate(order)})
        return [self._apply_gathered(call, x, rows) for x, rows in zip(call.operands, gathered)]

    def _apply_gathered(self, call: CollectiveCall, x: np.ndarray,
                        rows: dict[int, np.ndarray]) -> np.ndarray:
        ids = sorted(rows)
        position = {d: k for k, d in enumerate(ids)}
        stack = np.stack([rows[d] for d in ids])
        groups = [tuple(position[d] for d in g) for g in call.touching_groups(call.active)]
        (out,) = apply_collective(call, [stack], groups)
        return out[[position[d] for d in call.active]]

    def _all_to_all(self, call: CollectiveCall) -> list[np.ndarray]:
        """MPI Alltoallv: block j of position i goes straight to the rank hosting position j."""
        row_of = {d: k for k, d in enumerate(call.active)}
        rank_of = self.layout.rank_of
        tuple_form = call.is_tuple_all_to_all
        n = len(call.groups[0])
        if tuple_form:
            sample = call.operands[0]
            piece_of = lambda d, j: call.operands[j][row_of[d]]  # noqa: E731
            piece_shape = sample.shape[1:]
        else:
            sample = call.operands[0]
            split = {d: _blocks(sample[row_of[d]], n, call.dim) for d in call.active}
            piece_of = lambda d, j: split[d][j]  # noqa: E731
            piece_shape = split[call.active[0]].shape[1:]
        piece_bytes = int(np.prod(piece_shape, dtype=np.int64)) * sample.dtype.itemsize
        received: dict[tuple[int, int], np.ndarray] = {}  # (source device, dest device) -> piece
        requests, pending = [], []
        for ranks, groups in self._by_rank_set(call):
            def route(source_rank: int, dest_rank: int) -> list[tuple[int, int, int]]:
                return [(g[i], g[j], j) for g in groups for i in range(n)
                        if rank_of(g[i]) == source_rank
                        for j in range(n) if rank_of(g[j]) == dest_rank]
            if len(ranks) == 1:
                for s, t, j in route(self.rank, self.rank):
                    received[(s, t)] = piece_of(s, j)
                continue
            sends = [route(self.rank, r) for r in ranks]
            recvs = [route(r, self.rank) for r in ranks]
            send = np.concatenate([as_bytes(piece_of(s, j)) for route_ in sends
                                   for s, _, j in route_] or [np.empty(0, np.uint8)])
            send_counts = [len(route_) * piece_bytes for route_ in sends]
            recv_counts = [len(route_) * piece_bytes for route_ in recvs]
            receive = np.empty(sum(recv_counts), dtype=np.uint8)
            requests.append(self._comms[ranks].Ialltoallv(
                [send, send_counts, _displacements(send_counts), self.mpi.BYTE],
                [receive, recv_counts, _displacements(recv_counts), self.mpi.BYTE]))
            pending.append(([edge for route_ in recvs for edge in route_], receive))
        self._wait(requests, f"in MPI all-to-all at {call.label}")
        for edges, receive in pending:
            pieces = receive.view(sample.dtype).reshape(len(edges), *piece_shape)
            for k, (s, t, _) in enumerate(edges):
                received[(s, t)] = pieces[k]
        group_of = {d: g for g in call.touching_groups(call.active) for d in g}
        if tuple_form:
            outputs = [np.empty_like(op) for op in call.operands]
            for k, d in enumerate(call.active):
                for i, source in enumerate(group_of[d]):
                    outputs[i][k] = received[(source, d)]
            return outputs
        out = np.empty_like(sample)
        for k, d in enumerate(call.active):
            out[k] = np.concatenate([received[(source, d)] for source in group_of[d]],
                                    axis=call.dim)
        return [out]

    def _permute(self, call: CollectiveCall) -> list[np.ndarray]:
        """Point-to-point sends along the pairs; a device that is no target gets zeros."""
        row_of = {d: k for k, d in enumerate(call.active)}
        rank_of = self.layout.rank_of
        outputs = [np.zeros_like(x) for x in call.operands]
        requests, keep = [], []
        for source, target in sorted(call.pairs):
            mine_source, mine_target = source in row_of, target in row_of
            for x, out in zip(call.operands, outputs):
                if mine_source and mine_target:
                    out[row_of[target]] = x[row_of[source]]
                elif mine_source and rank_of(target) != self.rank:
                    payload = np.ascontiguousarray(x[row_of[source]])
                    keep.append(payload)
                    requests.append(self.comm.Isend([as_bytes(payload), self.mpi.BYTE],
                                                    dest=rank_of(target), tag=_TAG_PERMUTE))
                elif mine_target and rank_of(source) != self.rank:
                    view = out[row_of[target]]
                    requests.append(self.comm.Irecv([as_bytes(view), self.mpi.BYTE],
                                                    source=rank_of(source), tag=_TAG_PERMUTE))
        self._wait(requests, f"in MPI collective-permute at {call.label}")
        return outputs

    def _broadcast(self, call: CollectiveCall) -> list[np.ndarray]:
        """MPI Bcast from the rank hosting each group's position 0."""
        row_of = {d: k for k, d in enumerate(call.active)}
        rank_of = self.layout.rank_of
        outputs = [np.empty_like(x) for x in call.operands]
        requests, pending = [], []
        for x in call.operands:
            for ranks, groups in self._by_rank_set(call):
                for group in groups:
                    root = group[0]
                    if root in row_of:
                        value = np.ascontiguousarray(x[row_of[root]])
                    else:
                        value = np.empty(x.shape[1:], dtype=x.dtype)
                    if len(ranks) > 1:
                        requests.append(self._comms[ranks].Ibcast(
                            [as_bytes(value), self.mpi.BYTE], root=ranks.index(rank_of(root))))
                    pending.append((x, group, value))
        self._wait(requests, f"in MPI collective-broadcast at {call.label}")
        index_of = {id(x): i for i, x in enumerate(call.operands)}
        for x, group, value in pending:
            out = outputs[index_of[id(x)]]
            for d in group:
                if d in row_of:
                    out[row_of[d]] = value
        return outputs


def _displacements(counts: list[int]) -> list[int]:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist() if counts else []


# The method moving each MPI pattern's data.
_RUNNERS: dict[MpiPattern, Callable[[NativeCollectives, CollectiveCall], list[np.ndarray]]] = {
    MpiPattern.ALLREDUCE: NativeCollectives._all_reduce,
    MpiPattern.REDUCE_SCATTER: NativeCollectives._reduce_scatter,
    MpiPattern.ALLGATHERV: NativeCollectives._all_gather,
    MpiPattern.ALLTOALLV: NativeCollectives._all_to_all,
    MpiPattern.SEND_RECV: NativeCollectives._permute,
    MpiPattern.BCAST: NativeCollectives._broadcast,
}
