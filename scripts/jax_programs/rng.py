"""JAX programs for ReplaceRng and InlineWeights (issue 12).

``lax.rng_uniform`` lowers to HLO ``rng(a, b), distribution=rng_uniform`` (f32 and s32 here);
XLA:CPU's RngExpander turns it into a ThreeFry computation when it compiles, so only the lowered
form holds an ``rng`` (JAX has no ``rng_normal`` entry point). The outputs do not depend on the
values drawn, only on their being in [a, b), so the interpreter (whose rng is not JAX's) must
match JAX exactly, and so must a module whose rng ReplaceRng folded to in-range constants.

``weights_mlp`` is a two-layer MLP whose weights are parameters 1-4: the module InlineWeights
folds them into (tests/data/passes/inline_weights/ holds them as .npy, equal to its arg1-arg4).
"""

from __future__ import annotations


def define(corpus) -> None:
    jnp, lax = corpus.jnp, corpus.lax

    def rng_uniform_f32(x):
        r = lax.rng_uniform(jnp.float32(-1.5), jnp.float32(2.0), x.shape)
        inside = (r >= -1.5) & (r < 2.0)
        return jnp.where(inside, x, -x), jnp.floor(r * 0.0) + x

    corpus.single(
        "rng_uniform_f32",
        "lax.rng_uniform f32 in [-1.5, 2): outputs depend only on the draws being in range",
        ["rng", "rng_uniform"],
        rng_uniform_f32,
        lambda r: [corpus.small(r, (4, 8))], kinds=("lowered",))

    def rng_uniform_s32(x):
        r = lax.rng_uniform(jnp.int32(3), jnp.int32(9), x.shape)
        inside = (r >= 3) & (r < 9)
        return jnp.where(inside, x, -x), (r - r) + x, jnp.sum(inside.astype(jnp.int32))

    corpus.single(
        "rng_uniform_s32",
        "lax.rng_uniform s32 in [3, 9): only range membership reaches the outputs",
        ["rng", "rng_uniform", "int"],
        rng_uniform_s32,
        lambda r: [corpus.ints(r, (16,))], kinds=("lowered",))

    def weights_mlp(x, w1, b1, w2, b2):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        return h @ w2 + b2

    corpus.single(
        "weights_mlp",
        "two-layer MLP with its weights as parameters 1-4 (InlineWeights folds them)",
        ["dot", "mlp", "weights"],
        weights_mlp,
        lambda r: [corpus.small(r, (4, 8)), corpus.small(r, (8, 16)), corpus.small(r, (16,)),
                   corpus.small(r, (16, 3)), corpus.small(r, (3,))])
