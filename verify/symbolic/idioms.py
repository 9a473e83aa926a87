"""HLO text for "all-reduce, then each device dynamic-slices its shard" idioms.

Used to replay pool-theorem witnesses through the interpreter, to cross-check proofs against
execution and to benchmark. ``ArDsIdiom.text()`` is the all-reduce + dynamic-slice module;
``ArDsIdiom.reduce_scatter_text()`` the module the fold should be equivalent to (one
reduce-scatter over the same groups). The offset is a list of HLO lines ending in ``%offset``;
the ``offset_*`` helpers spell the forms the seed's matchers and JAX emit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from neuron_sim.hlo.replica_groups import format_int_lists

# How the all-reduce names its groups (SEMANTICS.md §2): attributes per group mode.
MODE_ATTRIBUTES = {
    "cross_replica": "",
    "cross_replica_and_partition": "channel_id=1, ",
    "flattened": "channel_id=1, ",
}
MODE_SUFFIX = {"flattened": ", use_global_device_ids=true"}


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
    offset_lines: tuple[str, ...]
    columns: int = 1
    fused: bool = False
    element_type: str = "s32"
    notes: dict = field(default_factory=dict, compare=False)

    @property
    def offset_type(self) -> str:
        """The element type of %offset (all start indices of a dynamic-slice share it)."""
        for line in self.offset_lines:
            if line.startswith("%offset = "):
                return line.split()[2].split("[")[0]
        raise ValueError(f"idiom {self.name}: no line defines %offset")

    def _header(self) -> str:
        return (f"HloModule {self.name}, replica_count={self.replicas}, "
                f"num_partitions={self.partitions}\n\n"
                f"%sum (a: {self.element_type}[], b: {self.element_type}[]) -> "
                f"{self.element_type}[] {{\n"
                f"  %a = {self.element_type}[] parameter(0)\n"
                f"  %b = {self.element_type}[] parameter(1)\n"
                f"  ROOT %add = {self.element_type}[] add(%a, %b)\n}}\n\n")

    def _groups_text(self) -> str:
        return format_int_lists(self.groups) if self.groups else "{}"

    def _all_reduce_line(self) -> str:
        et, rows, cols = self.element_type, self.full, self.columns
        return (f"  %all-reduce = {et}[{rows},{cols}]{{1,0}} all-reduce(%x), "
                f"{MODE_ATTRIBUTES[self.mode]}replica_groups={self._groups_text()}"
                f"{MODE_SUFFIX.get(self.mode, '')}, to_apply=%sum\n")

    def _slice_lines(self, source: str) -> str:
        et, s, cols = self.element_type, self.slice_size, self.columns
        body = "".join(f"  {line}\n" for line in self.offset_lines)
        return (body + f"  %zero = {self.offset_type}[] constant(0)\n"
                f"  ROOT %dynamic-slice = {et}[{s},{cols}]{{1,0}} dynamic-slice({source}, "
                f"%offset, %zero), dynamic_slice_sizes={{{s},{cols}}}\n")

    def text(self) -> str:
        """The all-reduce + dynamic-slice module."""
        et, rows, cols, s = self.element_type, self.full, self.columns, self.slice_size
        entry_head = (f"ENTRY %main (x: {et}[{rows},{cols}]) -> {et}[{s},{cols}] {{\n"
                      f"  %x = {et}[{rows},{cols}]{{1,0}} parameter(0)\n"
                      + self._all_reduce_line())
        if not self.fused:
            return self._header() + entry_head + self._slice_lines("%all-reduce") + "}\n"
        fused = (f"%fused_slice (p0: {et}[{rows},{cols}], p1: u32[], p2: u32[]) -> "
                 f"{et}[{s},{cols}] {{\n"
                 f"  %p0 = {et}[{rows},{cols}]{{1,0}} parameter(0)\n"
                 "  %partition-id = u32[] parameter(1)\n"
                 "  %replica-id = u32[] parameter(2)\n"
                 + self._slice_lines("%p0") + "}\n\n")
        entry = (entry_head + "  %pid = u32[] partition-id()\n  %rid = u32[] replica-id()\n"
                 f"  ROOT %fusion = {et}[{s},{cols}]{{1,0}} fusion(%all-reduce, %pid, %rid), "
                 "kind=kLoop, calls=%fused_slice\n}\n")
        return self._header() + fused + entry

    def reduce_scatter_text(self) -> str:
        """The module the fold should produce: one reduce-scatter of ``%x`` over the groups."""
        et, rows, cols, s = self.element_type, self.full, self.columns, self.slice_size
        return (self._header()
                + f"ENTRY %main (x: {et}[{rows},{cols}]) -> {et}[{s},{cols}] {{\n"
                f"  %x = {et}[{rows},{cols}]{{1,0}} parameter(0)\n"
                f"  ROOT %reduce-scatter = {et}[{s},{cols}]{{1,0}} reduce-scatter(%x), "
                f"{MODE_ATTRIBUTES[self.mode]}replica_groups={self._groups_text()}"
                f"{MODE_SUFFIX.get(self.mode, '')}, dimensions={{0}}, to_apply=%sum\n}}\n")


# --- offsets ---------------------------------------------------------------------------------
# Each returns HLO lines that define %offset from %partition-id / %replica-id (declared by
# the helper unless the idiom is fused, where they are fusion parameters; see ``coordinates``).


def coordinates(fused: bool) -> list[str]:
    """The lines that declare %partition-id and %replica-id in an unfused idiom."""
    return [] if fused else ["%partition-id = u32[] partition-id()",
                             "%replica-id = u32[] replica-id()"]


def offset_id_times(slice_size: int, *, fused: bool = False, source: str = "partition-id",
                    index_type: str = "u32") -> tuple[str, ...]:
    """``convert(id) * s``: the seed's single-group form (``index_type`` u32: no convert)."""
    lines = coordinates(fused)
    if index_type == "u32":
        lines += [f"%s = u32[] constant({slice_size})",
                  f"%offset = u32[] multiply(%{source}, %s)"]
    else:
        lines += [f"%id = {index_type}[] convert(%{source})",
                  f"%s = {index_type}[] constant({slice_size})",
                  f"%offset = {index_type}[] multiply(%id, %s)"]
    return tuple(lines)


def offset_pool(pool: Sequence[int], slice_size: int, *,
                fused: bool = False) -> tuple[str, ...]:
    """``reshape(s * dynamic-slice(POOL, partition-id))`` — the multiple-groups form."""
    values = ", ".join(str(v) for v in pool)
    return tuple(coordinates(fused) + [
        f"%pool = s32[{len(pool)}]{{0}} constant({{{values}}})",
        "%rank = s32[1]{0} dynamic-slice(%pool, %partition-id), dynamic_slice_sizes={1}",
        f"%shard = s32[1]{{0}} constant({{{slice_size}}})",
        "%scaled = s32[1]{0} multiply(%shard, %rank)",
        "%offset = s32[] reshape(%scaled)"])


def offset_jax(slice_size: int, full: int, *, shift: int = 0, mask: int | None = None,
               fused: bool = False, source: str = "partition-id") -> tuple[str, ...]:
    """What JAX emits for ``axis_index * s``: ``((id >> shift) & mask)`` as s32, times s, then
    ``select(mul < 0, mul + full, mul)`` (the negative-index wrap of dynamic_slice_in_dim)."""
    lines = coordinates(fused)
    value = f"%{source}"
    if shift:
        lines += [f"%shift = u32[] constant({shift})",
                  f"%shifted = u32[] shift-right-logical({value}, %shift)"]
        value = "%shifted"
    if mask is not None:
        lines += [f"%mask = u32[] constant({mask})", f"%masked = u32[] and({value}, %mask)"]
        value = "%masked"
    lines += [f"%index = s32[] convert({value})",
              f"%s = s32[] constant({slice_size})",
              "%mul = s32[] multiply(%index, %s)",
              "%zero.0 = s32[] constant(0)",
              "%negative = pred[] compare(%mul, %zero.0), direction=LT",
              f"%full = s32[] constant({full})",
              "%wrapped = s32[] add(%mul, %full)",
              "%offset = s32[] select(%negative, %wrapped, %mul)"]
    return tuple(lines)


def offset_divmod(slice_size: int, *, divisor: int, use_remainder: bool, fused: bool = False,
                  source: str = "partition-id") -> tuple[str, ...]:
    """``(id % divisor) * s`` or ``(id / divisor) * s`` in s32."""
    op = "remainder" if use_remainder else "divide"
    return tuple(coordinates(fused) + [
        f"%id = s32[] convert(%{source})",
        f"%divisor = s32[] constant({divisor})",
        f"%rank = s32[] {op}(%id, %divisor)",
        f"%s = s32[] constant({slice_size})",
        "%offset = s32[] multiply(%rank, %s)"])


def offset_flattened(slice_size: int, partitions: int, *, fused: bool = False,
                     divisor: int | None = None, use_remainder: bool = True) -> tuple[str, ...]:
    """``(replica-id * P + partition-id)`` (optionally ``% divisor`` or ``/ divisor``) times s."""
    lines = coordinates(fused) + [
        f"%P = u32[] constant({partitions})",
        "%rP = u32[] multiply(%replica-id, %P)",
        "%flat = u32[] add(%rP, %partition-id)"]
    value = "%flat"
    if divisor is not None:
        op = "remainder" if use_remainder else "divide"
        lines += [f"%divisor = u32[] constant({divisor})", f"%rank = u32[] {op}(%flat, %divisor)"]
        value = "%rank"
    lines += [f"%s = u32[] constant({slice_size})", f"%offset = u32[] multiply({value}, %s)"]
    return tuple(lines)


def offset_table(table: Sequence[int], slice_size: int, *, fused: bool = False,
                 source: str = "partition-id", element_type: str = "s32") -> tuple[str, ...]:
    """``table[id] * s`` with the table read by a one-element dynamic-slice, then reshaped."""
    values = ", ".join(str(v) for v in table)
    et = element_type
    return tuple(coordinates(fused) + [
        f"%table = {et}[{len(table)}]{{0}} constant({{{values}}})",
        f"%entry = {et}[1]{{0}} dynamic-slice(%table, %{source}), dynamic_slice_sizes={{1}}",
        f"%rank = {et}[] reshape(%entry)",
        f"%s = {et}[] constant({slice_size})",
        f"%offset = {et}[] multiply(%rank, %s)"])


def offset_constant(value: int, *, fused: bool = False) -> tuple[str, ...]:
    """The same offset on every device."""
    return tuple(coordinates(fused) + [f"%offset = s32[] constant({value})"])
