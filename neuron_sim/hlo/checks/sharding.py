"""Shardings, read from the ``sharding={...}`` text the parser keeps: each fits its
instruction's shape, and a while or conditional agrees on one sharding with the computations
it calls.

XLA's HloSharding::Validate (``xla/hlo/ir/hlo_sharding.cc``: a tiled sharding has one tile
dimension per array dimension besides its subgroup dimensions, no device twice; a tuple
sharding one element per leaf) and the InstructionVerifier's VerifyConsistentSharding (while:
the while, its body's root and parameter and its condition's parameter; conditional: the
conditional and its branches' roots). Shardings are compared as XLA's HloSharding::operator==
does, after NormalizeTupleSharding (one sharding on a tuple applies to each leaf) and with
metadata ignored. Text this module cannot read (a newer form) is left alone rather than
rejected, and so are subgroup shardings XLA would normalize, when compared.
"""

from __future__ import annotations

import re

import numpy as np

from neuron_sim.hlo.checks.core import error_for
from neuron_sim.hlo.checks.module import leaf_indices
from neuron_sim.hlo.checks.text import raw_text, split_top_level
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape
from neuron_sim.records import Record

_INTS = r"\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]"
_TILED = re.compile(r"devices=" + _INTS + r"\s*(?:<=" + _INTS + r"(?:\s*T\(([\d,\s]*)\))?"
                    r"|(\d+(?:\s*,\s*\d+)*))")
_METADATA = re.compile(r"metadata=\{")


class LeafSharding(Record):
    """One array's sharding: kind is replicated, maximal, manual, unknown or tiled; a tiled one
    has its tile dimensions, devices in tile order, and subgroup kinds (last_tile_dims, with
    last_tile_dim_replicate as one "replicated"). (A ``Record``: compared field by field.)"""

    __slots__ = ("kind", "device", "dims", "devices", "subgroups", "grouped")

    kind: str
    device: int | None
    dims: tuple[int, ...]
    devices: tuple[int, ...]
    subgroups: tuple[str, ...]
    grouped: bool

    def __init__(self, kind: str, device: int | None = None, dims: tuple[int, ...] = (),
                 devices: tuple[int, ...] = (), subgroups: tuple[str, ...] = (),
                 grouped: bool = False) -> None:
        self._set(kind=kind, device=device, dims=dims, devices=devices, subgroups=subgroups,
                  grouped=grouped)

    @property
    def data_rank(self) -> int:
        """XLA's TiledDataRank: the tile dimensions that split the data."""
        return len(self.dims) - len(self.subgroups)


def _without_metadata(text: str) -> str:
    """``text`` with each ``metadata={...}`` (braces balanced) removed."""
    while (match := _METADATA.search(text)) is not None:
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[:match.start()] + text[end + 1:]
    return text


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _leaf(text: str) -> LeafSharding | None:
    """One non-tuple sharding's body (inside its braces), canonical as XLA's parser builds it
    (a subgroup sharding that tiles no data dimension is replicated or manual); None if this
    reader does not know its form."""
    body = _without_metadata(text).strip()
    grouped = bool(re.search(r"\bshard_(?:as|like)\b", body))
    body = re.sub(r"\bshard_(?:as|like)\s+\d+", "", body).strip()
    for kind in ("replicated", "manual", "unknown"):
        if body == kind:
            return LeafSharding(kind, grouped=grouped)
    maximal = re.fullmatch(r"maximal\s+device=(\d+)", body)
    if maximal:
        return LeafSharding("maximal", device=int(maximal.group(1)), grouped=grouped)
    tiled = _TILED.match(body)
    if tiled is None:
        return None
    rest = body[tiled.end():].strip()
    dims = _ints(tiled.group(1))
    count = int(np.prod(dims))
    if tiled.group(4) is not None:
        devices = _ints(tiled.group(4))
    else:
        reshape = _ints(tiled.group(2))
        perm = _ints(tiled.group(3) or ",".join(str(i) for i in range(len(reshape))))
        if int(np.prod(reshape)) != count or sorted(perm) != list(range(len(reshape))):
            return None
        devices = tuple(np.arange(count).reshape(reshape).transpose(perm).ravel().tolist())
    subgroups: tuple[str, ...] = ()
    if rest == "last_tile_dim_replicate":
        subgroups = ("replicated",)
    elif rest.startswith("last_tile_dims="):
        try:
            subgroups = tuple(split_top_level(rest[len("last_tile_dims="):]))
        except ValueError:
            return None
    elif rest:
        return None
    if len(devices) != count or len(subgroups) > len(dims):
        return None
    data = dims[:len(dims) - len(subgroups)]
    if subgroups and len(set(subgroups)) == 1 and int(np.prod(data)) == 1 \
            and subgroups[0] in ("replicated", "manual"):
        return LeafSharding(subgroups[0], grouped=grouped)
    return LeafSharding("tiled", dims=dims, devices=devices, subgroups=subgroups,
                        grouped=grouped)


class Sharding(Record):
    """A parsed ``sharding={...}``: one leaf sharding, or a tuple of them."""

    __slots__ = ("leaves", "is_tuple")

    leaves: tuple[LeafSharding | None, ...]
    is_tuple: bool

    def __init__(self, leaves: tuple[LeafSharding | None, ...], is_tuple: bool) -> None:
        self._set(leaves=leaves, is_tuple=is_tuple)


def parse_sharding(value: object) -> Sharding | None:
    """The sharding a ``sharding=`` attribute spells; None if this reader cannot read it."""
    text = raw_text(value).strip()
    try:
        items = split_top_level(text)
    except ValueError:
        return None
    if items and all(item.startswith("{") for item in items):
        return Sharding(tuple(_leaf(item.strip()[1:-1]) for item in items), True)
    return Sharding((_leaf(text[1:-1]),), False)


def _leaf_shapes(shape: Shape) -> list[Shape]:
    """The leaves of ``shape`` in tuple order (depth first, as XLA's ShapeTree lists them)."""
    order = sorted(leaf_indices(shape))
    shapes = []
    for index in order:
        node = shape
        for i in index:
            node = node.elements[i]
        shapes.append(node)
    return shapes


def _problem(sharding: Sharding, shape: Shape) -> str | None:
    """What makes ``sharding`` not fit ``shape`` (XLA's HloSharding::Validate), if anything."""
    if isinstance(shape, ArrayShape) and not shape.element_type.is_array_type:
        return None
    if sharding.is_tuple:
        if not isinstance(shape, TupleShape):
            return "a tuple sharding on an array"
        leaves = _leaf_shapes(shape)
        if len(sharding.leaves) != len(leaves) and not (not leaves
                                                          and len(sharding.leaves) == 1):
            return (f"{len(sharding.leaves)} shardings for the {len(leaves)} leaves of the "
                    f"shape")
        pairs = list(zip(sharding.leaves, leaves))
    else:
        pairs = [(sharding.leaves[0], leaf) for leaf in _leaf_shapes(shape)]
    for leaf, leaf_shape in pairs:
        if leaf is None or leaf.kind != "tiled":
            continue
        if len(set(leaf.devices)) != len(leaf.devices):
            return "a device appears more than once in the tile assignment"
        if isinstance(leaf_shape, ArrayShape) and leaf_shape.element_type.is_array_type \
                and leaf.data_rank != leaf_shape.rank:
            return (f"{leaf.data_rank} tile assignment dimensions (besides subgroups) for "
                    f"{leaf_shape.without_layout()} of rank {leaf_shape.rank}")
    return None


def _normalized(inst: HloInstruction) -> tuple[LeafSharding | None, ...] | None:
    """The instruction's sharding per leaf of its shape (NormalizeTupleSharding), or None if it
    has none."""
    value = inst.attrs.get("sharding")
    if value is None:
        return None
    sharding = parse_sharding(value)
    if sharding is None:
        return (None,)
    if sharding.is_tuple or not isinstance(inst.shape, TupleShape):
        return sharding.leaves
    return sharding.leaves * len(leaf_indices(inst.shape))


def _comparable(leaf: LeafSharding | None) -> bool:
    return leaf is not None and not leaf.grouped and not (leaf.kind == "tiled"
                                                          and leaf.subgroups)


def _same(a: tuple[LeafSharding | None, ...], b: tuple[LeafSharding | None, ...]) -> bool:
    """Equal as XLA compares shardings; leaves this reader cannot compare count as equal."""
    if len(a) != len(b):
        return not all(map(_comparable, a + b))
    return all(x == y or not (_comparable(x) and _comparable(y)) for x, y in zip(a, b))


def _check_consistent(parent: HloInstruction, members: list[HloInstruction]) -> None:
    """Every member with a sharding has the first such member's sharding."""
    common: tuple[HloInstruction, tuple[LeafSharding | None, ...]] | None = None
    for inst in members:
        sharding = _normalized(inst)
        if sharding is None:
            continue
        if common is None:
            common = (inst, sharding)
        elif not _same(common[1], sharding):
            raise error_for(parent, f"the shardings of %{common[0].name} and %{inst.name} "
                                    f"differ, but a {parent.opcode.spelling} needs one "
                                    f"sharding for its state")


def check_shardings(module: HloModule) -> None:
    """Every sharding fits its instruction's shape, and each while and conditional has one
    sharding with the computations it calls (see the module docstring)."""
    for comp in module.computations:
        for inst in comp.instructions:
            value = inst.attrs.get("sharding")
            if value is not None:
                sharding = parse_sharding(value)
                problem = None if sharding is None else _problem(sharding, inst.shape)
                if problem is not None:
                    raise error_for(inst, f"its sharding {raw_text(value)} does not fit its "
                                          f"shape: {problem}")
            if inst.opcode is Opcode.WHILE:
                body, condition = inst.attrs.get("body"), inst.attrs.get("condition")
                members = [inst]
                if body is not None and body.root is not None:
                    members.append(body.root)
                members += [c.parameters[0] for c in (body, condition)
                            if c is not None and c.parameters]
                _check_consistent(inst, members)
            elif inst.opcode is Opcode.CONDITIONAL:
                _check_consistent(inst, [inst] + [c.root for c in inst.called_computations
                                                  if c.root is not None])
