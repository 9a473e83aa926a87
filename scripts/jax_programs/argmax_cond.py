"""JAX programs holding the idioms of TransformVariadicReduce and HiloConditionalToSelect (issue 12).

argmax / argmin over every axis and flattened, of inputs with ties, NaN (first and later
positions), signed zeros and infinities, for f32 and s32 (JAX lowers each to a variadic
(value, index) reduce whose comparator breaks ties to the lower index and lets NaN win);
``lax.cond`` with predicates computed from the data (JAX converts the pred to an s32 branch
index of a two-branch conditional), ``lax.switch`` over three branches with indices that JAX
clamps, and in shard_map a cond whose branch holds a psum under a replicated predicate, and an
argmax per shard. Lowered and compiled forms: in the compiled ones XLA has put the reduces in
fusions.
"""

from __future__ import annotations

import numpy as np

NAN = float("nan")
INF = float("inf")


def _argmax_inputs(r):
    x = np.array([[1, 3, 3, 2, NAN, 0.5],
                  [NAN, 1, 5, 5, NAN, -1],
                  [-INF, -INF, -1, 0, -INF, -INF],
                  [0.0, -0.0, 0.0, -0.0, -0.0, 0.0]], np.float32)
    y = np.array(r.integers(-2, 3, size=(3, 4, 5)) / 2.0, np.float32)
    y[1, 2, 3] = NAN
    y[2, :, 0] = -0.0
    i = r.integers(-3, 3, size=(5, 3)).astype(np.int32)
    return [x, y, i]


def define(corpus) -> None:
    jnp, lax, P = corpus.jnp, corpus.lax, corpus.P

    def argmaxes(x, y, i):
        return (jnp.argmax(x, axis=0), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0),
                jnp.argmin(x, axis=1), jnp.argmax(x), jnp.argmin(x),
                jnp.argmax(y, axis=1), jnp.argmin(y, axis=2), jnp.argmax(y),
                jnp.argmin(i, axis=1), jnp.argmax(i), jnp.argmax(x[3]), jnp.argmin(x[2]))

    corpus.single(
        "argcond_argmax",
        "jnp.argmax / argmin over axis 0, 1, 2 and flattened, f32 with ties, NaN, -0 and -inf, "
        "and s32",
        ["argmax", "argmin", "variadic_reduce", "nan", "ties", "negative_zero"],
        argmaxes, _argmax_inputs)

    def conds(x):
        taken = lax.cond(jnp.sum(x) > 0, lambda v: (v * 2.0, jnp.max(v)),
                         lambda v: (v - 1.0, jnp.min(v)), x)
        skipped = lax.cond(x[0, 0] < -100.0, lambda v: v + 10.0, lambda v: v * v, x)
        return taken[0], taken[1], skipped

    corpus.single(
        "argcond_cond",
        "lax.cond with predicates from the data (one true, one false), a tuple-shaped result",
        ["cond", "conditional", "tuple"],
        conds, lambda r: [np.abs(corpus.small(r, (3, 4))) + 0.125])

    def switches(i, x):
        branches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: jnp.maximum(v, 0.5) - 2.0]
        return tuple(lax.switch(i[k], branches, x) for k in range(4))

    corpus.single(
        "argcond_switch",
        "lax.switch over three branches with indices 5 (clamped to 2), -3 (clamped to 0), 1, 2",
        ["switch", "conditional", "clamp"],
        switches, lambda r: [np.array([5, -3, 1, 2], np.int32), corpus.small(r, (2, 3))])

    def cond_psum(x):
        total = lax.psum(jnp.sum(x), "i")
        return lax.cond(total > 0, lambda v: lax.psum(v, "i") - v, lambda v: v * 2.0, x)

    corpus.spmd(
        "spmd_argcond_cond_psum",
        "lax.cond on a replicated predicate (a psum) whose true branch holds a psum",
        ["cond", "conditional", "psum", "collective_in_branch"], cond_psum,
        [np.abs(corpus.small(corpus.rng_for("acps"), (16, 3))) + 0.125],
        in_specs=P("i"), out_specs=P("i"), mesh=(8,), axes=("i",))

    def shard_argmax(x):
        return jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)

    xs = corpus.small(corpus.rng_for("acam"), (16, 5), lo=-3, hi=3)
    xs[3, 2] = NAN
    xs[9, :] = -0.0
    corpus.spmd(
        "spmd_argcond_argmax",
        "argmax / argmin of each device's shard in shard_map (ties, a NaN, a row of -0)",
        ["argmax", "argmin", "variadic_reduce", "nan"], shard_argmax, [xs],
        in_specs=P("i"), out_specs=(P("i"), P("i")), mesh=(8,), axes=("i",))
