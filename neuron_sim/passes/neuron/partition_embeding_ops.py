"""PartitionEmbedingOps (key ``aws_neuron_partition_embeding_ops``, the seed's spelling):
a row lookup into a replicated embedding table becomes a vocabulary-parallel lookup.

Seed: hlo-misc-cleanup-sweep.txt §3.6 (Run @0x1f59390, 3158 B, MED). The seed has no checks
and no mechanics: "by name and pipeline position it partitions embedding/gather ops across the
tensor-parallel degree, sharding the embedding-table operand and stitching the per-shard gather
results". Everything below is inferred (seed status "inferred"): the vocabulary-parallel
embedding that Megatron-style tensor parallelism uses, which is also what XLA's SPMD
partitioner builds for a table sharded on its row axis (tests/data/jax/emb_named_vocab_sharded).

Accepted (each gate declines otherwise; ``rejection`` says which):

1. a ``gather`` in a non-fusion computation, without batching dimensions;
2. a row lookup: ``start_index_map={0}`` and ``slice_sizes={1, <the table's other dims>}``
   (``collapsed_slice_dims`` either ``{0}`` or ``{}``: JAX's lowered and compiled forms);
3. an integer or float element type (not pred or complex) and integer indices;
4. the table *and the indices* are provably the same on every device
   (``device_invariant_values``): constants, entry parameters declared replicated as XLA reads
   it (``neuron_sim.hlo.replication``: ``parameter_replication={true}`` on several replicas;
   ``sharding={replicated}`` on one replica and several partitions, an SPMD program), and what
   only they compute. The indices matter as much as the table: the all-reduce adds the rows
   *other* partitions looked up, which are this partition's rows only if they looked up the
   same ids. The verifier feeds exactly those parameters the same values on every device;
5. the topology has P > 1 partitions (``PassContext.topology_for``) and P divides the rows V.

Emitted, with n = V / P and p = partition-id (converted to the index type T)::

    rows     = clamp(0, ids, V - 1)                 # the original gather's clamp, made explicit
    local    = rows - p * n
    owned    = local >= 0 and local < n
    shard    = dynamic-slice(table, p * n, 0, ...), sizes {n, ...}
    partial  = select(broadcast(owned), gather(shard, local), broadcast(-0.0 or 0))
    result   = all-reduce(partial), to_apply=add, channel_id=<new>, replica_groups={{0},..,{R-1}}

The all-reduce is CrossReplicaAndPartition (a channel, no use_global_device_ids) with one
singleton replica group per replica: each replica sums over its own P partitions.

Contract: exact. Every row id is owned by exactly one partition, so the sum has one term that is
the row's value and P - 1 fill terms. The fill is ``-0.0`` for floats — ``x + -0.0 == x`` for
every x, ``+0`` and ``-0``, NaN and the infinities included — and 0 for integers, so the sum is
bit-exact in any order (the issue's "up to reassociation" is not needed). Known unsafety: a
runtime whose sum starts from ``+0`` instead of folding the terms (XLA:CPU's in-process
all-reduce, docs/semantics.md §3) turns a ``-0`` row element into ``+0``; a gather inside a
conditional branch or loop that only some partitions execute makes the new all-reduce a
rendezvous they do not all reach (the interpreter reports a collective mismatch). The table is
not shrunk: each partition still holds all of it and slices its shard.
"""

from __future__ import annotations

from typing import Any, Sequence

from neuron_sim.hlo.builder import ComputationBuilder, make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.replication import declared_replication, spmd_topology
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology
from neuron_sim.passes.base import OpExpanderPass, SeedStatus
from neuron_sim.passes.context import PassContext


# Opcodes whose value may differ between devices even when their operands do not.
DEVICE_DEPENDENT = frozenset({
    Opcode.PARTITION_ID, Opcode.REPLICA_ID, Opcode.RNG, Opcode.RNG_BIT_GENERATOR,
    Opcode.RNG_GET_AND_UPDATE_STATE, Opcode.INFEED, Opcode.RECV, Opcode.RECV_DONE,
    Opcode.CUSTOM_CALL})
# Opcodes whose called computations are pure functions of the values handed to them.
PURE_CALLERS = frozenset({Opcode.REDUCE, Opcode.REDUCE_WINDOW, Opcode.SCATTER, Opcode.SORT,
                          Opcode.MAP, Opcode.SELECT_AND_SCATTER})


def is_replicated_parameter(param: HloInstruction, *, spmd: bool = False) -> bool:
    """An entry parameter whose one array leaf is declared the same on every device
    (``neuron_sim.hlo.replication``: ``parameter_replication={true}``, or with ``spmd`` — one
    replica, several partitions — a ``sharding={replicated}``, as XLA reads it)."""
    comp = param.parent
    if comp is None or not comp.is_entry:
        return False
    flags = declared_replication(param, spmd=spmd)
    return len(flags) == 1 and flags[0]


def device_invariant_values(comp: HloComputation, *, spmd: bool = False
                            ) -> set[HloInstruction]:
    """The instructions of ``comp`` that provably hold the same value on every device:
    constants, replicated entry parameters (``is_replicated_parameter``), and what only they
    feed — no partition-id, replica-id, rng, infeed, recv, custom-call or collective on the way,
    and no call, fusion, loop or conditional (their bodies are not analysed)."""
    invariant: set[HloInstruction] = set()
    for inst in comp.post_order():
        if inst.opcode is Opcode.PARAMETER:
            ok = is_replicated_parameter(inst, spmd=spmd)
        elif inst.opcode in DEVICE_DEPENDENT or inst.opcode.is_collective:
            ok = False
        elif inst.called_computations and inst.opcode not in PURE_CALLERS:
            ok = False
        else:
            ok = all(op in invariant for op in inst.operands)
        if ok:
            invariant.add(inst)
    return invariant


def row_lookup_rejection(gather: HloInstruction) -> str | None:
    """Why ``gather`` is not a row lookup of a whole table row (gates 1-3), or None."""
    if gather.opcode is not Opcode.GATHER:
        return "not a gather"
    if gather.parent is not None and gather.parent.parent is not None and \
            gather.parent in gather.parent.parent.fusion_computations():
        return "in a fusion computation"
    table, ids = gather.operand(0), gather.operand(1)
    if tuple(gather.get("operand_batching_dims", ())):
        return "the gather has batching dimensions"
    slice_sizes = tuple(gather.get("slice_sizes", ()))
    if (tuple(gather.get("start_index_map", ())) != (0,) or table.shape.rank < 1
            or slice_sizes != (1, *table.shape.dims[1:])):
        return "not a lookup of whole rows (start_index_map={0}, slice_sizes={1, row dims})"
    collapsed = tuple(gather.get("collapsed_slice_dims", ()))
    if collapsed not in ((), (0,)):
        return "collapsed_slice_dims is neither {} nor {0}"
    et = table.shape.element_type
    if not (et.is_float or et.is_integral) or et.is_complex or et.spelling == "pred":
        return f"table element type {et.spelling} is not an integer or float type"
    if not ids.shape.element_type.is_integral:
        return "the indices are not integers"
    return None


def owner_mask_dims(gather: HloInstruction) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batch shape of a gather (its output dims that are not offset dims: one per index
    element) and those dims' positions in the output."""
    offset_dims = set(gather.get("offset_dims", ()))
    positions = tuple(d for d in range(gather.shape.rank) if d not in offset_dims)
    return tuple(gather.shape.dims[d] for d in positions), positions


def next_channel_id(module: HloModule) -> int:
    """One more than the largest channel_id in ``module``."""
    return 1 + max((inst.channel_id or 0 for inst in module.instructions()), default=0)


def scalar_add_computation(module: HloModule, element_type_spelling: str) -> HloComputation:
    """A new ``add`` reduction over scalars of the type, placed before its first user."""
    builder = ComputationBuilder(f"embedding_sum.{element_type_spelling}")
    a = builder.parameter(0, f"{element_type_spelling}[]", "lhs")
    b = builder.parameter(1, f"{element_type_spelling}[]", "rhs")
    comp = builder.build(builder.add(a, b))
    module.add_computation(comp)
    module.computations.remove(comp)
    module.computations.insert(0, comp)
    return comp


class PartitionEmbedingOps(OpExpanderPass):
    """gather(replicated table, ids) -> per-partition gather of its row shard, masked, summed."""

    name = "aws_neuron_partition_embeding_ops"
    seed_status = SeedStatus.INFERRED
    seed = "hlo-misc-cleanup-sweep.txt §3.6 PartitionEmbedingOps (no mechanics in the seed)"
    summary = ("a row gather from a replicated table -> each partition gathers from its row "
               "shard, out-of-shard rows masked (-0.0 / 0), then an all-reduce sum")
    pipelines = {"neuron-closer": 17}
    seed_says = ("\"partitions embedding/gather ops across the tensor-parallel degree\"; "
                 "mechanics a GAP (MED)")
    our_reading = ("a whole-row gather (`start_index_map={0}`, `slice_sizes={1, row}`) whose "
                   "table and ids are the same on every device (constants, parameters declared "
                   "replicated — `parameter_replication={true}`, or `sharding={replicated}` in an "
                   "SPMD program — what they alone compute), P > 1 dividing the rows -> clamp "
                   "ids, dynamic-slice the partition's shard, gather, select with `-0.0` / 0, "
                   "all-reduce sum (`channel_id`, `{{0},..,{R-1}}`)")
    known_unsafety = ("(one owner per row; `x + -0.0 == x`, so the sum is bit-exact in any order) "
                      "a runtime whose sum starts from +0 turns a -0 element into +0; a gather "
                      "under device-dependent control flow makes a rendezvous not every partition "
                      "reaches")

    def topology(self, inst: HloInstruction) -> Topology:
        module = inst.parent.parent if inst.parent is not None else None
        return (self.context.topology_for(module) if module is not None
                else self.context.topology or Topology())

    def rejection(self, inst: HloInstruction) -> str | None:
        """Why ``inst`` is not rewritten (the first failing gate), or None."""
        reason = row_lookup_rejection(inst)
        if reason is not None:
            return reason
        topology = self.topology(inst)
        invariant = self.invariant_values(
            inst.parent, spmd=spmd_topology(topology.replica_count, topology.num_partitions))
        for operand, what in ((inst.operand(0), "table"), (inst.operand(1), "indices")):
            if operand not in invariant:
                return (f"the {what} may differ between partitions (only constants, entry "
                        "parameters declared replicated — parameter_replication={true}, or "
                        "sharding={replicated} with one replica — and what they alone compute "
                        "count as the same)")
        partitions = self.topology(inst).num_partitions
        rows = inst.operand(0).shape.dims[0]
        if partitions < 2:
            return "the topology has one partition"
        if rows % partitions:
            return f"{rows} table rows do not divide by {partitions} partitions"
        return None

    def matches(self, inst: HloInstruction) -> bool:
        return self.rejection(inst) is None

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        self._invariant: dict[HloComputation, set[HloInstruction]] = {}
        return super().run_on_module(module, context)

    def invariant_values(self, comp: HloComputation, *, spmd: bool = False
                         ) -> set[HloInstruction]:
        """``device_invariant_values(comp)``, computed once per computation and run (the
        matcher runs on the unmodified module, before any expansion)."""
        cache = getattr(self, "_invariant", None)
        if cache is None:
            return device_invariant_values(comp, spmd=spmd)
        if (comp, spmd) not in cache:
            cache[(comp, spmd)] = device_invariant_values(comp, spmd=spmd)
        return cache[(comp, spmd)]

    def expand(self, inst: HloInstruction) -> HloInstruction:
        comp = inst.parent
        module = comp.parent
        topology = self.topology(inst)
        table, ids = inst.operand(0), inst.operand(1)
        rows = table.shape.dims[0]
        shard_rows = rows // topology.num_partitions
        index_type = ids.shape.element_type

        def emit(opcode: Opcode, operands: Sequence[HloInstruction] = (), **attrs: Any
                 ) -> HloInstruction:
            return comp.add_before(make_instruction(comp, opcode, operands, **attrs), inst)

        def scalar(value: Any, element_type: Any = index_type) -> HloInstruction:
            shape = ArrayShape(element_type, ())
            return emit(Opcode.CONSTANT, shape=shape, literal=Literal.from_array(shape, value))

        def spread(x: HloInstruction, like: ArrayShape) -> HloInstruction:
            return emit(Opcode.BROADCAST, (x,), shape=ArrayShape(like.element_type, like.dims),
                        dimensions=())

        partition = emit(Opcode.PARTITION_ID)
        if partition.shape.element_type is not index_type:
            partition = emit(Opcode.CONVERT, (partition,),
                             shape=ArrayShape(index_type, ()))
        offset = emit(Opcode.MULTIPLY, (partition, scalar(shard_rows)))
        clamped = emit(Opcode.CLAMP, (scalar(0), ids, scalar(rows - 1)))
        local = emit(Opcode.SUBTRACT, (clamped, spread(offset, ids.shape)))
        owned = emit(Opcode.AND, (
            emit(Opcode.COMPARE, (local, spread(scalar(0), ids.shape)), direction="GE"),
            emit(Opcode.COMPARE, (local, spread(scalar(shard_rows), ids.shape)),
                 direction="LT")))
        zero = scalar(0)
        shard = emit(Opcode.DYNAMIC_SLICE,
                     (table, offset, *([zero] * (table.shape.rank - 1))),
                     dynamic_slice_sizes=(shard_rows, *table.shape.dims[1:]))
        attributes = {key: inst.get(key) for key in (
            "offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
            "slice_sizes", "indices_are_sorted") if inst.has(key)}
        looked_up = emit(Opcode.GATHER, (shard, local), shape=inst.shape, **attributes)
        batch_dims, positions = owner_mask_dims(inst)
        owned_batch = emit(Opcode.RESHAPE, (owned,),
                           shape=ArrayShape(owned.shape.element_type, batch_dims))
        mask = emit(Opcode.BROADCAST, (owned_batch,),
                    shape=ArrayShape(owned.shape.element_type, inst.shape.dims),
                    dimensions=positions)
        out_type = inst.shape.element_type
        fill = spread(scalar(-0.0 if out_type.is_float else 0, out_type), inst.shape)
        partial = emit(Opcode.SELECT, (mask, looked_up, fill))
        groups = [[r] for r in range(topology.replica_count)]
        total = make_instruction(
            comp, Opcode.ALL_REDUCE, (partial,), shape=inst.shape, name=inst.name,
            channel_id=next_channel_id(module), replica_groups=groups,
            to_apply=scalar_add_computation(module, out_type.spelling))
        return comp.add_before(total, inst)

    def describe(self, old: HloInstruction, new: HloInstruction) -> str:
        shard = new.operand(0).operand(1).operand(0)
        return (f"%{old.name} -> %{new.name} (all-reduce of a masked gather from "
                f"{shard.shape.dims[0]}-row shards of %{shard.operand(0).name})")
