"""Constant literals: HLO literal text <-> numpy arrays.

A parsed literal keeps its text so that printing reproduces the dump exactly; the numpy value is
built on first use. XLA may print large constants elided as ``{...}``: such a literal parses and
prints, but has no value, and asking for it says so.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.dtypes import ElementType, Kind, finfo, iinfo
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape


class LiteralError(UserError):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class ElidedLiteralError(LiteralError):
    """The dump printed this constant as {...}: its value is not in the text."""


# One literal token: whitespace and comments are skipped (XLA's lexer), punctuation, '...' (an
# elided constant) or an atom (a number, true/false, inf, nan...).
# A NaN with a payload, ``-nan(0x7f)``, is one atom (XLA's lexer reads it as one decimal).
_NAN_PAYLOAD = r"-?nan\(0x[0-9a-fA-F]+\)"
# The full tokenizer (comments, offsets, stray characters), for a literal with a comment and
# for error messages only: compiled on first use through re's cache, not at start-up.
_TOKEN = (r"(?:\s|/\*.*?\*/|//[^\n]*)*(?:(?P<punct>[{}(),])|(?P<ellipsis>\.\.\.)"
          r"|(?P<atom>" + _NAN_PAYLOAD + r"|(?:[^\s{}(),/.]|\.(?!\.\.)|/(?![*/]))+)"
          r"|(?P<bad>.)|$)")
_FAST_TOKEN = re.compile(r"[{}(),]|\.\.\.|" + _NAN_PAYLOAD + r"|[^\s{}(),]+")
_PUNCTUATION = {"{": "{", "}": "}", "(": "(", ")": ")", ",": ",", "...": "ellipsis"}
_ELIDED = ("the constant is printed elided as {...}; its value is not in the text "
           "(dump with print_large_constants to execute it)")


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
        if not isinstance(value, list):
            return _bytes_key(value)
        # A tuple literal: its leaves in order, with the nesting marked (iteratively).
        key: list = []
        stack = [iter(value)]
        while stack:
            item = next(stack[-1], stack)
            if item is stack:
                stack.pop()
                key.append(")")
            elif isinstance(item, list):
                key.append("(")
                stack.append(iter(item))
            else:
                key.append(_bytes_key(item) if item is not None else None)
        return tuple(key)

    def __repr__(self) -> str:
        return f"Literal({self.shape}, {self.text})"


def _bytes_key(value: np.ndarray) -> tuple:
    if value.size > 1 and not any(value.strides):
        # A constant written as one number: a broadcast view, keyed without materializing it.
        return (str(value.dtype), value.shape, "every element", value[(0,) * value.ndim].tobytes())
    return (str(value.dtype), value.shape, value.tobytes())


def parse_literal(shape: Shape, text: str) -> Any:
    """The numpy value of literal ``text`` of ``shape``; LiteralError with an offset if malformed.

    One pass over the tokens, without recursion (tuple literals nest as deep as their shape):
    dense arrays follow XLA's ParseDenseLiteral, counting the elements of every dimension. An
    array written as one number is that number everywhere (``f32[3,3] constant(1)``).
    """
    reader = _LiteralReader(text)
    value = reader.literal(shape)
    if reader.pos != len(reader.tokens):
        raise reader.fail("unexpected text after literal")
    return value


class _LiteralReader:
    """Tokens as plain strings (one C-speed findall); their offsets are found only for an
    error message."""

    def __init__(self, text: str) -> None:
        self.text = text
        if "/" in text:
            self.tokens = []
            for m in re.finditer(_TOKEN, text, re.S):
                kind = m.lastgroup
                if kind == "bad":
                    raise LiteralError("unexpected character in literal", m.start(kind))
                if kind is not None:
                    self.tokens.append(m.group(kind))
        else:
            self.tokens = _FAST_TOKEN.findall(text)
        self.pos = 0

    def offset(self, index: int) -> int:
        if index >= len(self.tokens):
            return len(self.text)
        found = [m.start(m.lastgroup) for m in re.finditer(_TOKEN, self.text, re.S)
                 if m.lastgroup not in (None, "bad")]
        return found[index] if index < len(found) else len(self.text)

    def fail(self, message: str) -> LiteralError:
        return LiteralError(message, self.offset(self.pos))

    def kind(self) -> str | None:
        if self.pos >= len(self.tokens):
            return None
        token = self.tokens[self.pos]
        return _PUNCTUATION.get(token, "atom")

    def peek(self, kind: str) -> bool:
        return self.kind() == kind

    def expect(self, kind: str) -> str:
        if not self.peek(kind):
            raise self.fail(f"expected '{kind}' in literal")
        self.pos += 1
        return self.tokens[self.pos - 1]

    # literal ::= '(' (literal (',' literal)*)? ')' | array      (a tuple literal, by its shape)
    def literal(self, shape: Shape) -> Any:
        if not isinstance(shape, TupleShape):
            return self.array(shape)
        root: list = []
        self.expect("(")
        stack: list[tuple[TupleShape, list]] = [(shape, root)]
        while stack:
            tuple_shape, values = stack[-1]
            if len(values) == len(tuple_shape.elements):
                self.expect(")")
                stack.pop()
                continue
            if values:
                self.expect(",")
            element = tuple_shape.elements[len(values)]
            if isinstance(element, TupleShape):
                self.expect("(")
                child: list = []
                values.append(child)
                stack.append((element, child))
            else:
                values.append(self.array(element))
        return root

    # array ::= scalar | '{' (array (',' array)*)? '}'      scalar ::= atom | '(' atom ',' atom ')'
    def array(self, shape: ArrayShape) -> Any:
        if not shape.is_array:
            return None
        et = shape.element_type
        rank = shape.rank
        if rank == 0 or not self.peek("{"):
            if rank == 0 and self.peek("{") and not et.is_complex:
                # A scalar may be written in braces in some dumps: {1}.
                self.expect("{")
                flat = [self.scalar(et)]
                self.expect("}")
            else:
                # One number for the whole array: a read-only broadcast, no copy per element.
                one = _to_array(ArrayShape(et, ()), [self.scalar(et)])
                return np.broadcast_to(one, shape.dims)
            return _to_array(shape, flat)
        dims = shape.dims
        seen = [0] * rank
        level = 0
        atoms: list = []
        tokens = self.tokens
        minor = dims[rank - 1]
        while True:
            if self.pos >= len(tokens):
                raise self.fail("unterminated array literal")
            kind = _PUNCTUATION.get(tokens[self.pos], "atom")
            if kind == "{":
                level += 1
                if level > rank:
                    raise self.fail(f"expects nested array in rank {rank}, but sees larger")
                if level > 1:
                    seen[level - 2] += 1
                    if seen[level - 2] > dims[level - 2]:
                        raise self.fail(f"expects {dims[level - 2]} elements in dimension "
                                        f"{level - 2}, but sees more")
                self.pos += 1
            elif kind == "}":
                level -= 1
                if seen[level] != dims[level]:
                    raise self.fail(f"expects {dims[level]} elements in dimension {level}, "
                                    f"but sees {seen[level]}")
                seen[level] = 0
                self.pos += 1
                if level == 0:
                    break
            elif kind == ",":
                self.pos += 1
            elif kind == "ellipsis":
                raise ElidedLiteralError(_ELIDED, self.offset(self.pos))
            else:
                if level != rank:
                    raise self.fail(f"expects nested array in rank {rank}, but sees {level}")
                seen[rank - 1] += 1
                if seen[rank - 1] > minor:
                    raise self.fail(f"expects {minor} elements on the minor-most "
                                    f"dimension, but sees more")
                if kind == "atom" and not et.is_complex:
                    atoms.append(self.pos)
                    self.pos += 1
                else:
                    atoms.append(self.scalar(et))
        return _to_array(shape, self.values(et, atoms))

    def values(self, et: ElementType, atoms: list) -> list:
        """The scalars at token indices ``atoms`` (complex values already converted), with a
        fast path for plain decimal text."""
        if et.is_complex:
            return atoms
        texts = [self.tokens[i] for i in atoms]
        fast = int if et.is_integral else float if et.is_float else None
        if fast is not None:
            try:
                values = [fast(t) for t in texts]
                if fast is int or not np.isinf(values).any():
                    return values
            except ValueError:
                pass
        values = []
        for i, text in zip(atoms, texts):
            try:
                values.append(_scalar_from_text(et, text))
            except ValueError as exc:
                self.pos = i
                raise self.fail(_scalar_error(et, text, exc)) from None
        return values

    def scalar(self, et: ElementType) -> Any:
        if et.is_complex:
            start = self.pos
            self.expect("(")
            real = self.scalar(ElementType.F64)
            self.expect(",")
            imag = self.scalar(ElementType.F64)
            self.expect(")")
            # As XLA: each finite part within the range of the component type.
            limit = float(np.finfo(et.numpy_dtype).max)
            for part, value in (("real", real), ("imaginary", imag)):
                if math.isfinite(value) and abs(value) > limit:
                    self.pos = start
                    raise self.fail(f"{part} part {value:g} is out of range for literal's "
                                    f"primitive type {et.spelling.upper()}, namely "
                                    f"[{-limit:g}, {limit:g}]")
            return complex(real, imag)
        if self.peek("ellipsis"):
            raise ElidedLiteralError(_ELIDED, self.offset(self.pos))
        atom = self.expect("atom")
        try:
            return _scalar_from_text(et, atom)
        except ValueError as exc:
            self.pos -= 1
            raise self.fail(_scalar_error(et, atom, exc)) from None


def _scalar_error(et: ElementType, text: str, exc: ValueError) -> str:
    """The message for an atom that is not a value of ``et``: the reason when there is one."""
    if isinstance(exc, _UnparsableDouble) or "NaN payload" in str(exc):
        return str(exc)
    return f"'{text}' is not a valid {et.spelling} value"


def _to_array(shape: ArrayShape, flat: list) -> np.ndarray:
    """``flat`` as an array of ``shape``, refusing what XLA's CheckParsedValueIsInRange refuses:
    integers outside the element type's range (never wrapped around, except that a negative
    u64 is its two's complement, as XLA reads an int64 into a uint64) and finite floats the
    type cannot hold (rounding to infinity)."""
    et = shape.element_type
    dtype = et.numpy_dtype
    if et.is_integral and flat:
        info = iinfo(dtype)
        low, high = min(flat), max(flat)
        if et is ElementType.U64 and -2 ** 63 <= low < 0 and high < 2 ** 63:
            return np.array(flat, dtype=np.int64).view(np.uint64).reshape(shape.dims)
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise LiteralError(f"value {bad} is out of range for {et.spelling} "
                               f"[{info.min}, {info.max}]")
    if et.is_float and flat:
        wide = np.array(flat, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = wide.astype(dtype)
            lost = np.isfinite(wide) & ~np.isfinite(narrow.astype(np.float64))
        if lost.any():
            info = finfo(dtype)
            raise LiteralError(f"value {wide[lost][0]:g} is out of range for literal's "
                               f"primitive type {et.spelling.upper()} namely "
                               f"[{float(info.min):g}, {float(info.max):g}]")
        _set_nan_payloads(et, narrow, flat, wide)
        return narrow.reshape(shape.dims)
    return np.array(flat, dtype=dtype).reshape(shape.dims)


class _PayloadNan(float):
    """A NaN written with a payload, ``-nan(0x7f)``: NaN as a float, with the payload kept."""

    negative: bool
    payload: int

    def __new__(cls, negative: bool, payload: int) -> "_PayloadNan":
        value = super().__new__(cls, "-nan" if negative else "nan")
        value.negative = negative
        value.payload = payload
        return value


def _nan_payload_bits(et: ElementType) -> int:
    """XLA's NanPayloadBits: the mantissa width of the types with signaling NaNs (the IEEE-like
    types, those with infinities), 0 for the others."""
    return int(finfo(et.numpy_dtype).nmant) if et.has_inf else 0


def _check_nan_payload(et: ElementType, payload: int) -> None:
    bits = _nan_payload_bits(et)
    if bits == 0:
        raise ValueError(f"{et.spelling} does not support NaN payloads")
    if payload >= 1 << bits:
        raise ValueError(f"the NaN payload 0x{payload:x} is out of range for {et.spelling} "
                         f"(0x{(1 << bits) - 1:x})")


def _set_nan_payloads(et: ElementType, values: np.ndarray, flat: list, wide: np.ndarray) -> None:
    """Write the payload of every ``nan(0x...)`` into the NaN bits of ``values`` (XLA's
    NanWithSignAndPayload: the quiet NaN's bits, the sign, the payload in the mantissa)."""
    payloads = [(i, flat[i]) for i in np.flatnonzero(np.isnan(wide))
                if isinstance(flat[i], _PayloadNan)]
    if not payloads:
        return
    bits = values.reshape(-1).view(np.dtype(f"u{values.dtype.itemsize}"))
    mask = (1 << _nan_payload_bits(et)) - 1
    sign = 1 << (8 * values.dtype.itemsize - 1)
    quiet = int(np.abs(np.array(np.nan, dtype=values.dtype)).reshape(1).view(bits.dtype)[0])
    for i, nan in payloads:
        bits[i] = (quiet & ~mask) | (sign if nan.negative else 0) | nan.payload


class _UnparsableDouble(ValueError):
    """A decimal beyond the range of double, which XLA's parser refuses."""


# XLA's QuietNanWithoutPayload<double>: the payload of a plain NaN.
_QUIET_PAYLOAD = 1 << 51
_DOUBLE_RANGE = "Constant is out of range for double (+/-1.79769e+308) and so is unparsable"


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
    match = re.fullmatch(r"(-?)nan(?:\(0x([0-9a-f]+)\))?", lowered)
    if match:
        negative = bool(match.group(1))
        payload = int(match.group(2), 16) if match.group(2) is not None else _QUIET_PAYLOAD
        if payload == _QUIET_PAYLOAD:
            return -np.nan if negative else np.nan
        if payload == 0 or payload >= 1 << 52:
            raise ValueError(f"the NaN payload 0x{payload:x} is out of range for a double")
        if et.is_float:
            _check_nan_payload(et, payload)
        return _PayloadNan(negative, payload)
    if lowered in ("inf", "+inf"):
        return np.inf
    if lowered == "-inf":
        return -np.inf
    value = float(atom)
    if math.isinf(value):
        raise _UnparsableDouble(_DOUBLE_RANGE)
    return value


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
