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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from neuron_sim.errors import UserError

IntGroups = tuple[tuple[int, ...], ...]


class ReplicaGroupError(UserError):
    """Malformed or invalid replica groups / source-target pairs.

    ``offset`` is the 0-based character offset into the text being parsed where the problem was
    found, or None when the error is not about a piece of text.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


# --------------------------------------------------------------------------------------------
# Text scanning shared by replica groups, source-target pairs and device assignments.


class _Cursor:
    """A position in a text being parsed; every error it raises carries that position."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    def fail(self, message: str, offset: int | None = None) -> ReplicaGroupError:
        return ReplicaGroupError(message, self.pos if offset is None else offset)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def describe_here(self) -> str:
        char = self.peek()
        return f"{char!r}" if char else "end of text"

    def accept(self, token: str) -> bool:
        self.skip_space()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            raise self.fail(f"expected {token!r} in {self.what} but found {self.describe_here()}")

    def integer(self) -> int:
        self.skip_space()
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] == "-":
            self.pos += 1
        digits_start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if self.pos == digits_start:
            self.pos = start
            raise self.fail(f"expected an integer in {self.what} but found {self.describe_here()}")
        return int(self.text[start : self.pos])

    def integers_until(self, close: str) -> tuple[int, ...]:
        """Comma-separated integers up to and including ``close``; the opener is already read."""
        values: list[int] = []
        if self.accept(close):
            return ()
        while True:
            values.append(self.integer())
            if self.accept(close):
                return tuple(values)
            if not self.accept(","):
                raise self.fail(
                    f"expected ',' or {close!r} in {self.what} but found {self.describe_here()}"
                )

    def end(self) -> None:
        if self.peek():
            raise self.fail(f"unexpected {self.describe_here()} after the end of the {self.what}")


def _parse_lists(cursor: _Cursor) -> tuple[IntGroups, tuple[int, ...]]:
    """Parse ``{{a,b},{c}}`` (or ``{}``); returns the lists and the offset of each inner ``{``."""
    cursor.expect("{")
    lists: list[tuple[int, ...]] = []
    offsets: list[int] = []
    if cursor.accept("}"):
        return (), ()
    while True:
        cursor.skip_space()
        offsets.append(cursor.pos)
        cursor.expect("{")
        lists.append(cursor.integers_until("}"))
        if cursor.accept("}"):
            return tuple(lists), tuple(offsets)
        if not cursor.accept(","):
            raise cursor.fail(
                f"expected ',' or '}}' in {cursor.what} but found {cursor.describe_here()}"
            )


def parse_int_lists(text: str, what: str = "list of integer lists") -> IntGroups:
    """Parse the whole of ``text`` as ``{{0,1},{2,3}}`` (``{}`` is the empty list).

    Shared by every attribute written as a list of integer lists (device assignments too).
    Raises ReplicaGroupError with ``offset`` on malformed text.
    """
    cursor = _Cursor(text, what)
    lists, _ = _parse_lists(cursor)
    cursor.end()
    return lists


def format_int_lists(lists: IntGroups) -> str:
    """Spell a list of integer lists the way XLA prints it: ``{{0,1},{2,3}}``, no spaces."""
    return "{" + ",".join("{" + ",".join(str(i) for i in inner) + "}" for inner in lists) + "}"


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


@dataclass(frozen=True)
class IotaReplicaGroups:
    """The compact form ``[G,S]<=[d0,d1,...]T(p0,p1,...)``.

    It stands for ``arange(prod(d)).reshape(d).transpose(p).reshape(G, S)``: row g is group g.
    ``transpose_perm`` is None when the text had no ``T(...)``; it is kept as written so the
    printer reproduces the parsed form.
    """

    group_count: int
    group_size: int
    reshape_dims: tuple[int, ...]
    transpose_perm: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
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


@dataclass(frozen=True)
class ReplicaGroups:
    """The ``replica_groups`` attribute of a collective, in explicit or iota form.

    Exactly one form is held: ``explicit`` (a tuple of groups, ``()`` meaning "all devices") or
    ``iota``. ``groups`` gives the expanded groups whichever the form. Equality is structural:
    an iota value never equals an explicit one, even when they expand to the same groups, so the
    printer can reproduce what was parsed.

    Construction checks only the form; the rules that need the topology (coverage, repeats,
    uniform sizes) are ``neuron_sim.topology.validate_replica_groups``.
    """

    explicit: IntGroups = ()
    iota: IotaReplicaGroups | None = None
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        if self.iota is not None:
            if self.explicit:
                raise ReplicaGroupError("replica groups are either explicit or iota, not both")
            if not isinstance(self.iota, IotaReplicaGroups):
                raise ReplicaGroupError(f"iota must be an IotaReplicaGroups, not {self.iota!r}")
        groups = tuple(
            tuple(_as_int(i, "a replica group id") for i in group) for group in self.explicit
        )
        object.__setattr__(self, "explicit", groups)
        # Groups can hold thousands of ids and serve as cache keys; hash them once.
        object.__setattr__(self, "_hash", hash((groups, self.iota)))

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def groups(self) -> IntGroups:
        """The groups as a tuple of tuples of ids, expanding the iota form if needed."""
        if self.iota is None:
            return self.explicit
        return tuple(tuple(int(i) for i in row) for row in self.iota.expand())

    @property
    def is_empty(self) -> bool:
        """True for ``{}``: no groups given, which means one group of all devices."""
        return self.iota is None and not self.explicit

    @property
    def is_iota(self) -> bool:
        return self.iota is not None

    @property
    def num_groups(self) -> int:
        return self.iota.group_count if self.iota is not None else len(self.explicit)

    @property
    def group_sizes(self) -> tuple[int, ...]:
        if self.iota is not None:
            return (self.iota.group_size,) * self.iota.group_count
        return tuple(len(group) for group in self.explicit)

    def to_text(self) -> str:
        """XLA's spelling of the attribute value: ``{{0,1},{2,3}}``, ``{}`` or the iota form."""
        return self.iota.to_text() if self.iota is not None else format_int_lists(self.explicit)

    def __str__(self) -> str:
        return self.to_text()

    @classmethod
    def from_text(cls, text: str) -> ReplicaGroups:
        """Parse ``{{0,1},{2,3}}``, ``{}`` or ``[G,S]<=[d0,...]T(p0,...)``.

        Raises ReplicaGroupError whose ``offset`` points into ``text``.
        """
        cursor = _Cursor(text, "replica groups")
        if cursor.peek() == "[":
            result = cls(iota=_parse_iota(cursor))
        elif cursor.peek() == "{":
            groups, _ = _parse_lists(cursor)
            result = cls(explicit=groups)
        else:
            raise cursor.fail(
                f"expected replica groups ('{{...}}' or '[G,S]<=[...]') "
                f"but found {cursor.describe_here()}"
            )
        cursor.end()
        return result


def _parse_iota(cursor: _Cursor) -> IotaReplicaGroups:
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


# Set after the class body so that the dataclass still sees the fields' plain defaults.
ReplicaGroups.explicit = _ClassConstructor(_explicit)  # type: ignore[assignment]
ReplicaGroups.iota = _ClassConstructor(_iota)  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------
# Source-target pairs of collective-permute.


@dataclass(frozen=True)
class SourceTargetPairs:
    """The ``source_target_pairs`` attribute of collective-permute: ``{{0,1},{1,0}}``.

    Ids are replica ids (cross-replica) or partition ids (cross-partition). A device that is no
    pair's target receives zeros.
    """

    pairs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
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
        cursor = _Cursor(text, "source-target pairs")
        lists, offsets = _parse_lists(cursor)
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
