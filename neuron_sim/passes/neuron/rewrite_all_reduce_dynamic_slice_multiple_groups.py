"""RewriteAllReduceDynamicSliceMultipleGroups (key
``aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups``): the same fold as
RewriteAllReduceDynamicSlice for one or more equal-width replica groups, where each rank's
offset comes from a partition-id-indexed constant pool:

    offset = reshape(multiply(s, dynamic-slice(POOL, partition-id)))

Seed: allreduce-reducescatter-dynamicslice-rewrites.txt, "Multiple-Groups Matcher"
(``InstructionMatchesPattern`` @0x2004ae0) and "Shared Emitter" (the rewrite is byte-identical to
the single-group pass's). The matcher runs the seed's 14 steps in order, logging (debug level,
logger ``neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice_multiple_groups``) the binary's VLOG
reason verbatim at the first failure; nothing else is checked.

Our reading, where the seed's pseudocode cannot type-check (seed status "our reading"):

* steps 9/10 — the seed tries the constant at "operand(0 or 1)" but then takes the pool slice
  from operand 1 unconditionally, which would make ``multiply(ds, s)`` always fail. We take the
  pool dynamic-slice from the *other* operand: the constant may be either operand (operand 0 is
  tried first).
* steps 12/13 — the seed reads partition-id from the pool slice's operand 0 and the pool from
  operand 1; a dynamic-slice's operand 0 is the array sliced, so we read the pool from
  operand 0 and partition-id (possibly behind one convert) from operand 1, the start index.
  The seed's order of the two checks (partition-id first, then constant) is kept.
* step 4 with ``replica_groups={}`` — the binary reads group 0 of an empty list; we reject at
  step 4 with its reason and a note.
* step 14 — the three pool literals are ``offset_pools.POOL_READINGS`` (identity, multiplied,
  repeated = the within-group ramp repeated G times; see that module for the other reading).
  Like ``LiteralBase::Equal`` the comparison includes the type: the pool must be ``s32[G*g]``.
  The binary logs nothing when no pool matches; that reason is ours.

Known unsafety, deliberately kept: nothing relates the pool to the groups' actual members, so
e.g. strided groups ``{{0,2,4,6},{1,3,5,7}}`` with the repeated pool are rewritten although
partition 2 sits at position 1 and slices block 2; the identity pool is accepted for G > 1 and
the multiplied pool for s > 1 (both give offsets past the end, which dynamic-slice clamps).
"""

from __future__ import annotations

import logging

import numpy as np

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.literals import LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.passes.base import SeedStatus
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.offset_pools import expected_pools
from neuron_sim.passes.neuron.pattern_helpers import (MATCHED, MatchResult, is_effective_scalar_constant,
                                                      is_partition_id_through_convert, reject,
                                                      start_index_operand)
from neuron_sim.passes.neuron.reduce_scatter_emitter import ReduceScatterFold
from neuron_sim.proofs.index.slice_info import get_slice_info_1d

log = logging.getLogger(__name__)

SEED = ("allreduce-reducescatter-dynamicslice-rewrites.txt § Multiple-Groups Matcher, "
        "Shared Emitter")

CHECKING = "Checking if instruction matches pattern: "
CONSTANT_OK = "Effective scalar constant is OK."

# The binary's VLOG reasons, verbatim, by step. Step 11 has two; step 14's is ours.
REASONS = {
    1: "Instruction is not a dynamic slice.",
    2: "Dynamic slice operand is not an all-reduce.",
    3: "Dynamic slice is not 1D.",
    4: "Replica group sizes are not consistent.",
    5: "Dynamic slice size does not match operand size.",
    6: "Slice dimension is out of bounds.",
    7: "Index operand is not a reshape.",
    8: "Reshape operand is not a multiply.",
    9: "Multiply operand is not an effective scalar constant.",
    10: "Multiply operand is not a dynamic slice.",
    11: "Pool slice sizes are not 1D.",
    12: "Slice pool operand is not a partition ID.",
    13: "Slice pool operand is not a constant.",
    14: "Slice pool literal matches none of the expected pools (identity, multiplied, repeated).",
}
POOL_SLICE_SIZE_NOT_ONE = "Pool slice size is not 1."  # the second reason of step 11
EMPTY_GROUPS_NOTE = " (replica_groups is empty: there is no group 0 to compare with)"


def explain_multiple_groups(inst: HloInstruction) -> MatchResult:
    """The multiple-groups gate on ``inst``: MATCHED, or the failed step and its reason."""
    log.debug("%s%s", CHECKING, inst)
    # 1-3: a 1-D shard of an all-reduce.
    if inst.opcode is not Opcode.DYNAMIC_SLICE:
        return reject(log, inst, 1, REASONS[1])
    all_reduce = inst.operand(0) if inst.operands else None
    if all_reduce is None or all_reduce.opcode is not Opcode.ALL_REDUCE:
        return reject(log, inst, 2, REASONS[2])
    info = get_slice_info_1d(inst)
    if not info.valid:
        return reject(log, inst, 3, REASONS[3])
    # 4-5: equal-width groups whose width times the shard covers the sliced dimension.
    full = all_reduce.shape.dims[info.slice_dim]
    groups = all_reduce.replica_groups.groups if all_reduce.replica_groups is not None else ()
    if not groups:
        return reject(log, inst, 4, REASONS[4] + EMPTY_GROUPS_NOTE)
    width = len(groups[0])
    if any(len(group) != width for group in groups):
        return reject(log, inst, 4, REASONS[4])
    if width * info.slice_size != full:
        return reject(log, inst, 5, REASONS[5])
    # 6-8: the sliced dimension's start index is reshape(multiply(...)).
    index = start_index_operand(inst, info.slice_dim)
    if index is None:
        return reject(log, inst, 6, REASONS[6])
    if index.opcode is not Opcode.RESHAPE:
        return reject(log, inst, 7, REASONS[7])
    multiply = index.operand(0)
    if multiply.opcode is not Opcode.MULTIPLY:
        return reject(log, inst, 8, REASONS[8])
    # 9-10: one multiply operand is the constant s, the other the pool slice (our reading).
    ids = None
    for constant_at, ids_at in ((0, 1), (1, 0)):
        if is_effective_scalar_constant(multiply.operand(constant_at), info.slice_size, log):
            ids = multiply.operand(ids_at)
            break
    if ids is None:
        return reject(log, inst, 9, REASONS[9])
    log.debug("%s [%%%s]", CONSTANT_OK, inst.name)
    if ids.opcode is not Opcode.DYNAMIC_SLICE:
        return reject(log, inst, 10, REASONS[10])
    # 11-13: ids = dynamic-slice(constant POOL, partition-id) of one element (our reading).
    pool_slice_sizes = tuple(ids.get("dynamic_slice_sizes", ()))
    if len(pool_slice_sizes) != 1:
        return reject(log, inst, 11, REASONS[11])
    if pool_slice_sizes[0] != 1:
        return reject(log, inst, 11, POOL_SLICE_SIZE_NOT_ONE)
    if len(ids.operands) < 2 or not is_partition_id_through_convert(ids.operand(1)):
        return reject(log, inst, 12, REASONS[12])
    pool = ids.operand(0)
    if pool.opcode is not Opcode.CONSTANT:
        return reject(log, inst, 13, REASONS[13])
    # 14: the pool is one of the expected literals.
    matched_pool = match_pool(pool, len(groups), width, info.slice_size)
    if matched_pool is None:
        return reject(log, inst, 14, REASONS[14])
    log.debug("Slice pool literal is the %s pool. [%%%s]", matched_pool, inst.name)
    return MATCHED


def match_pool(pool: HloInstruction, groups: int, width: int, slice_size: int) -> str | None:
    """The name of the expected pool ``pool``'s literal equals (type and values), or None."""
    shape = pool.shape
    size = groups * width
    if not (isinstance(shape, ArrayShape) and shape.element_type is ElementType.S32
            and shape.dims == (size,)):
        return None
    try:
        value = np.asarray(pool.literal.value)
    except LiteralError:
        return None  # elided: the value is not in the text
    for name, expected in expected_pools(groups, width, slice_size).items():
        if np.array_equal(value, np.asarray(expected, dtype=np.int64)):
            return name
    return None


class RewriteAllReduceDynamicSliceMultipleGroups(ReduceScatterFold):
    """all-reduce + pool-indexed per-rank dynamic-slice (equal-width groups) -> reduce-scatter."""

    name = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("dynamic-slice(all-reduce(x), reshape(s*POOL[pid])) with equal groups -> "
               "reduce-scatter(x); POOL checked against 3 literals, not against the groups")
    hazard = relies_on(Reliance.FOLD_OFFSETS, Reliance.LOGICAL_GROUPS)
    seed_says = ("14-step VLOG-instrumented matcher: equal-width groups, offset "
                 "`reshape(multiply(s, dynamic-slice(POOL, partition-id)))`, POOL equal to one of "
                 "three `s32` ramp literals (identity, multiplied, repeated); same emitter")
    our_reading = ("steps 9/10: constant may be either multiply operand, the other is the pool "
                   "slice; steps 12/13: pool is the slice's operand 0, partition-id (one convert "
                   "peeled) its operand 1; \"repeated\" = within-group ramp repeated G times; "
                   "`{}` rejected at step 4")
    known_unsafety = ("nothing relates POOL to the groups' members: strided groups "
                      "`{{0,2,4,6},{1,3,5,7}}` with the repeated pool are rewritten (partition 2 "
                      "is at position 1 but reads block 2); the identity pool is accepted for G > "
                      "1 and the multiplied pool for s > 1 (offsets past the end, silently "
                      "clamped by dynamic-slice); group mode and replica count unchecked")

    def explain(self, inst: HloInstruction) -> MatchResult:
        return explain_multiple_groups(inst)
