"""XLA's ``convert`` as pure numpy: one implementation for the interpreter and the passes.

The interpreter executes ``convert`` with it and ConstantSliceConvertCanonicalizer folds a
constant with it, so a folded constant holds exactly what running the convert would give.
Conventions (docs/semantics.md §4, XLA's CPU elemental emitter):

- float -> integer truncates toward zero, saturates out-of-range values (infinities included)
  to the type's limits and maps NaN to 0;
- float -> narrower float rounds to nearest even; a value past the narrow type's largest
  finite one becomes an infinity (bf16, f16), a denormal stays a denormal where the type has it;
- integer -> a float narrower than 32 bits goes through f32 (as XLA:CPU emits it);
- anything -> pred is ``x != 0``; complex -> real drops the imaginary part;
- integer -> integer wraps (two's complement), sub-byte types included.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.dtypes import ElementType

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def wrap_int(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Wrap integer ``values`` (computed in a wider type) into ``dtype`` two's complement."""
    et = ElementType.from_numpy(np.dtype(dtype))
    if et.bits >= 8:
        return values.astype(dtype, copy=False)
    wide = values.astype(np.int64)
    mask = (1 << et.bits) - 1
    wide = wide & mask
    if et.is_signed:
        wide = np.where(wide >= 1 << (et.bits - 1), wide - (1 << et.bits), wide)
    return wide.astype(dtype)


def convert_array(x: np.ndarray, target: ElementType) -> np.ndarray:
    """XLA's convert of ``x`` to ``target`` (see the module docstring)."""
    dtype = target.numpy_dtype
    source = x.dtype
    if source == dtype:
        return x
    if target is ElementType.PRED:
        return x != 0
    if source.kind == "c" and not target.is_complex:
        x = np.real(x)
        source = x.dtype
    source_type = ElementType.from_numpy(np.dtype(source))
    if target.is_integral:
        if source == np.bool_:
            return x.astype(dtype)
        if source_type.is_float:
            return _float_to_int(x, target)
        return wrap_int(x.astype(np.int64), dtype) if target.bits < 8 else x.astype(dtype)
    if target.is_float:
        if source_type.is_integral and target.bits < 32:
            return x.astype(F32).astype(dtype)
        return x.astype(dtype)
    return x.astype(dtype)


def _float_to_int(x: np.ndarray, target: ElementType) -> np.ndarray:
    dtype = target.numpy_dtype
    values = np.trunc(x.astype(F64))
    if target.is_signed:
        low, high = -(2 ** (target.bits - 1)), 2 ** (target.bits - 1) - 1
    else:
        low, high = 0, 2 ** target.bits - 1
    nan = np.isnan(values)
    too_low = values <= low
    too_high = values >= high
    middle = np.where(nan | too_low | too_high, 0, values)
    work = np.uint64 if not target.is_signed else np.int64
    result = middle.astype(work)
    result = np.where(too_high, np.array(high).astype(work), result)
    result = np.where(too_low, np.array(low).astype(work), result)
    if target.bits < 8:
        return wrap_int(result, dtype)
    return result.astype(dtype)
