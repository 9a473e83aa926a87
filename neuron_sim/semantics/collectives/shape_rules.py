"""The result shape of each collective kind, from its operand shapes, dimension and group size.

Each rule maps (operand shapes, dimension or None, group size) to the synchronous result shape
(one operand's result as itself, several as a tuple) and raises ``ShapeRuleError`` for operands
the kind cannot take, in the words the checker reports (it adds which instruction). The group
size is the shard count for all-gather and reduce-scatter (the checker derives it from the
declared result where XLA does). Layouts are ignored in results, as XLA's verifier does; the
tuple form of all-to-all compares its operands' layouts (XLA's InferAllToAllTupleShape).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from neuron_sim.hlo.shapes import ArrayShape, Layout, Shape, TupleShape
from neuron_sim.semantics.collectives.descriptor import ShapeRuleError

__all__ = ["all_to_all_shape", "gathered_shape", "output_buffer_shape", "same_as_operands",
           "scattered_shape"]


def _fmt(shape: Shape) -> str:
    return str(shape.without_layout())


def _tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def same_as_operands(operands: Sequence[Shape], dim: int | None, group_size: int) -> Shape:
    """all-reduce, collective-broadcast, collective-permute: each result is its operand's
    shape."""
    return _tuple_or_single(operands)


def gathered_shape(operands: Sequence[Shape], dim: int | None, group_size: int) -> Shape:
    """all-gather: dimension ``dim`` of each operand times the group size."""
    assert dim is not None
    return _tuple_or_single([ArrayShape(s.element_type,
                                        s.dims[:dim] + (s.dims[dim] * group_size,)
                                        + s.dims[dim + 1:]) for s in operands])


def scattered_shape(operands: Sequence[Shape], dim: int | None, group_size: int) -> Shape:
    """reduce-scatter: dimension ``dim`` of each operand divided by the group size, which must
    divide it."""
    assert dim is not None
    results = []
    for s in operands:
        if s.dims[dim] % group_size:
            raise ShapeRuleError(f"reduce-scatter dimension {dim} of {_fmt(s)} is not divisible "
                                 f"by the shard count {group_size}")
        results.append(ArrayShape(s.element_type, s.dims[:dim] + (s.dims[dim] // group_size,)
                                  + s.dims[dim + 1:]))
    return _tuple_or_single(results)


def all_to_all_shape(operands: Sequence[Shape], dim: int | None, group_size: int) -> Shape:
    """all-to-all. Array form (a dimension): one operand whose dimension the group size
    divides; the result is its shape. Tuple form (no dimension): one operand per group member,
    all of one shape, layout included (XLA compares them with Shape::Equal, which sees
    layouts, memory space aside); the result is their tuple."""
    if dim is not None:
        if len(operands) != 1:
            raise ShapeRuleError(f"all-to-all expects 1 operand but has {len(operands)}")
        (shape,) = operands
        if shape.dims[dim] % group_size:
            raise ShapeRuleError(f"all-to-all dimension {dim} of {_fmt(shape)} is not divisible "
                                 f"by the replica group size {group_size}")
        return shape
    if len(operands) != group_size:
        raise ShapeRuleError(f"tuple all-to-all has {len(operands)} operands but the replica "
                             f"group size is {group_size}")
    first = operands[0]
    for i, s in enumerate(operands):
        if not s.compatible(first):
            raise ShapeRuleError(f"all-to-all operand {i} {_fmt(s)} differs from operand 0 "
                                 f"{_fmt(first)}")
        if _layout_key(s) != _layout_key(first):
            raise ShapeRuleError(f"all-to-all operand {i} {s} differs from operand 0 {first} in "
                                 f"its layout")
    return TupleShape(tuple(operands))


def output_buffer_shape(operands: Sequence[Shape], dim: int | None, group_size: int) -> Shape:
    """ragged-all-to-all: the output buffer's shape (operand 1; XLA's
    InferRaggedAllToAllShape)."""
    if len(operands) < 2:
        raise ShapeRuleError(f"ragged-all-to-all needs its output buffer as operand 1, but has "
                             f"{len(operands)} operand{'s' * (len(operands) != 1)}")
    return operands[1]


_MEMORY_SPACE = re.compile(r"S\(\d+\)")


def _layout_key(shape: ArrayShape) -> tuple:
    """A layout as XLA's Shape::Equal().IgnoreMemorySpaceInLayout() compares it: the dimension
    order (the parser's default when none is written) and the tiles, memory space left out."""
    layout = shape.layout or Layout.default(shape.rank)
    return layout.minor_to_major, _MEMORY_SPACE.sub("", layout.extra)
