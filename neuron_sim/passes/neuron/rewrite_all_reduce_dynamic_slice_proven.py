"""RewriteAllReduceDynamicSliceProven (key ``rewrite_all_reduce_dynamic_slice_proven``): fold an
all-reduce + dynamic-slice pair into a reduce-scatter exactly when z3 proves it sound.

Where the seed's matchers recognise the *shape* of an offset computation (``pid * s``,
``s * POOL[pid]`` with three literal pools) and never relate it to the groups, this pass asks
the only question that matters (``fold_proof``): does every device of the topology read, after
dynamic-slice's clamp, the block its reduce-scatter would deliver? It therefore accepts any
offset in the index sub-language that is right — JAX's ``and`` / ``remainder`` / ``select``
guards, unsorted groups undone by a table, strided groups with ``pid / G`` — and rejects every
wrong one the seeds accept (unsorted groups, strided groups with the repeated pool, the
identity pool with several groups, the multiplied pool when s > 1).

It also sees through fusion boundaries: a dynamic-slice inside a kLoop fusion whose parameter is
the all-reduce (what XLA's compiler emits) is folded by replacing the whole fusion when the
slice is its root, or by feeding the reduce-scatter into the fusion as a new parameter.

The emitted reduce-scatter keeps the all-reduce's group mode: a fresh channel_id only if the
all-reduce had one (the seed emitter always adds one, which turns a CrossReplica all-reduce
into a CrossReplicaAndPartition reduce-scatter — a different set of peers when there are
several partitions), and its replica groups, use_global_device_ids, constrain_layout and
reduction verbatim. The topology is the context's (``PassContext.topology_for``): the module
header's unless the caller gives one.
"""

from __future__ import annotations

from typing import Any

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.topology import Topology
from neuron_sim.proofs.index.ar_ds_pairs import ArDsPair, find_ar_ds_pairs
from neuron_sim.proofs.index.fold_proof import FoldProof, prove_pair
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.context_hazards import Reliance, relies_on
from neuron_sim.passes.neuron.reduce_scatter_emitter import describe_reduce_scatter

SEED = ("allreduce-reducescatter-dynamicslice-rewrites.txt § Shared Emitter (the rewrite); "
        "the gate is a z3 proof instead of the seed's matchers")


class RewriteAllReduceDynamicSliceProven(HloPass):
    """all-reduce + dynamic-slice -> reduce-scatter, exactly where z3 proves every device reads
    its own reduce-scatter block."""

    name = "rewrite_all_reduce_dynamic_slice_proven"
    seed_status = SeedStatus.INFERRED
    seed = SEED
    summary = ("dynamic-slice(all-reduce(x), offset) -> reduce-scatter(x) when z3 proves "
               "clamp(offset) == position * shard on every device (sees through fusions)")
    hazard = relies_on(Reliance.LOGICAL_GROUPS)
    seed_says = "(none: not in the seed)"
    our_reading = ("folds an all-reduce + dynamic-slice into a reduce-scatter exactly when z3 "
                   "proves `clamp(offset(d)) == position(d) * s` for every device of the "
                   "topology; sees through fusions; the proof is `proofs/index/fold_proof.py` "
                   "(z3)")
    known_unsafety = ("none known; keeps a channel_id only if the all-reduce had one (the seed's "
                      "emitter always adds one, which turns a CrossReplica all-reduce into a "
                      "CrossReplicaAndPartition reduce-scatter)")

    def __init__(self, *, topology: Topology | None = None) -> None:
        super().__init__(topology=topology)
        self.proofs: list[FoldProof] = []   # one per pair of the last run
        self.skipped: list[str] = []        # pairs not folded, and why

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        self.proofs, self.skipped = [], []
        topology = context.topology_for(module)
        changed = False
        for pair in find_ar_ds_pairs(module):
            try:
                proof = prove_pair(pair, topology)
            except ValueError as exc:
                self.skipped.append(f"{pair.name}: {exc}")
                continue
            self.proofs.append(proof)
            if not proof.proven:
                self.skipped.append(proof.describe())
                continue
            line = _fold(pair, module)
            if line is None:
                self.skipped.append(f"{pair.name}: proven sound, but the slice sits in a "
                                    "computation this pass cannot rewrite (nested or shared)")
                continue
            self.record(line)
            changed = True
        return changed


def reduce_scatter_for(all_reduce: HloInstruction, ds: HloInstruction, slice_dim: int,
                       module: HloModule) -> HloInstruction:
    """A new (not yet added) reduce-scatter of the all-reduce's operand with ``ds``'s shape."""
    attrs: dict[str, Any] = {}
    if all_reduce.channel_id is not None:
        attrs["channel_id"] = module.next_channel_id()
    attrs["replica_groups"] = all_reduce.get("replica_groups", ReplicaGroups())
    if all_reduce.get("constrain_layout", False):
        attrs["constrain_layout"] = True
    if all_reduce.use_global_device_ids:
        attrs["use_global_device_ids"] = True
    attrs["dimensions"] = (slice_dim,)
    attrs["to_apply"] = all_reduce.to_apply
    return make_instruction(all_reduce.parent, Opcode.REDUCE_SCATTER, [all_reduce.operand(0)],
                            shape=ds.shape, name="reduce-scatter", **attrs)


def _fold(pair: ArDsPair, module: HloModule) -> str | None:
    """Rewrite one proven pair; the rewrite-log line, or None if its placement is unsupported."""
    ds, ar = pair.dynamic_slice, pair.all_reduce
    outer: HloComputation = ar.parent
    rs = reduce_scatter_for(ar, ds, pair.slice_dim, module)
    if not pair.is_fused:
        ds.parent.replace_instruction(ds, rs)
        return describe_reduce_scatter(ds, rs)
    if len(pair.path) != len(pair.all_reduce_path) + 1:
        return None
    fusion = pair.path[-1]
    fused: HloComputation = fusion.called_computations[0]
    if sum(1 for inst in module.instructions() if fused in inst.called_computations) != 1:
        return None
    if fused.root is ds and fusion.shape.compatible(ds.shape):
        outer.replace_instruction(fusion, rs)
        return describe_reduce_scatter(ds, rs) + f" (replacing fusion %{fusion.name})"
    # The slice feeds more of the fusion: pass the reduce-scatter in as a new parameter.
    outer.add_before(rs, fusion)
    parameter = make_instruction(fused, Opcode.PARAMETER, shape=ds.shape,
                                 name=f"{ds.name}.reduce_scatter",
                                 parameter_number=len(fusion.operands))
    fused.add_before(parameter, ds)
    fusion.append_operand(rs)
    fused.replace_instruction(ds, parameter)
    for dropped in _drop_unused_parameters(fusion, fused):
        if not dropped.users and not dropped.is_root and dropped.opcode is not Opcode.PARAMETER:
            outer.remove_with_dead_operands(dropped)
    return describe_reduce_scatter(ds, rs) + f" (fed into fusion %{fusion.name})"


def _drop_unused_parameters(fusion: HloInstruction,
                            fused: HloComputation) -> list[HloInstruction]:
    """Remove fused parameters nothing uses, renumbering the rest and the fusion's operands;
    the operands no longer passed."""
    unused = [p for p in fused.parameters if not p.users and p is not fused.root]
    if not unused:
        return []
    dropped = [fusion.operand(p.parameter_number) for p in unused]
    keep = [p for p in fused.parameters if p not in unused]
    operands = [fusion.operand(p.parameter_number) for p in keep]
    for parameter in unused:
        fused.remove(parameter)
    for number, parameter in enumerate(keep):
        parameter.parameter_number = number
    fusion.drop_operands()
    for operand in operands:
        fusion.append_operand(operand)
    return [d for d in dict.fromkeys(dropped) if d not in operands]
