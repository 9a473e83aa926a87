"""``Record``: a read-only value class that is cheap to create, for classes made at start-up.

A frozen dataclass costs a fraction of a millisecond to create (Python 3.11 compiles each
method it generates separately), and every class a command imports is created at its start-up.
A subclass of ``Record`` names its fields in ``__slots__`` (in order) and sets them in its own
``__init__`` through ``_set``; it then behaves as a frozen dataclass of those fields: equal
when of the same class with equal fields, hashed by them, printed as ``Name(field=value, ...)``,
assigning or deleting a field raises ``dataclasses.FrozenInstanceError``, and ``copy``,
``deepcopy`` and ``pickle`` rebuild it with its fields as they were. No code is
generated, so the class costs what a plain class costs. (Unlike a dataclass it has no
``__match_args__`` and ``dataclasses.fields`` / ``replace`` do not apply to it.)
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any


class Record:
    """A read-only record of the fields its subclass lists in ``__slots__`` (module docstring)."""

    __slots__ = ()

    def _set(self, **fields: Any) -> None:
        """Set fields once, from ``__init__``."""
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __getstate__(self) -> tuple[Any, ...]:
        return self._fields()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        # copy, deepcopy and pickle rebuild a record as they rebuild a frozen dataclass: its
        # fields set as they were, without ``__init__`` (nor its checks) running again.
        for name, value in zip(self.__slots__, state):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields})"
