"""RewriteAllReduceDynamicSlice (key ``aws_neuron_rewrite_all_reduce_dynamic_slice``): fold
"all-reduce, then each rank dynamic-slices its own shard" into one reduce-scatter — the
single-group case.

Seed: allreduce-reducescatter-dynamicslice-rewrites.txt, "Single-Group Matcher"
(``InstructionMatchesPattern`` @0x2004520) and "Shared Emitter". The matcher is exactly the
seed's gate, in its order, and nothing more:

  1. the instruction is a dynamic-slice;
  2. its operand 0 is an all-reduce;
  3. it is a 1-D shard (``GetSliceInfo1D``: exactly one dimension differs);
  4. the all-reduce has exactly one replica group (``{}`` has none and is rejected);
  5. ``group_size * slice_size == full`` extent of the sliced dimension;
  6. the start index of the sliced dimension is a multiply;
  7. one multiply operand is partition-id, possibly behind one convert;
  8. the other operand is an effective scalar constant equal to ``slice_size``.

If the dynamic-slice has no start-index operand for the sliced dimension (the old form with one
vector of start indices), the binary's ``ThrowStdOutOfRange`` guard fires: the pass raises, and
the module stays as it was.

Our reading (seed status "our reading"): the seed's offset leaf is garbled
(``start`` must be partition-id, then ``IsEffectiveScalarConstant(start->operand(?), s)`` — but
partition-id has no operands). We read it, as issue #4 does, as
``start = multiply(convert?(partition-id), constant == s)`` with the two multiply operands in
either order. The binary logs nothing here; the reasons below reuse the multiple-groups
matcher's text where the check is the same and are ours (marked) elsewhere.

Known unsafety, deliberately kept: the group's *order* is not checked (with
``replica_groups={{1,0,2,3}}`` partition 1 sits at position 0 but slices at offset 1*s), nor
the group mode (partition-id is compared with replica-group ids whatever they mean), nor the
replica count or that the group covers every partition.
"""

from __future__ import annotations

import logging

from neuron_sim.hlo.ir import HloError, HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import SeedStatus
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.pattern_helpers import (MATCHED, MatchResult, is_effective_scalar_constant,
                                                      is_partition_id_through_convert, reject,
                                                      start_index_operand)
from neuron_sim.passes.neuron.reduce_scatter_emitter import ReduceScatterFold
from neuron_sim.proofs.index.slice_info import get_slice_info_1d

log = logging.getLogger(__name__)

SEED = "allreduce-reducescatter-dynamicslice-rewrites.txt § Single-Group Matcher, Shared Emitter"

# Reasons, by check number. 1, 2, 3, 5 and 8 are the multiple-groups matcher's VLOG text for the
# same check; 4, 6 and 7 are ours (the single-group gate is silent in the binary).
REASONS = {
    1: "Instruction is not a dynamic slice.",
    2: "Dynamic slice operand is not an all-reduce.",
    3: "Dynamic slice is not 1D.",
    4: "All-reduce does not have exactly one replica group.",
    5: "Dynamic slice size does not match operand size.",
    6: "Start index of the sliced dimension is not a multiply.",
    7: "Neither multiply operand is a partition ID (one convert peeled).",
    8: "Multiply operand is not an effective scalar constant.",
}


def explain_single_group(inst: HloInstruction) -> MatchResult:
    """The single-group gate on ``inst``: MATCHED, or the first failed check and its reason.

    Raises HloError where the binary throws (no start-index operand for the sliced dimension).
    """
    if inst.opcode is not Opcode.DYNAMIC_SLICE:
        return reject(log, inst, 1, REASONS[1])
    all_reduce = inst.operand(0) if inst.operands else None
    if all_reduce is None or all_reduce.opcode is not Opcode.ALL_REDUCE:
        return reject(log, inst, 2, REASONS[2])
    info = get_slice_info_1d(inst)
    if not info.valid:
        return reject(log, inst, 3, REASONS[3])
    full = all_reduce.shape.dims[info.slice_dim]
    groups = all_reduce.replica_groups.groups if all_reduce.replica_groups is not None else ()
    if len(groups) != 1:
        return reject(log, inst, 4, REASONS[4])
    if len(groups[0]) * info.slice_size != full:
        return reject(log, inst, 5, REASONS[5])
    start = start_index_operand(inst, info.slice_dim)
    if start is None:
        raise HloError(f"%{inst.name} has no start-index operand for dimension "
                       f"{info.slice_dim} (the binary throws std::out_of_range here): "
                       f"{inst.to_text()}")
    if start.opcode is not Opcode.MULTIPLY:
        return reject(log, inst, 6, REASONS[6])
    orders = ((start.operand(0), start.operand(1)), (start.operand(1), start.operand(0)))
    constant_sides = [other for ids, other in orders if is_partition_id_through_convert(ids)]
    if not constant_sides:
        return reject(log, inst, 7, REASONS[7])
    for constant in constant_sides:
        if is_effective_scalar_constant(constant, info.slice_size, log):
            return MATCHED
    return reject(log, inst, 8, REASONS[8])


class RewriteAllReduceDynamicSlice(ReduceScatterFold):
    """all-reduce + per-rank dynamic-slice (one replica group) -> reduce-scatter."""

    name = "aws_neuron_rewrite_all_reduce_dynamic_slice"
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("dynamic-slice(all-reduce(x), pid*s) with one replica group -> reduce-scatter(x); "
               "group order, mode and replica count unchecked")
    hazard = relies_on(Reliance.FOLD_OFFSETS, Reliance.LOGICAL_GROUPS)
    seed_says = ("dynamic-slice of an all-reduce, 1-D shard, exactly one replica group, "
                 "`group_size * slice_size == full`, offset leaf partition-id (one convert "
                 "peeled) checked against a scalar constant == `slice_size`; one reduce-scatter "
                 "via the shared emitter")
    our_reading = ("the garbled offset leaf read as `multiply(convert?(partition-id), constant == "
                   "s)`, either operand order")
    known_unsafety = ("does not check group **order** (`{{1,0,2,3}}`: partition 1 is at position "
                      "0, receives block 0, but slices at offset 1*s); nor group **mode** "
                      "(partition-id compared with ids that may be replica ids), nor replica "
                      "count, nor that the group covers every partition")

    def explain(self, inst: HloInstruction) -> MatchResult:
        return explain_single_group(inst)
