"""Modules for "all-reduce, then each device dynamic-slices its shard" idioms, built with the
HLO builder.

Used to replay pool-theorem witnesses through the interpreter, to cross-check proofs against
execution and to benchmark. ``ArDsIdiom.module()`` is the all-reduce + dynamic-slice module
(``text()`` prints it); ``ArDsIdiom.reduce_scatter_module()`` the module the fold should be
equivalent to (one reduce-scatter over the same groups). The offset is an ``Offset`` — the
``offset_*`` helpers build the forms the seed's matchers and JAX emit — or HLO lines written by
hand that end in ``%offset``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from neuron_sim.hlo import ElementType, HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.builder import ComputationBuilder, ModuleBuilder
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.hlo.shapes import ArrayShape, scalar

# How the collective names its groups (docs/semantics.md §2): (channel_id, use_global_device_ids).
MODE_ATTRIBUTES: dict[str, tuple[int | None, bool]] = {
    "cross_replica": (None, False),
    "cross_replica_and_partition": (1, False),
    "flattened": (1, True),
}

Coordinates = dict[str, HloInstruction]
"""The device's ``partition-id`` and ``replica-id`` (u32 scalars), by those names."""


@dataclass(frozen=True)
class Offset:
    """How ``%offset`` is computed from the device's coordinates.

    ``emit(b, coordinates)`` adds the instructions to ``b`` and returns the offset. An unfused
    offset declares the coordinates itself (``partition-id()`` / ``replica-id()``); a fused one
    (``fused=True``) reads them from the fusion's parameters, as XLA's compiler emits it.
    """

    emit: Callable[[ComputationBuilder, Coordinates], HloInstruction]
    fused: bool = False

    def build(self, b: ComputationBuilder, parameters: Coordinates) -> HloInstruction:
        coordinates = parameters if self.fused else {
            "partition-id": b.partition_id("partition-id"),
            "replica-id": b.replica_id("replica-id")}
        return self.emit(b, coordinates)


OffsetSpec = Offset | Sequence[str]
"""An ``Offset`` or HLO lines written by hand whose last definition is ``%offset``."""


def _build_offset(spec: OffsetSpec, b: ComputationBuilder, parameters: Coordinates,
                  fused: bool) -> HloInstruction:
    if isinstance(spec, Offset):
        if spec.fused != fused:
            raise ValueError(f"the offset is built for a{' fused' * spec.fused}"
                             f"{'n unfused' * (not spec.fused)} idiom")
        return spec.build(b, parameters)
    added = b.instructions_from_text(spec, parameters)
    if "offset" not in added:
        raise ValueError("the offset lines do not define %offset")
    return added["offset"]


@dataclass(frozen=True)
class ArDsIdiom:
    """An all-reduce over ``groups`` of ``s32[full, columns]`` followed by a dynamic-slice of
    ``slice_size`` rows at ``%offset``, on ``replicas`` x ``partitions`` devices.

    ``fused`` puts the dynamic-slice and the offset computation in a kLoop fusion whose
    parameters are the all-reduce and the partition-id / replica-id, as XLA's compiler does.
    """

    name: str
    replicas: int
    partitions: int
    groups: tuple[tuple[int, ...], ...] | None
    mode: str
    full: int
    slice_size: int
    offset: OffsetSpec
    columns: int = 1
    fused: bool = False
    element_type: str = "s32"
    notes: dict = field(default_factory=dict, compare=False)

    def _shape(self, rows: int) -> ArrayShape:
        return ArrayShape(ElementType.from_spelling(self.element_type), (rows, self.columns))

    def _begin(self) -> tuple[ModuleBuilder, HloComputation]:
        """The module builder and its ``%sum`` reducer."""
        m = ModuleBuilder(self.name, replica_count=self.replicas,
                          num_partitions=self.partitions)
        s = m.computation("sum")
        et = scalar(ElementType.from_spelling(self.element_type))
        return m, s.build(s.add(s.parameter(0, et, "a"), s.parameter(1, et, "b"), "add"))

    def _group_attributes(self) -> dict:
        channel_id, use_global_device_ids = MODE_ATTRIBUTES[self.mode]
        return {"replica_groups": ReplicaGroups.explicit(self.groups or ()),
                "channel_id": channel_id, "use_global_device_ids": use_global_device_ids}

    def _slice(self, b: ComputationBuilder, source: HloInstruction,
               parameters: Coordinates) -> HloInstruction:
        offset = _build_offset(self.offset, b, parameters, self.fused)
        zero = b.constant(0, scalar(offset.shape.element_type), "zero")
        return b.dynamic_slice(source, [offset, zero], [self.slice_size, self.columns],
                               "dynamic-slice")

    def module(self) -> HloModule:
        """The all-reduce + dynamic-slice module."""
        m, total = self._begin()
        fused_slice = None
        if self.fused:
            f = m.computation("fused_slice")
            p0 = f.parameter(0, self._shape(self.full), "p0")
            ids = {"partition-id": f.parameter(1, "u32[]", "partition-id"),
                   "replica-id": f.parameter(2, "u32[]", "replica-id")}
            self._slice(f, p0, ids)
            fused_slice = f.build()
        e = m.computation("main")
        x = e.parameter(0, self._shape(self.full), "x")
        reduced = e.all_reduce(x, to_apply=total, name="all-reduce", **self._group_attributes())
        if fused_slice is None:
            self._slice(e, reduced, {})
        else:
            e.fusion(fused_slice, [reduced, e.partition_id("pid"), e.replica_id("rid")],
                     name="fusion")
        return m.build(e.build())

    def reduce_scatter_module(self) -> HloModule:
        """The module the fold should produce: one reduce-scatter of ``%x`` over the groups."""
        m, total = self._begin()
        e = m.computation("main")
        x = e.parameter(0, self._shape(self.full), "x")
        e.reduce_scatter(x, dimension=0, to_apply=total, name="reduce-scatter",
                         **self._group_attributes())
        return m.build(e.build())

    def text(self) -> str:
        return self.module().to_text()

    def reduce_scatter_text(self) -> str:
        return self.reduce_scatter_module().to_text()


# --- offsets ---------------------------------------------------------------------------------


def _u32(b: ComputationBuilder, value: int, name: str) -> HloInstruction:
    return b.constant(value, "u32[]", name)


def offset_id_times(slice_size: int, *, fused: bool = False, source: str = "partition-id",
                    index_type: str = "u32") -> Offset:
    """``convert(id) * s``: the seed's single-group form (``index_type`` u32: no convert)."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        if index_type == "u32":
            return b.multiply(ids[source], _u32(b, slice_size, "s"), "offset")
        index = b.convert(ids[source], index_type, "id")
        return b.multiply(index, b.constant(slice_size, index.shape, "s"), "offset")
    return Offset(emit, fused)


def offset_pool(pool: Sequence[int], slice_size: int, *, fused: bool = False) -> Offset:
    """``reshape(s * dynamic-slice(POOL, partition-id))`` — the multiple-groups form."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        table = b.constant(list(pool), ArrayShape(ElementType.S32, (len(pool),)), "pool")
        rank = b.dynamic_slice(table, [ids["partition-id"]], [1], "rank")
        shard = b.constant([slice_size], ArrayShape(ElementType.S32, (1,)), "shard")
        return b.reshape(b.multiply(shard, rank, "scaled"), "s32[]", "offset")
    return Offset(emit, fused)


def offset_jax(slice_size: int, full: int, *, shift: int = 0, mask: int | None = None,
               fused: bool = False, source: str = "partition-id") -> Offset:
    """What JAX emits for ``axis_index * s``: ``((id >> shift) & mask)`` as s32, times s, then
    ``select(mul < 0, mul + full, mul)`` (the negative-index wrap of dynamic_slice_in_dim)."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        value = ids[source]
        if shift:
            value = b.binary(Opcode.SHIFT_RIGHT_LOGICAL, value, _u32(b, shift, "shift"),
                             "shifted")
        if mask is not None:
            value = b.binary(Opcode.AND, value, _u32(b, mask, "mask"), "masked")
        index = b.convert(value, "s32", "index")
        mul = b.multiply(index, b.constant(slice_size, "s32[]", "s"), "mul")
        negative = b.compare(mul, b.constant(0, "s32[]", "zero.0"), "LT", "negative")
        wrapped = b.add(mul, b.constant(full, "s32[]", "full"), "wrapped")
        return b.select(negative, wrapped, mul, "offset")
    return Offset(emit, fused)


def _divmod(b: ComputationBuilder, value: HloInstruction, divisor: int,
            use_remainder: bool) -> HloInstruction:
    """``value % divisor`` or ``value / divisor``, named ``%rank``."""
    opcode = Opcode.REMAINDER if use_remainder else Opcode.DIVIDE
    return b.binary(opcode, value, b.constant(divisor, value.shape, "divisor"), "rank")


def offset_divmod(slice_size: int, *, divisor: int, use_remainder: bool, fused: bool = False,
                  source: str = "partition-id") -> Offset:
    """``(id % divisor) * s`` or ``(id / divisor) * s`` in s32."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        rank = _divmod(b, b.convert(ids[source], "s32", "id"), divisor, use_remainder)
        return b.multiply(rank, b.constant(slice_size, "s32[]", "s"), "offset")
    return Offset(emit, fused)


def offset_flattened(slice_size: int, partitions: int, *, fused: bool = False,
                     divisor: int | None = None, use_remainder: bool = True) -> Offset:
    """``(replica-id * P + partition-id)`` (optionally ``% divisor`` or ``/ divisor``) times s."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        r_times_p = b.multiply(ids["replica-id"], _u32(b, partitions, "P"), "rP")
        value = b.add(r_times_p, ids["partition-id"], "flat")
        if divisor is not None:
            value = _divmod(b, value, divisor, use_remainder)
        return b.multiply(value, _u32(b, slice_size, "s"), "offset")
    return Offset(emit, fused)


def offset_table(table: Sequence[int], slice_size: int, *, fused: bool = False,
                 source: str = "partition-id", element_type: str = "s32") -> Offset:
    """``table[id] * s`` with the table read by a one-element dynamic-slice, then reshaped."""
    et = ElementType.from_spelling(element_type)

    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        values = b.constant(list(table), ArrayShape(et, (len(table),)), "table")
        entry = b.dynamic_slice(values, [ids[source]], [1], "entry")
        rank = b.reshape(entry, scalar(et), "rank")
        return b.multiply(rank, b.constant(slice_size, scalar(et), "s"), "offset")
    return Offset(emit, fused)


def offset_constant(value: int, *, fused: bool = False) -> Offset:
    """The same offset on every device."""
    return Offset(lambda b, ids: b.constant(value, "s32[]", "offset"), fused)
