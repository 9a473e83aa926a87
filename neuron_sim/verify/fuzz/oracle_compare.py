"""Comparing the interpreter's outputs with XLA:CPU's, per device and per output.

The rule (docs/run.md, "XLA:CPU as an oracle"):

* integers, predicates, and every output of a module whose float results come from correctly
  rounded IEEE operations and data movement only: **exact** (bit for bit, any two NaNs equal:
  neither side promises a NaN's payload);
* a float output of a module with an operation whose order or algorithm is XLA's choice (a
  reduction, a dot or convolution, a reducing collective, a combining scatter, a
  transcendental function): **within tolerance**, ``|ours - xla| <= ulps * eps *
  max(1, scale)`` with ulps = TOLERANCE_ULPS (64) for 32- and 64-bit floats and
  NARROW_TOLERANCE_ULPS (1) for 16- and 8-bit ones (their few mantissa bits make an order's
  rounding differences rare and a 64-ulp bound meaningless), where eps is the type's machine epsilon and scale the largest magnitude of
  that output on that device (a sum's rounding error grows with its largest terms, not its
  result); a NaN or an infinity must be matched exactly, and -0 and +0 count as within the
  tolerance (the sign of a zero sum depends on the order too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.opcodes import Category, Opcode

TOLERANCE_ULPS = 64
NARROW_TOLERANCE_ULPS = 1

# Float results that are not one correctly rounded IEEE operation of the operands: the order
# of a reduction, the algorithm of a transcendental function are XLA's choice.
ORDER_OR_ALGORITHM = frozenset({
    Opcode.REDUCE, Opcode.REDUCE_WINDOW, Opcode.DOT, Opcode.CONVOLUTION, Opcode.ALL_REDUCE,
    Opcode.REDUCE_SCATTER, Opcode.SCATTER, Opcode.SELECT_AND_SCATTER,
    Opcode.EXP, Opcode.EXPM1, Opcode.LOG, Opcode.LOG1P, Opcode.LOGISTIC, Opcode.TANH,
    Opcode.SIN, Opcode.COS, Opcode.TAN, Opcode.ATAN2, Opcode.POWER, Opcode.RSQRT,
    Opcode.CBRT, Opcode.ERF, Opcode.ATAN, Opcode.ATANH, Opcode.TANH, Opcode.BATCH_NORM_GRAD,
    Opcode.BATCH_NORM_INFERENCE, Opcode.BATCH_NORM_TRAINING, Opcode.CHOLESKY, Opcode.FFT,
    Opcode.RAGGED_DOT, Opcode.TRIANGULAR_SOLVE, Opcode.ACOS, Opcode.ACOSH, Opcode.ASIN,
    Opcode.ASINH, Opcode.COSH, Opcode.SINH,
})


def inexact_opcodes(module: HloModule) -> set[Opcode]:
    """The module's opcodes whose float results may differ in rounding between two correct
    implementations (``ORDER_OR_ALGORITHM``), in any computation."""
    return {inst.opcode for comp in module.computations for inst in comp.instructions
            if inst.opcode in ORDER_OR_ALGORITHM}


@dataclass
class OutputMismatch:
    """The first differing element of one output on one device, and how many differ."""

    leaf: int
    device: int
    index: tuple[int, ...]
    ours: float | int | bool
    xla: float | int | bool
    dtype: str
    count: int
    devices: list[int] = field(default_factory=list)

    def summary(self) -> str:
        where = ",".join(str(i) for i in self.index)
        return (f"out{self.leaf}[{where}] on device {self.device}: ours {self.ours!r}, "
                f"XLA {self.xla!r} ({self.dtype}; {self.count} elements on "
                f"{len(self.devices)} devices differ)")


@dataclass
class Comparison:
    """``exact``: every output equal bit for bit (NaNs as NaNs); ``tolerance``: floats within
    the tolerance where it applies; ``differ``: ``mismatches`` (one per differing output)."""

    verdict: str
    mismatches: list[OutputMismatch]


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind in "fc" or (dtype.kind == "V" and _float_info(dtype) is not None)


def _float_info(dtype: np.dtype):
    try:
        return ml_dtypes.finfo(dtype)
    except (ValueError, TypeError):
        return None


def _as_wide(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":
        return array.astype(np.complex128)
    return array.astype(np.float64)


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(np.uint8).reshape(*array.shape, -1)


def compare_leaf(ours: np.ndarray, xla: np.ndarray, tolerant: bool) -> tuple[np.ndarray, bool]:
    """Per element whether the two differ (``[D, *shape]``), and whether any element needed
    the tolerance."""
    if ours.shape != xla.shape or ours.dtype != xla.dtype:
        raise ValueError(f"shapes differ: ours {ours.dtype}{list(ours.shape)}, "
                         f"XLA {xla.dtype}{list(xla.shape)}")
    if not _is_float(ours.dtype):
        bad = np.any(_bits(ours) != _bits(xla), axis=-1) if ours.dtype.kind == "V" \
            else ours != xla
        return bad, False
    a, b = _as_wide(ours), _as_wide(xla)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    equal = (a == b) | (nan_a & nan_b)
    if ours.dtype.kind != "c":  # signed zeros are different values
        equal &= ~((a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b)))
    if not tolerant or equal.all():
        return ~equal, False
    eps = float(_float_info(ours.dtype).eps)
    ulps = TOLERANCE_ULPS if ours.dtype.itemsize >= 4 else NARROW_TOLERANCE_ULPS
    finite = np.isfinite(a) & np.isfinite(b)
    axes = tuple(range(1, a.ndim))
    magnitude = np.where(finite, np.maximum(np.abs(a), np.abs(b)), 0)
    scale = np.maximum(1.0, magnitude.max(axis=axes, keepdims=True) if axes else magnitude)
    close = finite & (np.abs(a - b) <= ulps * eps * scale)
    within = equal | close
    return ~within, bool((close & ~equal).any())


def compare_outputs(module: HloModule, ours: list[np.ndarray], xla: list[np.ndarray]
                    ) -> Comparison:
    """Compare every output on every device by the module docstring's rule."""
    if len(ours) != len(xla):
        raise ValueError(f"ours has {len(ours)} outputs, XLA {len(xla)}")
    tolerant = bool(inexact_opcodes(module))
    mismatches: list[OutputMismatch] = []
    used_tolerance = False
    for j, (a, b) in enumerate(zip(ours, xla)):
        bad, used = compare_leaf(np.asarray(a), np.asarray(b), tolerant)
        used_tolerance |= used
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            devices = sorted({int(d) for d in np.nonzero(bad.reshape(len(bad), -1).any(1))[0]})
            mismatches.append(OutputMismatch(j, where[0], where[1:], _scalar(a[where]),
                                       _scalar(b[where]), str(a.dtype), int(bad.sum()),
                                       devices))
    if mismatches:
        return Comparison("differ", mismatches)
    return Comparison("tolerance" if used_tolerance else "exact", [])


def _scalar(value) -> float | int | bool:
    value = np.asarray(value)
    if value.dtype.kind == "b":
        return bool(value)
    if value.dtype.kind in "iu":
        return int(value)
    if value.dtype.kind == "c":
        return complex(value)
    return float(value.astype(np.float64))
