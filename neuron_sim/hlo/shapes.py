"""HLO shapes: arrays (with optional layouts and dynamic dimensions), tuples, tokens.

Shapes are immutable values. The layout ({1,0}: minor-to-major) never changes a value's logical
contents; only bitcast and copy read it (SEMANTICS.md §5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Union

from neuron_sim.hlo.dtypes import ElementType

UNBOUNDED = -1  # a '?' dimension


@dataclass(frozen=True)
class Layout:
    """Minor-to-major dimension order, plus whatever follows ':' (tiles, memory space) verbatim."""

    minor_to_major: tuple[int, ...]
    extra: str = ""

    def __str__(self) -> str:
        body = ",".join(str(d) for d in self.minor_to_major)
        return "{" + body + (":" + self.extra if self.extra else "") + "}"

    @staticmethod
    def default(rank: int) -> "Layout":
        """XLA's default layout: the last dimension is the most minor."""
        return Layout(tuple(range(rank - 1, -1, -1)))


@dataclass(frozen=True)
class ArrayShape:
    """``f32[4,8]{1,0}``; tokens are ``ArrayShape(TOKEN, ())`` printed ``token[]``."""

    element_type: ElementType
    dims: tuple[int, ...] = ()
    layout: Layout | None = None
    dynamic: tuple[bool, ...] = field(default=())  # per dim: printed '<=' (bounded dynamic)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        if not self.dynamic:
            object.__setattr__(self, "dynamic", (False,) * len(self.dims))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_tuple(self) -> bool:
        return False

    @property
    def is_token(self) -> bool:
        return self.element_type is ElementType.TOKEN

    @property
    def is_array(self) -> bool:
        return self.element_type.is_array_type

    @property
    def element_count(self) -> int:
        return math.prod(self.dims)

    @property
    def is_scalar(self) -> bool:
        return self.rank == 0

    @property
    def effective_rank(self) -> int:
        """Number of dimensions larger than one (XLA's TrueNumDimensions)."""
        return sum(1 for d in self.dims if d != 1)

    def with_dims(self, dims: tuple[int, ...] | list[int]) -> "ArrayShape":
        """Same element type, new dims, default layout if this shape had a layout."""
        dims = tuple(dims)
        layout = Layout.default(len(dims)) if self.layout is not None else None
        return ArrayShape(self.element_type, dims, layout)

    def with_element_type(self, element_type: ElementType) -> "ArrayShape":
        return ArrayShape(element_type, self.dims, self.layout, self.dynamic)

    def with_default_layout(self) -> "ArrayShape":
        if self.element_type.is_array_type and self.rank > 0:
            return ArrayShape(self.element_type, self.dims, Layout.default(self.rank), self.dynamic)
        return ArrayShape(self.element_type, self.dims, None, self.dynamic)

    def without_layout(self) -> "ArrayShape":
        return ArrayShape(self.element_type, self.dims, None, self.dynamic)

    def compatible(self, other: "Shape") -> bool:
        """Same element type and dims; layouts ignored (what most checks need)."""
        return (isinstance(other, ArrayShape) and other.element_type is self.element_type
                and other.dims == self.dims)

    def leaves(self) -> Iterator["ArrayShape"]:
        yield self

    def __str__(self) -> str:
        dims = ",".join(
            ("<=" if dyn else "") + ("?" if d == UNBOUNDED else str(d))
            for d, dyn in zip(self.dims, self.dynamic))
        text = f"{self.element_type.spelling}[{dims}]"
        if self.layout is not None:
            text += str(self.layout)
        return text


@dataclass(frozen=True)
class TupleShape:
    """``(f32[2]{0}, s32[])``."""

    elements: tuple["Shape", ...] = ()

    @property
    def is_tuple(self) -> bool:
        return True

    @property
    def is_token(self) -> bool:
        return False

    @property
    def is_array(self) -> bool:
        return False

    def leaves(self) -> Iterator[ArrayShape]:
        """The array and token shapes of this tuple, depth first (the flattened result order)."""
        for element in self.elements:
            yield from element.leaves()

    def compatible(self, other: "Shape") -> bool:
        return (isinstance(other, TupleShape) and len(other.elements) == len(self.elements)
                and all(a.compatible(b) for a, b in zip(self.elements, other.elements)))

    def without_layout(self) -> "TupleShape":
        return TupleShape(tuple(e.without_layout() for e in self.elements))

    def with_default_layout(self) -> "TupleShape":
        return TupleShape(tuple(e.with_default_layout() for e in self.elements))

    def __str__(self) -> str:
        parts = []
        for i, element in enumerate(self.elements):
            prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
            parts.append(prefix + str(element))
        return "(" + ", ".join(parts) + ")"


Shape = Union[ArrayShape, TupleShape]


def scalar(element_type: ElementType) -> ArrayShape:
    return ArrayShape(element_type, ())


def token() -> ArrayShape:
    return ArrayShape(ElementType.TOKEN, ())


def array(element_type: ElementType, dims: tuple[int, ...] | list[int],
          layout: bool = True) -> ArrayShape:
    """An array shape, with XLA's default layout unless ``layout`` is False or it is a scalar."""
    dims = tuple(dims)
    return ArrayShape(element_type, dims, Layout.default(len(dims)) if layout and dims else None)


def shape_at_index(shape: Shape, index: tuple[int, ...]) -> Shape:
    """The subshape at a tuple index path (XLA's ShapeIndex)."""
    for i in index:
        if not isinstance(shape, TupleShape) or not 0 <= i < len(shape.elements):
            raise IndexError(f"shape index {index} is not valid in {shape}")
        shape = shape.elements[i]
    return shape
