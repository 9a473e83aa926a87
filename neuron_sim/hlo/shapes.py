"""HLO shapes: arrays (with optional layouts and dynamic dimensions), tuples, tokens.

Shapes are immutable values. The layout ({1,0}: minor-to-major) never changes a value's logical
contents; only bitcast and copy read it (docs/semantics.md §5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

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


@dataclass(frozen=True, eq=False)
class TupleShape:
    """``(f32[2]{0}, s32[])``. Every walk over the nesting is iterative, so a tuple nested as
    deep as the parser admits prints, compares and hashes without Python recursion."""

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
        stack = [iter(self.elements)]
        while stack:
            element = next(stack[-1], None)
            if element is None:
                stack.pop()
            elif isinstance(element, TupleShape):
                stack.append(iter(element.elements))
            else:
                yield element

    def compatible(self, other: "Shape") -> bool:
        return _pairwise(self, other, lambda a, b: a.compatible(b))

    def without_layout(self) -> "TupleShape":
        return map_leaves(self, lambda leaf: leaf.without_layout())

    def with_default_layout(self) -> "TupleShape":
        return map_leaves(self, lambda leaf: leaf.with_default_layout())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TupleShape):
            return NotImplemented
        return _pairwise(self, other, lambda a, b: a == b)

    def __hash__(self) -> int:
        return hash(tuple(_tokens(self)))

    def __str__(self) -> str:
        return "".join(text if isinstance(text, str) else str(text)
                       for text in _tokens(self, printing=True))


@dataclass(frozen=True)
class BufferShape:
    """XLA's buffer shape ``b(f32[2,4]{0,1})`` (ShapeUtil::MakeValidatedBufferShape): a buffer
    holding an array, what custom-calls such as Pin and Unpin make and take. A leaf like an
    array; its element type and dims are the array's."""

    array: ArrayShape

    @property
    def is_tuple(self) -> bool:
        return False

    @property
    def is_token(self) -> bool:
        return False

    @property
    def is_array(self) -> bool:
        return False

    @property
    def element_type(self) -> ElementType:
        return self.array.element_type

    @property
    def dims(self) -> tuple[int, ...]:
        return self.array.dims

    @property
    def rank(self) -> int:
        return self.array.rank

    @property
    def element_count(self) -> int:
        return self.array.element_count

    @property
    def dynamic(self) -> tuple[bool, ...]:
        return self.array.dynamic

    @property
    def layout(self) -> "Layout | None":
        return self.array.layout

    def leaves(self) -> Iterator["BufferShape"]:
        yield self

    def compatible(self, other: "Shape") -> bool:
        return isinstance(other, BufferShape) and self.array.compatible(other.array)

    def without_layout(self) -> "BufferShape":
        return BufferShape(self.array.without_layout())

    def with_default_layout(self) -> "BufferShape":
        return BufferShape(self.array.with_default_layout())

    def __str__(self) -> str:
        return f"b({self.array})"


def _tokens(shape: "Shape", printing: bool = False) -> Iterator[Any]:
    """``shape`` flattened to '(' ... ')' markers and leaves, iteratively (with XLA's separators
    and ``/*index=N*/`` comments when ``printing``)."""
    stack: list[tuple[tuple, int]] = [((shape,), 0)]
    while stack:
        elements, i = stack.pop()
        if i == len(elements):
            if len(stack):
                yield ")"
            continue
        stack.append((elements, i + 1))
        if printing and len(stack) > 1 and i:
            yield ", /*index=%d*/" % i if i % 5 == 0 else ", "
        element = elements[i]
        if isinstance(element, TupleShape):
            yield "("
            stack.append((element.elements, 0))
        else:
            yield element


def _pairwise(a: "Shape", b: "Shape", same_leaf: Callable[[Any, Any], bool]) -> bool:
    """True if ``a`` and ``b`` nest alike and ``same_leaf`` holds for every pair of leaves."""
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        if isinstance(x, TupleShape) or isinstance(y, TupleShape):
            if not (isinstance(x, TupleShape) and isinstance(y, TupleShape)) \
                    or len(x.elements) != len(y.elements):
                return False
            pairs.extend(zip(x.elements, y.elements))
        elif not same_leaf(x, y):
            return False
    return True


def map_leaves(shape: "Shape", fn: Callable[[ArrayShape], "Shape"]) -> "Shape":
    """``shape`` with every array/token leaf replaced by ``fn(leaf)``, rebuilt iteratively."""
    if not isinstance(shape, TupleShape):
        return fn(shape)
    stack: list[tuple[tuple, int, list]] = [(shape.elements, 0, [])]
    while True:
        elements, i, built = stack[-1]
        if i == len(elements):
            stack.pop()
            result = TupleShape(tuple(built))
            if not stack:
                return result
            stack[-1][2].append(result)
            continue
        stack[-1] = (elements, i + 1, built)
        element = elements[i]
        if isinstance(element, TupleShape):
            stack.append((element.elements, 0, []))
        else:
            built.append(fn(element))


Shape = Union[ArrayShape, TupleShape, BufferShape]


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
