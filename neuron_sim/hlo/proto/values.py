"""Shapes, layouts and literals to and from ShapeProto / LayoutProto / LiteralProto.

XLA's PrimitiveType numbers (xla_data.proto) name the element types; a literal's data is held
in its shape's layout order (the order XLA's LiteralProto keeps), one field per element type:
repeated numbers for 32/64-bit types and pred, little-endian bytes for the narrow ones (one
byte per element for the sub-byte integer and float types).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.proto.text_forms import ProtoFormError
from neuron_sim.hlo.shapes import UNBOUNDED, ArrayShape, Layout, Shape, TupleShape

# xla_data.proto's PrimitiveType numbers.
PRIMITIVE_TYPES: dict[ElementType, int] = {
    ElementType.PRED: 1, ElementType.S2: 26, ElementType.S4: 21, ElementType.S8: 2,
    ElementType.S16: 3, ElementType.S32: 4, ElementType.S64: 5, ElementType.U2: 27,
    ElementType.U4: 22, ElementType.U8: 6, ElementType.U16: 7, ElementType.U32: 8,
    ElementType.U64: 9, ElementType.F16: 10, ElementType.F32: 11, ElementType.BF16: 16,
    ElementType.F64: 12, ElementType.F8E5M2: 19, ElementType.F8E4M3: 28,
    ElementType.F8E4M3FN: 20, ElementType.F8E4M3B11FNUZ: 23, ElementType.F8E3M4: 29,
    ElementType.F8E5M2FNUZ: 24, ElementType.F8E4M3FNUZ: 25, ElementType.F4E2M1FN: 32,
    ElementType.F8E8M0FNU: 33, ElementType.C64: 15, ElementType.C128: 18,
    ElementType.TOKEN: 17, ElementType.OPAQUE: 14,
}
ELEMENT_TYPES = {number: et for et, number in PRIMITIVE_TYPES.items()}
TUPLE_TYPE = 13
_NAMED_TYPES = {1: "pred", 30: "s1", 31: "u1", 34: "buffer", 0: "invalid"}

# The LiteralProto field holding each element type's data.
_LITERAL_FIELDS: dict[ElementType, str] = {
    ElementType.PRED: "preds", ElementType.S2: "s2s", ElementType.S4: "s4s",
    ElementType.S8: "s8s", ElementType.S16: "s16s", ElementType.S32: "s32s",
    ElementType.S64: "s64s", ElementType.U2: "u2s", ElementType.U4: "u4s",
    ElementType.U8: "u8s", ElementType.U16: "u16s", ElementType.U32: "u32s",
    ElementType.U64: "u64s", ElementType.F16: "f16s", ElementType.BF16: "bf16s",
    ElementType.F32: "f32s", ElementType.F64: "f64s", ElementType.C64: "c64s",
    ElementType.C128: "c128s", ElementType.F8E5M2: "f8e5m2s", ElementType.F8E4M3: "f8e4m3s",
    ElementType.F8E4M3FN: "f8e4m3fns", ElementType.F8E4M3B11FNUZ: "f8e4m3b11fnuzs",
    ElementType.F8E3M4: "f8e3m4s", ElementType.F8E5M2FNUZ: "f8e5m2fnuzs",
    ElementType.F8E4M3FNUZ: "f8e4m3fnuzs", ElementType.F4E2M1FN: "f4e2m1fns",
    ElementType.F8E8M0FNU: "f8e8m0fnus",
}
_REPEATED_FIELDS = {"preds", "s32s", "s64s", "u32s", "u64s", "f32s", "f64s", "c64s", "c128s"}

MAX_RANK = 1 << 10
_UNBOUNDED_SIZE = -(1 << 63)  # XLA's kUnboundedSize: a '?' dimension


class ShapeProtoError(ProtoFormError):
    """A ShapeProto or LiteralProto the IR cannot take."""


def element_type(number: int) -> ElementType:
    et = ELEMENT_TYPES.get(number)
    if et is None:
        name = _NAMED_TYPES.get(number, f"number {number}")
        raise ShapeProtoError(f"element type {name} is not one neuron-sim models")
    return et


# -- shapes -----------------------------------------------------------------------------------

def shape_from_proto(message: Any, depth: int = 0) -> Shape:
    """The IR shape of a ShapeProto (a layout only where the proto has one, on arrays of rank
    one or more)."""
    if depth > 500:
        raise ShapeProtoError("tuple shapes nest deeper than 500 levels")
    if message.element_type == TUPLE_TYPE:
        return TupleShape(tuple(shape_from_proto(s, depth + 1) for s in message.tuple_shapes))
    et = element_type(message.element_type)
    dims = tuple(UNBOUNDED if d == _UNBOUNDED_SIZE else d for d in message.dimensions)
    if len(dims) > MAX_RANK or any(d < UNBOUNDED for d in dims):
        raise ShapeProtoError(f"shape {et.spelling}{list(dims)} has impossible dimensions")
    dynamic = tuple(message.is_dynamic_dimension)
    if dynamic and len(dynamic) != len(dims):
        raise ShapeProtoError(f"shape {et.spelling}{list(dims)} has {len(dynamic)} dynamic "
                              f"flags for {len(dims)} dimensions")
    if dynamic:
        # XLA marks an unbounded dimension dynamic; the IR writes it '?' (not '<=?').
        dynamic = tuple(flag and d != UNBOUNDED for flag, d in zip(dynamic, dims))
    layout = None
    if message.HasField("layout") and et.is_array_type:
        layout = layout_from_proto(message.layout, len(dims), et)
        if not dims and not layout.extra:
            layout = None  # a scalar's empty layout is not printed
    return ArrayShape(et, dims, layout, dynamic or ())


def layout_from_proto(message: Any, rank: int, et: ElementType) -> Layout:
    order = tuple(message.minor_to_major)
    if sorted(order) != list(range(rank)):
        raise ShapeProtoError(f"layout minor_to_major {list(order)} is not a permutation of "
                              f"{rank} dimensions")
    extra = ""
    if message.dim_level_types or message.split_configs or message.index_primitive_type:
        raise ShapeProtoError("sparse or split layouts are not modelled")
    for tile in message.tiles:
        if not extra.startswith("T"):
            extra = "T"
        extra += "(" + ",".join("*" if d == -9223372036854775808 else str(d)
                                for d in tile.dimensions) + ")"
    if message.tail_padding_alignment_in_elements > 1:
        extra += f"L({message.tail_padding_alignment_in_elements})"
    if message.element_size_in_bits:
        extra += f"E({message.element_size_in_bits})"
    if message.memory_space:
        extra += f"S({message.memory_space})"
    if message.dynamic_shape_metadata_prefix_bytes:
        extra += f"M({message.dynamic_shape_metadata_prefix_bytes})"
    return Layout(order, extra)


_LAYOUT_ITEM = re.compile(r"([A-Z]+)((?:\([^()]*\))+)")


def shape_to_proto(shape: Shape, message: Any) -> None:
    """Fill ``message`` (a ShapeProto) with ``shape``."""
    if isinstance(shape, TupleShape):
        message.element_type = TUPLE_TYPE
        for element in shape.elements:
            shape_to_proto(element, message.tuple_shapes.add())
        return
    message.element_type = PRIMITIVE_TYPES[shape.element_type]
    message.dimensions.extend(_UNBOUNDED_SIZE if d == UNBOUNDED else d for d in shape.dims)
    if any(shape.dynamic) or UNBOUNDED in shape.dims:
        message.is_dynamic_dimension.extend(flag or d == UNBOUNDED
                                            for flag, d in zip(shape.dynamic, shape.dims))
    if shape.is_array:
        # XLA reads an array without a layout as having the default one, and refuses one
        # whose layout differs from its literal's: every array is written with its layout.
        given = shape.layout if shape.layout is not None else shape.with_default_layout().layout
        layout = message.layout
        layout.SetInParent()
        if given is not None:
            layout.minor_to_major.extend(given.minor_to_major)
            _layout_extra_to_proto(given.extra, layout)


def _layout_extra_to_proto(extra: str, layout: Any) -> None:
    pos = 0
    while pos < len(extra):
        m = _LAYOUT_ITEM.match(extra, pos)
        if not m:
            raise ShapeProtoError(f"layout item ':{extra[pos:]}' has no LayoutProto form here")
        kind, groups = m.group(1), re.findall(r"\(([^()]*)\)", m.group(2))
        try:
            if kind == "T":
                for group in groups:
                    layout.tiles.add().dimensions.extend(
                        -9223372036854775808 if d.strip() == "*" else int(d)
                        for d in group.split(",") if d.strip())
            elif kind in ("L", "E", "S", "M") and len(groups) == 1:
                field = {"L": "tail_padding_alignment_in_elements", "E": "element_size_in_bits",
                         "S": "memory_space", "M": "dynamic_shape_metadata_prefix_bytes"}[kind]
                setattr(layout, field, int(groups[0]))
            else:
                raise ValueError
        except ValueError:
            raise ShapeProtoError(f"layout item '{m.group(0)}' has no LayoutProto form "
                                  "here") from None
        pos = m.end()


# -- literals ---------------------------------------------------------------------------------

def _layout_order(shape: ArrayShape) -> tuple[int, ...]:
    """Dimensions major to minor in the literal's data order."""
    if shape.layout is None:
        return tuple(range(shape.rank))
    return tuple(reversed(shape.layout.minor_to_major))


def literal_from_proto(message: Any, shape: Shape) -> Literal:
    """The constant's Literal: its values read from ``message`` in ``shape``'s layout order."""
    return Literal(shape, value=_literal_value(message, shape, 0))


def _literal_value(message: Any, shape: Shape, depth: int) -> Any:
    if isinstance(shape, TupleShape):
        if depth > 500 or len(message.tuple_literals) != len(shape.elements):
            raise ShapeProtoError(f"a tuple literal of {len(message.tuple_literals)} elements "
                                  f"for shape {shape}")
        return [_literal_value(m, s, depth + 1) for m, s in zip(message.tuple_literals,
                                                                 shape.elements)]
    if not shape.is_array:
        return None
    et = shape.element_type
    dtype = et.numpy_dtype
    count = shape.element_count
    field = _LITERAL_FIELDS[et]
    data = getattr(message, field)
    if field in _REPEATED_FIELDS:
        flat = np.asarray(data, dtype=np.float32 if field == "c64s" else
                          np.float64 if field == "c128s" else None)
        if et.is_complex:
            flat = flat.view(dtype) if len(flat) % 2 == 0 else flat
        if len(flat) != count:
            raise ShapeProtoError(f"literal of {shape} holds {len(flat)} values, not {count}")
        flat = flat.astype(dtype)
    else:
        width = max(dtype.itemsize, 1)
        if len(data) != count * width:
            raise ShapeProtoError(f"literal of {shape} holds {len(data)} bytes, not "
                                  f"{count * width}")
        raw = np.frombuffer(data, dtype=f"<u{width}" if width > 1 else np.uint8)
        flat = raw.astype(raw.dtype.newbyteorder("=")).view(dtype) if width > 1 else \
            raw.view(np.int8 if et.is_signed and et.is_integral else np.uint8).astype(dtype) \
            if et.is_integral else raw.view(dtype)
    order = _layout_order(shape)
    physical = flat.reshape(tuple(shape.dims[d] for d in order))
    if shape.rank < 2:
        return physical
    return np.ascontiguousarray(np.transpose(physical, tuple(int(i) for i in np.argsort(order))))


def literal_to_proto(literal: Literal, message: Any) -> None:
    """Fill ``message`` (a LiteralProto) with the literal's shape and values."""
    shape = literal.shape
    if literal.is_elided:
        raise ShapeProtoError("an elided constant ({...}) has no values to store")
    _literal_fill(literal.value, shape, message)


def _literal_fill(value: Any, shape: Shape, message: Any) -> None:
    # XLA refuses a LiteralProto whose array shape has no layout.
    shape_to_proto(shape, message.shape)
    if isinstance(shape, TupleShape):
        for v, s in zip(value, shape.elements):
            _literal_fill(v, s, message.tuple_literals.add())
        return
    if not shape.is_array:
        return
    et = shape.element_type
    array = np.asarray(value, dtype=et.numpy_dtype).reshape(shape.dims)
    flat = np.transpose(array, _layout_order(shape)).reshape(-1)
    field = _LITERAL_FIELDS[et]
    if field in _REPEATED_FIELDS:
        if et.is_complex:
            flat = flat.view(np.float32 if et is ElementType.C64 else np.float64)
        getattr(message, field).extend(flat.tolist())
    elif et.is_integral and flat.dtype.itemsize == 1:
        setattr(message, field, flat.astype(np.int8 if et.is_signed else np.uint8).tobytes())
    else:
        width = flat.dtype.itemsize
        raw = flat.view(f"u{width}") if width > 1 else flat.view(np.uint8)
        setattr(message, field, raw.astype(f"<u{width}" if width > 1 else np.uint8).tobytes())
