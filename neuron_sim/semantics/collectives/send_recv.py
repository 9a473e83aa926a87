"""What a send/recv pair means: the point-to-point exchange its channel and pairs describe.

A ``send`` and a ``recv`` with the same ``channel_id`` in one computation are the two ends of
one exchange. The devices it connects are the ``_xla_send_recv_source_target_pairs`` frontend
attribute, written like source_target_pairs (``{{0,1},{1,2}}``: each inner list is exactly one
source and one target; XLA's ``GetSourceTargetPairs`` reads it with ``ParseReplicaGroupsOnly``).
Its ids are partition ids when the channel id is positive and replica ids otherwise (XLA's GPU
runtime takes the group mode as ``GetCollectiveOpGroupMode(channel_id > 0, nullopt)``):
cross-partition, pair (s, t) moves data from (r, s) to (r, t) in every replica r;
cross-replica, from (s, p) to (t, p) in every partition p.

The data moves as a collective-permute along those pairs would move it: the recv on a target
gets the send's operand from its source, a device that is no target receives zeros
(docs/semantics.md, "Send and recv"). So the exchange runs through the collective-permute
descriptor and every backend's permute.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.errors import UserError
from neuron_sim.hlo.checks.text import frontend_attributes
from neuron_sim.hlo.replica_groups import ReplicaGroupError, SourceTargetPairs
from neuron_sim.semantics.collectives.descriptor import CollectiveDescriptor
from neuron_sim.semantics.collectives.kinds import COLLECTIVE_PERMUTE
from neuron_sim.topology import GroupMode, Topology, permute_pairs_flattened

__all__ = ["EXCHANGE", "PAIRS_ATTRIBUTE", "SendRecvError", "send_recv_group_mode",
           "send_recv_pairs", "send_recv_pairs_flattened"]

PAIRS_ATTRIBUTE = "_xla_send_recv_source_target_pairs"

EXCHANGE: CollectiveDescriptor = COLLECTIVE_PERMUTE
"""The collective kind a send/recv exchange moves its data as."""


class SendRecvError(UserError):
    """A send or recv whose exchange cannot be read: no pairs, malformed pairs, no partner."""


def send_recv_pairs(inst: Any) -> SourceTargetPairs:
    """The (source, target) pairs of a send, recv or their done, from its frontend attribute;
    SendRecvError if the attribute is missing or not a list of pairs."""
    name = f"%{inst.name}"
    raw = inst.attrs.get("frontend_attributes")
    try:
        attributes = frontend_attributes(raw) if raw is not None else {}
    except ValueError:
        raise SendRecvError(f"{name}: its frontend_attributes are not a list of key=value "
                            "pairs") from None
    text = attributes.get(PAIRS_ATTRIBUTE)
    if text is None:
        raise SendRecvError(f"{name}: a {inst.opcode.spelling} needs the frontend attribute "
                            f"{PAIRS_ATTRIBUTE}=\"{{{{source,target}},...}}\" to say which devices "
                            "it connects")
    try:
        return SourceTargetPairs.from_text(text)
    except ReplicaGroupError as error:
        raise SendRecvError(f"{name}: {PAIRS_ATTRIBUTE}={text!r} is not a list of "
                            f"{{source,target}} pairs: {error}") from None


def send_recv_group_mode(inst: Any) -> GroupMode:
    """Partition ids when the channel id is positive, replica ids otherwise."""
    channel = inst.channel_id
    return GroupMode.CROSS_PARTITION if channel is not None and channel > 0 \
        else GroupMode.CROSS_REPLICA


def send_recv_pairs_flattened(inst: Any, topology: Topology) -> tuple[tuple[int, int], ...]:
    """Every (source, target) pair of flattened device ids the exchange moves data along;
    SendRecvError naming the instruction if the pairs do not fit the topology."""
    pairs = send_recv_pairs(inst)
    try:
        return permute_pairs_flattened(send_recv_group_mode(inst), pairs, topology)
    except ReplicaGroupError as error:
        raise SendRecvError(f"%{inst.name}: {PAIRS_ATTRIBUTE} {pairs.to_text()} on "
                            f"{topology.replica_count} replicas x {topology.num_partitions} "
                            f"partitions: {error}") from None
