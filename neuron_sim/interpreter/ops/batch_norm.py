"""The batch norms: batch-norm-training, batch-norm-inference and batch-norm-grad.

XLA's definitions (docs/semantics.md, "Batch normalization"): with ``c`` the index along
dimension ``feature_index`` and ``N`` the number of elements of one feature (the product of the
other dimensions),

- training: ``mean[c] = sum(x[..c..]) / N``, ``var[c] = sum((x - mean[c])^2) / N`` (the biased
  variance), ``y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + offset[c]``; the result
  is ``(y, mean, var)``;
- inference: the same ``y`` from the given ``mean`` and ``variance``;
- grad, from ``(x, scale, mean, var, dy)``: ``grad_offset[c] = sum(dy)``,
  ``grad_scale[c] = sum(dy * (x - mean)) / sqrt(var + epsilon)``, and
  ``grad_x = scale / sqrt(var + epsilon) * (dy - grad_offset / N
  - (x - mean) * sum(dy * (x - mean)) / (N * (var + epsilon)))``.

Every value is computed in float64 from the operands and rounded once to the result type: the
sums fold left in index order (``np.add.accumulate``, the same bits on every CPU), and sqrt and
division are IEEE operations. XLA:CPU rewrites the batch norms into elementwise ops and
reductions in the operand's own type (``BatchNormExpander``, which takes the variance as
``E[x^2] - E[x]^2``), so its results may differ from these in the last bits; docs/run.md gives
the tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.attributes import Raw

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.ops.registry import implements


def _attributes(ctx: Any) -> tuple[int, float]:
    """(feature_index, epsilon) of the instruction."""
    index = ctx.attr("feature_index")
    epsilon = ctx.attr("epsilon", 0.0)
    try:
        index = int(index.text if isinstance(index, Raw) else index)
        epsilon = float(epsilon.text if isinstance(epsilon, Raw) else epsilon)
    except (TypeError, ValueError):
        raise InterpreterError(f"{ctx.inst.opcode.spelling} needs an integer feature_index and "
                               f"a floating-point epsilon") from None
    return index, epsilon


class _Layout:
    """Moves the feature dimension of a batched operand (rows first) last and flattens the
    others: ``[rows, N, C]`` in float64, and back."""

    def __init__(self, batched: np.ndarray, feature_index: int) -> None:
        self.axis = feature_index + 1
        if not 1 <= self.axis < batched.ndim:
            raise InterpreterError(f"feature_index {feature_index} is not a dimension of the "
                                   f"operand {list(batched.shape[1:])}")
        moved = np.moveaxis(batched, self.axis, -1)
        self.moved_shape = moved.shape
        self.features = batched.shape[self.axis]
        self.count = int(np.prod(moved.shape[1:-1], dtype=np.int64))

    def flat(self, batched: np.ndarray) -> np.ndarray:
        """``[rows, N, C]`` float64 view of a batched operand of the operand's dims."""
        moved = np.moveaxis(batched, self.axis, -1)
        return moved.reshape(moved.shape[0], self.count, self.features).astype(np.float64)

    def unflat(self, values: np.ndarray) -> np.ndarray:
        """The inverse of ``flat`` for a ``[rows, N, C]`` result."""
        shape = (values.shape[0],) + self.moved_shape[1:]
        return np.moveaxis(values.reshape(shape), -1, self.axis)


def _feature(batched: np.ndarray) -> np.ndarray:
    """A batched per-feature operand ``[rows, C]`` as ``[rows, 1, C]`` float64."""
    return batched.astype(np.float64)[:, None, :]


def _sum(values: np.ndarray) -> np.ndarray:
    """Sum over the N axis of ``[rows, N, C]``, folded left in index order: ``[rows, 1, C]``."""
    if values.shape[1] == 0:
        return np.zeros((values.shape[0], 1, values.shape[2]))
    return np.add.accumulate(values, axis=1)[:, -1:, :]


def _normalize(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray,
               var: np.ndarray, epsilon: float) -> np.ndarray:
    return (x - mean) / np.sqrt(var + epsilon) * scale + offset


@implements(Opcode.BATCH_NORM_TRAINING)
def batch_norm_training(ctx: Any, x: np.ndarray, scale: np.ndarray, offset: np.ndarray
                        ) -> list[np.ndarray]:
    index, epsilon = _attributes(ctx)
    layout = _Layout(x, index)
    flat = layout.flat(x)
    count = max(layout.count, 1)
    mean = _sum(flat) / count
    var = _sum((flat - mean) ** 2) / count
    y = _normalize(flat, _feature(scale), _feature(offset), mean, var, epsilon)
    dtype = x.dtype
    return [layout.unflat(y).astype(dtype), mean[:, 0, :].astype(dtype),
            var[:, 0, :].astype(dtype)]


@implements(Opcode.BATCH_NORM_INFERENCE)
def batch_norm_inference(ctx: Any, x: np.ndarray, scale: np.ndarray, offset: np.ndarray,
                         mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    index, epsilon = _attributes(ctx)
    layout = _Layout(x, index)
    y = _normalize(layout.flat(x), _feature(scale), _feature(offset), _feature(mean),
                   _feature(variance), epsilon)
    return layout.unflat(y).astype(x.dtype)


@implements(Opcode.BATCH_NORM_GRAD)
def batch_norm_grad(ctx: Any, x: np.ndarray, scale: np.ndarray, mean: np.ndarray,
                    variance: np.ndarray, grad_output: np.ndarray) -> list[np.ndarray]:
    index, epsilon = _attributes(ctx)
    layout = _Layout(x, index)
    count = max(layout.count, 1)
    centered = layout.flat(x) - _feature(mean)
    dy = layout.flat(grad_output)
    var_eps = _feature(variance) + epsilon
    root = np.sqrt(var_eps)
    grad_offset = _sum(dy)
    projection = _sum(dy * centered)
    grad_scale = projection / root
    grad_x = _feature(scale) / root * (dy - grad_offset / count
                                       - centered * projection / (count * var_eps))
    dtype = x.dtype
    return [layout.unflat(grad_x).astype(dtype), grad_scale[:, 0, :].astype(dtype),
            grad_offset[:, 0, :].astype(dtype)]
