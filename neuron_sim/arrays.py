"""Exact, dtype-aware array equality shared by passes (contracts) and the verifier.

Exact means bitwise: ``-0.0`` differs from ``+0.0``, and two NaNs are equal whatever their sign
or payload (XLA does not promise NaN bits). Float detection covers numpy's floats and complex
numbers and ml_dtypes' (bfloat16, the float8 family), which numpy reports as kind ``V``.
"""

from __future__ import annotations

import numpy as np


def is_float_dtype(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a floating-point or complex type, ml_dtypes' included."""
    if dtype.kind in "fc":
        return True
    if dtype.kind in "iub":
        return False
    if dtype.type.__module__.split(".")[0] != "ml_dtypes":
        return False  # ml_dtypes is imported before an array of one of its types exists
    import ml_dtypes

    try:
        ml_dtypes.finfo(dtype)
    except (ValueError, TypeError):
        return False
    return True


def is_float(array: np.ndarray) -> bool:
    """Whether ``array`` holds floating-point or complex values."""
    return is_float_dtype(np.asarray(array).dtype)


def isnan(array: np.ndarray) -> np.ndarray:
    """Elementwise NaN test for every dtype (all False for integers and bool; a complex value
    is NaN when either part is)."""
    array = np.asarray(array)
    if not is_float(array):
        return np.zeros(array.shape, dtype=bool)
    if array.dtype.kind == "c":
        return np.isnan(array.real) | np.isnan(array.imag)
    return np.isnan(array.astype(np.float64) if array.dtype.kind != "f" else array)


def equal_mask(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Elementwise exact equality: bitwise, except that NaN equals NaN. Arrays of different
    dtypes are equal nowhere."""
    source = np.asarray(source)
    target = np.asarray(target)
    if source.dtype != target.dtype:
        return np.zeros(np.broadcast_shapes(source.shape, target.shape), dtype=bool)
    if not is_float(source):
        return np.asarray(source == target)
    width = source.dtype.itemsize
    if source.dtype.kind == "c":
        parts = np.dtype(f"u{width // 2}")
        s_bits = np.ascontiguousarray(source).view(parts).reshape(*source.shape, 2)
        t_bits = np.ascontiguousarray(target).view(parts).reshape(*target.shape, 2)
        same = np.all(s_bits == t_bits, axis=-1)
    else:
        unsigned = np.dtype(f"u{width}")
        same = np.ascontiguousarray(source).view(unsigned) == \
            np.ascontiguousarray(target).view(unsigned)
    return same | (isnan(source) & isnan(target))
