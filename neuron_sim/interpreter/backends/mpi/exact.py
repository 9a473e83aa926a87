"""Exact mode: every rank gathers the inputs its devices need and applies the shared semantics.

The results are bit-identical to the local backend by construction: after the exchange each rank
holds, for every participant group one of its devices belongs to, the inputs of all the devices
that group needs, stacked in a compact array, and it calls the very same data function of the
kind's descriptor on it (same group order, same positions, hence the same left-fold reduction
order). Only the rows of its own devices are kept.

What a device needs is its descriptor's ``dependence``: the whole group (all-gather,
all-to-all, ragged-all-to-all), the source of the pair targeting it (collective-permute), or
position 0 of its group (collective-broadcast).

The reductions (all-reduce, reduce-scatter) split the work instead of repeating it: the elements
of each group's operand are cut into one contiguous chunk per rank the group spans; every rank
receives its chunk from all members, folds it with ``reductions.fold_group`` in position order,
and sends the folded chunk back to the group's other ranks. Since the reduction is elementwise,
every element still sees exactly the fold of the local backend, while each rank moves and folds
only its share, as a ring all-reduce would.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from neuron_sim.interpreter.backends.mpi.exchange import ArraySpec, Exchange
from neuron_sim.interpreter.backends.mpi.layout import RankLayout
from neuron_sim.interpreter.collective_calls import CollectiveCall, apply_collective
from neuron_sim.semantics.collectives.descriptor import Dependence
from neuron_sim.semantics.collectives.reductions import fold_group

__all__ = ["exact_collective", "exact_reduction", "needed_devices"]


def needed_devices(call: CollectiveCall, devices: Sequence[int]) -> set[int]:
    """The devices whose inputs the results of ``devices`` depend on."""
    wanted = set(devices)
    dependence = call.descriptor.dependence
    if dependence is Dependence.PAIR_SOURCE:
        return {s for s, t in call.pairs if t in wanted}
    groups = call.touching_groups(devices)
    if dependence is Dependence.GROUP_ROOT:
        return {g[0] for g in groups}
    return {d for g in groups for d in g}


def exact_collective(call: CollectiveCall, exchange: Exchange, layout: RankLayout,
                     peer_active: dict[int, tuple[int, ...]]) -> list[np.ndarray]:
    """The collective's outputs for ``call.active``, bit-identical to the local backend."""
    if call.is_reduction:
        return exact_reduction(call, exchange, layout, peer_active)
    active = call.active
    mine = set(active)
    needed = needed_devices(call, active)
    if needed <= mine and not any(needed_devices(call, their) & mine
                                  for their in peer_active.values()):
        return _apply_in_place(call)
    specs = [ArraySpec(op.shape[1:], op.dtype) for op in call.operands]
    sends: dict[int, list[np.ndarray]] = {}
    receives: dict[int, list[ArraySpec]] = {}
    from_peer: dict[int, list[int]] = {}
    row_of = {d: k for k, d in enumerate(active)}
    for peer, their_active in peer_active.items():
        hosted = set(layout.hosted(peer))
        wanted = sorted(needed & hosted)
        if wanted:
            from_peer[peer] = wanted
            receives[peer] = [ArraySpec((len(wanted), *s.shape), s.dtype) for s in specs]
        given = sorted(needed_devices(call, their_active) & mine)
        if given:
            index = np.asarray([row_of[d] for d in given], dtype=np.int64)
            sends[peer] = [op[index] for op in call.operands]
    received = exchange.swap(sends, receives) if (sends or receives) else {}

    ids = sorted(mine | needed)
    position = {d: k for k, d in enumerate(ids)}
    stacks = []
    for i, operand in enumerate(call.operands):
        stack = np.empty((len(ids), *operand.shape[1:]), dtype=operand.dtype)
        stack[[position[d] for d in active]] = operand
        for peer, devices in from_peer.items():
            stack[[position[d] for d in devices]] = received[peer][i]
        stacks.append(stack)
    outputs = _apply(call, stacks, position)
    rows = np.asarray([position[d] for d in active], dtype=np.int64)
    return [out[rows] for out in outputs]


def _apply(call: CollectiveCall, stacks: list[np.ndarray],
           position: dict[int, int]) -> list[np.ndarray]:
    """Call the shared semantics on compact stacks whose row ``position[d]`` is device d."""
    dependence = call.descriptor.dependence
    if dependence is Dependence.PAIR_SOURCE:
        mine = set(call.active)
        pairs = [(position[s], position[t]) for s, t in call.pairs if t in mine]
        return apply_collective(call, stacks, (), pairs)
    groups = call.touching_groups(call.active)
    if dependence is Dependence.GROUP_ROOT:
        mine = set(call.active)
        local = [(position[g[0]], *[position[d] for d in g[1:] if d in mine]) for g in groups]
    else:
        local = [tuple(position[d] for d in g) for g in groups]
    return apply_collective(call, stacks, local)


def _apply_in_place(call: CollectiveCall) -> list[np.ndarray]:
    """Every needed input is on this rank: apply the semantics to the operands as they are."""
    position = {d: k for k, d in enumerate(call.active)}
    return _apply(call, list(call.operands), position)


def exact_reduction(call: CollectiveCall, exchange: Exchange, layout: RankLayout,
                    peer_active: dict[int, tuple[int, ...]]) -> list[np.ndarray]:
    """All-reduce or reduce-scatter with the fold split by element chunks across ranks."""
    me = exchange.rank
    row_of = {d: k for k, d in enumerate(call.active)}
    operands = [np.ascontiguousarray(op).reshape(len(call.active), -1) for op in call.operands]
    size = operands[0].shape[1]
    groups = call.touching_groups(call.active)
    spans = [layout.ranks_of(g) for g in groups]

    def bounds(ranks: list[int], rank: int) -> tuple[int, int]:
        k = ranks.index(rank)
        return size * k // len(ranks), size * (k + 1) // len(ranks)

    # Phase 1: every rank receives its chunk of every member of each group it spans.
    sends: dict[int, list[np.ndarray]] = {}
    receives: dict[int, list[ArraySpec]] = {}
    for group, ranks in zip(groups, spans):
        lo, hi = bounds(ranks, me)
        for peer in ranks:
            if peer == me:
                continue
            plo, phi = bounds(ranks, peer)
            for d in group:
                if d in row_of:
                    sends.setdefault(peer, []).extend(op[row_of[d], plo:phi] for op in operands)
                elif layout.rank_of(d) == peer:
                    receives.setdefault(peer, []).extend(
                        ArraySpec((hi - lo,), op.dtype) for op in operands)
    received = exchange.swap(sends, receives, f"exchanging chunks at {call.label}")
    cursor = {peer: 0 for peer in received}

    def take(peer: int) -> np.ndarray:
        value = received[peer][cursor[peer]]
        cursor[peer] += 1
        return value

    folded: list[list[np.ndarray]] = []  # per group, per operand: this rank's folded chunk
    for group, ranks in zip(groups, spans):
        lo, hi = bounds(ranks, me)
        columns = []
        for d in group:
            if d in row_of:
                columns.append(tuple(op[row_of[d], lo:hi] for op in operands))
            else:
                columns.append(tuple(take(layout.rank_of(d)) for _ in operands))
        folded.append(_fold_chunk(call, columns, operands))

    # Phase 2: the folded chunks go to the group's other ranks, straight into place.
    reduced_of: list[list[np.ndarray]] = []  # per group, per operand: the flat reduction
    sends, receives = {}, {}
    for group, ranks, chunks in zip(groups, spans, folded):
        lo, hi = bounds(ranks, me)
        arrays = []
        for chunk, operand in zip(chunks, operands):
            reduced = np.empty(size, dtype=operand.dtype)
            reduced[lo:hi] = chunk
            arrays.append(reduced)
        reduced_of.append(arrays)
        for peer in ranks:
            if peer == me:
                continue
            plo, phi = bounds(ranks, peer)
            sends.setdefault(peer, []).extend(chunks)
            receives.setdefault(peer, []).extend(array[plo:phi] for array in arrays)
    exchange.swap(sends, receives, f"sharing folded chunks at {call.label}")

    shapes = [op.shape[1:] for op in call.operands]
    scatters = call.descriptor.scatters
    if not scatters and len(groups) == 1:
        # Every device here holds the same result: a broadcast view, no copies.
        return [np.broadcast_to(reduced.reshape(shape), (len(call.active), *shape))
                for reduced, shape in zip(reduced_of[0], shapes)]
    if not scatters:
        outputs = [np.empty((len(call.active), *shape), dtype=op.dtype)
                   for shape, op in zip(shapes, call.operands)]
    else:
        n = len(groups[0])
        outputs = [np.empty((len(call.active), *_block_shape(shape, n, call.dim)), dtype=op.dtype)
                   for shape, op in zip(shapes, call.operands)]
    for group, arrays in zip(groups, reduced_of):
        for i, (reduced, shape) in enumerate(zip(arrays, shapes)):
            reduced = reduced.reshape(shape)
            for k, d in enumerate(call.active):
                if d not in group:
                    continue
                if not scatters:
                    outputs[i][k] = reduced
                else:
                    outputs[i][k] = _block(reduced, len(group), call.dim, group.index(d))
    return outputs


def _fold_chunk(call: CollectiveCall, columns: list[tuple[np.ndarray, ...]],
                operands: list[np.ndarray]) -> list[np.ndarray]:
    """Fold one chunk over the group's positions with the shared reduction order."""
    if call.variadic:
        result = fold_group(columns, call.combine)
    else:
        result = [fold_group([c[i] for c in columns], call.combine)
                  for i in range(len(operands))]
    return [np.asarray(r).astype(op.dtype, copy=False).reshape(-1)
            for r, op in zip(result, operands)]


def _block_shape(shape: tuple[int, ...], n: int, dim: int) -> tuple[int, ...]:
    if shape[dim] % n:
        raise ValueError(f"reduce-scatter dimension {dim} has size {shape[dim]}, which the "
                         f"group size {n} does not divide")
    return (*shape[:dim], shape[dim] // n, *shape[dim + 1:])


def _block(value: np.ndarray, n: int, dim: int, index: int) -> np.ndarray:
    block = _block_shape(value.shape, n, dim)[dim]
    return value[(slice(None),) * dim + (slice(index * block, (index + 1) * block),)]
