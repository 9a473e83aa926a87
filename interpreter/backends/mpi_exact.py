"""Exact mode: every rank gathers the inputs its devices need and applies the shared semantics.

The results are bit-identical to the local backend by construction: after the exchange each rank
holds, for every participant group one of its devices belongs to, the inputs of all the devices
that group needs, stacked in a compact array, and it calls the very same function of
``interpreter.collectives`` on it (same group order, same positions, hence the same left-fold
reduction order). Only the rows of its own devices are kept.

What a device needs: the whole group for the reductions, all-gather and all-to-all; its source
for collective-permute; position 0 of its group for collective-broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from interpreter import collectives
from interpreter.backends.mpi_exchange import ArraySpec, Exchange
from interpreter.backends.mpi_layout import RankLayout

__all__ = ["CollectiveCall", "KINDS", "exact_collective", "needed_devices"]

KINDS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "all-to-all-tuple",
         "collective-permute", "collective-broadcast")


@dataclass
class CollectiveCall:
    """One collective as the transport sees it, on the devices of this rank that reached it.

    ``operands[i]`` is stacked over ``active`` (row k is the value on flattened device
    ``active[k]``). ``groups`` are the ordered participant groups (flattened ids) of the whole
    topology; for collective-permute they are the groups whose members must all arrive, and
    ``pairs`` are the flattened (source, target) pairs. ``combine`` is the elementwise reduction
    (``combine_many`` semantics when ``variadic``). ``replicated`` says every operand is the same
    on every device of the topology, which lets two ranks that both know it skip sending rows.
    """

    kind: str
    operands: list[np.ndarray]
    active: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    dim: int | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    combine: Callable[..., Any] | None = None
    variadic: bool = False
    replicated: bool = False
    label: str = ""
    reduction: str | None = field(default=None)  # "add", "multiply"... when recognised

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown collective kind {self.kind!r}")
        for index, operand in enumerate(self.operands):
            if operand.shape[:1] != (len(self.active),):
                raise ValueError(
                    f"operand {index} of {self.label or self.kind} is stacked over "
                    f"{operand.shape[0] if operand.ndim else 0} devices, but "
                    f"{len(self.active)} devices arrived")

    def touching_groups(self, devices: Sequence[int]) -> list[tuple[int, ...]]:
        """The groups that contain one of ``devices``, in group order."""
        wanted = set(devices)
        return [g for g in self.groups if not wanted.isdisjoint(g)]


def needed_devices(call: CollectiveCall, devices: Sequence[int]) -> set[int]:
    """The devices whose inputs the results of ``devices`` depend on."""
    wanted = set(devices)
    if call.kind == "collective-permute":
        return {s for s, t in call.pairs if t in wanted}
    groups = call.touching_groups(devices)
    if call.kind == "collective-broadcast":
        return {g[0] for g in groups}
    return {d for g in groups for d in g}


def exact_collective(call: CollectiveCall, exchange: Exchange, layout: RankLayout,
                     peer_active: dict[int, tuple[int, ...]],
                     peer_replicated: dict[int, bool]) -> list[np.ndarray]:
    """The collective's outputs for ``call.active``, bit-identical to the local backend."""
    me = exchange.rank
    active = call.active
    mine = set(active)
    needed = needed_devices(call, active)
    specs = [ArraySpec(op.shape[1:], op.dtype) for op in call.operands]
    # Rows come from peers that are not both replicated with us; the others we can copy.
    sends: dict[int, list[np.ndarray]] = {}
    receives: dict[int, list[ArraySpec]] = {}
    from_peer: dict[int, list[int]] = {}
    row_of = {d: k for k, d in enumerate(active)}
    for peer, their_active in peer_active.items():
        if call.replicated and peer_replicated.get(peer, False):
            continue
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
    if call.replicated:
        # Devices of replicated peers that sent nothing hold the value every device holds.
        missing = [position[d] for d in ids if d not in mine
                   and not any(d in devices for devices in from_peer.values())]
        if missing:
            for stack, operand in zip(stacks, call.operands):
                stack[missing] = operand[0]
    outputs = _apply(call, stacks, position)
    rows = np.asarray([position[d] for d in active], dtype=np.int64)
    return [out[rows] for out in outputs]


def _apply(call: CollectiveCall, stacks: list[np.ndarray],
           position: dict[int, int]) -> list[np.ndarray]:
    """Call the shared semantics on compact stacks whose row ``position[d]`` is device d."""
    kind = call.kind
    if kind == "collective-permute":
        mine = set(call.active)
        pairs = [(position[s], position[t]) for s, t in call.pairs if t in mine]
        return [collectives.collective_permute(stack, pairs) for stack in stacks]
    groups = call.touching_groups(call.active)
    if kind == "collective-broadcast":
        mine = set(call.active)
        local = [(position[g[0]], *[position[d] for d in g[1:] if d in mine]) for g in groups]
        return [collectives.collective_broadcast(stack, local) for stack in stacks]
    local = [tuple(position[d] for d in g) for g in groups]
    if kind == "all-reduce":
        if call.variadic:
            return list(collectives.all_reduce_variadic(stacks, local, call.combine))
        return [collectives.all_reduce(stack, local, call.combine) for stack in stacks]
    if kind == "reduce-scatter":
        return [collectives.reduce_scatter(stack, local, call.dim, call.combine)
                for stack in stacks]
    if kind == "all-gather":
        return [collectives.all_gather(stack, local, call.dim) for stack in stacks]
    if kind == "all-to-all":
        return [collectives.all_to_all(stack, local, call.dim) for stack in stacks]
    return list(collectives.all_to_all_tuple(stacks, local))
