"""Is folding an all-reduce + dynamic-slice pair into a reduce-scatter sound on a topology?

The fold replaces ``dynamic-slice(all-reduce(x), ..., offset, ...)`` by
``reduce-scatter(x)`` over the all-reduce's groups, scattering the sliced dimension. The
reduce-scatter gives the device at position i of its group block i, i.e. rows
``[i*s, (i+1)*s)``; the dynamic-slice reads rows ``[clamp(offset), clamp(offset) + s)``. Both
reduce the same group, so the fold is sound exactly when

    every group has n devices with n * s == full extent, and
    clamp(offset(d)) == position(d) * s   for every device d,

where ``clamp`` is dynamic-slice's start clamp to ``[0, full - s]`` and ``position`` comes from
the all-reduce's group mode (docs/semantics.md §2). The first condition is checked directly, the
second by z3 over a symbolic device (r, p) of the topology: UNSAT of its negation proves it, a
model is a device that reads the wrong shard — the smallest flattened id is reported.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any, Callable


from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.topology import (GroupMode, Topology, group_mode, participant_groups,
                                 validate_replica_groups)
from neuron_sim.proofs.index import int_semantics as sem
from neuron_sim.proofs.index.ar_ds_pairs import ArDsPair, find_ar_ds_pairs
from neuron_sim.proofs.index.index_encoding import DeviceCoordinates, IndexEncoder, OutsideSubLanguage
from neuron_sim.lazy import LazyModule

z3 = LazyModule("z3")


class FoldStatus(str, enum.Enum):
    """The fold proof's verdict on one all-reduce + dynamic-slice pair."""

    PROVEN = "PROVEN"                    # sound on every device
    REFUTED = "REFUTED"                  # a device reads the wrong shard (witness given)
    FAILED_TO_PROVE = "FAILED_TO_PROVE"  # the offset leaves the sub-language, or z3 gave up

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Witness:
    """A device on which the dynamic-slice and the reduce-scatter disagree.

    ``offset`` is the start index the program computes there (None when the refutation is
    structural), ``clamped`` the row the dynamic-slice reads from, ``expected`` the first row of
    the device's reduce-scatter block (``position * s``).
    """

    device: int
    replica: int
    partition: int
    position: int
    group: tuple[int, ...]
    expected: int
    offset: int | None = None
    clamped: int | None = None

    def describe(self) -> str:
        text = f"device {self.device} (replica {self.replica}, partition {self.partition})"
        text += f" at position {self.position} of group {_short(self.group)}"
        if self.offset is None:
            return text
        read = f"{self.offset}" if self.offset == self.clamped else \
            f"{self.offset}, clamped to {self.clamped}"
        return text + f" reads rows from {read} but its reduce-scatter block starts at " \
                      f"{self.expected}"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "replica": self.replica, "partition": self.partition,
                "position": self.position, "group": list(self.group),
                "expected_start": self.expected, "offset": self.offset,
                "clamped_start": self.clamped}


def _short(group: tuple[int, ...], limit: int = 8) -> str:
    inner = ",".join(map(str, group[:limit])) + (",..." if len(group) > limit else "")
    return "{" + inner + "}"


@dataclass
class FoldProof:
    """The verdict on one pair for one topology."""

    pair: ArDsPair
    topology: Topology
    status: FoldStatus
    reason: str
    group_mode: GroupMode | None = None
    witness: Witness | None = None
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def proven(self) -> bool:
        return self.status is FoldStatus.PROVEN

    def describe(self) -> str:
        text = f"{self.status}: {self.pair.name}: {self.reason}"
        if self.witness is not None:
            text += f"; witness: {self.witness.describe()}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "dynamic_slice": self.pair.dynamic_slice.name,
            "all_reduce": self.pair.all_reduce.name,
            "calls": [caller.name for caller in self.pair.path],
            "slice_dim": self.pair.slice_dim, "slice_size": self.pair.slice_size,
            "extent": self.pair.full, "topology": str(self.topology),
            "group_mode": str(self.group_mode) if self.group_mode else None,
            "status": str(self.status), "reason": self.reason,
            "witness": self.witness.to_json() if self.witness else None,
            "seconds": round(self.seconds, 4), **self.details,
        }


def pair_group_mode(pair: ArDsPair) -> GroupMode:
    ar = pair.all_reduce
    return group_mode(ar.opcode.spelling, ar.channel_id is not None, ar.use_global_device_ids)


def pair_groups(pair: ArDsPair, topology: Topology) -> tuple[tuple[int, ...], ...]:
    """The all-reduce's participant groups (flattened ids), checked as XLA's verifier does.

    Raises ValueError for groups that do not fit the topology, naming the all-reduce.
    """
    ar = pair.all_reduce
    try:
        mode = pair_group_mode(pair)
        groups = ar.replica_groups or ReplicaGroups()
        validate_replica_groups(mode, groups, topology, uniform_required=False)
        return participant_groups(mode, groups, topology)
    except ValueError as exc:
        raise ValueError(f"%{ar.name} cannot run on topology {topology} "
                         f"({topology.num_devices} devices): {exc}") from None


def prove_pair(pair: ArDsPair, topology: Topology, *, timeout_ms: int = 120_000) -> FoldProof:
    """Prove or refute the fold of ``pair`` on every device of ``topology``.

    Raises ValueError when the all-reduce's groups are invalid for the topology (bad input,
    not a verdict).
    """
    started = time.perf_counter()
    mode = pair_group_mode(pair)
    groups = pair_groups(pair, topology)
    proof = _prove(pair, topology, mode, groups, timeout_ms)
    proof.seconds = time.perf_counter() - started
    return proof


def _prove(pair: ArDsPair, topology: Topology, mode: GroupMode,
           groups: tuple[tuple[int, ...], ...], timeout_ms: int) -> FoldProof:
    s, full = pair.slice_size, pair.full
    position = [0] * topology.num_devices
    group_of: list[tuple[int, ...]] = [()] * topology.num_devices
    for group in groups:
        for i, f in enumerate(group):
            position[f], group_of[f] = i, group
    for group in groups:
        if len(group) * s != full:
            f = group[0]
            r, p = topology.replica_partition(f)
            reason = (f"a group of {len(group)} devices times the {s}-long shard is "
                      f"{len(group) * s}, not the extent {full} of dimension {pair.slice_dim}: "
                      "no reduce-scatter gives each device this dynamic-slice's shard")
            return FoldProof(pair, topology, FoldStatus.REFUTED, reason, mode,
                             Witness(f, r, p, 0, group, 0))
    device = DeviceCoordinates.of_topology(topology)
    try:
        offset = IndexEncoder(device).encode(pair.start_index, pair.path)
    except OutsideSubLanguage as exc:
        return FoldProof(pair, topology, FoldStatus.FAILED_TO_PROVE, str(exc), mode)
    clamped = sem.clamp_start_index(offset.term, offset.etype, full - s)
    expected = device.lookup(topology, [i * s for i in position], sem.WIDE)

    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*device.constraints)
    solver.add(clamped != expected)
    value_at, low = _first_witness(z3.And(*solver.assertions()), device, topology)
    if value_at is None:
        verdict = solver.check()
        if verdict == z3.unsat:
            return FoldProof(pair, topology, FoldStatus.PROVEN,
                             f"clamp(offset) == position * {s} on all {topology.num_devices} "
                             f"devices ({mode})", mode)
        if verdict == z3.unknown:
            return FoldProof(pair, topology, FoldStatus.FAILED_TO_PROVE,
                             f"z3 gave up: {solver.reason_unknown()}", mode)
        value_at = _smallest_witness(solver, device, topology, low)
    r = value_at(device.replica).as_long()
    p = value_at(device.partition).as_long()
    f = topology.flattened_id(r, p)
    raw = sem.to_python_int(value_at(offset.term), offset.etype)
    read = value_at(clamped).as_long()
    witness = Witness(f, r, p, position[f], group_of[f], position[f] * s, raw, read)
    return FoldProof(pair, topology, FoldStatus.REFUTED,
                     f"a device reads the wrong shard ({mode})", mode, witness)


Evaluation = Callable[["z3.ExprRef"], "z3.ExprRef"]  # strings: reading z3 here would import it


def _first_witness(assertions: z3.BoolRef, device: DeviceCoordinates, topology: Topology
                   ) -> tuple[Evaluation | None, int]:
    """The first ``SCANNED_DEVICES`` ids tried in order, where witnesses usually are (device
    0 or 1 in most refutations): ``assertions`` evaluated on each device (its coordinates
    substituted and the ground term simplified, which evaluates it exactly) instead of a
    solver call. Returns the value of a term on the first witness (None if there is none
    among them) and the number of ids known not to be witnesses."""
    partitions = topology.num_partitions
    for low in range(min(topology.num_devices, SCANNED_DEVICES)):
        r, p = divmod(low, partitions)
        at = ((device.replica, z3.BitVecVal(r, 32)), (device.partition, z3.BitVecVal(p, 32)))
        value = z3.simplify(z3.substitute(assertions, *at))
        if z3.is_true(value):
            return (lambda term: z3.simplify(z3.substitute(term, *at))), low
        if not z3.is_false(value):
            return None, low  # not evaluated to a constant: leave it to the solver
    return None, min(topology.num_devices, SCANNED_DEVICES)


def _smallest_witness(solver: z3.Solver, device: DeviceCoordinates, topology: Topology,
                      low: int) -> Evaluation:
    """The value of a term on the witness device with the smallest flattened id, after a
    satisfiable check of ``solver``: a binary search on the id from ``low`` (every id below
    it is known not to be a witness) with the solver's models."""
    flattened = device.flattened_id(topology)
    model = solver.model()
    best = model.eval(flattened, model_completion=True).as_long()
    while low < best:
        middle = (low + best) // 2
        result = solver.check(z3.ULE(flattened, middle))
        if result == z3.sat:
            model = solver.model()
            best = model.eval(flattened, model_completion=True).as_long()
        elif result == z3.unsat:
            low = middle + 1
        else:
            break  # z3 gave up: keep the smallest witness found so far
    return lambda term: model.eval(term, model_completion=True)


SCANNED_DEVICES = 16


def prove_module(module: HloModule, topology: Topology | None = None) -> list[FoldProof]:
    """A proof for every all-reduce + dynamic-slice pair of ``module``.

    ``topology`` defaults to the module header's replica and partition counts.
    """
    topology = topology or Topology(module.replica_count, module.num_partitions)
    return [prove_pair(pair, topology) for pair in find_ar_ds_pairs(module)]
