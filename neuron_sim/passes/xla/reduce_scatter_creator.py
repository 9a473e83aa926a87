"""ReduceScatterCreator (key ``xla_reduce_scatter_creator``): XLA's GPU pass that turns
``dynamic-slice(all-reduce(x))`` into ``reduce-scatter(x)``, as the baseline for the Neuron folds.

Seed (faithful to XLA): ``xla/backends/gpu/transforms/reduce_scatter_creator.cc`` over
``MatchReduceScatter`` (``xla/service/collective_opt_utils.cc``, transcribed in
``neuron_sim.passes.xla.collective_opt_utils``). For every all-reduce of every non-fusion computation, in
post order, the creator calls ``MatchReduceScatter(ar, num_partitions, replica_count,
allow_multiple_split_dims=false, allow_intervening_reshape=true)`` — so one split dimension, one
reshape between the all-reduce and the slice allowed (it must leave the split dimension alone), a
bitcast not. On a match it builds a reduce-scatter of the all-reduce's operand with the
all-reduce's reduction, replica groups, constrain_layout, **the same channel_id** (none if it had
none: the group mode is kept) and use_global_device_ids, scatter dimension = the split dimension,
and metadata, frontend attributes, sharding and backend_config copied from the all-reduce
(``SetupDerivedInstruction`` + ``CopyBackendConfigFrom``). When the split dimension's extent is
not a multiple of the group size (the slice does not tile it), the all-reduce's operand is first
sliced to ``(extent / n) * n`` from 0 ("slice first"). With a reshape in between, the result is
reshaped to the dynamic-slice's shape. The dynamic-slice, the reshape and the all-reduce (with
operands left unused) are removed.

The topology is the context's (``PassContext.topology_for``: the module header's replica_count x
num_partitions unless the caller gives one), standing for XLA's HloModuleConfig.

Where XLA would crash or fail, ours declines the all-reduce (and says why in ``skipped``): a
multiplier constant 0, non-constant clamp bounds, a table read past its end (see
``collective_opt_utils``), and a dynamic-slice that also cuts a second dimension whose offset is
a constant 0 (XLA's split-dimension spec skips that dimension, so its reduce-scatter would not
have the slice's shape and ``ReplaceAllUsesWith`` fails).

Known unsafety: none known for what it matches — it evaluates the offset on every id of every
group; it ignores the device assignment (irrelevant to group positions) and, like XLA, does not
model dynamic-slice's clamp, so it may decline offsets that are right only after clamping.
"""

from __future__ import annotations

import math
from typing import Any

from neuron_sim.hlo.attributes import SliceDim
from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.reduce_scatter_emitter import describe_reduce_scatter
from neuron_sim.passes.xla.collective_opt_utils import ReduceScatterSpec, match_reduce_scatter

SEED = ("xla/backends/gpu/transforms/reduce_scatter_creator.cc (ReduceScatterCreator::RunImpl); "
        "xla/service/collective_opt_utils.cc (MatchReduceScatter)")

DERIVED_ATTRIBUTES = ("sharding", "metadata", "frontend_attributes", "backend_config")


class ReduceScatterCreator(HloPass):
    """XLA's ReduceScatterCreator: all-reduce + per-device dynamic-slice -> reduce-scatter."""

    name = "xla_reduce_scatter_creator"
    seed_status = SeedStatus.FAITHFUL
    seed = SEED
    summary = ("XLA's ReduceScatterCreator: dynamic-slice(all-reduce(x)) -> reduce-scatter(x) "
               "where MatchReduceScatter evaluates the offset right on every id of every group")
    hazard = relies_on(Reliance.LOGICAL_GROUPS)
    seed_says = ("XLA's GPU ReduceScatterCreator over `MatchReduceScatter` "
                 "(`collective_opt_utils.cc`): the all-reduce's only user a dynamic-slice (one "
                 "reshape allowed, no bitcast, one split dim); uniform groups; the offset "
                 "(`constant * id`, table lookups, iota, clamps, `id * s - table[id]`) evaluated "
                 "on every id of every group must be `position * shard`; a split extent the group "
                 "does not divide is sliced first")
    our_reading = ("XLA's rules as written; where XLA would crash (multiplier 0, non-constant "
                   "clamp bounds, a table read past its end, a second cut dimension with a "
                   "constant-0 offset) ours declines")
    known_unsafety = ("none known; like XLA it does not model dynamic-slice's clamp, so it "
                      "declines offsets right only after clamping")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.skipped: list[str] = []   # matched all-reduces not rewritten, and why

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        self.skipped = []
        topology = context.topology_for(module)
        changed = False
        fusion = module.fusion_computations()
        for computation in list(module.computations):
            if computation in fusion:
                continue
            for ar in computation.post_order():
                if ar.opcode is not Opcode.ALL_REDUCE or ar.parent is not computation:
                    continue
                spec = match_reduce_scatter(ar, topology.num_partitions,
                                            topology.replica_count,
                                            allow_multiple_split_dims=False,
                                            allow_intervening_reshape=True)
                if spec is None:
                    continue
                problem = _unrewritable(ar, spec)
                if problem:
                    self.skipped.append(f"%{ar.name}: {problem}")
                    continue
                self.record(_rewrite(computation, ar, spec))
                changed = True
        return changed


def _scattered_dims(ar: HloInstruction, spec: ReduceScatterSpec) -> list[int]:
    """The reduce-scatter's dims as XLA builds them: the split extent divided by the group size."""
    dims = list(ar.shape.dims)
    dims[spec.split_dim] //= spec.group_size
    return dims


def _unrewritable(ar: HloInstruction, spec: ReduceScatterSpec) -> str:
    """Why XLA's rewrite of this match would fail ('' when it would not): its reduce-scatter (or
    the reshape of it) must have the dynamic-slice's shape for ``ReplaceAllUsesWith``."""
    ds = spec.dynamic_slice
    dims = _scattered_dims(ar, spec)
    if ds.operand(0) is ar and tuple(dims) != tuple(ds.shape.dims):
        return (f"XLA's reduce-scatter would be {dims}, not the shape of %{ds.name} "
                f"{list(ds.shape.dims)} (a second dimension cut with a constant-0 offset, or a "
                "split extent the group does not divide into slices of the slice's size): "
                "ReplaceAllUsesWith fails")
    if ds.operand(0) is not ar and math.prod(dims) != ds.shape.element_count:
        return (f"XLA's reshape of the reduce-scatter {dims} to the shape of %{ds.name} "
                f"{list(ds.shape.dims)} would change the element count")
    return ""


def _rewrite(computation: HloComputation, ar: HloInstruction, spec: ReduceScatterSpec) -> str:
    """Replace the matched dynamic-slice by a reduce-scatter (and a reshape); the log line."""
    ds = spec.dynamic_slice
    shape: ArrayShape = ar.shape
    split_dim, n = spec.split_dim, spec.group_size
    extent = shape.dims[split_dim]
    block = extent // n
    rs_input = ar.operand(0)
    if extent % n:
        kept = list(shape.dims)
        kept[split_dim] = block * n
        rs_input = make_instruction(
            computation, Opcode.SLICE, [rs_input], shape=shape.with_dims(kept), name="slice",
            slice=tuple(SliceDim(0, d, 1) for d in kept))
        computation.add_before(rs_input, ds)
    scattered = _scattered_dims(ar, spec)
    attrs: dict[str, Any] = {}
    if ar.channel_id is not None:
        attrs["channel_id"] = ar.channel_id
    attrs["replica_groups"] = ar.replica_groups
    if ar.get("constrain_layout", False):
        attrs["constrain_layout"] = True
    if ar.use_global_device_ids:
        attrs["use_global_device_ids"] = True
    attrs["dimensions"] = (split_dim,)
    attrs["to_apply"] = ar.to_apply
    attrs.update({key: ar.get(key) for key in DERIVED_ATTRIBUTES if ar.has(key)})
    rs = make_instruction(computation, Opcode.REDUCE_SCATTER, [rs_input],
                          shape=shape.with_dims(scattered), name="reduce-scatter", check=False,
                          **attrs)
    computation.add_before(rs, ds)
    result = rs
    reshape = ds.operand(0) if ds.operand(0) is not ar else None
    if reshape is not None:
        result = make_instruction(computation, Opcode.RESHAPE, [rs], shape=ds.shape,
                                  name="reshape")
        computation.add_before(result, ds)
    line = describe_reduce_scatter(ds, rs)
    computation.replace_instruction(ds, result)
    for dead in (reshape, ar):
        if dead is not None and dead.parent is computation and not dead.users \
                and not dead.is_root:
            computation.remove_with_dead_operands(dead)
    return line
