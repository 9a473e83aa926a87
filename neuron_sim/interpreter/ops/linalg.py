"""Linear algebra: dot (general dimension numbers) and convolution.

Accumulation type: the result's element type, widened to f32 for bf16/f16/f8 results (the
product is rounded once to the narrow type at the end); integer operands are converted to the
integer result type first and accumulate with wrap-around. Float sums use numpy's matmul /
einsum, whose summation order is not specified: results agree with XLA within the float
tolerances documented in docs/run.md, not bit for bit.

Convolution follows XLA's definition: dim_labels name the batch/feature/spatial dims; the window
gives per spatial dim the size, stride, low/high padding (negative crops), lhs (base) dilation,
rhs (window) dilation and reversal; ``feature_group_count`` splits input features and output
features into groups; ``batch_group_count`` splits the input batch into groups that each produce
a slice of the output features (group g = output feature // (features / groups), input batch
index = g * (batch / groups) + output batch index).
"""

from __future__ import annotations

import math
import string

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.hlo.attributes import Window, WindowDim

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.ops.elementwise import element_type_of
from neuron_sim.interpreter.ops.reduce import _window_geometry
from neuron_sim.interpreter.ops.registry import implements


def accumulation_dtype(result_dtype: np.dtype) -> np.dtype:
    et = element_type_of(result_dtype)
    if et.is_float and et.bits < 32:
        return np.dtype(np.float32)
    if et.is_integral and et.bits < 8:
        raise Unimplemented("dot", "with sub-byte integer results")
    if not (et.is_float or et.is_integral or et.is_complex):
        raise Unimplemented("dot", f"with {et.spelling} results")
    return np.dtype(result_dtype)


@implements(Opcode.DOT)
def dot(ctx, lhs, rhs, *metadata):
    if metadata:
        raise Unimplemented("dot", "with sparse operands (sparsity=)")
    attrs = ctx.inst.attrs
    lhs_batch = list(attrs.get("lhs_batch_dims", ()))
    rhs_batch = list(attrs.get("rhs_batch_dims", ()))
    lhs_contract = list(attrs.get("lhs_contracting_dims", ()))
    rhs_contract = list(attrs.get("rhs_contracting_dims", ()))
    lhs_free = [d for d in range(lhs.ndim - 1) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rhs.ndim - 1) if d not in rhs_batch and d not in rhs_contract]
    work = accumulation_dtype(ctx.dtype)

    def sizes(x, dims):
        return [x.shape[1 + d] for d in dims]

    batch = sizes(lhs, lhs_batch)
    m, k, n = (math.prod(sizes(lhs, lhs_free)), math.prod(sizes(lhs, lhs_contract)),
               math.prod(sizes(rhs, rhs_free)))
    nb = math.prod(batch)
    left = lhs.transpose(0, *(1 + d for d in lhs_batch + lhs_free + lhs_contract)) \
        .reshape(lhs.shape[0], nb, m, k).astype(work, copy=False)
    right = rhs.transpose(0, *(1 + d for d in rhs_batch + rhs_contract + rhs_free)) \
        .reshape(rhs.shape[0], nb, k, n).astype(work, copy=False)
    product = np.matmul(left, right)
    rows = product.shape[0]
    return product.reshape(rows, *batch, *sizes(lhs, lhs_free), *sizes(rhs, rhs_free))


@implements(Opcode.CONVOLUTION)
def convolution(ctx, lhs, rhs):
    labels = ctx.attr("dim_labels")
    if labels is None:
        raise InterpreterError("convolution without dim_labels")
    feature_groups = int(ctx.attr("feature_group_count", 1) or 1)
    batch_groups = int(ctx.attr("batch_group_count", 1) or 1)
    spatial = len(labels.input_spatial)
    work = accumulation_dtype(ctx.dtype)
    x = lhs.transpose(0, 1 + labels.input_batch, 1 + labels.input_feature,
                      *(1 + d for d in labels.input_spatial)).astype(work)
    w = rhs.transpose(0, 1 + labels.kernel_output_feature, 1 + labels.kernel_input_feature,
                      *(1 + d for d in labels.kernel_spatial)).astype(work)
    kernel_sizes = w.shape[3:]
    window = ctx.attr("window")
    if window is None or not window.dims:
        window = Window(tuple(WindowDim(size=s) for s in kernel_sizes))
    if len(window.dims) != spatial or any(d.size != s for d, s in zip(window.dims, kernel_sizes)):
        raise InterpreterError("convolution window does not match the kernel's spatial dims")
    reversed_dims = [3 + i for i, d in enumerate(window.dims) if d.reversal]
    if reversed_dims:
        w = np.flip(w, axis=reversed_dims)
    geometry = _window_geometry(window, x.shape[3:])
    out_spatial = [g[0] for g in geometry]
    # One zero slot past the end of every spatial dim stands for padding and dilation holes.
    x = np.pad(x, [(0, 0)] * 3 + [(0, 1)] * spatial)
    index = []
    for d, (_, source, valid) in enumerate(geometry):
        shape = [1] * (2 * spatial)
        shape[d] = source.shape[0]
        shape[spatial + d] = source.shape[1]
        index.append(np.where(valid, source, x.shape[3 + d] - 1).reshape(shape))
    patches = x[(slice(None), slice(None), slice(None), *index)]  # (B, N, C, *O, *K)

    rows = max(patches.shape[0], w.shape[0])
    patches = np.broadcast_to(patches, (rows, *patches.shape[1:]))
    w = np.broadcast_to(w, (rows, *w.shape[1:]))
    out_letters = string.ascii_lowercase[:spatial]
    kernel_letters = string.ascii_lowercase[spatial:2 * spatial]
    batch, channels = patches.shape[1], patches.shape[2]
    outputs = w.shape[1]
    if batch_groups > 1:
        if batch % batch_groups or outputs % batch_groups:
            raise InterpreterError("batch_group_count must divide the batch and features")
        p = patches.reshape(rows, batch_groups, batch // batch_groups, channels,
                            *patches.shape[3:])
        k = w.reshape(rows, batch_groups, outputs // batch_groups, *w.shape[2:])
        spec = (f"ZGNC{out_letters}{kernel_letters},ZGOC{kernel_letters}"
                f"->ZNGO{out_letters}")
        result = np.einsum(spec, p, k, optimize=True)
        result = result.reshape(rows, batch // batch_groups, outputs, *out_spatial)
    else:
        if channels % feature_groups or outputs % feature_groups:
            raise InterpreterError("feature_group_count must divide the features")
        per_group = channels // feature_groups
        p = patches.reshape(rows, batch, feature_groups, per_group, *patches.shape[3:])
        k = w.reshape(rows, feature_groups, outputs // feature_groups, *w.shape[2:])
        spec = (f"ZNGC{out_letters}{kernel_letters},ZGOC{kernel_letters}"
                f"->ZNGO{out_letters}")
        result = np.einsum(spec, p, k, optimize=True)
        result = result.reshape(rows, batch, outputs, *out_spatial)
    order = []
    for position in range(spatial + 2):
        if position == labels.output_batch:
            order.append(1)
        elif position == labels.output_feature:
            order.append(2)
        else:
            order.append(3 + labels.output_spatial.index(position))
    return result.transpose(0, *order)
