"""JAX programs holding the idioms of the closer's canonicalizers (issue 13).

Self-comparison through a nested jit, dynamic slices and dynamic-update-slices with constant
starts in range, negative and past the end, convert of a slice of a constant (f32 -> s32 with
NaN, infinities and out-of-range values; f32 -> bf16 with values that round and overflow), and
a dynamic slice whose result is reshaped to drop or add unit dimensions. Each is generated
lowered (unoptimized: the idioms survive) and compiled (XLA's own simplifier may already have
folded them).
"""

from __future__ import annotations

import numpy as np

NAN = float("nan")
INF = float("inf")


def define(corpus) -> None:
    jax, jnp, lax = corpus.jax, corpus.jnp, corpus.lax

    # JAX folds an integer compare of one tracer with itself while tracing; the f32 ones
    # survive in the nested jit's computation (a call in the lowered form).
    @jax.jit
    def self_compare_inner(x, i):
        return (x == x, x < x, x > x, x != x, x >= x,
                i == i, i < i, i != i, i >= i, i <= i, i > i)

    corpus.single(
        "canon_self_compare",
        "compare(x, x) through a nested jit for f32 (with NaN) and s32: EQ/LT/GT/NE/GE",
        ["compare", "self_compare", "nested_jit", "nan"],
        lambda x, i: self_compare_inner(x * 2.0, i + 1),
        lambda r: [np.array([1.0, NAN, -0.0, INF, -INF, 2.5], np.float32),
                   corpus.ints(r, (6,))])

    def constant_starts(x, u):
        return (lax.dynamic_slice(x, (1, 2), (3, 4)),
                lax.dynamic_slice(x, (5, 6), (3, 4)),
                lax.dynamic_slice(x, (100, 0), (2, 8)),
                lax.dynamic_slice_in_dim(x, -3, 2, axis=1),
                lax.dynamic_update_slice(x, u, (2, 3)),
                lax.dynamic_update_slice(x, u, (6, 7)),
                lax.dynamic_update_slice(x, u, (-1, 50)))

    corpus.single(
        "canon_dynamic_slice_constant_starts",
        "dynamic-slice and dynamic-update-slice with constant starts: in range, past the end "
        "(clamped to dim - size), negative",
        ["dynamic-slice", "dynamic-update-slice", "constant_starts", "clamp"],
        constant_starts,
        lambda r: [corpus.small(r, (6, 8)), corpus.small(r, (2, 3))])

    # JAX slices and converts a constant while tracing (bf16 and f16 included): the lowered
    # form keeps convert(constant) for s32 only; an optimization barrier or a nested jit keeps
    # convert(slice(constant)) until the barrier is peeled or the call inlined.
    @jax.jit
    def slice_and_convert(t):
        return t[1:9].astype(jnp.int32), t[9:16].astype(jnp.bfloat16)

    def convert_constant_slice(x):
        table = jnp.asarray(np.array(
            [1.5, -2.5, NAN, INF, -INF, 3.0e9, -3.0e9, 2147483520.0, -2147483648.0, 0.75,
             1.00390625, 1.01171875, 3.4e38, -3.4e38, 65504.0, 1.0e-40], np.float32))
        as_int = table[1:9].astype(jnp.int32)
        as_bf16 = table[9:16].astype(jnp.bfloat16)
        as_f16 = table[12:15].astype(jnp.float16)
        barrier = lax.optimization_barrier(table)
        return (as_int + x.astype(jnp.int32), as_bf16, as_f16,
                barrier[1:9].astype(jnp.int32), barrier[9:16].astype(jnp.bfloat16),
                *slice_and_convert(table))

    corpus.single(
        "canon_convert_constant_slice",
        "convert of a slice of a constant: f32 -> s32 (NaN, inf, out of range saturate), "
        "f32 -> bf16 and f16 (round to nearest even, overflow to inf, denormals)",
        ["convert", "slice", "constant", "nan"],
        convert_constant_slice,
        lambda r: [corpus.ints(r, (8,)).astype(np.float32)])

    def reshaped_dynamic_slice(x, y, i, j):
        row = lax.dynamic_slice(x, (i, 0), (1, 8)).reshape(8)
        col = lax.dynamic_slice(x, (0, j), (6, 1)).reshape(1, 6, 1)
        cube = lax.dynamic_slice(y, (i, 1, j), (1, 2, 1)).reshape(2)
        return row, col, cube

    corpus.single(
        "canon_reshaped_dynamic_slice",
        "reshape of a dynamic-slice that only drops or adds unit dimensions, traced starts "
        "(in range and clamped)",
        ["dynamic-slice", "reshape"],
        reshaped_dynamic_slice,
        lambda r: [corpus.small(r, (6, 8)), corpus.small(r, (4, 3, 5)),
                   np.int32(2), np.int32(9)])
