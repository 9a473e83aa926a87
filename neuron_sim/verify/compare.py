"""Comparing source and target outputs against a pass's contract (``neuron_sim.passes.contracts``).

Exact equality (``neuron_sim.arrays.equal_mask``) is bitwise: ``-0.0`` differs from ``+0.0``,
and two NaNs are equal whatever their sign or payload (XLA does not promise NaN bits). What else
a contract allows is the contract's to say (``Contract.allowed``); this module finds the first
disallowed element and renders values for reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from neuron_sim.arrays import equal_mask, is_float  # noqa: F401 - equal_mask: verify's name
from neuron_sim.passes.contracts import EXACT, Contract, contract_of


def allowed_mask(source: np.ndarray, target: np.ndarray,
                 contract: Contract | str = EXACT) -> np.ndarray:
    """Elementwise: is the target's value allowed for the source's under ``contract``?"""
    return contract_of(contract).allowed(np.asarray(source), np.asarray(target))


@dataclass
class Mismatch:
    """The first output element (leaf, device, index) where the target is not allowed."""

    leaf: int
    device: int
    index: tuple[int, ...]
    source_value: Any
    target_value: Any
    dtype: str
    count: int                                   # mismatching elements in this leaf, all devices
    devices: list[int] = field(default_factory=list)  # devices with a mismatch in this leaf
    shape_problem: str | None = None             # set when the leaf shapes themselves differ

    @property
    def source_text(self) -> str:
        return format_value(self.source_value)

    @property
    def target_text(self) -> str:
        return format_value(self.target_value)


def find_mismatch(source: Sequence[np.ndarray], target: Sequence[np.ndarray],
                  contract: Contract | str = EXACT) -> Mismatch | None:
    """The first disallowed element of the flattened results (leaf, then device, then index).
    A leaf whose bytes are the source's is skipped unread: every contract allows the source's
    own value (``Contract.allowed`` holds wherever ``equal_mask`` does)."""
    if len(source) != len(target):
        return Mismatch(0, 0, (), None, None, "", 0, [],
                        shape_problem=f"source has {len(source)} output leaves, target "
                                      f"{len(target)}")
    for leaf, (s, t) in enumerate(zip(source, target)):
        s = np.asarray(s)
        t = np.asarray(t)
        if s.shape != t.shape or s.dtype != t.dtype:
            return Mismatch(leaf, 0, (), None, None, str(s.dtype), 0, [],
                            shape_problem=f"output leaf {leaf}: source is {s.dtype}{list(s.shape)}"
                                          f", target {t.dtype}{list(t.shape)}")
        if s.tobytes() == t.tobytes():  # bit for bit the same: every contract allows it
            continue
        bad = ~allowed_mask(s, t, contract)
        if not bad.any():
            continue
        where = np.argwhere(bad)
        first = tuple(int(i) for i in where[0])
        device, index = first[0], first[1:]
        devices = sorted({int(i) for i in where[:, 0]})
        return Mismatch(leaf, device, index, s[first], t[first], str(s.dtype),
                        int(bad.sum()), devices)
    return None


def format_value(value: Any) -> str:
    """A value as a user reads it: ``-0``, ``nan``, ``inf``, ``3.5``, ``7``, ``true``."""
    if value is None:
        return "?"
    array = np.asarray(value)
    if array.dtype == bool:
        return "true" if bool(array) else "false"
    if array.dtype.kind in "iu":
        return str(int(array))
    if array.dtype.kind == "c":
        return f"({format_value(array.real)}, {format_value(array.imag)})"
    number = float(array.astype(np.float64))
    if np.isnan(number):
        return "nan"
    if np.isinf(number):
        return "inf" if number > 0 else "-inf"
    if number == 0:
        return "-0" if np.signbit(number) else "0"
    if number == int(number) and abs(number) < 1e15:
        return str(int(number))
    if array.dtype in (np.float16, np.float32, np.float64):
        return np.format_float_positional(array[()], unique=True, trim="-")
    return f"{number:.6g}"


def format_array(array: np.ndarray, limit: int = 64) -> str:
    """A compact rendering of an array, nested like numpy's: ``[[6, 10], [14, 18]]``; at most
    ``limit`` values, then ``...``."""
    array = np.asarray(array)
    if array.ndim == 0:
        return format_value(array)
    budget = [limit]

    def render(a: np.ndarray) -> str:
        if a.ndim == 1:
            take = min(len(a), max(budget[0], 0))
            budget[0] -= take
            items = [format_value(v) for v in a[:take]]
            if take < len(a):
                items.append("...")
            return "[" + ", ".join(items) + "]"
        parts = []
        for row in a:
            if budget[0] <= 0:
                parts.append("...")
                break
            parts.append(render(row))
        return "[" + ", ".join(parts) + "]"

    text = render(array)
    if array.size > limit:
        text += f" ({array.size} values)"
    return text


def rounding_sized_mask(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Elementwise: do two float values differ by what a different summation order could
    cause? Both finite, and apart by at most 64 ulps of the larger magnitude (or of 1)."""
    source = np.asarray(source)
    target = np.asarray(target)
    if not is_float(source) or source.dtype.kind == "c":
        return np.zeros(source.shape, dtype=bool)
    wide_s = source.astype(np.float64)
    wide_t = target.astype(np.float64)
    eps = float(ml_dtypes.finfo(source.dtype).eps)
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.maximum(1.0, np.maximum(np.abs(wide_s), np.abs(wide_t)))
        close = np.abs(wide_s - wide_t) <= 64 * eps * scale
    return np.isfinite(wide_s) & np.isfinite(wide_t) & close


def is_rounding_sized(source_value: Any, target_value: Any) -> bool:
    """``rounding_sized_mask`` for one pair of values."""
    return bool(rounding_sized_mask(np.asarray(source_value), np.asarray(target_value)))
