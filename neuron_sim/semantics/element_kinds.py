"""The four families of element semantics (pred, integer, float, complex) and the numpy facts
every kernel needs about a dtype.

An elementwise op is defined separately for each family: an integer ``add`` wraps, a float one
rounds, a pred one is ``or``. ``domain_of`` picks the family of an array's dtype, once per dtype
(the interpreter asks on every operation). Sub-byte integers (s2, s4, u2, u4) have no numpy
arithmetic of their own: kernels compute them in 8 bits and wrap back.
"""

from __future__ import annotations

import enum
from functools import lru_cache

import numpy as np

from neuron_sim.hlo.dtypes import ElementType, Kind

__all__ = ["Domain", "NotDefined", "domain_of", "domain_of_type", "element_type_of",
           "int_work_dtype", "is_complex_type", "is_float_type", "is_int_type",
           "is_narrow_float_type", "is_pred_type", "unsigned_view"]


class Domain(enum.Enum):
    """The family of semantics an element type takes."""

    PRED = "pred"
    INT = "int"
    FLOAT = "float"
    COMPLEX = "complex"


class NotDefined(LookupError):
    """The op has no definition for this family of element types (callers name the op)."""


_DOMAIN_OF_KIND = {Kind.PRED: Domain.PRED, Kind.SIGNED: Domain.INT, Kind.UNSIGNED: Domain.INT,
                   Kind.FLOAT: Domain.FLOAT, Kind.COMPLEX: Domain.COMPLEX}


def domain_of_type(et: ElementType) -> Domain:
    """The family of ``et``; NotDefined for token and opaque, which carry no values."""
    try:
        return _DOMAIN_OF_KIND[et.kind]
    except KeyError:
        raise NotDefined(f"{et.spelling} has no element values") from None


@lru_cache(maxsize=None)
def element_type_of(dtype: np.dtype) -> ElementType:
    """The HLO element type a numpy dtype holds."""
    return ElementType.from_numpy(np.dtype(dtype))


@lru_cache(maxsize=None)
def domain_of(dtype: np.dtype) -> Domain:
    """The family of the element type a numpy dtype holds."""
    return domain_of_type(element_type_of(dtype))


def is_pred_type(dtype: np.dtype) -> bool:
    return np.dtype(dtype) == np.bool_


def is_int_type(dtype: np.dtype) -> bool:
    """Signed or unsigned integers, sub-byte ones included (not pred)."""
    return element_type_of(dtype).is_integral


def is_float_type(dtype: np.dtype) -> bool:
    """Real floating-point types, ml_dtypes' narrow ones included (not complex)."""
    return element_type_of(dtype).is_float


def is_narrow_float_type(dtype: np.dtype) -> bool:
    """Floats narrower than f32, whose arithmetic is computed in f32 and rounded back."""
    et = element_type_of(dtype)
    return et.is_float and et.bits < 32


def is_complex_type(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "c"


@lru_cache(maxsize=None)
def int_work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype integer kernels compute ``dtype`` in: itself, or 8 bits for sub-byte types
    (sign- or zero-extended by the type's signedness; the result is wrapped back)."""
    et = element_type_of(dtype)
    if et.bits >= 8:
        return np.dtype(dtype)
    return np.dtype(np.int8 if et.is_signed else np.uint8)


def unsigned_view(x: np.ndarray) -> np.ndarray:
    """The bits of ``x`` as unsigned integers of the same width."""
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")
