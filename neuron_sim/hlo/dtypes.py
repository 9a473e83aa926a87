"""HLO element types and their numpy counterparts.

numpy has no bf16, f8 or sub-byte integers; ml_dtypes provides them. A type ml_dtypes lacks in the
installed version still parses and prints; only asking for its numpy dtype fails. ml_dtypes is
imported on the first use of a narrow type (``ml_dtypes_module``), not with this module: its
import costs more CPU than all of ``neuron-sim run`` of an f32 module, and an array of one of
its types cannot exist before it is imported.
"""

from __future__ import annotations

import enum
from types import ModuleType
from typing import Any

import numpy as np


def ml_dtypes_module() -> ModuleType:
    """The ml_dtypes package, imported on first use (see the module docstring)."""
    import ml_dtypes

    return ml_dtypes


def finfo(dtype: Any) -> Any:
    """Float limits of ``dtype``: numpy's ``finfo`` for numpy's own floats, ml_dtypes' for the
    narrow ones (which only ml_dtypes knows)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.finfo(dtype)
    return ml_dtypes_module().finfo(dtype)


def iinfo(dtype: Any) -> Any:
    """Integer limits of ``dtype``: numpy's ``iinfo`` for numpy's own integers, ml_dtypes' for
    the sub-byte ones."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.iinfo(dtype)
    return ml_dtypes_module().iinfo(dtype)


class Kind(enum.Enum):
    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"
    TOKEN = "token"
    OPAQUE = "opaque"


class ElementType(enum.Enum):
    """An HLO primitive type. ``value`` is its text spelling."""

    # name          spelling           kind            bits  numpy / ml_dtypes attribute
    PRED = ("pred", Kind.PRED, 8, "bool_")
    S2 = ("s2", Kind.SIGNED, 2, "int2")
    S4 = ("s4", Kind.SIGNED, 4, "int4")
    S8 = ("s8", Kind.SIGNED, 8, "int8")
    S16 = ("s16", Kind.SIGNED, 16, "int16")
    S32 = ("s32", Kind.SIGNED, 32, "int32")
    S64 = ("s64", Kind.SIGNED, 64, "int64")
    U2 = ("u2", Kind.UNSIGNED, 2, "uint2")
    U4 = ("u4", Kind.UNSIGNED, 4, "uint4")
    U8 = ("u8", Kind.UNSIGNED, 8, "uint8")
    U16 = ("u16", Kind.UNSIGNED, 16, "uint16")
    U32 = ("u32", Kind.UNSIGNED, 32, "uint32")
    U64 = ("u64", Kind.UNSIGNED, 64, "uint64")
    F4E2M1FN = ("f4e2m1fn", Kind.FLOAT, 4, "float4_e2m1fn")
    F8E3M4 = ("f8e3m4", Kind.FLOAT, 8, "float8_e3m4")
    F8E4M3 = ("f8e4m3", Kind.FLOAT, 8, "float8_e4m3")
    F8E4M3FN = ("f8e4m3fn", Kind.FLOAT, 8, "float8_e4m3fn")
    F8E4M3B11FNUZ = ("f8e4m3b11fnuz", Kind.FLOAT, 8, "float8_e4m3b11fnuz")
    F8E4M3FNUZ = ("f8e4m3fnuz", Kind.FLOAT, 8, "float8_e4m3fnuz")
    F8E5M2 = ("f8e5m2", Kind.FLOAT, 8, "float8_e5m2")
    F8E5M2FNUZ = ("f8e5m2fnuz", Kind.FLOAT, 8, "float8_e5m2fnuz")
    F8E8M0FNU = ("f8e8m0fnu", Kind.FLOAT, 8, "float8_e8m0fnu")
    BF16 = ("bf16", Kind.FLOAT, 16, "bfloat16")
    F16 = ("f16", Kind.FLOAT, 16, "float16")
    F32 = ("f32", Kind.FLOAT, 32, "float32")
    F64 = ("f64", Kind.FLOAT, 64, "float64")
    C64 = ("c64", Kind.COMPLEX, 64, "complex64")
    C128 = ("c128", Kind.COMPLEX, 128, "complex128")
    TOKEN = ("token", Kind.TOKEN, 0, None)
    OPAQUE = ("opaque", Kind.OPAQUE, 0, None)

    def __init__(self, spelling: str, kind: Kind, bits: int, numpy_name: str | None) -> None:
        self.spelling = spelling
        self.kind = kind
        self.bits = bits
        self._numpy_name = numpy_name

    def __str__(self) -> str:
        return self.spelling

    @classmethod
    def from_spelling(cls, spelling: str) -> "ElementType":
        """The element type spelled ``spelling``; KeyError if HLO has no such type."""
        return _BY_SPELLING[spelling]

    @property
    def is_integral(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_signed(self) -> bool:
        return self.kind is Kind.SIGNED

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind is Kind.COMPLEX

    @property
    def is_array_type(self) -> bool:
        """False for token and opaque, which carry no data."""
        return self._numpy_name is not None

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype that holds this type's values (ml_dtypes for the narrow ones); looked
        up once per type (the interpreter asks for it on every operation)."""
        found = _NUMPY_DTYPES.get(self)
        if found is None:
            found = _NUMPY_DTYPES[self] = self._find_numpy_dtype()
        return found

    def _find_numpy_dtype(self) -> np.dtype:
        if self._numpy_name is None:
            raise TypeError(f"{self.spelling} has no array representation")
        if hasattr(np, self._numpy_name) and self._numpy_name in _NUMPY_NATIVE:
            return np.dtype(getattr(np, self._numpy_name))
        ml_dtypes = ml_dtypes_module()
        dtype = getattr(ml_dtypes, self._numpy_name, None)
        if dtype is None:
            raise TypeError(
                f"{self.spelling} needs ml_dtypes.{self._numpy_name}, which the installed "
                f"ml_dtypes {ml_dtypes.__version__} does not provide")
        return np.dtype(dtype)

    @property
    def has_nan(self) -> bool:
        if self.is_complex:
            return True
        if not self.is_float:
            return False
        return self not in (ElementType.F4E2M1FN,)

    @property
    def has_inf(self) -> bool:
        return self.is_complex or (self.is_float and self in _FLOATS_WITH_INF)

    @classmethod
    def from_numpy(cls, dtype: np.dtype) -> "ElementType":
        """The element type whose numpy dtype is ``dtype`` (the first in declaration order).
        numpy's own dtypes are looked up without importing ml_dtypes (no narrow type shares
        one); any other dtype completes the table with ml_dtypes' types."""
        dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        if not _FROM_NUMPY:
            for et in cls:
                if et._numpy_name in _NUMPY_NATIVE:
                    _FROM_NUMPY.setdefault(et.numpy_dtype, et)
        found = _FROM_NUMPY.get(dtype)
        if found is None and not _FROM_NUMPY_COMPLETE:
            _FROM_NUMPY_COMPLETE.append(True)
            for et in cls:
                if et.is_array_type and et._numpy_name not in _NUMPY_NATIVE:
                    try:
                        _FROM_NUMPY.setdefault(et.numpy_dtype, et)
                    except TypeError:  # a narrow type this ml_dtypes lacks
                        continue
            found = _FROM_NUMPY.get(dtype)
        if found is None:
            raise KeyError(f"no HLO element type for numpy dtype {np.dtype(dtype)}")
        return found


_NUMPY_DTYPES: dict[ElementType, np.dtype] = {}
_FROM_NUMPY: dict[np.dtype, ElementType] = {}
_FROM_NUMPY_COMPLETE: list[bool] = []  # holds True once ml_dtypes' types are in _FROM_NUMPY
_NUMPY_NATIVE = {"bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128"}
_FLOATS_WITH_INF = {ElementType.BF16, ElementType.F16, ElementType.F32, ElementType.F64,
                    ElementType.F8E5M2, ElementType.F8E4M3, ElementType.F8E3M4}
_BY_SPELLING: dict[str, ElementType] = {et.spelling: et for et in ElementType}

# Spelled without brackets in HLO text ('token[]' is also accepted by the parser).
SCALAR_ONLY_TYPES = frozenset({ElementType.TOKEN, ElementType.OPAQUE})
