"""The emitter both AllReduce+DynamicSlice passes share (the seed's
``RewriteAllReduceDynamicSlice::ExpandInstruction`` @0x2006600; the multiple-groups pass reuses it
byte for byte).

From ``ds = dynamic-slice(ar = all-reduce(value), ...)`` it builds one reduce-scatter of
``value``: the all-reduce's reduction computation, its replica groups verbatim, its
constrain_layout and use_global_device_ids forwarded, a *fresh* channel id (the module's next
free one, XLA's ``hlo_query::NextChannelId``), scatter dimension = the shard's ``slice_dim`` and
shape = the dynamic-slice's shape (layout included). Its only error path is a dynamic-slice that
is not a 1-D shard. Seed status: faithful.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.attributes import format_attribute
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloError, HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.passes.base import OpExpanderPass
from neuron_sim.passes.neuron.pattern_helpers import MatchResult
from neuron_sim.proofs.index.slice_info import get_slice_info_1d


def emit_reduce_scatter(ds: HloInstruction) -> HloInstruction:
    """A new (not yet added) reduce-scatter equivalent, per the seed, to ``ds`` of its all-reduce."""
    info = get_slice_info_1d(ds)
    if not info.valid:
        raise HloError(f"RewriteAllReduceDynamicSlice: the dynamic slice is not a 1-D shard: "
                       f"{ds.to_text()}")
    all_reduce = ds.operand(0)
    if all_reduce.opcode is not Opcode.ALL_REDUCE:
        raise HloError(f"RewriteAllReduceDynamicSlice: operand 0 is not an all-reduce: "
                       f"{ds.to_text()}")
    module = ds.parent.parent if ds.parent is not None else None
    if module is None:
        raise HloError(f"%{ds.name} is not in a module, so it has no channel ids to extend")
    # Attributes in XLA's printing order for reduce-scatter.
    attrs: dict[str, Any] = {
        "channel_id": module.next_channel_id(),
        "replica_groups": all_reduce.get("replica_groups", ReplicaGroups()),
    }
    if all_reduce.get("constrain_layout", False):
        attrs["constrain_layout"] = True
    if all_reduce.use_global_device_ids:
        attrs["use_global_device_ids"] = True
    attrs["dimensions"] = (info.slice_dim,)
    attrs["to_apply"] = all_reduce.to_apply
    # The seed copies the dynamic-slice's shape without checking it against the groups (a
    # CrossReplica all-reduce given a channel id gains peers): check=False keeps that visible.
    return make_instruction(ds.parent, Opcode.REDUCE_SCATTER, [all_reduce.operand(0)],
                            shape=ds.shape, name="reduce-scatter", check=False, **attrs)


def describe_reduce_scatter(ds: HloInstruction, rs: HloInstruction) -> str:
    """``%ds -> %reduce-scatter (reduce-scatter, dimensions={0}, replica_groups=..., channel_id=N)``."""
    return (f"%{ds.name} -> %{rs.name} (reduce-scatter, "
            f"dimensions={format_attribute('dimensions', rs.get('dimensions'))}, "
            f"replica_groups={rs.get('replica_groups').to_text()}, "
            f"channel_id={rs.get('channel_id')})")


class ReduceScatterFold(OpExpanderPass):
    """What both AllReduce+DynamicSlice passes share: the emitter (expand) and its log line.

    The seed's two passes differ only in their matcher (vtable+0x40); a subclass supplies
    ``explain(inst) -> MatchResult`` and inherits everything else.
    """

    def explain(self, inst: HloInstruction) -> MatchResult:
        raise NotImplementedError

    def matches(self, inst: HloInstruction) -> bool:
        return self.explain(inst).matched

    def expand(self, inst: HloInstruction) -> HloInstruction:
        return emit_reduce_scatter(inst)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        return describe_reduce_scatter(old, new)
