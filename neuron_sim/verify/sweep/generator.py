"""The cases of ``neuron-sim sweep``: all-reduce + dynamic-slice idioms over topologies, group
layouts, group modes, device assignments, slice dimensions and sizes, and offset forms.

A case is one module (``SweepIdiom``, an ``ArDsIdiom`` that can also slice dimension 1 and
carry its groups in iota or mesh form) on one topology. The full cross product of the axes is
far too large to run (and most of it says nothing new), so the set is built in five parts, each
covering what it is for:

* **grid** — every R x P with 2 <= R*P <= ``max_devices``: the three all-reduce group modes x
  one / contiguous / strided / unsorted groups x the seed's ``partition-id * s`` and XLA's
  per-id table: where the seed matchers break as the topology grows;
* **axes** — a few small topologies (1x8, 2x4, 4x2, 1x6, 8x1) with every layout, every offset
  form, fused and unfused: every form against every layout;
* **variants** — on 1x8 and 2x4: slice dimension 0 / 1, shard sizes 1 / 2 / a shard that does
  not tile the extent, default / reversed / random (``seed``) device assignments;
* **pools** — the seed's three constant pools on 1 x G*g partitions, contiguous and strided,
  for G in 1..4, g in 2..4, s in 1..3: the region the pool theorems
  (``neuron_sim.proofs.pools``) characterize;
* **presets** — the Trainium machines people run (``PRESETS``), with their tp/dp
  factorisations, always included (they may exceed ``max_devices``).

Combinations that cannot be built (CrossPartition all-reduces, empty groups in FlattenedID
mode, a table over two ids, ...) are returned as ``Skip`` records with the reason, never raised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterator

from neuron_sim.hlo import HloInstruction, HloModule
from neuron_sim.hlo.builder import ComputationBuilder
from neuron_sim.hlo.replica_groups import (IotaReplicaGroups, MeshAxisRef, MeshReplicaGroups,
                                           ReplicaGroups)
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology
from neuron_sim.passes.neuron.offset_pools import POOL_READINGS
from neuron_sim.proofs.idioms import (MODE_ATTRIBUTES, ArDsIdiom, Coordinates, Offset,
                                    offset_divmod, offset_flattened, offset_id_times,
                                    offset_jax, offset_pool, offset_table, offset_constant)

MODES = ("cross_replica", "cross_partition", "cross_replica_and_partition", "flattened")
LAYOUTS = ("one", "contiguous", "strided", "unsorted", "reversed", "iota_transposed", "mesh",
           "empty")
OFFSET_FORMS = ("partition_id_times_s", "replica_id_times_s", "flattened_id_times_s",
                "pool_identity", "pool_multiplied", "pool_repeated", "table", "iota_table",
                "subtract", "jax_select", "remainder", "divide", "constant")
ASSIGNMENTS = ("default", "reversed", "random")
COLUMNS = 2
DEFAULT_MAX_DEVICES = 64


# --------------------------------------------------------------------------------------------
# Presets: real Neuron machines and the tensor/data-parallel splits run on them.


@dataclass(frozen=True)
class Preset:
    """A machine: its NeuronCore count as the runtime sees it and the (tp, dp) splits used.

    ``cores_per_chip`` is the number of (logical) cores one chip holds: a TP degree up to it
    stays within a chip.
    """

    name: str
    cores: int
    cores_per_chip: int
    splits: tuple[tuple[int, int], ...]   # (tp, dp), tp * dp == cores
    source: str


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("trn1.2xlarge", 2, 2, ((2, 1),),
           "AWS: trn1.2xlarge has 1 Trainium chip with 2 NeuronCore-v2"),
    Preset("trn1.32xlarge", 32, 2, ((2, 16), (8, 4), (32, 1)),
           "AWS: trn1.32xlarge has 16 Trainium chips, 2 NeuronCore-v2 each (32 cores); "
           "Neuron's tutorials run TP8 and TP32"),
    Preset("trn2.48xlarge-lnc2", 64, 4, ((4, 16), (8, 8), (32, 2), (64, 1)),
           "AWS: trn2.48xlarge has 16 Trainium2 chips of 8 physical NeuronCore-v3; at the "
           "default logical core size LNC=2 a chip is 4 logical cores (64 in all)"),
    Preset("trn2.48xlarge-lnc1", 128, 8, ((8, 16), (32, 4), (64, 2)),
           "the same instance at LNC=1: 8 cores per chip, 128 in all"),
    Preset("trn2u.48xlarge-lnc2", 256, 4, ((4, 64), (64, 4), (128, 2)),
           "AWS: a Trn2 UltraServer joins 4 trn2 instances (64 Trainium2 chips) over "
           "NeuronLink: 256 logical cores at LNC=2"),
)}


# --------------------------------------------------------------------------------------------
# The idiom.


@dataclass(frozen=True)
class SweepIdiom(ArDsIdiom):
    """``ArDsIdiom`` with the slice along ``slice_dim`` (0 or 1) and ``replica_groups`` in any
    form (explicit, iota, mesh); ``groups`` is unused."""

    slice_dim: int = 0
    replica_groups: ReplicaGroups = field(default_factory=ReplicaGroups)

    def _shape(self, rows: int) -> ArrayShape:
        shape = super()._shape(rows)
        return shape if self.slice_dim == 0 else ArrayShape(shape.element_type,
                                                            tuple(reversed(shape.dims)))

    def _group_attributes(self) -> dict:
        channel_id, use_global_device_ids = MODE_ATTRIBUTES[self.mode]
        return {"replica_groups": self.replica_groups, "channel_id": channel_id,
                "use_global_device_ids": use_global_device_ids}

    def _slice(self, b: ComputationBuilder, source: HloInstruction,
               parameters: Coordinates) -> HloInstruction:
        if self.slice_dim == 0:
            return super()._slice(b, source, parameters)
        offset = self.offset.build(b, parameters)
        zero = b.constant(0, offset.shape, "zero")
        return b.dynamic_slice(source, [zero, offset], [self.columns, self.slice_size],
                               "dynamic-slice")

    def reduce_scatter_module(self) -> HloModule:
        m, total = self._begin()
        e = m.computation("main")
        x = e.parameter(0, self._shape(self.full), "x")
        e.reduce_scatter(x, dimension=self.slice_dim, to_apply=total, name="reduce-scatter",
                         **self._group_attributes())
        return m.build(e.build())


# --------------------------------------------------------------------------------------------
# Cases.


@dataclass(frozen=True)
class Case:
    """One idiom on one topology, with the axis values it was built from."""

    id: str
    part: str
    topology_label: str
    replicas: int
    partitions: int
    assignment: str
    mode: str
    layout: str
    offset_form: str
    fused: bool
    slice_dim: int
    slice_size: int
    full: int
    replica_groups: ReplicaGroups
    offset: Offset = field(compare=False, repr=False)
    device_assignment: tuple[tuple[int, ...], ...] | None = None
    preset: str | None = None

    @property
    def topology(self) -> Topology:
        return Topology(self.replicas, self.partitions, self.device_assignment)

    def idiom(self) -> SweepIdiom:
        return SweepIdiom(self.id, self.replicas, self.partitions, None, self.mode, self.full,
                          self.slice_size, self.offset, columns=COLUMNS, fused=self.fused,
                          slice_dim=self.slice_dim, replica_groups=self.replica_groups)

    def to_json(self) -> dict:
        return {"id": self.id, "part": self.part, "topology": self.topology_label,
                "replicas": self.replicas, "partitions": self.partitions,
                "preset": self.preset, "assignment": self.assignment,
                "device_assignment": [list(r) for r in self.device_assignment]
                if self.device_assignment else None,
                "mode": self.mode, "layout": self.layout,
                "replica_groups": self.replica_groups.to_text(),
                "offset_form": self.offset_form, "fused": self.fused,
                "slice_dim": self.slice_dim, "slice_size": self.slice_size,
                "extent": self.full}


@dataclass(frozen=True)
class Skip:
    """An axis combination that cannot be built, and why."""

    description: str
    reason: str

    def to_json(self) -> dict:
        return {"case": self.description, "reason": self.reason}


@dataclass(frozen=True)
class Spec:
    """The axis values of one candidate case (before it is checked and built)."""

    part: str
    replicas: int
    partitions: int
    mode: str
    layout: str
    offset_form: str
    fused: bool = False
    slice_dim: int = 0
    slice_size: int = 2
    shard_fits: bool = True
    assignment: str = "default"
    width: int | None = None          # group width; None: the layout's default
    label: str | None = None
    preset: str | None = None

    def describe(self) -> str:
        fused = " fused" if self.fused else ""
        width = f" g={self.width}" if self.width else ""
        fits = "" if self.shard_fits else " shard-not-tiling"
        return (f"{self.label or f'{self.replicas}x{self.partitions}'} {self.mode} "
                f"{self.layout}{width} {self.offset_form}{fused} dim{self.slice_dim} "
                f"s={self.slice_size}{fits} {self.assignment}")


class UnbuildableSpec(Exception):
    """The spec cannot be built; the message is the reason."""


def _id_space(mode: str, replicas: int, partitions: int) -> int:
    """How many ids the groups of ``mode`` name (docs/semantics.md §2)."""
    return replicas * partitions if mode == "flattened" else replicas


def _default_width(n: int) -> int:
    """The width of the equal groups a layout splits ``n`` ids into: n / (its smallest prime
    factor), so there are at least two groups."""
    for p in range(2, n + 1):
        if n % p == 0:
            return n // p
    return n


def _layout_groups(layout: str, n: int, width: int | None) -> ReplicaGroups:
    if layout == "empty":
        return ReplicaGroups()
    if layout in ("one", "unsorted", "reversed"):
        order = list(range(n))
        if layout == "unsorted":
            order[0], order[1] = 1, 0
        elif layout == "reversed":
            order.reverse()
        return ReplicaGroups.explicit((tuple(order),))
    g = width or _default_width(n)
    if g in (1, n) or n % g:
        raise UnbuildableSpec(f"{n} ids do not split into several equal groups of width {g}: a "
                              "layout of equal groups needs a width between 2 and n - 1 dividing n")
    count = n // g
    if layout == "contiguous":
        return ReplicaGroups.explicit(tuple(tuple(range(k * g, k * g + g))
                                            for k in range(count)))
    if layout == "strided":
        return ReplicaGroups.explicit(tuple(tuple(range(k, n, count)) for k in range(count)))
    if layout == "iota_transposed":
        return ReplicaGroups(iota=IotaReplicaGroups(count, g, (g, count), (1, 0)))
    if layout == "mesh":
        return ReplicaGroups(mesh=MeshReplicaGroups(("dp", "tp"), (count, g),
                                                    (MeshAxisRef(1),)))
    raise ValueError(f"unknown layout {layout!r}")


def _positions(groups: tuple[tuple[int, ...], ...], mode: str,
               replicas: int, partitions: int) -> list[int]:
    """Each flattened device's position in its all-reduce group."""
    n = _id_space(mode, replicas, partitions)
    groups = groups or (tuple(range(n)),)
    position = [0] * n
    for group in groups:
        for i, member in enumerate(group):
            position[member] = i
    if mode == "flattened":
        return position
    if mode == "cross_replica":
        return [position[f // partitions] for f in range(replicas * partitions)]
    return [position[f // partitions] * partitions + f % partitions
            for f in range(replicas * partitions)]


def _iota_table(slice_size: int, source: str, size: int, fused: bool) -> Offset:
    """XLA's iota table: ``dynamic-slice(iota, id)`` (its entry is the id), times s."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        iota = b.iota("s32[%d]" % size, 0, "iota")
        entry = b.dynamic_slice(iota, [ids[source]], [1], "entry")
        rank = b.reshape(entry, "s32[]", "rank")
        return b.multiply(rank, b.constant(slice_size, "s32[]", "s"), "offset")
    return Offset(emit, fused)


def _subtract(slice_size: int, source: str, last: int, fused: bool) -> Offset:
    """``(last - id) * s``: the offset of a reversed group."""
    def emit(b: ComputationBuilder, ids: Coordinates) -> HloInstruction:
        index = b.convert(ids[source], "s32", "id")
        rank = b.subtract(b.constant(last, "s32[]", "last"), index, "rank")
        return b.multiply(rank, b.constant(slice_size, "s32[]", "s"), "offset")
    return Offset(emit, fused)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _offset(spec: Spec, groups: tuple[tuple[int, ...], ...], full: int) -> Offset:
    """The spec's offset form, built for its groups; UnbuildableSpec where the form has no
    instance."""
    s, fused, form = spec.slice_size, spec.fused, spec.offset_form
    R, P = spec.replicas, spec.partitions
    n = _id_space(spec.mode, R, P)
    width = len(groups[0]) if groups else n
    count = len(groups) if groups else 1
    # The id the groups name, where one id determines the position.
    own_id = "replica-id" if spec.mode != "flattened" or P == 1 else "partition-id"
    if form == "partition_id_times_s":
        return offset_id_times(s, fused=fused)
    if form == "replica_id_times_s":
        if R == 1:
            raise UnbuildableSpec("one replica: replica-id is always 0")
        return offset_id_times(s, fused=fused, source="replica-id")
    if form == "flattened_id_times_s":
        if R == 1 or P == 1:
            raise UnbuildableSpec("the flattened id equals the only non-trivial id here")
        return offset_flattened(s, P, fused=fused)
    if form.startswith("pool_"):
        if not groups or len(set(len(g) for g in groups)) != 1:
            raise UnbuildableSpec("the pools are built from equal non-empty groups (G and g)")
        return offset_pool(POOL_READINGS[form[len("pool_"):]](count, width, s), s,
                           fused=fused)
    if form in ("table", "iota_table", "subtract"):
        if spec.mode == "cross_replica_and_partition" and P > 1 or \
                spec.mode == "flattened" and R > 1 and P > 1:
            raise UnbuildableSpec("the position depends on both replica-id and partition-id: a "
                                  "per-id table indexes one id")
        size = R if own_id == "replica-id" else P
        if form == "iota_table":
            return _iota_table(s, own_id, size, fused)
        if form == "subtract":
            return _subtract(s, own_id, size - 1, fused)
        position = _positions(groups, spec.mode, R, P)
        table = [position[r * P] for r in range(R)] if own_id == "replica-id" \
            else position[:P]
        return offset_table(table, s, fused=fused, source=own_id)
    if form == "jax_select":
        # JAX's axis_index: (id >> log2(stride)) & (width - 1), for power-of-two sizes.
        stride = count if spec.layout in ("strided", "iota_transposed") else 1
        if not (_is_power_of_two(width) and _is_power_of_two(stride)):
            raise UnbuildableSpec("JAX's shift / and form needs power-of-two axis sizes (it emits "
                                  "remainder and divide otherwise)")
        return offset_jax(s, full, shift=stride.bit_length() - 1,
                          mask=width - 1 if width < n else None, fused=fused, source=own_id)
    if form in ("remainder", "divide"):
        if not groups or count == 1:
            raise UnbuildableSpec(f"{form} by the group count or width needs several groups")
        divisor = width if form == "remainder" else count
        return offset_divmod(s, divisor=divisor, use_remainder=form == "remainder",
                             fused=fused, source=own_id)
    if form == "constant":
        return offset_constant(0, fused=fused)
    raise ValueError(f"unknown offset form {form!r}")


def _assignment(name: str, replicas: int, partitions: int,
                rng: random.Random) -> tuple[tuple[int, ...], ...] | None:
    if name == "default":
        return None
    ids = [p * replicas + r for r in range(replicas) for p in range(partitions)]
    if name == "reversed":
        ids.reverse()
    else:
        rng.shuffle(ids)
    return tuple(tuple(ids[r * partitions:(r + 1) * partitions]) for r in range(replicas))


def build(spec: Spec, rng: random.Random) -> Case:
    """The case for ``spec``; raises UnbuildableSpec with the reason it cannot be built."""
    R, P = spec.replicas, spec.partitions
    if spec.mode == "cross_partition":
        raise UnbuildableSpec("an all-reduce has no CrossPartition mode: with a channel_id and no "
                              "use_global_device_ids it is CrossReplicaAndPartition "
                              "(docs/semantics.md §2)")
    n = _id_space(spec.mode, R, P)
    if spec.layout == "empty" and spec.mode == "flattened":
        raise UnbuildableSpec("empty replica_groups are invalid in FlattenedID mode")
    if n < 2:
        raise UnbuildableSpec(f"the {spec.mode} groups name {n} id: every group is one device, so "
                              "the slice would be the whole extent (not a 1-D shard)")
    replica_groups = _layout_groups(spec.layout, n, spec.width)
    groups = replica_groups.groups
    group_size = len(groups[0]) if groups else n
    if spec.mode == "cross_replica_and_partition":
        group_size *= P
    full = group_size * spec.slice_size + (0 if spec.shard_fits else spec.slice_size)
    offset = _offset(spec, groups, full)
    assignment = _assignment(spec.assignment, R, P, rng)
    label = spec.label or f"{R}x{P}"
    return Case(spec.describe().replace(" ", "/"), spec.part, label, R, P, spec.assignment,
                spec.mode, spec.layout, spec.offset_form, spec.fused, spec.slice_dim,
                spec.slice_size, full, replica_groups, offset, assignment, spec.preset)


# --------------------------------------------------------------------------------------------
# The case set.


GRID_MODES = ("flattened", "cross_replica", "cross_replica_and_partition")
GRID_LAYOUTS = ("one", "contiguous", "strided", "unsorted")
GRID_FORMS = ("partition_id_times_s", "table")
AXES_TOPOLOGIES = ((1, 8), (2, 4), (4, 2), (1, 6), (8, 1))
FUSED_FORMS = ("partition_id_times_s", "table", "jax_select", "pool_repeated", "remainder")
VARIANT_TOPOLOGIES = ((1, 8), (2, 4))
VARIANT_FORMS = ("partition_id_times_s", "table", "jax_select", "pool_repeated")
PRESET_FORMS = ("partition_id_times_s", "table", "jax_select", "remainder", "pool_identity",
                "pool_repeated")


def grid_topologies(max_devices: int) -> list[tuple[int, int]]:
    """Every R x P with 2 <= R*P <= max_devices, by device count then replicas."""
    return [(r, d // r) for d in range(2, max_devices + 1) for r in range(1, d + 1)
            if d % r == 0]


def _grid_specs(max_devices: int) -> Iterator[Spec]:
    for r, p in grid_topologies(max_devices):
        for mode in GRID_MODES:
            for layout in GRID_LAYOUTS:
                for form in GRID_FORMS:
                    yield Spec("grid", r, p, mode, layout, form)


def _axes_specs() -> Iterator[Spec]:
    for r, p in AXES_TOPOLOGIES:
        for mode in MODES:
            for layout in LAYOUTS:
                for form in OFFSET_FORMS:
                    yield Spec("axes", r, p, mode, layout, form)
                    if form in FUSED_FORMS:
                        yield Spec("axes", r, p, mode, layout, form, fused=True)


def _variant_specs() -> Iterator[Spec]:
    for r, p in VARIANT_TOPOLOGIES:
        for layout in ("one", "contiguous", "strided"):
            for form in VARIANT_FORMS:
                for dim in (0, 1):
                    for size, fits in ((1, True), (2, True), (2, False)):
                        for assignment in ASSIGNMENTS:
                            yield Spec("variants", r, p, "flattened", layout, form,
                                       slice_dim=dim, slice_size=size, shard_fits=fits,
                                       assignment=assignment)


POOL_GROUPS = (1, 2, 3, 4)
POOL_WIDTHS = (2, 3, 4)
POOL_SIZES = (1, 2, 3)


def _pool_specs(max_devices: int) -> Iterator[Spec]:
    for G in POOL_GROUPS:
        for g in POOL_WIDTHS:
            if G * g > max_devices:
                continue
            for s in POOL_SIZES:
                for layout in ("contiguous", "strided"):
                    for pool in ("pool_identity", "pool_multiplied", "pool_repeated"):
                        yield Spec("pools", 1, G * g, "flattened",
                                   "one" if G == 1 else layout, pool, slice_size=s, width=g)


def _preset_specs(names: list[str]) -> Iterator[Spec]:
    for name in names:
        preset = PRESETS[name]
        for tp, dp in preset.splits:
            split = f"{name} TP{tp}/DP{dp}"
            # SPMD: one replica, every core a partition; TP groups of tp consecutive cores.
            for form in PRESET_FORMS:
                layout = "one" if dp == 1 else "contiguous"
                yield Spec("presets", 1, preset.cores, "flattened", layout, form,
                           width=tp if dp > 1 else None, label=f"{split} 1x{preset.cores}",
                           preset=name)
            # DP replicas x TP partitions: TP within a replica, then the DP all-reduce.
            if dp > 1:
                for mode, layout, form in (
                        ("flattened", "contiguous", "partition_id_times_s"),
                        ("flattened", "contiguous", "pool_repeated"),
                        ("flattened", "one", "partition_id_times_s"),
                        ("flattened", "one", "flattened_id_times_s"),
                        ("cross_replica", "one", "replica_id_times_s"),
                        ("cross_replica", "one", "partition_id_times_s"),
                        ("cross_replica_and_partition", "one", "flattened_id_times_s")):
                    yield Spec("presets", dp, tp, mode, layout, form,
                               width=tp if layout == "contiguous" else None,
                               label=f"{split} {dp}x{tp}", preset=name)


def generate(max_devices: int = DEFAULT_MAX_DEVICES, *, presets: list[str] | None = None,
             seed: int = 0) -> tuple[list[Case], list[Skip]]:
    """The sweep's cases and the skipped combinations, deterministic given ``seed``.

    ``presets`` None: the grid up to ``max_devices`` devices, the axis, variant and pool parts
    and every preset; a list of preset names: those presets only.
    """
    rng = random.Random(seed)
    if presets is None:
        specs: Iterator[Spec] = _chain(_grid_specs(max_devices), _axes_specs(),
                                       _variant_specs(), _pool_specs(max_devices),
                                       _preset_specs(list(PRESETS)))
    else:
        unknown = [name for name in presets if name not in PRESETS]
        if unknown:
            raise KeyError(unknown[0])
        specs = _preset_specs(presets)
    cases: list[Case] = []
    skips: list[Skip] = []
    seen: set[str] = set()
    for spec in specs:
        try:
            case = build(spec, rng)
        except UnbuildableSpec as exc:
            skips.append(Skip(spec.describe(), str(exc)))
            continue
        if case.id in seen:
            continue
        seen.add(case.id)
        cases.append(case)
    return cases, skips


def _chain(*parts: Iterator[Spec]) -> Iterator[Spec]:
    for part in parts:
        yield from part

