"""Collectives whose groups name physical device ids (after DeviceAssignmentLegalization).

HLO text has no syntax for a physical device list, so a legalized collective keeps XLA's
spelling — ``replica_groups={{...}}`` or ``source_target_pairs={{...}}`` — and says what its ids
mean with the frontend attribute ``neuron.groups="physical"``:

* ``replica_groups`` are the participant groups themselves, each an ordered list of physical
  device ids (XLA's GetParticipatingDevicesGroups output), whatever the group mode its
  channel_id and use_global_device_ids would give: the mode was already applied;
* ``source_target_pairs`` are (source device, target device) pairs of physical ids, every
  replica's or partition's copy listed.

A physical id means the device the topology's device assignment gives it; reading the module
back maps each id through the inverse assignment to a flattened id. Nothing else changes, so
XLA's parser still reads the text (its verifier would read the ids as logical ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.checks.text import frontend_attributes, raw_text
from neuron_sim.hlo.int_lists import IntGroups, ReplicaGroupError
from neuron_sim.topology import GroupMode, Topology, participant_groups

PHYSICAL_GROUPS_KEY = "neuron.groups"
PHYSICAL_GROUPS_VALUE = "physical"
PHYSICAL_GROUPS_ATTRIBUTE = f'{PHYSICAL_GROUPS_KEY}="{PHYSICAL_GROUPS_VALUE}"'


def groups_are_physical(inst: Any) -> bool:
    """True if ``inst``'s replica groups or source-target pairs name physical device ids
    (its frontend attributes hold ``neuron.groups="physical"``)."""
    value = inst.attrs.get("frontend_attributes")
    if value is None:
        return False
    try:
        return frontend_attributes(value).get(PHYSICAL_GROUPS_KEY) == PHYSICAL_GROUPS_VALUE
    except ValueError:
        return False


def mark_physical(inst: Any) -> None:
    """Add ``neuron.groups="physical"`` to ``inst``'s frontend attributes (kept as written)."""
    if groups_are_physical(inst):
        return
    value = inst.attrs.get("frontend_attributes")
    inner = raw_text(value).strip()[1:-1].strip() if value is not None else ""
    text = "{" + (inner + "," if inner else "") + PHYSICAL_GROUPS_ATTRIBUTE + "}"
    inst.set_attr("frontend_attributes", Raw(text))


def _flattened_of(ids: np.ndarray, topology: Topology) -> np.ndarray:
    """Physical ids -> flattened ids by the inverse device assignment; ReplicaGroupError for an
    id the assignment does not hold."""
    physical = topology.device_ids.ravel()
    order = np.argsort(physical, kind="stable")
    where = np.searchsorted(physical[order], ids)
    where = np.minimum(where, len(physical) - 1)
    found = physical[order][where] == ids
    if not found.all():
        missing = int(ids[~found][0])
        raise ReplicaGroupError(
            f"physical device {missing} is not in the device assignment of {topology}")
    return order[where]


def flattened_groups_of_physical(groups: IntGroups, topology: Topology) -> IntGroups:
    """Groups of physical ids as groups of flattened ids; each id must be in the assignment and
    appear at most once."""
    ids = np.fromiter((i for g in groups for i in g), dtype=np.int64)
    flat = _flattened_of(ids, topology)
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ReplicaGroupError(f"physical device {int(values[counts > 1][0])} appears more "
                                "than once in replica_groups")
    bounds = np.cumsum([0] + [len(g) for g in groups])
    return tuple(tuple(int(f) for f in flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))


def flattened_pairs_of_physical(pairs: tuple[tuple[int, int], ...], topology: Topology
                                ) -> tuple[tuple[int, int], ...]:
    """Source-target pairs of physical ids as pairs of flattened ids; each id must be in the
    assignment and be a source at most once and a target at most once."""
    ids = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    flat = _flattened_of(ids.ravel(), topology).reshape(-1, 2)
    for column, role in ((0, "source"), (1, "target")):
        values, counts = np.unique(ids[:, column], return_counts=True)
        if (counts > 1).any():
            raise ReplicaGroupError(f"physical device {int(values[counts > 1][0])} is a {role} "
                                    "more than once in source_target_pairs")
    return tuple((int(s), int(t)) for s, t in flat)


def flattened_replica_groups(inst: Any, mode: GroupMode, topology: Topology) -> IntGroups:
    """An instruction's ``replica_groups`` as participant groups of flattened ids: physical
    ones through the inverse assignment, logical ones by ``mode``'s rules (absent = ``{}``)."""
    groups = inst.attrs.get("replica_groups")
    if not groups:  # absent: {} (the replica-group classes load with the first collective)
        from neuron_sim.hlo.replica_groups import ReplicaGroups

        groups = ReplicaGroups()
    if groups_are_physical(inst):
        return flattened_groups_of_physical(groups.groups, topology)
    return participant_groups(mode, groups, topology)
