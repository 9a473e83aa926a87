"""Lists of integer lists, ``{{0,1},{2,3}}``: their text, the cursor that reads it, and the
error every reader of device groups raises (``ReplicaGroupError``).

Shared by replica groups and source-target pairs (``neuron_sim.hlo.replica_groups``, which
re-exports these names) and device assignments (``neuron_sim.topology``): a topology reads its
device assignment without creating the replica-group classes, which a module without a
collective never needs.

Parse errors carry ``offset``: the 0-based character offset into the parsed text where the
problem was found, so an enclosing parser can report a line and column.
"""

from __future__ import annotations

from neuron_sim.errors import UserError

__all__ = ["IntGroups", "IntListCursor", "ReplicaGroupError", "format_int_lists",
           "parse_int_lists", "read_int_lists"]

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


class IntListCursor:
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


def read_int_lists(cursor: IntListCursor) -> tuple[IntGroups, tuple[int, ...]]:
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
    cursor = IntListCursor(text, what)
    lists, _ = read_int_lists(cursor)
    cursor.end()
    return lists


def format_int_lists(lists: IntGroups) -> str:
    """Spell a list of integer lists the way XLA prints it: ``{{0,1},{2,3}}``, no spaces."""
    return "{" + ",".join("{" + ",".join(str(i) for i in inner) + "}" for inner in lists) + "}"
