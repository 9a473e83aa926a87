"""Replica groups and source-target pairs: the device-group attributes of HLO collectives.

This module only knows the *values* and their text spelling (``{{0,1},{2,3}}``,
``[2,4]<=[4,2]T(1,0)``, ``{}``). What the ids mean (replica, partition or flattened device ids)
depends on the collective's group mode and the module's topology; that lives in
``neuron_sim.topology``, which also holds the verifier rules that need the topology.

Parse errors carry ``offset``: the 0-based character offset into the parsed text where the
problem was found, so an enclosing parser can report a line and column.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuron_sim.hlo.int_lists import (IntGroups, IntListCursor, ReplicaGroupError,
                                      format_int_lists, parse_int_lists, read_int_lists)
from neuron_sim.records import Record

__all__ = ["IntGroups", "IotaReplicaGroups", "MeshAxisRef", "MeshReplicaGroups",
           "ReplicaGroupError", "ReplicaGroups", "SourceTargetPairs", "format_int_lists",
           "parse_int_lists"]


def _as_int(value: object, what: str) -> int:
    """``value`` as a plain int (numpy integers included); bools and floats are refused."""
    if isinstance(value, bool):
        raise ReplicaGroupError(f"{what} must be an integer, not a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ReplicaGroupError(f"{what} must be an integer, not {value!r}") from None


# --------------------------------------------------------------------------------------------
# Replica groups.


def _iota_problem(
    count: int, size: int, dims: tuple[int, ...], perm: tuple[int, ...] | None
) -> tuple[str, str] | None:
    """What is wrong with an iota form, as (part, sentence); part is "shape", "dims" or "perm"."""
    if count <= 0 or size <= 0:
        return "shape", (
            f"iota replica groups need a positive group count and size, not [{count},{size}]"
        )
    if not dims or any(d <= 0 for d in dims):
        return "dims", f"iota reshape dimensions must be positive integers, not {_spell(dims)}"
    if math.prod(dims) != count * size:
        return "dims", (
            f"iota reshape dimensions {_spell(dims)} hold {math.prod(dims)} ids but "
            f"[{count},{size}] needs {count * size}"
        )
    if perm is not None:
        if len(dims) == 1:
            return "perm", "iota replica groups with one reshape dimension take no T(...) transpose"
        if sorted(perm) != list(range(len(dims))):
            return "perm", (
                f"iota transpose T({','.join(map(str, perm))}) is not a permutation of "
                f"0..{len(dims) - 1}"
            )
    return None


def _spell(values: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


class IotaReplicaGroups(Record):
    """The compact form ``[G,S]<=[d0,d1,...]T(p0,p1,...)``.

    It stands for ``arange(prod(d)).reshape(d).transpose(p).reshape(G, S)``: row g is group g.
    ``transpose_perm`` is None when the text had no ``T(...)``; it is kept as written so the
    printer reproduces the parsed form.
    """

    __slots__ = ("group_count", "group_size", "reshape_dims", "transpose_perm")

    group_count: int
    group_size: int
    reshape_dims: tuple[int, ...]
    transpose_perm: tuple[int, ...] | None

    def __init__(self, group_count: int, group_size: int, reshape_dims: tuple[int, ...],
                 transpose_perm: tuple[int, ...] | None = None) -> None:
        self._set(group_count=group_count, group_size=group_size, reshape_dims=reshape_dims,
                  transpose_perm=transpose_perm)
        self._normalize()

    def _normalize(self) -> None:
        """Check the fields and store them normalized (plain ints and tuples)."""
        count = _as_int(self.group_count, "the iota group count")
        size = _as_int(self.group_size, "the iota group size")
        dims = tuple(_as_int(d, "an iota reshape dimension") for d in self.reshape_dims)
        perm = None
        if self.transpose_perm is not None:
            perm = tuple(_as_int(p, "an iota transpose index") for p in self.transpose_perm)
        object.__setattr__(self, "group_count", count)
        object.__setattr__(self, "group_size", size)
        object.__setattr__(self, "reshape_dims", dims)
        object.__setattr__(self, "transpose_perm", perm)

        problem = _iota_problem(count, size, dims, perm)
        if problem is not None:
            raise ReplicaGroupError(problem[1])

    def expand(self) -> np.ndarray:
        """The groups as a (group_count, group_size) integer array; row g is group g."""
        ids = np.arange(self.group_count * self.group_size).reshape(self.reshape_dims)
        if self.transpose_perm is not None:
            ids = ids.transpose(self.transpose_perm)
        return ids.reshape(self.group_count, self.group_size)

    def to_text(self) -> str:
        """XLA's spelling, e.g. ``[2,4]<=[4,2]T(1,0)``."""
        text = f"[{self.group_count},{self.group_size}]<=[{','.join(map(str, self.reshape_dims))}]"
        if self.transpose_perm is not None:
            text += f"T({','.join(map(str, self.transpose_perm))})"
        return text


# --------------------------------------------------------------------------------------------
# Mesh-form replica groups (what the SPMD partitioner prints since JAX 0.10).


class MeshAxisRef(Record):
    """One axis the groups of a mesh form run over: a whole mesh axis or one of its sub-axes.

    ``axis`` is the mesh axis index. A sub-axis ``name:(pre_size)size`` views the axis as
    ``[pre_size, size, rest]`` and stands for the middle dimension. ``by_index`` records that
    the text named the axis by its number, so the printer writes it back that way.
    """

    __slots__ = ("axis", "pre_size", "size", "by_index")

    axis: int
    pre_size: int | None
    size: int | None
    by_index: bool

    def __init__(self, axis: int, pre_size: int | None = None, size: int | None = None,
                 by_index: bool = False) -> None:
        self._set(axis=axis, pre_size=pre_size, size=size, by_index=by_index)
        self._normalize()

    def _normalize(self) -> None:
        """Check the fields and store them normalized (plain ints and tuples)."""
        object.__setattr__(self, "axis", _as_int(self.axis, "a mesh axis index"))
        if (self.pre_size is None) != (self.size is None):
            raise ReplicaGroupError("a mesh sub-axis needs both its pre-size and its size")
        if self.pre_size is not None:
            object.__setattr__(self, "pre_size", _as_int(self.pre_size, "a sub-axis pre-size"))
            object.__setattr__(self, "size", _as_int(self.size, "a sub-axis size"))

    @property
    def is_sub_axis(self) -> bool:
        return self.pre_size is not None


def _mesh_problem(
    names: tuple[str, ...],
    sizes: tuple[int, ...],
    device_list: tuple[int, ...] | None,
    device_reshape: tuple[int, ...] | None,
    device_perm: tuple[int, ...] | None,
    refs: tuple[MeshAxisRef, ...],
) -> tuple[str, int, str] | None:
    """What is wrong with a mesh form, as (part, index, sentence), after XLA's Mesh and AxisRef
    validation; part is "mesh", "axis" (mesh axis ``index``), "devices" or "ref" (axis ref)."""
    if not names:
        return "mesh", 0, "a mesh needs at least one axis"
    if len(names) != len(sizes):
        return "mesh", 0, f"a mesh has {len(names)} axis names but {len(sizes)} sizes"
    for i, (name, size) in enumerate(zip(names, sizes)):
        if size <= 0:
            return "axis", i, f"mesh axis {name!r} has size {size}; sizes must be positive"
        if name in names[:i]:
            return "axis", i, f"mesh axis name {name!r} appears twice"
    count = math.prod(sizes)
    shape = _spell(sizes)
    if device_list is not None and device_reshape is not None:
        return "devices", 0, "mesh device_ids are either a list or an iota, not both"
    if device_reshape is not None:
        if not device_reshape or any(d <= 0 for d in device_reshape):
            return "devices", 0, (
                f"mesh device_ids reshape dimensions must be positive, not {_spell(device_reshape)}"
            )
        if math.prod(device_reshape) != count:
            return "devices", 0, (
                f"mesh device_ids {_spell(device_reshape)} hold {math.prod(device_reshape)} ids "
                f"but the mesh {shape} has {count} devices"
            )
        if len(device_reshape) == 1 and device_perm is not None:
            return "devices", 0, "mesh device_ids with one reshape dimension take no T(...)"
        if len(device_reshape) > 1:
            if device_perm is None:
                return "devices", 0, (
                    "mesh device_ids with several reshape dimensions need a T(...) transpose"
                )
            if sorted(device_perm) != list(range(len(device_reshape))):
                return "devices", 0, (
                    f"mesh device_ids transpose T({','.join(map(str, device_perm))}) is not a "
                    f"permutation of 0..{len(device_reshape) - 1}"
                )
    if device_list is not None:
        if len(device_list) != count:
            return "devices", 0, (
                f"mesh device_ids list {len(device_list)} ids but the mesh {shape} has "
                f"{count} devices"
            )
        if sorted(device_list) != list(range(count)):
            return "devices", 0, f"mesh device_ids must be a permutation of 0..{count - 1}"
        if list(device_list) == list(range(count)):
            return "devices", 0, (
                "mesh device_ids 0..n-1 in order are the default and must not be written"
            )
    for j, ref in enumerate(refs):
        if not 0 <= ref.axis < len(names):
            return "ref", j, f"mesh axis {ref.axis} does not exist: the mesh has {len(names)} axes"
        if ref.is_sub_axis:
            full = sizes[ref.axis]
            spelled = f"{names[ref.axis]!r}:({ref.pre_size}){ref.size}"
            assert ref.pre_size is not None and ref.size is not None
            if ref.pre_size < 1 or ref.size < 2:
                return "ref", j, (
                    f"sub-axis {spelled} needs a pre-size of at least 1 and a size of at least 2"
                )
            if full % (ref.pre_size * ref.size) or ref.size >= full:
                return "ref", j, (
                    f"sub-axis {spelled} does not fit axis {names[ref.axis]!r} of size {full}: "
                    "pre-size times size must divide it and the size must be smaller"
                )
    for j, ref in enumerate(refs):
        for k in range(j):
            if not _can_coexist(refs[k], ref):
                return "ref", j, (
                    f"mesh axis {names[ref.axis]!r} is grouped over twice or by overlapping "
                    "sub-axes"
                )
        if j and _can_merge(refs[j - 1], ref):
            return "ref", j, (
                f"adjacent sub-axes of {names[ref.axis]!r} must be written as one sub-axis"
            )
    return None


def _can_coexist(a: MeshAxisRef, b: MeshAxisRef) -> bool:
    """XLA's ``AxisRef::CanCoexistWithoutOverlap``."""
    if a.axis != b.axis:
        return True
    if not (a.is_sub_axis and b.is_sub_axis):
        return False
    assert a.pre_size and a.size and b.pre_size and b.size
    a_next, b_next = a.pre_size * a.size, b.pre_size * b.size
    if a_next > b.pre_size and b_next > a.pre_size:
        return False
    return max(a.pre_size, b.pre_size) % min(a_next, b_next) == 0


def _can_merge(a: MeshAxisRef, b: MeshAxisRef) -> bool:
    """XLA's ``AxisRef::CanMerge``: ``b`` is the sub-axis that continues ``a``."""
    return (
        a.axis == b.axis
        and a.is_sub_axis
        and b.is_sub_axis
        and a.pre_size * a.size == b.pre_size  # type: ignore[operator]
    )


class MeshReplicaGroups(Record):
    """The mesh form ``mesh['x'=4,'y'=2], device_ids=(...) {'x'}``.

    A mesh of named axes (``axis_names`` with ``axis_sizes``) holds the devices ``0..n-1``, in
    iota order, in the order ``device_reshape``/``device_perm`` give (written
    ``device_ids=([d0,d1]T(1,0))``) or in the order ``device_list`` gives; ``group_axes`` are
    the axes the groups run over, in the order that ranks a device in its group. As XLA's
    ``MeshAxesReplicaGroupList::flattened_replica_groups``: the device array, reshaped to the
    axis sizes (sub-axes split out), is transposed to (axes not grouped, grouped axes in their
    listed order) and read off as rows of the group size. ``quoted`` records whether the names
    were written in single quotes, so the printer reproduces the parsed text.
    """

    __slots__ = ("axis_names", "axis_sizes", "group_axes", "device_list", "device_reshape",
                 "device_perm", "quoted")

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    group_axes: tuple[MeshAxisRef, ...]
    device_list: tuple[int, ...] | None
    device_reshape: tuple[int, ...] | None
    device_perm: tuple[int, ...] | None
    quoted: bool

    def __init__(self, axis_names: tuple[str, ...], axis_sizes: tuple[int, ...],
                 group_axes: tuple[MeshAxisRef, ...] = (),
                 device_list: tuple[int, ...] | None = None,
                 device_reshape: tuple[int, ...] | None = None,
                 device_perm: tuple[int, ...] | None = None, quoted: bool = True) -> None:
        self._set(axis_names=axis_names, axis_sizes=axis_sizes, group_axes=group_axes,
                  device_list=device_list, device_reshape=device_reshape,
                  device_perm=device_perm, quoted=quoted)
        self._normalize()

    def _normalize(self) -> None:
        """Check the fields and store them normalized (plain ints and tuples)."""
        object.__setattr__(self, "axis_names", tuple(str(n) for n in self.axis_names))
        object.__setattr__(
            self, "axis_sizes", tuple(_as_int(s, "a mesh axis size") for s in self.axis_sizes)
        )
        object.__setattr__(self, "group_axes", tuple(self.group_axes))
        for name in ("device_list", "device_reshape", "device_perm"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(
                    self, name, tuple(_as_int(i, "a mesh device_ids entry") for i in value)
                )
        problem = _mesh_problem(
            self.axis_names, self.axis_sizes, self.device_list, self.device_reshape,
            self.device_perm, self.group_axes,
        )
        if problem is not None:
            raise ReplicaGroupError(problem[2])

    @property
    def num_devices(self) -> int:
        """How many ids the mesh holds (the product of its axis sizes)."""
        return math.prod(self.axis_sizes)

    @property
    def group_size(self) -> int:
        return math.prod(
            ref.size if ref.size is not None else self.axis_sizes[ref.axis]
            for ref in self.group_axes
        )

    @property
    def group_count(self) -> int:
        return self.num_devices // self.group_size

    def devices(self) -> np.ndarray:
        """The mesh's device ids as an array shaped like the axis sizes."""
        if self.device_list is not None:
            ids = np.asarray(self.device_list, dtype=np.int64)
        else:
            ids = np.arange(self.num_devices, dtype=np.int64)
            if self.device_reshape is not None and self.device_perm is not None:
                ids = ids.reshape(self.device_reshape).transpose(self.device_perm)
        return ids.reshape(self.axis_sizes)

    def _split_dims(self) -> tuple[list[int], list[int]]:
        """The axis sizes with every grouped sub-axis split out, and the split dimension each
        group axis stands for (in the order of ``group_axes``)."""
        dims: list[int] = []
        grouped: list[int] = [0] * len(self.group_axes)
        for axis, full in enumerate(self.axis_sizes):
            mine = [j for j, ref in enumerate(self.group_axes) if ref.axis == axis]
            if not mine or not self.group_axes[mine[0]].is_sub_axis:
                for j in mine:
                    grouped[j] = len(dims)
                dims.append(full)
                continue
            covered = 1
            for j in sorted(mine, key=lambda j: self.group_axes[j].pre_size or 0):
                ref = self.group_axes[j]
                assert ref.pre_size is not None and ref.size is not None
                if ref.pre_size != covered:
                    dims.append(ref.pre_size // covered)
                    covered = ref.pre_size
                grouped[j] = len(dims)
                dims.append(ref.size)
                covered *= ref.size
            if covered != full:
                dims.append(full // covered)
        return dims, grouped

    def expand(self) -> np.ndarray:
        """The groups as a (group_count, group_size) integer array; row g is group g."""
        dims, grouped = self._split_dims()
        others = [d for d in range(len(dims)) if d not in grouped]
        ids = self.devices().reshape(dims).transpose(others + grouped)
        return ids.reshape(self.group_count, self.group_size)

    def _name(self, axis: int) -> str:
        name = self.axis_names[axis]
        return f"'{name}'" if self.quoted else name

    def to_text(self) -> str:
        """XLA's spelling, e.g. ``mesh['x'=4,'y'=2], device_ids=([2,4]T(1,0)) {'x'}``."""
        axes = ",".join(f"{self._name(i)}={s}" for i, s in enumerate(self.axis_sizes))
        text = f"mesh[{axes}]"
        if self.device_list is not None:
            text += f", device_ids=({','.join(map(str, self.device_list))})"
        elif self.device_reshape is not None:
            text += f", device_ids=({_spell(self.device_reshape)}"
            if self.device_perm is not None:
                text += f"T({','.join(map(str, self.device_perm))})"
            text += ")"
        refs = []
        for ref in self.group_axes:
            spelled = str(ref.axis) if ref.by_index else self._name(ref.axis)
            if ref.is_sub_axis:
                spelled += f":({ref.pre_size}){ref.size}"
            refs.append(spelled)
        return f"{text} {{{','.join(refs)}}}"


@dataclass(frozen=True)
class ReplicaGroups:
    """The ``replica_groups`` attribute of a collective, in explicit, iota or mesh form.

    Exactly one form is held: ``explicit`` (a tuple of groups, ``()`` meaning "all devices"),
    ``iota`` or ``mesh``. ``groups`` gives the expanded groups whichever the form. Equality is
    structural: an iota or mesh value never equals an explicit one, even when they expand to the
    same groups, so the printer can reproduce what was parsed.

    Construction checks only the form; the rules that need the topology (coverage, repeats,
    uniform sizes) are ``neuron_sim.topology.validate_replica_groups``.
    """

    explicit: IntGroups = ()
    iota: IotaReplicaGroups | None = None
    mesh: MeshReplicaGroups | None = None
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        given = [form for form, value in
                 (("explicit", bool(self.explicit)), ("iota", self.iota is not None),
                  ("mesh", self.mesh is not None)) if value]
        if len(given) > 1:
            raise ReplicaGroupError(
                f"replica groups are in one form, not both {given[0]} and {given[1]}"
            )
        if self.iota is not None and not isinstance(self.iota, IotaReplicaGroups):
            raise ReplicaGroupError(f"iota must be an IotaReplicaGroups, not {self.iota!r}")
        if self.mesh is not None and not isinstance(self.mesh, MeshReplicaGroups):
            raise ReplicaGroupError(f"mesh must be a MeshReplicaGroups, not {self.mesh!r}")
        groups = tuple(
            tuple(_as_int(i, "a replica group id") for i in group) for group in self.explicit
        )
        object.__setattr__(self, "explicit", groups)
        # Groups can hold thousands of ids and serve as cache keys; hash them once.
        object.__setattr__(self, "_hash", hash((groups, self.iota, self.mesh)))

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def groups(self) -> IntGroups:
        """The groups as a tuple of tuples of ids, expanding the iota or mesh form if needed."""
        compact = self._compact
        if compact is None:
            return self.explicit
        return tuple(tuple(row) for row in compact.expand().tolist())

    @property
    def _compact(self) -> IotaReplicaGroups | MeshReplicaGroups | None:
        return self.iota if self.iota is not None else self.mesh

    @property
    def is_empty(self) -> bool:
        """True for ``{}``: no groups given, which means one group of all devices."""
        return self._compact is None and not self.explicit

    @property
    def is_iota(self) -> bool:
        return self.iota is not None

    @property
    def is_mesh(self) -> bool:
        return self.mesh is not None

    @property
    def num_groups(self) -> int:
        compact = self._compact
        return compact.group_count if compact is not None else len(self.explicit)

    @property
    def group_sizes(self) -> tuple[int, ...]:
        compact = self._compact
        if compact is not None:
            return (compact.group_size,) * compact.group_count
        return tuple(len(group) for group in self.explicit)

    def to_text(self) -> str:
        """XLA's spelling of the attribute value: ``{{0,1},{2,3}}``, ``{}``, or the iota or mesh
        form it was written in."""
        compact = self._compact
        return compact.to_text() if compact is not None else format_int_lists(self.explicit)

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def from_text(cls, text: str) -> ReplicaGroups:
        """Parse ``{{0,1},{2,3}}``, ``{}``, ``[G,S]<=[d0,...]T(p0,...)`` or
        ``mesh['x'=4,'y'=2], device_ids=(...) {'x'}``.

        Raises ReplicaGroupError whose ``offset`` points into ``text``.
        """
        cursor = IntListCursor(text, "replica groups")
        if cursor.peek() == "[":
            result = cls(iota=_parse_iota(cursor))
        elif cursor.peek() == "{":
            groups, _ = read_int_lists(cursor)
            result = cls(explicit=groups)
        elif cursor.peek() == "m":
            result = cls(mesh=_parse_mesh(cursor))
        else:
            raise cursor.fail(
                f"expected replica groups ('{{...}}', '[G,S]<=[...]' or 'mesh[...] {{...}}') "
                f"but found {cursor.describe_here()}"
            )
        cursor.end()
        return result


def _parse_iota(cursor: IntListCursor) -> IotaReplicaGroups:
    start = cursor.pos
    cursor.what = "iota replica groups"
    cursor.expect("[")
    shape = cursor.integers_until("]")
    if len(shape) != 2:
        raise cursor.fail(
            f"iota replica groups start with [group_count,group_size], not {_spell(shape)}", start
        )
    cursor.expect("<=")
    cursor.skip_space()
    dims_offset = cursor.pos
    cursor.expect("[")
    dims = cursor.integers_until("]")
    perm = None
    cursor.skip_space()
    perm_offset = cursor.pos
    if cursor.accept("T"):
        cursor.expect("(")
        perm = cursor.integers_until(")")
    problem = _iota_problem(shape[0], shape[1], dims, perm)
    if problem is not None:
        part, message = problem
        raise cursor.fail(message, {"shape": start, "dims": dims_offset, "perm": perm_offset}[part])
    return IotaReplicaGroups(shape[0], shape[1], dims, perm)


_MESH_NAME = re.compile(r"'([^'\n]*)'|([A-Za-z_][A-Za-z0-9_.\-]*)")


def _mesh_name(cursor: IntListCursor) -> tuple[str, bool]:
    """A mesh axis name, quoted (``'axis_0'``) or bare (``x``); returns it and whether quoted."""
    cursor.skip_space()
    match = _MESH_NAME.match(cursor.text, cursor.pos)
    if not match or match.group(0) == "''":
        raise cursor.fail(f"expected a mesh axis name but found {cursor.describe_here()}")
    cursor.pos = match.end()
    quoted = match.group(1) is not None
    return (match.group(1) if quoted else match.group(2)), quoted


# mesh_groups ::= 'mesh' '[' axis (',' axis)* ']' (',' 'device_ids=' '(' device_ids ')')?
#                 '{' (axis_ref (',' axis_ref)*)? '}'
# axis        ::= name '=' int                    name ::= "'" chars "'" | identifier
# device_ids  ::= '[' int_list ']' ('T(' int_list ')')?  |  int_list
# axis_ref    ::= (name | int) (':(' int ')' int)?
def _parse_mesh(cursor: IntListCursor) -> MeshReplicaGroups:
    cursor.what = "mesh replica groups"
    cursor.skip_space()
    start = cursor.pos
    cursor.expect("mesh")
    cursor.expect("[")
    names: list[str] = []
    sizes: list[int] = []
    axis_offsets: list[int] = []
    quoting: set[bool] = set()
    while True:
        cursor.skip_space()
        axis_offsets.append(cursor.pos)
        name, quoted = _mesh_name(cursor)
        if quoting and quoted not in quoting:
            raise cursor.fail("mesh axis names are either all quoted or all bare", axis_offsets[-1])
        quoting.add(quoted)
        cursor.expect("=")
        names.append(name)
        sizes.append(cursor.integer())
        if cursor.accept("]"):
            break
        cursor.expect(",")
    device_list = device_reshape = device_perm = None
    cursor.skip_space()
    devices_offset = cursor.pos
    if cursor.accept(","):
        cursor.expect("device_ids")
        cursor.expect("=")
        cursor.expect("(")
        cursor.skip_space()
        devices_offset = cursor.pos
        if cursor.accept("["):
            device_reshape = cursor.integers_until("]")
            if cursor.accept("T"):
                cursor.expect("(")
                device_perm = cursor.integers_until(")")
            cursor.expect(")")
        else:
            device_list = cursor.integers_until(")")
    cursor.expect("{")
    refs: list[MeshAxisRef] = []
    ref_offsets: list[int] = []
    index_of = {name: i for i, name in enumerate(names)}
    if not cursor.accept("}"):
        while True:
            cursor.skip_space()
            ref_offsets.append(cursor.pos)
            if cursor.peek().isdigit():
                axis, by_index = cursor.integer(), True
            else:
                name, _ = _mesh_name(cursor)
                if name not in index_of:
                    raise cursor.fail(
                        f"mesh replica groups name axis {name!r}, which is not in the mesh "
                        f"({', '.join(map(repr, names))})",
                        ref_offsets[-1],
                    )
                axis, by_index = index_of[name], False
            pre_size = size = None
            if cursor.accept(":"):
                cursor.expect("(")
                pre_size = cursor.integer()
                cursor.expect(")")
                size = cursor.integer()
            refs.append(MeshAxisRef(axis, pre_size, size, by_index))
            if cursor.accept("}"):
                break
            cursor.expect(",")
    problem = _mesh_problem(
        tuple(names), tuple(sizes), device_list, device_reshape, device_perm, tuple(refs)
    )
    if problem is not None:
        part, index, message = problem
        offsets = {"mesh": [start], "axis": axis_offsets, "devices": [devices_offset],
                   "ref": ref_offsets}
        raise cursor.fail(message, offsets[part][index])
    return MeshReplicaGroups(
        tuple(names), tuple(sizes), tuple(refs), device_list, device_reshape, device_perm,
        quoted=quoting == {True},
    )


class _ClassConstructor:
    """A constructor reached through the class whose name is also a dataclass field.

    ``ReplicaGroups.iota(2, 4, [8])`` builds a value while ``groups.iota`` reads the field: the
    instance keeps its fields in ``__dict__``, which wins over this non-data descriptor.
    """

    def __init__(self, build: Callable[..., ReplicaGroups]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    def __get__(self, instance: object, owner: type) -> Callable[..., ReplicaGroups]:
        return self._build.__get__(owner, owner)  # bound to the class, like a classmethod


def _explicit(cls: type[ReplicaGroups], groups: Iterable[Iterable[int]]) -> ReplicaGroups:
    """Explicit groups from any iterable of iterables of ints, e.g. ``[[0, 1], [2, 3]]``."""
    return cls(explicit=tuple(tuple(group) for group in groups))


def _iota(
    cls: type[ReplicaGroups],
    group_count: int,
    group_size: int,
    reshape_dims: Sequence[int],
    transpose_perm: Sequence[int] | None = None,
) -> ReplicaGroups:
    """Iota groups ``[group_count,group_size]<=[reshape_dims]T(transpose_perm)``."""
    perm = None if transpose_perm is None else tuple(transpose_perm)
    return cls(iota=IotaReplicaGroups(group_count, group_size, tuple(reshape_dims), perm))


_SUB_AXIS = re.compile(r"(.+):\((\d+)\)(\d+)")


def _mesh(
    cls: type[ReplicaGroups],
    axes: Mapping[str, int],
    group_axes: Sequence[str] = (),
    *,
    device_ids: Sequence[int] | None = None,
    device_reshape: Sequence[int] | None = None,
    device_perm: Sequence[int] | None = None,
) -> ReplicaGroups:
    """Mesh-form groups, e.g. ``ReplicaGroups.mesh({"x": 4, "y": 2}, ["y", "x:(1)2"])``.

    ``axes`` maps each mesh axis name to its size, in mesh order; ``group_axes`` names the axes
    (or sub-axes ``name:(pre_size)size``) the groups run over; the devices are in iota order,
    or in ``device_ids`` order, or ``arange(n).reshape(device_reshape).transpose(device_perm)``.
    """
    names = tuple(axes)
    index_of = {name: i for i, name in enumerate(names)}
    refs = []
    for spelled in group_axes:
        sub = _SUB_AXIS.fullmatch(spelled)
        name = sub.group(1) if sub else spelled
        if name not in index_of:
            raise ReplicaGroupError(f"mesh replica groups name axis {name!r}, which is not in "
                                    f"the mesh ({', '.join(map(repr, names))})")
        if sub:
            refs.append(MeshAxisRef(index_of[name], int(sub.group(2)), int(sub.group(3))))
        else:
            refs.append(MeshAxisRef(index_of[name]))
    return cls(mesh=MeshReplicaGroups(
        names, tuple(axes.values()), tuple(refs),
        None if device_ids is None else tuple(device_ids),
        None if device_reshape is None else tuple(device_reshape),
        None if device_perm is None else tuple(device_perm),
    ))


# Set after the class body so that the dataclass still sees the fields' plain defaults.
ReplicaGroups.explicit = _ClassConstructor(_explicit)  # type: ignore[assignment]
ReplicaGroups.iota = _ClassConstructor(_iota)  # type: ignore[assignment]
ReplicaGroups.mesh = _ClassConstructor(_mesh)  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------
# Source-target pairs of collective-permute.


class SourceTargetPairs(Record):
    """The ``source_target_pairs`` attribute of collective-permute: ``{{0,1},{1,0}}``.

    Ids are replica ids (cross-replica) or partition ids (cross-partition). A device that is no
    pair's target receives zeros.
    """

    __slots__ = ("pairs",)

    pairs: tuple[tuple[int, int], ...]

    def __init__(self, pairs: tuple[tuple[int, int], ...] = ()) -> None:
        self._set(pairs=pairs)
        self._normalize()

    def _normalize(self) -> None:
        """Check the fields and store them normalized (plain ints and tuples)."""
        pairs = []
        for pair in self.pairs:
            pair = tuple(pair)
            if len(pair) != 2:
                raise ReplicaGroupError(
                    f"a source-target pair has exactly two ids, not {len(pair)}: {pair}"
                )
            pairs.append(tuple(_as_int(i, "a source-target id") for i in pair))
        object.__setattr__(self, "pairs", tuple(pairs))

    @property
    def sources(self) -> tuple[int, ...]:
        return tuple(source for source, _ in self.pairs)

    @property
    def targets(self) -> tuple[int, ...]:
        return tuple(target for _, target in self.pairs)

    def to_text(self) -> str:
        """XLA's spelling: ``{{0,1},{1,0}}``; ``{}`` when there are no pairs."""
        return format_int_lists(self.pairs)

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def from_text(cls, text: str) -> SourceTargetPairs:
        """Parse ``{{0,1},{1,0}}``; raises ReplicaGroupError whose ``offset`` points into text."""
        cursor = IntListCursor(text, "source-target pairs")
        lists, offsets = read_int_lists(cursor)
        cursor.end()
        for inner, offset in zip(lists, offsets):
            if len(inner) != 2:
                raise ReplicaGroupError(
                    f"a source-target pair has exactly two ids, not {len(inner)}: {inner}",
                    offset,
                )
        return cls(lists)  # type: ignore[arg-type]

    def validate(self, n: int) -> None:
        """XLA's verifier rules for ``n`` replicas (or partitions).

        Every id is in 0..n-1 and appears at most once as a source and at most once as a target.
        """
        seen_sources: set[int] = set()
        seen_targets: set[int] = set()
        for source, target in self.pairs:
            for role, value, seen in (
                ("source", source, seen_sources),
                ("target", target, seen_targets),
            ):
                if not 0 <= value < n:
                    raise ReplicaGroupError(
                        f"{role} {value} of source-target pair {{{source},{target}}} is out of "
                        f"range: ids must be in 0..{n - 1}"
                    )
                if value in seen:
                    raise ReplicaGroupError(
                        f"{role} {value} appears more than once in the source-target pairs"
                    )
                seen.add(value)
