"""Constant literals: HLO literal text <-> numpy arrays.

A parsed literal keeps its text so that printing reproduces the dump exactly; the numpy value is
built on first use. XLA may print large constants elided as ``{...}``: such a literal parses and
prints, but has no value, and asking for it says so.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.dtypes import ElementType, Kind
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape


class LiteralError(UserError):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class ElidedLiteralError(LiteralError):
    """The dump printed this constant as {...}: its value is not in the text."""


_TOKEN = re.compile(r"\s*(?:(?P<open>[{(])|(?P<close>[})])|(?P<comma>,)|(?P<ellipsis>\.\.\.)"
                    r"|(?P<atom>[^\s{}(),]+))")


class Literal:
    """A constant's value: ``shape`` plus either ``text`` (as parsed) or a numpy ``value``."""

    def __init__(self, shape: Shape, text: str | None = None, value: Any = None) -> None:
        if text is None and value is None:
            raise ValueError("a literal needs text or a value")
        self.shape = shape
        self._text = text
        self._value = value

    @classmethod
    def from_array(cls, shape: Shape, value: Any) -> "Literal":
        if isinstance(shape, ArrayShape) and shape.is_array:
            value = np.asarray(value, dtype=shape.element_type.numpy_dtype).reshape(shape.dims)
        return cls(shape, value=value)

    @property
    def is_elided(self) -> bool:
        return self._text is not None and "..." in self._text

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = format_literal(self.shape, self._value)
        return self._text

    @property
    def value(self) -> Any:
        """The numpy array (a list of values for a tuple literal)."""
        if self._value is None:
            self._value = parse_literal(self.shape, self.text)
        return self._value

    def structural_key(self) -> Any:
        if self.is_elided:
            return ("elided", self._text)
        value = self.value
        if isinstance(value, list):
            return tuple(_bytes_key(v) for v in value)
        return _bytes_key(value)

    def __repr__(self) -> str:
        return f"Literal({self.shape}, {self.text})"


def _bytes_key(value: np.ndarray) -> tuple:
    return (str(value.dtype), value.shape, value.tobytes())


def parse_literal(shape: Shape, text: str) -> Any:
    """The numpy value of literal ``text`` of ``shape``; LiteralError with an offset if malformed."""
    tokens = [(m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup))
              for m in _TOKEN.finditer(text) if m.lastgroup]
    consumed = sum(len(m.group(0)) for m in _TOKEN.finditer(text))
    if consumed != len(text.rstrip()) and text.strip():
        raise LiteralError("unexpected character in literal", consumed)
    pos = 0

    def fail(message: str) -> LiteralError:
        offset = tokens[pos][2] if pos < len(tokens) else len(text)
        return LiteralError(message, offset)

    def expect(kind: str, value: str | None = None) -> str:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos][0] != kind or (value and tokens[pos][1] != value):
            raise fail(f"expected '{value or kind}' in literal")
        pos += 1
        return tokens[pos - 1][1]

    def peek(kind: str) -> bool:
        return pos < len(tokens) and tokens[pos][0] == kind

    def read_array(shape: ArrayShape, depth: int) -> list:
        nonlocal pos
        if any(t[0] == "ellipsis" for t in tokens):
            raise ElidedLiteralError(
                "the constant is printed elided as {...}; its value is not in the text "
                "(dump with print_large_constants to execute it)")
        if depth == shape.rank:
            return [read_scalar(shape.element_type)]
        expect("open", "{")
        items: list = []
        while not peek("close"):
            items.extend(read_array(shape, depth + 1))
            if peek("comma"):
                pos += 1
        expect("close", "}")
        return items

    def read_scalar(et: ElementType) -> Any:
        nonlocal pos
        if et.is_complex:
            expect("open", "(")
            real = read_scalar(ElementType.F64)
            expect("comma")
            imag = read_scalar(ElementType.F64)
            expect("close", ")")
            return complex(real, imag)
        atom = expect("atom")
        try:
            return _scalar_from_text(et, atom)
        except ValueError:
            pos -= 1
            raise fail(f"'{atom}' is not a valid {et.spelling} value") from None

    def read(shape: Shape) -> Any:
        nonlocal pos
        if isinstance(shape, TupleShape):
            expect("open", "(")
            values = []
            for i, element in enumerate(shape.elements):
                if i:
                    expect("comma")
                values.append(read(element))
            expect("close", ")")
            return values
        if not shape.is_array:
            return None
        if shape.rank == 0 and peek("open") and not shape.element_type.is_complex:
            # A scalar may be written in braces in some dumps: {1}.
            expect("open", "{")
            flat = [read_scalar(shape.element_type)]
            expect("close", "}")
        else:
            flat = read_array(shape, 0)
        if len(flat) != shape.element_count:
            raise LiteralError(
                f"literal has {len(flat)} values but {shape} needs {shape.element_count}", 0)
        dtype = shape.element_type.numpy_dtype
        if shape.element_type.is_float and dtype.itemsize < 4 or dtype.kind == "V":
            return np.array(flat, dtype=np.float64).astype(dtype).reshape(shape.dims)
        return np.array(flat, dtype=dtype).reshape(shape.dims)

    value = read(shape)
    if pos != len(tokens):
        raise fail("unexpected text after literal")
    return value


def _scalar_from_text(et: ElementType, atom: str) -> Any:
    if et.kind is Kind.PRED:
        if atom in ("true", "1"):
            return True
        if atom in ("false", "0"):
            return False
        raise ValueError(atom)
    if et.is_integral:
        return int(atom, 0) if atom.lower().startswith(("0x", "-0x")) else int(atom)
    lowered = atom.lower()
    match = re.fullmatch(r"(-?)nan(?:\(0x[0-9a-f]+\))?", lowered)
    if match:
        return -np.nan if match.group(1) else np.nan
    if lowered in ("inf", "+inf"):
        return np.inf
    if lowered == "-inf":
        return -np.inf
    return float(atom)


def _format_scalar(et: ElementType, value: Any) -> str:
    if et.kind is Kind.PRED:
        return "true" if value else "false"
    if et.is_integral:
        return str(int(value))
    if et.is_complex:
        return f"({_format_scalar(ElementType.F64, value.real)}, " \
               f"{_format_scalar(ElementType.F64, value.imag)})"
    f = float(value)
    if np.isnan(f):
        return "-nan" if np.signbit(f) else "nan"
    if np.isinf(f):
        return "-inf" if f < 0 else "inf"
    text = str(value) if et in (ElementType.F32, ElementType.F16, ElementType.BF16) else repr(f)
    if text.endswith(".0"):
        text = text[:-2]
    return text


def format_literal(shape: Shape, value: Any) -> str:
    """XLA's text for a literal: ``1``, ``{1, 2}``, ``{ { 1, 2 }, { 3, 4 } }``, ``(1, {2})``."""
    if isinstance(shape, TupleShape):
        return "(" + ", ".join(format_literal(s, v) for s, v in zip(shape.elements, value)) + ")"
    if not shape.is_array:
        return ""
    array = np.asarray(value).reshape(shape.dims)
    et = shape.element_type

    def fmt(sub: np.ndarray, depth: int) -> str:
        if depth == shape.rank:
            return _format_scalar(et, sub[()])
        items = [fmt(sub[i], depth + 1) for i in range(sub.shape[0])]
        if shape.rank - depth == 1:
            return "{" + ", ".join(items) + "}" if depth == 0 else "{ " + ", ".join(items) + " }"
        return "{ " + ", ".join(items) + " }"

    return fmt(array, 0)
