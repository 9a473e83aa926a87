"""Device topology and who talks to whom in a collective.

A module runs on ``replica_count`` x ``num_partitions`` devices. Device (r, p) has the flattened
id ``f = r * P + p`` and the physical id ``device_assignment[r][p]``. Every collective names its
peers through replica groups whose ids mean replicas, partitions or flattened ids depending on
its *group mode*; this module turns (mode, groups, topology) into the ordered list of flattened
device ids each device exchanges data with, and checks groups the way XLA's verifier does.

The functions here are pure and cached: the interpreter asks for the participants of every
device of every collective, so the per-call cost is a table lookup.
"""

from __future__ import annotations

import enum
import functools
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.int_lists import IntGroups, ReplicaGroupError, format_int_lists, parse_int_lists
from neuron_sim.hlo.opcodes import Opcode

if TYPE_CHECKING:  # these load with a module's first collective, not with the topology
    from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs
    from neuron_sim.semantics.collectives.descriptor import GroupModeRow


class TopologyError(UserError):
    """A topology, device assignment or group mode that does not fit (one sentence)."""


# --------------------------------------------------------------------------------------------
# Group modes.


class GroupMode(enum.Enum):
    """XLA's CollectiveOpGroupMode: what the ids in a collective's replica groups mean."""

    CROSS_REPLICA = "CrossReplica"
    CROSS_PARTITION = "CrossPartition"
    CROSS_REPLICA_AND_PARTITION = "CrossReplicaAndPartition"
    FLATTENED_ID = "FlattenedID"

    @property
    def xla_name(self) -> str:
        """The C++ enumerator name, e.g. ``kCrossReplica``."""
        return "k" + self.value

    def __str__(self) -> str:
        return self.value


def group_mode(
    opcode: str, has_channel_id: bool, use_global_device_ids: bool = False
) -> GroupMode:
    """The group mode XLA derives from the opcode, channel_id presence and use_global_device_ids.

    ``opcode`` is the HLO text spelling (anything whose ``str`` is the spelling works); its row
    of the table in docs/semantics.md §2 is its collective descriptor's ``group_mode_row``.
    Raises ValueError for an opcode that is not a collective and for combinations XLA rejects.
    """
    from neuron_sim.semantics.collectives.descriptor import GroupModeRow

    name = str(opcode)
    row = _group_mode_row(name)
    if row is GroupModeRow.GLOBAL_DEVICE_IDS:
        if use_global_device_ids:
            if not has_channel_id:
                raise TopologyError(
                    f"{name} with use_global_device_ids=true must also have a channel_id"
                )
            return GroupMode.FLATTENED_ID
        return GroupMode.CROSS_REPLICA_AND_PARTITION if has_channel_id else GroupMode.CROSS_REPLICA
    if row is GroupModeRow.CHANNEL_ONLY:
        if use_global_device_ids:
            raise TopologyError(f"{name} has no use_global_device_ids attribute")
        return GroupMode.CROSS_PARTITION if has_channel_id else GroupMode.CROSS_REPLICA
    raise TopologyError(f"{name!r} is not a collective, so it has no group mode")


def _group_mode_row(spelling: str) -> GroupModeRow | None:
    """The group-mode row of the collective opcode spelled ``spelling`` (its sync op or async
    start); None for anything else. The descriptors are imported here, on the first
    collective: a program without one never loads them."""
    from neuron_sim.semantics.collectives.kinds import descriptor_of

    try:
        opcode = Opcode.from_spelling(spelling)
    except KeyError:
        return None
    descriptor = descriptor_of(opcode)
    if descriptor is None or opcode not in descriptor.opcodes:
        return None
    return descriptor.group_mode_row


# --------------------------------------------------------------------------------------------
# Topology.


@dataclass(frozen=True)
class Topology:
    """``replica_count`` x ``num_partitions`` devices and their physical ids.

    ``device_assignment[r][p]`` is the physical id of replica r, partition p. None means XLA's
    default, partition-major assignment ``p * replica_count + r``; an assignment equal to the
    default is stored as None so that equal topologies compare equal.
    """

    replica_count: int = 1
    num_partitions: int = 1
    device_assignment: tuple[tuple[int, ...], ...] | None = None
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        replicas = _positive_int(self.replica_count, "replica_count")
        partitions = _positive_int(self.num_partitions, "num_partitions")
        assignment = self.device_assignment
        if assignment is not None:
            assignment = _checked_assignment(assignment, replicas, partitions)
            if assignment == self.default_device_assignment(replicas, partitions):
                assignment = None
        object.__setattr__(self, "replica_count", replicas)
        object.__setattr__(self, "num_partitions", partitions)
        object.__setattr__(self, "device_assignment", assignment)
        # Assignments can be large and topologies are cache keys; hash once.
        object.__setattr__(self, "_hash", hash((replicas, partitions, assignment)))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def default_device_assignment(replica_count: int, num_partitions: int) -> IntGroups:
        """XLA's default assignment: device (r, p) is physical id ``p * replica_count + r``."""
        return tuple(
            tuple(p * replica_count + r for p in range(num_partitions))
            for r in range(replica_count)
        )

    @property
    def num_devices(self) -> int:
        return self.replica_count * self.num_partitions

    @functools.cached_property
    def flattened_ids(self) -> np.ndarray:
        """The flattened ids ``0 .. num_devices - 1`` as a read-only int64 array, made once
        (every execute runs its entry for all of them)."""
        ids = np.arange(self.num_devices, dtype=np.int64)
        ids.flags.writeable = False
        return ids

    @functools.cached_property
    def device_ids(self) -> np.ndarray:
        """Physical ids as a read-only (replica_count, num_partitions) int64 array."""
        assignment = self.device_assignment or self.default_device_assignment(
            self.replica_count, self.num_partitions
        )
        ids = np.array(assignment, dtype=np.int64).reshape(self.replica_count, self.num_partitions)
        ids.flags.writeable = False
        return ids

    @functools.cached_property
    def _flattened_of_physical(self) -> dict[int, int]:
        return {int(dev): f for f, dev in enumerate(self.device_ids.ravel())}

    def flattened_id(self, replica: int, partition: int) -> int:
        """``replica * num_partitions + partition``."""
        if not 0 <= replica < self.replica_count:
            raise TopologyError(f"replica {replica} is out of range for {self.replica_count} replicas")
        if not 0 <= partition < self.num_partitions:
            raise TopologyError(
                f"partition {partition} is out of range for {self.num_partitions} partitions"
            )
        return replica * self.num_partitions + partition

    def replica_partition(self, flattened_id: int) -> tuple[int, int]:
        """The (replica, partition) of a flattened id."""
        self._check_flattened(flattened_id)
        return divmod(flattened_id, self.num_partitions)

    def physical_id(self, flattened_id: int) -> int:
        """The physical device id of a flattened id."""
        self._check_flattened(flattened_id)
        return int(self.device_ids.flat[flattened_id])

    def flattened_from_physical(self, device: int) -> int:
        """The flattened id of a physical device id."""
        try:
            return self._flattened_of_physical[device]
        except KeyError:
            raise TopologyError(f"physical device {device} is not in the device assignment") from None

    def _check_flattened(self, flattened_id: int) -> None:
        if not 0 <= flattened_id < self.num_devices:
            raise TopologyError(
                f"flattened device id {flattened_id} is out of range for {self.num_devices} "
                f"devices ({self})"
            )

    def __str__(self) -> str:
        text = f"{self.replica_count}x{self.num_partitions}"
        if self.device_assignment is not None:
            text += " da=" + format_int_lists(self.device_assignment)
        return text

    @classmethod
    def parse(cls, text: str) -> Topology:
        """Parse the CLI spelling ``RxP`` (e.g. ``2x4``), optionally followed by ``da={{...}}``.

        This is the inverse of ``str``.
        """
        match = re.fullmatch(_TOPOLOGY_RE, text, re.DOTALL)
        if match is None:
            raise TopologyError(
                f"topology {text!r} is not of the form RxP (replicas x partitions), e.g. 2x4, "
                "optionally followed by da={{...}}"
            )
        assignment = None
        if match["da"] is not None:
            assignment = parse_device_assignment(match["da"])
        return cls(int(match["r"]), int(match["p"]), assignment)

    def with_device_assignment_text(self, text: str) -> Topology:
        """This topology with the device assignment spelled ``{{33,34},{44,45},{55,56}}``."""
        return Topology(self.replica_count, self.num_partitions, parse_device_assignment(text))


# Read with re.DOTALL by Topology.parse, compiled on its first use (re's cache).
_TOPOLOGY_RE = r"\s*(?P<r>\d+)\s*[xX]\s*(?P<p>\d+)\s*(?:da\s*=\s*(?P<da>\{.*\}))?\s*"


def parse_device_assignment(text: str) -> IntGroups:
    """Parse ``{{33,34},{44,45},{55,56}}``: one row per replica, one column per partition."""
    try:
        rows = parse_int_lists(text, "device assignment")
    except ReplicaGroupError as error:
        raise TopologyError(
            f"malformed device assignment {text!r} at character {error.offset}: {error}"
        ) from None
    if not rows:
        raise TopologyError("a device assignment needs at least one row (replica)")
    for r, row in enumerate(rows):
        if len(row) != len(rows[0]):
            raise TopologyError(
                f"device assignment row {r} has {len(row)} devices but row 0 has {len(rows[0])}; "
                "every replica needs one device per partition"
            )
    return rows


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise TopologyError(f"{name} must be a positive integer, not a bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TopologyError(f"{name} must be a positive integer, not {value!r}") from None
    if number <= 0:
        raise TopologyError(f"{name} must be a positive integer, not {number}")
    return number


def _checked_assignment(assignment: object, replicas: int, partitions: int) -> IntGroups:
    try:
        rows = tuple(tuple(operator.index(d) for d in row) for row in assignment)  # type: ignore
    except TypeError:
        raise TopologyError("a device assignment is rows (replicas) of integer device ids") from None
    if len(rows) != replicas:
        raise TopologyError(
            f"the device assignment has {len(rows)} rows but there are {replicas} replicas"
        )
    seen: set[int] = set()
    for r, row in enumerate(rows):
        if len(row) != partitions:
            raise TopologyError(
                f"device assignment row {r} has {len(row)} devices but there are "
                f"{partitions} partitions"
            )
        for device in row:
            if device < 0:
                raise TopologyError(f"physical device id {device} is negative")
            if device in seen:
                raise TopologyError(
                    f"physical device {device} appears twice in the device assignment"
                )
            seen.add(device)
    return rows


# --------------------------------------------------------------------------------------------
# Participants.


def _id_space(mode: GroupMode, topology: Topology) -> tuple[int, str, str]:
    """How many ids the groups of ``mode`` range over, the id noun and the count in words."""
    if mode is GroupMode.CROSS_PARTITION:
        n = topology.num_partitions
        return n, "partition", f"{n} partition{'s' * (n != 1)}"
    if mode is GroupMode.FLATTENED_ID:
        n = topology.num_devices
        return n, "flattened device", (
            f"{n} device{'s' * (n != 1)} ({topology.replica_count} replicas x "
            f"{topology.num_partitions} partitions)"
        )
    n = topology.replica_count
    return n, "replica", f"{n} replica{'s' * (n != 1)}"


def _reject_empty_groups_in_flattened_id_mode(mode: GroupMode) -> None:
    if mode is GroupMode.FLATTENED_ID:
        raise ReplicaGroupError(
            "replica_groups cannot be empty ({}) in FlattenedID mode (use_global_device_ids=true)"
        )


def _id_groups(
    mode: GroupMode, replica_groups: ReplicaGroups | None, topology: Topology
) -> IntGroups:
    """The groups in the mode's ids, with ``{}`` expanded; ids must be in range and distinct."""
    n, noun, count = _id_space(mode, topology)
    if replica_groups is None or replica_groups.is_empty:
        _reject_empty_groups_in_flattened_id_mode(mode)
        return (tuple(range(n)),)
    seen: set[int] = set()
    for group in replica_groups.groups:
        for i in group:
            if not 0 <= i < n:
                raise ReplicaGroupError(
                    f"{noun} id {i} in replica_groups is out of range: there are {count}"
                )
            if i in seen:
                raise ReplicaGroupError(f"{noun} id {i} appears more than once in replica_groups")
            seen.add(i)
    return replica_groups.groups


class _Layout:
    """Participant groups plus, per flattened id, its group index (-1: none) and position.
    (A plain class, never changed after ``_layout`` makes it: a dataclass costs every
    start-up its creation.)"""

    __slots__ = ("groups", "group_of", "position_of")

    def __init__(self, groups: IntGroups, group_of: np.ndarray, position_of: np.ndarray) -> None:
        self.groups = groups
        self.group_of = group_of
        self.position_of = position_of


@functools.lru_cache(maxsize=1024)
def _layout(
    mode: GroupMode, replica_groups: ReplicaGroups | None, topology: Topology
) -> _Layout:
    id_groups = _id_groups(mode, replica_groups, topology)
    R, P = topology.replica_count, topology.num_partitions
    if mode is GroupMode.CROSS_REPLICA:
        groups = [tuple(r * P + p for r in g) for g in id_groups for p in range(P)]
    elif mode is GroupMode.CROSS_PARTITION:
        groups = [tuple(r * P + q for q in g) for g in id_groups for r in range(R)]
    elif mode is GroupMode.CROSS_REPLICA_AND_PARTITION:
        groups = [tuple(r * P + p for r in g for p in range(P)) for g in id_groups]
    else:
        groups = list(id_groups)
    groups = [g for g in groups if g]

    group_of = np.full(topology.num_devices, -1, dtype=np.int64)
    position_of = np.full(topology.num_devices, -1, dtype=np.int64)
    for index, group in enumerate(groups):
        members = np.asarray(group, dtype=np.int64)
        group_of[members] = index
        position_of[members] = np.arange(len(group))
    group_of.flags.writeable = False
    position_of.flags.writeable = False
    return _Layout(tuple(groups), group_of, position_of)


def participant_groups(
    mode: GroupMode, replica_groups: ReplicaGroups | None, topology: Topology
) -> IntGroups:
    """Every participant group as an ordered tuple of flattened device ids.

    ``replica_groups`` None (a collective without the attribute) means ``{}``, as in XLA's
    parser: one group of every replica, partition or device the mode ranges over.

    The order is XLA's: CrossReplica gives, for each replica group, one group per partition;
    CrossPartition, for each partition group, one group per replica; CrossReplicaAndPartition,
    one group per replica group listing each replica's partitions in turn; FlattenedID, the
    groups themselves. For valid groups every device is in exactly one group. Raises
    ReplicaGroupError for ids out of range or repeated, and for ``{}`` in FlattenedID mode.
    Collective-broadcast groups are these too (CrossReplica or CrossPartition).
    """
    return _layout(mode, replica_groups, topology).groups


def participants(
    mode: GroupMode, replica_groups: ReplicaGroups, topology: Topology, flattened_id: int
) -> tuple[int, ...]:
    """The ordered participant group of device ``flattened_id``; ``()`` if it is in none."""
    topology._check_flattened(flattened_id)
    layout = _layout(mode, replica_groups, topology)
    index = layout.group_of[flattened_id]
    return layout.groups[index] if index >= 0 else ()


def position(
    mode: GroupMode, replica_groups: ReplicaGroups, topology: Topology, flattened_id: int
) -> int:
    """The rank of device ``flattened_id`` in its participant group (its index in the list)."""
    topology._check_flattened(flattened_id)
    layout = _layout(mode, replica_groups, topology)
    rank = int(layout.position_of[flattened_id])
    if rank < 0:
        r, p = topology.replica_partition(flattened_id)
        raise ReplicaGroupError(
            f"device {flattened_id} (replica {r}, partition {p}) is in no {mode} "
            "participant group"
        )
    return rank


def physical_groups(
    mode: GroupMode, replica_groups: ReplicaGroups, topology: Topology
) -> IntGroups:
    """``participant_groups`` with every flattened id replaced by its physical device id."""
    physical = topology.device_ids.ravel()
    return tuple(
        tuple(int(physical[f]) for f in group)
        for group in participant_groups(mode, replica_groups, topology)
    )


# --------------------------------------------------------------------------------------------
# Verifier rules.


def validate_replica_groups(
    mode: GroupMode,
    replica_groups: ReplicaGroups | None,
    topology: Topology,
    *,
    uniform_required: bool,
) -> None:
    """Check replica groups as XLA's verifier does; raises ReplicaGroupError on the first problem.

    ``{}`` is valid except in FlattenedID mode. Otherwise: no group is empty, no id repeats, the
    ids are exactly 0..k-1, k equals the number of replicas, partitions or devices the mode
    ranges over (unless that number is 1), and, if ``uniform_required`` (every collective but
    all-reduce), all groups have the same size.
    """
    n, noun, count = _id_space(mode, topology)
    if replica_groups is None or replica_groups.is_empty:
        _reject_empty_groups_in_flattened_id_mode(mode)
        return
    mesh = replica_groups.mesh
    if mesh is not None and n != 1 and mesh.num_devices != n:
        sizes = "x".join(map(str, mesh.axis_sizes))
        raise ReplicaGroupError(
            f"mesh-form replica_groups over a {sizes} mesh hold {mesh.num_devices} {noun} ids "
            f"but there are {count}; in {mode} mode the axis sizes must multiply to {n}"
        )
    groups = replica_groups.groups
    seen: set[int] = set()
    for index, group in enumerate(groups):
        if not group:
            raise ReplicaGroupError(
                f"replica group {index} is empty; only the whole list may be empty ({{}})"
            )
        for i in group:
            if i < 0:
                raise ReplicaGroupError(f"{noun} id {i} in replica_groups is negative")
            if i in seen:
                raise ReplicaGroupError(f"{noun} id {i} appears more than once in replica_groups")
            seen.add(i)
    for i in range(len(seen)):
        if i not in seen:
            raise ReplicaGroupError(
                f"replica_groups name {len(seen)} {noun} ids but not {i}; "
                f"they must be exactly 0..{len(seen) - 1}"
            )
    if n != 1 and len(seen) != n:
        raise ReplicaGroupError(
            f"replica_groups cover {len(seen)} {noun} ids but there are {count}; "
            f"in {mode} mode they must name each of 0..{n - 1} exactly once"
        )
    if uniform_required:
        for index, group in enumerate(groups):
            if len(group) != len(groups[0]):
                raise ReplicaGroupError(
                    f"replica groups must all have the same size, but group 0 has "
                    f"{len(groups[0])} ids and group {index} has {len(group)}"
                )


# --------------------------------------------------------------------------------------------
# Collective-permute.


@functools.lru_cache(maxsize=256)
def permute_pairs_flattened(
    mode: GroupMode, pairs: SourceTargetPairs | None, topology: Topology
) -> tuple[tuple[int, int], ...]:
    """Every (source, target) pair of flattened ids a collective-permute sends along.

    CrossReplica: for each partition p, pair (s, t) moves data from (s, p) to (t, p).
    CrossPartition: for each replica r, pair (s, t) moves data from (r, s) to (r, t).
    Raises ReplicaGroupError if the pairs break the verifier rules, ValueError for other modes.
    No pairs (None: the attribute is absent) move nothing: every device receives zeros.
    """
    if pairs is None:
        from neuron_sim.hlo.replica_groups import SourceTargetPairs

        pairs = SourceTargetPairs()
    R, P = topology.replica_count, topology.num_partitions
    if mode is GroupMode.CROSS_REPLICA:
        pairs.validate(R)
        return tuple((s * P + p, t * P + p) for p in range(P) for s, t in pairs.pairs)
    if mode is GroupMode.CROSS_PARTITION:
        pairs.validate(P)
        return tuple((r * P + s, r * P + t) for r in range(R) for s, t in pairs.pairs)
    raise TopologyError(f"collective-permute is CrossReplica or CrossPartition, never {mode}")
